"""Classify stage: counters + ceilings -> classified launches and per-kernel aggregates.

The verdict uses the time form of the roofline (../shared/guides/roofline.md §1): every ceiling
gives a lower bound on the launch's time, ``W_c / pi_c`` per compute class and ``Q_l / beta_l`` per
memory level. The largest bound is the binding resource and ``bound_time / duration`` the fraction
of the roof achieved. For one class and one level this is exactly ``min(pi, beta I)``.

Rules chosen, and why:
- Mixed compute classes (FP32 + FP16, tensor + CUDA cores): the compute bound is the *largest*
  per-class bound, not their sum, because the pipes can overlap; the class with that bound is the
  kernel's compute class, its work the plotted FLOP. Every class's bound is kept as a column.
- A tie between compute and memory (a point on the ridge) is compute-bound; ties are judged with a
  relative tolerance of 1e-9 so that 100/100e12 and 1/1e12 tie as the arithmetic says.
- No floating-point work: ``bound = none``; ``roof_pct`` is then the achieved bandwidth over the peak
  bandwidth at the busiest level.
- Aggregates per kernel are total work / total time and total work / total bytes, never means of
  ratios, and are classified by the same function as single launches.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

import numpy as np
import pandas as pd

from roofline.metrics import COMPUTE_CLASSES, MEMORY_LEVELS
from roofline.schemas import KERNELS, conform, read_table, write_table

log = logging.getLogger("roofline.classify")

TIE_RTOL = 1e-9
KERNEL_KEYS = ["app", "device", "kernel", "grid", "block"]


def wide_ceilings(ceilings: pd.DataFrame) -> pd.DataFrame:
    """Selected ceilings as one row per device: ``peak_<class>``, ``bw_<level>``, ``src_<name>``."""
    selected = ceilings[ceilings["selected"]]
    out = pd.DataFrame({"device": sorted(selected["device"].unique())})
    for _, row in selected.iterrows():
        prefix = "peak_" if row["kind"] == "compute" else "bw_"
        out.loc[out["device"] == row["device"], prefix + row["name"]] = row["value"]
        out.loc[out["device"] == row["device"], "src_" + row["name"]] = row["source"]
    return out


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


def classify_frame(
    frame: pd.DataFrame, ceilings: pd.DataFrame, low_roof_fraction: float = 0.1, above_roof_tolerance: float = 0.02
) -> pd.DataFrame:
    """Add the classification columns to a frame of launches (or of per-kernel sums)."""
    n = len(frame)
    merged = frame.merge(wide_ceilings(ceilings), on="device", how="left") if n else frame.copy()
    out = merged.copy()
    with np.errstate(divide="ignore", invalid="ignore"):
        work = _matrix(merged, [f"flop_{c}" for c in COMPUTE_CLASSES])
        peaks = _matrix(merged, [f"peak_{c}" for c in COMPUTE_CLASSES])
        class_time = np.where(work > 0, work / peaks, np.nan)
        for i, cls in enumerate(COMPUTE_CLASSES):
            out[f"time_bound_{cls}"] = class_time[:, i]
        flop_total = np.nansum(np.where(work > 0, work, 0.0), axis=1)
        has_flop = flop_total > 0
        any_class_time = np.isfinite(class_time).any(axis=1)
        dominant = np.where(
            any_class_time, np.nanargmax(np.where(np.isfinite(class_time), class_time, -1.0), axis=1), -1
        )
        rows = np.arange(n)
        compute_time = np.where(dominant >= 0, class_time[rows, np.maximum(dominant, 0)], np.nan)
        flop = np.where(dominant >= 0, work[rows, np.maximum(dominant, 0)], np.nan)
        peak_flops = np.where(dominant >= 0, peaks[rows, np.maximum(dominant, 0)], np.nan)
        classes = np.array(COMPUTE_CLASSES, dtype=object)
        compute_class = np.where(dominant >= 0, classes[np.maximum(dominant, 0)], "")

        level_bytes = _matrix(merged, [f"{lv}_bytes" for lv in MEMORY_LEVELS])
        level_bw = _matrix(merged, [f"bw_{lv}" for lv in MEMORY_LEVELS])
        level_time = level_bytes / level_bw
        for i, level in enumerate(MEMORY_LEVELS):
            out[f"ai_{level}"] = np.where(level_bytes[:, i] > 0, flop / level_bytes[:, i], np.nan)
            out[f"peak_{level}_bw_used"] = level_bw[:, i]
            out[f"time_bound_{level}"] = level_time[:, i]
            out[f"attainable_{level}"] = np.fmin(peak_flops, level_bw[:, i] * out[f"ai_{level}"].to_numpy())
        any_level = np.isfinite(level_time).any(axis=1)
        busiest = np.where(any_level, np.nanargmax(np.where(np.isfinite(level_time), level_time, -1.0), axis=1), -1)
        memory_time = np.where(busiest >= 0, level_time[rows, np.maximum(busiest, 0)], np.nan)
        levels = np.array(MEMORY_LEVELS, dtype=object)
        busiest_level = np.where(busiest >= 0, levels[np.maximum(busiest, 0)], "")

        compute_wins = np.isfinite(compute_time) & ~(memory_time > compute_time * (1 + TIE_RTOL))
        bound_time = np.where(compute_wins, compute_time, memory_time)
        bound = np.where(
            ~has_flop,
            "none",
            np.where(
                compute_wins,
                "compute:" + compute_class.astype(str),
                np.where(busiest >= 0, "memory:" + busiest_level.astype(str), "unknown"),
            ),
        )
        bound_time = np.where(has_flop, bound_time, memory_time)
        duration = _col(merged, "duration_s")
        roof_fraction = bound_time / duration
        attainable = np.where(has_flop, flop / bound_time, np.nan)
        performance = flop / duration

    out["compute_class"] = compute_class
    out["flop"] = flop
    out["flop_total"] = np.where(np.isfinite(work).any(axis=1), flop_total, np.nan)
    out["performance"] = performance
    out["bound"] = bound
    out["binding_level"] = busiest_level
    out["roof_pct"] = 100.0 * roof_fraction
    out["headroom"] = 1.0 / roof_fraction
    out["attainable"] = attainable
    out["bound_time_s"] = bound_time
    out["predicted_duration_s"] = bound_time
    out["peak_flops"] = peak_flops
    out["peak_dram_bw"] = _col(merged, "bw_dram")
    with np.errstate(divide="ignore", invalid="ignore"):
        binding_bw = np.where(busiest >= 0, level_bw[rows, np.maximum(busiest, 0)], np.nan)
        binding_ai = np.where(busiest >= 0, flop / level_bytes[rows, np.maximum(busiest, 0)], np.nan)
        out["ridge_ratio"] = binding_ai / (peak_flops / binding_bw)
        out["traffic_excess"] = _col(merged, "dram_bytes") / _col(merged, "algorithmic_bytes")
        out["ai_algorithmic"] = _col(merged, "algorithmic_flop") / _col(merged, "algorithmic_bytes")
        # Instruction roofline (Ding & Williams): warp instructions per 32 B sector at the busiest level.
        warp_instructions = _col(merged, "warp_instructions")
        out["warp_ips"] = warp_instructions / duration
        busiest_bytes = np.where(busiest >= 0, level_bytes[rows, np.maximum(busiest, 0)], np.nan)
        out["instruction_intensity"] = np.where(busiest_bytes > 0, warp_instructions / (busiest_bytes / 32.0), np.nan)
    source_name = np.where(compute_wins & has_flop, compute_class, busiest_level)
    ceiling_source = np.full(n, "", dtype=object)
    for name in pd.unique(source_name):
        if name and f"src_{name}" in merged.columns:  # one vectorised pick per ceiling name
            rows_of = source_name == name
            picked = merged[f"src_{name}"].to_numpy(dtype=object)[rows_of]
            ceiling_source[rows_of] = np.where(pd.notna(picked), picked, "")
    out["ceiling_source"] = ceiling_source.tolist()
    above = roof_fraction > 1 + above_roof_tolerance
    out["above_roof"] = above
    out["note"] = _notes(merged, ceiling_source, above, roof_fraction, low_roof_fraction, work, peaks, has_flop)
    drop = [c for c in out.columns if c.startswith(("peak_", "bw_", "src_")) and c not in frame.columns]
    keep = {"peak_flops", "peak_dram_bw", *(f"peak_{lv}_bw_used" for lv in MEMORY_LEVELS)}
    return out.drop(columns=[c for c in drop if c not in keep])


def _notes(merged, ceiling_source, above, fraction, low, work, peaks, has_flop) -> list[str]:
    """The ``note`` text of every row; the conditions are vectorised, text is built only where needed."""
    n = len(fraction)
    with np.errstate(invalid="ignore"):
        far_below = ~above & np.isfinite(fraction) & (fraction < low)
    missing_ceiling = (work > 0) & ~np.isfinite(peaks)
    no_ceiling = missing_ceiling.any(axis=1) if n else np.zeros(0, dtype=bool)
    no_flop_counters = np.zeros(n, dtype=bool)
    if "missing" in merged.columns:
        missing = merged["missing"].to_numpy(dtype=object)
        for i in np.flatnonzero(~has_flop):
            no_flop_counters[i] = str(missing[i]).find("flop") >= 0
    notes = [""] * n
    for i in np.flatnonzero(above | far_below | no_ceiling | no_flop_counters):
        parts = []
        if above[i]:
            parts.append(
                f"above the roof ({100 * fraction[i]:.0f} %): check the ceiling source "
                f"({ceiling_source[i] or 'none'}), the clock it assumes, sparsity, units"
            )
        elif far_below[i]:
            parts.append(
                f"latency/parallelism? at {100 * fraction[i]:.1f} % of the binding roof: capacity is unused; "
                "check occupancy, launch size, stalls and the other levels (the roofline does not say why)"
            )
        if no_ceiling[i]:
            classes = [COMPUTE_CLASSES[j] for j in np.flatnonzero(missing_ceiling[i])]
            parts.append(f"no ceiling for {', '.join(classes)}: that work is not judged")
        if no_flop_counters[i]:
            parts.append("no FLOP counters in the input: classified by the memory roof only")
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


def aggregate_kernels(counters: pd.DataFrame, ceilings: pd.DataFrame, **options) -> pd.DataFrame:
    """Per kernel (function x launch configuration in one app): sums, shares, verdict, priority."""
    if counters.empty:
        return conform(pd.DataFrame(), "kernels")
    sums = [f"flop_{c}" for c in COMPUTE_CLASSES] + ["flop_tensor"] + [f"{lv}_bytes" for lv in MEMORY_LEVELS]
    sums += ["duration_s", "algorithmic_flop", "algorithmic_bytes", "warp_instructions"]
    frame = counters.copy()
    for key in KERNEL_KEYS:
        frame[key] = frame[key].astype("string").fillna("")
    grouped = frame.groupby(KERNEL_KEYS, sort=False, dropna=False)
    totals = grouped[sums].sum(min_count=1).reset_index()
    totals["launches"] = grouped.size().to_numpy()
    totals["kernel_short"] = grouped["kernel_short"].first().to_numpy()
    if "convention" in frame.columns:
        totals["convention"] = grouped["convention"].first().to_numpy()
    totals["missing"] = grouped["missing"].first().to_numpy()
    classified = classify_frame(totals, ceilings, **options)
    app_time = classified.groupby("app")["duration_s"].transform("sum")
    classified["time_share"] = classified["duration_s"] / app_time
    roof = (classified["roof_pct"] / 100).clip(upper=1.0)
    classified["priority"] = classified["time_share"] * (1 - roof)
    classified = classified.sort_values("priority", ascending=False, na_position="last")
    columns = [c.name for c in KERNELS]
    return conform(classified[[c for c in classified.columns if c in columns]], "kernels")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Classify the launches and kernels of one app.")
    parser.add_argument("--counters", required=True)
    parser.add_argument("--ceilings", required=True)
    parser.add_argument("--low-roof-fraction", type=float, default=0.1)
    parser.add_argument("--above-roof-tolerance", type=float, default=0.02)
    parser.add_argument("--annotations", default="[]", help="JSON list of compulsory-work annotations")
    parser.add_argument("--output", required=True)
    parser.add_argument("--kernels", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    counters = apply_annotations(read_table(args.counters, "counters"), json.loads(args.annotations))
    ceilings = read_table(args.ceilings, "ceilings")
    options = {"low_roof_fraction": args.low_roof_fraction, "above_roof_tolerance": args.above_roof_tolerance}
    write_table(classify_launches(counters, ceilings, **options), "classified", args.output)
    write_table(aggregate_kernels(counters, ceilings, **options), "kernels", args.kernels)
    return 0


if __name__ == "__main__":
    sys.exit(main())
