"""Parse stage: one input (.ncu-rep, ncu CSV export or what-if table) -> per-launch counters.

Reading turns any input into a *raw launch frame* (one row per launch; identity columns plus one
float column per ncu metric, already in SI base units): :mod:`roofline.ncu_rep` reads reports,
:mod:`roofline.ncu_csv` CSV exports, this module what-if tables. :func:`derive_counters` then
applies the recipe table of :mod:`roofline.metrics` to it, vectorised, and records which recipe
produced every value. A launch that lacks a roofline quantity is kept, marked in ``missing`` with
the ncu flags that would supply it.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import logging
import math
import mmap
import os
import re
import sys
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import yaml

from roofline import metrics
from roofline.metrics import COMPUTE_CLASSES, MEMORY_LEVELS, QUANTITIES, Recipe
from roofline.ncu_rep import InputError, read_ncu_rep, report_provenance
from roofline.schemas import conform, write_table
from roofline.units import UnitError, parse_number

log = logging.getLogger("roofline.parse")


# -- what-if tables --------------------------------------------------------------------------------

_WHAT_IF_WORK = {f"flop_{c}" for c in COMPUTE_CLASSES}
_WHAT_IF_KEYS = {
    "name",
    "machine",
    "gpu",
    "flop",
    "bytes",
    "duration_s",
    "algorithmic_flop",
    "algorithmic_bytes",
    "launches",
    "note",
}
_WHAT_IF_BYTES = {f"{level}_bytes" for level in MEMORY_LEVELS}


def _number(value, where: str) -> float:
    if isinstance(value, bool):
        raise InputError(f"{where}: expected a number, got {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    number = parse_number(value)
    if math.isnan(number):
        raise InputError(f"{where}: expected a number in SI base units, got {value!r}")
    return number


def read_what_if(path: str | Path) -> pd.DataFrame:
    """Read a what-if kernel table (YAML) into counters rows.

    The YAML has ``machines:`` (name -> ``compute: {class: FLOP/s}``, ``memory: {level: B/s}``) and
    ``kernels:`` (each with ``name``, ``machine`` (a machines: key) or ``gpu`` (a catalog GPU),
    ``flop: {class: FLOP}``, ``bytes: {level: B}``, optional ``duration_s``, ``algorithmic_flop``,
    ``algorithmic_bytes``, ``launches``).
    """
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a valid YAML what-if table ({exc})") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("kernels"), list):
        raise InputError(
            f"{path}: a what-if table needs a 'kernels:' list (and 'machines:' or per-kernel 'gpu:'); "
            "see 'What-if tables' in config/README.md"
        )
    unknown = sorted(set(doc) - {"machines", "kernels"})
    if unknown:
        raise InputError(
            f"{path}: unknown top-level keys {unknown} in a what-if table: only 'machines:' and 'kernels:' "
            "are read; fix the spelling or remove them"
        )
    machines = doc.get("machines") or {}
    if not isinstance(machines, dict):
        raise InputError(f"{path}: 'machines:' must map machine names to {{compute: ..., memory: ...}}")
    for name, spec in machines.items():
        extra = sorted(set(spec or {}) - {"compute", "memory"}) if isinstance(spec, dict) else ["(not a mapping)"]
        if extra:
            raise InputError(
                f"{path}: machines.{name}: unknown keys {extra}; a machine has only 'compute: {{class: FLOP/s}}' "
                "and 'memory: {level: B/s}'"
            )
    rows = []
    for index, kernel in enumerate(doc["kernels"]):
        where = f"{path}: kernels[{index}]"
        if not isinstance(kernel, dict) or "name" not in kernel:
            raise InputError(f"{where}: each kernel needs a 'name'")
        unknown = set(kernel) - _WHAT_IF_KEYS
        if unknown:
            raise InputError(
                f"{where}: unknown keys {sorted(unknown)}; a kernel may have {sorted(_WHAT_IF_KEYS)} "
                "(see 'What-if tables' in config/README.md)"
            )
        row: dict[str, object] = {"kernel": str(kernel["name"])}
        if "machine" in kernel:
            name = str(kernel["machine"])
            if name not in machines:
                raise InputError(f"{where}: machine {name!r} is not defined under machines:")
            spec = machines[name] or {}
            row["device"] = row["machine"] = name
            for cls, value in (spec.get("compute") or {}).items():
                if cls not in COMPUTE_CLASSES:
                    raise InputError(
                        f"{path}: machines.{name}.compute: unknown class {cls!r}; use one of {COMPUTE_CLASSES}"
                    )
                row[f"peak_flops_{cls}"] = _number(value, f"{path}: machines.{name}.compute.{cls}")
                row[f"peak_flops_{cls}_recipe"] = "what-if"
            for level, value in (spec.get("memory") or {}).items():
                if level not in MEMORY_LEVELS:
                    raise InputError(
                        f"{path}: machines.{name}.memory: unknown level {level!r}; use one of {MEMORY_LEVELS}"
                    )
                row[f"peak_{level}_bw"] = _number(value, f"{path}: machines.{name}.memory.{level}")
                row[f"peak_{level}_bw_recipe"] = "what-if"
        elif "gpu" in kernel:
            row["device"] = row["machine"] = str(kernel["gpu"])
        else:
            raise InputError(f"{where}: give 'machine' (a machines: key) or 'gpu' (a catalog GPU name)")
        for cls, value in (kernel.get("flop") or {}).items():
            if f"flop_{cls}" not in _WHAT_IF_WORK:
                raise InputError(f"{where}: flop: unknown class {cls!r}; use one of {COMPUTE_CLASSES}")
            row[f"flop_{cls}"] = _number(value, f"{where}.flop.{cls}")
            row[f"flop_{cls}_recipe"] = "what-if"
        for level, value in (kernel.get("bytes") or {}).items():
            if f"{level}_bytes" not in _WHAT_IF_BYTES:
                raise InputError(f"{where}: bytes: unknown level {level!r}; use one of {MEMORY_LEVELS}")
            row[f"{level}_bytes"] = _number(value, f"{where}.bytes.{level}")
            row[f"{level}_bytes_recipe"] = "what-if"
        for key in ("duration_s", "algorithmic_flop", "algorithmic_bytes"):
            if key in kernel:
                row[key] = _number(kernel[key], f"{where}.{key}")
                if key == "duration_s":
                    row["duration_s_recipe"] = "what-if"
        launches = kernel.get("launches", 1)
        if isinstance(launches, bool) or not isinstance(launches, int) or launches < 1:
            raise InputError(f"{where}.launches: expected a whole number >= 1, got {launches!r}")
        for _ in range(launches):
            rows.append(dict(row))
    if not rows:
        raise InputError(f"{path}: the what-if table lists no kernels")
    frame = pd.DataFrame(rows)
    frame["launch"] = range(len(frame))
    frame["source_format"] = "what-if"
    return frame


# -- recipes ---------------------------------------------------------------------------------------


def _column(raw: pd.DataFrame, values: dict[str, np.ndarray], numeric: dict, name: str) -> np.ndarray | None:
    """A recipe operand as floats: a quantity derived before (``@name``) or a raw column, which is
    converted once (``numeric`` keeps it) however many recipes use it."""
    if name.startswith("@"):
        return values.get(name[1:])
    if name not in numeric:
        column = raw[name] if name in raw.columns else None
        if column is not None and column.dtype != np.float64:  # float64 (the readers' columns) as it is
            column = pd.to_numeric(column, errors="coerce").astype("float64")
        numeric[name] = None if column is None else column.to_numpy()
    return numeric[name]


def _evaluate(recipe: Recipe, operand: Callable[[str], np.ndarray | None], cc: np.ndarray) -> np.ndarray | None:
    """The recipe's value per row (NaN where it gives none), or None when it lacks an operand.

    On numpy arrays rather than Series: a report has a few rows, where pandas' fixed cost per
    operation would be most of the stage's time. Overflow and 0/0 give inf/NaN, dropped below.
    """
    total = None
    with np.errstate(all="ignore"):
        for coef, metric in recipe.terms:
            column = operand(metric)
            if column is None:
                return None
            total = coef * column if total is None else total + coef * column
        for name in recipe.scale:
            column = operand(name)
            if column is None:
                return None
            total = total * column
        for name in recipe.divide:
            column = operand(name)
            if column is None:
                return None
            total = total / np.where(column != 0, column, np.nan)
    if recipe.cc_min is not None or recipe.cc_max is not None:
        ok = (cc >= (recipe.cc_min or 0)) & (cc <= (recipe.cc_max or 999))
        total = np.where(ok, total, np.nan)
    return np.where(np.isfinite(total), total, np.nan)


def _compute_capability(raw: pd.DataFrame) -> pd.Series:
    major = pd.to_numeric(raw.get("device__attribute_compute_capability_major"), errors="coerce")
    minor = pd.to_numeric(raw.get("device__attribute_compute_capability_minor"), errors="coerce")
    if major is None or not isinstance(major, pd.Series):
        text = raw.get("compute_capability", pd.Series([""] * len(raw), index=raw.index)).astype(str)
        codes, uniques = pd.factorize(text, use_na_sentinel=False)
        parts = pd.Series(uniques).str.extract(r"(\d+)\.(\d+)")  # once per distinct text
        major = pd.Series(pd.to_numeric(parts[0], errors="coerce").to_numpy()[codes], index=raw.index)
        minor = pd.Series(pd.to_numeric(parts[1], errors="coerce").to_numpy()[codes], index=raw.index)
    if minor is None or not isinstance(minor, pd.Series):
        minor = pd.Series(0.0, index=raw.index)
    return (major * 10 + minor).astype("float64")


# -- plausibility ----------------------------------------------------------------------------------
#
# What parse calls absurd. A value outside these limits cannot be a measurement of one kernel launch;
# it is refused *for that launch and quantity*: the quantity is left empty (NaN), its recipe column
# reads "refused: <metrics> gives <value>: <why>", later recipes do not replace it, and the launch
# keeps its row and gets one warning (diagnostics_for). Quantities computed from a refused one (e.g.
# DRAM bytes = rate x duration) are empty too. The limits are those of the GPU catalog
# (roofline/catalog.py: COMPUTE_RANGE, MEMORY_RANGE upper ends); clocks may reach 100 GHz because
# ncu reports GDDR7 DRAM clocks near 14 GHz (RTX 5090 fixture).
#
# - any quantity below 0 (negative counters, bytes, times, clocks, peaks);
# - a duration of exactly 0 s (nothing takes no time: the rates would be infinite);
# - a duration above MAX_DURATION_S (one day: ncu replays a launch dozens of times);
# - clocks above MAX_CLOCK_HZ, peaks above MAX_FLOP_RATE / MAX_BYTE_RATE;
# - work or traffic that implies a rate above those peaks in the launch's duration (e.g. 1e21 FLOP/s):
#   the work or bytes are refused, the duration kept.
MAX_DURATION_S = 86_400.0
MAX_CLOCK_HZ = 1e11
MAX_FLOP_RATE = 1e18
MAX_BYTE_RATE = 1e16
_UNIT_LIMITS = {"s": MAX_DURATION_S, "Hz": MAX_CLOCK_HZ, "FLOP/s": MAX_FLOP_RATE, "B/s": MAX_BYTE_RATE}
REFUSED = "refused: "


def _source_text(recipe: Recipe | None) -> str:
    if recipe is None:
        return "the table"
    return " + ".join(dict.fromkeys(recipe.inputs())) or recipe.name


def _implausible(quantity, values: np.ndarray, recipe: Recipe | None) -> dict[int, str]:
    """Row -> refusal text for the ``values`` of ``quantity`` that cannot be measurements (NaN is not
    judged); a row gets the first reason that applies."""
    limit = _UNIT_LIMITS.get(quantity.unit)
    checks = [(values < 0, "negative")]
    if quantity.name == "duration_s":
        checks.append((values == 0, "zero: a launch takes time, so the rates would be infinite"))
    if limit is not None:
        checks.append((values > limit, f"above the plausible maximum {limit:g} {quantity.unit}"))
    reasons: dict[int, str] = {}
    for mask, why in checks:
        for i in np.flatnonzero(mask):
            reasons.setdefault(int(i), f"{REFUSED}{_source_text(recipe)} gives {values[i]:.4g} {quantity.unit}: {why}")
    return reasons


def _refuse_rates(values: dict[str, np.ndarray], recipes: dict[str, tuple[list, np.ndarray]]) -> None:
    """Refuse work and traffic that imply an absurd rate in the launch's own duration (in place:
    the value becomes NaN, the launch's recipe text the refusal)."""
    duration = values["duration_s"]
    checks = [(f"flop_{c}", "FLOP", MAX_FLOP_RATE) for c in COMPUTE_CLASSES]
    checks += [(f"{level}_bytes", "B", MAX_BYTE_RATE) for level in MEMORY_LEVELS]
    for column, unit, limit in checks:
        value = values[column]
        texts, text_code = recipes[column]
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = value / duration
        for i in np.flatnonzero(rate > limit):
            recipe = texts[text_code[i]]
            text_code[i] = len(texts)
            texts.append(
                f"{REFUSED}{recipe or 'the table'} gives {value[i]:.4g} {unit} in "
                f"{duration[i]:.4g} s = {rate[i]:.3g} {unit}/s: above the plausible maximum "
                f"{limit:g} {unit}/s"
            )
            value[i] = np.nan


