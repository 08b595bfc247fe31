"""The full replay judges a night's quiet series at once (roofline/nightly/replay.py): its records
and final state must be those of the night-by-night rule (engine.decide_all, state._advance), on
every kind of history: the seeded simulator with missing nights, late, vanished and returning
kernels, convention changes and night-level shifts; hand-made fusions, splits and renames; a
fleet of many steady series; other parameters (short windows, the level noise, per-kernel
overrides)."""

import json
import logging
import re

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from nightly.test_app_total import OTHER, A, B, app_nights
from nightly.test_kernel_match import cutlass, nights
from nightly.test_state import KEY, compare, perturbed
from nightly.test_track import WIGGLE, series
from roofline.nightly import state as decide_state
from roofline.nightly.engine import Engine
from roofline.nightly.params import DecisionParams
from roofline.nightly.state import STATE_DIR, update
from roofline.nightly.state_file import STATE_META_KEY
from roofline.nightly.store import history_frame, read_runs_table, run_files, write_partition


@pytest.fixture(autouse=True)
def arrays_from_the_first_night(monkeypatch):
    """The histories here are short: every replay of this file goes through the arrays."""
    monkeypatch.setattr(decide_state, "ARRAY_REPLAY_MIN_NIGHTS", 0)


def stored(tmp_path, history: pd.DataFrame):
    """``history`` written night by night to a store, nothing judged yet."""
    for run_id, rows in history.groupby("run_id", sort=False):
        write_partition(tmp_path, f"run={run_id}", rows.reset_index(drop=True))
    return tmp_path


def replayed(tmp_path, history: pd.DataFrame, params: DecisionParams, caplog) -> tuple[int, int]:
    """Replay ``history`` with the array replay, check records and states against the rule; the
    series-nights judged at once and one by one."""
    store = stored(tmp_path / "store", history)
    with caplog.at_level(logging.INFO, logger="roofline.nightly.state"):
        done = update(store, params, replay=True)
    assert done.replayed
    compare(store, params)  # every record, every column, against engine.decide_all
    # the states kept equal those the night-by-night engine leaves
    files = run_files(store)
    engine = Engine(params)
    every: list[list] = []
    before = {p.parent.name: pq.read_table(p) for p in (store / STATE_DIR).glob("n=*/part.parquet")}
    decide_state._advance(store, engine, every, decide_state._keys(store, files), files,
                          decide_state.rule_hash(params))
    assert before, "the replay kept no state"
    for name, table in before.items():
        again = pq.read_table(store / STATE_DIR / name / "part.parquet")
        assert table.to_pandas().equals(again.to_pandas()), name
        meta, meta_again = (json.loads(t.schema.metadata[STATE_META_KEY]) for t in (table, again))
        for m in (meta, meta_again):  # the stamp of the decisions file: rewritten since
            m.get("tonight", {}).pop("decisions", None)
        assert meta == meta_again
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("replayed")]
    fast, slow = (int(x) for x in re.findall(r"(\d+) series-nights judged at once, (\d+) by the rule", said[-1])[0])
    return fast, slow


@pytest.mark.parametrize("seed, params", [
    (0, {}),
    (1, {"window": 4, "noise_window": 5, "min_nights": 2}),
    (2, {"noise_method": "level", "window": 5, "noise_window": 6}),
    (3, {"per_kernel": {"#1$": {"rel_min": 0.2}}}),
])
def test_the_replay_of_a_perturbed_simulator_history_equals_the_rule(tmp_path, caplog, seed, params):
    p = DecisionParams.from_mapping(params)
    fast, slow = replayed(tmp_path, perturbed(seed), p, caplog)
    if p.noise_method == "diff":
        assert fast > slow  # the arrays did the bulk of it
    else:
        assert fast == 0  # the level noise is judged by the rule itself


