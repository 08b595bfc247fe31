"""One entry of the datasheet ceiling catalog, validated: the pydantic models of
roofline/data/gpus.yaml and the checks on its values.

Every number is a positive, finite, decimal SI base-unit number (FLOP/s, B/s, Hz) within a
plausible magnitude and with a non-empty source; strings with units, bits and binary prefixes are
refused; device names are unique across entries, also after normalisation
(:func:`normalise_name`). Loading, user overrides and device lookup are :mod:`roofline.ceilings.catalog`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StringConstraints,
    create_model,
    field_validator,
    model_validator,
)

from roofline.metrics.quantities import CATALOG_CLASSES, MEMORY_LEVELS, TENSOR_CLASSES

# Plausible magnitudes in SI base units; outside them a value is surely in GB/s, TFLOP/s or MHz.
COMPUTE_RANGE = (1e9, 1e18)  # FLOP/s: 1 GFLOP/s .. 1 EFLOP/s
MEMORY_RANGE = (1e9, 1e16)  # B/s: 1 GB/s .. 10 PB/s
CLOCK_RANGE = (1e8, 1e10)  # Hz: 100 MHz .. 10 GHz

_BITS = re.compile(r"bit|[kmgtpe]?bps\b", re.IGNORECASE)
_BINARY = re.compile(r"[kmgtpe]i(b|byte)", re.IGNORECASE)
_NUMBER = re.compile(r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$")
FREE_TEXT_KEYS = {"source", "spec_source", "note", "notes"}
_GPU_KEY = re.compile(r"^[a-z0-9][a-z0-9_]*$")
_IGNORED_WORDS = re.compile(r"\b(nvidia|geforce|tesla)\b")
_SEPARATORS = re.compile(r"[\s\-_]+")

NonEmptyStr = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


def unit_problem(text: str) -> str | None:
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
        problem = unit_problem(value)
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
