"""The trends page (``reports/trends.html``): tonight's findings against each series' baseline, their
trends over the last nights, and the rooflines, built by the one page builder
(:mod:`roofline.pages.page`: the summary's style sheet, Vega bundle and chart script).

The rooflines are the chart module's: tonight's kernels by :func:`roofline.chart.roofline_spec`
(the summary's chart) and the regressed and improved kernels' move from their baseline to tonight by
:func:`roofline.chart_trajectory.trajectory_chart` (the compare page's), both on the roofs the
verdicts used: the ceilings each kernel row was judged with (:func:`applied_ceilings`), never a
median of mixed peaks.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd

from roofline.chart import CHART_FIELDS, KERNEL_DATA, roofline_spec
from roofline.chart_roofs import si
from roofline.chart_trajectory import trajectory_chart
from roofline.history import SERIES_KEY
from roofline.metrics import COMPUTE_CLASSES, MEMORY_LEVELS
from roofline.pages.markup import esc, script_json
from roofline.pages.overview import SUMMARY_KERNELS, summary_rows
from roofline.pages.page import asset_src, page_html, write_vega_asset
from roofline.pages.table import columns_json, page_table
from roofline.pages.tonight import series_anchor
from roofline.schemas import TABLES, conform, write_text_atomic
from roofline.trajectory import STEP_COLUMNS, _level

MAX_TREND_CHARTS = 12
MAX_SELECTOR_SERIES = 150  # the selector chart carries every night of this many series
# findings listed on the page, by impact (a first night has one "new" per series: thousands);
# regressions.json has them all
MAX_FINDING_ROWS = 500
MOVED = ("regression", "improvement")  # the findings drawn from their baseline to tonight
COLORS = {
    "regression": "#d62728", "improvement": "#2ca02c", "suspicious": "#ff7f0e",
    "outlier": "#9467bd", "workload_changed": "#8c564b", "environment_change": "#7f7f7f",
    "unstable_env": "#bcbd22", "missing": "#000000", "error": "#e377c2", "new": "#17becf",
    "insufficient_data": "#c7c7c7", "unchanged": "#4c78a8",
}


# ------------------------------------------------------------------------------------- the trends
def series_names(frame: pd.DataFrame) -> pd.Series:
    """A readable, unique name per series: app | kernel | grid x block (| device)."""
    many = frame["device"].nunique() > 1
    short = frame["kernel_short"].where(frame["kernel_short"] != "", frame["kernel"])
    name = frame["app"] + " | " + short + " | " + frame["grid"] + "×" + frame["block"]
    if many:
        name = name + " | " + frame["device"]
    key = frame[SERIES_KEY[0]].astype(str)
    for column in SERIES_KEY[1:]:  # vectorised "\x1f".join of the key columns
        key = key + "\x1f" + frame[column].astype(str)
    first = pd.DataFrame({"name": name, "key": key}).drop_duplicates("key")
    dup = first.groupby("name").cumcount()
    first["unique"] = first["name"] + np.where(dup > 0, " #" + (dup + 1).astype(str), "")
    return key.map(dict(zip(first["key"], first["unique"], strict=True)))


def _trend_layers(color_domain: list[str]) -> list[alt.Chart]:
    x = alt.X("run_date:T", title="night")
    y = alt.Y("value_us:Q", title="time per launch [µs]", scale=alt.Scale(zero=False))
    color = alt.Color("label:N", scale=alt.Scale(domain=color_domain,
                                                 range=[COLORS[c] for c in color_domain]))
    tip = [alt.Tooltip("run_id:N", title="run"), alt.Tooltip("label:N"),
           alt.Tooltip("value_us:Q", format=".3f"), alt.Tooltip("baseline_us:Q", format=".3f"),
           alt.Tooltip("change_pct:Q", format="+.1f", title="change [%]"),
           alt.Tooltip("z:Q", format=".1f"), alt.Tooltip("note:N")]
    return [
        alt.Chart().mark_area(opacity=0.18, color="#4c78a8").encode(x, y="lower_us:Q", y2="upper_us:Q"),
        alt.Chart().mark_line(strokeDash=[4, 3], color="#4c78a8").encode(x, y="baseline_us:Q"),
        alt.Chart().mark_line(color="#333333").encode(x, y),
        alt.Chart().transform_filter("datum.marker").mark_point(filled=True, size=70).encode(
            x, y, color=color, tooltip=tip),
        alt.Chart().transform_filter("datum.label == 'environment_change'").mark_rule(
            strokeDash=[2, 2], color="#7f7f7f").encode(x),
    ]


def trend_data(decisions: pd.DataFrame, names: pd.Series | None = None) -> pd.DataFrame:
    """Per series per night: time, baseline and limit band [µs], label, violation marker;
    ``names``: the rows' :func:`series_names`, when already known."""
    d = decisions.copy()
    d["series"] = series_names(d) if names is None else names.to_numpy()
    for column in ("value_s", "baseline_s", "lower_s", "upper_s"):
        d[column.replace("_s", "_us")] = d[column] * 1e6
    d["change_pct"] = (d["ratio"] - 1) * 100
    d["marker"] = ~d["label"].isin(["unchanged", "insufficient_data", "new"])
    keep = ["series", "run_id", "run_date", "label", "value_us", "baseline_us", "lower_us",
            "upper_us", "change_pct", "z", "marker", "note"]
    out = d[keep].copy()
    numbers = ["value_us", "baseline_us", "lower_us", "upper_us", "change_pct", "z"]
    out[numbers] = out[numbers].apply(lambda c: c.map(_round))
    return out


