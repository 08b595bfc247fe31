"""The datasheet ceiling catalog: vendor peaks per GPU model (roofline/data/gpus.yaml -> Ceilings rows).

Loaded and validated once (:mod:`roofline.ceilings.catalog_entries` holds the models and the checks on
every value: positive, finite, decimal SI base units, a source each, unique names). Users add GPUs
or override values with a mapping of the same shape (config ``ceilings: gpus:``) merged over the
file; a reported device name is matched to its entry without guessing.
docs/catalog.md explains the conventions (dense peaks, FP16/FP32 accumulate, clocks).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from pydantic import ValidationError

from roofline.ceilings.catalog_entries import FREE_TEXT_KEYS, Catalog, Ceiling, GpuEntry, normalise_name, unit_problem
from roofline.files.strict_yaml import FastStrictLoader
from roofline.metrics.quantities import ACC32_OF, CATALOG_CLASSES, MEMORY_LEVELS, TENSOR_CLASSES
from roofline.tables.schemas import conform

# The catalog ships with the package (package data), so the installed CLI and a workflow used as a
# Snakemake module find it wherever they run.
CATALOG_PATH = Path(__file__).resolve().parents[1] / "data" / "gpus.yaml"


def _scan_units(node: Any, path: str, problems: list[str]) -> None:
    """Collect keys and non-free-text strings that mention bits or binary prefixes."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            here = f"{path}.{key}" if path else str(key)
            problem = unit_problem(str(key))
            if problem:
                problems.append(f"{here}: key {problem}")
            if str(key) not in FREE_TEXT_KEYS:
                _scan_units(value, here, problems)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            _scan_units(item, f"{path}[{i}]", problems)
    elif isinstance(node, str):
        problem = unit_problem(node)
        if problem:
            problems.append(f"{path}: {problem}")


def _merge_entry(base: dict, patch: Mapping, key: str, where: str) -> dict:
    """``patch`` over ``base``; a ceiling that gets a new value is replaced whole."""
    merged = dict(base)
    for field, value in patch.items():
        if field in ("compute", "memory") and isinstance(value, Mapping) and isinstance(base.get(field), Mapping):
            block = dict(base[field])
            for name, ceiling in value.items():
                if isinstance(ceiling, Mapping) and "value" in ceiling:
                    if "source" not in ceiling:
                        raise ValueError(
                            f"{where}: GPU {key!r}, {field}.{name}: an overridden value needs its "
                            "own 'source' (e.g. 'measured with STREAM copy, 2025-05-01')"
                        )
                    block[name] = dict(ceiling)
                elif isinstance(ceiling, Mapping) and isinstance(block.get(name), Mapping):
                    block[name] = {**block[name], **ceiling}
                else:
                    block[name] = ceiling
            merged[field] = block
        else:
            merged[field] = value
    return merged


def _apply_overrides(gpus: dict, overrides: Mapping, where: str) -> dict:
    if set(overrides) == {"gpus"} and isinstance(overrides["gpus"], Mapping):
        overrides = overrides["gpus"]
    for key, patch in overrides.items():
        if not isinstance(patch, Mapping):
            raise ValueError(
                f"{where}: GPU {key!r} must be a mapping in the shape of a roofline/data/gpus.yaml entry, "
                f"got {type(patch).__name__}"
            )
        if key in gpus and isinstance(gpus[key], Mapping):
            gpus[key] = _merge_entry(gpus[key], patch, key, where)
        else:
            gpus[key] = copy.deepcopy(dict(patch))
    return gpus


def _describe(error: dict) -> str:
    loc = [str(p) for p in error["loc"]]
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        allowed = {"compute": CATALOG_CLASSES, "memory": MEMORY_LEVELS}.get(loc[-2] if len(loc) > 1 else "")
        hint = f"one of {', '.join(allowed)}" if allowed else "see docs/catalog.md for the keys"
        message = f"unknown key {loc[-1]!r} ({hint})"
    elif error["type"] == "string_too_short":
        message = "is empty; cite the vendor document (title, URL) or the measurement"
    elif error["type"] == "missing":
        message = f"missing required key {loc[-1]!r}"
    if len(loc) >= 2 and loc[0] == "gpus":
        rest = ".".join(loc[2:])
        return f"GPU {loc[1]!r}" + (f", {rest}" if rest else "") + f": {message}"
    return f"{'.'.join(loc) or '(top level)'}: {message}"


