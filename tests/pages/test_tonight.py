"""The summary's "Tonight against the baseline" block (roofline/pages/tonight.py): built by the
tracking stage as tonight.js, shown by the summary's slot (report --tonight-script)."""


import pytest
from charts.test_roofline_chart import make_ceilings, make_kernels

from pages.test_report import make_diagnostics
from roofline.pages import tonight
from roofline.stages import report as report_stage
from roofline.tables.files import write_table


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


def test_report_main_adds_a_slot_that_tonight_js_fills_in_the_browser(tmp_path, tables):
    """The summary does not wait for the tracking stage: it loads tonight.js (written by that stage
    beside it) when opened, and shows the block after At a glance, its links on the trends page."""
    from test_browser import CHROMIUM, chromium

    out = tmp_path / "reports" / "summary.html"
    script = tmp_path / "reports" / "tonight.js"
    assert report_stage.main([*tables, "--output", str(out), "--tonight-script", str(script)]) == 0
    page = out.read_text()
    assert '<script src="tonight.js"></script>' in page and 'id="tonight"' not in page
    # no night tracked yet: an empty script, so the page loads no missing file and shows no block
    assert script.read_text() == 'window.rooflineTonight = "";  // no night tracked yet\n'
    tonight.write_tonight_script(script, SUMMARY, tmp_path / "reports" / "trends.html")
    assert report_stage.main([*tables, "--output", str(out), "--tonight-script", str(script)]) == 0
    assert "slow&lt;float&gt;" in script.read_text(), "the tracking stage's script is never replaced"
    if CHROMIUM is None:
        pytest.skip("headless Chromium not installed: the slot is in the page, not drawn")
    dom = chromium(out.as_uri(), tmp_path / "profile", "--dump-dom").stdout
    assert dom.index('<section id="glance">') < dom.index('<section id="tonight">') < dom.index('id="charts"')
    assert f'href="trends.html#{tonight.series_anchor(SUMMARY["findings"][2])}"' in dom
    assert "slow&lt;float&gt;&amp;" in dom, "kernel names stay escaped text"


def test_pages_written_without_tracking_have_no_slot(tmp_path, tables):
    out = tmp_path / "reports" / "summary.html"
    assert report_stage.main([*tables, "--output", str(out)]) == 0
    assert "tonight" not in out.read_text()


def test_writing_tonight_block_does_not_import_altair():
    """The tracking job writes tonight.js right after judging; Altair (~0.4 s to import) is for
    the pages that draw charts, not for this block of text and links."""
    import subprocess
    import sys

    probe = "import sys, roofline.pages.tonight; print('altair' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
