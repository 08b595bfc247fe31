"""The robust statistics of the nightly decision rule (roofline/nightly/series_rule.py): a value as a
number, a relative change, a median of the finite values, the relative noise of nightly values.
"""

from __future__ import annotations

import math
import statistics


def number(value: object) -> float:
    """``value`` as a float; NaN when it is missing or not a number."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def rel_change(a: float, b: float) -> float:
    """a / b - 1; NaN when either is missing or b is zero."""
    return a / b - 1 if math.isfinite(a) and math.isfinite(b) and b != 0 else math.nan


def median_finite(values: list[float]) -> float:
    """The median of the finite values; NaN when there is none."""
    finite = [v for v in values if math.isfinite(v)]
    return float(statistics.median(finite)) if finite else math.nan


def rel_sigma(values: list[float], method: str = "level") -> float:
    """Robust relative noise of nightly values.

    ``level``: 1.4826 x MAD of the values / their median. ``diff``: the night-to-night changes of
    log(value): 1.4826 x MAD, then the RMS of the changes within 3 of those, / sqrt(2); a step
    or a spike inside the window barely moves it.
    """
    if method == "diff":
        if len(values) < 3:
            return math.nan
        logs = [math.log(v) for v in values]
        d = [b - a for a, b in zip(logs, logs[1:], strict=False)]
        centre = statistics.median(d)
        dev = [abs(x - centre) for x in d]
        mad = 1.4826 * statistics.median(dev)
        kept = [x for x in dev if x <= 3 * mad]  # one reweighting step: MAD alone is noisy
        scale = math.sqrt(sum(x * x for x in kept) / len(kept)) if len(kept) >= 2 else mad
        return scale / math.sqrt(2)
    med = statistics.median(values)
    return 1.4826 * statistics.median([abs(x - med) for x in values]) / med if med > 0 else math.nan
