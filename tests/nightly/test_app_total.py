"""Each app's total GPU time as a series, and time that moved between kernels (issue #46): a fusion,
a split, a rename with the app's total flat is ``moved``, not ``missing`` and ``new``; with the total
risen, the total's regression comes first and names the kernels that carry it; work per launch that
moved with the time flat is said with its size and first night, and is no regression. Every nightly
history here is hand-made."""

import json

import pandas as pd
import pytest

from nightly.test_track import night, series, steady
from roofline.nightly.app_total import APP_TOTAL, describe
from roofline.nightly.engine import decide_all
from roofline.nightly.params import DecisionParams
from roofline.nightly.state import update
from roofline.nightly.store import append_run, history_frame, read_decisions
from roofline.nightly.summary import summarize
from roofline.pages.trends import findings_table
from roofline.status import EXIT_REGRESSION, build_status, check

WOBBLE = (1.0, 1.01, 0.99, 1.005)  # night-to-night wobble of the whole app, hand-made
BEFORE = 10  # nights before the change


def app_nights(kernels_per_night: list[list[tuple[str, str, float]]], commits: list[str] | None = None) -> pd.DataFrame:
    """A hand-made history of one app: per night, (short name, grid, time per launch [s]) of each
    kernel (one launch each; the full name is ``void <short>(float *)``); the app commit changes on
    the night of the change (``commits``: per night)."""
    rows = []
    for n, kernels in enumerate(kernels_per_night):
        commit = commits[n] if commits else ("c1" if n < BEFORE else "c2")
        for short, grid, t in kernels:
            rows.append({"run_id": night(n), "run_date": night(n), "app": "app", "device": "GPU",
                         "kernel": f"void {short}(float *)", "kernel_short": short, "grid": grid,
                         "block": "(256, 1, 1)", "launches": 1, "duration_s": t * WOBBLE[n % 4],
                         "flop": 1e9, "flop_total": 1e9, "dram_bytes": 1e8, "bound": "memory:dram",
                         "time_share": 0.3, "app_commit": commit})
    return history_frame(pd.DataFrame(rows))


def tonight(decisions: pd.DataFrame, n: int) -> pd.DataFrame:
    return decisions[decisions["run_id"] == night(n)].set_index("kernel")


OTHER = ("norm", "(40, 1, 1)", 0.4e-3)  # a kernel the change leaves alone
A, B = ("gemm_bias", "(64, 1, 1)", 1.0e-3), ("relu", "(128, 1, 1)", 0.6e-3)


def fused(c_time: float) -> pd.DataFrame:
    """A and B (1.0 + 0.6 ms) fused into C (``c_time``) on night 10, beside an unchanged kernel."""
    c = ("gemm_bias_relu", "(96, 1, 1)", c_time)  # another grid: nothing matches it to A or B
    return app_nights([[A, B, OTHER]] * BEFORE + [[c, OTHER]] * 2)


def test_a_fusion_with_the_app_total_flat_is_moved_not_missing_and_new():
    d = decide_all(fused(1.55e-3))  # 2.0 ms -> 1.95 ms x 0.99
    t = tonight(d, BEFORE)
    said = "moved: gemm_bias and relu fused into gemm_bias_relu, app total −3.5 %"
    for kernel in ("void gemm_bias(float *)", "void relu(float *)", "void gemm_bias_relu(float *)"):
        assert t.loc[kernel, "label"] == "moved" and t.loc[kernel, "note"] == said
    assert t.loc[APP_TOTAL, "label"] == "unchanged" and t.loc[APP_TOTAL, "ratio"] == pytest.approx(0.965, abs=0.002)
    assert t.loc["void norm(float *)", "label"] == "unchanged"
    summary = summarize(d[d["run_id"] == night(BEFORE)], {"run_id": night(BEFORE)}, DecisionParams())
    assert summary["counts"]["missing"] == summary["counts"]["new"] == summary["counts"]["regression"] == 0
    assert summary["counts"]["moved"] == 3 and not summary["alert"]
    assert {f["note"] for f in summary["findings"]} == {said}
    # the next night: A and B are not missing, C starts its own history
    after = tonight(d, BEFORE + 1)
    assert sorted(after["label"]) == ["insufficient_data", "unchanged", "unchanged"]
    assert after.loc["void gemm_bias_relu(float *)", "label"] == "insufficient_data"


