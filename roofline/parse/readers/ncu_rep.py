"""The parse stage's ``.ncu-rep`` reader: an Nsight Compute report -> the raw launch frame.

Reports are read with NVIDIA's ``ncu_report`` module (imported on use): per launch its identity and
the metrics the recipes of :mod:`roofline.metrics.quantities` use, in SI base units. The report's bytes are
read directly for what ``ncu_report`` does not say: a truncated file (here), the ncu version and the
command (:mod:`roofline.parse.readers.ncu_rep_provenance`).
"""

from __future__ import annotations

import itertools
import mmap
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from roofline.errors import InputError
from roofline.files.compressed import decompressed_copy
from roofline.metrics import quantities
from roofline.metrics.units import UnitError, si_factor, unknown_unit_warning
from roofline.parse.readers.ncu_rules import launch_rules

_NEEDED_METRICS = frozenset(quantities.all_input_metrics())
_TENSOR_PREFIX = "sm__ops_path_tensor_"
_DEVICE_NAME = "device__attribute_display_name"  # text: read by _string_metric, not as a number
_NUMERIC_METRICS = _NEEDED_METRICS - {_DEVICE_NAME}
_IDENTITY = ("launch", "kernel", "kernel_mangled", "device", "grid", "block", "stream", "ncu_rules")
REPORT_MAGIC = b"NVR\x00"
_UNSEEN = object()


def _dims(action, prefix: str) -> str:
    values = []
    for axis in "xyz":
        metric = action.metric_by_name(f"launch__{prefix}_dim_{axis}")
        if metric is None:
            return ""
        values.append(str(int(metric.as_double())))
    return "(" + ", ".join(values) + ")"


def _string_metric(action, name: str) -> str:
    metric = action.metric_by_name(name)
    if metric is None:
        return ""
    value = metric.value()
    return "" if value is None else str(value)


def block_ends(data: bytes | mmap.mmap, end: int) -> Iterator[int]:
    """Where a report's header ends, then where each of its blocks ends, as far as ``data[:end]``
    holds a block's size field (the last block may end past ``end``: a cut file); nothing where
    ``data`` lacks the report's signature.

    A report is the signature ``NVR\\0``, a little-endian uint32 header size and the header, then
    length-prefixed blocks (uint32 size + payload) up to the last byte.
    """
    if len(data) < 8 or data[:4] != REPORT_MAGIC:
        return
    offset = 8 + int.from_bytes(data[4:8], "little")
    yield offset
    while offset + 4 <= end:
        offset += 4 + int.from_bytes(data[offset : offset + 4], "little")
        yield offset


def report_structure_problem(path: str | Path) -> str | None:
    """Why the bytes of an ``.ncu-rep`` are truncated or damaged, or None when they look whole.

    Its blocks (:func:`block_ends`) end exactly at the file's last byte in every real fixture, ncu
    2019 to 2025. ncu_report silently loads the launches before a cut, so a copy cut short would
    otherwise lose launches without a word. A cut that falls exactly on a block boundary cannot be
    seen. Files without the signature return None (the loader judges).
    """
    path = Path(path)
    size = path.stat().st_size
    if size < 8:
        return None
    # mapped: the walk reads a few bytes per block, from the page cache
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
        ends = list(block_ends(view, size))
    if not ends or ends[-1] == size:
        return None
    blocks, offset = len(ends) - 1, ends[-1]
    if offset > size:
        return (
            f"the file is truncated or damaged: its block {blocks} ends at byte {offset:,} but the file has "
            f"only {size:,} bytes"
        )
    return f"the file ends with {size - offset} stray byte(s) after its last block"


def _text_head(path: Path) -> str | None:
    """The first line of ``path`` when the file is text, else None."""
    with open(path, "rb") as handle:
        head = handle.read(4096)
    if b"\x00" in head:
        return None
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return (text.strip().splitlines() or [""])[0][:80]


