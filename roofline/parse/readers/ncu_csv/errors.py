"""The reader's refusals and repairs (NcuCsvError, NcuCsvWarning) and where in the file they point."""

from __future__ import annotations

from pathlib import Path

from roofline.parse.readers.ncu_log import NO_KERNEL_FIX, log_problem


class NcuCsvError(ValueError):
    """A CSV export this reader refuses; the message names the file, where, and the fix."""


class NcuCsvWarning(UserWarning):
    """Something the reader repaired (bytes that are not UTF-8)."""


class Where:
    """File and line numbers for error messages (data row ``i`` sits on line ``first + i``), and the
    file's first lines, whose ncu log lines tell why a file holds no launch."""

    def __init__(self, path: Path, header_line: int, head_lines: list[str]) -> None:
        self.path = path
        self.first = header_line + 1
        self.head_lines = head_lines

    def line(self, row: int) -> int:
        return self.first + int(row)

    def error(self, message: str, row: int | None = None) -> NcuCsvError:
        at = f" line {self.line(row)}:" if row is not None else ""
        return NcuCsvError(f"{self.path}:{at} {message}")

    def no_kernel(self, found: str) -> NcuCsvError:
        """The error for an export that holds ``found`` ("no rows") instead of launches: what ncu's log
        in the file says went wrong, else that ncu profiled no kernel and which options usually cause it."""
        problem = log_problem(self.head_lines) or f"ncu profiled no kernel; {NO_KERNEL_FIX}"
        return NcuCsvError(f"{self.path}: {found}: {problem}")
