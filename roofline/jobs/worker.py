"""A worker of the warm server (:mod:`roofline.jobs.server`): a forked child that runs jobs, one
after another, each exactly as :func:`roofline.jobs.runner.main` would in the job's own process.

A child forked for each job pays for the fork in every job: its first writes to the server's
pages and its first use of fresh memory are thousands of page faults, a large part of a small
job's CPU time on a virtual machine. A worker pays that once and
then runs the next job the server hands it.

What makes a next job safe to run in the same process: between two jobs the worker puts back
what a job may change (the standard streams and descriptors 0-2, every descriptor the job left
open, the working directory, ``sys.stdout``/``sys.stderr``, the logging handlers and levels, the
warning filters and the record of warnings already shown), and each job sets its own directory,
umask, environment and arguments as a fresh child would. A worker runs another job only after
one that succeeded, left no thread running (but one idle between jobs) and holds less than
:data:`RESIDENT_MAX` bytes; at most :data:`JOBS_MAX` jobs; otherwise it exits, and the next job gets
a fresh one.

The rule this asks of every stage (:data:`roofline.jobs.stages.STAGES`): **a stage keeps no
process-global state that changes what a later job computes**: no module-level cache keyed on
anything but the code itself, no global it changes, no environment variable, locale, NumPy print
or error setting, random seed or working directory it sets without the job's own process ending with
it. What the worker puts back above is the list of things the package's stages do change; a stage
that needs something else must put it back itself or run in a process of its own. The test
``tests/jobs/test_server.py::test_different_stages_in_one_worker_write_what_fresh_processes_write``
holds the rule: parse, ceilings, classify_app and report run one after another in one worker and
write, byte for byte, what four fresh processes write.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import warnings
from typing import NoReturn

from roofline.jobs.client import ACCEPTED, PACKAGE, STATUS, read_request, send_request

JOBS_MAX = 200  # jobs per worker: a bound on anything a job could leave behind that goes unnoticed
# A worker that holds more after a job (a report, the judging) exits rather than keep it idle.
RESIDENT_MAX = int(os.environ.get("ROOFLINE_JOB_WORKER_RESIDENT_MAX", str(640 * 2**20)))


def die_with(parent: int) -> None:
    """Have the kernel kill this process when ``parent`` (the server) dies: the job's own process
    then reports the job failed, and nothing may go on writing its outputs."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # died before the request took effect
        os._exit(1)


def serve_jobs(request: dict, descriptors: list[int], connection: socket.socket, channel: socket.socket,
               inherited: list, parent: int) -> NoReturn:
    """In the forked child: run the job ``request`` (descriptors 0-2 and its connection), then
    the jobs the server sends over ``channel``, telling it each one's exit status; exit when no
    more may run here (never returns). ``inherited``: the server's sockets, selector and lock,
    which the worker must not hold.

    The worker, not the server, tells a job it was accepted, and only once it is bound to die
    with the server: so a job told "accepted" never runs itself beside a worker running it, and a
    job that hears nothing (a server gone before this point) may safely run itself."""
    import signal

    status = 1
    try:
        die_with(parent)
        for held in inherited:
            os.close(held) if isinstance(held, int) else held.close()
        os.setpgid(0, 0)
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(number, signal.SIG_DFL)
        between = _Between(channel.fileno(), job_descriptors={connection.fileno(), *descriptors})
        for done in range(1, JOBS_MAX + 1):
            outcome = run_job(request, descriptors, connection)
            between.restore()
            if outcome is None:  # the job's process was gone before it started
                break
            status = outcome
            if status != 0 or done == JOBS_MAX or not between.reusable():
                break
            channel.sendall(STATUS.pack(status))
            job = next_job(channel)
            if job is None:  # the server has enough idle workers, or ends
                status = 0
                break
            request, descriptors, connection = job
    except BaseException:  # noqa: BLE001 - the worker must end with an exit status, never unwind into the server's loop
        pass
    finally:
        os._exit(status if isinstance(status, int) and 0 <= status < 256 else 1)


