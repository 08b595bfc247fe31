"""Parse stage: one input (.ncu-rep, ncu CSV export or what-if table) -> per-launch counters.

Reading turns any input into a *raw launch frame* (one row per launch; identity columns plus one
float column per ncu metric, already in SI base units). :func:`derive_counters` then applies the
recipe table of :mod:`roofline.metrics` to it, vectorised, and records which recipe produced every
value. A launch that lacks a roofline quantity is kept, marked in ``missing`` with the ncu flags
that would supply it.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import math
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from roofline import metrics
from roofline.metrics import COMPUTE_CLASSES, MEMORY_LEVELS, QUANTITIES, Recipe
from roofline.schemas import conform, write_table
from roofline.units import UnitError, parse_number, si_factor

log = logging.getLogger("roofline.parse")


class InputError(ValueError):
    """An input that cannot be analysed; the message names the file and the fix."""


# -- reading .ncu-rep ------------------------------------------------------------------------------

_NEEDED_METRICS = frozenset(metrics.all_input_metrics())
_TENSOR_PREFIX = "sm__ops_path_tensor_"


def _wanted(name: str) -> bool:
    return name in _NEEDED_METRICS or name.startswith(_TENSOR_PREFIX)


def _dims(action, prefix: str) -> str:
    values = []
    for axis in "xyz":
        metric = action.metric_by_name(f"launch__{prefix}_dim_{axis}")
        if metric is None:
            return ""
        values.append(str(int(metric.as_double())))
    return "(" + ", ".join(values) + ")"


def _string_metric(action, name: str) -> str:
    metric = action.metric_by_name(name)
    if metric is None:
        return ""
    value = metric.value()
    return "" if value is None else str(value)


def read_ncu_rep(path: str | Path) -> pd.DataFrame:
    """Read an ``.ncu-rep`` with NVIDIA's ``ncu_report`` into the raw launch frame.

    Raises
    ------
    InputError
        If the file is not a readable Nsight Compute report or holds no kernel launch.
    """
    import ncu_report  # imported here: the rest of the package works without it

    path = Path(path)
    if path.stat().st_size == 0:
        raise InputError(f"{path}: the file is empty; re-run ncu with --export {path.name}")
    try:
        context = ncu_report.load_report(str(path))
    except Exception as exc:  # the module raises plain exceptions for corrupt files
        raise InputError(f"{path}: not a readable Nsight Compute report ({exc})") from exc
    rows = []
    launch = 0
    for range_index in range(context.num_ranges()):
        profiled_range = context.range_by_idx(range_index)
        for action_index in range(profiled_range.num_actions()):
            action = profiled_range.action_by_idx(action_index)
            row: dict[str, object] = {
                "launch": launch,
                "kernel": action.name(ncu_report.IAction.NameBase_DEMANGLED),
                "kernel_mangled": action.name(ncu_report.IAction.NameBase_MANGLED),
                "device": _string_metric(action, "device__attribute_display_name"),
                "grid": _dims(action, "grid"),
                "block": _dims(action, "block"),
                "stream": _string_metric(action, "launch__stream_id"),
            }
            for name in action.metric_names():
                if not _wanted(name) or name == "device__attribute_display_name":
                    continue
                metric = action.metric_by_name(name)
                try:
                    value = metric.as_double()
                except Exception:  # string-valued metric where a number was expected
                    continue
                row[name] = value * si_factor(metric.unit(), name)
            rows.append(row)
            launch += 1
    if not rows:
        raise InputError(
            f"{path}: the report holds no kernel launch (ncu_report found {context.num_ranges()} "
            "ranges); the file is corrupt, truncated or not an ncu report. Re-export it with "
            f"ncu --export {path.name}"
        )
    raw = pd.DataFrame(rows)
    raw["source_format"] = "ncu-rep"
    return raw


def report_version(path: str | Path) -> str:
    """The Nsight Compute version string stored in a report's bytes, where one is found."""
    head = Path(path).read_bytes()[:4_000_000]
    match = re.search(rb"(20\d\d\.\d+\.\d+(?:\.\d+)?) \(build \d+\)", head)
    return match.group(1).decode() if match else ""


# -- what-if tables --------------------------------------------------------------------------------

