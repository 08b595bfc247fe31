"""The nightly decision's state, kept beside the history, so that tonight is decided from it and
tonight's rows instead of a replay of every night.

``<store>/_state/n=<N>/part.parquet`` is the rule's state after the first N nights of the run
order: one row per series (segment, the valid nights it can still look at, the lone violation
awaiting its verdict, the bound side: :class:`~roofline.nightly.series_rule.SeriesState`), and in the
file's metadata what it was built from: a hash of the decision parameters and of the rule's code,
the nights in order with a fingerprint of each night's file, the app commits of the last night.
The last :data:`KEEP` states are kept: a rerun of one of the last nights starts from the state
before it, so a rerun decides what the first run decided, and never counts tonight twice.

:func:`update` judges the nights of the store that the newest fitting state has not seen; it
replays every night instead (and says why) when there is no state, when the parameters or the
rule's code changed, when ``replay`` is asked for, or when a stored night changed or sorts before
the last judged one. Its writes are atomic (:func:`roofline.nightly.store.write_partition`) and ordered:
decision records first, the state last, so a run killed half-way leaves the last complete state,
from which the next run judges the same nights again.

A rerun of tonight that changed some apps' rows judges only their series. The nightly workflow
judges tonight again whenever any app's kernels change: a fixed report, a late
input, one app edited among a thousand. A series' record depends on its own state before tonight
and its own row tonight (:meth:`roofline.nightly.engine.Engine.judge_series`); what ties a night's series
together is the night-level rule (many kernels moving at once), the night's app commits, and each
record's place in the night's decisions. So the state after tonight keeps, for the night it ends
on, a digest of each app's rows as the rule reads them (:func:`app_digests`) and the file of that
night's decisions it was written with (:func:`tonight_meta`). A rerun of that night whose other
apps' rows are unchanged (:func:`rerun_changed_apps`) judges only the changed apps' series, from
the state before tonight, and keeps every other series' record and state; it declines (the caller
judges the whole night) when the night-level rule moved anything, in the first run or now, or when
anything else than tonight's rows changed since. Either way the stored records and state equal a
judging of the whole night (tests/nightly/test_state.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import sys
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from roofline.files.atomic import file_identity
from roofline.nightly import app_total, engine, kernel_match, params, replay, series_rule, state_file, stats
from roofline.nightly.engine import Engine, night_commit, night_level_hits
from roofline.nightly.params import DecisionParams
from roofline.nightly.replay import Replay
from roofline.nightly.series_rule import RULE_VERSION
from roofline.nightly.state_file import STATE_META_KEY, load_engine, state_table
from roofline.nightly.store import (
    DECISION_COLUMNS,
    DECISIONS_DIR,
    PART,
    StoredNights,
    append_decisions,
    decisions_table,
    read_run,
    run_files,
    write_partition,
)

log = logging.getLogger("roofline.nightly.state")

STATE_DIR = "_state"  # "_" prefix: dataset readers skip it, like _decisions
STATE_VERSION = 1
KEEP = 3  # states kept: reruns of the last KEEP - 1 nights start from a stored state
HOLD = 8  # nights whose records a replay keeps in memory for revisions before writing them
# Below this many nights a replay steps every series night by night: the arrays of
# roofline.nightly.replay pay off once series have nights to judge at once, while a store's first
# night (every series new: the workflow's first run) costs them about three times the time.
ARRAY_REPLAY_MIN_NIGHTS = 8
# The arrays hold every night's rows at once, about this many bytes a row at the peak (1.15 GB at
# 5,000 series x 730 nights), where stepping night by night holds one night.
ARRAY_REPLAY_BYTES_PER_ROW = 320
# Beyond this many stored rows (~3.2 GB in the arrays) a replay goes night by night: slower, but it
# fits where the nightly job runs.
ARRAY_REPLAY_MAX_ROWS = 10_000_000


@dataclass
class Update:
    """What :func:`update` did: every judged night in order, those judged now, and whether (and
    why) it replayed every night."""

    order: list[str]
    judged: list[str]
    replayed: bool
    reason: str = ""


class _Stale(Exception):
    """The stored decisions do not fit the state: replay."""


@contextlib.contextmanager
def _no_gc():
    """Pause the cyclic garbage collector: building ~150k small dicts of a state (none of them in a
    cycle) otherwise triggers collections that rescan every one of them."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _code_hash() -> str:
    """The rule's code as this process loaded it (read once, at import: a file edited while a run
    goes on is not the code that run executes)."""
    digest = hashlib.sha256()
    for module in (engine, series_rule, app_total, params, kernel_match, stats, state_file, replay,
                   sys.modules[__name__]):
        digest.update(Path(module.__file__).read_bytes())
    # the replay's compiled pass, found without importing it (numba loads in a replay only)
    digest.update(Path(importlib.util.find_spec("roofline.nightly.replay_windows").origin).read_bytes())
    return digest.hexdigest()


