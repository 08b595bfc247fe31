"""The replay's compiled pass over each series' nights (roofline/nightly/replay_windows.py) against the
rule's own statistics: the pool and noise series_rule._judge takes from a list of nights, with
stats.median_finite and stats.rel_sigma (statistics.median underneath), compared to the bit.

The histories are random (seeded) and hand-made edge cases: outliers, a night awaiting its verdict,
short and wrapped rings, repeated values, missing fields."""

from __future__ import annotations

import math

import numpy as np
import pytest

from roofline.nightly import replay_windows
from roofline.nightly.params import DecisionParams
from roofline.nightly.stats import median_finite, rel_sigma

FIELDS = ("value", "flop", "bytes", "perf", "roof", "ai", "clock")
OUTLIER = 6
CAPACITY = 64


def rings(histories: list[list[dict]], pending: list[bool], rng: np.random.Generator) -> dict:
    """The replay's ring arrays holding each history, each starting at a random place."""
    n = len(histories)
    out = {"numbers": np.full((n, len(FIELDS) + 1, CAPACITY), np.nan), "label": np.zeros((n, CAPACITY), np.int8),
           "run": np.full((n, CAPACITY), -1, np.int32), "count": np.zeros(n, np.int32),
           "head": np.zeros(n, np.int64), "pend": np.array(pending, dtype=bool)}
    for s, nights in enumerate(histories):
        start = int(rng.integers(CAPACITY))
        held = nights[-CAPACITY:]
        for j, night in enumerate(held):
            place = (start + j) % CAPACITY
            for f, name in enumerate(FIELDS):
                out["numbers"][s, f, place] = night[name]
            out["numbers"][s, len(FIELDS), place] = math.log(night["value"])
            out["label"][s, place] = OUTLIER if night["outlier"] else 0
            out["run"][s, place] = night["run"]
        out["count"][s] = len(held)
        out["head"][s] = (start + len(held)) % CAPACITY
    return out


def expected(p: DecisionParams, nights: list[dict], pending: bool, tonight: float, memory: bool) -> dict:
    """What series_rule._judge takes from ``nights`` (the last one awaiting its verdict when ``pending``)."""
    last = nights[-1]
    recent = nights[-(p.noise_window + p.window + 2):]
    kept = [n for n in recent if not n["outlier"] and not (pending and n is last)]
    if len(kept) > p.min_nights and kept[-1] is last:
        kept = kept[:-1]
    pool, noise = kept[-p.window:], kept[-p.noise_window:]
    work = "bytes" if memory else "flop"
    rescaled = math.isfinite(tonight) and tonight > 0 and any(
        math.isfinite(n[work]) and n[work] > 0 and abs(n[work] / tonight - 1) > p.work_tol for n in [*noise, last])
    # a night without a finite time leaves the series to the rule when it is in the pool: no noise to compare
    timed = all(math.isfinite(n["value"]) for n in noise)
    return {"medians": [median_finite([n[name] for n in pool]) for name in FIELDS[:6]],
            "pool_size": len(pool), "pool_runs": [n["run"] for n in pool],
            "pool_finite": all(math.isfinite(n["value"]) for n in pool), "rescaled": rescaled,
            "clock": median_finite([n["clock"] for n in nights[-p.window:]]),
            "rel": rel_sigma([n["value"] for n in noise], "diff") if timed else None}


def night(rng: np.random.Generator, run: int, level: float, odd: float) -> dict:
    time = level * math.exp(rng.normal(0, 0.05)) if rng.random() > 0.01 else math.nan
    out = {"value": time, "run": run, "outlier": rng.random() < odd}
    for name in FIELDS[1:]:
        roll = rng.random()
        # repeated values, missing ones, infinities and the usual jitter
        out[name] = (1.0 if roll < 0.2 else math.nan if roll < 0.25 else math.inf if roll < 0.27
                     else float(rng.lognormal(0, 0.3)))
    return out


