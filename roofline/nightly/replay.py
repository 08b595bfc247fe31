"""The full replay of the nightly decision, judged for every series of a night at once.

A replay judges every stored night again (after a change of the rule, its parameters or the
counting conventions, or a catch-up over nights stored without a run). Night by night through
:class:`roofline.nightly.engine.Engine`, that is one Python step per series per night: minutes for
thousands of series over two years. Most of those steps follow one path: a series in its segment,
timed at its usual clock and work per launch, with its bound side unflipped. :class:`Replay` keeps
such series in arrays (:class:`_Windows`: the nights each can still look at, its segment, streak,
bound side, the lone night awaiting a verdict) and judges all of a night's series on that path in
a few array operations and compiled passes over each series' own nights, which also judge tonight
and commit it (:mod:`roofline.nightly.replay_windows`), with the arithmetic of
:func:`roofline.nightly.series_rule._judge` and :meth:`~roofline.nightly.series_rule.SeriesState.step`
(the same medians, the logs of the noise taken with :func:`math.log`, sums of squares added in the
same order), so the numbers are the same to the bit: information-only and borrowed-noise nights
of a young segment, ``unchanged``, ``suspicious``, ``regression`` and ``improvement`` (big jumps
too), and the verdict on a pending night (``outlier`` or the onset of a level).

Every other series-night is judged by the rule itself: a series' first night, a new segment, a
night without a valid time, an unstable clock, a work change, a bound flip, a series whose
parameters differ from the fleet's or whose nights hold many outliers; and whole apps on a night
whose kernels may be followed through a change of key or whose time may move between kernels (they
go through :meth:`Engine.judge_series` together). Such a series is taken out of the arrays as its
:class:`~roofline.nightly.series_rule.SeriesState`, stepped, and put back. A night's app totals,
the night-level rule and the revisions of waiting nights are those of :meth:`Engine.night`. So a
replay's records and final state equal the night-by-night rule's (tests/nightly/test_replay.py
compares them on a fleet, the tracking simulator and hand-made histories of every kind of event;
benchmarks/bench_decide.py every night of 5,000 series x 730 nights).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from roofline.nightly.app_total import APP_TOTAL, APP_TOTAL_SHORT, is_total, settle_moves, total_key
from roofline.nightly.engine import Engine, night_commit, night_level_hits
from roofline.nightly.params import DecisionParams
from roofline.nightly.series_rule import (
    RULE_VERSION,
    TEMPLATE_NUMBERS,
    TEMPLATE_TEXT,
    Bound,
    SeriesState,
    forgotten,
    join_note,
    major_minor,
)
from roofline.nightly.state_file import NIGHT_FIELDS, SCALARS, list_array, series_table, with_meta
from roofline.nightly.stats import number
from roofline.nightly.store import DECISION_COLUMNS, StoredNights
from roofline.tables.schemas import KERNEL_KEY

# The per-night numbers a series keeps (series_rule._night), and the log of the time for the noise.
_FIELDS = ("value", "flop", "bytes", "perf", "roof", "ai", "clock")
# The fields whose median over the baseline pool the rule takes (series_rule._judge): the first ones.
_POOLED = _FIELDS[:6]
_LABELS = ("unchanged", "new", "environment_change", "regression", "improvement", "suspicious",
           "outlier", "workload_changed", "moved", "insufficient_data", "missing", "error",
           "unstable_env")
_CODE = {label: j for j, label in enumerate(_LABELS)}
_SIDES = ("", "memory", "compute")
_SIDE = {side: j for j, side in enumerate(_SIDES)}
CAPACITY = 64  # nights kept per series in the arrays (the rule looks at <= 30 + its outliers); a power of 2
_MAX_OUTLIERS = 20  # more outliers among its nights: a series stays a SeriesState
# The record's text and number fields copied from the row (series_rule._record).
_TEXT = (*KERNEL_KEY, "kernel_short", "clock_control", "cache_control", "convention", "bound")
_NUMBERS = ("launches", "time_share", "performance", "roof_pct", "ai_dram", "roof_flops",
            "roof_dram_bw", "sm_clock_hz")
_INT_COLUMNS = ("n_baseline", "nights_in_violation", "segment")
_TEXT_COLUMNS = {"run_id", "run_date", *_TEXT, "label", "revised_label", "direction", "metric",
                 "baseline_runs", "segment_start", "bound_side", "bound_flip", "note",
                 "previous_kernel", "previous_grid", "previous_block", "rule_version"}
# Text fields of a record no later step of the night changes: one value for the series judged at
# once, given as an Arrow array when every other record has it too.
_CONSTANT_TEXT = ("run_id", "run_date", "metric", "bound_flip", "previous_kernel", "previous_grid",
                  "previous_block", "rule_version")
# Text fields of a record given by code, where the series are judged at once: into these values
# (the night's records hold them as pandas Categoricals, which a label's revision may set), or,
# for the baseline nights, into the pools the replay met (Replay._pool_texts; an Arrow array, which no
# later step changes).
_DIRECTIONS = ("", "up", "down")  # a direction's code: 0, 1, -1 modulo 3
_CODED_TEXT = {"direction": _DIRECTIONS, "bound_side": _SIDES, "label": _LABELS, "revised_label": _LABELS}
# The app total's row (app_total.total_rows): no work, no roof, no launch resources.
_TOTAL_NAN = ("flop", "flop_total", "dram_bytes", "performance", "roof_pct", "ai_dram", "roof_flops",
              "roof_dram_bw", "ridge_ratio", "registers_per_thread", "shared_mem_bytes")


def _median_rows(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per row (along the last axis), the median of the finite values where ``mask`` (NaN where
    none), computed as :func:`statistics.median` does: the middle one, or the mean of the two
    middle ones. ``values`` may stack several columns' rows over one ``mask``."""
    valid = mask & np.isfinite(values)
    data = np.where(valid, values, np.nan)
    data.sort(axis=-1)
    width = data.shape[-1]
    shape = data.shape[:-1]
    data = data.reshape(-1, width)
    k = np.count_nonzero(valid, axis=-1).reshape(-1)
    rows = np.arange(len(data))
    hi = data[rows, np.minimum(k // 2, width - 1)]
    lo = data[rows, np.maximum((k - 1) // 2, 0)]
    out = np.where(k % 2 == 1, hi, (lo + hi) / 2)
    return np.where(k > 0, out, np.nan).reshape(shape)


def _group_medians(values: np.ndarray, group: np.ndarray, groups: int) -> np.ndarray:
    """Per group number in ``range(groups)``, :func:`roofline.nightly.stats.median_finite` of the
    ``values`` of that group (taken in order, as a stable sort does)."""
    finite = np.isfinite(values)
    values, group = values[finite], group[finite]
    ordered = values[np.lexsort((values, group))]
    k = np.bincount(group, minlength=groups)
    start = np.cumsum(k) - k
    last = max(len(ordered) - 1, 0)
    hi = ordered[np.minimum(start + k // 2, last)] if len(ordered) else np.full(groups, np.nan)
    lo = ordered[np.minimum(start + np.maximum((k - 1) // 2, 0), last)] if len(ordered) else hi
    return np.where(k == 0, np.nan, np.where(k % 2 == 1, hi, (lo + hi) / 2))


def _rel_change(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:func:`roofline.nightly.stats.rel_change` elementwise."""
    ok = np.isfinite(a) & np.isfinite(b) & (b != 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ok, a / np.where(ok, b, 1.0) - 1, np.nan)


def _value(column: np.ndarray | pa.Array, j: int) -> object:
    """Item ``j`` of a records column as a Python value."""
    value = column[j]
    return value.as_py() if isinstance(value, pa.Scalar) else value.item() if isinstance(value, np.generic) else value


def _objects(column: np.ndarray | pd.Categorical) -> np.ndarray:
    """A records text column as an object array (a Categorical's values taken by code)."""
    if isinstance(column, pd.Categorical):  # a missing value's code is -1: None
        return np.append(np.asarray(column.categories, dtype=object), None)[column.codes]
    return column


def _equals(column: np.ndarray | pa.Array, value: str) -> np.ndarray:
    """Per item of a records column, whether it is ``value``."""
    if isinstance(column, pa.Array):
        return pc.equal(column, value).to_numpy(zero_copy_only=False)
    return column == value


@functools.cache
def _categories(values: tuple[str, ...]) -> pd.CategoricalDtype:
    return pd.CategoricalDtype(list(values))


def _first_appearance(indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`pandas.factorize` of dictionary indices: per item a code numbered in the order the
    values first appear, and the value of each code. A night's file lists each text column's values
    in that order, and the nights' dictionaries unify in the nights' order, so the indices are
    usually such codes already: checked in one pass (each index at most one above all before it)."""
    if len(indices) and indices[0] == 0:
        top = np.maximum.accumulate(indices)
        if (indices[1:] <= top[:-1] + 1).all():
            return indices, np.arange(int(top[-1]) + 1)
    return pd.factorize(indices)


def _combinations(columns: list[tuple[np.ndarray, int]], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``n``, a number for its combination of codes (each column: its codes, and how
    many values they take), numbered in the order the combinations first appear, and the first row
    of each. The codes are combined into one integer in place, numbered again only where the next
    column would not fit: each pass over millions of rows is fresh memory first touched."""
    group, size = np.zeros(n, dtype=np.int64), 1
    for code, values in columns:
        if size * values >= 1 << 62:
            group = pd.factorize(group)[0]
            size = int(group.max(initial=-1)) + 1
        group *= values
        group += code
        size *= values
    group = pd.factorize(group)[0]
    return group, np.unique(group, return_index=True)[1]


# The integer types a text column's codes take, the narrowest that holds them first: most columns
# hold a few values, and each byte a row is fresh memory first touched (~3.6 MB at 730 nights).
_CODE_TYPES = (np.int8, np.int16, np.int32, np.int64)


def _code_type(values: int) -> type:
    """The narrowest of :data:`_CODE_TYPES` whose codes for ``values`` values, plus one, fit."""
    return next(kind for kind in _CODE_TYPES if values <= np.iinfo(kind).max)


class _TextCodes:
    """One text column read in parts: per row, a code into the column's values in the order the
    parts' dictionaries name them (as :meth:`pyarrow.ChunkedArray.unify_dictionaries` numbers
    them), written into one array as each part comes, of the narrowest type that holds them (made
    wider as values come)."""

    def __init__(self, n: int) -> None:
        self.codes = np.empty(n, dtype=_CODE_TYPES[0])
        self.values: pa.Array | None = None
        self._dictionary: pa.Array | None = None  # the last chunk's, and its values' codes
        self._codes_of: np.ndarray | None = None  # None: the codes are its indices

    def put(self, column: pa.Array | pa.ChunkedArray, at: int) -> None:
        """Column ``column`` of a part whose first row is row ``at``."""
        if not pa.types.is_dictionary(column.type):
            column = pc.dictionary_encode(column)
        for chunk in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
            dictionary = chunk.dictionary
            if self.values is None:
                self.values = dictionary.slice(0, 0)
            elif dictionary.type != self.values.type:
                dictionary = dictionary.cast(self.values.type)
            if self._dictionary is None or not dictionary.equals(self._dictionary):
                codes = pc.index_in(dictionary, value_set=self.values).fill_null(-1).to_numpy().astype(np.int32)
                new = codes < 0
                codes[new] = len(self.values) + np.arange(int(new.sum()), dtype=np.int32)
                if new.any():
                    self.values = pa.concat_arrays([self.values, dictionary.filter(pa.array(new))])
                    kind = _code_type(len(self.values))
                    if kind != self.codes.dtype:  # the rows so far copied into wider codes
                        wider = np.empty(len(self.codes), dtype=kind)
                        wider[:at] = self.codes[:at]
                        self.codes = wider
                identity = bool((codes == np.arange(len(codes))).all())
                self._dictionary, self._codes_of = dictionary, None if identity else codes.astype(self.codes.dtype)
            indices = chunk.indices.to_numpy()
            if self._codes_of is None:
                self.codes[at:at + len(chunk)] = indices
            else:
                np.take(self._codes_of, indices, out=self.codes[at:at + len(chunk)], mode="clip")
            at += len(chunk)


class _Columns:
    """The history's columns as the rule reads them, converted once for every night as its parts
    are read (never all held as Arrow data too): a number column as numbers (``.item()`` gives the
    value a row dict holds), a text column as codes into its distinct values in the order they
    first appear (the missing one last, which no row holds: :func:`roofline.nightly.store.read_runs_table`
    fills missing text). ``rows`` is the number of rows the parts hold; the columns ``also`` are
    read besides, for :meth:`arrow`, and are not in a row."""

    def __init__(self, parts: Iterable[pa.Table], rows: int, names: list[str], also: tuple[str, ...] = ()) -> None:
        self.plain: dict[str, np.ndarray] = {}
        self.coded: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._texts: dict[str, np.ndarray] = {}
        self._text_arrays: dict[str, pa.Array] = {}
        self._other_texts: dict[str, dict[str, int]] = {}  # the texts after a column's own in _text_arrays
        self._coded_numbers: dict[str, np.ndarray] = {}
        read: list[str] | None = None
        numbers: dict[str, np.ndarray] = {}
        texts: dict[str, _TextCodes] = {}
        at = 0
        for part in parts:
            if read is None:
                read = [name for name in dict.fromkeys([*names, *also]) if name in part.column_names]
            if at + part.num_rows > rows:  # more rows than the parts were said to hold
                rows = at + part.num_rows
                numbers = {name: np.resize(values, rows) for name, values in numbers.items()}
                for text in texts.values():
                    text.codes = np.resize(text.codes, rows)
            columns = dict(zip(part.column_names, part.columns, strict=True))
            for name in read:
                column = columns[name]
                if pa.types.is_dictionary(column.type) or pa.types.is_string(column.type) \
                        or pa.types.is_large_string(column.type):
                    if name not in texts:
                        texts[name] = _TextCodes(rows)
                    texts[name].put(column, at)
                    continue
                values = numbers.get(name)
                if values is None:
                    values = numbers[name] = np.empty(rows, dtype=column.type.to_pandas_dtype())
                start = at
                for chunk in column.chunks:
                    values[start:start + len(chunk)] = chunk.to_numpy(zero_copy_only=False)
                    start += len(chunk)
            at += part.num_rows
        self.names = [name for name in names if name in (read or ())]
        for name, values in numbers.items():
            self.plain[name] = values[:at]
        for name, text in texts.items():
            codes, used = _first_appearance(text.codes[:at])  # as the rule meets them
            values = text.values if text.values is not None else pa.array([], pa.large_string())
            objects = np.append(values.take(pa.array(used, pa.int64())).to_numpy(zero_copy_only=False), None)
            self.coded[name] = (codes.astype(text.codes.dtype, copy=False), objects)
        self.n = at

    def arrow(self, names: list[str]) -> pa.Table:
        """Text columns ``names`` as dictionary-encoded Arrow columns (their codes not copied)."""
        return pa.table({name: pa.DictionaryArray.from_arrays(
            pa.array(self.coded[name][0]), pa.array(self.coded[name][1][:-1].tolist(), pa.large_string()))
            for name in names})

    def row(self, j: int) -> dict:
        """Row ``j`` as Engine.rows gives it."""
        row = {name: values[j].item() for name, values in self.plain.items()}
        row.update((name, objects[codes[j]]) for name, (codes, objects) in self.coded.items())
        return {name: row[name] for name in self.names}

    def rows(self, at: np.ndarray) -> list[dict]:
        """Rows ``at`` as :meth:`row` gives each."""
        columns = [self.plain[name][at].tolist() if name in self.plain
                   else self.coded[name][1][self.coded[name][0][at]].tolist() for name in self.names]
        return [dict(zip(self.names, values, strict=True)) for values in zip(*columns, strict=True)]

    def numbers(self, name: str, at: np.ndarray) -> np.ndarray:
        """:func:`roofline.nightly.stats.number` of the rows ``at`` (NaN for a column not stored)."""
        if name in self.plain:  # an integer column taken as numbers where it is read
            return self.plain[name][at].astype(np.float64, copy=False)
        if name not in self.coded:
            return np.full(len(at), np.nan)
        codes, objects = self.coded[name]
        table = self._coded_numbers.get(name)
        if table is None:
            table = self._coded_numbers[name] = np.array([number(v) for v in objects], dtype=np.float64)
        return table[codes[at]]

    def texts(self, name: str, at: np.ndarray) -> np.ndarray:
        """``str(value or "")`` of the rows ``at`` (series_rule._record's text)."""
        if name in self.plain:
            return np.array([str(v or "") for v in self.plain[name][at].tolist()], dtype=object)
        if name not in self.coded:
            return np.full(len(at), "", dtype=object)
        return self._text_table(name)[self.coded[name][0][at]]

    def _text_table(self, name: str) -> np.ndarray:
        """Per code of coded column ``name``, ``str(value or "")``."""
        table = self._texts.get(name)
        if table is None:
            table = self._texts[name] = np.array([str(v or "") for v in self.coded[name][1]], dtype=object)
        return table

    def text_column(self, name: str, rows: np.ndarray, others: list[str]) -> np.ndarray | pa.Array:
        """:meth:`texts` of ``rows``, with ``others`` in order where a row is -1: a ``large_string``
        Arrow array for a coded column (its rows' text taken from the column's distinct texts,
        never made into Python strings), else an object array."""
        of_table = rows >= 0
        if name not in self.coded:
            column = np.empty(len(rows), dtype=object)
            column[of_table] = self.texts(name, rows[of_table])
            column[~of_table] = others
            return column
        # the column's distinct texts, then the other texts met (app totals' and the rule's records
        # repeat from night to night): taken from at once, never copied whole
        texts = self._text_arrays.get(name)
        if texts is None:
            texts = self._text_arrays[name] = pa.array(self._text_table(name), pa.large_string())
            self._other_texts[name] = {}
        index = np.empty(len(rows), dtype=np.int64)
        index[of_table] = self.coded[name][0][rows[of_table]]
        met = self._other_texts[name]
        new = [text for text in dict.fromkeys(others) if text not in met]
        if new:
            met.update((text, len(texts) + j) for j, text in enumerate(new))
            texts = self._text_arrays[name] = pa.concat_arrays([texts, pa.array(new, pa.large_string())])
        index[~of_table] = [met[text] for text in others]
        return texts.take(pa.array(index))

    def distinct(self, name: str, n: int, text: Callable[[object], str], missing: str) -> tuple[np.ndarray, list]:
        """Per row a code into the distinct ``text(value)`` of the column (``missing`` for every
        row where the column is not stored), and those texts."""
        if name in self.coded:
            codes, objects = self.coded[name]
            texts = [text(v) for v in objects]
        elif name in self.plain:
            codes, unique = pd.factorize(self.plain[name], use_na_sentinel=False)
            texts = [text(v.item()) for v in unique]
        else:
            return np.zeros(n, dtype=np.int64), [missing]
        merged, distinct = pd.factorize(np.array(texts, dtype=object))
        if (merged == np.arange(len(merged))).all():  # each value's text its own: the codes as they are
            return codes, list(distinct)
        return merged[codes], list(distinct)

    def distinct_objects(self, name: str, at: np.ndarray) -> np.ndarray:
        """The distinct values of the rows ``at`` (each once, in no order)."""
        if name in self.coded:
            codes, objects = self.coded[name]
            return objects[np.unique(codes[at])]
        return self.objects(name, at)

    def objects(self, name: str, at: np.ndarray) -> np.ndarray:
        if name in self.plain:
            return self.plain[name][at].astype(object)
        codes, objects = self.coded[name]
        return objects[codes[at]]


class _Windows:
    """The series judged in arrays: per series slot, its last nights right-aligned (column
    CAPACITY - 1 is the last), and what :class:`SeriesState` keeps besides."""

    def __init__(self) -> None:
        self.size = 0
        self._grow(1024)

    def _grow(self, cap: int) -> None:
        c = CAPACITY

        def more(old: np.ndarray | None, shape: tuple, fill: object, dtype: object) -> np.ndarray:
            new = np.full(shape, fill, dtype=dtype)
            if old is not None:
                new[: len(old)] = old
            return new

        get = self.__dict__.get
        self.cap = cap
        # the number fields in one array, a series' fields and nights together (one page): the
        # compiled passes read each series' nights in turn, and memory that follows on is prefetched
        numbers = np.full((cap, len(_FIELDS) + 1, c), np.nan)
        if get("numbers") is not None:
            numbers[: len(self.numbers)] = self.numbers
        self.numbers = numbers
        for f, name in enumerate((*_FIELDS, "logv")):
            setattr(self, name, numbers[:, f])
        self.run = more(get("run"), (cap, c), -1, np.int32)
        self.label = more(get("label"), (cap, c), 0, np.int8)
        self.dir = more(get("dir"), (cap, c), 0, np.int8)
        self.persistent = more(get("persistent"), (cap, c), False, np.bool_)
        self.count = more(get("count"), (cap,), 0, np.int32)
        self.head = more(get("head"), (cap,), 0, np.int64)  # where the next night goes (a ring)
        # the last night is a lone violation awaiting its verdict: its place in its night's
        # records, and whether the night-level rule made it suspicious for good
        self.pend = more(get("pend"), (cap,), False, np.bool_)
        self.pend_row = more(get("pend_row"), (cap,), -1, np.int64)
        self.pend_pinned = more(get("pend_pinned"), (cap,), False, np.bool_)
        self.ident = more(get("ident"), (cap,), -1, np.int64)
        self.seg = more(get("seg"), (cap,), 0, np.int64)
        self.seg_start = more(get("seg_start"), (cap,), "", object)
        self.carried = more(get("carried"), (cap,), np.nan, np.float64)
        self.last_run = more(get("last_run"), (cap,), "", object)
        self.streak = more(get("streak"), (cap,), 0, np.int64)
        self.streak_dir = more(get("streak_dir"), (cap,), 0, np.int64)
        self.side = more(get("side"), (cap,), 0, np.int8)
        self.candidate = more(get("candidate"), (cap,), 0, np.int8)
        self.flips = more(get("flips"), (cap,), 0, np.int64)
        self.t_row = more(get("t_row"), (cap,), -1, np.int64)  # the template: a row of the table, or:
        self.t_text = more(get("t_text"), (cap, len(TEMPLATE_TEXT)), "", object)
        self.t_num = more(get("t_num"), (cap, len(TEMPLATE_NUMBERS)), np.nan, np.float64)

    def reserve(self, n: int) -> None:
        """Room for ``n`` series at once: the rings are fresh memory, first touched when made, so
        they are made once at their size rather than grown by doubling."""
        if n > self.cap:
            self._grow(1 << (n - 1).bit_length())

    def slot(self) -> int:
        if self.size == self.cap:
            self._grow(self.cap * 2)
        self.size += 1
        return self.size - 1

    def last(self, slots: np.ndarray, n: int) -> np.ndarray:
        """The ring places of the last ``n`` nights of each slot, oldest first."""
        return (self.head[slots, None] - n + np.arange(n)[None, :]) & (CAPACITY - 1)


@dataclass
class NightResult:
    """One judged night: its decision records (``DECISION_COLUMNS``, in series order, as numpy
    columns: :func:`roofline.nightly.store.decisions_table`) and the revisions of earlier nights'
    records: (run id, place in that night's records, revised label)."""

    run_id: str
    records: dict[str, np.ndarray]
    revisions: list[tuple[str, int, str, tuple[str, ...]]]


class Replay:
    """Every series' state, judged a night at a time: quiet series in :class:`_Windows`, the others
    as :class:`SeriesState` objects through the rule itself. Series are numbered once for the whole
    history (every key a night names, and each app's total): per number, its key, place in the key
    order, scope (app, device, settings) and where its state is. :meth:`engine` gives the state as
    the night-by-night :class:`Engine` holds it."""

    def __init__(self, params: DecisionParams) -> None:
        self.p = params
        self.template = Engine(params)  # its keys, columns and per-kernel parameters
        self.keys, self.columns = self.template.keys, self.template.columns
        self.run_names: list[str] = []
        self._run_at: dict[str, int] = {}
        self.w = _Windows()
        self.free: list[int] = []  # array slots given back
        self.key_of: list[tuple[str, ...]] = []
        self.kid_of: dict[tuple[str, ...], int] = {}
        self.objects: dict[int, SeriesState] = {}
        self.idents: dict[tuple[str, ...], int] = {}
        self.ident_of: list[tuple[str, ...]] = []
        self.runs, self.last_commit = 0, None
        self.fast = self.slow = 0  # series-nights judged at once / by the rule one by one
        self._pool_code: dict[str, int] = {"": 0}  # the baseline nights' texts met: their codes (_pool_codes)
        self._pool_texts = pa.array([""], pa.large_string())  # and those texts by code
        self._index([])

    # ------------------------------------------------------------------------- series numbers
    def _index(self, keys: list[tuple[str, ...]]) -> None:
        """Number ``keys`` (and their apps' totals) after those numbered already."""
        for key in keys:
            if key not in self.kid_of:
                self.kid_of[key] = len(self.key_of)
                self.key_of.append(key)
            where = (key[0], key[1], *key[5:])
            total = total_key(where)
            if total not in self.kid_of:
                self.kid_of[total] = len(self.key_of)
                self.key_of.append(total)
        k = len(self.key_of)
        ranks = sorted(range(k), key=self.key_of.__getitem__)
        self.rank = np.empty(k, dtype=np.int64)
        self.rank[ranks] = np.arange(k)
        scopes: dict[tuple[str, ...], int] = {}
        self.sid = np.array([scopes.setdefault((key[0], key[1], *key[5:]), len(scopes)) for key in self.key_of],
                            dtype=np.int64)
        self.is_total = np.array([is_total(key) for key in self.key_of], dtype=bool)
        self.total_of = np.full(len(scopes), -1, dtype=np.int64)
        self.total_of[self.sid[self.is_total]] = np.flatnonzero(self.is_total)
        old = k - len(getattr(self, "kind", ()))

        def more(name: str, fill: object, dtype: object) -> None:
            before = getattr(self, name, np.zeros(0, dtype=dtype))
            setattr(self, name, np.concatenate([before, np.full(old, fill, dtype=dtype)]))

        more("kind", 0, np.int8)  # 0: no state, 1: in the arrays, 2: a SeriesState
        more("slot_of", -1, np.int64)
        more("last_i", -1, np.int64)
        more("window", self.p.window, np.int64)
        more("commit", "", object)

    def _register(self, table: _Columns, n: int) -> np.ndarray:
        """Every row's series number (its key: ``str`` of each key column, as Engine.judge_series)."""
        if not n:
            return np.zeros(0, dtype=np.int64)
        codes, uniques = [], []
        for name in self.keys:
            code, unique = table.distinct(name, n, str, "")
            codes.append(code)
            uniques.append(unique)
        group, first = _combinations([(code, len(unique)) for code, unique in zip(codes, uniques, strict=True)], n)
        keys = [tuple(uniques[c][codes[c][r]] for c in range(len(codes))) for r in first.tolist()]
        self._index(keys)
        ids = np.array([self.kid_of[key] for key in keys], dtype=np.int64)
        return ids[group]

    # ------------------------------------------------------------------ arrays <-> SeriesState
    def _eligible(self, state: SeriesState) -> bool:
        """Whether a series can be judged in the arrays: the fleet's parameters (the diff noise), a
        pending night only as its last night, a valid night, few outliers."""
        p = state.p
        pending = state.pending
        if not (p is self.p and p.noise_method == "diff" and state.followed is None and state.ident is not None
                and (pending is None or (state.nights and pending is state.nights[-1]))):
            return False
        outliers = sum(n["label"] == "outlier" for n in state.nights)
        return outliers <= _MAX_OUTLIERS and len(state.nights) > outliers

    def _settle(self, kids: list[int], states: list[SeriesState]) -> None:
        """Keep each series' state (``kids[j]``'s is ``states[j]``): in the arrays when it is quiet
        enough, else as an object."""
        if not kids:
            return
        every = np.array(kids, dtype=np.int64)
        self.last_i[every] = [state.last_i for state in states]
        self.window[every] = [state.p.window for state in states]
        self.commit[every] = [str(state.template.get("app_commit") or "") for state in states]
        quiet_kids, quiet = [], []
        for kid, state in zip(kids, states, strict=True):
            if self._eligible(state):
                quiet_kids.append(kid)
                quiet.append(state)
            else:
                self.kind[kid] = 2
                self.objects[kid] = state
        if not quiet:
            return
        w = self.w
        slots = np.array([self.free.pop() if self.free else w.slot() for _ in quiet], dtype=np.int64)
        at = np.array(quiet_kids, dtype=np.int64)
        self.kind[at], self.slot_of[at] = 1, slots
        # each series' nights right-aligned in its row, the places before them emptied
        counts = np.array([len(state.nights) for state in quiet], dtype=np.int64)
        nights = [night for state in quiet for night in state.nights]
        rows = np.repeat(slots, counts)
        cols = np.arange(len(nights)) + np.repeat(CAPACITY - np.cumsum(counts), counts)
        w.count[slots], w.head[slots] = counts, 0
        for name in _FIELDS:
            column = getattr(w, name)
            column[slots] = np.nan
            column[rows, cols] = [night[name] for night in nights]
        from roofline.nightly import replay_windows  # numba: loaded by a replay only

        w.logv[slots] = np.nan
        w.logv[rows, cols] = replay_windows.logs(w.value[rows, cols])
        w.run[slots], w.label[slots], w.dir[slots], w.persistent[slots] = -1, 0, 0, False
        w.run[rows, cols] = [self._run_index(night["run_id"]) for night in nights]
        w.label[rows, cols] = [_CODE[night["label"]] for night in nights]
        w.dir[rows, cols] = [night["dir"] for night in nights]
        w.persistent[rows, cols] = [night["persistent"] for night in nights]
        idents = []
        for state in quiet:
            ident = self.idents.get(state.ident)
            if ident is None:
                ident = self.idents[state.ident] = len(self.ident_of)
                self.ident_of.append(state.ident)
            idents.append(ident)
        w.ident[slots] = idents
        w.seg[slots] = [state.seg for state in quiet]
        w.seg_start[slots] = [state.seg_start for state in quiet]
        w.carried[slots] = [state.carried for state in quiet]
        w.last_run[slots] = [state.last_run for state in quiet]
        w.streak[slots] = [state.streak for state in quiet]
        w.streak_dir[slots] = [state.streak_dir for state in quiet]
        w.side[slots] = [_SIDE[state.bound.side] for state in quiet]
        w.candidate[slots] = [_SIDE[state.bound.candidate] for state in quiet]
        w.flips[slots] = [state.bound.count for state in quiet]
        pending = [state.pending or {} for state in quiet]
        w.pend[slots] = [bool(night) for night in pending]
        w.pend_row[slots] = [night.get("row", -1) for night in pending]
        w.pend_pinned[slots] = [bool(night.get("pinned")) for night in pending]
        w.t_row[slots] = -1
        templates = [state.template for state in quiet]
        w.t_text[slots] = [[str(t.get(name) or "") for name in TEMPLATE_TEXT] for t in templates]
        w.t_num[slots] = [[number(t.get(name)) for name in TEMPLATE_NUMBERS] for t in templates]

    def _run_index(self, run_id: str) -> int:
        index = self._run_at.get(run_id)
        if index is None:
            index = self._run_at[run_id] = len(self.run_names)
            self.run_names.append(run_id)
        return index

    def _states(self, kids: np.ndarray) -> list[SeriesState]:
        """The :class:`SeriesState` of each array series of ``kids``, read from the arrays together."""
        w, p = self.w, self.p
        slots = self.slot_of[kids]
        held, cells = self._held(slots)
        fields = [getattr(w, name)[cells].tolist() for name in _FIELDS]
        runs = [[self.run_names[r] for r in row] for row in w.run[cells].tolist()]
        labels = [[_LABELS[c] for c in row] for row in w.label[cells].tolist()]
        dirs, persistent = w.dir[cells].tolist(), w.persistent[cells].tolist()
        templates = self._templates(kids, slots)
        scalars = zip(w.ident[slots].tolist(), w.seg[slots].tolist(), w.seg_start[slots].tolist(),
                      w.carried[slots].tolist(), self.last_i[kids].tolist(), w.last_run[slots].tolist(),
                      w.streak[slots].tolist(), w.streak_dir[slots].tolist(), held.tolist(),
                      w.pend[slots].tolist(), w.pend_row[slots].tolist(), w.pend_pinned[slots].tolist(),
                      w.side[slots].tolist(), w.candidate[slots].tolist(), w.flips[slots].tolist(), strict=True)
        states = []
        for j, (ident, seg, seg_start, carried, last_i, last_run, streak, streak_dir, n, pend, pend_row,
                pinned, side, candidate, flips) in enumerate(scalars):
            state = SeriesState(p)
            state.ident = self.ident_of[ident]
            state.seg, state.seg_start, state.carried = seg, seg_start, carried
            state.last_i, state.last_run = last_i, last_run
            state.streak, state.streak_dir = streak, streak_dir
            state.template = templates[j]
            state.nights = [{"run_id": r, "value": v, "flop": f, "bytes": b, "perf": pf, "roof": rf,
                             "ai": ai, "clock": c, "label": lab, "dir": d, "persistent": ps}
                            for r, v, f, b, pf, rf, ai, c, lab, d, ps in zip(
                                runs[j][:n], *(column[j][:n] for column in fields), labels[j][:n],
                                dirs[j][:n], persistent[j][:n], strict=True)]
            state.trim()
            if pend:
                state.pending = state.nights[-1]
                state.pending["row"] = pend_row
                if pinned:
                    state.pending["pinned"] = True
            state.bound = Bound(p.ridge_band, p.flip_nights)
            state.bound.side, state.bound.candidate, state.bound.count = _SIDES[side], _SIDES[candidate], flips
            states.append(state)
        return states

    def _template_fields(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Of each array series in ``slots``, the template fields of its last row (a row of the
        table, or kept in the arrays): its TEMPLATE_TEXT and its TEMPLATE_NUMBERS, one row each."""
        w = self.w
        rows = w.t_row[slots]
        of_table = rows >= 0
        text = w.t_text[slots].copy()
        numbers = w.t_num[slots].copy()
        if of_table.any():
            at = rows[of_table]
            for t, name in enumerate(TEMPLATE_TEXT):
                text[of_table, t] = self.table.texts(name, at)
            for t, name in enumerate(TEMPLATE_NUMBERS):
                numbers[of_table, t] = self.table.numbers(name, at)
        return text, numbers

    def _held(self, slots: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """Of each array series in ``slots``, how many nights the rule still holds (the last of its
        nights, at most noise_window + window + 2 and its outliers), and the rings' cells of those
        nights in order, one row per series (cells past a series' count: padding)."""
        w, p = self.w, self.p
        outliers = (w.label[slots] == _CODE["outlier"]).sum(axis=1)
        held = np.minimum(w.count[slots], p.noise_window + p.window + 2 + outliers)
        width = int(held.max(initial=0))
        at = (w.head[slots, None] - held[:, None] + np.arange(width)[None, :]) % CAPACITY
        return held, (slots[:, None], at)

    def _templates(self, kids: np.ndarray, slots: np.ndarray) -> list[dict]:
        """The template of each array series of ``kids`` (in ``slots``) as a loaded state holds it:
        its key and :meth:`_template_fields`."""
        text, numbers = self._template_fields(slots)
        return [{**dict(zip(KERNEL_KEY, self.key_of[kid], strict=False)),
                 **dict(zip(TEMPLATE_TEXT, texts, strict=True)), **dict(zip(TEMPLATE_NUMBERS, values, strict=True))}
                for kid, texts, values in zip(kids.tolist(), text.tolist(), numbers.tolist(), strict=True)]

    def _take(self, kids: np.ndarray) -> list[SeriesState | None]:
        """Series ``kids`` out of the arrays (or the objects), each as a SeriesState; None for one
        that has none."""
        kinds = self.kind[kids]
        in_arrays = kids[kinds == 1]
        from_arrays = iter(self._states(in_arrays))
        self.free.extend(self.slot_of[in_arrays].tolist())
        self.slot_of[in_arrays] = -1
        self.kind[kids] = 0
        taken: list[SeriesState | None] = []
        for kid, kind in zip(kids.tolist(), kinds.tolist(), strict=True):
            if kind == 1:
                state = next(from_arrays)
                if state.pending is not None:
                    self._taken_pending[kid] = state.pending
            else:
                state = self.objects.pop(kid) if kind == 2 else None
            taken.append(state)
        return taken

    def _absent(self, kids: np.ndarray) -> dict[str, np.ndarray]:
        """SeriesState.absent of array series ``kids`` (each within a window of its last night):
        their ``missing`` records as columns of :meth:`_fast`'s kind (the text of a template row
        left to :meth:`_records`)."""
        w, n = self.w, len(kids)
        s = self.slot_of[kids]
        rows = w.t_row[s]
        kept = rows < 0
        out: dict[str, np.ndarray] = {"_row": rows}
        keys = [self.key_of[kid] for kid in kids[kept].tolist()]
        for name in _TEXT:
            out[name] = np.empty(n, dtype=object)
            if name in KERNEL_KEY:
                at = KERNEL_KEY.index(name)
                out[name][kept] = [str(key[at] or "") for key in keys]
            else:
                out[name][kept] = [str(v or "") for v in w.t_text[s[kept], TEMPLATE_TEXT.index(name)].tolist()]
        for name in _NUMBERS:
            out[name] = np.full(n, np.nan)
        for name in ("time_share", "roof_flops", "roof_dram_bw"):  # the template's; the rest is NaN
            out[name][~kept] = self.table.numbers(name, rows[~kept])
            out[name][kept] = w.t_num[s[kept], TEMPLATE_NUMBERS.index(name)]
        count = np.minimum(w.count[s], self.p.window)
        nights = np.arange(self.p.window)[None, :] >= (self.p.window - count)[:, None]
        baseline = _median_rows(w.value[s[:, None], w.last(s, self.p.window)], nights)
        for name in ("baseline_runs", "direction", "bound_side"):  # each one's code for ""
            out[name] = np.zeros(n, dtype=np.int64)
        out["label"] = np.full(n, _CODE["missing"], dtype=np.int64)
        out["revised_label"] = out["label"].copy()
        out["segment_start"] = w.seg_start[s].copy()
        out["note"] = np.array([f"absent; last seen {run}" for run in w.last_run[s].tolist()], dtype=object)
        out["segment"] = w.seg[s].copy()
        out["n_baseline"] = np.zeros(n, dtype=np.int64)
        out["nights_in_violation"] = np.zeros(n, dtype=np.int64)
        for name in ("value_s", "flop_ratio", "dram_bytes_ratio", "performance_baseline", "roof_pct_baseline",
                     "ai_dram_baseline", "perf_ratio", "ratio", "impact", "noise_s", "limit_rel", "z",
                     "lower_s", "upper_s"):
            out[name] = np.full(n, np.nan)
        out["baseline_s"] = baseline
        return out

    def state_table(self, meta: dict) -> pa.Table:
        """The state after the nights judged so far, as :func:`roofline.nightly.state_file.state_table`
        writes an :class:`Engine` holding these series, ``meta`` in it: the array series' rows built
        from the arrays, not from a SeriesState of each (whose nights' dicts the table would only
        take apart again)."""
        in_arrays = np.flatnonzero(self.kind == 1)
        objects = np.flatnonzero(self.kind == 2).tolist()
        keys = [self.key_of[kid] for kid in (*in_arrays.tolist(), *objects)]
        parts = pa.concat_tables([self._array_rows(in_arrays, keys[: len(in_arrays)]), series_table(
            self.keys, keys[len(in_arrays):], [self.objects[kid] for kid in objects])])
        order = sorted(range(len(keys)), key=keys.__getitem__)
        return with_meta(parts.take(pa.array(order, pa.int64())), meta)

    def _array_rows(self, kids: np.ndarray, keys: list[tuple]) -> pa.Table:
        """The state rows (:func:`roofline.nightly.state_file.series_table`) of the array series
        ``kids`` (their ``keys``): what :meth:`_states` gives each, its nights trimmed as
        SeriesState.trim does."""
        w, p = self.w, self.p
        slots = self.slot_of[kids]
        text = pa.string()
        cols: dict[str, pa.Array] = {f"key.{name}": pa.array([k[j] for k in keys], text)
                                     for j, name in enumerate(self.keys)}
        idents = [self.ident_of[ident] for ident in w.ident[slots].tolist()]
        cols["ident"] = list_array([v for ident in idents for v in ident],
                                   np.cumsum([0, *map(len, idents)]), text)
        scalars = {"seg": w.seg[slots], "seg_start": w.seg_start[slots], "carried": w.carried[slots],
                   "last_i": self.last_i[kids], "last_run": w.last_run[slots], "streak": w.streak[slots],
                   "streak_dir": w.streak_dir[slots]}
        for name, kind in SCALARS:
            cols[name] = pa.array(scalars[name], kind)
        template_text, template_numbers = self._template_fields(slots)
        for t, name in enumerate(TEMPLATE_TEXT):
            cols[f"t.{name}"] = pa.array([str(v or "") for v in template_text[:, t].tolist()], text)
        for t, name in enumerate(TEMPLATE_NUMBERS):
            cols[f"t.{name}"] = pa.array(template_numbers[:, t].astype(np.float64), pa.float64())
        pend = w.pend[slots]
        cols["pending"] = pa.array(pend, pa.bool_())
        cols["pending_row"] = pa.array(np.where(pend, w.pend_row[slots], -1), pa.int64())
        cols["pinned"] = pa.array(pend & w.pend_pinned[slots], pa.bool_())
        sides = np.array(_SIDES, dtype=object)
        cols["bound_side"] = pa.array(sides[w.side[slots]], text)
        cols["bound_candidate"] = pa.array(sides[w.candidate[slots]], text)
        cols["bound_count"] = pa.array(w.flips[slots], pa.int64())
        # the nights the rule still holds, less those SeriesState.trim forgets
        held, cells = self._held(slots)
        labels = w.label[cells]
        outlier = labels == _CODE["outlier"]
        cut = np.zeros(len(kids), dtype=np.int64)
        for j in np.flatnonzero(held > p.noise_window + p.window + 2).tolist():
            cut[j] = forgotten(outlier[j, : held[j]].tolist(), p)
        column = np.arange(labels.shape[1])[None, :]
        kept = (column >= cut[:, None]) & (column < held[:, None])
        offsets = np.concatenate([[0], np.cumsum(held - cut)])
        nights = {"run_id": np.array(self.run_names, dtype=object)[w.run[cells][kept]],
                  "label": np.array(_LABELS, dtype=object)[labels[kept]],
                  "dir": w.dir[cells][kept], "persistent": w.persistent[cells][kept]}
        for name, kind in NIGHT_FIELDS:
            values = nights[name] if name in nights else getattr(w, name)[cells][kept]
            cols[f"n.{name}"] = list_array(values, offsets, kind)
        return pa.table(cols)

    # ------------------------------------------------------------------------------- a night
    def read(self, stored: StoredNights, also: list[str]) -> pa.Table:
        """Read every night of ``stored`` (each night's rows together), the columns the rule reads
        converted once for every night, and ``also`` (text columns) given back as Arrow columns."""
        self.table = _Columns(stored.parts([*self.columns, *also]), stored.rows, self.columns, tuple(also))
        return self.table.arrow(also)

    def nights(self, order: list[str], dates: dict[str, str]) -> Iterator[NightResult]:
        """Judge the nights :meth:`read` read in ``order``; yields each night's result."""
        table = self.table
        n = table.n
        kids = self._register(table, n)
        self.w.reserve(len(self.key_of))
        self.row_ident = self._row_idents(table, n)
        runs, night_names = table.coded["run_id"]
        bounds = np.flatnonzero(np.r_[True, runs[1:] != runs[:-1], True])
        at = {night_names[runs[bounds[j]]]: (int(bounds[j]), int(bounds[j + 1])) for j in range(len(bounds) - 1)}
        for run_id in order:
            a, b = at[run_id]
            yield self.night(run_id, dates[run_id], a, kids[a:b])

    def _row_idents(self, table: _Columns, n: int) -> np.ndarray:
        """Each row's segment (series_rule.segment_ident) as a number of ``self.idents``."""
        parts = []
        for name in self.p.segment_fields:
            def text(v: object, version: bool = name == "ncu_version") -> str:
                said = str(v or "").strip()
                return major_minor(said) if version else said

            parts.append(table.distinct(name, n, text, ""))
        group, first = _combinations([(code, len(unique)) for code, unique in parts], n)
        ids = np.empty(len(first), dtype=np.int64)
        for g, r in enumerate(first.tolist()):
            ident = tuple(unique[code[r]] for code, unique in parts)
            ids[g] = self.idents.setdefault(ident, len(self.ident_of))
            if ids[g] == len(self.ident_of):
                self.ident_of.append(ident)
        return ids[group]

    def night(self, run_id: str, run_date: str, start: int, row_kids: np.ndarray) -> NightResult:
        """Judge one night: the rows from ``start`` of :attr:`table` (``row_kids``: their series)."""
        i, table = self.runs, self.table
        self._run_index(run_id)
        self._run_date = run_date
        n = len(row_kids)
        every = np.arange(start, start + n)
        commit = night_commit(table.distinct_objects("app_commit", every) if "app_commit" in table.names else [""])
        # a series twice in one night: its last row counts
        kids, back = np.unique(row_kids[::-1], return_index=True)
        rows = start + n - 1 - back
        on = np.zeros(len(self.key_of), dtype=bool)
        on[kids] = True
        kernel = ~self.is_total[kids]
        kids, rows = kids[kernel], rows[kernel]
        sid = self.sid[kids]
        alive = self.kind > 0
        scopes = len(self.total_of)
        # scopes with a kernel new tonight, and with a kernel seen within a window absent tonight
        fresh = np.zeros(scopes, dtype=bool)
        fresh[sid[self.kind[kids] == 0]] = True
        away = alive & ~on & ~self.is_total
        near = np.zeros(scopes, dtype=bool)
        near[self.sid[away & (i - self.last_i <= self.window)]] = True
        # per scope: its total tracked, a kernel gone since the total's last night, its commit tonight
        total = self.total_of
        tracked = self.kind[total] > 0
        gone = np.zeros(scopes, dtype=bool)
        gone_kids = away & tracked[self.sid] & (self.last_i == self.last_i[total[self.sid]])
        gone[self.sid[gone_kids]] = True
        order = np.lexsort((self.rank[kids], sid))
        kids, rows, sid = kids[order], rows[order], sid[order]
        first = np.r_[True, sid[1:] != sid[:-1]]
        here = np.zeros(scopes, dtype=bool)
        here[sid] = True
        count = np.bincount(sid, minlength=scopes)
        first_row = np.full(scopes, -1, dtype=np.int64)
        first_row[sid[first]] = rows[first]
        same_code = np.zeros(scopes, dtype=bool)
        check = np.flatnonzero(here & tracked)
        if len(check):
            tonight = table.texts("app_commit", first_row[check])
            same_code[check] = (tonight != "") & (tonight == self.commit[total[check]])
        moving = here & tracked & ~same_code
        slow = (fresh & near) | (moving & fresh & gone)
        code_changed = moving & (fresh | gone) & ~slow

        records: dict[int, dict] = {}  # series number -> its record, for the series not judged at once
        revisions: list[tuple[str, int, str, tuple[str, ...]]] = []
        pending_new: list[int] = []
        slow_scopes = np.flatnonzero(slow)
        if len(slow_scopes):
            self._judge_together(i, run_id, run_date, every, row_kids, slow, records, revisions, pending_new)

        # every other scope: waiting nights, then the quiet series at once, the rest by the rule
        waiting = [(kid, state.pending) for kid, state in self.objects.items()
                   if state.pending is not None and not state.pending.get("pinned") and not slow[self.sid[kid]]]
        w = self.w
        in_arrays = np.flatnonzero(self.kind == 1)
        slots = self.slot_of[in_arrays]
        waits = w.pend[slots] & ~w.pend_pinned[slots] & ~slow[self.sid[in_arrays]]
        wait_kids, wait_slots = in_arrays[waits], slots[waits]
        wait_pos = (w.head[wait_slots] - 1) % CAPACITY
        wait_runs, wait_rows = w.run[wait_slots, wait_pos], w.pend_row[wait_slots]
        self._taken_pending: dict[int, dict] = {}
        self._pending_new = self._too_many = np.zeros(0, dtype=np.int64)
        keep = ~slow[sid]
        kids, rows, sid, first = kids[keep], rows[keep], sid[keep], first[keep]
        totals = self._totals(kids, rows, sid, first, count, tracked)
        total_kids = np.array([total[where] for where in totals], dtype=np.int64)
        on[total_kids] = True
        judged = np.concatenate([kids, total_kids])
        changed = np.zeros(len(judged), dtype=bool)
        changed[len(kids):] = code_changed[list(totals)] if totals else False
        fast, fast_kids = self._fast(i, run_id, judged, rows, totals, changed)
        at_once = np.zeros(len(self.key_of), dtype=bool)
        at_once[fast_kids] = True
        by_rule = np.flatnonzero(~at_once[judged])
        stepped = []
        for j, state in zip(by_rule.tolist(), self._take(judged[by_rule]), strict=True):
            kid = int(judged[j])
            if state is None:
                state = SeriesState(self.template.params_for(self.key_of[kid][2]))
            row = table.row(rows[j]) if j < len(kids) else totals[int(self.sid[kid])]
            records[kid] = state.step(i, run_id, run_date, row, code_changed=bool(changed[j]))
            if state.pending is not None and state.pending["run_id"] == run_id:
                pending_new.append(kid)
            stepped.append(state)
        self._settle(judged[by_rule].tolist(), stepped)
        self.slow += len(by_rule)
        absent = alive & ~on & ~slow[self.sid] & (i - self.last_i <= self.window)
        for kid in np.flatnonzero(absent & (self.kind == 2)).tolist():
            rec = self.objects[kid].absent(i, run_id, run_date)
            if rec is not None:
                records[kid] = rec
        gone = np.flatnonzero(absent & (self.kind == 1))
        if len(gone):  # the records of the array series absent tonight join those judged at once
            missing = self._absent(gone)
            fast = {name: np.concatenate([fast[name], missing[name]]) for name in missing} if fast else missing
            fast_kids = np.concatenate([fast_kids, gone])
        for kid, night in waiting:
            revisions.append((night["run_id"], night["row"], night["label"], self.key_of[kid]))
        for kid, s, pos, run, row in zip(wait_kids.tolist(), wait_slots.tolist(), wait_pos.tolist(),
                                         wait_runs.tolist(), wait_rows.tolist(), strict=True):
            night = self._taken_pending.get(kid)
            label = night["label"] if night is not None else _LABELS[w.label[s, pos]]
            revisions.append((self.run_names[run], row, label, self.key_of[kid]))

        ordered = np.concatenate([fast_kids, np.fromiter(records, dtype=np.int64, count=len(records))])
        ordered = ordered[np.argsort(self.rank[ordered])]
        place = np.empty(len(self.key_of), dtype=np.int64)
        place[ordered] = np.arange(len(ordered))
        fast_at = np.full(len(self.key_of), -1, dtype=np.int64)
        fast_at[fast_kids] = np.arange(len(fast_kids))
        for kid in [*pending_new, *self._pending_new.tolist()]:
            if self.kind[kid] == 2:
                self.objects[kid].pending["row"] = int(place[kid])
            else:
                w.pend_row[self.slot_of[kid]] = place[kid]
        data = self._records(run_id, ordered, records, fast, fast_at[ordered])
        self._carriers(data, ordered, run_id, slow)
        tonight_at = self._run_at[run_id]
        for j in self._night_level(data, commit):
            kid = int(ordered[j])
            state = self.objects.get(kid)
            if state is not None and state.pending is not None and state.pending["run_id"] == run_id:
                state.pending["pinned"] = True
            elif self.kind[kid] == 1:
                s = self.slot_of[kid]
                if w.pend[s] and w.run[s, (w.head[s] - 1) % CAPACITY] == tonight_at:
                    w.pend_pinned[s] = True
        many = self._too_many  # after tonight's revisions and pins: see _fast
        for kid, state in zip(many.tolist(), self._take(many), strict=True):
            self.objects[kid] = state
            self.kind[kid] = 2
        self.runs, self.last_commit = self.runs + 1, commit
        return NightResult(run_id, data, revisions)

    def _judge_together(self, i: int, run_id: str, run_date: str, every: np.ndarray, row_kids: np.ndarray,
                        slow: np.ndarray, records: dict, revisions: list, pending_new: list) -> None:
        """The scopes whose kernels may be followed through a change of key, or whose time may move
        between kernels, judged by :meth:`Engine.judge_series` with their series alone."""
        mine = slow[self.sid]
        kids = np.flatnonzero(mine & (self.kind > 0))
        series = {self.key_of[kid]: state for kid, state in zip(kids.tolist(), self._take(kids), strict=True)}
        rows = [self.table.row(j) for j in every[mine[row_kids]].tolist()]
        engine = Engine(self.p, series, i, self.last_commit)
        engine._per_kernel = self.template._per_kernel
        night = engine.judge_series(run_id, run_date, rows)
        revisions.extend(night.revisions)
        for key, rec in zip(night.keys, night.records, strict=True):
            records[self.kid_of[key]] = rec
        settled = [self.kid_of[key] for key in engine.series]
        for kid, state in zip(settled, engine.series.values(), strict=True):
            if state.pending is not None and state.pending["run_id"] == run_id:
                pending_new.append(kid)
        self._settle(settled, list(engine.series.values()))
        self.slow += len(night.records)

    def _totals(self, kids: np.ndarray, rows: np.ndarray, sid: np.ndarray, first: np.ndarray,
                count: np.ndarray, tracked: np.ndarray) -> dict[int, dict]:
        """app_total.total_rows: per scope with two kernels tonight or a tracked total, the sum of
        its kernels' times (in key order, as ``sum``) on its first kernel's row; by scope. The
        first kernel's row number is kept in :attr:`total_first`."""
        self.total_first: dict[int, int] = {}
        if not len(kids):
            return {}
        wanted = (count >= 2) | tracked
        duration = self.table.numbers("duration_s", rows)
        clock = self.table.numbers("sm_clock_hz", rows)
        sums = np.bincount(sid, weights=duration, minlength=len(wanted))
        bad = np.bincount(sid, weights=~(duration > 0), minlength=len(wanted))
        clocks = _group_medians(clock, sid, len(wanted))
        starts = np.flatnonzero(first)
        starts = starts[wanted[sid[starts]]]
        out = {}
        for a, row in zip(starts.tolist(), self.table.rows(rows[starts]), strict=True):
            where = int(sid[a])
            row.update(kernel=APP_TOTAL, kernel_short=APP_TOTAL_SHORT, grid="", block="", launches=1,
                       duration_s=float(sums[where]) if bad[where] == 0 else math.nan, time_share=1.0,
                       bound="", bound_kind="", sm_clock_hz=float(clocks[where]))
            row.update(dict.fromkeys(_TOTAL_NAN, math.nan))
            out[where] = row
            self.total_first[where] = int(rows[a])
        return out

    # ------------------------------------------------------------------ the quiet series at once
    def _fast(self, i: int, run_id: str, judged: np.ndarray, rows: np.ndarray, totals: dict[int, dict],
              changed: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Judge tonight's quiet array series among ``judged`` (series with a row tonight: the first
        ``len(rows)`` on those rows of :attr:`table`, then the app totals of ``totals``) as
        series_rule.SeriesState.step and _judge do when the series stays in its segment at its clock
        and work with its bound side; commit their state. Returns their records as columns (with
        ``_row``, each one's row of :attr:`table`, -1 for an app total, whose text the columns hold)
        and the series judged, in the columns' order. The others are left to the rule."""
        p, w, table = self.p, self.w, self.table
        picked = np.flatnonzero((self.kind[judged] == 1) & ~changed)
        if not len(picked):
            return {}, np.zeros(0, dtype=np.int64)
        slot = self.slot_of[judged[picked]]
        m, nt = len(picked), len(rows)
        is_row = picked < nt
        row_at = rows[picked[is_row]]
        scope_at = [int(self.sid[kid]) for kid in judged[picked[~is_row]].tolist()]
        totals_at = [totals[where] for where in scope_at]

        # the series with a row tonight come first, then the app totals (``judged``'s order)
        k = len(row_at)
        names = ("launches", "duration_s", "flop_total", "flop", "dram_bytes", "performance", "roof_pct", "ai_dram",
                 "sm_clock_hz", "ridge_ratio", "time_share", "roof_flops", "roof_dram_bw")
        numbers = np.empty((len(names), m))
        for f, name in enumerate(names):
            numbers[f, :k] = table.numbers(name, row_at)
        if totals_at:
            numbers[:, k:] = [[number(r.get(name)) for r in totals_at] for name in names]
        num = dict(zip(names, numbers, strict=True))
        bound_kind = np.empty(m, dtype=object)
        bound_kind[:k] = table.texts("bound_kind", row_at)
        bound_kind[k:] = [str(r.get("bound_kind") or "") for r in totals_at]
        ident = np.empty(m, dtype=np.int64)
        ident[is_row] = self.row_ident[row_at]
        if totals_at:  # a total's segment is its first kernel's
            ident[~is_row] = self.row_ident[[self.total_first[where] for where in scope_at]]

        launches = num["launches"]
        per = np.where(launches > 0, launches, 1.0)
        value = num["duration_s"] / per
        flop = np.where(np.isfinite(num["flop_total"]), num["flop_total"], num["flop"]) / per
        nbytes = num["dram_bytes"] / per
        perf, roof, ai, clock = num["performance"], num["roof_pct"], num["ai_dram"], num["sm_clock_hz"]
        memory = (bound_kind == "memory") | ~(flop > 0)
        work = np.where(memory, nbytes, flop)

        # per series, over the nights it keeps (series_rule._judge): the pool's medians, the noise,
        # the usual clock, whether a recent night was at another work (compiled: one pass a series)
        from roofline.nightly import replay_windows  # numba: loaded by a replay only

        layout = replay_windows.Layout(
            len(_POOLED), _FIELDS.index("value"), _FIELDS.index("flop"), _FIELDS.index("bytes"), _FIELDS.index("clock"),
            len(_FIELDS), p.window, p.noise_window, p.min_nights, p.work_tol, _CODE["outlier"])
        found = replay_windows.judge_windows(w.numbers, w.label, w.run, w.count, w.head, w.pend, slot, memory, work,
                                             layout)
        nb = found.pool_size
        base, _, _, perf_base, roof_base, ai_base = found.medians
        # under min_nights baseline nights: a plain relative rule, information only (no noise, no verdict)
        info = nb < p.min_nights
        # tonight against the pool, its noise and the series' last night; the bound side; the nights
        # of the series judged at once committed to their rings
        fields = dict(value=value, flop=flop, bytes=nbytes, perf=perf, roof=roof, ai=ai, clock=clock)
        v = replay_windows.judge_tonight(
            found, value, flop, nbytes, clock, roof, num["ridge_ratio"], np.stack([fields[name] for name in _FIELDS]),
            w.ident[slot] == ident, slot, w, self._run_at[run_id], layout, replay_windows.Rule(
                p.window, p.min_nights, p.clock_tol, p.work_tol, p.short_sigma_floor, p.sigma_floor, p.rel_min, p.z_min,
                p.big_ratio, p.big_z, p.info_rel, p.ridge_band, p.flip_nights, _CODE["insufficient_data"],
                _CODE["regression"], _CODE["improvement"], _CODE["suspicious"], _CODE["unchanged"], _SIDE["compute"],
                _SIDE["memory"]))
        ok, ratio, rel, limit, z, code = v.ok, v.ratio, v.rel, v.limit, v.z, v.code
        direction, persistent, big, said, roof_moved, roof_note = (
            v.direction, v.persistent, v.big, v.said, v.roof_moved, v.roof_note)
        flop_moved, bytes_moved, side, cand, new_flips = v.flop_moved, v.bytes_moved, v.side, v.candidate, v.flips

        q = np.flatnonzero(ok)
        if not len(q):
            return {}, np.zeros(0, dtype=np.int64)
        s_q = slot[q]
        # the records (series_rule._record, then _judge's updates on this path)
        nb_q = nb[q]
        # the pool's run ids joined with ",": once per distinct pool (most series share tonight's)
        pools = found.pool_runs[q]
        which, firsts = replay_windows.distinct_rows(pools)
        names = self.run_names
        baseline_runs = self._pool_codes([",".join(names[r] for r in row if r >= 0)
                                          for row in pools[firsts].tolist()])[which]
        row_of = np.full(m, -1, dtype=np.int64)
        row_of[is_row] = row_at
        # the text of a record judged at once: its row's (see _records), an app total's its own
        out: dict[str, np.ndarray] = {"_row": row_of[q]}
        quiet_totals = [totals_at[t] for t in (q[q >= k] - k).tolist()]  # the last of q
        for name in _TEXT:
            out[name] = np.empty(len(q), dtype=object)
            out[name][len(q) - len(quiet_totals):] = [str(r.get(name) or "") for r in quiet_totals]
        for name in _NUMBERS:
            out[name] = num[name][q]
        info_q = info[q]
        bq, rq = base[q], ratio[q]
        relq, limq, zq = (np.where(info_q, np.nan, x[q]) for x in (rel, limit, z))
        code_q, dir_q, spike, lone, dismissed = code[q], direction[q], v.spike[q], v.lone[q], v.dismissed[q]
        notes = np.full(len(q), "", dtype=object)
        big_q = (big[q] != 0) & (persistent[q] == 0) & ~info_q
        for j in np.flatnonzero(roof_note[q] | (said[q] != 0) | big_q | spike).tolist():
            note = ""
            if big_q[j]:
                note = f"big jump: ratio {rq[j]:.3f}, z {zq[j]:.1f}"
            elif roof_note[q[j]]:
                note = f"% of roof {roof_moved[q[j]]:+.1%} with time flat: ceiling moved"
            elif said[q[j]]:
                note = f"{rq[j] - 1:+.1%} vs {nb_q[j]} night(s) (info only)"
            if spike[j]:
                was = self.run_names[v.spike_run[q[j]]]
                note = join_note(note, f"{was} was a single-night spike, now excluded from the baseline")
            notes[j] = note
        streak_dir = w.streak_dir[s_q]
        streak = np.where((dir_q != 0) & (dir_q == streak_dir), w.streak[s_q] + 1, (dir_q != 0).astype(np.int64))
        shown = np.where(info_q, said[q], dir_q)
        out.update(value_s=value[q], segment=w.seg[s_q].copy(), segment_start=w.seg_start[s_q].copy(),
                   flop_ratio=flop_moved[q] + 1, dram_bytes_ratio=bytes_moved[q] + 1,
                   n_baseline=nb[q].astype(np.int64), baseline_runs=baseline_runs,
                   performance_baseline=perf_base[q], roof_pct_baseline=roof_base[q],
                   ai_dram_baseline=ai_base[q], perf_ratio=_rel_change(perf[q], perf_base[q]) + 1,
                   baseline_s=bq, ratio=rq, impact=(rq - 1) * num["time_share"][q], noise_s=relq * bq,
                   limit_rel=limq, z=zq, lower_s=bq * (1 - limq), upper_s=bq * (1 + limq),
                   bound_side=side[q].astype(np.int64),
                   note=notes, label=code_q, revised_label=code_q.copy(), nights_in_violation=streak,
                   direction=shown % len(_DIRECTIONS))
        # the rest of the state after tonight (the rings hold tonight already)
        self._pending_new = judged[picked[q[lone]]]
        self.last_i[judged[picked[q]]] = i
        w.last_run[s_q] = run_id
        totals_q = ~is_row[q]
        total_at = np.cumsum(~is_row)[q[totals_q]] - 1  # the app totals' places in totals_at
        if totals_q.any():  # the commit the night-level checks compare is an app total's
            self.commit[judged[picked[q[totals_q]]]] = np.array(
                [str(r.get("app_commit") or "") for r in totals_at], dtype=object)[total_at]
        w.t_row[s_q] = row_of[q]
        w.streak[s_q] = streak
        w.streak_dir[s_q] = dir_q
        w.side[s_q], w.candidate[s_q], w.flips[s_q] = side[q], cand[q], new_flips[q]
        if totals_q.any():
            s_t = s_q[totals_q]
            for t, name in enumerate(TEMPLATE_TEXT):
                w.t_text[s_t, t] = np.array([str(r.get(name) or "") for r in totals_at], dtype=object)[total_at]
            for t, name in enumerate(TEMPLATE_NUMBERS):
                w.t_num[s_t, t] = np.array([number(r.get(name)) for r in totals_at], dtype=np.float64)[total_at]
        # a series whose nights hold many outliers goes on as a SeriesState (the rule may then keep
        # more nights than the arrays hold), taken out while they still hold all it keeps
        busy = s_q[dismissed]
        many = (w.label[busy] == _CODE["outlier"]).sum(axis=1) > _MAX_OUTLIERS
        self._too_many = judged[picked[q[dismissed]]][many]
        self.fast += len(q)
        return out, judged[picked[q]]

    # ------------------------------------------------------------------ the night's records
    def _records(self, run_id: str, ordered: np.ndarray, records: dict[int, dict], fast: dict[str, np.ndarray],
                 at: np.ndarray) -> dict[str, np.ndarray]:
        """The night's records in series order (``ordered``), as columns (``DECISION_COLUMNS``) of
        the types the rule's records take in a frame: from ``fast`` where ``at`` (the place in its
        columns) is not -1, else the series' record in ``records``. A text column of one value is
        an Arrow array."""
        n = len(ordered)
        is_fast = at >= 0
        places, fast_places = np.flatnonzero(~is_fast), np.flatnonzero(is_fast)
        fast_at = at[fast_places]
        slow = [records[kid] for kid in ordered[places].tolist()]
        fixed = {"run_id": run_id, "run_date": self._run_date, "label": "unchanged",
                 "revised_label": "unchanged", "direction": "", "metric": "time", "bound_flip": "",
                 "note": "", "previous_kernel": "", "previous_grid": "", "previous_block": "",
                 "environment_shift": False, "rule_version": RULE_VERSION, "nights_in_violation": 0}
        data = {}
        if fast:
            rows = np.full(n, -1, dtype=np.int64)
            rows[fast_places] = fast["_row"][fast_at]
            others = np.flatnonzero(rows < 0)  # the text not in a row of the history: slow ones, app totals
            other_fast = at[others][is_fast[others]]
            other_slow = ~is_fast[others]
        for name in DECISION_COLUMNS:
            if name in _CONSTANT_TEXT and fast and all(rec[name] == fixed[name] for rec in slow):
                data[name] = pa.repeat(pa.scalar(fixed[name], pa.large_string()), n)
                continue
            if (name in _CODED_TEXT or name == "baseline_runs") and fast:
                data[name] = self._coded_column(name, n, fast[name][fast_at], fast_places, slow, places)
                continue
            if name in _TEXT and fast:
                other = np.empty(len(others), dtype=object)
                other[~other_slow] = fast[name][other_fast]
                other[other_slow] = [rec[name] for rec in slow]
                data[name] = self.table.text_column(name, rows, other.tolist())
                continue
            if name in _TEXT_COLUMNS:
                col = np.empty(n, dtype=object)
            elif name in _INT_COLUMNS:
                col = np.zeros(n, dtype=np.int64)
            elif name == "environment_shift":
                col = np.zeros(n, dtype=bool)
            else:
                col = np.full(n, np.nan)
            if fast:
                if name in fast:
                    col[fast_places] = fast[name][fast_at]
                elif name in fixed:
                    col[fast_places] = fixed[name]
            if slow:
                col[places] = [rec[name] for rec in slow]
            data[name] = col
        return data

    def _coded_column(self, name: str, n: int, codes: np.ndarray, at: np.ndarray, slow: list[dict],
                      places: np.ndarray) -> pd.Categorical | pa.Array:
        """Text column ``name`` of :data:`_CODED_TEXT` or ``baseline_runs`` of ``n`` records: ``codes``
        at ``at``, the records ``slow`` at ``places``. A Categorical of the column's values, the
        baseline nights an Arrow array; an object array where a record holds a text the values do
        not."""
        column = np.zeros(n, dtype=np.int64)
        column[at] = codes
        texts = [rec[name] for rec in slow]
        if name == "baseline_runs":
            column[places] = self._pool_codes(texts)
            return self._pool_texts.take(pa.array(column))
        values = _CODED_TEXT[name]
        if all(text in values for text in texts):
            column[places] = [values.index(text) for text in texts]
            return pd.Categorical.from_codes(column, dtype=_categories(values))
        objects = np.array(values, dtype=object)[column]
        objects[places] = texts
        return objects

    def _pool_codes(self, texts: list[str]) -> np.ndarray:
        """The code of each baseline nights' text among the texts met (those not met before added)."""
        codes = np.empty(len(texts), dtype=np.int64)
        new = []
        for j, text in enumerate(texts):
            code = self._pool_code.get(text)
            if code is None:
                code = self._pool_code[text] = len(self._pool_code)
                new.append(text)
            codes[j] = code
        if new:
            self._pool_texts = pa.concat_arrays([self._pool_texts, pa.array(new, pa.large_string())])
        return codes

    def _carriers(self, data: dict[str, np.ndarray], ordered: np.ndarray, run_id: str, slow: np.ndarray) -> None:
        """The note of each app total that regressed tonight in a scope not judged together
        (app_total.settle_moves without moves names the kernels that carry the rise)."""
        kids = ordered.tolist()
        risen = np.flatnonzero(_equals(data["kernel"], APP_TOTAL) & (data["label"] == "regression")
                               & (data["direction"] == "up"))
        for j in risen.tolist():
            kid = kids[j]
            if slow[self.sid[kid]]:
                continue  # judged together: Engine.judge_series named them
            places = [t for t, k in enumerate(kids) if self.sid[k] == self.sid[kid]]
            scope_records = [{name: _value(data[name], t) for name in DECISION_COLUMNS} for t in places]
            settle_moves({}, [self.key_of[kids[t]] for t in places], scope_records, {}, run_id)
            data["note"][j] = scope_records[places.index(j)]["note"]

    def _night_level(self, data: dict[str, np.ndarray], commit: str) -> list[int]:
        """engine.night_level on the night's columns; the places of the demoted regressions."""
        shifted, hits = night_level_hits(_objects(data["label"]), _objects(data["direction"]),
                                         ~_equals(data["kernel"], APP_TOTAL), commit, self.last_commit, self.p)
        if shifted:
            data["environment_shift"][:] = True
        for j, why in hits:
            data["note"][j] = join_note(data["note"][j], why)
            data["label"][j] = data["revised_label"][j] = "suspicious"
        return [j for j, _ in hits]
