"""Classify stage: counters + ceilings -> classified launches (per-kernel totals, classified by the
same function: :mod:`roofline.classify.kernels`).

The verdict uses the time form of the roofline (../shared/guides/roofline.md §1): every ceiling
gives a lower bound on the launch's time, ``W_c / pi_c`` per compute class and ``Q_l / beta_l`` per
memory level. The largest bound is the binding resource and ``bound_time / duration`` the fraction
of the roof achieved. For one class and one level this is exactly ``min(pi, beta I)``.

Rules chosen, and why:
- Mixed compute classes (FP32 + FP16, tensor + CUDA cores): the compute bound is the *largest*
  per-class bound, not their sum, because the pipes can overlap; the class with that bound is the
  kernel's compute class, its work the plotted FLOP. Every class's bound is kept as a column. The
  exception is work on several tensor classes (Hopper's wgmma beside mma.sync, two datatypes): they
  share the tensor cores, so their bounds add up and the largest of them names the class; a mix is
  never held to one path's roof alone.
- A tie between compute and memory (a point on the ridge) is compute-bound; ties are judged with a
  relative tolerance of 1e-9 so that 100/100e12 and 1/1e12 tie as the arithmetic says.
- No floating-point work: ``bound = none``; its binding roof is the instruction roofline's (the issue
  rate or the busiest memory level, whichever bounds the time more: :mod:`roofline.classify.instruction`), else
  the busiest memory level's where the warp instructions are not counted. ``roof_pct`` is always the
  achieved fraction of the roof ``binding_roof`` names, on launch rows, kernel rows and pages alike.
- Right or silent: no verdict where the input cannot count what the launch did: tensor instructions
  the tensor op counters do not account for (:func:`_invisible_tensor_work`), a launch ncu recorded
  no values for (its replay failed: ``replay_failed``), a side of the roofline without evidence.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd

from roofline.classify.instruction import instruction_roofline
from roofline.metrics import quantities
from roofline.metrics.quantities import COMPUTE_CLASSES, MEMORY_LEVELS, TENSOR_CLASSES
from roofline.tables.schemas import conform

log = logging.getLogger("roofline.classify")

TIE_RTOL = 1e-9


def wide_ceilings(ceilings: pd.DataFrame) -> pd.DataFrame:
    """Selected ceilings as one row per device: ``peak_<class>``, ``bw_<level>``, ``src_<name>``
    (each group in name order; missing where a device has no such ceiling)."""
    selected = ceilings[ceilings["selected"]].drop_duplicates(["device", "name"], keep="last")
    devices = sorted(selected["device"].unique())
    if selected.empty:
        return pd.DataFrame({"device": pd.Index(devices, name="device")})
    # a few dozen rows: filled in place, where a pivot per kind of column costs ~15 ms an app job
    place = {device: i for i, device in enumerate(devices)}
    values: dict[str, np.ndarray] = {}
    sources: dict[str, np.ndarray] = {}
    for device, kind, name, value, source in zip(
            selected["device"].to_numpy(dtype=object), selected["kind"].to_numpy(dtype=object),
            selected["name"].to_numpy(dtype=str), pd.to_numeric(selected["value"], errors="coerce").to_numpy(
                dtype="float64", na_value=np.nan), selected["source"].to_numpy(dtype=object), strict=True):
        column = ("peak_" if kind == "compute" else "bw_") + name
        values.setdefault(column, np.full(len(devices), np.nan))[place[device]] = value
        sources.setdefault(f"src_{name}", np.full(len(devices), np.nan, dtype=object))[place[device]] = source
    return pd.DataFrame({"device": pd.Index(devices), **{c: values[c] for c in sorted(values)},
                         **{c: sources[c] for c in sorted(sources)}})


def _col(frame: pd.DataFrame, name: str) -> np.ndarray:
    if name in frame.columns:
        return pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype="float64")
    return np.full(len(frame), np.nan)


def _matrix(frame: pd.DataFrame, names: list[str]) -> np.ndarray:
    """The named columns as a (rows x names) float matrix, NaN where a column is absent."""
    if not len(frame):
        return np.empty((0, len(names)))
    return np.column_stack([_col(frame, name) for name in names])


def _text(frame: pd.DataFrame, name: str) -> np.ndarray:
    if name in frame.columns:
        return frame[name].astype("object").where(frame[name].notna(), "").to_numpy()
    return np.full(len(frame), "", dtype=object)


def _with_ceilings(frame: pd.DataFrame, wide: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its device's :func:`wide_ceilings` columns (missing where the device has none):
    ``frame.merge(wide, on="device", how="left")``, without the merge's copy of the frame's ~200
    columns (the ceilings' rows are picked by device and set beside the frame's own). Unlike the
    merge, ``device`` keeps the frame's dtype (the stages conform their tables after)."""
    extra = [c for c in wide.columns if c != "device"]
    if not len(frame):
        return frame.copy()
    if any(c in frame.columns for c in extra) or not wide["device"].is_unique:
        return frame.merge(wide, on="device", how="left")  # names to suffix, or rows to repeat: the merge's own way
    picked = wide.set_index("device")[extra].reindex(pd.Index(frame["device"].to_numpy(dtype=object)))
    return pd.concat([frame.reset_index(drop=True), picked.reset_index(drop=True)], axis=1)


