"""Nightly history: the run-partitioned store and the per-kernel regression decisions.

The store (``data/history/``) is a Parquet dataset with one partition per run,
``run=<run_id>/part.parquet``: one row per kernel per run, the ``kernels`` table plus the run
context (:data:`CONTEXT`). Appends are atomic and idempotent: a temp dir inside the store is
written and fsynced, then published with one rename (new run) or one file ``os.replace`` (rerun of
a night); a killed append leaves the store as it was, and readers skip dot-prefixed temp dirs.

:func:`decide_all` replays every kernel series night by night with the layered rule of
../shared/guides/tracking.md §4.3 (robust median/MAD baseline, relative floor, 2-night
persistence, segments on environment changes); :func:`decide` returns one night's rows.
docs/tracking.md states the rule in words and the rates measured on the simulator.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from roofline import __version__
from roofline.schemas import Column, conform

RULE_VERSION = "track-1"
PART = "part.parquet"
DECISIONS_DIR = "_decisions"  # "_" prefix: pyarrow's dataset discovery skips it
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
SERIES_KEY = ["app", "device", "kernel", "grid", "block"]
LABELS = (
    "regression", "improvement", "suspicious", "outlier", "workload_changed", "environment_change",
    "unstable_env", "missing", "error", "new", "insufficient_data", "unchanged",
)


# ----------------------------------------------------------------------------------------- store
def _coerce(frame: pd.DataFrame, columns: list[Column]) -> pd.DataFrame:
    out = {}
    for column in columns:
        values = frame[column.name] if column.name in frame.columns else pd.Series(pd.NA, index=frame.index)
        if column.dtype == "float":
            out[column.name] = pd.to_numeric(values, errors="coerce").astype("float64")
        else:
            out[column.name] = values.astype("string").fillna("")
    return pd.DataFrame(out, index=frame.index)


def history_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the history columns: run context first, then the ``kernels`` table."""
    kernels = conform(frame[[c for c in frame.columns if c not in _CONTEXT_NAMES]], "kernels")
    context = _coerce(frame.reset_index(drop=True), CONTEXT)
    return pd.concat([context, kernels], axis=1)


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


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _clean_stale(store: Path) -> None:
    """Remove temp dirs of appends that died (their process is gone, or a day old)."""
    for entry in store.glob(_TMP_PREFIX + "*"):
        pid = -1
        try:
            pid = int(entry.name[len(_TMP_PREFIX):].split("-")[0])
            stale = not _pid_alive(pid) or time.time() - entry.stat().st_mtime > _STALE_TMP_S
        except (ValueError, OSError):
            stale = True
        if stale and pid != os.getpid():
            shutil.rmtree(entry, ignore_errors=True)


def _atomic_put(store: Path, run_id: str, frame: pd.DataFrame) -> Path:
    store.mkdir(parents=True, exist_ok=True)
    _clean_stale(store)
    final = store / f"run={_check_run_id(run_id)}"
    tmp: Path | None = Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{os.getpid()}-", dir=store))
    try:
        part = tmp / PART
        frame.to_parquet(part, index=False)
        _fsync(part)
        _fsync(tmp)
        if final.is_dir():
            os.replace(part, final / PART)  # a rerun: one atomic file swap
            _fsync(final)
        else:
            os.rename(tmp, final)  # a new night: one atomic directory publish
            tmp = None
        _fsync(store)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return final / PART


def _read_parts(store: Path) -> list[pd.DataFrame]:
    if not store.is_dir():
        return []
    return [pd.read_parquet(p) for p in sorted(store.glob(f"run=*/{PART}"))]


def append_run(
    store_dir: str | os.PathLike, run_id: str, kernels: pd.DataFrame, context: Mapping | None = None
) -> Path:
    """Write one night's kernels with its run context to the store, replacing that night if present.

    Parameters
    ----------
    store_dir : path
        The history store (``data/history``).
    run_id : str
        The night's id; its partition is ``run=<run_id>``.
    kernels : DataFrame
        The ``kernels`` table of every app of the night.
    context : mapping, optional
        Run context (keys of :data:`CONTEXT`; ``devices: {name: {...}}`` overrides per device).

    Returns
    -------
    Path
        The partition file written.

    Raises
    ------
    ValueError
        On a bad run id or columns the ``kernels`` table does not declare.
    """
    context = dict(context or {})
    frame = conform(kernels, "kernels")
    run_time = str(context.get("run_time") or datetime.now(UTC).isoformat(timespec="seconds"))
    date = context.get("run_date") or (run_id[:10] if _DATE.match(run_id) else run_time[:10])
    fixed = {
        "run_id": _check_run_id(run_id), "run_date": str(date), "run_time": run_time,
        "pipeline_version": context.get("pipeline_version") or __version__,
        "context_json": json.dumps(context, sort_keys=True, default=str),
    }
    per_device = context.get("devices") or {}
    for name in _CONTEXT_NAMES:
        if name in fixed:
            frame[name] = fixed[name]
            continue
        default = context.get(name)
        frame[name] = [per_device.get(d, {}).get(name, default) for d in frame["device"]]
    return _atomic_put(Path(store_dir), run_id, history_frame(frame))


def read_history(store_dir: str | os.PathLike) -> pd.DataFrame:
    """Every stored night, one row per kernel per run, ordered by night (temp dirs ignored)."""
    parts = _read_parts(Path(store_dir))
    if not parts:
        return history_frame(pd.DataFrame({"app": []}))
    history = history_frame(pd.concat(parts, ignore_index=True))
    order = run_order(history)
    position = history["run_id"].map({r: i for i, r in enumerate(order)})
    return history.assign(_o=position).sort_values(["_o", *SERIES_KEY], kind="stable").drop(
        columns="_o").reset_index(drop=True)


