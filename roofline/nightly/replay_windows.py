"""The per-series part of the replay's array judging, compiled. For each quiet series of a night,
:func:`judge_windows` finds the nights it keeps (series_rule.SeriesState.kept_nights), the
medians of its baseline pool, the noise of its last nights and its usual clock; then
:func:`judge_tonight` judges tonight against them (series_rule._judge's verdict, Bound.step's
side) and, where the series stays quiet, commits its night to its ring (SeriesState.step). Each
series looks at a few dozen nights of its own, so this is a pass over them per series rather than
many array operations over all the series of a night. The arithmetic is series_rule's to the
bit: the medians as :func:`statistics.median` takes them (the middle value, or the mean of the two
middle ones), the sum of squares added in order, the logs Python's :func:`math.log`, no
reordering or fused operations (numba's default, without ``fastmath``).

Imported by :meth:`roofline.nightly.replay.Replay._fast` on its first night only, so that the
nightly decision never loads numba; compiled once per installation (numba's on-disk cache), or
in each process where no folder can hold that cache.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numba
import numpy as np
import pandas as pd

log = logging.getLogger(__name__)


def _compiled(function: Callable) -> Callable:
    """``function`` compiled, kept in numba's on-disk cache where there is a folder for it (this
    package's ``__pycache__``, else the user's cache, or ``NUMBA_CACHE_DIR``); where there is none,
    compiled again in each process that replays (a few seconds) rather than no replay at all."""
    try:
        return numba.njit(cache=True)(function)
    except RuntimeError as error:  # numba: "cannot cache function ...: no locator available"
        log.info("the replay's compiled pass is compiled in each process: %s (set NUMBA_CACHE_DIR to a "
                 "writable folder to keep it)", error)
        return numba.njit(function)


@dataclass(frozen=True)
class Layout:
    """Where the night fields lie in the rings' ``numbers`` (slot, field, place), and the rule's
    windows (DecisionParams)."""

    pooled: int  # the pool medians are of the first `pooled` fields
    value_field: int
    flop_field: int
    bytes_field: int
    clock_field: int
    log_field: int
    window: int
    noise_window: int
    min_nights: int
    work_tol: float
    outlier: int  # the label code of an outlier night


@dataclass
class Windows:
    """Per series judged (in the order given): what :func:`judge_windows` finds over its nights."""

    medians: np.ndarray  # (pooled, m): the pool medians of the pooled fields
    pool_size: np.ndarray  # nights in the pool
    pool_runs: np.ndarray  # (m, window): the pool nights' run numbers, -1 past the pool's size
    pool_finite: np.ndarray  # every pool night's time finite
    rescaled: np.ndarray  # a noise night, or the last night held, at another work than tonight's
    clock: np.ndarray  # the usual clock: the median over the last `window` nights held, outliers too
    rel: np.ndarray  # the relative noise ("diff" of the logs over the last noise_window kept nights)


@_compiled
def _median(data: np.ndarray, k: int) -> float:
    """statistics.median of ``data[:k]`` (NaN when empty), sorting it in place."""
    for a in range(1, k):
        x = data[a]
        b = a - 1
        while b >= 0 and data[b] > x:
            data[b + 1] = data[b]
            b -= 1
        data[b + 1] = x
    if k == 0:
        return np.nan
    if k % 2 == 1:
        return data[k // 2]
    return (data[(k - 1) // 2] + data[k // 2]) / 2


@_compiled
def _deviation_median(ordered: np.ndarray, k: int, centre: float) -> float:
    """statistics.median of the finite ``abs(x - centre)`` over the sorted ``ordered[:k]``, without
    sorting them again: those below the centre give theirs in reverse, the others in order, and the
    two runs merge. ``abs(x - centre)`` is ``centre - x`` to the bit below it (IEEE subtraction is
    symmetric), so the values are the ones a sort of the deviations would give."""
    split = 0
    while split < k and ordered[split] < centre:
        split += 1
    n = 0
    for j in range(k):
        if np.isfinite(abs(ordered[j] - centre)):
            n += 1
    if n == 0:
        return np.nan
    lo_rank, hi_rank = (n - 1) // 2, n // 2
    lo = hi = np.nan
    left, right, rank = split - 1, split, 0
    while rank <= hi_rank:
        below = centre - ordered[left] if left >= 0 else np.inf
        above = ordered[right] - centre if right < k else np.inf
        if below <= above:
            value = below
            left -= 1
        else:
            value = above
            right += 1
        if not np.isfinite(value):
            continue
        if rank == lo_rank:
            lo = value
        if rank == hi_rank:
            hi = value
        rank += 1
    return hi if n % 2 == 1 else (lo + hi) / 2


@_compiled
def _judge_each(numbers, label, run, count, head, pend, slot, memory, work, order,
                 pooled, flop_field, bytes_field, clock_field, log_field, window, noise_window, min_nights,
                 work_tol, outlier, medians, pool_size, pool_runs, pool_finite, rescaled, clock, rel):
    capacity = label.shape[1]
    recent = noise_window + window + 2
    kept = np.empty(recent, np.int64)
    buf = np.empty(recent)
    diff = np.empty(recent)
    root2 = math.sqrt(2.0)
    for i in order:
        s = slot[i]
        h = head[s]
        first = recent - count[s]
        # the kept nights in order: held, not outliers, not the lone night awaiting its verdict;
        # the last one left out while more than min_nights are kept (SeriesState.kept_nights)
        n = 0
        last_kept = False
        for j in range(max(first, 0), recent):
            r = (h - recent + j) & (capacity - 1)
            if label[s, r] == outlier or (j == recent - 1 and pend[s]):
                continue
            last_kept = j == recent - 1
            kept[n] = r
            n += 1
        if last_kept and n > min_nights:
            n -= 1
        size = min(n, window)
        pool_size[i] = size
        at = n - size
        for f in range(pooled):
            k = 0
            for j in range(size):
                x = numbers[s, f, kept[at + j]]
                if np.isfinite(x):
                    buf[k] = x
                    k += 1
                elif f == 0:
                    pool_finite[i] = False
            medians[f, i] = _median(buf, k)
        for j in range(size):
            pool_runs[i, j] = run[s, kept[at + j]]
        noise = min(n, noise_window)
        at = n - noise
        tonight = work[i]
        if np.isfinite(tonight) and tonight > 0:
            field = bytes_field if memory[i] else flop_field
            for j in range(noise + 1):  # the noise nights, then the last night held
                r = kept[at + j] if j < noise else (h - 1) & (capacity - 1)
                x = numbers[s, field, r]
                if np.isfinite(x) and x > 0 and abs(x / tonight - 1) > work_tol:
                    rescaled[i] = True
        k = 0
        for j in range(max(first, recent - window), recent):
            x = numbers[s, clock_field, (h - recent + j) & (capacity - 1)]
            if np.isfinite(x):
                buf[k] = x
                k += 1
        clock[i] = _median(buf, k)
        # the noise (series_rule's rel_sigma "diff"): the steps between the logs of the kept nights,
        # their median and MAD, the steps within 3 MADs of the median summed in order
        steps = max(noise - 1, 0)
        k = 0
        for t in range(steps):
            diff[t] = numbers[s, log_field, kept[at + t + 1]] - numbers[s, log_field, kept[at + t]]
            if np.isfinite(diff[t]):
                buf[k] = diff[t]
                k += 1
        centre = _median(buf, k)
        mad = 1.4826 * _deviation_median(buf, k, centre)
        square = 0.0
        kept_steps = 0
        for t in range(steps):
            dev = abs(diff[t] - centre)
            if dev <= 3 * mad:
                square = square + dev * dev
                kept_steps += 1
        scale = math.sqrt(square / max(kept_steps, 1)) if kept_steps >= 2 else mad
        rel[i] = scale / root2 if noise >= 3 else np.nan


def judge_windows(numbers: np.ndarray, label: np.ndarray, run: np.ndarray, count: np.ndarray, head: np.ndarray,
                  pend: np.ndarray, slot: np.ndarray, memory: np.ndarray, work: np.ndarray,
                  layout: Layout) -> Windows:
    """Per series ``slot[i]`` of the rings (``numbers`` by (slot, field, place), ``label`` and
    ``run`` by (slot, place); its last night at ``head - 1``, ``count`` nights held, ``pend``: the
    last one awaits its verdict), with tonight's ``work`` (bytes where ``memory``, else FLOP): the
    pool and noise of series_rule._judge. The series are taken in the rings' order, so that the
    rings are read front to back."""
    m = len(slot)
    out = Windows(np.empty((layout.pooled, m)), np.empty(m, np.int64), np.full((m, layout.window), -1, np.int32),
                  np.ones(m, np.bool_), np.zeros(m, np.bool_), np.empty(m), np.empty(m))
    _judge_each(numbers, label, run, count, head, pend, slot, memory, work, np.argsort(slot, kind="stable"),
                 layout.pooled, layout.flop_field, layout.bytes_field, layout.clock_field, layout.log_field,
                 layout.window, layout.noise_window, layout.min_nights, layout.work_tol, layout.outlier,
                 out.medians, out.pool_size, out.pool_runs, out.pool_finite, out.rescaled, out.clock, out.rel)
    return out


class Rings(Protocol):
    """The rings the replay keeps its quiet series' nights in (replay._Windows), by slot: each
    series' last ``count`` nights before ``head`` (``numbers`` by slot, field and place; ``label``,
    ``run``, ``dir``, ``persistent`` by slot and place), whether the last awaits its verdict, and
    what its bound side and its previous segment's noise are."""

    numbers: np.ndarray
    label: np.ndarray
    run: np.ndarray
    dir: np.ndarray
    persistent: np.ndarray
    count: np.ndarray
    head: np.ndarray
    pend: np.ndarray
    pend_pinned: np.ndarray
    pend_row: np.ndarray
    carried: np.ndarray
    side: np.ndarray
    candidate: np.ndarray
    flips: np.ndarray


