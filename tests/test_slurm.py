"""The SLURM profile on a real (single-node, fake-GPU) cluster: only GPU work is queued (one job per
captured app, none for imported reports; the analysis runs on the submitting host), and a capture
job is planned for the gpu partition with ``--gpus``. The cluster comes from
.ci/slurm-up.sh; without one these tests skip. Jobs left by a failed run are cancelled."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, snakemake_command

from roofline.tables.files import read_table

pytestmark = pytest.mark.slurm
PROFILE = REPO / "workflow" / "profiles" / "slurm"
FAST = [  # test-cluster settings: squeue comes from the profile
    "--slurm-init-seconds-before-status-checks", "2", "--slurm-no-account", "--latency-wait", "5",
]


def _cluster_up() -> None:
    if shutil.which("sinfo") is None:
        pytest.skip("SLURM not installed (sinfo not on PATH): run .ci/slurm-up.sh as root")
    try:
        import snakemake_executor_plugin_slurm  # noqa: F401
    except ImportError:
        pytest.skip("snakemake-executor-plugin-slurm missing: uv sync --extra slurm")
    result = subprocess.run(["sinfo", "-h", "-o", "%P %T"], capture_output=True, text=True, timeout=30)
    states = result.stdout.split()
    if result.returncode != 0 or not any(s.startswith(("idle", "mixed", "alloc")) for s in states):
        pytest.skip(f"SLURM cluster down (sinfo: {result.stdout.strip() or result.stderr.strip()})")
    if "gpu" not in states:
        pytest.skip("SLURM cluster has no 'gpu' partition (see .ci/slurm-up.sh)")


def _cancel_jobs_in(workdir: Path) -> None:
    """Cancel this test's jobs (by id, found by their working directory)."""
    listing = subprocess.run(["squeue", "-h", "-o", "%i %Z"], capture_output=True, text=True, timeout=30)
    ids = [line.split()[0] for line in listing.stdout.splitlines()
           if len(line.split()) == 2 and line.split()[1].startswith(str(workdir))]
    if ids:
        subprocess.run(["scancel", *ids], timeout=30, check=False)


def _snakemake(workdir: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    # SLURM jobs inherit the environment (--export=ALL): `python` must be this interpreter.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(
        snakemake_command(workdir, "--workflow-profile", str(PROFILE), *FAST, *args),
        capture_output=True, text=True, timeout=timeout, env=env, cwd=workdir,
    )
    if result.returncode != 0:
        raise AssertionError(f"snakemake failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return result


@pytest.fixture
def workdir(tmp_path):
    _cluster_up()
    (tmp_path / "inputs").mkdir()
    shutil.copy(REPO / "data" / "examples" / "textbook.yaml", tmp_path / "inputs" / "textbook.yaml")
    (tmp_path / "config.yaml").write_text("# hand-made test config\ninputs: [inputs/textbook.yaml]\n")
    yield tmp_path
    _cancel_jobs_in(tmp_path)


def test_only_gpu_work_is_queued_one_job_per_captured_app_none_for_imported_reports(workdir):
    """An imported report and an app captured (by a fake ncu that copies a real H100 report) on the
    cluster: exactly one sbatch, the capture, on the gpu partition with a GPU; every analysis rule
    runs on the submitting host, and the captured report flows through them."""
    from capture.test_capture import fake_ncu

    ncu = fake_ncu(workdir)
    (workdir / "config.yaml").write_text(
        "# hand-made test config: one imported table, one app captured by a fake ncu\n"
        "inputs: [inputs/textbook.yaml]\n"
        "apps:\n  rmsnorm: {command: echo profiled, gpu_model: h100, runtime: 10, mem_mb: 1000}\n"
        f"capture: {{ncu: {json.dumps(str(ncu))}}}\n"
    )
    result = _snakemake(workdir, "--verbose")
    log = result.stdout + result.stderr
    calls = [line for line in log.splitlines() if line.startswith("sbatch call:")]
    submitted = [re.search(r"--comment rule_(\w+?)(?:_wildcards|\s)", c).group(1) for c in calls]
    assert submitted == ["capture"], calls
    assert " -p gpu " in calls[0] and "--gpus=h100:1" in calls[0]
    for rule in ("parse", "ceilings", "classify_app", "report", "status", "track_history", "trends_page"):
        assert re.search(rf"^local(rule|checkpoint) {rule}:", log, re.M), rule
    classified = read_table(workdir / "data" / "classified" / "rmsnorm.parquet", "classified")
    assert len(classified) == 3 and set(classified["device"]) == {"NVIDIA H100 PCIe"}
    assert "seed_normalization" in set(read_table(workdir / "data" / "classified" / "textbook.parquet",
                                                  "classified")["kernel"])
    assert (workdir / "reports" / "summary.html").stat().st_size > 100_000


def test_capture_job_is_planned_for_the_gpu_partition_with_gpus(workdir):
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    (workdir / "config.yaml").write_text(
        "# hand-made test config: a capture app (never run here: dry run)\n"
        "inputs: [inputs/textbook.yaml]\n"
        "apps:\n  saxpy: {command: ./saxpy, gpu_model: h100, runtime: 20, mem_mb: 1000}\n"
    )
    result = _snakemake(workdir, "--dry-run", "--verbose", "--printshellcmds", timeout=120)
    text = result.stdout + result.stderr
    block = text[text.index("rule capture:"):]
    block = block[: block.index("\n\n")] if "\n\n" in block else block
    resources = dict(
        item.split("=", 1) for item in re.search(r"resources: (.*)", block).group(1).split(", ")
    )
    assert resources["slurm_partition"] == "gpu"
    assert resources["gpu"] == "1" and resources["gpu_model"] == "h100"
    assert resources["runtime"] == "20" and resources["mem_mb"] == "1000"
    assert "python -m roofline.capture.capture --app saxpy" in text

    planned = type("Resources", (dict,), {"__getattr__": dict.__getitem__})(
        gpu=int(resources["gpu"]), gpu_model=resources["gpu_model"]
    )
    job = type("Job", (), {"resources": planned})()  # what the plugin reads from a job
    assert set_gres_string(job).strip() == "--gpus=h100:1"
