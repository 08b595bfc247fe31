"""Readable kernel names from demangled C++ names (as ncu writes them).

Two names of one kernel, for two uses:

- :func:`kernel_function_name`: the function without its template arguments and parameter list
  (``gemm<…>``); what ``roofline compare`` matches kernels by across steps, since an optimisation
  often changes a tile size;
- :func:`short_kernel_name`: what every page, table and finding shows (``kernel_short``). It keeps
  the kernel's first template argument that names something (a kernel class, a functor), so that
  the rows of a report can be told apart: ``cutlass::Kernel<B2bGemm<…>>`` beside
  ``cutlass::Kernel<GemmUniversal<…>>``, not ``cutlass::Kernel<…>`` twice.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

_ANGLE_BRACKET = re.compile(r"[<>]")
_BRACKET = re.compile(r"[<>()\[\]{}]")
_SEPARATOR = re.compile(r"[<>()\[\]{},]")
_OPEN, _CLOSE = "<([{", ">)]}"
# ncu writes an anonymous namespace as "<unnamed>" (or "(anonymous namespace)"): not a template
_UNNAMED, _UNNAMED_MARK = "<unnamed>", "\ue000unnamed\ue001"
_ELIDED = "<…>"
# pass-through wrappers around the kernel class (CUTLASS's and FlashAttention's architecture guards):
# cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<…>>> names FlashAttnFwdSm90
_WRAPPER = re.compile(r"(?:\w+::)*enable_sm\w*<")
# template arguments that name no class or functor: numbers, flags, scalar types
_LITERAL = re.compile(r"(?:\([\w ]+\))?[-+]?\d[\w.]*|true|false")
_SCALAR = re.compile(
    r"(?:(?:unsigned|signed|const) )*(?:void|bool|char|short|int|long|long long|long int|float|double|size_t"
    r"|half|__half|half_t|bfloat16_t|BFloat16|Half|Float8_\w+|__nv_\w+|u?int\d+_t|float_\w+|tfloat32_t)"
    r"(?: const)?(?: ?[*&])?"
)


def kernel_function_name(name: str) -> str:
    """The kernel's function: template arguments become ``<…>``, the parameter list is dropped."""
    text = name.strip().replace(_UNNAMED, _UNNAMED_MARK)
    return (_function_name(text)[0] or text).replace(_UNNAMED_MARK, _UNNAMED)


def short_kernel_name(name: str, limit: int = 80) -> str:
    """The name shown for a kernel: :func:`kernel_function_name` with the template arguments up to
    the first that names a class or functor (``at::vectorized_elementwise_kernel<4, FillFunctor<…>, …>``;
    the first one where none does: ``gemm<float, …>``), that argument's own namespaces and template
    arguments dropped; at most ``limit`` characters (without the arguments where they do not fit,
    then cut with ``…``). A name without template arguments is shown as it is written."""
    text = name.strip().replace(_UNNAMED, _UNNAMED_MARK)
    function, groups = _function_name(text)
    short = function
    kept = function.rfind(_ELIDED)
    group = function.count(_ELIDED, 0, kept) if kept >= 0 else -1
    if 0 <= group < len(groups):  # an unclosed "<" (a name cut short, or not C++) opens no group
        # the kernel's own arguments: the last group left of the function name (not of its parameters)
        arguments = _shown_arguments(groups[group])
        widened = f"{function[:kept]}<{arguments}>{function[kept + len(_ELIDED):]}"
        if arguments and len(widened.replace(_UNNAMED_MARK, _UNNAMED)) <= limit:
            short = widened
    short = (short or text).replace(_UNNAMED_MARK, _UNNAMED)
    return short if len(short) <= limit else short[: limit - 1] + "…"


