"""Minimal reruns: after a cold run, Snakemake schedules exactly the jobs a change calls for.

A tmp copy of the repo's Snakefile, workflow/, roofline/ and config/ runs three small apps (copies of
the bundled what-if table). The job lists come from ``snakemake -n``; the aggregate rules a change
must also rerun (report, and status / track_history / trends_page where the workflow has them) are read from
``snakemake --rulegraph``, so a new aggregate rule does not break the test but a per-app job too
many does.
"""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from capture.test_capture import fake_ncu
from conftest import REPO, snakemake_command

pytestmark = pytest.mark.slow

APPS = ["alpha", "beta", "gamma"]
_JOB = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):\s*$")
_WILDCARDS = re.compile(r"^\s+wildcards: (.*)$")
_NODE = re.compile(r'^\s*(\d+)\[label = "([^"]+)"')
_EDGE = re.compile(r"^\s*(\d+) -> (\d+)")


def _jobs(text: str) -> list[str]:
    """Jobs announced in Snakemake's output as ``rule`` or ``rule:app`` (``all`` left out), sorted."""
    jobs, current = [], None
    for line in text.splitlines():
        if match := _JOB.match(line):
            if current:
                jobs.append(current)
            current = match.group(1)
        elif current and (wild := _WILDCARDS.match(line)):
            values = dict(item.split("=", 1) for item in wild.group(1).split(", ") if "=" in item)
            jobs.append(f"{current}:{values.get('app', wild.group(1))}")
            current = None
        elif current and not line.startswith(" "):
            jobs.append(current)
            current = None
    if current:
        jobs.append(current)
    return sorted(j for j in jobs if j != "all")


def _downstream(rulegraph: str, start: str) -> set[str]:
    names = dict(m.groups() for line in rulegraph.splitlines() if (m := _NODE.match(line)))
    children: dict[str, set[str]] = {}
    for line in rulegraph.splitlines():
        if edge := _EDGE.match(line):
            children.setdefault(names[edge.group(1)], set()).add(names[edge.group(2)])
    seen, todo = {start}, [start]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen - {"all"}


class Workflow:
    def __init__(self, root: Path, env: dict[str, str]):
        self.root, self.env = root, env

    def run(self, *args: str) -> str:
        cmd = snakemake_command(self.root, "--cores", "2", *args, configfile="test-config.yaml",
                                snakefile=self.root / "Snakefile")
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=self.env)
        if result.returncode != 0:
            raise AssertionError(f"snakemake {args} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
        return result.stdout + result.stderr


@pytest.fixture(scope="module")
def flow(tmp_path_factory) -> Workflow:
    """A cold run over three apps in a tmp copy of the workflow (the package copy is what rules list)."""
    root = tmp_path_factory.mktemp("incremental")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("workflow", "roofline", "config"):
        shutil.copytree(REPO / part, root / part, ignore=ignore)
    shutil.copy2(REPO / "Snakefile", root / "Snakefile")
    (root / "profiles").symlink_to("workflow/profiles")  # as in a checkout: the default profile
    (root / "inputs").mkdir()
    for app in APPS:
        shutil.copy(REPO / "data" / "examples" / "textbook.yaml", root / "inputs" / f"{app}.yaml")
    # Three imported tables and one app captured by a fake ncu (it copies a real H100 report), with
    # no run_id: as a developer runs it, the GPU rule reruns only for GPU reasons.
    ncu = fake_ncu(root)
    (root / "test-config.yaml").write_text(
        "# hand-made test config\ninputs: [inputs/*.yaml]\n"
        f"apps:\n  probe: {{command: echo probe}}\ncapture: {{ncu: {json.dumps(str(ncu))}}}\n")
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # let the jobs share one bytecode cache: 3x faster starts
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path_factory.mktemp("pycache"))
    workflow = Workflow(root, env)
    cold = workflow.run()
    assert {f"parse:{a}" for a in [*APPS, "probe"]} | {"capture:probe"} <= set(_jobs(cold)), cold[-3000:]
    workflow.cold_jobs = _jobs(cold)
    workflow.rulegraph = workflow.run("--rulegraph")
    return workflow


def _expected(flow: Workflow, changed: str, apps: list[str]) -> list[str]:
    per_app = {j.split(":")[0] for j in flow.cold_jobs if ":" in j}
    aggregate = {j for j in flow.cold_jobs if ":" not in j}
    rules = _downstream(flow.rulegraph, changed)
    return sorted([f"{r}:{a}" for r in rules & per_app for a in apps] + list(rules & aggregate))


def test_a_nothing_changed_schedules_no_job(flow):
    text = flow.run("-n")
    assert _jobs(text) == [], text[-2000:]
    assert "Nothing to be done" in text


def test_c_editing_classify_reruns_the_analysis_and_the_report_only(flow):
    module = flow.root / "roofline" / "classify" / "launches.py"
    original = module.read_bytes()
    try:
        module.write_bytes(original + b"\n# edited by tests/test_incremental.py\n")
        jobs = _jobs(flow.run("-n"))
    finally:
        module.write_bytes(original)
    assert [j for j in jobs if j.split(":")[0] in ("parse", "capture", "ceilings")] == []
    assert "classify_app:beta" in jobs and "report" in jobs
    assert jobs == _expected(flow, "classify_app", [*APPS, "probe"])


