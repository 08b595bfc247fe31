"""Nightly tracking stage: tonight's kernels -> history store -> decisions -> regressions.json + trends.html.

``python -m roofline.track --kernels data/kernels/*.parquet --store data/history --run-id R
--trends reports/trends.html --regressions reports/regressions.json [--fail-on-regression]
[--replay] [--trend-nights N]`` appends the night (idempotent), judges every kernel series from the
stored decision state and tonight's rows (:func:`roofline.decide_state.update`: every night
again when the rule or its parameters changed, or with ``--replay``) and writes the
machine-readable findings and an offline HTML page (one inline Vega bundle) of the last
``--trend-nights`` nights. Exit status 3 when ``--fail-on-regression`` is given and a kernel
regressed.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import logging
import math
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd

from roofline.decide import DECISION_COLUMNS, LABELS, DecisionParams
from roofline.decide_state import update
from roofline.history import CONTEXT, SERIES_KEY, append_run, read_decisions, read_run
from roofline.schemas import conform, read_columns, read_table, write_text_atomic

log = logging.getLogger("roofline.track")

EXIT_REGRESSION = 3
MAX_TREND_CHARTS = 12
MAX_SELECTOR_SERIES = 150  # the selector chart carries every night of this many series
TREND_NIGHTS = 90  # nights on the trends page: a fixed window, however long the history
# What the trends page reads of the nights before tonight (tonight's records are read whole).
TREND_COLUMNS = [*SERIES_KEY, "kernel_short", "run_id", "run_date", "label", "value_s", "baseline_s",
                 "lower_s", "upper_s", "ratio", "z", "note", "time_share"]
_QUIET = ("unchanged",)
_COLORS = {
    "regression": "#d62728", "improvement": "#2ca02c", "suspicious": "#ff7f0e",
    "outlier": "#9467bd", "workload_changed": "#8c564b", "environment_change": "#7f7f7f",
    "unstable_env": "#bcbd22", "missing": "#000000", "error": "#e377c2", "new": "#17becf",
    "insufficient_data": "#c7c7c7", "unchanged": "#4c78a8",
}
_FINDING_FIELDS = [
    *SERIES_KEY, "kernel_short", "convention", "label", "direction", "metric", "baseline_s", "value_s",
    "noise_s", "lower_s", "upper_s", "change_pct", "z", "nights_in_violation", "time_share",
    "impact", "bound", "bound_side", "bound_flip", "roof_pct_baseline", "roof_pct",
    "ai_dram_baseline", "ai_dram", "performance_baseline", "performance", "flop_ratio",
    "dram_bytes_ratio", "n_baseline", "baseline_runs", "segment_start", "environment_shift", "note",
]
_CONTEXT_SHOWN = ["run_id", "run_date", "run_time", "app_commit", "host", "gpu_uuid",
                  "driver_version", "cuda_version", "ncu_version", "clock_control",
                  "cache_control", "sm_clock_hz", "pipeline_version", "convention", "config_hash"]


# ---------------------------------------------------------------------------------------- inputs
def load_context(values: Sequence[str] = ()) -> dict:
    """Merge run contexts: ``$ROOFLINE_RUN_CONTEXT`` (a JSON file), then each value in order.

    A value is inline JSON (starting with ``{``) or the path of a JSON file.

    Raises
    ------
    ValueError
        If a value is neither a JSON object nor a readable JSON file.
    """
    sources = [os.environ["ROOFLINE_RUN_CONTEXT"]] if os.environ.get("ROOFLINE_RUN_CONTEXT") else []
    context: dict = {}
    for value in [*sources, *values]:
        try:
            text = value if value.lstrip()[:1] in ("{", "[") else Path(value).read_text()
            data = json.loads(text)
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"run context {value[:80]!r}: not a JSON object or file ({exc})") from None
        if not isinstance(data, dict):
            raise ValueError(f"run context {value[:80]!r}: expected a JSON object")
        devices = {**context.get("devices", {}), **data.pop("devices", {})}
        context.update(data)
        if devices:
            context["devices"] = devices
    return context


def config_hash(config_json: str) -> str:
    """The first 16 hex digits of the sha256 of a config, as canonical JSON."""
    canonical = json.dumps(json.loads(config_json), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def observed_context(counters: pd.DataFrame) -> dict:
    """Per device, what the reports themselves say: ncu version and median SM clock [Hz]."""
    devices = {}
    for device, group in counters.groupby("device"):
        versions = group["ncu_version"].replace("", np.nan).dropna()
        entry = {"sm_clock_hz": float(group["sm_clock_hz"].median())}
        if not versions.empty:
            entry["ncu_version"] = str(versions.mode().iat[0])
        devices[str(device)] = {k: v for k, v in entry.items() if v == v}
    return {"devices": devices}


def _with_observed(context: dict, observed: dict) -> dict:
    """``context`` with observed per-device values where the context gives none."""
    devices = dict(context.get("devices", {}))
    for device, values in observed.get("devices", {}).items():
        given = devices.get(device, {})
        devices[device] = {**{k: v for k, v in values.items() if not context.get(k)}, **given}
    return {**context, "devices": devices}


# -------------------------------------------------------------------------------------- summary
def _clean(value):
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def findings(tonight: pd.DataFrame) -> pd.DataFrame:
    """Tonight's rows worth reading, by impact (|Δ time| x time share), largest first."""
    quiet = tonight["label"].isin(_QUIET) & (tonight["bound_flip"] == "")
    quiet |= (tonight["label"] == "insufficient_data") & (tonight["direction"] == "")
    out = tonight[~quiet].copy()
    out["change_pct"] = (out["ratio"] - 1) * 100
    out["_key"] = out["impact"].abs().fillna(-1)
    return out.sort_values(["_key", "kernel"], ascending=[False, True]).drop(columns="_key")


def summarize(tonight: pd.DataFrame, context: Mapping, params: DecisionParams) -> dict:
    """The content of regressions.json: run, context, method, counts per label, findings."""
    counts = {label: int((tonight["label"] == label).sum()) for label in LABELS}
    found = findings(tonight)
    env = sorted(set(tonight.loc[tonight["label"] == "environment_change", "note"]))
    return {
        "run_id": str(context.get("run_id", "")),
        "rule_version": str(tonight["rule_version"].iat[0]) if len(tonight) else "",
        "context": {k: _clean(context.get(k)) for k in _CONTEXT_SHOWN if k in context},
        "method": method_text(params),
        "params": {k: _clean(v) if not isinstance(v, tuple) else list(v)
                   for k, v in vars(params).items() if k != "per_kernel"},
        "kernels": len(tonight),
        "counts": counts,
        "alert": counts["regression"] > 0,
        "environment_shift": bool(tonight["environment_shift"].any()) if len(tonight) else False,
        "environment_changes": env,
        "findings": [{k: _clean(row[k]) for k in _FINDING_FIELDS}
                     for row in found.to_dict("records")],
    }


def method_text(p: DecisionParams) -> str:
    """The decision rule in one paragraph, with tonight's thresholds."""
    return (
        f"Per kernel series (app x device x kernel x grid x block x {' x '.join(p.settings)}), "
        f"time per launch against the median of the last {p.window} valid nights of its segment "
        f"(last night held out); noise sigma = robust scale of "
        f"{'night-to-night changes' if p.noise_method == 'diff' else 'the baseline nights'} "
        f"(floor {p.sigma_floor:.1%}). A night violates when |ratio - 1| > max({p.rel_min:.0%}, "
        f"{p.z_min:g} sigma). Regression: two nights at one new level (each beyond {p.rel_min:.0%}, "
        f"mean beyond max({p.rel_min:.0%}, {p.z_min:g} sigma/sqrt 2)), or a jump of "
        f">= {p.big_ratio - 1:.0%} with z >= {p.big_z:g}. One violating night: suspicious; reverted "
        f"the next night: outlier. Under {p.min_nights} nights: insufficient_data ({p.info_rel:.0%} "
        f"rule, information only). FLOP or DRAM bytes moved > {p.work_tol:.0%}: workload_changed, "
        f"judged per unit of work. A change of {', '.join(p.segment_fields)} starts a new segment "
        f"(environment_change, no comparison that night)."
    )


# --------------------------------------------------------------------------------------- charts
def _series_names(frame: pd.DataFrame) -> pd.Series:
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
                                                 range=[_COLORS[c] for c in color_domain]))
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


