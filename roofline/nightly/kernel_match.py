"""Kernel identity across a code change: which kernel of one report (a night, a compare step) is
which kernel of another.

An optimisation often renames a kernel without changing what it is: every CUTLASS/CUTE kernel is
``cutlass::Kernel<…>`` with its whole configuration in the template, a Triton kernel's name can
carry its autotuned configuration, a hand-written kernel gets a new name with its new algorithm.
:func:`match_kernels` pairs the kernels of two sides by the strongest evidence available; only
kernels left unmatched by a stronger rule are tried with a weaker one, and each match is one to
one. The rules, strongest first (:data:`RULES`):

1. ``name``: the same full name and launch configuration;
2. ``rename``: the same name (then kernel class, then function name) after the user's explicit
   rename map (regular expression -> replacement, :func:`re.sub` on the full name, in order), for
   kernels whose name the map changed on one side at least; a map the user wrote wins over any
   inferred evidence, but never splits two kernels that are identical already;
3. ``name_config``: the same full name, once on each side among the unmatched (its launch
   configuration changed: a new grid for a new problem size, a new block size);
4. ``class_launch``, then ``class``: the same kernel class and launch configuration, then the same
   kernel class alone, once on each side among the unmatched: the function name with its first
   template argument's name (for ``cutlass::Kernel<cutlass::gemm::kernel::B2bGemm<…>>``
   the kernel class ``cutlass::gemm::kernel::B2bGemm``; for ``stream<float, 2>`` ``stream<float>``),
   and a Triton name without its configuration suffix (``_BLOCK_M_128_num_warps_4``, ``_0d1d2de``);
5. ``launch``: the same launch configuration (grid × block) where it is unique among all kernels
   of each side; then, for kernels sharing one, grid × block with registers per thread and shared
   memory per block (where every kernel of both sides has them) where that is unique;
6. ``function``: the same function name (template arguments dropped), once on each side among the
   unmatched.

``roofline compare`` (:func:`roofline.compare.step_points`) and the nightly tracking
(:meth:`roofline.nightly.engine.Engine.judge_series`) both match with this one function.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import pandas as pd

from roofline.parse.kernel_names import kernel_function_name
from roofline.tables.schemas import LAUNCH_RESOURCES

# Launch configuration columns, where both sides have them; the launch resources (registers, shared
# memory) only tell apart kernels of one grid x block, where every kernel of both sides has them (a
# store's nights from before they were kept have none): a code change often changes them.
LAUNCH = ("grid", "block")
MATCH_COLUMNS = ["before", "after", "rule", "why"]
# The rules in order, each with what a finding or compare row says of a match made by it.
RULES = {
    "name": "",
    "rename": "matched by the rename map",
    "name_config": "matched by name: launch configuration changed",
    "class_launch": "matched by kernel class and launch configuration: template arguments changed",
    "class": "matched by kernel class: template arguments changed",
    "launch": "matched by launch configuration: {what} changed",
    "function": "matched by function name: template arguments changed",
}
# A Triton kernel's configuration in its name: constexpr names in capitals and num_warps/num_stages
# with their values (``_BLOCK_M_128_num_warps_4``), or the signature specialisation of Triton < 3
# (``_0d1d2d3de``: argument i divisible by 16, constant, equal to 1).
_TRITON_CONFIG = re.compile(r"(?:_(?:[A-Z][A-Z0-9]*(?:_[A-Z][A-Z0-9]*)*|num_warps|num_stages|num_ctas)_?\d+)+$")
_TRITON_SIGNATURE = re.compile(r"_(?:\d+[cd]+)+e*$")


def compile_rename(rename: Mapping[str, str] | None) -> list[tuple[re.Pattern, str]]:
    """The rename map's patterns compiled, in order.

    Raises
    ------
    ValueError
        Naming a pattern that is not a regular expression.
    """
    out = []
    for pattern, replacement in (rename or {}).items():
        try:
            out.append((re.compile(pattern), replacement))
        except re.error as exc:
            raise ValueError(f"rename pattern {pattern!r} is not a regular expression ({exc})") from None
    return out


def renamed(name: str, rename: list[tuple[re.Pattern, str]]) -> str:
    """``name`` after the compiled rename map (:func:`compile_rename`)."""
    for pattern, replacement in rename:
        name = pattern.sub(replacement, name)
    return name


def function_name(name: str) -> str:
    """The function name of a kernel's full name, template arguments and parameters dropped."""
    return kernel_function_name(name).replace("<…>", "")


def kernel_class(name: str) -> str:
    """The function name with its first template argument's name (the kernel class of a CUTLASS/CUTE
    ``cutlass::Kernel<…>``), or a Triton name without its configuration suffix."""
    text = name.strip().removeprefix("void ")
    lt = text.find("<")
    paren = text.find("(")
    if lt < 0 or 0 <= paren < lt:  # no template: a C function or a Triton kernel
        plain = text[:paren] if paren > 0 else text
        return _TRITON_SIGNATURE.sub("", _TRITON_CONFIG.sub("", plain.strip()))
    depth, end = 0, len(text)
    for j in range(lt + 1, len(text)):
        c = text[j]
        if c in "<(":
            depth += 1
        elif c in ">)":
            if depth == 0:
                end = j
                break
            depth -= 1
        elif c == "," and depth == 0:
            end = j
            break
    first = text[lt + 1:end].strip()
    first = re.sub(r"^\([^()]*\)\s*", "", first)  # ncu's value casts: "(int)64" -> "64"
    first = first.split("<", 1)[0].strip()  # the class's own template arguments dropped
    return f"{text[:lt].strip()}<{first}>"


