"""The trajectory layer: each kernel's path across the steps of a series on its device's
hierarchical roofline (the roofs of :mod:`roofline.charts.roofs`, as every roofline chart draws them).

A step's point sits at the kernel's intensity at the memory level its verdict used and its measured
performance, so a point at 100 % of its roof lies on the drawn roof of its class and level. The
points of one kernel are joined in step order, with an arrowhead half-way along each segment
pointing to the later step, and numbered by step.
"""

from __future__ import annotations

import math

import altair as alt
import pandas as pd

from roofline.charts.roofs import FONT, LEVEL_LABEL, PALETTE, layered, roof_base, roof_clock_text, used_classes
from roofline.metrics.quantities import MEMORY_LEVELS
from roofline.metrics.units import si

TRAJECTORY_KERNELS = 12  # kernels drawn per chart (longest first); the table lists them all
STEP_DATA = "steps"


def drawable(points: pd.DataFrame, device: str) -> pd.DataFrame:
    """The step points of ``device`` that have a place on the roofline (an intensity and a
    performance), the :data:`TRAJECTORY_KERNELS` longest-running kernels, with a ``path`` id per kernel."""
    p = points[(points["device"] == device) & points["ai"].notna() & points["performance"].notna()].copy()
    p["path"] = p["match"] + p["config"].map(lambda c: f" {c}" if c else "")
    longest = p.groupby("path", sort=False)["duration_s"].max().sort_values(ascending=False, kind="stable")
    return p[p["path"].isin(longest.index[:TRAJECTORY_KERNELS])].reset_index(drop=True)


def paths_text(points: pd.DataFrame, device: str, drawn: int, n_steps: int) -> str:
    """What the chart's paths are: how many kernels were matched across the steps (and drawn), or,
    when none was, that each point is a kernel of one step only, and why that happens."""
    mine = points[points["device"] == device]
    steps = mine.groupby(["match", "config"])["step"].nunique()
    matched, total = int((steps > 1).sum()), len(steps)
    if not matched:
        return (f"no kernel matched across the {n_steps} steps: each of the {total} kernel"
                f"{'s' if total != 1 else ''} is in one step only (kernels match by function name; one the "
                "optimisation renamed needs --rename PATTERN=NAME, or the series' rename:)")
    more = f" (the {drawn} longest drawn)" if total > drawn else ""
    return f"{matched} of {total} kernel{'s' if total != 1 else ''} matched across {n_steps} steps{more}"


def _arrowheads(p: pd.DataFrame, frame) -> pd.DataFrame:
    """One arrowhead per segment of a path: at the segment's middle on screen, turned towards the later step."""
    rows = []
    for path, group in p.sort_values("step").groupby("path", sort=False):
        g = group.to_dict("records")
        for a, b in zip(g, g[1:]):
            (x0, y0), (x1, y1) = frame.px(a["ai"], a["performance"]), frame.px(b["ai"], b["performance"])
            if math.hypot(x1 - x0, y1 - y0) < 14:  # too short to carry a head: the step numbers tell the order
                continue
            mx, my = frame.data((x0 + x1) / 2, (y0 + y1) / 2)
            # Vega's triangle-up points up the screen; angle turns it clockwise (pixel y grows down)
            angle = math.degrees(math.atan2(x1 - x0, -(y1 - y0))) % 360
            rows.append({"path": path, "label": a["label"], "x": mx, "y": my, "angle": angle,
                         "move": f"step {a['step']} → {b['step']}"})
    return pd.DataFrame(rows, columns=["path", "label", "x", "y", "angle", "move"])


def trajectory_chart(points: pd.DataFrame, kernels: pd.DataFrame, ceilings: pd.DataFrame, device: str,
                     n_steps: int) -> alt.LayerChart:
    """Each kernel's path across the ``n_steps`` steps on ``device``'s roofline.

    ``points`` are :func:`roofline.compare.step_points`; ``kernels`` the steps' kernels table
    (the compute classes whose roofs are drawn: those the verdicts used).
    """
    p = drawable(points, device)
    short = p.groupby("path", sort=False)["kernel_short"].agg(lambda s: " → ".join(dict.fromkeys(s)))
    p["label"] = p["path"].map(short) + p["config"].map(lambda c: f" {c}" if c else "")
    on_device = kernels[kernels["device"] == device]
    frame_points = pd.DataFrame({f"ai_{lv}": p["ai"].where(p["level"] == lv) for lv in MEMORY_LEVELS})
    frame_points["y"] = p["performance"]
    layers, xy, sources, frame = roof_base(frame_points, ceilings, device, used_classes(on_device))
    rows = pd.DataFrame({
        "path": p["path"], "label": p["label"], "kernel": p["kernel"], "step": p["step"], "app": p["app"],
        "ai": p["ai"], "performance": p["performance"], "level": p["level"].map(LEVEL_LABEL),
        "bound": p["bound"], "roof_pct": p["roof_pct"], "time": [si(t, "s") for t in p["duration_s"]],
    })
    labels = list(dict.fromkeys(rows.sort_values("step")["label"]))
    colour = alt.Color("label:N", title="kernel", scale=alt.Scale(domain=labels, range=PALETTE),
                       legend=alt.Legend(labelLimit=360, orient="bottom", columns=1))
    base = alt.Chart(alt.Data(name=STEP_DATA))
    tooltip = [alt.Tooltip("label:N", title="kernel"), alt.Tooltip("kernel:N", title="full name"),
               alt.Tooltip("step:Q"), alt.Tooltip("app:N", title="report (app)"),
               alt.Tooltip("level:N", title="memory level of the verdict"),
               alt.Tooltip("ai:Q", format=".3~g", title="intensity [FLOP/B]"),
               alt.Tooltip("performance:Q", format=".3~s", title="performance [FLOP/s]"), alt.Tooltip("bound:N"),
               alt.Tooltip("roof_pct:Q", format=".1f", title="% of roof"), alt.Tooltip("time:N", title="GPU time")]
    layers.append(base.mark_line(strokeWidth=2, clip=True).encode(
        **xy("ai", "performance"), color=colour, detail="path:N", order="step:Q"))
    heads = _arrowheads(p, frame)
    if len(heads):
        layers.append(alt.Chart(heads).mark_point(shape="triangle-up", filled=True, size=90, opacity=1,
                                                  clip=True).encode(
            **xy("x", "y"), color=colour, angle=alt.Angle("angle:Q", scale=None),
            tooltip=[alt.Tooltip("label:N", title="kernel"), alt.Tooltip("move:N", title="arrow")]))
    layers.append(base.mark_point(filled=True, size=70, opacity=1, stroke="white", strokeWidth=1, clip=True).encode(
        **xy("ai", "performance"), color=colour, tooltip=tooltip))
    layers.append(base.mark_text(dx=8, dy=-8, fontSize=FONT + 2, fontWeight="bold", clip=True).encode(
        **xy("ai", "performance"), text="step:Q", color=colour))
    chart = layered(layers, alt.Title(device, subtitle=[
        f"{paths_text(points, device, p['path'].nunique(), n_steps)}; ceilings: {', '.join(sources) or 'none'}",
        "each point: a step (numbered), at the intensity of the memory level its verdict used; arrows point to "
        "the later step",
        *([clock] if (clock := roof_clock_text(ceilings, device)) else []),
    ]))
    chart.datasets = {STEP_DATA: rows.astype(object).where(rows.notna(), None).to_dict("records")}
    return chart

