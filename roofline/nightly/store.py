"""Nightly history: the run-partitioned store of kernels per night, and of decision records.

The store (``data/history/``) is a Parquet dataset with one partition per run,
``run=<run_id>/part.parquet``: one row per kernel per run, the ``kernels`` table plus the run
context (:data:`CONTEXT`). Appends are atomic and idempotent: a temp dir inside the store is
written and fsynced, then published with one rename (new night) or one file ``os.replace`` (rerun
of a night); a killed append leaves the store as it was, and readers skip dot-prefixed temp dirs.

Each row keeps the counting conventions of its numbers (column ``convention`` of the ``kernels``
table); nights stored before that column existed read back with ``convention == ""``. The
decision rule is in :mod:`roofline.nightly.engine`; its names stay importable from here.

The nightly run reads only what it needs: :func:`run_files` lists the nights and a fingerprint of
each file from the directory alone, :func:`read_run` reads one night, :func:`read_decisions` the
decisions of the nights it is given. The store stays a plain hive-partitioned Parquet dataset
(``run=<run_id>/part.parquet``) that DuckDB, polars, Spark or pyarrow read as it is
(docs/tracking.md has the queries).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from roofline import __version__
from roofline.errors import cannot_write, is_environmental
from roofline.files.processes import process_alive
from roofline.tables.schemas import KERNEL_KEY, TABLES, Column, conform, conform_some
from roofline.tables.typed_columns import ABSENT_VALUES, NUMPY_DTYPES, absent_array

PART = "part.parquet"
DECISIONS_DIR = "_decisions"  # "_" prefix: pyarrow's dataset discovery skips it, like ".tmp-"
_TMP_PREFIX = ".tmp-"
_STALE_TMP_S = 24 * 3600
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+-]*$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")

CONTEXT = [
    Column("run_id", "str", "", "nightly run id (default: the date)"),
    Column("run_date", "str", "", "logical nightly date; orders the runs"),
    Column("run_time", "str", "", "UTC time the run was recorded (ISO 8601)"),
    Column("trigger", "str", "", "scheduled, manual or rerun"),
    Column("app_commit", "str", "", "application git commit"),
    Column("pipeline_version", "str", "", "roofline package version (and commit)"),
    Column("config_hash", "str", "", "sha256 of the workflow config, shortened"),
    Column("host", "str"),
    Column("gpu_uuid", "str"),
    Column("driver_version", "str"),
    Column("cuda_version", "str"),
    Column("ncu_version", "str"),
    Column("mig_mode", "str"),
    Column("clock_control", "str", "", "ncu --clock-control mode"),
    Column("cache_control", "str", "", "ncu --cache-control mode"),
    Column("sm_clock_hz", "float", "Hz", "observed SM clock (descriptive, never a key)"),
    Column("context_json", "str", "", "the run context as given"),
]
_CONTEXT_NAMES = [c.name for c in CONTEXT]
# Names of kernels columns that nights stored by older versions carry (the applied roofs, f4805f8).
_RENAMED = {"peak_flops": "roof_flops", "peak_dram_bw": "roof_dram_bw"}
_OLD_BW = re.compile(r"^peak_(\w+)_bw_used$")  # -> roof_<level>_bw


# ----------------------------------------------------------------------------------------- store
def _coerce(frame: pd.DataFrame, columns: list[Column]) -> pd.DataFrame:
    out = {}
    for column in columns:
        values = frame.get(column.name, pd.Series(pd.NA, index=frame.index, dtype="object"))
        if column.dtype == "float":
            out[column.name] = pd.to_numeric(values, errors="coerce").astype("float64")
        else:
            out[column.name] = values.astype("string").fillna("")
    return pd.DataFrame(out, index=frame.index)


def history_frame(frame: pd.DataFrame, columns: list[str] | None = None) -> pd.DataFrame:
    """``frame`` with the history columns: the run context, then the ``kernels`` table; ``columns``:
    only those of them, in that order (the others are not built)."""
    frame = frame.reset_index(drop=True)
    kernel_part = frame[[c for c in frame.columns if c not in _CONTEXT_NAMES]]
    if columns is None:
        return pd.concat([_coerce(frame, CONTEXT), conform(kernel_part, "kernels")], axis=1)
    wanted = set(columns)
    parts = [_coerce(frame, [c for c in CONTEXT if c.name in wanted]),
             conform_some(kernel_part, "kernels", [c for c in columns if c not in _CONTEXT_NAMES])]
    both = pd.concat(parts, axis=1)
    return both[[c for c in columns if c in both.columns]]


def _check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not _RUN_ID.match(run_id):
        raise ValueError(f"run id {run_id!r}: use letters, digits and . _ : + - (e.g. 2026-11-29)")
    return run_id


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _clean_stale(store: Path) -> None:
    """Remove the temp dirs of appends that died (process gone, or a day old)."""
    with os.scandir(store) as entries:  # not Path.glob: a replay writes hundreds of nights into one folder
        temps = [Path(entry.path) for entry in entries if entry.name.startswith(_TMP_PREFIX)]
    for entry in temps:
        try:
            pid = int(entry.name[len(_TMP_PREFIX):].split("-")[0])
            stale = not process_alive(pid) or time.time() - entry.stat().st_mtime > _STALE_TMP_S
        except (ValueError, OSError):
            pid, stale = -1, True
        if stale and pid != os.getpid():
            shutil.rmtree(entry, ignore_errors=True)


def _atomic_put(store: Path, run_id: str, frame: pd.DataFrame | pa.Table, dictionary: bool = True) -> Path:
    return write_partition(store, f"run={_check_run_id(run_id)}", frame, dictionary)


def write_partition(parent: str | os.PathLike, name: str, data: pd.DataFrame | pa.Table,
                    dictionary: bool = True) -> Path:
    """Write ``<parent>/<name>/part.parquet`` atomically: a temp dir inside ``parent``, fsynced,
    published with one rename (new) or one file ``os.replace`` (replacing); a killed write leaves
    the old file or none. A ``pyarrow.Table`` keeps its schema metadata. ``dictionary``: Parquet's
    dictionary encoding of the columns (pyarrow's default), else plain pages."""
    parent = Path(parent)
    final = parent / name
    try:
        return _put(parent, final, data, dictionary)
    except OSError as error:
        if is_environmental(error):  # out of space, read-only, denied: name the partition, not the temp dir
            raise cannot_write(final / PART, error) from error
        raise


def _put(store: Path, final: Path, data: pd.DataFrame | pa.Table, dictionary: bool) -> Path:
    store.mkdir(parents=True, exist_ok=True)
    _clean_stale(store)
    tmp: Path | None = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{os.getpid()}-", dir=store))
    try:
        part = tmp / PART
        if isinstance(data, pa.Table):
            pq.write_table(data, part, use_dictionary=dictionary)
        else:
            data.to_parquet(part, index=False, use_dictionary=dictionary)
        _fsync(part)
        _fsync(tmp)
        if final.is_dir():
            os.replace(part, final / PART)  # a rerun of the night: one atomic file swap
            _fsync(final)
        else:
            os.rename(tmp, final)  # a new night: one atomic directory publish
            tmp = None
        _fsync(store)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return final / PART


def _upgrade(part: pd.DataFrame) -> pd.DataFrame:
    """A night stored by an older version under today's columns: renamed columns under their new
    name, columns the ``kernels`` table no longer declares left out, missing ones added later."""
    names: dict[str, str] = {}
    for old in part.columns:
        new = _RENAMED.get(old) or _OLD_BW.sub(r"roof_\1_bw", old)
        if new != old and new not in part.columns and new not in names.values():
            names[old] = new
    part = part.rename(columns=names)
    if "bound_kind" not in part.columns and "bound" in part.columns:  # stored before the kind was a column
        part = part.assign(bound_kind=part["bound"].astype("string").str.split(":", n=1).str[0])
    known = {c.name for c in TABLES["kernels"]} | set(_CONTEXT_NAMES)
    return part[[c for c in part.columns if c in known]]


def _read_parts(store: Path) -> list[pd.DataFrame]:
    if not store.is_dir():
        return []
    return [pd.read_parquet(p) for p in sorted(store.glob(f"run=*/{PART}"))]


def append_run(store_dir: str | os.PathLike, run_id: str, kernels: pd.DataFrame,
               context: Mapping | None = None) -> Path:
    """Write one night's kernels and run context to the store, replacing that night if present.

    Parameters
    ----------
    store_dir : path
        The history store (``data/history``).
    run_id : str
        The night's id; its partition is ``run=<run_id>``.
    kernels : DataFrame
        The ``kernels`` tables of every app of the night, concatenated.
    context : mapping, optional
        Run context: keys of :data:`CONTEXT`; ``devices: {device: {...}}`` overrides per device.

    Returns
    -------
    Path
        The partition file written.

    Raises
    ------
    ValueError
        On a bad run id, or columns the ``kernels`` table does not declare.
    """
    context = dict(context or {})
    frame = kernels.reset_index(drop=True).drop(columns=_CONTEXT_NAMES, errors="ignore")
    devices = frame["device"].astype(str) if "device" in frame else pd.Series("", index=frame.index)
    run_time = str(context.get("run_time") or datetime.now(UTC).isoformat(timespec="seconds"))
    date = context.get("run_date") or (run_id[:10] if _DATE.match(run_id) else run_time[:10])
    fixed = {"run_id": _check_run_id(run_id), "run_date": str(date), "run_time": run_time,
             "pipeline_version": context.get("pipeline_version") or __version__,
             "context_json": json.dumps(context, sort_keys=True, default=str)}
    per_device = context.get("devices") or {}
    # the context of each distinct device (a last row for none), typed once and then taken per row:
    # a night of a thousand apps is ~100k rows
    codes, names = pd.factorize(devices)
    distinct = pd.DataFrame({name: [fixed[name] if name in fixed
                                    else per_device.get(d, {}).get(name, context.get(name))
                                    for d in [*names, None]] for name in _CONTEXT_NAMES})
    rows = np.where(codes < 0, len(names), codes)
    # added in one step: the kernels table is wide, and a column inserted into it one at a time copies
    context_columns = pd.DataFrame({name: values.array.take(rows)
                                    for name, values in _coerce(distinct, CONTEXT).items()})
    frame = pd.concat([frame, context_columns], axis=1)
    return _atomic_put(Path(store_dir), run_id, history_frame(frame))


def run_files(store_dir: str | os.PathLike) -> dict[str, tuple[int, int, int]]:
    """Every stored night's run id and a fingerprint of its file (inode, size, mtime in ns), from
    the directory listing alone: a night rewritten since (a rerun) has another fingerprint."""
    store = Path(store_dir)
    out: dict[str, tuple[int, int, int]] = {}
    if not store.is_dir():
        return out
    with os.scandir(store) as entries:
        for entry in entries:
            if not entry.name.startswith("run=") or not entry.is_dir():
                continue
            try:
                st = os.stat(Path(entry.path) / PART)
            except FileNotFoundError:
                continue
            out[entry.name[len("run="):]] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return dict(sorted(out.items()))


def _read_columns(path: Path, columns: list[str] | None, rename: bool = False) -> pd.DataFrame:
    """A Parquet file's ``columns`` that it has (all when None); ``rename``: also the older names
    of the wanted ``kernels`` columns (:func:`_upgrade` renames them)."""
    if columns is None:
        return pd.read_parquet(path)
    wanted = set(columns)
    names = pq.read_schema(path).names
    keep = [n for n in names if n in wanted
            or (rename and (_RENAMED.get(n) or _OLD_BW.sub(r"roof_\1_bw", n)) in wanted)]
    return pd.read_parquet(path, columns=keep)


def read_run(store_dir: str | os.PathLike, run_id: str, columns: list[str] | None = None) -> pd.DataFrame:
    """One stored night, its rows as :func:`read_history` returns them (older versions' columns
    upgraded); ``columns``: only those (the nightly decision reads ~30 of ~110).

    Raises
    ------
    FileNotFoundError
        If the store has no night ``run_id``.
    """
    path = Path(store_dir) / f"run={_check_run_id(run_id)}" / PART
    return history_frame(_upgrade(_read_columns(path, columns, rename=True)), columns)


def read_runs(store_dir: str | os.PathLike, run_ids: list[str], columns: list[str]) -> pd.DataFrame:
    """Several stored nights' ``columns``, as :func:`read_run` returns each, one after another in
    the order of ``run_ids``, typed in one pass (a replay reads every night: one conversion per night
    would cost more than judging it)."""
    store = Path(store_dir)
    paths = [str(store / f"run={_check_run_id(run_id)}" / PART) for run_id in run_ids]
    wanted = set(columns)

    def kept(names: list[str]) -> list[str]:
        return [n for n in names if n in wanted or (_RENAMED.get(n) or _OLD_BW.sub(r"roof_\1_bw", n)) in wanted]

    if not paths:
        return history_frame(pd.DataFrame({"app": pd.Series([], dtype="string")}), columns)
    # one scan of every file when they share one schema (rows in the order of the files given)
    dataset = ds.dataset(paths, format="parquet")
    if all(fragment.physical_schema.equals(dataset.schema) for fragment in dataset.get_fragments()):
        parts = [_upgrade(dataset.to_table(columns=kept(dataset.schema.names)).to_pandas())]
    else:  # nights stored by different versions: a table per run of nights with one schema
        groups: list[tuple[tuple[str, ...], list[pa.Table]]] = []
        for path in paths:
            table = pq.read_table(path, columns=kept(pq.read_schema(path).names), use_threads=False)
            if groups and groups[-1][1][0].schema.equals(table.schema):
                groups[-1][1].append(table)
            else:
                groups.append((tuple(table.schema.names), [table]))
        parts = [_upgrade(pa.concat_tables(tables).to_pandas()) for _, tables in groups]
    return history_frame(pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0], columns)


