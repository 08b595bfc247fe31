"""The trends page (roofline/pages/trends.py): its rooflines are drawn on the roofs the verdicts used."""

import json

import pandas as pd
import pytest
from charts.test_roofline_chart import _rows_with

from roofline.charts import roofline_chart
from roofline.classify.kernels import aggregate_kernels
from roofline.nightly.detection_figures import figures_html, read_figures
from roofline.pages import trend_roofs, trends
from roofline.tables.schemas import KERNEL_KEY, conform

CEILINGS = [("compute", "fp32", 20e12), ("compute", "fp64", 10e12), ("compute", "tensor_fp16_acc32", 100e12),
            ("memory", "dram", 1e12), ("memory", "l2", 4e12)]
CASES = [  # (kernel, class, FLOP, DRAM bytes, L2 bytes)
    ("dgemm", "fp64", 1e12, 1e9, 2e9),
    ("stream", "fp32", 1e9, 1e10, 1e10),
    ("l2_bound", "fp32", 1e10, 1e9, 1e11),
    ("hgemm", "tensor_fp16_acc32", 1e13, 1e9, 1e9),
]


def ceilings_table() -> pd.DataFrame:
    rows = [{"device": "G", "kind": kind, "name": name, "value": value, "source": "datasheet", "selected": True}
            for kind, name, value in CEILINGS]
    rows.append({"device": "G", "kind": "memory", "name": "dram", "value": 2e12, "source": "report",
                 "selected": False})  # a candidate the policy did not pick: never drawn
    return conform(pd.DataFrame(rows), "ceilings")


def at_roof(scale: float = 1.0) -> pd.DataFrame:
    """Kernels each running exactly at its roof (duration = the binding time bound), classified by
    the classify stage; ``scale`` multiplies the FLOP (intensity and performance move along the roof)."""
    peaks = {name: value for kind, name, value in CEILINGS if kind == "compute"}
    rows = []
    for i, (name, cls, flop, dram, l2) in enumerate(CASES):
        flop *= scale
        rows.append({"app": "a", "kernel": name, "kernel_short": name, "launch": i, "device": "G",
                     f"flop_{cls}": flop, "dram_bytes": dram, "l2_bytes": l2,
                     "duration_s": max(flop / peaks[cls], dram / 1e12, l2 / 4e12)})
    return aggregate_kernels(conform(pd.DataFrame(rows), "counters"), ceilings_table())


def findings(kernels: pd.DataFrame, label: str = "regression") -> list[dict]:
    return [{**{c: r[c] for c in KERNEL_KEY}, "kernel_short": r["kernel_short"], "label": label}
            for r in kernels.to_dict("records")]


@pytest.fixture(scope="module")
def page_charts():
    tonight = at_roof()
    baseline = at_roof(0.5).assign(run_id="night-1")  # the baseline night: elsewhere on the same roofs
    assert tonight["roof_pct"].to_numpy() == pytest.approx(100.0)
    specs, _, blocks, _ = trends.roofline_specs(tonight, baseline, findings(tonight))
    return tonight, baseline, specs, blocks


def _segments(spec: dict) -> list[dict]:
    return [r for r in _rows_with(spec, "roof") if "x2" in r]


def test_the_roofs_are_the_selected_ceilings_of_each_class_and_level_drawn(page_charts):
    tonight, _, specs, _ = page_charts
    selected = {name: value for kind, name, value in CEILINGS}
    applied = trends.applied_ceilings(tonight)
    assert dict(zip(applied["name"], applied["value"])) == selected  # the unselected 2 TB/s DRAM: not there
    assert len(specs) == 2  # baseline → tonight, tonight's kernels
    for spec in specs:
        drawn = _segments(spec)
        labels = {s["roof"].split(" ")[0] for s in drawn}
        assert labels == {"FP32", "FP64", "Tensor", "DRAM", "L2"}  # each class and level of a verdict
        for s in drawn:
            if s["style"] == "compute":
                name = max((n for n, label in roofline_chart.CLASS_LABEL.items() if s["roof"].startswith(label + " ")),
                           key=lambda n: len(roofline_chart.CLASS_LABEL[n]))  # "Tensor FP16 (FP32 acc.)", not "FP16"
                assert s["y"] == pytest.approx(selected[name], rel=1e-12)
            else:
                assert s["y2"] / s["x2"] == pytest.approx(selected[s["style"]], rel=1e-9)
                assert s["y"] / s["x"] == pytest.approx(selected[s["style"]], rel=1e-9)


