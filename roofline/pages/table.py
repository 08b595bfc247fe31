"""The kernels table of a page: its columns and their help, the rows in priority order, and the
column-wise JSON the page's script draws the table from (roofline/assets/report.js)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from roofline.charts.roofline_chart import chart_ranks
from roofline.metrics.quantities import MEMORY_LEVELS
from roofline.pages.markup import script_safe

TABLE = [
    ("#", None, "index"), ("kernel", "kernel_short", "name"), ("app", "app", "app"), ("device", "device", "cfg"),
    ("grid × block", "config", "cfg"), ("launches", "launches", "int"), ("time share", "time_share", "share"),
    ("GPU time", "duration_s", "s"), ("bound", "bound", "text"), ("binding roof", "binding_roof", "text"),
    ("% of roof", "roof_pct", "pct"),
    ("achieved", "achieved", "achieved"), ("attainable", "attainable", "attainable"),
    ("AI [FLOP/B]", "ai_bind", "num"), ("ceiling source", "ceiling_source", "text"),
    ("instruction roofline", "instruction_bound", "text"), ("% of instr. roof", "instruction_roof_pct", "pct"),
    ("ncu speedup", "ncu_speedup_pct", "pct"), ("priority", "priority", "num"), ("note", "note", "note"),
]
TABLE_COLUMNS = [head for head, *_ in TABLE]
CSV_COLUMNS = [*((head, field) for head, field, _ in TABLE), ("kernel (full name)", "kernel")]
TABLE_ROWS = 100  # rows drawn at first and per "show more"
TEXT_FIELDS = {"kernel", "kernel_short", "app", "device", "config", "compute_class", "bound", "ceiling_source", "note",
               "instruction_bound", "binding_roof"}
INT_FIELDS = {"launches", "rank"}


# the kernels table's columns page_table reads (its sort then moves these, not ~100)
TABLE_READS = ("kernel", "kernel_short", "app", "device", "grid", "block", "compute_class", "bound", "launches",
               "time_share", "duration_s", "predicted_duration_s", "performance", "attainable", "binding_level",
               *(f"ai_{lv}" for lv in MEMORY_LEVELS), "binding_roof", "roof_pct", "ceiling_source", "instruction_bound",
               "instruction_roof_pct", "ncu_speedup_pct", "priority", "note")

COLUMN_HELP = {
    "time share": "share of the app's GPU time",
    "binding roof": "the roof % of roof is measured against: a compute class, a memory level, or issue (the "
                    "instruction issue rate; kernels without FP work are judged on their instruction roofline)",
    "% of roof": "achieved / attainable at the binding roof named beside it (time form: largest lower bound / "
                 "duration); the same figure as At a glance",
    "achieved": "work of the dominant compute class / duration",
    "attainable": "the binding roof at the kernel's intensity",
    "AI [FLOP/B]": "arithmetic intensity at the binding (busiest) memory level",
    "priority": "time share x (1 - fraction of the binding roof)",
    "bound": "FLOP roofline verdict; none: no floating-point work (see the instruction roofline column)",
    "instruction roofline": "issue or memory:<level>: the roof that binds warp instructions/s (Ding & Williams)",
    "% of instr. roof": "largest of the issue and memory time bounds / duration",
    "ncu speedup": "the largest speedup Nsight Compute's own rules estimate (% of the kernel's time)",
}


def page_table(kernels: pd.DataFrame) -> pd.DataFrame:
    """Every kernel of a page in priority order: the chart's fields and the table's.

    ``rank`` (order by GPU time on its device's chart) is missing for a kernel that has no place
    on a chart; ``achieved`` is the measured performance, missing for what-if rows.
    """
    k = kernels[list(TABLE_READS)].sort_values(["priority", "duration_s"], ascending=False,
                                               na_position="last").reset_index(drop=True)
    rank = pd.Series(np.nan, index=k.index)
    for _, group in k.groupby("device", sort=False):
        rank[group.index] = chart_ranks(group).to_numpy(dtype=float, na_value=np.nan)
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
        "binding_roof": k["binding_roof"], "roof_pct": k["roof_pct"], "ai_bind": binding,
        "ceiling_source": k["ceiling_source"],
        "instruction_bound": k["instruction_bound"].where(k["instruction_bound"] != "unknown", ""),
        "instruction_roof_pct": k["instruction_roof_pct"], "ncu_speedup_pct": k["ncu_speedup_pct"],
        "priority": k["priority"], "note": k["note"], "rank": rank,
    })


def columns_json(table: pd.DataFrame) -> str:
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
    return script_safe("{" + ",".join(parts) + "}")
