"""The report's own ceilings: per device and ceiling, the median of the per-launch peaks that ncu
measured (``peak_sustained`` x the unit's clock in that launch), over every app's launches.

The median needs every launch's value, but a report repeats few values (one per clock reading), so
the launches are first reduced to *samples*: one row per device, ceiling, long-or-short launch,
value and clock, with its count (:func:`peak_samples`). The ceilings come from the samples
(:func:`ceilings_from_samples`), the same whether the samples are one frame's
(:func:`report_ceilings`) or a thousand files' read a batch at a time (:func:`read_peak_inputs`),
which keeps the ceilings job's memory to a batch of launches however many apps there are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from roofline.metrics import COMPUTE_CLASSES
from roofline.schemas import conform

# Launches shorter than this report clocks 20-50 % low (../shared/guides/roofline.md §5).
SHORT_LAUNCH_S = 20e-6
# (kind, name) -> (the counters' peak column, the clock it scales with)
PEAK_COLUMNS = {
    **{("compute", c): (f"peak_flops_{c}", "sm_clock_hz") for c in COMPUTE_CLASSES},
    ("memory", "dram"): ("peak_dram_bw", "dram_clock_hz"),
    ("memory", "l2"): ("peak_l2_bw", "l2_clock_hz"),
    ("memory", "l1"): ("peak_l1_bw", "l1_clock_hz"),
    ("memory", "shared"): ("peak_shared_bw", "sm_clock_hz"),
}
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
    counts, heads = [], []
    positions = np.arange(first_position, first_position + len(counters))
    duration = pd.to_numeric(counters["duration_s"], errors="coerce").to_numpy() if "duration_s" in counters \
        else np.full(len(counters), np.nan)
    long = duration >= SHORT_LAUNCH_S
    for order, (column, clock) in enumerate(PEAK_COLUMNS.values()):
        if column not in counters:
            continue
        values = counters[column].to_numpy(dtype="float64", na_value=np.nan)
        recipe = counters.get(f"{column}_recipe")
        is_report = ~np.isnan(values) & counters["device"].notna().to_numpy()
        if recipe is not None:
            is_report &= (recipe != "what-if").to_numpy()
        if not is_report.any():
            continue
        clocks = counters[clock].to_numpy(dtype="float64", na_value=np.nan) if clock in counters \
            else np.full(len(counters), np.nan)
        rows = pd.DataFrame({
            "device": counters["device"].to_numpy()[is_report], "ceiling": order, "long": long[is_report],
            "value": values[is_report], "clock": clocks[is_report], "position": positions[is_report],
            "launch": counters["launch"].to_numpy()[is_report],
            "recipe": (recipe.to_numpy()[is_report] if recipe is not None else ""),
        })
        counts.append(rows.groupby(_SAMPLE_KEY, sort=False, dropna=False).size().rename("count").reset_index())
        heads.append(rows.groupby(_GROUP_KEY, sort=False).head(LISTED_LAUNCHES)[
            [*_GROUP_KEY, "position", "launch", "recipe"]])
    return _joined(counts, heads)


def _joined(counts: list[pd.DataFrame], heads: list[pd.DataFrame]) -> Samples:
    if not counts:
        return Samples(pd.DataFrame(columns=[*_SAMPLE_KEY, "count"]),
                       pd.DataFrame(columns=[*_GROUP_KEY, "position", "launch", "recipe"]))
    count = pd.concat(counts, ignore_index=True)
    if len(counts) > 1:  # the same sample in two frames: one row
        count = count.groupby(_SAMPLE_KEY, sort=False, dropna=False)["count"].sum().reset_index()
    head = pd.concat(heads, ignore_index=True).sort_values("position", kind="stable")
    return Samples(count, head.groupby(_GROUP_KEY, sort=False).head(LISTED_LAUNCHES))


def ceilings_from_samples(samples: Samples) -> pd.DataFrame:
    """Per device and ceiling: the median over its launches, long launches preferred.

    Very short launches show odd clock readings, so launches under 20 us are used only when a
    device has no longer one. ``spread`` is max/min of the values used; ``citation`` lists them.
    """
    names = list(PEAK_COLUMNS)
    rows = []
    heads = {key: group for key, group in samples.heads.groupby(_GROUP_KEY, sort=False)}
    for (device, order), group in samples.counts.groupby(["device", "ceiling"], sort=True):
        has_long = group["long"].astype(bool)
        used = group[has_long] if has_long.any() else group
        caveat = "" if has_long.any() else "; only launches under 20 us, whose clock readings run low"
        counts = used["count"].to_numpy(dtype="int64")
        values = np.repeat(used["value"].to_numpy(dtype="float64"), counts)
        clocks = np.repeat(used["clock"].to_numpy(dtype="float64"), counts)
        head = heads[(device, order, bool(has_long.any()))]
        kind, name = names[int(order)]
        launches = ",".join(str(int(i)) for i in head["launch"].head(LISTED_LAUNCHES))
        more = "…" if len(values) > LISTED_LAUNCHES else ""
        rows.append({
            "device": device, "kind": kind, "name": name, "value": float(np.median(values)), "source": "report",
            # one launch without a clock reading leaves the clock unknown, as the median of all would
            "clock_hz": float(np.median(clocks)) if not np.isnan(clocks).all() else np.nan,
            "citation": f"median of {len(values)} launch(es) [{launches}{more}] ({head['recipe'].iat[0]}){caveat}",
            "launches": len(values),
            "spread": float(values.max() / values.min()) if values.min() > 0 else np.nan,
        })
    return conform(pd.DataFrame(rows), "ceilings")


def report_ceilings(counters: pd.DataFrame) -> pd.DataFrame:
    """The report's ceilings of ``counters`` (one frame): :func:`ceilings_from_samples` of its samples."""
    return ceilings_from_samples(peak_samples(counters))


