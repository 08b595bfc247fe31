"""An input's sha256, the provenance of every number parsed from it, worked out beside the parsing.

hashlib releases the GIL while it hashes, so the digest of a 600 MB export costs the parse stage
almost nothing: it is computed on a thread of its own at the lowest priority, which takes only a
core the reader leaves idle; the thread stays, idle, for the next input.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path


def sha256(path: str | Path, hashing: threading.Event | None = None) -> str:
    """sha256 of a file, or of a folder's files in name order; ``hashing`` is set as the first
    file's bytes go to the hash (which releases the GIL while it hashes them)."""
    path = Path(path)
    files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
    digest = hashlib.sha256()
    for file in files:
        with open(file, "rb") as handle:
            try:  # hashed in place from the page cache: no copy of a 600 MB export through read()
                _hash_mapped(handle.fileno(), digest, hashing)
                continue
            except (OSError, ValueError):  # an empty file (cannot be mapped), or a filesystem without mmap
                pass
            for block in iter(lambda handle=handle: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


# The file is mapped a window at a time: a page of a mapping counts in the process's resident memory
# as long as the mapping lasts, so one mapping of a whole 600 MB export would add its size to the
# peak memory of the stage (the read itself holds much less).
_WINDOW = 8 << 20  # a multiple of mmap.ALLOCATIONGRANULARITY (4 KiB on Linux, 64 KiB on Windows)


def _hash_mapped(fileno: int, digest, hashing: threading.Event | None) -> None:
    """Feed the file ``fileno`` to ``digest`` from mappings of :data:`_WINDOW` bytes, one after another."""
    size = os.fstat(fileno).st_size
    if size == 0:
        raise ValueError("an empty file cannot be mapped")
    for offset in range(0, size, _WINDOW):
        with mmap.mmap(fileno, min(_WINDOW, size - offset), access=mmap.ACCESS_READ, offset=offset) as view:
            if hashing is not None:
                hashing.set()
            digest.update(view)


def _lowest_priority() -> None:
    """Lower the calling thread to the lowest CPU priority (nice 19), where the system allows it.

    The parse stage hashes the input on a thread beside the read; at equal priority the hash competes
    for the cores with pyarrow's threaded CSV read, so it should take only a core the read leaves
    idle (a large export parses measurably faster so: benchmarks/README.md). Linux sets nice per
    thread (PRIO_PROCESS with a thread id) and lowering it needs no privilege; a system without
    per-thread nice, or that refuses, leaves the thread as it is.
    """
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (OSError, AttributeError):
        pass


class _HashingThread(threading.Thread):
    """The process's hashing thread, at the lowest priority: it hashes the inputs handed to it one
    after another and waits, without the GIL, in between. Started on the first input; a forked
    child (a job server's worker) starts its own, since the parent's is not in it."""

    def __init__(self) -> None:
        super().__init__(name="roofline-hash", daemon=True)
        self.requests: queue.SimpleQueue = queue.SimpleQueue()
        self.working = False

    def run(self) -> None:
        _lowest_priority()
        while True:
            path, hashing, outcome, done = self.requests.get()
            self.working = True
            try:
                outcome["digest"] = sha256(path, hashing)
            except BaseException as exc:  # noqa: BLE001 - raised again by the waiting caller
                outcome["error"] = exc
            finally:
                self.working = False
                hashing.set()
                done.set()

    def idle_between_jobs(self) -> bool:
        """Whether it holds no input: a process that runs jobs one after another
        (:mod:`roofline.jobs.worker`) may then run the next job beside it."""
        return not self.working and self.requests.empty()


_hasher: _HashingThread | None = None
_starting = threading.Lock()


def _hashing_thread() -> _HashingThread:
    global _hasher
    with _starting:
        if _hasher is None or not _hasher.is_alive():  # not yet, or a forked child's copy of the parent's
            _hasher = _HashingThread()
            _hasher.start()
        return _hasher


def hash_beside(path: Path) -> Callable[[], str]:
    """Have the process's hashing thread (at the lowest priority) hash ``path``; the function
    returned waits for the digest (raising the hash's exception).

    Returns once the thread is hashing, with the GIL released: the readers call into C for long
    stretches without releasing it (``ncu_report`` decoding a launch), so a thread that still needed
    the GIL to start its hash would wait for them instead of hashing beside them. The thread stays
    for the next input: starting a thread costs about as much as hashing a 1 MB report.
    """
    outcome: dict = {}
    hashing, done = threading.Event(), threading.Event()
    _hashing_thread().requests.put((path, hashing, outcome, done))
    hashing.wait()

    def digest() -> str:
        done.wait()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["digest"]

    return digest
