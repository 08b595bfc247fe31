"""Run one stage of the workflow as a job: ``python -m roofline.jobs STAGE LOG [ARGS...]``.

Every analysis rule is a ``shell:`` command of this form, so a job is an ordinary process: it runs
the same whichever way Snakemake was started, under ``--software-deployment-method conda`` or
apptainer, on a cluster node, and ``--printshellcmds`` shows a command to copy and rerun.

The runner adds what a bare ``python -m roofline.<stage> ... 2> LOG`` lacks: a failure of the
environment (a full disk or quota, a read-only or forbidden folder) while the stage writes its
outputs or its log ends the job with one line naming the path and the fix, never a traceback, and
with exit status :data:`roofline.errors.EXIT_STATUS`; when the log itself cannot take that line, the
line goes to the job's own stderr, which Snakemake shows.
"""

from __future__ import annotations

import importlib
import io
import os
import sys

from roofline.jobs.stages import STAGES

USAGE = f"usage: python -m roofline.jobs {{{','.join(STAGES)}}} LOG [STAGE ARGUMENTS...]"

class _Log(io.TextIOBase):
    """The job's stderr: its log file (descriptor 2), written through at once. A write the
    environment refuses (the log's filesystem full, read-only) is remembered, not raised: the stage
    goes on, and the job then fails saying why (:func:`run`)."""

    encoding = "utf-8"
    errors = "backslashreplace"

    def __init__(self) -> None:
        self.error: OSError | None = None

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return 2

    def write(self, text: str) -> int:
        from roofline import errors

        data = text.encode(self.encoding, self.errors)
        try:
            while data and self.error is None:
                data = data[os.write(2, data):]
        except OSError as error:
            if not errors.is_environmental(error):
                raise
            self.error = error
        return len(text)


def _say(descriptor: int, line: str) -> None:
    """One line to the job's own stderr (Snakemake shows it), ignoring a stderr that is gone."""
    try:
        os.write(descriptor, (line + "\n").encode("utf-8", "backslashreplace"))
    except OSError:
        pass


def run(stage: str, log: str, argv: list[str]) -> int:
    """Run the stage's entry (:data:`roofline.jobs.stages.STAGES`) on ``argv`` with stderr in ``log``; return the job's
    exit status."""
    from roofline import errors  # here: a job handed to the warm server never needs it (its start-up)

    if stage not in STAGES:
        _say(2, f"roofline.jobs: unknown stage {stage!r}; expected one of {', '.join(STAGES)}")
        return 2
    job_stderr = os.dup(2)
    try:
        os.makedirs(os.path.dirname(log) or ".", exist_ok=True)
        descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError as error:
        if not errors.is_environmental(error):
            raise
        _say(job_stderr, errors.message(errors.cannot_write(log, error)))
        return errors.EXIT_STATUS
    os.dup2(descriptor, 2)
    os.close(descriptor)
    sys.stderr = stream = _Log()
    try:
        return _run_stage(stage, log, argv, stream, job_stderr)
    finally:
        os.close(job_stderr)  # a worker of the warm server runs other jobs after this one


def _run_stage(stage: str, log: str, argv: list[str], stream: _Log, job_stderr: int) -> int:
    from roofline import errors

    program = sys.argv
    sys.argv = [f"roofline.jobs {stage}", *argv]  # argparse names the job in its usage and errors
    try:
        status = importlib.import_module(STAGES[stage].module).main(argv)
    except OSError as error:
        if not errors.is_environmental(error):
            raise
        stream.write(errors.message(error) + "\n")
        if stream.error is not None:  # the log could not take the line either: the job's stderr does
            _say(job_stderr, errors.message(error))
        return errors.EXIT_STATUS
    except SystemExit as exit_:  # argparse's usage errors, a stage's explicit exit
        status = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if not isinstance(exit_.code, int | None):
            stream.write(f"{exit_.code}\n")
    finally:
        sys.argv = program
    if stream.error is not None:  # the outputs are whole, but the log is not: say so, fail
        _say(job_stderr, errors.message(errors.cannot_write(log, stream.error)))
        return errors.EXIT_STATUS
    return status or 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or argv[0] in ("-h", "--help"):
        _say(2, USAGE)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    return run(argv[0], argv[1], argv[2:])

