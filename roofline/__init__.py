"""Hierarchical roofline analysis of Nsight Compute profiles.

For notebooks: ``roofline.read``, ``roofline.analyse``, ``roofline.chart`` and ``roofline.Analysis``
(:mod:`roofline.api`). They are imported on first use (module ``__getattr__``), so that
``import roofline`` and the workflow's ``roofline.<stage>`` imports do not pay for pandas and
Altair before they need them.

``roofline.chart`` is also the name of the chart module (``from roofline import chart`` gives the
module, as it always has): the module is made callable, and calling it is
:func:`roofline.api.chart`. Whichever way the module is first imported, the import system sets it
as this package's ``chart`` attribute, which is where it is made callable.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_API = ("Analysis", "analyse", "read")
__all__ = ["__version__", "chart", *_API]

if TYPE_CHECKING:
    from roofline.api import Analysis, analyse, read  # noqa: F401


class _ChartModule(types.ModuleType):
    """The ``roofline.chart`` module, callable as :func:`roofline.api.chart`."""

    def __call__(self, analysis: Any, device: str | None = None) -> Any:
        from roofline.api import chart

        return chart(analysis, device)


class _Package(types.ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        if name == "chart" and isinstance(value, types.ModuleType) and type(value) is types.ModuleType:
            value.__class__ = _ChartModule
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name in _API:
        from roofline import api

        value = getattr(api, name)
        globals()[name] = value  # once: later lookups are plain attribute reads
        return value
    if name == "chart":
        import importlib

        return importlib.import_module("roofline.chart")  # also sets it, callable, as this attribute
    raise AttributeError(f"module 'roofline' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), "chart", *_API})