def trend_data(decisions: pd.DataFrame) -> pd.DataFrame:
    """Per series per night: time, baseline and limit band [µs], label, violation marker."""
    d = decisions.copy()
    d["series"] = _series_names(d)
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


def trend_charts(decisions: pd.DataFrame, tonight_series: list[str]) -> tuple[dict, dict]:
    """Small multiples of the findings' series, and one chart with a kernel selector."""
    data = trend_data(decisions)
    domain = [c for c in _COLORS if c in set(data["label"])] or ["unchanged"]
    known = set(data["series"])  # once: building it per series made this quadratic
    top = [s for s in tonight_series if s in known][:MAX_TREND_CHARTS]
    shown = data[data["series"].isin(top)] if top else data.iloc[:0]
    facet = alt.layer(*_trend_layers(domain), data=shown).properties(width=360, height=170)
    facet = facet.facet(facet=alt.Facet("series:N", title=None, sort=top,
                                        header=alt.Header(labelLimit=420, labelFontSize=11)),
                        columns=2).resolve_scale(y="independent")
    share = decisions.assign(series=_series_names(decisions)).groupby("series")["time_share"].max()
    busiest = share.sort_values(ascending=False).index[:MAX_SELECTOR_SERIES]
    names = sorted(set(busiest) | set(top))
    data = data[data["series"].isin(names)]
    pick = alt.param(name="kernel", value=(top or names or [""])[0],
                     bind=alt.binding_select(options=names, name="kernel "))
    layers = [layer.transform_filter(alt.datum.series == pick) for layer in _trend_layers(domain)]
    selector = alt.layer(*layers, data=data).add_params(pick).properties(width=760, height=260)
    with alt.data_transformers.disable_max_rows():  # thousands of kernels x nights is expected
        return facet.to_dict(validate=False), selector.to_dict(validate=False)


