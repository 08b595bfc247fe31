"""Faults: a workflow killed at random points resumes to the same outputs; concurrent runs are refused.

A small config (3 tiny apps: copies of data/examples/textbook.yaml) is run once without
interruption (the reference). Meanwhile (the first run paused) a second Snakemake started in the same directory must be
refused by Snakemake's lock ("Directory cannot be locked") without touching anything.

Then, in another directory, the same workflow is killed with SIGKILL (the whole process group:
Snakemake and its jobs) 20 times at seeded random points: mostly while jobs run (a random delay
after the run's first job started), sometimes while Snakemake is still building the DAG. After every
kill, every output that exists is whole (atomic writes: temp file + rename). Each rerun follows the
documented recovery: ``snakemake --unlock`` (a SIGKILL leaves the lock behind; after the first kill
the test removes ``.snakemake/locks/*`` itself, which is what ``--unlock`` does, to save a Snakemake
start per kill), then ``snakemake --rerun-incomplete``. Whenever a rerun completes, and at the end,
its outputs must equal the reference: Parquet tables compared with pandas, HTML pages and
status.json byte for byte (the report embeds no timestamp; the tracking stage's wall-clock run
time is masked, see WALL_CLOCK). When a pipeline completes before the
20 kills are spent, ``data/`` and ``reports/`` are removed and the kills go on.

Environment failures (issue 18), each on a real filesystem made for the test (a tmpfs: the tests
skip, saying why, where mounting one is not allowed): the disk fills during the run (too small for
the pages; or filled by another program), an output folder is forbidden (chmod, chattr +i) or
read-only. Each failed job says so in one line naming the output and the fix, no traceback reaches
the terminal, and once the cause is fixed a plain rerun writes the reference outputs.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, snakemake_command

pytestmark = pytest.mark.slow

SEED = 20_261_129
KILLS = 20
APPS = ("alpha", "beta", "gamma")
JOB_START = re.compile(r"^\s*(local)?rule \w+:\s*$")
JOB_RULE = re.compile(r"^\s*(local)?rule (\w+):\s*$")
# The nightly tracking stage records the wall-clock time of the run (data/history, trends.html,
# regressions.json): ISO 8601 date-times are masked before comparing; everything else must be equal
# byte for byte (the summary and app pages, status.json) or, for Parquet, value for value.
WALL_CLOCK = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)?")
EARLY_KILL = 0.15  # share of kills while Snakemake is starting (before any job)


def _setup(workdir: Path) -> Path:
    (workdir / "inputs").mkdir(parents=True)
    for app in APPS:
        shutil.copy(REPO / "data" / "examples" / "textbook.yaml", workdir / "inputs" / f"{app}.yaml")
    (workdir / "config.yaml").write_text("# hand-made test config\ninputs: [inputs/*]\nrun_id: '2026-01-01'\n")
    return workdir


def _command(workdir: Path, *extra: str) -> list[str]:
    return snakemake_command(workdir, "--cores", "2", *extra)


class Run:
    """A Snakemake run in its own process group, its output read as it comes."""

    def __init__(self, workdir: Path, *extra: str) -> None:
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            _command(workdir, *extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True, cwd=workdir,
        )
        self.lines: list[str] = []
        self.first_job = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)
            if JOB_START.match(line):
                self.first_job.set()

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_for_first_job(self) -> bool:
        """True when a job started; False when Snakemake ended first."""
        while self.proc.poll() is None:
            if self.first_job.wait(0.05):
                return True
        return self.first_job.is_set()

    def kill_after(self, delay: float) -> bool:
        """SIGKILL the whole process group ``delay`` s from now, unless it ends first; True if killed."""
        deadline = time.monotonic() + delay
        while self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if self.proc.poll() is not None:
            return False
        os.killpg(self.proc.pid, signal.SIGKILL)
        return True

    def finish(self, timeout: float = 600) -> int:
        code = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=30)
        return code


def _outputs(workdir: Path) -> list[Path]:
    """The workflow's outputs: data tables, report pages, status (hidden temp files and dirs excluded)."""
    # Hidden names are work in progress by design: atomic writes' temp files, the history store's
    # temp dirs (readers ignore them; the next append removes stale ones).
    found = [p for folder in ("data", "reports") for p in (workdir / folder).rglob("*")
             if p.is_file() and not any(part.startswith(".") for part in p.relative_to(workdir).parts)]
    return sorted(p.relative_to(workdir) for p in found)


def _masked(data: bytes) -> bytes:
    return WALL_CLOCK.sub(b"<wall-clock time>", data)


def _masked_frame(frame: pd.DataFrame) -> pd.DataFrame:
    text = frame.select_dtypes(include=["object", "string"]).columns
    return frame.assign(**{c: frame[c].astype(str).str.replace(WALL_CLOCK.pattern.decode(), "<wall-clock time>",
                                                                 regex=True) for c in text})


