"""The report's own ceilings: per device and ceiling, the median of the per-launch peaks that ncu
measured (``peak_sustained`` x the unit's clock in that launch), over every app's launches.

The median needs every launch's value, but a report repeats few values (one per clock reading), so
the launches are first reduced to *samples*: one row per device, ceiling, long-or-short launch,
value and clock, with its count (:func:`peak_samples`). The ceilings come from the samples
(:func:`ceilings_from_samples`), the same whether the samples are one frame's
(:func:`report_ceilings`) or a thousand files'. Each parse job stores its app's samples in the
counters file's metadata (:func:`peaks_metadata`), so the ceilings job reads a few rows per app
(:func:`read_peaks`); files written without them are read a batch at a time
(:func:`read_peak_inputs`), which keeps memory to a batch of launches however many apps there are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from roofline.metrics.quantities import COMPUTE_CLASSES
from roofline.parse.plausibility import ratio

# Launches shorter than this report clocks 20-50 % low (../shared/guides/roofline.md §5).
from roofline.tables.files import arrow_table
from roofline.tables.schemas import TABLES, conform
from roofline.tables.typed_columns import ABSENT_VALUES

SHORT_LAUNCH_S = 20e-6
# (kind, name) -> (the counters' peak column, the clock it scales with)
PEAK_COLUMNS = {
    **{("compute", c): (f"peak_flops_{c}", "sm_clock_hz") for c in COMPUTE_CLASSES},
    ("memory", "dram"): ("peak_dram_bw", "dram_clock_hz"),
    ("memory", "l2"): ("peak_l2_bw", "l2_clock_hz"),
    ("memory", "l1"): ("peak_l1_bw", "l1_clock_hz"),
    ("memory", "shared"): ("peak_shared_bw", "sm_clock_hz"),
}
# The SM clock of every launch that has a reading, sampled like a peak (value = clock) under this
# ceiling number: the clock a device's roofs are held at (roofline.ceilings.select.hold_at_launch_clock),
# also for launches without any peak metric (a CSV export, basic sections).
SM_CLOCK_ORDER = len(PEAK_COLUMNS)
LISTED_LAUNCHES = 8  # launch ids a citation names
_SAMPLE_KEY = ["device", "ceiling", "long", "value", "clock"]
_GROUP_KEY = ["device", "ceiling", "long"]
FILES_PER_BATCH = 50  # counters files read at once: ~100k launches at 2,000 launches per app


class Samples(NamedTuple):
    """Launches reduced for the median: ``counts`` (one row per :data:`_SAMPLE_KEY`, its launch
    count) and ``heads`` (each device, ceiling and long-or-short group's first launches in input
    order: position, launch id, recipe)."""

    counts: pd.DataFrame
    heads: pd.DataFrame


def peak_samples(counters: pd.DataFrame, first_position: int = 0) -> Samples:
    """The report's peaks of ``counters`` as samples; ``first_position`` is the input order of the
    frame's first row (frames read one after another continue each other's order)."""
    launches = _report_launches(counters, _what_if_given(counters))
    if not launches:
        return _joined([], [])
    counts, heads = _sample_columns(launches, first_position)
    return Samples(pd.DataFrame(counts), pd.DataFrame(heads))


def _what_if_given(counters: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per peak column that has a recipe column: the rows whose peak a what-if table gave."""
    return {column: (counters[f"{column}_recipe"] == "what-if").to_numpy(dtype=bool, na_value=False)
            for column, _ in PEAK_COLUMNS.values() if f"{column}_recipe" in counters}


