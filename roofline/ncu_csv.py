"""Read Nsight Compute CSV exports into the parse stage's raw launch frame.

One file in, one frame out: :func:`read_ncu_csv` returns one row per kernel launch with the identity
columns of :data:`IDENTITY_COLUMNS` and one float column per kept ncu metric, in SI base units
(bytes, seconds, Hz, counts). Kept metrics are those :func:`roofline.metrics.all_input_metrics`
names plus every ``sm__ops_path_tensor_*`` and ``device__attribute_*`` metric;
``device__attribute_display_name`` (a string) becomes ``device``. :func:`read_ncu_csvs` merges
several exports of the same launches.

The layout is detected from the header row, never from the file name:

- wide (``ncu --csv --page raw``): one row per launch, metric names in the header, then a units row;
  ``source_format`` ``ncu-csv-raw``;
- long (``--page details``, ``--print-details``, ``--metrics`` lists): one row per metric with
  "Metric Name", "Metric Unit" and "Metric Value" columns and a unit per row.
  ``ncu-csv-roofline-section`` when a "Body Item Label" column is present and every metric row
  belongs to a roofline-chart section; ``nersc-long`` (the older layout with a "Kernel Time"
  column, as NERSC's scripts export) or ``ncu-csv-long`` when every metric row is a raw metric
  ("Command line profiler metrics");
  ``ncu-csv-details`` otherwise. Display labels are translated by :data:`ROOFLINE_CHART_LABELS`
  and :data:`DETAILS_LABELS`; unknown labels are ignored.

Lines before the header (program output, ``==PROF==`` lines) and ``==``-prefixed log lines among
the rows are skipped; rule rows (empty metric name) are dropped; rows shorter than the header are
padded. A compressed file (gzip, xz, zstd, bzip2, told by its bytes: :mod:`roofline.compressed`)
is decompressed in memory and read as the plain file would be. A file that holds ncu's log instead
of a table, or no launch, is refused with what the log says and the fix (:mod:`roofline.ncu_log`).
Bytes that are not UTF-8 are replaced by U+FFFD with a :class:`NcuCsvWarning`; files with a UTF-8 or
UTF-16 byte-order mark are decoded accordingly. A kept metric whose unit the converter does not
know is left out with a :class:`roofline.units.UnitWarning` when no recipe reads it (it is not in
:func:`roofline.metrics.all_input_metrics`: a tensor path or device attribute no recipe names), and
refused when one does. Everything else that is wrong raises :class:`NcuCsvError` naming the file,
the line or metric, and the fix.
"""

from __future__ import annotations

import codecs
import csv
import io
import re
import warnings
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from roofline.compressed import SUFFIXES, archive_kind, compression_of_bytes, read_bytes
from roofline.metrics import all_input_metrics
from roofline.ncu_log import KERNEL_FILTER_FLAGS, NO_KERNEL_FIX, foreign_export, log_problem
from roofline.units import UnitError, si_factor, unknown_unit_warning

IDENTITY_COLUMNS = (
    "kernel",
    "launch",
    "device",
    "grid",
    "block",
    "stream",
    "compute_capability",
    "source_format",
)
SOURCE_FORMATS = (
    "ncu-csv-raw",
    "ncu-csv-long",
    "ncu-csv-details",
    "ncu-csv-roofline-section",
    "nersc-long",
)