def test_points_at_100_percent_lie_on_the_drawn_roof_of_their_class_and_level(page_charts):
    """Tonight's and the baseline's trajectory points (the trends page's data) sit on the drawn roof
    of the class and level their verdict used: compute-bound on the flat roof, memory-bound on the sloped one."""
    tonight, _, specs, _ = page_charts
    segments = _segments(specs[0])
    steps = specs[0]["datasets"]["steps"]
    assert sorted(p["step"] for p in steps) == [1] * len(tonight) + [2] * len(tonight)
    bound = dict(zip(tonight["kernel"], tonight["bound"]))
    for p in steps:
        kind, resource = bound[p["kernel"]].split(":")
        if kind == "compute":
            [roof] = [s for s in segments if s["style"] == "compute"
                      and s["roof"].startswith(roofline_chart.CLASS_LABEL[resource] + " ")]
            assert p["performance"] == pytest.approx(roof["y"], rel=1e-9), p
            assert p["ai"] >= roof["x"] * (1 - 1e-9)  # right of the ridge, on the flat part
        else:
            [roof] = [s for s in segments if s["style"] == resource]
            assert p["performance"] == pytest.approx(roof["y2"] / roof["x2"] * p["ai"], rel=1e-9), p
    assert {p["level"] for p in steps} == {"DRAM", "L2"}


def test_baseline_and_tonight_are_the_two_steps_of_each_moved_kernel(page_charts):
    tonight, baseline, _, _ = page_charts
    points = trends.moved_points(tonight, baseline, findings(tonight.iloc[:2]) + findings(tonight.iloc[2:], "outlier"))
    assert points.groupby("match")["step"].apply(list).tolist() == [[1, 2], [1, 2]]  # outliers are not drawn
    stream = points[points["kernel"] == "stream"].set_index("step")
    assert stream.loc[2, "performance"] == pytest.approx(2 * stream.loc[1, "performance"])  # FLOP doubled


def test_a_night_without_findings_says_so_instead_of_an_empty_chart():
    tonight = at_roof()
    decisions = tonight.assign(run_id="n1", run_date="2026-01-01", label="unchanged", value_s=1e-3,
                               baseline_s=1e-3, lower_s=9e-4, upper_s=1.1e-3, ratio=1.0, z=0.0, note="",
                               noise_s=1e-5)
    summary = {"run_id": "n1", "findings": [], "counts": {"regression": 0, "unchanged": 4}, "alert": False,
               "environment_shift": False, "environment_changes": [], "started": [], "context": {"run_id": "n1"},
               "method": "m", "rule_version": "r"}
    page = trends.trends_html(decisions, summary, tonight, None, vega="assets/vega-bundle.js")
    assert "No findings tonight: every series is within its limits, nothing to draw." in page
    assert "No kernel regressed or improved tonight" in page
    assert page.count('<div class="chart" id="chart') == 2  # any kernel, tonight's roofline
    assert 'id="chart0"></div></section>' in page.split('<section id="any">')[1][:200]
    # the method shows the published detection table, read from the one data file
    assert figures_html(read_figures()) in page.split('<section id="method">')[1]


def test_tonights_rooflines_draw_the_summarys_charts_from_the_pages_rows():
    """With the summary's charts (assets/charts.js) the page builds no chart of tonight's kernels:
    its entry says "shared" and carries the controls of its rows, which the page embeds."""
    tonight = at_roof()
    specs, entries, blocks, rows = trends.roofline_specs(tonight, pd.DataFrame(), [], shared=True)
    assert specs == [None] and entries[0]["shared"] is True and entries[0]["device"] == "G"
    assert entries[0]["controls"] == {"count": "4 kernels", "max": 4, "apps": [roofline_chart.ALL, "a"]}
    assert sorted(rows["kernel"]) == sorted(tonight["kernel"]) and rows["rank"].notna().all()
    assert '<p class="drawn" id="drawn0"></p>' in "".join(blocks)
    page = trends.trends_html(_decisions(tonight), _summary([]), tonight, None, vega="assets/vega-bundle.js",
                              charts="assets/charts.js")
    assert '<script src="assets/charts.js"></script>' in page and '"n":4,' in page
    alone = trends.trends_html(_decisions(tonight), _summary([]), tonight, None, vega="assets/vega-bundle.js")
    assert '<script src="assets/charts.js">' not in alone and '"n":0,' in alone  # built here, with its points


def test_tonights_rooflines_carry_the_summarys_selection_of_many_kernels(monkeypatch):
    monkeypatch.setattr(trend_roofs, "SUMMARY_KERNELS", 2)
    tonight = at_roof()
    for shared in (True, False):
        specs, _, blocks, rows = trends.roofline_specs(tonight, pd.DataFrame(), [], shared=shared)
        assert "draw the 2 of 4 the summary carries" in blocks[0]
        if shared:
            assert len(rows) == 2
        else:
            [spec] = specs
            assert len(spec["datasets"][roofline_chart.KERNEL_DATA]) == 2


