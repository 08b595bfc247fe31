"""Decisions on hand-made series and on the seeded simulator; regressions.json, trends.html, CLI."""

import json
import math
from datetime import date, timedelta

import numpy as np
import pandas as pd
import pytest
import vl_convert
from conftest import tracking_simulator

from roofline.nightly import track
from roofline.nightly.engine import decide, decide_all
from roofline.nightly.params import DecisionParams
from roofline.nightly.store import append_run, history_frame
from roofline.pages import trends
from roofline.stages import track_history, trends_page
from roofline.tables.files import write_table

SIM = tracking_simulator()
# +-1 % wiggle: noise without randomness, so that each rule fires exactly where it should
WIGGLE = [1.0, 1.01, 0.99, 1.005, 0.995, 1.0, 1.01, 0.99, 1.0, 1.005]


def night(n: int) -> str:
    return (date(2026, 1, 1) + timedelta(days=n)).isoformat()


def series(times, kernel="k<float>&", **per_night) -> pd.DataFrame:
    """A history of one kernel: ``times`` per launch [s] (None: absent); other columns per night."""
    rows = []
    for n, t in enumerate(times):
        if t is None:
            continue
        row = {"run_id": night(n), "run_date": night(n), "app": "app", "device": "GPU",
               "kernel": kernel, "kernel_short": kernel[:8], "grid": "(1, 1, 1)",
               "block": "(64, 1, 1)", "launches": 1, "duration_s": t, "flop": 1e9,
               "flop_total": 1e9, "dram_bytes": 1e8, "performance": 1e9 / t, "ai_dram": 10.0,
               "bound": "memory:dram", "ridge_ratio": 0.5, "time_share": 0.5,
               "driver_version": "550", "app_commit": f"c{n}"}
        for column, values in per_night.items():
            row[column] = values[n] if isinstance(values, list | tuple) else values
        rows.append(row)
    return history_frame(pd.DataFrame(rows))


def steady(n: int, level: float = 1e-3) -> list[float]:
    return [level * WIGGLE[i % len(WIGGLE)] for i in range(n)]


def labels(history: pd.DataFrame, params=None, column: str = "label") -> list[str]:
    return decide_all(history, params)[column].tolist()


# ------------------------------------------------------------------------------ the decision rule
def test_first_nights_are_new_then_insufficient_then_judged():
    out = labels(series(steady(6)))
    assert out == ["new", "insufficient_data", "insufficient_data", "unchanged", "unchanged", "unchanged"]


def test_insufficient_data_applies_the_plain_relative_rule_for_information():
    d = decide_all(series([1e-3, 1e-3, 1.2e-3]))
    assert d["label"].tolist() == ["new", "insufficient_data", "insufficient_data"]
    assert d["direction"].tolist() == ["", "", "up"] and "+20.0%" in d["note"].iat[2]


def test_a_step_is_suspicious_then_a_regression():
    d = decide_all(series(steady(12) + [1.2e-3 * w for w in WIGGLE[:4]]))
    assert d["label"].tolist()[12:14] == ["suspicious", "regression"]
    row = d.iloc[13]
    assert row["ratio"] == pytest.approx(1.2 * WIGGLE[1], rel=0.02) and row["z"] > 4
    assert row["lower_s"] < row["baseline_s"] < row["upper_s"] and row["noise_s"] > 0
    assert row["nights_in_violation"] == 2 and row["rule_version"] == "track-4"
    assert d["revised_label"].iat[12] == "regression"  # the suspicious night was the onset


def test_an_improvement_is_symmetric():
    d = decide_all(series(steady(12) + [0.85e-3 * w for w in WIGGLE[:3]]))
    assert d["label"].tolist()[12:14] == ["suspicious", "improvement"]
    assert d["direction"].iat[13] == "down"


def test_a_single_night_spike_is_an_outlier_and_leaves_the_baseline():
    times = steady(12) + [1.15e-3] + steady(5)
    d = decide_all(series(times))
    assert d["label"].tolist()[12:15] == ["suspicious", "outlier", "unchanged"]
    assert d["revised_label"].iat[12] == "outlier"
    assert night(12) not in d["baseline_runs"].iat[14].split(",")


