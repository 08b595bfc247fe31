"""Each app's total GPU time as a series of its own, and GPU time that moved between an app's kernels.

A fusion, a split or a rename moves GPU time between the kernels of an app: kernel by kernel it
reads as a ``missing`` and a ``new`` (or, for a kernel followed through the change by
:mod:`roofline.nightly.kernel_match`, as a step against another kernel's baseline). Whether the app
got slower is said by its total GPU time. So, each night:

- :func:`total_rows`: per app, device and settings, the sum of its kernels' GPU time as one more
  row, the series ``(app total)`` (:data:`APP_TOTAL`), judged by the same rule as a kernel series
  (:class:`roofline.nightly.series_rule.SeriesState`): its regressions are regressions. An app of
  one kernel has none (the kernel is the total) until a night with two kernels; from then on it
  keeps it;
- :func:`find_moves`, before tonight is judged: the apps whose kernels changed, i.e. kernels gone
  since the app's last night, kernels new tonight and kernels followed through a change of their
  key, time leaving some and reaching others;
- :func:`settle_moves`, after: where the app's total has a verdict, those kernels' records say
  ``moved`` ("moved: A and B fused into C, app total −3.0 %") instead of ``missing`` and ``new``;
  a followed kernel's baseline starts again from tonight, a gone kernel is not reported missing on
  later nights. When the total rose, its ``regression`` is the finding, and its note names the
  kernels that carry the rise (also without a move).
"""

from __future__ import annotations

import math
from collections.abc import Container, Mapping, MutableMapping
from dataclasses import dataclass, field

from roofline.metrics.units import si
from roofline.nightly.series_rule import SeriesState, join_note
from roofline.nightly.stats import median_finite, number

APP_TOTAL = "(app total)"  # the kernel of an app total's series key; no kernel is named so
APP_TOTAL_SHORT = "app total"
# An app total has no work or roof of its own (a fusion changes the counted work, not the app), and
# no launch resources.
_NO_WORK = ("flop", "flop_total", "dram_bytes", "performance", "roof_pct", "ai_dram", "roof_flops",
            "roof_dram_bw", "ridge_ratio", "registers_per_thread", "shared_mem_bytes")
# The labels of a total that weighed tonight against a baseline.
_JUDGED = ("regression", "improvement", "suspicious", "outlier", "unchanged")
MAX_CARRIERS = 5  # kernels named in an app total's regression


def scope(key: tuple[str, ...]) -> tuple[str, ...]:
    """The app, device and settings of a series key (app, device, kernel, grid, block, settings...)."""
    return (key[0], key[1], *key[5:])


def total_key(where: tuple[str, ...]) -> tuple[str, ...]:
    """The series key of the app total of ``where`` (:func:`scope`)."""
    return (where[0], where[1], APP_TOTAL, "", "", *where[2:])


def is_total(key: tuple[str, ...]) -> bool:
    """Whether a series key is an app total's."""
    return key[2] == APP_TOTAL


def total_rows(tonight: Mapping[tuple[str, ...], dict],
               tracked: Container[tuple[str, ...]]) -> dict[tuple[str, ...], dict]:
    """Tonight's app totals as history rows, by series key: per app, device and settings with two
    kernels or more tonight, or whose total is ``tracked`` already.

    A total's row is its app's first kernel row (the run context: segment fields, settings, commit)
    with one launch of the summed GPU time [s], a time share of 1 and no work. A kernel without a
    valid duration tonight leaves the total without one: a total missing a kernel would read as an
    improvement.
    """
    groups: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for key in tonight:
        if not is_total(key):
            groups.setdefault(scope(key), []).append(key)
    out = {}
    for where, keys in groups.items():
        key = total_key(where)
        if len(keys) < 2 and key not in tracked:
            continue
        rows = [tonight[k] for k in sorted(keys)]  # the context of the first in key order
        durations = [number(r.get("duration_s")) for r in rows]
        total = sum(durations) if all(d > 0 for d in durations) else math.nan
        row = {**rows[0], "kernel": APP_TOTAL, "kernel_short": APP_TOTAL_SHORT, "grid": "", "block": "",
               "launches": 1, "duration_s": total, "time_share": 1.0, "bound": "", "bound_kind": "",
               "sm_clock_hz": median_finite([number(r.get("sm_clock_hz")) for r in rows])}
        row.update(dict.fromkeys(_NO_WORK, math.nan))
        out[key] = row
    return out