_SASS = "sass_thread_inst_executed_op_{}_pred_on"
# Display labels of the roofline-chart sections (SpeedOfLight_RooflineChart and the hierarchical
# charts) -> ncu metric, keyed by the kind of body item the row sits in: "" (the section's metric
# header, empty "Body Item Label"), "roofline" (labels ending in "Roofline": peak work and traffic)
# or "achieved" (labels containing "Achieved Value"). "SM Frequency" means sm__ in the peaks and
# smsp__ in the achieved values. Labels of derived metrics ("... FFMA Operations", = 2 x the FFMA
# counter: derived__*_x2) and unknown labels are left out on purpose.
ROOFLINE_CHART_LABELS: dict[tuple[str, str], str] = {
    **{
        ("", f"Theoretical Predicated-On {op.upper()} Thread Instructions Executed"): (
            f"sm__{_SASS.format(op)}.sum.peak_sustained"
        )
        for op in ("ffma", "dfma")
    },
    **{
        (kind, f"Predicated-On {op.upper()} Thread Instructions Executed Per Cycle"): (
            f"smsp__{_SASS.format(op)}.sum.per_cycle_elapsed"
        )
        for kind in ("", "achieved")
        for op in ("fadd", "fmul", "ffma", "dadd", "dmul", "dfma")
    },
    ("achieved", "SM Frequency"): "smsp__cycles_elapsed.avg.per_second",
    ("achieved", "DRAM Bandwidth"): "dram__bytes.sum.per_second",
    ("roofline", "SM Frequency"): "sm__cycles_elapsed.avg.per_second",
    ("roofline", "DRAM Frequency"): "dram__cycles_elapsed.avg.per_second",
    ("roofline", "Theoretical DRAM Bytes Accessible"): "dram__bytes.sum.peak_sustained",
    ("roofline", "L2 Cache Frequency"): "lts__cycles_elapsed.avg.per_second",
    ("roofline", "L1/TEX Cache Frequency"): "l1tex__cycles_elapsed.avg.per_second",
}
# Display labels of other details-page sections -> ncu metric, keyed by (section, label). The
# Speed Of Light "SM Frequency" is left out: it is measured in another pass than sm__cycles_elapsed.
DETAILS_LABELS: dict[tuple[str, str], str] = {
    ("GPU Speed Of Light Throughput", "Duration"): "gpu__time_duration.sum",
    ("GPU Speed Of Light Throughput", "DRAM Frequency"): "dram__cycles_elapsed.avg.per_second",
}

_DISPLAY_NAME = "device__attribute_display_name"
_DIMS = {f"launch__{w}_dim_{a}": (w, a) for w in ("grid", "block") for a in "xyz"}
_KEPT = frozenset(all_input_metrics())
_NA_TEXT = ["", "n/a", "nan", "na", "-", "none"]
_SNIFF_BYTES = 4 << 20
_HEADER_LINE = re.compile(r'^\s*"?ID"?\s*([,;\t|])')
_IDENT_SOURCE = {
    "ID": "launch",
    "Kernel Name": "kernel",
    "Stream": "stream",
    "Grid Size": "grid",
    "Block Size": "block",
    "Device": "device",
    "CC": "compute_capability",
}
_LONG_COLUMNS = (
    *_IDENT_SOURCE,
    "Section Name",
    "Body Item Label",
    "Metric Name",
    "Metric Unit",
    "Metric Value",
)


class NcuCsvError(ValueError):
    """A CSV export this reader refuses; the message names the file, where, and the fix."""


class NcuCsvWarning(UserWarning):
    """Something the reader repaired (bytes that are not UTF-8)."""


def is_kept_metric(name: str) -> bool:
    """Whether the raw launch frame keeps ncu metric ``name``."""
    return name in _KEPT or name.startswith("sm__ops_path_tensor_") or name.startswith("device__attribute_")


def read_ncu_csv(path: str | Path) -> pd.DataFrame:
    """Read one ncu CSV export (wide raw page or any long layout) into the raw launch frame.

    Parameters
    ----------
    path
        The CSV file.

    Returns
    -------
    pandas.DataFrame
        One row per launch, sorted by ``launch``: :data:`IDENTITY_COLUMNS` (strings, ``launch``
        int) then the kept metrics (float, SI base units), sorted by name.

    Raises
    ------
    NcuCsvError
        Empty, binary or non-ncu files, a wrong delimiter, a wide export without its units row,
        unknown/binary/bit units on metrics the recipes read, values that are not numbers, duplicate
        rows that disagree; files that hold only ncu's log (no kernel profiled, an ncu error).
    InputError
        A compressed file that is truncated or damaged.

    Warns
    -----
    UnitWarning
        Metrics no recipe reads left out for a unit the converter does not know.
    """
    path = Path(path)
    source, encoding, header, first_line, head_lines = _sniff(path)
    where = _Where(path, first_line, head_lines)
    if "Metric Name" in header and "Metric Value" in header:
        return _read_long(source, encoding, header, where)
    return _read_wide(source, encoding, header, where)


