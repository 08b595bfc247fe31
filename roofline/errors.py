"""Environment failures in one line: a full disk, a quota, a read-only or forbidden output directory.

These are not bugs and not bad inputs, so they get no traceback: one message names the path and
the cause, and says what to do before rerunning. Outputs are written atomically
(:func:`roofline.files.atomic.atomic_output`), so a failed write leaves the old file or none, and a
rerun after the cause is fixed writes the same outputs as an undisturbed run.

``roofline: cannot write data/classified/x.parquet: No space left on device (ENOSPC); free space on
the filesystem at /scratch and rerun: outputs written so far are complete or absent``

A capture that cannot succeed as configured (ncu missing, counters admin-only, the application
failing under ncu) raises :class:`CaptureError`, whose one message likewise says the fix; an input
that cannot be analysed, :class:`InputError`, naming the file and the fix.
"""

from __future__ import annotations

import errno
import logging
import os
import sys
import tempfile
from pathlib import Path

# errno -> what to do (with {mount}: the path's filesystem, {directory}: the directory it goes in).
REMEDIES = {
    errno.ENOSPC: "free space on the filesystem at {mount}",
    errno.EDQUOT: "free space within your quota on the filesystem at {mount} (or ask for a larger quota)",
    errno.EROFS: "remount the filesystem at {mount} read-write (or run in a writable directory)",
    errno.EACCES: "make {directory} writable for this user",
    errno.EPERM: "make {directory} writable for this user (and clear an immutable flag: lsattr -d)",
}
AFTERWARDS = "and rerun: outputs written so far are complete or absent"
LOG_FILE_AFTERWARDS = "(until then this log file misses lines; the terminal shows them all)"
# A stage job that failed for one of these causes exits with this status (sysexits' EX_TEMPFAIL:
# the user is invited to retry once the cause is fixed).
EXIT_STATUS = 75


# Where a run writes, relative to its working directory: Snakemake's metadata, job logs, tables, pages.
OUTPUT_DIRS = (".snakemake", "logs", "data", "reports")


class CaptureError(RuntimeError):
    """A capture that cannot succeed as configured; the message says the fix."""


class InputError(ValueError):
    """An input that cannot be analysed; the message names the file and the fix.

    Raised by every reader of the parse stage but the CSV one (:class:`roofline.parse.readers.ncu_csv.NcuCsvError`).
    """


class CannotWrite(OSError):
    """An output could not be written: ``errno``/``strerror`` are the cause, ``filename`` the
    output's own path (not the temporary file beside it that failed)."""


def cannot_write(path: str | os.PathLike, error: OSError) -> OSError:
    """``error`` restated for the output ``path`` (a :class:`CannotWrite`), where it has an errno."""
    if error.errno is None or isinstance(error, CannotWrite):
        return error
    return CannotWrite(error.errno, os.strerror(error.errno), os.fspath(path))


def is_environmental(error: BaseException) -> bool:
    """Whether ``error`` is a cause outside the pipeline: out of space or quota, read-only, denied."""
    return isinstance(error, OSError) and error.errno in REMEDIES


def message(error: OSError, path: str | os.PathLike | None = None, afterwards: str = AFTERWARDS) -> str:
    """The one line for an environmental ``error`` (see :func:`is_environmental`) about ``path``
    (default: the error's own filename, else the working directory), ending with ``afterwards``."""
    where = os.fspath(path if path is not None else error.filename or os.getcwd())
    verb = "write" if isinstance(error, CannotWrite) else "access"
    cause = f"{os.strerror(error.errno)} ({errno.errorcode.get(error.errno, error.errno)})"
    remedy = REMEDIES[error.errno].format(mount=_mount(where), directory=_directory(where))
    return f"roofline: cannot {verb} {where}: {cause}; {remedy} {afterwards}"


def preflight(directories: tuple[str, ...] = OUTPUT_DIRS, root: str | os.PathLike = ".") -> str | None:
    """The one line saying why a run cannot write where it will (a read-only, forbidden or full
    filesystem), or None when each of ``directories`` (under ``root``; the nearest existing one
    above those not made yet) takes a one-byte file.

    Run before Snakemake touches an output: Snakemake removes a job's old outputs and makes its
    directories itself, and fails there with a traceback of its own."""
    tried: set[Path] = set()
    for name in ("", *directories):
        here = Path(_directory(os.path.join(root, name, "x")))
        if here in tried:
            continue
        tried.add(here)
        try:
            with tempfile.TemporaryFile(dir=here, prefix=".roofline-preflight-") as probe:
                probe.write(b"\0")
                probe.flush()
                os.fsync(probe.fileno())
        except OSError as error:
            if is_environmental(error):
                return message(cannot_write(os.path.join(here, ""), error))
            raise
    return None


def _directory(path: str) -> str:
    """The nearest existing directory at or above ``path``'s parent (where the file goes), or at or
    above ``path`` itself when it ends with a separator (a directory)."""
    here = Path(path).absolute()
    if not path.endswith(os.sep):
        here = here.parent
    while not here.is_dir() and here != here.parent:
        here = here.parent
    return str(here)


def _mount(path: str) -> str:
    """The mount point of the filesystem ``path`` is (or would be) on."""
    here = Path(_directory(path))
    while not os.path.ismount(here) and here != here.parent:
        here = here.parent
    return str(here)


def quiet_log_files(logger: logging.Logger | None = None) -> None:
    """Make the file handlers of ``logger`` (default: Snakemake's) say an environmental write
    failure once, in one line on stderr, instead of a ``--- Logging error ---`` traceback for every
    record. The terminal output is unaffected: only the log file misses lines. Other handler
    errors are reported as the logging module always does. Calling it again changes nothing."""
    logger = logger or logging.getLogger("snakemake.logging")
    for handler in logger.handlers:
        if isinstance(handler, logging.FileHandler) and not getattr(handler, "_roofline_quiet", False):
            handler.handleError = _one_line_errors(handler)
            handler._roofline_quiet = True


def _one_line_errors(handler: logging.FileHandler):
    report_other = handler.handleError
    said = []

    def handle_error(record: logging.LogRecord) -> None:
        error = sys.exc_info()[1]
        if not is_environmental(error):
            report_other(record)
        elif not said:
            said.append(True)
            line = message(cannot_write(handler.baseFilename, error), afterwards=LOG_FILE_AFTERWARDS)
            try:
                print(line, file=sys.stderr, flush=True)
            except OSError:
                pass

    return handle_error