_CODE = _code_hash()


def rule_hash(params: DecisionParams) -> str:
    """Hash of what decides the labels: the parameters, the rule version and the rule's code
    (any edit of these modules replays once), so a stored state is used only by the rule that
    built it."""
    payload = json.dumps({"params": dataclasses.asdict(params), "rule": RULE_VERSION,
                          "state": STATE_VERSION, "code": _CODE}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------- storage
def _states(store: Path) -> list[tuple[int, Path]]:
    """Stored states, newest first."""
    base = store / STATE_DIR
    out = []
    if base.is_dir():
        for entry in base.glob(f"n=*/{PART}"):
            try:
                out.append((int(entry.parent.name[2:]), entry))
            except ValueError:
                continue
    return sorted(out, reverse=True)


def _meta(path: Path) -> dict | None:
    try:
        return json.loads(pq.read_schema(path).metadata[STATE_META_KEY])
    except (OSError, KeyError, TypeError, ValueError, pa.ArrowException):
        return None  # unreadable: an older state may still fit


def _prune(store: Path, newest: int) -> None:
    """Keep the states of the last KEEP nights; those of another history (a longer one, before a
    replay) go too."""
    for n, path in _states(store):
        if n > newest or n <= newest - KEEP:
            shutil.rmtree(path.parent, ignore_errors=True)


def _base(store: Path, files: dict, digest: str, changed: set[str]) -> tuple[Path | None, str]:
    """The newest stored state whose nights are all still stored unchanged, or why none fits."""
    states = _states(store)
    if not states:
        return None, "no stored decision state yet"
    for _, path in states:
        meta = _meta(path)
        if meta is None:
            continue
        if meta.get("hash") != digest:
            return None, "the decision parameters or the rule changed since the state was stored"
        if all(r[0] in files and list(files[r[0]]) == r[3] and r[0] not in changed
               for r in meta["runs"]):
            return path, ""
    return None, "a night judged before was rewritten or removed"


def judged_order(store_dir: str | os.PathLike) -> list[str]:
    """The judged nights in run order as the last :func:`update` left them (its ``order``), from the
    newest stored state whose nights are all still stored unchanged: what a later job (the trends
    page) draws, without judging or reading any night."""
    store = Path(store_dir)
    files = run_files(store)
    for _, path in _states(store):
        meta = _meta(path)
        if meta is not None and all(r[0] in files and list(files[r[0]]) == r[3] for r in meta["runs"]):
            return [r[0] for r in meta["runs"] if r[4]]
    return []


def _keys(store: Path, run_ids: Iterable[str]) -> list[tuple[str, tuple[str, str, str] | None]]:
    """Nights with their place in the run order (logical date, record time, id; None: no rows),
    in that order, the empty ones first (they judge nothing)."""
    out = []
    for run_id in run_ids:
        # two context columns, which every stored night has (append_run writes them)
        table = pq.read_table(store / f"run={run_id}" / PART, columns=["run_date", "run_time"])
        key = None
        if table.num_rows:
            date, time = (min(str(v or "") for v in table.column(c).to_pylist())
                          for c in ("run_date", "run_time"))
            key = (date, time, run_id)
        out.append((run_id, key))
    return sorted(out, key=lambda item: (item[1] is not None, item[1] or ()))


def _write_night(store: Path, run_id: str, records: list[dict]) -> None:
    append_decisions(store, run_id, pd.DataFrame(records, columns=DECISION_COLUMNS))


def _revise(store: Path, run_id: str, changes: list[tuple[int, str, tuple]], key_names: list[str]) -> None:
    """Write later verdicts into a stored night's ``revised_label`` (only when one differs)."""
    path = store / DECISIONS_DIR / f"run={run_id}" / PART
    if not path.is_file():
        raise _Stale(f"the decisions of night {run_id} are missing")
    frame = pd.read_parquet(path)
    named = [(j, c) for j, c in enumerate(key_names) if c in frame.columns]
    labels = frame["revised_label"].tolist()
    before = list(labels)
    for place, label, key in changes:
        if place >= len(frame) or any(str(frame[c].iat[place]) != key[j] for j, c in named):
            raise _Stale(f"the decisions of night {run_id} do not fit the stored state")
        labels[place] = label
    if labels != before:
        append_decisions(store, run_id, frame.assign(revised_label=labels))


def _advance(store: Path, engine: Engine, runs: list[list], todo: list, files: dict,
             digest: str) -> list[str]:
    """Judge ``todo`` (nights in order) from ``engine``, then write their records, the revisions
    of earlier records, and the states after the last KEEP nights, in that order."""
    held: dict[str, list[dict]] = {}
    late: dict[str, list[tuple[int, str, tuple]]] = {}
    states: list[tuple[int, pa.Table]] = []
    judged = []
    apps = None  # the last night's apps' digests, for a rerun of it (rerun_changed_apps)
    for k, (run_id, key) in enumerate(todo):
        if key is None:
            runs.append([run_id, "", "", list(files[run_id]), 0])
        else:
            frame = read_run(store, run_id, engine.columns)
            if k == len(todo) - 1:
                apps = app_digests(frame, engine.columns)
            night = engine.night(run_id, str(frame["run_date"].iat[0]), engine.rows(frame))
            held[run_id] = night.records
            for target, place, label, series in night.revisions:
                if target in held:
                    held[target][place]["revised_label"] = label
                else:
                    late.setdefault(target, []).append((place, label, series))
            runs.append([run_id, *key[:2], list(files[run_id]), len(frame)])
            judged.append(run_id)
            while len(held) > HOLD:  # a replay streams: older nights are seldom revised
                first = next(iter(held))
                _write_night(store, first, held.pop(first))
        if k >= len(todo) - KEEP:
            meta = {"version": STATE_VERSION, "hash": digest, "runs": list(runs),
                    "commit": engine.last_commit, "judged": engine.runs}
            states.append((len(runs), state_table(engine, meta)))
    for target, changes in late.items():
        _revise(store, target, changes, engine.keys)
    for run_id, records in held.items():
        _write_night(store, run_id, records)
    _write_states(store, states, todo[-1][0] if apps is not None else None, apps)
    return judged


def _write_states(store: Path, states: list[tuple[int, pa.Table]], last: str | None,
                  apps: dict[str, str] | None) -> None:
    """Write the states kept after the last nights (written last: after every record), the newest
    with what a rerun of its night ``last`` needs (its apps' digests ``apps``), and prune the older."""
    if last is not None:
        n, table = states[-1]
        meta = {**json.loads(table.schema.metadata[STATE_META_KEY]), TONIGHT: tonight_meta(store, last, apps)}
        states[-1] = n, table.replace_schema_metadata({STATE_META_KEY: json.dumps(meta).encode()})
    for n, table in states:
        write_partition(store / STATE_DIR, f"n={n}", table)
    if states:
        _prune(store, states[-1][0])


def update(store_dir: str | os.PathLike, params: DecisionParams, *, changed: Iterable[str] = (),
           replay: bool = False) -> Update:
    """Bring the stored decisions up to date with the history store.

    Parameters
    ----------
    store_dir : path
        The history store (``data/history``).
    params : DecisionParams
        The rule's thresholds; a state built with others is not used.
    changed : run ids
        Nights just written (tonight, or a rerun of it): judged again even if a state has them.
    replay : bool
        Judge every night from the first, rewriting every night's decisions (after a rule change;
        automatic when the parameters or the rule's code changed).

    Returns
    -------
    Update
        The run order of the judged nights, the nights judged now, whether it replayed and why.
    """
    with _no_gc():
        return _update(Path(store_dir), params, set(changed), replay)


def _update(store: Path, params: DecisionParams, changed: set[str], replay: bool) -> Update:
    files = run_files(store)
    digest = rule_hash(params)
    reason = "asked for (--replay)"
    if not replay and len(changed) == 1 and (rerun := rerun_changed_apps(store, params, *changed, files, digest)):
        return rerun
    if not replay:
        path, reason = _base(store, files, digest, changed)
        if path is not None:
            engine = load_engine(pq.read_table(path), params)
            runs = json.loads(pq.read_schema(path).metadata[STATE_META_KEY])["runs"]
            known = {r[0] for r in runs}
            todo = _keys(store, [r for r in files if r not in known])
            last = max(((r[1], r[2], r[0]) for r in runs if r[4]), default=None)
            first = next((key for _, key in todo if key is not None), None)
            if last is not None and first is not None and first <= last:
                reason = f"night {first[2]} sorts before the last judged night {last[2]}"
            else:
                try:
                    judged = _advance(store, engine, runs, todo, files, digest)
                    return Update([r[0] for r in runs if r[4]], judged, False)
                except _Stale as stale:
                    reason = str(stale)
    log.info("judging every stored night again: %s", reason)
    every: list[list] = []
    stored = StoredNights(store, list(files)) if len(files) >= ARRAY_REPLAY_MIN_NIGHTS else None
    if stored is not None and stored.rows > ARRAY_REPLAY_MAX_ROWS:
        log.info("%d stored rows: judged night by night, which holds one night at a time (the replay's "
                 "arrays would hold all of them, about %.0f GB)", stored.rows,
                 stored.rows * ARRAY_REPLAY_BYTES_PER_ROW / 1e9)
    if stored is None or stored.rows > ARRAY_REPLAY_MAX_ROWS:
        judged = _advance(store, Engine(params), every, _keys(store, files), files, digest)
    else:
        judged = _replay(store, params, every, files, digest, stored)
    return Update([r[0] for r in every if r[4]], judged, True, reason)


def _relabelled(column: pd.Categorical | np.ndarray, places: list[int],
                labels: list[str]) -> pd.Categorical | np.ndarray:
    """``column`` with ``labels`` at ``places``. A Categorical is given new codes where its categories
    hold every label: pandas' own assignment validates each call (about three times the time, and a
    replay sets a night's revisions each night)."""
    if isinstance(column, pd.Categorical):
        code = {label: j for j, label in enumerate(column.categories)}
        if all(label in code for label in labels):
            codes = column.codes.copy()
            codes[places] = [code[label] for label in labels]
            return pd.Categorical.from_codes(codes, dtype=column.dtype, validate=False)
    column[places] = labels
    return column


def _run_stamps(rows: pa.Table) -> tuple[dict[str, tuple[str, str, str]], dict[str, str], dict[str, int]]:
    """Of the nights with rows in ``rows`` (read already): their :func:`_keys`, the date of each
    night's first row, and each night's row count. The rows are grouped by their stamps as stored
    (most nights hold one), never made into Python strings."""
    stamps = rows.select(["run_id", "run_date", "run_time"]).unify_dictionaries()
    stamps = stamps.append_column("_row", pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    groups = stamps.group_by(["run_id", "run_date", "run_time"], use_threads=False).aggregate(
        [("_row", "min"), ("_row", "count")])
    least: dict[str, tuple[str, str]] = {}
    first: dict[str, tuple[int, str]] = {}
    sizes: dict[str, int] = {}
    for run_id, date, time, row, count in zip(*(groups[name].to_pylist() for name in (
            "run_id", "run_date", "run_time", "_row_min", "_row_count")), strict=True):
        date, time = str(date or ""), str(time or "")
        was = least.get(run_id, (date, time))
        least[run_id] = (min(was[0], date), min(was[1], time))
        if run_id not in first or row < first[run_id][0]:
            first[run_id] = (row, date)
        sizes[run_id] = sizes.get(run_id, 0) + count
    keys = {r: (d, t, r) for r, (d, t) in least.items()}
    return keys, {r: date for r, (_, date) in first.items()}, sizes


def _replay(store: Path, params: DecisionParams, runs: list[list], files: dict, digest: str,
            stored: StoredNights) -> list[str]:
    """:func:`_advance` from no state over every night (``stored``: those of ``files``, opened),
    judged by :class:`roofline.nightly.replay.Replay` (the quiet series of a night at once); the
    records are written by a second thread as the nights are judged. Every night is read in one
    pass, its place in the run order (:func:`_keys`) taken from the rows read."""
    judging = Replay(params)
    stamps = judging.read(stored, ["run_id", "run_date", "run_time"]) if files else None
    when, dates, sizes = _run_stamps(stamps) if stamps is not None else ({}, {}, {})
    todo = sorted(((r, when.get(r)) for r in files), key=lambda item: (item[1] is not None, item[1] or ()))
    nonempty = [run_id for run_id, key in todo if key is not None]
    nights = judging.nights(nonempty, dates) if nonempty else iter(())
    held: dict[str, dict[str, np.ndarray]] = {}
    late: dict[str, list[tuple[int, str, tuple]]] = {}
    states: list[tuple[int, pa.Table]] = []
    judged: list[str] = []
    with ThreadPoolExecutor(max_workers=1) as writer:
        pending = []
        for k, (run_id, key) in enumerate(todo):
            if key is None:
                runs.append([run_id, "", "", list(files[run_id]), 0])
            else:
                night = next(nights)
                held[run_id] = night.records
                revised: dict[str, tuple[list[int], list[str]]] = {}  # by night: set at once
                for target, place, label, series in night.revisions:
                    if target in held:
                        places, labels = revised.setdefault(target, ([], []))
                        places.append(place)
                        labels.append(label)
                    else:
                        late.setdefault(target, []).append((place, label, series))
                for target, (places, labels) in revised.items():
                    held[target]["revised_label"] = _relabelled(held[target]["revised_label"], places, labels)
                runs.append([run_id, *key[:2], list(files[run_id]), sizes[run_id]])
                judged.append(run_id)
                while len(held) > HOLD:
                    first = next(iter(held))
                    table = decisions_table(held.pop(first))  # the writer then encodes unlocked
                    pending.append(writer.submit(append_decisions, store, first, table))
            if k >= len(todo) - KEEP:
                meta = {"version": STATE_VERSION, "hash": digest, "runs": list(runs),
                        "commit": judging.last_commit, "judged": judging.runs}
                states.append((len(runs), judging.state_table(meta)))
        for run_id, records in held.items():
            table = decisions_table(records)
            pending.append(writer.submit(append_decisions, store, run_id, table))
        for job in pending:
            job.result()
    for target, changes in late.items():
        _revise(store, target, changes, judging.keys)
    last = todo[-1][0] if todo and todo[-1][1] is not None else None
    # the digests as a rerun of that night computes them: from the night read on its own
    apps = app_digests(read_run(store, last, judging.columns), judging.columns) if last else None
    _write_states(store, states, last, apps)
    log.info("replayed %d nights: %d series-nights judged at once, %d by the rule one by one",
             len(judged), judging.fast, judging.slow)
    return judged


# ----------------------------------------------------------------------- a rerun of tonight
TONIGHT = "tonight"  # the state's meta: {"run_id", "apps": digests, "decisions": the records file's identity}


def app_digests(frame: pd.DataFrame, columns: list[str]) -> dict[str, str]:
    """Per app, a digest of its rows' ``columns`` (those of them the frame has) in stored order."""
    if frame.empty:
        return {}
    present = [c for c in columns if c in frame.columns]
    hashes = pd.util.hash_pandas_object(frame[present], index=False).to_numpy()
    codes, apps = pd.factorize(frame["app"].astype(str))
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(apps) + 1))
    return {str(app): hashlib.blake2b(hashes[order[bounds[i]:bounds[i + 1]]].tobytes(), digest_size=12).hexdigest()
            for i, app in enumerate(apps)}


