"""Report stage: the pages' safety (no network, escaped names), kernel table, CSV, IO edge."""

import json
import re

import altair as alt
import numpy as np
import pandas as pd
import pytest
from charts.test_roofline_chart import make_ceilings, make_kernels

from roofline.charts import roofline_chart
from roofline.pages import report
from roofline.stages import report as report_stage
from roofline.tables.files import write_table
from roofline.tables.schemas import conform

HOSTILE = "<script>alert(1)</script> & \"q\" </script>"
IMG = "<img src=x onerror=document.title='pwned'>"


def make_diagnostics() -> pd.DataFrame:
    rows = [
        {"app": "app0", "stage": "parse", "severity": "error", "source_file": "bad.ncu-rep",
         "message": "bad.ncu-rep: not a report <b>bold</b>"},
        {"app": "app1", "stage": "parse", "severity": "warning", "source_file": "b.ncu-rep", "launch": 3,
         "message": "launch 3: cannot derive l2_bytes; collect it with --set roofline"},
    ]
    return conform(pd.DataFrame(rows), "diagnostics")


def test_unplottable_kernels_are_left_out_and_listed():
    kernels = make_kernels()
    kernels.loc[0, ["performance", "attainable"]] = np.nan  # no ceiling: cannot be placed
    kernels.loc[0, "note"] = "no ceiling for fp32: that work is not judged"
    assert len(roofline_chart.plot_points(kernels)) == len(kernels) - 1
    page = report.summary_html(kernels, make_ceilings(), make_diagnostics(), "t")
    assert "not on a chart" in page and "no ceiling for fp32" in page


def html_escape(text: str) -> str:
    import html

    return html.escape(text, quote=True)


def page_data(page: str) -> dict:
    """The page's embedded ``DATA``, with its columns decoded as the inline script decodes them."""
    data = json.loads(re.search(r"\nvar DATA = (.*);\nvar SPECS = ", page).group(1))
    data["rows"] = pd.DataFrame({
        name: col if isinstance(col, list) else [col["levels"][c] for c in col["codes"]]
        for name, col in data["cols"].items()
    })
    return data


@pytest.fixture(scope="module")
def page() -> str:
    names = [HOSTILE, IMG] + [f"k{i}" for i in range(4)]
    return report.summary_html(make_kernels(names=names), make_ceilings(), make_diagnostics(), "T <i>x</i>")


def test_page_is_offline(page):
    assert "cdn.jsdelivr" not in page
    assert not re.search(r"<script[^>]*\bsrc\s*=", page, re.IGNORECASE)
    assert page.count("<script") == 2  # the bundle once, the data, specs and table code once
    assert 'id="chart0"' in page and "vegaEmbed(" in page and "editor: false" in page
    assert re.search(r"""<(img|link|iframe)[^>]*(src|href)\s*=\s*["']?https?:""", page) is None
    assert "data:text/csv" not in page and "new Blob(" in page  # the CSV is made in the browser


def test_hostile_kernel_name_is_data(page):
    assert HOSTILE not in page and IMG not in page
    assert "<script>alert(1)" not in page
    assert page.count("</script>") == 2
    script = page[page.rindex("<script>"):]
    assert "</" not in script[len("<script>"): script.rindex("</script>")]  # nothing can close the element
    assert "innerHTML" not in script and "insertAdjacentHTML" not in script  # names go in as text
    rows = page_data(page)["rows"]
    assert {HOSTILE, IMG} <= set(rows["kernel"])
    assert "T &lt;i&gt;x&lt;/i&gt;" in page and "<b>bold</b>" not in page


