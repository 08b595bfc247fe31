"""Report stage: kernels + ceilings + diagnostics -> one offline HTML summary and a page per app.

Pure functions build the chart (:func:`roofline_chart`) and the pages (:func:`summary_html`,
:func:`app_html`); :func:`write_pages` and :func:`write_report` are the only ones touching files. Pages inline the Vega
bundle once and make no network request.

A page embeds its kernels once, as one compact JSON table (:func:`page_table`: a column per field,
numbers to 4 significant digits, rows by priority). A small inline script draws the kernels table
from it (a page of rows at a time, with find and "show all"), builds the CSV download in the
browser and fills each chart's kernel points (one row per kernel; the spec folds them into one
point per memory level). Charts draw the top :data:`TOP_N_DEFAULT` kernels by GPU time at first.

Kernel names are data: HTML text is escaped, the script sets names with ``textContent`` only, and
every embedded JSON has ``<`` escaped, so a name cannot close a tag or open a script.
"""

from __future__ import annotations

import argparse
import copy
import functools
import html
import json
import math
import os
import re
import sys
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd

from roofline.metrics import COMPUTE_CLASSES, MEMORY_LEVELS
from roofline.schemas import conform, read_table, write_text_atomic

WIDTH, HEIGHT = 760, 460
FONT = 11
CHAR_PX = 6.0  # mean glyph width of an 11 px sans-serif label
TOP_N_DEFAULT = 200
# Okabe-Ito, yellow last: distinguishable with the common colour-vision deficiencies.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442"]
ROOF_COLOUR = "#555555"
LEVEL_LABEL = {"dram": "DRAM", "l2": "L2", "l1": "L1", "shared": "Shared"}
LEVEL_DASH = {"dram": [1, 0], "l2": [8, 3], "l1": [3, 2], "shared": [8, 2, 2, 2]}
LEVEL_SIZE = {"dram": 140, "shared": 20}  # point area [px^2], linear in level order
CLASS_LABEL = {
    "fp64": "FP64", "fp32": "FP32", "fp16": "FP16", "tensor_fp64": "Tensor FP64",
    "tensor_tf32": "Tensor TF32", "tensor_fp16": "Tensor FP16", "tensor_bf16": "Tensor BF16",
    "tensor_fp8": "Tensor FP8", "tensor_int8": "Tensor INT8",
}
CLASS_SHAPE = dict(zip(COMPUTE_CLASSES, [
    "square", "circle", "triangle-up", "diamond", "cross", "triangle-down", "triangle-right",
    "triangle-left", "wedge",
]))
MEASURED, PREDICTED = "measured", "predicted at roof (what-if, no duration)"
KERNEL_DATA = "kernels"  # the named dataset of the kernel points; a page fills it from its embedded table
# Fields of a kernel point. The page's embedded table has these columns (and more), so a chart's
# rows are a selection of them; a point's performance and timing are computed in the spec.
CHART_FIELDS = ["kernel", "kernel_short", "app", "compute_class", "bound", "launches", "time_share",
                *(f"ai_{lv}" for lv in MEMORY_LEVELS), "achieved", "attainable", "roof_pct", "ceiling_source",
                "note", "rank"]
CANVAS_FROM = 300  # kernels on a chart from which it is drawn on a canvas, not as SVG
CROWDED = 150  # drawn kernels from which the points are smaller
ALL = "(all)"
APP_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


# -- formatting ------------------------------------------------------------------------------------


def si(value: float, unit: str) -> str:
    """``value`` with a decimal SI prefix and 3 significant digits, e.g. ``1.56 TB/s``."""
    if value is None or not np.isfinite(value):
        return "–"
    prefixes = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""),
                (1e-3, "m"), (1e-6, "µ"), (1e-9, "n"), (1e-12, "p"))
    for factor, prefix in prefixes:
        if abs(float(f"{value:.3g}")) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


# -- chart geometry --------------------------------------------------------------------------------


class _Frame:
    """Data <-> pixel mapping of a log-log plot with a fixed domain (``nice=False``)."""

    def __init__(self, x: tuple[float, float], y: tuple[float, float]):
        self.x, self.y = x, y
        self.lx = (math.log10(x[0]), math.log10(x[1]))
        self.ly = (math.log10(y[0]), math.log10(y[1]))
        self.ppx = WIDTH / (self.lx[1] - self.lx[0])  # pixels per decade
        self.ppy = HEIGHT / (self.ly[1] - self.ly[0])
        self.theta = math.atan2(self.ppy, self.ppx)  # on-screen angle of a slope-1 roof

    def px(self, x: float, y: float) -> tuple[float, float]:
        return (math.log10(x) - self.lx[0]) * self.ppx, (self.ly[1] - math.log10(y)) * self.ppy

    def data(self, px: float, py: float) -> tuple[float, float]:
        return 10 ** (self.lx[0] + px / self.ppx), 10 ** (self.ly[1] - py / self.ppy)


def _span(lo: float, hi: float, decades: float, low_side: float) -> tuple[float, float]:
    """Widen [lo, hi] to at least ``decades``, ``low_side`` of the extra going below ``lo``."""
    extra = decades - math.log10(hi / lo)
    if extra > 0:
        lo, hi = lo / 10 ** (extra * low_side), hi * 10 ** (extra * (1 - low_side))
    return lo, hi


def _selected(ceilings: pd.DataFrame, device: str) -> dict[tuple[str, str], tuple[float, str]]:
    """(kind, name) -> (value, source) of the selected ceilings of ``device``.

    Several apps on one device may select different report values; the largest is drawn and
    the source says so.
    """
    rows = ceilings[(ceilings["device"] == device) & ceilings["selected"] & (ceilings["value"] > 0)]
    rows = rows.drop_duplicates(["kind", "name", "value", "source"])
    out = {}
    for (kind, name), group in rows.groupby(["kind", "name"]):
        best = group.loc[group["value"].idxmax()]
        source = str(best["source"]) + (f", max of {len(group)}" if len(group) > 1 else "")
        out[(kind, name)] = (float(best["value"]), source)
    return out


def _used_classes(kernels: pd.DataFrame) -> list[str]:
    used = {c for c in COMPUTE_CLASSES if (pd.to_numeric(kernels[f"flop_{c}"], errors="coerce") > 0).any()}
    used |= set(kernels["compute_class"]) & set(COMPUTE_CLASSES)
    return [c for c in COMPUTE_CLASSES if c in used]


