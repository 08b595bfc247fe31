"""roofline.jobs: stage jobs forked from a preloaded server (own process, own log, exit status)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from roofline.jobs import StageFailed, run_stage, stage_argv
from roofline.schemas import conform, write_table

REPO = Path(__file__).resolve().parents[1]


def test_options_become_the_stage_command_line():
    argv = stage_argv({"run_id": "2026-11-29", "kernels": ["a.parquet", "b.parquet"], "device": "",
                       "margin": 0.25, "apps": []})
    assert argv == ["--run-id=2026-11-29", "--kernels", "a.parquet", "b.parquet", "--device=", "--margin=0.25",
                    "--apps"]


def _diagnostics(path: Path, severity: str) -> None:
    frame = pd.DataFrame([{"app": "a", "stage": "parse", "severity": severity, "source_file": "x.csv",
                           "message": "x.csv: hand-made diagnostic"}])
    write_table(conform(frame, "diagnostics"), "diagnostics", path)


def test_a_stage_runs_in_its_own_process_and_writes_its_log(tmp_path, capfd):
    _diagnostics(tmp_path / "a.parse.parquet", "warning")
    log = tmp_path / "logs" / "status.log"
    run_stage("status", log, diagnostics=[tmp_path / "a.parse.parquet"], output=tmp_path / "status.json")
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["counts"]["warnings"] == 1 and status["ok"] is True
    # What the stage writes to stderr goes to the job's log file, not to the caller's stderr.
    assert "1 warning(s)" in log.read_text()
    assert "warning(s)" not in capfd.readouterr().err


def test_a_failing_stage_raises_and_names_its_log(tmp_path):
    log = tmp_path / "parse.log"
    with pytest.raises(StageFailed, match=r"roofline.status exited with status 2; its log: .*status.log"):
        # argparse exits 2 on a usage error; its message lands in the log
        run_stage("status", tmp_path / "status.log", diagnostics=[])
    assert "give --output" in (tmp_path / "status.log").read_text()
    with pytest.raises(ValueError, match="unknown stage"):
        run_stage("capture", log)


def test_an_exception_in_a_stage_is_in_its_log(tmp_path):
    missing = tmp_path / "nope.parquet"
    with pytest.raises(StageFailed, match="exited with status 1"):
        run_stage("status", tmp_path / "s.log", diagnostics=[missing], output=tmp_path / "s.json")
    assert "Traceback" in (tmp_path / "s.log").read_text()
    assert not (tmp_path / "s.json").exists()


def test_jobs_are_cheap_after_the_first(tmp_path):
    """The point of the server: a job costs a fork, not an interpreter start and pandas import
    (~0.35 s). Generous bound, so that a loaded machine does not fail it: 4 jobs well under 4 x 0.35 s
    would already be impossible with a fresh interpreter each."""
    _diagnostics(tmp_path / "d.parquet", "warning")
    run_stage("status", tmp_path / "0.log", diagnostics=[tmp_path / "d.parquet"], output=tmp_path / "0.json")
    assert (tmp_path / "0.json").exists()
    start = time.perf_counter()
    for i in range(1, 5):
        run_stage("status", tmp_path / f"{i}.log", diagnostics=[tmp_path / "d.parquet"], output=tmp_path / f"{i}.json")
    per_job = (time.perf_counter() - start) / 4
    assert per_job < 0.3, f"{per_job:.3f} s per job"


def test_a_running_job_dies_with_the_process_that_started_it(tmp_path):
    """If Snakemake is killed (SIGKILL, no cleanup), its running stage jobs must not go on writing."""
    pid_file = tmp_path / "child.pid"
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        import roofline.status
        from roofline.jobs import run_stage

        def slow_main(argv):  # stands in for a long stage: records its pid, then sleeps
            import os, time
            open({str(pid_file)!r}, "w").write(str(os.getpid()))
            time.sleep(60)
            return 0

        roofline.status.main = slow_main
        if __name__ == "__main__":
            run_stage("status", {str(tmp_path / "slow.log")!r})
    """))
    driver = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline, "the job did not start"
            assert driver.poll() is None, "the driver ended early"
            time.sleep(0.05)
        child = int(pid_file.read_text())
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        deadline = time.monotonic() + 20
        while _alive(child):
            assert time.monotonic() < deadline, f"job {child} outlived its driver"
            time.sleep(0.05)
    finally:
        if driver.poll() is None:
            driver.kill()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split(")")[-1].split()[0] == "Z")


def test_concurrent_jobs_all_get_their_exit_status(tmp_path):
    """Snakemake runs jobs from several threads at once. multiprocessing reads a forkserver child's
    exit status once, and starting a process polls the others: unsynchronised, one thread could
    read another's status and leave it "exited with status 255" (seen at 10 apps before the fix)."""
    from concurrent.futures import ThreadPoolExecutor

    _diagnostics(tmp_path / "d.parquet", "warning")

    def job(i: int) -> None:
        run_stage("status", tmp_path / f"{i}.log", diagnostics=[tmp_path / "d.parquet"], output=tmp_path / f"{i}.json")

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(job, range(60)))
    assert len(list(tmp_path.glob("*.json"))) == 60
