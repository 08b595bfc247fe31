"""Hierarchical roofline analysis of Nsight Compute profiles.

For notebooks: ``roofline.read``, ``roofline.analyse``, ``roofline.plot`` and ``roofline.Analysis``
(:mod:`roofline.api`). They are imported on first use (module ``__getattr__``), so that
``import roofline`` and the workflow's ``roofline.<stage>`` imports do not pay for pandas and
Altair before they need them.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own costs ~10 ms of every job's start-up

__version__ = "0.1.0"

_API = ("Analysis", "analyse", "plot", "read")
__all__ = ["__version__", *_API]

if TYPE_CHECKING:
    from roofline.api import Analysis, analyse, plot, read  # noqa: F401


def __getattr__(name: str) -> object:
    if name in _API:
        from roofline import api

        value = getattr(api, name)
        globals()[name] = value  # once: later lookups are plain attribute reads
        return value
    raise AttributeError(f"module 'roofline' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
