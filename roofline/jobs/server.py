"""A warm process that the workflow's jobs fork from, so that a job does not import pandas & co.

Every analysis rule is ``python -m roofline.jobs STAGE LOG ...``, an ordinary process. Starting one
costs ~0.45 s of imports (pandas, pyarrow, Altair) before any work, which is most of a parse job:
50 apps pay it 50 times. So the first job of a run starts this server in the background (and runs
itself as usual); a job arriving while the server still imports its modules waits for it, up to
:data:`roofline.jobs.client.STARTING_WAIT_SECONDS` (the server's marker file names its process until
it listens), rather than pay the same imports on the core the server needs; later jobs hand their
command line, working directory, environment and standard streams to it over a Unix socket, and a
worker forked from it runs the job exactly as :func:`roofline.jobs.runner.main` would in the job's own
process; the job exits with the status the server sends it when the worker says the job ended, or
as the worker ends (the server watches each worker's pidfd: :func:`watch_ending`). A worker then
waits for the next job (:mod:`roofline.jobs.worker`: a fresh fork's page faults cost every job CPU
time; what a worker puts back between two jobs, and when it exits instead, is described there).

What makes that safe:

* **Same code, same interpreter.** The socket's name is a hash of the interpreter, ``sys.path``,
  the environment (less the thread-count variables Snakemake sets per rule), the size and
  modification time of every file of the package and those of the ``site-packages`` directories
  (an install or removal changes them); a job whose hash differs starts its own server. A server
  exits after :data:`IDLE_SECONDS` without jobs.
* **Same job.** The worker takes the job's working directory, umask, environment and file
  descriptors 0-2 before it runs it, and the job's exit status (75, 2, ...) is the job's. When the
  job's process dies (Snakemake cancels it), the server kills the worker's process group; when the
  server dies, the kernel kills its workers and the job fails saying so.
* **Only where a job's processes may outlive it.** Not under a batch scheduler's job (SLURM,
  PBS, LSF, Flux: ending that job would kill the server with another job's child), not in a
  job's own Apptainer container (later jobs would run in the first job's), not where ``fork`` is
  not the rule (macOS, Windows), not when ``ROOFLINE_JOB_SERVER=off``, and only through a private
  directory (mode 0700, this user's) and peers of this user.
* **Nothing lost when it is not there.** A job that finds no server, or one that closes before
  taking it, runs in its own process, as before.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import sys
from typing import TYPE_CHECKING

from roofline.jobs.client import (
    STATUS,
    read_request,
    receive_exactly,
    server_key,
    socket_path,
    starting_marker,
    usable,
    without_huge_pages,
)
from roofline.jobs.stages import STAGES

if TYPE_CHECKING:
    import selectors

IDLE_SECONDS = float(os.environ.get("ROOFLINE_JOB_SERVER_IDLE", "30"))
# What the stage jobs import, at the top or on first use: imported once here, so every child has them.
# The first ones are what a run's first jobs (parse) import: the server listens once it has them
# (about half of the imports), and imports the others, in the order the stages come, while no job
# runs or waits (a job's end is heard at once; a job arriving meanwhile waits for one module at most;
# a worker forked before a module was imported imports it itself if its job needs it).
PRELOAD_FIRST = ("pandas", "pyarrow.parquet", "pyarrow.compute", "pyarrow.csv", "ncu_report", STAGES["parse"].module,
                 # the readers the parse facade imports on first use, per input kind
                 "roofline.parse.readers.ncu_csv", "roofline.parse.readers.ncu_rep", "roofline.parse.readers.ncu_log",
                 "roofline.jobs.worker")
PRELOAD = (*PRELOAD_FIRST, "roofline.parse.readers.what_if", *(stage.module for stage in STAGES.values()),
           # what the stages import on first use
           "roofline.ceilings.catalog", "roofline.pages.trends", "roofline.pages.tonight", "roofline.pages.compare")
IDLE_WORKERS_MAX = max(2, os.cpu_count() or 2)  # idle workers kept: as many as jobs run at once, as a rule
WORKER_IDLE_SECONDS = 2.0  # how long a worker waits for a next job: Snakemake starts one within ~0.1 s
# How often the server looks for ended children and its idle time where nothing wakes it sooner.
POLL_SECONDS = 0.05
ENDED = "ended"  # the selector's data for a child's pidfd (watch_ending)
# What the server does without when it fails: a gone peer, an unregistered socket, a vanished file.
_IGNORED = (OSError, KeyError, ValueError)

def _accept(listener: socket.socket) -> tuple[socket.socket, dict, list[int]] | None:
    """A job's request (its connection, what it asked, its descriptors 0-2), or None when the peer
    is not this user or not a job."""
    try:
        connection, _ = listener.accept()
    except OSError:
        return None
    connection.settimeout(10)
    descriptors: list[int] = []
    try:
        uid = struct.unpack("3i", connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
        data, descriptors, _, _ = socket.recv_fds(connection, 1 << 16, 3)
        if uid != os.getuid() or len(descriptors) != 3:
            raise ConnectionError("not a job of this user")
        request = read_request(data, connection)
    except (OSError, ValueError):
        connection.close()
        for descriptor in descriptors:
            os.close(descriptor)
        return None
    connection.settimeout(None)
    return connection, request, descriptors


def _preload(module: str) -> None:
    try:
        __import__(module)
    except ImportError:  # an optional reader (ncu_report): the job that needs it says so itself
        pass


def serve(path: str) -> None:
    """Listen at ``path`` until idle for :data:`IDLE_SECONDS`; each job to an idle worker, or to a new one."""
    import fcntl
    import selectors
    import signal
    import time

    lock = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # another server for this key is starting or running
    for module in PRELOAD_FIRST:
        _preload(module)
    from roofline.tables.files import arrow_schemas

    arrow_schemas()  # built once here, not again in each worker that writes a table
    pending = [module for module in PRELOAD if module not in PRELOAD_FIRST]
    import gc

    gc.collect()
    gc.freeze()  # the preloaded modules stay out of every child's garbage-collector passes
    os.chdir("/")  # hold no job's directory; each child goes to its job's
    with contextlib.suppress(*_IGNORED):
        os.unlink(path)  # a socket left by a server that was killed
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    bound = os.stat(path).st_ino
    with contextlib.suppress(*_IGNORED):
        os.unlink(starting_marker(path))  # listening: the jobs waiting for it get in
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}  # a worker running a job -> that job's connection
    workers: dict[int, socket.socket] = {}  # every worker -> the server's end of its channel
    idle: dict[int, float] = {}  # workers waiting for a job -> since when, the last one used last
    endings: dict[int, int] = {}  # worker -> a descriptor readable once it ended (see watch_ending)
    idle_since = time.monotonic()
    try:
        while children or time.monotonic() - idle_since < IDLE_SECONDS:
            events = selector.select(timeout=0 if pending and not children else POLL_SECONDS)
            if pending and not events and not children:  # no job runs or waits: the next module
                _preload(pending.pop(0))
                if not pending:
                    gc.collect()
                    gc.freeze()  # the preloaded modules stay out of every later child's collector passes
            for key, _ in events:
                if key.data is ENDED:
                    continue  # reaped below
                if key.fileobj is listener:
                    accepted = _accept(listener)
                    if accepted is None:
                        continue
                    connection, request, descriptors = accepted
                    pid = _to_idle_worker(idle, workers, selector, request, descriptors, connection)
                    if pid is None:
                        pid = _fork_worker(request, descriptors, connection, workers, selector,
                                           [listener, selector, lock, *children.values(), *endings.values()])
                        ending = watch_ending(selector, pid)
                        if ending is not None:
                            endings[pid] = ending
                    for descriptor in descriptors:
                        os.close(descriptor)
                    children[pid] = connection
                    selector.register(connection, selectors.EVENT_READ, pid)
                elif isinstance(key.data, tuple):  # a worker's channel: its job's status, or its end
                    _job_done(key.data[1], children, workers, idle, selector)
                elif children.get(key.data) is key.fileobj:  # its process closed it before the job ended
                    with contextlib.suppress(*_IGNORED):
                        os.killpg(key.data, signal.SIGTERM)  # the worker and whatever it started
                    with contextlib.suppress(*_IGNORED):
                        selector.unregister(key.fileobj)
            _reap(children, selector, endings, workers, idle)
            _retire(idle, workers, selector, time.monotonic() - WORKER_IDLE_SECONDS)
            if children:
                idle_since = time.monotonic()
    finally:
        with contextlib.suppress(*_IGNORED):
            if os.stat(path).st_ino == bound:
                os.unlink(path)
        listener.close()
        for channel in workers.values():  # an idle worker reads the end of its channel and exits
            channel.close()
        # the lock file goes too (a server starting this moment may lock the old one: it then
        # listens where the newer one does not, and ends idle)
        with contextlib.suppress(*_IGNORED):
            if os.stat(f"{path}.lock").st_ino == os.fstat(lock).st_ino:
                os.unlink(f"{path}.lock")
        os.close(lock)


def watch_ending(selector: selectors.BaseSelector, pid: int) -> int | None:
    """Have ``selector`` wake (key data :data:`ENDED`) as soon as the child ``pid`` ends, through a
    pidfd (Linux 5.3 and later): its job then hears its exit status at once, not at the next poll
    (:data:`POLL_SECONDS`), which would keep the job's core idle. The descriptor, or None where the
    system has no pidfd (the poll alone then reaps)."""
    import selectors

    try:
        descriptor = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
    selector.register(descriptor, selectors.EVENT_READ, ENDED)
    return descriptor


def _reap(children: dict[int, socket.socket], selector: selectors.BaseSelector, endings: dict[int, int],
          workers: dict[int, socket.socket] | None = None, idle: dict[int, float] | None = None) -> None:
    """Collect the workers that ended; a job one of them was running hears its exit status."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        ending = endings.pop(pid, None)
        if ending is not None:
            with contextlib.suppress(*_IGNORED):
                selector.unregister(ending)
            os.close(ending)
        channel = workers.pop(pid, None) if workers is not None else None
        if channel is not None:
            with contextlib.suppress(*_IGNORED):
                selector.unregister(channel)
            channel.close()
        if idle is not None:
            idle.pop(pid, None)
        connection = children.pop(pid, None)
        if connection is not None:
            _tell(connection, selector, os.waitstatus_to_exitcode(status))


