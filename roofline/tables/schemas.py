"""The table contracts of the pipeline, declared once: columns, dtypes and units.

Every Parquet file the stages write goes through :func:`conform`, which orders the columns, adds
declared columns that are missing (NaN / empty), coerces dtypes and refuses undeclared columns, so
a table's shape is defined here and nowhere else. Units are decimal SI base units. Writing and
reading a table's file: :mod:`roofline.tables.files`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pandas.api.internals import create_dataframe_from_blocks

from roofline.metrics.quantities import COMPUTE_CLASSES, MEMORY_LEVELS, QUANTITIES
from roofline.tables.typed_columns import (
    ABSENT_VALUES,
    NUMPY_DTYPES,
    TEXT_DTYPE,
    absent_array,
    column_arrays,
    typed_array,
)


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str  # "float", "int", "str", "bool"
    unit: str = ""
    description: str = ""


def _floats(names: Iterable[str], unit: str, what: str) -> list[Column]:
    return [Column(n, "float", unit, f"{what} {n}") for n in names]


LAUNCH_IDENTITY = [
    Column("app", "str", "", "application name (input file stem or apps: key)"),
    Column("launch", "int", "", "launch id within the input, 0-based in profiling order"),
    Column("kernel", "str", "", "demangled function name"),
    Column("kernel_short", "str", "", "readable name: templates and arguments abbreviated"),
    Column("kernel_mangled", "str", "", "mangled name where the input has it"),
    Column("device", "str", "", "GPU name as reported (or the what-if machine)"),
    Column("compute_capability", "str", "", "e.g. 8.0"),
    Column("sm_count", "float", "", "streaming multiprocessors"),
    Column("grid_size", "float", "", "blocks in the grid"),
    Column("block_size", "float", "", "threads per block"),
    Column("grid", "str", "", "grid dimensions as (x, y, z) where known"),
    Column("block", "str", "", "block dimensions as (x, y, z) where known"),
    Column("registers_per_thread", "float", "", ""),
    Column("shared_mem_bytes", "float", "B", "static + dynamic shared memory per block"),
    Column("stream", "str", "", "CUDA stream id"),
]

PROVENANCE = [
    Column("source_file", "str", "", "input file the launch came from"),
    Column("source_sha256", "str", "", "sha256 of that file"),
    Column("source_format", "str", "", "ncu-rep, ncu-csv-raw, ncu-csv-long, what-if"),
    Column("ncu_version", "str", "", "Nsight Compute version that wrote the report, where known"),
    Column("command_line", "str", "", "profiled command line recorded in the report, where known"),
    Column("convention", "str", "", "version of the counting conventions (roofline.metrics.quantities.CONVENTION)"),
]

QUANTITY_COLUMNS = [Column(q.name, "float", q.unit, q.description) for q in QUANTITIES]
RECIPE_COLUMNS = [Column(f"{q.name}_recipe", "str", "", f"recipe that produced {q.name}") for q in QUANTITIES]
REFUSAL_COLUMNS = [
    Column(f"{q.name}_refused", "str", "", f"why the value of {q.name} was refused as absurd (empty: it was not)")
    for q in QUANTITIES
]

COUNTERS = [
    *LAUNCH_IDENTITY,
    *PROVENANCE,
    *QUANTITY_COLUMNS,
    *RECIPE_COLUMNS,
    *REFUSAL_COLUMNS,
    Column("sm_count_refused", "str", "", "why the SM count was refused as absurd (empty: it was not)"),
    Column("flop_tensor", "float", "FLOP", "tensor-core ops, all datatypes (dense)"),
    # Algorithmic (compulsory) work and traffic, from what-if rows or config annotations.
    Column("algorithmic_flop", "float", "FLOP", "compulsory FLOP (e.g. 2MNK of a GEMM)"),
    Column("algorithmic_bytes", "float", "B", "compulsory DRAM bytes"),
    Column("missing", "str", "", "roofline quantities the input could not give, ';'-separated"),
    Column("missing_hint", "str", "", "ncu flags that would supply them"),
    Column("replay_failed", "bool", "", "ncu recorded no values for the launch (most of the input's counters "
           "empty, duration included): its replay failed; no verdict, no time"),
    Column("machine", "str", "", "catalog GPU or what-if machine the input names, if any"),
    Column(
        "ncu_rules",
        "str",
        "",
        "Nsight Compute's rule results stored in the report (JSON list: rule, section, title, message, type, "
        "speedup_pct = ncu's estimated speedup [% of the time], speedup_type global/local); empty: none",
    ),
]

CEILINGS = [
    Column("device", "str", "", "GPU name as reported"),
    Column("kind", "str", "", "compute or memory"),
    Column("name", "str", "", "compute class (fp64, fp32, fp16, tensor_*) or memory level"),
    Column("value", "float", "FLOP/s or B/s", "the ceiling"),
    Column("source", "str", "", "report, datasheet, measured or what-if"),
    Column("clock_hz", "float", "Hz", "clock the value is held at: for a compute roof the SM clock the device's "
           "launches ran at (every compute roof of a device shares it), for a memory roof its own level's clock; "
           "empty where unknown"),
    Column("per_clock", "float", "FLOP/cycle or B/cycle", "value / clock_hz: the rate per cycle of that clock "
           "(whole GPU); empty where the clock is unknown"),
    Column("citation", "str", "", "datasheet reference (with the vendor's value and clock where the roof was "
           "brought to another clock), or the launches it came from"),
    Column("launches", "int", "", "launches the report value was derived from (0 otherwise)"),
    Column("spread", "float", "", "max/min of per-launch values used (report source)"),
    Column("selected", "bool", "", "chosen by the selection policy"),
]

_LEVEL_COLUMNS = [
    c
    for level in MEMORY_LEVELS
    for c in (
        Column(f"ai_{level}", "float", "FLOP/B", f"arithmetic intensity against {level} bytes"),
        Column(f"roof_{level}_bw", "float", "B/s", f"{level} bandwidth roof applied (the device's ceiling)"),
        Column(f"time_bound_{level}", "float", "s", f"{level} bytes / {level} bandwidth"),
        Column(f"attainable_{level}", "float", "FLOP/s", f"min(peak, bw x AI) at {level}"),
    )
]
_CLASS_COLUMNS = [Column(f"time_bound_{cls}", "float", "s", f"{cls} work / {cls} ceiling") for cls in COMPUTE_CLASSES]

CLASSIFIED_EXTRA = [
    Column("compute_class", "str", "", "dominant executed compute class (largest time bound)"),
    Column("flop", "float", "FLOP", "work of the dominant class"),
    Column("flop_total", "float", "FLOP", "all floating-point work, CUDA cores + tensor"),
    Column("performance", "float", "FLOP/s", "flop / duration_s"),
    Column(
        "bound",
        "str",
        "",
        "memory:<level>, compute:<class>, none (FP counters say no FP work), unknown (evidence missing: see note)",
    ),
    Column("bound_kind", "str", "", "the kind of bound, as data: memory, compute, none or unknown; its roof is "
           "binding_roof (read these two rather than bound's text)"),
    Column("binding_level", "str", "", "busiest memory level (largest time bound)"),
    Column("binding_roof", "str", "", "the roof roof_pct is measured against: the compute class (compute-bound), "
           "the memory level, or issue (no FP work, the instruction issue rate binds); empty: no verdict"),
    Column("roof_pct", "float", "%", "achieved as a percentage of the binding roof (binding_roof)"),
    Column("headroom", "float", "", "attainable / achieved"),
    Column("ridge_ratio", "float", "", "intensity at the binding level / ridge point"),
    Column("roof_flops", "float", "FLOP/s", "compute roof applied: the device's ceiling of compute_class"),
    Column("launch_peak_flops", "float", "FLOP/s", "this launch's own peak of compute_class (its clock)"),
    Column("ceiling_source", "str", "", "report, datasheet, measured or what-if"),
    Column("attainable", "float", "FLOP/s", "the binding roof at the kernel's intensity"),
    Column("predicted_duration_s", "float", "s", "duration at the roof: the largest time bound of the verdict"),
    Column("above_roof", "bool", "", "achieved above the chosen roof (check ceilings)"),
    Column("note", "str", "", "what to check, e.g. latency/parallelism? far below every roof"),
    Column("traffic_excess", "float", "", "measured / compulsory DRAM bytes"),
    Column("ai_algorithmic", "float", "FLOP/B", "compulsory FLOP / compulsory bytes"),
    Column("warp_ips", "float", "inst/s", "warp instructions per second (instruction roofline y)"),
    Column(
        "instruction_intensity",
        "float",
        "inst/sector",
        "warp instructions per 32 B transaction at the busiest level (instruction roofline x)",
    ),
    Column(
        "issue_peak_ips",
        "float",
        "inst/s",
        "instruction issue roof: SMs x warp schedulers per SM x SM clock, 1 warp instruction per cycle and "
        "scheduler (kernels: the median over the device's launches)",
    ),
    Column("time_bound_issue", "float", "s", "warp instructions / issue_peak_ips"),
    Column(
        "instruction_bound",
        "str",
        "",
        "instruction-roofline verdict (Ding & Williams): issue (the issue roof binds) or memory:<level> (its "
        "transactions/s roof binds); unknown: no warp instruction count, issue peak or bytes",
    ),
    Column("instruction_roof_pct", "float", "%", "largest of the issue and memory time bounds / duration"),
    *_CLASS_COLUMNS,
    *_LEVEL_COLUMNS,
]

CLASSIFIED = [*COUNTERS, *CLASSIFIED_EXTRA]

# one kernel of one app on one device: a row of the kernels table, a nightly series, a compare step's point
KERNEL_KEY = ["app", "device", "kernel", "grid", "block"]
# What a launch holds besides its grid and block, kept per kernel (the first launch's): a kernel renamed
# by a code change is told apart by them (roofline.nightly.kernel_match.LAUNCH)
LAUNCH_RESOURCES = ("registers_per_thread", "shared_mem_bytes")

KERNELS = [
    Column("app", "str"),
    Column("device", "str"),
    Column("kernel", "str"),
    Column("kernel_short", "str"),
    Column("grid", "str"),
    Column("block", "str"),
    Column("registers_per_thread", "float", "", "the first launch's (kernel identity through a code change: "
           "roofline.nightly.kernel_match)"),
    Column("shared_mem_bytes", "float", "B", "static + dynamic shared memory per block, the first launch's"),
    Column("launches", "int", "", "launches of the kernel"),
    Column("launches_used", "int", "", "launches whose work, bytes and time the totals sum (complete ones)"),
    Column("convention", "str", "", "version of the counting conventions (roofline.metrics.quantities.CONVENTION)"),
    Column("duration_s", "float", "s", "total over the launches used"),
    Column("time_share", "float", "", "share of the application's GPU time (all launches)"),
    *[Column(f"flop_{cls}", "float", "FLOP") for cls in COMPUTE_CLASSES],
    Column("flop_tensor", "float", "FLOP"),
    *[Column(f"{level}_bytes", "float", "B") for level in MEMORY_LEVELS],
    *[c for c in CLASSIFIED_EXTRA if c.name not in {"ridge_ratio"}],
    Column("ridge_ratio", "float"),
    Column("warp_instructions", "float", "inst", "executed warp instructions, total over the launches used"),
    Column("ncu_rules", "str", "", "ncu's rule results over the kernel's launches (JSON list, largest "
           "speedup first; speedup_pct: time-weighted mean of the launches' estimates, 0 where a rule did not fire)"),
    Column("ncu_speedup_pct", "float", "%", "the largest speedup ncu estimates for the kernel (rules overlap: "
           "never a sum)"),
    Column("priority", "float", "", "time_share x (1 - roof fraction)"),
]

DIAGNOSTICS = [
    Column("app", "str"),
    Column("stage", "str", "", "parse, ceilings, classify"),
    Column("severity", "str", "",
           "error (input not analysed), warning, or note (a part of the roofline the capture did not collect)"),
    Column("source_file", "str"),
    Column("launch", "float", "", "launch id where the problem is per launch"),
    Column("message", "str", "", "what is wrong and how to fix it"),
]

# What the ceilings need of one app's launches (roofline/ceilings/report_peaks.py): its parse job stores it in
# the counters file's metadata, so that the ceilings job reads a few rows per app, not every launch.
PEAKS = [
    Column("app", "str"),
    Column("part", "str", "", "sample: launches with one peak value and clock (count); first: a group's first "
           "launches, which a citation names; what-if: a what-if machine's peak; device: a device the app ran on; "
           "measured: a device of its measured (not what-if) launches"),
    Column("device", "str"),
    Column("ceiling", "int", "", "the ceiling: its index in report_peaks.PEAK_COLUMNS, or "
           "report_peaks.SM_CLOCK_ORDER for the launches' SM clock"),
    Column("long", "bool", "", "launches of at least report_peaks.SHORT_LAUNCH_S"),
    Column("value", "float", "", "the peak (FLOP/s or B/s)"),
    Column("clock", "float", "Hz", "the clock measured in those launches"),
    Column("count", "int", "", "launches"),
    Column("position", "int", "", "input order of a first launch among the app's measured launches"),
    Column("launch", "int"),
    Column("recipe", "str", "", "the recipe that gave the peak"),
]

TABLES: dict[str, list[Column]] = {
    "counters": COUNTERS,
    "peaks": PEAKS,
    "ceilings": CEILINGS,
    "classified": CLASSIFIED,
    "kernels": KERNELS,
    "diagnostics": DIAGNOSTICS,
}


def _dedupe(columns: list[Column]) -> list[Column]:
    seen: dict[str, Column] = {}
    for column in columns:
        seen.setdefault(column.name, column)
    return list(seen.values())


for _name, _cols in TABLES.items():
    TABLES[_name] = _dedupe(_cols)


def conform(frame: pd.DataFrame, table: str, arrow=None) -> pd.DataFrame:
    """Return ``frame`` with exactly the declared columns of ``table``, in order, typed.

    ``arrow``: the Arrow table ``frame`` was converted from, if it was (a table read back), whose
    null counts say at no cost whether a text column lacks values.

    Raises
    ------
    ValueError
        If ``frame`` has a column the table does not declare.
    """
    columns = TABLES[table]
    if _conforms(frame, columns, arrow):  # a table read back or filtered: nothing to convert
        return frame.reset_index(drop=True)
    return conform_columns(dict(zip(frame.columns, column_arrays(frame), strict=True)), table, len(frame))


def conform_columns(values: dict, table: str, rows: int) -> pd.DataFrame:
    """:func:`conform` of a frame given as its columns (name -> array, Series or list of ``rows``
    values): what a stage builds column by column becomes one frame once, typed.

    Each column of the result is a copy (an array already typed is copied, which costs little):
    editing the result never reaches ``values``. A stage's frame is often a few launches long and
    ~200 columns wide, so the work is per column, without a Series for each.

    The numeric columns of one dtype are written straight into the one 2-D block pandas keeps them
    in (rows of a ``(columns, rows)`` array); a frame made from a dict of columns would stack them
    into that block after they were typed: a second copy of every number, at the moment the
    stage's other tables are all held (for 100k launches, ~150 MB more at the stage's peak).

    Raises
    ------
    ValueError
        If ``values`` has a column the table does not declare.
    """
    check_declared(values, table)
    columns = TABLES[table]
    blocks: list[tuple[object, np.ndarray]] = []
    numeric: dict[str, list[int]] = {}  # declared dtype -> positions of its columns
    for position, column in enumerate(columns):
        if column.dtype in NUMPY_DTYPES:
            numeric.setdefault(column.dtype, []).append(position)
        else:  # text: an extension array, a block of its own
            array = typed_array(values[column.name], column.dtype) if column.name in values \
                else absent_array(column.dtype, rows)
            if isinstance(array, np.ndarray):  # float64 given for text is kept as it is (np.dtype(None) is float64)
                array = array.reshape(1, -1)
            blocks.append((array, np.array([position])))
    for dtype, positions in numeric.items():
        block = np.empty((len(positions), rows), dtype=NUMPY_DTYPES[dtype])
        for row, position in enumerate(positions):
            name = columns[position].name
            if name not in values:
                block[row] = ABSENT_VALUES[dtype]
                continue
            given = values[name]
            typed = isinstance(given, np.ndarray) and given.dtype == NUMPY_DTYPES[dtype] and given.shape == (rows,)
            block[row] = given if typed else typed_array(given, dtype)  # typed: copied once, into its place
        blocks.append((block, np.array(positions)))
    return create_dataframe_from_blocks(blocks, index=pd.RangeIndex(rows),
                                        columns=pd.Index([column.name for column in columns]))


def check_declared(names: Iterable[str], table: str) -> None:
    """Raise ValueError naming the columns among ``names`` that ``table`` does not declare."""
    declared = _DECLARED[table]
    extra = [name for name in names if name not in declared]
    if extra:
        raise ValueError(f"table {table!r} does not declare columns {extra}; add them to roofline/tables/schemas.py")


def conform_some(frame: pd.DataFrame, table: str, names: Sequence[str]) -> pd.DataFrame:
    """The columns ``names`` (those of them ``table`` declares, in the order given) of
    ``conform(frame, table)``, without building the others: a reader that needs ~30 of a wide
    table's ~120 columns."""
    declared = {column.name: column.dtype for column in TABLES[table]}
    values = dict(zip(frame.columns, column_arrays(frame), strict=True))
    return pd.DataFrame({name: typed_array(values[name], declared[name]) if name in values
                         else absent_array(declared[name], len(frame)) for name in names if name in declared},
                        copy=False)