def read_ncu_csvs(paths: Iterable[str | Path]) -> pd.DataFrame:
    """Merge CSV exports of the same launches (e.g. a details, a metrics and a section export).

    Launches are matched on ``launch`` (the ncu ID); earlier files win, later files only fill
    metrics and identity fields the earlier ones lack. ``source_format`` is that of the first file
    holding the launch.

    Raises
    ------
    NcuCsvError
        No paths, or a launch ID that names different kernels in two files.
    """
    paths = [Path(p) for p in paths]
    if not paths:
        raise NcuCsvError("read_ncu_csvs got no CSV files: pass at least one path")
    merged = read_ncu_csv(paths[0]).set_index("launch")
    for path in paths[1:]:
        extra = read_ncu_csv(path).set_index("launch")
        common = merged.index.intersection(extra.index)
        differ = merged.loc[common, "kernel"] != extra.loc[common, "kernel"]
        if differ.any():
            launch = differ.index[differ.to_numpy()][0]
            raise NcuCsvError(
                f"{path}: launch {launch} is kernel {extra.at[launch, 'kernel']!r} here but "
                f"{merged.at[launch, 'kernel']!r} in {paths[0]}: merge only exports of the same "
                "launches (same ncu run), or read the files one by one"
            )
        text = [c for c in IDENTITY_COLUMNS if c != "launch"]
        merged = merged.copy()
        merged[text] = merged[text].replace("", np.nan)
        extra[text] = extra[text].replace("", np.nan)
        merged = merged.combine_first(extra)
        merged[text] = merged[text].fillna("").astype(str)
    merged = merged.reset_index()
    metrics = sorted(c for c in merged.columns if c not in IDENTITY_COLUMNS)
    return merged[[*IDENTITY_COLUMNS, *metrics]].astype({m: float for m in metrics})


class _Where:
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


def _sniff(path: Path) -> tuple[str | io.BytesIO, str, list[str], int, list[str]]:
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


def _read_table(source: str | io.BytesIO, encoding: str, columns: list[str], where: _Where,
                integer_ids: bool = False) -> pa.Table:
    """``columns`` as dictionary-encoded text ("Metric Value" as plain text): pyarrow's fast reader,
    pandas' when rows are ragged or odd. With ``integer_ids``, "ID" is first tried as integers (a
    long export's ID column, without log lines: no dictionary of 100k texts to build).

    Dictionaries let every later step work once per distinct text (a kernel name on each of its
    metric rows, a device attribute on every launch) instead of once per row. pyarrow lists each
    dictionary in order of first appearance, as ``pandas.factorize`` would.
    """
    dictionary = pa.dictionary(pa.int32(), pa.string())
    types = {c: pa.string() if c == "Metric Value" else dictionary for c in columns}
    for id_type in ((pa.int64(), dictionary) if integer_ids and "ID" in columns else (dictionary,)):
        if isinstance(source, io.BytesIO):
            source.seek(0)
        try:
            return pacsv.read_csv(
                source,
                read_options=pacsv.ReadOptions(encoding="utf8" if "8" in encoding else encoding),
                convert_options=pacsv.ConvertOptions(
                    include_columns=columns,
                    column_types={**types, "ID": id_type} if "ID" in columns else types,
                    strings_can_be_null=False,
                    quoted_strings_can_be_null=False,
                ),
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeError):
            pass  # log lines among the IDs; short rows, embedded newlines, bytes that are not UTF-8
    if isinstance(source, io.BytesIO):
        source.seek(0)
    try:
        frame = pd.read_csv(
            source,
            usecols=columns,
            dtype=str,
            keep_default_na=False,
            na_filter=False,
            index_col=False,
            encoding=encoding,
            encoding_errors="replace",
            engine="c",
        )
    except (pd.errors.ParserError, ValueError) as err:
        raise where.error(f"not readable as an ncu CSV export ({err}); re-export it with `ncu --csv`") from err
    text = {c: pa.array(frame[c].fillna("").to_numpy(dtype=object), pa.string()) for c in columns}
    return pa.table({c: a if c == "Metric Value" else a.dictionary_encode() for c, a in text.items()})


