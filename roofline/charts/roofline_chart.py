"""One device's hierarchical roofline as an Altair chart: its roofs and ridge points from the ceilings
table, one point per kernel and memory level from the kernels table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

import altair as alt
import numpy as np
import pandas as pd

from roofline.charts.roofs import (  # noqa: F401 - the scales and labels, imported from here by other modules
    CHAR_PX,
    CLASS_LABEL,
    CLASS_SHAPE,
    FONT,
    HEIGHT,
    LEVEL_DASH,
    LEVEL_LABEL,
    LEVEL_SIZE,
    PALETTE,
    ROOF_COLOUR,
    WIDTH,
    axis_values,
    layered,
    roof_base,
    roof_clock_text,
    roofed_levels,
    si,
    used_classes,
)
from roofline.metrics.quantities import COMPUTE_CLASSES, MEMORY_LEVELS

TOP_N_DEFAULT = 200  # kernels drawn at first (by GPU time); the slider shows the others
MEASURED, PREDICTED = "measured", "predicted at roof (what-if, no duration)"
KERNEL_DATA = "kernels"  # the named dataset of the kernel points; a page fills it from its embedded table
# Fields of a kernel point. The page's embedded table has these columns (and more), so a chart's
# rows are a selection of them; a point's performance and timing are computed in the spec.
CHART_FIELDS = ["kernel", "kernel_short", "app", "compute_class", "bound", "launches", "time_share",
                *(f"ai_{lv}" for lv in MEMORY_LEVELS), "achieved", "attainable", "roof_pct", "ceiling_source",
                "note", "rank"]
CROWDED = 150  # drawn kernels from which the points are smaller
LABELLED = 5  # kernels named on the chart, by GPU time (the slider and filters pick among those drawn)
LABEL_CHARS = 28
ALL = "(all)"


def chart_ranks(kernels: pd.DataFrame) -> pd.Series:
    """Each kernel's rank by GPU time on its device's chart (predicted time for what-if rows), or
    missing for a kernel the chart cannot place (no positive performance or intensity); the index
    is the frame's."""
    placeable, rank = _placeable(kernels)
    return rank.where(placeable)


