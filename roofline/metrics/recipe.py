"""A recipe: one way to derive a canonical quantity from ncu metrics, and the quantity it serves.

The recipe table itself is :data:`roofline.metrics.quantities.QUANTITIES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Recipe:
    """One way to derive a quantity: ``sum(coef * metric) * prod(scale) / prod(divide)``.

    ``scale`` and ``divide`` name other metrics or, prefixed with ``@``, other quantities.
    """

    name: str
    terms: tuple[tuple[float, str], ...]
    scale: tuple[str, ...] = ()
    divide: tuple[str, ...] = ()
    note: str = ""
    # Compute capabilities (major*10+minor) the recipe is valid for; None = any.
    cc_min: int | None = None
    cc_max: int | None = None
    # The counter family of a memory level's traffic or peak recipe: a level's bytes and its roof
    # are taken from recipes of one family (roofline.metrics.quantities.LEVEL_PAIRS); empty elsewhere.
    family: str = ""

    def inputs(self) -> tuple[str, ...]:
        """The ncu metric names this recipe reads (quantities excluded)."""
        names = [metric for _, metric in self.terms]
        names += [n for n in self.scale + self.divide if not n.startswith("@")]
        return tuple(names)

    def depends_on(self) -> tuple[str, ...]:
        """The quantities this recipe needs first."""
        return tuple(n[1:] for n in self.scale + self.divide if n.startswith("@"))


@dataclass(frozen=True)
class Quantity:
    """A canonical per-launch quantity with its unit and recipes in order of preference."""

    name: str
    unit: str
    recipes: tuple[Recipe, ...]
    description: str = ""
    capture: bool = True  # whether capture asks for the first recipe's metrics
    extra: dict[str, str] = field(default_factory=dict)