def _report_launches(counters: pd.DataFrame, given: dict[str, np.ndarray],
                     keep: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Every ceiling's launches whose peak the report measured, ceiling after ceiling (each
    ceiling's in input order), as arrays: ``row`` (the launch's place among the ``keep`` rows, by
    default all), ``ceiling`` (its index in :data:`PEAK_COLUMNS`), ``long``, ``value``, ``clock``,
    ``recipe``, ``device`` (and ``device_code``, its number among the devices) and ``launch``. Empty
    when there is none. ``given``: :func:`_what_if_given`."""

    def kept(values: np.ndarray) -> np.ndarray:
        return values if keep is None else values[keep]

    if "device" not in counters:
        return {}
    device_codes, devices = pd.factorize(counters["device"])  # -1: no device
    device_codes = kept(device_codes)
    has_device = device_codes >= 0
    parts: dict[str, list[np.ndarray]] = {name: [] for name in ("row", "ceiling", "value", "clock", "recipe")}
    for order, (column, clock) in enumerate([*PEAK_COLUMNS.values(), ("sm_clock_hz", "sm_clock_hz")]):
        if column not in counters:
            continue
        values = kept(counters[column].to_numpy(dtype="float64", na_value=np.nan))
        is_report = ~np.isnan(values) & has_device
        if column in given:
            is_report &= ~kept(given[column])
        rows = np.flatnonzero(is_report)
        if not len(rows):
            continue
        parts["row"].append(rows)
        parts["ceiling"].append(np.full(len(rows), order, dtype="int64"))
        parts["value"].append(values[rows])
        parts["clock"].append(kept(counters[clock].to_numpy(dtype="float64", na_value=np.nan))[rows]
                              if clock in counters else np.full(len(rows), np.nan))
        parts["recipe"].append(kept(_object_texts(counters[f"{column}_recipe"]))[rows] if column in given
                               else np.full(len(rows), "", dtype=object))
    if not parts["row"]:
        return {}
    launches = {name: np.concatenate(arrays) for name, arrays in parts.items()}
    rows = launches["row"]
    duration = np.full(len(rows), np.nan)
    if "duration_s" in counters:
        seconds = pd.to_numeric(counters["duration_s"], errors="coerce")
        duration = kept(seconds.to_numpy(dtype="float64", na_value=np.nan))[rows]
    launches["long"] = duration >= SHORT_LAUNCH_S
    launches["device_code"] = device_codes[rows]
    launches["device"] = np.asarray(devices, dtype=object)[launches["device_code"]]
    launches["launch"] = kept(counters["launch"].to_numpy())[rows]
    # the app of each launch: launch ids repeat across apps, so a citation of several apps names both
    launches["app"] = (kept(_object_texts(counters["app"]))[rows] if "app" in counters
                       else np.full(len(rows), "", dtype=object))
    return launches


def _object_texts(column: pd.Series) -> np.ndarray:
    """A text column's values as an object array, each distinct text made a Python string once (a
    report's launches share a few devices, apps and recipes, and each ceiling repeats them)."""
    codes, texts = pd.factorize(column, use_na_sentinel=False)
    return np.asarray(texts, dtype=object)[codes]


def _group_numbers(*keys: np.ndarray) -> np.ndarray:
    """Each row's group of equal ``keys``, the groups numbered in order of first appearance, a
    missing value equal to itself (the numbers of a pandas grouping with ``sort=False,
    dropna=False``)."""
    numbers = np.zeros(len(keys[0]), dtype="int64")
    for key in keys:
        codes, uniques = pd.factorize(key, use_na_sentinel=False)
        numbers = pd.factorize(numbers * len(uniques) + codes)[0]
    return numbers


def _sample_columns(launches: dict[str, np.ndarray], first_position: int) -> tuple[dict, dict]:
    """:class:`Samples`' two tables as columns: one row per sample (its first launch's keys and
    the launch count), and each group's first :data:`LISTED_LAUNCHES` launches ordered by input
    position."""
    keys = (launches["device_code"], launches["ceiling"], launches["long"])
    sample = _group_numbers(*keys, launches["value"], launches["clock"])
    count = np.bincount(sample)
    by_sample = np.argsort(sample, kind="stable")
    first = by_sample[np.cumsum(count) - count]  # each sample's first launch
    counts = {name: launches[name][first] for name in _SAMPLE_KEY}
    counts["count"] = count.astype("int64")
    group = _group_numbers(*keys)
    size = np.bincount(group)
    by_group = np.argsort(group, kind="stable")
    rank = np.empty(len(group), dtype="int64")
    rank[by_group] = np.arange(len(group)) - np.repeat(np.cumsum(size) - size, size)
    listed = np.flatnonzero(rank < LISTED_LAUNCHES)
    listed = listed[np.argsort(launches["row"][listed], kind="stable")]
    heads = {name: launches[name][listed] for name in _GROUP_KEY}
    heads["position"] = launches["row"][listed] + first_position
    heads["launch"] = launches["launch"][listed]
    heads["app"] = launches["app"][listed]
    heads["recipe"] = launches["recipe"][listed]
    return counts, heads


