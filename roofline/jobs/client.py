"""How a job finds and uses the warm server of :mod:`roofline.jobs.server` (the design, and what
makes it safe, are described there).

This is all a job handed to the server imports (a few stdlib modules, no json or socket.py): whether a server
may be used here, the key and socket of the server for this job's interpreter, import path,
environment and code, the hand-over of the job, and the start of a server when none listens.
"""

from __future__ import annotations

import _socket  # the socket module's own core: socket.py imports selectors and enum on top of it
import marshal
import os
import struct
import sys
from collections.abc import Callable, Collection

from roofline.config.switches import switched_on
from roofline.files.processes import process_alive

try:
    from _blake2 import blake2b  # hashlib's own BLAKE2, without hashlib's OpenSSL import (~10 ms a job)
except ImportError:  # another Python than CPython
    from hashlib import blake2b

# Set by Snakemake per rule from its threads, and per job from its tmpdir resource; they do not
# change what the server imported (a worker takes the job's environment, and tempfile's folder from it).
THREAD_ENV = ("OMP_NUM_THREADS", "GOTO_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
              "OPENBLAS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")
TMPDIR_ENV = ("TMPDIR", "TMP", "TEMPDIR", "TEMP")
_PER_RULE_ENV = (*THREAD_ENV, *TMPDIR_ENV)
BATCH_JOB_ENV = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID")
# Inside a job's own container (Snakemake's --sdm apptainer) a server would run every later job in
# the first job's container.
CONTAINER_ENV = ("APPTAINER_CONTAINER", "SINGULARITY_CONTAINER")
# The hand-over: the job sends its request and descriptors 0-2; the forked child answers ACCEPTED
# once it will die with the server, and the server sends the child's exit status when it ends.
ACCEPTED = b"A"
STATUS = struct.Struct("!i")
LENGTH = struct.Struct("!Q")
PACKAGE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # roofline/


def usable(environ: os._Environ | dict = os.environ) -> bool:
    """Whether jobs here may go through a server (see the module's docstring)."""
    return (sys.platform == "linux" and switched_on("ROOFLINE_JOB_SERVER", True, environ)
            and not any(name in environ for name in (*BATCH_JOB_ENV, *CONTAINER_ENV)))


def _stamp(path: str) -> tuple:
    try:
        status = os.stat(path)
    except OSError:
        return (path,)
    return (path, status.st_mtime_ns, status.st_size)


def _package_stamps() -> list[tuple]:
    stamps, pending = [], [PACKAGE]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        pending.append(entry.path)
                else:
                    status = entry.stat()
                    stamps.append((entry.path, status.st_mtime_ns, status.st_size))
    return sorted(stamps)


def server_key(environ: os._Environ | dict = os.environ) -> str:
    """What a server must share with a job to run it: interpreter, import path, environment, code."""
    environment = sorted((name, value) for name, value in environ.items() if name not in _PER_RULE_ENV)
    # an install or removal changes its site-packages directory; a working directory changes all along
    installed = [_stamp(entry) for entry in sys.path if os.path.basename(entry) in ("site-packages", "dist-packages")]
    material = [sys.executable, sys.version, sys.path, environment, _package_stamps(), installed]
    return blake2b(repr(material).encode(), digest_size=12).hexdigest()


def _private_dir() -> str | None:
    """This user's socket directory, created 0700; None when it exists but is not private."""
    base = os.environ.get("XDG_RUNTIME_DIR") or "/tmp"
    directory = os.path.join(base, f"roofline-jobs-{os.getuid()}")
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        status = os.lstat(directory)
    except OSError:
        return None
    import stat

    if status.st_uid != os.getuid() or status.st_mode & 0o077 or not stat.S_ISDIR(status.st_mode):
        return None  # someone else's, open to others, or a symbolic link
    return directory


_SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes on Linux


def socket_path(key: str) -> str | None:
    """Where the server for ``key`` listens; None where no private directory or too long a path."""
    directory = _private_dir()
    path = None if directory is None else os.path.join(directory, f"{key}.sock")
    return path if path is not None and len(os.fsencode(path)) <= _SOCKET_PATH_MAX else None


def send_request(connection: _socket.socket, request: dict, descriptors: list[int]) -> None:
    """Send a job's request (:func:`read_request` reads it) with its descriptors."""
    payload = marshal.dumps(request)
    data = LENGTH.pack(len(payload)) + payload
    sent = connection.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS,
                                        struct.pack(f"{len(descriptors)}i", *descriptors))])
    connection.sendall(data[sent:])  # what a send cut short (by a signal) left


def read_request(data: bytes, connection: _socket.socket) -> dict:
    """The request that :func:`send_request` sent, from the first bytes received (``data``) and
    the rest read from ``connection``. Raises ValueError when it is not a job's request (the peer
    is this user's process: marshal's data is trusted no further than that)."""
    if len(data) < LENGTH.size:
        raise ValueError("no request")
    length = LENGTH.unpack(data[:LENGTH.size])[0]
    payload = data[LENGTH.size:]
    if length > len(payload):
        payload += receive_exactly(connection, length - len(payload))
    try:
        request = marshal.loads(payload)
    except (EOFError, TypeError) as exc:
        raise ValueError("not a request") from exc
    if not isinstance(request, dict) or set(request) != {"argv", "cwd", "env", "umask"}:
        raise ValueError("not a request")
    return request