@dataclass
class Move:
    """Kernels of one app that changed tonight: ``gone`` (absent tonight, present on the app's last
    night), ``followed`` (carried on under a new key tonight; ``was``: their short name before) and
    ``new``; ``before_s``: the GPU time per night [s] of each gone or followed series before tonight
    (median of its last nights, times its launches)."""

    total: tuple[str, ...]
    gone: list[tuple[str, ...]] = field(default_factory=list)
    followed: list[tuple[str, ...]] = field(default_factory=list)
    new: list[tuple[str, ...]] = field(default_factory=list)
    was: dict[tuple[str, ...], str] = field(default_factory=dict)
    before_s: dict[tuple[str, ...], float] = field(default_factory=dict)

    @property
    def moved_time(self) -> bool:
        """Time left some kernels and reached others: gone or followed kernels, and new or followed
        ones, not only followed ones (a rename alone is judged kernel by kernel)."""
        return bool((self.gone or self.new) and (self.gone or self.followed) and (self.new or self.followed))


def _commit(row: Mapping) -> str:
    return str(row.get("app_commit") or "")


def _time_before(state: SeriesState) -> float:
    """A series' GPU time per night before tonight [s]: median per launch times its last launches."""
    per_launch = median_finite([n["value"] for n in state.nights[-state.p.window:]])
    return per_launch * number(state.template.get("launches"))


def find_moves(series: Mapping[tuple[str, ...], SeriesState],
               tonight: Mapping[tuple[str, ...], dict]) -> dict[tuple[str, ...], Move]:
    """The apps whose kernels changed tonight (before any is judged; after the kernels were
    followed), of an app whose total has a history: kernels gone, new or followed (gone or new only
    where the app's commit changed since its last night, or is not known). Their totals
    are judged as a code change (a violation is a verdict at once); :attr:`Move.moved_time` says
    whether time moved between kernels (a kernel added or removed alone moved none)."""
    last = {scope(k): s.last_i for k, s in series.items() if is_total(k) and k in tonight}
    if not last:
        return {}
    moves = {where: Move(total_key(where)) for where in last}
    # the same app commit on both nights (both known): the code did not change, so a kernel absent
    # tonight (a failed profile) or appearing (back from one) is missing or new, not moved
    same_code = {where for where in last if _commit(tonight[total_key(where)])
                 and _commit(tonight[total_key(where)]) == _commit(series[total_key(where)].template)}
    for key, state in series.items():
        where = scope(key)
        if where not in moves or is_total(key):
            continue
        move = moves[where]
        if key not in tonight and state.last_i == last[where] and where not in same_code:
            move.gone.append(key)
        elif key in tonight and state.followed is not None:
            move.followed.append(key)
            move.was[key] = str(state.template.get("kernel_short") or state.followed[1][2])
        else:
            continue
        move.before_s[key] = _time_before(state)
    for key in tonight:
        where = scope(key)
        if where in moves and key not in series and not is_total(key) and where not in same_code:
            moves[where].new.append(key)
    changed = {where: m for where, m in moves.items() if m.gone or m.new or m.followed}
    for m in changed.values():  # in key order: the series' order differs between a replay and the state
        m.gone.sort()
        m.followed.sort()
        m.new.sort()
    return changed


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def describe(sources: list[str], targets: list[str]) -> str:
    """A move in words: "A and B fused into C", "A split into B and C", "A became B", "A, B → C, D"."""
    if len(sources) > 1 and len(targets) == 1:
        return f"{_names(sources)} fused into {targets[0]}"
    if len(sources) == 1 and len(targets) > 1:
        return f"{sources[0]} split into {_names(targets)}"
    if len(sources) == 1:
        return f"{sources[0]} became {targets[0]}"
    return f"{', '.join(sources)} → {', '.join(targets)}"


def _short(rec: Mapping) -> str:
    return str(rec.get("kernel_short") or rec.get("kernel", ""))[:80]