def _joined(counts: list[pd.DataFrame], heads: list[pd.DataFrame], merge: bool | None = None) -> Samples:
    """The samples of several frames' ``counts`` and ``heads``, one after the other; ``merge``
    (default: more than one frame) sums the counts of a sample that more than one of them has."""
    if not counts:
        return Samples(pd.DataFrame(columns=[*_SAMPLE_KEY, "count"]),
                       pd.DataFrame(columns=[*_GROUP_KEY, "position", "launch", "recipe", "app"]))
    count = pd.concat(counts, ignore_index=True) if len(counts) > 1 else counts[0].reset_index(drop=True)
    if merge is None:
        merge = len(counts) > 1
    if merge:
        count = count.groupby(_SAMPLE_KEY, sort=False, dropna=False)["count"].sum().reset_index()
    head = pd.concat(heads, ignore_index=True) if len(heads) > 1 else heads[0].reset_index(drop=True)
    head = head.sort_values("position", kind="stable")
    return Samples(count, head.groupby(_GROUP_KEY, sort=False).head(LISTED_LAUNCHES))


def cited_launches(head: pd.DataFrame) -> str:
    """The launches a citation lists: their ids ("3,7"); of several apps, whose launch ids repeat,
    the ids after each app's name ("gemm:2; attn:2", not "2,2")."""
    ids = [str(int(i)) for i in head["launch"]]
    apps = head["app"].fillna("").astype(str).tolist() if "app" in head else [""] * len(ids)
    if len(set(apps)) < 2:
        return ",".join(ids)
    runs: list[tuple[str, list[str]]] = []  # in input order, an app's launches together
    for app, i in zip(apps, ids):
        if runs and runs[-1][0] == app:
            runs[-1][1].append(i)
        else:
            runs.append((app, [i]))
    return "; ".join(f"{app}:{','.join(i)}" if app else ",".join(i) for app, i in runs)


def _medians(samples: Samples, clock: bool = False) -> list[dict]:
    """Per device and ceiling (``clock``: the SM clock, :data:`SM_CLOCK_ORDER`, instead): the median
    over its launches, long launches preferred, as a ceilings row.

    Very short launches show odd clock readings, so launches under 20 us are used only when a
    device has no longer one. ``spread`` is max/min of the values used; ``citation`` lists them.
    """
    names = [*PEAK_COLUMNS, ("clock", "sm")]
    rows = []
    heads = {key: group for key, group in samples.heads.groupby(_GROUP_KEY, sort=False)}
    counts = samples.counts
    counts = counts[(counts["ceiling"] == SM_CLOCK_ORDER) == clock]
    for (device, order), group in counts.groupby(["device", "ceiling"], sort=True):
        has_long = group["long"].astype(bool)
        used = group[has_long] if has_long.any() else group
        caveat = "" if has_long.any() else "; only launches under 20 us, whose clock readings run low"
        counts = used["count"].to_numpy(dtype="int64")
        values = np.repeat(used["value"].to_numpy(dtype="float64"), counts)
        clocks = np.repeat(used["clock"].to_numpy(dtype="float64"), counts)
        head = heads[(device, order, bool(has_long.any()))]
        kind, name = names[int(order)]
        launches = cited_launches(head.head(LISTED_LAUNCHES))
        more = "…" if len(values) > LISTED_LAUNCHES else ""
        value = float(np.median(values))
        # one launch without a clock reading leaves the clock unknown, as the median of all would
        clock = float(np.median(clocks)) if not np.isnan(clocks).all() else np.nan
        rows.append({
            "device": device, "kind": kind, "name": name, "value": value, "source": "report",
            "clock_hz": clock, "per_clock": ratio(value, clock),
            "citation": f"median of {len(values)} launch{'es' if len(values) != 1 else ''} [{launches}{more}] "
                        f"({head['recipe'].iat[0]}){caveat}",
            "launches": len(values),
            "spread": ratio(values.max(), values.min()),
        })
    return rows


