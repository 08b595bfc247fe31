"""roofline.jobs: stage jobs forked from a preloaded server (own process, own log, exit status)."""

from __future__ import annotations

import contextlib
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


def _driver(tmp_path: Path, body: str) -> dict:
    """Run ``body`` in a fresh interpreter whose job server imports this driver first (as Snakemake's
    entry script is), so patches at its top reach the jobs; return what it printed as JSON."""
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(f"""
        import errno, json, os, sys
        sys.path.insert(0, {str(REPO)!r})
        import pathlib
        from roofline.jobs import StageFailed, run_stage

        _write_text = pathlib.Path.write_text

        def full_disk(self, data, *args, **kwargs):  # half the file, then the disk is full
            _write_text(self, data[: len(data) // 2], *args, **kwargs)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        if os.environ.get("FULL_DISK"):
            pathlib.Path.write_text = full_disk

        if __name__ == "__main__":
            {textwrap.indent(textwrap.dedent(body), "            ").strip()}
    """))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                            cwd=tmp_path, env={**os.environ, "FULL_DISK": "1"})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_full_disk_ends_the_job_with_one_line_in_its_log(tmp_path):
    """The output's filesystem is full: the log holds one line naming the output and the fix, no
    traceback; the job fails; no output and no temp file are left."""
    _diagnostics(tmp_path / "d.parquet", "warning")
    out = _driver(tmp_path, f"""
        try:
            run_stage("status", "logs/status.log", diagnostics=[{str(tmp_path / "d.parquet")!r}],
                      output="reports/status.json")
        except StageFailed as failed:
            print(json.dumps({{"failed": str(failed)}}))
    """)
    assert out["failed"] == ("roofline.status stopped on a failure of its environment (space, quota, read-only, "
                             "permission); its log says which, in one line: logs/status.log")
    log = (tmp_path / "logs" / "status.log").read_text()
    assert log.splitlines() == [
        f"roofline: cannot write reports/status.json: No space left on device (ENOSPC); free space on the filesystem "
        f"at {_mount(tmp_path)} and rerun: outputs written so far are complete or absent"
    ]
    assert list((tmp_path / "reports").iterdir()) == [], "no output, no temp file"


def _mount(path: Path) -> Path:
    while not os.path.ismount(path):
        path = path.parent
    return path


@pytest.fixture
def full_tmpfs(tmp_path):
    """A tiny tmpfs, already full (skip where this machine does not allow mounting one)."""
    folder = tmp_path / "full"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        (folder / "logs").mkdir()
        with open(folder / "filler", "wb", buffering=0) as filler:
            with contextlib.suppress(OSError):
                while True:
                    filler.write(b"\0" * 4096)
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_log_that_cannot_be_written_fails_the_job_in_one_line(tmp_path, full_tmpfs):
    """The stage wrote its output, but its log's filesystem is full: the job fails (its log is not
    whole) and the caller's message is the one line naming the log."""
    _diagnostics(tmp_path / "d.parquet", "warning")
    log = full_tmpfs / "logs" / "status.log"
    with pytest.raises(StageFailed) as failed:
        run_stage("status", log, diagnostics=[tmp_path / "d.parquet"], output=tmp_path / "status.json")
    assert str(failed.value) == (
        f"roofline: cannot write {log}: No space left on device (ENOSPC); free space on the filesystem at "
        f"{full_tmpfs} and rerun: outputs written so far are complete or absent")
    assert json.loads((tmp_path / "status.json").read_text())["ok"] is True, "the output itself is whole"


def test_when_neither_output_nor_log_can_be_written_the_caller_says_why(tmp_path, full_tmpfs):
    _diagnostics(tmp_path / "d.parquet", "warning")
    with pytest.raises(StageFailed) as failed:
        run_stage("status", full_tmpfs / "logs" / "status.log", diagnostics=[tmp_path / "d.parquet"],
                  output=full_tmpfs / "status.json")
    assert str(failed.value).startswith(f"roofline: cannot write {full_tmpfs / 'status.json'}: No space left on device")
    assert sorted(p.name for p in full_tmpfs.iterdir()) == ["filler", "logs"], "no output, no temp file"