def fleet(series: int, nights_: int, seed: int = 0) -> pd.DataFrame:
    """Many steady series of a few apps (2 % noise), a few steps and one-night spikes, kernels
    missing on some nights, the app commit changing weekly and a driver change (a new segment)."""
    rng = np.random.default_rng(seed)
    base = np.exp(rng.uniform(np.log(1e-5), np.log(5e-3), series))
    step_at = np.where(rng.random(series) < 0.1, rng.integers(12, nights_, series), nights_ + 1)
    frames = []
    for n in range(nights_):
        t = base * np.exp(rng.normal(0, 0.02, series)) * np.where(n >= step_at, 1.2, 1.0)
        t = np.where(rng.random(series) < 0.01, t * 1.5, t)
        day = f"2026-{1 + n // 28:02d}-{1 + n % 28:02d}"
        frame = pd.DataFrame({
            "run_id": day, "run_date": day, "run_time": f"{day}T02:00:00+00:00",
            "app": [f"app{i % 4}" for i in range(series)], "device": "GPU",
            "kernel": [f"void k{i}<float>(float *)" for i in range(series)],
            "kernel_short": [f"k{i}" for i in range(series)], "grid": "(108, 1, 1)", "block": "(256, 1, 1)",
            "launches": 2, "duration_s": 2 * t, "flop": 2e9 * base / base.mean(),
            "flop_total": 2e9 * base / base.mean(), "dram_bytes": 1e8, "performance": 1e9 / t,
            "roof_pct": 50 * base / t, "ai_dram": 10.0, "bound": "memory:dram", "ridge_ratio": 0.5,
            "time_share": 0.1, "sm_clock_hz": 1.41e9, "app_commit": f"c{n // 7}",
            "driver_version": "560" if n >= nights_ * 2 // 3 else "550"})
        frames.append(frame[rng.random(series) > 0.02])
    return history_frame(pd.concat(frames, ignore_index=True))


def test_the_replay_of_a_fleet_equals_the_rule_and_judges_most_series_at_once(tmp_path, caplog):
    fast, slow = replayed(tmp_path, fleet(60, 70), DecisionParams(), caplog)
    assert fast > 8 * slow


def test_the_replay_of_bound_sides_that_wander_and_flip_equals_the_rule(tmp_path, caplog):
    """Series whose ridge ratio crosses to the compute side for one night (no flip), for two and
    more nights (a flip, which the rule judges), sits inside the band around the ridge or on the
    compute side from its first night with a ridge ratio; series whose clock moves."""
    history = fleet(40, 36, seed=4)
    night = history["run_id"].rank(method="dense").astype(int)
    series = history["kernel_short"].str[1:].astype(int)
    history.loc[(series % 4 == 1) & night.between(20, 21), "ridge_ratio"] = 1.3
    history.loc[(series % 4 == 2) & (night == 25), "ridge_ratio"] = 1.3
    history.loc[(series % 4 == 3) & (night % 3 == 0), "ridge_ratio"] = 1.05
    history.loc[(series % 8 == 5) & (night >= 30), "ridge_ratio"] = 2.0
    history.loc[series % 8 == 7, "ridge_ratio"] = np.where(night[series % 8 == 7] < 10, np.nan, 1.2)
    history.loc[(series % 8 == 6) & (night >= 28), "sm_clock_hz"] = 1.2e9  # and a clock that moves
    replayed(tmp_path, history, DecisionParams(), caplog)
    flips = pd.read_parquet(tmp_path / "store" / "_decisions", columns=["bound_flip"])["bound_flip"]
    assert (flips != "").sum() >= 10  # the two-night crossings flipped


def test_the_replay_of_fusions_splits_and_renames_equals_the_rule(tmp_path, caplog):
    c = ("gemm_bias_relu", "(96, 1, 1)", 1.9e-3)
    split = [("gemm_a", "(64, 1, 1)", 0.55e-3), ("gemm_b", "(32, 1, 1)", 0.67e-3)]
    history = app_nights([[A, B, OTHER]] * 12 + [[c, OTHER]] * 6 + [[*split, OTHER]] * 6)
    replayed(tmp_path / "fusion", history, DecisionParams(), caplog)
    before = [(cutlass("Gemm", "MmaPipelined", "128, 128"), "(64, 1, 1)", 1e-3),
              (cutlass("Gemm", "MmaPipelined", "256, 128"), "(32, 2, 1)", 2e-3)]
    after = [(cutlass("Gemm", "MmaMultistage", "128, 128"), "(64, 1, 1)", 1.12e-3),
             (cutlass("Gemm", "MmaMultistage", "256, 128"), "(32, 2, 1)", 2.36e-3)]
    replayed(tmp_path / "rename", nights([before] * 12 + [after] * 8), DecisionParams(), caplog)


def test_a_replay_after_nightly_runs_rewrites_what_they_decided(tmp_path, caplog):
    """Nights judged one at a time from the state, then a replay (a rule change, a catch-up):
    the records are what a replay from nothing writes, and what the nightly runs wrote."""
    history = fleet(24, 40, seed=3)
    store = tmp_path / "store"
    for run_id, rows in history.groupby("run_id", sort=False):
        write_partition(store, f"run={run_id}", rows.reset_index(drop=True))
        update(store, DecisionParams(), changed=[run_id])
    nightly = pd.read_parquet(store / "_decisions").sort_values(["run_id", *KEY]).reset_index(drop=True)
    update(store, DecisionParams(), replay=True)
    again = pd.read_parquet(store / "_decisions").sort_values(["run_id", *KEY]).reset_index(drop=True)
    pd.testing.assert_frame_equal(nightly, again)
    compare(store, DecisionParams())


def test_pools_packed_into_one_number_are_told_apart_as_rows_are():
    """The baseline nights of a quiet series are joined once per distinct pool: rows packed into
    one integer must be equal exactly when the rows are (random pools, with and without gaps)."""
    from roofline.nightly.replay_windows import distinct_rows

    rng = np.random.default_rng(0)
    for _ in range(300):
        width = int(rng.integers(0, 9))
        rows = []
        for start in rng.integers(0, 1200, int(rng.integers(1, 40))):
            n = int(rng.integers(0, width + 1))
            runs = list(np.cumsum(np.r_[start, rng.integers(1, 300, max(n - 1, 0))])[:n])
            rows.append(runs + [-1] * (width - n))
        runs = np.array(rows, dtype=np.int64).reshape(len(rows), width)
        which, firsts = distinct_rows(runs)
        assert len(firsts) == len({tuple(r) for r in runs.tolist()})
        assert (runs[firsts[which]] == runs).all()
    # rows told apart by their count alone, and by a gap alone
    for rows in ([[0, -1], [-1, -1]], [[3, 4, 5], [3, 5, -1], [4, 5, -1]], [[0, 255, 510], [0, 254, 510]]):
        which, firsts = distinct_rows(np.array(rows, dtype=np.int32))
        assert len(firsts) == len(set(which.tolist())) == len(rows)


def test_medians_per_group_are_the_rules_median_of_each_groups_finite_values():
    """The app total's usual clock: per group, stats.median_finite of its values in order (odd and
    even counts, NaN and infinities left out, groups with none, values of mixed signs and ties),
    to the bit."""
    from roofline.nightly.replay import _group_medians
    from roofline.nightly.stats import median_finite

    rng = np.random.default_rng(3)
    for _ in range(300):
        n, groups = int(rng.integers(0, 40)), int(rng.integers(1, 8))
        group = rng.integers(0, groups, n)
        values = rng.choice([rng.normal(1.4e9, 3e8), 0.0, -0.0, 1.0, np.nan, np.inf, -np.inf], n) \
            if rng.random() < 0.3 else rng.normal(1.4e9, 3e8, n)
        got = _group_medians(values, group, groups)
        want = np.array([median_finite(values[group == g].tolist()) for g in range(groups)])
        assert np.array_equal(got, want, equal_nan=True), (values, group)
        assert (np.signbit(got) == np.signbit(want)).all(), (values, group)


def test_text_codes_taken_as_stored_are_those_pandas_factorize_gives():
    """A text column's codes in the order values first appear: the stored dictionary indices where
    they are in that order already, else pandas.factorize; the same codes and values either way."""
    from roofline.nightly.replay import _first_appearance

    rng = np.random.default_rng(1)
    cases = [np.array(c, dtype=np.int32) for c in ([], [0], [0, 0, 1, 0, 2, 1], [1, 0, 2], [0, 2, 1], [0, 1, 1, 3])]
    for _ in range(300):
        values = rng.integers(0, int(rng.integers(1, 6)), int(rng.integers(1, 40)))
        cases += [values.astype(np.int32), pd.factorize(values)[0].astype(np.int32)]
    taken_as_stored = 0
    for indices in cases:
        codes, used = _first_appearance(indices)
        want_codes, want_used = pd.factorize(indices)
        assert codes.tolist() == want_codes.tolist() and used.tolist() == want_used.tolist(), indices
        taken_as_stored += codes is indices
    assert 0 < taken_as_stored < len(cases)


def test_combinations_of_codes_are_numbered_as_they_first_appear_even_past_64_bits():
    """Rows' combinations of codes get one number each, in the order they first appear (as
    pandas.factorize numbers the tuples), also where the columns' value counts multiplied pass 2**62
    and the combination is numbered again on the way."""
    from roofline.nightly.replay import _combinations

    rng = np.random.default_rng(2)
    for values in ([3, 1, 4], [1 << 40, 1 << 30, 5], [7]):
        codes = [rng.integers(0, min(v, 3), 200) for v in values]
        group, first = _combinations(list(zip(codes, values, strict=True)), 200)
        want, _ = pd.factorize(pd.Series(list(zip(*codes, strict=True))))
        assert group.tolist() == want.tolist()
        assert first.tolist() == [int(np.flatnonzero(want == g)[0]) for g in range(want.max() + 1)]
    # codes that, multiplied out without numbering again, would wrap onto another combination
    wraps = [np.array([0, 1 << 32, 0, 1 << 32]), np.zeros(4, dtype=np.int64)]
    group, first = _combinations([(wraps[0], 1 << 33), (wraps[1], 1 << 32)], 4)
    assert group.tolist() == [0, 1, 0, 1] and first.tolist() == [0, 1]
    group, first = _combinations([], 4)
    assert group.tolist() == [0, 0, 0, 0] and first.tolist() == [0]


def test_history_read_in_parts_is_coded_as_pandas_codes_its_rows():
    """Hand-made parts, read one after another into one set of columns: text whose dictionaries
    differ from part to part (new values, another order, ``large_string`` values, plain text) is
    coded in the order its values first appear, as pandas.factorize codes every row at once, and a
    number column is the parts' values in order."""
    import pyarrow as pa

    from roofline.nightly.replay import _Columns

    kernel = [["a", "b", "a"], ["c", "a", "c"], ["c", "a", "c"], ["b", "d"], ["d"]]
    parts = [pa.table({"kernel": pa.array(kernel[0]).dictionary_encode(), "launches": [1, 2, 3]}),
             pa.table({"kernel": pa.DictionaryArray.from_arrays(pa.array([0, 1, 0], pa.int32()),
                                                                pa.array(["c", "a"], pa.large_string())),
                       "launches": [4, 5, 6]}),
             pa.table({"kernel": pa.array(kernel[2]).dictionary_encode(), "launches": [7, 8, 9]}),
             pa.table({"kernel": pa.array(kernel[3]), "launches": [10, 11]}),
             pa.table({"kernel": pa.chunked_array([pa.array(["d"]).dictionary_encode()]), "launches": [12]})]
    rows = [value for part in kernel for value in part]
    want_codes, want_values = pd.factorize(np.array(rows, dtype=object))
    for said in (len(rows), 5):  # the row count the reader was told, or fewer than the parts hold
        columns = _Columns(iter(parts), said, ["kernel", "launches", "absent"])
        codes, objects = columns.coded["kernel"]
        assert columns.n == len(rows) and columns.names == ["kernel", "launches"]
        assert codes.tolist() == want_codes.tolist()
        assert objects.tolist() == [*want_values.tolist(), None]
        assert columns.plain["launches"].tolist() == list(range(1, 13))
        assert columns.arrow(["kernel"])["kernel"].to_pylist() == rows


def test_text_codes_grow_wider_as_a_column_reads_more_values():
    """The codes of a text column start one byte wide and are made wider as parts bring more
    values (past 127, then past 32,767), the rows read before copied over: the codes are still
    those pandas.factorize gives every row at once, and each column's are as narrow as its values
    allow."""
    import pyarrow as pa

    from roofline.nightly.replay import _Columns

    rng = np.random.default_rng(3)
    names = np.array([f"kernel_{j}" for j in range(40_000)], dtype=object)
    kernel = [names[rng.integers(0, size, size)] for size in (50, 100, 1_000, 30_000)]
    kernel += [names[rng.permutation(len(names))], names[rng.integers(0, len(names), 5_000)]]  # every value
    parts = [pa.table({"kernel": pa.array(rows.tolist()).dictionary_encode(),
                       "app": pa.array(["x", "y"] * (len(rows) // 2)).dictionary_encode()}) for rows in kernel]
    rows = np.concatenate(kernel)
    want_codes, want_values = pd.factorize(rows)
    for said in (len(rows), 10):
        columns = _Columns(iter(parts), said, ["kernel", "app"])
        codes, objects = columns.coded["kernel"]
        assert codes.tolist() == want_codes.tolist()
        assert objects.tolist() == [*want_values.tolist(), None]
        assert codes.dtype == np.int32 and columns.coded["app"][0].dtype == np.int8
        assert columns.arrow(["kernel"])["kernel"].to_pylist() == rows.tolist()


def test_a_series_spiking_every_third_night_is_replayed_as_the_rule_judges_it(tmp_path, caplog):
    """Hand-made: a lone +40 % spike every third night, 90 nights: more outliers among its nights
    than the arrays keep a series for (it goes on as the rule's own state), the others quiet."""
    spiky = [1e-3 * WIGGLE[n % len(WIGGLE)] * (1.4 if n % 3 == 2 and n > 10 else 1.0) for n in range(90)]
    quiet = [2e-3 * WIGGLE[(n + 3) % len(WIGGLE)] for n in range(90)]
    history = pd.concat([series(spiky, kernel="spiky<float>&"), series(quiet, kernel="quiet<float>&")],
                        ignore_index=True).sort_values("run_id", kind="stable")
    replayed(tmp_path, history_frame(history.reset_index(drop=True)), DecisionParams(), caplog)


def test_a_store_of_few_nights_is_replayed_night_by_night(tmp_path, caplog, monkeypatch):
    """A first night (every series new) costs the arrays about three times the rule's own steps,
    so a store of fewer than ARRAY_REPLAY_MIN_NIGHTS nights is stepped night by night; from that
    many on, the arrays judge it. Records are the rule's either way."""
    monkeypatch.setattr(decide_state, "ARRAY_REPLAY_MIN_NIGHTS", 8)
    history = fleet(20, 13)  # steps from night 12 on: none in eight nights
    days = sorted(history["run_id"].unique())
    history = history[history["run_id"].isin(days[:8])]
    first_seven = history[history["run_id"].isin(days[:7])]
    for name, rows in (("seven", first_seven), ("eight", history)):
        store = stored(tmp_path / name, rows)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="roofline.nightly.state"):
            assert update(store, DecisionParams(), replay=True).replayed
        compare(store, DecisionParams())
        by_arrays = [r for r in caplog.records if r.getMessage().startswith("replayed")]
        assert bool(by_arrays) == (name == "eight"), name


def test_a_replay_of_a_store_with_a_night_of_an_older_version_equals_the_rule(tmp_path, caplog):
    """A night stored before the applied roofs were renamed: the nights are read through read_runs
    (a table per stretch of nights with one schema), not as stored, and judged the same."""
    history = fleet(30, 14)
    store = stored(tmp_path / "store", history)
    part = store / f"run={sorted(history['run_id'].unique())[5]}" / "part.parquet"
    old = pq.read_table(part)
    old.rename_columns(["peak_flops" if n == "roof_flops" else n for n in old.column_names]).to_pandas().to_parquet(
        part, index=False)
    with caplog.at_level(logging.INFO, logger="roofline.nightly.state"):
        assert update(store, DecisionParams(), replay=True).replayed
    compare(store, DecisionParams())
    assert any(r.getMessage().startswith("replayed") for r in caplog.records)


def test_a_store_of_more_rows_than_the_arrays_may_hold_is_replayed_night_by_night(tmp_path, caplog, monkeypatch):
    """The arrays hold every night's rows at once; beyond ARRAY_REPLAY_MAX_ROWS a replay steps
    night by night (one night in memory) and says so. Records are the rule's either way."""
    history = fleet(20, 14)
    for limit, by_arrays in ((len(history), True), (len(history) - 1, False)):
        monkeypatch.setattr(decide_state, "ARRAY_REPLAY_MAX_ROWS", limit)
        store = stored(tmp_path / str(limit), history)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="roofline.nightly.state"):
            assert update(store, DecisionParams(), replay=True).replayed
        compare(store, DecisionParams())
        said = [r.getMessage() for r in caplog.records]
        assert any(m.startswith("replayed") for m in said) == by_arrays
        assert any(f"{len(history)} stored rows: judged night by night" in m for m in said) != by_arrays


def test_nights_stamped_at_several_times_take_the_place_the_rule_gives_them(tmp_path, caplog):
    """A night whose apps were appended hours apart, and one whose app carries the date before:
    the replay reads each night's place (its least date and time) and first date from the rows
    read, as the rule reads them night by night."""
    history = fleet(20, 14)
    days = sorted(history["run_id"].unique())
    history.loc[(history["run_id"] == days[4]) & (history["app"] == "app1"), "run_time"] = f"{days[4]}T09:00:00+00:00"
    history.loc[(history["run_id"] == days[9]) & (history["app"] == "app2"), "run_date"] = days[8]
    replayed(tmp_path, history, DecisionParams(), caplog)
    store = tmp_path / "store"
    files = run_files(store)
    rows = read_runs_table(store, list(files), ["run_id", "run_date", "run_time", "app"])
    keys, first_dates, sizes = decide_state._run_stamps(rows)
    assert keys == {run_id: key for run_id, key in decide_state._keys(store, files)}
    assert keys[days[9]][0] == days[8]
    by_night = history.groupby("run_id", sort=False)
    assert first_dates == by_night["run_date"].first().to_dict()
    assert sizes == by_night.size().to_dict()