def _round(value: float, digits: int = 5) -> float:
    """``value`` to ``digits`` significant digits (smaller embedded JSON)."""
    if not math.isfinite(value) or value == 0:
        return value
    return round(value, digits - 1 - int(math.floor(math.log10(abs(value)))))


def trend_charts(decisions: pd.DataFrame, tonight_series: list[str]) -> tuple[dict | None, dict]:
    """Small multiples of the findings' series (None without any), and one chart with a kernel selector."""
    names = series_names(decisions)
    data = trend_data(decisions, names)
    domain = [c for c in COLORS if c in set(data["label"])] or ["unchanged"]
    known = set(data["series"])  # once: building it per series made this quadratic
    top = [s for s in tonight_series if s in known][:MAX_TREND_CHARTS]
    facet = None
    with alt.data_transformers.disable_max_rows():  # thousands of kernels x nights is expected
        if top:
            shown = data[data["series"].isin(top)]
            chart = alt.layer(*_trend_layers(domain), data=shown).properties(width=360, height=170)
            facet = chart.facet(facet=alt.Facet("series:N", title=None, sort=top,
                                                header=alt.Header(labelLimit=420, labelFontSize=11)),
                                columns=2).resolve_scale(y="independent").to_dict(validate=False)
        share = decisions["time_share"].groupby(names.to_numpy()).max()
        busiest = share.sort_values(ascending=False).index[:MAX_SELECTOR_SERIES]
        names = sorted(set(busiest) | set(top))
        data = data[data["series"].isin(names)]
        pick = alt.param(name="kernel", value=(top or names or [""])[0],
                         bind=alt.binding_select(options=names, name="kernel "))
        layers = [layer.transform_filter(alt.datum.series == pick) for layer in _trend_layers(domain)]
        selector = alt.layer(*layers, data=data).add_params(pick).properties(width=760, height=260)
        return facet, selector.to_dict(validate=False)


