"""A warm process that the workflow's jobs fork from, so that a job does not import pandas & co.

Every analysis rule is ``python -m roofline.jobs STAGE LOG ...``, an ordinary process. Starting one
costs ~0.45 s of imports (pandas, pyarrow, Altair) before any work, which is most of a parse job:
50 apps pay it 50 times. So the first job of a run starts this server in the background (and runs
itself as usual); later jobs hand their command line, working directory, environment and standard
streams to it over a Unix socket, it forks a child that runs the job exactly as
:func:`roofline.jobs.main` would in the job's own process, and the job exits with the child's status,
which the server sends as the child ends (it watches each child's pidfd: :func:`watch_ending`).

What makes that safe:

* **Same code, same interpreter.** The socket's name is a hash of the interpreter, ``sys.path``,
  the environment (less the thread-count variables Snakemake sets per rule), the size and
  modification time of every file of the package and those of the ``site-packages`` directories
  (an install or removal changes them); a job whose hash differs starts its own server. A server
  exits after :data:`IDLE_SECONDS` without jobs.
* **Same job.** The child takes the job's working directory, umask, environment and file
  descriptors 0-2 before it runs, and its exit status (75, 2, ...) is the job's. When the job's
  process dies (Snakemake cancels it), the server kills the child's process group; when the
  server dies, the kernel kills the child and the job fails saying so.
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
import json
import os
import socket
import struct
import sys
from typing import TYPE_CHECKING

from roofline.job_client import ACCEPTED, LENGTH, PACKAGE, STATUS, receive_exactly, server_key, socket_path, usable

if TYPE_CHECKING:
    import selectors

IDLE_SECONDS = float(os.environ.get("ROOFLINE_JOB_SERVER_IDLE", "30"))
# What the stage jobs import, at the top or on first use: imported once here, so every child has them.
PRELOAD = ("pandas", "pyarrow.parquet", "pyarrow.compute", "pyarrow.csv", "ncu_report", "roofline.parse",
           "roofline.ncu_csv", "roofline.ncu_rep", "roofline.what_if", "roofline.ncu_log", "roofline.analysis",
           "roofline.catalog", "roofline.app_job", "roofline.status", "roofline.track", "roofline.report",
           "roofline.pages.trends", "roofline.pages.tonight", "roofline.pages.compare")
# How often the server looks for ended children and its idle time where nothing wakes it sooner.
POLL_SECONDS = 0.05
ENDED = "ended"  # the selector's data for a child's pidfd (watch_ending)
# What the server does without when it fails: a gone peer, an unregistered socket, a vanished file.
_IGNORED = (OSError, KeyError, ValueError)

def _die_with(parent: int) -> None:
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


def _run_child(request: dict, descriptors: list[int], connection: socket.socket, inherited: list,
               parent: int) -> None:
    """In the forked child: become the job, run it, exit with its status (never returns).
    ``inherited``: the server's sockets, selector and lock, which the job must not hold.

    The child, not the server, tells the job it was accepted, and only once it is bound to die
    with the server: so a job told "accepted" never runs itself beside a child still running it,
    and a job that hears nothing (a server gone before this point) may safely run itself."""
    import signal
    import time
    import traceback

    status = 1
    try:
        _die_with(parent)
        try:
            connection.sendall(ACCEPTED)
        except OSError:  # the job's process is gone: nobody waits for this job
            os._exit(1)
        for held in (*inherited, connection):
            os.close(held) if isinstance(held, int) else held.close()
        os.setpgid(0, 0)
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(number, signal.SIG_DFL)
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
        sys.argv = [os.path.join(PACKAGE, "jobs.py"), *request["argv"]]
        from roofline import jobs

        status = jobs.main(request["argv"])
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:  # noqa: BLE001 - the job's traceback goes to the job's stderr, as in its own process
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(status if isinstance(status, int) and 0 <= status < 256 else 1)


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
        if uid != os.getuid() or len(descriptors) != 3 or len(data) < LENGTH.size:
            raise ConnectionError("not a job of this user")
        length = LENGTH.unpack(data[:LENGTH.size])[0]
        payload = data[LENGTH.size:]
        if length > len(payload):
            payload += receive_exactly(connection, length - len(payload))
        request = json.loads(payload)
    except (OSError, ValueError):
        connection.close()
        for descriptor in descriptors:
            os.close(descriptor)
        return None
    connection.settimeout(None)
    return connection, request, descriptors


def serve(path: str) -> None:
    """Listen at ``path`` until idle for :data:`IDLE_SECONDS`; one forked child per job."""
    import fcntl
    import selectors
    import signal
    import time

    lock = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # another server for this key is starting or running
    for module in PRELOAD:
        try:
            __import__(module)
        except ImportError:  # an optional reader (ncu_report): the job that needs it says so itself
            pass
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
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}
    endings: dict[int, int] = {}  # child -> a descriptor readable once it ended (see watch_ending)
    idle_since = time.monotonic()
    try:
        while children or time.monotonic() - idle_since < IDLE_SECONDS:
            for key, _ in selector.select(timeout=POLL_SECONDS):
                if key.data is ENDED:
                    continue  # reaped below
                if key.fileobj is listener:
                    accepted = _accept(listener)
                    if accepted is None:
                        continue
                    connection, request, descriptors = accepted
                    sys.stdout.flush()
                    server = os.getpid()
                    pid = os.fork()
                    if pid == 0:
                        _run_child(request, descriptors, connection,
                                   [listener, selector, lock, *children.values(), *endings.values()], server)
                    with contextlib.suppress(*_IGNORED):
                        os.setpgid(pid, pid)  # as the child does: a cancel that comes first still finds its group
                    for descriptor in descriptors:
                        os.close(descriptor)
                    children[pid] = connection
                    selector.register(connection, selectors.EVENT_READ, pid)
                    ending = watch_ending(selector, pid)
                    if ending is not None:
                        endings[pid] = ending
                else:  # a job's process closed its end before its child finished: stop the child
                    with contextlib.suppress(*_IGNORED):
                        os.killpg(key.data, signal.SIGTERM)
                    selector.unregister(key.fileobj)
            _reap(children, selector, endings)
            if children:
                idle_since = time.monotonic()
    finally:
        with contextlib.suppress(*_IGNORED):
            if os.stat(path).st_ino == bound:
                os.unlink(path)
        listener.close()
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


def _reap(children: dict[int, socket.socket], selector: selectors.BaseSelector, endings: dict[int, int]) -> None:
    while children:
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
        connection = children.pop(pid, None)
        if connection is None:
            continue
        with contextlib.suppress(*_IGNORED):
            selector.unregister(connection)
        with contextlib.suppress(*_IGNORED):
            connection.sendall(STATUS.pack(os.waitstatus_to_exitcode(status)))
        connection.close()


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m roofline.job_server", description=(
        "The warm server the workflow's jobs fork from (started by the first job; not run by hand). "
        "--where says where the jobs started in this directory with this environment would find it."))
    parser.add_argument("socket", nargs="?", help="the socket to listen at")
    parser.add_argument("--where", action="store_true", help="print that socket's path ('none' where not used)")
    args = parser.parse_args(argv)
    if args.where:
        path = socket_path(server_key()) if usable() else None
        print(path or "none")
        return 0
    if not args.socket:
        parser.error("give the socket to listen at, or --where")
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    serve(args.socket)
    return 0


if __name__ == "__main__":
    sys.exit(main())