# Every stored column's declared type: the night's context and the kernels table's.
_DECLARED = {c.name: c.dtype for c in CONTEXT} | {c.name: c.dtype for c in TABLES["kernels"]}


class StoredNights:
    """Stored nights opened for reading: each night's file footer read once up front, for its row
    count and schema, and again when the night is read. The footers are not kept: parsed, a
    replay's 730 take about 394 MiB, which a read one night at a time never needs at once. The
    nights' text columns are read dictionary-encoded."""

    def __init__(self, store_dir: str | os.PathLike, run_ids: list[str]) -> None:
        self.store, self.run_ids = Path(store_dir), list(run_ids)
        self._paths = [self.store / f"run={_check_run_id(run_id)}" / PART for run_id in self.run_ids]

        # On this thread, keeping none of them: parsed on threads of their own, the footers' memory
        # stays with those threads' heaps once freed (about 340 MiB for 730 nights).
        self.rows, self._one_schema, first = 0, True, None
        self._stored: pa.Schema | None = None  # the first night's (an older version's is read through read_runs)
        for path in self._paths:
            with pq.ParquetFile(path) as night:
                self.rows += night.metadata.num_rows
                if first is None:
                    first, self._stored = night.schema_arrow, night.metadata.schema.to_arrow_schema()
                elif self._one_schema:
                    self._one_schema = night.schema_arrow.equals(first)

    def table(self, columns: list[str]) -> pa.Table:
        """:func:`read_runs` of the nights as an Arrow table, its text columns dictionary-encoded:
        the same columns and values (text never missing, numbers of the declared type, a column no
        night stores filled as :func:`history_frame` fills it). Nights stored by today's version in
        one schema are read as they are, the text never made into Python strings (what a replay of
        a long history costs most in reading it); any other store goes through :func:`read_runs`."""
        return pa.concat_tables(list(self.parts(columns)), promote_options="permissive")

    def parts(self, columns: list[str]) -> Iterator[pa.Table]:
        """:meth:`table` in parts, in the nights' order (a night at a time where they are read as
        stored), so that a reader converting every night never holds them all as Arrow data too:
        on a long history that would double the memory a replay first touches."""
        wanted = [name for name in dict.fromkeys(columns) if name in _DECLARED]
        schema = self._stored
        if self._one_schema and schema is not None and _reads_as_stored(schema, wanted, _DECLARED):
            stored = [n for n in wanted if n in schema.names]
            text = [n for n in stored if _DECLARED[n] == "str"]

            def night(path: Path) -> pa.Table:
                with pq.ParquetFile(path, read_dictionary=text) as file:
                    part = file.read(columns=stored, use_threads=False)
                read = dict(zip(part.column_names, part.columns, strict=True))
                return pa.table({name: _as_declared(read.get(name), part.num_rows, _DECLARED[name]) for name in wanted})

            # The next night is read on a thread of its own while the caller takes this one: one
            # night ahead, so that the nights' buffers are freed and reused as they come.
            with ThreadPoolExecutor(max_workers=1) as reader:
                ahead = reader.submit(night, self._paths[0]) if self._paths else None
                for k in range(len(self._paths)):
                    part = ahead.result()
                    ahead = reader.submit(night, self._paths[k + 1]) if k + 1 < len(self._paths) else None
                    yield part
            return
        frame = read_runs(self.store, self.run_ids, list(dict.fromkeys(columns)))
        yield pa.Table.from_pandas(frame, preserve_index=False).select(
            [name for name in frame.columns if name in _DECLARED])


