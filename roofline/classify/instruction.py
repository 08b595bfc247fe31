"""The instruction roofline (Ding & Williams, "An Instruction Roofline Model for GPUs", PMBS 2019).

y: warp instructions per second (``warp_ips``); x: warp instructions per 32-byte transaction at a
memory level (``instruction_intensity`` at the busiest level; per level on the chart). Roofs: the
issue rate, SMs x warp schedulers per SM x SM clock at one warp instruction per cycle and scheduler,
and per memory level its bandwidth / 32 B in transactions/s. It judges what the FLOP roofline cannot:
kernels without floating-point work (integer, pointer chasing, data movement).

Called from :func:`roofline.classify.launches.classify_frame`, on launches and on per-kernel sums alike.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from roofline.metrics.quantities import MEMORY_LEVELS

SECTOR_BYTES = 32.0  # one L2/DRAM transaction (sector)
TIE_RTOL = 1e-9  # as classify's: a point on the ridge is issue-bound


def _col(frame: pd.DataFrame, name: str) -> np.ndarray:
    if name in frame.columns:
        return pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype="float64")
    return np.full(len(frame), np.nan)


def warp_schedulers_per_sm(compute_capability: pd.Series) -> np.ndarray:
    """Warp schedulers per SM: 4 from Maxwell on (sm_50+), 2 on GP100 (sm_60), NaN where unknown."""
    # once per distinct capability: a big export's launches share one or two
    codes, capabilities = pd.factorize(compute_capability, use_na_sentinel=False)
    cc = pd.to_numeric(pd.Series(capabilities, dtype=object).astype(str), errors="coerce").to_numpy(dtype=float)
    return np.where(cc == 6.0, 2.0, np.where(cc >= 5.0, 4.0, np.nan))[codes]


def issue_peak_ips(frame: pd.DataFrame) -> np.ndarray:
    """Per row the issue roof [warp inst/s]: SMs x schedulers per SM x SM clock (Ding & Williams:
    each scheduler issues at most one warp instruction per cycle). A frame that already carries
    ``issue_peak_ips`` (per-kernel sums, :func:`aggregate_kernels`) keeps it."""
    if "issue_peak_ips" in frame.columns:
        return _col(frame, "issue_peak_ips")
    cc = frame["compute_capability"] if "compute_capability" in frame.columns else pd.Series("", index=frame.index)
    return _col(frame, "sm_count") * warp_schedulers_per_sm(cc) * _col(frame, "sm_clock_hz")


def instruction_roofline(merged: pd.DataFrame, level_time: np.ndarray, duration: np.ndarray) -> dict:
    """The instruction roofline's verdict (Ding & Williams, PMBS 2019), in the time form.

    The issue roof bounds the time below by ``warp instructions / issue peak``; a memory level's
    roof in transactions/s (its bandwidth / 32 B) by ``transactions / (bandwidth / 32)``, which is
    the FLOP roofline's ``bytes / bandwidth``. The largest bound binds, a tie going to issue. Unlike
    the FLOP verdict it needs no floating-point work: integer and pointer-chasing kernels get one.
    """
    n = len(merged)
    with np.errstate(divide="ignore", invalid="ignore"):
        peak = issue_peak_ips(merged) if n else np.zeros(0)
        issue_time = _col(merged, "warp_instructions") / peak
        issue_time = np.where(np.isfinite(issue_time) & (issue_time >= 0), issue_time, np.nan)
        busiest = _busiest(level_time)
        memory_time = np.where(busiest >= 0, level_time[np.arange(n), np.maximum(busiest, 0)], np.nan)
        judged = np.isfinite(issue_time) & np.isfinite(memory_time)
        issue_wins = judged & ~(memory_time > issue_time * (1 + TIE_RTOL))
        verdict = np.full(n, "unknown", dtype=object)
        verdict[issue_wins] = "issue"
        level = np.array(MEMORY_LEVELS, dtype=object)[np.maximum(busiest, 0)] if n else np.zeros(0, dtype=object)
        memory_wins = judged & ~issue_wins
        verdict[memory_wins] = "memory:" + level[memory_wins].astype(str)
        bound_time = np.where(issue_wins, issue_time, np.where(memory_wins, memory_time, np.nan))
        return {"issue_peak_ips": peak, "time_bound_issue": issue_time, "instruction_bound": verdict,
                "instruction_roof_pct": 100.0 * bound_time / duration}


def _busiest(times: np.ndarray) -> np.ndarray:
    """Per row the column of the largest finite time bound, -1 where a row has none."""
    if not times.size:
        return np.full(len(times), -1)
    finite = np.isfinite(times)
    return np.where(finite.any(axis=1), np.argmax(np.where(finite, times, -1.0), axis=1), -1)
