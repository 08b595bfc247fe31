"""Plausibility: which derived values cannot be measurements of one kernel launch.

A value outside these limits cannot be a measurement of one kernel launch;
it is refused *for that launch and quantity*: the quantity is left empty (NaN), its
``<quantity>_refused`` column says "<metrics> gives <value>: <why>" (its ``_recipe`` column names
the recipe that gave the value), later recipes do not replace it, and the launch keeps its row
and gets one warning (parse.diagnostics_for). Quantities computed from a refused one (e.g.
DRAM bytes = rate x duration) are empty too. The limits are those of the GPU catalog
(roofline/ceilings/catalog_entries.py: COMPUTE_RANGE, MEMORY_RANGE upper ends); clocks may reach 100 GHz because
ncu reports GDDR7 DRAM clocks near 14 GHz (RTX 5090 fixture).

- any quantity below 0 (negative counters, bytes, times, clocks, peaks);
- a duration, clock or peak of exactly 0 (nothing takes no time, a clock that never ticks counts no
  cycle, a roof of 0 leaves no rate): later stages divide by them, per launch and across every app
  of a device (the ceilings), so a 0 there is as absurd as a negative value;
- an SM count (``device__attribute_multiprocessor_count``) of 0, below 0, fractional or above
  MAX_SM_COUNT (:func:`implausible_sm_count`);
- a duration above MAX_DURATION_S (one day: ncu replays a launch dozens of times);
- clocks below MIN_CLOCK_HZ (a shifted column of an export: no GPU clock runs under 1 MHz) or above
  MAX_CLOCK_HZ, peaks above MAX_FLOP_RATE / MAX_BYTE_RATE;
- work or traffic that implies a rate above those peaks in the launch's duration (e.g. 1e21 FLOP/s):
  the work or bytes are refused, the duration kept.
"""

from __future__ import annotations

import numpy as np

from roofline.metrics.quantities import COMPUTE_CLASSES, MEMORY_LEVELS
from roofline.metrics.recipe import Recipe

MAX_DURATION_S = 86_400.0
MAX_CLOCK_HZ = 1e11
MIN_CLOCK_HZ = 1e6
MAX_FLOP_RATE = 1e18
MAX_BYTE_RATE = 1e16
MAX_SM_COUNT = 10_000  # the largest GPUs have ~150 SMs
_UNIT_LIMITS = {"s": MAX_DURATION_S, "Hz": MAX_CLOCK_HZ, "FLOP/s": MAX_FLOP_RATE, "B/s": MAX_BYTE_RATE}
# Units whose quantities a later stage divides by (durations, clocks, peaks): 0 is refused, and why.
_ZERO_REFUSED = {
    "s": "zero: a launch takes time, so the rates would be infinite",
    "Hz": "zero: a clock that never ticks counts no cycle, so the peaks at it would be 0",
    "FLOP/s": "zero: a roof of 0 leaves no rate possible, so the percentages would be infinite",
    "B/s": "zero: a roof of 0 leaves no rate possible, so the percentages would be infinite",
}
_UNIT_FLOORS = {"Hz": MIN_CLOCK_HZ}


def _source_text(recipe: Recipe | None) -> str:
    if recipe is None:
        return "the table"
    return " + ".join(dict.fromkeys(recipe.inputs())) or recipe.name


def all_plausible(quantity, values: np.ndarray) -> bool:
    """Whether ``values`` (at least one) are all finite and none would be refused by
    :func:`implausible`: one pass for the rule, where every value of a quantity is a measurement."""
    low, high = values.min(), values.max()  # NaN if any value is NaN: every comparison below fails
    limit = _UNIT_LIMITS.get(quantity.unit, np.inf)
    if quantity.unit in _ZERO_REFUSED:
        return bool(low >= _UNIT_FLOORS.get(quantity.unit, 0) and low > 0 and high < np.inf and high <= limit)
    return bool(low >= 0 and high < np.inf and high <= limit)


