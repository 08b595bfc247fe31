"""The workflow end to end: a small config in a temporary directory, lint, no-op reruns."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import CONTRACT_COLUMNS, REAL, REPO, snakemake_command

from roofline.tables.files import read_table

pytestmark = pytest.mark.slow


def _run(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        snakemake_command(workdir, "--cores", "2", *args, configfile=None),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return result


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A finished run over the bundled what-if table, one real report and one broken file."""
    work = tmp_path_factory.mktemp("run")
    (work / "inputs").mkdir()
    shutil.copy(REPO / "data" / "examples" / "textbook.yaml", work / "inputs" / "textbook.yaml")
    (work / "inputs" / "broken.ncu-rep").write_bytes(b"hand-made: not a report\n" * 100)
    real = REAL / "h100pcie-rmsnorm-full-ncu2025.1" / "2025-04-21_v1.ncu-rep"
    apps = f"apps:\n  rmsnorm: {{report: {real}}}\n" if real.exists() else "apps: {}\n"
    series = "series: {pair: [textbook, rmsnorm]}\n" if real.exists() else ""
    (work / "config.yaml").write_text("# hand-made test config\ninputs: [inputs/*]\n" + apps + series)
    result = _run(work, "--configfile", str(work / "config.yaml"))
    (work / "snakemake-output.txt").write_text(result.stdout + result.stderr)
    return work


def test_workflow_writes_the_contract_outputs(workdir):
    assert (workdir / "reports" / "summary.html").stat().st_size > 100_000
    classified = read_table(workdir / "data" / "classified" / "textbook.parquet", "classified")
    extra = ("bound", "roof_pct", "roof_flops", "roof_dram_bw", "peak_dram_bw", "ceiling_source", "convention")
    for column in (*CONTRACT_COLUMNS, *extra):
        assert column in classified.columns
    seed = classified.set_index("kernel").loc["seed_normalization"]
    assert seed["bound"] == "memory:dram" and seed["roof_pct"] == pytest.approx(100 * 30 / 36)
    html = (workdir / "reports" / "summary.html").read_text()
    # offline: no CDN; the scripts loaded from files are the shared Vega bundle and tonight's block
    # (written by the tracking stage), both beside the pages
    assert "cdn.jsdelivr" not in html
    scripts = re.findall(r'<script src="([^"]*)"', html)
    assert scripts == ["assets/vega-bundle.js", "tonight.js"]
    assert all((workdir / "reports" / s).is_file() for s in scripts)


def test_a_local_run_schedules_without_snakemakes_default_rate_limiter(workdir):
    # roofline/jobs/rate_limit.py, called from the workflow's onstart handler (tests/jobs/test_rate_limit.py
    # checks what it does to Snakemake's scheduler)
    output = (workdir / "snakemake-output.txt").read_text()
    assert "roofline: Snakemake's default job rate limit lifted for this local run" in output


def test_broken_input_is_reported_and_does_not_stop_the_others(workdir):
    diagnostics = read_table(workdir / "data" / "diagnostics" / "broken.parse.parquet", "diagnostics")
    assert diagnostics["severity"].tolist() == ["error"]
    assert "broken.ncu-rep" in diagnostics["message"].iat[0]
    assert "broken.ncu-rep" in (workdir / "reports" / "summary.html").read_text()
    assert (workdir / "data" / "classified" / "textbook.parquet").exists()


def test_real_report_flows_through_all_stages(workdir):
    path = workdir / "data" / "classified" / "rmsnorm.parquet"
    if not path.exists():
        pytest.skip("real fixtures absent")
    classified = read_table(path, "classified")
    assert len(classified) == 3
    assert (classified["bound"] == "memory:dram").all()
    assert set(classified["ceiling_source"]) == {"report"}


def test_a_configured_series_gets_its_compare_page_beside_the_shared_vega_script(workdir):
    if not (workdir / "data" / "counters" / "rmsnorm.parquet").exists():
        pytest.skip("the real rmsnorm report (../shared/fixtures/real) is absent: no series configured")
    page = (workdir / "reports" / "compare" / "pair.html").read_text()
    assert "textbook" in page and "rmsnorm" in page
    assert (workdir / "reports" / "assets" / "vega-bundle.js").stat().st_size > 100_000
    assert "compare/pair.html" in (workdir / "reports" / "summary.html").read_text()


def test_second_run_and_touch_run_no_job(workdir):
    result = _run(workdir, "--configfile", str(workdir / "config.yaml"))
    assert "Nothing to be done" in result.stdout + result.stderr
    (workdir / "inputs" / "textbook.yaml").touch()
    result = _run(workdir, "--configfile", str(workdir / "config.yaml"), "-n")
    assert "Nothing to be done" in result.stdout + result.stderr


