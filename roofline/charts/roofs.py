"""The roofs of one device's roofline, shared by every roofline chart (:mod:`roofline.charts.roofline_chart`'s
kernels, :mod:`roofline.charts.trajectory`'s steps): the log-log frame, the selected roofs as segments
with labels placed clear of the points, the ridge points, and the axes every layer shares.

Why one module: a chart that drew its own roofs could draw them where the verdicts did not put them;
every roofline is drawn from the device's one ceilings table through :func:`roof_base`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import altair as alt
import numpy as np
import pandas as pd

from roofline.metrics import quantities
from roofline.metrics.quantities import COMPUTE_CLASSES, MEMORY_LEVELS
from roofline.metrics.units import si

WIDTH, HEIGHT = 760, 460
FONT = 11
CHAR_PX = 6.0  # mean glyph width of an 11 px sans-serif label
# Okabe-Ito, yellow last: distinguishable with the common colour-vision deficiencies.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442"]
ROOF_COLOUR = "#555555"
LEVEL_LABEL = {"dram": "DRAM", "l2": "L2", "l1": "L1", "shared": "Shared"}
LEVEL_DASH = {"dram": [1, 0], "l2": [8, 3], "l1": [3, 2], "shared": [8, 2, 2, 2]}
LEVEL_SIZE = {"dram": 140, "shared": 20}  # point area [px^2], linear in level order
def layered(layers: list, title: alt.Title, width: int = WIDTH, height: int = HEIGHT) -> alt.LayerChart:
    """The layers as one chart with the pages' size, title and fonts, built in one construction:
    a chain of ``.properties()`` and ``.configure_*()`` calls deep-copies every layer at each call."""
    return alt.LayerChart(layer=layers, width=width, height=height, title=title, config=alt.Config(
        axis=alt.AxisConfig(labelFontSize=FONT, titleFontSize=12), legend=alt.LegendConfig(labelFontSize=FONT)))


def _class_label(cls: str) -> str:
    """"FP32", "Tensor FP16", "Tensor FP16 (FP32 acc.)", "Tensor INT8 2:4 sparse", "Tensor BF16 mma.sync"."""
    if not cls.startswith("tensor_"):
        return cls.upper()
    base = quantities.SPARSE_OF.get(cls, cls)
    words = quantities.MMA_OF.get(base, base).removeprefix("tensor_").split("_")
    label = "Tensor " + words[0].upper() + (" (FP32 acc.)" if words[1:] == ["acc32"] else "")
    label += " mma.sync" if base in quantities.MMA_OF else ""
    return label + (" 2:4 sparse" if cls in quantities.SPARSE_OF else "")


CLASS_LABEL = {c: _class_label(c) for c in COMPUTE_CLASSES}
_SHAPES = ["square", "circle", "triangle-up", "diamond", "cross", "triangle-down", "triangle-right",
           "triangle-left", "wedge"]
CLASS_SHAPE = {c: _SHAPES[i % len(_SHAPES)] for i, c in enumerate(COMPUTE_CLASSES)}


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
    """(kind, name) -> (value, source) of the selected ceilings of ``device``: the device's one
    ceilings table, which classify judged every kernel against.

    Raises
    ------
    ValueError
        If two different values are selected for one ceiling: the chart would not draw the roof
        the verdicts used.
    """
    rows = ceilings[(ceilings["device"] == device) & ceilings["selected"] & (ceilings["value"] > 0)]
    rows = rows.drop_duplicates(["kind", "name", "value", "source"])
    out = {}
    for (kind, name), group in rows.groupby(["kind", "name"]):
        if len(group) > 1:
            raise ValueError(f"{device}: {len(group)} selected {name} ceilings; build one ceilings table per device")
        out[(kind, name)] = (float(group["value"].iat[0]), str(group["source"].iat[0]))
    return out


def roof_clock_text(ceilings: pd.DataFrame, device: str) -> str:
    """The clock ``device``'s compute roofs are held at, as a chart's subtitle says it (e.g.
    "compute roofs at 765 MHz SM clock, ..."); empty where it has no compute roof."""
    from roofline.ceilings.select import AT_SOURCE_CLOCK, NOT_HELD

    rows = ceilings[(ceilings["device"] == device) & ceilings["selected"] & (ceilings["kind"] == "compute")
                    & (ceilings["value"] > 0)]
    if rows.empty:
        return ""
    if (rows["source"] == "what-if").all():
        return "roofs as the what-if machine defines them, at no clock"
    if rows["citation"].str.contains(AT_SOURCE_CLOCK, regex=False).any():
        return "compute roofs at the clocks their sources assume (what-if kernels ran at no measured clock)"
    if rows["citation"].str.contains(NOT_HELD, regex=False).any():
        return (f"some compute roofs {NOT_HELD} (no SM clock reading): they stay at their sources' clocks "
                "(see the diagnostics)")
    clocks = sorted({round(c / 1e6) for c in rows["clock_hz"] if np.isfinite(c)})
    held = " and ".join(f"{c} MHz" for c in clocks)
    return (f"compute roofs at {held} SM clock, the clock measured while profiling (the base clock under "
            "ncu's default --clock-control base); datasheet roofs brought there per clock; memory roofs at "
            "their own clocks")


def roofed_levels(ceilings: pd.DataFrame, device: str) -> list[str]:
    """The memory levels of ``device`` with a selected roof, in level order: only these are drawn
    (a point at a level without its roof would read as a verdict nobody gave)."""
    roofs = _selected(ceilings, device)
    return [lv for lv in MEMORY_LEVELS if ("memory", lv) in roofs]


def used_classes(kernels: pd.DataFrame) -> list[str]:
    """The classes a kernel was judged on: its compute class, or any with a time bound (FP16 work
    taken for HFMA2.MMA register moves has none and draws no roof)."""
    used = set(kernels["compute_class"].unique()) & set(COMPUTE_CLASSES)
    used |= {c for c in COMPUTE_CLASSES if (pd.to_numeric(kernels.get(f"time_bound_{c}"), errors="coerce") > 0).any()}
    return [c for c in COMPUTE_CLASSES if c in used]


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


def axis_values(lo: float, hi: float) -> list[float]:
    return [10.0**e for e in range(math.ceil(math.log10(lo) - 1e-9), math.floor(math.log10(hi) + 1e-9) + 1)]


class RoofBase(NamedTuple):
    """A device's roofs, ready for layers on top: those layers must position with ``xy``."""

    layers: list[alt.Chart]  # roof segments, their labels, ridge points
    xy: Callable[[str, str], dict]  # the shared log-log x and y channels of two fields
    sources: list[str]  # the ceiling sources of the roofs drawn
    frame: _Frame  # data <-> pixels, for marks placed in pixels (arrowheads)