def _pct(x: float) -> str:
    return f"{x:+.1%}".replace("%", " %").replace("-", "−")


def _night_s(rec: Mapping) -> float:
    return number(rec.get("value_s")) * number(rec.get("launches"))


def settle_moves(moves: Mapping[tuple[str, ...], Move], keys: list[tuple[str, ...]], records: list[dict],
                 series: MutableMapping[tuple[str, ...], SeriesState], run_id: str) -> None:
    """Tonight's records (``keys``: their series, in order) after the moves: see the module's
    docstring. Changes the records and ``series`` in place."""
    place = {k: j for j, k in enumerate(keys)}
    carried: dict[tuple[str, ...], list[tuple[float, str]]] = {}  # a total's scope -> (Δ s, what)
    for where, move in moves.items():
        total = records[place[move.total]]
        if not move.moved_time or total["label"] not in _JUDGED:
            continue  # no verdict on the app: the kernels' own findings stand
        sources = [*move.gone, *move.followed]
        targets = [*move.followed, *move.new]
        what = describe([move.was.get(k) or _short(records[place[k]]) for k in sources],
                        [_short(records[place[k]]) for k in targets])
        text = f"moved: {what}, app total {_pct(number(total['ratio']) - 1)}"
        delta = sum(_night_s(records[place[k]]) for k in targets) - sum(move.before_s[k] for k in sources)
        carried.setdefault(where, []).append((delta, what))
        for key in [*move.gone, *move.followed, *move.new]:
            rec = records[place[key]]
            said = rec["note"] if key in move.followed else ""  # how it was matched, and its name before
            rec.update(label="moved", revised_label="moved", direction="", ratio=math.nan, z=math.nan,
                       impact=0.0, noise_s=math.nan, lower_s=math.nan, upper_s=math.nan, limit_rel=math.nan,
                       nights_in_violation=0, note=join_note(said, text))
            if key in move.followed:
                rec["baseline_s"] = math.nan  # another kernel's time
                series[key].restart(run_id)
                rec.update(segment=series[key].seg, segment_start=series[key].seg_start)
        for key in move.gone:
            del series[key]  # its time is elsewhere now: not missing on the next nights
        if total["label"] != "regression":
            total["note"] = join_note(total["note"], text)
    _name_carriers(keys, records, carried)


def _name_carriers(keys: list[tuple[str, ...]], records: list[dict],
                   carried: dict[tuple[str, ...], list[tuple[float, str]]]) -> None:
    """The note of each app total that regressed tonight: the kernels (and moves) whose GPU time
    rose, largest first."""
    risen = {scope(k): j for j, k in enumerate(keys)
             if is_total(k) and records[j]["label"] == "regression" and records[j]["direction"] == "up"}
    if not risen:
        return
    young: dict[tuple[str, ...], list[tuple[float, str]]] = {}  # kernels without a baseline yet
    for key, rec in zip(keys, records, strict=True):
        where = scope(key)
        if where not in risen or is_total(key):
            continue
        if rec["label"] in ("regression", "suspicious") and rec["direction"] == "up":
            delta = _night_s(rec) - number(rec["baseline_s"]) * number(rec["launches"])
            carried.setdefault(where, []).append((delta, _short(rec)))
        elif rec["label"] in ("new", "insufficient_data"):
            young.setdefault(where, []).append((_night_s(rec), _short(rec)))
    for where, j in risen.items():
        total = records[j]
        up = sorted(((d, w) for d, w in carried.get(where, []) if d > 0), key=lambda c: -c[0])
        by = ", ".join(f"{w} (+{si(d, 's')} per night)" for d, w in up[:MAX_CARRIERS])
        if not by:  # e.g. the nights after a fusion: the fused kernel has no baseline of its own yet
            recent = sorted(young.get(where, []), key=lambda c: -c[0])[:MAX_CARRIERS]
            by = ("kernels too new to judge: " + ", ".join(f"{w} ({si(t, 's')} per night)" for t, w in recent)
                  if recent else "no single kernel")
        total["note"] = join_note(total["note"], f"app total {_pct(number(total['ratio']) - 1)}, carried by: {by}")
