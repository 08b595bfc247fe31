"""A rerun of tonight that changed some apps' rows: judge only their series.

The nightly workflow judges tonight again whenever any app's kernels change: a fixed report, a late
input, one app edited among a thousand. A series' record depends on its own state before tonight
and its own row tonight (:meth:`roofline.decide.Engine.judge_series`); what ties a night's series
together is the night-level rule (many kernels moving at once), the night's app commits, and each
record's place in the night's decisions. So the state after tonight keeps, for the night it ends
on, a digest of each app's rows as the rule reads them (:func:`app_digests`) and the file of that
night's decisions it was written with (:func:`tonight_meta`). A rerun of that night whose other
apps' rows are unchanged (:func:`rerun_changed_apps`) judges only the changed apps' series, from
the state before tonight, and keeps every other series' record and state; it declines (the caller
judges the whole night) when the night-level rule moved anything, in the first run or now, or when
anything else than tonight's rows changed since. Either way the stored records and state equal a
judging of the whole night (tests/test_decide_rerun.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

try:
    from _blake2 import blake2b  # hashlib's own BLAKE2, without its OpenSSL import
except ImportError:  # another Python than CPython
    from hashlib import blake2b

from roofline.atomic_files import file_identity
from roofline.decide import DECISION_COLUMNS, DecisionParams, Engine, _night_level, night_commit
from roofline.decide_state_table import _META, load_engine, state_table
from roofline.history import DECISIONS_DIR, PART, append_decisions, read_run, write_partition

log = logging.getLogger("roofline.decide_rerun")

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
    return {str(app): blake2b(hashes[order[bounds[i]:bounds[i + 1]]].tobytes(), digest_size=12).hexdigest()
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
    from roofline.decide_state import _meta

    if not runs_prev:
        return Engine(params)
    path = next((p for n, p in states if n == len(runs_prev)), None)
    meta = _meta(path) if path is not None else None
    if meta is None or meta.get("hash") != digest or meta["runs"] != runs_prev:
        return None
    table = pq.read_table(path)
    table = table.filter(pc.is_in(table["key.app"], pa.array(apps, pa.string())))
    return load_engine(table.replace_schema_metadata({_META: json.dumps(meta).encode()}), params)


def rerun_changed_apps(store: Path, params: DecisionParams, run_id: str, files: dict, digest: str):
    """Judge tonight's changed apps again (see the module's docstring); the
    :class:`roofline.decide_state.Update`, or None when the whole night must be judged."""
    from roofline.decide_state import Update, _keys, _meta, _revise, _states

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
    probe = [{"label": label, "direction": d, "environment_shift": False, "note": "", "revised_label": ""}
             for label, d in (*zip(kept["label"], kept["direction"], strict=True),
                              *((r["label"], r["direction"]) for r in night.records))]
    if _night_level(probe, commit, engine.last_commit, params) or any(r["environment_shift"] for r in probe):
        return None  # tonight's moves now reach the night-level rule: judge the whole night

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
        {_META: json.dumps(new_meta).encode()}))
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