def read_runs_table(store_dir: str | os.PathLike, run_ids: list[str], columns: list[str]) -> pa.Table:
    """:meth:`StoredNights.table` of the nights ``run_ids``."""
    return StoredNights(store_dir, run_ids).table(columns)


def _reads_as_stored(schema: pa.Schema, wanted: list[str], declared: dict[str, str]) -> bool:
    """Whether nights of ``schema`` hold ``wanted`` as today's version writes them: no column an
    older version named otherwise (:func:`_upgrade`), each stored one of its declared type."""
    if any(name in _RENAMED or _OLD_BW.match(name) for name in schema.names):
        return False
    if "bound_kind" in wanted and "bound_kind" not in schema.names:
        return False
    for name in wanted:
        if name not in schema.names:
            continue
        kind = schema.field(name).type
        if declared[name] == "str":
            if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
                return False
        elif kind != pa.from_numpy_dtype(NUMPY_DTYPES[declared[name]]):
            return False
    return True


def _as_declared(column: pa.Array | pa.ChunkedArray | None, n: int, dtype: str) -> pa.Array | pa.ChunkedArray:
    """A stored column of ``n`` rows (None: not stored) with :func:`history_frame`'s values:
    missing text as "" (text stays dictionary-encoded), missing numbers as the declared type's
    absent value."""
    if column is None:
        if dtype == "str":
            return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)),
                                                  pa.array([""], pa.large_string()))
        return pa.array(absent_array(dtype, n))
    if not column.null_count:
        return column
    if dtype == "str":
        return pc.dictionary_encode(pc.fill_null(column.cast(pa.large_string()), ""))
    return pc.fill_null(column, pa.scalar(ABSENT_VALUES[dtype], column.type))


