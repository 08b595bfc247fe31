"""Readable kernel names: a demangled C++ name without its template arguments and parameter list."""

from __future__ import annotations

import re

_ANGLE_BRACKET = re.compile(r"[<>]")


def short_kernel_name(name: str, limit: int = 80) -> str:
    """A readable kernel name: template arguments become ``<…>``, the argument list is dropped."""
    text = name.strip()
    if text.startswith("void "):
        text = text[5:]
    # Walk the angle brackets only (a name is mostly other characters): keep the text at depth 0.
    depth, out, start = 0, [], 0
    for bracket in _ANGLE_BRACKET.finditer(text):
        if bracket.group() == "<":
            if depth == 0:
                out += (text[start : bracket.start()], "<…>")
            depth += 1
        elif depth > 0:  # a ">" at depth 0 (operator>, "->") is kept as text
            depth -= 1
            start = bracket.end()
    if depth == 0:
        out.append(text[start:])
    short = "".join(out)
    # Drop the parameter list of the outermost function, keeping "(anonymous namespace)".
    paren = short.rfind("(")
    if paren > 0 and short.endswith(")") and not short[paren:].startswith("(anonymous"):
        short = short[:paren]
    short = short.strip()
    if len(short) > limit:
        short = short[: limit - 1] + "…"
    return short or name[:limit]
