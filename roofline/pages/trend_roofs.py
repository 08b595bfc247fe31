"""The trends page's rooflines: tonight's kernels on the summary's chart, and the regressed and
improved kernels' move from their baseline to tonight (:func:`roofline.charts.trajectory.trajectory_chart`,
the compare page's), both on the roofs the verdicts used: the ceilings each kernel row was judged
with (:func:`applied_ceilings`), never a median of mixed peaks; and the name of a series that the
page's rooflines, findings and trend charts share (:func:`series_names`). The page itself is
:mod:`roofline.pages.trends`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd

from roofline.charts.roofline_chart import roofline_spec
from roofline.charts.trajectory import trajectory_chart
from roofline.compare import STEP_COLUMNS, point_level
from roofline.metrics.quantities import COMPUTE_CLASSES, MEMORY_LEVELS
from roofline.pages.markup import esc
from roofline.pages.overview import SUMMARY_KERNELS, summary_rows
from roofline.pages.table import TABLE_READS, page_table
from roofline.tables.schemas import KERNEL_KEY, TABLES, conform

MOVED = ("regression", "improvement")  # the findings drawn from their baseline to tonight
# What the rooflines read of tonight's stored kernel rows (a stored night has every kernels column
# and the run context): the page's table, the points, the roofs each verdict used and the classes
# judged by a time bound. tests/nightly/test_track.py checks the page drawn from these alone against one
# drawn from every column.
TONIGHT_READS = tuple(dict.fromkeys([*KERNEL_KEY, *TABLE_READS, "roof_flops",
                                     *(f"roof_{lv}_bw" for lv in MEMORY_LEVELS),
                                     *(f"time_bound_{c}" for c in COMPUTE_CLASSES)]))


def launch_shape(grid: str, block: str) -> str:
    """" | grid×block" of a series' name, or nothing for a table that records neither (what-if rows)."""
    return f" | {grid}×{block}" if grid or block else ""


def series_names(frame: pd.DataFrame) -> pd.Series:
    """A readable, unique name per series: app | kernel | grid x block (| device)."""
    many = frame["device"].nunique() > 1
    # each series' rows by its key, in order of first appearance; its name built once, from its first
    # row (a page's 90 nights are 90 rows per series)
    codes = frame.groupby(KERNEL_KEY, sort=False, dropna=False, observed=True).ngroup().to_numpy()
    first = frame.iloc[np.unique(codes, return_index=True)[1]][[*KERNEL_KEY, "kernel_short"]].fillna("")
    short = first["kernel_short"].where(first["kernel_short"] != "", first["kernel"])
    shape = (" | " + first["grid"] + "×" + first["block"]).where((first["grid"] != "") | (first["block"] != ""), "")
    name = first["app"] + " | " + short + shape  # launch_shape, for every series at once
    if many:
        name = name + " | " + first["device"]
    # "#2", "#3" ... on later series of one name
    name = pd.Series(name.to_numpy())
    dup = name.groupby(name.to_numpy()).cumcount().to_numpy()
    unique = name + np.where(dup > 0, " #" + pd.Series(dup + 1).astype(str), "")
    return pd.Series(unique.to_numpy()[codes], index=frame.index, dtype="str")