def test_the_findings_table_lists_the_largest_and_says_where_the_rest_are(monkeypatch):
    monkeypatch.setattr(trends, "MAX_FINDING_ROWS", 2)
    found = [{"app": "a", "device": "G", "kernel": f"k{i}", "kernel_short": f"k{i}", "grid": "", "block": "",
              "label": "new", "baseline_s": None, "value_s": 1e-3, "change_pct": None, "z": None,
              "nights_in_violation": 0, "time_share": 0.1, "impact": None, "bound": "memory:dram", "bound_flip": "",
              "roof_pct_baseline": None, "roof_pct": 50.0, "ai_dram_baseline": None, "ai_dram": 1.0,
              "note": "first night of this series"} for i in range(3)]
    found[1].update(grid="(8, 1, 1)", block="(256, 1, 1)", change_pct=4.0)
    table = trends.findings_table(found)
    assert table.count("<tr id=") == 2 and ">a | k0</span>" in table and "a | k2" not in table
    # a series whose table records no launch shape (a what-if row) has none in its name, and a first
    # night no change
    assert ">a | k1 | (8, 1, 1)×(256, 1, 1)</span>" in table and "×<" not in table
    assert table.count("<td>+4.0 %</td>") == 1 and "<td> %</td>" not in table
    assert "The 2 largest of 3 findings; every one is in the run's <code>regressions.json</code>." in table
    assert "largest of" not in trends.findings_table(found[:2])


def _decisions(kernels: pd.DataFrame) -> pd.DataFrame:
    return kernels.assign(run_id="n1", run_date="2026-01-01", label="unchanged", value_s=1e-3, baseline_s=1e-3,
                          lower_s=9e-4, upper_s=1.1e-3, ratio=1.0, z=0.0, note="", noise_s=1e-5)


def _summary(found: list) -> dict:
    return {"run_id": "n1", "findings": found, "counts": {"regression": 0, "unchanged": 4}, "alert": False,
            "environment_shift": False, "environment_changes": [], "started": [], "context": {"run_id": "n1"},
            "method": "m", "rule_version": "r"}


def test_series_names_are_unique_and_show_a_launch_shape_only_where_recorded():
    frame = pd.DataFrame({"app": ["a", "a", "a", "b"], "device": ["G"] * 4, "kernel": ["k", "k", "m", "k"],
                          "kernel_short": ["", "", "m", "k"], "grid": ["", "", "(2, 1, 1)", ""],
                          "block": ["", "", "(64, 1, 1)", ""]})
    frame.loc[1, "device"] = "H"  # another series of the same app and kernel on a second device
    names = trends.series_names(frame).tolist()
    assert names == ["a | k | G", "a | k | H", "a | m | (2, 1, 1)×(64, 1, 1) | G", "b | k | G"]
    one_device = trends.series_names(frame.assign(device="G", kernel=["k", "k2", "m", "k"], kernel_short="k"))
    assert one_device.tolist() == ["a | k", "a | k #2", "a | k | (2, 1, 1)×(64, 1, 1)", "b | k"]


def test_a_finding_on_one_device_gets_its_trend_when_the_night_has_two():
    """The trend charts name every series of the night (the device joins the names when the night has
    several): tonight's findings are drawn by those names, not by names of their own without the
    device, which matched no series and left the findings without a trend."""
    tonight = at_roof()
    night = pd.concat([tonight, tonight.assign(device="H")], ignore_index=True)
    decisions = _decisions(night)
    decisions.loc[len(tonight), ["label", "value_s", "ratio"]] = ["regression", 1.5e-3, 1.5]
    moved = decisions.loc[len(tonight)]
    found = [{**{k: moved[k] for k in ("app", "device", "kernel", "kernel_short", "grid", "block")},
              "label": "regression", "baseline_s": 1e-3, "value_s": 1.5e-3, "change_pct": 50.0, "z": 9.0,
              "nights_in_violation": 1, "time_share": 0.2, "impact": 0.1, "bound": "memory:dram", "bound_flip": "",
              "roof_pct_baseline": None, "roof_pct": None, "ai_dram_baseline": None, "ai_dram": None, "note": ""}]
    page = trends.trends_html(decisions, _summary(found), None, None, vega="assets/vega-bundle.js")
    assert "No findings tonight" not in page
    facet = json.loads(page.split("var SPECS = ")[1].split(";\n")[0])[0]
    [name] = trends.series_names(decisions)[[len(tonight)]]
    assert name.endswith(" | H") and facet["facet"]["sort"] == [name]


