"""The nightly decision from the stored state: equal to a full replay night by night, idempotent
reruns, replays when the rule changes, crash safety, and a cost that does not read the past."""

import json
import shutil

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from nightly.test_track import SIM  # the simulator, loaded once
from roofline.nightly import state as decide_state
from roofline.nightly import track
from roofline.nightly.engine import decide_all
from roofline.nightly.params import DecisionParams
from roofline.nightly.state import KEEP, STATE_DIR, update
from roofline.nightly.store import append_run, history_frame, read_decisions, read_history
from roofline.pages.trends import trends_html
from roofline.tables.schemas import KERNEL_KEY

KEY = [*KERNEL_KEY, "clock_control", "cache_control"]




def perturbed(seed: int, nights: int = 46, kernels: int = 24) -> pd.DataFrame:
    """A simulated history with what a fleet does to a series: missing nights, kernels that appear
    late, vanish or come back, a change of counting conventions on some, whole-night shifts with
    the app commit unchanged (the night-level rule), spikes and steps from the simulator."""
    history, _ = SIM.simulate(seed=seed, nights=nights, kernels=kernels)
    rng = np.random.default_rng(1000 + seed)
    h = history.copy()
    night = h["run_id"].map({r: i for i, r in enumerate(sorted(h["run_id"].unique()))})
    k = h["kernel"].str.extract(r"#(\d+)$")[0].astype(int)
    h["app_commit"] = np.where(night < nights // 2, "c1", "c2")
    shifted = night.isin([nights // 2 + 6, nights // 2 + 7])
    h.loc[shifted, "duration_s"] *= 1.3
    h["convention"] = np.where((night >= 20) & (k % 3 == 0), "2026.12", "")
    keep = rng.random(len(h)) > 0.07  # missing nights
    keep &= ~((k % 7 == 1) & (night < 15))  # new kernels
    keep &= ~((k % 7 == 2) & (night >= 25))  # vanished kernels
    keep &= ~((k % 7 == 3) & (night >= 18) & (night < 33))  # gone for a while, then back
    return history_frame(h[keep.to_numpy()])


def nights_of(history: pd.DataFrame):
    return list(SIM.nightly_inputs(history))


def compare(store, params) -> pd.DataFrame:
    """The stored decisions against a full replay of the stored history: equal, every column."""
    replayed = decide_all(read_history(store), params)
    stored = read_decisions(store)
    assert len(stored) == len(replayed)
    a = replayed.sort_values(["run_id", *KEY], kind="stable").reset_index(drop=True)
    b = stored.sort_values(["run_id", *KEY], kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(a.astype(object), b.astype(object), check_dtype=False,
                                  check_exact=True)
    return replayed


@pytest.mark.parametrize("seed, params", [
    (0, {}),
    (1, {"window": 4, "noise_window": 5, "min_nights": 2}),  # short windows: the state is trimmed early
    (2, {"noise_method": "level", "window": 5, "noise_window": 6}),
])
def test_nightly_decisions_from_the_state_equal_a_full_replay(tmp_path, seed, params):
    p = DecisionParams.from_mapping(params)
    history = perturbed(seed)
    inputs = nights_of(history)
    rng = np.random.default_rng(seed)
    first_seen = {}
    for n, (run_id, kernels, context) in enumerate(inputs):
        if n in (11, 30):  # a first run of the night with other numbers, replaced by a rerun
            wrong = kernels.assign(duration_s=kernels["duration_s"] * rng.uniform(0.6, 1.6, len(kernels)))
            append_run(tmp_path, run_id, wrong.iloc[3:], context)
            assert update(tmp_path, p, changed=[run_id]).replayed == (n == 0)
        append_run(tmp_path, run_id, kernels, context)
        if n == 21:  # appended by someone else: judged with the next night
            continue
        done = update(tmp_path, p, changed=[run_id])
        assert done.replayed == (n == 0), done.reason
        assert done.judged == ([inputs[n - 1][0], run_id] if n == 22 else [run_id])
        tonight = read_decisions(tmp_path, [run_id])
        first_seen[run_id] = tonight.set_index(KEY)["label"]
    replayed = compare(tmp_path, p)
    # what each night decided then is what a replay of the final history decides for it
    for run_id, labels in first_seen.items():
        again = replayed[replayed["run_id"] == run_id].set_index(KEY)["label"]
        pd.testing.assert_series_equal(labels.astype(object), again.astype(object), check_names=False)
    labels = set(replayed["label"])
    assert {"missing", "new", "environment_change", "outlier", "regression"} <= labels
    assert replayed["note"].str.contains("environment shift").any()  # the night-level rule ran


def spiky(nights: int, kernels: int = 3, commit: str = "same") -> pd.DataFrame:
    """Steady kernels (+-1 % wiggle), kernel 0 with a lone +30 % spike on the second-to-last night."""
    wiggle = [1.0, 1.01, 0.99, 1.005, 0.995]
    rows = []
    for n in range(nights):
        day = f"2026-02-{n + 1:02d}"
        for k in range(kernels):
            t = 1e-3 * (k + 1) * wiggle[(n + k) % 5] * (1.3 if k == 0 and n == nights - 2 else 1.0)
            rows.append({"run_id": day, "run_date": day, "app": "app", "device": "GPU",
                         "kernel": f"k{k}", "kernel_short": f"k{k}", "grid": "(1, 1, 1)",
                         "block": "(64, 1, 1)", "launches": 1, "duration_s": t, "flop": 1e9,
                         "flop_total": 1e9, "dram_bytes": 1e8, "bound": "memory:dram",
                         "time_share": 0.3, "app_commit": commit})
    return history_frame(pd.DataFrame(rows))


def _store_from(tmp_path, history, params: DecisionParams | None = None):
    params = params or DecisionParams()
    for run_id, kernels, context in nights_of(history):
        append_run(tmp_path, run_id, kernels, context)
        update(tmp_path, params, changed=[run_id])


def _state_rows(tmp_path):
    """The newest state: its number of nights and its rows (NaN compares equal in a frame)."""
    n, path = decide_state._states(tmp_path)[0]
    return n, pq.read_table(path).replace_schema_metadata(None).to_pandas()


def test_a_rerun_of_tonight_decides_what_the_first_run_decided(tmp_path):
    history = spiky(14)
    inputs = nights_of(history)
    _store_from(tmp_path, history[history["run_id"] < inputs[-1][0]])
    run_id, kernels, context = inputs[-1]
    append_run(tmp_path, run_id, kernels, context)
    update(tmp_path, DecisionParams(), changed=[run_id])
    first = read_decisions(tmp_path)
    n, state = _state_rows(tmp_path)
    spike_night = inputs[-2][0]
    revised = first[(first["run_id"] == spike_night) & (first["kernel"] == "k0")]["revised_label"]
    assert revised.tolist() == ["outlier"]  # tonight's return revised last night's spike
    # A rerun without k0: last night's spike has no verdict yet, as a replay of that history says.
    append_run(tmp_path, run_id, kernels[kernels["kernel"] != "k0"], context)
    assert not update(tmp_path, DecisionParams(), changed=[run_id]).replayed
    compare(tmp_path, DecisionParams())
    # The first night's rows again: everything as after the first run, the state included.
    for _ in range(2):
        append_run(tmp_path, run_id, kernels, context)
        assert not update(tmp_path, DecisionParams(), changed=[run_id]).replayed
        pd.testing.assert_frame_equal(read_decisions(tmp_path), first)
        again_n, again = _state_rows(tmp_path)
        assert again_n == n
        pd.testing.assert_frame_equal(again, state)
    assert len(list((tmp_path / "_decisions").glob("run=*"))) == 14


def test_changed_parameters_or_rule_replay_every_night(tmp_path, monkeypatch):
    history = spiky(12)
    _store_from(tmp_path, history)
    other = DecisionParams(rel_min=0.2)
    done = update(tmp_path, other)
    assert done.replayed and "parameters or the rule changed" in done.reason
    assert done.judged == sorted(history["run_id"].unique())
    compare(tmp_path, other)
    assert not update(tmp_path, other).replayed and update(tmp_path, other).judged == []
    assert update(tmp_path, other, replay=True).reason == "asked for (--replay)"
    monkeypatch.setattr(decide_state, "RULE_VERSION", "track-99")  # a new rule version
    assert update(tmp_path, other).replayed
    compare(tmp_path, other)
    monkeypatch.setattr(decide_state, "_CODE", "edited")  # the rule's code changed
    assert update(tmp_path, other).replayed and not update(tmp_path, other).replayed


def test_a_night_that_sorts_before_the_last_judged_one_replays(tmp_path):
    history = spiky(10)
    late = history[history["run_id"] == "2026-02-05"]
    _store_from(tmp_path, history[history["run_id"] != "2026-02-05"])
    run_id, kernels, context = nights_of(late)[0]
    append_run(tmp_path, run_id, kernels, context)
    done = update(tmp_path, DecisionParams(), changed=[run_id])
    assert done.replayed and "sorts before" in done.reason
    compare(tmp_path, DecisionParams())


def test_a_run_killed_before_its_state_was_written_is_judged_again(tmp_path, monkeypatch):
    history = spiky(12)
    inputs = nights_of(history)
    _store_from(tmp_path, history[history["run_id"] < inputs[-1][0]])
    run_id, kernels, context = inputs[-1]
    append_run(tmp_path, run_id, kernels, context)
    real = decide_state.write_partition

    def killed(parent, name, data):
        if str(parent).endswith(STATE_DIR):
            raise KeyboardInterrupt  # the process dies between the decisions and the state
        return real(parent, name, data)

    monkeypatch.setattr(decide_state, "write_partition", killed)
    with pytest.raises(KeyboardInterrupt):
        update(tmp_path, DecisionParams(), changed=[run_id])
    monkeypatch.setattr(decide_state, "write_partition", real)
    (tmp_path / STATE_DIR / ".tmp-999999999-x").mkdir()  # a dead writer's temp dir
    done = update(tmp_path, DecisionParams())  # the next run, without being told
    assert not done.replayed and done.judged == [run_id]
    compare(tmp_path, DecisionParams())
    assert not (tmp_path / STATE_DIR / ".tmp-999999999-x").exists()


def test_tonight_reads_tonight_only_and_the_state_stays_bounded(tmp_path, monkeypatch):
    history = perturbed(3, nights=44, kernels=16)
    inputs = nights_of(history)
    _store_from(tmp_path, history[history["run_id"] < inputs[-1][0]])
    read = []
    real_read, real_table = decide_state.read_run, pq.read_table
    monkeypatch.setattr(decide_state, "read_run", lambda s, r, c=None: read.append(r) or real_read(s, r, c))

    def table(path, *args, **kwargs):
        if "run=" in str(path) and "_decisions" not in str(path):
            read.append(str(path))
        return real_table(path, *args, **kwargs)

    monkeypatch.setattr(pq, "read_table", table)
    run_id, kernels, context = inputs[-1]
    append_run(tmp_path, run_id, kernels, context)
    assert update(tmp_path, DecisionParams(), changed=[run_id]).judged == [run_id]
    assert {r.split("run=")[-1].split("/")[0] for r in read} == {run_id}
    _, state = _state_rows(tmp_path)
    p = DecisionParams()
    assert len(state) == history.groupby(KEY).ngroups + history["app"].nunique()  # and each app's total
    longest = state["n.run_id"].map(len).max()
    assert longest <= p.noise_window + p.window + 2
    assert len(decide_state._states(tmp_path)) == KEEP
    meta = json.loads(pq.read_schema(decide_state._states(tmp_path)[0][1]).metadata[b"roofline_state"])
    assert [r[0] for r in meta["runs"]] == [r for r, _, _ in inputs]


def test_track_judges_from_the_state_and_the_page_shows_a_window(tmp_path):
    history = spiky(12)
    inputs = nights_of(history)
    for run_id, kernels, context in inputs:
        decisions, summary = track.track(kernels, tmp_path, run_id, context, DecisionParams(),
                                         trend_nights=5)
    assert sorted(decisions["run_id"].unique()) == [r for r, _, _ in inputs[-5:]]
    tonight = decisions[decisions["run_id"] == inputs[-1][0]]
    assert tonight["rule_version"].notna().all() and summary["kernels"] == 3
    assert summary["counts"]["outlier"] == 1 and summary["context"]["app_commit"] == "same"
    page = trends_html(decisions, summary, vega="assets/vega-bundle.js")
    assert "5 nights shown" in page
    again, _ = track.track(kernels.iloc[:0], tmp_path, "later", {}, DecisionParams(), trend_nights=5)
    assert sorted(again["run_id"].unique()) == [r for r, _, _ in inputs[-5:]]
    compare(tmp_path, DecisionParams())


def test_the_judged_order_a_later_job_reads_is_the_one_update_left(tmp_path):
    """judged_order (what the trends page's job reads instead of judging again) equals update's
    order after every night, a rerun, a night removed from the store by hand and a replay."""
    history = spiky(8)
    inputs = nights_of(history)
    assert decide_state.judged_order(tmp_path) == []
    for run_id, kernels, context in inputs:
        append_run(tmp_path, run_id, kernels, context)
        done = update(tmp_path, DecisionParams(), changed=[run_id])
        assert decide_state.judged_order(tmp_path) == done.order
    nights = [r for r, _, _ in inputs]
    assert done.order == nights
    run_id, kernels, context = inputs[-1]
    append_run(tmp_path, run_id, kernels.iloc[1:], context)  # a rerun of tonight
    assert decide_state.judged_order(tmp_path) == nights[:-1]  # the last state that fits: before tonight
    assert update(tmp_path, DecisionParams(), changed=[run_id]).order == decide_state.judged_order(tmp_path)
    shutil.rmtree(tmp_path / f"run={run_id}")  # the newest state no longer fits the store
    done = update(tmp_path, DecisionParams())
    assert done.order == decide_state.judged_order(tmp_path) == nights[:-1]
    done = update(tmp_path, DecisionParams(), replay=True)
    assert done.replayed and decide_state.judged_order(tmp_path) == done.order == nights[:-1]