@dataclass(frozen=True)
class Rule:
    """series_rule._judge's thresholds (DecisionParams), the label codes it gives and the bound
    sides' codes."""

    window: int
    min_nights: int
    clock_tol: float
    work_tol: float
    short_sigma_floor: float
    sigma_floor: float
    rel_min: float
    z_min: float
    big_ratio: float
    big_z: float
    info_rel: float
    ridge_band: float
    flip_nights: int
    insufficient: int
    regression: int
    improvement: int
    suspicious: int
    unchanged: int
    compute: int
    memory: int


@dataclass
class Verdicts:
    """Per series judged (in the order given): tonight against its windows (series_rule._judge
    and Bound.step on the quiet path); ``ok``: the quiet path holds (else the rule judges it)."""

    ok: np.ndarray
    ratio: np.ndarray
    rel: np.ndarray  # the noise used, floors and lent noise applied
    limit: np.ndarray
    z: np.ndarray
    code: np.ndarray  # the label's code (an outlier: a spike dismissed tonight, and tonight unchanged)
    direction: np.ndarray  # 1 up, -1 down, 0 none
    persistent: np.ndarray  # the direction of two nights at one new level, else 0
    big: np.ndarray  # the direction of a big jump, else 0
    said: np.ndarray  # information only: the direction of a change beyond info_rel, else 0
    roof_moved: np.ndarray  # % of roof against its baseline, relative
    roof_note: np.ndarray  # unchanged time with the % of roof moved
    flop_moved: np.ndarray  # the work per launch against the last night held, relative
    bytes_moved: np.ndarray
    side: np.ndarray  # the bound side, candidate and flip count after tonight
    candidate: np.ndarray
    flips: np.ndarray
    spike: np.ndarray  # the night awaiting its verdict dismissed as a spike, tonight unchanged
    lone: np.ndarray  # tonight now awaits its verdict
    dismissed: np.ndarray  # the night awaiting its verdict made an outlier
    spike_run: np.ndarray  # the run number of the night awaiting its verdict