def _function_name(text: str) -> tuple[str, list[str]]:
    """``text`` with each outermost ``<…>`` group elided and the parameter list dropped, and the
    groups' contents in order."""
    if text.startswith("void "):
        text = text[5:]
    # Walk the angle brackets only (a name is mostly other characters): keep the text at depth 0.
    depth, out, start, groups, opened = 0, [], 0, [], 0
    for bracket in _ANGLE_BRACKET.finditer(text):
        if bracket.group() == "<":
            if depth == 0:
                out += (text[start : bracket.start()], _ELIDED)
                opened = bracket.end()
            depth += 1
        elif depth > 0:  # a ">" at depth 0 (operator>, "->") is kept as text
            depth -= 1
            if depth == 0:
                groups.append(text[opened : bracket.start()])
            start = bracket.end()
    if depth == 0:
        out.append(text[start:])
    short = "".join(out)
    # Drop the parameter list of the outermost function, keeping "(anonymous namespace)".
    paren = short.rfind("(")
    if paren > 0 and short.endswith(")") and not short[paren:].startswith("(anonymous"):
        short = short[:paren]
    return short.strip(), groups


def _split_arguments(text: str) -> list[str]:
    """Template arguments at depth 0 of every bracket kind (``std::array<char *, 2>`` is one)."""
    return list(_arguments(text))


def _arguments(text: str) -> Iterator[str]:
    """:func:`_split_arguments` one at a time: a name is shown up to its first argument that names
    something, so the rest of a long group need not be split."""
    depth, start = 0, 0
    for mark in _SEPARATOR.finditer(text):  # the brackets and commas only, not every character
        char, i = mark.group(), mark.start()
        if char in _OPEN:
            depth += 1
        elif char in _CLOSE and depth > 0 and not (char == ">" and text[i - 1 : i] == "-"):
            depth -= 1
        elif char == "," and depth == 0:
            part = text[start:i].strip()
            if part:
                yield part
            start = i + 1
    part = text[start:].strip()
    if part:
        yield part


def _shown_arguments(group: str) -> str:
    """The arguments up to the first that names a class or functor (the first one if none does)."""
    arguments = _arguments(group)
    shown = []
    for argument in arguments:
        name, names_something = _shown_argument(argument)
        shown.append(name)
        if names_something:
            more = next(arguments, None) is not None
            break
    else:
        more, shown = len(shown) > 1, shown[:1]
    return ", ".join(shown) + (", …" if more else "")


@functools.lru_cache(maxsize=4096)  # a big export's kernels share most of their template arguments
def _shown_argument(argument: str) -> tuple[str, bool]:
    """:func:`_argument_name`, and whether it names something (not a number, flag or scalar type)."""
    name = _argument_name(argument)
    return name, not (_LITERAL.fullmatch(name) or _SCALAR.fullmatch(name))


def _argument_name(argument: str) -> str:
    """A template argument as shown: wrappers unwrapped, nested groups elided, leading namespaces
    dropped (``cutlass::gemm::kernel::B2bGemm<…>`` → ``B2bGemm<…>``), a lambda as
    ``enclosing_function::lambda``."""
    text = argument.strip()
    while _WRAPPER.match(text) and text.endswith(">"):
        inner = _split_arguments(text[text.index("<") + 1 : -1])
        if not inner:
            break
        text = inner[0]
    text = text.removeprefix("void ")
    # depth-0 text: <…> for a template group, nothing for a parameter list, "lambda" for [lambda …]
    depth, out, start, opened = 0, [], 0, 0
    for bracket in _BRACKET.finditer(text):
        char = bracket.group()
        if char in _OPEN:
            if depth == 0:
                out.append(text[start : bracket.start()])
                opened = bracket.start()
            depth += 1
        elif depth > 0 and not (char == ">" and text[bracket.start() - 1 : bracket.start()] == "-"):
            depth -= 1
            if depth == 0:
                group = text[opened : bracket.end()]
                out.append(_ELIDED if group[0] == "<" else "lambda" if "lambda" in group[:8] else
                           "" if group[0] == "(" else group[0] + "…" + group[-1])
                start = bracket.end()
    if depth == 0:
        out.append(text[start:])
    parts = [p.strip() for p in "".join(out).split("::")]
    if "lambda" in parts:  # the function a lambda is defined in names it
        at = parts.index("lambda")
        return "::".join(parts[max(at - 1, 0) : at + 1])
    # namespaces: the plain names before the first part with template arguments (or the last part)
    first = next((i for i, p in enumerate(parts) if "<" in p), len(parts) - 1)
    return "::".join(p for p in parts[first:] if p) or argument.strip()
