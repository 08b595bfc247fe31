"""The ``roofline`` command on the bundled what-if example and on real reports: formats that parse
back to the analysis' own numbers, sorting and filtering, ``--device`` for exports that do not name
their GPU, the ceilings with their sources, and the exit status (0, 1, 2) with one line per problem."""

import csv
import io
import json
import math
import re
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO, get, nersc_sm_clock, real_fixture, report_metrics

from roofline import api, cli
from roofline.ceilings.catalog import CATALOG_PATH

TEXTBOOK = REPO / "data" / "examples" / "textbook.yaml"
A100_80 = "NVIDIA A100-SXM4-80GB"


def nersc_csv() -> Path:
    """The long NERSC-style export that records no device (PROVENANCE: 'Device is NOT recorded')."""
    return real_fixture("a100-dropout-nersc-metrics-csv") / "nsight162.csv"


def silu_report() -> Path:
    return next(real_fixture("a100sxm-silu-full-ncu2025.1").glob("*.ncu-rep"))


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def catalog_entry(device: str) -> dict:
    """The catalog's entry of ``device``, read from the YAML directly (not through roofline.ceilings.catalog)."""
    gpus = yaml.safe_load(CATALOG_PATH.read_text())["gpus"]
    return next(e for e in gpus.values() if device in e["names"])


def test_show_textbook(capsys):
    code, out, _ = run_cli(capsys, "show", TEXTBOOK)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["kernel", "app", "device", "bound", "%", "roof", "(of)", "of", "run", "saving",
                                "AI", "[FLOP/B]", "performance"]
    body = "\n".join(lines[2:])
    # the % says which roof it is of: one meaning, labelled
    assert "seed_normalization" in body and "83.3 % (dram)" in body and "12 (dram)" in body
    assert "120 TFLOP/s predicted" in body  # what-if kernel without duration
    assert lines[2].startswith("seed_normalization")  # highest priority first


def test_show_real_report(capsys):
    code, out, _ = run_cli(capsys, "show", silu_report())
    assert code == 0
    assert "silu_kernel" in out and "NVIDIA A100-SXM4-40GB" in out and "memory:dram" in out


def test_several_apps_are_ranked_over_the_run_as_on_the_summary(capsys, tmp_path):
    """Reports of three apps (H100 PCIe, V100, GTX 1650): a tiny app's kernels are ~100 % of their own
    app (time_share) but ~0.05 % of the run; show ranks them as the summary's At a glance does, by the
    GPU time to gain over the whole run, and its run shares add up to 1."""
    import html

    folders = ("h100pcie-rmsnorm-full-ncu2025.1", "v100-kripke-full-ncu2023.3",
               "gtx1650-heatsim-stencil-full-ncu2021.3")
    reports = [next(real_fixture(f).glob("*.ncu-rep")) for f in folders]
    code, out, _ = run_cli(capsys, "show", *reports, "--format", "json")
    assert code == 0
    shown = pd.DataFrame(json.loads(out))
    assert shown["app"].nunique() == 3 and shown["time_share"].sum() == pytest.approx(3)
    assert shown["run_share"].sum() == pytest.approx(1)
    np.testing.assert_allclose(shown["run_priority"], shown["saving_s"] / shown["duration_s"].sum())
    assert np.all(np.diff(shown["run_priority"]) <= 0)
    # the figures are the summary page's: its At a glance lists the same kernels in the same order
    code, _, _ = run_cli(capsys, "report", *reports, "-o", tmp_path / "summary.html")
    assert code == 0
    page = (tmp_path / "summary.html").read_text()
    glance = page[page.index('<section id="glance">'):page.index("</section>", page.index('<section id="glance">'))]
    order = [html.unescape(t) for t in re.findall(r'<span class="kname" title="([^"]*)"', glance)]
    assert order == list(shown["kernel"]) and len(order) == 5
    assert shown["priority"].idxmax() != 0  # per app, a 4 µs kernel of the GTX 1650 app would come first
    table, _ = run_cli(capsys, "show", *reports)[1:]
    assert "of run" in table.splitlines()[0] and "saving" in table.splitlines()[0]


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_machine_formats_parse_back_to_the_analysis(capsys, fmt):
    """csv and json carry the same rows, in the same order, with the full-precision numbers of
    roofline.analyse (not the table's rounded strings); missing values stay missing."""
    code, out, _ = run_cli(capsys, "show", TEXTBOOK, "--format", fmt)
    assert code == 0
    back = pd.read_csv(io.StringIO(out), keep_default_na=False, na_values=[""]) if fmt == "csv" else \
        pd.DataFrame(json.loads(out))
    expected = cli.select_kernels(api.analyse([TEXTBOOK]).kernels)
    assert list(back.columns) == cli.KERNEL_FIELDS
    assert len(back) == len(expected) > 5
    assert list(back["rank"]) == list(range(1, len(back) + 1))
    for column in ("kernel", "app", "device", "bound", "compute_class", "binding_level"):
        assert list(back[column].fillna("")) == list(expected[column].fillna("").astype(str)), column
    for column in ("roof_pct", "time_share", "duration_s", "ai_dram", "performance", "roof_flops", "priority"):
        got, want = back[column].to_numpy(dtype=float), expected[column].to_numpy(dtype=float)
        np.testing.assert_array_equal(got, want, err_msg=column)  # exact: the shortest round-trip repr
    assert back["duration_s"].isna().any()  # the what-if kernels without a measured time