def test_each_name_once_and_numbers_rounded():
    names = [f"void ns::very_long_templated_kernel_{i}<float, {i}, true>(float const*, int)" for i in range(6)]
    page = report.summary_html(make_kernels(names=names), make_ceilings(), make_diagnostics(), "t")
    for name in names:
        assert page.count(name.replace("<", "\\u003c")) == 1
    data = page_data(page)
    for name, col in data["cols"].items():
        if name not in report.TEXT_FIELDS:
            assert all(v is None or len(f"{abs(v):e}".split("e")[0].rstrip("0").replace(".", "")) <= 4
                       for v in col), name
    spec = json.loads(re.search(r"\nvar SPECS = (.*);\nvar VIEWS = ", page).group(1))[0]
    assert spec["datasets"][roofline_chart.KERNEL_DATA] == []  # filled in the browser from DATA
    assert set(roofline_chart.CHART_FIELDS) <= set(data["cols"]) and data["fields"] == roofline_chart.CHART_FIELDS


def test_table_data_sorted_by_priority_with_app_links(page):
    data = page_data(page)
    rows = data["rows"]
    assert data["n"] == len(rows) == 6 and data["appPrefix"] == "apps/"
    priorities = rows["priority"].dropna().tolist()
    assert priorities == sorted(priorities, reverse=True)
    assert [head for head, *_ in data["table"]] == report.TABLE_COLUMNS
    assert all(field is None or field in rows for _, field, _ in data["table"])
    head = page[page.index('<table class="kernels"'):]
    head = head[: head.index("</thead>")]
    assert re.findall(r">([^<>]+)</th>", head) == [html_escape(c) for c in report.TABLE_COLUMNS]
    assert 'href="apps/app0.html"' in page and 'href="apps/app1.html"' in page  # the nav
    assert rows["rank"].notna().all()
    assert data["charts"] == [{"device": "GPU-A", "canvas": False, "controls": {
        "count": "6 kernels", "max": 6, "apps": [roofline_chart.ALL, "app0", "app1"]}}]


def test_csv_columns_are_the_table_and_full_name(page):
    data = page_data(page)
    assert [head for head, _ in data["csv"]] == [*report.TABLE_COLUMNS, "kernel (full name)"]
    assert data["csvName"] == "kernels.csv" and 'id="csv"' in page


def test_diagnostics_listed(page):
    section = page[page.index('id="diagnostics"'):]
    assert "bad.ncu-rep: not a report &lt;b&gt;bold&lt;/b&gt;" in section
    assert "cannot derive l2_bytes" in section


def test_app_page_has_only_its_kernels():
    kernels = make_kernels()
    page = report.app_html(kernels, make_ceilings(), make_diagnostics(), "app1", "T")
    assert "../summary.html" in page
    data = page_data(page)
    assert set(data["rows"]["app"]) == {"app1"} and data["appPrefix"] is None and data["csvName"] == "app1.csv"
    assert "not a report" not in page  # app0's diagnostic


def _specs(page: str) -> list[dict]:
    return json.loads(re.search(r"\nvar SPECS = (.*);\nvar VIEWS = ", page).group(1))


def _charts_asset(path) -> dict:
    text = path.read_text()
    assert text.startswith("window.ROOFLINE_CHARTS = ") and text.endswith(";\n")
    return json.loads(text[len("window.ROOFLINE_CHARTS = "):-2])