def _not_a_report(path: Path, ranges: int, shown: Path) -> InputError:
    """The error for a file ncu_report loads without any kernel launch (``shown``: the name to give)."""
    from roofline.parse.readers.ncu_log import log_problem

    fix = f"re-export it with ncu --export {path.name} (ncu --set roofline ...)"
    first_line = _text_head(path)
    if first_line is not None:
        with open(path, "rb") as handle:
            problem = log_problem(handle.read(65536).decode("utf-8", errors="replace").splitlines())
        if problem:  # ncu's log saved under the report's name: the fix lies in the ncu run
            return InputError(f"{shown}: a text file, not an Nsight Compute report: {problem}")
        if '"ID"' in first_line or "Kernel Name" in first_line:
            hint = "it looks like an ncu CSV export: rename it to .csv"
        elif first_line.startswith(("machines:", "kernels:", "#")):
            hint = "if it is a what-if table, rename it to .yaml"
        else:
            hint = fix
        return InputError(
            f"{shown}: a text file (first line {first_line!r}), not an Nsight Compute report: the report "
            f"holds no kernel launch; {hint}"
        )
    with open(path, "rb") as handle:
        signed = handle.read(4) == REPORT_MAGIC
    if not signed:
        return InputError(
            f"{shown}: not an Nsight Compute report (it lacks the 'NVR' signature of .ncu-rep files; "
            f"ncu_report found {ranges} ranges and no kernel launch); {fix}"
        )
    return InputError(
        f"{shown}: the report holds no kernel launch (ncu_report found {ranges} ranges); the file is "
        f"corrupt, truncated or was written by an ncu run that profiled no kernel; {fix}"
    )


def read_ncu_rep(path: str | Path) -> pd.DataFrame:
    """Read an ``.ncu-rep`` with NVIDIA's ``ncu_report`` into the raw launch frame (see
    :func:`read_ncu_rep_columns` for the errors and warnings).
    """
    return _launch_frame(*_read_launches(path))


def read_ncu_rep_columns(path: str | Path) -> tuple[dict[str, object], int]:
    """:func:`read_ncu_rep` as the frame's columns (name -> NumPy array of numbers or Arrow array of
    text) and its rows: what the parse stage derives from, without the frame between (a report has
    a few launches, where building a frame costs more than the derivation); of the metrics, those a
    recipe or identity field reads (:func:`roofline.metrics.quantities.all_input_metrics`).

    A compressed report (``.ncu-rep.gz``, ``.xz``, ``.zst``: see :mod:`roofline.files.compressed`) is read
    from a decompressed temporary copy, since ``ncu_report`` reads only paths; messages name ``path``.

    Raises
    ------
    InputError
        If the file is not a readable Nsight Compute report, is truncated or damaged (see
        :func:`report_structure_problem`, or a launch without any metric), or holds no kernel launch.
    UnitError
        If a metric a recipe reads has a unit :func:`roofline.metrics.units.si_factor` does not know.

    Warns
    -----
    UnitWarning
        Tensor-path metrics no recipe reads, left out for such a unit.
    """
    identities, launch_values = _read_launches(path)
    return _launch_columns(identities, launch_values), len(identities)


def _read_launches(path: str | Path) -> tuple[list[tuple], list[dict[str, float]]]:
    """Each launch's identity (:data:`_IDENTITY`) and metric values in SI units, in report order."""
    path = Path(path)
    if path.stat().st_size == 0:
        raise InputError(f"{path}: the file is empty; re-run ncu with --export {path.name}")
    # a compressed report (also a .ncu-repz) is read from a decompressed copy named .ncu-rep
    with decompressed_copy(path) as copy:
        return _read_report(copy, path)


