"""Nsight Compute's own findings (its rule results) beside our verdict.

An ``.ncu-rep`` stores, per launch, the results of the rules ncu ran when it captured the report
(``IAction.rule_results_as_dicts()`` of NVIDIA's ``ncu_report``): a message ("High Memory
Throughput", "Long Scoreboard Stalls", ...) and, for many optimisation hints, an estimated speedup
in % of the launch's run time, *global* (the whole kernel) or *local* (the hardware unit the rule
looks at). They are read here into one JSON text per launch (counters column ``ncu_rules``) and
aggregated per kernel (kernels columns ``ncu_rules`` and ``ncu_speedup_pct``).

The speedups are ncu's estimates, not ours: different rules overlap (a stall and the issue slots
they leave empty are one cause seen twice), so they are never added up; the page shows the largest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

# ncu_report.MsgType: only what a rule says is worth doing or wrong; OK and NONE results are noise.
MESSAGE_TYPES = {2: "optimization", 3: "warning", 4: "error"}
SPEEDUP_TYPES = {1: "local", 2: "global"}
KEEP_PER_KERNEL = 8  # rules kept per kernel, largest estimated speedup first


def launch_rules(action) -> str:
    """The rule results of one ``ncu_report`` action as JSON text ("" where it has none).

    Each entry: ``rule`` (identifier), ``section``, ``title``, ``message`` (ncu's text, its
    ``@section:...@`` links reduced to their label), ``type`` (optimization, warning, error),
    ``speedup_pct`` (ncu's estimate, % of the launch's time, or null) and ``speedup_type``.
    """
    try:
        # the results themselves, not rule_results_as_dicts(): that also converts every rule's
        # focus metrics and result tables, which are not read here
        results = action.rule_results()
    except Exception:  # reports older than rule results, or a module build without them
        return ""
    rules = []
    for result in results:
        message = result.rule_message() or {}
        kind = MESSAGE_TYPES.get(message.get("type"))
        text = _plain(message.get("message") or "")
        if kind is None or not text:
            continue
        estimate = (result.speedup_estimation() if result.has_speedup_estimation() else None) or {}
        speedup = estimate.get("speedup")
        rules.append({
            "rule": result.rule_identifier() or "", "section": result.section_identifier() or "",
            "title": message.get("title") or result.name() or "", "message": text, "type": kind,
            "speedup_pct": float(speedup) if speedup is not None and np.isfinite(speedup) else None,
            "speedup_type": SPEEDUP_TYPES.get(estimate.get("type"), ""),
        })
    return json.dumps(rules, ensure_ascii=False) if rules else ""


def _plain(text: str) -> str:
    """ncu's links as their label, for a page or a terminal: ``@section:Id:Label@`` and
    ``@url:Label:https://...@`` become ``Label``, ``@metric:name@`` becomes ``name``."""
    def label(match: re.Match) -> str:
        kind, rest = match.group(1), match.group(2)
        if kind == "url":
            return rest.split(":", 1)[0]
        return rest.rsplit(":", 1)[-1] if kind == "section" else rest
    return _LINK.sub(label, text).strip()


_LINK = re.compile(r"@(section|url|metric|rule|sass|source):([^@]*)@")


def kernel_rules(rules: Sequence[str], durations: Sequence[float], group: np.ndarray, n_groups: int
                 ) -> tuple[list[str], np.ndarray]:
    """Per kernel: its launches' rules as one JSON text, and the largest estimated speedup [%].

    A rule's speedup for the kernel is the time-weighted mean of its launches' estimates, a launch
    where the rule did not fire counting 0 (ncu saw nothing to gain there); the launches of a kernel
    with a launch of no duration weigh equally (each kernel on its own: another kernel's, or another
    app's, missing durations change nothing here). The message is that of the longest launch where
    the rule fired.
    """
    weight = np.asarray(pd.to_numeric(pd.Series(durations), errors="coerce"), dtype=float)
    group = np.asarray(group)
    usable = np.isfinite(weight) & (weight > 0)
    whole = np.ones(n_groups, dtype=bool)
    np.logical_and.at(whole, group, np.isfinite(weight))
    any_positive = np.zeros(n_groups, dtype=bool)
    np.logical_or.at(any_positive, group, usable)
    weight = np.where((whole & any_positive)[group], weight, 1.0)
    total = np.zeros(n_groups)
    np.add.at(total, group, weight)
    found: list[dict[str, dict]] = [{} for _ in range(n_groups)]
    per_launch = np.asarray(rules, dtype=object)
    fired = np.flatnonzero(per_launch != "")  # most launches of most reports: none
    for text, g, w in zip(per_launch[fired], group[fired], weight[fired]):
        for rule in json.loads(text):
            key = rule["rule"] + "\x00" + rule["title"]
            entry = found[g].setdefault(key, {**rule, "speedup_pct": None, "_w": -1.0, "_sum": 0.0, "launches": 0})
            entry["launches"] += 1
            if rule["speedup_pct"] is not None:
                entry["_sum"] += rule["speedup_pct"] * w
                entry["speedup_pct"] = 0.0
            if w > entry["_w"]:
                entry.update(message=rule["message"], type=rule["type"], speedup_type=rule["speedup_type"], _w=w)
    texts, top = [], np.full(n_groups, np.nan)
    for g, entries in enumerate(found):
        kept = []
        for entry in entries.values():
            if entry["speedup_pct"] is not None:
                entry["speedup_pct"] = round(entry["_sum"] / total[g], 2)
            kept.append({k: v for k, v in entry.items() if not k.startswith("_")})
        kept.sort(key=lambda r: (-(r["speedup_pct"] or -1.0), r["type"] != "optimization", r["rule"]))
        speedups = [r["speedup_pct"] for r in kept if r["speedup_pct"] is not None]
        top[g] = max(speedups) if speedups else np.nan
        texts.append(json.dumps(kept[:KEEP_PER_KERNEL], ensure_ascii=False) if kept else "")
    return texts, top


def parse_rules(text: str) -> list[dict]:
    """The rules of a ``ncu_rules`` cell (empty list for an empty or damaged cell)."""
    if not text:
        return []
    try:
        rules = json.loads(text)
    except ValueError:
        return []
    return rules if isinstance(rules, list) else []