def test_app_page_draws_the_summary_chart_with_its_own_controls(tmp_path):
    """An app page draws the summary's chart of its device (same axes, roofs and app colours), from
    the shared assets/charts.js: it carries no spec of its own, only the controls that fit its rows
    (its kernel count, top-N slider and app filter), which its script sets before drawing."""
    kernels = make_kernels(12, seed=5)
    pages = report.write_pages(kernels, make_ceilings(), make_diagnostics(), tmp_path / "summary.html",
                               tmp_path / "apps", "T")
    summary_page = (tmp_path / "summary.html").read_text()
    app_page = (tmp_path / "apps" / "app1.html").read_text()
    assert len(pages) == 3
    shared = _charts_asset(tmp_path / "assets" / "charts.js")
    assert list(shared) == ["GPU-A"] and shared["GPU-A"] == _specs(summary_page)[0]
    assert _specs(app_page) == [None]
    n_app1 = int((kernels["app"] == "app1").sum())  # every row is drawn (the what-if one at its attainable)
    [entry] = page_data(app_page)["charts"]
    assert entry == {"device": "GPU-A", "canvas": False, "shared": True, "controls": {
        "count": f"{n_app1} kernels", "max": n_app1, "apps": [roofline_chart.ALL, "app1"]}}
    [summary_entry] = page_data(summary_page)["charts"]
    assert summary_entry["controls"]["count"] == f"{len(kernels)} kernels" and "shared" not in summary_entry
    assert summary_entry["controls"]["apps"] == [roofline_chart.ALL, "app0", "app1"]
    assert summary_entry["controls"]["max"] > n_app1
    # the spec is built from every kernel of the device: its own controls are the summary's, until fitted
    params = {p["name"]: p for p in shared["GPU-A"]["params"]}
    assert params["top_n"]["bind"]["max"] == len(kernels)
    # the same page from app_html alone, given the assets' URLs, is identical; all pages load the one bundle
    alone = report.app_html(conform(kernels, "kernels"), make_ceilings(), make_diagnostics(), "app1", "T",
                            vega="../assets/vega-bundle.js", charts="../assets/charts.js")
    assert alone == app_page
    assert (tmp_path / "assets" / "vega-bundle.js").read_text() == report.vega_bundle()
    for page in pages:
        text = page.read_text()
        assert "vegaEmbed" not in text.split("<script>")[0]
        sources = re.findall(r'<script src="([^"]+)"></script>', text)
        assert (page.parent / sources[0]).resolve() == (tmp_path / "assets" / "vega-bundle.js").resolve()
        if page.parent.name == "apps":
            assert (page.parent / sources[1]).resolve() == (tmp_path / "assets" / "charts.js").resolve()


def test_an_app_page_alone_builds_its_own_chart():
    """Without the summary's assets an app page is whole: the bundle inlined, its charts built from
    the kernels it is given."""
    kernels = make_kernels(12, seed=5)
    page = report.app_html(conform(kernels, "kernels"), make_ceilings(), make_diagnostics(), "app1", "T")
    [spec] = _specs(page)
    assert spec["title"]["text"] == "GPU-A" and "shared" not in page_data(page)["charts"][0]
    assert "ROOFLINE_CHARTS" not in page.split("<script>\nvar DATA")[0]


def test_an_app_page_is_written_from_its_own_tables(tmp_path):
    """What the classify_app job writes as the app's page: its kernels, the ceilings and its
    diagnostics tables in, its page out, pointing at the summary's assets."""
    kernels = make_kernels(12, seed=5)
    diagnostics = tmp_path / "diagnostics.parquet"
    write_table(make_diagnostics(), "diagnostics", diagnostics)
    out = tmp_path / "reports" / "apps" / "app1.html"
    own = conform(kernels[kernels["app"] == "app1"], "kernels")
    assert report.write_app_page(own, make_ceilings(), [diagnostics], "app1", out, "T",
                                 summary=tmp_path / "reports" / "summary.html") == out
    page = out.read_text()
    assert re.findall(r'<script src="([^"]+)"></script>', page) == ["../assets/vega-bundle.js", "../assets/charts.js"]
    assert set(page_data(page)["rows"]["app"]) == {"app1"} and "cannot derive l2_bytes" in page
    assert "not a report" not in page  # app0's diagnostic
    with pytest.raises(ValueError, match="cannot be a file name"):
        report.write_app_page(own, make_ceilings(), [], "../evil", tmp_path / "x.html")