class PeakInputs(NamedTuple):
    """What the ceilings need of every app's counters: the report peaks' samples, the rows of
    what-if machines (whose explicit peaks are ceilings), and every device named."""

    samples: Samples
    what_if: pd.DataFrame
    devices: list[str]


def peak_columns() -> list[str]:
    """The counters columns the ceilings read."""
    wanted = ["app", "device", "launch", "duration_s", "source_format"]
    for column, clock in PEAK_COLUMNS.values():
        wanted += [column, f"{column}_recipe", clock]
    return list(dict.fromkeys(wanted))


def read_peak_inputs(paths: Sequence[str], batch: int = FILES_PER_BATCH) -> PeakInputs:
    """:class:`PeakInputs` of the counters tables at ``paths``, read :data:`FILES_PER_BATCH` at a
    time, so that memory holds one batch of launches and the samples, however many apps."""
    from roofline.schemas import TABLES
    from roofline.table_reads import read_columns

    declared = {c.name for c in TABLES["counters"]}
    wanted = [c for c in peak_columns() if c in declared]
    # a recipe repeats on every launch of a report: as categories it costs a byte per launch
    texts = [c for c in wanted if c.endswith("_recipe") or c == "source_format"]
    counts, heads, what_if, devices, position = [], [], [], set(), 0
    for start in range(0, len(paths), batch):
        frame = read_columns(list(paths[start:start + batch]), "counters", wanted, categories=texts)
        devices.update(frame["device"].unique())
        recipes = [c for c in frame.columns if c.endswith("_recipe")]
        defined = np.zeros(len(frame), dtype=bool)
        for column in recipes:
            defined |= (frame[column] == "what-if").to_numpy()
        if defined.any():
            what_if.append(frame[defined].astype({c: "string" for c in texts}))
        measured = frame[(frame["source_format"] != "what-if").to_numpy()]
        part = peak_samples(measured, position)
        counts.append(part.counts)
        heads.append(part.heads)
        position += len(frame)
    samples = _joined([c for c in counts if len(c)], [h for h, c in zip(heads, counts, strict=True) if len(c)])
    rows = pd.concat(what_if, ignore_index=True) if what_if else conform(pd.DataFrame(), "counters")[wanted]
    return PeakInputs(samples, rows, sorted(devices))