def _tell(connection: socket.socket, selector: selectors.BaseSelector, status: int) -> None:
    """Send a job its exit status and close its connection."""
    with contextlib.suppress(*_IGNORED):
        selector.unregister(connection)
    with contextlib.suppress(*_IGNORED):
        connection.sendall(STATUS.pack(status))
    connection.close()


def _fork_worker(request: dict, descriptors: list[int], connection: socket.socket, workers: dict[int, socket.socket],
                 selector: selectors.BaseSelector, inherited: list) -> int:
    """A new worker (:mod:`roofline.jobs.worker`) running this job first; its pid."""
    import selectors

    channel, worker_end = socket.socketpair()
    sys.stdout.flush()
    server = os.getpid()
    pid = os.fork()
    if pid == 0:
        from roofline.jobs.worker import serve_jobs

        channel.close()
        serve_jobs(request, descriptors, connection, worker_end, [*inherited, *workers.values()], server)
    worker_end.close()
    with contextlib.suppress(*_IGNORED):
        os.setpgid(pid, pid)  # as the worker does: a cancel that comes first still finds its group
    workers[pid] = channel
    selector.register(channel, selectors.EVENT_READ, ("worker", pid))
    return pid


def _to_idle_worker(idle: dict[int, float], workers: dict[int, socket.socket], selector: selectors.BaseSelector,
                    request: dict, descriptors: list[int], connection: socket.socket) -> int | None:
    """Hand the job to the idle worker used last; its pid, or None when no idle worker takes it."""
    from roofline.jobs.worker import hand_over

    while idle:
        pid, _ = idle.popitem()
        if pid in workers and hand_over(workers[pid], request, descriptors, connection):
            return pid
    return None