def test_editing_a_stage_reruns_it_and_its_dependents_only(workdir):
    result = _run(workdir, "--configfile", str(workdir / "config.yaml"), "-n", "--list-changes", "code")
    assert result.returncode == 0
    dry = _run(workdir, "--configfile", str(workdir / "config.yaml"), "-n", "--forcerun", "classify_app")
    text = dry.stdout + dry.stderr
    assert "rule classify_app:" in text and "rule report:" in text
    assert "rule parse:" not in text and "checkpoint ceilings:" not in text


def test_lint_is_clean():
    result = subprocess.run(snakemake_command(REPO, "--lint", configfile=None), capture_output=True, text=True,
                            cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def test_snakemake_provenance_report(workdir):
    _run(workdir, "--configfile", str(workdir / "config.yaml"), "--report", "smk-report.zip")
    assert (workdir / "smk-report.zip").stat().st_size > 100_000


def test_no_command_argument_grows_past_what_linux_takes_at_many_apps(tmp_path):
    """Linux refuses a command with one argument over 128 KiB (MAX_ARG_STRLEN): at a thousand apps the
    config as JSON (346 KB) was such an argument, and the tracking job could not start. With 400 apps
    of long names the config and the sources would each be a 70 KB argument; every argument stays
    under 32 KB (a quarter of the limit), the sources going through a file the report and status
    jobs read back."""
    inputs = tmp_path / "nightly-inputs-of-the-whole-training-step-profiled-with-ncu-set-roofline"
    inputs.mkdir()
    for i in range(400):
        name = f"app_{i:03d}_transformer_block_fused_attention_v2.yaml"
        shutil.copy(REPO / "data" / "examples" / "textbook.yaml", inputs / name)
    (tmp_path / "config.yaml").write_text(f"# hand-made test config\ninputs: ['{inputs.name}/*']\n")
    dry = _run(tmp_path, "--configfile", str(tmp_path / "config.yaml"), "-n", "-p", "--forceall")
    commands = [line.split("roofline.jobs ", 1)[1] for line in dry.stdout.splitlines() if "roofline.jobs " in line]
    stages = {command.split()[0] for command in commands}
    assert {"parse", "ceilings", "classify_app", "report", "track_history", "trends_page", "status"} <= stages, stages
    import shlex

    longest = max(len(argument) for command in commands for argument in shlex.split(command))
    assert longest <= 32_000, longest
    track = next(c for c in commands if c.startswith("track_history "))
    assert "--config-hash=" in track and "--config-json" not in track
    report = next(c for c in commands if c.startswith("report "))
    [sources] = [a for a in shlex.split(report) if a.startswith("--sources=")]
    assert sources.startswith("--sources=@.snakemake/roofline-arguments/")
    import json

    written = json.loads((tmp_path / sources.removeprefix("--sources=@")).read_text())
    assert len(written) == 400 and all(path.startswith(inputs.name) for path in written.values())


def test_the_configured_kernels_drawn_first_reach_the_report_job(tmp_path):
    """``report.top_kernels`` is the report job's ``--top-kernels`` (its charts, which every page draws)."""
    shutil.copy(REPO / "data" / "examples" / "textbook.yaml", tmp_path / "textbook.yaml")
    (tmp_path / "config.yaml").write_text("# hand-made test config\ninputs: [textbook.yaml]\n"
                                          "report: {top_kernels: 7}\n")
    dry = _run(tmp_path, "--configfile", str(tmp_path / "config.yaml"), "-n", "-p", "--forceall",
               "reports/summary.html")
    [command] = [line for line in dry.stdout.splitlines() if "roofline.jobs report " in line]
    assert " --top-kernels=7 " in command


_NODE = re.compile(r'^\s*(\d+)\[label = "([^"]+)"')
_EDGE = re.compile(r"^\s*(\d+) -> (\d+)")


@pytest.mark.parametrize("apps, after", [(400, False), (401, True)])
def test_the_tracking_judges_beside_the_report_up_to_400_apps_and_after_it_beyond(tmp_path, apps, after):
    """The judging (track_history) needs every app's tables, not the report: beside it, the night's
    findings come sooner. Beyond 400 apps it waits for the report, whose memory would otherwise add
    to its own (at 1,000 apps ~0.8 and ~1.5 GB: over 2 GB together). The trends page waits for both."""
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for i in range(apps):
        shutil.copy(REPO / "data" / "examples" / "textbook.yaml", inputs / f"app_{i:03d}.yaml")
    (tmp_path / "config.yaml").write_text("# hand-made test config\ninputs: [inputs/*]\n")
    graph = _run(tmp_path, "--configfile", str(tmp_path / "config.yaml"), "--rulegraph").stdout
    names = dict(m.groups() for line in graph.splitlines() if (m := _NODE.match(line)))
    edges = {(names[a], names[b]) for line in graph.splitlines() if (m := _EDGE.match(line)) for a, b in [m.groups()]}
    assert ("classify_app", "track_history") in edges and ("parse", "track_history") in edges
    assert {("report", "trends_page"), ("track_history", "trends_page")} <= edges
    assert (("report", "track_history") in edges) is after