def test_a_big_jump_alerts_on_the_first_night_and_reverting_makes_it_an_outlier():
    d = decide_all(series(steady(12) + [1.6e-3] + steady(3)))
    assert d["label"].tolist()[12:14] == ["regression", "outlier"]
    assert "big jump" in d["note"].iat[12] and d["revised_label"].iat[12] == "outlier"


def test_a_spike_next_to_a_noise_blip_is_no_regression():
    d = decide_all(series(steady(12) + [1.055e-3, 1.6e-3, 1e-3, 1e-3]), {"big_ratio": 2.0})
    assert "regression" not in d["label"].tolist()[12:]


def test_five_percent_below_the_relative_floor_is_unchanged():
    d = decide_all(series(steady(12) + [1.04e-3] * 4))
    assert set(d["label"].tolist()[12:]) == {"unchanged"}


def test_an_environment_change_starts_a_segment_without_comparison():
    times = steady(12) + [1.3e-3 * w for w in steady(6, 1.0)]
    d = decide_all(series(times, driver_version=["550"] * 12 + ["560"] * 6))
    assert d["label"].tolist()[12:] == ["environment_change", "insufficient_data", "insufficient_data",
                                        "unchanged", "unchanged", "unchanged"]
    assert "driver_version: 550 → 560" in d["note"].iat[12]
    assert d["segment"].tolist()[11:13] == [0, 1] and d["segment_start"].iat[15] == night(12)


def test_ncu_builds_of_one_minor_version_share_a_segment():
    versions = ["2024.1.0.0"] * 8 + ["2024.1.1.0"] * 2 + ["2024.2.0.0"]
    d = decide_all(series(steady(11), ncu_version=versions))
    assert d["label"].tolist()[8:] == ["unchanged", "unchanged", "environment_change"]


def counted(factor: float, convention, nights: int = 16, at: int = 12) -> pd.DataFrame:
    """A steady compute-bound kernel whose counted FLOP (so FLOP/s, % of roof, AI) move by
    ``factor`` from night ``at`` on with the time per launch unchanged: what a change of counting
    conventions does."""
    times = steady(nights)
    work = [1e9] * at + [factor * 1e9] * (nights - at)
    return series(times, flop=work, flop_total=work, performance=[w / t for w, t in zip(work, times)],
                  roof_pct=[40 * w / 1e9 for w in work], ai_dram=[w / 1e8 for w in work],
                  bound="compute:fp16", bound_kind="compute",
                  convention=convention)


@pytest.mark.parametrize("factor, said", [(2.0, "+100.0 %"), (0.5, "-50.0 %")])
def test_a_change_of_counting_conventions_starts_a_segment_instead_of_a_verdict(factor, said):
    changed = decide_all(counted(factor, ["2026.11"] * 12 + ["2026.12"] * 4))
    assert changed["label"].tolist()[12:] == ["environment_change", "insufficient_data",
                                              "insufficient_data", "unchanged"]
    assert changed["note"].iat[12] == "new segment: counting conventions changed 2026.11 → 2026.12"
    assert changed["segment"].tolist()[11:13] == [0, 1] and changed["segment_start"].iat[15] == night(12)
    assert changed["convention"].tolist()[11:13] == ["2026.11", "2026.12"]
    assert changed["roof_pct"].iat[12] / changed["roof_pct"].iat[11] == pytest.approx(factor)
    assert not {"regression", "improvement"} & (set(changed["label"]) | set(changed["revised_label"]))
    # The same jump under one convention is judged (so the test above can fail): counted work that
    # moved with the time flat is workload_changed, said with its size and first night, while the
    # baseline nights are at the old work (track-3 judged it per unit of work: a fake improvement
    # for 2x, a fake regression for 0.5x).
    same = decide_all(counted(factor, "2026.12"))
    assert same["label"].tolist()[12:] == ["workload_changed"] * 4
    assert same["note"].iat[14].startswith(f"FLOP per launch {said} since {night(12)}, time unchanged (")
    assert same["metric"].iat[14] == "time" and same["ratio"].iat[14] == pytest.approx(1, abs=0.02)


