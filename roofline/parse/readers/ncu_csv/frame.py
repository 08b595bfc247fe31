"""The raw launch frame: its identity columns, the metrics it keeps, its assembly from per-launch values."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd
import pyarrow as pa

from roofline.metrics.quantities import all_input_metrics
from roofline.parse.readers.ncu_csv.errors import NcuCsvWarning

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

DISPLAY_NAME = "device__attribute_display_name"
DIMS = {f"launch__{w}_dim_{a}": (w, a) for w in ("grid", "block") for a in "xyz"}
KEPT = frozenset(all_input_metrics())
IDENT_SOURCE = {
    "ID": "launch",
    "Kernel Name": "kernel",
    "Stream": "stream",
    "Grid Size": "grid",
    "Block Size": "block",
    "Device": "device",
    "CC": "compute_capability",
}


def is_kept_metric(name: str) -> bool:
    """Whether the raw launch frame keeps ncu metric ``name``."""
    return name in KEPT or name.startswith("sm__ops_path_tensor_") or name.startswith("device__attribute_")


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


def assemble(ident, launches, names, matrix, display_names, source_format, where) -> pd.DataFrame:
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
        text[IDENT_SOURCE[source]] = (codes, np.array([str(u).strip() for u in uniques], dtype=object))
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
    kept = [i for i, m in enumerate(names) if m not in DIMS or is_kept_metric(m)]
    if len(kept) < len(names):
        names, matrix = [names[i] for i in kept], matrix[kept]
    return pd.concat([pd.DataFrame(out), pd.DataFrame(matrix.T, columns=names, copy=False)], axis=1)