def _roofline_one(rows: pd.DataFrame, device: str, width: int = 620, height: int = 400) -> alt.Chart:
    pts = rows[np.isfinite(rows["ai_dram"]) & np.isfinite(rows["performance"])
               & (rows["ai_dram"] > 0) & (rows["performance"] > 0)]
    # Only the fields the layers draw or show: every column would be embedded in the page.
    pts = pts[["series", "label", "ai_dram", "performance", "ai_dram_baseline", "performance_baseline",
               "change_pct"]].copy()
    peak, bw = float(rows["roof_flops"].median()), float(rows["roof_dram_bw"].median())
    xs = pd.concat([pts["ai_dram"], pts["ai_dram_baseline"]]).replace(0, np.nan).dropna()
    ys = pd.concat([pts["performance"], pts["performance_baseline"]]).replace(0, np.nan).dropna()
    xlo, xhi = float(xs.min()) / 2, float(xs.max()) * 2
    ylo = float(ys.min()) / 2
    yhi = max(float(ys.max()), peak if math.isfinite(peak) else 0) * 1.5
    xscale = alt.Scale(type="log", domain=[xlo, xhi])
    yscale = alt.Scale(type="log", domain=[ylo, yhi])
    xaxis, yaxis = alt.Axis(format="~g"), alt.Axis(format="~s")
    xtitle, ytitle = "arithmetic intensity (DRAM) [FLOP/B]", "performance [FLOP/s]"
    layers = []
    if math.isfinite(peak) and math.isfinite(bw) and peak > 0 and bw > 0:
        grid = np.geomspace(xlo, xhi, 64)
        roof = pd.DataFrame({"ai": grid, "flops": np.minimum(peak, bw * grid)})
        layers.append(alt.Chart(roof).mark_line(color="#555555").encode(
            x=alt.X("ai:Q", scale=xscale, axis=xaxis, title=xtitle),
            y=alt.Y("flops:Q", scale=yscale, axis=yaxis, title=ytitle)))
    moved = pts[np.isfinite(pts["ai_dram_baseline"]) & np.isfinite(pts["performance_baseline"])
                & (pts["ai_dram_baseline"] > 0) & (pts["performance_baseline"] > 0)].copy()
    lx, ly = math.log10(xhi / xlo), math.log10(yhi / ylo)
    right = np.log10(moved["ai_dram"] / moved["ai_dram_baseline"]) / lx * width
    up = np.log10(moved["performance"] / moved["performance_baseline"]) / ly * height
    moved["angle"] = np.degrees(np.arctan2(right, up)) % 360
    moved = moved[np.hypot(right, up) > 2]
    x = alt.X("ai_dram:Q", scale=xscale, axis=xaxis, title=xtitle)
    y = alt.Y("performance:Q", scale=yscale, axis=yaxis, title=ytitle)
    domain = [c for c in _COLORS if c in set(pts["label"])] or ["unchanged"]
    color = alt.Color("label:N", scale=alt.Scale(domain=domain, range=[_COLORS[c] for c in domain]))
    tip = [alt.Tooltip("series:N", title="kernel"), alt.Tooltip("label:N"),
           alt.Tooltip("ai_dram:Q", format=".3g"), alt.Tooltip("performance:Q", format=".3g"),
           alt.Tooltip("change_pct:Q", format="+.1f", title="time change [%]")]
    layers += [
        alt.Chart(moved).mark_rule(color="#999999").encode(
            x=alt.X("ai_dram_baseline:Q", scale=xscale, axis=xaxis, title=xtitle),
            y=alt.Y("performance_baseline:Q", scale=yscale, axis=yaxis, title=ytitle),
            x2="ai_dram:Q", y2="performance:Q"),
        alt.Chart(moved).mark_point(size=25, color="#999999").encode(
            x=alt.X("ai_dram_baseline:Q", scale=xscale), y=alt.Y("performance_baseline:Q", scale=yscale)),
        alt.Chart(pts[~pts.index.isin(moved.index)]).mark_point(filled=True, size=55).encode(
            x, y, color=color, tooltip=tip),
        alt.Chart(moved).mark_point(shape="triangle", filled=True, size=110, opacity=1).encode(
            x, y, color=color, tooltip=tip, angle=alt.Angle("angle:Q", scale=None)),
    ]
    return alt.layer(*layers).properties(width=width, height=height, title=f"{device}: baseline → tonight")