def _text_codes(table: pa.Table, column: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-row codes into the distinct texts of a dictionary column, and those texts ("" everywhere
    when the column is absent)."""
    if column not in table.column_names:
        return np.zeros(table.num_rows, dtype=np.int64), np.array([""], dtype=object)
    array = table[column].combine_chunks()
    return array.indices.to_numpy().astype(np.int64), array.dictionary.to_numpy(zero_copy_only=False)


def _is_log(texts: np.ndarray) -> np.ndarray:
    """Which ID texts are ncu log lines ("==PROF==" ...) rather than launches."""
    return np.array([text.startswith("==") for text in texts], dtype=bool)


_NUMBER = r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$"


def _numbers(text: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """ncu value text -> floats (thousands separators, n/a -> NaN) and a mask of non-numbers."""
    plain = pc.replace_substring(text, ",", "")
    for empty_as_null in (False, True):  # the common case, plain numbers: one cast, no regular expression
        try:
            if empty_as_null:  # "" (a value ncu left out) fails the cast: make it a null first
                plain = pc.if_else(pc.equal(plain, ""), pa.scalar(None, pa.string()), plain)
            cast = pc.cast(plain, pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
        values = cast.to_numpy(zero_copy_only=False)
        if (np.isfinite(values) | cast.is_null().to_numpy(zero_copy_only=False)).all():  # "inf", "nan": below
            return values, np.zeros(len(values), dtype=bool)
        break
    arr = pc.cast(text, pa.large_string())
    arr = pc.replace_substring(pc.replace_substring(arr, ",", ""), "\u202f", "")
    arr = pc.utf8_trim_whitespace(arr)
    missing = pc.is_in(pc.utf8_lower(arr), value_set=pa.array(_NA_TEXT, pa.large_string()))
    number = pc.match_substring_regex(arr, _NUMBER)
    values = pc.cast(pc.if_else(number, arr, pa.scalar(None, pa.large_string())), pa.float64())
    bad = pc.invert(pc.or_(missing, number))
    return values.to_numpy(zero_copy_only=False), bad.to_numpy(zero_copy_only=False)


def _launch_ids(id_codes: np.ndarray, id_texts: np.ndarray, rows: np.ndarray, where: _Where):
    """Launch code of each row (order of first appearance) and the ncu ID of each code.

    ``id_codes`` index the rows' ID texts in ``id_texts``; ``rows`` are their row numbers.
    """
    codes, first = pd.factorize(id_codes)
    uniques = id_texts[first]
    numbers = pd.to_numeric(pd.Series(uniques).str.strip(), errors="coerce").to_numpy(float)
    bad = np.isnan(numbers) | (numbers != np.round(numbers))
    if bad.any():
        first_bad = np.flatnonzero(bad)[0]
        raise where.error(
            f"ID {uniques[first_bad]!r} is not a launch number: keep ncu's ID column and remove "
            "lines that are not part of the export",
            rows[np.argmax(codes == first_bad)],
        )
    merged, launches = pd.factorize(numbers.astype(np.int64))  # " 0" and "0" are one launch
    return merged[codes], np.asarray(launches, dtype=np.int64)


def _long_launches(table: pa.Table, where: _Where) -> tuple[pa.Table, np.ndarray, np.ndarray, np.ndarray]:
    """A long export's metric rows (log lines dropped), their row numbers, the launch code of each
    row and the ncu ID of each code."""
    integer_ids = "ID" in table.column_names and pa.types.is_integer(table["ID"].type)
    if integer_ids:  # every row a launch's (no log lines), IDs plain integers
        ids = table["ID"].to_numpy()
        index = np.arange(len(ids))
    else:
        id_codes, id_texts = _text_codes(table, "ID")
        index = np.flatnonzero(~_is_log(id_texts)[id_codes])  # row numbers of the metric rows
        if len(index) < table.num_rows:
            table, id_codes = table.take(index), id_codes[index]
    if table.num_rows == 0:
        raise where.no_kernel("the export holds no rows")
    codes, launches = _launch_runs(ids) if integer_ids else _launch_ids(id_codes, id_texts, index, where)
    return table, index, codes, launches


def _launch_runs(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Launch code of each row and the ID of each code (order of first appearance), from integer
    IDs: one pass when each launch's rows are contiguous, as ncu writes them."""
    starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
    launches = ids[starts]
    if not (np.diff(launches) > 0).all() and len(np.unique(launches)) < len(launches):
        # a launch in several runs: a general factorize
        codes, uniques = pd.factorize(ids)
        return codes, np.asarray(uniques, dtype=np.int64)
    return np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(ids)))), launches.astype(np.int64)