def _replaced(flow: Workflow, app: str, old: str, new: str) -> list[str]:
    """Run the workflow with ``old`` replaced by ``new`` in the app's table, then with the table as
    it was (so that the next test starts from the cold run's state); the first run's jobs."""
    table = flow.root / "inputs" / f"{app}.yaml"
    text = table.read_text()
    try:
        table.write_text(text.replace(old, new, 1))
        assert table.read_text() != text
        jobs = _jobs(flow.run())
    finally:
        table.write_text(text)
        flow.run()
    return jobs


def test_b_replacing_one_input_reruns_its_chain_and_the_aggregates_only(flow):
    """A new input that moves no roof: its parse, the ceilings (a checkpoint: they come out
    byte-identical), then its own analysis (classification and page) only, and the aggregate jobs;
    no other app is parsed, classified or paged again, nothing is captured."""
    jobs = _replaced(flow, "beta", "duration_s: 8.0e-3", "duration_s: 9.0e-3")
    aggregates = sorted(_downstream(flow.rulegraph, "parse") & {j for j in flow.cold_jobs if ":" not in j})
    assert aggregates == ["ceilings", "report", "status", "track_history", "trends_page"]
    # status reads beta's diagnostics, which come out byte-identical: it runs only when Snakemake
    # starts it beside the ceilings, before the checkpoint has it look at every job again
    assert [j for j in jobs if j != "status"] == ["ceilings", "classify_app:beta", "parse:beta", "report",
                                                  "track_history", "trends_page"]


def test_b_moving_a_roof_reclassifies_the_apps_of_that_device_only(flow):
    """One roof per device: an input that moves its device's ceilings has every app on that device
    classified again against them (and its page rewritten), though only that input is parsed again;
    an app on another device (probe, a captured H100 report) is not touched."""
    # alpha's: the three tables define the same machines, and the first app's definition is the roof
    jobs = _replaced(flow, "alpha", "seed-120T-3TB:   {compute: {fp32: 120.0e+12}, memory: {dram: 3.0e+12}}",
                     "seed-120T-3TB:   {compute: {fp32: 120.0e+12}, memory: {dram: 3.3e+12}}")
    assert [j for j in jobs if j.startswith(("parse", "capture"))] == ["parse:alpha"]
    assert [j for j in jobs if j.startswith("classify_app")] == [f"classify_app:{a}" for a in APPS]
    assert {"ceilings", "report"} <= set(jobs)


def test_d_editing_an_analysis_module_plans_no_capture(flow):
    """The GPU rules rerun only for GPU reasons: a column description (tables/schemas.py) or a recipe
    formula (metrics/quantities.py) changes what the analysis computes, not what ncu is asked for."""
    for name in ("tables/schemas.py", "metrics/quantities.py", "__init__.py"):
        module = flow.root / "roofline" / name
        original = module.read_bytes()
        try:
            module.write_bytes(original + b"\n# edited by tests/test_incremental.py\n")
            jobs = _jobs(flow.run("-n"))
        finally:
            module.write_bytes(original)
        assert jobs, f"editing {name} reruns the analysis"
        assert [j for j in jobs if j.startswith("capture")] == [], (name, jobs)


def test_e_changing_an_apps_command_plans_exactly_its_capture(flow):
    config = flow.root / "test-config.yaml"
    original = config.read_text()
    try:
        config.write_text(original.replace("echo probe", "echo probe --bigger"))
        jobs = _jobs(flow.run("-n"))
    finally:
        config.write_text(original)
    assert [j for j in jobs if j.startswith(("capture", "parse"))] == ["capture:probe", "parse:probe"]


def test_f_capture_code_and_a_nightly_run_id_rerun_the_capture(flow):
    module = flow.root / "roofline" / "capture" / "capture.py"
    original = module.read_bytes()
    try:
        module.write_bytes(original + b"\n# edited by tests/test_incremental.py\n")
        assert "capture:probe" in _jobs(flow.run("-n"))
    finally:
        module.write_bytes(original)
    assert "capture:probe" in _jobs(flow.run("-n", "--config", "run_id=night-2"))


def test_g_shares_of_the_ceilings_removed_by_hand_fall_back_to_the_whole_table(flow):
    """Each app's share of the ceilings is kept beside the checkpoint's outputs, not as one: with the
    folder removed, a run still classifies (against the whole table, which classifies alike) rather
    than stopping at a missing input."""
    import pandas as pd

    kernels = flow.root / "data" / "kernels" / "beta.parquet"
    before = pd.read_parquet(kernels)
    shutil.rmtree(flow.root / "data" / "ceilings" / "apps")
    text = flow.run("--forcerun", "classify_app")  # fails the test if Snakemake fails
    assert "classify_app:beta" in _jobs(text)
    pd.testing.assert_frame_equal(pd.read_parquet(kernels), before)