def classify_frame(
    frame: pd.DataFrame, ceilings: pd.DataFrame, low_roof_fraction: float = 0.1, above_roof_tolerance: float = 0.02
) -> pd.DataFrame:
    """Add the classification columns to a frame of launches (or of per-kernel sums).

    ``ceilings``: the ceilings table, or its :func:`wide_ceilings` (what a caller classifying many
    frames against the same ceilings computes once)."""
    n = len(frame)
    wide = ceilings if "selected" not in ceilings.columns else wide_ceilings(ceilings)
    merged = _with_ceilings(frame, wide)
    out: dict[str, object] = {}  # the new columns, joined to the frame once (inserting each is slow)
    rows = np.arange(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        work = _matrix(merged, [f"flop_{c}" for c in COMPUTE_CLASSES])
        peaks = _matrix(merged, [f"peak_{c}" for c in COMPUTE_CLASSES])
        # HFMA2.MMA register moves counted as HFMA: exact where per-opcode counts tell, else guessed
        moves = _col(merged, "flop_fp16_register_moves")
        counted = np.isfinite(moves) & np.isfinite(work[:, _FP16]) if n else np.zeros(0, dtype=bool)
        work[counted, _FP16] = np.maximum(work[counted, _FP16] - moves[counted], 0.0)
        judged = work.copy()
        register_moves = _hfma2_mma_suspect(work, _col(merged, "tensor_pipe_active_pct")) & ~counted
        judged[register_moves, _FP16] = np.nan  # counted, but not a path the kernel computes on
        register_moves |= counted & (moves > 0)
        class_time = np.where(judged > 0, judged / peaks, np.nan)
        for i, cls in enumerate(COMPUTE_CLASSES):
            out[f"time_bound_{cls}"] = class_time[:, i]
        flop_total = np.nansum(np.where(work > 0, work, 0.0), axis=1)
        flop_known = np.isfinite(work).any(axis=1)
        has_flop = flop_total > 0
        dominant = _argmax(class_time)
        # The tensor classes share one unit per SM (wgmma and mma.sync, one datatype after another):
        # their bounds add up, and the verdict's class is the tensor class with the largest share.
        # The CUDA-core pipes overlap the tensor cores and each other, so the largest of those counts.
        tensor_time = class_time[:, _TENSOR]
        tensor_classes_used = np.isfinite(tensor_time).sum(axis=1)
        tensor_sum = np.where(tensor_classes_used > 0, np.nansum(tensor_time, axis=1), np.nan)
        cuda_max = np.where(np.isfinite(class_time[:, _CUDA]).any(axis=1),
                            np.nanmax(np.where(np.isfinite(class_time[:, _CUDA]), class_time[:, _CUDA], -1.0), axis=1),
                            np.nan) if n else np.zeros(0)
        tensor_binds = (tensor_classes_used > 1) & ~(cuda_max > tensor_sum)
        top_tensor = np.array(_TENSOR)[_argmax(tensor_time).clip(min=0)] if n else np.zeros(0, dtype=int)
        dominant = np.where(tensor_binds, top_tensor, dominant)
        pick = np.maximum(dominant, 0)
        compute_time = np.where(dominant >= 0, class_time[rows, pick], np.nan)
        compute_time = np.where(tensor_binds, tensor_sum, compute_time)
        flop = np.where(dominant >= 0, work[rows, pick], np.nan)
        roof_flops = np.where(dominant >= 0, peaks[rows, pick], np.nan)
        compute_class = np.where(dominant >= 0, np.array(COMPUTE_CLASSES, dtype=object)[pick], "")
        launch_peaks = _matrix(merged, [f"peak_flops_{c}" for c in COMPUTE_CLASSES])
        out["launch_peak_flops"] = np.where(dominant >= 0, launch_peaks[rows, pick], np.nan)

        level_bytes = _matrix(merged, [f"{lv}_bytes" for lv in MEMORY_LEVELS])
        level_bw = _matrix(merged, [f"bw_{lv}" for lv in MEMORY_LEVELS])
        level_time = level_bytes / level_bw
        for i, level in enumerate(MEMORY_LEVELS):
            out[f"ai_{level}"] = np.where(level_bytes[:, i] > 0, flop / level_bytes[:, i], np.nan)
            out[f"roof_{level}_bw"] = level_bw[:, i]
            out[f"time_bound_{level}"] = level_time[:, i]
            out[f"attainable_{level}"] = np.fmin(roof_flops, level_bw[:, i] * out[f"ai_{level}"])
        busiest = _argmax(level_time)
        memory_time = np.where(busiest >= 0, level_time[rows, np.maximum(busiest, 0)], np.nan)
        busiest_level = np.where(busiest >= 0, np.array(MEMORY_LEVELS, dtype=object)[np.maximum(busiest, 0)], "")

        replay_failed = _flag(merged, "replay_failed")
        invisible_tensor = _invisible_tensor_work(merged, work) & ~replay_failed
        silent = invisible_tensor | replay_failed
        # A verdict needs evidence on both sides: a missing counter never decides it.
        judged_both = has_flop & np.isfinite(compute_time) & np.isfinite(memory_time) & ~silent
        compute_wins = judged_both & ~(memory_time > compute_time * (1 + TIE_RTOL))
        flop_free = flop_known & ~has_flop & ~silent
        memory_wins = judged_both & ~compute_wins
        bound_kind = np.select([compute_wins, memory_wins, flop_free], ["compute", "memory", "none"], "unknown")
        bound = bound_kind.astype(object)
        bound[compute_wins] = "compute:" + compute_class[compute_wins].astype(str)
        bound[memory_wins] = "memory:" + busiest_level[memory_wins].astype(str)
        duration = _col(merged, "duration_s")
        instruction = instruction_roofline(merged, level_time, duration)
        # without FP work the instruction roofline binds where it judges: the larger of its issue and
        # memory bounds (the memory one is the FLOP roofline's memory bound)
        instruction_judged = instruction["instruction_bound"] != "unknown"
        free_time = np.where(instruction_judged, np.fmax(instruction["time_bound_issue"], memory_time), memory_time)
        bound_time = np.where(compute_wins, compute_time, np.where(memory_wins, memory_time,
                                                                   np.where(flop_free, free_time, np.nan)))
        roof_fraction = bound_time / duration
        attainable = np.where(judged_both, flop / bound_time, np.nan)
        performance = flop / duration

    out["compute_class"] = compute_class
    out["flop"] = flop
    out["flop_total"] = np.where(flop_known, flop_total, np.nan)
    out["performance"] = performance
    out["bound"] = bound
    out["bound_kind"] = bound_kind.astype(object)
    out["binding_level"] = busiest_level
    issue_binds = flop_free & instruction_judged & (instruction["instruction_bound"] == "issue")
    binding_roof = np.where(compute_wins, compute_class, np.where(memory_wins | flop_free, busiest_level, ""))
    out["binding_roof"] = np.where(issue_binds, "issue", np.where(np.isfinite(bound_time), binding_roof, ""))
    out["roof_pct"] = 100.0 * roof_fraction
    out["headroom"] = 1.0 / roof_fraction
    out["attainable"] = attainable
    out["predicted_duration_s"] = bound_time
    out["roof_flops"] = roof_flops
    with np.errstate(divide="ignore", invalid="ignore"):
        binding_bw = np.where(busiest >= 0, level_bw[rows, np.maximum(busiest, 0)], np.nan)
        binding_ai = np.where(busiest >= 0, flop / level_bytes[rows, np.maximum(busiest, 0)], np.nan)
        out["ridge_ratio"] = binding_ai / (roof_flops / binding_bw)
        out["traffic_excess"] = _col(merged, "dram_bytes") / _col(merged, "algorithmic_bytes")
        out["ai_algorithmic"] = _col(merged, "algorithmic_flop") / _col(merged, "algorithmic_bytes")
        # Instruction roofline (Ding & Williams): warp instructions per 32 B sector at the busiest level.
        warp_instructions = _col(merged, "warp_instructions")
        out["warp_ips"] = warp_instructions / duration
        busiest_bytes = np.where(busiest >= 0, level_bytes[rows, np.maximum(busiest, 0)], np.nan)
        out["instruction_intensity"] = np.where(busiest_bytes > 0, warp_instructions / (busiest_bytes / 32.0), np.nan)
    out.update(instruction)
    source_name = np.where(compute_wins, compute_class, busiest_level)
    ceiling_source = np.full(n, "", dtype=object)
    for name in pd.unique(source_name):
        if name and f"src_{name}" in merged.columns:  # one vectorised pick per ceiling name
            rows_of = source_name == name
            picked = merged[f"src_{name}"].to_numpy(dtype=object)[rows_of]
            ceiling_source[rows_of] = np.where(pd.notna(picked), picked, "")
    out["ceiling_source"] = ceiling_source.tolist()
    above = roof_fraction > 1 + above_roof_tolerance
    out["above_roof"] = above
    evidence = {
        "work": work,
        "judged": judged,
        "peaks": peaks,
        "level_bytes": level_bytes,
        "level_bw": level_bw,
        "flop_known": flop_known,
        "has_flop": has_flop,
        "register_moves": register_moves,
        "moves": moves,
        "invisible_tensor": invisible_tensor,
        "replay_failed": replay_failed,
        "compute_time": compute_time,
        "memory_time": memory_time,
        "tensor_shared": tensor_binds & (bound == "compute:" + compute_class.astype(str)),
        "class_time": class_time,
    }
    out["note"] = _notes(merged, ceiling_source, above, roof_fraction, low_roof_fraction, evidence)
    kept = [c for c in merged.columns if c not in out and not (c.startswith(("peak_", "bw_", "src_"))
                                                                 and c not in frame.columns)]
    return pd.concat([merged[kept], pd.DataFrame(out, index=merged.index)], axis=1)


_FP16 = COMPUTE_CLASSES.index("fp16")
_FP32 = COMPUTE_CLASSES.index("fp32")
_TENSOR = [COMPUTE_CLASSES.index(c) for c in TENSOR_CLASSES]
_CUDA = [COMPUTE_CLASSES.index(c) for c in COMPUTE_CLASSES if c not in TENSOR_CLASSES]
# The compiler's HFMA2.MMA register moves are counted by ncu as HFMA (about 20 % of the FP32 FLOP in
# the SiLU reports, half2 convention). They run on the tensor pipe: a busy tensor pipe whose op
# counters say zero, beside FP16 FMA work, gives them away; without pipe counters, FP16 work below
# this share of the FP32 work is taken for them.
REGISTER_MOVE_SHARE = 0.25


def _argmax(times: np.ndarray) -> np.ndarray:
    """Per row the column of the largest finite value, -1 where a row has none."""
    if not times.size:
        return np.full(len(times), -1)
    finite = np.isfinite(times)
    return np.where(finite.any(axis=1), np.argmax(np.where(finite, times, -1.0), axis=1), -1)


def _hfma2_mma_suspect(work: np.ndarray, tensor_pipe_pct: np.ndarray) -> np.ndarray:
    """Rows whose FP16 work beside FP32 work is likely HFMA2.MMA register moves."""
    if not len(work):
        return np.zeros(0, dtype=bool)
    fp16, fp32, tensor = work[:, _FP16], work[:, _FP32], work[:, _TENSOR]
    with np.errstate(invalid="ignore"):
        pipe_without_ops = (
            (tensor_pipe_pct > 0) & np.isfinite(tensor).any(axis=1) & ~(np.nan_to_num(tensor) > 0).any(axis=1)
        )
        small = fp16 < REGISTER_MOVE_SHARE * fp32
        return (fp16 > 0) & (fp32 > 0) & (pipe_without_ops | small)


# Where the input does not count tensor instructions, tensor-pipe activity from this share (in %) is
# taken for tensor work. The compiler's HFMA2.MMA register moves also run on that pipe: 0.01 % (A100
# self-join, 1.1e9 moves) to 2.1 % (A100 SiLU, 69e6 moves) busy in the real reports, with zero MMA
# instructions in their per-opcode counts; kernels with MMA instructions keep it 30-54 % busy (A40
# Julia HMMA/IMMA, RTX 4060 Ti FlashAttention), a CUTLASS int8 GEMM 11.4 %.
TENSOR_PIPE_BUSY_PCT = 5.0


def _flag(frame: pd.DataFrame, name: str) -> np.ndarray:
    if name in frame.columns:
        return frame[name].fillna(False).to_numpy(dtype=bool)
    return np.zeros(len(frame), dtype=bool)


def _invisible_tensor_work(merged: pd.DataFrame, work: np.ndarray) -> np.ndarray:
    """Rows with evidence of tensor instructions that the tensor op counters do not account for
    (absent, or all zero while instructions ran).

    Where the input counts tensor instructions (``tensor_instructions``: per-opcode SASS counts, or
    tensor-pipe instructions), any of them is evidence: one instruction does 512 to over a million
    FLOP by shape and datatype (Volta HMMA to Hopper HGMMA and Blackwell tcgen05), which a count
    alone cannot tell, so no count is too small to matter. The real reports agree: 0 in every launch
    without tensor work, HFMA2.MMA moves included; 8.4e6 to 7e8 in those with it. Elsewhere tensor
    pipe activity from :data:`TENSOR_PIPE_BUSY_PCT` is the evidence.
    """
    instructions = _col(merged, "tensor_instructions")
    with np.errstate(invalid="ignore"):
        busy = _col(merged, "tensor_pipe_active_pct") >= TENSOR_PIPE_BUSY_PCT
        evidence = np.where(np.isfinite(instructions), instructions > 0, busy)
        if not len(work):
            return evidence
        counted = (np.nan_to_num(work[:, _TENSOR]) > 0).any(axis=1)
    return evidence & ~counted


def _tensor_evidence(count: float, recipe: str, busy_pct: float) -> str:
    """What showed a row's tensor work, in words (its tensor instruction count, that count's recipe,
    its tensor pipe's busy share)."""
    if math.isfinite(count):
        if recipe.startswith("sass_per_opcode"):
            return f"{count:,.0f} MMA instructions (HMMA, IMMA, HGMMA, ... opcodes) in the SASS per-opcode counts"
        if recipe.startswith("pipe_tensor"):
            return f"{count:,.0f} tensor-pipe instructions (sm__inst_executed_pipe_tensor)"
        return f"{count:,.0f} tensor instructions"
    return f"the tensor pipe was {busy_pct:.1f} % busy"


# How to profile a launch again whose replay failed (ncu recorded no values for it).
REPLAY_FIX = (
    "profile it again; ncu's output names the replay error: where a kernel cannot be replayed (it changes "
    "its own inputs, or memory ran out saving them) use --replay-mode application, else profile fewer "
    "launches per run (--kernel-id, --launch-skip/--launch-count)"
)


_TENSOR_FLAGS = (
    "--section SpeedOfLight_HierarchicalTensorRooflineChart (or --set roofline: the sm__ops_path_tensor_* counters)"
)


def _notes(merged, ceiling_source, above, fraction, low, evidence) -> list[str]:
    """The ``note`` text of every row; the conditions are vectorised, text is built only where needed."""
    n = len(fraction)
    e = evidence
    with np.errstate(invalid="ignore"):
        far_below = ~above & np.isfinite(fraction) & (fraction < low)
        missing_ceiling = (e["judged"] > 0) & ~np.isfinite(e["peaks"])
        # a level with bytes but no roof, or with a roof but no bytes, is not used for the verdict
        unused_level = np.isfinite(e["level_bytes"]) != np.isfinite(e["level_bw"])
    no_ceiling = missing_ceiling.any(axis=1) if n else np.zeros(0, dtype=bool)
    no_flop = ~e["flop_known"]
    no_memory = e["has_flop"] & ~np.isfinite(e["memory_time"])
    no_compute = e["has_flop"] & ~np.isfinite(e["compute_time"])
    no_dram = e["has_flop"] & ~np.isfinite(e["level_bytes"][:, 0]) & np.isfinite(e["memory_time"]) if n else no_flop
    notes = [""] * n
    flagged = above | far_below | no_ceiling | no_flop | no_memory | no_compute | no_dram
    flagged |= e["register_moves"] | e["invisible_tensor"] | e["replay_failed"] | e["tensor_shared"]
    rows = np.flatnonzero(flagged)
    if not len(rows):
        return notes
    # each flag of the flagged rows as a Python list: a big export flags tens of thousands of rows,
    # and reading numpy items one at a time cost more than writing their text
    (replay_failed, invisible, no_flop_, no_memory_, no_dram_, no_compute_, above_, far_below_, tensor_shared,
     no_ceiling_, register_moves, moves, fraction_, source) = (values[rows].tolist() for values in (
        e["replay_failed"], e["invisible_tensor"], no_flop, no_memory, no_dram, no_compute, above, far_below,
        e["tensor_shared"], no_ceiling, e["register_moves"], e["moves"], fraction, np.asarray(ceiling_source)))
    if any(invisible):  # the evidence's columns, read once for all the rows that need them
        tensor_count = _col(merged, "tensor_instructions")[rows].tolist()
        tensor_recipe = [str(recipe) for recipe in _text(merged, "tensor_instructions_recipe")[rows]]
        tensor_busy = _col(merged, "tensor_pipe_active_pct")[rows].tolist()
        zero_counters = np.isfinite(e["work"][rows][:, _TENSOR]).any(axis=1).tolist()
    for k, i in enumerate(rows.tolist()):
        parts = []
        if replay_failed[k]:
            notes[i] = ("ncu recorded no values (most of the input's counters empty, duration included): the "
                        f"replay failed, so there is no verdict and no time; {REPLAY_FIX}")
            continue
        if invisible[k]:
            counters = "are all zero" if zero_counters[k] else "are absent"
            shown = _tensor_evidence(tensor_count[k], tensor_recipe[k], tensor_busy[k])
            parts.append(
                f"tensor work not counted: {shown}, but the input's tensor op counters "
                f"{counters}; no verdict. Collect them with {_TENSOR_FLAGS}"
            )
        elif no_flop_[k]:
            parts.append("no FLOP counters in the input: no verdict; collect them with "
                         f"{quantities.NCU_ROOFLINE_FLAGS}")
        if no_memory_[k] and not invisible[k]:
            levels = [lv for j, lv in enumerate(MEMORY_LEVELS) if unused_level[i, j] or j == 0]
            parts.append(
                "no memory level with both bytes and a roof (" + ", ".join(levels) + "): no verdict; collect "
                f"the bytes with {quantities.metric_hint('dram_bytes')}"
            )
        elif no_dram_[k]:
            parts.append(
                "no DRAM bytes: judged on the other levels only; collect them with "
                + quantities.metric_hint("dram_bytes")
            )
        if no_compute_[k] and not invisible[k]:
            parts.append("no compute ceiling for the work it did: no verdict")
        if above_[k]:
            parts.append(
                f"above the roof ({100 * fraction_[k]:.0f} %): check the ceiling source "
                f"({source[k] or 'none'}), the clock it assumes, sparsity, units"
            )
        elif far_below_[k]:
            parts.append(
                f"latency/parallelism? at {100 * fraction_[k]:.1f} % of the binding roof: capacity is unused; "
                "check occupancy, launch size, stalls and the other levels (the roofline does not say why)"
            )
        if tensor_shared[k]:
            used = [COMPUTE_CLASSES[j] for j in _TENSOR if np.isfinite(e["class_time"][i, j])]
            parts.append(f"tensor work on {', '.join(used)}: they share the tensor cores, so the compute bound is "
                         "the sum of their bounds, each at its own roof")
        if no_ceiling_[k] and not no_compute_[k]:
            classes = [COMPUTE_CLASSES[j] for j in np.flatnonzero(missing_ceiling[i])]
            parts.append(f"no ceiling for {', '.join(classes)}: that work is not judged")
        if register_moves[k] and math.isfinite(moves[k]):
            parts.append(
                f"{moves[k]:.3g} FLOP of the FP16 count are the compiler's HFMA2.MMA register moves "
                "(per-opcode SASS counts), not FP16 work: left out"
            )
        elif register_moves[k]:
            share = e["work"][i, _FP16] / e["work"][i, _FP32]
            parts.append(
                f"FP16 work is {100 * share:.1f} % of the FP32 work: likely the compiler's HFMA2.MMA register "
                "moves, which ncu counts as HFMA; not judged as FP16 (this report cannot tell them from HFMA2: "
                "--section SourceCounters gives the per-opcode counts that do)"
            )
        notes[i] = "; ".join(parts)
    return notes


def apply_annotations(counters: pd.DataFrame, annotations: list[dict]) -> pd.DataFrame:
    """Set compulsory work and bytes per launch from config annotations.

    Each annotation has ``kernel`` (a regular expression searched in the full kernel name), an
    optional ``app``, and ``algorithmic_flop`` / ``algorithmic_bytes`` per launch. The first
    matching annotation wins; values already in the input (what-if rows) are kept.
    """
    frame = counters.copy()
    for annotation in reversed(annotations):
        match = frame["kernel"].astype(str).str.contains(annotation["kernel"], regex=True)
        if annotation.get("app"):
            match &= frame["app"] == annotation["app"]
        for key in ("algorithmic_flop", "algorithmic_bytes"):
            if annotation.get(key) is not None:
                given = frame[key].notna() & (frame.get("source_format") == "what-if")
                frame.loc[match & ~given, key] = float(annotation[key])
    return frame


def classify_launches(counters: pd.DataFrame, ceilings: pd.DataFrame, **options) -> pd.DataFrame:
    """The classified per-launch table."""
    return conform(classify_frame(counters, ceilings, **options), "classified")
