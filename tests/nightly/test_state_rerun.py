"""A rerun of tonight that changed some apps: only their series are judged again, and the stored
records and state equal those of judging the whole night again (the reference: the same store with
the partial rerun turned off), on simulated fleets of several apps."""

import json
import os
import shutil

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from nightly.test_state import nights_of, perturbed
from roofline.nightly import state
from roofline.nightly.params import DecisionParams
from roofline.nightly.state import update
from roofline.nightly.state_file import STATE_META_KEY
from roofline.nightly.store import append_run, read_decisions

APPS = 4


def fleet(seed: int, nights: int = 46) -> pd.DataFrame:
    """The perturbed simulator history (missing nights, new and vanished kernels, a night-level
    shift) spread over APPS apps by kernel number."""
    h = perturbed(seed, nights=nights, kernels=24)
    k = h["kernel"].str.extract(r"#(\d+)$")[0].astype(int)
    return h.assign(app=[f"app{i % APPS}" for i in k])


def _stored(store) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Every night's decisions, the newest state's rows and meta (the decisions file's stamp left
    out: the two stores wrote theirs at different times)."""
    n, path = state._states(store)[0]
    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[STATE_META_KEY])
    meta.get(state.TONIGHT, {}).pop("decisions", None)
    meta["runs"] = [[*r[:3], r[4]] for r in meta["runs"]]  # each night's file stamp: this store's
    return read_decisions(store), table.replace_schema_metadata(None).to_pandas(), {"n": n, **meta}


def _rerun(store, run_id, kernels, context, params, partial: bool, monkeypatch):
    append_run(store, run_id, kernels, context)
    calls = []
    rerun_changed_apps = state.rerun_changed_apps

    def spy(*args):
        calls.append(rerun_changed_apps(*args) if partial else None)
        return calls[-1]

    monkeypatch.setattr(state, "rerun_changed_apps", spy)
    done = update(store, params, changed=[run_id])
    monkeypatch.undo()
    return done, calls


def _variants(kernels: pd.DataFrame, rng) -> dict[str, pd.DataFrame]:
    """Reruns of a night that change some apps' rows: a slower app, a kernel gone from one app and
    one more in another, an app gone, an app added, nothing changed."""
    slow = kernels.assign(duration_s=np.where(kernels["app"] == "app1", kernels["duration_s"] * 1.6,
                                              kernels["duration_s"]))
    extra = kernels[kernels["app"] == "app2"].iloc[:1].assign(kernel="added_kernel", kernel_short="added")
    moved = pd.concat([kernels.drop(kernels.index[kernels["app"] == "app3"][:1]), extra], ignore_index=True)
    new_app = kernels[kernels["app"] == "app0"].assign(app="app9")
    first_app = kernels[kernels["app"] == "app0"].iloc[:1].assign(kernel="another_kernel", kernel_short="another")
    return {
        "the first app gains a kernel (every later record moves)": pd.concat([kernels, first_app], ignore_index=True),
        "one app slower": slow,
        "a kernel gone here, one added there": moved,
        "an app gone": kernels[kernels["app"] != "app2"].reset_index(drop=True),
        "an app added": pd.concat([kernels, new_app], ignore_index=True),
        "nothing changed": kernels,
        "one app's launches jittered": kernels.assign(duration_s=kernels["duration_s"] * np.where(
            kernels["app"] == "app0", rng.uniform(0.97, 1.03, len(kernels)), 1.0)),
    }


@pytest.mark.parametrize("seed, params, reruns", [
    (0, {}, (0, 9, 29, -1)),  # the first night, a quiet one, the night-level shift, the last
    (1, {"window": 4, "noise_window": 5, "min_nights": 2}, (17, 38)),  # short windows: a trimmed state
])
def test_a_rerun_of_some_apps_equals_judging_the_whole_night(tmp_path, monkeypatch, seed, params, reruns):
    p = DecisionParams.from_mapping(params)
    inputs = nights_of(fleet(seed))
    base = tmp_path / "base"
    partial_used = tried = 0
    for n, (run_id, kernels, context) in enumerate(inputs):
        if n in {r % len(inputs) for r in reruns}:
            # a lone spike tonight in a later app: its verdict waits for tomorrow, and its record's
            # place, kept in the state, moves when an app before it changes
            spiked = kernels.index[kernels["app"] == "app3"][-1:]
            kernels.loc[spiked, "duration_s"] *= 1.5
        append_run(base, run_id, kernels, context)
        update(base, p, changed=[run_id])
        if n not in {r % len(inputs) for r in reruns}:
            continue
        rng = np.random.default_rng(n)
        for what, rerun in _variants(kernels, rng).items():
            ours, reference = tmp_path / "ours", tmp_path / "reference"
            for copy in (ours, reference):
                shutil.rmtree(copy, ignore_errors=True)
                shutil.copytree(base, copy, copy_function=os.link)  # each file's inode kept, as in place
            done, calls = _rerun(ours, run_id, rerun, context, p, True, monkeypatch)
            want, _ = _rerun(reference, run_id, rerun, context, p, False, monkeypatch)
            assert (done.order, done.judged) == (want.order, want.judged), what
            a, b = _stored(ours), _stored(reference)
            pd.testing.assert_frame_equal(a[0], b[0], check_exact=True, obj=f"night {n}, {what}: decisions")
            pd.testing.assert_frame_equal(a[1], b[1], check_exact=True, obj=f"night {n}, {what}: state")
            assert a[2] == b[2], what
            partial_used += calls == [done]
            tried += 2
            # and a second rerun, from the state the first one left, back to the night's own rows
            done, calls = _rerun(ours, run_id, kernels, context, p, True, monkeypatch)
            want, _ = _rerun(reference, run_id, kernels, context, p, False, monkeypatch)
            a, b = _stored(ours), _stored(reference)
            pd.testing.assert_frame_equal(a[0], b[0], check_exact=True, obj=f"night {n}, {what} undone")
            pd.testing.assert_frame_equal(a[1], b[1], check_exact=True, obj=f"night {n}, {what} undone: state")
            assert a[2] == b[2]
            partial_used += calls == [done]
    # most took the partial path; the others met the night-level rule (a shifted night; one app of
    # four 1.6x slower is a quarter of the kernels moving at once)
    assert partial_used >= 0.6 * tried


def test_a_rerun_after_one_killed_before_its_state_judges_the_whole_night(tmp_path, monkeypatch):
    """The partial rerun writes tonight's records, then the state: killed between the two, the
    next rerun finds records newer than its state and judges the whole night."""
    inputs = nights_of(fleet(0))[:12]
    p = DecisionParams()
    store, reference = tmp_path / "ours", tmp_path / "reference"
    for run_id, kernels, context in inputs:
        for copy in (store, reference):
            append_run(copy, run_id, kernels, context)
            update(copy, p, changed=[run_id])
    run_id, kernels, context = inputs[-1]
    slower = kernels.assign(duration_s=np.where(kernels["app"] == "app1", kernels["duration_s"] * 1.6,
                                                kernels["duration_s"]))
    append_run(store, run_id, slower, context)
    real = state.write_partition

    def killed(parent, name, data):
        raise KeyboardInterrupt  # the process dies between the records and the state

    monkeypatch.setattr(state, "write_partition", killed)
    with pytest.raises(KeyboardInterrupt):
        update(store, p, changed=[run_id])
    monkeypatch.setattr(state, "write_partition", real)
    append_run(store, run_id, kernels, context)  # the night's own rows again
    used, calls = _rerun(store, run_id, kernels, context, p, True, monkeypatch)
    assert calls == [None]  # declined: the records are newer than the state
    a, b = _stored(store), _stored(reference)
    pd.testing.assert_frame_equal(a[0], b[0], check_exact=True)
    pd.testing.assert_frame_equal(a[1], b[1], check_exact=True)