def _assert_identical(workdir: Path, reference: Path) -> None:
    files = _outputs(workdir)
    assert files == _outputs(reference), "the same output files as the uninterrupted run"
    for rel in files:
        if rel.suffix == ".parquet":
            pd.testing.assert_frame_equal(_masked_frame(pd.read_parquet(workdir / rel)),
                                          _masked_frame(pd.read_parquet(reference / rel)))
        else:
            assert _masked((workdir / rel).read_bytes()) == _masked((reference / rel).read_bytes()), f"{rel} differs"


def _assert_whole(workdir: Path) -> None:
    """Every output present is complete: atomic writes leave the old file or none, never half."""
    for rel in _outputs(workdir):
        path = workdir / rel
        if rel.suffix == ".parquet":
            pd.read_parquet(path)
        elif rel.suffix == ".html":
            assert path.read_bytes().rstrip().endswith(b"</html>"), f"{rel} is cut"
        elif rel.suffix == ".json":
            import json

            json.loads(path.read_text())


def _unlock(workdir: Path, with_snakemake: bool) -> None:
    if with_snakemake:
        result = subprocess.run(_command(workdir, "--unlock"), capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
    else:
        for lock in (workdir / ".snakemake" / "locks").glob("*"):
            lock.unlink()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run, with a second run in the same directory refused meanwhile."""
    work = _setup(tmp_path_factory.mktemp("reference"))
    run = Run(work)
    locks = work / ".snakemake" / "locks"
    while run.proc.poll() is None and not any(locks.glob("*")):
        time.sleep(0.05)
    assert run.wait_for_first_job(), run.output[-3000:]
    assert run.proc.poll() is None, "the first run must still be running"
    # The first run is paused (SIGSTOP to its process group) while the second one starts, so the
    # check does not depend on which of the two a busy machine lets finish first.
    os.killpg(run.proc.pid, signal.SIGSTOP)
    try:
        # As a scheduler would rerun (README): with --rerun-incomplete, only the lock can refuse it.
        second = subprocess.run(_command(work, "--rerun-incomplete"), capture_output=True, text=True, timeout=300)
        still_running = run.proc.poll() is None
    finally:
        os.killpg(run.proc.pid, signal.SIGCONT)
    code = run.finish()
    assert code == 0, run.output[-5000:]
    return work, run, second, still_running, time.monotonic() - run.started


def test_a_second_run_in_the_same_directory_is_refused(reference):
    work, _, second, still_running, _ = reference
    assert still_running, "the first run ended while it was paused"
    assert second.returncode != 0
    assert "Directory cannot be locked" in second.stdout + second.stderr
    assert "Traceback" not in second.stdout + second.stderr
    _assert_whole(work)
    status = (work / "reports" / "status.json").read_text()
    assert '"ok": true' in status


def test_killed_runs_resume_to_identical_outputs(reference, tmp_path):
    ref, ref_run, _, _, ref_seconds = reference
    rng = random.Random(SEED)
    work = _setup(tmp_path / "work")
    jobs_phase = max(ref_seconds - 3.0, 5.0)
    kills, runs, completed, log = 0, 0, 0, []
    while kills < KILLS:
        run = Run(work, "--rerun-incomplete")
        runs += 1
        early = rng.random() < EARLY_KILL
        if early:
            delay, where = rng.uniform(0.0, 1.5), "start"
        else:
            delay, where = rng.uniform(0.0, 0.15 * jobs_phase), "jobs"
            run.wait_for_first_job()
        killed = run.kill_after(delay)
        code = run.finish()
        started = [m.group(2) for m in map(JOB_RULE.match, run.lines) if m]
        log.append(f"run {runs}: {'killed' if killed else f'rc={code}'} {delay:.2f}s after {where}; "
                   f"jobs started: {' '.join(started) or '-'}")
        if killed:
            kills += 1
            _assert_whole(work)
            _unlock(work, with_snakemake=kills == 1)
            continue
        assert code == 0, "\n".join(log) + "\n" + run.output[-5000:]
        _assert_identical(work, ref)
        completed += 1
        shutil.rmtree(work / "data")
        shutil.rmtree(work / "reports")
    final = Run(work, "--rerun-incomplete")
    assert final.finish() == 0, "\n".join(log) + "\n" + final.output[-5000:]
    _assert_identical(work, ref)
    again = subprocess.run(_command(work), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr, "\n".join(log)
    print(f"{kills} kills in {runs} runs, {completed} completed pipelines before the last:", *log, sep="\n")


# -- environment failures: a full, read-only or forbidden output directory (issue 18) --------------
# One line per failed job, from roofline.errors, naming the output and the fix; then, once the cause
# is fixed, a plain rerun completes with the reference outputs.
ONE_LINE = re.compile(r"^roofline: cannot write (\S+): (.+) \((E[A-Z]+)\); .+ and rerun: outputs written so far are "
                      r"complete or absent$", re.MULTILINE)
FAILED_JOB = re.compile(r"^Error in rule (\w+):$", re.MULTILINE)
TRACEBACK = "Traceback (most recent call last)"
# The workflow checks its output directories before Snakemake touches an output (a read-only one
# or a full disk at the start would otherwise fail inside Snakemake, with its own traceback).
PREFLIGHT = "preflight(" in (REPO / "workflow" / "rules" / "common.smk").read_text()
needs_preflight = pytest.mark.skipif(
    not PREFLIGHT, reason="workflow/rules/common.smk does not call roofline.errors.preflight() yet")


@contextlib.contextmanager
def _tmpfs(folder: Path, size: str):
    """A tmpfs of ``size`` at ``folder`` (made if missing), unmounted afterwards; skip the test with
    the reason where this machine does not allow mounting one (it needs root)."""
    folder.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        pytest.skip("no mount command: cannot make a small filesystem")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "--lazy", str(folder)], check=True)


def _remount(folder: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(folder)], check=True, capture_output=True)


def _fill(folder: Path) -> Path:
    """Fill ``folder``'s filesystem to the last byte with one file; return that file."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as out, contextlib.suppress(OSError):
        while True:
            out.write(b"\0" * 65536)
    with open(filler, "ab", buffering=0) as out, contextlib.suppress(OSError):
        while True:
            out.write(b"\0" * 512)
    return filler


def _run_to_end(workdir: Path, *extra: str, wait_for: re.Pattern | None = None, then=None,
                prefix: tuple[str, ...] = ()) -> tuple[int, str]:
    """Run the workflow in ``workdir``; when a line matches ``wait_for``, call ``then()``."""
    command = [*prefix, *_command(workdir, *extra)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=workdir,
                            start_new_session=True)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if wait_for is not None and wait_for.match(line):
                then()
                wait_for = None
        return proc.wait(timeout=600), "".join(lines)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _assert_one_line_per_failed_job(output: str, cause: str) -> list[str]:
    """No traceback; each failed job's message is one line naming one of its outputs and ``cause``;
    return the paths named."""
    assert TRACEBACK not in output, output[-6000:]
    assert "--- Logging error ---" not in output, output[-6000:]
    failed = FAILED_JOB.findall(output)
    lines = ONE_LINE.findall(output)
    assert len(lines) == len(failed), f"one line per failed job ({failed}):\n{output[-6000:]}"
    assert all(f"{text} ({name})" == cause for _, text, name in lines), lines
    return [path for path, _, _ in lines]


def _assert_no_temp_files(workdir: Path) -> None:
    """A failed write leaves no temp file: not the atomic writes' (.<name>.*.tmp), not the history
    store's (.tmp-<pid>-*)."""
    left = [p for folder in ("data", "reports") for p in (workdir / folder).rglob(".*") if p.exists()]
    assert left == [], left


def test_a_full_disk_fails_each_job_in_one_line_and_a_rerun_completes(reference, tmp_path):
    """The output filesystem (a 2 MB tmpfs holding the whole working directory) fills during the
    run: the tables and logs fit (1.4 MB), the report pages and their shared assets (1.5 MB) do
    not. After it is enlarged, a plain rerun
    completes with the reference outputs."""
    ref = reference[0]
    with _tmpfs(tmp_path / "small", "2m") as small:
        work = _setup(small)
        code, output = _run_to_end(work)
        assert code != 0, output[-3000:]
        named = _assert_one_line_per_failed_job(output, "No space left on device (ENOSPC)")
        assert named, f"some job hits the full disk:\n{output[-6000:]}"
        assert all(p.startswith(("data/", "reports/", "logs/")) for p in named), named
        assert f"free space on the filesystem at {small} and rerun" in output
        _assert_whole(work)
        _assert_no_temp_files(work)
        _remount(small, "size=64m")
        code, output = _run_to_end(work)
        assert code == 0, output[-5000:]
        _assert_identical(work, ref)


def test_a_disk_filled_by_another_program_during_the_run(reference, tmp_path):
    """Another program fills the disk once the first job finished (Snakemake's metadata and log
    file are on it too): no traceback, Snakemake's log file says it once; freed, a rerun completes."""
    ref = reference[0]
    with _tmpfs(tmp_path / "disk", "32m") as disk:
        work = _setup(disk)
        filler: list[Path] = []
        code, output = _run_to_end(work, wait_for=re.compile(r"^Finished jobid"),
                                   then=lambda: filler.append(_fill(disk)))
        assert filler and code != 0, output[-3000:]
        _assert_one_line_per_failed_job(output, "No space left on device (ENOSPC)")
        assert "No space left on device" in output
        assert len(re.findall(r"^roofline: cannot write \S+\.snakemake/log/", output, re.MULTILINE)) <= 1
        _assert_whole(work)
        filler[0].unlink()
        code, output = _run_to_end(work)
        assert code == 0, output[-5000:]
        _assert_identical(work, ref)


def _forbid_with_chmod(folder: Path) -> tuple[tuple[str, ...], str]:
    """``folder`` not writable: chmod, and as root, Snakemake without the capability to override it."""
    if os.geteuid() == 0:
        if shutil.which("capsh") is None:
            pytest.skip("running as root without capsh: chmod cannot forbid a write")
        prefix = ("capsh", "--drop=cap_dac_override,cap_dac_read_search", "--", "-c", '"$0" "$@"')
    else:
        prefix = ()
    folder.chmod(0o555)
    return prefix, "Permission denied (EACCES)"


def _forbid_with_chattr(folder: Path) -> tuple[tuple[str, ...], str]:
    """``folder`` immutable (chattr +i): even root may not create a file in it."""
    if os.geteuid() != 0 or shutil.which("chattr") is None:
        pytest.skip("chattr +i needs root and the chattr command")
    flagged = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True)
    if flagged.returncode != 0:
        pytest.skip(f"this filesystem has no immutable flag: {flagged.stderr.strip()}")
    return (), "Operation not permitted (EPERM)"