def roofline_chart(tonight: pd.DataFrame) -> dict | None:
    """Tonight's kernels on each device's DRAM roofline, an arrow from each baseline position."""
    rows = tonight.copy()
    rows["series"] = _series_names(rows)
    rows["change_pct"] = (rows["ratio"] - 1) * 100
    ok = np.isfinite(rows["ai_dram"]) & np.isfinite(rows["performance"])
    ok &= (rows["ai_dram"] > 0) & (rows["performance"] > 0)
    charts = [_roofline_one(group, str(device)) for device, group in rows[ok].groupby("device")]
    if not charts:
        return None
    with alt.data_transformers.disable_max_rows():
        return (alt.vconcat(*charts) if len(charts) > 1 else charts[0]).to_dict(validate=False)


# ----------------------------------------------------------------------------------------- page
def _embed(spec: dict) -> str:
    return json.dumps(spec, allow_nan=False, default=_clean).replace("</", "<\\/").replace(
        "<!--", "<\\!--")


def _fmt(value, kind: str = "") -> str:
    value = _clean(value)
    if value is None or value == "":
        return ""
    if kind == "us":
        return f"{value * 1e6:.3f}"
    if kind == "pct":
        return f"{value:+.1f}"
    if kind == "g":
        return f"{value:.3g}"
    return html.escape(str(value))


def _findings_table(found: list[dict]) -> str:
    head = ["kernel", "label", "baseline → tonight [µs]", "change [%]", "z", "nights", "share",
            "impact", "bound", "% of roof", "AI (DRAM)", "note"]
    rows = []
    for f in found:
        roof = f"{_fmt(f['roof_pct_baseline'], 'g')} → {_fmt(f['roof_pct'], 'g')}"
        ai = f"{_fmt(f['ai_dram_baseline'], 'g')} → {_fmt(f['ai_dram'], 'g')}"
        name = html.escape(f"{f['app']} | {f['kernel_short'] or f['kernel']} | {f['grid']}×{f['block']}")
        cells = [f"<span title=\"{html.escape(f['kernel'])}\">{name}</span>",
                 f"<b style=\"color:{_COLORS.get(f['label'], '#000')}\">{html.escape(f['label'])}</b>",
                 f"{_fmt(f['baseline_s'], 'us')} → {_fmt(f['value_s'], 'us')}",
                 _fmt(f["change_pct"], "pct"), _fmt(f["z"], "g"), _fmt(f["nights_in_violation"]),
                 _fmt(f["time_share"], "g"), _fmt(f["impact"], "g"),
                 html.escape(f"{f['bound']} {f['bound_flip']}".strip()), roof, ai, _fmt(f["note"])]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    header = "".join(f"<th>{h}</th>" for h in head)
    body = "\n".join(rows) or f"<tr><td colspan={len(head)}>no findings tonight</td></tr>"
    return f"<table class=findings><thead><tr>{header}</tr></thead><tbody>\n{body}\n</tbody></table>"


