"""The one metric planner: which ncu metrics to ask for, from the recipe table.

Per captured quantity of :mod:`roofline.metrics.quantities`, the first recipe valid for the GPU (recipes
limited to a compute-capability range that contains the GPU's come first, then the general ones)
and, when ``ncu --query-metrics`` could be asked, whose metrics the GPU offers; then the identity
and launch metrics. Capture runs ncu with this list.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from roofline.metrics.quantities import IDENTITY_METRICS, LAUNCH_METRICS, QUANTITIES
from roofline.metrics.recipe import Quantity, Recipe

# Metrics ncu always offers although ``--query-metrics`` does not list them.
ALWAYS_AVAILABLE = ("device__attribute_", "launch__")


@dataclass(frozen=True)
class MetricPlan:
    """The ``--metrics`` list and, per captured quantity, the recipe it serves."""

    metrics: tuple[str, ...]
    recipes: dict[str, str] = field(default_factory=dict)
    missing: tuple[str, ...] = ()  # captured quantities no usable recipe could serve
    source: str = "recipe-table"  # recipe-table, compute-capability or query-metrics


def compute_capability(architecture: str | None) -> int | None:
    """``"sm_90"``, ``"sm90"``, ``"90"`` or ``"9.0"`` -> 90 (major*10+minor); None stays None.

    Raises
    ------
    ValueError
        If the string names no compute capability.
    """
    if architecture is None or not str(architecture).strip():
        return None
    text = str(architecture).strip().lower()
    if match := re.fullmatch(r"(\d+)\.(\d)", text):
        return int(match.group(1)) * 10 + int(match.group(2))
    if match := re.fullmatch(r"(?:sm_?|compute_?)?(\d{2,3})[a-z]?", text):
        return int(match.group(1))
    raise ValueError(f"architecture {architecture!r}: expected e.g. sm_90, 90 or 9.0")


def _valid_for(recipe: Recipe, cc: int | None) -> bool:
    if cc is None:
        return recipe.cc_min is None and recipe.cc_max is None
    return (recipe.cc_min or 0) <= cc <= (recipe.cc_max or 999)


def _candidates(quantity: Quantity, cc: int | None) -> list[Recipe]:
    """Recipes valid for ``cc``: those written for its generation first, then the general ones."""
    valid = [r for r in quantity.recipes if _valid_for(r, cc)]
    specific = [r for r in valid if r.cc_min is not None or r.cc_max is not None]
    return specific + [r for r in valid if r not in specific]


def is_available(metric: str, available: set[str]) -> bool:
    """Whether ``available`` (``ncu --query-metrics`` names, base or full) offers ``metric``."""
    return metric in available or metric.split(".", 1)[0] in available or metric.startswith(ALWAYS_AVAILABLE)


def plan_metrics(
    architecture: str | None = None,
    available_metrics: set[str] | None = None,
    quantities: Sequence[Quantity] = QUANTITIES,
    identity: Iterable[str] = (*IDENTITY_METRICS.values(), *LAUNCH_METRICS),
) -> MetricPlan:
    """Choose one recipe per captured quantity and collect its metrics, plus the identity metrics.

    Without an architecture only recipes without compute-capability limits are used; without
    ``available_metrics`` the first candidate is taken as is.
    """
    cc = compute_capability(architecture)
    seen: dict[str, None] = {}
    recipes: dict[str, str] = {}
    missing: list[str] = []
    for quantity in quantities:
        if not quantity.capture:
            continue
        chosen = None
        for recipe in _candidates(quantity, cc):
            if available_metrics is None or all(is_available(m, available_metrics) for m in recipe.inputs()):
                chosen = recipe
                break
        if chosen is None:
            missing.append(quantity.name)
            continue
        recipes[quantity.name] = chosen.name
        for name in chosen.inputs():
            seen.setdefault(name, None)
    for name in identity:
        seen.setdefault(name, None)
    if available_metrics is not None:
        source = "query-metrics"
    elif cc is not None:
        source = "compute-capability"
    else:
        source = "recipe-table"
    return MetricPlan(tuple(seen), recipes, tuple(missing), source)


def plan_fingerprint(
    quantities: Sequence[Quantity] = QUANTITIES,
    identity: Iterable[str] = (*IDENTITY_METRICS.values(), *LAUNCH_METRICS),
) -> str:
    """A short digest of everything :func:`plan_metrics` can choose from: each captured quantity's
    candidate recipes (their metrics and compute-capability limits, in order) and the identity
    metrics. The workflow passes it to capture as a param, so a capture reruns when the metrics it
    would ask ncu for change, and not when an analysis-only part of the recipe table does."""
    import hashlib
    import json

    table = [
        [quantity.name, [[list(r.inputs()), r.cc_min, r.cc_max] for r in quantity.recipes]]
        for quantity in quantities
        if quantity.capture
    ]
    text = json.dumps([table, list(identity)], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
