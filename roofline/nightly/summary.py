"""regressions.json's content (:func:`summarize`): tonight's counts per label (kernel series and app
totals, :mod:`roofline.nightly.app_total`), the apps whose history starts tonight, and the findings
worth reading, by impact, as plain JSON values."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from roofline.nightly.app_total import APP_TOTAL
from roofline.nightly.params import DecisionParams
from roofline.nightly.series_rule import LABELS
from roofline.tables.schemas import KERNEL_KEY

_QUIET = ("unchanged",)
_FINDING_FIELDS = [
    *KERNEL_KEY, "kernel_short", "convention", "label", "direction", "metric", "baseline_s", "value_s",
    "noise_s", "lower_s", "upper_s", "change_pct", "z", "nights_in_violation", "time_share",
    "impact", "bound", "bound_side", "bound_flip", "roof_pct_baseline", "roof_pct",
    "ai_dram_baseline", "ai_dram", "performance_baseline", "performance", "flop_ratio",
    "dram_bytes_ratio", "n_baseline", "baseline_runs", "segment_start", "environment_shift", "note",
    "previous_kernel",
]
_CONTEXT_SHOWN = ["run_id", "run_date", "run_time", "app_commit", "host", "gpu_uuid",
                  "driver_version", "cuda_version", "ncu_version", "clock_control",
                  "cache_control", "sm_clock_hz", "pipeline_version", "convention", "config_hash"]


def _clean(value):
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def _records(frame: pd.DataFrame, fields: list[str]) -> list[dict]:
    """The rows of ``frame`` as dicts of plain Python values, a missing or infinite number as None
    (what :func:`_clean` makes of each value), converted by Arrow in one pass: a night on which
    thousands of series moved lists every one of them."""
    import pyarrow as pa

    columns = {}
    for name in fields:
        column = frame[name]
        if pd.api.types.is_float_dtype(column.dtype):
            column = column.where(np.isfinite(column))  # Arrow makes NaN None; inf too, as _clean does
        columns[name] = column
    return pa.Table.from_pandas(pd.DataFrame(columns), preserve_index=False).to_pylist()


def _starting(tonight: pd.DataFrame) -> np.ndarray:
    """The rows of series whose app starts its history on that device tonight: every record of the
    app and device is ``new`` (the first night, a new app, an app on a new GPU). Each is new with
    nothing to compare with, so one line per app and device says so (:func:`started`) instead of a
    finding per series: a first night of a thousand apps is ~100k series. A new kernel in an app
    tracked before stays a finding."""
    if tonight.empty:
        return np.zeros(0, dtype=bool)
    new = (tonight["label"] == "new").to_numpy()
    group = tonight.groupby(["app", "device"], sort=False, observed=True, dropna=False).ngroup().to_numpy()
    tracked = np.zeros(group.max() + 1, dtype=bool)  # the app and device have a series that is not new
    tracked[group[~new]] = True
    return new & ~tracked[group]


def started(tonight: pd.DataFrame) -> list[dict]:
    """The apps and devices whose history starts tonight (see :func:`_starting`): app, device and
    their number of series, by app and device."""
    rows = tonight.loc[_starting(tonight), ["app", "device"]]
    counts = rows.value_counts(sort=False).sort_index()
    return [{"app": str(app), "device": str(device), "series": int(n)} for (app, device), n in counts.items()]


def findings(tonight: pd.DataFrame) -> pd.DataFrame:
    """Tonight's rows worth reading, by impact (|Δ time| x time share), largest first: not those
    within their limits, and not the series of an app whose history starts tonight (:func:`started`)."""
    quiet = tonight["label"].isin(_QUIET) & (tonight["bound_flip"] == "")
    quiet |= (tonight["label"] == "insufficient_data") & (tonight["direction"] == "")
    quiet |= _starting(tonight)
    out = tonight[~quiet].copy()
    out["change_pct"] = (out["ratio"] - 1) * 100
    out["_key"] = out["impact"].abs().fillna(-1)
    return out.sort_values(["_key", "kernel"], ascending=[False, True]).drop(columns="_key")


def summarize(tonight: pd.DataFrame, context: Mapping, params: DecisionParams) -> dict:
    """The content of regressions.json: run, context, method, counts per label, findings."""
    counts = {label: int((tonight["label"] == label).sum()) for label in LABELS}
    totals = (tonight["kernel"] == APP_TOTAL).to_numpy() if len(tonight) else np.zeros(0, dtype=bool)
    found = findings(tonight)
    env = sorted(set(tonight.loc[tonight["label"] == "environment_change", "note"]))
    return {
        "run_id": str(context.get("run_id", "")),
        "rule_version": str(tonight["rule_version"].iat[0]) if len(tonight) else "",
        "context": {k: _clean(context.get(k)) for k in _CONTEXT_SHOWN if k in context},
        "method": method_text(params),
        "params": {k: _clean(v) if not isinstance(v, tuple) else list(v)
                   for k, v in vars(params).items() if k != "per_kernel"},
        "kernels": int((~totals).sum()),
        "app_totals": int(totals.sum()),
        "counts": counts,
        "app_total_regressions": int((totals & (tonight["label"] == "regression").to_numpy()).sum()),
        "alert": counts["regression"] > 0,
        "environment_shift": bool(tonight["environment_shift"].any()) if len(tonight) else False,
        "environment_changes": env,
        "started": started(tonight),
        "findings": _records(found, _FINDING_FIELDS),
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
        f"judged per unit of work; work moved with the time flat: workload_changed until the "
        f"baseline is at the new work. A change of {', '.join(p.segment_fields)} starts a new segment "
        f"(environment_change, no comparison that night). Each app's total GPU time is a series too "
        f"(same rule); kernels fused, split or renamed with the app total not risen: moved."
    )