def _health(decisions: pd.DataFrame, tonight: pd.DataFrame) -> str:
    rel = (tonight["noise_s"] / tonight["baseline_s"]).astype(float).replace([np.inf, -np.inf], np.nan)
    noisy = tonight.assign(rel=rel).dropna(subset=["rel"]).nlargest(5, "rel")
    items = [f"<li>{html.escape(r.kernel_short or r.kernel)} ({html.escape(r.app)}): noise "
             f"{r.rel:.2%} of its baseline</li>" for r in noisy.itertuples()]
    missing = tonight[tonight["label"] == "missing"]
    new = tonight[tonight["label"] == "new"]
    nights = decisions["run_id"].nunique()
    return (f"<p>{nights} nights shown; {len(tonight)} series tonight, {len(new)} new, "
            f"{len(missing)} missing.</p><p>Noisiest series:</p><ul>{''.join(items)}</ul>")


_CSS = """body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:3px 6px;
vertical-align:top}th{background:#f3f3f3}.counts td{text-align:center}.ctx td:first-child{
font-weight:600}.alert{color:#d62728;font-weight:700}"""


def render_trends(decisions: pd.DataFrame, summary: Mapping, bundle: str | None = None) -> str:
    """The offline trends page: header, counts, findings by impact, trend charts, roofline, health.

    ``bundle`` is the Vega JavaScript (default: the report's, :func:`roofline.report.vega_bundle`).
    """
    if bundle is None:
        from roofline.report import vega_bundle

        bundle = vega_bundle()
    run_id = summary["run_id"]
    tonight = decisions[decisions["run_id"] == run_id]
    found = summary["findings"]
    order = _series_names(pd.DataFrame(found, columns=_FINDING_FIELDS)) if found else pd.Series()
    facet, selector = trend_charts(decisions, list(dict.fromkeys(order)))
    roof = roofline_chart(tonight) if len(tonight) else None
    ctx = "".join(f"<tr><td>{html.escape(k)}</td><td>{_fmt(v)}</td></tr>"
                  for k, v in summary["context"].items())
    counts = summary["counts"]
    count_row = "".join(f"<th>{html.escape(k)}</th>" for k in counts)
    count_val = "".join(f"<td>{v}</td>" for v in counts.values())
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in summary["environment_changes"])
    alert = ("<p class=alert>Regressions tonight: "
             f"{counts['regression']}</p>" if summary["alert"] else "<p>No regression tonight.</p>")
    shift = ("<p class=alert>Environment shift: many kernels moved the same way tonight.</p>"
             if summary["environment_shift"] else "")
    charts = {"trends": facet, "selector": selector, **({"roofline": roof} if roof else {})}
    embeds = "\n".join(f"vegaEmbed('#{k}', {_embed(v)}, {{actions:false}});" for k, v in charts.items())
    roof_div = "<h2>Roofline: baseline → tonight</h2><div id=roofline></div>" if roof else ""
    script = bundle.replace("</script", "<\\/script")
    return f"""<!DOCTYPE html>
<html lang=en><head><meta charset=utf-8><title>Nightly roofline tracking: {html.escape(run_id)}</title>
<style>{_CSS}</style>
<script>{script}</script></head><body>
<h1>Nightly roofline tracking: run {html.escape(run_id)}</h1>
<table class=ctx>{ctx}</table>
{alert}{shift}
<table class=counts><tr>{count_row}</tr><tr>{count_val}</tr></table>
{f"<h3>New segments tonight (environment or counting conventions changed)</h3><ul>{notes}</ul>"
   if notes else ""}
<h2>Findings by impact (Δ time × time share)</h2>
{_findings_table(found)}
<h2>Trends of tonight's findings</h2><p>Line: time per launch; dashed: baseline; band: limits;
dots: labelled nights; dotted rules: segment starts.</p><div id=trends></div>
<h2>Any kernel</h2><div id=selector></div>
{roof_div}
<h2>Health</h2>{_health(decisions, tonight)}
<h2>Method</h2><p>{html.escape(summary["method"])} Rule version {html.escape(summary["rule_version"])}.</p>
<script>
{embeds}
</script></body></html>
"""


