"""The long reader (NERSC-style, ``--page details``, ``--metrics``): one row per metric, with its unit."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from roofline.metrics.units import UnitError, si_factor, unknown_unit_warning
from roofline.parse.readers.ncu_csv.errors import Where
from roofline.parse.readers.ncu_csv.frame import DIMS, DISPLAY_NAME, IDENT_SOURCE, KEPT, assemble, is_kept_metric
from roofline.parse.readers.ncu_csv.table import first_rows, is_log, launch_ids, read_table, text_codes, to_numbers

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

_LONG_COLUMNS = (
    *IDENT_SOURCE,
    "Section Name",
    "Body Item Label",
    "Metric Name",
    "Metric Unit",
    "Metric Value",
)


def _long_metric(section: str, body: str, name: str) -> str:
    """The ncu metric a long-format row holds, or "" when it is an unknown display label."""
    if "__" in name:
        return name.strip()
    if "Roofline" in section:
        kind = "achieved" if "Achieved Value" in body else "roofline" if "Roofline" in body else ""
        return ROOFLINE_CHART_LABELS.get((kind, name.strip()), "")
    return DETAILS_LABELS.get((section.strip(), name.strip()), "")


def read_long(source, encoding: str, header: list[str], where: Where) -> pd.DataFrame:
    table = read_table(source, encoding, [c for c in _LONG_COLUMNS if c in header], where, integer_ids=True)
    table, index, codes, launches = _long_launches(table, where)
    n_launch = len(launches)

    # One code per (section, body item, metric name) combination: labels are mapped once each.
    (sec, sec_u), (body, body_u), (name, name_u) = (
        text_codes(table, c) for c in ("Section Name", "Body Item Label", "Metric Name")
    )
    nb, nn = len(body_u), len(name_u)
    size = len(sec_u) * nb * nn
    if size > np.iinfo(np.int32).max:  # the codes are 32-bit: widen before they multiply
        sec = sec.astype(np.int64)
    combo_codes, combos = _distinct((sec * nb + body) * nn + name, size)
    triples = [(sec_u[k // (nb * nn)], body_u[(k // nn) % nb], name_u[k % nn]) for k in combos]
    mapped = [_long_metric(s, b, m) for s, b, m in triples]
    named = [t for t in triples if t[2].strip()]
    if "Body Item Label" in header and named and all("Roofline" in t[0] for t in named):
        source_format = "ncu-csv-roofline-section"
    elif named and all("__" in t[2] for t in named):
        source_format = "nersc-long" if "Kernel Time" in header else "ncu-csv-long"
    else:
        source_format = "ncu-csv-details"
    metric_names = sorted({m for m in mapped if m and (is_kept_metric(m) or m in DIMS)})
    position = {m: i for i, m in enumerate(metric_names)}
    metric_of_combo = np.array([position.get(m, -1) for m in mapped], dtype=np.int32)
    raw_of_combo = np.array(["__" in t[2] for t in triples], dtype=bool)
    metric_id = metric_of_combo[combo_codes]

    value_text = table["Metric Value"]
    display_id = position.get(DISPLAY_NAME, -2)
    sel = np.flatnonzero((metric_id >= 0) & (metric_id != display_id))
    # The value cast (pyarrow compute, which releases the GIL) runs on the second core beside the
    # passes that do not need the values; every check below still runs in the same order.
    with ThreadPoolExecutor(max_workers=1) as pool:
        cast = pool.submit(lambda: to_numbers(value_text if len(sel) == len(metric_id) else value_text.take(sel)))
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
        unit, unit_u = text_codes(table, "Metric Unit")
        # 32-bit codes: a few hundred metrics, a few dozen units
        pair_codes, pairs = _distinct(mid * len(unit_u) + unit[sel], len(metric_names) * len(unit_u))
        is_raw = raw_of_combo[combo_codes[sel]]
        # (rows of sel, their places in the metrics x launches matrix, whether no place repeats):
        # display-label rows first, raw metric rows overwrite them
        position = _counting(n_launch) if (np.diff(launches) > 0).all() else rank  # launch code -> column
        passes = []
        for prefer in (False, True):
            if is_raw.all() or not is_raw.any():
                if prefer != is_raw[:1].any():
                    continue  # all rows are of one kind: one pass, no selection
                pick = slice(None)
            else:
                pick = np.flatnonzero(is_raw == prefer)
            place = np.multiply(mid[pick], n_launch, dtype=np.int64)  # 64 bits: metrics x launches
            place += position[codes[sel[pick]]]
            passes.append((pick, place, len(place) == 0 or np.bincount(place).max() == 1))
        first = first_rows(codes, n_launch)
        rows = first[order]
        # a launch's identity is its first row's; the kernel name is read on every row, to refuse
        # an ID that names two kernels
        named = [c for c in IDENT_SOURCE if c in table.column_names and c != "ID"]
        kernel = text_codes(table, "Kernel Name") if "Kernel Name" in named else None
        first_of_launch = table.select([c for c in named if c != "Kernel Name"]).take(rows)
        identity = {c: text_codes(first_of_launch, c) if c != "Kernel Name" else (kernel[0][rows], kernel[1])
                    for c in named}
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
            if metric in KEPT:
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

    if kernel is not None:
        _check_kernels(codes, first, *kernel, launches, index, where)
    return assemble(identity, launches[order], metric_names, matrix, display_names, source_format, where)


def _deduplicate(key, values, rows, metric_names, launches, where: Where) -> tuple[np.ndarray, np.ndarray]:
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


def _check_kernels(codes, first, kernel_codes, kernels, launches, index, where: Where) -> None:
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


def _long_launches(table: pa.Table, where: Where) -> tuple[pa.Table, np.ndarray, np.ndarray, np.ndarray]:
    """A long export's metric rows (log lines dropped), their row numbers, the launch code of each
    row and the ncu ID of each code."""
    integer_ids = "ID" in table.column_names and pa.types.is_integer(table["ID"].type)
    if integer_ids:  # every row a launch's (no log lines), IDs plain integers
        ids = table["ID"].to_numpy()
        index = _counting(len(ids))
    else:
        id_codes, id_texts = text_codes(table, "ID")
        index = np.flatnonzero(~is_log(id_texts)[id_codes])  # row numbers of the metric rows
        if len(index) < table.num_rows:
            table, id_codes = table.take(index), id_codes[index]
    if table.num_rows == 0:
        raise where.no_kernel("the export holds no rows")
    codes, launches = _launch_runs(ids) if integer_ids else launch_ids(id_codes, id_texts, index, where)
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
    return np.repeat(_counting(len(starts)), np.diff(np.append(starts, len(ids)))), launches.astype(np.int64)


def _index_type(n: int) -> type[np.integer]:
    """The integer type of numbers below ``n``: 32 bits where they fit. A row number or code per
    row of a big export is millions of items, and each array's pages cost their first touch."""
    return np.int32 if n <= np.iinfo(np.int32).max else np.int64


def _counting(n: int) -> np.ndarray:
    """0 .. n-1 as :func:`_index_type` of ``n``."""
    return np.arange(n, dtype=_index_type(n))


def _distinct(keys: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(code per row, distinct keys) of integer keys in [0, size), distinct keys ascending.

    A count over the key space when it is small (a long export's label and unit combinations are
    a few dozen): no hash table over millions of rows, as a factorize would build.
    """
    if size > 4 * len(keys) + 4096:
        codes, distinct = pd.factorize(keys, sort=True)
        return codes, distinct
    distinct = np.flatnonzero(np.bincount(keys, minlength=size))
    code_of = np.zeros(size, dtype=_index_type(len(distinct)))
    code_of[distinct] = np.arange(len(distinct))
    return code_of[keys], distinct