@_compiled
def _rel_change(a, b):
    """stats.rel_change."""
    return a / b - 1 if np.isfinite(a) and np.isfinite(b) and b != 0 else np.nan


@_compiled
def _log(value):
    """:func:`math.log` of a positive finite value (the C library's log, as Python's: the same to
    the bit), NaN for any other: the rings' log field."""
    return math.log(value) if value > 0 and np.isfinite(value) else np.nan


@_compiled
def logs(values: np.ndarray) -> np.ndarray:
    """:func:`_log` of each value."""
    out = np.empty(len(values))
    for i in range(len(values)):
        out[i] = _log(values[i])
    return out


@_compiled
def _judge_tonight(value, flop, nbytes, clock, roof, ridge, tonight, same_ident, slot, numbers, label_of, run_of,
                   dir_of, persistent_of, count, head, pend, pend_pinned, pend_row, carried, side_of, candidate_of,
                   flips_of, run_at, value_field, flop_field, bytes_field, log_field, outlier, pool_size, noise, base,
                   flop_base, bytes_base, roof_base, usual_clock, rescaled, pool_finite,
                   window, min_nights, clock_tol, work_tol, short_sigma_floor, sigma_floor, rel_min, z_min, big_ratio,
                   big_z, info_rel, ridge_band, flip_nights, insufficient, regression, improvement, suspicious,
                   unchanged, compute, memory,
                   ok, ratio, rel, limit, z, code, direction, persistent, big, said, roof_moved, roof_note, flop_moved,
                   bytes_moved, side, candidate, flips, spike, lone, dismissed, spike_run):
    capacity = numbers.shape[2]
    root2 = math.sqrt(2.0)
    shrink = 1 / big_ratio
    for i in range(len(slot)):
        s = slot[i]
        last = (head[s] - 1) & (capacity - 1)
        nb = pool_size[i]
        good = same_ident[i] and value[i] > 0 and np.isfinite(value[i]) and count[s] > 0 and nb >= 1
        info = nb < min_nights
        good = good and not rescaled[i] and pool_finite[i]
        # the clock against the usual clock; the work per launch against the last night held and
        # against the baseline
        moved = _rel_change(clock[i], usual_clock[i])
        good = good and not (np.isfinite(moved) and abs(moved) > clock_tol)
        flop_moved[i] = _rel_change(flop[i], numbers[s, flop_field, last])
        bytes_moved[i] = _rel_change(nbytes[i], numbers[s, bytes_field, last])
        for moved in (flop_moved[i], bytes_moved[i], _rel_change(flop[i], flop_base[i]),
                      _rel_change(nbytes[i], bytes_base[i])):
            good = good and not (np.isfinite(moved) and abs(moved) > work_tol)
        against = base[i] if good else 1.0
        r = value[i] / against
        # few nights: the noise the previous segment lends, or a raised floor
        lent = carried[s] if np.isfinite(carried[s]) else short_sigma_floor
        sigma = noise[i]
        if nb < window or not np.isfinite(sigma):
            sigma = max(sigma, lent) if np.isfinite(sigma) else lent
        sigma = max(sigma if np.isfinite(sigma) else 1.0, sigma_floor)
        lim = max(rel_min, z_min * sigma)
        zi = (r - 1) / sigma
        single = 1 if r - 1 > lim else (-1 if 1 - r > lim else 0)
        prev = numbers[s, value_field, last] / against
        two = max(rel_min, z_min * sigma / root2)
        mean = (r + prev) / 2 - 1
        level = abs(r - prev) <= max(z_min * sigma * root2, abs(mean) / 2)
        lasting = 0
        for sign in (1, -1):
            if sign * (r - 1) > rel_min and sign * (prev - 1) > rel_min and level and sign * mean > two:
                lasting = sign
        jump = 1 if r >= big_ratio and zi >= big_z else (-1 if r <= shrink and zi <= -big_z else 0)
        if info:  # information only: no persistence, no direction, no verdict
            lasting = way = 0
            label = insufficient
        elif lasting != 0 or jump != 0:
            way = lasting if lasting != 0 else jump
            label = regression if way > 0 else improvement
        else:
            way = single
            label = suspicious if single != 0 else unchanged
        roof_moved[i] = _rel_change(roof[i], roof_base[i])
        roof_note[i] = label == unchanged and np.isfinite(roof_moved[i]) and abs(roof_moved[i]) > rel_min
        said[i] = (1 if r - 1 > info_rel else (-1 if 1 - r > info_rel else 0)) if info else 0
        # the bound side (series_rule.Bound.step) without a flip
        valid = np.isfinite(ridge[i]) and ridge[i] > 0
        was, cand, count_flips = side_of[s], candidate_of[s], flips_of[s]
        first = valid and was == 0
        raw = compute if ridge[i] >= 1 + ridge_band else (memory if ridge[i] <= 1 - ridge_band else 0)
        later = valid and not first
        same = later and (raw == 0 or raw == was)
        other = later and not same
        new_flips = (count_flips + 1 if raw == cand else 1) if other else (0 if same else count_flips)
        good = good and not (other and new_flips >= flip_nights)
        side[i] = (compute if ridge[i] >= 1 else memory) if first else was
        candidate[i] = raw if other else (0 if same else cand)
        flips[i] = new_flips
        ok[i], ratio[i], rel[i], limit[i], z[i] = good, r, sigma, lim, zi
        direction[i], persistent[i], big[i] = way, lasting, jump
        spike[i] = lone[i] = dismissed[i] = False
        if good:
            # the verdict on the night awaiting one (SeriesState.step): tonight at the same new
            # level confirms it, anything else makes it an outlier (and an unchanged tonight one too)
            if pend[s]:
                onset = lasting != 0 and dir_of[s, last] == way
                label_of[s, last] = label if onset else outlier
                dismissed[i] = not onset
                spike[i] = dismissed[i] and label == unchanged
                spike_run[i] = run_of[s, last]
            lone[i] = label == suspicious or ((label == regression or label == improvement) and lasting == 0)
            if spike[i]:
                label = outlier
            # tonight at the head of the series' ring, one more night held
            h = head[s]
            for f in range(tonight.shape[0]):
                numbers[s, f, h] = tonight[f, i]
            numbers[s, log_field, h] = _log(value[i])
            run_of[s, h], dir_of[s, h], persistent_of[s, h], label_of[s, h] = run_at, way, lasting != 0, label
            pend[s], pend_pinned[s], pend_row[s] = lone[i], False, -1
            head[s] = (h + 1) & (capacity - 1)
            count[s] = min(count[s] + 1, capacity)
        code[i] = label