def test_rows_before_conventions_were_versioned_start_one_segment_on_the_first_versioned_night():
    d = decide_all(counted(1.0, [""] * 12 + ["2026.12"] * 4))
    assert d["label"].tolist()[11:13] == ["unchanged", "environment_change"]
    assert d["note"].iat[12] == "new segment: counting conventions changed (before versioning) → 2026.12"
    assert labels(counted(1.0, "")) == labels(counted(1.0, "2026.12"))  # constant: no break


def test_a_missing_kernel_is_reported_for_a_window_then_dropped():
    history = pd.concat([series(steady(8) + [None] * 10), series(steady(18), kernel="other")])
    d = decide_all(history)
    mine = d[d["kernel"] == "k<float>&"]
    assert mine["label"].tolist()[8:] == ["missing"] * 7
    assert mine["note"].iat[8] == f"absent; last seen {night(7)}"


def test_a_workload_change_is_judged_per_unit_of_work():
    same = steady(12) + [2e-3 * w for w in WIGGLE[:5]]
    work = [1e9] * 12 + [2e9] * 5
    d = decide_all(series(same, flop=work, flop_total=work, dram_bytes=[w / 10 for w in work]))
    assert d["label"].tolist()[12:] == ["workload_changed"] + ["unchanged"] * 4
    assert d["metric"].iat[12] == "throughput" and d["flop_ratio"].iat[12] == pytest.approx(2.0)
    slower = steady(12) + [2.6e-3 * w for w in WIGGLE[:5]]
    d = decide_all(series(slower, flop=work, flop_total=work, dram_bytes=[w / 10 for w in work]))
    assert d["label"].tolist()[12:14] == ["workload_changed", "regression"]


def test_a_lost_duration_is_an_error_but_a_never_timed_row_is_not():
    nan = float("nan")
    assert labels(series(steady(5) + [nan]))[-1] == "error"
    assert labels(series([nan] * 3)) == ["new", "insufficient_data", "insufficient_data"]


def test_an_off_clock_night_is_not_compared():
    clocks = [1.41e9] * 10 + [1.2e9] + [1.41e9] * 2
    d = decide_all(series(steady(10) + [1.3e-3] + steady(2), sm_clock_hz=clocks))
    assert d["label"].tolist()[10:] == ["unstable_env", "unchanged", "unchanged"]


def test_a_bound_flip_needs_the_hysteresis_band_and_two_nights():
    ridge = [0.8] * 6 + [1.1, 0.95, 1.3, 1.3, 1.3]
    d = decide_all(series(steady(11), ridge_ratio=ridge))
    assert d["bound_flip"].tolist() == [""] * 9 + ["memory→compute", ""]
    assert d["bound_side"].iat[-1] == "compute" and "bound flip" in d["note"].iat[9]


def test_many_kernels_moving_together_with_the_same_commit_are_one_environment_shift():
    times = steady(12) + [1.2e-3] * 3
    history = pd.concat([series(times, kernel=f"k{i}", app_commit="same") for i in range(6)])
    d = decide_all(history)
    assert d["environment_shift"].groupby(d["run_id"]).any().tolist()[12:] == [True] * 3
    assert set(d.loc[d["run_id"] == night(13), "label"]) == {"suspicious"}
    assert "environment shift" in d.loc[d["run_id"] == night(13), "note"].iat[0]
    moved = pd.concat([series(times, kernel=f"k{i}") for i in range(6)])  # a new commit each night
    assert set(decide_all(moved).query("run_id == @night(13)")["label"]) == {"regression"}