def _read_report(path: Path, shown: Path) -> tuple[list[tuple], list[dict[str, float]]]:
    """:func:`read_ncu_rep` of the uncompressed report ``path``; messages name ``shown``."""
    import ncu_report  # imported here: the rest of the package works without it

    if path.stat().st_size == 0:
        raise InputError(f"{shown}: the file is empty; re-run ncu with --export {path.name}")
    problem = report_structure_problem(path)
    if problem:
        raise InputError(
            f"{shown}: {problem}; no launch of it is analysed, since the launches after the cut would be "
            "lost without a word. Copy the report again from where ncu wrote it (check its size), or "
            f"re-run ncu with --export {path.name}"
        )
    try:
        context = ncu_report.load_report(str(path))
    except Exception as exc:  # the module raises plain exceptions for corrupt files
        raise InputError(
            f"{shown}: not a readable Nsight Compute report ({exc}); re-export it with ncu --export {path.name}"
        ) from exc
    demangled, mangled = ncu_report.IAction.NameBase_DEMANGLED, ncu_report.IAction.NameBase_MANGLED
    # A metric's SI factor depends on its unit alone (si_factor names the metric only in its error),
    # so it is worked out once per distinct unit, not once per metric and launch. A unit si_factor
    # refuses is never stored: the first metric a recipe reads that has it raises, with its name, as
    # without the cache; other metrics with it are left out (one UnitWarning for the report).
    factors: dict[str, float] = {}
    metric_factors: dict[str, float | None] = {}  # metric -> its unit's factor; None: a unit refused
    unknown: dict[str, str] = {}  # metric -> a unit si_factor does not know
    identities, launch_values = [], []
    for range_index in range(context.num_ranges()):
        profiled_range = context.range_by_idx(range_index)
        for action_index in range(profiled_range.num_actions()):
            action = profiled_range.action_by_idx(action_index)
            names = list(action.metric_names())
            if not names:
                raise InputError(
                    f"{shown}: launch {len(identities)} has no metric at all: the report is truncated or "
                    f"damaged; copy it again from where ncu wrote it, or re-run ncu with --export {path.name}"
                )
            identities.append(
                (
                    len(identities),
                    action.name(demangled),
                    action.name(mangled),
                    _string_metric(action, _DEVICE_NAME),
                    _dims(action, "grid"),
                    _dims(action, "block"),
                    _string_metric(action, "launch__stream_id"),
                    launch_rules(action),  # ncu's own findings, shown beside our verdict
                )
            )
            values: dict[str, float] = {}
            moves = _register_moves(action)
            if moves is not None:
                values[quantities.HFMA2_MMA_METRIC] = moves
            mma = _mma_instructions(action)
            if mma is not None:
                values[quantities.MMA_INSTRUCTIONS_METRIC] = mma
            for name in names:
                if name not in _NUMERIC_METRICS and not name.startswith(_TENSOR_PREFIX):
                    continue
                metric = action.metric_by_name(name)
                try:
                    value = metric.as_double()
                except Exception:  # string-valued metric where a number was expected
                    continue
                factor = metric_factors.get(name, _UNSEEN)
                if factor is _UNSEEN:  # the metric's first launch: its unit (the same in every launch)
                    unit = metric.unit()
                    factor = factors.get(unit)
                    if factor is None:
                        try:
                            factor = factors[unit] = si_factor(unit, name)
                        except UnitError:
                            if name in _NEEDED_METRICS:
                                raise
                            unknown.setdefault(name, unit)  # no recipe reads it: left out
                    metric_factors[name] = factor
                if factor is not None:
                    values[name] = value * factor
            launch_values.append(values)
    if not identities:
        raise _not_a_report(path, context.num_ranges(), shown)
    unknown_unit_warning(str(shown), unknown, stacklevel=4)
    return identities, launch_values


_PER_OPCODE = quantities.HFMA2_MMA_METRIC.split("[")[0]


def _register_moves(action) -> float | None:
    """HFMA2.MMA thread instructions of a launch from its per-opcode SASS counts (instances named
    by opcode and modifiers), or None where the report has no such counts."""
    metric = action.metric_by_name(_PER_OPCODE)
    if metric is None or metric.num_instances() == 0:
        return None
    opcodes = metric.correlation_ids()
    return float(
        sum(metric.as_double(i) for i in range(metric.num_instances()) if opcodes.as_string(i).startswith("HFMA2.MMA"))
    )