def test_device_without_ceilings_has_no_chart():
    kernels = pd.concat([make_kernels(), make_kernels(3, device="GPU-B")], ignore_index=True)
    page = report.summary_html(kernels, make_ceilings(), make_diagnostics(), "t")
    assert 'id="chart0"' in page and 'id="chart1"' not in page
    assert [c["device"] for c in page_data(page)["charts"]] == ["GPU-A"]
    assert "No chart for GPU-B (no selected ceiling)" in page
    assert (page_data(page)["rows"]["device"] == "GPU-B").sum() == 3  # in the table all the same


def test_thousands_of_kernels():
    kernels = make_kernels(3000, seed=3)
    with alt.data_transformers.disable_max_rows():
        spec = roofline_chart.roofline_chart(kernels, make_ceilings(), "GPU-A").to_dict(validate=False)
    params = {p["name"]: p for p in spec["params"]}
    assert params["top_n"]["value"] == roofline_chart.TOP_N_DEFAULT and params["top_n"]["bind"]["max"] == 3000
    assert len(spec["datasets"][roofline_chart.KERNEL_DATA]) == 3000  # a standalone chart carries its points
    page = report.summary_html(kernels, make_ceilings(), make_diagnostics(), "big")
    data = page_data(page)
    # the summary carries the kernels that matter most: half by priority, half by GPU time
    assert data["n"] == report.SUMMARY_KERNELS and data["charts"] == [{"device": "GPU-A", "canvas": True, "controls": {
        "count": "2000 kernels", "max": 2000, "apps": [roofline_chart.ALL, "app0", "app1"]}}]
    carried = set(data["rows"]["kernel"])
    half = report.SUMMARY_KERNELS // 2
    assert set(kernels.sort_values("priority", ascending=False)["kernel"].head(half)) <= carried
    assert set(kernels.sort_values("duration_s", ascending=False)["kernel"].head(half)) <= carried
    assert "carries 2,000 of the 3,000 kernels" in page
    assert page[page.index('<table class="kernels"'):page.index('id="ceilings"')].count("<tr>") == 1  # the head
    assert len(page) - len(report.vega_bundle()) < 3000 * 400  # bytes per kernel


def test_write_report_and_main(tmp_path):
    paths = {name: tmp_path / f"{name}.parquet" for name in ("kernels", "ceilings", "diagnostics")}
    write_table(make_kernels(), "kernels", paths["kernels"])
    write_table(make_ceilings(), "ceilings", paths["ceilings"])
    write_table(make_diagnostics(), "diagnostics", paths["diagnostics"])
    out = tmp_path / "reports" / "summary.html"
    code = report_stage.main([
        "--kernels", str(paths["kernels"]), "--ceilings", str(paths["ceilings"]),
        "--diagnostics", str(paths["diagnostics"]), "--output", str(out),
        "--apps-dir", str(tmp_path / "reports" / "apps"), "--title", "T", "--apps", "app0", "quiet",
    ])
    assert code == 0
    assert out.read_text().startswith("<!DOCTYPE html>")
    pages = sorted(p.name for p in (tmp_path / "reports" / "apps").iterdir())
    assert pages == ["app0.html", "app1.html", "quiet.html"]  # quiet: no rows, still a page
    assert "No kernels." in (tmp_path / "reports" / "apps" / "quiet.html").read_text()
    # an app's page is titled by the app (not "T: app1", a summary's title); the run's title leads back
    app1 = (tmp_path / "reports" / "apps" / "app1.html").read_text()
    assert "<title>app1</title>" in app1 and "<h1>app1</h1>" in app1
    assert '<a href="../summary.html">← T</a>' in app1
    assert not list((tmp_path / "reports").glob(".*.tmp"))
    assert out.stat().st_mode & 0o044  # readable by others, as a report should be
    # the config's report.top_kernels, as the workflow's report job passes it: every device chart's first count
    again = tmp_path / "again" / "summary.html"
    assert report_stage.main(["--kernels", str(paths["kernels"]), "--ceilings", str(paths["ceilings"]),
                        "--output", str(again), "--top-kernels=3"]) == 0
    for spec in [*_specs(again.read_text()), *_charts_asset(again.parent / "assets" / "charts.js").values()]:
        top = next(p for p in spec["params"] if p["name"] == "top_n")
        assert top["value"] == 3 and top["bind"]["max"] == len(make_kernels())
    with pytest.raises(SystemExit):
        report_stage.main(["--kernels", str(paths["kernels"]), "--output", str(again), "--top-kernels=0"])


