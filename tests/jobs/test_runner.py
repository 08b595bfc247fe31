"""roofline.jobs.runner: a stage as a job (``python -m roofline.jobs STAGE LOG ...``): its stderr in its log,
its exit status, and a failure of the environment in one line."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from roofline.errors import EXIT_STATUS
from roofline.tables.files import write_table
from roofline.tables.schemas import conform

REPO = Path(__file__).resolve().parents[2]


def _diagnostics(path: Path, severity: str) -> None:
    frame = pd.DataFrame([{"app": "a", "stage": "parse", "severity": severity, "source_file": "x.csv",
                           "message": "x.csv: hand-made diagnostic"}])
    write_table(conform(frame, "diagnostics"), "diagnostics", path)


def _job(cwd: Path, *argv: str, prelude: str = "") -> subprocess.CompletedProcess:
    """The job as a rule's shell command runs it; ``prelude`` (Python run first) patches the job's
    interpreter, e.g. to make the disk full."""
    if prelude:
        command = [sys.executable, "-c", textwrap.dedent(prelude) + "\nimport sys\nfrom roofline.jobs import runner\n"
                   "sys.exit(runner.main(sys.argv[1:]))", *argv]
    else:
        command = [sys.executable, "-m", "roofline.jobs", *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def test_a_stage_writes_its_stderr_to_its_log_and_exits_0(tmp_path):
    _diagnostics(tmp_path / "a.parse.parquet", "warning")
    result = _job(tmp_path, "status", "logs/status.log", "--diagnostics", "a.parse.parquet",
                  "--output=status.json")
    assert result.returncode == 0, result.stderr
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["counts"]["warnings"] == 1 and status["ok"] is True
    # What the stage writes to stderr goes to the job's log file (its folder made), not to the job's stderr.
    assert "1 warning(s)" in (tmp_path / "logs" / "status.log").read_text()
    assert result.stderr == ""


def test_a_usage_error_exits_2_with_the_message_in_the_log(tmp_path):
    result = _job(tmp_path, "status", "status.log", "--diagnostics")
    assert result.returncode == 2
    assert "give --output" in (tmp_path / "status.log").read_text()


def test_an_unknown_stage_or_no_log_is_a_usage_error(tmp_path):
    result = _job(tmp_path, "capture", "c.log")
    assert result.returncode == 2 and "unknown stage 'capture'" in result.stderr
    result = _job(tmp_path, "status")
    assert result.returncode == 2 and "usage: python -m roofline.jobs" in result.stderr


def test_an_exception_in_a_stage_is_in_its_log_and_fails_the_job(tmp_path):
    result = _job(tmp_path, "status", "s.log", "--diagnostics", "nope.parquet", "--output=s.json")
    assert result.returncode == 1
    assert "Traceback" in (tmp_path / "s.log").read_text()
    assert not (tmp_path / "s.json").exists()


FULL_DISK = """
    import errno, os, pathlib
    _write_text = pathlib.Path.write_text

    def full_disk(self, data, *args, **kwargs):  # half the file, then the disk is full
        _write_text(self, data[: len(data) // 2], *args, **kwargs)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    pathlib.Path.write_text = full_disk
"""


def _mount(path: Path) -> Path:
    while not os.path.ismount(path):
        path = path.parent
    return path


def test_a_full_disk_ends_the_job_with_one_line_in_its_log(tmp_path):
    """The output's filesystem is full: the log holds one line naming the output and the fix, no
    traceback; the job fails with the environment's exit status; no output and no temp file are left."""
    _diagnostics(tmp_path / "d.parquet", "warning")
    (tmp_path / "reports").mkdir()
    result = _job(tmp_path, "status", "logs/status.log", "--diagnostics", "d.parquet",
                  "--output=reports/status.json", prelude=FULL_DISK)
    assert result.returncode == EXIT_STATUS
    log = (tmp_path / "logs" / "status.log").read_text()
    assert log.splitlines() == [
        f"roofline: cannot write reports/status.json: No space left on device (ENOSPC); free space on the filesystem "
        f"at {_mount(tmp_path)} and rerun: outputs written so far are complete or absent"
    ]
    assert list((tmp_path / "reports").iterdir()) == [], "no output, no temp file"


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
    whole) and says so on its own stderr, which Snakemake shows, in one line naming the log."""
    _diagnostics(tmp_path / "d.parquet", "warning")
    log = full_tmpfs / "logs" / "status.log"
    result = _job(tmp_path, "status", str(log), "--diagnostics", "d.parquet", "--output=status.json")
    assert result.returncode == EXIT_STATUS
    assert result.stderr.splitlines() == [
        f"roofline: cannot write {log}: No space left on device (ENOSPC); free space on the filesystem at "
        f"{full_tmpfs} and rerun: outputs written so far are complete or absent"]
    assert json.loads((tmp_path / "status.json").read_text())["ok"] is True, "the output itself is whole"


def test_when_neither_output_nor_log_can_be_written_the_job_says_why(tmp_path, full_tmpfs):
    _diagnostics(tmp_path / "d.parquet", "warning")
    result = _job(tmp_path, "status", str(full_tmpfs / "logs" / "status.log"), "--diagnostics", "d.parquet",
                  f"--output={full_tmpfs / 'status.json'}")
    assert result.returncode == EXIT_STATUS
    assert result.stderr.startswith(f"roofline: cannot write {full_tmpfs / 'status.json'}: No space left on device")
    assert len(result.stderr.splitlines()) == 1
    assert sorted(p.name for p in full_tmpfs.iterdir()) == ["filler", "logs"], "no output, no temp file"
