"""The wide reader (``ncu --csv --page raw``): one row per launch, metric names in the header, units row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from roofline.metrics.units import UnitError, si_factor, unknown_unit_warning
from roofline.parse.readers.ncu_csv.errors import Where
from roofline.parse.readers.ncu_csv.frame import DIMS, DISPLAY_NAME, IDENT_SOURCE, KEPT, assemble, is_kept_metric
from roofline.parse.readers.ncu_csv.table import (
    arrow_codes,
    first_rows,
    is_log,
    launch_ids,
    read_table,
    text_codes,
    to_numbers,
)


def read_wide(source, encoding: str, header: list[str], where: Where) -> pd.DataFrame:
    metrics = [c for c in header if "__" in c and (is_kept_metric(c) or c in DIMS)]
    ident = [c for c in IDENT_SOURCE if c in header]
    table = read_table(source, encoding, [*ident, *metrics], where, one_block=True)
    if table.num_rows == 0:
        raise where.no_kernel("no units row and no launches")
    id_codes, id_texts = text_codes(table, "ID")
    if id_texts[id_codes[0]].strip():
        raise where.error(
            "the second row holds values, not units: this wide export has no units row, so the "
            "values cannot be converted; re-export with `ncu --csv --page raw`, which writes the "
            "units row, or add `--print-units base`",
            0,
        )
    index = np.flatnonzero(~is_log(id_texts)[id_codes[1:]]) + 1  # the launches' rows, after the units row
    if len(index) == 0:
        raise where.no_kernel("no launches after the units row")
    codes, launches = launch_ids(id_codes[index], id_texts, index, where)
    first = first_rows(codes, len(launches))
    order = np.argsort(launches, kind="stable")
    rows = index[first[order]]  # one row per launch, in launch order
    repeated = len(first) != len(codes)
    names = sorted(m for m in metrics if m != DISPLAY_NAME)
    slot = {m: i for i, m in enumerate(names)}
    matrix = np.empty((len(names), len(rows)))
    kept = np.ones(len(names), dtype=bool)
    per_row: dict[str, np.ndarray] = {}  # values of every row, to judge repeated launch IDs
    unknown: dict[str, str] = {}  # metric -> a unit si_factor does not know
    for metric in metrics:
        if metric == DISPLAY_NAME:
            continue
        value_codes, texts = arrow_codes(table, metric)
        value_codes = value_codes.astype(np.intp)  # indexes below: widened once, not on every use
        used = np.zeros(len(texts), dtype=bool)
        used[value_codes[index]] = True  # the units row's text is no value
        values, bad = np.full(len(texts), np.nan), np.zeros(len(texts), dtype=bool)
        values[used], bad[used] = to_numbers(texts.filter(pa.array(used)))
        if bad.any():
            if metric.startswith("device__attribute_"):
                kept[slot[metric]] = False
                continue  # a string-valued device attribute: not a number to keep
            row = index[np.argmax(bad[value_codes[index]])]
            raise where.error(
                f"metric {metric!r} has the value {texts[value_codes[row]].as_py()!r}, not a number: fix or "
                "re-export the file",
                row,
            )
        unit = texts[value_codes[0]].as_py().strip()
        try:
            values = values * si_factor(unit, metric)
        except UnitError as err:
            if metric in KEPT:
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
    texts = {c: text_codes(table, c) for c in ident if c != "ID"}
    ident_text = {c: (value_codes[rows], uniques) for c, (value_codes, uniques) in texts.items()}
    display_names = None
    if DISPLAY_NAME in metrics:
        value_codes, uniques = text_codes(table, DISPLAY_NAME)
        display_names = value_codes[rows], uniques
    return assemble(ident_text, launches[order], names, matrix, display_names, "ncu-csv-raw", where)