def _allow(folder: Path) -> None:
    if shutil.which("chattr") is not None:
        subprocess.run(["chattr", "-i", str(folder)], capture_output=True)
    folder.chmod(0o755)


@pytest.mark.parametrize("forbid", [_forbid_with_chmod, _forbid_with_chattr], ids=["EACCES", "EPERM"])
def test_a_forbidden_output_directory_fails_the_job_in_one_line(reference, tmp_path, forbid):
    """``reports/apps`` (there from an earlier setup, holding another user's file) cannot take new
    files: each app's job fails in one line naming its page; the rest of the run completes. Once
    the folder is writable, a plain rerun completes with the reference outputs."""
    ref = reference[0]
    work = _setup(tmp_path / "work")
    apps = work / "reports" / "apps"
    apps.mkdir(parents=True)
    (apps / ".owner").write_text("hand-made: another user's file\n")  # hidden: not an output
    try:
        prefix, cause = forbid(apps)
        code, output = _run_to_end(work, prefix=prefix)
        assert code != 0, output[-3000:]
        named = _assert_one_line_per_failed_job(output, cause)
        assert FAILED_JOB.findall(output) == ["classify_app"] * len(APPS), output[-6000:]
        assert sorted(named) == [f"reports/apps/{app}.html" for app in APPS], named
        assert f"make {apps} writable for this user" in output
        assert json.loads((work / "reports" / "status.json").read_text())["ok"] is True, "the other jobs ran"
    finally:
        _allow(apps)
    code, output = _run_to_end(work)
    assert code == 0, output[-5000:]
    _assert_identical(work, ref)