def run_job(request: dict, descriptors: list[int], connection: socket.socket) -> int | None:
    """Become the job ``request`` and run it: its exit status, or None when its process is gone
    before it starts (nobody waits for it)."""
    import time
    import traceback

    try:
        connection.sendall(ACCEPTED)
    except OSError:
        return None
    finally:
        connection.close()
    status = 1
    try:
        for target, descriptor in enumerate(descriptors):
            os.dup2(descriptor, target)
            os.close(descriptor)
        os.chdir(request["cwd"])
        os.umask(request["umask"])
        os.environ.clear()
        os.environ.update(request["env"])
        time.tzset()
        import tempfile

        tempfile.tempdir = None
        sys.argv = [os.path.join(PACKAGE, "jobs", "__main__.py"), *request["argv"]]
        from roofline.jobs import runner

        status = runner.main(request["argv"])
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:  # noqa: BLE001 - the job's traceback goes to the job's stderr, as in its own process
        traceback.print_exc()
        status = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    return status if isinstance(status, int) else 1


def next_job(channel: socket.socket) -> tuple[dict, list[int], socket.socket] | None:
    """The next job the server hands this worker: its request, descriptors 0-2 and connection;
    None when the server closes the channel instead."""
    try:
        data, received, _, _ = socket.recv_fds(channel, 1 << 16, 4)
        if not data:
            return None
        if len(received) != 4:
            raise ConnectionError("a job comes with four descriptors")
        return read_request(data, channel), received[:3], socket.socket(fileno=received[3])
    except (OSError, ValueError):
        return None


def hand_over(channel: socket.socket, request: dict, descriptors: list[int], connection: socket.socket) -> bool:
    """The server's side of :func:`next_job`: send the job to an idle worker; False when the
    worker is gone."""
    try:
        send_request(channel, request, [*descriptors, connection.fileno()])
    except OSError:
        return False
    return True


class _Between:
    """What the worker puts back after each job (see the module's docstring)."""

    def __init__(self, channel: int, job_descriptors: set[int]) -> None:
        # the worker's own descriptors: its channel and any a preloaded module holds
        self.keep = (set(_open_descriptors()) - job_descriptors - {0, 1, 2}) | {channel}
        self.streams = (sys.stdout, sys.stderr)
        root = logging.getLogger()
        self.handlers, self.level = list(root.handlers), root.level
        self.levels = {name: logger.level for name, logger in logging.Logger.manager.loggerDict.items()
                       if isinstance(logger, logging.Logger)}
        self.disabled = logging.root.manager.disable
        self.filters = list(warnings.filters)

    def restore(self) -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        sys.stdout, sys.stderr = self.streams
        root = logging.getLogger()
        for handler in list(root.handlers):
            if handler not in self.handlers:
                root.removeHandler(handler)
                handler.close()
        root.setLevel(self.level)
        for name, logger in logging.Logger.manager.loggerDict.items():
            if isinstance(logger, logging.Logger):
                logger.setLevel(self.levels.get(name, logging.NOTSET))
        logging.disable(self.disabled)
        warnings.filters[:] = self.filters
        mutated = getattr(warnings, "_filters_mutated", None)
        if mutated is not None:  # forget the warnings shown: the next job shows them again, as its own process would
            mutated()
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):  # the job's streams close: its process and Snakemake see their end
            os.dup2(null, target)
        os.close(null)
        for descriptor in _open_descriptors():
            if descriptor > 2 and descriptor not in self.keep:
                try:
                    os.close(descriptor)
                except OSError:
                    pass
        os.chdir("/")

    def reusable(self) -> bool:
        """Whether another job may run here: no thread left running but those idle between jobs (the
        input hashing thread, :mod:`roofline.parse.input_hash`), and not too much memory held."""
        import threading

        current = threading.current_thread()
        if any(thread is not current and not getattr(thread, "idle_between_jobs", lambda: False)()
               for thread in threading.enumerate()):
            return False
        try:
            with open("/proc/self/statm") as statm:
                resident = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            return False
        return resident < RESIDENT_MAX


def _open_descriptors() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return []