def ceilings_from_samples(samples: Samples) -> pd.DataFrame:
    """Per device and ceiling: the median over its launches, long launches preferred (:func:`_medians`)."""
    return conform(pd.DataFrame(_medians(samples)), "ceilings")


def launch_clocks(samples: Samples) -> pd.Series:
    """Per device: the median SM clock [Hz] of its launches (long launches preferred, as for the
    peaks), the clock its launches ran at and so the clock its roofs are held at."""
    rows = _medians(samples, clock=True)
    return pd.Series({row["device"]: row["value"] for row in rows}, dtype="float64", name="clock_hz")


def report_ceilings(counters: pd.DataFrame) -> pd.DataFrame:
    """The report's ceilings of ``counters`` (one frame): :func:`ceilings_from_samples` of its samples."""
    return ceilings_from_samples(peak_samples(counters))


class PeakInputs(NamedTuple):
    """What the ceilings need of every app's counters: the report peaks' samples, the rows of
    what-if machines (whose explicit peaks are ceilings), every device named, and the devices of
    measured launches (not what-if rows: those ran at a clock, which their roofs must share); and
    the devices of each app (by the counters' ``app``), whose roofs are the only ones its
    classification reads."""

    samples: Samples
    what_if: pd.DataFrame
    devices: list[str]
    measured: list[str] = []
    app_devices: dict[str, tuple[str, ...]] = {}


def peak_columns() -> list[str]:
    """The counters columns the ceilings read."""
    wanted = ["app", "device", "launch", "duration_s", "source_format"]
    for column, clock in PEAK_COLUMNS.values():
        wanted += [column, f"{column}_recipe", clock]
    return list(dict.fromkeys(wanted))


def app_peaks(counters: pd.DataFrame) -> pd.DataFrame:
    """What the ceilings read of ``counters`` (one app's, or a batch of apps' in input order), as
    the peaks table (:data:`roofline.tables.schemas.PEAKS`): the report peaks of its measured launches as
    samples and first launches, each what-if machine's peaks (the first launch defining each, per
    app), and the devices its launches ran on. A few rows per app, whatever its launches.

    Built from the columns' arrays, part after part (a parse job's frame is ~200 columns wide: a
    pandas step per part and ceiling cost more than the rest of the table)."""
    given = _what_if_given(counters)
    source = counters.get("source_format")
    measured = None if source is None else (source != "what-if").to_numpy(dtype=bool, na_value=True)
    keep = None if measured is None or measured.all() else np.flatnonzero(measured)
    launches = _report_launches(counters, given, keep)
    parts = []
    if launches:
        counts, heads = _sample_columns(launches, 0)
        parts += [{**counts, "part": "sample"}, {**heads, "part": "first"}]
    for order, (column, _) in enumerate(PEAK_COLUMNS.values()):
        rows = np.flatnonzero(given[column]) if column in given else ()
        if not len(rows):
            continue
        machines = pd.DataFrame({name: counters[name].to_numpy()[rows] for name in ("app", "device", column)})
        first = machines.drop_duplicates(["app", "device"])
        parts.append({"app": first["app"].to_numpy(), "device": first["device"].to_numpy(),
                      "value": first[column].to_numpy(dtype="float64", na_value=np.nan), "part": "what-if",
                      "ceiling": np.full(len(first), order, dtype="int64")})
    apps = counters["app"].unique() if "app" in counters else []
    if "device" in counters and len(counters):
        if len(apps) > 1:  # a batch of apps: each app's devices, as the ceilings give each its own share
            named = pd.DataFrame({"app": counters["app"].to_numpy(dtype=object),
                                  "device": counters["device"].to_numpy(dtype=object)}).drop_duplicates()
            parts.append({"app": named["app"].to_numpy(), "device": named["device"].to_numpy(), "part": "device"})
        else:
            parts.append({"device": pd.unique(counters["device"].astype(object)), "part": "device"})
        ran = counters["device"].to_numpy(dtype=object) if measured is None else counters["device"].to_numpy(
            dtype=object)[measured]
        parts.append({"device": pd.unique(ran), "part": "measured"})
    if not parts:
        return conform(pd.DataFrame(), "peaks")
    app = apps[0] if len(apps) == 1 else ""  # a batch of apps: the samples are no one app's
    return conform(pd.DataFrame(_stacked(parts, app)), "peaks")


