"""What a performance engineer reads first, in words: the kernels where optimisation pays most, the
roof that binds each, how far it is and what reaching the roof would save; and ncu's own findings.

"At a glance" ranks judged kernels by their saving at the roof as a fraction of the page's GPU time
(:func:`roofline.classify.kernels.run_ranking`, as ``roofline show`` does): on an app page that is the kernels
table's ``priority`` (time share x (1 - fraction of the binding roof)), on the summary the share of the
whole run. The saving at the roof is ``duration_s - predicted_duration_s`` (the kernel's totals over
the launches used), never below zero. "% of roof" is the kernels table's ``roof_pct``, of the roof
``binding_roof`` names: for a kernel without floating-point work (``bound`` none) its instruction
roofline's (issue rate or a memory level's transactions/s), as on the kernels table.
Kernels whose verdict is ``unknown`` are listed apart, with what is missing, never ranked.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from roofline.classify.kernels import run_order, run_ranking
from roofline.metrics import quantities
from roofline.metrics.units import si
from roofline.pages.markup import esc
from roofline.parse.readers.ncu_rules import parse_rules

GLANCE_KERNELS = 5  # kernels listed at a glance
UNJUDGED_LISTED = 3  # kernels without a verdict listed under them
LARGE_SPEEDUP_PCT = 10.0  # ncu's estimate from which it is shown at a glance
FINDINGS_KERNELS = 30  # kernels with ncu findings on an app page
LEVEL_WORDS = {"dram": "DRAM", "l2": "L2", "l1": "L1", "shared": "shared-memory"}
# the kernels table's columns "At a glance" reads: its selections and sorts then copy these, not ~100
GLANCE_FIELDS = ("app", "kernel", "kernel_short", "grid", "block", "duration_s", "predicted_duration_s", "time_share",
                 "priority", "bound", "bound_kind", "binding_roof", "roof_pct", "roof_flops",
                 *(f"roof_{lv}_bw" for lv in quantities.MEMORY_LEVELS),
                 "instruction_bound", "instruction_roof_pct", "issue_peak_ips", "ncu_rules", "note")


def class_words(cls: str) -> str:
    """A compute class in words: "FP32", "FP16 tensor (FP32 accumulate)", "INT8 tensor 2:4 sparse",
    "BF16 tensor mma.sync"."""
    if not cls.startswith("tensor_"):
        return cls.upper()
    sparse = cls in quantities.SPARSE_OF
    base = quantities.SPARSE_OF.get(cls, cls)
    words = quantities.MMA_OF.get(base, base).removeprefix("tensor_").split("_")
    text = f"{words[0].upper()} tensor" + (" (FP32 accumulate)" if words[1:] == ["acc32"] else "")
    text += " mma.sync" if base in quantities.MMA_OF else ""
    return text + (" 2:4 sparse" if sparse else "")


def _num(row: pd.Series, name: str) -> float:
    value = pd.to_numeric(pd.Series([row.get(name)]), errors="coerce").iat[0]
    return float(value) if pd.notna(value) else float("nan")


def instruction_judged(row: pd.Series) -> bool:
    """Whether a kernel without FP work is judged on its instruction roofline."""
    return row.get("bound_kind") == "none" and row.get("instruction_bound", "unknown") not in ("", "unknown")


def roof_words(row: pd.Series) -> str:
    """The binding roof of a kernel in words, with its value: "DRAM bandwidth, 1.94 TB/s"."""
    kind, roof = str(row.get("bound_kind", "")), str(row.get("binding_roof", ""))
    if instruction_judged(row):
        verdict = str(row["instruction_bound"])
        if verdict == "issue":
            return f"instruction issue rate, {si(_num(row, 'issue_peak_ips'), 'warp inst/s')} (no FP work)"
        level = verdict.split(":", 1)[-1]
        sectors = _num(row, f"roof_{level}_bw") / 32
        return f"{LEVEL_WORDS.get(level, level)} transactions, {si(sectors, 'sectors/s')} (no FP work)"
    if kind in ("memory", "none") and roof in LEVEL_WORDS:
        free = " (no FP work)" if kind == "none" else ""
        return f"{LEVEL_WORDS[roof]} bandwidth, {si(_num(row, f'roof_{roof}_bw'), 'B/s')}{free}"
    if kind == "compute":
        unit = "OP/s" if roof.startswith("tensor_int") else "FLOP/s"
        return f"{class_words(roof)} peak, {si(_num(row, 'roof_flops'), unit)}"
    return str(row.get("bound", ""))


def roof_percent(row: pd.Series) -> float:
    """% of the binding roof, the one :func:`roof_words` names (the kernels table's ``roof_pct``)."""
    return _num(row, "roof_pct")


def _pct(value: float) -> str:
    return "–" if not np.isfinite(value) else f"{value:.1f} %" if value >= 0.1 else f"{value:.2g} %"


def _top_finding(row: pd.Series, large_only: bool = True) -> dict | None:
    rules = [r for r in parse_rules(str(row.get("ncu_rules", "") or "")) if r.get("speedup_pct") is not None]
    best = max(rules, key=lambda r: r["speedup_pct"], default=None)
    if best is None or (large_only and best["speedup_pct"] < LARGE_SPEEDUP_PCT):
        return None
    return best


def _kernel_cell(row: pd.Series, repeated: bool = False) -> str:
    """A kernel's short name (full name on hover); its launch configuration where the name repeats."""
    config = f' <span class="cfg">{esc(row["grid"])} × {esc(row["block"])}</span>' if repeated else ""
    return f'<span class="kname" title="{esc(row["kernel"])}">{esc(row["kernel_short"])}</span>{config}'


def glance_html(kernels: pd.DataFrame, app_page: bool) -> str:
    """The "At a glance" section: the top kernels by priority, then those without a verdict."""
    if kernels.empty:
        return ""
    k = kernels[[c for c in GLANCE_FIELDS if c in kernels.columns]].reset_index(drop=True)
    app_time = k.groupby("app")["duration_s"].transform("sum")
    run_time = float(k["duration_s"].sum())
    # priority over the page's GPU time (roofline show ranks the same way): an app page's is the kernels
    # table's priority; across apps, a share of a small app's time must not outrank seconds to gain
    ranking = run_ranking(k)
    k = k.join(ranking.rename(columns={"saving_s": "_saving"}))
    order = run_order(k, ranking)
    judged = k.loc[order][((k["bound_kind"] != "unknown") & k["priority"].notna()).loc[order]]
    rows = []
    repeated = k.duplicated(["app", "kernel"], keep=False)  # one function, several launch configurations
    for i, (_, row) in enumerate(judged.head(GLANCE_KERNELS).iterrows(), 1):
        saving = row["_saving"]
        share = 100 * saving / app_time[row.name] if app_time[row.name] > 0 else float("nan")
        where = "" if app_page else f" of {esc(row['app'])}'s"
        several = not app_page and k["app"].nunique() > 1 and run_time > 0
        run = f", {_pct(100 * row['run_priority'])} of the run's" if several else ""
        finding = _top_finding(row)
        ncu = (f'<br><span class="meta">ncu: {esc(finding["title"])}, est. speedup {finding["speedup_pct"]:.0f} % '
               f"({esc(finding['speedup_type'] or 'estimate')})</span>") if finding else ""
        of_app = "" if app_page else f" ({esc(row['app'])})"
        rows.append(
            f"<tr><td class=\"n\">{i}</td><td>{_kernel_cell(row, repeated[row.name])}{of_app}"
            f"</td><td>{esc(roof_words(row))}</td><td class=\"n\">{_pct(roof_percent(row))}</td>"
            f'<td class="n">{si(saving, "s")}</td><td>{_pct(share)}{where or " of the app&#39;s"} GPU time{run}'
            f"{ncu}</td></tr>"
        )
    parts = ['<section id="glance"><h2>At a glance</h2>']
    if rows:
        parts.append(
            '<p class="meta">Where optimisation pays most: the kernels with the most GPU time to gain at their binding '
            "roof (priority = time share × distance from that roof, over "
            + ("the app's" if app_page else "the whole run's") + " GPU time), the roof in words, how close each "
            "kernel is, and what reaching the roof would save (summed over its launches).</p>"
            '<table class="glance"><thead><tr><th>#</th><th>kernel</th><th>binding roof</th><th>% of roof</th>'
            f"<th>saving at the roof</th><th>of GPU time</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    else:
        parts.append("<p>No kernel could be judged against a roof.</p>")
    unjudged = k[k["bound_kind"] == "unknown"].sort_values("time_share", ascending=False)
    if len(unjudged):
        items = "".join(
            f"<li>{_kernel_cell(row)}{'' if app_page else ' (' + esc(row['app']) + ')'}, "
            f"{_pct(100 * _num(row, 'time_share'))} of its app's GPU time: no verdict, "
            f"{esc(row['note'] or 'evidence missing')}</li>"
            for _, row in unjudged.head(UNJUDGED_LISTED).iterrows()
        )
        share = 100 * unjudged["duration_s"].sum() / run_time if run_time > 0 else float("nan")
        more = f" (the first {UNJUDGED_LISTED})" if len(unjudged) > UNJUDGED_LISTED else ""
        parts.append(f"<p>Not judged: {len(unjudged)} kernel(s), {_pct(share)} of the GPU time, because evidence "
                     f"is missing{more}:</p><ul class=\"unjudged\">{items}</ul>")
    parts.append("</section>")
    return "".join(parts)


def findings_html(kernels: pd.DataFrame) -> str:
    """ncu's rule results per kernel, beside our verdict (an app page's "ncu's findings")."""
    k = kernels[kernels["ncu_rules"].fillna("") != ""] if "ncu_rules" in kernels else kernels.iloc[:0]
    if k.empty:
        return ('<section id="findings"><h2>ncu\'s findings</h2><p class="meta">The input stores no ncu rule '
                "results (CSV exports and reports captured without rule sections have none).</p></section>")
    k = k.sort_values(["priority", "duration_s"], ascending=False, na_position="last").head(FINDINGS_KERNELS)
    blocks = []
    for _, row in k.iterrows():
        judged = row["bound_kind"] != "unknown"
        ours = f"{esc(row['bound'])}" + (f", {_pct(_num(row, 'roof_pct'))} of the roof" if judged else "")
        if row.get("instruction_bound", "unknown") not in ("", "unknown"):
            pct = _pct(_num(row, "instruction_roof_pct"))
            ours += f"; instruction roofline: {esc(row['instruction_bound'])}, {pct}"
        items = []
        for rule in parse_rules(row["ncu_rules"]):
            speedup = (f", est. speedup {rule['speedup_pct']:.1f} % ({esc(rule.get('speedup_type') or 'estimate')})"
                       if rule.get("speedup_pct") is not None else "")
            items.append(f"<li><details><summary><strong>{esc(rule['title'])}</strong> ({esc(rule['type'])}{speedup})"
                         f"</summary><p class=\"note\">{esc(rule['message'])}</p></details></li>")
        blocks.append(f"<h3>{_kernel_cell(row)}</h3><p class=\"meta\">ours: {ours}</p><ul class=\"findings\">"
                      f"{''.join(items)}</ul>")
    return ('<section id="findings"><h2>ncu\'s findings</h2><p class="meta">The rule results Nsight Compute stored '
            "in the report, per kernel, beside our verdict; speedups are ncu's estimates (% of the kernel's time, "
            "time-weighted over its launches; rules overlap, so they do not add up).</p>"
            + "".join(blocks) + "</section>")