def _decisions_path(store: Path, run_id: str) -> Path:
    return store / DECISIONS_DIR / f"run={run_id}" / PART


def tonight_meta(store: Path, run_id: str, apps: Mapping[str, str]) -> dict:
    """What the state after night ``run_id`` keeps for a rerun of it: its apps' digests, and the
    stamp of its decisions file as just written (a file written after, by a run killed before its
    state, no longer matches: that rerun judges the whole night)."""
    return {"run_id": run_id, "apps": dict(apps), "decisions": file_identity(_decisions_path(store, run_id))}


def _engine_before(store: Path, runs_prev: list, params: DecisionParams, digest: str, apps: list[str],
                   states: list[tuple[int, Path]]) -> Engine | None:
    """The rule's state before tonight, of the series of ``apps`` only; None when it is not stored."""
    if not runs_prev:
        return Engine(params)
    path = next((p for n, p in states if n == len(runs_prev)), None)
    meta = _meta(path) if path is not None else None
    if meta is None or meta.get("hash") != digest or meta["runs"] != runs_prev:
        return None
    table = pq.read_table(path)
    table = table.filter(pc.is_in(table["key.app"], pa.array(apps, pa.string())))
    return load_engine(table.replace_schema_metadata({STATE_META_KEY: json.dumps(meta).encode()}), params)