def test_markdown_and_csv_shortcut(capsys):
    code, out, _ = run_cli(capsys, "show", TEXTBOOK, "--format", "markdown", "--top", "3")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("| kernel | app | device | bound | % roof (of) |") and len(lines) == 2 + 3
    assert lines[1].startswith("| --- | --- | --- | --- | ---: |")
    _, shortcut, _ = run_cli(capsys, "show", TEXTBOOK, "--csv")
    _, explicit, _ = run_cli(capsys, "show", TEXTBOOK, "--format", "csv")
    assert shortcut == explicit


def test_sort_filter_top(capsys):
    def rows(*extra):
        code, out, _ = run_cli(capsys, "show", TEXTBOOK, "--format", "json", *extra)
        assert code == 0
        return pd.DataFrame(json.loads(out))

    by_time = rows("--sort", "time")["duration_s"].to_numpy(dtype=float)
    measured = by_time[~np.isnan(by_time)]
    assert np.all(np.diff(measured) <= 0) and np.isnan(by_time[len(measured):]).all()  # missing last
    by_roof = rows("--sort", "roof")["roof_pct"].to_numpy(dtype=float)
    judged = by_roof[~np.isnan(by_roof)]
    assert len(judged) > 2 and np.all(np.diff(judged) >= 0)  # furthest from its roof first
    seeds = rows("--filter", "^seed_(tiled|bandwidth)")
    assert len(seeds) == 3 and all(k.startswith(("seed_tiled", "seed_bandwidth")) for k in seeds["kernel"])
    top = rows("--sort", "time", "--top", "2")
    assert list(top["rank"]) == [1, 2] and list(top["duration_s"]) == list(measured[:2])
    code, out, err = run_cli(capsys, "show", TEXTBOOK, "--format", "json", "--filter", "no-such-kernel")
    assert code == 0 and json.loads(out) == [] and "no kernel name matches --filter 'no-such-kernel'" in err
    everything = rows("--all-columns")
    assert {"flop_fp32", "dram_bytes", "roof_dram_bw", "headroom"} <= set(everything.columns)