_IDENTITY_KEYS = (
    "kernel",
    "kernel_mangled",
    "device",
    "grid",
    "block",
    "stream",
    "nvtx",
    "machine",
    "launch",
    "source_format",
    "compute_capability",
    "algorithmic_flop",
    "algorithmic_bytes",
)


def derive_counters(raw: pd.DataFrame) -> pd.DataFrame:
    """Apply the recipe table to a raw launch frame; return counters columns with provenance.

    Columns already present under a quantity's name (what-if rows) win over recipes. Absurd values
    (see the plausibility notes above) are refused per launch and quantity, never silently used.

    The columns are numpy arrays until the one frame is built at the end: a report has a few
    launches, where pandas' fixed cost per operation (~100 columns) would be most of the time.
    """
    cc = _compute_capability(raw)
    values: dict[str, np.ndarray] = {}
    # Per quantity and row, the recipe that gave the value or why it was refused, as codes into
    # texts (100k launches share a few texts: each becomes a string once).
    recipes: dict[str, tuple[list, np.ndarray]] = {}
    operand = functools.partial(_column, raw, values, {})
    cc_values = cc.to_numpy()
    for quantity in QUANTITIES:
        value = np.full(len(raw), np.nan)
        texts: list = [""]
        text_code = np.zeros(len(raw), dtype=np.int64)
        refused: dict[int, str] = {}
        if quantity.name in raw.columns:
            value = np.array(pd.to_numeric(raw[quantity.name], errors="coerce"), dtype="float64")
            label = raw.get(f"{quantity.name}_recipe", pd.Series("given", index=raw.index))
            text_code, uniques = pd.factorize(label.where(~np.isnan(value), ""), use_na_sentinel=False)
            texts = list(uniques)
            refused = _implausible(quantity, value, None)
        is_refused = np.zeros(len(raw), dtype=bool)
        is_refused[list(refused)] = True
        for recipe in quantity.recipes:
            open_rows = np.isnan(value) & ~is_refused
            if not open_rows.any():
                break
            result = _evaluate(recipe, operand, cc_values)
            if result is None:
                continue
            fill = open_rows & ~np.isnan(result)
            reasons = _implausible(quantity, np.where(fill, result, np.nan), recipe)
            refused.update(reasons)
            is_refused[list(reasons)] = True
            fill[list(reasons)] = False
            value = np.where(fill, result, value)
            text_code[fill] = len(texts)
            texts.append(recipe.name)
        for row, reason in refused.items():
            value[row] = np.nan
            text_code[row] = len(texts)
            texts.append(reason)
        values[quantity.name] = value
        recipes[quantity.name] = (texts, text_code)
    _refuse_rates(values, recipes)
    out: dict[str, object] = {}
    for name, value in values.items():
        texts, text_code = recipes[name]
        out[name] = value
        # StringDtype (pd.NA) text without missing values is what conform() keeps as it is
        text = pa.array(texts, pa.string(), from_pandas=True).take(pa.array(text_code))
        out[f"{name}_recipe"] = pd.arrays.ArrowStringArray(text)
    # NaN when every tensor class is NaN, else their sum (NaN counted 0), as pandas' sum(min_count=1)
    tensor = np.stack([values[f"flop_{c}"] for c in metrics.TENSOR_CLASSES])
    none = np.isnan(tensor).all(axis=0)
    out["flop_tensor"] = np.where(none, np.nan, np.nansum(tensor, axis=0))
    for key in _IDENTITY_KEYS:
        if key in raw.columns:
            out[key] = raw[key].values
    if "compute_capability" not in raw.columns or (raw["compute_capability"].astype(str) == "").all():
        codes, uniques = pd.factorize(cc, use_na_sentinel=False)
        texts = ["" if math.isnan(v) else f"{int(v) // 10}.{int(v) % 10}" for v in uniques]
        out["compute_capability"] = np.array(texts, dtype=object)[codes]
    for column, metric in metrics.IDENTITY_METRICS.items():
        if column in ("device", "shared_mem_static_bytes", "shared_mem_dynamic_bytes") or column.startswith("cc_"):
            continue
        if metric in raw.columns:
            out[column] = pd.to_numeric(raw[metric], errors="coerce")
    static = pd.to_numeric(
        raw.get("launch__shared_mem_per_block_static", pd.Series(np.nan, index=raw.index)), errors="coerce"
    )
    dynamic = pd.to_numeric(
        raw.get("launch__shared_mem_per_block_dynamic", pd.Series(np.nan, index=raw.index)), errors="coerce"
    )
    out["shared_mem_bytes"] = static.fillna(0) + dynamic.fillna(0)
    codes, names = pd.factorize(raw["kernel"].astype(str))  # a short name once per kernel, not per launch
    shorts = pa.array([short_kernel_name(name) for name in names], pa.string())
    out["kernel_short"] = pd.Series(shorts.take(pa.array(codes)), index=raw.index, dtype="str")
    refused = {
        name: np.array([isinstance(t, str) and t.startswith(REFUSED) for t in texts], dtype=bool)[text_code]
        for name, (texts, text_code) in recipes.items()
    }
    out["missing"], out["missing_hint"] = _missing(values, refused)
    return pd.DataFrame(out, index=raw.index)