def test_per_kernel_overrides_and_parameter_checks():
    history = series(steady(12) + [1.2e-3] * 3)
    params = DecisionParams.from_mapping({"per_kernel": {r"^k<": {"rel_min": 0.3}}})
    assert "regression" not in labels(history, params)
    with pytest.raises(ValueError, match="unknown tracking parameters"):
        DecisionParams.from_mapping({"windw": 3})
    with pytest.raises(ValueError, match="min_nights"):
        DecisionParams(window=2)


def test_decide_judges_a_night_on_the_nights_up_to_it_only():
    history, _ = SIM.simulate(seed=5, nights=45, kernels=12)
    everything = decide_all(history)
    for n in (3, 20, 44):
        one = decide(history, night(n))
        expected = everything[everything["run_id"] == night(n)].reset_index(drop=True)
        pd.testing.assert_series_equal(one["label"], expected["label"])
    with pytest.raises(ValueError, match="not in the history"):
        decide(history, "1999-01-01")


# ------------------------------------------------------------------------------------ simulator
@pytest.fixture(scope="module")
def simulated():
    """Four seeds of 60 nights x 50 kernels, 2 % noise: scores of the default rule."""
    return SIM.run(range(4), noise=0.02).sum(numeric_only=True)


def test_ten_percent_and_larger_steps_are_flagged_by_their_second_night(simulated):
    assert simulated["step10plus_n"] >= 100
    assert simulated["step10plus_by_night2"] / simulated["step10plus_n"] >= 0.95


def test_false_regressions_stay_under_one_percent_per_kernel_night(simulated):
    assert simulated["false_regressions"] / simulated["kernel_nights"] <= 0.01


def test_no_regression_on_the_driver_change_night(simulated):
    assert simulated["driver_night_regressions"] == 0
    assert simulated["driver_night_env_change"] == 4 * 50


def test_spikes_are_outliers_and_the_workload_change_no_regression(simulated):
    assert simulated["spikes_outlier"] == simulated["spikes_n"]
    assert simulated["workload_regressions_after"] == 0


# --------------------------------------------------------------------------------------- outputs
@pytest.fixture(scope="module")
def nightly(tmp_path_factory):
    """A store of 44 simulated nights, tonight (night 45) run through the CLI."""
    tmp = tmp_path_factory.mktemp("track")
    history, truth = SIM.simulate(seed=1, nights=45, kernels=20)
    inputs = list(SIM.nightly_inputs(history))
    for run_id, kernels, context in inputs[:-1]:
        append_run(tmp / "store", run_id, kernels, context)
    run_id, kernels, context = inputs[-1]
    kernels.loc[0, "duration_s"] *= 1.6  # a big jump tonight: a regression on its first night
    write_table(kernels.iloc[:10], "kernels", tmp / "a.parquet")
    write_table(kernels.iloc[10:], "kernels", tmp / "b.parquet")
    (tmp / "context.json").write_text(json.dumps(context))
    args = ["--kernels", str(tmp / "a.parquet"), str(tmp / "b.parquet"), "--store", str(tmp / "store"),
            "--run-id", run_id, "--context-json", str(tmp / "context.json"),
            "--context-json", '{"app_commit": "abc123"}', "--config-json", '{"inputs": []}',
            "--trends", str(tmp / "reports" / "trends.html"),
            "--regressions", str(tmp / "reports" / "regressions.json")]
    return tmp, args, track_history.main(args), kernels.loc[0, "kernel"]


def test_cli_writes_both_outputs_and_exit_zero_without_the_flag(nightly):
    tmp, _, status, _ = nightly
    assert status == 0
    assert (tmp / "reports" / "trends.html").exists() and (tmp / "reports" / "regressions.json").exists()