def receive_exactly(connection: _socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = connection.recv(count - len(data))
        if not chunk:
            raise ConnectionError("peer closed")
        data += chunk
    return data


def submit(argv: list[str], path: str) -> int | None:
    """Run the job ``argv`` through the server at ``path``: its exit status, or None when no
    server took it (none listening, or it closed before accepting)."""
    client = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        client.connect(path)
        request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "umask": _umask()}
        send_request(client, request, [0, 1, 2])
        if client.recv(1) != ACCEPTED:
            return None
    except OSError:
        client.close()
        return None
    try:
        return STATUS.unpack(receive_exactly(client, STATUS.size))[0]
    except OSError:
        os.write(2, b"roofline.jobs: the job server running this job stopped before it ended; rerun the job "
                    b"(ROOFLINE_JOB_SERVER=off runs every job in its own process)\n")
        return 1
    finally:
        client.close()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# How long a job waits for a server another job started a moment ago, which imports its modules
# for ~1-1.5 s before it listens: a job that runs itself meanwhile pays the same imports, on a core
# the server's imports need.
STARTING_WAIT_SECONDS = 2.0


def starting_marker(path: str) -> str:
    """The file naming a server for ``path`` that is importing its modules and does not listen yet
    (its process id; :func:`start` writes it, the server removes it once it listens)."""
    return f"{path}.starting"


def mark_starting(path: str, pid: int) -> None:
    """Write the marker naming process ``pid`` as the server starting for ``path`` (none when it
    cannot be written: the jobs meanwhile run themselves, as without one)."""
    partial = f"{starting_marker(path)}.{os.getpid()}"
    try:
        with open(partial, "w", encoding="ascii") as marker:
            marker.write(str(pid))
        os.replace(partial, starting_marker(path))
    except OSError:
        try:
            os.unlink(partial)
        except OSError:
            pass


def start(path: str) -> None:
    """Start a server for ``path`` in the background, detached from this job (its own session,
    no inherited streams), so the job's end neither waits for it nor stops it."""
    import subprocess

    try:
        server = subprocess.Popen([sys.executable, "-m", "roofline.jobs.server", path], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True,
                                  start_new_session=True)
    except OSError:
        return
    mark_starting(path, server.pid)


def starting_server(path: str) -> bool:
    """Whether a server for ``path`` is starting: its marker names a live process."""
    try:
        with open(starting_marker(path), "rb") as marker:
            pid = int(marker.read() or b"0")
    except (OSError, ValueError):
        return False
    return pid > 0 and process_alive(pid)


def _through_starting_server(argv: list[str], path: str) -> int | None:
    """The job's status through a server that is starting (:func:`starting_server`), once it
    listens; None when none is starting, or it does not listen within :data:`STARTING_WAIT_SECONDS`."""
    import time

    deadline = time.monotonic() + STARTING_WAIT_SECONDS
    while starting_server(path) and time.monotonic() < deadline:
        time.sleep(0.02)
        status = submit(argv, path)
        if status is not None:
            return status
    return submit(argv, path) if time.monotonic() < deadline else None  # it may listen by now


# prctl(2)'s option; Linux 3.15 and later.
_PR_SET_THP_DISABLE = 41


def without_huge_pages(environ: os._Environ | dict = os.environ) -> bool:
    """Turn transparent huge pages off for this process and the processes it starts (a fork and an
    exec keep the setting), unless ``ROOFLINE_HUGE_PAGES=on``; whether they are off.

    A job allocates its tables once and exits. Under Linux's default THP policy ("madvise") NumPy
    and Arrow's allocator ask for huge pages, and a huge page costs its whole 2 MB at first touch:
    zeroed, compacted out of fragmented memory, and in a virtual machine that returns free memory
    to its host, backed by the host page by page. A short process gains too little from huge pages
    to make up for that where it is slow (measured).
    """
    if sys.platform != "linux" or switched_on("ROOFLINE_HUGE_PAGES", False, environ):
        return False
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):  # no prctl in this libc
        return False


def submit_or_run(argv: list[str], stages: Collection[str], run: Callable[[list[str]], int]) -> int:
    """A job's entry point: through a warm server when there is one, else ``run(argv)`` in this
    process (starting a server for the jobs after it). ``stages``: the stage names a server runs."""
    path = socket_path(server_key()) if len(argv) >= 2 and argv[0] in stages and usable() else None
    if path is not None:
        status = submit(argv, path)
        if status is None:
            status = _through_starting_server(argv, path)
        if status is not None:
            return status if status >= 0 else 128 - status  # killed by a signal: as a shell reports it
    without_huge_pages()  # this job, and the server it starts (whose workers inherit the setting)
    if path is not None:
        start(path)
    return run(argv)