def _missing_text(
    no_duration: bool, duration_refused: bool, no_dram: bool, dram_refused: bool, no_flop: bool, flop_refused: bool
) -> tuple[str, str]:
    """The ``missing`` and ``missing_hint`` texts of one combination of gaps."""
    missing, hints = [], []
    for lacking, was_refused, quantity in (
        (no_duration, duration_refused, "duration_s"),
        (no_dram, dram_refused, "dram_bytes"),
    ):
        if lacking:
            missing.append(quantity)
            hints.append(
                f"{quantity}: fix the value ({quantity}_recipe says why it was refused)"
                if was_refused
                else metrics.metric_hint(quantity)
            )
    if no_flop:
        missing.append("flop")
        hints.append(
            "flop: fix the values (see the flop_*_recipe columns)" if flop_refused else metrics.NCU_ROOFLINE_FLAGS
        )
    return ";".join(missing), " ; ".join(dict.fromkeys(hints))


def _missing(values: dict[str, np.ndarray], refused: dict[str, np.ndarray]) -> tuple[list[str], list[str]]:
    """Per launch, the roofline quantities it lacks and the ncu flags that would supply them, from
    the values of duration_s, dram_bytes and flop_<class> and whether each was refused.

    The texts depend only on six flags per launch, so each distinct combination is written once
    (100k launches cost a few combinations, not 100k string joins).
    """
    flop_columns = [f"flop_{c}" for c in COMPUTE_CLASSES]
    flags = np.column_stack(
        [
            np.isnan(values["duration_s"]),
            refused["duration_s"],
            np.isnan(values["dram_bytes"]),
            refused["dram_bytes"],
            np.isnan(np.stack([values[c] for c in flop_columns])).all(axis=0),
            np.stack([refused[c] for c in flop_columns]).any(axis=0),
        ]
    ).reshape(len(values["duration_s"]), 6)
    codes = flags.astype(np.int64) @ (1 << np.arange(6))
    texts = {int(c): _missing_text(*(bool(int(c) >> i & 1) for i in range(6))) for c in np.unique(codes)}
    picked = [texts[c] for c in codes.tolist()]
    return [m for m, _ in picked], [h for _, h in picked]


