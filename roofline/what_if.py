"""What-if tables: a hand-written kernel table (YAML or CSV) -> the raw launch frame that parse derives."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import yaml

from roofline.metrics import COMPUTE_CLASSES, MEMORY_LEVELS
from roofline.ncu_rep import InputError
from roofline.units import parse_number

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


def is_what_if_csv(path: Path) -> bool:
    """Whether a ``.csv`` input is a what-if table (its header starts with a kernel column) rather than an
    ncu export."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        header = handle.readline().lower()
    return "kernel name" not in header and '"id"' not in header and header.startswith(("kernel", '"kernel'))


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