def test_the_cli_lets_go_of_the_kernels_frame_before_it_builds_the_decision_state(tmp_path, monkeypatch):
    """At a thousand apps the kernels frame is a third of the tracking job's memory: it must be gone
    (not merely unused) while the decision state, the job's peak, is built."""
    import weakref

    history, _ = SIM.simulate(seed=3, nights=40, kernels=5)
    nights = list(SIM.nightly_inputs(history))
    for run_id, kernels, context in nights[:2]:
        append_run(tmp_path / "store", run_id, kernels, context)
    run_id, kernels, _ = nights[2]
    write_table(kernels, "kernels", tmp_path / "k.parquet")
    frames, alive_at_update = [], []
    real_read, real_update = track.read_tables, track.update

    def read_and_watch(*args, **kwargs):
        frame = real_read(*args, **kwargs)
        frames.append(weakref.ref(frame))
        return frame

    def update_and_look(*args, **kwargs):
        alive_at_update.append([ref() is not None for ref in frames])
        return real_update(*args, **kwargs)

    monkeypatch.setattr(track, "read_tables", read_and_watch)
    monkeypatch.setattr(track, "update", update_and_look)
    status = track_history.main(["--kernels", str(tmp_path / "k.parquet"), "--store", str(tmp_path / "store"),
                         "--run-id", run_id, "--trends", str(tmp_path / "trends.html"), "--no-trends-page",
                         "--regressions", str(tmp_path / "regressions.json")])
    assert status == 0 and (tmp_path / "regressions.json").exists()
    assert alive_at_update == [[False]]


def test_regressions_json_counts_and_findings_by_impact(nightly):
    tmp, _, _, jumped = nightly
    report = json.loads((tmp / "reports" / "regressions.json").read_text())
    assert report["run_id"] == night(44) and report["kernels"] == 20
    assert report["app_totals"] == 2  # the simulator's two apps
    assert sum(report["counts"].values()) == 20 + 2 and report["counts"]["regression"] >= 1
    assert report["alert"] is True and report["context"]["app_commit"] == "abc123"
    assert len(report["context"]["config_hash"]) == 16
    first = report["findings"][0]
    assert first["kernel"] == jumped and first["label"] == "regression"
    impacts = [abs(f["impact"]) for f in report["findings"] if f["impact"] is not None]
    assert impacts == sorted(impacts, reverse=True)
    assert {"baseline_s", "noise_s", "lower_s", "upper_s", "z", "change_pct"} <= set(first)


def test_fail_on_regression_exits_3_and_a_rerun_replaces_the_night(nightly):
    tmp, args, _, _ = nightly
    before = json.loads((tmp / "reports" / "regressions.json").read_text())
    assert track_history.main([*args, "--fail-on-regression"]) == track.EXIT_REGRESSION
    assert len(list((tmp / "store").glob("run=*"))) == 45
    # the first run judged the 44 nights appended without it too: one partition per night
    assert len(list((tmp / "store" / "_decisions").glob("run=*"))) == 45
    assert json.loads((tmp / "reports" / "regressions.json").read_text()) == before


def test_replay_flag_judges_every_night_again_with_the_same_result(nightly, caplog):
    tmp, args, _, _ = nightly
    before = json.loads((tmp / "reports" / "regressions.json").read_text())
    with caplog.at_level("INFO", logger="roofline.nightly.state"):
        assert track_history.main([*args, "--replay"]) == 0
    assert "judging every stored night again: asked for (--replay)" in caplog.text
    assert json.loads((tmp / "reports" / "regressions.json").read_text()) == before


def test_trends_page_is_offline_escaped_and_embeds_every_chart(nightly):
    tmp, _, _, _ = nightly
    page = (tmp / "reports" / "trends.html").read_text()
    # the one page builder: the summary's style sheet, and the Vega bundle shared beside the summary
    assert '<script src="assets/vega-bundle.js"></script>' in page and "cdn.jsdelivr" not in page
    assert (tmp / "reports" / "assets" / "vega-bundle.js").stat().st_size > 100_000
    assert page.count('<div class="chart" id="chart') == 4  # trends, any kernel, baseline → tonight, tonight
    embedded = page[page.rindex("<script>"):]
    assert "</" not in embedded[len("<script>"):embedded.rindex("</script>")]
    assert "void gemm&lt;float, 128&gt;(float const*, float&amp;)" in page
    body = page[page.index("</head>"):page.rindex("<script>")]
    assert "gemm<float" not in body and "float&)" not in body