# ----------------------------------------------------------------------------------- the rooflines
def applied_ceilings(kernels: pd.DataFrame) -> pd.DataFrame:
    """The ceilings table the kernel rows were judged with, from the rows themselves: per device,
    ``roof_flops`` of each compute class and ``roof_<level>_bw`` of each level (the classify stage
    copies the device's selected ceilings there). Source: that of the verdicts using the roof.

    The tracking stage keeps kernel rows, not ceilings tables; a stored night's rows are the roofs
    its verdicts used, whatever the ceilings files say today. Where rows of one device carry two
    values of one roof (judged apart), the one most rows used is drawn.
    """
    rows = []
    for device, k in kernels.groupby("device"):
        roofs = [("compute", c, k.loc[k["compute_class"] == c, "roof_flops"], f"compute:{c}")
                 for c in COMPUTE_CLASSES]
        roofs += [("memory", lv, k[f"roof_{lv}_bw"], f"memory:{lv}") for lv in MEMORY_LEVELS if f"roof_{lv}_bw" in k]
        for kind, name, values, verdict in roofs:
            values = pd.to_numeric(values, errors="coerce")
            values = values[np.isfinite(values) & (values > 0)]
            if values.empty:
                continue
            sources = k.loc[(k["bound"] == verdict) & (k["ceiling_source"] != ""), "ceiling_source"]
            rows.append({"device": device, "kind": kind, "name": name, "value": float(values.mode().iat[0]),
                         "source": str(sources.mode().iat[0]) if len(sources) else "as judged", "selected": True})
    return conform(pd.DataFrame(rows, columns=["device", "kind", "name", "value", "source", "selected"]), "ceilings")


def _at_level(rows: pd.DataFrame) -> pd.DataFrame:
    """Each row's place on the roofline: the memory level its verdict used and its intensity there."""
    level = _level(rows["bound"].astype(str), rows["binding_level"].astype(str))
    ai = np.select([level == lv for lv in MEMORY_LEVELS],
                   [pd.to_numeric(rows[f"ai_{lv}"], errors="coerce") for lv in MEMORY_LEVELS], np.nan)
    performance = pd.to_numeric(rows["performance"], errors="coerce")
    return rows.assign(level=level, ai=np.where(ai > 0, ai, np.nan), performance=performance.where(performance > 0))