# The tensor cores' matrix opcodes: warp MMA (HMMA, IMMA, DMMA, BMMA, QMMA, OMMA), Hopper's warpgroup
# MMA (HGMMA, IGMMA, QGMMA, BGMMA) and Blackwell's tcgen05 (UTCHMMA, UTCQMMA, ...). HFMA2.MMA (a
# register move) is opcode HFMA2 with modifier MMA, so it never matches.
_MMA_OPCODE = re.compile(r"(UTC)?[A-Z]G?MMA")
_WARP_PER_OPCODE = quantities.MMA_INSTRUCTIONS_METRIC.split("[")[0]


def _mma_instructions(action) -> float | None:
    """Warp instructions of the tensor cores' matrix opcodes of a launch, from its per-opcode SASS
    counts (instances named by opcode), or None where the report has no such counts."""
    metric = action.metric_by_name(_WARP_PER_OPCODE)
    if metric is None or metric.num_instances() == 0:
        return None
    opcodes = metric.correlation_ids()
    return float(sum(metric.as_double(i) for i in range(metric.num_instances())
                     if _MMA_OPCODE.fullmatch(opcodes.as_string(i).split(".")[0])))


def _metric_matrix(launch_values: list[dict[str, float]]) -> tuple[list[str], np.ndarray]:
    """The metrics in the order they first appear, and a launches x metrics matrix of their values
    (NaN where a launch lacks one)."""
    names = list(launch_values[0]) if launch_values else []
    if all(list(values) == names for values in launch_values[1:]):  # every launch's metrics in one order: the rule
        return names, np.fromiter(itertools.chain.from_iterable(values.values() for values in launch_values),
                                  np.float64, len(names) * len(launch_values)).reshape(len(launch_values), len(names))
    union: dict[str, None] = {}
    for values in launch_values:
        union.update(dict.fromkeys(values))
    names = list(union)
    matrix = np.array([[values.get(name, np.nan) for name in names] for values in launch_values], dtype="float64")
    return names, matrix.reshape(len(launch_values), len(names))


def _launch_columns(identities: list[tuple], launch_values: list[dict[str, float]]) -> dict[str, object]:
    """The raw launch frame's columns (:func:`_launch_frame`'s) that the derivation reads (every
    metric of :func:`roofline.metrics.quantities.all_input_metrics`), without the frame."""
    import pyarrow as pa

    columns: dict[str, object] = {"launch": np.array([identity[0] for identity in identities], dtype=np.int64)}
    for position, key in enumerate(_IDENTITY[1:], start=1):
        columns[key] = pa.array([identity[position] for identity in identities], pa.large_string())
    names, matrix = _metric_matrix(launch_values)
    # only what the derivation reads: a full report holds ~700 metrics a launch, mostly tensor-path
    # variants no recipe uses (the frame of read_ncu_rep keeps them)
    kept = [position for position, name in enumerate(names) if name in _NEEDED_METRICS]
    # each metric's values contiguous
    columns.update(zip([names[position] for position in kept], np.asfortranarray(matrix[:, kept]).T, strict=True))
    columns["source_format"] = pa.repeat(pa.scalar("ncu-rep", pa.large_string()), len(identities))
    return columns


def _launch_frame(identities: list[tuple], launch_values: list[dict[str, float]]) -> pd.DataFrame:
    """The raw launch frame: identity columns, then one float column per metric in the order the
    metrics first appear (NaN where a launch lacks one), then ``source_format``.

    Built as one float matrix rather than from per-launch dicts, from which pandas would infer each
    of the hundreds of columns' type from Python objects, most of the read's time for a few launches.
    """
    names, matrix = _metric_matrix(launch_values)
    identity = pd.DataFrame(identities, columns=list(_IDENTITY))
    source = pd.DataFrame({"source_format": ["ncu-rep"] * len(identities)})
    return pd.concat([identity, pd.DataFrame(matrix, columns=names), source], axis=1)