# ------------------------------------------------------------------------------------------- CLI
def track(kernels: pd.DataFrame, store: str | os.PathLike, run_id: str, context: Mapping,
          params: DecisionParams, *, replay: bool = False,
          trend_nights: int = TREND_NIGHTS) -> tuple[pd.DataFrame, dict]:
    """Append tonight, decide every series; return the trends page's decisions and tonight's summary.

    Tonight is judged from the stored decision state and tonight's rows, so its cost does not grow
    with the history; ``replay`` judges every night again (after a rule change; automatic when the
    parameters or the rule's code changed). The decisions returned are those of the last
    ``trend_nights`` nights up to tonight (tonight's with every column), read from the decisions
    store. A night without any kernel (every input pattern found nothing: ``roofline.status
    --check`` says so) is not recorded: the store keeps the nights that ran, and the summary
    counts nothing.
    """
    if kernels.empty:
        done = update(store, params, replay=replay)
        decisions = _page_decisions(store, done.order[-trend_nights:], None)
        nothing = pd.DataFrame(columns=DECISION_COLUMNS)
        return decisions, summarize(nothing, {**dict(context), "run_id": run_id}, params)
    append_run(store, run_id, kernels, context)
    done = update(store, params, changed=[run_id], replay=replay)
    tonight = read_decisions(store, [run_id])
    upto = done.order[: done.order.index(run_id) + 1]  # a rerun of an old night: the page up to it
    decisions = _page_decisions(store, upto[-trend_nights:-1], tonight)
    wanted = [c.name for c in CONTEXT if c.name != "context_json"] + ["convention"]
    night = read_run(store, run_id, [*SERIES_KEY, *wanted])
    stored = night.sort_values(SERIES_KEY, kind="stable").iloc[0][wanted].to_dict()
    summary = summarize(tonight, {**stored, "run_id": run_id}, params)
    return decisions, summary


def _page_decisions(store: str | os.PathLike, runs: list[str], tonight: pd.DataFrame | None) -> pd.DataFrame:
    """The decisions the trends page draws: the trend columns of ``runs``, then tonight's records."""
    past = read_decisions(store, runs, TREND_COLUMNS) if runs else None
    frames = [f for f in (past, tonight) if f is not None and len(f)]
    if not frames:
        return pd.DataFrame(columns=DECISION_COLUMNS)
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Record tonight's kernels and judge regressions.")
    parser.add_argument("--kernels", nargs="*", default=[], help="kernels tables (Parquet; none: no app)")
    parser.add_argument("--counters", nargs="*", default=[],
                        help="counters tables: ncu version and SM clock where the context lacks them")
    parser.add_argument("--store", required=True, help="history store directory")
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--context-json", action="append", default=[],
                        help="run context: inline JSON or a JSON file (repeatable)")
    parser.add_argument("--config-json", help="the workflow config as JSON (hashed into the context)")
    parser.add_argument("--params", help="decision parameters as JSON (docs/tracking.md)")
    parser.add_argument("--trends", required=True)
    parser.add_argument("--regressions", required=True)
    parser.add_argument("--fail-on-regression", action="store_true",
                        help=f"exit {EXIT_REGRESSION} when a kernel regressed")
    parser.add_argument("--replay", action="store_true",
                        help="judge every stored night again and rewrite their decisions "
                             "(automatic when the parameters or the rule changed)")
    parser.add_argument("--trend-nights", type=int, default=TREND_NIGHTS,
                        help=f"nights on the trends page (default {TREND_NIGHTS})")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        context = load_context(args.context_json)
        if args.config_json:
            context.setdefault("config_hash", config_hash(args.config_json))
        if args.counters:
            needed = ["device", "ncu_version", "sm_clock_hz"]
            counters = pd.concat([read_columns(p, "counters", needed) for p in args.counters])
            context = _with_observed(context, observed_context(counters))
        params = DecisionParams.from_mapping(json.loads(args.params) if args.params else None)
        tables = [read_table(p, "kernels") for p in args.kernels]
        kernels = pd.concat(tables, ignore_index=True) if tables else conform(pd.DataFrame(), "kernels")
        if args.trend_nights < 1:
            raise ValueError(f"--trend-nights must be at least 1, got {args.trend_nights}")
        decisions, summary = track(kernels, args.store, args.run_id, context, params,
                                   replay=args.replay, trend_nights=args.trend_nights)
    except ValueError as exc:
        log.error("%s", exc)
        return 2
    write_text_atomic(args.regressions, json.dumps(summary, indent=1, allow_nan=False) + "\n")
    write_text_atomic(args.trends, render_trends(decisions, summary))
    counts = summary["counts"]
    log.info("run %s: %d kernels; %s", args.run_id, summary["kernels"],
             ", ".join(f"{k} {v}" for k, v in counts.items() if v))
    if args.fail_on_regression and counts["regression"]:
        return EXIT_REGRESSION
    return 0


if __name__ == "__main__":
    sys.exit(main())