def plot_points(kernels: pd.DataFrame) -> pd.DataFrame:
    """One row per kernel that can be placed on the chart, with the fields the chart needs.

    ``y`` is the achieved performance, or the attainable (predicted) one when the kernel has no
    measured duration; ``rank`` orders kernels by GPU time (predicted time for what-if rows).
    """
    k = kernels.reset_index(drop=True)
    measured = np.isfinite(k["performance"]) & (k["performance"] > 0)
    y = k["performance"].where(measured, k["attainable"])
    ai = k[[f"ai_{lv}" for lv in MEMORY_LEVELS]]
    ok = np.isfinite(y) & (y > 0) & (np.isfinite(ai) & (ai > 0)).any(axis=1)
    time = k["duration_s"].where(np.isfinite(k["duration_s"]), k["predicted_duration_s"])
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
            "rank": time.rank(ascending=False, method="first", na_option="bottom").astype(int),
        }
    )
    return out[ok.to_numpy()].reset_index(drop=True)


def _place(lines: list[float], texts: list[str], gap: float = FONT + 3) -> list[tuple[str, float, int]]:
    """Place one label per parallel line on a 1-D axis (pixels, down positive) without overlap.

    Lines are sorted top first. Each label goes above its line, else below it, else it is merged
    into the previous label. Returns (text, line position, side) with side -1 above, +1 below.
    """
    taken: list[tuple[float, float]] = []
    placed: list[list] = []
    for i, (pos, text) in enumerate(zip(lines, texts)):
        others = [(p - 1, p + 1) for j, p in enumerate(lines) if j != i]
        for side in (-1, 1):
            if _free(_band(pos, side, gap), taken + others):
                taken.append(_band(pos, side, gap))
                placed.append([text, pos, side])
                break
        else:
            if placed:
                placed[-1][0] += " · " + text
            else:
                placed.append([text, pos, -1])
    return [tuple(p) for p in placed]


def _band(pos: float, side: int, gap: float = FONT + 3) -> tuple[float, float]:
    return (pos - gap, pos - 2) if side < 0 else (pos + 2, pos + gap)


def _free(band: tuple[float, float], taken: list[tuple[float, float]]) -> bool:
    return not any(band[0] < b and a < band[1] for a, b in taken)


def _sides(lines: list[float], placed: list[tuple[str, float, int]]) -> list[list[int]]:
    """Per placed label: its side, then the other side too when that is also free."""
    bands = [_band(pos, side) for _, pos, side in placed]
    out = []
    for i, (_, pos, side) in enumerate(placed):
        others = [(p - 1, p + 1) for p in lines if p != pos] + bands[:i] + bands[i + 1:]
        out.append([side, -side] if _free(_band(pos, -side), others) else [side])
    return out


def _up(u: tuple[float, float]) -> tuple[float, float]:
    """The unit normal of direction ``u`` that points up the screen (pixel y grows down)."""
    return (u[1], -u[0]) if -u[0] < 0 else (-u[1], u[0])


def _spot(origin: tuple[float, float], u: tuple[float, float], side: int, line_px: float, text: str,
          obstacles: np.ndarray) -> tuple[float, int, np.ndarray]:
    """Distance along a roof (pixels from ``origin`` in direction ``u``) where its label covers
    the fewest obstacles (kernel points, other roofs and labels), that number, and sample points
    of the chosen box."""
    length = len(text) * CHAR_PX
    up = _up(u)
    n = up if side < 0 else (-up[0], -up[1])  # unit normal towards the label's side
    rel = obstacles - np.asarray(origin) if len(obstacles) else np.empty((0, 2))
    along, across = rel @ np.asarray(u), rel @ np.asarray(n)
    best, best_count = 12.0, None
    for start in np.arange(12.0, max(line_px - length - 4, 12.0) + 1, 16.0):
        inside = (along > start - 10) & (along < start + length + 10) & (across > -8) & (across < FONT + 10)
        if best_count is None or inside.sum() < best_count:
            best, best_count = float(start), int(inside.sum())
    samples = np.array([
        (origin[0] + u[0] * d + n[0] * h, origin[1] + u[1] * d + n[1] * h)
        for d in np.arange(best, best + length, 5.0) for h in (3.0, FONT / 2 + 3, FONT + 3)
    ])
    return best, best_count, samples


def _roof_groups(roofs: dict[tuple[str, str], tuple[float, str]], classes: list[str]) -> tuple[list, list]:
    """Compute and memory roofs to draw, highest first, as (value, style, label text).

    Roofs with the same value and source are one line with one label (e.g. L1 and shared).
    """
    def group(kind: str, names: list[str], labels: dict[str, str]) -> list[tuple[float, str, str]]:
        merged: dict[tuple[float, str], list[str]] = {}
        for name in names:
            if (kind, name) in roofs:
                merged.setdefault(roofs[(kind, name)], []).append(name)
        out = []
        for (value, source), members in merged.items():
            unit = "B/s" if kind == "memory" else "OP/s" if members == ["tensor_int8"] else "FLOP/s"
            out.append((value, members[0], f"{', '.join(labels[m] for m in members)} {si(value, unit)} ({source})"))
        return sorted(out, key=lambda item: -item[0])

    return group("compute", classes, CLASS_LABEL), group("memory", list(MEMORY_LEVELS), LEVEL_LABEL)


def _samples(p0: tuple[float, float], p1: tuple[float, float], step: float = 6.0) -> np.ndarray:
    n = max(int(math.dist(p0, p1) / step), 1)
    return np.linspace(p0, p1, n + 1)


