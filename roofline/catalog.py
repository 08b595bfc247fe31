"""The datasheet ceiling catalog: vendor peaks per GPU model (roofline/data/gpus.yaml -> Ceilings rows).

The catalog is validated here once: every number is a positive, finite, decimal SI base-unit
number (FLOP/s, B/s, Hz) with a non-empty source; strings with units, bits and binary prefixes are
refused; device names are unique across entries, also after normalisation. Users add GPUs or
override values with a mapping of the same shape (config ``ceilings: gpus:``) merged over the file.
docs/catalog.md explains the conventions (dense peaks, FP16/FP32 accumulate, clocks).
"""

from __future__ import annotations

import copy
import math
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StringConstraints,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from roofline.metrics import ACC32_OF, CATALOG_CLASSES, MEMORY_LEVELS, TENSOR_CLASSES
from roofline.schemas import conform
from roofline.strict_yaml import FastStrictLoader

# The catalog ships with the package (package data), so the installed CLI and a workflow used as a
# Snakemake module find it wherever they run.
CATALOG_PATH = Path(__file__).resolve().parent / "data" / "gpus.yaml"

# Plausible magnitudes in SI base units; outside them a value is surely in GB/s, TFLOP/s or MHz.
COMPUTE_RANGE = (1e9, 1e18)  # FLOP/s: 1 GFLOP/s .. 1 EFLOP/s
MEMORY_RANGE = (1e9, 1e16)  # B/s: 1 GB/s .. 10 PB/s
CLOCK_RANGE = (1e8, 1e10)  # Hz: 100 MHz .. 10 GHz