def implausible(quantity, values: np.ndarray, recipe: Recipe | None) -> dict[int, str]:
    """Row -> refusal text for the ``values`` of ``quantity`` that cannot be measurements (NaN is not
    judged); a row gets the first reason that applies."""
    limit = _UNIT_LIMITS.get(quantity.unit)
    suspect = values < 0
    zero = _ZERO_REFUSED.get(quantity.unit)
    if zero:
        suspect |= values == 0
    floor = _UNIT_FLOORS.get(quantity.unit)
    if floor is not None:
        suspect |= values < floor
    if limit is not None:
        suspect |= values > limit
    if not suspect.any():  # every value plausible (the rule, by far)
        return {}
    checks = [(values < 0, "negative")]
    if zero:
        checks.append((values == 0, zero))
    if floor is not None:
        checks.append((values < floor, f"below the plausible minimum {floor:g} {quantity.unit}"))
    if limit is not None:
        checks.append((values > limit, f"above the plausible maximum {limit:g} {quantity.unit}"))
    reasons: dict[int, str] = {}
    for mask, why in checks:
        for i in np.flatnonzero(mask):
            reasons.setdefault(int(i), f"{_source_text(recipe)} gives {values[i]:.4g} {quantity.unit}: {why}")
    return reasons


def implausible_sm_count(values: np.ndarray, metric: str) -> dict[int, str]:
    """Row -> refusal text for the SM counts (``metric``'s ``values``) that no GPU has: 0, negative,
    fractional or above :data:`MAX_SM_COUNT` (NaN is not judged). The issue roof multiplies by it and
    a recipe divides by it."""
    with np.errstate(invalid="ignore"):
        suspect = (values <= 0) | (values > MAX_SM_COUNT) | (values != np.round(values))
    suspect &= ~np.isnan(values)
    return {int(i): (f"{metric} gives {values[i]:.4g} SMs: a GPU has a whole number of SMs from 1 to "
                     f"{MAX_SM_COUNT:,}") for i in np.flatnonzero(suspect)}


def ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``, NaN where that is no number (a denominator of 0, NaN or inf, a
    NaN numerator): the ceilings hold every app of a device, so one launch's bad value must leave a
    ratio unknown, never stop them (parse refuses such values; a table written before it did, or
    edited, can still hold them)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        value = np.float64(numerator) / np.float64(denominator)
    return float(value) if np.isfinite(value) and denominator != 0 else np.nan


def refuse_rates(values: dict[str, np.ndarray], recipes: dict[str, tuple[list, np.ndarray]],
                  refusals: dict[str, dict[int, str]]) -> None:
    """Refuse work and traffic that imply an absurd rate in the launch's own duration (in place:
    the value becomes NaN, the reason goes to ``refusals``)."""
    duration = values["duration_s"]
    checks = [(f"flop_{c}", "FLOP", MAX_FLOP_RATE) for c in COMPUTE_CLASSES]
    checks += [(f"{level}_bytes", "B", MAX_BYTE_RATE) for level in MEMORY_LEVELS]
    # a quantity without any recipe's text has no value to judge (most of them, for any one input);
    # the others' rates are judged together, one division for all
    checks = [check for check in checks if recipes[check[0]][0] != [""]]
    if not checks:
        return
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = np.stack([values[column] for column, _, _ in checks]) / duration
    above = rates > np.array([limit for _, _, limit in checks])[:, None]
    if not above.any():
        return
    for position, i in zip(*np.nonzero(above), strict=True):
        column, unit, limit = checks[position]
        value = values[column]
        texts, text_code = recipes[column]
        recipe = texts[text_code[i]]
        refusals[column][int(i)] = (
            f"{recipe or 'the table'} gives {value[i]:.4g} {unit} in "
            f"{duration[i]:.4g} s = {rates[position, i]:.3g} {unit}/s: above the plausible maximum "
            f"{limit:g} {unit}/s"
        )
        value[i] = np.nan
