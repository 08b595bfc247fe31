"""The nightly decision's state as a table and back: one row per kernel series (its segment, the
valid nights it can still look at, the lone violation awaiting its verdict, the bound side:
:class:`~roofline.nightly.series_rule.SeriesState`), what it was built from in the schema metadata
(:mod:`roofline.nightly.state` stores it)."""

from __future__ import annotations

import json
import math
from operator import itemgetter

import numpy as np
import pyarrow as pa

from roofline.nightly import stats
from roofline.nightly.engine import Engine
from roofline.nightly.params import DecisionParams
from roofline.nightly.series_rule import TEMPLATE_NUMBERS, TEMPLATE_TEXT, Bound, SeriesState
from roofline.tables.schemas import KERNEL_KEY

STATE_META_KEY = b"roofline_state"
# The numbers of a stored night (decide_series._night's fields), in the order load_engine reads them.
_NIGHT = ("value", "flop", "bytes", "perf", "roof", "ai", "clock")
# A state row's columns besides its key, ident, template, pending night and bound side: the
# series' scalars (SeriesState's attributes), then its nights' fields ("n." + name, lists).
SCALARS = (("seg", pa.int64()), ("seg_start", pa.string()), ("carried", pa.float64()), ("last_i", pa.int64()),
           ("last_run", pa.string()), ("streak", pa.int64()), ("streak_dir", pa.int64()))
NIGHT_FIELDS = (("run_id", pa.string()), *((name, pa.float64()) for name in _NIGHT), ("label", pa.string()),
                ("dir", pa.int8()), ("persistent", pa.bool_()))


def list_array(values: list | np.ndarray, offsets: list[int] | np.ndarray, kind: pa.DataType) -> pa.ListArray:
    """A list column: each row's ``values`` from its offset to the next."""
    if pa.types.is_floating(kind):  # through numpy: a third of the time for ~150k numbers
        flat = pa.array(np.asarray(values, dtype=np.float64))
    else:
        flat = pa.array(values, kind)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), flat)


def state_table(engine: Engine, meta: dict) -> pa.Table:
    """The engine's state as a table, one row per series, ``meta`` in the schema metadata."""
    keys = sorted(engine.series)
    return with_meta(series_table(engine.keys, keys, [engine.series[k] for k in keys]), meta)


def with_meta(table: pa.Table, meta: dict) -> pa.Table:
    """A state table with ``meta`` in its schema metadata."""
    return table.replace_schema_metadata({STATE_META_KEY: json.dumps(meta).encode()})


def series_table(key_names: list[str], keys: list[tuple], states: list[SeriesState]) -> pa.Table:
    """The rows of :func:`state_table` of series ``keys`` (named ``key_names``), each with its state."""
    text, num = pa.string(), pa.float64()
    cols: dict[str, pa.Array] = {
        f"key.{name}": pa.array([k[j] for k in keys], text) for j, name in enumerate(key_names)}
    offsets = [0]
    for s in states:
        offsets.append(offsets[-1] + len(s.ident))
    cols["ident"] = list_array([v for s in states for v in s.ident], offsets, text)
    for name, kind in SCALARS:
        cols[name] = pa.array([getattr(s, name) for s in states], kind)
    for name in TEMPLATE_TEXT:
        cols[f"t.{name}"] = pa.array([str(s.template.get(name) or "") for s in states], text)
    for name in TEMPLATE_NUMBERS:
        cols[f"t.{name}"] = pa.array([stats.number(s.template.get(name)) for s in states], num)
    cols["pending"] = pa.array([s.pending is not None for s in states], pa.bool_())
    cols["pending_row"] = pa.array([s.pending.get("row", -1) if s.pending else -1 for s in states],
                                   pa.int64())
    cols["pinned"] = pa.array([bool(s.pending and s.pending.get("pinned")) for s in states], pa.bool_())
    cols["bound_side"] = pa.array([s.bound.side for s in states], text)
    cols["bound_candidate"] = pa.array([s.bound.candidate for s in states], text)
    cols["bound_count"] = pa.array([s.bound.count for s in states], pa.int64())
    offsets = [0]
    for s in states:
        offsets.append(offsets[-1] + len(s.nights))
    fields = itemgetter(*(name for name, _ in NIGHT_FIELDS))
    # every night's fields, transposed in C: one list per field
    columns = list(zip(*map(fields, (n for s in states for n in s.nights)), strict=True)) or [()] * len(NIGHT_FIELDS)
    for (name, kind), values in zip(NIGHT_FIELDS, columns, strict=True):
        cols[f"n.{name}"] = list_array(list(values), offsets, kind)
    return pa.table(cols)


def _flat(table: pa.Table, name: str) -> tuple[list, list[int]]:
    column = table.column(name).combine_chunks()
    values = column.flatten()
    if pa.types.is_floating(values.type):  # numpy's tolist is several times faster
        return values.to_numpy().tolist(), column.offsets.to_numpy().tolist()
    return values.to_pylist(), column.offsets.to_numpy().tolist()


def load_engine(table: pa.Table, params: DecisionParams) -> Engine:
    """The engine whose state :func:`state_table` wrote."""
    meta = json.loads(table.schema.metadata[STATE_META_KEY])
    engine = Engine(params, runs=meta["judged"], last_commit=meta["commit"])
    cols = {name: table.column(name).to_pylist() for name in table.column_names
            if not name.startswith(("n.", "ident"))}
    key_cols = [cols[f"key.{name}"] for name in engine.keys]
    idents, ident_at = _flat(table, "ident")
    run_ids, at = _flat(table, "n.run_id")
    flat = [_flat(table, f"n.{name}")[0] for name in (*_NIGHT, "label", "dir", "persistent")]
    # one dict literal per night: the fastest way to build ~150k of them
    every = [{"run_id": r, "value": v, "flop": f, "bytes": b, "perf": pf, "roof": rf, "ai": ai,
              "clock": c, "label": lab, "dir": d, "persistent": ps}
             for r, v, f, b, pf, rf, ai, c, lab, d, ps in zip(run_ids, *flat, strict=True)]
    for j, key in enumerate(zip(*key_cols, strict=True)):
        p = engine.params_for(key[2])
        s = SeriesState(p)
        s.ident = tuple(idents[ident_at[j]:ident_at[j + 1]])
        for name in ("seg", "seg_start", "carried", "last_i", "last_run", "streak", "streak_dir"):
            setattr(s, name, cols[name][j])
        s.template = {**dict(zip(KERNEL_KEY, key, strict=False)),
                      **{name: cols[f"t.{name}"][j] for name in (*TEMPLATE_TEXT, *TEMPLATE_NUMBERS)}}
        s.nights = every[at[j]:at[j + 1]]
        if cols["pending"][j]:
            s.pending = s.nights[-1]
            s.pending["row"] = cols["pending_row"][j]
            if cols["pinned"][j]:
                s.pending["pinned"] = True
        s.bound = Bound(p.ridge_band, p.flip_nights)
        s.bound.side, s.bound.candidate = cols["bound_side"][j], cols["bound_candidate"][j]
        s.bound.count = cols["bound_count"][j]
        if s.carried is None:
            s.carried = math.nan
        engine.series[key] = s
    return engine
