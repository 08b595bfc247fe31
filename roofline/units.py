"""Unit normalisation at the parse boundary: ncu unit strings -> decimal SI base units.

ncu prints units per value (``Kbyte``, ``Mbyte/s``, ``usecond``, ``msecond``, ``cycle/nsecond``,
``Ghz``...). Every number leaves parse in bytes, seconds, hertz, FLOP or plain counts; nothing
downstream sees a unit string. Prefixes are decimal (1 Kbyte = 1000 B), as ncu documents.
Binary prefixes (KiB, Mibyte) and bits are refused: they would silently be 2.4-7 % or 8x off.
"""

from __future__ import annotations

import math
import re

_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_SMALL_PREFIX = {"": 1.0, "m": 1e-3, "u": 1e-6, "µ": 1e-6, "n": 1e-9, "p": 1e-12}

# Base units whose values need no conversion (counts, ratios, per-cycle rates).
_DIMENSIONLESS = {
    "",
    "inst",
    "inst/cycle",
    "cycle",
    "cycles",
    "sector",
    "sector/cycle",
    "request",
    "warp",
    "thread",
    "block",
    "register/thread",
    "byte/block",
    "%",
    "byte/cycle",
    "ops",
    "op",
    "ops/cycle",
    "flop",
    "wavefront",
    "register",
    "SM",
    "cycle/cycle",
    "none",
}

_BYTES = re.compile(r"^([kKMGTP]?)byte(s)?$")
_BYTES_RATE = re.compile(r"^([kKMGTP]?)byte(s)?/(s|second)$")
_SECONDS = re.compile(r"^([munpµ]?)s(ec(ond)?)?s?$")
_HZ = re.compile(r"^([kKMGT]?)hz$", re.IGNORECASE)
_CYCLES_PER_TIME = re.compile(r"^cycle/([munpµ]?)s(ec(ond)?)?$")
_RATE_PER_SECOND = re.compile(r"^([kKMGTP]?)(inst|sector|request|warp|flop|ops?)/(s|second)$")
_BINARY = re.compile(r"(i?b(yte)?$|^[KMGT]i)", re.IGNORECASE)


class UnitError(ValueError):
    """A unit the parser does not know; the message names the metric and the unit."""


def si_factor(unit: str, metric: str = "") -> float:
    """The factor that converts a value in ``unit`` to its SI base unit.

    Raises
    ------
    UnitError
        For unknown units, binary prefixes and bits.
    """
    u = (unit or "").strip()
    if u in _DIMENSIONLESS:
        return 1.0
    if m := _BYTES.match(u):
        return _PREFIX[m.group(1)]
    if m := _BYTES_RATE.match(u):
        return _PREFIX[m.group(1)]
    if m := _SECONDS.match(u):
        return _SMALL_PREFIX[m.group(1)]
    if m := _HZ.match(u):
        return _PREFIX[m.group(1).upper() if m.group(1) != "k" else "k"]
    if m := _CYCLES_PER_TIME.match(u):
        return 1.0 / _SMALL_PREFIX[m.group(1)]
    if m := _RATE_PER_SECOND.match(u):
        return _PREFIX[m.group(1)]
    where = f" of metric {metric!r}" if metric else ""
    if "bit" in u.lower() or re.search(r"[KMGT]i", u) or u.lower() in {"kib", "mib", "gib", "tib"}:
        raise UnitError(
            f"unit {unit!r}{where} is in bits or binary prefixes; ncu writes decimal bytes "
            "(byte, Kbyte, Mbyte...): re-export with ncu --csv or fix the value to decimal bytes"
        )
    raise UnitError(
        f"unknown unit {unit!r}{where}; expected ncu's units (byte, Kbyte, nsecond, hz, ...): re-export "
        "with ncu --csv, which writes them, or correct the unit"
    )


def to_si(value: float, unit: str, metric: str = "") -> float:
    """``value`` in ``unit`` converted to SI base units (NaN stays NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return math.nan
    return float(value) * si_factor(unit, metric)


def parse_number(text: str | float | int | None) -> float:
    """A number as ncu prints it: thousands separators, ``n/a``, empty -> NaN."""
    if text is None:
        return math.nan
    if isinstance(text, (int, float)):
        return float(text)
    s = str(text).strip().replace(",", "").replace("\u202f", "").replace(" ", "")
    if s == "" or s.lower() in {"n/a", "nan", "na", "-", "none"}:
        return math.nan
    try:
        return float(s)
    except ValueError:
        return math.nan