def moved_points(kernels: pd.DataFrame, baseline: pd.DataFrame, findings: Sequence[Mapping]) -> pd.DataFrame:
    """The regressed and improved series as two-step trajectories (:data:`roofline.trajectory.STEP_COLUMNS`):
    step 1 their baseline, step 2 tonight.

    Tonight is the series' kernel row; the baseline is the median over its baseline nights' rows
    (``baseline``, :func:`roofline.track.page_rows`) of the intensity at the level most of those
    verdicts used, of the performance and of the time. Each point sits where its verdict put it, so
    a point at 100 % of its roof lies on that roof.
    """
    moved = pd.DataFrame([f for f in findings if f.get("label") in MOVED], columns=[*SERIES_KEY, "label"])
    if moved.empty or kernels.empty:
        return pd.DataFrame(columns=STEP_COLUMNS)
    # the legend names each path: its label first, so that a regression reads as one
    moved["match"] = moved["label"] + ": " + series_names(moved.assign(kernel_short=[
        next((f.get("kernel_short") for f in findings if all(f.get(c) == r[c] for c in SERIES_KEY)), "")
        for r in moved.to_dict("records")]))
    now = _at_level(kernels.merge(moved, on=SERIES_KEY))
    before = _at_level(baseline.merge(moved, on=SERIES_KEY)) if len(baseline) else now.iloc[:0]
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
    from roofline.report import CANVAS_FROM, chart_controls

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
        name = f"{f['app']} | {f['kernel_short'] or f['kernel']} | {f['grid']}×{f['block']}"
        cells = [f'<span class="kname" title="{esc(f["kernel"])}">{esc(name)}</span>',
                 f'<b style="color:{COLORS.get(f["label"], "#000")}">{esc(f["label"])}</b>',
                 f"{_us(f['baseline_s'])} → {_us(f['value_s'])}", _num(f["change_pct"], "+.1f") + " %",
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


def _health(decisions: pd.DataFrame, tonight: pd.DataFrame) -> str:
    rel = (tonight["noise_s"] / tonight["baseline_s"]).astype(float).replace([np.inf, -np.inf], np.nan)
    noisy = tonight.assign(rel=rel).dropna(subset=["rel"]).nlargest(5, "rel")
    items = [f"<li>{esc(r.kernel_short or r.kernel)} ({esc(r.app)}): noise {r.rel:.2%} of its baseline</li>"
             for r in noisy.itertuples()]
    missing, new = (int((tonight["label"] == label).sum()) for label in ("missing", "new"))
    return (f"<p>{decisions['run_id'].nunique()} nights shown; {len(tonight)} series tonight, {new} new, "
            f"{missing} missing.</p><p>Noisiest series:</p><ul>{''.join(items)}</ul>")


def trends_html(decisions: pd.DataFrame, summary: Mapping, kernels: pd.DataFrame | None = None,
                baseline: pd.DataFrame | None = None, vega: str | None = None, charts: str | None = None) -> str:
    """The whole trends page: context, counts, findings by impact, their trends, any kernel's trend,
    the rooflines (tonight's ``kernels``, the moved ones from their ``baseline`` nights' rows), health
    and method. ``vega`` is the URL of the shared Vega bundle (default: inlined); ``charts`` that of
    the summary's device charts (``assets/charts.js``), which tonight's rooflines then draw (default:
    built here)."""
    run_id = summary["run_id"]
    tonight = decisions[decisions["run_id"] == run_id]
    found = summary["findings"]
    order = list(dict.fromkeys(series_names(pd.DataFrame(found)))) if found else []
    facet, selector = trend_charts(decisions, order)
    specs = [selector] if facet is None else [facet, selector]
    roof_specs, roof_entries, roof_blocks, rows = roofline_specs(
        kernels if kernels is not None else pd.DataFrame(), baseline if baseline is not None else pd.DataFrame(),
        found, first=len(specs), shared=charts is not None)
    entries = [{"device": "", "canvas": False, "inline": True} for _ in specs] + roof_entries
    specs += roof_specs
    counts = summary["counts"]
    ctx = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in summary["context"].items())
    notes = "".join(f"<li>{esc(n)}</li>" for n in summary["environment_changes"])
    alert = (f'<p class="error"><strong>Regressions tonight: {counts["regression"]}</strong></p>'
             if summary["alert"] else "<p>No regression tonight.</p>")
    shift = ('<p class="warning"><strong>Environment shift</strong>: many kernels moved the same way tonight.</p>'
             if summary["environment_shift"] else "")
    trends = ('<p class="meta">Line: time per launch; dashed: baseline; band: limits; dots: labelled nights; dotted '
              'rules: segment starts.</p><div class="chart" id="chart0"></div>' if facet is not None else
              "<p>No findings tonight: every series is within its limits, nothing to draw.</p>")
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
        + f'<section id="findings"><h2>Findings by impact (Δ time × time share)</h2>{findings_table(found)}</section>\n'
        f'<section id="trends"><h2>Trends of tonight\'s findings</h2>{trends}</section>\n'
        f'<section id="any"><h2>Any kernel</h2><div class="chart" id="chart{0 if facet is None else 1}"></div>'
        "</section>\n"
        '<section id="rooflines"><h2>Rooflines: baseline → tonight</h2><p class="meta">On the roofs tonight\'s '
        "verdicts used (each compute class and memory level its own); hover a point for its numbers, the ⋯ menu "
        "saves a chart as SVG or PNG.</p>" + "\n".join(roof_blocks) + "</section>\n"
        f'<section id="health"><h2>Health</h2>{_health(decisions, tonight)}</section>\n'
        f'<section id="method"><h2>Method</h2><p>{esc(summary["method"])} Rule version '
        f'{esc(summary["rule_version"])}.</p><h3>Run context</h3><table>{ctx}</table></section>'
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