def run_order(history: pd.DataFrame) -> list[str]:
    """Run ids in night order: logical date, then record time, then id."""
    if history.empty:
        return []
    runs = history.groupby("run_id", sort=False).agg(d=("run_date", "min"), t=("run_time", "min"))
    return runs.reset_index().sort_values(["d", "t", "run_id"])["run_id"].tolist()


def read_history(store_dir: str | os.PathLike) -> pd.DataFrame:
    """Every stored night, one row per kernel per run, in night order (temp dirs ignored)."""
    parts = [_upgrade(p) for p in _read_parts(Path(store_dir))]
    if not parts:
        return history_frame(pd.DataFrame({"app": pd.Series([], dtype="string")}))
    history = history_frame(pd.concat(parts, ignore_index=True))
    position = history["run_id"].map({r: i for i, r in enumerate(run_order(history))})
    history = history.assign(_o=position).sort_values(["_o", *KERNEL_KEY], kind="stable")
    return history.drop(columns="_o").reset_index(drop=True)


def append_decisions(store_dir: str | os.PathLike, run_id: str, decisions: pd.DataFrame | pa.Table) -> Path:
    """Persist one night's decision records under ``<store>/_decisions/`` (atomic, idempotent); a
    table is written as it is (``pa.Table.from_pandas(frame, preserve_index=False)``: the same file)."""
    if isinstance(decisions, pd.DataFrame):
        decisions = decisions.reset_index(drop=True)
    # Plain pages: a night's records are numbers and kernel names, nearly all distinct, so the
    # dictionaries' hashing costs every write (a replay writes every night's) and saves no space.
    return _atomic_put(Path(store_dir) / DECISIONS_DIR, run_id, decisions, dictionary=False)


