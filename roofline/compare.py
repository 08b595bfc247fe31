"""Trajectories: the same code measured several times (before/after an optimisation, v1..v8 of a
kernel, a problem-size sweep), each kernel followed across the steps.

A *step* is one app (one report); the steps of a series are judged together by
:func:`roofline.api.analyse` (one ceilings table per device), so a kernel that moved did so against
the same roofs. Kernels are matched across steps by :func:`roofline.nightly.kernel_match.match_kernels`,
the rule the nightly tracking follows kernels by: the full name, the series' explicit ``rename``
map, then weaker evidence (kernel class, launch configuration, function name), each match made
on weaker evidence saying so (``matched_by``).

:func:`step_points` gives one row per kernel and step (its place on the roofline: the intensity at
the level its verdict used, its performance); :func:`moves` one row per kernel and pair of
consecutive steps it is in (before, after, ratio), the table ``roofline compare`` prints and the
compare page shows. A kernel in only some steps says so in ``presence``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from roofline.metrics.quantities import MEMORY_LEVELS
from roofline.nightly.kernel_match import compile_rename, match_kernels, renamed
from roofline.parse.kernel_names import kernel_function_name

# What moved, per kernel: each of these before and after, and (numbers) their ratio after / before.
MOVED = ["ai", "performance", "roof_pct", "duration_s"]
TEXT_MOVED = ["app", "device", "bound", "level", "kernel", "kernel_short"]
STEP_COLUMNS = ["match", "config", "matched_by", "step", "app", "kernel", "kernel_short", "grid", "block", "device",
                "launches",
                "bound", "compute_class", "level", "ai", "performance", "attainable", "roof_pct", "duration_s",
                "time_share", "steps_present", "presence"]
# The machine-readable columns of ``roofline compare --format csv|json`` (SI base units, as show's).
MOVE_COLUMNS = [
    "match", "kernel_short", "config", "presence", "matched_by", "step_before", "step_after",
    *(f"{f}_{side}" for f in TEXT_MOVED for side in ("before", "after")),
    *(f"{f}_{side}" for f in MOVED for side in ("before", "after", "ratio")),
    "time_share_before", "time_share_after",
]


class SeriesError(ValueError):
    """A series that cannot be compared; the message names it and the fix."""


def check_rename(rename: Mapping[str, str]) -> dict[str, re.Pattern]:
    """The ``rename`` patterns compiled.

    Raises
    ------
    SeriesError
        Naming a pattern that is not a regular expression.
    """
    out = {}
    for pattern in rename:
        try:
            out[pattern] = re.compile(pattern)
        except re.error as exc:
            raise SeriesError(f"rename pattern {pattern!r} is not a regular expression ({exc})") from None
    return out


def point_level(binding_level: pd.Series) -> pd.Series:
    """The memory level a kernel's point sits on: its busiest level (the bound's level for a
    memory-bound kernel; for the others the one whose intensity places it under its compute roof)."""
    level = binding_level.astype("string").fillna("").astype(object)
    return level.where(level.isin(MEMORY_LEVELS), "")


def step_points(kernels: pd.DataFrame, steps: Sequence[str], rename: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One row per kernel of the ``steps`` (app names, in order), with the key it is matched by.

    Each step's kernels are matched to the kernels of the steps before it by
    :func:`roofline.nightly.kernel_match.match_kernels` (the full name, the explicit ``rename`` map:
    pattern -> replacement, :func:`re.sub` on the full name, in order; then weaker evidence:
    kernel class, launch configuration, function name); ``matched_by`` says how a kernel was
    matched to its previous step when that was not by its name. ``match`` is the function name of
    the kernel's first name (after ``rename``), or that full name where two kernels share the
    function; ``config`` is ``grid × block`` where they share that too, else empty. ``ai`` is the
    intensity at ``level``, the level the verdict used; ``steps_present`` lists the steps the kernel
    is in, ``presence`` says it in words.

    Raises
    ------
    SeriesError
        For a step that is not an app of ``kernels``, a step given twice, or a bad rename pattern.
    """
    steps = list(steps)
    if len(set(steps)) != len(steps):
        raise SeriesError(f"steps {steps}: a step is given twice; list each app once, in order")
    present = set(kernels["app"].unique())
    missing = [s for s in steps if s not in present]
    if missing:
        raise SeriesError(f"steps {missing} have no kernel (not analysed, or not an app name); the apps are "
                          f"{sorted(present)}")
    check_rename(rename or {})
    k = kernels[kernels["app"].isin(steps)].reset_index(drop=True)
    k = k.assign(step=k["app"].map({a: i + 1 for i, a in enumerate(steps)}).astype(int))
    chain, why = _chains(k, len(steps), rename or {})
    # each kernel's label: the function name of its chain's first name (after the rename), its full
    # name where two chains share that function, then the launch configuration too
    first = k.assign(_c=chain).sort_values("step", kind="stable").groupby("_c", sort=False).head(1)
    patterns = compile_rename(rename)
    names = first["kernel"].astype(str).map(lambda n: renamed(n, patterns))
    label = pd.Series([kernel_function_name(n) for n in names], index=names.index)
    label = label.where(~label.duplicated(keep=False), names)
    config = (first["grid"].astype(str) + " × " + first["block"].astype(str)).where(label.duplicated(keep=False), "")
    twice = (label + config).duplicated(keep=False)  # two chains from one launch configuration: their first step
    config = config.where(~twice, config + " (from step " + first["step"].astype(str) + ")")
    by_chain = pd.DataFrame({"match": label.to_numpy(), "config": config.to_numpy()}, index=chain[first.index])
    k = k.assign(matched_by=why, match=by_chain["match"].reindex(chain).to_numpy(),
                 config=by_chain["config"].reindex(chain).to_numpy()).copy()  # one insert: the table is wide
    k["level"] = point_level(k["binding_level"])
    ai = np.select([k["level"] == lv for lv in MEMORY_LEVELS], [k[f"ai_{lv}"] for lv in MEMORY_LEVELS], np.nan)
    k["ai"] = np.where(ai > 0, ai, np.nan)
    performance = pd.to_numeric(k["performance"], errors="coerce")
    k["performance"] = performance.where(performance > 0)
    present = k.groupby(["match", "config"])["step"].transform(lambda s: ",".join(map(str, sorted(s))))
    k["steps_present"] = present
    every = ",".join(map(str, range(1, len(steps) + 1)))
    k["presence"] = [("every step" if p == every else f"only in step{'s' if ',' in p else ''} "
                      f"{p.replace(',', ', ')} of {len(steps)}") for p in present]
    order = k.groupby(["match", "config"])["duration_s"].transform("max")  # longest kernels first
    k = k.assign(_order=order).sort_values(["_order", "match", "config", "step"], ascending=[False, True, True, True],
                                           na_position="last", kind="stable")
    return k[STEP_COLUMNS].reset_index(drop=True)


