"""regressions.json's content: counts, the apps whose history starts tonight, findings as JSON values."""

import json

import numpy as np
import pandas as pd

from nightly.test_track import night, series, steady
from roofline.nightly import summary as track_summary
from roofline.nightly.engine import decide_all
from roofline.nightly.params import DecisionParams
from roofline.pages import trends


def test_summary_has_no_nan_and_findings_skip_quiet_rows():
    d = decide_all(series(steady(12) + [1.2e-3, 1.2e-3]))
    tonight = d[d["run_id"] == night(13)]
    summary = track_summary.summarize(tonight, {"run_id": night(13)}, DecisionParams())
    json.dumps(summary, allow_nan=False)
    assert [f["label"] for f in summary["findings"]] == ["regression"]
    quiet = track_summary.summarize(d[d["run_id"] == night(11)], {"run_id": night(11)}, DecisionParams())
    assert quiet["findings"] == [] and quiet["alert"] is False


def test_an_app_whose_history_starts_tonight_is_one_line_not_a_finding_per_series():
    """A first night lists no finding: each series is new, with nothing to compare. Later, a new
    app, or an app on a new GPU, starts its history the same way; a new kernel in an app tracked
    before is a finding."""
    t = 1e-3
    history = pd.concat([
        series([t, t], kernel="k1", app="A"), series([t, t], kernel="k2", app="A"),
        series([None, t], kernel="k3", app="A"),  # a new kernel in a tracked app
        series([t, t], kernel="k1", app="B"),
        series([None, t], kernel="k1", app="B", device="GPU2"),  # B on a second GPU too
        series([None, t], kernel="k1", app="C"), series([None, t], kernel="k2", app="C"),  # a new app
    ], ignore_index=True)
    d = decide_all(history)
    first = track_summary.summarize(d[d["run_id"] == night(0)], {"run_id": night(0)}, DecisionParams())
    # A (two kernels) has its total GPU time as a series too; B (one kernel) does not
    assert first["counts"]["new"] == 3 + 1 and first["findings"] == [] and first["app_totals"] == 1
    assert first["started"] == [{"app": "A", "device": "GPU", "series": 3}, {"app": "B", "device": "GPU", "series": 1}]
    second = track_summary.summarize(d[d["run_id"] == night(1)], {"run_id": night(1)}, DecisionParams())
    assert second["counts"]["new"] == 4 + 1
    # the new kernel adds half of A's time: its total says so, for information after one night
    assert [(f["app"], f["kernel"], f["label"]) for f in second["findings"]] == [
        ("A", "(app total)", "insufficient_data"), ("A", "k3", "new")]
    assert second["findings"][0]["note"] == "+50.0% vs 1 night(s) (info only)"
    assert second["started"] == [{"app": "B", "device": "GPU2", "series": 1},
                                 {"app": "C", "device": "GPU", "series": 3}]
    page = trends.trends_html(d, second, vega="assets/vega-bundle.js")
    assert "History starts tonight for 4 series of 2 apps" in page
    assert "<li>C on GPU: 3 series</li>" in page and "<li>B on GPU2: 1 series</li>" in page
    first_page = trends.trends_html(d[d["run_id"] == night(0)], first, vega="assets/vega-bundle.js")
    assert "No findings tonight: every series starts its history tonight, nothing to draw." in first_page
    from roofline.pages.tonight import tonight_html

    assert "History starts tonight for 4 series of 2 apps on their devices" in tonight_html(first, "trends.html")


def test_findings_become_plain_values_in_one_pass_as_value_by_value():
    """summarize's findings, converted by Arrow, equal the value-by-value conversion (_clean): NaN
    and infinities None, NumPy numbers and booleans Python's, text as it is."""
    frame = pd.DataFrame({"kernel": pd.array(["a", "b", "c"], dtype="string"), "z": [1.5, np.nan, np.inf],
                          "change_pct": [-np.inf, 0.0, 2.0], "nights_in_violation": np.array([0, 3, 7], "int64"),
                          "environment_shift": [True, False, True], "note": ["", "x", "y"]})
    fields = list(frame.columns)
    expected = [{k: track_summary._clean(row[k]) for k in fields} for row in frame.to_dict("records")]
    got = track_summary._records(frame, fields)
    assert got == expected and json.dumps(got) == json.dumps(expected)
    assert [type(v) for v in got[1].values()] == [str, type(None), float, int, bool, str]