def test_the_workflows_two_jobs_write_what_one_process_writes(tmp_path):
    """The workflow judges (track_history: --no-trends-page) beside the report and draws the page in
    a later job (trends_page: page_main, from regressions.json and the store): the same findings,
    tonight block and page, byte for byte, as one track_history job; and a night without
    any kernel the same way."""
    history, _ = SIM.simulate(seed=2, nights=40, kernels=6)
    inputs = list(SIM.nightly_inputs(history))
    written = {}
    for how in ("one process", "two jobs"):
        folder = tmp_path / how.replace(" ", "-")
        store, reports = folder / "store", folder / "reports"
        for run_id, kernels, context in inputs[:-1]:
            append_run(store, run_id, kernels, context)
        run_id, kernels, context = inputs[-1]
        kernels = kernels.copy()
        kernels.loc[0, "duration_s"] *= 1.6  # a regression, so that the page has baseline rows to draw
        write_table(kernels, "kernels", folder / "k.parquet")
        write_table(kernels.iloc[:0], "kernels", folder / "none.parquet")
        outputs = ["--trends", str(reports / "trends.html"), "--regressions", str(reports / "regressions.json"),
                   "--tonight-script", str(reports / "tonight.js")]
        page = ["--store", str(store), "--regressions", str(reports / "regressions.json"),
                "--trends", str(reports / "trends.html")]
        for night_id, table in ((run_id, "k.parquet"), ("later", "none.parquet")):
            args = ["--kernels", str(folder / table), "--store", str(store), "--run-id", night_id, "--context-json",
                    json.dumps({**context, "run_time": "2026-03-01T00:00:00+00:00"}), *outputs]
            if how == "one process":
                assert track_history.main(args) == 0
            else:
                (reports / "trends.html").unlink(missing_ok=True)
                assert track_history.main([*args, "--no-trends-page"]) == 0
                assert not (reports / "trends.html").exists()
                assert trends_page.main(page) == 0
            written[how, night_id] = {name: (reports / name).read_bytes()
                                      for name in ("trends.html", "regressions.json", "tonight.js")}
    for night_id in (inputs[-1][0], "later"):
        assert written["one process", night_id] == written["two jobs", night_id]
    tonight = json.loads(written["two jobs", inputs[-1][0]]["regressions.json"])
    assert tonight["kernels"] == 6 and tonight["counts"]["regression"] >= 1
    assert json.loads(written["two jobs", "later"]["regressions.json"])["kernels"] == 0
    assert written["two jobs", "later"]["trends.html"] != written["two jobs", inputs[-1][0]]["trends.html"]


def test_the_rooflines_drawn_from_the_columns_they_read_equal_those_from_every_column(tmp_path):
    """page_rows reads only TONIGHT_READS of tonight's stored rows: the page, with the summary's
    charts shared or built here, is byte-identical to one drawn from every stored column."""
    from roofline.nightly.state import judged_order
    from roofline.nightly.store import read_run
    from roofline.pages.trend_roofs import TONIGHT_READS

    history, _ = SIM.simulate(seed=2, nights=40, kernels=6)
    inputs = list(SIM.nightly_inputs(history))
    store, reports = tmp_path / "store", tmp_path / "reports"
    for run_id, kernels, context in inputs[:-1]:
        append_run(store, run_id, kernels, context)
    run_id, kernels, context = inputs[-1]
    kernels = kernels.copy()
    kernels.loc[0, "duration_s"] *= 1.6  # a regression: the page draws its baseline rows too
    write_table(kernels, "kernels", tmp_path / "k.parquet")
    assert track_history.main(["--kernels", str(tmp_path / "k.parquet"), "--store", str(store), "--run-id", run_id,
                       "--context-json", json.dumps(context), "--trends", str(reports / "trends.html"),
                       "--regressions", str(reports / "regressions.json"), "--no-trends-page"]) == 0
    summary = json.loads((reports / "regressions.json").read_text())
    decisions = track.page_decisions(store, judged_order(store), summary)
    read, baseline = track.page_rows(store, summary)
    every = read_run(store, run_id)
    assert len(baseline) and len(read) == len(every) == 6
    assert set(read.columns) == set(TONIGHT_READS) and len(every.columns) > len(read.columns) + 40
    for charts in (None, "assets/charts.js"):
        page = trends.trends_html(decisions, summary, read, baseline, charts=charts)
        assert page == trends.trends_html(decisions, summary, every, baseline, charts=charts)
    # the comparison sees the columns: a roof left out of the read moves the page
    fewer = read.drop(columns="roof_flops")
    assert trends.trends_html(decisions, summary, fewer, baseline) != trends.trends_html(decisions, summary, read,
                                                                                        baseline)


