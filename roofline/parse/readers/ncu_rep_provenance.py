"""What an ``.ncu-rep`` says about how it was made: the Nsight Compute version that wrote it and the
profiled command line, found in the report's bytes (``ncu_report`` does not expose them).

A report is the signature ``NVR\\0``, a header and length-prefixed blocks (see
:func:`roofline.parse.readers.ncu_rep.block_ends`): ncu writes the version in a small block of its
own and the command (newer versions) beside it, so neither needs a search through the launches'
megabytes.
"""

from __future__ import annotations

import itertools
import mmap
import re
from pathlib import Path

from roofline.files.compressed import compression_of, read_bytes
from roofline.parse.readers.ncu_rep import block_ends

_HEAD_BYTES = 8_000_000  # the command line is looked for in a report's first 8 MB,
_VERSION_BYTES = 4_000_000  # the version in its first 4 MB
_VERSION = re.compile(rb"(20\d\d\.\d+\.\d+(?:\.\d+)?) \(build \d+\)")
_VERSION_LONGEST = 64  # bytes of a version number before " (build ", and of " (build 123...)":
_BUILD_LONGEST = 64  # far more than any has
_COMMAND_NEAR_VERSION = 65_536
_SMALL_BLOCK = 4096  # bytes: a block the version is looked for in first
_NCU_COMMAND = re.compile(rb"/ncu(\.exe)?[ \t]")


def report_provenance(path: str | Path) -> tuple[str, str]:
    """The ncu version and command line a report stores (see :func:`report_version` and
    :func:`report_command_line`), from one read of the report's first 8 MB: mapped, not copied,
    for a plain report (reading megabytes into fresh memory costs more than finding the texts)."""
    path = Path(path)
    if compression_of(path) is None and path.stat().st_size:
        with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
            return _provenance(view)
    return _provenance(read_bytes(path, limit=_HEAD_BYTES))  # decompressed, for a compressed report


def _provenance(head: bytes | mmap.mmap) -> tuple[str, str]:
    """:func:`report_provenance` of a report's bytes. ncu stores the command in the report's
    header, beside the version (477-1,368 bytes after it in every real report that has both): it
    is looked for within :data:`_COMMAND_NEAR_VERSION` bytes of the version where there is one,
    rather than through megabytes of launch data."""
    version = _version_in_small_blocks(head) or _version_match(head)
    if version is None:
        return "", report_command_line(head)
    start = max(0, version.start() - _COMMAND_NEAR_VERSION)
    return version.group(1).decode(), report_command_line(head, start, version.end() + _COMMAND_NEAR_VERSION)


def report_command_line(head: bytes | mmap.mmap, start: int = 0, end: int | None = None) -> str:
    """The ncu command line a report stores (newer ncu versions), found in its first bytes ``head``
    (between ``start`` and ``end``, when given).

    The report is a protobuf stream: the command is a length-prefixed string containing ``/ncu``;
    the varint length before it (one or two bytes) tells where it ends.
    """
    data, end = head, min(len(head), _HEAD_BYTES, _HEAD_BYTES if end is None else end)
    for match in _matches(_NCU_COMMAND, data, b"/ncu", 0, len(b"/ncu.exe "), end, start):
        start = match.start()
        while start > 0 and 0x20 <= data[start - 1] < 0x7F:
            start -= 1
        for cut in range(max(start, 2), match.start() + 1):
            last = data[cut - 1]
            length = (data[cut - 2] & 0x7F) | (last << 7) if last < 0x80 and data[cut - 2] & 0x80 else last
            text = data[cut : min(cut + length, end)]
            if b"/ncu" in text and all(0x20 <= c < 0x7F for c in text):
                # A field that only wraps the string can have a printable tag and length ("Zz" before
                # a 122-byte command): take the innermost string.
                while len(text) > 2 and text[0] & 7 == 2 and text[1] == len(text) - 2 and b"/ncu" in text[2:]:
                    text = text[2:]
                return text.decode().strip()
    return ""


def report_version(head: bytes | mmap.mmap) -> str:
    """The Nsight Compute version string a report stores, where one is found in its first bytes ``head``."""
    match = _version_match(head)
    return match.group(1).decode() if match else ""


def _version_in_small_blocks(head: bytes | mmap.mmap) -> re.Match | None:
    """The version's match in the first of the report's small blocks that holds one (see
    :func:`roofline.parse.readers.ncu_rep.block_ends`): ncu writes it in a block of its own, of 118-172 bytes in
    every real report (ncu 2021 to 2025), so the launches' megabytes need not be searched. None where
    no small block holds one (or the bytes are no report)."""
    end = min(len(head), _VERSION_BYTES)
    for start, stop in itertools.pairwise(block_ends(head, end)):  # a block: its size field, then its payload
        if stop - start - 4 <= _SMALL_BLOCK:
            match = _VERSION.search(head, start + 4, min(stop, end))
            if match is not None:
                return match
    return None


def _version_match(head: bytes | mmap.mmap) -> re.Match | None:
    end = min(len(head), _VERSION_BYTES)
    return next(_matches(_VERSION, head, b" (build ", _VERSION_LONGEST, _BUILD_LONGEST, end), None)


def _matches(pattern: re.Pattern, data: bytes | mmap.mmap, anchor: bytes, before: int, after: int,
             end: int | None = None, start: int = 0):
    """``pattern.finditer(data, start, end)`` for a pattern every match of which holds ``anchor``,
    starting at most ``before`` bytes before it and ending at most ``after`` bytes after its start:
    the expression runs only near each anchor, which ``bytes.find`` finds many times faster than the
    expression scans a report's head (megabytes, which hold the anchor a few times)."""
    end = len(data) if end is None else end
    searched = start
    position = data.find(anchor, start, end)
    while position >= 0:
        match = pattern.search(data, max(searched, position - before), min(end, position + after))
        if match is not None:
            yield match
            searched = match.end()
        position = data.find(anchor, max(searched, position + 1), end)