def test_bad_app_name_is_refused(tmp_path):
    kernels = make_kernels()
    kernels["app"] = "../evil"
    with pytest.raises(ValueError, match="cannot be file names"):
        report.write_pages(kernels, make_ceilings(), make_diagnostics(), tmp_path / "s.html", tmp_path / "apps", "t")


def test_vega_bundle_is_cached_per_version_and_a_damaged_cache_is_rebuilt(tmp_path, monkeypatch):
    import vl_convert

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cached = tmp_path / "roofline" / f"vega-{vl_convert.__version__}.js"
    cached.parent.mkdir()
    cached.write_text("truncated", encoding="utf-8")  # hand-made damage
    report.vega_bundle.cache_clear()
    try:
        bundle = report.vega_bundle()
        assert "vegaEmbed" in bundle and cached.read_text(encoding="utf-8") == bundle
        report.vega_bundle.cache_clear()
        assert report.vega_bundle() == bundle  # read back from the file
    finally:
        report.vega_bundle.cache_clear()


def glance_of(page: str) -> str:
    return page[page.index('<section id="glance">'):page.index('<section id="charts">')]


def test_glance_names_the_roof_the_saving_and_what_is_missing():
    kernels = make_kernels(8, seed=2)
    unknown = kernels.index[0]
    kernels.loc[unknown, ["bound", "bound_kind", "binding_roof", "roof_pct", "priority"]] = ["unknown", "unknown", "",
                                                                                           np.nan, np.nan]
    kernels.loc[unknown, "note"] = "no FLOP counters in the input: no verdict"
    kernels["roof_dram_bw"] = 1.5552e12
    kernels["roof_flops"] = np.where(kernels["compute_class"] == "fp64", 9.7e12, 19.5e12)
    kernels["predicted_duration_s"] = kernels["duration_s"] * kernels["roof_pct"] / 100
    page = report.summary_html(kernels, make_ceilings(), make_diagnostics(), "t")
    glance = glance_of(page)
    ranked, unjudged = glance.split("Not judged")
    assert "DRAM bandwidth, 1.56 TB/s" in ranked or "FP32 peak, 19.5 TFLOP/s" in ranked
    assert "no FLOP counters in the input" in unjudged and "no FLOP counters" not in ranked
    assert kernels.loc[unknown, "kernel_short"] not in ranked  # never ranked as if judged
    # the first row is the kernel with the most time to gain at its roof, stated in seconds
    judged = kernels.drop(unknown).dropna(subset=["priority"])
    saving = judged["duration_s"] - judged["predicted_duration_s"]
    best = judged.loc[saving.idxmax()]
    first = ranked[ranked.index("<tbody>"):].split("</tr>")[0]
    assert html_escape(best["kernel_short"]) in first and roofline_chart.si(saving.max(), "s") in first


def test_roof_words():
    from roofline.pages.glance import class_words, roof_words

    assert class_words("tensor_fp16_acc32") == "FP16 tensor (FP32 accumulate)"
    assert class_words("tensor_int8_sparse") == "INT8 tensor 2:4 sparse"
    row = pd.Series({"bound_kind": "compute", "binding_roof": "tensor_fp16_acc32", "roof_flops": 165e12})
    assert roof_words(row) == "FP16 tensor (FP32 accumulate) peak, 165 TFLOP/s"
    row = pd.Series({"bound_kind": "memory", "binding_roof": "dram", "roof_dram_bw": 1.94e12})
    assert roof_words(row) == "DRAM bandwidth, 1.94 TB/s"
    row = pd.Series({"bound_kind": "none", "binding_roof": "l2", "roof_l2_bw": 5.5e12})
    assert roof_words(row) == "L2 bandwidth, 5.5 TB/s (no FP work)"
    row = pd.Series({"bound_kind": "none", "instruction_bound": "issue", "issue_peak_ips": 609e9})
    assert roof_words(row) == "instruction issue rate, 609 Gwarp inst/s (no FP work)"
    assert roof_words(pd.Series({"bound": "unknown", "bound_kind": "unknown", "binding_roof": ""})) == "unknown"