def test_the_page_job_names_a_night_the_store_has_not_judged(tmp_path, caplog):
    history, _ = SIM.simulate(seed=3, nights=40, kernels=2)
    run_id, kernels, context = list(SIM.nightly_inputs(history))[0]
    append_run(tmp_path / "store", run_id, kernels, context)  # stored, never judged
    # the findings of a night the store has not judged
    findings = {key: None for key in trends_page._PAGE_READS} | {"run_id": run_id, "kernels": 2}
    (tmp_path / "regressions.json").write_text(json.dumps(findings))
    args = ["--store", str(tmp_path / "store"), "--regressions", str(tmp_path / "regressions.json"),
            "--trends", str(tmp_path / "trends.html")]
    assert trends_page.main(args) == 2
    assert f"has no judged night '{run_id}': run the tracking stage" in caplog.text
    assert trends_page.main([*args[:3], str(tmp_path / "missing.json"), *args[4:]]) == 2
    assert "missing.json" in caplog.text
    (tmp_path / "cut.json").write_text('{"run_id": ')  # a disk that filled while it was written
    assert trends_page.main([*args[:3], str(tmp_path / "cut.json"), *args[4:]]) == 2
    assert "cut.json: not JSON" in caplog.text
    (tmp_path / "other.json").write_text(json.dumps({"run_id": run_id}))
    assert trends_page.main([*args[:3], str(tmp_path / "other.json"), *args[4:]]) == 2
    assert "other.json: not the findings of the track_history stage (no 'kernels')" in caplog.text
    assert not (tmp_path / "trends.html").exists()


def test_every_chart_compiles_with_vega():
    from roofline.pages import trends

    history, _ = SIM.simulate(seed=2, nights=45, kernels=10)
    decisions = decide_all(history)
    tonight = decisions[decisions["run_id"] == night(44)]
    facet, selector = trends.trend_charts(decisions, trends.series_names(tonight).tolist()[:4])
    kernels = history[history["run_id"] == night(44)]
    findings = [{**r, "label": "regression"} for r in tonight.head(2).to_dict("records")]
    specs, _, _, _ = trends.roofline_specs(kernels, history[history["run_id"] < night(44)], findings)
    assert len(specs) == 2  # baseline → tonight, and tonight's kernels
    for spec in (facet, selector, *specs):
        assert vl_convert.vegalite_to_svg(spec).startswith("<svg")
    joined = [layer for layer in specs[0]["layer"] if layer["mark"]["type"] == "line"]
    assert [layer["encoding"]["order"]["field"] for layer in joined] == ["step"]  # baseline → tonight, joined
    assert specs[1]["layer"][0]["encoding"]["y"]["scale"]["type"] == "log"