def _distinct(keys: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(code per row, distinct keys) of integer keys in [0, size), distinct keys ascending.

    A count over the key space when it is small (a long export's label and unit combinations are
    a few dozen): no hash table over millions of rows, as a factorize would build.
    """
    if size > 4 * len(keys) + 4096:
        codes, distinct = pd.factorize(keys, sort=True)
        return codes, distinct
    distinct = np.flatnonzero(np.bincount(keys, minlength=size))
    code_of = np.zeros(size, dtype=np.int64)
    code_of[distinct] = np.arange(len(distinct))
    return code_of[keys], distinct


def _first_rows(codes: np.ndarray, n: int) -> np.ndarray:
    """Position of the first row of each of ``n`` codes."""
    first = np.empty(n, dtype=np.int64)
    first[codes[::-1]] = np.arange(len(codes))[::-1]
    return first


def _read_wide(source, encoding: str, header: list[str], where: _Where) -> pd.DataFrame:
    metrics = [c for c in header if "__" in c and (is_kept_metric(c) or c in _DIMS)]
    ident = [c for c in _IDENT_SOURCE if c in header]
    table = _read_table(source, encoding, [*ident, *metrics], where)
    if table.num_rows == 0:
        raise where.no_kernel("no units row and no launches")
    id_codes, id_texts = _text_codes(table, "ID")
    if id_texts[id_codes[0]].strip():
        raise where.error(
            "the second row holds values, not units: this wide export has no units row, so the "
            "values cannot be converted; re-export with `ncu --csv --page raw`, which writes the "
            "units row, or add `--print-units base`",
            0,
        )
    index = np.flatnonzero(~_is_log(id_texts)[id_codes[1:]]) + 1  # the launches' rows, after the units row
    if len(index) == 0:
        raise where.no_kernel("no launches after the units row")
    codes, launches = _launch_ids(id_codes[index], id_texts, index, where)
    first = _first_rows(codes, len(launches))
    order = np.argsort(launches, kind="stable")
    rows = index[first[order]]  # one row per launch, in launch order
    repeated = len(first) != len(codes)
    names = sorted(m for m in metrics if m != _DISPLAY_NAME)
    slot = {m: i for i, m in enumerate(names)}
    matrix = np.empty((len(names), len(rows)))
    kept = np.ones(len(names), dtype=bool)
    per_row: dict[str, np.ndarray] = {}  # values of every row, to judge repeated launch IDs
    unknown: dict[str, str] = {}  # metric -> a unit si_factor does not know
    for metric in metrics:
        if metric == _DISPLAY_NAME:
            continue
        value_codes, texts = _text_codes(table, metric)
        used = np.zeros(len(texts), dtype=bool)
        used[value_codes[index]] = True  # the units row's text is no value
        values, bad = np.full(len(texts), np.nan), np.zeros(len(texts), dtype=bool)
        values[used], bad[used] = _numbers(pa.array(texts[used], pa.string()))
        if bad.any():
            if metric.startswith("device__attribute_"):
                kept[slot[metric]] = False
                continue  # a string-valued device attribute: not a number to keep
            row = index[np.argmax(bad[value_codes[index]])]
            raise where.error(
                f"metric {metric!r} has the value {texts[value_codes[row]]!r}, not a number: fix or re-export the file",
                row,
            )
        unit = texts[value_codes[0]].strip()
        try:
            values = values * si_factor(unit, metric)
        except UnitError as err:
            if metric in _KEPT:
                raise where.error(f"{err}", 0) from err
            kept[slot[metric]], unknown[metric] = False, unit  # no recipe reads it: left out
            continue
        matrix[slot[metric]] = values[value_codes[rows]]
        if repeated:
            per_row[metric] = values[value_codes[index]]
    if repeated:
        spread = pd.DataFrame(per_row).groupby(codes).nunique(dropna=False).max(axis=1).to_numpy()
        if (spread > 1).any():
            code = int(np.argmax(spread > 1))
            raise where.error(
                f"launch ID {launches[code]} appears twice with different values: the file "
                "concatenates several exports; split it so each launch ID appears once",
                index[np.flatnonzero(codes == code)[1]],
            )
    if not kept.all():
        names, matrix = [m for m, k in zip(names, kept, strict=True) if k], matrix[kept]
    unknown_unit_warning(str(where.path), unknown, stacklevel=3)
    texts = {c: _text_codes(table, c) for c in ident if c != "ID"}
    ident_text = {c: (value_codes[rows], uniques) for c, (value_codes, uniques) in texts.items()}
    display_names = None
    if _DISPLAY_NAME in metrics:
        value_codes, uniques = _text_codes(table, _DISPLAY_NAME)
        display_names = value_codes[rows], uniques
    return _assemble(ident_text, launches[order], names, matrix, display_names, "ncu-csv-raw", where)


def _long_metric(section: str, body: str, name: str) -> str:
    """The ncu metric a long-format row holds, or "" when it is an unknown display label."""
    if "__" in name:
        return name.strip()
    if "Roofline" in section:
        kind = "achieved" if "Achieved Value" in body else "roofline" if "Roofline" in body else ""
        return ROOFLINE_CHART_LABELS.get((kind, name.strip()), "")
    return DETAILS_LABELS.get((section.strip(), name.strip()), "")


def _read_long(source, encoding: str, header: list[str], where: _Where) -> pd.DataFrame:
    table = _read_table(source, encoding, [c for c in _LONG_COLUMNS if c in header], where, integer_ids=True)
    table, index, codes, launches = _long_launches(table, where)
    n_launch = len(launches)

    # One code per (section, body item, metric name) combination: labels are mapped once each.
    (sec, sec_u), (body, body_u), (name, name_u) = (
        _text_codes(table, c) for c in ("Section Name", "Body Item Label", "Metric Name")
    )
    nb, nn = len(body_u), len(name_u)
    combo_codes, combos = _distinct((sec * nb + body) * nn + name, len(sec_u) * nb * nn)
    triples = [(sec_u[k // (nb * nn)], body_u[(k // nn) % nb], name_u[k % nn]) for k in combos]
    mapped = [_long_metric(s, b, m) for s, b, m in triples]
    named = [t for t in triples if t[2].strip()]
    if "Body Item Label" in header and named and all("Roofline" in t[0] for t in named):
        source_format = "ncu-csv-roofline-section"
    elif named and all("__" in t[2] for t in named):
        source_format = "nersc-long" if "Kernel Time" in header else "ncu-csv-long"
    else:
        source_format = "ncu-csv-details"
    metric_names = sorted({m for m in mapped if m and (is_kept_metric(m) or m in _DIMS)})
    position = {m: i for i, m in enumerate(metric_names)}
    metric_of_combo = np.array([position.get(m, -1) for m in mapped], dtype=np.int64)
    raw_of_combo = np.array(["__" in t[2] for t in triples], dtype=bool)
    metric_id = metric_of_combo[combo_codes]

    value_text = table["Metric Value"]
    display_id = position.get(_DISPLAY_NAME, -2)
    sel = np.flatnonzero((metric_id >= 0) & (metric_id != display_id))
    # The value cast (pyarrow compute, which releases the GIL) runs on the second core beside the
    # passes that do not need the values; every check below still runs in the same order.
    with ThreadPoolExecutor(max_workers=1) as pool:
        cast = pool.submit(lambda: _numbers(value_text if len(sel) == len(metric_id) else value_text.take(sel)))
        order = np.argsort(launches, kind="stable")
        rank = np.empty(n_launch, dtype=np.int64)
        rank[order] = np.arange(n_launch)  # launch code -> position in launch order
        at = np.flatnonzero(metric_id == display_id)
        display_names = None
        if len(at):  # a launch's first display-name row wins
            shown = pc.dictionary_encode(value_text.take(at).combine_chunks())
            display_codes = np.full(n_launch, len(shown.dictionary))  # "" where a launch has none
            display_codes[rank[codes[at]][::-1]] = shown.indices.to_numpy()[::-1]
            texts = shown.dictionary.to_numpy(zero_copy_only=False)
            display_names = display_codes, np.concatenate([texts, np.array([""], dtype=object)])
        mid = metric_id[sel]
        unit, unit_u = _text_codes(table, "Metric Unit")
        pair_codes, pairs = _distinct(mid * len(unit_u) + unit[sel], len(metric_names) * len(unit_u))
        is_raw = raw_of_combo[combo_codes[sel]]
        # (rows of sel, their places in the metrics x launches matrix, whether no place repeats):
        # display-label rows first, raw metric rows overwrite them
        position = np.arange(n_launch) if (np.diff(launches) > 0).all() else rank  # launch code -> column
        passes = []
        for prefer in (False, True):
            if is_raw.all() or not is_raw.any():
                if prefer != is_raw[:1].any():
                    continue  # all rows are of one kind: one pass, no selection
                pick = slice(None)
            else:
                pick = np.flatnonzero(is_raw == prefer)
            place = mid[pick] * n_launch + position[codes[sel[pick]]]
            passes.append((pick, place, len(place) == 0 or np.bincount(place).max() == 1))
        first = _first_rows(codes, n_launch)
        rows = first[order]
        identity = {c: _text_codes(table, c) for c in _IDENT_SOURCE if c in table.column_names and c != "ID"}
        values, bad = cast.result()
    attribute = np.array([m.startswith("device__attribute_") for m in metric_names], dtype=bool)
    if len(sel) and (bad & ~attribute[mid]).any():
        pos = sel[np.argmax(bad & ~attribute[mid])]
        raise where.error(
            f"metric {metric_names[metric_id[pos]]!r} has the value "
            f"{value_text[int(pos)].as_py()!r}, not a number: fix or re-export the file",
            index[pos],
        )
    factors, refused, unknown = np.empty(len(pairs)), [], {}
    for i, pair in enumerate(pairs):
        metric, text = metric_names[pair // len(unit_u)], str(unit_u[pair % len(unit_u)]).strip()
        try:
            factors[i] = si_factor(text, metric)
        except UnitError as err:
            if metric in _KEPT:
                refused.append((index[sel[np.argmax(pair_codes == i)]], str(err)))
            else:  # no recipe reads it: the whole metric is left out below
                factors[i] = np.nan
                unknown.setdefault(metric, text)
    if refused:  # the first in the file, whatever the order of the pairs
        row, message = min(refused)
        raise where.error(message, row)
    si = values * factors[pair_codes]
    si[bad] = np.nan  # string-valued device attributes

    matrix = np.full((len(metric_names), n_launch), np.nan)
    for pick, place, unique in passes:
        if unique:  # nothing to choose or check
            places, firsts = place, si[pick]
        else:
            places, firsts = _deduplicate(place, si[pick], index[sel[pick]], metric_names, launches[order], where)
        found = ~np.isnan(firsts)
        if not found.all():
            places, firsts = places[found], firsts[found]
        matrix.ravel()[places] = firsts

    if unknown:
        keep = [i for i, m in enumerate(metric_names) if m not in unknown]
        metric_names, matrix = [metric_names[i] for i in keep], matrix[keep]
        unknown_unit_warning(str(where.path), unknown, stacklevel=3)

    ident = {}
    for column, (column_codes, uniques) in identity.items():
        ident[column] = column_codes[rows], uniques
        if column == "Kernel Name":
            _check_kernels(codes, first, column_codes, uniques, launches, index, where)
    return _assemble(ident, launches[order], metric_names, matrix, display_names, source_format, where)


def _deduplicate(key, values, rows, metric_names, launches, where: _Where) -> tuple[np.ndarray, np.ndarray]:
    """First non-NaN value per key (place in the metrics x ``launches`` matrix), as (keys, values);
    refuse (launch, metric) pairs given twice, differently."""
    grouped = pd.Series(values).groupby(key, sort=False)
    first = grouped.first()
    low, high = grouped.min().to_numpy(), grouped.max().to_numpy()
    conflict = high - low > 1e-9 * np.maximum(np.abs(low), np.abs(high))
    if conflict.any():
        bad_key = first.index[np.argmax(conflict)]
        launch = launches[bad_key % len(launches)]
        metric = metric_names[bad_key // len(launches)]
        raise where.error(
            f"launch ID {launch} gives metric {metric!r} twice with different values: the file "
            "concatenates several exports or runs; split it so each launch ID appears once",
            rows[np.flatnonzero(key == bad_key)[1]],
        )
    return first.index.to_numpy(), first.to_numpy()


def _check_kernels(codes, first, kernel_codes, kernels, launches, index, where: _Where) -> None:
    """Refuse launch IDs that name two kernels (concatenated exports); ``first`` is the first row of
    each launch code."""
    first_kernel = kernel_codes[first]
    if (kernel_codes == first_kernel[codes]).all():
        return
    width = int(kernel_codes.max()) + 1
    pairs = np.unique(codes.astype(np.int64) * width + kernel_codes)
    ids = pairs // width
    twice = np.flatnonzero(np.diff(ids) == 0)[0]
    code, a, b = ids[twice], pairs[twice] % width, pairs[twice + 1] % width
    row = index[np.argmax((codes == code) & (kernel_codes == b))]
    raise where.error(
        f"launch ID {launches[code]} names two kernels ({kernels[a]!r} and {kernels[b]!r}): the "
        "file concatenates several exports; split it so each launch ID appears once",
        row,
    )


def _integer_text(columns: list[np.ndarray], join: Callable[[list[str]], str]) -> tuple[np.ndarray, np.ndarray]:
    """Per row, ``join`` of the columns' values written as integers, "" where one is NaN, as
    (code per row, distinct texts).

    Formatted once per distinct combination: 100k launches have a few distinct grids, not 100k.
    """
    values = np.ascontiguousarray(np.column_stack(columns))
    keys = values.view(np.dtype((np.void, values.itemsize * values.shape[1]))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    texts = ["" if np.isnan(values[i]).any() else join([f"{v:.0f}" for v in values[i]]) for i in first]
    return inverse.ravel(), np.array(texts, dtype=object)


def _fill_blanks(text: tuple[np.ndarray, np.ndarray], filler: tuple[np.ndarray, np.ndarray]):
    """(codes, texts) of a per-launch text column whose empty texts are replaced by ``filler``'s."""
    codes, texts = text
    fill_codes, fill_texts = filler
    blank = (texts == "")[codes]
    return np.where(blank, fill_codes + len(texts), codes), np.concatenate([texts, fill_texts])


def _assemble(ident, launches, names, matrix, display_names, source_format, where) -> pd.DataFrame:
    """The raw launch frame from per-launch identity text, launch numbers and SI values.

    Everything comes in launch order: ``ident`` (source column -> (code per launch, distinct
    texts)), ``launches``, the rows of ``matrix`` (one per metric of the sorted ``names``) and
    ``display_names`` ((code per launch, distinct texts) or None). Texts are cleaned and checked
    once per distinct text, not once per launch.
    """
    n = len(launches)
    blank = (np.zeros(n, dtype=np.int64), np.array([""], dtype=object))
    text = {column: blank for column in IDENTITY_COLUMNS}
    for source, (codes, uniques) in ident.items():
        text[_IDENT_SOURCE[source]] = (codes, np.array([str(u).strip() for u in uniques], dtype=object))
    codes, devices = text["device"]
    text["device"] = codes, np.array(["" if re.fullmatch(r"\d*", d) else d for d in devices], dtype=object)
    if display_names is not None:
        codes, uniques = display_names
        names_text = (codes, np.array([str(u).strip() for u in uniques], dtype=object))
        text["device"] = _fill_blanks(names_text, text["device"])
    row = {m: i for i, m in enumerate(names)}
    for what in ("grid", "block"):
        dims = [row.get(f"launch__{what}_dim_{a}") for a in "xyz"]
        if None not in dims:
            filler = _integer_text([matrix[i] for i in dims], lambda parts: "(" + ", ".join(parts) + ")")
            text[what] = _fill_blanks(text[what], filler)
    cc = [row.get(f"device__attribute_compute_capability_{part}") for part in ("major", "minor")]
    if None not in cc:
        filler = _integer_text([matrix[i] for i in cc], ".".join)
        text["compute_capability"] = _fill_blanks(text["compute_capability"], filler)
    if any("\ufffd" in t for codes, texts in text.values() for t in texts[np.bincount(codes).nonzero()[0]]):
        warnings.warn(
            f"{where.path}: bytes that are not UTF-8 were replaced by U+FFFD in kernel or device "
            "names; re-export the CSV from the report if the names matter",
            NcuCsvWarning,
            stacklevel=4,
        )
    out = {}
    for column, (codes, texts) in text.items():
        out[column] = pd.Series(pa.array(texts, pa.string()).take(pa.array(codes)), dtype="str")
    out["launch"] = pd.Series(launches)
    out["source_format"] = pd.Series(source_format, index=range(n), dtype="str")
    kept = [i for i, m in enumerate(names) if m not in _DIMS or is_kept_metric(m)]
    if len(kept) < len(names):
        names, matrix = [names[i] for i in kept], matrix[kept]
    return pd.concat([pd.DataFrame(out), pd.DataFrame(matrix.T, columns=names, copy=False)], axis=1)