def test_a_fusion_that_costs_fifteen_percent_is_the_app_totals_regression_first(tmp_path):
    d = decide_all(fused(1.9e-3))  # 2.0 ms -> 2.3 ms: +15 % (x 0.99 tonight: +13.9 %)
    night_ = d[d["run_id"] == night(BEFORE)]
    summary = summarize(night_, {"run_id": night(BEFORE)}, DecisionParams())
    first = summary["findings"][0]
    assert first["kernel"] == APP_TOTAL and first["label"] == "regression"
    assert first["change_pct"] == pytest.approx(13.85, abs=0.1)
    assert first["note"] == ("app total +13.8 %, carried by: gemm_bias and relu fused into gemm_bias_relu "
                             "(+273 µs per night)")
    assert summary["counts"]["regression"] == summary["app_total_regressions"] == 1
    assert summary["counts"]["missing"] == summary["counts"]["new"] == 0 and summary["counts"]["moved"] == 3
    assert {f["note"] for f in summary["findings"][1:]} == {
        "moved: gemm_bias and relu fused into gemm_bias_relu, app total +13.8 %"}
    # the next night at the new level: still the app's regression, the fused kernel without a baseline yet
    later = tonight(d, BEFORE + 1).loc[APP_TOTAL]
    assert later["label"] == "regression"
    assert later["note"] == ("app total +15.0 %, carried by: kernels too new to judge: "
                             "gemm_bias_relu (1.91 ms per night)")
    # the gate: exit 3, as for a kernel's regression
    (tmp_path / "regressions.json").write_text(json.dumps(summary))
    (tmp_path / "status.json").write_text(json.dumps(build_status([], ["app"])))
    assert check(tmp_path / "status.json", tmp_path / "regressions.json") == EXIT_REGRESSION
    # and the trends page's findings table lists it first, with its note
    table = findings_table(summary["findings"])
    assert table.index("app | app total") < table.index("app | gemm_bias_relu")
    assert "carried by: gemm_bias and relu fused into gemm_bias_relu" in table


def test_a_split_followed_by_its_launch_is_moved_and_judged_from_tonight_on():
    """A (1.2 ms) split into a kernel that keeps A's launch configuration (so it is followed, and
    would otherwise read as a -54 % improvement against A's baseline) and a new one."""
    a = ("attention", "(512, 1, 1)", 1.2e-3)
    parts = [("attention_partial", "(512, 1, 1)", 0.55e-3), ("attention_combine", "(8, 1, 1)", 0.67e-3)]
    d = decide_all(app_nights([[a, OTHER]] * BEFORE + [[*parts, OTHER]] * 4))
    t = tonight(d, BEFORE)
    said = "moved: attention split into attention_partial and attention_combine, app total +0.2 %"
    assert t.loc["void attention_partial(float *)", "label"] == "moved"
    assert t.loc["void attention_partial(float *)", "note"] == (
        "matched by launch configuration: name changed (was void attention(float *)); " + said)
    assert t.loc["void attention_combine(float *)", "note"] == said
    assert t.loc[APP_TOTAL, "label"] == "unchanged"
    assert "void attention(float *)" not in t.index  # followed: no missing series
    # from the split on, the followed kernel is judged against its own nights, not the whole kernel's
    labels = d[d["kernel"] == "void attention_partial(float *)"]["label"].tolist()
    assert labels == ["moved", "insufficient_data", "insufficient_data", "unchanged"]
    since = d[d["run_id"] >= night(BEFORE)]
    assert not since["label"].isin(["improvement", "regression", "missing", "new"]).any()