def test_device_names_the_gpu_of_an_export_that_records_none(capsys):
    """The NERSC export names no GPU: without --device its kernel is `unknown` (and stderr says how
    to fix that); with --device it gets the catalog roofs, and the numbers check out against the
    raw CSV (read with the csv module) and the catalog YAML."""
    path = nersc_csv()
    code, out, err = run_cli(capsys, "show", path, "--format", "json")
    (row,) = json.loads(out)
    assert code == 0 and row["bound"] == "unknown" and row["device"] == "unnamed GPU" and row["roof_pct"] is None
    assert "--device NAME" in err and str(path) in err and "Traceback" not in err

    code, out, err = run_cli(capsys, "show", path, "--format", "json", "--device", A100_80)
    (row,) = json.loads(out)
    assert code == 0 and err == ""
    assert row["device"] == A100_80 and row["bound"] == "memory:dram" and row["ceiling_source"] == "datasheet"
    entry = catalog_entry(A100_80)
    # the dominant class of this fp64 kernel; the catalog's 1410 MHz figure held at the launches' clock
    held = entry["compute"]["fp64"]["value"] / entry["boost_clock_hz"] * nersc_sm_clock(path)
    assert math.isclose(row["roof_flops"], held, rel_tol=1e-12)
    totals = {"dram__bytes.sum": 0.0, "gpu__time_duration.sum": 0.0}
    launches = set()
    with path.open(newline="") as f:
        for rec in csv.DictReader(f):
            if rec["Metric Name"] in totals:
                scale = {"byte": 1.0, "nsecond": 1e-9}[rec["Metric Unit"]]
                totals[rec["Metric Name"]] += float(rec["Metric Value"].replace(",", "")) * scale
                launches.add(rec["ID"])
    assert row["launches"] == len(launches) == 162
    assert math.isclose(row["duration_s"], totals["gpu__time_duration.sum"], rel_tol=1e-12)
    bandwidth = totals["dram__bytes.sum"] / totals["gpu__time_duration.sum"]
    assert math.isclose(row["roof_pct"], 100 * bandwidth / entry["memory"]["dram"]["value"], rel_tol=1e-9)


def test_ceilings_command_prints_every_source(capsys):
    """`roofline ceilings` on a real report: the report's own peaks and the datasheet's, each with its
    source, clock, citation, exactly one selected per roof; the datasheet values are the catalog's."""
    report = silu_report()
    code, out, _ = run_cli(capsys, "ceilings", report, "--format", "csv")
    assert code == 0
    table = pd.read_csv(io.StringIO(out), keep_default_na=False, na_values=[""])
    assert list(table.columns) == cli.CEILING_FIELDS
    assert set(table["source"]) == {"report", "datasheet"} and set(table["device"]) == {"NVIDIA A100-SXM4-40GB"}
    assert (table.groupby(["device", "kind", "name"])["selected"].sum() == 1).all()
    entry = catalog_entry("NVIDIA A100-SXM4-40GB")
    sheet = table[table["source"] == "datasheet"].set_index("name")
    # every compute roof at the report's own SM clock: the catalog's per-clock rate x that clock
    clock = statistics.median(get(m, "sm__cycles_elapsed.avg.per_second") for m in report_metrics(report))
    assert math.isclose(sheet.at["fp32", "per_clock"], entry["compute"]["fp32"]["value"] / entry["boost_clock_hz"],
                        rel_tol=1e-12)
    assert math.isclose(sheet.at["fp32", "value"], sheet.at["fp32", "per_clock"] * clock, rel_tol=1e-12)
    assert table.loc[table["kind"] == "compute", "clock_hz"].to_numpy() == pytest.approx(clock, rel=1e-12)
    assert "19.5 TFLOP/s at 1410 MHz" in sheet.at["fp32", "citation"]
    assert sheet.at["dram", "value"] == entry["memory"]["dram"]["value"] and sheet.at["dram", "unit"] == "B/s"
    measured = table[table["source"] == "report"]
    assert (measured["launches"] == 3).all() and measured["citation"].str.len().gt(0).all()
    # the report's DRAM peak: ncu's own per-launch peak x the DRAM clock (read with ncu_report, not
    # the package), the median of the 3 launches; the classified kernel was judged against it
    oracle = [get(m, "dram__bytes.sum.peak_sustained") * get(m, "dram__cycles_elapsed.avg.per_second")
              for m in report_metrics(report)]
    dram = measured.set_index("name").at["dram", "value"]
    assert math.isclose(dram, statistics.median(oracle), rel_tol=1e-12)
    assert dram == api.analyse([report]).kernels["roof_dram_bw"].iat[0]

    code, out, _ = run_cli(capsys, "ceilings", report, "--selected", "--format", "json")
    selected = pd.DataFrame(json.loads(out))
    assert code == 0 and selected["selected"].all() and len(selected) == table["selected"].sum()
    code, out, _ = run_cli(capsys, "ceilings", report)
    assert code == 0 and out.splitlines()[0].split()[:4] == ["device", "kind", "name", "value"]


