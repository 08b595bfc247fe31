"""The summary's "Tonight against the baseline" block (roofline/pages/tonight.py) and report --regressions."""

import json

import pytest
from test_chart import make_ceilings, make_kernels
from test_report import make_diagnostics

from roofline import report
from roofline.pages import tonight
from roofline.schemas import write_table


def finding(label: str, kernel: str, impact: float, **extra) -> dict:
    return {"app": "app0", "device": "GPU-A", "kernel": kernel, "kernel_short": kernel[:20], "grid": "(1, 1, 1)",
            "block": "(64, 1, 1)", "label": label, "baseline_s": 1e-5, "value_s": 1.5e-5, "change_pct": 50.0,
            "impact": impact, "bound": "memory:dram", "roof_pct_baseline": 40.0, "roof_pct": 27.0, **extra}


SUMMARY = {
    "run_id": "2026-02-14", "kernels": 50, "environment_shift": False,
    "counts": {"regression": 1, "improvement": 1, "suspicious": 1, "unchanged": 47},
    # by impact, as regressions.json keeps them: the regression is not first
    "findings": [finding("improvement", "fast<int>", 0.3), finding("suspicious", "odd", 0.2),
                 finding("regression", "slow<float>&", 0.1)],
}


def test_regressions_come_first_linked_to_their_row_on_the_trends_page():
    block = tonight.tonight_html(SUMMARY, "trends.html")
    labels = [block.index(f"<td{c}>{label}</td>") for c, label in
              ((' class="error"', "regression"), ("", "improvement"), ("", "suspicious"))]
    assert labels == sorted(labels)
    anchor = tonight.series_anchor(SUMMARY["findings"][2])
    assert f'href="trends.html#{anchor}"' in block
    assert "slow&lt;float&gt;&amp;" in block and "slow<float>" not in block  # names are data
    assert "1 regression, 1 improvement, 1 suspicious</strong>, of 50 kernel series" in block
    assert "10 µs → 15 µs (+50.0 %)" in block


def test_the_anchor_is_the_series_identity_not_its_place():
    a, b = finding("regression", "k", 1.0), finding("improvement", "k", 9.0, change_pct=-5.0)
    assert tonight.series_anchor(a) == tonight.series_anchor(b)
    assert tonight.series_anchor(a) != tonight.series_anchor({**a, "grid": "(2, 1, 1)"})


def test_a_quiet_night_is_one_line_and_many_findings_are_cut():
    quiet = tonight.tonight_html({**SUMMARY, "counts": {"unchanged": 50}, "findings": []}, "trends.html")
    assert "no kernel moved" in quiet and "<table" not in quiet
    many = {**SUMMARY, "findings": [finding("regression", f"k{i}", 1.0) for i in range(20)]}
    block = tonight.tonight_html(many, "t.html")
    assert block.count("<tr><td") == tonight.TONIGHT_LISTED and "… and 12 more" in block


@pytest.fixture
def tables(tmp_path):
    paths = {name: tmp_path / f"{name}.parquet" for name in ("kernels", "ceilings", "diagnostics")}
    write_table(make_kernels(), "kernels", paths["kernels"])
    write_table(make_ceilings(), "ceilings", paths["ceilings"])
    write_table(make_diagnostics(), "diagnostics", paths["diagnostics"])
    return ["--kernels", str(paths["kernels"]), "--ceilings", str(paths["ceilings"]), "--diagnostics",
            str(paths["diagnostics"]), "--apps-dir", str(tmp_path / "reports" / "apps")]


def test_report_main_adds_the_block_after_at_a_glance_when_a_history_exists(tmp_path, tables):
    out = tmp_path / "reports" / "summary.html"
    regressions = tmp_path / "reports" / "regressions.json"
    regressions.parent.mkdir(parents=True)
    regressions.write_text(json.dumps(SUMMARY))
    assert report.main([*tables, "--output", str(out), "--regressions", str(regressions)]) == 0
    page = out.read_text()
    assert page.index('<section id="glance">') < page.index('<section id="tonight">') < page.index('id="charts"')
    assert f'href="trends.html#{tonight.series_anchor(SUMMARY["findings"][2])}"' in page


def test_report_main_without_a_history_has_no_block(tmp_path, tables):
    out = tmp_path / "reports" / "summary.html"
    assert report.main([*tables, "--output", str(out), "--regressions", str(tmp_path / "absent.json")]) == 0
    assert 'id="tonight"' not in out.read_text()
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not the tracking stage's regressions.json"):
        tonight.add_tonight(out, tmp_path / "bad.json")