def test_the_nightly_path_decides_a_move_as_a_replay_does(tmp_path):
    history = fused(1.9e-3)
    for run_id, night_rows in history.groupby("run_id"):
        append_run(tmp_path, run_id, night_rows)
        update(tmp_path, DecisionParams(), changed=[run_id])
    stored = read_decisions(tmp_path).sort_values(["run_id", "kernel"]).reset_index(drop=True)
    replayed = decide_all(history).sort_values(["run_id", "kernel"]).reset_index(drop=True)
    assert stored[["label", "note"]].equals(replayed[["label", "note"]])
    assert (stored["label"] == "moved").sum() == 3


def test_a_kernel_absent_on_a_night_of_the_same_commit_is_missing_not_moved():
    """The same fusion's kernels, but the app commit did not change: a failed profile and a kernel
    back from one, not a code change; nothing is said to have moved."""
    c = ("gemm_bias_relu", "(96, 1, 1)", 1.55e-3)
    d = decide_all(app_nights([[A, B, OTHER]] * BEFORE + [[c, OTHER]], commits=["c1"] * (BEFORE + 1)))
    t = tonight(d, BEFORE)
    assert sorted(t["label"]) == ["missing", "missing", "new", "unchanged", "unchanged"]


def test_an_app_of_one_kernel_has_no_total_of_its_own():
    d = decide_all(series(steady(5)))
    assert APP_TOTAL not in set(d["kernel"])


def test_dram_bytes_per_launch_that_grew_with_the_time_flat_is_said_not_judged():
    """DRAM bytes per launch +35 % from night 12 on, time per launch unchanged: the first sign of a
    slowdown on a larger problem. Named with the quantity, the size and the night it started, on
    every night until the baseline nights are at the new work; never a regression or an improvement
    (per unit of work it would read as a 26 % improvement)."""
    nights = 24
    work = [1e8] * 12 + [1.35e8] * (nights - 12)
    d = decide_all(series(steady(nights), dram_bytes=work, bound_kind="memory"))
    labels = d["label"].tolist()
    # said while most baseline nights (the 7 before last night) are at the old work: 5 nights
    assert labels[12:17] == ["workload_changed"] * 5 and labels[17:] == ["unchanged"] * 7
    assert not {"regression", "improvement"} & set(labels)
    note = d["note"].iat[15]
    assert note.startswith(f"DRAM bytes per launch +35.0 % since {night(12)}, time unchanged (")
    assert d["metric"].iat[15] == "time" and d["ratio"].iat[15] == pytest.approx(1, abs=0.02)
    summary = summarize(d[d["run_id"] == night(15)], {"run_id": night(15)}, DecisionParams())
    assert not summary["alert"] and [f["note"] for f in summary["findings"]] == [note]
    assert note.replace("→", "") in findings_table(summary["findings"])


def test_work_that_moved_with_the_time_is_still_judged_per_unit_of_work():
    """The same +35 % bytes with the time +35 % too: the throughput is unchanged, nothing is said after
    the night of the change; with the time +60 %, a regression."""
    work = [1e8] * 12 + [1.35e8] * 5
    same = decide_all(series(steady(12) + [1.35e-3 * w for w in (1.0, 1.01, 0.99, 1.005, 0.995)], dram_bytes=work,
                             bound_kind="memory"))
    assert same["label"].tolist()[12:] == ["workload_changed"] + ["unchanged"] * 4
    slower = decide_all(series(steady(12) + [1.6e-3 * w for w in (1.0, 1.01, 0.99, 1.005, 0.995)], dram_bytes=work,
                               bound_kind="memory"))
    assert slower["label"].tolist()[12:14] == ["workload_changed", "regression"]


@pytest.mark.parametrize(("sources", "targets", "said"), [
    (["a", "b"], ["c"], "a and b fused into c"), (["a"], ["b", "c", "d"], "a split into b, c and d"),
    (["a"], ["b"], "a became b"), (["a", "b"], ["c", "d"], "a, b → c, d")])
def test_a_move_in_words(sources, targets, said):
    assert describe(sources, targets) == said