def decisions_table(columns: Mapping[str, np.ndarray | pa.Array | pd.Categorical]) -> pa.Table:
    """A night's decision records given as numpy columns (:data:`DECISION_COLUMNS`), as the table
    ``pa.Table.from_pandas(pd.DataFrame(columns), preserve_index=False)`` gives (the same types and
    pandas metadata, so the same file), built without the frame: text (object columns of ``str``
    and missing values) as large strings. A text column may also be given as a ``large_string``
    Arrow array or a pandas Categorical of text. Columns pandas would type otherwise (no rows, only
    missing values, other objects) go through the frame."""
    arrays, dtypes = [], []
    for name in DECISION_COLUMNS:
        values = columns[name]
        if isinstance(values, pd.Categorical):  # text of few values: taken from them by code
            texts = _category_texts(values.dtype)
            if texts is None or (values.codes < 0).any():
                values = np.asarray(values, dtype=object)
            else:
                values = texts.take(pa.array(values.codes))
        if isinstance(values, pa.Array):
            text = values if pa.types.is_large_string(values.type) else None
        elif values.dtype != object:
            arrays.append(pa.array(values, from_pandas=True))
            dtypes.append(values.dtype.str)
            continue
        else:
            try:
                text = pa.array(values, type=pa.large_string(), from_pandas=True)
            except (pa.ArrowTypeError, pa.ArrowInvalid):
                text = None
        if text is None or text.null_count == len(text):
            frame = pd.DataFrame({n: v.to_numpy(zero_copy_only=False) if isinstance(v, pa.Array)
                                  else np.asarray(v, dtype=object) if isinstance(v, pd.Categorical) else v
                                  for n, v in columns.items()}, columns=DECISION_COLUMNS)
            return pa.Table.from_pandas(frame, preserve_index=False)
        arrays.append(text)
        dtypes.append("str")
    return pa.Table.from_arrays(arrays, schema=_decisions_schema(tuple(dtypes)))