def test_ceilings_of_a_device_named_on_the_command_line(capsys):
    code, out, _ = run_cli(capsys, "ceilings", nersc_csv(), "--device", A100_80, "--format", "json")
    rows = {(r["kind"], r["name"]): r for r in json.loads(out)}
    entry, clock = catalog_entry(A100_80), nersc_sm_clock(nersc_csv())
    assert code == 0 and rows[("memory", "dram")]["value"] == entry["memory"]["dram"]["value"]
    tensor = entry["compute"]["tensor_fp16"]["value"]
    assert math.isclose(rows[("compute", "tensor_fp16")]["value"], tensor / entry["boost_clock_hz"] * clock,
                        rel_tol=1e-12)
    assert all(r["source"] == "datasheet" for r in rows.values())
    assert all(r["clock_hz"] == pytest.approx(clock, rel=1e-12) for (kind, _), r in rows.items() if kind == "compute")
    assert rows[("memory", "dram")]["clock_hz"] is None  # DRAM keeps its own clock


def test_bad_file_is_reported_and_others_still_shown(capsys, tmp_path):
    bad = tmp_path / "broken.ncu-rep"
    bad.write_bytes(b"not a report")
    code, out, err = run_cli(capsys, "show", bad, TEXTBOOK, tmp_path / "missing.csv")
    assert code == 1
    errors = [line for line in err.splitlines() if line.startswith("roofline: ")]
    assert len(errors) == 2
    assert str(bad) in errors[0] and "missing.csv" in errors[1]
    assert "seed_normalization" in out


def test_a_run_whose_every_input_is_refused_says_so_without_a_traceback(capsys, tmp_path):
    # hand-made: the only input is no report; the text table has no row to show
    bad = tmp_path / "broken.ncu-rep"
    bad.write_bytes(b"not a report")
    code, out, err = run_cli(capsys, "show", bad)
    assert code == 1 and out == ""
    assert [line for line in err.splitlines() if line.startswith("roofline: ")] and str(bad) in err
    assert "Traceback" not in err


def test_usage_errors_exit_2(capsys, tmp_path):
    for argv in (["show"], ["show", str(TEXTBOOK), "--format", "xml"], ["show", str(TEXTBOOK), "--top", "0"],
                 ["show", str(TEXTBOOK), "--filter", "("], ["show", str(TEXTBOOK), "--policy", "report,guess"],
                 ["frobnicate", str(TEXTBOOK)]):
        with pytest.raises(SystemExit) as exit_:
            cli.main(argv)
        assert exit_.value.code == 2, argv
        assert "usage: roofline" in capsys.readouterr().err
    code, out, err = run_cli(capsys, "show", TEXTBOOK, "--catalog", tmp_path / "none.yaml")
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "none.yaml" in err and "catalog" in err


def test_report_writes_summary_and_app_pages(tmp_path):
    out = tmp_path / "reports" / "summary.html"
    assert cli.main(["report", str(TEXTBOOK), "-o", str(out), "--title", "Textbook"]) == 0
    page = out.read_text()
    assert "<title>Textbook</title>" in page and "seed_a100_fp16_gemm" in page
    assert (tmp_path / "reports" / "apps" / "textbook.html").exists()


