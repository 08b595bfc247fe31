"""Every package file a stage's jobs import is in that rule's code param (roofline/jobs/stages.py).

A file a stage imports but its rule does not list can be edited without the stage's jobs rerunning:
the workflow then keeps results the edited code would not give. A static reading of the imports
misses the lazy ones (inside functions, on one input kind only), so the workflow runs here on one
app of every input kind, each job in its own process (no job server), and a ``sitecustomize`` on
the jobs' import path writes down, as each job ends, the package modules it imported.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REAL, REPO, snakemake_command

from roofline.jobs.stages import STAGES, stage_files

# how a job starts and reaches the warm server: not what it computes, so in no digest
RUNNER = ("jobs/__main__.py", "jobs/client.py", "files/processes.py")

pytestmark = pytest.mark.slow

RECORDER = '''\
# Hand-made by tests/jobs/test_stages.py: as a `python -m roofline.jobs STAGE ...` job ends, write the
# files of the roofline modules it imported to $ROOFLINE_TEST_IMPORTS/STAGE-PID.json.
import atexit, json, os, sys


def _record():
    if not sys.argv[0].endswith(os.path.join("roofline", "jobs", "__main__.py")) or len(sys.argv) < 2:
        return
    files = sorted({getattr(m, "__file__", None) or "" for name, m in list(sys.modules.items())
                    if name == "roofline" or name.startswith("roofline.")} - {""})
    path = os.path.join(os.environ["ROOFLINE_TEST_IMPORTS"], f"{sys.argv[1]}-{os.getpid()}.json")
    with open(path, "w") as out:
        json.dump({"stage": sys.argv[1], "argv": sys.argv[2:], "files": files}, out)


atexit.register(_record)
'''

# one app per input kind the parse stage reads; the real ones are read from ../shared in place
REAL_INPUTS = {
    "rep": "h100pcie-rmsnorm-full-ncu2025.1/*.ncu-rep",
    "long": "a100-dropout-nersc-metrics-csv/*.csv",
    "raw": "rtx5060-wmma-fp16-rawcsv-ncu2026.1/*.csv",
}


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> list[dict]:
    """The imports of every job of a cold run over a what-if table and, where ../shared is present,
    an .ncu-rep report, a long CSV export and a raw (wide) CSV export."""
    root = tmp_path_factory.mktemp("stage-code")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("workflow", "roofline", "config"):
        shutil.copytree(REPO / part, root / part, ignore=ignore)
    shutil.copy2(REPO / "Snakefile", root / "Snakefile")
    (root / "profiles").symlink_to("workflow/profiles")
    apps = {"table": REPO / "data" / "examples" / "textbook.yaml"}
    for app, pattern in REAL_INPUTS.items():
        found = sorted(REAL.glob(pattern)) if REAL.is_dir() else []
        if found:
            apps[app] = found[0]
    lines = "".join(f"  {app}: {{report: {json.dumps(str(path))}}}\n" for app, path in apps.items())
    (root / "test-config.yaml").write_text(f"# hand-made test config\ninputs: []\napps:\n{lines}")
    recorder, imports = root / "recorder", root / "imports"
    recorder.mkdir()
    imports.mkdir()
    (recorder / "sitecustomize.py").write_text(RECORDER)
    env = dict(os.environ, ROOFLINE_JOB_SERVER="off", ROOFLINE_TEST_IMPORTS=str(imports),
               PYTHONPATH=os.pathsep.join(filter(None, [str(recorder), os.environ.get("PYTHONPATH")])))
    cmd = snakemake_command(root, "--cores", "2", configfile="test-config.yaml", snakefile=root / "Snakefile")
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    records = [json.loads(p.read_text()) for p in sorted(imports.glob("*.json"))]
    package = root / "roofline"
    for record in records:
        record["files"] = [Path(f).resolve().relative_to(package).as_posix() for f in record["files"]
                           if Path(f).resolve().is_relative_to(package)]
        record["apps"] = sorted(apps)
    return records


def test_every_stage_of_the_workflow_ran_and_was_recorded(jobs):
    ran = {record["stage"] for record in jobs}
    assert set(STAGES) <= ran, f"stages with no recorded job: {sorted(set(STAGES) - ran)}"
    assert ran <= set(STAGES), ran
    parsed = [record for record in jobs if record["stage"] == "parse"]
    assert len(parsed) == len(jobs[0]["apps"]), [r["argv"] for r in parsed]
    # the recorder sees the stage's own modules, not only the runner's
    assert all("stages/parse.py" in record["files"] for record in parsed), parsed[0]["files"]


def test_every_file_a_stage_imports_is_in_its_rules_code_param(jobs):
    missing = {}
    for record in jobs:
        listed = set(stage_files(record["stage"])) | set(RUNNER)
        for name in record["files"]:
            if name not in listed:
                missing.setdefault(record["stage"], set()).add(name)
    assert not missing, (
        "a stage imports files its rule's code param does not list, so editing them would not rerun "
        f"it; add them to roofline/jobs/stages.py: { {s: sorted(f) for s, f in missing.items()} }")


def test_the_real_inputs_were_there_or_the_test_says_so(jobs):
    absent = sorted(set(REAL_INPUTS) - set(jobs[0]["apps"]))
    if absent:
        pytest.skip(f"{REAL} lacks the real inputs of {absent}: their lazy imports went unchecked")
