"""Unit normalisation at the parse boundary: ncu unit strings -> decimal SI base units.

ncu prints units per value (``Kbyte``, ``Mbyte/s``, ``usecond``, ``msecond``, ``cycle/nsecond``,
``Ghz``...). Every number leaves parse in bytes, seconds, hertz, FLOP or plain counts; nothing
downstream sees a unit string. Prefixes are decimal (1 Kbyte = 1000 B), as ncu documents.
Binary prefixes (KiB, Mibyte) and bits are refused: they would silently be 2.4-7 % or 8x off.
Composite units are converted term by term (``Kbyte/block`` -> bytes per block, ``sector/ns`` ->
sectors per second). The readers refuse an unknown unit only on a metric the recipes read
(:func:`roofline.metrics.quantities.all_input_metrics`); other metrics with one are left out with a
:class:`UnitWarning`.
"""

from __future__ import annotations

import math
import re
import warnings

# Decimal prefixes as powers of ten (the factor is 10 ** exponent: 1/1e-9 is not exactly 1e9).
_PREFIX = {"": 0, "k": 3, "K": 3, "M": 6, "G": 9, "T": 12, "P": 15}
_SMALL_PREFIX = {"": 0, "m": -3, "u": -6, "µ": -6, "n": -9, "p": -12}

# Whole units whose values need no conversion (words ncu prints for unitless values).
_DIMENSIONLESS = {"", "%", "none"}

# Counted things: a term of a unit is one of these (with a decimal prefix and an optional plural
# s), bytes, seconds or hertz; a unit is a term or a quotient of terms ("Kbyte/block",
# "inst/warp", "sector/ns"), whose numerator may also be "%" ("%/Kbyte").
_COUNTS = (
    "inst|cycle|sector|request|warp|thread|block|cluster|flop|ops?|wavefront|register|SM|sample|pass"
    "|branch(?:es)?"
)
_BYTES = re.compile(r"^([kKMGTP]?)bytes?$")
_COUNT = re.compile(rf"^([kKMGTP]?)(?:{_COUNTS})s?$")
_SECONDS = re.compile(r"^([munpµ]?)s(ec(ond)?)?s?$")
_HZ = re.compile(r"^([kKMGT]?)hz$", re.IGNORECASE)


class UnitError(ValueError):
    """A unit the parser does not know; the message names the metric and the unit."""


class UnitWarning(UserWarning):
    """Metrics a reader left out because the converter does not know their unit (no recipe reads
    them; a metric a recipe reads raises :class:`UnitError` instead)."""


def unknown_unit_warning(source: str, unknown: dict[str, str], stacklevel: int = 2) -> None:
    """Warn, once per input, that the metrics of ``unknown`` (metric -> unit) were left out."""
    if not unknown:
        return
    listed = ", ".join(f"{metric!r} ({unit!r})" for metric, unit in sorted(unknown.items()))
    warnings.warn(
        f"{source}: {len(unknown)} metric(s) left out, their unit is not one the converter knows and "
        f"no recipe reads them: {listed}",
        UnitWarning,
        stacklevel=stacklevel + 1,
    )


def _exponent(term: str) -> int | None:
    """The power of ten that converts one term of a unit (``Kbyte``, ``nsecond``, ``inst``) to SI,
    None if unknown."""
    if m := _BYTES.match(term) or _COUNT.match(term):
        return _PREFIX[m.group(1)]
    if m := _SECONDS.match(term):
        return _SMALL_PREFIX[m.group(1)]
    if m := _HZ.match(term):
        return _PREFIX[m.group(1).upper() if m.group(1) != "k" else "k"]
    return None


def si_factor(unit: str, metric: str = "") -> float:
    """The factor that converts a value in ``unit`` to its SI base unit.

    A unit is a term or a quotient of terms (``numerator/denominator[/...]``); a term is bytes, a
    count (``inst``, ``cycle``, ``sector``, ``block``, ...), seconds or hertz with its decimal
    prefix, so the factor is the numerator's prefix over the denominators' (``Kbyte/block`` -> 1e3,
    ``sector/ns`` -> 1e9, ``%/Kbyte`` -> 1e-3).

    Raises
    ------
    UnitError
        For unknown units, binary prefixes and bits.
    """
    u = (unit or "").strip()
    if u in _DIMENSIONLESS:
        return 1.0
    numerator, *denominators = u.split("/")
    exponents = [0 if numerator == "%" else _exponent(numerator), *map(_exponent, denominators)]
    if None not in exponents:
        return 10.0 ** (exponents[0] - sum(exponents[1:]))
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


# How a report or a table spells a missing value (compared lower-cased, stripped): read as NaN.
MISSING_TEXT = ("", "n/a", "nan", "na", "-", "none")


def parse_number(text: str | float | int | None) -> float:
    """A number as ncu prints it: thousands separators, ``n/a``, empty -> NaN."""
    if text is None:
        return math.nan
    if isinstance(text, (int, float)):
        return float(text)
    s = str(text).strip().replace(",", "").replace("\u202f", "").replace(" ", "")
    if s.lower() in MISSING_TEXT:
        return math.nan
    try:
        return float(s)
    except ValueError:
        return math.nan


def si(value: float | None, unit: str) -> str:
    """``value`` with a decimal SI prefix and 3 significant digits, e.g. ``1.56 TB/s``; ``–`` for a
    missing or non-finite value."""
    if value is None or not math.isfinite(value):
        return "–"
    prefixes = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""),
                (1e-3, "m"), (1e-6, "µ"), (1e-9, "n"), (1e-12, "p"))
    for factor, prefix in prefixes:
        if abs(float(f"{value:.3g}")) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"