def _job_done(pid: int, children: dict[int, socket.socket], workers: dict[int, socket.socket],
              idle: dict[int, float], selector: selectors.BaseSelector) -> None:
    """A worker's channel is readable: the status of the job it ran, sent before it waits for the
    next (the job hears it now and the worker goes idle), or the channel's end (its exit, reaped)."""
    channel = workers.get(pid)
    try:
        data = receive_exactly(channel, STATUS.size) if channel is not None else b""
    except OSError:
        data = b""
    if not data:
        if channel is not None:
            with contextlib.suppress(*_IGNORED):
                selector.unregister(channel)
        return
    connection = children.pop(pid, None)
    if connection is not None:
        _tell(connection, selector, STATUS.unpack(data)[0])
    if len(idle) < IDLE_WORKERS_MAX:
        import time

        idle[pid] = time.monotonic()
    else:  # enough idle workers: this one ends
        _end(pid, workers, selector)


def _retire(idle: dict[int, float], workers: dict[int, socket.socket], selector: selectors.BaseSelector,
            before: float) -> None:
    """End the workers idle since ``before``: between a run's jobs a worker waits a moment, not
    through a long job of the run's end (a report, the judging) with the memory of its last job."""
    for pid in [pid for pid, since in idle.items() if since < before]:
        del idle[pid]
        _end(pid, workers, selector)


def _end(pid: int, workers: dict[int, socket.socket], selector: selectors.BaseSelector) -> None:
    """Close an idle worker's channel: it reads the end and exits (then reaped)."""
    channel = workers.pop(pid, None)
    if channel is not None:
        with contextlib.suppress(*_IGNORED):
            selector.unregister(channel)
        channel.close()


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m roofline.jobs.server", description=(
        "The warm server the workflow's jobs fork from (started by the first job; not run by hand). "
        "--where says where the jobs started in this directory with this environment would find it."))
    parser.add_argument("socket", nargs="?", help="the socket to listen at")
    parser.add_argument("--where", action="store_true", help="print that socket's path ('none' where not used)")
    args = parser.parse_args(argv)
    if args.where:
        print(socket_path(server_key()) if usable() else "none")
        return 0
    if not args.socket:
        parser.error("give the socket to listen at, or --where")
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    without_huge_pages()  # started by hand: as a job's start would have set it (its workers inherit it)
    serve(args.socket)
    return 0


if __name__ == "__main__":
    sys.exit(main())
