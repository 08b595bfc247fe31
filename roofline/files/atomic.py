"""Files written atomically: a temporary file beside the target, renamed over it on success, so a
killed writer leaves the old file or none, and a refusal by the environment names the target."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from roofline.errors import cannot_write, is_environmental


@contextmanager
def atomic_output(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it over ``path``.

    A killed writer leaves either the old file or none, never half a file. The file gets the
    permissions a plain ``open()`` would give (mkstemp's are owner-only).

    Raises
    ------
    roofline.errors.CannotWrite
        When the environment refuses the write (out of space or quota, read-only, permission
        denied), naming ``path`` itself rather than the temporary file; nothing is left behind.
    """
    path = Path(path)
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        yield Path(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except OSError as error:
        if is_environmental(error):
            raise cannot_write(path, error) from error
        raise
    finally:
        if tmp is not None and os.path.exists(tmp):
            with suppress(OSError):  # e.g. the filesystem went read-only: the name is hidden, readers skip it
                os.unlink(tmp)


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically (temp file beside it + rename)."""
    with atomic_output(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file beside it + rename)."""
    with atomic_output(path) as tmp:
        tmp.write_bytes(data)


def file_identity(path: str | os.PathLike) -> list[int] | None:
    """``[inode, size, mtime in ns]`` of a file, None where it cannot be read: a file rewritten
    since, the way the stages write (a new file renamed over the old), has another identity."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return [status.st_ino, status.st_size, status.st_mtime_ns]