# What a peaks row holds where its part gives no value: what conform makes of a missing one.
_PEAKS_ABSENT = {column.name: ABSENT_VALUES[column.dtype] for column in TABLES["peaks"]}


def _stacked(parts: list[dict], app: str) -> dict[str, np.ndarray]:
    """The peaks table's columns from its parts (each a dict of columns, a text a whole column's),
    one part after the other; a row without an app is ``app``'s."""
    sizes = [max((len(v) for v in part.values() if not isinstance(v, str)), default=0) for part in parts]
    columns = {}
    for name, absent in _PEAKS_ABSENT.items():
        absent = app if name == "app" else absent
        pieces = []
        for part, size in zip(parts, sizes, strict=True):
            value = part.get(name, absent)
            pieces.append(np.full(size, value, dtype=object if isinstance(value, str) else None)
                          if np.ndim(value) == 0 else np.asarray(value))
        columns[name] = np.concatenate(pieces) if pieces else np.array([])
    return columns


# positions of one part's first launches stay below the next part's: input order across parts
_PART_SPAN = 1 << 40


def peak_inputs(parts: Sequence[pd.DataFrame]) -> PeakInputs:
    """:class:`PeakInputs` of peaks tables (:func:`app_peaks`), one per app or batch, in input order."""
    parts = [conform(part, "peaks") for part in parts]
    if not parts:
        return _inputs(conform(pd.DataFrame(), "peaks"), np.zeros(0, dtype="int64"))
    numbers = np.repeat(np.arange(len(parts), dtype="int64"), [len(part) for part in parts])
    return _inputs(pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0], numbers)


def _inputs(peaks: pd.DataFrame, numbers: np.ndarray) -> PeakInputs:
    """:func:`peak_inputs` of the peaks tables joined in one frame, ``numbers`` the input order of
    each row's table: each kind of row picked out once for all of them (a thousand apps' tables
    are ~20 rows each)."""
    part = peaks["part"].to_numpy()
    is_sample, is_first = part == "sample", part == "first"
    counts = [peaks.loc[is_sample, [*_SAMPLE_KEY, "count"]]] if is_sample.any() else []
    first = peaks[is_first]
    heads = [first[[*_GROUP_KEY, "position", "launch", "recipe", "app"]].assign(
        position=first["position"].to_numpy() + numbers[is_first] * _PART_SPAN)] if is_first.any() else []
    named = peaks.loc[part == "device", ["app", "device"]]
    devices = sorted(set(named["device"]))
    measured = sorted(set(peaks.loc[part == "measured", "device"]))
    app_devices = {app: tuple(sorted(set(group))) for app, group in named.groupby("app", sort=True)["device"]}
    merge = len(np.unique(numbers[is_sample])) > 1  # a sample in two tables: one row
    return PeakInputs(_joined(counts, heads, merge), _what_if_rows([peaks[part == "what-if"]]), devices, measured,
                      app_devices)


