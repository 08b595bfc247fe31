"""The environment variables that switch a behaviour on or off (``ROOFLINE_JOB_SERVER=off``, ...),
read one way: on, 1, yes, true and off, 0, no, false, in any case; anything else is the default."""

from __future__ import annotations

import os
from collections.abc import Mapping

ON = ("on", "1", "yes", "true")
OFF = ("off", "0", "no", "false")


def switched_on(name: str, default: bool, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the switch ``name`` is on in ``environ``; ``default`` where it is unset or unreadable."""
    value = environ.get(name, "").strip().lower()
    return True if value in ON else False if value in OFF else default