@needs_preflight
def test_a_read_only_output_directory_stops_the_run_in_one_line(reference, tmp_path):
    """``reports/`` is a read-only filesystem: the run stops before any job, in one line naming
    it; remounted read-write, a plain rerun completes with the reference outputs."""
    ref = reference[0]
    work = _setup(tmp_path / "work")
    with _tmpfs(work / "reports", "64m") as reports:
        _remount(reports, "ro")
        code, output = _run_to_end(work)
        assert code == 1 and TRACEBACK not in output, output[-5000:]
        assert ONE_LINE.findall(output) == [(f"{reports}/", "Read-only file system", "EROFS")], output[-3000:]
        assert f"remount the filesystem at {reports} read-write" in output
        assert not FAILED_JOB.findall(output) and not (work / "data").exists(), "no job ran"
        _remount(reports, "rw")
        code, output = _run_to_end(work)
        assert code == 0, output[-5000:]
        _assert_identical(work, ref)


@needs_preflight
def test_a_disk_full_before_the_run_stops_it_in_one_line(reference, tmp_path):
    ref = reference[0]
    with _tmpfs(tmp_path / "disk", "16m") as disk:
        work = _setup(disk)
        filler = _fill(disk)
        code, output = _run_to_end(work)
        assert code == 1 and TRACEBACK not in output and "--- Logging error ---" not in output, output[-5000:]
        assert ONE_LINE.findall(output) == [(f"{disk}/", "No space left on device", "ENOSPC")], output[-3000:]
        filler.unlink()
        code, output = _run_to_end(work)
        assert code == 0, output[-5000:]
        _assert_identical(work, ref)