def _placeable(k: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    measured = np.isfinite(k["performance"]) & (k["performance"] > 0)
    y = k["performance"].where(measured, k["attainable"])
    ai = k[[f"ai_{lv}" for lv in MEMORY_LEVELS]]
    ok = np.isfinite(y) & (y > 0) & (np.isfinite(ai) & (ai > 0)).any(axis=1)
    # a kernel without a verdict is never a point: its partial FLOP would draw it as a slow kernel
    ok &= k["bound"] != "unknown"
    time = k["duration_s"].where(np.isfinite(k["duration_s"]), k["predicted_duration_s"])
    return ok, time.rank(ascending=False, method="first", na_option="bottom").astype(int)


UNJUDGED_NAMED = 3  # kernels without a verdict named under a chart


def unjudged_text(kernels: pd.DataFrame) -> str:
    """The chart's line on the kernels it does not draw for want of a verdict (bound unknown), the
    longest first, each with the start of its reason; empty where there are none."""
    unjudged = kernels[kernels["bound"] == "unknown"]
    if unjudged.empty:
        return ""
    unjudged = unjudged.sort_values("duration_s", ascending=False, na_position="last")
    named = [f"{name} ({str(note).split(':')[0].split(';')[0] or 'evidence missing'})"
             for name, note in zip(unjudged["kernel_short"].head(UNJUDGED_NAMED), unjudged["note"].fillna(""))]
    more = f" and {len(unjudged) - len(named)} more" if len(unjudged) > len(named) else ""
    return (f"not drawn, no verdict ({len(unjudged)}; the table's note says why): " + ", ".join(named) + more)


def plot_points(kernels: pd.DataFrame) -> pd.DataFrame:
    """One row per kernel that can be placed on the chart, with the fields the chart needs.

    ``y`` is the achieved performance, or the attainable (predicted) one when the kernel has no
    measured duration; ``rank`` orders kernels by GPU time (predicted time for what-if rows).
    """
    k = kernels.reset_index(drop=True)
    ok, rank = _placeable(k)
    measured = np.isfinite(k["performance"]) & (k["performance"] > 0)
    y = k["performance"].where(measured, k["attainable"])
    out = pd.DataFrame(
        {
            "kid": np.arange(len(k)),
            "kernel": k["kernel"], "kernel_short": k["kernel_short"], "app": k["app"],
            "compute_class": k["compute_class"], "bound": k["bound"], "launches": k["launches"],
            "time_share": k["time_share"], "duration_s": k["duration_s"],
            **{f"ai_{lv}": k[f"ai_{lv}"].where(k[f"ai_{lv}"] > 0) for lv in MEMORY_LEVELS},
            "y": y, "achieved": k["performance"].where(measured), "attainable": k["attainable"],
            "roof_pct": k["roof_pct"], "ceiling_source": k["ceiling_source"],
            "timing": np.where(measured, MEASURED, PREDICTED), "note": k["note"],
            "rank": rank,
        }
    )
    return out[ok.to_numpy()].reset_index(drop=True)


# -- the chart -------------------------------------------------------------------------------------


class OfflineChart(alt.LayerChart):
    """An Altair layer chart whose ``.save("x.html")`` works offline: Vega, Vega-Lite and vega-embed
    inlined into the page (Altair's own ``inline=True``, from vl-convert), not loaded from a CDN, so
    the page is not blank on a node without internet. ``inline=False`` gives Altair's CDN page."""

    def save(self, fp: str | Path | IO[Any], format: str | None = None, *args: Any,
             inline: bool | None = None, **kwargs: Any) -> None:
        if inline is None:
            # only for HTML: Altair warns that inline is ignored for png, svg, pdf and json
            suffix = Path(fp).suffix.lstrip(".").lower() if isinstance(fp, str | Path) else None
            inline = (format or suffix) == "html"
        super().save(fp, format, *args, inline=inline, **kwargs)


def offline_chart(chart: alt.LayerChart) -> OfflineChart:
    """``chart`` as an :class:`OfflineChart`: the same spec, built as Altair copies a chart."""
    from altair.utils.schemapi import debug_mode

    with debug_mode(False):  # as Altair's copy(): the layers were validated when ``chart`` was built
        return OfflineChart(*chart._args, **chart._kwds)


def chart_records(frame: pd.DataFrame) -> list[dict]:
    """Rows as JSON-ready dicts (missing values as ``None``)."""
    return frame.astype(object).where(frame.notna(), None).to_dict("records")


def kernel_count_text(n: int) -> str:
    """The subtitle's kernel count: "1 kernel", "263 kernels"."""
    return f"{n} kernel{'s' if n != 1 else ''}"


def roofline_chart(kernels: pd.DataFrame, ceilings: pd.DataFrame, device: str,
                   top_kernels: int = TOP_N_DEFAULT) -> OfflineChart:
    """Hierarchical roofline of one device: roofs, ridge points and one point per kernel and level;
    its ``.save("x.html")`` writes a page that draws offline (:class:`OfflineChart`).

    The kernels are one row each in the dataset named :data:`KERNEL_DATA`; the spec folds each
    into one point per memory level, with the same performance and that level's intensity. Inputs
    (bound params) switch the colour between app and bound, filter by app, compute class and
    bound, and keep the top N kernels by GPU time (``top_kernels`` at first); a click highlights a kernel.
    """
    layers, points = roofline_layers(kernels, ceilings, device, top_kernels)
    chart = offline_chart(layers)
    # Set, not passed to .properties(): validating thousands of rows against the schema takes seconds.
    chart.datasets = {KERNEL_DATA: chart_records(points[["kid", *CHART_FIELDS]])}
    return chart


def roofline_spec(kernels: pd.DataFrame, ceilings: pd.DataFrame, device: str, rows: bool = True,
                  top_kernels: int = TOP_N_DEFAULT) -> dict:
    """``roofline_chart(...).to_dict()``, its kernel rows put in after the conversion (which would
    copy and walk every row of them: seconds for thousands of kernels); ``rows=False`` leaves the
    dataset empty, for a page that fills it from its own table."""
    chart, points = roofline_layers(kernels, ceilings, device, top_kernels)
    spec = chart.to_dict(validate=False)
    spec.setdefault("datasets", {})[KERNEL_DATA] = chart_records(points[["kid", *CHART_FIELDS]]) if rows else []
    return spec


def roofline_layers(kernels: pd.DataFrame, ceilings: pd.DataFrame, device: str,
                    top_kernels: int = TOP_N_DEFAULT) -> tuple[alt.LayerChart, pd.DataFrame]:
    """The chart of :func:`roofline_chart` without its kernel rows, and those rows."""
    on_device = kernels[kernels["device"] == device]
    points = plot_points(on_device)
    roofed = roofed_levels(ceilings, device)
    unroofed = [lv for lv in MEMORY_LEVELS if lv not in roofed and points[f"ai_{lv}"].notna().any()]
    for level in unroofed:
        points[f"ai_{level}"] = np.nan
    points = points[points[[f"ai_{lv}" for lv in MEMORY_LEVELS]].notna().any(axis=1)].reset_index(drop=True)
    classes = used_classes(on_device)
    shown = points[points["rank"] <= top_kernels]  # labels avoid the points visible at first
    layers, xy, sources, _ = roof_base(points, ceilings, device, classes, shown)

    n = max(len(points), 1)
    colour_by = alt.param(name="colour_by", value="bound",
                          bind=alt.binding_radio(options=["bound", "app"], name="colour by "))
    filters = {
        field: alt.param(name=f"{field}_filter", value=ALL, bind=alt.binding_select(
            options=[ALL, *sorted(points[field].unique())], name=f"{label} "))
        for field, label in (("app", "app"), ("compute_class", "compute class"), ("bound", "bound"))
    }
    top_n = alt.param(name="top_n", value=min(n, top_kernels),
                      bind=alt.binding_range(min=1, max=n, step=1, name="top N kernels by GPU time "))
    pick = alt.selection_point(name="pick", fields=["kid"], on="click", clear="dblclick")
    test = " && ".join(f"({p.name} == '{ALL}' || datum.{f} == {p.name})" for f, p in filters.items())
    levels = [lv for lv in MEMORY_LEVELS if points[f"ai_{lv}"].notna().any()] or ["dram"]
    measured = "isValid(datum.achieved) && datum.achieved > 0"
    base = (
        alt.Chart(alt.Data(name=KERNEL_DATA))
        .transform_filter(f"{test} && datum.rank <= top_n")
        .transform_fold([f"ai_{lv}" for lv in levels], as_=["level_key", "ai"])
        .transform_filter("isValid(datum.ai) && datum.ai > 0")
        .transform_calculate(
            y=f"{measured} ? datum.achieved : datum.attainable",
            timing=f"{measured} ? '{MEASURED}' : '{PREDICTED}'",
            level=" : ".join(f"datum.level_key == 'ai_{lv}' ? '{LEVEL_LABEL[lv]}'" for lv in levels) + " : ''",
            colour="colour_by == 'app' ? datum.app : datum.bound",
            level_rank=" : ".join(f"datum.level_key == 'ai_{lv}' ? {MEMORY_LEVELS.index(lv)}" for lv in levels)
            + " : 0",
        )
    )
    layers.append(base.mark_line(color="#999999", clip=True).encode(
        **xy("ai", "y"), detail="kid:N", order="ai:Q",
        strokeWidth=alt.condition(pick, alt.value(2.0), alt.value(0.5), empty=False),
        opacity=alt.condition(pick, alt.value(0.6), alt.value(0.15)),
    ))
    # A fixed domain per choice: a kernel keeps its colour when filters or the slider change what is drawn.
    domains = {field: json.dumps(sorted(points[field].astype(str).unique())) for field in ("app", "bound")}
    colour_scale = alt.Scale(range=PALETTE,
                             domain={"expr": f"colour_by == 'app' ? {domains['app']} : {domains['bound']}"})
    legend = alt.Legend(labelLimit=300, symbolLimit=40)
    tooltip = [
        alt.Tooltip("kernel_short:N", title="kernel"), alt.Tooltip("kernel:N", title="full name"),
        alt.Tooltip("app:N"), alt.Tooltip("launches:Q"), alt.Tooltip("time_share:Q", format=".1%", title="time share"),
        alt.Tooltip("level:N", title="this point"),
        *[alt.Tooltip(f"ai_{lv}:Q", format=".3~g", title=f"intensity {LEVEL_LABEL[lv]} [FLOP/B]") for lv in levels],
        alt.Tooltip("achieved:Q", format=".3~s", title="achieved [FLOP/s]"),
        alt.Tooltip("attainable:Q", format=".3~s", title="attainable [FLOP/s]"),
        alt.Tooltip("timing:N", title="plotted"), alt.Tooltip("bound:N"),
        alt.Tooltip("roof_pct:Q", format=".1f", title="% of roof"),
        alt.Tooltip("ceiling_source:N", title="ceiling source"), alt.Tooltip("note:N"),
    ]
    crowded = f"min(top_n, {len(points)}) > {CROWDED}"  # smaller points when many are drawn
    sizes = [{"expr": f"{crowded} ? {LEVEL_SIZE[lv] / 2:g} : {LEVEL_SIZE[lv]:g}"} for lv in ("dram", "shared")]
    drawn_classes = set(points["compute_class"].unique())
    used_shapes = [c for c in COMPUTE_CLASSES if c in drawn_classes] or ["fp32"]
    layers.append(base.mark_point(filled=False, strokeWidth=1.5, clip=True).encode(
        **xy("ai", "y"),
        color=alt.Color("colour:N", scale=colour_scale, legend=legend.copy(), title="colour"),
        fill=alt.Color("colour:N", scale=colour_scale, legend=legend.copy(), title="colour"),  # one legend with color
        fillOpacity=alt.FillOpacity("timing:O", scale=alt.Scale(domain=[MEASURED, PREDICTED], range=[0.75, 0.0]),
                                    legend=None),
        shape=alt.Shape("compute_class:N", title="compute class", legend=legend.copy(), scale=alt.Scale(
            domain=used_shapes, range=[CLASS_SHAPE[c] for c in used_shapes])),
        size=alt.Size("level_rank:Q", title="memory level", scale=alt.Scale(
            domain=[0, len(MEMORY_LEVELS) - 1], range=sizes),
            legend=alt.Legend(values=[MEMORY_LEVELS.index(lv) for lv in levels], symbolFillColor="#888888",
                              labelExpr=f"{[LEVEL_LABEL[lv] for lv in MEMORY_LEVELS]}[datum.value]")),
        strokeWidth=alt.condition(pick, alt.value(3.0), alt.value(1.5), empty=False),
        opacity=alt.condition(pick, alt.value(0.85), alt.value(0.15)),  # an expression here blanks canvas legends
        tooltip=tooltip,
    ).add_params(pick))
    # The biggest kernels named beside their point, once each: at the level their verdict used
    # (DRAM for a compute-bound kernel), so a page read on paper still says which point is which.
    at_verdict_level = ("datum.level_key == 'ai_' + (indexof(datum.bound, 'memory:') == 0 ? "
                        "substring(datum.bound, 7) : 'dram')")
    layers.append(
        base.transform_filter(f"datum.rank <= {LABELLED} && {at_verdict_level}")
        .transform_calculate(label=f"length(datum.kernel_short) > {LABEL_CHARS} ? "
                                   f"substring(datum.kernel_short, 0, {LABEL_CHARS - 1}) + '…' : datum.kernel_short")
        .mark_text(align="left", dx=7, dy=-7, fontSize=FONT, color="#333333", clip=True)
        .encode(**xy("ai", "y"), text="label:N")
    )
    title = alt.Title(device, subtitle=[
        f"{kernel_count_text(len(points))}; ceilings: {', '.join(sources) or 'none'}; "
        "click a kernel to highlight its levels, double-click to clear",
        *([clock] if (clock := roof_clock_text(ceilings, device)) else []),
        *(["hollow points: what-if kernels without a duration, drawn at their predicted (at-roof) "
           "performance"] if (points["timing"] == PREDICTED).any() else []),
        *([unjudged] if (unjudged := unjudged_text(on_device)) else []),
        *([f"{', '.join(LEVEL_LABEL[lv] for lv in unroofed)} not drawn: the ceilings hold no roof for "
           f"{'that level' if len(unroofed) == 1 else 'those levels'} (roofline ceilings lists the sources)"]
          if unroofed else []),
    ])
    return layered(layers, title).add_params(colour_by, *filters.values(), top_n), points
