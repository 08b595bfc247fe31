"""roofline.errors: environment failures (space, quota, read-only, permission) told in one line."""

import errno
import logging
import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from roofline.errors import (
    AFTERWARDS,
    CannotWrite,
    cannot_write,
    is_environmental,
    message,
    preflight,
    quiet_log_files,
)
from roofline.files.atomic import atomic_output
from roofline.nightly.store import append_run, read_history


def _error(code: int) -> OSError:
    return OSError(code, os.strerror(code))


@pytest.mark.parametrize(
    ("code", "cause", "remedy"),
    [
        (errno.ENOSPC, "No space left on device (ENOSPC)", "free space on the filesystem at {mount}"),
        (errno.EDQUOT, "Disk quota exceeded (EDQUOT)",
         "free space within your quota on the filesystem at {mount} (or ask for a larger quota)"),
        (errno.EROFS, "Read-only file system (EROFS)",
         "remount the filesystem at {mount} read-write (or run in a writable directory)"),
        (errno.EACCES, "Permission denied (EACCES)", "make {dir} writable for this user"),
        (errno.EPERM, "Operation not permitted (EPERM)",
         "make {dir} writable for this user (and clear an immutable flag: lsattr -d)"),
    ],
)
def test_one_line_names_the_output_the_cause_and_the_fix(tmp_path, code, cause, remedy):
    out = tmp_path / "data" / "classified" / "x.parquet"  # its folder does not exist yet
    line = message(cannot_write(out, _error(code)))
    # the nearest existing folder is where the file would go
    expected = remedy.format(mount=_mount(tmp_path), dir=tmp_path)
    assert line == f"roofline: cannot write {out}: {cause}; {expected} {AFTERWARDS}"
    assert "\n" not in line


def test_only_environment_errors_are_told_in_one_line():
    assert all(is_environmental(_error(c)) for c in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES))
    assert not is_environmental(_error(errno.ENOENT))  # a missing input is a bug or a bad input
    assert not is_environmental(ValueError("x"))
    # an error without an errno (e.g. pyarrow's own) stays as it is
    plain = OSError("no errno")
    assert cannot_write("x", plain) is plain


def test_an_error_without_a_filename_names_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert message(_error(errno.ENOSPC)).startswith(f"roofline: cannot access {tmp_path}: No space left")


def test_a_failed_atomic_write_names_the_output_and_leaves_the_old_file(tmp_path):
    out = tmp_path / "page.html"
    out.write_text("old\n")
    with pytest.raises(CannotWrite) as caught:
        with atomic_output(out) as tmp:
            tmp.write_text("half")
            raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] ...")  # as pyarrow says it
    assert caught.value.filename == str(out) and caught.value.errno == errno.ENOSPC
    assert caught.value.strerror == "No space left on device"
    assert out.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.html"], "no temp file left"


def test_other_errors_in_an_atomic_write_pass_unchanged(tmp_path):
    with pytest.raises(KeyError), atomic_output(tmp_path / "x") as _:
        raise KeyError("a bug")
    with pytest.raises(FileNotFoundError) as caught, atomic_output(tmp_path / "x") as _:
        raise FileNotFoundError(errno.ENOENT, "No such file", "input.csv")
    assert not isinstance(caught.value, CannotWrite) and caught.value.filename == "input.csv"
    assert list(tmp_path.iterdir()) == []


def test_a_failed_history_append_names_the_partition_and_keeps_the_store(tmp_path, monkeypatch):
    kernels = pd.DataFrame({"app": ["a"], "device": ["GPU"], "kernel": ["k"], "duration_s": [1e-3]})
    append_run(tmp_path, "2026-01-01", kernels)
    before = read_history(tmp_path)

    def full(self, path, **_):
        Path(path).write_bytes(b"PAR1 half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", full)
    for night in ("2026-01-01", "2026-01-02"):  # a rerun of a night, and a new night
        with pytest.raises(CannotWrite) as caught:
            append_run(tmp_path, night, kernels)
        assert caught.value.filename == str(tmp_path / f"run={night}" / "part.parquet")
    monkeypatch.undo()
    pd.testing.assert_frame_equal(read_history(tmp_path), before)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run=2026-01-01"], "no temp dir left"


def test_preflight_passes_where_files_can_be_written(tmp_path):
    (tmp_path / "data").mkdir()
    assert preflight(root=tmp_path) is None
    assert not list(tmp_path.rglob("*roofline-preflight*")), "the probe leaves nothing"


def _mount_tmpfs(path: Path, options: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {result.stderr.strip()}")


def test_preflight_names_a_read_only_output_directory(tmp_path):
    reports = tmp_path / "reports"
    _mount_tmpfs(reports, "size=1m")
    try:
        subprocess.run(["mount", "-o", "remount,ro", str(reports)], check=True)
        line = preflight(root=tmp_path)
        assert line == (f"roofline: cannot write {reports}/: Read-only file system (EROFS); remount the filesystem "
                        f"at {reports} read-write (or run in a writable directory) {AFTERWARDS}")
    finally:
        subprocess.run(["umount", str(reports)], check=True)


def test_preflight_names_a_full_filesystem(tmp_path):
    _mount_tmpfs(tmp_path / "fs", "size=64k")
    try:
        (tmp_path / "fs" / "filler").write_bytes(b"\0" * 64 * 1024)
        line = preflight(root=tmp_path / "fs")
        assert line is not None and line.startswith(f"roofline: cannot write {tmp_path / 'fs'}/: No space left")
    finally:
        subprocess.run(["umount", str(tmp_path / "fs")], check=True)


class _FullStream:
    """A log file's stream on a full disk."""

    def write(self, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    flush = write

    def close(self):
        pass


def test_a_log_file_that_cannot_be_written_says_so_once(tmp_path, capsys):
    logger = logging.getLogger("roofline.test_errors")
    handler = logging.FileHandler(tmp_path / "snakemake.log")
    handler.stream.close()
    handler.stream = _FullStream()
    logger.addHandler(handler)
    try:
        quiet_log_files(logger)
        quiet_log_files(logger)  # twice: still one line
        for i in range(3):
            logger.warning("record %d", i)
    finally:
        logger.removeHandler(handler)
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"roofline: cannot write {tmp_path / 'snakemake.log'}: No space left on device (ENOSPC); free space on the "
        f"filesystem at {_mount(tmp_path)} (until then this log file misses lines; the terminal shows them all)"
    ]


def test_other_log_file_errors_are_reported_as_usual(tmp_path, capsys):
    logger = logging.getLogger("roofline.test_errors.other")
    handler = logging.FileHandler(tmp_path / "snakemake.log")
    logger.addHandler(handler)
    try:
        quiet_log_files(logger)
        handler.handle(logging.makeLogRecord({"msg": "%d", "args": ("not a number",)}))  # a bug in a log call
    finally:
        logger.removeHandler(handler)
        handler.close()
    assert "--- Logging error ---" in capsys.readouterr().err


def _mount(path: Path) -> Path:
    while not os.path.ismount(path):
        path = path.parent
    return path
