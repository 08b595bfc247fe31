"""Nightly regression decisions per kernel series, on the history store's table.

:func:`decide_all` replays every kernel series night by night with the layered rule of
../shared/guides/tracking.md §4.3 (robust median/MAD baseline, relative floor, 2-night
persistence, segments on environment changes and on changes of the counting conventions,
column ``convention``: "" for rows stored before it existed); :func:`decide` returns one night's rows.
Both advance an :class:`Engine` (every series' :class:`~roofline.nightly.series_rule.SeriesState` and the
night-level rule) one night at a time, as the nightly run does from its stored state
(:mod:`roofline.nightly.state`), so a night is decided the same way by either.
docs/tracking.md states the rule in words and the rates measured on the simulator.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from roofline.nightly.app_total import APP_TOTAL, find_moves, is_total, settle_moves, total_rows
from roofline.nightly.kernel_match import match_kernels
from roofline.nightly.params import DecisionParams
from roofline.nightly.series_rule import (
    USED,
    SeriesState,
    join_note,
)
from roofline.nightly.stats import number
from roofline.nightly.store import DECISION_COLUMNS, run_order
from roofline.tables.schemas import KERNEL_KEY, LAUNCH_RESOURCES

_COMPARED = ("regression", "improvement", "suspicious", "outlier", "unchanged")


# ------------------------------------------------------------------------------------- decisions
@dataclass
class Night:
    """One night's decisions: the records in series order (``keys``), and the revisions of earlier
    records that tonight's verdicts make: (run id, place in that night's records, revised label,
    series key)."""

    run_id: str
    keys: list[tuple[str, ...]]
    records: list[dict]
    revisions: list[tuple[str, int, str, tuple[str, ...]]]


class Engine:
    """Every series' rule state, advanced one night at a time, and the night-level rule.

    ``runs`` is the number of nights judged so far (tonight's place in the run order) and
    ``last_commit`` the app commits of the last of them (None before the first): the night-level
    rule compares tonight's commits with it.
    """

    def __init__(self, params: DecisionParams, series: dict[tuple[str, ...], SeriesState] | None = None,
                 runs: int = 0, last_commit: str | None = None) -> None:
        self.p = params
        self.keys = [*KERNEL_KEY, *params.settings]
        # the columns of a history row the rule reads
        self.columns = list(dict.fromkeys([*self.keys, *params.segment_fields, *USED, "run_date",
                                           "app_commit"]))
        self.series = {} if series is None else series
        self.runs, self.last_commit = runs, last_commit
        self._per_kernel: dict[str, DecisionParams] = {}

    def params_for(self, kernel: str) -> DecisionParams:
        """The parameters of one kernel's series (``per_kernel`` overrides applied), cached."""
        p = self._per_kernel.get(kernel)
        if p is None:
            p = self._per_kernel[kernel] = self.p.for_kernel(kernel)
        return p

    def rows(self, frame: pd.DataFrame) -> list[dict]:
        """The rows of a history frame as dicts of the columns the rule reads."""
        # plain Python objects: iterating Arrow-backed strings row by row is slow
        table = {c: frame[c].to_numpy(dtype=object).tolist() for c in self.columns if c in frame}
        return [dict(zip(table, values, strict=True)) for values in zip(*table.values(), strict=True)]

    def night(self, run_id: str, run_date: str, rows: list[dict]) -> Night:
        """Judge every series on one night (``rows``: that night's history rows, non-empty) and
        advance the state; a series seen before but absent tonight gets ``missing`` for a window."""
        night = self.judge_series(run_id, run_date, rows)
        commit = night_commit(row.get("app_commit", "") for row in rows)
        for j in night_level(night.records, commit, self.last_commit, self.p):
            pending = self.series[night.keys[j]].pending
            if pending is not None and pending["run_id"] == run_id:
                pending["pinned"] = True  # its record says suspicious whatever the next night says
        self.runs, self.last_commit = self.runs + 1, commit
        return night

    def judge_series(self, run_id: str, run_date: str, rows: list[dict]) -> Night:
        """:meth:`night` without the night-level rule: each series' record from its own state and
        row alone, and the revisions of the nights waiting for tonight's verdict. Leaves the night
        count and the app commits to the caller (:func:`roofline.nightly.state.rerun_changed_apps` judges a night's
        changed apps with it)."""
        tonight: dict[tuple[str, ...], dict] = {}
        for row in rows:  # a series twice in one night: its last row counts
            tonight[tuple(str(row.get(k, "")) for k in self.keys)] = row
        waiting = [(key, s.pending) for key, s in self.series.items()
                   if s.pending is not None and not s.pending.get("pinned")]
        i = self.runs
        self.follow(tonight, i)  # after ``waiting``: a revision names the series as its night stored it
        tonight.update(total_rows(tonight, self.series))
        moves = find_moves(self.series, tonight)
        changed_apps = {m.total for m in moves.values()}
        keys: list[tuple[str, ...]] = []
        records: list[dict] = []
        for key in sorted(self.series.keys() | tonight.keys()):
            state, row = self.series.get(key), tonight.get(key)
            if row is None:
                rec = state.absent(i, run_id, run_date)
                if rec is None:
                    continue
            else:
                if state is None:
                    state = self.series[key] = SeriesState(self.params_for(key[2]))
                rec = state.step(i, run_id, run_date, row, code_changed=key in changed_apps)
                if state.pending is not None and state.pending["run_id"] == run_id:
                    state.pending["row"] = len(records)
            keys.append(key)
            records.append(rec)
        settle_moves(moves, keys, records, self.series, run_id)
        # Every waiting night's label after tonight, changed or not: a rerun of tonight that
        # changes nothing for a series restores what a first run may have revised.
        revisions = [(n["run_id"], n["row"], n["label"], key) for key, n in waiting]
        return Night(run_id, keys, records, revisions)


    def follow(self, tonight: Mapping[tuple[str, ...], dict], i: int) -> None:
        """Follow kernels through a change of their key: a series of an app that tonight lacks is
        matched to a kernel of that app seen tonight for the first time
        (:func:`roofline.nightly.kernel_match.match_kernels`: the rename map, kernel class, launch
        configuration, ...) and carries on under the new key, told why for tonight's record.
        Only series still followed (seen within a window) are matched; nothing changes for an app
        whose kernels all kept their keys."""
        def scope(key: tuple[str, ...]) -> tuple[str, ...]:
            return (key[0], key[1], *key[5:])  # app, device, settings: kernel, grid and block may change

        fresh = {scope(k) for k in tonight if k not in self.series and not is_total(k)}
        if not fresh:
            return
        known: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
        for key, state in self.series.items():
            if scope(key) in fresh and not is_total(key) and (key in tonight or i - state.last_i <= state.p.window):
                known.setdefault(scope(key), []).append(key)
        for where, before in known.items():
            if all(k in tonight for k in before):
                continue  # no series is missing: the new kernels are new
            after = [k for k in tonight if scope(k) == where and not is_total(k)]
            pairs = match_kernels(_kernel_frame(before, {k: self.series[k].template for k in before}),
                                  _kernel_frame(after, tonight), dict(self.p.rename))
            for b, a, why in zip(pairs["before"], pairs["after"], pairs["why"], strict=True):
                old, new = before[b], after[a]
                if old == new or new in self.series or old in tonight:
                    continue
                state = self.series.pop(old)
                state.followed = (why, old)
                self.series[new] = state


def _kernel_frame(keys: list[tuple[str, ...]], rows: Mapping[tuple[str, ...], Mapping]) -> pd.DataFrame:
    """Series keys as the rows :func:`roofline.nightly.kernel_match.match_kernels` matches, with
    their launch resources from ``rows`` (each series' row: tonight's, or its last one)."""
    frame = {"kernel": [k[2] for k in keys], "grid": [k[3] for k in keys], "block": [k[4] for k in keys]}
    for name in LAUNCH_RESOURCES:
        frame[name] = [number(rows[k].get(name)) for k in keys]
    return pd.DataFrame(frame)


def night_commit(commits: Iterable[object]) -> str:
    """The night's app commits as the night-level rule compares them: each distinct one, sorted."""
    return ",".join(sorted({str(c) for c in commits}))


def night_level_hits(labels: Sequence[str], directions: Sequence[str], kernels: Sequence[bool], commit: str,
                     previous: str | None, p: DecisionParams) -> tuple[bool, list[tuple[int, str]]]:
    """The night-level rule on a night's labels and directions (``kernels``: the record is a
    kernel's, not an app total's): whether the night shifted (every record's
    ``environment_shift``), and the regressions to make ``suspicious`` with the note why."""
    labels, directions = np.asarray(labels, dtype=object), np.asarray(directions, dtype=object)
    counted = np.isin(labels, _COMPARED) & np.asarray(kernels, dtype=bool)
    compared = int(counted.sum())
    shifted, hits = False, []
    for direction in ("up", "down"):
        towards = directions == direction
        moved = int((counted & towards).sum())
        if moved < p.shift_min_kernels or moved < p.shift_fraction * compared:
            continue
        shifted = True
        if previous is None or not commit or commit != previous:
            continue  # the app changed too: the kernels' own alerts stand
        why = f"environment shift: {moved} kernels moved {direction}, app commit unchanged"
        hits.extend((j, why) for j in np.flatnonzero((labels == "regression") & towards).tolist())
    return shifted, hits


def night_level(records: list[dict], commit: str, previous: str | None,
                 p: DecisionParams) -> list[int]:
    """Many kernels moving together on one night: one ``environment_shift`` flag, not N alerts.

    Returns the places of the records whose regression became ``suspicious`` (the app commit is
    the previous night's: the environment moved, not the code).
    """
    # kernels are counted; an app total moves with its kernels (its regression is demoted with theirs)
    shifted, hits = night_level_hits([r["label"] for r in records], [r["direction"] for r in records],
                                     [r.get("kernel") != APP_TOTAL for r in records], commit, previous, p)
    if shifted:
        for rec in records:
            rec["environment_shift"] = True
    for j, why in hits:
        rec = records[j]
        rec["label"] = rec["revised_label"] = "suspicious"
        rec["note"] = join_note(rec["note"], why)
    return [j for j, _ in hits]


def decide_all(history: pd.DataFrame,
               params: DecisionParams | Mapping | None = None) -> pd.DataFrame:
    """Decision records of every kernel series on every night of ``history``.

    A night's ``label`` uses only that night and earlier ones, so it equals what the nightly run
    decided; ``revised_label`` adds hindsight (a lone spike becomes ``outlier`` the next night).

    Parameters
    ----------
    history : DataFrame
        The store as :func:`read_history` returns it.
    params : DecisionParams or mapping, optional
        Thresholds; the defaults are those of docs/tracking.md.

    Returns
    -------
    DataFrame
        One row per series per night (:data:`DECISION_COLUMNS`); times per launch [s].
    """
    p = params if isinstance(params, DecisionParams) else DecisionParams.from_mapping(params)
    if history.empty:
        return pd.DataFrame(columns=DECISION_COLUMNS)
    engine = Engine(p)
    dates = history.groupby("run_id")["run_date"].first()
    by_run: dict[str, list[dict]] = {}
    for row in engine.rows(history):
        by_run.setdefault(row["run_id"], []).append(row)
    by_key: dict[tuple[str, ...], list[dict]] = {}
    nights: dict[str, list[dict]] = {}
    for run in run_order(history):
        night = engine.night(run, str(dates[run]), by_run[run])
        nights[run] = night.records
        for target, place, label, _ in night.revisions:
            nights[target][place]["revised_label"] = label
        for key, rec in zip(night.keys, night.records, strict=True):
            by_key.setdefault(key, []).append(rec)
    records = [rec for key in sorted(by_key) for rec in by_key[key]]
    return pd.DataFrame(records, columns=DECISION_COLUMNS)


def decide(history: pd.DataFrame, run_id: str,
           params: DecisionParams | Mapping | None = None) -> pd.DataFrame:
    """Tonight's decision records: every series of ``run_id`` judged on the nights up to it.

    Raises
    ------
    ValueError
        If ``run_id`` is not in ``history``.
    """
    order = run_order(history)
    if run_id not in order:
        raise ValueError(f"run {run_id!r} is not in the history ({len(order)} runs stored)")
    keep = set(order[: order.index(run_id) + 1])
    decisions = decide_all(history[history["run_id"].isin(keep)], params)
    return decisions[decisions["run_id"] == run_id].reset_index(drop=True)
