"""One device's instruction roofline (Ding & Williams) as an Altair chart, for the kernels the FLOP
roofline cannot place: those without floating-point work (``bound`` none).

x: warp instructions per 32-byte transaction at each memory level; y: warp instructions per second.
Roofs: the issue rate (flat, ``issue_peak_ips``) and per level its bandwidth / 32 B in
transactions/s (sloped). A kernel is one point per level, as on the FLOP roofline.
"""

from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd

from roofline.charts.roofline_chart import (
    FONT,
    HEIGHT,
    LEVEL_DASH,
    LEVEL_LABEL,
    PALETTE,
    ROOF_COLOUR,
    axis_values,
    chart_records,
    layered,
    si,
)
from roofline.classify.instruction import SECTOR_BYTES
from roofline.metrics.quantities import MEMORY_LEVELS


def instruction_points(kernels: pd.DataFrame) -> pd.DataFrame:
    """One row per kernel and memory level of the kernels without FP work that can be placed."""
    k = kernels[(kernels["bound"] == "none") & np.isfinite(kernels["warp_ips"]) & (kernels["warp_ips"] > 0)]
    if k.empty:
        return pd.DataFrame()
    rows = []
    for level in MEMORY_LEVELS:
        sectors = pd.to_numeric(k[f"{level}_bytes"], errors="coerce") / SECTOR_BYTES
        intensity = k["warp_instructions"] / sectors
        ok = np.isfinite(intensity) & (intensity > 0)
        rows.append(pd.DataFrame({
            "kernel": k["kernel"], "kernel_short": k["kernel_short"], "app": k["app"], "level": LEVEL_LABEL[level],
            "intensity": intensity, "warp_ips": k["warp_ips"], "verdict": k["instruction_bound"],
            "roof_pct": k["instruction_roof_pct"], "time_share": k["time_share"],
        })[ok.to_numpy()])
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def instruction_chart(kernels: pd.DataFrame, device: str) -> alt.LayerChart | None:
    """The instruction roofline of ``device``'s kernels without FP work, or None when it has none."""
    on_device = kernels[kernels["device"] == device]
    points = instruction_points(on_device)
    peak = float(np.nanmedian(on_device["issue_peak_ips"])) if on_device["issue_peak_ips"].notna().any() else np.nan
    if points.empty:
        return None
    roofs = {lv: float(np.nanmedian(on_device[f"roof_{lv}_bw"])) / SECTOR_BYTES for lv in MEMORY_LEVELS
             if on_device[f"roof_{lv}_bw"].notna().any()}
    xs = _finite([*points["intensity"], *(peak / r for r in roofs.values())])
    ys = _finite([*points["warp_ips"], peak])
    x = _decades(min(xs) / 4, max(xs) * 4)
    y = _decades(min(ys) / 10, max(ys) * 2)
    segments, labels = [], []
    if np.isfinite(peak):
        x0 = max(x[0], peak / max(roofs.values())) if roofs else x[0]
        segments.append({"x": x0, "x2": x[1], "y": peak, "y2": peak, "style": "compute"})
        labels.append({"x": x[1], "y": peak, "text": f"issue {si(peak, 'warp inst/s')}", "align": "right"})
    for level, rate in roofs.items():
        x0 = max(x[0], y[0] / rate)
        x1 = peak / rate if np.isfinite(peak) else x[1]
        segments.append({"x": x0, "x2": x1, "y": rate * x0, "y2": rate * x1, "style": level})
        labels.append({"x": x0 * 1.15, "y": rate * x0 * 1.15, "text": f"{LEVEL_LABEL[level]} {si(rate, 'sectors/s')}",
                       "align": "left"})

    def xy(xf: str, yf: str) -> dict:
        return {
            "x": alt.X(f"{xf}:Q", scale=alt.Scale(type="log", domain=list(x), nice=False),
                       axis=alt.Axis(format="~g", grid=True, values=axis_values(*x)),
                       title="Instruction intensity [warp instructions per 32 B transaction]"),
            "y": alt.Y(f"{yf}:Q", scale=alt.Scale(type="log", domain=list(y), nice=False),
                       axis=alt.Axis(format="~s", values=axis_values(*y)), title="Performance [warp instructions/s]"),
        }

    styles = ["compute", *MEMORY_LEVELS]
    layers = [
        alt.Chart(pd.DataFrame(segments)).mark_rule(color=ROOF_COLOUR, strokeWidth=1.6, clip=True).encode(
            **xy("x", "y"), x2="x2:Q", y2="y2:Q", strokeDash=alt.StrokeDash(
                "style:N", scale=alt.Scale(domain=styles, range=[[1, 0], *LEVEL_DASH.values()]), legend=None)),
    ]
    for align, group in pd.DataFrame(labels).groupby("align"):
        layers.append(alt.Chart(group).mark_text(align=align, baseline="bottom", dy=-3, fontSize=FONT,
                                                 color="#333333", clip=True).encode(**xy("x", "y"), text="text:N"))
    layers.append(alt.Chart(alt.Data(values=chart_records(points))).mark_point(filled=True, size=70, clip=True)
                  .encode(**xy("intensity", "warp_ips"),
                          color=alt.Color("verdict:N", scale=alt.Scale(range=PALETTE), title="instruction verdict"),
                          shape=alt.Shape("level:N", title="memory level"),
                          tooltip=[alt.Tooltip("kernel_short:N", title="kernel"), alt.Tooltip("app:N"),
                                   alt.Tooltip("level:N", title="this point"),
                                   alt.Tooltip("intensity:Q", format=".3~g", title="warp inst / transaction"),
                                   alt.Tooltip("warp_ips:Q", format=".3~s", title="warp inst/s"),
                                   alt.Tooltip("verdict:N"), alt.Tooltip("roof_pct:Q", format=".1f", title="% of roof"),
                                   alt.Tooltip("time_share:Q", format=".1%", title="time share")]))
    n = points["kernel"].nunique()
    return layered(layers, alt.Title(
        f"{device}: instruction roofline", subtitle=[
            f"{n} kernel{'s' if n != 1 else ''} without floating-point work (bound: none on the FLOP roofline); "
            "issue roof = SMs × warp schedulers per SM × SM clock (1 warp instruction per cycle each)"]),
        height=int(HEIGHT * 0.8))


def _decades(lo: float, hi: float) -> tuple[float, float]:
    """At least two decades, so that the axis has decade ticks to read."""
    while hi / lo < 100:
        lo, hi = lo / 2, hi * 2
    return lo, hi


def _finite(values: list[float]) -> list[float]:
    return [v for v in values if math.isfinite(v) and v > 0]