def histories(rng: np.random.Generator, n: int) -> tuple[list[list[dict]], list[bool]]:
    out, pending = [], []
    for _ in range(n):
        length = int(rng.choice([1, 2, 3, 4, 8, 20, 30, 31, 45, 64, 90]))
        level, odd = float(rng.lognormal(-6, 2)), float(rng.choice([0.0, 0.1, 0.5]))
        nights = [night(rng, run, level, odd) for run in range(length)]
        if rng.random() < 0.2:  # a constant time: every step of the noise is zero
            for x in nights:
                x["value"] = level
        out.append(nights)
        pending.append(bool(rng.random() < 0.3) and not nights[-1]["outlier"])
    return out, pending


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("params", [DecisionParams(), DecisionParams(window=5, noise_window=11, min_nights=2)],
                         ids=["default", "short windows"])
def test_each_series_as_the_rule_takes_its_nights(seed: int, params: DecisionParams) -> None:
    rng = np.random.default_rng(seed)
    series, pending = histories(rng, 300)
    held = rings(series, pending, rng)
    memory = rng.random(len(series)) < 0.5
    work = np.where(rng.random(len(series)) < 0.7, 1.0, rng.lognormal(0, 0.3, len(series)))
    work[::17] = np.nan
    slot = rng.permutation(len(series))  # judged in any order, as a night's series are
    layout = replay_windows.Layout(6, 0, 1, 2, 6, 7, params.window, params.noise_window, params.min_nights,
                                   params.work_tol, OUTLIER)
    found = replay_windows.judge_windows(held["numbers"], held["label"], held["run"], held["count"], held["head"],
                                         held["pend"], slot, memory, work, layout)
    for i, s in enumerate(slot.tolist()):
        want = expected(params, series[s], pending[s], float(work[i]), bool(memory[i]))
        got = {"medians": found.medians[:, i].tolist(), "pool_size": int(found.pool_size[i]),
               "pool_runs": [r for r in found.pool_runs[i].tolist() if r >= 0],
               "pool_finite": bool(found.pool_finite[i]), "rescaled": bool(found.rescaled[i]),
               "clock": float(found.clock[i]), "rel": float(found.rel[i])}
        numbers = ("medians", "clock", "rel")
        assert {k: v for k, v in got.items() if k not in numbers} == {k: v for k, v in want.items() if k not in numbers}
        for k in numbers:  # the same to the bit, NaN where the rule gives NaN
            if want[k] is not None:
                assert same_bits(got[k], want[k]), (k, s, got[k], want[k])


def same_bits(a: object, b: object) -> bool:
    a, b = np.atleast_1d(np.array(a, dtype=float)), np.atleast_1d(np.array(b, dtype=float))
    nan = np.isnan(a)
    return bool(np.array_equal(nan, np.isnan(b)) and (a[~nan].view(np.uint64) == b[~nan].view(np.uint64)).all())


def test_logs_are_pythons() -> None:
    """The rings' logs (of the time of each night) are Python's math.log to the bit; NaN where the
    time is no positive finite number."""
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.lognormal(-5, 4, 100_000), [5e-324, 1e-300, 0.5, 1.0, 2.0, 1e308],
                             [0.0, -0.0, -1.0, np.inf, -np.inf, np.nan]])
    want = np.array([math.log(v) if v > 0 and math.isfinite(v) else math.nan for v in values.tolist()])
    assert same_bits(replay_windows.logs(values), want)


def test_compiled_in_each_process_where_no_folder_can_hold_numbas_cache(monkeypatch, caplog):
    """Where neither the package's folder nor the user's cache is writable, numba cannot cache and
    raises as the module is imported: the pass is then compiled in each process, with the same
    results, and the log says why."""
    import importlib.util
    import logging
    import sys

    import numba

    plain = numba.njit

    def njit(*args, **kwargs):
        if kwargs.get("cache"):
            raise RuntimeError("cannot cache function 'f': no locator available for file 'f.py'")
        return plain(*args, **kwargs)

    monkeypatch.setattr(numba, "njit", njit)
    spec = importlib.util.spec_from_file_location("replay_windows_uncached", replay_windows.__file__)
    uncached = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, uncached)
    with caplog.at_level(logging.INFO):
        spec.loader.exec_module(uncached)
    assert "compiled in each process" in caplog.text and "NUMBA_CACHE_DIR" in caplog.text
    values = np.array([0.5, 1.0, 2.0, 1e-300])
    assert same_bits(uncached.logs(values), replay_windows.logs(values))