def applied_ceilings(kernels: pd.DataFrame) -> pd.DataFrame:
    """The ceilings table the kernel rows were judged with, from the rows themselves: per device,
    ``roof_flops`` of each compute class and ``roof_<level>_bw`` of each level (the classify stage
    copies the device's selected ceilings there). Source: that of the verdicts using the roof.

    The tracking stage keeps kernel rows, not ceilings tables; a stored night's rows are the roofs
    its verdicts used, whatever the ceilings files say today. Where rows of one device carry two
    values of one roof (judged apart), the one most rows used is drawn.
    """
    columns = ["device", "kind", "name", "value", "source", "selected"]
    # one (device, roof, value) per row and roof: the roofs in their drawing order, compute then memory
    roofs = [*COMPUTE_CLASSES, *(f"memory:{lv}" for lv in MEMORY_LEVELS)]
    device_codes, devices = pd.factorize(kernels["device"], sort=True)
    roof_of = {c: i for i, c in enumerate(COMPUTE_CLASSES)}
    codes = [pd.Series(kernels["compute_class"]).map(roof_of).fillna(-1).to_numpy(dtype=np.int64)]
    values = [pd.to_numeric(kernels["roof_flops"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)]
    for i, lv in enumerate(MEMORY_LEVELS):
        if f"roof_{lv}_bw" in kernels:
            codes.append(np.full(len(kernels), len(COMPUTE_CLASSES) + i))
            level = pd.to_numeric(kernels[f"roof_{lv}_bw"], errors="coerce")
            values.append(level.to_numpy(dtype=float, na_value=np.nan))
    device_code, roof, value = np.tile(device_codes, len(codes)), np.concatenate(codes), np.concatenate(values)
    keep = (device_code >= 0) & (roof >= 0) & np.isfinite(value) & (value > 0)
    group = (device_code * len(roofs) + roof)[keep]
    picked_group, picked_value = _most_frequent(group, value[keep])
    # the source of the verdicts that used each roof: the most frequent, the first in text order of a tie
    verdicts = {**{f"compute:{c}": i for i, c in enumerate(COMPUTE_CLASSES)}, **{r: i for i, r in enumerate(roofs)}}
    verdict = pd.Series(kernels["bound"]).map(verdicts).fillna(-1).to_numpy(dtype=np.int64)
    source_codes, source_texts = pd.factorize(kernels["ceiling_source"], sort=True)
    with_source = (device_codes >= 0) & (verdict >= 0) & (source_codes >= 0) & (
        np.asarray(source_texts, dtype=object)[np.maximum(source_codes, 0)] != "")
    source_group, source_code = _most_frequent((device_codes * len(roofs) + verdict)[with_source],
                                               source_codes[with_source])
    source_of = dict(zip(source_group.tolist(), source_code.tolist(), strict=True))
    rows = []
    for g, v in zip(picked_group.tolist(), picked_value.tolist(), strict=True):  # device, then drawing order
        name = roofs[g % len(roofs)]
        rows.append({"device": devices[g // len(roofs)], "kind": "memory" if name.startswith("memory:") else "compute",
                     "name": name.removeprefix("memory:"), "value": v,
                     "source": str(source_texts[source_of[g]]) if g in source_of else "as judged", "selected": True})
    return conform(pd.DataFrame(rows, columns=columns), "ceilings")


def _most_frequent(groups: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group (ascending), its most frequent value, the smallest of equally frequent ones (as
    ``Series.mode().iat[0]``)."""
    if not len(groups):
        return groups, values
    order = np.lexsort((values, groups))
    g, v = groups[order], values[order]
    starts = np.flatnonzero(np.concatenate(([True], (g[1:] != g[:-1]) | (v[1:] != v[:-1]))))
    run_group, run_value = g[starts], v[starts]
    run_length = np.diff(np.append(starts, len(g)))
    # the longest run of each group, the first (smallest value) of equally long ones
    best = np.lexsort((run_value, -run_length, run_group))
    first = np.concatenate(([True], run_group[best][1:] != run_group[best][:-1]))
    return run_group[best][first], run_value[best][first]


def _at_level(rows: pd.DataFrame) -> pd.DataFrame:
    """Each row's place on the roofline: the memory level its verdict used and its intensity there."""
    level = point_level(rows["binding_level"])
    ai = np.select([level == lv for lv in MEMORY_LEVELS],
                   [pd.to_numeric(rows[f"ai_{lv}"], errors="coerce") for lv in MEMORY_LEVELS], np.nan)
    performance = pd.to_numeric(rows["performance"], errors="coerce")
    placed = pd.DataFrame({"level": level, "ai": np.where(ai > 0, ai, np.nan),
                           "performance": performance.where(performance > 0).to_numpy()}, index=rows.index)
    return pd.concat([rows.drop(columns=[c for c in placed.columns if c in rows.columns]), placed], axis=1)


def moved_points(kernels: pd.DataFrame, baseline: pd.DataFrame, findings: Sequence[Mapping]) -> pd.DataFrame:
    """The regressed and improved series as two-step trajectories (:data:`roofline.compare.STEP_COLUMNS`):
    step 1 their baseline, step 2 tonight.

    Tonight is the series' kernel row; the baseline is the median over its baseline nights' rows
    (``baseline``, :func:`roofline.nightly.track.page_rows`) of the intensity at the level most of those
    verdicts used, of the performance and of the time. Each point sits where its verdict put it, so
    a point at 100 % of its roof lies on that roof.
    """
    moved = pd.DataFrame([f for f in findings if f.get("label") in MOVED], columns=[*KERNEL_KEY, "label"])
    if moved.empty or kernels.empty:
        return pd.DataFrame(columns=STEP_COLUMNS)
    # the legend names each path: its label first, so that a regression reads as one
    moved["match"] = moved["label"] + ": " + series_names(moved.assign(kernel_short=[
        next((f.get("kernel_short") for f in findings if all(f.get(c) == r[c] for c in KERNEL_KEY)), "")
        for r in moved.to_dict("records")]))
    now = _at_level(kernels.merge(moved, on=KERNEL_KEY))
    before = _at_level(baseline.merge(moved, on=KERNEL_KEY)) if len(baseline) else now.iloc[:0]
    steps = []
    for match, night in now.groupby("match", sort=False):
        row = night.iloc[0]
        base = before[before["match"] == match]
        steps.append({**row.to_dict(), "step": 2, "kernel_short": match})
        if base.empty:
            continue
        level = base["level"].mode().iat[0]
        at = base[base["level"] == level]
        steps.append({**row.to_dict(), "step": 1, "kernel_short": match, "level": level,
                      "bound": base["bound"].mode().iat[0], "ai": float(at["ai"].median()),
                      "performance": float(base["performance"].median()),
                      "roof_pct": float(pd.to_numeric(base["roof_pct"], errors="coerce").median()),
                      "duration_s": float(pd.to_numeric(base["duration_s"], errors="coerce").median())})
    out = pd.DataFrame(steps)
    out["config"], out["steps_present"], out["presence"] = "", "1,2", "every step"
    for column in STEP_COLUMNS:
        if column not in out:
            out[column] = np.nan
    return out[STEP_COLUMNS].sort_values(["match", "step"], kind="stable").reset_index(drop=True)


def roofline_specs(kernels: pd.DataFrame, baseline: pd.DataFrame, findings: Sequence[Mapping],
                   first: int = 0, shared: bool = False
                   ) -> tuple[list[dict | None], list[dict], list[str], pd.DataFrame | None]:
    """Per device: the moved kernels' baseline → tonight chart (when any moved there) and tonight's
    kernels on the summary's chart. Returns the Vega-Lite specs, the page script's entry for each,
    the page's HTML blocks for them (chart ids from ``first``, after the page's other charts) and
    the rows the summary's charts draw (:func:`roofline.pages.table.page_table`; None when none).

    Tonight's kernels are the summary's selection (:func:`roofline.pages.overview.summary_rows`),
    so the page stays the summary's size however many kernels ran. ``shared``: their charts are the
    summary's own specs, which the page loads from ``assets/charts.js`` and fills from its columns
    (as an app page does), instead of building each device's chart again here.
    """
    from roofline.pages.report import CANVAS_FROM, chart_controls

    specs: list[dict | None] = []
    entries: list[dict] = []
    blocks: list[str] = []
    if kernels.empty:
        return specs, entries, ["<p>No kernels tonight: no roofline.</p>"], None
    # a stored night's rows: the kernels table's columns and the run's context; the charts take the former
    kernels = conform(kernels[[c.name for c in TABLES["kernels"] if c.name in kernels]], "kernels")
    ceilings = applied_ceilings(kernels)
    points = moved_points(kernels, baseline, findings)
    drawn = summary_rows(kernels, SUMMARY_KERNELS)
    table = page_table(drawn)
    with alt.data_transformers.disable_max_rows():
        for device in sorted(d for d in kernels["device"].unique() if d):
            if not (ceilings["device"] == device).any():
                blocks.append(f"<p>No roofline for {esc(device)}: its kernels carry no roof.</p>")
                continue
            mine = points[points["device"] == device]
            if mine["ai"].notna().any():
                spec = trajectory_chart(mine, kernels, ceilings, device, 2).to_dict(validate=False)
                n = mine["match"].nunique()
                spec["title"] = {**spec["title"], "text": f"{device}: baseline → tonight", "subtitle": [
                    f"{n} regressed or improved kernel(s): each joined from its baseline (the median of its "
                    "baseline nights) to tonight,",
                    "at the intensity of the memory level each verdict used; roofs: the ceilings tonight's verdicts "
                    "used"]}
                _name_steps(spec)
                specs.append(spec)
                entries.append({"device": device, "canvas": False, "inline": True})
                blocks.append(f'<div class="chart" id="chart{first + len(specs) - 1}"></div>')
            n = int((table["rank"].notna() & (table["device"] == device)).sum())
            blocks.append(f'<h3>Every kernel tonight on {esc(device)} (as on the summary)</h3>')
            if shared and n:
                apps = sorted(drawn.loc[drawn["device"] == device, "app"].unique())
                specs.append(None)
                entries.append({"device": device, "canvas": n >= CANVAS_FROM, "controls": chart_controls(n, apps),
                                "shared": True})
                i = first + len(specs) - 1
                blocks.append(f'<div class="chart" id="chart{i}"></div><p class="drawn" id="drawn{i}"></p>')
            else:
                specs.append(roofline_spec(drawn, ceilings, device))
                entries.append({"device": device, "canvas": False, "inline": True})
                blocks.append(f'<div class="chart" id="chart{first + len(specs) - 1}"></div>')
    if points.empty:
        blocks.insert(0, "<p>No kernel regressed or improved tonight: tonight's kernels only.</p>")
    if len(drawn) < len(kernels):
        blocks.insert(0, f'<p class="meta">The rooflines of tonight\'s kernels draw the {len(drawn):,} of '
                      f"{len(kernels):,} the summary carries (half the highest priorities, half the longest GPU "
                      "times); each app's page has all of its own.</p>")
    return specs, entries, blocks, table if any(e.get("shared") for e in entries) else None


def _name_steps(spec: dict) -> None:
    """Each point's label on the baseline → tonight chart in words ("baseline", "tonight"), not the
    trajectory's step number."""
    for layer in spec.get("layer", []):
        text = layer.get("encoding", {}).get("text", {})
        if layer.get("mark", {}).get("type") == "text" and text.get("field") == "step":
            layer["transform"] = [*layer.get("transform", []),
                                  {"calculate": "datum.step == 1 ? 'baseline' : 'tonight'", "as": "when"}]
            layer["encoding"]["text"] = {"field": "when", "type": "nominal"}