def run_order(history: pd.DataFrame) -> list[str]:
    """Run ids in night order: logical date, then record time, then id."""
    if history.empty:
        return []
    runs = history.groupby("run_id", sort=False).agg(d=("run_date", "min"), t=("run_time", "min"))
    return runs.reset_index().sort_values(["d", "t", "run_id"])["run_id"].tolist()


def append_decisions(store_dir: str | os.PathLike, run_id: str, decisions: pd.DataFrame) -> Path:
    """Persist one night's decision records under ``<store>/_decisions/`` (atomic, idempotent)."""
    return _atomic_put(Path(store_dir) / DECISIONS_DIR, run_id, decisions.reset_index(drop=True))


def read_decisions(store_dir: str | os.PathLike) -> pd.DataFrame:
    """Every persisted decision record (empty frame when none)."""
    parts = _read_parts(Path(store_dir) / DECISIONS_DIR)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


# ------------------------------------------------------------------------------------- decisions
@dataclass(frozen=True)
class DecisionParams:
    """Thresholds of the decision rule (docs/tracking.md); ``per_kernel`` overrides by regex."""

    window: int = 7  # K: baseline = median of the last K valid nights of the segment
    min_nights: int = 3  # fewer valid nights -> insufficient_data
    rel_min: float = 0.05
    z_min: float = 4.0
    sigma_floor: float = 0.005  # sigma >= this fraction of the baseline
    short_sigma_floor: float = 0.02  # under K nights, with no previous segment to borrow from
    info_rel: float = 0.10  # the relative rule of insufficient_data
    big_ratio: float = 1.25
    big_z: float = 8.0
    work_tol: float = 0.02
    clock_tol: float = 0.02
    ridge_band: float = 0.15
    flip_nights: int = 2
    shift_fraction: float = 0.3
    shift_min_kernels: int = 5
    settings: tuple[str, ...] = ("clock_control", "cache_control")
    segment_fields: tuple[str, ...] = (
        "gpu_uuid", "driver_version", "cuda_version", "ncu_version", "mig_mode", "ceiling_source",
    )
    per_kernel: tuple[tuple[str, Mapping], ...] = ()

    def __post_init__(self) -> None:
        if not 1 <= self.min_nights <= self.window:
            raise ValueError(f"need 1 <= min_nights ({self.min_nights}) <= window ({self.window})")
        if min(self.rel_min, self.z_min, self.sigma_floor, self.work_tol, self.ridge_band) < 0:
            raise ValueError("thresholds must be non-negative")
        if self.big_ratio <= 1:
            raise ValueError(f"big_ratio must exceed 1, got {self.big_ratio}")

    @classmethod
    def from_mapping(cls, data: Mapping | None) -> DecisionParams:
        """Build from a mapping (config, JSON); unknown keys are errors."""
        data = dict(data or {})
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown tracking parameters {unknown}; known: {sorted(names)}")
        for name in ("settings", "segment_fields"):
            if name in data:
                data[name] = tuple(data[name])
        if "per_kernel" in data:
            data["per_kernel"] = tuple((str(k), dict(v)) for k, v in dict(data["per_kernel"]).items())
        return cls(**data)

    def for_kernel(self, name: str) -> DecisionParams:
        """These parameters with the first matching ``per_kernel`` override applied."""
        for pattern, overrides in self.per_kernel:
            if re.search(pattern, name):
                return dataclasses.replace(self, per_kernel=(), **dict(overrides))
        return self


def _f(value) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out


def _rel(a: float, b: float) -> float:
    """a / b - 1, NaN when either is missing or b is zero."""
    return a / b - 1 if math.isfinite(a) and math.isfinite(b) and b != 0 else math.nan


def _ident(row: Mapping, fields: tuple[str, ...]) -> tuple[str, ...]:
    out = []
    for f in fields:
        v = str(row.get(f) or "").strip()
        if f == "ncu_version":  # a segment per major.minor, not per build
            v = ".".join(re.findall(r"\d+", v)[:2]) or v
        out.append(v)
    return tuple(out)


def _median(values: list[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.median(finite)) if finite else math.nan


def _rel_sigma(values: list[float]) -> float:
    x = np.asarray(values, dtype=float)
    med = float(np.median(x))
    return 1.4826 * float(np.median(np.abs(x - med))) / med if med > 0 else math.nan


class _Bound:
    """Memory/compute side of the ridge with a hysteresis band, flips confirmed over N nights."""

    def __init__(self, band: float, nights: int) -> None:
        self.band, self.nights = band, nights
        self.side: str = ""
        self.candidate, self.count = "", 0

    def step(self, ridge_ratio: float) -> str:
        if not (math.isfinite(ridge_ratio) and ridge_ratio > 0):
            return ""
        if not self.side:
            self.side = "compute" if ridge_ratio >= 1 else "memory"
            return ""
        raw = "compute" if ridge_ratio >= 1 + self.band else "memory" if ridge_ratio <= 1 - self.band else ""
        if not raw or raw == self.side:
            self.candidate, self.count = "", 0
            return ""
        self.count = self.count + 1 if raw == self.candidate else 1
        self.candidate = raw
        if self.count < self.nights:
            return ""
        flip, self.side, self.candidate, self.count = f"{self.side}→{raw}", raw, "", 0
        return flip