def test_report_to_an_impossible_place_is_one_line(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, err = run_cli(capsys, "report", TEXTBOOK, "-o", blocker / "summary.html")
    assert code == 2 and len(err.splitlines()) == 1 and "cannot write" in err and "choose another" in err


def test_app_names_unique():
    taken: set[str] = set()
    names = []
    for path in ["a/profile.ncu-rep", "b/profile.ncu-rep", "c/x.yaml"]:
        names.append(cli.app_name(Path(path), taken))
        taken.add(names[-1])
    assert names == ["profile", "profile-2", "x"]


def test_app_names_are_the_workflows(tmp_path, capsys):
    """Any file name gives the app name the workflow gives it (roofline.config.inputs.app_name); a file of no
    known type gets the workflow's message, and the report names each app's original file."""
    odd = tmp_path / "my run (1).yaml"
    odd.write_bytes(TEXTBOOK.read_bytes())
    notes = tmp_path / "notes.txt"
    notes.write_text("hand-made notes\n")
    assert cli.app_names([str(odd), "a/ünï.csv.gz", "b/ünï.csv"]) == ["my_run_1", "uni", "uni-2"]
    out = tmp_path / "reports" / "summary.html"
    assert cli.main(["report", str(odd), str(notes), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"roofline: {notes}: unknown file type '.txt'" in err and "rename it" in err
    assert "(my run (1).yaml)" in out.read_text()
    assert f"input: <code>{odd}</code>" in (tmp_path / "reports" / "apps" / "my_run_1.html").read_text()


def test_python_m_roofline(tmp_path):
    """`python -m roofline` is the command: --help documents the exit status; a bad input is one
    line on stderr, never a traceback, and the exit status is 1 while the good input is shown."""
    helped = subprocess.run([sys.executable, "-m", "roofline", "show", "--help"], capture_output=True, text=True)
    assert helped.returncode == 0
    for text in ("exit status:", "--device NAME", "--format {table,csv,json,markdown}", "--sort", "--filter REGEX",
                 "75"):
        assert text in helped.stdout, text
    bad = tmp_path / "cut.ncu-rep"
    bad.write_bytes(b"\x00" * 64)
    ran = subprocess.run([sys.executable, "-m", "roofline", "show", str(bad), str(TEXTBOOK), "--format", "csv"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert ran.returncode == 1
    assert "Traceback" not in ran.stderr and ran.stderr.count("\n") == 1 and str(bad) in ran.stderr
    assert len(pd.read_csv(io.StringIO(ran.stdout))) == len(api.analyse([TEXTBOOK]).kernels)
    bare = subprocess.run([sys.executable, "-m", "roofline"], capture_output=True, text=True)
    assert bare.returncode == 2 and "usage: roofline" in bare.stderr


def test_every_refused_input_is_one_line_naming_it(tmp_path):
    """The bad-input corpus (tests/bad_inputs.py) through the command in one run: each input the
    workflow refuses is one stderr line naming the file with the corpus' message (the fix), never a
    traceback; the good input beside them is still shown, and the exit status is 1."""
    from _pytest.outcomes import Skipped
    from bad_inputs import INPUT_CASES

    built = {}
    for bad in (c for c in INPUT_CASES if c.behaviour == "refused"):
        try:
            built[str(bad.build(tmp_path / bad.id))] = bad
        except Skipped:
            continue
    assert len(built) >= 20
    ran = subprocess.run([sys.executable, "-m", "roofline", "show", *built, str(TEXTBOOK), "--format", "json"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert ran.returncode == 1 and "Traceback" not in ran.stderr
    assert len(json.loads(ran.stdout)) == len(api.analyse([TEXTBOOK]).kernels)
    lines = ran.stderr.splitlines()
    assert all(line.startswith("roofline: ") for line in lines), ran.stderr
    errors = [line for line in lines if not line.startswith(("roofline: warning", "roofline: WARNING"))]
    assert len(errors) == len(built), "\n".join(errors)
    for line, (path, bad) in zip(errors, built.items()):
        assert line.startswith(f"roofline: {path}") or path in line, (bad.id, line)
        assert re.search(bad.message, line, re.DOTALL), (bad.id, line, bad.message)


# -- folders and zipped exports (issue #47) --------------------------------------------------------

FOLDER_REPORTS = {  # small real reports of three devices: fixture folder -> report
    "rtx3070-vecadd-basic-ncu2022.3": "CuVectorAddDrv.ncu-rep",
    "gtx1660s-sgemm-naive-full-ncu2024.1": "naive.ncu-rep",
    "v100-kripke-full-ncu2023.3": "output.ncu-rep",
}


def folder_of_reports(tmp_path: Path) -> Path:
    """tmp_path/reports: links to three real reports, a truncated copy of one (hand-made damage), a
    note and a subfolder."""
    folder = tmp_path / "reports"
    folder.mkdir()
    for fixture, name in FOLDER_REPORTS.items():
        (folder / name).symlink_to(real_fixture(fixture) / name)
    whole = (real_fixture("v100-kripke-full-ncu2023.3") / "output.ncu-rep").read_bytes()
    (folder / "broken.ncu-rep").write_bytes(whole[: len(whole) // 2])
    (folder / "notes.md").write_text("hand-made: how these reports were taken\n")
    (folder / "old").mkdir()
    return folder


def test_a_folder_of_reports_is_every_report_each_its_own_app(tmp_path):
    """`roofline show reports/` run from the folder's parent (another directory than the
    repository): every report's kernels, each report its app named as the workflow names files;
    one stderr line per entry left out (why) and one naming the broken report; exit status 1."""
    folder = folder_of_reports(tmp_path)
    ran = subprocess.run([sys.executable, "-m", "roofline", "show", "reports", "--format", "json"],
                         capture_output=True, text=True, cwd=tmp_path)
    lines = [line for line in ran.stderr.splitlines() if line.startswith("roofline: ")]
    assert ran.returncode == 1 and "Traceback" not in ran.stderr
    shown = pd.DataFrame(json.loads(ran.stdout))
    assert set(shown["app"]) == {"CuVectorAddDrv", "naive", "output"}
    one_by_one = api.analyse([folder / name for name in FOLDER_REPORTS.values()])
    assert sorted(shown["kernel"]) == sorted(one_by_one.kernels["kernel"]) and len(shown) >= 3
    assert set(shown["device"]) == set(one_by_one.kernels["device"]) and len(set(shown["device"])) == 3
    assert [line for line in lines if "skipped" in line] == [
        "roofline: skipped reports/notes.md: unknown file type '.md'; accepted are .ncu-rep (.ncu-repz), ncu CSV "
        "exports (.csv) and what-if tables (.yaml/.yml or .csv), each also compressed (.gz, .xz, .zst, .zstd, .bz2, "
        ".zip; a .zip of one file): rename it if it is one of these",
        "roofline: skipped reports/old: a folder; folders inside a folder are not searched: give it as an input of "
        "its own",
    ]
    (broken,) = [line for line in lines if "broken.ncu-rep" in line]
    assert broken.startswith("roofline: reports/broken.ncu-rep: the file is truncated or damaged")


def test_a_folder_of_only_notes_says_what_it_holds(capsys, tmp_path):
    folder = tmp_path / "empty_night"
    folder.mkdir()
    (folder / "README.txt").write_text("hand-made\n")
    code, out, err = run_cli(capsys, "show", folder)
    lines = [line for line in err.splitlines() if line.startswith("roofline: ")]
    assert code == 1 and out == ""
    assert lines[0].startswith(f"roofline: skipped {folder / 'README.txt'}: unknown file type '.txt'")
    assert lines[1] == (f"roofline: {folder}: the folder holds no ncu CSV export (.csv, also compressed); check that "
                        "the exports were written here")


def test_a_zipped_export_gives_the_rows_of_the_export(capsys, tmp_path):
    """nsight162.csv.zip, as NERSC's exports are shared on GitHub: the same JSON rows as the plain
    export (same app name, same numbers)."""
    import zipfile

    plain = nersc_csv()
    packed = tmp_path / "nsight162.csv.zip"
    with zipfile.ZipFile(packed, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.write(plain, plain.name)
    rows = {}
    for path in (plain, packed):
        code, out, err = run_cli(capsys, "show", path, "--device", A100_80, "--format", "json", "--all-columns")
        assert code == 0 and "roofline: " not in err, err
        rows[path.name] = json.loads(out)
    zipped_rows, plain_rows = rows[packed.name], rows[plain.name]
    assert len(plain_rows) == 1 and zipped_rows[0]["app"] == "nsight162"
    assert [{k: v for k, v in r.items() if k != "source_file"} for r in zipped_rows] == \
        [{k: v for k, v in r.items() if k != "source_file"} for r in plain_rows]