def _roof_layers(
    roofs: dict[tuple[str, str], tuple[float, str]], classes: list[str], frame: _Frame, points_px: np.ndarray
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Roof segments, their labels and the ridge points, in data coordinates.

    Labels of close roofs are put on opposite sides or merged (:func:`_place`); along its roof
    each label goes where it covers the fewest kernel points, other roofs and labels (:func:`_spot`).
    """
    compute, memory = _roof_groups(roofs, classes)
    (x_lo, x_hi), (y_lo, _) = frame.x, frame.y
    top = compute[0][0] if compute else None
    widest = memory[0][0] if memory else None
    segments, labels, ridges = [], [], []
    for value, _, text in compute:
        x0 = max(x_lo, value / widest) if widest else x_lo
        segments.append({"x": x0, "x2": x_hi, "y": value, "y2": value, "style": "compute", "roof": text})
    for beta, level, text in memory:
        x0, x1 = max(x_lo, y_lo / beta), (top / beta if top else x_hi)
        segments.append({"x": x0, "x2": x1, "y": beta * x0, "y2": beta * x1, "style": level, "roof": text})
        for value, name, _ in compute:
            ridges.append({"x": value / beta, "y": value, "ridge": f"ridge {CLASS_LABEL[name]} / "
                           f"{LEVEL_LABEL[level]}: {value / beta:.3g} FLOP/B"})
    ends = {s["roof"]: (frame.px(s["x"], s["y"]), frame.px(s["x2"], s["y2"])) for s in segments}
    placed: list[np.ndarray] = []

    def obstacles(own: str) -> np.ndarray:
        lines = [_samples(*ends[t], step=3.0) for t in ends if t != own]  # crossing a roof costs ~4 points
        return np.concatenate([points_px.reshape(-1, 2), *lines, *placed])

    def add(text: str, sides: list[int], origin: tuple, u: tuple, line_px: float, angle: float, align: str) -> int:
        near = obstacles(text.split(" · ")[0])
        tries = [(_spot(origin, u, side, line_px, text, near), side) for side in sides]
        (along, _, box), side = min(tries, key=lambda t: t[0][1])  # fewest covered; ties: first side
        placed.append(box)
        n = _up(u)
        x, y = frame.data(origin[0] + along * u[0] - 3.0 * side * n[0], origin[1] + along * u[1] - 3.0 * side * n[1])
        labels.append({"x": x, "y": y, "text": text, "angle": angle, "align": align,
                       "baseline": "bottom" if side < 0 else "top"})
        return side

    def place(lines: list[float], texts: list[str], draw: Callable[[str, list[int]], int]) -> None:
        placed_lines = _place(lines, texts)
        for i, (text, pos, _) in enumerate(placed_lines):
            placed_lines[i] = (text, pos, draw(text, _sides(lines, placed_lines)[i]))

    def flat_label(text: str, sides: list[int]) -> int:
        start, end = ends[text.split(" · ")[0]]
        return add(text, sides, (end[0] - 2, end[1]), (-1.0, 0.0), end[0] - 2 - start[0], 0.0, "right")

    cos, sin = math.cos(frame.theta), math.sin(frame.theta)
    angle = (360 - math.degrees(frame.theta)) % 360

    def sloped_label(text: str, sides: list[int]) -> int:
        start, end = ends[text.split(" · ")[0]]
        return add(text, sides, start, (cos, -sin), math.dist(start, end), angle, "left")

    place([ends[t][1][1] for *_, t in compute], [t for *_, t in compute], flat_label)
    # Sloped roofs are parallel: place their labels on the perpendicular axis, top line first.
    place([-math.log10(beta) * frame.ppy * cos for beta, *_ in memory], [t for *_, t in memory], sloped_label)
    return pd.DataFrame(segments), pd.DataFrame(labels), pd.DataFrame(ridges, columns=["x", "y", "ridge"])


def _domain(points: pd.DataFrame, roofs: dict, classes: list[str]) -> _Frame:
    """Axis ranges holding every point, roof and ridge, with room for the roof labels."""
    compute, memory = _roof_groups(roofs, classes)
    top = max((v for v, *_ in compute), default=np.nan)
    ridges = [p / b for p, *_ in compute for b, *_ in memory]
    ai = points[[f"ai_{lv}" for lv in MEMORY_LEVELS]].to_numpy(dtype=float).ravel()
    xs = np.array([*ai[np.isfinite(ai) & (ai > 0)], *ridges] or [1.0])
    ys = np.array([*points["y"], *(v for v, *_ in compute)] or [1.0])
    x = _span(xs.min() / 3, xs.max() * 3, 3, 0.5)
    y = _span(ys.min() / 10, ys.max() * 1.6, 3, 1.0)
    sloped_px = max((len(t) * CHAR_PX + 24 for *_, t in memory), default=0)
    flat_px = max((len(t) * CHAR_PX + 16 for *_, t in compute), default=0)
    for _ in range(6):
        frame = _Frame(x, y)
        grow_left = grow_right = False
        for beta, *_ in memory:
            end = top / beta if np.isfinite(top) else x[1]
            start = max(x[0], y[0] / beta)
            grow_left |= end / start < 10 ** (sloped_px * math.cos(frame.theta) / frame.ppx)
        if ridges:
            grow_right = WIDTH - frame.px(max(ridges), top)[0] < flat_px
        grow_up = bool(np.isfinite(top)) and frame.px(1.0, top)[1] < FONT + 6  # room for a label above the top roof
        if not (grow_left or grow_right or grow_up):
            break
        x = (x[0] / (3 if grow_left else 1), x[1] * (3 if grow_right else 1))
        y = (y[0] / (3 if grow_left else 1), y[1] * (10 ** ((FONT + 8) / frame.ppy) if grow_up else 1))
    return _Frame(x, y)


def _axis_values(lo: float, hi: float) -> list[float]:
    return [10.0**e for e in range(math.ceil(math.log10(lo) - 1e-9), math.floor(math.log10(hi) + 1e-9) + 1)]


def roofline_chart(kernels: pd.DataFrame, ceilings: pd.DataFrame, device: str) -> alt.LayerChart:
    """Hierarchical roofline of one device: roofs, ridge points and one point per kernel and level.

    The kernels are one row each in the dataset named :data:`KERNEL_DATA`; the spec folds each
    into one point per memory level, with the same performance and that level's intensity. Inputs
    (bound params) switch the colour between app and bound, filter by app, compute class and
    bound, and keep the top N kernels by GPU time; a click highlights a kernel.
    """
    chart, points = _roofline(kernels, ceilings, device)
    # Set, not passed to .properties(): validating thousands of rows against the schema takes seconds.
    chart.datasets = {KERNEL_DATA: _records(points[["kid", *CHART_FIELDS]])}
    return chart


def _roofline(kernels: pd.DataFrame, ceilings: pd.DataFrame, device: str) -> tuple[alt.LayerChart, pd.DataFrame]:
    """The chart of :func:`roofline_chart` without its kernel rows, and those rows."""
    on_device = kernels[kernels["device"] == device]
    points = plot_points(on_device)
    roofs = _selected(ceilings, device)
    classes = _used_classes(on_device)
    frame = _domain(points, roofs, classes)
    shown = points[points["rank"] <= TOP_N_DEFAULT]  # labels avoid the points visible at first
    ai = shown[[f"ai_{lv}" for lv in MEMORY_LEVELS]].to_numpy(dtype=float)
    at = np.isfinite(ai) & (ai > 0)
    points_px = np.array([frame.px(a, y) for a, y in zip(ai[at], np.repeat(shown["y"].to_numpy(), at.sum(axis=1)))])
    segments, labels, ridges = _roof_layers(roofs, classes, frame, points_px)

    def xy(x: str, y: str) -> dict:
        """The shared log-log position channels (identical on every layer, so the axes merge)."""
        # Decade ticks; below 1 FLOP/B "0.01" reads better than SI's "10m".
        x_axis = alt.Axis(format="~s", values=_axis_values(*frame.x), grid=True,
                          labelExpr="datum.value < 1 ? format(datum.value, '~g') : format(datum.value, '~s')")
        return {
            "x": alt.X(f"{x}:Q", scale=alt.Scale(type="log", domain=list(frame.x), nice=False),
                       axis=x_axis, title="Arithmetic intensity [FLOP/B]"),
            "y": alt.Y(f"{y}:Q", scale=alt.Scale(type="log", domain=list(frame.y), nice=False),
                       axis=alt.Axis(format="~s", values=_axis_values(*frame.y)), title="Performance [FLOP/s]"),
        }

    styles = ["compute", *MEMORY_LEVELS]
    roof_rules = alt.Chart(segments).mark_rule(color=ROOF_COLOUR, strokeWidth=1.6, clip=True).encode(
        **xy("x", "y"), x2="x2:Q", y2="y2:Q",
        strokeDash=alt.StrokeDash("style:N", scale=alt.Scale(domain=styles, range=[[1, 0], *LEVEL_DASH.values()]),
                                  legend=None),
        tooltip=alt.Tooltip("roof:N", title="roof"),
    )
    layers = [roof_rules]
    for (align, baseline, angle), group in labels.groupby(["align", "baseline", "angle"]):
        layers.append(alt.Chart(group).mark_text(
            align=align, baseline=baseline, angle=float(angle), fontSize=FONT, color="#333333", clip=True,
        ).encode(**xy("x", "y"), text="text:N"))
    layers.append(alt.Chart(ridges).mark_point(shape="diamond", size=30, filled=True, color=ROOF_COLOUR).encode(
        **xy("x", "y"), tooltip=alt.Tooltip("ridge:N", title="ridge point")))

    n = max(len(points), 1)
    colour_by = alt.param(name="colour_by", value="bound",
                          bind=alt.binding_radio(options=["bound", "app"], name="colour by "))
    filters = {
        field: alt.param(name=f"{field}_filter", value=ALL, bind=alt.binding_select(
            options=[ALL, *sorted(points[field].unique())], name=f"{label} "))
        for field, label in (("app", "app"), ("compute_class", "compute class"), ("bound", "bound"))
    }
    top_n = alt.param(name="top_n", value=min(n, TOP_N_DEFAULT),
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
    used_shapes = [c for c in COMPUTE_CLASSES if c in set(points["compute_class"])] or ["fp32"]
    layers.append(base.mark_point(filled=False, strokeWidth=1.5, clip=True).encode(
        **xy("ai", "y"),
        color=alt.Color("colour:N", scale=colour_scale, legend=legend.copy(), title="colour"),
        fill=alt.Color("colour:N", scale=colour_scale, legend=None),
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
    drawn = {("memory", lv) for lv in MEMORY_LEVELS} | {("compute", c) for c in classes}
    sources = sorted({s for key, (_, s) in roofs.items() if key in drawn})
    return (
        alt.layer(*layers)
        .add_params(colour_by, *filters.values(), top_n)
        .properties(width=WIDTH, height=HEIGHT, title=alt.Title(
            device, subtitle=[
                f"{_kernel_count(len(points))}; ceilings: {', '.join(sources) or 'none'}; "
                "click a kernel to highlight its levels, double-click to clear",
                *(["hollow points: what-if kernels without a duration, drawn at their predicted (at-roof) "
                   "performance"] if (points["timing"] == PREDICTED).any() else []),
            ]))
        .configure_axis(labelFontSize=FONT, titleFontSize=12)
        .configure_legend(labelFontSize=FONT)
    ), points


# -- pages -----------------------------------------------------------------------------------------

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:1.5em;color:#222;max-width:1400px}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:13px}th,td{border-bottom:1px solid #e4e4e4;padding:3px 8px;text-align:left}
th{background:#f4f4f4;position:sticky;top:0}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.kname{max-width:32em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;font-family:monospace}
.note{color:#555;font-size:12px;min-width:16em;max-width:36em}.cfg{font-size:12px;white-space:nowrap}.error{color:#a40000}.warning{color:#8a5a00}
.chart{margin:.5em 0}.chart form,.vega-bindings{font-size:13px}.vega-bind{display:inline-block;margin-right:1.2em}
.meta{color:#555}.scroll{overflow-x:auto}
.pager{font-size:13px}.pager button,.pager input{font-size:13px;margin-right:.6em}
.drawn{font-size:13px;color:#555;margin:.2em 0 1.2em}
"""

# The kernels table: (header, field of the page's embedded table or None for the row number, format).
# The inline script draws the rows and writes the CSV (these columns and the full name) from it.
TABLE = [
    ("#", None, "index"), ("kernel", "kernel_short", "name"), ("app", "app", "app"), ("device", "device", "cfg"),
    ("grid × block", "config", "cfg"), ("launches", "launches", "int"), ("time share", "time_share", "share"),
    ("GPU time", "duration_s", "s"), ("bound", "bound", "text"), ("% of roof", "roof_pct", "pct"),
    ("achieved", "achieved", "achieved"), ("attainable", "attainable", "attainable"),
    ("AI [FLOP/B]", "ai_bind", "num"), ("ceiling source", "ceiling_source", "text"), ("priority", "priority", "num"),
    ("note", "note", "note"),
]
TABLE_COLUMNS = [head for head, *_ in TABLE]
CSV_COLUMNS = [*((head, field) for head, field, _ in TABLE), ("kernel (full name)", "kernel")]
TABLE_ROWS = 100  # rows drawn at first and per "show more"
TEXT_FIELDS = {"kernel", "kernel_short", "app", "device", "config", "compute_class", "bound", "ceiling_source", "note"}
INT_FIELDS = {"launches", "rank"}
UNPLOTTED_LISTED = 100


COLUMN_HELP = {
    "time share": "share of the app's GPU time",
    "% of roof": "achieved / attainable at the binding roof (time form: largest lower bound / duration)",
    "achieved": "work of the dominant compute class / duration",
    "attainable": "the binding roof at the kernel's intensity",
    "AI [FLOP/B]": "arithmetic intensity at the binding (busiest) memory level",
    "priority": "time share x (1 - fraction of the binding roof)",
}

# Draws the kernels table and the charts from DATA (one column per field, rows in priority order).
# Names are data: every text goes in with textContent or a property, never as markup.
SCRIPT = r"""
(function () {
'use strict';
const C = {}, N = DATA.n;
for (const [name, col] of Object.entries(DATA.cols)) {
  C[name] = Array.isArray(col) ? col : col.codes.map((c) => col.levels[c]);
}
const PREFIXES = [[1e18, 'E'], [1e15, 'P'], [1e12, 'T'], [1e9, 'G'], [1e6, 'M'], [1e3, 'k'], [1, ''],
  [1e-3, 'm'], [1e-6, 'µ'], [1e-9, 'n'], [1e-12, 'p']];
const g3 = (v) => String(Number(v.toPrecision(3)));
function si(v, unit) {
  if (v === null || !isFinite(v)) return '–';
  const r = Math.abs(Number(v.toPrecision(3)));
  for (const [f, p] of PREFIXES) if (r >= f) return g3(v / f) + ' ' + p + unit;
  return g3(v) + ' ' + unit;
}
const pct = (v) => (v === null ? '–' : v.toFixed(1) + ' %');
const count = (n) => n.toLocaleString('en-US');
const predicted = (i) => C.achieved[i] === null && C.attainable[i] !== null;
const FORMAT = {
  index: (i) => String(i + 1),
  int: (i, f) => (C[f][i] === null ? '' : String(C[f][i])),
  share: (i, f) => (C[f][i] === null ? '–' : pct(100 * C[f][i])),
  pct: (i, f) => pct(C[f][i]),
  s: (i, f) => si(C[f][i], 's'),
  achieved: (i, f) => (predicted(i) ? '– (what-if)' : si(C[f][i], 'FLOP/s')),
  attainable: (i, f) => si(C[f][i], 'FLOP/s') + (predicted(i) ? ' predicted' : ''),
  num: (i, f) => (C[f][i] === null ? '–' : g3(C[f][i])),
  text: (i, f) => C[f][i] || '',
};
const CLASS = {index: 'n', int: 'n', share: 'n', pct: 'n', s: 'n', achieved: 'n', attainable: 'n', num: 'n',
  name: 'kname', cfg: 'cfg', note: 'note'};

function row(i) {
  const tr = document.createElement('tr');
  for (const [, field, format] of DATA.table) {
    const td = tr.insertCell();
    if (CLASS[format]) td.className = CLASS[format];
    if (format === 'app' && DATA.appPrefix !== null) {
      const a = document.createElement('a');
      a.href = DATA.appPrefix + encodeURIComponent(C.app[i] + '.html');
      a.textContent = C.app[i];
      td.appendChild(a);
    } else {
      td.textContent = (FORMAT[format] || FORMAT.text)(i, field);
    }
    if (format === 'name') td.title = C.kernel[i];
  }
  return tr;
}

function csvCell(v) {
  if (v === null || v === undefined) return '';
  let s = String(v);
  if (typeof v === 'string' && /^[=+\-@]/.test(s)) s = "'" + s;  // a spreadsheet would run it
  return /[",\r\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
}
function csvText() {
  const lines = [DATA.csv.map(([head]) => csvCell(head)).join(',')];
  for (let i = 0; i < N; i++) lines.push(DATA.csv.map(([, f]) => csvCell(f === null ? i + 1 : C[f][i])).join(','));
  return lines.join('\n') + '\n';
}
window.ROOFLINE = {csvText: csvText, columns: C};

const tbody = document.getElementById('rows');
if (tbody) {
  const status = document.getElementById('shown'), more = document.getElementById('more');
  const all = document.getElementById('all'), find = document.getElementById('find');
  const every = Array.from({length: N}, (_, i) => i);
  let order = every, shown = 0, hay = null;
  const show = function (upto) {
    const rows = document.createDocumentFragment();
    for (upto = Math.min(upto, order.length); shown < upto; shown++) rows.appendChild(row(order[shown]));
    tbody.appendChild(rows);
    status.textContent = count(shown) + ' of ' + count(order.length) + (order === every ? '' : ' matching') +
      ' kernels shown';
    more.hidden = all.hidden = shown >= order.length;
  };
  more.addEventListener('click', () => show(shown + DATA.pageRows));
  all.addEventListener('click', () => show(order.length));
  find.addEventListener('input', function () {
    const q = find.value.trim().toLowerCase();
    hay = hay || every.map((i) => [C.kernel[i], C.kernel_short[i], C.app[i], C.bound[i], C.note[i]]
      .join('\n').toLowerCase());
    order = q ? every.filter((i) => hay[i].includes(q)) : every;
    tbody.textContent = '';
    shown = 0;
    show(DATA.pageRows);
  });
  show(DATA.pageRows);
  document.getElementById('csv').addEventListener('click', function () {
    const url = URL.createObjectURL(new Blob([csvText()], {type: 'text/csv;charset=utf-8'}));
    const a = document.createElement('a');
    a.href = url;
    a.download = DATA.csvName;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  });
}

function drawnNote(top, n) {
  if (top >= n) return n === 1 ? 'The kernel is drawn.' : 'All ' + count(n) + ' kernels drawn.';
  return 'Drawn: the top ' + count(top) + ' of ' + count(n) + ' kernels by GPU time; ' + count(n - top) +
    ' hidden. Move the "top N kernels by GPU time" slider to the right to show them.';
}
DATA.charts.forEach(function (chart, c) {
  const points = [];
  for (let i = 0; i < N; i++) {
    if (C.device[i] !== chart.device || C.rank[i] === null) continue;
    const p = {kid: i};
    for (const f of DATA.fields) p[f] = C[f][i];
    points.push(p);
  }
  SPECS[c].datasets[DATA.dataset] = points;
  const el = document.getElementById('chart' + c), note = document.getElementById('drawn' + c);
  vegaEmbed(el, SPECS[c], {actions: false, renderer: chart.canvas ? 'canvas' : 'svg'}).then(function (r) {
    VIEWS[c] = r.view;
    el.setAttribute('data-rendered', 'yes');
    note.textContent = drawnNote(r.view.signal('top_n'), points.length);
    r.view.addSignalListener('top_n', (_, top) => { note.textContent = drawnNote(top, points.length); });
  }).catch(function (e) {
    el.setAttribute('data-error', String(e));
    el.textContent = 'Chart could not be drawn: ' + e;
  });
});
})();
"""


def _e(text: object) -> str:
    return html.escape("" if text is None or (isinstance(text, float) and not np.isfinite(text)) else str(text),
                       quote=True)


def _json(obj: object) -> str:
    """JSON safe inside a <script> element: no ``</`` or ``<!--`` can appear."""
    return _script_safe(json.dumps(obj, allow_nan=False, ensure_ascii=False))


def _script_safe(text: str) -> str:
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _records(frame: pd.DataFrame) -> list[dict]:
    """Rows as JSON-ready dicts (missing values as ``None``)."""
    return frame.astype(object).where(frame.notna(), None).to_dict("records")


def _app_href(app: str, prefix: str) -> str:
    return prefix + urllib.parse.quote(f"{app}.html")


def page_table(kernels: pd.DataFrame) -> pd.DataFrame:
    """Every kernel of a page in priority order: the chart's fields and the table's.

    ``rank`` (order by GPU time on its device's chart) is missing for a kernel that has no place
    on a chart; ``achieved`` is the measured performance, missing for what-if rows.
    """
    k = kernels.sort_values(["priority", "duration_s"], ascending=False, na_position="last").reset_index(drop=True)
    rank = pd.Series(np.nan, index=k.index)
    for _, group in k.groupby("device", sort=False):
        points = plot_points(group)
        rank[group.index[points["kid"].to_numpy()]] = points["rank"].to_numpy()
    levels = [f"ai_{lv}" for lv in MEMORY_LEVELS]
    ai = k[levels].apply(pd.to_numeric, errors="coerce")
    binding = np.select([k["binding_level"] == lv for lv in MEMORY_LEVELS], [ai[c] for c in levels], np.nan)
    performance = pd.to_numeric(k["performance"], errors="coerce")
    return pd.DataFrame({
        "kernel": k["kernel"], "kernel_short": k["kernel_short"], "app": k["app"], "device": k["device"],
        "config": [f"{g} × {b}" if g or b else "" for g, b in zip(k["grid"], k["block"])],
        "compute_class": k["compute_class"], "bound": k["bound"], "launches": k["launches"],
        "time_share": k["time_share"], "duration_s": k["duration_s"], **{c: ai[c].where(ai[c] > 0) for c in levels},
        "achieved": performance.where(np.isfinite(performance)), "attainable": k["attainable"],
        "roof_pct": k["roof_pct"], "ai_bind": binding, "ceiling_source": k["ceiling_source"],
        "priority": k["priority"], "note": k["note"], "rank": rank,
    })


def _columns_json(table: pd.DataFrame) -> str:
    """The table as one JSON object of columns, safe inside a <script> element.

    Numbers keep 4 significant digits; a text column with few distinct values is stored as
    ``{"levels": [...], "codes": [...]}``.
    """
    parts = []
    for name in table.columns:
        if name in TEXT_FIELDS:
            values = table[name].fillna("").astype(str).tolist()
            levels = sorted(set(values))
            if 2 * len(levels) <= len(values):
                code = {v: i for i, v in enumerate(levels)}
                text = json.dumps({"levels": levels, "codes": [code[v] for v in values]}, ensure_ascii=False)
            else:
                text = json.dumps(values, ensure_ascii=False)
        else:
            numbers = pd.to_numeric(table[name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
            form = "{:.0f}" if name in INT_FIELDS else "{:.4g}"
            text = "[" + ",".join(form.format(v) if math.isfinite(v) else "null" for v in numbers) + "]"
        parts.append(f"{json.dumps(name)}:{text}")
    return _script_safe("{" + ",".join(parts) + "}")


def _kernels_html(n: int, csv_name: str) -> str:
    """The kernels section's controls and empty table; the inline script fills the rows."""
    if not n:
        return "<p>No kernels.</p>"
    head = "".join(f'<th title="{_e(COLUMN_HELP.get(c, ""))}">{_e(c)}</th>' for c in TABLE_COLUMNS)
    return (
        '<p class="pager"><input id="find" type="search" size="40" placeholder="find: kernel, app, bound or note" '
        f'aria-label="find kernels"><button id="csv" type="button" title="all {n} kernels, as {_e(csv_name)}">'
        f'download CSV</button><span id="shown">{n} kernels</span></p>\n'
        f'<div class="scroll"><table class="kernels"><thead><tr>{head}</tr></thead><tbody id="rows"></tbody>'
        f'</table></div>\n<p class="pager"><button id="more" type="button" hidden>show {TABLE_ROWS} more</button>'
        '<button id="all" type="button" hidden>show all</button></p>'
    )


def _ceilings_html(ceilings: pd.DataFrame, devices: list[str]) -> str:
    rows = ceilings[ceilings["device"].isin(devices)].sort_values(["device", "kind", "name", "selected"],
                                                                  ascending=[True, True, True, False])
    if rows.empty:
        return "<p>No ceilings.</p>"
    body = "".join(
        f"<tr><td>{_e(r.device)}</td><td>{_e(r.kind)}</td><td>{_e(r.name)}</td>"
        f'<td class="n">{si(r.value, "FLOP/s" if r.kind == "compute" else "B/s")}</td><td>{_e(r.source)}</td>'
        f'<td class="n">{si(r.clock_hz, "Hz")}</td><td>{"yes" if r.selected else ""}</td>'
        f'<td class="note">{_e(r.citation)}</td></tr>'
        for r in rows.itertuples(index=False)
    )
    return ("<table><thead><tr><th>device</th><th>kind</th><th>name</th><th>value</th><th>source</th>"
            f"<th>clock</th><th>selected</th><th>citation</th></tr></thead><tbody>{body}</tbody></table>")


def _diagnostics_html(diagnostics: pd.DataFrame, table: pd.DataFrame) -> str:
    d = diagnostics.sort_values(["severity", "app"], kind="stable")
    parts = []
    if len(d):
        body = "".join(
            f'<tr class="{_e(r.severity)}"><td>{_e(r.severity)}</td><td>{_e(r.app)}</td><td>{_e(r.stage)}</td>'
            f"<td>{_e(r.source_file)}</td><td>{'' if not np.isfinite(r.launch) else int(r.launch)}</td>"
            f"<td>{_e(r.message)}</td></tr>"
            for r in d.itertuples(index=False)
        )
        parts.append("<table><thead><tr><th>severity</th><th>app</th><th>stage</th><th>input</th><th>launch</th>"
                     f"<th>message</th></tr></thead><tbody>{body}</tbody></table>")
    unplotted = table[table["rank"].isna()]
    if len(unplotted):
        items = "".join(
            f'<li><span class="kname" title="{_e(r.kernel)}">{_e(r.kernel_short)}</span> ({_e(r.app)}, '
            f"{_e(r.device)}): {_e(r.note or ('bound ' + r.bound + ': no FLOP/s or no intensity to place it'))}</li>"
            for r in unplotted.head(UNPLOTTED_LISTED).itertuples(index=False)
        )
        rest = len(unplotted) - UNPLOTTED_LISTED
        items += f"<li>… and {rest} more: their notes are in the kernels table and its CSV</li>" if rest > 0 else ""
        parts.append(f"<p>{len(unplotted)} kernel(s) are in the table but not on a chart:</p><ul>{items}</ul>")
    return "".join(parts) or "<p>No problems: every input and launch was analysed.</p>"


@functools.cache
def vega_bundle() -> str:
    """vega + vega-lite + vega-embed as one script (defines ``vegaEmbed``).

    Building it takes ~1.2 s (vl_convert bundles the JavaScript on each call), so it is built once
    per vl-convert version and kept in the user's cache folder; any problem there just rebuilds it.
    """
    import vl_convert

    version = getattr(vl_convert, "__version__", "unknown")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "roofline" / f"vega-{version}.js"
    try:
        bundle = cache.read_text(encoding="utf-8")
        if "vegaEmbed" in bundle:
            return bundle
    except (OSError, UnicodeDecodeError):
        pass
    bundle = vl_convert.javascript_bundle()
    try:
        write_text_atomic(cache, bundle)
    except OSError:
        pass  # a read-only home: build it each time
    return bundle



def _page(title: str, body: str, specs: list[dict], data: str) -> str:
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>\n'
        f"<style>{CSS}</style>\n<script>{vega_bundle()}</script>\n</head><body>\n{body}\n"
        f"<script>\nvar DATA = {data};\nvar SPECS = {_json(specs)};\nvar VIEWS = [];\n{SCRIPT}</script>\n"
        "</body></html>\n"
    )


_SPECS: dict[tuple, dict] = {}


def _chart_spec(kernels: pd.DataFrame, ceilings: pd.DataFrame, device: str) -> dict:
    """``roofline_chart(...).to_dict()`` without its kernel rows (the page fills them in from its
    table), memoised on the content: the summary and an app page often draw the same device from
    the same rows, and a chart takes ~0.3 s to build."""
    key = (device, int(pd.util.hash_pandas_object(kernels, index=False).sum()),
           int(pd.util.hash_pandas_object(ceilings, index=False).sum()))
    if key not in _SPECS:
        if len(_SPECS) > 64:
            _SPECS.clear()
        spec = _roofline(kernels, ceilings, device)[0].to_dict(validate=False)
        spec.setdefault("datasets", {})[KERNEL_DATA] = []
        _SPECS[key] = spec
    return copy.deepcopy(_SPECS[key])


def _kernel_count(n: int) -> str:
    return f"{n} kernel{'s' if n != 1 else ''}"


def _narrow_controls(spec: dict, n: int, apps: list[str]) -> dict:
    """Fit a chart to the page's rows: the kernel count in its subtitle and the top-N slider to its
    ``n`` kernels, the app filter to its apps (a chart built from more rows, as an app page's is,
    counts and offers more)."""
    subtitle = spec.get("title", {}).get("subtitle") if isinstance(spec.get("title"), dict) else None
    if subtitle:
        subtitle[0] = _kernel_count(n) + subtitle[0][subtitle[0].index(";"):]
    for param in spec.get("params", []):
        bind = param.get("bind")
        if param.get("name") == "top_n" and isinstance(bind, dict):
            param["value"], bind["max"] = min(n, TOP_N_DEFAULT), max(n, 1)
        elif param.get("name") == "app_filter" and isinstance(bind, dict):
            bind["options"] = [ALL, *apps]
    return spec


def _body(kernels: pd.DataFrame, ceilings: pd.DataFrame, diagnostics: pd.DataFrame, title: str,
          app_prefix: str | None, nav: str, csv_name: str,
          chart_kernels: pd.DataFrame | None = None, chart_cache: dict | None = None) -> tuple[str, list[dict], str]:
    """The page's body, its chart specs and its embedded data (JSON text).

    ``chart_kernels`` (default: ``kernels``) sets each device chart's frame: an app page passes the
    summary's kernels, so that its charts share the summary's axes, roof labels and app colours (and
    the chart is built once per device, not once per page: ~0.3 s each). ``chart_cache`` keeps the
    specs by device across the pages of one :func:`write_pages` call (same frames for every page).
    """
    kernels = conform(kernels, "kernels")
    ceilings = conform(ceilings, "ceilings")
    diagnostics = conform(diagnostics, "diagnostics")
    table = page_table(kernels)
    devices = sorted(kernels["device"].unique())
    specs, charts, sections, skipped = [], [], [], []
    with alt.data_transformers.disable_max_rows():
        for device in devices:
            n = int((table["rank"].notna() & (table["device"] == device)).sum())
            if not ((ceilings["device"] == device) & ceilings["selected"]).any():
                skipped.append(f"{_e(device or '(unnamed device)')} (no selected ceiling)")
            elif not n:
                skipped.append(f"{_e(device)} (no kernel with both a performance and an intensity)")
            else:
                if chart_cache is not None and device in chart_cache:
                    spec = copy.deepcopy(chart_cache[device])
                else:
                    frame = kernels if chart_kernels is None else conform(chart_kernels, "kernels")
                    spec = _chart_spec(frame[frame["device"] == device], ceilings[ceilings["device"] == device], device)
                    if chart_cache is not None:
                        chart_cache[device] = copy.deepcopy(spec)
                page_apps = sorted(kernels.loc[kernels["device"] == device, "app"].unique())
                specs.append(_narrow_controls(spec, n, page_apps))
                charts.append({"device": device, "canvas": n >= CANVAS_FROM})
                i = len(specs) - 1
                sections.append(f'<div class="chart" id="chart{i}"></div><p class="drawn" id="drawn{i}"></p>')
    if skipped:
        sections.append(f"<p>No chart for {', '.join(skipped)}: their kernels are in the table below, the reasons "
                        "under <a href=\"#diagnostics\">Diagnostics</a>.</p>")
    data = (f'{{"n":{len(table)},"cols":{_columns_json(table)},"charts":{_json(charts)},'
            f'"dataset":{_json(KERNEL_DATA)},"fields":{_json(CHART_FIELDS)},"table":{_json(TABLE)},'
            f'"csv":{_json(CSV_COLUMNS)},"csvName":{_json(csv_name)},"appPrefix":{_json(app_prefix)},'
            f'"pageRows":{TABLE_ROWS}}}')
    n_err = int((diagnostics["severity"] == "error").sum())
    contents = ('<nav class="meta">Contents: <a href="#charts">rooflines</a> · <a href="#kernels">kernels</a> · '
                '<a href="#ceilings">ceilings</a> · <a href="#diagnostics">diagnostics</a></nav>')
    body = (
        f"<h1>{_e(title)}</h1>\n{nav}\n{contents}\n<p class=\"meta\">{len(kernels)} kernels, "
        f"{kernels['app'].nunique()} app(s), {len(devices)} device(s); {n_err} input error(s). "
        "Each kernel is drawn once per memory level: same performance, that level's arithmetic intensity "
        "(work of its dominant compute class / measured bytes at the level).</p>\n"
        '<section id="charts"><h2>Rooflines</h2>' + "\n".join(sections) + "</section>\n"
        '<section id="kernels"><h2>Kernels by priority</h2><p class="meta">priority = time share × (1 − fraction of '
        "the binding roof): where optimisation pays most.</p>\n" + _kernels_html(len(table), csv_name)
        + f'</section>\n<section id="ceilings"><h2>Ceilings</h2>{_ceilings_html(ceilings, devices)}</section>\n'
        f'<section id="diagnostics"><h2>Diagnostics</h2>{_diagnostics_html(diagnostics, table)}</section>'
    )
    return body, specs, data


def summary_html(kernels: pd.DataFrame, ceilings: pd.DataFrame, diagnostics: pd.DataFrame, title: str,
                 chart_cache: dict | None = None) -> str:
    """The whole offline summary page: a chart per device, kernel table, ceilings, diagnostics."""
    apps = sorted((set(kernels["app"]) | set(diagnostics["app"])) - {""})
    nav = "<nav>Apps: " + " · ".join(f'<a href="{_e(_app_href(a, "apps/"))}">{_e(a)}</a>' for a in apps) + "</nav>"
    return _page(title, *_body(kernels, ceilings, diagnostics, title, "apps/", nav, "kernels.csv",
                               chart_cache=chart_cache))


def app_html(kernels: pd.DataFrame, ceilings: pd.DataFrame, diagnostics: pd.DataFrame, app: str,
             title: str = "", chart_cache: dict | None = None) -> str:
    """The page of one app (``reports/apps/{app}.html``): the summary's blocks for its rows only."""
    return _app_page(kernels[kernels["app"] == app], kernels, ceilings, diagnostics[diagnostics["app"] == app],
                     app, title, chart_cache)


def _app_page(mine: pd.DataFrame, kernels: pd.DataFrame, ceilings: pd.DataFrame, diagnostics: pd.DataFrame,
              app: str, title: str, chart_cache: dict | None) -> str:
    """:func:`app_html` from the app's rows (``mine``) and diagnostics, already picked out."""
    devices = set(mine["device"])
    heading = f"{title}: {app}" if title else app
    nav = '<nav><a href="../summary.html">← summary</a></nav>'
    return _page(heading, *_body(mine, ceilings[ceilings["device"].isin(devices)], diagnostics, heading, None, nav,
                                 f"{app}.csv", chart_kernels=kernels, chart_cache=chart_cache))


# -- IO edge ---------------------------------------------------------------------------------------


def _read_all(paths: Sequence[str | os.PathLike], table: str) -> pd.DataFrame:
    frames = [read_table(p, table) for p in paths]
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else conform(pd.DataFrame(), table)


def write_pages(
    kernels: pd.DataFrame, ceilings: pd.DataFrame, diagnostics: pd.DataFrame,
    output: str | os.PathLike, apps_dir: str | os.PathLike, title: str, apps: Sequence[str] = (),
) -> list[Path]:
    """Write the summary page and one page per app (atomically); return the pages written.

    Every app in the tables gets a page, and so does every name in ``apps`` (an app whose input
    gave no kernel and no diagnostic still gets its, empty, page).

    Raises
    ------
    ValueError
        If an app name could not be a file name (letters, digits, ``.``, ``_``, ``-`` only).
    """
    apps = sorted((set(kernels["app"]) | set(diagnostics["app"]) | set(apps)) - {""})
    bad = [a for a in apps if not APP_NAME.match(a) or a in {".", ".."}]
    if bad:
        raise ValueError(f"app names {bad} cannot be file names; use letters, digits, '.', '_', '-'")
    output, apps_dir = Path(output), Path(apps_dir)
    # Conformed once here, so that each page's own conform is a check; one chart per device for all pages.
    kernels, ceilings = conform(kernels, "kernels"), conform(ceilings, "ceilings")
    diagnostics, charts = conform(diagnostics, "diagnostics"), {}
    write_text_atomic(output, summary_html(kernels, ceilings, diagnostics, title, charts))
    written = [output]
    # Split once: picking each app's rows out of all of them would make the pages quadratic in apps.
    rows_of, notes_of = dict(tuple(kernels.groupby("app"))), dict(tuple(diagnostics.groupby("app")))
    for app in apps:
        page = apps_dir / f"{app}.html"
        write_text_atomic(page, _app_page(rows_of.get(app, kernels.iloc[:0]), kernels, ceilings,
                                          notes_of.get(app, diagnostics.iloc[:0]), app, title, charts))
        written.append(page)
    return written


def write_report(
    kernels_paths: Sequence[str | os.PathLike],
    ceilings_paths: Sequence[str | os.PathLike],
    diagnostics_paths: Sequence[str | os.PathLike],
    output: str | os.PathLike,
    apps_dir: str | os.PathLike,
    title: str,
    apps: Sequence[str] = (),
) -> list[Path]:
    """Read the stage tables (Parquet) and write the pages with :func:`write_pages`."""
    kernels = _read_all(kernels_paths, "kernels")
    ceilings = _read_all(ceilings_paths, "ceilings").drop_duplicates()
    diagnostics = _read_all(diagnostics_paths, "diagnostics")
    return write_pages(kernels, ceilings, diagnostics, output, apps_dir, title, apps)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the offline HTML roofline report.")
    parser.add_argument("--kernels", nargs="*", default=[])
    parser.add_argument("--ceilings", nargs="*", default=[])
    parser.add_argument("--diagnostics", nargs="*", default=[])
    parser.add_argument("--output", required=True)
    parser.add_argument("--apps-dir", required=True)
    parser.add_argument("--title", default="Roofline summary")
    parser.add_argument("--apps", nargs="*", default=[], help="apps that must get a page even without rows")
    args = parser.parse_args(argv)
    write_report(args.kernels, args.ceilings, args.diagnostics, args.output, args.apps_dir, args.title, args.apps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
