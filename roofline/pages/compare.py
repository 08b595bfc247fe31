"""The compare page: the steps of one series (before/after, v1..v8, a size sweep), each kernel's
path across them on its device's roofline (:mod:`roofline.charts.trajectory`) and the table of what
moved (:mod:`roofline.compare`), built by the one page builder (:mod:`roofline.pages.page`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import altair as alt
import pandas as pd

from roofline.charts.trajectory import trajectory_chart
from roofline.compare import MOVE_HEADERS, moves, step_points
from roofline.files.atomic import write_text_atomic
from roofline.metrics.units import si
from roofline.pages.markup import esc, script_json
from roofline.pages.page import asset_src, page_html, write_vega_asset
from roofline.pages.sections import ceilings_html
from roofline.tables.schemas import conform

HELP = {
    "steps": "the steps compared: before → after (consecutive steps the kernel is in)",
    "in": "the steps the kernel is in; one missing from a step was renamed, removed or added there",
    "% of roof": "achieved / attainable at the binding roof; ×: after / before",
    "AI [FLOP/B]": "arithmetic intensity at the memory level the verdict used (in brackets); ×: after / before",
    "performance": "work of the dominant compute class / duration; ×: after / before",
    "GPU time": "total over the kernel's launches; ×: after / before (below 1: faster)",
}


def moved_html(frame: pd.DataFrame) -> str:
    """The table of what moved (:func:`roofline.compare.move_cells`), numbers right-aligned."""
    from roofline.compare import MOVE_TEXT, move_cells

    head = "".join(f'<th title="{esc(HELP.get(h, ""))}">{esc(h)}</th>' for h in MOVE_HEADERS)
    rows = []
    for cells, partial in zip(move_cells(frame), frame["presence"] != "every step"):
        tds = "".join(f'<td{"" if i in MOVE_TEXT else " class=n"}>{esc(c)}</td>' for i, c in enumerate(cells))
        rows.append(f'<tr{" class=partial" if partial else ""}>{tds}</tr>')
    return (f'<div class="scroll"><table class="moved"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}'
            "</tbody></table></div>")


def compare_html(kernels: pd.DataFrame, ceilings: pd.DataFrame, steps: Sequence[str], title: str = "Trajectories",
                 rename: Mapping[str, str] | None = None, sources: Mapping[str, str] | None = None,
                 vega: str | None = None) -> str:
    """The whole compare page of ``steps`` (app names, in order; see :func:`roofline.compare.step_points`
    for how kernels are matched and ``rename``). ``sources`` names each step's input file; ``vega`` as
    for :func:`roofline.pages.report.summary_html`.

    Raises
    ------
    roofline.compare.SeriesError
        For a step without kernels, a step given twice or a bad rename pattern.
    """
    kernels, ceilings = conform(kernels, "kernels"), conform(ceilings, "ceilings")
    points = step_points(kernels, steps, rename)
    moved = moves(points)
    mine = kernels[kernels["app"].isin(steps)]
    devices = sorted(d for d in mine["device"].unique() if d)
    specs, charts, blocks = [], [], []
    with alt.data_transformers.disable_max_rows():
        for device in devices:
            roofed = ((ceilings["device"] == device) & ceilings["selected"]).any()
            placed = points[(points["device"] == device) & points["ai"].notna() & points["performance"].notna()]
            if not roofed or placed.empty:
                why = "no selected ceiling" if not roofed else "no kernel with an intensity and a performance"
                blocks.append(f"<p>No chart for {esc(device)}: {why}; its kernels are in the table below.</p>")
                continue
            specs.append(trajectory_chart(points, kernels, ceilings, device, len(steps)).to_dict(validate=False))
            charts.append({"device": device, "canvas": False, "inline": True})
            blocks.append(f'<div class="chart" id="chart{len(specs) - 1}"></div>')
    sources = sources or {}
    items = "".join(
        f"<li><strong>step {i}</strong>: {esc(app)}"
        + (f' <span class="meta">({esc(Path(sources[app]).name)})</span>' if sources.get(app) else "")
        + f' <span class="meta">on {esc(", ".join(sorted(set(mine.loc[mine["app"] == app, "device"]))))}</span></li>'
        for i, app in enumerate(steps, 1)
    )
    totals = [float(mine.loc[mine["app"] == app, "duration_s"].sum()) for app in steps]
    ratio = totals[-1] / totals[0] if totals[0] > 0 else float("nan")
    total = ("<p><strong>GPU time of each step</strong> (every profiled kernel): "
             + " → ".join(f"{si(t, 's')}" for t in totals)
             + (f" (×{ratio:.3g} from step 1 to step {len(steps)})" if ratio == ratio else "") + ".</p>")
    partial = moved.drop_duplicates(["match", "config"])
    partial = partial[partial["presence"] != "every step"]
    renamed = "".join(f"<li><code>{esc(p)}</code> → <code>{esc(r)}</code></li>" for p, r in (rename or {}).items())
    body = (
        f"<h1>{esc(title)}</h1>\n"
        f'<p class="meta">{len(steps)} steps of the same code, judged together: one ceilings table per device, so a '
        "kernel that moved did so against the same roofs. Kernels are matched across steps by function name (by full "
        "name where a function repeats in a step, and by launch configuration where that repeats too).</p>"
        f'<ol class="steps">{items}</ol>{total}'
        + (f'<p class="meta">Names rewritten before matching (pattern → replacement):</p><ul>{renamed}</ul>'
           if renamed else "")
        + '<section id="charts"><h2>Trajectories</h2><p class="meta">One line per kernel, one point per step '
        "(numbered), at the intensity of the memory level its verdict used and its measured performance; the "
        "arrows point to the later step. Hover a point for its numbers; the ⋯ menu saves a chart as SVG or PNG."
        "</p>" + "\n".join(blocks) + "</section>\n"
        '<section id="moved"><h2>What moved</h2><p class="meta">Per kernel and pair of consecutive steps it is in: '
        "before → after and the ratio ×(after / before).</p>"
        + (f"<p><strong>{len(partial)} kernel(s) are in only some steps</strong> (rows shaded; column <em>in</em>): "
           "they cannot be followed across every step; a kernel renamed by the optimisation can be matched with "
           "a rename (<code>--rename PATTERN=NAME</code>, or <code>rename:</code> of the series in the config).</p>"
           if len(partial) else "")
        + moved_html(moved) + "</section>\n"
        f'<section id="ceilings"><h2>Ceilings</h2>{ceilings_html(ceilings, devices)}</section>'
    )
    data = f'{{"n":0,"cols":{{}},"charts":{script_json(charts)}}}'
    return page_html(title, body, specs, data, vega=vega)


def write_compare(path: str | os.PathLike, kernels: pd.DataFrame, ceilings: pd.DataFrame, steps: Sequence[str],
                  title: str = "Trajectories", rename: Mapping[str, str] | None = None,
                  sources: Mapping[str, str] | None = None, assets: str | os.PathLike | None = None) -> Path:
    """Write the compare page to ``path`` (atomically), loading the Vega bundle from ``assets``'s
    ``assets/vega-bundle.js`` (default: the page's folder; the report stage passes the summary's
    folder, so that every page shares one bundle)."""
    path = Path(path)
    bundle = write_vega_asset(path.parent if assets is None else assets)
    page = compare_html(kernels, ceilings, steps, title, rename, sources, vega=asset_src(path, bundle))
    write_text_atomic(path, page)
    return path


def write_series(series: Mapping[str, Mapping], kernels: pd.DataFrame, ceilings: pd.DataFrame,
                 folder: str | os.PathLike, assets: str | os.PathLike, title: str = "",
                 sources: Mapping[str, str] | None = None) -> list[Path]:
    """One compare page per series (``{name: {"steps": [...], "rename": {...}}}``, the config's
    ``series:``), ``folder/{name}.html``. A step without kernels (its input failed: the summary's
    diagnostics say why) is left out and named on the page; with fewer than two steps left the
    page says so instead of a chart. Returns the pages written."""
    written = []
    present = set(kernels["app"])
    for name, spec in series.items():
        steps, rename = list(spec.get("steps", [])), dict(spec.get("rename", {}))
        kept = [s for s in steps if s in present]
        heading = f"{title}: {name}" if title else name
        path = Path(folder) / f"{name}.html"
        if len(kept) < 2:
            bundle = write_vega_asset(assets)
            body = (f"<h1>{esc(heading)}</h1><p>Nothing to compare: of the steps {esc(', '.join(steps))}, "
                    f"{len(kept)} gave kernels. The summary's diagnostics say why the others did not.</p>")
            write_text_atomic(path, page_html(heading, body, [], '{"n":0,"cols":{},"charts":[]}',
                                              vega=asset_src(path, bundle)))
        else:
            write_compare(path, kernels, ceilings, kept, heading, rename, sources, assets)
            if len(kept) < len(steps):
                text = path.read_text(encoding="utf-8")
                gone = ", ".join(s for s in steps if s not in present)
                note = (f'<p class="warning">Left out: {esc(gone)} (no kernels; see the summary\'s diagnostics). '
                        "Step numbers count the steps drawn.</p>")
                write_text_atomic(path, text.replace("</h1>\n", "</h1>\n" + note, 1))
        written.append(path)
    return written