_WHAT_IF_WORK = {f"flop_{c}" for c in COMPUTE_CLASSES}
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
        raise InputError(f"{path}: a what-if table needs a 'kernels:' list (and 'machines:' or per-kernel 'gpu:')")
    machines = doc.get("machines") or {}
    rows = []
    for index, kernel in enumerate(doc["kernels"]):
        where = f"{path}: kernels[{index}]"
        if not isinstance(kernel, dict) or "name" not in kernel:
            raise InputError(f"{where}: each kernel needs a 'name'")
        unknown = set(kernel) - {
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
        if unknown:
            raise InputError(f"{where}: unknown keys {sorted(unknown)}")
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
        launches = int(kernel.get("launches", 1))
        for _ in range(launches):
            rows.append(dict(row))
    if not rows:
        raise InputError(f"{path}: the what-if table lists no kernels")
    frame = pd.DataFrame(rows)
    frame["launch"] = range(len(frame))
    frame["source_format"] = "what-if"
    return frame


# -- recipes ---------------------------------------------------------------------------------------


def _column(raw: pd.DataFrame, values: dict[str, pd.Series], name: str) -> pd.Series | None:
    if name.startswith("@"):
        return values.get(name[1:])
    if name in raw.columns:
        return pd.to_numeric(raw[name], errors="coerce").astype("float64")
    return None


def _evaluate(recipe: Recipe, raw: pd.DataFrame, values: dict[str, pd.Series], cc: pd.Series) -> pd.Series | None:
    total = None
    for coef, metric in recipe.terms:
        column = _column(raw, values, metric)
        if column is None:
            return None
        total = coef * column if total is None else total + coef * column
    for name in recipe.scale:
        column = _column(raw, values, name)
        if column is None:
            return None
        total = total * column
    for name in recipe.divide:
        column = _column(raw, values, name)
        if column is None:
            return None
        total = total / column.where(column != 0)
    if recipe.cc_min is not None or recipe.cc_max is not None:
        ok = cc.between(recipe.cc_min or 0, recipe.cc_max or 999)
        total = total.where(ok)
    return total.where(np.isfinite(total))


def _compute_capability(raw: pd.DataFrame) -> pd.Series:
    major = pd.to_numeric(raw.get("device__attribute_compute_capability_major"), errors="coerce")
    minor = pd.to_numeric(raw.get("device__attribute_compute_capability_minor"), errors="coerce")
    if major is None or not isinstance(major, pd.Series):
        text = raw.get("compute_capability", pd.Series([""] * len(raw), index=raw.index)).astype(str)
        parts = text.str.extract(r"(\d+)\.(\d+)")
        major = pd.to_numeric(parts[0], errors="coerce")
        minor = pd.to_numeric(parts[1], errors="coerce")
    if minor is None or not isinstance(minor, pd.Series):
        minor = pd.Series(0.0, index=raw.index)
    return (major * 10 + minor).astype("float64")


def derive_counters(raw: pd.DataFrame) -> pd.DataFrame:
    """Apply the recipe table to a raw launch frame; return counters columns with provenance.

    Columns already present under a quantity's name (what-if rows) win over recipes.
    """
    cc = _compute_capability(raw)
    values: dict[str, pd.Series] = {}
    out: dict[str, pd.Series] = {}
    for quantity in QUANTITIES:
        value = pd.Series(np.nan, index=raw.index, dtype="float64")
        recipe_used = pd.Series("", index=raw.index, dtype="object")
        if quantity.name in raw.columns:
            given = pd.to_numeric(raw[quantity.name], errors="coerce")
            value = given.astype("float64")
            label = raw.get(f"{quantity.name}_recipe", pd.Series("given", index=raw.index))
            recipe_used = label.where(value.notna(), "").astype("object")
        for recipe in quantity.recipes:
            if not value.isna().any():
                break
            result = _evaluate(recipe, raw, values, cc)
            if result is None:
                continue
            fill = value.isna() & result.notna()
            value = value.where(~fill, result)
            recipe_used = recipe_used.where(~fill, recipe.name)
        values[quantity.name] = value
        out[quantity.name] = value
        out[f"{quantity.name}_recipe"] = recipe_used
    frame = pd.DataFrame(out, index=raw.index)
    tensor = frame[[f"flop_{c}" for c in metrics.TENSOR_CLASSES]]
    frame["flop_tensor"] = tensor.sum(axis=1, min_count=1)
    for key in (
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
    ):
        if key in raw.columns:
            frame[key] = raw[key].values
    if "compute_capability" not in raw.columns or (frame["compute_capability"].astype(str) == "").all():
        frame["compute_capability"] = ["" if math.isnan(v) else f"{int(v) // 10}.{int(v) % 10}" for v in cc]
    for column, metric in metrics.IDENTITY_METRICS.items():
        if column in ("device",) or column.startswith("cc_"):
            continue
        if metric in raw.columns:
            frame[column] = pd.to_numeric(raw[metric], errors="coerce")
    static = pd.to_numeric(
        raw.get("launch__shared_mem_per_block_static", pd.Series(np.nan, index=raw.index)), errors="coerce"
    )
    dynamic = pd.to_numeric(
        raw.get("launch__shared_mem_per_block_dynamic", pd.Series(np.nan, index=raw.index)), errors="coerce"
    )
    frame["shared_mem_bytes"] = static.fillna(0) + dynamic.fillna(0)
    frame["kernel_short"] = frame["kernel"].astype(str).map(short_kernel_name)
    frame["missing"], frame["missing_hint"] = _missing(frame)
    return frame.drop(columns=["shared_mem_static_bytes", "shared_mem_dynamic_bytes"], errors="ignore")


def _missing(frame: pd.DataFrame) -> tuple[list[str], list[str]]:
    flop_columns = [f"flop_{c}" for c in COMPUTE_CLASSES]
    missing_all, hints_all = [], []
    no_flop = frame[flop_columns].isna().all(axis=1)
    for i in range(len(frame)):
        missing, hints = [], []
        for quantity in ("duration_s", "dram_bytes"):
            if pd.isna(frame[quantity].iat[i]):
                missing.append(quantity)
                hints.append(metrics.metric_hint(quantity))
        if no_flop.iat[i]:
            missing.append("flop")
            hints.append(metrics.NCU_ROOFLINE_FLAGS)
        missing_all.append(";".join(missing))
        hints_all.append(" ; ".join(dict.fromkeys(hints)))
    return missing_all, hints_all


_ARGS = re.compile(r"\(.*\)\s*$")


def short_kernel_name(name: str, limit: int = 80) -> str:
    """A readable kernel name: template arguments become ``<…>``, the argument list is dropped."""
    text = name.strip()
    if text.startswith("void "):
        text = text[5:]
    depth, out = 0, []
    for ch in text:
        if ch == "<":
            if depth == 0:
                out.append("<…>")
            depth += 1
        elif ch == ">" and depth > 0:
            depth -= 1
        elif depth == 0:
            out.append(ch)
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
            for block in iter(lambda handle=handle: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _is_what_if_csv(path: Path) -> bool:
    with open(path, encoding="utf-8", errors="replace") as handle:
        header = handle.readline().lower()
    return "kernel name" not in header and '"id"' not in header and header.startswith(("kernel", '"kernel'))


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
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    if "kernel" not in frame.columns:
        raise InputError(f"{path}: a what-if CSV needs a 'kernel' column")
    if "gpu" not in frame.columns and not any(c.startswith("peak_") for c in frame.columns):
        raise InputError(f"{path}: a what-if CSV needs a 'gpu' column (catalog name) or peak_* columns")
    allowed = {"kernel", "gpu", "duration_s", "algorithmic_flop", "algorithmic_bytes"} | _WHAT_IF_WORK | _WHAT_IF_BYTES
    allowed |= {f"peak_flops_{c}" for c in COMPUTE_CLASSES} | {f"peak_{lv}_bw" for lv in MEMORY_LEVELS}
    unknown = [c for c in frame.columns if c not in allowed]
    if unknown:
        raise InputError(f"{path}: unknown what-if columns {unknown}; allowed: {sorted(allowed)}")
    out = pd.DataFrame({"kernel": frame["kernel"]})
    if "gpu" in frame.columns:
        out["device"] = out["machine"] = frame["gpu"]
    for column in frame.columns:
        if column in ("kernel", "gpu"):
            continue
        out[column] = frame[column].map(parse_number)
        out[f"{column}_recipe"] = "what-if"
    out["launch"] = range(len(out))
    out["source_format"] = "what-if"
    return out


def parse_input(path: str | Path, app: str, kind: str, device: str | None = None) -> pd.DataFrame:
    """The whole stage for one input: read, derive, add provenance; returns the counters table.

    ``device`` names the GPU for inputs that record none (CSV exports); a recorded name wins.
    """
    path = Path(path)
    raw = read_input(path, kind)
    counters = derive_counters(raw)
    recorded = counters.get("device", pd.Series("", index=counters.index)).fillna("").astype(str)
    if device:
        counters["device"] = recorded.where(recorded != "", device)
    else:
        unnamed = [
            f"unnamed GPU (sm_{cc.replace('.', '')})" if cc else "unnamed GPU" for cc in counters["compute_capability"]
        ]
        counters["device"] = recorded.where(recorded != "", pd.Series(unnamed, index=counters.index))
    counters["app"] = app
    counters["source_file"] = str(path)
    counters["source_sha256"] = sha256(path)
    if kind == "ncu-rep":
        counters["ncu_version"] = report_version(path)
    return conform(counters, "counters")


def diagnostics_for(counters: pd.DataFrame, app: str) -> pd.DataFrame:
    """One warning row per launch that lacks a roofline quantity."""
    lacking = counters[counters["missing"] != ""]
    return pd.DataFrame(
        {
            "app": app,
            "stage": "parse",
            "severity": "warning",
            "source_file": lacking["source_file"],
            "launch": lacking["launch"],
            "message": [
                f"launch {launch} ({kernel}): cannot derive {missing.replace(';', ', ')}; collect it with {hint}"
                for launch, kernel, missing, hint in zip(
                    lacking["launch"], lacking["kernel_short"], lacking["missing"], lacking["missing_hint"]
                )
            ],
        }
    )


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
        counters = parse_input(args.input, args.app, args.kind, args.device or None)
        diagnostics = diagnostics_for(counters, args.app)
    except (InputError, UnitError, ValueError, OSError) as exc:
        # One bad input must not stop the batch: record the error, write empty tables, go on.
        log.error("%s", exc)
        counters = conform(pd.DataFrame(), "counters")
        diagnostics = pd.DataFrame(
            [{"app": args.app, "stage": "parse", "severity": "error", "source_file": args.input, "message": str(exc)}]
        )
    for message in diagnostics.loc[diagnostics["severity"] == "warning", "message"]:
        log.warning("%s", message)
    write_table(counters, "counters", args.output)
    write_table(diagnostics, "diagnostics", args.diagnostics)
    return 0


if __name__ == "__main__":
    sys.exit(main())