def test_the_apps_whose_history_starts_tonight_are_listed_up_to_a_limit():
    started = [{"app": f"app<{i}>", "device": "GPU", "series": 2} for i in range(trends.MAX_STARTED_ROWS + 3)]
    text = trends.started_html(started)
    assert f"History starts tonight for {2 * len(started):,} series of {len(started)} apps" in text
    assert text.count("<li>") == trends.MAX_STARTED_ROWS + 1 and "<li>app&lt;0&gt; on GPU: 2 series</li>" in text
    assert "… and 3 more in the run's <code>regressions.json</code>" in text
    assert trends.started_html([]) == ""


def test_the_applied_roof_is_the_one_most_rows_were_judged_with():
    """Rows of one device judged apart carry two values of a roof: the page draws the one most rows
    used (the smaller of two used as often), with the source most of its verdicts name (the first in
    text order of a tie); each device its own, in drawing order (compute classes, then levels)."""
    rows = pd.DataFrame({
        "device": ["B", "B", "B", "B", "A", "A", "A"],
        "compute_class": ["fp32", "fp32", "fp32", "fp32", "fp64", "fp64", "not a class"],
        "roof_flops": [2e13, 1e13, 1e13, 2e13, 9.7e12, float("nan"), 5e12],
        "roof_dram_bw": [1.5e12, 1.5e12, 2e12, 0.0, 1.9e12, 1.9e12, 1.9e12],
        "bound": ["compute:fp32", "compute:fp32", "memory:dram", "memory:dram", "memory:dram", "memory:dram",
                  "compute:fp64"],
        "ceiling_source": ["report", "datasheet", "report", "datasheet", "", "", "measured"],
    })
    applied = trends.applied_ceilings(conform(rows, "kernels"))
    got = list(zip(applied["device"], applied["name"], applied["value"], applied["source"], strict=True))
    assert got == [("A", "fp64", 9.7e12, "measured"), ("A", "dram", 1.9e12, "as judged"),
                   ("B", "fp32", 1e13, "datasheet"), ("B", "dram", 1.5e12, "datasheet")]


def test_the_time_axis_is_in_seconds_with_an_si_prefix():
    """A 15 ms kernel's trend reads "15ms" on its axis, not "15,000 µs": the data are in seconds and
    the axis and tooltips format them with d3's SI prefixes."""
    tonight = at_roof()
    nights = pd.concat([_decisions(tonight).assign(run_id=f"n{i}", run_date=f"2026-01-0{i}",
                                                   value_s=15e-3 * (1 + i / 100)) for i in range(1, 4)],
                       ignore_index=True)
    facet, selector = trends.trend_charts(nights, [])
    assert facet is None
    data = next(iter(selector["datasets"].values()))
    assert {r["value_s"] for r in data} == {0.01515, 0.0153, 0.01545} and "value_us" not in data[0]
    axes = [layer["encoding"]["y"] for layer in selector["layer"] if "axis" in layer["encoding"].get("y", {})]
    assert axes and all(y["field"] == "value_s" and "µs" not in y["title"] for y in axes)
    assert axes[0]["axis"]["labelExpr"] == trends.seconds_expr("datum.value")


def test_a_followed_kernel_is_one_trend_with_its_change_marked():
    """Hand-made nights (tests/nightly/test_app_total.py's helper): a kernel renamed on night 10 with
    its launch configuration kept, so the rule follows it; the page draws its nights before and
    after as one series, the night of the change marked like a segment start, under its new name."""
    from nightly.test_app_total import BEFORE, OTHER, app_nights

    from roofline.nightly.engine import decide_all

    before, after = ("attention", "(512, 1, 1)", 1e-3), ("attention_v2", "(512, 1, 1)", 1.3e-3)
    decisions = decide_all(app_nights([[before, OTHER]] * BEFORE + [[after, OTHER]] * 3))
    changed = decisions[decisions["kernel"] == "void attention_v2(float *)"]
    assert changed["previous_kernel"].iat[0] == "void attention(float *)"
    assert changed["previous_grid"].iat[0] == "(512, 1, 1)" and (changed["previous_kernel"].iloc[1:] == "").all()
    joined = trends.followed_as_one(decisions)
    names = trend_roofs.series_names(joined)
    mine = names[joined["kernel"] == "void attention_v2(float *)"]
    assert len(mine) == BEFORE + 3 and mine.nunique() == 1 and mine.iat[0].startswith("app | attention_v2")
    assert "void attention(float *)" not in set(joined["kernel"])
    data = trends.trend_data(joined, names)
    marked = data[data["followed"]]
    assert marked["series"].tolist() == [mine.iat[0]] and marked["run_id"].tolist() == [changed["run_id"].iat[0]]
    # without the change nothing moves: the decisions are drawn as they are
    plain = decide_all(app_nights([[before, OTHER]] * 4))
    assert trends.followed_as_one(plain) is plain and not trends.trend_data(plain)["followed"].any()