@functools.cache
def _category_texts(dtype: pd.CategoricalDtype) -> pa.Array | None:
    """The categories of ``dtype`` as a ``large_string`` array, or None unless all are text (a
    replay's records take the same few categories every night)."""
    categories = list(dtype.categories)
    return pa.array(categories, pa.large_string()) if all(isinstance(text, str) for text in categories) else None


@functools.cache
def _decisions_schema(dtypes: tuple[str, ...]) -> pa.Schema:
    """The schema (with pandas' metadata) of a records frame whose columns have ``dtypes``."""
    empty = pd.DataFrame({name: pd.Series([], dtype=dtype)
                          for name, dtype in zip(DECISION_COLUMNS, dtypes, strict=True)})
    return pa.Table.from_pandas(empty, preserve_index=False).schema


def read_decisions(store_dir: str | os.PathLike, runs: list[str] | None = None,
                   columns: list[str] | None = None) -> pd.DataFrame:
    """Persisted decision records (an empty frame when none): every night's, or only those of
    ``runs`` (in that order; nights without records skipped), each with the ``columns`` it has."""
    base = Path(store_dir) / DECISIONS_DIR
    if runs is None:
        paths = sorted(base.glob(f"run=*/{PART}")) if base.is_dir() else []
    else:
        paths = [p for p in (base / f"run={r}" / PART for r in runs) if p.is_file()]
    parts = [_read_columns(p, columns) for p in paths]
    if not parts:
        return pd.DataFrame(columns=columns or DECISION_COLUMNS)
    return pd.concat(parts, ignore_index=True)


# the columns of a night's decision records (roofline.nightly.series_rule writes them)
DECISION_COLUMNS = [
    "run_id", "run_date", *KERNEL_KEY, "kernel_short", "clock_control", "cache_control",
    "convention", "label", "revised_label", "direction", "metric", "value_s", "baseline_s",
    "noise_s", "lower_s", "upper_s", "limit_rel", "ratio", "z", "n_baseline", "baseline_runs",
    "nights_in_violation", "segment", "segment_start", "launches", "time_share", "impact",
    "performance", "performance_baseline", "perf_ratio", "roof_pct", "roof_pct_baseline",
    "ai_dram", "ai_dram_baseline", "bound", "bound_side", "bound_flip", "flop_ratio",
    "dram_bytes_ratio", "roof_flops", "roof_dram_bw", "sm_clock_hz", "environment_shift",
    "note", "previous_kernel", "previous_grid", "previous_block", "rule_version",
]
