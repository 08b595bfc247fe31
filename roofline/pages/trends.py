"""The trends page (``reports/trends.html``): tonight's findings against each series' baseline, their
trends over the last nights, and the rooflines, built by the one page builder
(:mod:`roofline.pages.page`: the summary's style sheet, Vega bundle and chart script).

The rooflines (tonight's kernels on the summary's chart, the moved kernels from their baseline to
tonight, on the roofs the verdicts used) are :mod:`roofline.pages.trend_roofs`; a series' name on
the page is :func:`roofline.pages.trend_roofs.series_names`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd

from roofline.charts.roofline_chart import CHART_FIELDS, KERNEL_DATA
from roofline.files.atomic import write_text_atomic
from roofline.metrics.units import si
from roofline.nightly.detection_figures import figures_html, read_figures
from roofline.nightly.series_rule import DECISION_COLUMNS
from roofline.pages.markup import esc, script_json
from roofline.pages.page import asset_src, page_html, write_vega_asset
from roofline.pages.table import columns_json
from roofline.pages.tonight import series_anchor, started_totals
from roofline.pages.trend_roofs import (  # noqa: F401 - tests read MOVED and the rooflines' functions here
    MOVED,
    applied_ceilings,
    launch_shape,
    moved_points,
    roofline_specs,
    series_names,
)
from roofline.tables.schemas import KERNEL_KEY

MAX_TREND_CHARTS = 12
MAX_SELECTOR_SERIES = 150  # the selector chart carries every night of this many series
# findings listed on the page, by impact (a night when many kernels moved has thousands);
# regressions.json has them all
MAX_FINDING_ROWS = 500
MAX_STARTED_ROWS = 50  # apps whose history starts tonight, listed on the page (a first night: all of them)
SI_FORMAT = ".3~s"  # d3's SI prefixes, 3 significant digits: 0.015 -> "15m" (the axis adds the unit)
COLORS = {
    "regression": "#d62728", "improvement": "#2ca02c", "suspicious": "#ff7f0e",
    "outlier": "#9467bd", "workload_changed": "#8c564b", "moved": "#e7ba52", "environment_change": "#7f7f7f",
    "unstable_env": "#bcbd22", "missing": "#000000", "error": "#e377c2", "new": "#17becf",
    "insufficient_data": "#c7c7c7", "unchanged": "#4c78a8",
}


# ------------------------------------------------------------------------------------- the trends
def seconds_expr(value: str) -> str:
    """A Vega expression writing the seconds ``value`` as the pages' :func:`roofline.metrics.units.si` does:
    "15 ms", "250 µs", "1.2 s" (d3's SI prefix, then a space before it)."""
    return f"replace(format({value}, '{SI_FORMAT}'), /([yzafpnµmkMGTPEZY]?)$/, ' $1') + 's'"


def _trend_layers(color_domain: list[str]) -> list[alt.Chart]:
    x = alt.X("run_date:T", title="night")
    # seconds with an SI prefix ("15 ms", "250 µs"), as the pages write times: a fixed µs axis read
    # "15,000 µs" for a 15 ms kernel
    axis = alt.Axis(labelExpr=seconds_expr("datum.value"))
    y = alt.Y("value_s:Q", title="time per launch", axis=axis, scale=alt.Scale(zero=False))
    color = alt.Color("label:N", scale=alt.Scale(domain=color_domain,
                                                 range=[COLORS[c] for c in color_domain]))
    tip = [alt.Tooltip("run_id:N", title="run"), alt.Tooltip("label:N"), alt.Tooltip("time:N"),
           alt.Tooltip("baseline:N"), alt.Tooltip("change_pct:Q", format="+.1f", title="change [%]"),
           alt.Tooltip("z:Q", format=".1f"), alt.Tooltip("note:N")]
    return [
        alt.Chart().mark_area(opacity=0.18, color="#4c78a8").encode(x, y="lower_s:Q", y2="upper_s:Q"),
        alt.Chart().mark_line(strokeDash=[4, 3], color="#4c78a8").encode(x, y="baseline_s:Q"),
        alt.Chart().mark_line(color="#333333").encode(x, y),
        alt.Chart().transform_filter("datum.marker").transform_calculate(
            time=seconds_expr("datum.value_s"),
            baseline=f"isValid(datum.baseline_s) ? {seconds_expr('datum.baseline_s')} : ''",
        ).mark_point(filled=True, size=70).encode(x, y, color=color, tooltip=tip),
        # segment starts: a new environment, or the kernel followed through a change of its key
        alt.Chart().transform_filter("datum.label == 'environment_change' || datum.followed").mark_rule(
            strokeDash=[2, 2], color="#7f7f7f").encode(x),
    ]


def trend_data(decisions: pd.DataFrame, names: pd.Series | None = None) -> pd.DataFrame:
    """Per series per night: time, baseline and limit band [s], label, violation marker;
    ``names``: the rows' :func:`series_names`, when already known."""
    d = decisions.copy()
    d["series"] = series_names(d) if names is None else names.to_numpy()
    d["change_pct"] = (d["ratio"] - 1) * 100
    d["marker"] = ~d["label"].isin(["unchanged", "insufficient_data", "new"])
    d["followed"] = _followed_tonight(d)
    keep = ["series", "run_id", "run_date", "label", "value_s", "baseline_s", "lower_s",
            "upper_s", "change_pct", "z", "marker", "note", "followed"]
    out = d[keep].copy()
    numbers = ["value_s", "baseline_s", "lower_s", "upper_s", "change_pct", "z"]
    out[numbers] = out[numbers].apply(lambda c: c.map(_round))
    return out


def _followed_tonight(decisions: pd.DataFrame) -> np.ndarray:
    """The records of a night on which their kernel was followed through a change of its key."""
    if "previous_kernel" not in decisions:
        return np.zeros(len(decisions), dtype=bool)
    return (decisions["previous_kernel"].fillna("").astype(str) != "").to_numpy()


def followed_as_one(decisions: pd.DataFrame) -> pd.DataFrame:
    """``decisions`` with the nights of each kernel before it was followed through a change of its
    name or launch configuration (:mod:`roofline.nightly.kernel_match`; the night of the change
    names its key before: ``previous_kernel``, ``previous_grid``, ``previous_block``) under its key
    and short name since, so that a trend draws one series across the change (its night marked by
    :func:`trend_data`'s ``followed``). A kernel followed twice is drawn under its last key."""
    changed = _followed_tonight(decisions)
    if not changed.any():
        return decisions
    renames: dict[tuple, tuple[tuple, str, str]] = {}  # key before -> (key since, night of the change, short)
    rows = decisions[changed].sort_values("run_date", kind="stable")
    for r in rows[[*KERNEL_KEY, "kernel_short", "run_date", "previous_kernel", "previous_grid",
                   "previous_block"]].astype(str).itertuples(index=False):
        old = (r.app, r.device, r.previous_kernel, r.previous_grid, r.previous_block)
        renames[old] = ((r.app, r.device, r.kernel, r.grid, r.block), r.run_date, r.kernel_short)
    out = decisions.copy()
    maybe = out["kernel"].astype(str).isin({old[2] for old in renames}).to_numpy()
    for j in np.flatnonzero(maybe):
        key, date = tuple(str(out[c].iat[j]) for c in KERNEL_KEY), str(out["run_date"].iat[j])
        short, seen = None, set()
        while key in renames and key not in seen and date < renames[key][1]:  # a chain: its last key
            seen.add(key)
            key, _, short = renames[key]
        if short is not None:
            for c, value in zip(KERNEL_KEY, key, strict=True):
                out.iat[j, out.columns.get_loc(c)] = value
            out.iat[j, out.columns.get_loc("kernel_short")] = short
    return out


def _round(value: float, digits: int = 5) -> float:
    """``value`` to ``digits`` significant digits (smaller embedded JSON)."""
    if not math.isfinite(value) or value == 0:
        return value
    return round(value, digits - 1 - int(math.floor(math.log10(abs(value)))))


def trend_charts(decisions: pd.DataFrame, tonight_series: list[str],
                 names: pd.Series | None = None) -> tuple[dict | None, dict]:
    """Small multiples of the findings' series (None without any), and one chart with a kernel selector;
    ``names``: the decisions' :func:`series_names`, when already known."""
    names = series_names(decisions) if names is None else names
    labels = set(decisions["label"].unique())
    domain = [c for c in COLORS if c in labels] or ["unchanged"]
    known = set(names)  # once: building it per series made this quadratic
    top = [s for s in tonight_series if s in known][:MAX_TREND_CHARTS]
    share = decisions["time_share"].groupby(names.to_numpy()).max()
    busiest = share.sort_values(ascending=False).index[:MAX_SELECTOR_SERIES]
    drawn = sorted(set(busiest) | set(top))
    rows = names.isin(drawn).to_numpy()  # the rows of the series the charts draw, not of every series
    data = trend_data(decisions[rows], names[rows])
    facet = None
    with alt.data_transformers.disable_max_rows():  # thousands of kernels x nights is expected
        if top:
            shown = data[data["series"].isin(top)]
            chart = alt.layer(*_trend_layers(domain), data=shown).properties(width=360, height=170)
            facet = chart.facet(facet=alt.Facet("series:N", title=None, sort=top,
                                                header=alt.Header(labelLimit=420, labelFontSize=11)),
                                columns=2).resolve_scale(y="independent").to_dict(validate=False)
        pick = alt.param(name="kernel", value=(top or drawn or [""])[0],
                         bind=alt.binding_select(options=drawn, name="kernel "))
        layers = [layer.transform_filter(alt.datum.series == pick) for layer in _trend_layers(domain)]
        selector = alt.layer(*layers, data=data).add_params(pick).properties(width=760, height=260)
        return facet, selector.to_dict(validate=False)


# ---------------------------------------------------------------------------------------- the page
def _us(value: object) -> str:
    return si(value, "s") if isinstance(value, int | float) else ""


def _num(value: object, form: str) -> str:
    return format(value, form) if isinstance(value, int | float) and math.isfinite(value) else ""


def findings_table(found: Sequence[Mapping]) -> str:
    """Tonight's findings by impact, one row per series (its id: :func:`roofline.pages.tonight.series_anchor`),
    the first :data:`MAX_FINDING_ROWS` of them."""
    head = ["kernel", "label", "time / launch: baseline → tonight", "change", "z", "nights", "share",
            "impact", "bound", "% of roof", "AI (DRAM) [FLOP/B]", "note"]
    rows = []
    for f in found[:MAX_FINDING_ROWS]:
        name = f"{f['app']} | {f['kernel_short'] or f['kernel']}{launch_shape(f['grid'], f['block'])}"
        cells = [f'<span class="kname" title="{esc(f["kernel"])}">{esc(name)}</span>',
                 f'<b style="color:{COLORS.get(f["label"], "#000")}">{esc(f["label"])}</b>',
                 f"{_us(f['baseline_s'])} → {_us(f['value_s'])}",
                 f"{change} %" if (change := _num(f["change_pct"], "+.1f")) else "",
                 _num(f["z"], ".3g"), esc(f["nights_in_violation"]), _num(f["time_share"], ".3g"),
                 _num(f["impact"], ".3g"), esc(f"{f['bound']} {f.get('bound_flip') or ''}".strip()),
                 f"{_num(f['roof_pct_baseline'], '.3g')} → {_num(f['roof_pct'], '.3g')}",
                 f"{_num(f['ai_dram_baseline'], '.3g')} → {_num(f['ai_dram'], '.3g')}",
                 f'<span class="note">{esc(f["note"])}</span>']
        tds = "".join(f"<td>{c}</td>" for c in cells)
        rows.append(f'<tr id="{series_anchor(f)}">{tds}</tr>')
    body = "\n".join(rows) or f"<tr><td colspan={len(head)}>no findings tonight</td></tr>"
    header = "".join(f"<th>{esc(h)}</th>" for h in head)
    more = (f'<p class="meta">The {MAX_FINDING_ROWS:,} largest of {len(found):,} findings; every one is in the '
            "run's <code>regressions.json</code>.</p>" if len(found) > MAX_FINDING_ROWS else "")
    return more + f'<div class="scroll"><table><thead><tr>{header}</tr></thead><tbody>\n{body}\n</tbody></table></div>'


def started_html(started: Sequence[Mapping]) -> str:
    """The apps whose history starts tonight on a device, each with its number of series (nothing
    to compare with yet, so none of their series is a finding), the first :data:`MAX_STARTED_ROWS`."""
    if not started:
        return ""
    series, apps = started_totals(started)
    items = "".join(f"<li>{esc(s['app'])} on {esc(s['device'])}: {s['series']:,} series</li>"
                    for s in started[:MAX_STARTED_ROWS])
    more = (f"<li>… and {len(started) - MAX_STARTED_ROWS:,} more in the run's <code>regressions.json</code> "
            "(<code>started</code>)</li>" if len(started) > MAX_STARTED_ROWS else "")
    return (f"<p>History starts tonight for {series:,} series of {apps:,} app{'s' if apps != 1 else ''} "
            "(a first night, a new app, or an app on a new GPU): labelled <code>new</code>, with no earlier "
            "night to compare with, so none of them is a finding.</p>"
            f"<details><summary>Apps and devices</summary><ul>{items}{more}</ul></details>")


def _health(decisions: pd.DataFrame, tonight: pd.DataFrame) -> str:
    if tonight.empty:  # a night without any kernel: the page shows the nights before it, read without noise
        tonight = pd.DataFrame(columns=DECISION_COLUMNS)
    rel = (tonight["noise_s"] / tonight["baseline_s"]).astype(float).replace([np.inf, -np.inf], np.nan)
    noisy = tonight.assign(rel=rel).dropna(subset=["rel"]).nlargest(5, "rel")
    items = [f"<li>{esc(r.kernel_short or r.kernel)} ({esc(r.app)}): noise {r.rel:.2%} of its baseline</li>"
             for r in noisy.itertuples()]
    missing, new = (int((tonight["label"] == label).sum()) for label in ("missing", "new"))
    return (f"<p>{decisions['run_id'].nunique()} nights shown; {len(tonight)} series tonight, {new} new, "
            f"{missing} missing.</p><p>Noisiest series:</p><ul>{''.join(items)}</ul>")


def _finding_names(found: Sequence[Mapping], decisions: pd.DataFrame, names: pd.Series, run_id: str) -> list[str]:
    """The findings' series, in order, by the names the trend charts give them (``names``: the
    decisions' :func:`series_names`): named apart, a finding would lack the device that other series
    of the night add to every name, or another series' "#2"."""
    apps = {str(f["app"]) for f in found}  # only their apps' rows tonight, not every series' (thousands)
    mine = ((decisions["run_id"] == run_id) & decisions["app"].isin(apps)).to_numpy()
    keys = zip(*(decisions.loc[mine, column].astype(str) for column in KERNEL_KEY), strict=True)
    by_key = dict(zip(keys, names.to_numpy()[mine], strict=True))
    wanted = (tuple(str(f[column]) for column in KERNEL_KEY) for f in found)
    return list(dict.fromkeys(by_key[key] for key in wanted if key in by_key))


def trends_html(decisions: pd.DataFrame, summary: Mapping, kernels: pd.DataFrame | None = None,
                baseline: pd.DataFrame | None = None, vega: str | None = None, charts: str | None = None) -> str:
    """The whole trends page: context, counts, findings by impact, their trends, any kernel's trend,
    the rooflines (tonight's ``kernels``, the moved ones from their ``baseline`` nights' rows), health
    and method. ``vega`` is the URL of the shared Vega bundle (default: inlined); ``charts`` that of
    the summary's device charts (``assets/charts.js``), which tonight's rooflines then draw (default:
    built here)."""
    run_id = summary["run_id"]
    decisions = followed_as_one(decisions)
    tonight = decisions[decisions["run_id"] == run_id]
    found = summary["findings"]
    names = series_names(decisions)
    facet, selector = trend_charts(decisions, _finding_names(found, decisions, names, run_id), names)
    specs = [selector] if facet is None else [facet, selector]
    roof_specs, roof_entries, roof_blocks, rows = roofline_specs(
        kernels if kernels is not None else pd.DataFrame(), baseline if baseline is not None else pd.DataFrame(),
        found, first=len(specs), shared=charts is not None)
    entries = [{"device": "", "canvas": False, "inline": True} for _ in specs] + roof_entries
    specs += roof_specs
    counts = summary["counts"]
    ctx = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in summary["context"].items())
    notes = "".join(f"<li>{esc(n)}</li>" for n in summary["environment_changes"])
    totals = summary.get("app_total_regressions", 0)
    of_totals = f" ({totals} of them an app's total GPU time)" if totals else ""
    alert = (f'<p class="error"><strong>Regressions tonight: {counts["regression"]}{of_totals}</strong></p>'
             if summary["alert"] else "<p>No regression tonight.</p>")
    shift = ('<p class="warning"><strong>Environment shift</strong>: many kernels moved the same way tonight.</p>'
             if summary["environment_shift"] else "")
    starting = started_totals(summary["started"])[0]
    quiet = ("every series starts its history tonight"
             if starting and starting == summary["kernels"] + summary.get("app_totals", 0)
             else "every series is within its limits")
    trends = ('<p class="meta">Line: time per launch; dashed: baseline; band: limits; dots: labelled nights; dotted '
              'rules: segment starts.</p><div class="chart" id="chart0"></div>' if facet is not None else
              f"<p>No findings tonight: {quiet}, nothing to draw.</p>")
    body = (
        f"<h1>Nightly roofline tracking: run {esc(run_id)}</h1>\n"
        '<nav><a href="summary.html">← summary</a></nav>\n'
        '<nav class="meta">Contents: <a href="#findings">findings</a> · <a href="#trends">trends</a> · '
        '<a href="#any">any kernel</a> · <a href="#rooflines">rooflines</a> · <a href="#health">health</a> · '
        '<a href="#method">method</a></nav>\n'
        f"{alert}{shift}\n<div class=\"scroll\"><table><tr>{''.join(f'<th>{esc(k)}</th>' for k in counts)}</tr>"
        f"<tr>{''.join(f'<td class=n>{v}</td>' for v in counts.values())}</tr></table></div>\n"
        + (f"<h3>New segments tonight (environment or counting conventions changed)</h3><ul>{notes}</ul>"
           if notes else "")
        + f'<section id="findings"><h2>Findings by impact (Δ time × time share)</h2>'
        f'{started_html(summary["started"])}{findings_table(found)}</section>\n'
        f'<section id="trends"><h2>Trends of tonight\'s findings</h2>{trends}</section>\n'
        f'<section id="any"><h2>Any kernel</h2><div class="chart" id="chart{0 if facet is None else 1}"></div>'
        "</section>\n"
        '<section id="rooflines"><h2>Rooflines: baseline → tonight</h2><p class="meta">On the roofs tonight\'s '
        "verdicts used (each compute class and memory level its own); hover a point for its numbers, the ⋯ menu "
        "saves a chart as SVG or PNG.</p>" + "\n".join(roof_blocks) + "</section>\n"
        f'<section id="health"><h2>Health</h2>{_health(decisions, tonight)}</section>\n'
        f'<section id="method"><h2>Method</h2><p>{esc(summary["method"])} Rule version '
        f'{esc(summary["rule_version"])}.</p>{figures_html(read_figures())}'
        f'<h3>Run context</h3><table>{ctx}</table></section>'
    )
    columns = "{}" if rows is None else columns_json(rows)
    data = (f'{{"n":{0 if rows is None else len(rows)},"cols":{columns},"charts":{script_json(entries)},'
            f'"dataset":{script_json(KERNEL_DATA)},"fields":{script_json(CHART_FIELDS)}}}')
    return page_html(f"Nightly roofline tracking: {run_id}", body, specs, data, vega=vega,
                     charts=None if rows is None else charts)


def write_trends(path: str | os.PathLike, decisions: pd.DataFrame, summary: Mapping,
                 kernels: pd.DataFrame | None = None, baseline: pd.DataFrame | None = None,
                 charts: str | os.PathLike | None = None) -> Path:
    """Write the trends page to ``path`` (atomically), loading the Vega bundle from
    ``assets/vega-bundle.js`` beside it: the summary's, when both are in ``reports/``. ``charts``:
    the summary's device charts (``reports/assets/charts.js``, written by the report), which
    tonight's rooflines then draw; without it they are built here."""
    path = Path(path)
    bundle = write_vega_asset(path.parent)
    shared = None if charts is None else asset_src(path, charts)
    write_text_atomic(path, trends_html(decisions, summary, kernels, baseline, vega=asset_src(path, bundle),
                                        charts=shared))
    return path