def _chains(k: pd.DataFrame, n_steps: int, rename: Mapping[str, str]) -> tuple[pd.Series, pd.Series]:
    """Each row's chain (one kernel followed across the steps) and how it was matched to the chain's
    previous row: step by step, each step's kernels against the last row of every chain so far."""
    chain = pd.Series(-1, index=k.index)
    why = pd.Series("", index=k.index, dtype=object)
    last: dict[int, int] = {}  # chain -> the label of its last row
    for step in range(1, n_steps + 1):
        rows = k.index[k["step"] == step]
        owner = {row: c for c, row in last.items()}
        pairs = match_kernels(k.loc[list(last.values())], k.loc[rows], rename)
        for b, a, text in zip(pairs["before"], pairs["after"], pairs["why"], strict=True):
            chain[a], why[a] = owner[b], text
            last[owner[b]] = a
        for a in rows:
            if chain[a] < 0:
                chain[a] = len(last)
                last[len(last)] = a
    return chain, why


def moves(points: pd.DataFrame) -> pd.DataFrame:
    """What moved: one row per kernel and pair of consecutive steps it is in (``step_before`` ->
    ``step_after``), each quantity before, after and ``_ratio`` = after / before. A kernel in one
    step only is one row with the other side empty: after empty for a kernel only in the first
    step (gone), before empty otherwise (new)."""
    rows = []
    for (match, config), group in points.groupby(["match", "config"], sort=False):
        g = group.sort_values("step").to_dict("records")
        pairs = list(zip(g, g[1:])) if len(g) > 1 else [(g[0], None) if g[0]["step"] == 1 else (None, g[0])]
        for before, after in pairs:
            one = before or after
            row = {"match": match, "kernel_short": one["kernel_short"], "config": config,
                   "presence": one["presence"], "matched_by": after["matched_by"] if before and after else "",
                   "step_before": before["step"] if before else np.nan,
                   "step_after": after["step"] if after else np.nan}
            for f in TEXT_MOVED:
                row[f"{f}_before"] = before[f] if before else ""
                row[f"{f}_after"] = after[f] if after else ""
            for f in [*MOVED, "time_share"]:
                b = float(before[f]) if before else np.nan
                a = float(after[f]) if after else np.nan
                row[f"{f}_before"], row[f"{f}_after"] = b, a
                if f != "time_share":
                    row[f"{f}_ratio"] = a / b if np.isfinite(a) and np.isfinite(b) and b > 0 else np.nan
            rows.append(row)
    frame = pd.DataFrame(rows, columns=MOVE_COLUMNS)
    for side in ("before", "after"):
        frame[f"step_{side}"] = frame[f"step_{side}"].astype("Int64")
    return frame