@pytest.fixture(scope="module")
def real_pages(tmp_path_factory):
    """Summary and app pages of three real reports: SiLU (ncu rule results with speedups), the
    GTX 1650 stencil (a kernel without FP work) and the A40 Julia report (tensor work not counted)."""
    import warnings

    from conftest import real_fixture

    import roofline

    reports = {"silu_a100": ("a100sxm-silu-full-ncu2025.1", "2025-04-21-77_06-MT.ncu-rep"),
               "heatsim_gtx1650": ("gtx1650-heatsim-stencil-full-ncu2021.3", "report_name.ncu-rep"),
               "julia_a40": ("a40-julia-frb-full-ncu2022.4", "profile.ncu-rep")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tables = [roofline.read(real_fixture(folder) / name, app=app) for app, (folder, name) in reports.items()]
        result = roofline.analyse(tables)
    out = tmp_path_factory.mktemp("real-pages")
    report.write_pages(result.kernels, result.ceilings, result.diagnostics, out / "summary.html", out / "apps",
                       "Roofline summary")
    return out, result


def test_real_glance_and_findings(real_pages):
    out, result = real_pages
    summary = (out / "summary.html").read_text()
    glance = glance_of(summary)
    silu = result.kernels[result.kernels["app"] == "silu_a100"].iloc[0]
    saving = silu["duration_s"] - silu["predicted_duration_s"]
    assert silu["bound"] == "memory:dram" and roofline_chart.si(saving, "s") in glance
    assert f"DRAM bandwidth, {roofline_chart.si(silu['roof_dram_bw'], 'B/s')}" in glance
    assert "ncu: Long Scoreboard Stalls, est. speedup 23 %" in glance  # ncu_report: 22.94 %
    assert "tensor work not counted" in glance.split("Not judged")[1]  # the A40 kernel: unknown, said why
    assert "(no FP work)" in glance  # the stencil's FP-free kernel judged on its instruction roofline
    app = (out / "apps" / "silu_a100.html").read_text()
    findings = app[app.index('<section id="findings">'):app.index('<section id="ceilings">')]
    assert "Long Scoreboard Stalls" in findings and "est. speedup 22.9 % (global)" in findings
    assert "@section:" not in findings


def test_real_instruction_roofline_drawn_for_fp_free_kernels(real_pages):
    out, result = real_pages
    page = (out / "apps" / "heatsim_gtx1650.html").read_text()
    specs = _specs(page)
    # the device roofline is the summary's (assets/charts.js); the instruction roofline is the page's own
    assert [c["device"] for c in page_data(page)["charts"]] == ["NVIDIA GeForce GTX 1650"] * 2 and specs[0] is None
    shared = _charts_asset(out / "assets" / "charts.js")
    titles = [s["title"]["text"] for s in (shared["NVIDIA GeForce GTX 1650"], specs[1])]
    assert titles == ["NVIDIA GeForce GTX 1650", "NVIDIA GeForce GTX 1650: instruction roofline"]
    points = next(layer for layer in specs[1]["layer"] if layer["mark"]["type"] == "point")["data"]["values"]
    fp_free = result.kernels[(result.kernels["app"] == "heatsim_gtx1650") & (result.kernels["bound"] == "none")]
    assert {p["kernel"] for p in points} == set(fp_free["kernel"]) and len(fp_free)
    assert all(p["verdict"] in ("issue", "memory:dram", "memory:l2", "memory:l1") for p in points)


def test_static_export_offline(real_pages):
    """A summary chart exports to SVG and PNG without a network: vl-convert renders it here; the
    pages' export menu (vega-embed actions) renders in the browser (test_browser)."""
    import vl_convert

    out, result = real_pages
    device = result.kernels.loc[result.kernels["app"] == "silu_a100", "device"].iat[0]
    with alt.data_transformers.disable_max_rows():
        spec = roofline_chart.roofline_chart(result.kernels, result.ceilings, device).to_dict(validate=False)
    svg = vl_convert.vegalite_to_svg(spec)
    assert svg.startswith("<svg") and "DRAM 1.56 TB/s" in svg and "Arithmetic intensity" in svg
    png = vl_convert.vegalite_to_png(spec, scale=1)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    instruction = _specs((out / "apps" / "heatsim_gtx1650.html").read_text())[1]
    assert "instruction roofline" in vl_convert.vegalite_to_svg(instruction)


def test_the_summary_folds_the_app_links_of_a_fleet_into_its_header():
    few = report.summary_html(make_kernels(), make_ceilings(), make_diagnostics(), "t",
                              apps=[f"app{i}" for i in range(report.NAV_APPS_OPEN)])
    assert "<nav>Apps: <a href=" in few and "<details><summary>Apps:" not in few
    many = [f"app<{i}>" for i in range(report.NAV_APPS_OPEN + 1)]
    kernels = make_kernels()
    page = report.summary_html(kernels, make_ceilings(), make_diagnostics(), "t", apps=many)
    header = page[page.index("<nav><details><summary>Apps: "):]
    header = header[: header.index("</details></nav>")]
    count = len(set(many) | set(kernels["app"]))
    assert header.startswith(f'<nav><details><summary>Apps: {count} (the <a href="#apps">Apps</a> table')
    assert 'href="apps/app%3C0%3E.html">app&lt;0&gt;</a>' in header  # every app still linked, escaped
    assert '<section id="apps">' in page


def test_the_apps_table_sums_each_app_and_names_its_top_kernel():
    from roofline.pages.overview import apps_html

    # hand-made: "b" has 6 s of GPU time (kernels at 50 % and 80 % of roof, 2 s and 4 s: 70 %
    # time-weighted, and one unjudged), "a" 2 s on two devices, "c" is an app without kernels
    kernels = pd.DataFrame({
        "app": ["a", "b", "b", "a", "b"],
        "device": ["GPU X", "GPU X", "GPU X", "GPU Y", "GPU X"],
        "kernel": ["ka1(int)", "kb1(float)", "kb2(float)", "ka2(int)", "kb3<3>"],
        "kernel_short": ["ka1", "kb1", "kb2", "ka2", "kb3"],
        "duration_s": [1.5, 2.0, 4.0, 0.5, np.nan],
        "roof_pct": [np.nan, 50.0, 80.0, 10.0, 30.0],
        "priority": [np.nan, 0.1, 0.3, np.nan, np.nan],
    })
    page = apps_html(kernels, ["a", "b", "c"], {"a": "/in/a.csv"})
    rows = re.findall(r"<tr><td><a [^>]*>(\w)</a></td>(.*?)</tr>", page)
    assert [app for app, _ in rows] == ["b", "a", "c"]  # longest GPU time first
    cells = {app: re.findall(r"<td[^>]*>(.*?)</td>", rest) for app, rest in rows}
    assert cells["b"][:6] == ["", "GPU X", "3", "6 s", "75.0 %", "70.0 %"]
    assert 'title="kb2(float)">kb2<' in cells["b"][6]
    assert cells["a"][:6] == ["a.csv", "GPU X, GPU Y", "2", "2 s", "25.0 %", "10.0 %"]
    assert 'title="ka1(int)">ka1<' in cells["a"][6]  # no priority: the first of its kernels
    assert cells["c"] == ["", "", "0", "0 s", "0.0 %", "–", ""]


def test_a_device_with_no_judged_kernel_gets_no_chart_and_says_why(real_pages):
    """The A40 Julia report's one kernel with FLOP counts has tensor work its counters miss: it is
    not drawn as a slow kernel at its partial FLOPs; the page says why there is no chart."""
    out, result = real_pages
    a40 = result.kernels[result.kernels["device"] == "NVIDIA A40"]
    assert not a40["bound"].str.startswith(("compute:", "memory:")).any()
    assert a40["note"].str.contains("tensor work not counted").any()
    summary = (out / "summary.html").read_text()
    assert "No chart for NVIDIA A40 (no judged kernel with both a performance and an intensity)" in summary
    assert "in each kernel&#x27;s note" in summary or "in each kernel's note" in summary


def test_a_failed_input_is_marked_with_its_reason_and_the_header_counts_the_table():
    """Issue #47 item 5: an app whose input failed is not an empty app ("0 kernels, 0 s, –"): its
    Apps row says failed and why (its first error's first line, cut with the whole as tooltip), the
    Inputs box at the top lists it, and the header counts the apps the table lists."""
    kernels = make_kernels()
    long = "in/long.ncu-rep: the file is truncated or damaged: " + "x" * 400
    diagnostics = conform(pd.DataFrame([
        {"app": "broken", "stage": "parse", "severity": "error", "source_file": "in/broken.csv",
         "message": "in/broken.csv: line 3: ID 'ID' is not a launch number: keep ncu's ID column\nsecond line"},
        {"app": "broken", "stage": "parse", "severity": "error", "source_file": "in/broken.csv",
         "message": "in/broken.csv: a second error"},
        {"app": "long", "stage": "parse", "severity": "error", "source_file": "in/long.ncu-rep", "message": long},
        {"app": "app1", "stage": "classify", "severity": "error", "source_file": "b.csv", "message": "b.csv: odd"},
        {"app": "quiet", "stage": "parse", "severity": "warning", "source_file": "q.csv", "message": "q.csv: empty"},
    ]), "diagnostics")
    page = report.summary_html(kernels, make_ceilings(), diagnostics, "t")
    section = page[page.index('<section id="apps">'):]
    section = section[: section.index("</section>")]
    rows = dict(re.findall(r'<tr[^>]*><td><a [^>]*>(\w+)</a></td>(.*?)</tr>', section))
    assert sorted(rows) == ["app0", "app1", "broken", "long", "quiet"]
    assert rows["broken"] == ('<td class="cfg">broken.csv</td><td colspan="6" class="error"><strong>failed</strong>: '
                              "in/broken.csv: line 3: ID &#x27;ID&#x27; is not a launch number: keep ncu&#x27;s ID "
                              "column</td>")
    assert "<strong>failed</strong>: <span title=" in rows["long"] and "x…</span>" in rows["long"]
    assert "failed" not in rows["app1"] and "failed" not in rows["quiet"]  # kernels, or no error: not failed
    assert '<td class="n">0</td>' in rows["quiet"]
    top = page[page.index('<section id="inputs"'):]
    top = top[: top.index("</section>")]
    assert "2 input(s) failed" in top
    assert '<strong class="error">broken failed</strong>' in top and "keep ncu&#x27;s ID column</li>" in top
    assert '<strong class="error">long failed</strong>' in top and "quiet" not in top
    header = re.search(r'<p class="meta">(\d+) kernels, (\d+) app\(s\) \((\d+) failed', page)
    assert header.groups() == (str(len(kernels)), str(len(rows)), "2")
    clean = report.summary_html(kernels, make_ceilings(), diagnostics[diagnostics["severity"] != "error"], "t")
    assert "input(s) failed" not in clean and '<tr class="failed">' not in clean