def roof_base(points: pd.DataFrame, ceilings: pd.DataFrame, device: str, classes: list[str],
              avoid: pd.DataFrame | None = None) -> RoofBase:
    """The roof layers of ``device`` (segments, labels, ridge points) framed to hold ``points``
    (columns ``ai_<level>`` and ``y``), with the position channels every layer on top must use.

    ``classes`` are the compute classes whose flat roofs are drawn; labels avoid the points of
    ``avoid`` (default: ``points``), the ones visible at first.
    """
    roofs = _selected(ceilings, device)
    frame = _domain(points, roofs, classes)
    shown = points if avoid is None else avoid
    ai = shown[[f"ai_{lv}" for lv in MEMORY_LEVELS]].to_numpy(dtype=float)
    at = np.isfinite(ai) & (ai > 0)
    points_px = np.array([frame.px(a, y) for a, y in zip(ai[at], np.repeat(shown["y"].to_numpy(), at.sum(axis=1)))])
    segments, labels, ridges = _roof_layers(roofs, classes, frame, points_px)

    def xy(x: str, y: str) -> dict:
        """The shared log-log position channels (identical on every layer, so the axes merge)."""
        # Decade ticks; below 1 FLOP/B "0.01" reads better than SI's "10m".
        x_axis = alt.Axis(format="~s", values=axis_values(*frame.x), grid=True,
                          labelExpr="datum.value < 1 ? format(datum.value, '~g') : format(datum.value, '~s')")
        return {
            "x": alt.X(f"{x}:Q", scale=alt.Scale(type="log", domain=list(frame.x), nice=False),
                       axis=x_axis, title="Arithmetic intensity [FLOP/B]"),
            "y": alt.Y(f"{y}:Q", scale=alt.Scale(type="log", domain=list(frame.y), nice=False),
                       axis=alt.Axis(format="~s", values=axis_values(*frame.y)), title="Performance [FLOP/s]"),
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
    drawn = {("memory", lv) for lv in MEMORY_LEVELS} | {("compute", c) for c in classes}
    sources = sorted({s for key, (_, s) in roofs.items() if key in drawn})
    return RoofBase(layers, xy, sources, frame)
