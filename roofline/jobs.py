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
import multiprocessing
import os
import sys
import threading
from multiprocessing.connection import Connection, wait
from pathlib import Path

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


def _child(stage: str, argv: list[str], log: str, caller: Connection) -> None:
    threading.Thread(target=_exit_when_caller_dies, args=(caller,), daemon=True).start()
    # The job's stderr goes to its log, as `2> {log}` did for the shell command.
    descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(descriptor, 2)
    os.close(descriptor)
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115 - lives as long as the process
    status = importlib.import_module(f"roofline.{stage}").main(argv)
    sys.stderr.flush()
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
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    context = _server()
    # A pipe whose only writer is this process: the job exits when it reads EOF, so a killed
    # Snakemake leaves no job behind writing outputs.
    lifeline, keep = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(stage, stage_argv(options), str(log), lifeline),
                              name=f"roofline.{stage}")
    try:
        # multiprocessing reads a forkserver child's exit status from its sentinel exactly once, and
        # Process.start() polls the other children: two threads reading one status would leave one
        # with EOF (status 255). So starts and status reads take turns; the waiting does not.
        with _status_lock:
            process.start()
        lifeline.close()
        wait([process.sentinel])
        with _status_lock:
            process.join()
    finally:
        keep.close()
    if process.exitcode != 0:
        how = f"was killed by signal {-process.exitcode}" if process.exitcode < 0 else (
            f"exited with status {process.exitcode}")
        raise StageFailed(f"roofline.{stage} {how}; its log: {log}")
