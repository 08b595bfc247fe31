"""An input's sha256, the provenance of every number parsed from it, worked out beside the parsing.

hashlib releases the GIL while it hashes, so the digest of a 600 MB export costs the parse stage
almost nothing: it is computed on a thread of its own at the lowest priority, which takes only a
core the reader leaves idle; the thread stays, idle, for the next input. Where the machine is busy
and that thread gets no core, the stage hashes what is left itself when it needs the digest.
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
    job = _Hashing(path, hashing)
    job.finish()
    return job.result()


# The file is hashed a window at a time, each mapped from the page cache (no copy through read()):
# a page of a mapping counts in the process's resident memory as long as the mapping lasts, so one
# mapping of a whole 600 MB export would add its size to the peak memory of the stage (the read
# itself holds much less). Between two windows the hash may change hands (:class:`_Hashing`).
_WINDOW = 16 << 20  # a multiple of mmap.ALLOCATIONGRANULARITY (4 KiB on Linux, 64 KiB on Windows)
# How long the caller that needs the digest waits for the hashing thread's window before hashing
# it itself: a window takes ~10 ms on a core of its own, so a thread this late is getting none.
_PATIENCE_S = 0.1


def _windows(path: Path) -> list[tuple[Path, int, int]]:
    """(file, offset, length) of each window of the file ``path``, or of a folder's files in name order."""
    files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
    windows = []
    for file in files:
        size = file.stat().st_size
        windows += [(file, offset, min(_WINDOW, size - offset)) for offset in range(0, size, _WINDOW)]
    return windows


def _hash_window(digest, file: Path, offset: int, length: int) -> None:
    with open(file, "rb") as handle:
        try:
            view = mmap.mmap(handle.fileno(), length, access=mmap.ACCESS_READ, offset=offset)
        except (OSError, ValueError):  # a filesystem without mmap
            digest.update(os.pread(handle.fileno(), length, offset))
            return
        with view:
            digest.update(view)


class _Hashing:
    """One input's hash, a window at a time, carried on by whichever thread calls :meth:`finish`.

    The hashing thread runs at the lowest priority, so that it takes only a core the reader leaves
    idle; on a busy machine (other jobs, other users) it may get next to none. The caller that needs
    the digest then hashes what is left itself, at its own priority, rather than wait for it. The
    state moves on only by whole windows: a thread hashes a window into a copy of the digest so far
    and keeps it if no other thread got there first (a lock held while hashing could be held by a
    thread the system does not run).
    """

    def __init__(self, path: str | Path, hashing: threading.Event | None = None) -> None:
        self.hashing = hashing
        self.changed = threading.Condition()
        self.digest = hashlib.sha256()
        self.next, self.in_flight = 0, -1  # the next window to hash; the one a thread is hashing
        self.error: BaseException | None = None
        try:
            self.windows = _windows(Path(path))
        except OSError as exc:  # raised by result(), as a failed read would be
            self.windows, self.error = [], exc

    def finish(self, patience: float | None = None) -> None:
        """Hash the windows left. Where another thread is hashing the next one, wait for it (at most
        ``patience`` seconds at a time, then hash it too: the first to finish it moves the state on)."""
        while True:
            with self.changed:
                while self.in_flight == self.next < len(self.windows) and self.error is None:
                    if not self.changed.wait(patience) and patience is not None:
                        break
                if self.error is not None or self.next >= len(self.windows):
                    return
                index, digest = self.next, self.digest.copy()
                self.in_flight = index
            if self.hashing is not None:
                self.hashing.set()
            try:
                _hash_window(digest, *self.windows[index])
            except BaseException as exc:  # noqa: BLE001 - raised again by the caller of result()
                with self.changed:
                    self.error = self.error or exc
                    self.changed.notify_all()
                return
            with self.changed:
                if self.next == index:
                    self.digest, self.next = digest, index + 1
                self.changed.notify_all()

    def result(self) -> str:
        """The digest, once :meth:`finish` returned (raising what went wrong reading the input)."""
        if self.error is not None:
            raise self.error
        return self.digest.hexdigest()


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
            job, hashing = self.requests.get()
            self.working = True
            try:
                job.finish()
            finally:
                self.working = False
                hashing.set()

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
    returned gives the digest (raising the hash's exception), hashing itself what the thread has
    not reached yet (:class:`_Hashing`).

    Returns once the thread is hashing, with the GIL released: the readers call into C for long
    stretches without releasing it (``ncu_report`` decoding a launch), so a thread that still needed
    the GIL to start its hash would wait for them instead of hashing beside them. The thread stays
    for the next input: starting a thread costs about as much as hashing a 1 MB report.
    """
    hashing = threading.Event()
    job = _Hashing(path, hashing)
    _hashing_thread().requests.put((job, hashing))
    hashing.wait()

    def digest() -> str:
        job.finish(patience=_PATIENCE_S)
        return job.result()

    return digest