def judge_tonight(found: Windows, value: np.ndarray, flop: np.ndarray, nbytes: np.ndarray, clock: np.ndarray,
                  roof: np.ndarray, ridge: np.ndarray, tonight: np.ndarray, same_ident: np.ndarray, slot: np.ndarray,
                  rings: Rings, run_at: int, layout: Layout, rule: Rule) -> Verdicts:
    """Tonight's time, work per launch (``flop``, ``nbytes``), clock, % of roof and ridge ratio of
    each series ``slot[i]`` of the ``rings`` against what :func:`judge_windows` ``found`` over its
    nights, its last night held, the noise its previous segment lends and its bound side:
    series_rule._judge's verdict and Bound.step's side where the series stays quiet (``ok``).
    Those series' nights are then committed to the rings as SeriesState.step does: the verdict on
    the night awaiting one, tonight's fields (``tonight``: the rings' number fields but the log, by
    series) and verdict at the head of the ring (run number ``run_at``), the night awaiting its
    verdict now. The bound side is returned, not committed."""
    m = len(slot)
    out = Verdicts(np.empty(m, np.bool_), *(np.empty(m) for _ in range(4)), *(np.empty(m, np.int64) for _ in range(5)),
                   np.empty(m), np.empty(m, np.bool_), np.empty(m), np.empty(m), np.empty(m, np.int8),
                   np.empty(m, np.int8), np.empty(m, np.int64), np.empty(m, np.bool_), np.empty(m, np.bool_),
                   np.empty(m, np.bool_), np.full(m, -1, np.int64))
    base, flop_base, bytes_base, _, roof_base, _ = found.medians
    _judge_tonight(value, flop, nbytes, clock, roof, ridge, tonight, same_ident, slot, rings.numbers, rings.label,
                   rings.run, rings.dir, rings.persistent, rings.count, rings.head, rings.pend, rings.pend_pinned,
                   rings.pend_row, rings.carried, rings.side, rings.candidate, rings.flips, run_at, layout.value_field,
                   layout.flop_field, layout.bytes_field, layout.log_field, layout.outlier, found.pool_size,
                   found.rel, base, flop_base, bytes_base, roof_base, found.clock, found.rescaled, found.pool_finite,
                   rule.window, rule.min_nights, rule.clock_tol, rule.work_tol, rule.short_sigma_floor,
                   rule.sigma_floor, rule.rel_min, rule.z_min, rule.big_ratio, rule.big_z, rule.info_rel,
                   rule.ridge_band, rule.flip_nights, rule.insufficient, rule.regression, rule.improvement,
                   rule.suspicious, rule.unchanged, rule.compute, rule.memory,
                   out.ok, out.ratio, out.rel, out.limit, out.z, out.code, out.direction, out.persistent, out.big,
                   out.said, out.roof_moved, out.roof_note, out.flop_moved, out.bytes_moved, out.side, out.candidate,
                   out.flips, out.spike, out.lone, out.dismissed, out.spike_run)
    return out