# -- in words (the CLI's table and markdown, the compare page) -------------------------------------

MOVE_HEADERS = ["kernel", "steps", "in", "bound", "% of roof", "AI [FLOP/B]", "performance", "GPU time"]
MOVE_TEXT = (0, 1, 2, 3)  # the left-aligned (text) columns


def _arrow(before: str, after: str) -> str:
    if not before or not after:
        return before or after or "–"
    return before if before == after else f"{before} → {after}"


def _times(ratio: float) -> str:
    return f" ×{ratio:.3g}" if np.isfinite(ratio) else ""


def move_cells(frame: pd.DataFrame) -> list[list[str]]:
    """Each move in words: ``before → after`` and ``×ratio``, one list of :data:`MOVE_HEADERS` cells per row."""
    from roofline.charts.roofs import LEVEL_LABEL
    from roofline.metrics.units import si

    def num(value: float, unit: str) -> str:
        return si(value, unit) if np.isfinite(value) else ""

    rows = []
    for r in frame.to_dict("records"):
        b, a = r["step_before"], r["step_after"]
        steps = (f"{b} → {a}" if not pd.isna(b) and not pd.isna(a) else
                 f"{b} (gone after)" if not pd.isna(b) else f"{a} (new)")
        levels = [LEVEL_LABEL.get(r[f"level_{s}"], "") for s in ("before", "after")]
        one_level = levels[0] == levels[1] or not (levels[0] and levels[1])
        ai = [f"{r[f'ai_{s}']:.3g}" if np.isfinite(r[f"ai_{s}"]) else "" for s in ("before", "after")]
        if one_level:
            level = levels[0] or levels[1]
            ai_text = _arrow(*ai) + (f" ({level})" if level and any(ai) else "")
        else:
            ai_text = _arrow(*(f"{v} ({lv})" if v else "" for v, lv in zip(ai, levels)))
        pct = [f"{r[f'roof_pct_{s}']:.1f}" if np.isfinite(r[f"roof_pct_{s}"]) else "" for s in ("before", "after")]
        name = _arrow(r["kernel_short_before"], r["kernel_short_after"]) + (f" {r['config']}" if r["config"] else "")
        rows.append([
            name, steps, r["presence"] + (f"; {r['matched_by']}" if r["matched_by"] else ""),
            _arrow(r["bound_before"], r["bound_after"]),
            (_arrow(*pct) + " %" if any(pct) else "–") + _times(r["roof_pct_ratio"]),
            (ai_text if any(ai) else "–") + _times(r["ai_ratio"]),
            _arrow(num(r["performance_before"], "FLOP/s"), num(r["performance_after"], "FLOP/s"))
            + _times(r["performance_ratio"]),
            _arrow(num(r["duration_s_before"], "s"), num(r["duration_s_after"], "s")) + _times(r["duration_s_ratio"]),
        ])
    return rows
