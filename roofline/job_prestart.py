"""The jobs' server started as the workflow loads (roofline/job_server.py has the server).

Without it the run's first job starts the server and runs itself meanwhile, and the next jobs
wait for the server's imports (~1 s). Started as Snakemake reads the workflow, the server imports
them while Snakemake builds the DAG, and the first job already finds it (or waits for it a moment).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from roofline.job_client import THREAD_ENV, TMPDIR_ENV, usable

# Snakemake's options with which it runs no job: the workflow starts no server for them.
NO_JOB_OPTIONS = frozenset(
    "--dry-run --dryrun --touch --summary --detailed-summary --list --list-rules --list-target-rules --lt --dag "
    "--rulegraph --filegraph --d3dag --lint --unlock --cleanup-metadata --cm --cleanup-shadow --list-changes --lc "
    "--list-input-changes --li --list-params-changes --lp --list-code-changes --list-untracked --lu "
    "--delete-all-output --delete-temp-output --report --archive --containerize --print-compilation "
    "--generate-unit-tests --conda-create-envs-only --create-envs-only --list-conda-envs --conda-cleanup-envs "
    "--export-cwl --version --help --list-resources".split())
# Their one-letter forms (-n, -t, -l, -S, -D, -v, -h), alone or among others (-np).
NO_JOB_LETTERS = frozenset("ntlSDvh")
_LETTERS = re.compile(r"-[A-Za-z]+")


def interpreter_first_on_path() -> None:
    """Put this interpreter's bin folder first on PATH, so ``python`` in rule shells (and the server
    :func:`start_as_workflow_loads` starts) is this one."""
    folder = str(Path(sys.executable).parent)
    parts = os.environ.get("PATH", "").split(os.pathsep)
    if parts[:1] != [folder]:
        os.environ["PATH"] = os.pathsep.join([folder, *parts])


def runs_jobs(argv: list[str]) -> bool:
    """Whether Snakemake started with the arguments ``argv`` may run jobs: none of its options
    that run none (:data:`NO_JOB_OPTIONS`, :data:`NO_JOB_LETTERS`)."""
    for arg in argv:
        if arg.split("=", 1)[0] in NO_JOB_OPTIONS:
            return False
        if _LETTERS.fullmatch(arg) and NO_JOB_LETTERS & set(arg[1:]):
            return False
    return True


def start_as_workflow_loads(command: str, shell: str | None, argv: list[str]) -> bool:
    """Start the server in the background, detached, by ``shell -c "COMMAND -m roofline.job_server
    --start --owner PID"`` (``shell``: Snakemake's, /bin/sh where it has none; ``command``: how the
    rules' jobs start Python; PID: this process, which the server outlives only once a job came),
    where Snakemake will run jobs (:func:`runs_jobs` of its arguments ``argv``); whether one was started.

    Its environment is a job's: Snakemake's, with the thread and tmpdir variables Snakemake sets for
    a job of one thread (the server's key leaves them out, but NumPy sizes its thread pools from them
    at import, as in the server a one-thread job starts). Where the jobs' key differs all the same
    (another interpreter per rule), nothing is lost: the first job starts the server it needs, and
    this one ends with Snakemake.
    """
    import subprocess
    import tempfile

    if not usable() or not runs_jobs(argv):
        return False
    environ = {**os.environ, **dict.fromkeys(THREAD_ENV, "1"), **dict.fromkeys(TMPDIR_ENV, tempfile.gettempdir())}
    try:
        start = f"{command} -m roofline.job_server --start --owner {os.getpid()}"
        subprocess.Popen([shell or "/bin/sh", "-c", start], env=environ, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True, start_new_session=True)
    except OSError:
        return False
    return True