def _what_if_rows(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """The what-if peaks as counters rows (one per app and machine, in input order): what
    :func:`roofline.ceilings.select.what_if_ceilings` and its conflict check read."""
    given = pd.concat(parts, ignore_index=True) if parts else conform(pd.DataFrame(), "peaks")
    pairs = given[["app", "device"]]
    rows = pairs.drop_duplicates().reset_index(drop=True)
    # each peak row's place among the (app, machine) rows: scattered there, one column per ceiling
    place = pd.MultiIndex.from_frame(rows).get_indexer(pd.MultiIndex.from_frame(pairs))
    ceiling, value = given["ceiling"].to_numpy(), given["value"].to_numpy(dtype="float64")
    for order, (column, _) in enumerate(PEAK_COLUMNS.values()):
        mine = ceiling == order
        values, given_here = np.full(len(rows), np.nan), np.zeros(len(rows), dtype=bool)
        values[place[mine]], given_here[place[mine]] = value[mine], True
        rows[column] = values
        rows[f"{column}_recipe"] = np.where(given_here, "what-if", "")
    return rows


def read_peak_inputs(paths: Sequence[str], batch: int = FILES_PER_BATCH) -> PeakInputs:
    """:class:`PeakInputs` of the counters tables at ``paths``, read :data:`FILES_PER_BATCH` at a
    time, so that memory holds one batch of launches and the samples, however many apps."""
    from roofline.tables.reads import read_columns

    declared = {c.name for c in TABLES["counters"]}
    wanted = [c for c in peak_columns() if c in declared]
    # a recipe repeats on every launch of a report: as categories it costs a byte per launch
    texts = [c for c in wanted if c.endswith("_recipe") or c == "source_format"]
    return peak_inputs([app_peaks(read_columns(list(paths[start:start + batch]), "counters", wanted, categories=texts))
                        for start in range(0, len(paths), batch)])


PEAKS_KEY = "roofline.peaks"  # the counters file's metadata entry: its peaks table, as an Arrow IPC stream


def peaks_metadata(counters: pd.DataFrame) -> dict[str, bytes]:
    """The metadata a counters file is written with (``write_table(..., metadata=)``): its
    :func:`app_peaks`, which the ceilings job then reads instead of the file's launches."""
    import pyarrow as pa

    table = arrow_table(app_peaks(counters), "peaks")
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return {PEAKS_KEY: sink.getvalue().to_pybytes()}


class _NoStoredPeaks(Exception):
    """A counters file with launches but no peaks table in its metadata (written by other means)."""


def _stored_peaks(path: str):
    """The peaks table a counters file holds in its metadata, each row naming the file; empty for
    a file without launches. Raises :class:`_NoStoredPeaks` for a file with launches and none."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    footer = pq.read_metadata(path)
    entry = (footer.metadata or {}).get(PEAKS_KEY.encode())
    if entry is None:
        if footer.num_rows:
            raise _NoStoredPeaks(path)
        return pa.table({})  # no launch (an input refused): nothing to read
    table = pa.ipc.open_stream(entry).read_all()
    return table.append_column("file", pa.array([str(path)] * table.num_rows, pa.string()))


def read_peaks(paths: Sequence[str], keep: str | None = None) -> PeakInputs:
    """:class:`PeakInputs` of the counters tables at ``paths``, from the peaks table each file
    holds in its metadata (its parse job's :func:`peaks_metadata`): a few rows per app. Where a
    file has none (written by other means) every file is read as :func:`read_peak_inputs` reads it.

    ``keep``: a folder where the files' peaks are kept between calls
    (:func:`roofline.tables.kept_join.joined`): a later call reads the footers of the files that changed
    only (a thousand footers of ~150 columns each cost ~1 ms apiece)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from roofline.tables.reads import each_file

    try:
        if keep is not None:
            from roofline.tables.kept_join import joined

            tables = [joined(paths, "peaks", keep, each_file, _stored_peaks)]
        else:
            tables = each_file(paths, _stored_peaks)
    except _NoStoredPeaks:
        return read_peak_inputs(paths)
    stored = [table for table in tables if table.num_rows]
    if not stored:
        return peak_inputs([])
    table = pa.concat_tables(stored, promote_options="permissive")
    number = {str(path): i for i, path in enumerate(paths)}
    # each row's file by its place in ``paths`` (the last place of a path given twice), found in
    # Arrow: as pandas text, 4,000 rows of 200 apps cost ~0.1 s to map
    place = pc.index_in(table["file"], value_set=pa.array(list(number), pa.string())).to_numpy(zero_copy_only=False)
    files = np.unique(np.fromiter(number.values(), dtype="int64", count=len(number))[place], return_inverse=True)[1]
    frame = table.drop_columns(["file"]).to_pandas()
    return _inputs(conform(frame, "peaks"), files.astype("int64"))
