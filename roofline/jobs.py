"""Run a stage's ``main(argv)`` for a Snakemake job in a process forked from a preloaded server.

Starting ``python -m roofline.<stage>`` costs ~0.35 s of interpreter start and imports (pandas,
pyarrow) per job: at 2,000 launches per app that was 70 % of an app's CPU time (three stage jobs
of ~0.15 s work each). Running the stages in Snakemake's own process instead would serialise them
on the GIL (measured: two threads ran 50 apps no faster than one). So each job still gets its own
process - its own stderr in the job's log, its own exit status, true parallelism - but forked from
a server that imported the stages once (multiprocessing's ``forkserver``): a few ms per job.

The server starts with the first job and exits with Snakemake's process; a job's process exits
when the process that started it is gone, so nothing writes outputs after a killed run.
"""

from __future__ import annotations

import importlib
import io
import multiprocessing
import os
import sys
import threading
from multiprocessing.connection import Connection, wait
from pathlib import Path

from roofline import errors

# Modules the server imports once, so that no job pays for them. "__main__" (Snakemake's entry
# script, import-guarded) too: else every job would re-import it as ``__mp_main__`` when it starts.
PRELOAD = ["__main__", "pandas", "pyarrow.csv", "pyarrow.parquet", "roofline.parse", "roofline.ceilings",
           "roofline.catalog", "roofline.classify", "roofline.report", "roofline.track", "roofline.status"]
STAGES = {"parse", "ceilings", "classify", "report", "track", "status"}

_context_lock = threading.Lock()
_status_lock = threading.Lock()
_context: multiprocessing.context.BaseContext | None = None


class StageFailed(RuntimeError):
    """A stage's process exited with a non-zero status (its log says why)."""


def _server() -> multiprocessing.context.BaseContext:
    """The forkserver context (started lazily by the first job), or ``spawn`` where fork is absent."""
    global _context
    with _context_lock:
        if _context is None:
            if "forkserver" in multiprocessing.get_all_start_methods():
                context = multiprocessing.get_context("forkserver")
                context.set_forkserver_preload(PRELOAD)
            else:  # pragma: no cover - Windows: correct, just without the saving
                context = multiprocessing.get_context("spawn")
            _context = context
    return _context


def _exit_when_caller_dies(caller: Connection) -> None:
    """Block until the caller's end of the pipe closes (it ended, or was killed); then exit at once.

    The server cannot do this for its children: they keep its lifeline open while they run."""
    try:
        caller.recv_bytes()
    except (EOFError, OSError):
        pass
    os._exit(1)


class _Log(io.TextIOBase):
    """The job's stderr: its log file (descriptor 2), written through at once. A write the
    environment refuses (the log's filesystem full, read-only) is remembered, not raised: the stage
    goes on, and the job then fails saying why (:func:`_child`)."""

    encoding = "utf-8"
    errors = "backslashreplace"

    def __init__(self) -> None:
        self.error: OSError | None = None

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return 2

    def write(self, text: str) -> int:
        data = text.encode(self.encoding, self.errors)
        try:
            while data and self.error is None:
                data = data[os.write(2, data):]
        except OSError as error:
            if not errors.is_environmental(error):
                raise
            self.error = error
        return len(text)


def _child(stage: str, argv: list[str], log: str, caller: Connection, report: Connection) -> None:
    """A job's process: stderr to ``log``, then ``roofline.<stage>.main(argv)``.

    A failure of the environment (out of space or quota, read-only, permission denied) while the
    stage writes its outputs or its log ends the job with one line and no traceback: in its log,
    and sent through ``report`` to the caller where the log could not take it."""
    threading.Thread(target=_exit_when_caller_dies, args=(caller,), daemon=True).start()
    # The job's stderr goes to its log, as `2> {log}` did for the shell command.
    try:
        descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError as error:
        if not errors.is_environmental(error):
            raise
        report.send(errors.message(errors.cannot_write(log, error)))
        sys.exit(errors.EXIT_STATUS)
    os.dup2(descriptor, 2)
    os.close(descriptor)
    sys.stderr = stream = _Log()
    try:
        status = importlib.import_module(f"roofline.{stage}").main(argv)
    except OSError as error:
        if not errors.is_environmental(error):
            raise
        stream.write(errors.message(error) + "\n")
        status = errors.EXIT_STATUS
        if stream.error is not None:  # the log could not take the line either: the caller says it
            report.send(errors.message(error))
    else:
        if stream.error is not None:  # the outputs are whole, but the log is not: say so, fail
            report.send(errors.message(errors.cannot_write(log, stream.error)))
            status = errors.EXIT_STATUS
    sys.exit(status or 0)


def stage_argv(options: dict) -> list[str]:
    """Command-line arguments from keyword options: ``run_id="x"`` -> ``--run-id=x``; a list or other
    non-string sequence (a rule's named input) -> ``--kernels a b``."""
    argv: list[str] = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, str | int | float | os.PathLike):
            argv.append(f"{flag}={value}")  # "=": an empty value or one starting with "-" stays a value
        else:
            argv += [flag, *(str(v) for v in value)]
    return argv


def run_stage(stage: str, log: str | os.PathLike, /, **options) -> None:
    """Run ``roofline.<stage>.main(argv)`` (argv from ``options``, see :func:`stage_argv`) in a
    forked process with stderr to ``log``, and wait for it.

    Raises
    ------
    StageFailed
        If the process exits with a non-zero status (an uncaught exception's traceback is in the log).
    """
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; expected one of {sorted(STAGES)}")
    errors.quiet_log_files()  # Snakemake's own log file: one line when it cannot be written
    try:
        Path(log).parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        if not errors.is_environmental(error):
            raise
        raise StageFailed(errors.message(errors.cannot_write(log, error))) from None
    context = _server()
    # A pipe whose only writer is this process: the job exits when it reads EOF, so a killed
    # Snakemake leaves no job behind writing outputs.
    lifeline, keep = context.Pipe(duplex=False)
    # And one the job writes to: the one line about an environment failure its log could not take.
    said, report = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(stage, stage_argv(options), str(log), lifeline, report),
                              name=f"roofline.{stage}")
    try:
        # multiprocessing reads a forkserver child's exit status from its sentinel exactly once, and
        # Process.start() polls the other children: two threads reading one status would leave one
        # with EOF (status 255). So starts and status reads take turns; the waiting does not.
        with _status_lock:
            process.start()
        lifeline.close()
        report.close()
        wait([process.sentinel])
        with _status_lock:
            process.join()
        line = _received(said)
    finally:
        keep.close()
        said.close()
    if line is not None:
        raise StageFailed(line)
    if process.exitcode == errors.EXIT_STATUS:
        raise StageFailed(f"roofline.{stage} stopped on a failure of its environment (space, quota, read-only, "
                          f"permission); its log says which, in one line: {log}")
    if process.exitcode != 0:
        how = f"was killed by signal {-process.exitcode}" if process.exitcode < 0 else (
            f"exited with status {process.exitcode}")
        raise StageFailed(f"roofline.{stage} {how}; its log: {log}")


def _received(connection: Connection) -> str | None:
    """The message a job sent before it ended, if any."""
    try:
        return connection.recv() if connection.poll() else None
    except EOFError:
        return None
