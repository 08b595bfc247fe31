"""Kernel names are data: text for HTML escaped once here, JSON made safe inside ``<script>``."""

from __future__ import annotations

import html
import json

import numpy as np


def esc(text: object) -> str:
    """``text`` escaped for HTML text and attribute values; None and non-finite numbers as ""."""
    missing = text is None or (isinstance(text, float) and not np.isfinite(text))
    return html.escape("" if missing else str(text), quote=True)


def script_safe(text: str) -> str:
    """JSON text that cannot close a ``<script>`` element or open a comment in it."""
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def script_json(obj: object) -> str:
    """``obj`` as JSON safe inside a ``<script>`` element."""
    return script_safe(json.dumps(obj, allow_nan=False, ensure_ascii=False))