_ANGLE_BRACKET = re.compile(r"[<>]")


def short_kernel_name(name: str, limit: int = 80) -> str:
    """A readable kernel name: template arguments become ``<…>``, the argument list is dropped."""
    text = name.strip()
    if text.startswith("void "):
        text = text[5:]
    # Walk the angle brackets only (a name is mostly other characters): keep the text at depth 0.
    depth, out, start = 0, [], 0
    for bracket in _ANGLE_BRACKET.finditer(text):
        if bracket.group() == "<":
            if depth == 0:
                out += (text[start : bracket.start()], "<…>")
            depth += 1
        elif depth > 0:  # a ">" at depth 0 (operator>, "->") is kept as text
            depth -= 1
            start = bracket.end()
    if depth == 0:
        out.append(text[start:])
    short = "".join(out)
    # Drop the parameter list of the outermost function, keeping "(anonymous namespace)".
    paren = short.rfind("(")
    if paren > 0 and short.endswith(")") and not short[paren:].startswith("(anonymous"):
        short = short[:paren]
    short = short.strip()
    if len(short) > limit:
        short = short[: limit - 1] + "…"
    return short or name[:limit]


# -- the stage -------------------------------------------------------------------------------------


def sha256(path: str | Path) -> str:
    """sha256 of a file, or of a folder's files in name order."""
    path = Path(path)
    files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
    digest = hashlib.sha256()
    for file in files:
        with open(file, "rb") as handle:
            try:  # hashed in place from the page cache: no copy of a 600 MB export through read()
                with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
                    digest.update(view)
                continue
            except (OSError, ValueError):  # an empty file (cannot be mapped), or a filesystem without mmap
                pass
            for block in iter(lambda handle=handle: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _lowest_priority() -> None:
    """Lower the calling thread to the lowest CPU priority (nice 19), where the system allows it.

    parse_input hashes the input on a thread beside the read; at equal priority the hash competes
    for the cores with pyarrow's threaded CSV read, so it should take only a core the read leaves
    idle (643 MB long CSV on 2 cores, best of 6 interleaved: parse_input 1.33-1.36 s at equal
    priority, 1.23-1.25 s with the hash at nice 19). Linux sets nice per thread (PRIO_PROCESS with
    a thread id) and lowering it needs no privilege; a system without per-thread nice, or that
    refuses, leaves the thread as it is.
    """
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (OSError, AttributeError):
        pass


def _sha256_idle(path: str | Path) -> str:
    """:func:`sha256` at the lowest priority (see :func:`_lowest_priority`); call it on its own thread,
    which it leaves at that priority."""
    _lowest_priority()
    return sha256(path)


def _is_what_if_csv(path: Path) -> bool:
    with open(path, encoding="utf-8", errors="replace") as handle:
        header = handle.readline().lower()
    return "kernel name" not in header and '"id"' not in header and header.startswith(("kernel", '"kernel'))


def _capture_failure(path: Path) -> str:
    """The error a failed capture recorded in the sidecar beside its (empty) report, if any."""
    sidecar = path.with_name(path.name.removesuffix(".ncu-rep") + ".capture.json")
    if path.stat().st_size or not sidecar.exists():
        return ""
    try:
        return str(json.loads(sidecar.read_text(encoding="utf-8")).get("error") or "")
    except (OSError, ValueError):
        return ""


def read_input(path: str | Path, kind: str) -> pd.DataFrame:
    """Read one input file into the raw launch frame, dispatching on its kind."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if kind == "legacy":
        raise InputError(
            f"{path}: a legacy .nsight-cuprof-report (Nsight Compute 2019.x or older) with pre-2020 "
            "metric names; the roofline needs ncu 2020.1 or newer. Re-profile with a current ncu "
            f"({metrics.NCU_ROOFLINE_FLAGS})"
        )
    if kind == "ncu-rep":
        failure = _capture_failure(path)
        if failure:
            raise InputError(f"{path}: the capture failed, so there is no report: {failure}")
        return read_ncu_rep(path)
    if kind == "what-if":
        return read_what_if(path)
    if kind == "csv-dir":
        from roofline.ncu_csv import read_ncu_csvs

        files = sorted(path.glob("*.csv"))
        if not files:
            raise InputError(f"{path}: the folder holds no .csv export")
        return read_ncu_csvs(files)
    if kind == "csv":
        if _is_what_if_csv(path):
            return read_what_if_csv(path)
        from roofline.ncu_csv import read_ncu_csv

        return read_ncu_csv(path)
    raise InputError(f"{path}: unknown input kind {kind!r}")


def read_what_if_csv(path: Path) -> pd.DataFrame:
    """A what-if table as CSV: columns kernel, gpu or machine peaks, flop_<class>, <level>_bytes."""
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a readable what-if CSV ({exc}); write plain comma-separated UTF-8") from exc
    columns_help = "columns: kernel, gpu (or peak_* columns), flop_<class>, <level>_bytes, duration_s"
    if "kernel" not in frame.columns:
        raise InputError(f"{path}: a what-if CSV needs a 'kernel' column ({columns_help})")
    if "gpu" not in frame.columns and not any(c.startswith("peak_") for c in frame.columns):
        raise InputError(
            f"{path}: a what-if CSV needs a 'gpu' column (catalog name) or peak_* columns ({columns_help})"
        )
    allowed = {"kernel", "gpu", "duration_s", "algorithmic_flop", "algorithmic_bytes"} | _WHAT_IF_WORK | _WHAT_IF_BYTES
    allowed |= {f"peak_flops_{c}" for c in COMPUTE_CLASSES} | {f"peak_{lv}_bw" for lv in MEMORY_LEVELS}
    unknown = [c for c in frame.columns if c not in allowed]
    if unknown:
        raise InputError(f"{path}: unknown what-if columns {unknown}; allowed: {sorted(allowed)}")
    if not any(c in _WHAT_IF_WORK | _WHAT_IF_BYTES for c in frame.columns):
        raise InputError(
            f"{path}: a what-if CSV needs at least one flop_<class> or <level>_bytes column ({columns_help})"
        )
    out = pd.DataFrame({"kernel": frame["kernel"]})
    if "gpu" in frame.columns:
        out["device"] = out["machine"] = frame["gpu"]
    for column in frame.columns:
        if column in ("kernel", "gpu"):
            continue
        out[column] = frame[column].map(parse_number)
        text = frame[column].str.strip().str.lower()
        bad = out[column].isna() & ~text.isin(["", "n/a", "nan", "na", "-", "none"])
        if bad.any():
            row = int(bad.to_numpy().argmax())
            raise InputError(
                f"{path}: line {row + 2}: column {column!r} has {frame[column].iat[row]!r}, not a number; "
                "write plain numbers in SI base units (e.g. 240.0e+9), or leave the cell empty"
            )
        out[f"{column}_recipe"] = "what-if"
    out["launch"] = range(len(out))
    out["source_format"] = "what-if"
    return out


def parse_input(path: str | Path, app: str, kind: str, device: str | None = None) -> pd.DataFrame:
    """The whole stage for one input: read, derive, add provenance; returns the counters table.

    ``device`` names the GPU for inputs that record none (CSV exports); a recorded name wins.
    """
    path = Path(path)
    with ThreadPoolExecutor(max_workers=1) as pool:
        # hashlib releases the GIL: hashing overlaps the parsing (on the pool's one thread, which
        # stays at nice 19 and ends with the pool)
        digest = pool.submit(_sha256_idle, path)
        raw = read_input(path, kind)
        counters = derive_counters(raw)
        recorded = counters.get("device", pd.Series("", index=counters.index)).fillna("").astype(str)
        if device:
            counters["device"] = recorded.where(recorded != "", device)
        else:
            cc = counters["compute_capability"]
            unnamed = {c: f"unnamed GPU (sm_{c.replace('.', '')})" if c else "unnamed GPU" for c in cc.unique()}
            counters["device"] = recorded.where(recorded != "", cc.map(unnamed))
        counters["app"] = app
        counters["source_file"] = str(path)
        counters["source_sha256"] = digest.result()
    if kind == "ncu-rep":
        counters["ncu_version"], counters["command_line"] = report_provenance(path)
    return conform(counters, "counters")


def _launch_problems(row, recipe_columns: list[str]) -> list[str]:
    """What is wrong with one launch: refused quantities first, then quantities no recipe gave."""
    problems = []
    refused = set()
    for column in recipe_columns:
        text = str(row[column])
        if text.startswith(REFUSED):
            quantity = column.removesuffix("_recipe")
            refused.add(quantity)
            problems.append(f"{quantity} refused ({text.removeprefix(REFUSED)})")
    if problems:
        problems[-1] += "; the launch is kept with these quantities empty: check the export (units, values)"
    lacking = [q for q in str(row["missing"]).split(";") if q and q not in refused]
    if row.get("source_format") == "what-if" and "duration_s" in lacking:
        lacking.remove("duration_s")  # optional in a what-if table: the report shows the predicted time
    if "flop" in lacking and any(q.startswith("flop_") for q in refused):
        lacking.remove("flop")
    if lacking:
        hints = [metrics.NCU_ROOFLINE_FLAGS if q == "flop" else metrics.metric_hint(q) for q in lacking]
        problems.append(f"cannot derive {', '.join(lacking)}; collect it with {' ; '.join(dict.fromkeys(hints))}")
    return problems


def diagnostics_for(counters: pd.DataFrame, app: str) -> pd.DataFrame:
    """One warning row per launch that lacks or had refused a roofline quantity, and one per file
    whose launches ran on several devices."""
    recipe_columns = [c for c in counters.columns if c.endswith("_recipe")]
    missing = counters["missing"].astype(str)
    what_if = counters.get("source_format", pd.Series("", index=counters.index)) == "what-if"
    flagged = (missing != "") & ~(what_if & (missing == "duration_s"))
    for column in recipe_columns:
        flagged |= counters[column].astype(str).str.startswith(REFUSED)
    rows = []
    for _, row in counters[flagged].iterrows():
        problems = _launch_problems(row, recipe_columns)
        if problems:
            rows.append(
                {
                    "source_file": row["source_file"],
                    "launch": row["launch"],
                    "message": f"launch {row['launch']} ({row['kernel_short']}): {'; '.join(problems)}",
                }
            )
    measured = counters[counters.get("source_format", pd.Series("", index=counters.index)) != "what-if"]
    devices = sorted(d for d in measured.get("device", pd.Series(dtype=str)).dropna().unique() if d)
    if len(devices) > 1:
        spans = "; ".join(
            f"{device}: {_launch_span(measured.loc[measured['device'] == device, 'launch'])}" for device in devices
        )
        rows.append(
            {
                "source_file": measured["source_file"].iat[0],
                "launch": np.nan,
                "message": (
                    f"{measured['source_file'].iat[0]}: the launches ran on {len(devices)} devices ({spans}); each "
                    "is analysed against its own ceilings. If one application should run on one GPU, the file "
                    "mixes exports: split it, one file per device"
                ),
            }
        )
    frame = pd.DataFrame(rows, columns=["source_file", "launch", "message"])
    frame.insert(0, "app", app)
    frame.insert(1, "stage", "parse")
    frame.insert(2, "severity", "warning")
    return frame


def _launch_span(launches: pd.Series) -> str:
    ids = sorted(int(i) for i in launches)
    text = ", ".join(str(i) for i in ids[:6]) + (", …" if len(ids) > 6 else "")
    return f"{len(ids)} launch(es) [{text}]"


def _named(message: str, path: str) -> str:
    """``message`` starting with the input's path, so that every diagnostic names its file."""
    return message if path in message or Path(path).name in message else f"{path}: {message}"


def _reportable(caught: warnings.WarningMessage) -> bool:
    """Warnings the readers raise about the input itself (repairs), not library chatter."""
    from roofline.ncu_csv import NcuCsvWarning

    return issubclass(caught.category, NcuCsvWarning)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Parse one input into per-launch counters (Parquet).")
    parser.add_argument("--input", required=True)
    parser.add_argument("--app", required=True)
    parser.add_argument("--kind", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--diagnostics", required=True)
    parser.add_argument("--device", default="", help="GPU name for inputs that record none")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            counters = parse_input(args.input, args.app, args.kind, args.device or None)
        diagnostics = diagnostics_for(counters, args.app)
        repaired = [
            {"app": args.app, "stage": "parse", "severity": "warning", "source_file": args.input, "message": text}
            for text in dict.fromkeys(_named(str(w.message), args.input) for w in caught if _reportable(w))
        ]
        if repaired:
            diagnostics = pd.concat([pd.DataFrame(repaired), diagnostics], ignore_index=True)
    except Exception as exc:  # noqa: BLE001 - one bad input must not stop the batch
        # Record the error, write empty tables, go on: the other applications are still analysed.
        if isinstance(exc, InputError | UnitError | ValueError | OSError):
            message = _named(str(exc), args.input)
        else:
            message = (
                f"{args.input}: could not be read ({type(exc).__name__}: {exc}); the file may be damaged: "
                "re-export it, and report this message if the file opens in Nsight Compute"
            )
        log.error("%s", message)
        counters = conform(pd.DataFrame(), "counters")
        diagnostics = pd.DataFrame(
            [{"app": args.app, "stage": "parse", "severity": "error", "source_file": args.input, "message": message}]
        )
    for message in diagnostics.loc[diagnostics["severity"] == "warning", "message"]:
        log.warning("%s", _named(message, args.input))
    write_table(counters, "counters", args.output)
    write_table(diagnostics, "diagnostics", args.diagnostics)
    return 0


if __name__ == "__main__":
    sys.exit(main())