@_compiled
def _pack_rows(runs, packed):
    """Each row of ``runs`` (run numbers increasing, the used ones first, -1 after) packed into one
    integer: its last run, the gaps between its runs, how many. False where a row does not fit
    (more than 7 places, a run from 1024 on, a gap of 256 or more, a used place after an unused one)."""
    m, width = runs.shape
    if width > 7:
        return False
    for i in range(m):
        n = 0
        for j in range(width):
            if runs[i, j] >= 0:
                if n < j:
                    return False
                n += 1
        last = runs[i, n - 1] if n > 0 else 0
        if last >= 1 << 10:
            return False
        key = np.int64(last)
        for j in range(1, width):
            gap = runs[i, j] - runs[i, j - 1] if j < n else 0
            if gap >= 1 << 8:
                return False
            key = (key << 8) | gap
        packed[i] = (key << 3) | n
    return True


def distinct_rows(runs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows of increasing run numbers (the used ones first, -1 after: the pools of
    :attr:`Windows.pool_runs`), each row's number among the distinct rows and the first row of
    each. Most rows hold the same few runs: a row is packed into one integer where that fits, else
    the rows are numbered by a sort."""
    packed = np.empty(len(runs), dtype=np.int64)
    if _pack_rows(runs, packed):
        which, distinct = pd.factorize(packed)
    else:
        distinct, which = np.unique(runs, axis=0, return_inverse=True)
        which = which.reshape(-1)
    firsts = np.zeros(len(distinct), dtype=np.int64)
    firsts[which[::-1]] = np.arange(len(which))[::-1]
    return which, firsts