def test_a_convention_change_tonight_is_a_segment_break_in_the_json_and_on_the_page(tmp_path):
    history = counted(0.5, ["2026.11"] * 12 + ["2026.12"] * 4, nights=13)
    for run_id, kernels in history.groupby("run_id"):
        if run_id != night(12):
            append_run(tmp_path, run_id, kernels)
    decisions, summary = track.track(history[history["run_id"] == night(12)], tmp_path, night(12),
                                     {"app_commit": "abc"}, DecisionParams())
    words = "new segment: counting conventions changed 2026.11 → 2026.12"
    assert summary["counts"]["regression"] == 0 and summary["alert"] is False
    assert summary["counts"]["environment_change"] == 1 and summary["environment_changes"] == [words]
    assert summary["context"]["convention"] == "2026.12"
    assert [(f["label"], f["convention"]) for f in summary["findings"]] == [("environment_change", "2026.12")]
    page = trends.trends_html(decisions, summary, vega="assets/vega-bundle.js")
    assert f"<li>{words}</li>" in page and "counting conventions changed)</h3>" in page
    assert "datum.label == 'environment_change'" in page  # the dotted segment rule of every break
    trend = trends.trend_data(decisions)
    assert trend.loc[trend["run_id"] == night(12), "label"].tolist() == ["environment_change"]
    assert trend.loc[trend["run_id"] == night(12), "note"].tolist() == [words]


def test_load_context_merges_env_file_inline_and_devices(tmp_path, monkeypatch):
    (tmp_path / "env.json").write_text('{"gpu_uuid": "GPU-1", "devices": {"A": {"sm_clock_hz": 1}}}')
    monkeypatch.setenv("ROOFLINE_RUN_CONTEXT", str(tmp_path / "env.json"))
    context = track.load_context(['{"gpu_uuid": "GPU-2", "devices": {"B": {"sm_clock_hz": 2}}}'])
    assert context["gpu_uuid"] == "GPU-2" and set(context["devices"]) == {"A", "B"}
    with pytest.raises(ValueError, match="not a JSON object or file"):
        track.load_context([str(tmp_path / "absent.json")])
    with pytest.raises(ValueError, match="expected a JSON object"):
        track.load_context(["[1, 2]"])


def test_observed_context_fills_only_what_the_context_lacks():
    counters = pd.DataFrame({"device": ["A", "A", "B"], "ncu_version": ["2024.1", "2024.1", ""],
                             "sm_clock_hz": [1.4e9, 1.5e9, np.nan]})
    observed = track.observed_context(counters)
    assert observed["devices"]["A"] == {"sm_clock_hz": 1.45e9, "ncu_version": "2024.1"}
    merged = track.with_observed({"ncu_version": "2025.1"}, observed)
    assert merged["devices"]["A"] == {"sm_clock_hz": 1.45e9}
    assert math.isnan(observed["devices"].get("B", {}).get("sm_clock_hz", math.nan))


def test_observed_context_takes_the_most_frequent_version_and_reads_categoricals_alike():
    counters = pd.DataFrame({"device": ["B", "A", "A", "A", "A", "B", ""],
                             "ncu_version": ["2025.1", "2024.2", "2024.1", "2024.2", "2024.1", "", "2023.3"],
                             "sm_clock_hz": [1.0e9, 1.4e9, 1.5e9, 1.6e9, np.nan, 3.0e9, 2.0e9]})
    expected = {"": {"sm_clock_hz": 2.0e9, "ncu_version": "2023.3"},
                "A": {"sm_clock_hz": 1.5e9, "ncu_version": "2024.1"},  # a tie: the first in text order
                "B": {"sm_clock_hz": 2.0e9, "ncu_version": "2025.1"}}  # a missing version is no vote
    assert track.observed_context(counters) == {"devices": expected}
    assert list(track.observed_context(counters)["devices"]) == ["", "A", "B"]
    categorical = counters.astype({"device": "category", "ncu_version": "category"})
    assert track.observed_context(categorical) == {"devices": expected}


def test_cli_reports_bad_input_with_exit_2(tmp_path):
    write_table(pd.DataFrame({"app": ["a"], "kernel": ["k"], "duration_s": [1e-3]}), "kernels",
                tmp_path / "k.parquet")
    status = track_history.main(["--kernels", str(tmp_path / "k.parquet"), "--store", str(tmp_path / "s"),
                         "--run-id", "bad id", "--trends", str(tmp_path / "t.html"),
                         "--regressions", str(tmp_path / "r.json")])
    assert status == 2 and not (tmp_path / "r.json").exists()
