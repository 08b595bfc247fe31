"""Recipe derivation: a raw launch frame -> counters columns, each value with the recipe that gave it.

:func:`derive_counters` applies the recipe table of :mod:`roofline.metrics.quantities` to the raw launch frame
(one row per launch; identity columns plus one float column per ncu metric, already in SI base
units), vectorised, and records which recipe produced every value; :func:`derive_columns` does the
same on the frame's columns, as the parse stage reads them. A launch that lacks a roofline quantity
is kept, marked in ``missing`` with the ncu flags that would supply it. Values that cannot be
measurements are refused per launch (:mod:`roofline.parse.plausibility`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from roofline.metrics import quantities
from roofline.metrics.quantities import COMPUTE_CLASSES, QUANTITIES
from roofline.metrics.recipe import Recipe
from roofline.parse.kernel_names import short_kernel_name
from roofline.parse.plausibility import all_plausible, implausible, implausible_sm_count, refuse_rates
from roofline.tables.typed_columns import column_arrays

# -- recipes ---------------------------------------------------------------------------------------


def raw_columns(raw: pd.DataFrame) -> dict[str, object]:
    """A raw launch frame as its columns (name -> array), what :func:`derive_columns` reads."""
    return dict(zip(raw.columns, column_arrays(raw), strict=True))


def _floats(values) -> np.ndarray:
    """A raw column as floats (a text that is no number: NaN); float64 (the readers' metric columns)
    as it is."""
    if isinstance(values, np.ndarray) and values.dtype == np.float64:
        return values
    return pd.to_numeric(pd.Series(values, copy=False), errors="coerce").astype("float64").to_numpy()


def arrow_texts(values) -> pa.Array | pa.ChunkedArray:
    """A text column (Series, array or Arrow array) as Arrow text of 64-bit offsets, a missing value
    as empty; a copy only where it is not Arrow already."""
    if isinstance(values, pd.Series):
        values = values.array
    if not isinstance(values, pa.Array | pa.ChunkedArray):
        values = pa.array(values) if hasattr(values, "__arrow_array__") else pa.array(
            np.asarray(values, dtype=object), pa.large_string(), from_pandas=True)
    if not pa.types.is_large_string(values.type):
        values = values.cast(pa.large_string())
    return values.fill_null("") if values.null_count else values


def _column(raw: Mapping[str, object], values: dict[str, np.ndarray], numeric: dict, name: str) -> np.ndarray | None:
    """A recipe operand as floats: a quantity derived before (``@name``) or a raw column, which is
    converted once (``numeric`` keeps it) however many recipes use it."""
    if name.startswith("@"):
        return values.get(name[1:])
    if name not in numeric:
        column = raw.get(name)
        numeric[name] = None if column is None else _floats(column)
    return numeric[name]


def _evaluate(recipe: Recipe, operand: Callable[[str], np.ndarray | None], cc: np.ndarray) -> np.ndarray | None:
    """The recipe's value per row (NaN, or inf after an overflow, where it gives none), or None
    when it lacks an operand.

    On numpy arrays rather than Series: a report has a few rows, where pandas' fixed cost per
    operation would be most of the stage's time. The caller ignores numpy's warnings about
    overflow and 0/0.
    """
    total = None
    for coef, metric in recipe.terms:
        column = operand(metric)
        if column is None:
            return None
        total = coef * column if total is None else total + coef * column
    for name in recipe.scale:
        column = operand(name)
        if column is None:
            return None
        total = total * column
    for name in recipe.divide:
        column = operand(name)
        if column is None:
            return None
        total = total / np.where(column != 0, column, np.nan)
    if recipe.cc_min is not None or recipe.cc_max is not None:
        ok = (cc >= (recipe.cc_min or 0)) & (cc <= (recipe.cc_max or 999))
        total = np.where(ok, total, np.nan)
    return total


def _compute_capability(raw: Mapping[str, object], rows: int) -> np.ndarray:
    """major * 10 + minor per launch (NaN where unknown), from the compute-capability metrics or,
    lacking them, from a ``compute_capability`` text such as "8.0"."""
    major = raw.get("device__attribute_compute_capability_major")
    minor = raw.get("device__attribute_compute_capability_minor")
    if major is None:
        text = pd.Series(raw.get("compute_capability", [""] * rows), copy=False).astype(str)
        codes, uniques = pd.factorize(text, use_na_sentinel=False)
        parts = pd.Series(uniques).str.extract(r"(\d+)\.(\d+)")  # once per distinct text
        major = pd.to_numeric(parts[0], errors="coerce").to_numpy()[codes]
        minor = pd.to_numeric(parts[1], errors="coerce").to_numpy()[codes]
    major = _floats(major)
    minor = np.zeros(rows) if minor is None else _floats(minor)
    return major * 10 + minor


_IDENTITY_KEYS = (
    "kernel",
    "kernel_mangled",
    "device",
    "grid",
    "block",
    "stream",
    "machine",
    "launch",
    "source_format",
    "compute_capability",
    "algorithmic_flop",
    "algorithmic_bytes",
    "ncu_rules",
)


def derive_counters(raw: pd.DataFrame) -> pd.DataFrame:
    """Apply the recipe table to a raw launch frame; return counters columns with provenance.

    Columns already present under a quantity's name (what-if rows) win over recipes. Absurd values
    (see the plausibility notes above) are refused per launch and quantity, never silently used.
    """
    columns = derive_columns(raw_columns(raw), len(raw))
    return pd.DataFrame({name: pd.arrays.ArrowStringArray(values) if isinstance(values, pa.Array) else values
                         for name, values in columns.items()}, index=raw.index)


def derive_columns(raw: Mapping[str, object], rows: int) -> dict[str, object]:
    """:func:`derive_counters` of a raw launch frame given as its ``rows``-long columns (name ->
    array: :func:`raw_columns`), as the counters columns (name -> NumPy array of numbers, or Arrow
    array of text), which the parse stage completes and makes one table
    (:func:`roofline.tables.schemas.conform_columns`, :func:`roofline.tables.files.arrow_from_columns`).

    Arrays, never a frame: a report has a few launches, where pandas' fixed cost per operation
    (~200 columns) would be most of the time.
    """
    cc = _compute_capability(raw, rows)
    values: dict[str, np.ndarray] = {}
    # Per quantity and row, the recipe that gave the value or why it was refused, as codes into
    # texts (100k launches share a few texts: each becomes a string once).
    recipes: dict[str, tuple[list, np.ndarray]] = {}
    refusals: dict[str, dict[int, str]] = {}  # per quantity, row -> why its value was refused
    operand = functools.partial(_column, raw, values, {})
    present, capabilities = raw.keys(), frozenset(cc[~np.isnan(cc)].tolist())
    nothing = (np.full(rows, np.nan), np.zeros(rows, dtype=np.int64), np.ones(rows, dtype=np.int64))
    for shared in nothing:
        shared.flags.writeable = False
    with np.errstate(all="ignore"):  # overflow and 0/0 in a recipe: inf/NaN, which give no value
        def usable(name: str) -> list[Recipe]:
            return [recipe for recipe, inputs in _RECIPE_INPUTS[name]
                    if present >= inputs and _applies(recipe, capabilities)]

        for quantity in QUANTITIES:
            values[quantity.name], recipes[quantity.name], refusals[quantity.name] = _derive_quantity(
                quantity, usable(quantity.name), raw, rows, operand, cc, nothing)
            traffic = _TRAFFIC_OF_PEAK.get(quantity.name)
            if traffic is not None and traffic.name not in raw and quantity.name not in raw:
                derive_family = functools.partial(_derive_quantity, raw=raw, rows=rows, operand=operand, cc=cc,
                                                  nothing=nothing)
                _pair_level(traffic, quantity, usable(traffic.name), usable(quantity.name), values, recipes,
                            refusals, derive_family)
        refuse_rates(values, recipes, refusals)
    out: dict[str, object] = {}
    # Text as Arrow (64-bit offsets, the tables' type), never with a missing value. Most quantities
    # have no refusal: their column is one array of empty texts (immutable, so shared).
    no_refusal = pa.repeat(pa.scalar("", pa.large_string()), rows)
    named = [name for name, (texts, _) in recipes.items() if texts != [""]]  # a recipe gave values
    out.update(zip((f"{name}_recipe" for name in named), _coded_columns([recipes[name] for name in named], rows)))
    for name, value in values.items():
        out[name] = value
        out.setdefault(f"{name}_recipe", no_refusal)
        if not refusals[name]:
            out[f"{name}_refused"] = no_refusal
            continue
        why = np.zeros(rows, dtype=np.int64)
        why[list(refusals[name])] = np.arange(1, len(refusals[name]) + 1)
        out[f"{name}_refused"] = _coded_texts(["", *refusals[name].values()], why)
    # NaN when every tensor class is NaN, else their sum (NaN counted 0), as pandas' sum(min_count=1)
    tensor = np.stack([values[f"flop_{c}"] for c in quantities.TENSOR_CLASSES])
    none = np.isnan(tensor).all(axis=0)
    out["flop_tensor"] = np.where(none, np.nan, np.nansum(tensor, axis=0))
    for key in _IDENTITY_KEYS:
        if key in raw:
            out[key] = raw[key]
    if "compute_capability" not in raw or (pd.Series(raw["compute_capability"], copy=False).astype(str) == "").all():
        out["compute_capability"] = _text_per_key(
            cc, lambda v: "" if math.isnan(v) else f"{int(v) // 10}.{int(v) % 10}")
    for column, metric in quantities.IDENTITY_METRICS.items():
        if column in ("device", "shared_mem_static_bytes", "shared_mem_dynamic_bytes") or column.startswith("cc_"):
            continue
        if metric in raw:
            # a copy, not a view: a view of a reader's frame would keep all of its metrics (one block,
            # ~150 MB for 100k launches of a wide export) alive until the counters are a table
            out[column] = np.array(_floats(raw[metric]))
    out["sm_count_refused"] = _refused_sm_count(out, rows)
    shared = np.zeros(rows)
    for metric in ("launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic"):
        if metric in raw:
            part = _floats(raw[metric])
            shared = shared + np.where(np.isnan(part), 0.0, part)
    out["shared_mem_bytes"] = shared
    out["kernel_short"] = _text_per_key(arrow_texts(raw["kernel"]), short_kernel_name)
    out["missing"], out["missing_hint"] = _missing(values, refusals)
    out["replay_failed"] = failed_replays(raw, rows, values["duration_s"])
    return out


def _refused_sm_count(out: dict[str, object], rows: int) -> pa.Array:
    """Why each launch's SM count was refused (:func:`implausible_sm_count`), its value made NaN in
    ``out`` (in place): the issue roof multiplies by it, so one absurd count is one launch's warning,
    never a roof of 1e10 SMs."""
    count = out.get("sm_count")
    reasons = {} if count is None else implausible_sm_count(count, quantities.IDENTITY_METRICS["sm_count"])
    if not reasons:
        return pa.repeat(pa.scalar("", pa.large_string()), rows)
    count = count.copy()
    count[list(reasons)] = np.nan
    out["sm_count"] = count
    why = np.zeros(rows, dtype=np.int64)
    why[list(reasons)] = np.arange(1, len(reasons) + 1)
    return _coded_texts(["", *reasons.values()], why)


# Each quantity's recipes with the raw metrics each reads: a recipe the input lacks one of is passed by.
_RECIPE_INPUTS = {quantity.name: tuple((recipe, frozenset(recipe.inputs())) for recipe in quantity.recipes)
                  for quantity in QUANTITIES}


# peak quantity -> the traffic quantity whose family it must share (metrics.LEVEL_PAIRS)
_TRAFFIC_OF_PEAK = {peak: quantities.QUANTITY_BY_NAME[traffic] for traffic, peak in quantities.LEVEL_PAIRS.values()}


def _family_per_row(recipe_codes: tuple[list, np.ndarray], recipes: list[Recipe]) -> np.ndarray:
    """Each row's counter family, from the recipe that gave its value ("" where none did)."""
    family = {recipe.name: recipe.family for recipe in recipes}
    texts, codes = recipe_codes
    return np.array([family.get(text, "") for text in texts], dtype=object)[codes]


def _pair_level(traffic, peak, traffic_usable: list[Recipe], peak_usable: list[Recipe], values: dict,
                recipes: dict, refusals: dict, derive_family: Callable) -> None:
    """Make a memory level's bytes and roof come from one counter family per launch, in place.

    Each quantity was derived on its own (first usable recipe). Where a launch's bytes and roof came
    from different families, or its bytes have no roof: the first family (in the traffic recipes'
    order) that gives both gives both; failing any, the bytes stay and the roof is left empty (a
    roof of another family would judge the bytes in another convention). A launch without bytes keeps
    its roof (it judges nothing of its own; the device's other launches may share its family). A
    value refused as absurd is never replaced.
    """
    t_name, p_name = traffic.name, peak.name
    t_family = _family_per_row(recipes[t_name], traffic_usable)
    p_family = _family_per_row(recipes[p_name], peak_usable)
    has_bytes = ~np.isnan(values[t_name])
    mismatched = has_bytes & (t_family != p_family)
    if not mismatched.any():
        return  # the rule: every launch with bytes has its roof from the same family
    refused = np.zeros(len(has_bytes), dtype=bool)
    refused[[*refusals[t_name], *refusals[p_name]]] = True
    open_rows = mismatched & ~refused
    t_value, p_value = values[t_name].copy(), values[p_name].copy()
    t_text = np.array(recipes[t_name][0], dtype=object)[recipes[t_name][1]]
    p_text = np.array(recipes[p_name][0], dtype=object)[recipes[p_name][1]]
    p_value[open_rows], p_text[open_rows] = np.nan, ""  # no roof unless a family gives both
    for family in dict.fromkeys(r.family for r in traffic.recipes):
        if not open_rows.any():
            break
        own_t = [r for r in traffic_usable if r.family == family]
        own_p = [r for r in peak_usable if r.family == family]
        if not own_t or not own_p:
            continue
        tv, (tt, tc), tr = derive_family(traffic, own_t)
        pv, (pt, pc), pr = derive_family(peak, own_p)
        both = open_rows & np.isfinite(tv) & np.isfinite(pv)
        if tr or pr:
            both[[*tr, *pr]] = False
        t_value[both], p_value[both] = tv[both], pv[both]
        t_text[both] = np.array(tt, dtype=object)[tc[both]]
        p_text[both] = np.array(pt, dtype=object)[pc[both]]
        open_rows &= ~both
    for name, value, text in ((t_name, t_value, t_text), (p_name, p_value, p_text)):
        codes, uniques = pd.factorize(text, use_na_sentinel=False)
        values[name], recipes[name] = value, (list(uniques), codes.astype(np.int64))


# A launch without a duration that lacks more than this share of the counters the input's launches
# carry failed its replay: ncu records NaN for almost every metric of such a launch.
FAILED_REPLAY_SHARE = 0.5


def failed_replays(raw: Mapping[str, object], rows: int, duration: np.ndarray) -> np.ndarray:
    """Per launch, whether ncu recorded no values for it: no duration, and more than
    :data:`FAILED_REPLAY_SHARE` of the counters some launch of the input has are empty for it (all of
    them where no launch has any). Launch and device attributes are no counters: ncu records them
    without a replay."""
    failed = np.zeros(rows, dtype=bool)
    lacking = np.isnan(duration)
    if not lacking.any():
        return failed
    counters = [name for name in raw if "__" in name and not name.startswith(("launch__", "device__"))]
    if not counters:
        return failed
    finite = np.column_stack([np.isfinite(_floats(raw[name])) for name in counters])
    carried = finite.any(axis=0)
    if not carried.any():  # no launch has a value: every launch lacks all of them
        carried[:] = True
    empty_share = 1.0 - finite[:, carried].sum(axis=1) / carried.sum()
    return lacking & (empty_share > FAILED_REPLAY_SHARE)


def _applies(recipe: Recipe, capabilities: frozenset[float]) -> bool:
    """Whether ``recipe`` is valid for any of the input's compute capabilities (major * 10 + minor):
    one that is not gives no value (it would be evaluated only to be masked out)."""
    if recipe.cc_min is None and recipe.cc_max is None:
        return True
    return any((recipe.cc_min or 0) <= cc <= (recipe.cc_max or 999) for cc in capabilities)


def _derive_quantity(quantity, usable: list[Recipe], raw: Mapping[str, object], rows: int, operand: Callable,
                     cc: np.ndarray, nothing: tuple[np.ndarray, np.ndarray, np.ndarray]):
    """One quantity's values, the recipe of each (texts and a code per row) and its refusals (row ->
    why): a value the input gives under the quantity's name first, then the ``usable`` recipes (those
    whose metrics the input has, valid for one of its compute capabilities) in order.

    ``nothing``: all-NaN values, all-zero codes and all-one codes (every row from the first recipe),
    read-only, shared by the quantities the input cannot give (most of them, for any one input) and
    by those whose first recipe gives every row. Each recipe is evaluated once.
    """
    first_values = None  # the values of the first usable recipe that evaluates, where none are given
    if quantity.name not in raw:
        first = _first_result(usable, operand, cc)
        if first is None:
            return nothing[0], ([""], nothing[1]), {}
        position, recipe, first_values = first
        usable = usable[position:]  # those before it gave nothing
        if len(first_values) and all_plausible(quantity, first_values):  # every row from it: the rule
            return first_values, (["", recipe.name], nothing[2]), {}
    value = np.full(rows, np.nan)
    texts: list = [""]
    text_code = np.zeros(rows, dtype=np.int64)
    refused: dict[int, str] = {}
    if quantity.name in raw:
        value = _floats(raw[quantity.name]).copy()
        label = pd.Series(raw.get(f"{quantity.name}_recipe", ["given"] * rows), copy=False)
        text_code, uniques = pd.factorize(label.where(~np.isnan(value), ""), use_na_sentinel=False)
        texts = list(uniques)
        refused = implausible(quantity, value, None)
    open_rows = np.isnan(value)  # rows still without a value, and not refused
    if refused:
        open_rows[list(refused)] = False
    for position, recipe in enumerate(usable):
        if not open_rows.any():
            break
        result = first_values if position == 0 and first_values is not None else _evaluate(recipe, operand, cc)
        if result is None:
            continue
        fill = open_rows & np.isfinite(result)  # overflow and 0/0 give no value
        reasons = implausible(quantity, np.where(fill, result, np.nan), recipe)
        if reasons:
            refused.update(reasons)
            fill[list(reasons)] = False
            open_rows[list(reasons)] = False
            text_code[list(reasons)] = len(texts)  # the recipe that gave the refused value
        value = np.where(fill, result, value)
        open_rows &= ~fill
        text_code[fill] = len(texts)
        texts.append(recipe.name)
    for row in refused:
        value[row] = np.nan
    return value, (texts, text_code), refused


def _first_result(usable: list[Recipe], operand: Callable, cc: np.ndarray) -> tuple[int, Recipe, np.ndarray] | None:
    """The position in ``usable`` of the first recipe that evaluates, the recipe and its values; None
    where none does. Where they give every row a plausible value (the rule for an input's
    quantities), the quantity is that; else the recipes fill the rows in order from it."""
    for position, recipe in enumerate(usable):
        result = _evaluate(recipe, operand, cc)
        if result is not None:
            return position, recipe, result
    return None


# Up to this many rows (a report's launches) a coded column is built from its texts directly:
# Arrow's take costs more than the column there.
_FEW_ROWS = 64


def _coded_columns(columns: list[tuple[list, np.ndarray]], rows: int) -> list[pa.Array]:
    """:func:`_coded_texts` of several columns of ``rows`` rows (each its texts and codes): for a
    few rows, slices of one array made at once (each array made costs more than its few texts)."""
    if rows > _FEW_ROWS or not all(type(text) is str for texts, _ in columns for text in texts):
        return [_coded_texts(texts, codes) for texts, codes in columns]
    every = pa.array([texts[code] for texts, codes in columns for code in codes.tolist()], pa.large_string())
    return [every.slice(position * rows, rows) for position in range(len(columns))]


def _coded_texts(texts: list, codes: np.ndarray) -> pa.Array:
    """``texts[code]`` per row as Arrow text, a missing text as empty."""
    arrow = pa.array(texts, pa.large_string(), from_pandas=True)
    return (arrow.fill_null("") if arrow.null_count else arrow).take(pa.array(codes))


@functools.cache  # six flags: 64 combinations at most
def _missing_text(
    no_duration: bool, duration_refused: bool, no_dram: bool, dram_refused: bool, no_flop: bool, flop_refused: bool
) -> tuple[str, str]:
    """The ``missing`` and ``missing_hint`` texts of one combination of gaps."""
    missing, hints = [], []
    for lacking, was_refused, quantity in (
        (no_duration, duration_refused, "duration_s"),
        (no_dram, dram_refused, "dram_bytes"),
    ):
        if lacking:
            missing.append(quantity)
            hints.append(
                f"{quantity}: fix the value ({quantity}_refused says why it was refused)"
                if was_refused
                else quantities.metric_hint(quantity)
            )
    if no_flop:
        missing.append("flop")
        hints.append(
            "flop: fix the values (see the flop_*_refused columns)" if flop_refused else quantities.NCU_ROOFLINE_FLAGS
        )
    return ";".join(missing), " ; ".join(dict.fromkeys(hints))


def _missing(values: dict[str, np.ndarray], refusals: dict[str, dict[int, str]]) -> tuple[pa.Array, pa.Array]:
    """Per launch, the roofline quantities it lacks and the ncu flags that would supply them, from
    the values of duration_s, dram_bytes and flop_<class> and which rows of each were refused.

    The texts depend only on six flags per launch (the arguments of :func:`_missing_text`, as the
    bits of a code), so each distinct combination is written once (100k launches cost a few
    combinations, not 100k string joins).
    """
    flop_columns = [f"flop_{c}" for c in COMPUTE_CLASSES]
    no_flop = np.isnan(values[flop_columns[0]])
    for column in flop_columns[1:]:
        no_flop &= np.isnan(values[column])
    codes = np.isnan(values["duration_s"]) * 1 + np.isnan(values["dram_bytes"]) * 4 + no_flop * 16
    for bit, names in ((2, ["duration_s"]), (8, ["dram_bytes"]), (32, flop_columns)):
        refused_rows = [row for name in names for row in refusals[name]]
        if refused_rows:
            codes[refused_rows] |= bit
    return (_text_per_key(codes, lambda c: _missing_text(*(bool(c >> i & 1) for i in range(6)))[0]),
            _text_per_key(codes, lambda c: _missing_text(*(bool(c >> i & 1) for i in range(6)))[1]))


def _text_per_key(keys: np.ndarray | pa.Array | pa.ChunkedArray, text_of: Callable[[object], str]) -> pa.Array:
    """``text_of(key)`` for each row's key as Arrow text, worked out once per distinct key."""
    if len(keys) <= _FEW_ROWS:
        listed = keys.tolist() if isinstance(keys, np.ndarray) else keys.to_pylist()
        texts: dict = {}
        for key in listed:
            if key not in texts:
                texts[key] = text_of(key)
        return pa.array([texts[key] for key in listed], pa.large_string())
    encoded = pc.dictionary_encode(keys if isinstance(keys, pa.Array | pa.ChunkedArray) else pa.array(keys))
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    texts = [text_of(key) for key in encoded.dictionary.to_pylist()]
    return pa.array(texts, pa.large_string()).take(encoded.indices)