_BITS = re.compile(r"bit|[kmgtpe]?bps\b", re.IGNORECASE)
_BINARY = re.compile(r"[kmgtpe]i(b|byte)", re.IGNORECASE)
_NUMBER = re.compile(r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$")
_FREE_TEXT = {"source", "spec_source", "note", "notes"}
_GPU_KEY = re.compile(r"^[a-z0-9][a-z0-9_]*$")
_IGNORED_WORDS = re.compile(r"\b(nvidia|geforce|tesla)\b")
_SEPARATORS = re.compile(r"[\s\-_]+")

NonEmptyStr = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


def _unit_problem(text: str) -> str | None:
    """Why ``text`` (a key, or a string where a number belongs) is not an SI number, or None."""
    if _BITS.search(text):
        return f"{text!r} mentions bits; write bytes per second (1 GB/s = 1e+9 B/s, 8 bit = 1 B)"
    if _BINARY.search(text):
        return f"{text!r} uses a binary prefix; write decimal SI numbers (1 GB/s = 1e+9 B/s)"
    return None


def _si_number(value: Any) -> float:
    """A positive finite float from a YAML scalar; unit-bearing strings are refused."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number")
    if isinstance(value, str):
        problem = _unit_problem(value)
        if problem:
            raise ValueError(problem)
        if not _NUMBER.match(value):
            raise ValueError(
                f"{value!r} is a string, not a number; write a plain number in SI base units "
                "(e.g. 9.0e+11 for 900 GB/s, 19.5e+12 for 19.5 TFLOP/s, 1.41e+9 for 1410 MHz)"
            )
        value = float(value)
    if not isinstance(value, int | float):
        raise ValueError(f"{value!r} is not a number")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{value!r} must be a positive finite number")
    return value


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Ceiling(Strict):
    """One datasheet peak: ``value`` [FLOP/s, ops/s or B/s], dense, with its source."""

    value: float
    source: NonEmptyStr
    sparse: float | None = Field(None, description="2:4 structured-sparsity rate (tensor only)")
    fp32_accumulate: float | None = Field(
        None, description="rate with FP32 accumulate where it is below value (GeForce tensor)"
    )
    clock_hz: float | None = Field(None, description="clock this value assumes, if not the entry's")
    note: str | None = None

    @field_validator("value", "sparse", "fp32_accumulate", "clock_hz", mode="before")
    @classmethod
    def _number(cls, v: Any) -> Any:
        return None if v is None else _si_number(v)


class _Block(Strict):
    def items(self) -> Iterator[tuple[str, Ceiling]]:
        """(name, ceiling) pairs of the values present, in the declared order."""
        for name in type(self).model_fields:
            ceiling = getattr(self, name)
            if ceiling is not None:
                yield name, ceiling


Compute = create_model(
    "Compute",
    __base__=_Block,
    __doc__="Compute peaks per class [FLOP/s; ops/s for int8], dense.",
    **{name: (Ceiling | None, None) for name in CATALOG_CLASSES},
)
Memory = create_model(
    "Memory",
    __base__=_Block,
    __doc__="Bandwidth peaks per memory level [B/s].",
    **{name: (Ceiling | None, None) for name in MEMORY_LEVELS},
)


class GpuEntry(Strict):
    """One GPU model: the names ncu reports for it, its configuration and its peaks."""

    names: list[NonEmptyStr] = Field(min_length=1)
    architecture: NonEmptyStr
    chip: str | None = None
    compute_capability: str = Field(pattern=r"^\d+\.\d+$")
    sm_count: int = Field(gt=0)
    boost_clock_hz: float
    spec_source: NonEmptyStr
    compute: Compute  # type: ignore[valid-type]
    memory: Memory  # type: ignore[valid-type]
    notes: str | None = None
    _key: str = PrivateAttr(default="")

    @property
    def key(self) -> str:
        """The entry's key in the catalog (e.g. ``a100_sxm4_80gb``)."""
        return self._key

    @field_validator("compute_capability", mode="before")
    @classmethod
    def _cc_text(cls, v: Any) -> Any:
        return f"{v:.1f}" if isinstance(v, float) else v

    @field_validator("sm_count", mode="before")
    @classmethod
    def _integer(cls, v: Any) -> Any:
        if isinstance(v, float | str) and not isinstance(v, bool):
            if isinstance(v, float) and v.is_integer():
                return int(v)
            if isinstance(v, str) and v.strip().isdigit():
                return int(v)
            raise ValueError(f"{v!r} is not a whole number of SMs")
        return v

    @field_validator("boost_clock_hz", mode="before")
    @classmethod
    def _clock(cls, v: Any) -> Any:
        return _si_number(v)

    @model_validator(mode="after")
    def _ranges(self) -> GpuEntry:
        problems = []
        lo, hi = CLOCK_RANGE
        if not lo <= self.boost_clock_hz <= hi:
            problems.append(f"boost_clock_hz {self.boost_clock_hz:g} is not in Hz (expected {lo:g}..{hi:g})")
        for kind, block, (lo, hi), unit in (
            ("compute", self.compute, COMPUTE_RANGE, "FLOP/s"),
            ("memory", self.memory, MEMORY_RANGE, "B/s"),
        ):
            present = list(block.items())
            if not present:
                problems.append(f"{kind}: give at least one ceiling")
            for name, c in present:
                for field in ("value", "sparse", "fp32_accumulate"):
                    v = getattr(c, field)
                    if v is not None and not lo <= v <= hi:
                        problems.append(
                            f"{kind}.{name}.{field} = {v:g} is not a plausible {unit} value "
                            f"({lo:g}..{hi:g}); write SI base units (1555 GB/s -> 1.555e+12)"
                        )
                if c.clock_hz is not None and not CLOCK_RANGE[0] <= c.clock_hz <= CLOCK_RANGE[1]:
                    problems.append(f"{kind}.{name}.clock_hz = {c.clock_hz:g} is not in Hz")
                tensor = name in TENSOR_CLASSES
                if not tensor and (c.sparse is not None or c.fp32_accumulate is not None):
                    problems.append(f"{kind}.{name}: sparse / fp32_accumulate apply to tensor_* classes only")
                if c.sparse is not None and c.sparse < c.value:
                    problems.append(f"{kind}.{name}: sparse {c.sparse:g} is below the dense value; swapped?")
                if c.fp32_accumulate is not None and c.fp32_accumulate > c.value:
                    problems.append(
                        f"{kind}.{name}: value must be the highest (FP16-accumulate) rate, "
                        f"fp32_accumulate {c.fp32_accumulate:g} exceeds it"
                    )
        if problems:
            raise ValueError("; ".join(problems))
        return self


class Catalog(Strict):
    """All GPU entries, keyed by a snake_case id."""

    gpus: dict[str, GpuEntry]

    @field_validator("gpus", mode="before")
    @classmethod
    def _keys(cls, v: Any) -> Any:
        if isinstance(v, Mapping):
            bad = [k for k in v if not (isinstance(k, str) and _GPU_KEY.match(k))]
            if bad:
                raise ValueError(f"GPU keys {bad} must be snake_case ids like 'a100_sxm4_80gb'")
        return v

    @model_validator(mode="after")
    def _unique_names(self) -> Catalog:
        owner: dict[str, str] = {}
        owner_norm: dict[str, str] = {}
        problems = []
        for key, entry in self.gpus.items():
            entry._key = key
            for name in entry.names:
                if owner.setdefault(name, key) != key:
                    problems.append(f"name {name!r} is in both {owner[name]!r} and {key!r}")
                    continue
                norm = normalise_name(name)
                if not norm:
                    problems.append(f"name {name!r} of {key!r} is empty once normalised")
                elif owner_norm.setdefault(norm, key) != key:
                    problems.append(
                        f"name {name!r} of {key!r} matches {owner_norm[norm]!r} once normalised "
                        f"({norm!r}); names must identify one entry"
                    )
        if problems:
            raise ValueError("; ".join(problems) + "; remove the name from one entry")
        return self


def normalise_name(name: str) -> str:
    """Name for tolerant matching: lower case, without NVIDIA/GeForce/Tesla, spaces and dashes."""
    return _SEPARATORS.sub("", _IGNORED_WORDS.sub("", name.casefold()))


def _scan_units(node: Any, path: str, problems: list[str]) -> None:
    """Collect keys and non-free-text strings that mention bits or binary prefixes."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            here = f"{path}.{key}" if path else str(key)
            problem = _unit_problem(str(key))
            if problem:
                problems.append(f"{here}: key {problem}")
            if str(key) not in _FREE_TEXT:
                _scan_units(value, here, problems)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            _scan_units(item, f"{path}[{i}]", problems)
    elif isinstance(node, str):
        problem = _unit_problem(node)
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
        problem = _unit_problem(str(key))
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
        Ceilings-table rows (``roofline.schemas.CEILINGS``): one per compute class and memory level
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