def _launch(frame: pd.DataFrame, columns: list[str]) -> pd.Series:
    if not columns or frame.empty:
        return pd.Series("", index=frame.index, dtype=object)
    parts = [frame[c].astype(str).where(frame[c].notna(), "") for c in columns]
    key = parts[0].str.cat(parts[1:], sep=" | ") if len(parts) > 1 else parts[0]
    return key.where(frame[columns[0]].notna() & (parts[0] != ""), "")


def _once(before: pd.Series, after: pd.Series) -> list[tuple]:
    """Pairs of labels whose key is once on each side (empty keys never match)."""
    cb, ca = before.value_counts(), after.value_counts()
    once = (set(cb.index[cb == 1]) & set(ca.index[ca == 1])) - {""}
    if not once:
        return []
    where = {k: label for label, k in before.items() if k in once}
    return [(where[k], label) for label, k in after.items() if k in once]


def match_kernels(before: pd.DataFrame, after: pd.DataFrame,
                  rename: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Which kernel of ``after`` is which kernel of ``before``, by the rules of this module in order.

    Parameters
    ----------
    before, after : DataFrame
        One row per kernel of one app (one night, one compare step): ``kernel`` (the full name),
        ``grid``, ``block``, and optionally ``registers_per_thread`` and ``shared_mem_bytes`` (used where
        every row of both sides has them).
    rename : mapping, optional
        The explicit rename map: regular expression -> replacement on the full name, in order.

    Returns
    -------
    DataFrame
        One row per match (:data:`MATCH_COLUMNS`): the labels of the two rows, the rule that
        matched them (a key of :data:`RULES`) and what a finding says of it ("" for ``name``).

    Raises
    ------
    ValueError
        For a rename pattern that is not a regular expression.
    """
    patterns = compile_rename(rename)
    launch = [c for c in LAUNCH if c in before.columns and c in after.columns]
    resources = [c for c in LAUNCH_RESOURCES if c in before.columns and c in after.columns
                 and before[c].notna().all() and after[c].notna().all()]
    names = {side: frame["kernel"].astype(str) for side, frame in (("b", before), ("a", after))}
    launches = {"b": _launch(before, launch), "a": _launch(after, launch)}
    left_b, left_a = set(before.index), set(after.index)
    rows: list[tuple] = []

    def take(rule: str, keys_b: pd.Series, keys_a: pd.Series, among_left: bool = True) -> None:
        kb = keys_b[keys_b.index.isin(left_b)] if among_left else keys_b
        ka = keys_a[keys_a.index.isin(left_a)] if among_left else keys_a
        for b, a in _once(kb, ka):
            if b not in left_b or a not in left_a:
                continue
            why = RULES[rule]
            if rule.startswith("class") and "<" not in names["b"][b] + names["a"][a]:  # a Triton name
                why = "matched by name without its configuration: configuration changed"
            if rule == "launch":
                same = function_name(names["b"][b]) == function_name(names["a"][a])
                why = why.format(what="template arguments" if same else "name")
            rows.append((b, a, rule, why))
            left_b.discard(b)
            left_a.discard(a)

    def with_launch(key: dict[str, pd.Series]) -> dict[str, pd.Series]:
        return {s: key[s] + " @ " + launches[s] for s in key}

    exact = with_launch(names)
    take("name", exact["b"], exact["a"])
    if patterns:
        new = {s: names[s].map(lambda n: renamed(n, patterns)) for s in names}
        touched = {s: new[s] != names[s] for s in names}
        # the map renames part of a name (the function, not its template arguments): the renamed
        # names, then their kernel classes and function names
        for keys in (with_launch(new), new, {s: new[s].map(kernel_class) for s in new},
                     {s: new[s].map(function_name) for s in new}):
            # only pairs the map made: one side renamed
            kb = keys["b"].where(touched["b"] | keys["b"].isin(set(keys["a"][touched["a"]])), "")
            ka = keys["a"].where(touched["a"] | keys["a"].isin(set(keys["b"][touched["b"]])), "")
            take("rename", kb, ka)
    take("name_config", names["b"], names["a"])
    classes = {s: names[s].map(kernel_class) for s in names}
    take("class_launch", with_launch(classes)["b"], with_launch(classes)["a"])
    take("class", classes["b"], classes["a"])
    take("launch", launches["b"], launches["a"], among_left=False)
    if launch and resources:
        take("launch", _launch(before, [*launch, *resources]), _launch(after, [*launch, *resources]),
             among_left=False)
    take("function", names["b"].map(function_name), names["a"].map(function_name))
    return pd.DataFrame(rows, columns=MATCH_COLUMNS)