def load_catalog(path: str | os.PathLike = CATALOG_PATH, overrides: dict | None = None) -> Catalog:
    """Read and validate a GPU catalog, with user additions/overrides merged over it.

    Parameters
    ----------
    path : path-like
        YAML file with a top-level ``gpus:`` mapping (the shipped one: roofline/data/gpus.yaml).
    overrides : dict, optional
        ``{gpu_key: partial entry}`` (or ``{"gpus": {...}}``) merged over the file: new keys add
        GPUs, existing keys replace the fields given; an overridden ceiling needs its own source.

    Returns
    -------
    Catalog

    Raises
    ------
    ValueError
        Naming the file, the GPU entry and key, and the fix, when the file is missing or invalid.
    """
    path = Path(path)
    where = f"{path}" + (" (with config overrides)" if overrides else "")
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=FastStrictLoader)  # a SafeLoader
    except FileNotFoundError:
        raise ValueError(f"{path}: GPU catalog not found; point ceilings.catalog at an existing YAML file, "
                         "or leave it unset for the catalog shipped with roofline") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML ({exc}); fix the line it names") from None
    if not isinstance(raw, Mapping) or not isinstance(raw.get("gpus"), Mapping):
        raise ValueError(f"{path}: a GPU catalog needs a top-level 'gpus:' mapping of entries")
    extra = sorted(set(raw) - {"gpus"})
    if extra:
        raise ValueError(f"{path}: unknown top-level keys {extra}; only 'gpus:' is allowed")
    gpus = copy.deepcopy(dict(raw["gpus"]))
    if overrides:
        if not isinstance(overrides, Mapping):
            raise ValueError(f"{where}: overrides must be a mapping of GPU key -> entry")
        gpus = _apply_overrides(gpus, copy.deepcopy(dict(overrides)), where)
    problems: list[str] = []
    for key, entry in gpus.items():
        scan: list[str] = []
        _scan_units(entry, "", scan)
        problems.extend(f"GPU {key!r}, {p}" for p in scan)
        problem = unit_problem(str(key))
        if problem:
            problems.append(f"GPU key {problem}")
    if problems:
        raise ValueError(f"{where}: units must be decimal SI numbers:\n  " + "\n  ".join(problems))
    try:
        return Catalog.model_validate({"gpus": gpus})
    except ValidationError as exc:
        lines = "\n  ".join(_describe(e) for e in exc.errors())
        raise ValueError(
            f"{where}: invalid GPU catalog:\n  {lines}\n"
            "Numbers are plain SI base units (FLOP/s, B/s, Hz), each with a non-empty source."
        ) from None


def match_device(catalog: Catalog, display_name: str) -> GpuEntry | None:
    """The catalog entry of a device name as ncu reports it, or None.

    An exact name match wins; otherwise names are compared normalised (case-insensitive, without
    "NVIDIA ", "GeForce ", "Tesla ", spaces and dashes). Two candidates give None: never a guess.
    """
    if not isinstance(display_name, str) or not display_name.strip():
        return None
    exact = [e for e in catalog.gpus.values() if display_name in e.names]
    if exact:
        return exact[0] if len(exact) == 1 else None
    wanted = normalise_name(display_name)
    if not wanted:
        return None
    found = [e for e in catalog.gpus.values() if wanted in {normalise_name(n) for n in e.names}]
    return found[0] if len(found) == 1 else None


def catalog_ceilings(catalog: Catalog, display_name: str) -> pd.DataFrame:
    """Datasheet ceilings of one device as rows of the ceilings table.

    Parameters
    ----------
    catalog : Catalog
    display_name : str
        Device name as reported (``device__attribute_display_name``); copied to ``device``.

    Returns
    -------
    pandas.DataFrame
        Ceilings-table rows (``roofline.tables.schemas.CEILINGS``): one per compute class and memory level
        the entry gives, ``source`` "datasheet", ``value`` [FLOP/s or B/s], ``clock_hz`` the clock
        the value assumes (NaN for DRAM). Empty, with the same columns, for an unknown device.
    """
    entry = match_device(catalog, display_name)
    if entry is None:
        return conform(pd.DataFrame(), "ceilings")
    rows = []
    for kind, block in (("compute", entry.compute), ("memory", entry.memory)):
        for name, c in block.items():
            clock = c.clock_hz if c.clock_hz is not None else (entry.boost_clock_hz if kind == "compute" else np.nan)
            citation = f"catalog entry {entry.key!r}: {c.source}"
            if c.note:
                citation += f" [{c.note}]"
            for derived, value, how in _classes_of(name, c):
                rows.append(
                    {
                        "device": display_name,
                        "kind": kind,
                        "name": derived,
                        "value": value,
                        "source": "datasheet",
                        "clock_hz": clock,
                        "citation": citation + how,
                        "launches": 0,
                        "spread": np.nan,
                        "selected": False,
                    }
                )
    return conform(pd.DataFrame(rows), "ceilings")


def _classes_of(name: str, c: Ceiling) -> list[tuple[str, float, str]]:
    """The ceilings-table classes one catalog value gives: the class itself (its dense rate), its
    2:4-sparse class from ``sparse``, and for FP16 and FP8 tensor inputs the FP32-accumulate class
    (the ``fp32_accumulate`` rate, or ``value`` where the part runs both at one rate)."""
    out = [(name, c.value, "")]
    if c.sparse is not None and f"{name}_sparse" in TENSOR_CLASSES:
        out.append((f"{name}_sparse", c.sparse, " (sparse)"))
    for acc32, base in ACC32_OF.items():
        if name != base:
            continue
        rate = c.fp32_accumulate if c.fp32_accumulate is not None else c.value
        how = " (fp32_accumulate)" if c.fp32_accumulate is not None else " (value: FP32 accumulate at full rate)"
        out.append((acc32, rate, how))
        if c.sparse is not None:
            out.append((f"{acc32}_sparse", c.sparse * rate / c.value, " (sparse x fp32_accumulate / value)"))
    return out
