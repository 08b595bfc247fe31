"""The kernels table: an app's launches summed per kernel (function x launch configuration) and
classified by the same rule as single launches (:func:`roofline.classify.launches.classify_frame`).

Aggregates per kernel are total work / total time and total work / total bytes, never means of
ratios (../shared/guides/roofline.md).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from roofline.classify.instruction import issue_peak_ips
from roofline.classify.launches import REPLAY_FIX, classify_frame
from roofline.metrics.quantities import COMPUTE_CLASSES, MEMORY_LEVELS
from roofline.parse.readers.ncu_rules import kernel_rules
from roofline.tables.schemas import KERNEL_KEY, KERNELS, LAUNCH_RESOURCES, conform


def aggregate_kernels(counters: pd.DataFrame, ceilings: pd.DataFrame, **options) -> pd.DataFrame:
    """Per kernel (function x launch configuration in one app): sums, shares, verdict, priority.

    Work, bytes and time are summed over the same launches: those that have every quantity some
    launch of the kernel has (a launch lacking one is left out rather than counted as zero);
    ``launches_used`` says how many, and the note names what the others lacked.
    """
    if counters.empty:
        return conform(pd.DataFrame(), "kernels")
    quantities = [f"flop_{c}" for c in COMPUTE_CLASSES] + [f"{lv}_bytes" for lv in MEMORY_LEVELS]
    quantities += ["duration_s", "tensor_pipe_active_pct"]
    sums = [*quantities, "flop_tensor", "algorithmic_flop", "algorithmic_bytes", "warp_instructions",
            "tensor_instructions"]
    # only the columns the sums and verdicts read: a copy of every counters column costs more than the rest
    wanted = [*KERNEL_KEY, *sums, "kernel_short", "missing", "convention", "ncu_rules", "compute_capability",
              "sm_count", "sm_clock_hz", "issue_peak_ips", "replay_failed", "tensor_instructions_recipe",
              *LAUNCH_RESOURCES]
    frame = counters[list(dict.fromkeys(c for c in wanted if c in counters.columns))].copy()
    for key in KERNEL_KEY:
        frame[key] = frame[key].astype("string").fillna("")
    # the kernels, numbered in order of first launch; every sum below groups by that number
    group = frame.groupby(KERNEL_KEY, sort=False, dropna=False).ngroup().to_numpy()
    n_kernels = int(group.max()) + 1
    first_launch = np.unique(group, return_index=True)[1]
    present = frame[quantities].notna().to_numpy()
    somewhere = _any_per_group(present, group, n_kernels)
    lacking = somewhere[group] & ~present
    # a launch ncu recorded no values for (failed replay) is never used; its note says so apart
    failed = frame["replay_failed"].fillna(False).to_numpy(dtype=bool) if "replay_failed" in frame else \
        np.zeros(len(frame), dtype=bool)
    group_lacks = _any_per_group(lacking & ~failed[:, None], group, n_kernels)  # per kernel (ngroup order)
    complete = ~lacking.any(axis=1) & ~failed
    used = frame[sums].to_numpy(dtype="float64", copy=True)
    used[~complete] = np.nan
    totals_of_used = pd.DataFrame(used, columns=sums).groupby(group, sort=False)
    summed = totals_of_used.sum(min_count=1).to_numpy()
    first = frame[KERNEL_KEY].iloc[first_launch]
    totals = pd.DataFrame({
        **{key: first[key].array for key in KERNEL_KEY},
        **{name: summed[:, i] for i, name in enumerate(sums)},
        "tensor_pipe_active_pct": totals_of_used["tensor_pipe_active_pct"].max().to_numpy(),
        "launches": np.bincount(group, minlength=n_kernels),
        "launches_used": np.bincount(group, weights=complete, minlength=n_kernels).astype(np.int64),
    })
    failed_launches = np.bincount(group, weights=failed, minlength=n_kernels).astype(np.int64)
    totals["replay_failed"] = failed_launches == totals["launches"].to_numpy()
    for column in ("kernel_short", "missing", "convention", "tensor_instructions_recipe",
                   *LAUNCH_RESOURCES):  # the first launch's
        if column in frame.columns:
            totals[column] = frame[column].groupby(group, sort=False).first().to_numpy()
    time_all = frame["duration_s"].groupby(group, sort=False).sum(min_count=1).to_numpy()
    # One issue roof per device (the median over its launches), as the other roofs are one per device.
    issue_peak = pd.Series(issue_peak_ips(frame), index=frame.index)
    totals["issue_peak_ips"] = issue_peak.groupby(frame["device"]).transform("median").to_numpy()[first_launch]
    if "ncu_rules" in frame.columns:
        totals["ncu_rules"], totals["ncu_speedup_pct"] = kernel_rules(
            frame["ncu_rules"].fillna("").astype(str).tolist(), frame["duration_s"], group, len(totals))
    classified = classify_frame(totals, ceilings, **options)
    app_time = pd.Series(time_all, index=classified.index).groupby(classified["app"]).transform("sum")
    classified["time_share"] = time_all / app_time
    partial = (classified["launches_used"] < classified["launches"]).to_numpy()
    notes = classified["note"].to_numpy(dtype=object)
    for i in np.flatnonzero(partial & (failed_launches < classified["launches"].to_numpy())):
        used_n, all_n = int(classified["launches_used"].iat[i]), int(classified["launches"].iat[i])
        lacks = ", ".join(q for q, miss in zip(quantities, group_lacks[i]) if miss)
        parts = [f"the others lack {lacks}"] if lacks else []
        if failed_launches[i]:
            parts.insert(0, f"ncu recorded no values for {failed_launches[i]} of them, so the time share counts "
                            f"only the other {all_n - failed_launches[i]} (failed replay: {REPLAY_FIX})")
        text = f"totals over {used_n} of {all_n} launches: " + "; ".join(parts)
        notes[i] = f"{text}; {notes[i]}" if notes[i] else text
    classified["note"] = notes
    roof = (classified["roof_pct"] / 100).clip(upper=1.0)
    classified["priority"] = classified["time_share"] * (1 - roof)
    # kernels without a verdict sort by their time share, first among equals: unjudged time is news
    classified["_rank"] = classified["priority"].fillna(classified["time_share"])
    classified = classified.sort_values("_rank", ascending=False, na_position="last")
    columns = [c.name for c in KERNELS]
    return conform(classified[[c for c in classified.columns if c in columns]], "kernels")


def _any_per_group(flags: np.ndarray, group: np.ndarray, groups: int) -> np.ndarray:
    """Per group (``groups`` rows) and column of ``flags`` (rows x columns), whether any row of the
    group has the flag: ``np.logical_or.at`` as one count per column (``ufunc.at`` goes element by
    element)."""
    return np.column_stack([np.bincount(group, weights=flags[:, j], minlength=groups) > 0
                            for j in range(flags.shape[1])]).reshape(groups, flags.shape[1])


# -- judged over a run: several apps shown together (the summary page, ``roofline show a b``) --------

RUN_FIELDS = ["run_share", "saving_s", "run_priority"]  # the columns of :func:`run_ranking`


def savings_at_roof(kernels: pd.DataFrame) -> pd.Series:
    """GPU time [s] each kernel would save at its binding roof: ``duration_s - predicted_duration_s``
    (its totals over the launches used), 0 at or above the roof, NaN where either is unknown."""
    def number(name: str) -> pd.Series:
        if name not in kernels:
            return pd.Series(np.nan, index=kernels.index)
        return pd.to_numeric(kernels[name], errors="coerce").astype(float)

    duration = number("duration_s")
    at_roof = number("predicted_duration_s")
    saving = (duration - at_roof).clip(lower=0.0)
    return saving.where(np.isfinite(duration) & np.isfinite(at_roof))


def run_ranking(kernels: pd.DataFrame) -> pd.DataFrame:
    """The kernels judged over the run they are shown with (every app of ``kernels`` together), as
    the summary's At a glance and ``roofline show`` rank them; one row per row of ``kernels``:

    - ``run_share``: the kernel's fraction of the run's GPU time (``time_share`` is of its own app's);
    - ``saving_s``: the GPU time [s] reaching its binding roof would save (:func:`savings_at_roof`);
    - ``run_priority``: that saving as a fraction of the run's GPU time, NaN without a verdict.

    Of one app, ``run_priority`` is its ``priority`` (time share x distance from the roof); across
    apps a share of a tiny app's time must not outrank milliseconds to gain in a long one.
    """
    duration = pd.to_numeric(kernels["duration_s"], errors="coerce").astype(float)
    run_time = float(duration.sum())
    priority = pd.to_numeric(kernels["priority"], errors="coerce").astype(float)
    judged = (kernels["bound_kind"] != "unknown") & priority.notna()
    saving = savings_at_roof(kernels).where(judged)
    if run_time > 0:
        share, ranked = duration / run_time, saving / run_time
    else:  # no measured time at all (what-if tables): the priorities are all there is
        share, ranked = pd.Series(np.nan, index=kernels.index), priority.where(judged)
    return pd.DataFrame({"run_share": share, "saving_s": saving, "run_priority": ranked}, index=kernels.index)


def run_order(kernels: pd.DataFrame, ranking: pd.DataFrame | None = None) -> pd.Index:
    """The index of ``kernels`` by run priority, highest first (ties: by ``priority``, then GPU time);
    a kernel without a verdict by its run share, first among equals (unjudged time is news);
    missing values last. ``ranking``: :func:`run_ranking` of ``kernels``, when already computed."""
    ranking = run_ranking(kernels) if ranking is None else ranking
    keys = pd.DataFrame({
        "_rank": ranking["run_priority"].fillna(ranking["run_share"]),
        "priority": pd.to_numeric(kernels["priority"], errors="coerce").astype(float),
        "duration_s": pd.to_numeric(kernels["duration_s"], errors="coerce").astype(float),
    }, index=kernels.index)
    return keys.sort_values(["_rank", "priority", "duration_s"], ascending=False, na_position="last",
                            kind="stable").index