_DECLARED = {name: frozenset(column.name for column in columns) for name, columns in TABLES.items()}


def _conforms(frame: pd.DataFrame, columns, arrow=None) -> bool:
    """Whether ``frame`` already is what :func:`conform` returns (same columns, order, dtypes, no
    missing text): the report and the stages conform tables that were conformed when written."""
    return _typed(frame, columns) and _text_complete(frame, columns, arrow)


def _typed(frame: pd.DataFrame, columns) -> bool:
    """Whether ``frame`` has exactly ``columns``, in order, each of its declared dtype."""
    return list(frame.columns) == [c.name for c in columns] and all(
        dtype == NUMPY_DTYPES.get(column.dtype, TEXT_DTYPE)
        for column, dtype in zip(columns, frame.dtypes, strict=True))


def _text_complete(frame: pd.DataFrame, columns, arrow=None) -> bool:
    """Whether no text column of a :func:`_typed` ``frame`` lacks a value. With ``arrow`` (the Arrow
    table ``frame`` was converted from, or is written as) that is its null counts: not a pass over
    each of a counters table's ~130 text columns (a Series and a missing-value mask per column)."""
    if arrow is not None and arrow.column_names != list(frame.columns):
        arrow = None
    for position, column in enumerate(columns):
        if column.dtype in NUMPY_DTYPES:
            continue
        if arrow.column(position).null_count if arrow is not None else frame[column.name].hasnans:
            return False
    return True


def is_typed(frame: pd.DataFrame, table: str) -> bool:
    """Whether ``frame`` has exactly ``table``'s columns, in order, with their declared dtypes."""
    return _typed(frame, TABLES[table])


def text_complete(frame: pd.DataFrame, table: str, arrow=None) -> bool:
    """Whether no text column of ``frame`` (typed as ``table``'s) has a missing value; ``arrow``,
    the frame as an Arrow table, answers from its null counts."""
    return _text_complete(frame, TABLES[table], arrow)


def empty(table: str) -> pd.DataFrame:
    """A zero-row frame of ``table``."""
    return conform(pd.DataFrame(), table)


def units(table: str) -> dict[str, str]:
    """Column -> unit for ``table`` (empty string when dimensionless or text)."""
    return {c.name: c.unit for c in TABLES[table]}
