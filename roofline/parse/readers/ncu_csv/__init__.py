"""Read Nsight Compute CSV exports into the parse stage's raw launch frame.

One file in, one frame out: :func:`read_ncu_csv` returns one row per kernel launch with the identity
columns of :data:`IDENTITY_COLUMNS` and one float column per kept ncu metric, in SI base units
(bytes, seconds, Hz, counts). Kept metrics are those :func:`roofline.metrics.quantities.all_input_metrics`
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
padded. A compressed file (gzip, xz, zstd, bzip2, told by its bytes: :mod:`roofline.files.compressed`)
is decompressed in memory and read as the plain file would be. A file that holds ncu's log instead
of a table, or no launch, is refused with what the log says and the fix (:mod:`roofline.parse.readers.ncu_log`).
Bytes that are not UTF-8 are replaced by U+FFFD with a :class:`NcuCsvWarning`; files with a UTF-8 or
UTF-16 byte-order mark are decoded accordingly. A kept metric whose unit the converter does not
know is left out with a :class:`roofline.metrics.units.UnitWarning` when no recipe reads it (it is not in
:func:`roofline.metrics.quantities.all_input_metrics`: a tensor path or device attribute no recipe names), and
refused when one does. Everything else that is wrong raises :class:`NcuCsvError` naming the file,
the line or metric, and the fix.

Modules: :mod:`.sniff` finds the table (compression, encoding, header, delimiter), :mod:`.table`
reads its columns and turns text into launches and numbers, :mod:`.wide` and :mod:`.long` read the
two layouts, :mod:`.frame` assembles the raw launch frame, :mod:`.errors` words the refusals.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from roofline.parse.readers.ncu_csv.errors import NcuCsvError, NcuCsvWarning, Where
from roofline.parse.readers.ncu_csv.frame import IDENTITY_COLUMNS, SOURCE_FORMATS, is_kept_metric
from roofline.parse.readers.ncu_csv.long import DETAILS_LABELS, ROOFLINE_CHART_LABELS, read_long
from roofline.parse.readers.ncu_csv.sniff import sniff
from roofline.parse.readers.ncu_csv.wide import read_wide

__all__ = [
    "DETAILS_LABELS",
    "IDENTITY_COLUMNS",
    "ROOFLINE_CHART_LABELS",
    "SOURCE_FORMATS",
    "NcuCsvError",
    "NcuCsvWarning",
    "is_kept_metric",
    "read_ncu_csv",
    "read_ncu_csvs",
]


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
    source, encoding, header, first_line, head_lines = sniff(path)
    where = Where(path, first_line, head_lines)
    if "Metric Name" in header and "Metric Value" in header:
        return read_long(source, encoding, header, where)
    return read_wide(source, encoding, header, where)


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
