"""Sniffing an export: decompression, encoding, header line, delimiter, the lines before it, refusals."""

from __future__ import annotations

import codecs
import csv
import io
import re
from pathlib import Path

from roofline.files.compressed import SUFFIXES, archive_kind, compression_of_bytes, read_bytes
from roofline.parse.readers.ncu_csv.errors import NcuCsvError
from roofline.parse.readers.ncu_log import KERNEL_FILTER_FLAGS, foreign_export, log_problem

_SNIFF_BYTES = 4 << 20
_HEADER_LINE = re.compile(r'^\s*"?ID"?\s*([,;\t|])')


def sniff(path: Path) -> tuple[str | io.BytesIO, str, list[str], int, list[str]]:
    """Check the bytes and find the header: (source to read, encoding, header fields, its line, the
    file's first lines). A compressed file is decompressed here, once, into the source."""
    with path.open("rb") as fh:
        head = fh.read(_SNIFF_BYTES)
    whole = None  # a compressed file's decompressed bytes
    if compression_of_bytes(head):
        whole = read_bytes(path)
        head = whole[:_SNIFF_BYTES]
    if not head.strip():
        raise NcuCsvError(
            f"{path}: the file is empty: re-export it with `ncu --import <report>.ncu-rep --csv "
            f"--page raw > file.csv`; if ncu wrote it empty, it profiled no kernel: check {KERNEL_FILTER_FLAGS}"
        )
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    elif head.startswith(codecs.BOM_UTF8):
        encoding = "utf-8-sig"
    elif b"\x00" in head:
        raise _binary_error(path, head)
    else:
        encoding = "utf-8"
    lines = head.decode(encoding, errors="replace").splitlines()
    if len(head) == _SNIFF_BYTES:
        lines = lines[:-1]  # possibly cut in the middle
    for index, line in enumerate(lines):
        match = _HEADER_LINE.match(line.lstrip("\ufeff"))
        if not match:
            continue
        if match.group(1) != ",":
            raise NcuCsvError(
                f"{path}: line {index + 1}: the columns are separated by {match.group(1)!r}, not "
                "commas: ncu writes comma-separated CSV; re-export with `ncu --csv` or convert "
                "the delimiter to ',' (and keep the quoting)"
            )
        header = next(csv.reader([line.lstrip("\ufeff")]))
        if "Kernel Name" not in header:
            raise NcuCsvError(
                f"{path}: line {index + 1}: the header has no 'Kernel Name' column, so this is "
                "not an ncu CSV export: export with `ncu --csv --page raw` or `--page details`"
            )
        if index == 0 and encoding != "utf-16":
            return (str(path) if whole is None else io.BytesIO(whole)), encoding, header, 1, lines
        data = path.read_bytes() if whole is None else whole
        text = data.decode(encoding, errors="replace").splitlines(keepends=True)
        return io.BytesIO("".join(text[index:]).encode("utf-8")), "utf-8", header, index + 1, lines
    # No table: ncu's log or another tool's export tell what went wrong better than "not ncu's format".
    problem = log_problem(lines) or foreign_export(lines)
    if problem:
        raise NcuCsvError(f"{path}: no ncu CSV table in the file: {problem}")
    raise NcuCsvError(
        f'{path}: no ncu CSV header (a row starting with the "ID" and "Kernel Name" columns) '
        f"in the first {_SNIFF_BYTES >> 20} MiB: this is not an ncu CSV export; export with "
        "`ncu --csv --page raw` or `--page details` (a what-if table in CSV starts with a 'kernel' "
        "column: see config/README.md)"
    )


def _binary_error(path: Path, head: bytes) -> NcuCsvError:
    """The error for a file of binary bytes, saying what they are where the first bytes tell."""
    export = "export CSV from a report with `ncu --import <report>.ncu-rep --csv --page raw > file.csv`"
    if head.startswith(b"NVR\x00"):
        what = (
            "an Nsight Compute report (its first bytes are the 'NVR' signature), not a CSV export: give it "
            f"as an .ncu-rep input, or {export}"
        )
    elif archive := archive_kind(head):
        what = f"{archive[0]}, not a CSV export: {archive[1]} and give the export inside as the input"
    else:
        named = next((c for s, c in SUFFIXES.items() if path.name.lower().endswith(s)), "")
        said = f" (named as {named}-compressed, but the bytes are not {named})" if named else ""
        what = f"not a CSV export{said}: {export}"
    return NcuCsvError(f"{path}: binary file, {what}")