def rerun_changed_apps(store: Path, params: DecisionParams, run_id: str, files: dict, digest: str):
    """Judge tonight's changed apps again (see the module's docstring); the
    :class:`roofline.nightly.state.Update`, or None when the whole night must be judged."""
    states = _states(store)
    meta = _meta(states[0][1]) if states else None
    if meta is None or meta.get("hash") != digest or not meta["runs"] or meta["runs"][-1][0] != run_id:
        return None
    first = meta.get(TONIGHT)
    runs_prev = meta["runs"][:-1]
    decisions = _decisions_path(store, run_id)
    if (not first or first["run_id"] != run_id or first["decisions"] != file_identity(decisions)
            or set(files) != {r[0] for r in meta["runs"]}
            or any(list(files[r[0]]) != r[3] for r in runs_prev)):
        return None
    key = _keys(store, [run_id])[0][1]
    last = max(((r[1], r[2], r[0]) for r in runs_prev if r[4]), default=None)
    if key is None or (last is not None and key <= last):
        return None
    engine = Engine(params)
    frame = read_run(store, run_id, engine.columns)
    apps = app_digests(frame, engine.columns)
    old = first["apps"]
    changed = sorted(a for a in old.keys() | apps.keys() if old.get(a) != apps.get(a))
    if changed and len(changed) == len(old.keys() | apps.keys()):
        return None  # every app changed: judging the whole night is no more work
    kept = pd.read_parquet(decisions)
    if kept["environment_shift"].any():
        return None  # the night-level rule moved every record in the first run
    kept = kept[~kept["app"].isin(changed)]
    engine = _engine_before(store, runs_prev, params, digest, changed, states)
    if engine is None or engine.runs != meta["judged"] - 1:
        return None
    night = engine.judge_series(run_id, str(frame["run_date"].iat[0]),
                                engine.rows(frame[frame["app"].isin(changed)]) if changed else [])
    commit = night_commit(frame["app_commit"].to_numpy(dtype=object) if "app_commit" in frame else [""])

    def tonight(name: str) -> np.ndarray:  # the kept records' and the changed apps' column
        return np.concatenate([kept[name].to_numpy(dtype=object), [r[name] for r in night.records]])

    shifted, _ = night_level_hits(tonight("label"), tonight("direction"), tonight("kernel") != app_total.APP_TOTAL,
                                  commit, engine.last_commit, params)
    if shifted:  # tonight's moves now reach the night-level rule (its demotions come with a shift)
        return None  # judge the whole night

    # tonight's records: the kept ones and the changed apps' ones, in series order (an app's series
    # are contiguous in it: the app leads the key), and each record's new place
    parts = [kept.assign(_from=kept.index.to_numpy())]
    if night.records:  # an empty frame's columns are objects: concatenated, they would be too
        parts.append(pd.DataFrame(night.records, columns=DECISION_COLUMNS).assign(
            _from=-1 - np.arange(len(night.records))))
    merged = pd.concat(parts, ignore_index=True)
    merged = merged.sort_values("app", kind="stable").reset_index(drop=True)
    source = merged.pop("_from").to_numpy()
    place_of_kept = dict(zip(source[source >= 0].tolist(), np.flatnonzero(source >= 0).tolist(), strict=True))
    place_of_new = np.empty(len(night.records), dtype=np.int64)
    place_of_new[-1 - source[source < 0]] = np.flatnonzero(source < 0)
    for state in engine.series.values():
        if state.pending is not None and state.pending["run_id"] == run_id:
            state.pending["row"] = int(place_of_new[state.pending["row"]])
    append_decisions(store, run_id, merged)
    late: dict[str, list] = {}
    for target, place, label, series in night.revisions:
        late.setdefault(target, []).append((place, label, series))
    for target, changes in late.items():
        _revise(store, target, changes, engine.keys)

    # the state after tonight: the kept series' rows (their places moved) and the changed ones'
    after = pq.read_table(states[0][1])
    after = after.filter(pc.invert(pc.is_in(after["key.app"], pa.array(changed, pa.string()))))
    runs = [*runs_prev, [run_id, *key[:2], list(files[run_id]), len(frame)]]
    new_meta = {**meta, "runs": runs, "commit": commit}
    new_meta[TONIGHT] = tonight_meta(store, run_id, apps)
    after = _moved_places(after, run_id, place_of_kept)
    table = pa.concat_tables([after.replace_schema_metadata(None),
                              state_table(engine, {}).replace_schema_metadata(None).cast(
                                  after.schema.remove_metadata())])
    table = table.sort_by([(f"key.{name}", "ascending") for name in engine.keys])
    write_partition(store / "_state", f"n={len(runs)}", table.replace_schema_metadata(
        {STATE_META_KEY: json.dumps(new_meta).encode()}))
    log.info("night %s judged again for the %d of %d apps whose rows changed (%d series); the others' "
             "records kept", run_id, len(changed), len(old.keys() | apps.keys()), len(night.records))
    return Update([r[0] for r in runs if r[4]], [run_id], False)


def _moved_places(table: pa.Table, run_id: str, place_of: Mapping[int, int]) -> pa.Table:
    """The state rows whose pending night is tonight, with that night's record at its new place."""
    pending = table["pending"].to_numpy(zero_copy_only=False)
    if not pending.any():
        return table
    nights = table["n.run_id"].combine_chunks()
    ends, starts = nights.offsets.to_numpy()[1:], nights.offsets.to_numpy()[:-1]
    names = nights.values.to_numpy(zero_copy_only=False)
    rows = table["pending_row"].to_numpy().copy()
    for j in np.flatnonzero(pending & (ends > starts)):
        if names[ends[j] - 1] == run_id:  # a pending night is the series' last
            rows[j] = place_of[int(rows[j])]
    at = table.schema.get_field_index("pending_row")
    return table.set_column(at, table.schema.field(at), pa.array(rows, pa.int64()))
