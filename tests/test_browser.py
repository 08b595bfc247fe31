"""The summary page in headless Chromium: charts render offline, hostile names stay inert.

Needs Debian's ``chromium`` (``apt-get install chromium``); skipped when it is absent.
"""

import csv
import html
import io
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from charts.test_roofline_chart import make_ceilings, make_kernels
from pages.test_report import HOSTILE, IMG, make_diagnostics
from pages.test_report import real_pages as real_pages  # a fixture, shared

from roofline.charts import roofline_chart
from roofline.pages import report
from roofline.stages import track_history
from roofline.tables.schemas import conform

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic", "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
    "--virtual-time-budget=10000",
]
# Appended to the page under test only: lists every resource the page fetched, drives the kernels
# table (find, show more, show all) and keeps the CSV the page would download, then drives the first
# chart's inputs (app filter, top N, colour) and counts the kernel points drawn each time.
PROBE = """<script>
function kernelPoints(c) {
  var layer = SPECS[c].layer.find(function (l) { return l.transform && l.mark.type === 'point'; });
  var n = 0;
  (function walk(mark) {
    if (mark.name === layer.name + '_marks') { n += mark.items.length; }
    (mark.items || []).forEach(function (item) { (item.items || []).forEach(walk); });
  })(VIEWS[c].scenegraph().root);
  return n;
}
window.addEventListener('load', function () { setTimeout(async function () {
  var body = document.body;
  body.setAttribute('data-resources', performance.getEntriesByType('resource')
    .map(function (e) { return e.name; }).join(' ') || 'none');
  var rows = function () { return document.querySelectorAll('#rows tr').length; };
  var find = document.getElementById('find'), table = [rows()];
  find.value = 'KERNEL_3<'; find.dispatchEvent(new Event('input')); table.push(rows());
  find.value = ''; find.dispatchEvent(new Event('input'));
  document.getElementById('more').click(); table.push(rows());
  document.getElementById('all').click(); table.push(rows());
  body.setAttribute('data-table', table.join(','));
  body.setAttribute('data-csv', ROOFLINE.csvText());
  var notes = [document.getElementById('drawn0').textContent, document.getElementById('drawn1').textContent];
  var view = VIEWS[0], counts = [kernelPoints(0)];
  await view.signal('app_filter', 'app1').runAsync(); counts.push(kernelPoints(0));
  await view.signal('top_n', 2).runAsync(); counts.push(kernelPoints(0));
  await view.signal('colour_by', 'app').runAsync(); counts.push(kernelPoints(0));
  counts.push(kernelPoints(1));
  notes.push(document.getElementById('drawn0').textContent);
  body.setAttribute('data-interact', counts.join(','));
  body.setAttribute('data-notes', notes.join('|'));
}, 1000); });
</script></body>"""
FORMULA = '=HYPERLINK("x")'


def chromium(url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    if CHROMIUM is None:
        pytest.skip("headless Chromium not found (apt-get install chromium)")
    command = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *extra, url]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict:
    """The summary page of two devices with hostile kernel names, dumped and screenshotted once."""
    tmp = tmp_path_factory.mktemp("browser")
    names = [HOSTILE, IMG, FORMULA] + [f"void ns::kernel_{i}<float, {i}>(float*, int)" for i in range(9)]
    kernels = make_kernels(12, names=names)
    other = make_kernels(2000, device="GPU-B", seed=5)  # thousands of kernels still render
    kernels = conform(pd.concat([kernels, other], ignore_index=True), "kernels")
    ceilings = pd.concat([make_ceilings(), make_ceilings("GPU-B")], ignore_index=True)
    limit, report.SUMMARY_KERNELS = report.SUMMARY_KERNELS, 10_000  # every kernel on the page (the table's paging)
    try:
        page = report.summary_html(kernels, ceilings, make_diagnostics(), "Browser test")
    finally:
        report.SUMMARY_KERNELS = limit
    path = tmp / "summary.html"
    head, _, tail = page.rpartition("</body>")  # the bundle itself contains "</body>" in strings
    path.write_text(head + PROBE + tail)
    dump = chromium(path.as_uri(), tmp / "profile-dom", "--dump-dom")
    shot = tmp / "summary.png"
    chromium(path.as_uri(), tmp / "profile-png", "--window-size=1300,1300", f"--screenshot={shot}")
    return {"dom": dump.stdout, "log": dump.stderr, "png": shot, "charts": len(re.findall(r'<div class="chart"', page))}


def test_every_chart_renders(rendered):
    dom = rendered["dom"]
    assert rendered["charts"] == 2
    assert dom.count('data-rendered="yes"') == rendered["charts"], rendered["log"][-2000:]
    assert 'data-error="' not in dom
    assert len(re.findall(r"<canvas|<svg", dom)) >= rendered["charts"]
    assert not re.search(r"\[vega\]|Error:", rendered["log"]), rendered["log"][-2000:]


def test_hostile_names_stay_inert(rendered):
    dom = rendered["dom"]
    assert "<title>Browser test</title>" in dom
    assert "pwned" not in dom.split("</title>")[0]
    assert "<img src=\"x\"" not in dom and "<img src=x" not in dom
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom


def test_no_network_requests(rendered):
    resources = re.search(r'data-resources="([^"]*)"', rendered["dom"]).group(1)
    assert not re.search(r"https?:|wss?:", resources), resources
    assert "net::ERR" not in rendered["log"]


def attribute(rendered: dict, name: str) -> str:
    return html.unescape(re.search(f'data-{name}="([^"]*)"', rendered["dom"]).group(1))


def test_inputs_filter_the_points(rendered):
    all_points, app1, top2, recoloured, big = (int(c) for c in attribute(rendered, "interact").split(","))
    assert all_points == 12 * 3  # 12 kernels x 3 memory levels with data
    assert app1 == 6 * 3  # kernels of app1 only
    assert top2 <= 2 * 3 and top2 > 0
    assert recoloured == top2
    assert big == report.TOP_N_DEFAULT * 3  # 2,000 kernels: the top N by GPU time are drawn at first


def test_notes_say_how_many_are_hidden(rendered):
    first, big, after = attribute(rendered, "notes").split("|")
    assert first == "All 12 kernels drawn."
    assert big.startswith(f"Drawn: the top {report.TOP_N_DEFAULT} of 2,000 kernels by GPU time; "
                          f"{2000 - report.TOP_N_DEFAULT:,} hidden.") and "slider" in big
    assert after.startswith("Drawn: the top 2 of 12 kernels")


def test_table_pages_and_finds(rendered):
    first, found, more, every = (int(c) for c in attribute(rendered, "table").split(","))
    assert (first, found, more, every) == (report.TABLE_ROWS, 2, 2 * report.TABLE_ROWS, 2012)
    dom = rendered["dom"]
    assert '<td><a href="apps/app0.html">app0</a></td>' in dom


def test_csv_is_the_table(rendered):
    rows = list(csv.DictReader(io.StringIO(attribute(rendered, "csv"))))
    assert len(rows) == 2012
    assert list(rows[0]) == [*report.TABLE_COLUMNS, "kernel (full name)"]
    assert [r["#"] for r in rows] == [str(i) for i in range(1, len(rows) + 1)]
    priorities = [float(r["priority"]) for r in rows if r["priority"]]
    assert priorities == sorted(priorities, reverse=True)
    full = {r["kernel (full name)"] for r in rows}
    assert HOSTILE in full and IMG in full and "'" + FORMULA in full  # a formula is quoted for spreadsheets


def test_screenshot_written(rendered):
    png = rendered["png"]
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000


# Before anything else on a real page: every error and warning the page logs, and every uncaught error.
WATCH = """<script>window.LOGGED = [];
window.addEventListener('error', function (e) { LOGGED.push('error: ' + e.message); });
['error', 'warn'].forEach(function (level) {
  var original = console[level];
  console[level] = function () {
    LOGGED.push(level + ': ' + [].join.call(arguments, ' '));
    original.apply(console, arguments);
  };
});</script>"""
# After it: what was fetched, what was drawn, and each chart exported as SVG and PNG in the page.
EXPORT_PROBE = """<script>
window.addEventListener('load', function () { setTimeout(async function () {
  var body = document.body, exported = [];
  for (var c = 0; c < VIEWS.length; c++) {
    var svg = await VIEWS[c].toSVG(), png = await VIEWS[c].toImageURL('png');
    exported.push((svg.indexOf('<svg') === 0 ? 'svg' : 'no-svg') + ':' + png.slice(0, 21) + ':' +
      (png.length > 10000 ? 'drawn' : 'blank'));
  }
  body.setAttribute('data-resources', performance.getEntriesByType('resource')
    .map(function (e) { return e.name; }).join(' ') || 'none');
  body.setAttribute('data-exported', exported.join(' '));
  body.setAttribute('data-logged', LOGGED.join(' | ') || 'none');
  body.setAttribute('data-glance', String(document.querySelectorAll('#glance tbody tr').length));
}, 1000); });
</script></body>"""
SCREENSHOTS = os.environ.get("ROOFLINE_SCREENSHOTS")  # a folder: keep the screenshots (docs/screenshots)


def probed(page: Path, out: Path) -> Path:
    text = page.read_text()
    head, _, tail = text.rpartition("</body>")
    text = head + EXPORT_PROBE + tail
    path = out / f"probed-{page.name}"
    path.write_text(text.replace("<head>", "<head>" + WATCH, 1))
    return path


@pytest.fixture(scope="module")
def real_rendered(real_pages, tmp_path_factory) -> dict:  # noqa: F811 (the fixture imported above)
    """The real summary and an app page (see test_report.real_pages) drawn, probed and screenshotted."""
    out, _ = real_pages
    tmp = tmp_path_factory.mktemp("real-browser")
    pages = {"summary": out / "summary.html", "app": out / "apps" / "silu_a100.html",
             "app-fp-free": out / "apps" / "heatsim_gtx1650.html"}  # with an instruction roofline
    result = {}
    for name, page in pages.items():
        path = probed(page, page.parent)
        dump = chromium(path.as_uri(), tmp / f"profile-{name}", "--dump-dom")
        shot = tmp / f"{name}.png"
        size = "1300,2300" if name == "summary" else "1300,1700"
        chromium(page.as_uri(), tmp / f"profile-{name}-png", f"--window-size={size}", f"--screenshot={shot}")
        if SCREENSHOTS and name in ("summary", "app"):
            Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(shot, Path(SCREENSHOTS) / f"{name}.png")
        result[name] = {"dom": dump.stdout, "log": dump.stderr, "png": shot,
                        "charts": len(re.findall(r'<div class="chart"', page.read_text()))}
    return result


@pytest.mark.parametrize("name", ["summary", "app", "app-fp-free"])
def test_real_pages_draw_offline_without_errors(real_rendered, name):
    page = real_rendered[name]
    dom = page["dom"]
    # SiLU's and the GTX 1650's rooflines and the GTX 1650's and A40's instruction rooflines: the A40's
    # FLOP roofline has no judged kernel (its one kernel with FLOP counts has tensor work not counted)
    assert page["charts"] == {"summary": 4, "app": 1, "app-fp-free": 2}[name]
    assert dom.count('data-rendered="yes"') == page["charts"], page["log"][-2000:]
    assert 'data-error="' not in dom
    assert attribute(page, "logged") == "none"
    resources = attribute(page, "resources")
    assert not re.search(r"https?:|wss?:", resources), resources
    assert "net::ERR" not in page["log"]
    assert int(attribute(page, "glance")) >= 1


@pytest.mark.parametrize("name", ["summary", "app", "app-fp-free"])
def test_real_charts_export_svg_and_png_in_the_page(real_rendered, name):
    exported = attribute(real_rendered[name], "exported").split()
    assert len(exported) == real_rendered[name]["charts"]
    assert all(e == "svg:data:image/png;base64:drawn" for e in exported), exported


@pytest.mark.parametrize("name", ["summary", "app"])
def test_real_screenshots(real_rendered, name):
    png = real_rendered[name]["png"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 50_000


@pytest.fixture(scope="module")
def compare_rendered(tmp_path_factory) -> dict:
    """The compare page of the real FlashAttention before/after pair (the kernel renamed between
    them, matched with --rename), written by ``roofline compare -o``, drawn, probed and screenshotted."""
    from conftest import real_fixture

    from roofline import cli

    folder = real_fixture("rtx4060ti-flashattn-fp16-tensorroofline-ncu2025.4")
    tmp = tmp_path_factory.mktemp("compare")
    page = tmp / "compare.html"
    code = cli.main(["compare", str(folder / "fa3_before_n4096_full.ncu-rep"),
                     str(folder / "db_full_after_n4096_full.ncu-rep"), "--rename",
                     "fa3db_full_fwd_kernel=fa3_fwd_kernel", "--title", "FlashAttention: before → after",
                     "-o", str(page)])
    assert code == 0
    path = probed(page, tmp)
    dump = chromium(path.as_uri(), tmp / "profile-dom", "--dump-dom")
    shot = tmp / "compare.png"
    chromium(page.as_uri(), tmp / "profile-png", "--window-size=1300,1250", f"--screenshot={shot}")
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, Path(SCREENSHOTS) / "compare.png")
    return {"dom": dump.stdout, "log": dump.stderr, "png": shot, "page": page.read_text()}


def test_compare_page_draws_offline_without_errors(compare_rendered):
    page = compare_rendered
    assert '<script src="assets/vega-bundle.js"></script>' in page["page"]  # the shared bundle, by relative path
    assert page["dom"].count('data-rendered="yes"') == 1, page["log"][-2000:]
    assert 'data-error="' not in page["dom"]
    assert attribute(page, "logged") == "none"
    resources = attribute(page, "resources")  # Chromium lists no file:// loads: the bundle is not among them
    assert not re.search(r"https?:|wss?:", resources), resources
    assert "net::ERR" not in page["log"] and "ERR_FILE_NOT_FOUND" not in page["log"]
    exported = attribute(page, "exported").split()
    assert exported == ["svg:data:image/png;base64:drawn"]
    assert "fa3_fwd_kernel&lt;64&gt; → fa3db_full_fwd_kernel&lt;64, …&gt;" in page["dom"]  # the short names


def test_compare_screenshot(compare_rendered):
    png = compare_rendered["png"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 50_000


@pytest.fixture(scope="module")
def trends_rendered(tmp_path_factory) -> dict:
    """The trends page of a 40-night simulated history (tonight: one kernel 60 % slower, one 40 %
    faster), written by the tracking stage's CLI beside tonight's summary (whose device charts,
    assets/charts.js, it draws, as in the workflow), drawn, probed and screenshotted."""
    from nightly.test_track import SIM

    from roofline.nightly.store import append_run
    from roofline.pages.trends import applied_ceilings
    from roofline.tables.files import write_table
    from roofline.tables.schemas import TABLES

    tmp = tmp_path_factory.mktemp("trends")
    history, _ = SIM.simulate(seed=3, nights=40, kernels=24)
    inputs = list(SIM.nightly_inputs(history))
    for run_id, kernels, context in inputs[:-1]:
        append_run(tmp / "store", run_id, kernels, context)
    run_id, kernels, context = inputs[-1]
    for row, factor in ((0, 1.6), (5, 1 / 1.4)):  # tonight: a regression and an improvement
        kernels.loc[row, ["duration_s"]] *= factor
        kernels.loc[row, ["performance"]] /= factor
        kernels.loc[row, ["roof_pct"]] /= factor
    write_table(kernels, "kernels", tmp / "k.parquet")
    page = tmp / "reports" / "trends.html"
    rows = conform(kernels[[c.name for c in TABLES["kernels"] if c.name in kernels]], "kernels")
    report.write_pages(rows, applied_ceilings(rows), conform(pd.DataFrame(), "diagnostics"),
                       tmp / "reports" / "summary.html", None, "T")
    code = track_history.main(["--kernels", str(tmp / "k.parquet"), "--store", str(tmp / "store"), "--run-id", run_id,
                       "--context-json", json.dumps(context), "--trends", str(page),
                       "--regressions", str(tmp / "reports" / "regressions.json"),
                       "--charts-asset", str(tmp / "reports" / "assets" / "charts.js")])
    assert code == 0
    path = probed(page, page.parent)
    dump = chromium(path.as_uri(), tmp / "profile-dom", "--dump-dom")
    shot = tmp / "trends.png"
    chromium(page.as_uri(), tmp / "profile-png", "--window-size=1300,2600", f"--screenshot={shot}")
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, Path(SCREENSHOTS) / "trends.png")
    return {"dom": dump.stdout, "log": dump.stderr, "png": shot, "page": page.read_text(),
            "charts": len(re.findall(r'<div class="chart"', page.read_text())),
            "summary": json.loads((tmp / "reports" / "regressions.json").read_text())}


def test_trends_page_draws_offline_without_errors(trends_rendered):
    page = trends_rendered
    labels = {f["label"] for f in page["summary"]["findings"]}
    assert {"regression", "improvement"} <= labels
    assert page["charts"] == 4  # findings' trends, any kernel, baseline → tonight, tonight's kernels
    assert '<script src="assets/vega-bundle.js"></script>' in page["page"]
    # tonight's kernels on the summary's own chart, fitted to the page's rows (the summary's 24 kernels)
    assert '<script src="assets/charts.js"></script>' in page["page"] and '"shared": true' in page["page"]
    assert re.search(r'id="drawn3">All 24 kernels drawn\.</p>', page["dom"]), page["dom"][-3000:]
    assert page["dom"].count('data-rendered="yes"') == page["charts"], page["log"][-2000:]
    assert 'data-error="' not in page["dom"]
    assert attribute(page, "logged") == "none"
    resources = attribute(page, "resources")  # this Chromium lists no file:// resource: the bundle drew the charts
    assert not re.search(r"https?:|wss?:", resources), resources
    assert "net::ERR" not in page["log"]
    exported = attribute(page, "exported").split()
    assert exported == ["svg:data:image/png;base64:drawn"] * page["charts"]


def test_trends_screenshot(trends_rendered):
    png = trends_rendered["png"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 50_000


# After the page's own script: what the app page's first chart was fitted to, read from its view.
FITTED_PROBE = """<script>
window.addEventListener('load', function () { setTimeout(function () {
  var el = document.getElementById('chart0'), body = document.body;
  body.setAttribute('data-chart', el.getAttribute('data-rendered') || 'error: ' + el.getAttribute('data-error'));
  body.setAttribute('data-chart-text', el.textContent);
  if (VIEWS[0]) {
    body.setAttribute('data-top', String(VIEWS[0].signal('top_n')));
    body.setAttribute('data-subtitle', SPECS[0].title.subtitle[0]);
    body.setAttribute('data-apps', SPECS[0].params.find(function (p) { return p.name === 'app_filter'; })
      .bind.options.join(','));
  }
}, 1000); });
</script></body>"""


@pytest.fixture(scope="module")
def app_pages(tmp_path_factory) -> Path:
    """The summary and app pages of 12 kernels of two apps on one device, as the workflow writes them."""
    out = tmp_path_factory.mktemp("app-pages")
    report.write_pages(make_kernels(12, seed=5), make_ceilings(), make_diagnostics(), out / "summary.html",
                       out / "apps", "T")
    return out


def _drawn_app_page(folder: Path, page: Path, profile: Path) -> dict:
    head, _, tail = page.read_text().rpartition("</body>")
    probed_page = folder / f"probed-{page.name}"
    probed_page.write_text(head + FITTED_PROBE + tail)
    dump = chromium(probed_page.as_uri(), profile, "--dump-dom")
    return {"dom": dump.stdout, "log": dump.stderr}


def test_an_app_page_draws_the_summarys_chart_fitted_to_its_rows(app_pages, tmp_path):
    """The device chart comes from assets/charts.js (built from both apps' kernels); the page's
    script sets the controls of its 6 kernels before drawing it."""
    drawn = _drawn_app_page(app_pages / "apps", app_pages / "apps" / "app1.html", tmp_path / "profile")
    assert attribute(drawn, "chart") == "yes", drawn["log"][-2000:]
    assert attribute(drawn, "top") == "6" and attribute(drawn, "subtitle").startswith("6 kernels; ")
    assert attribute(drawn, "apps") == f"{roofline_chart.ALL},app1"
    assert "12 kernels" in (app_pages / "assets" / "charts.js").read_text()  # the summary's, before fitting


def test_the_configured_count_of_kernels_is_drawn_first_on_the_summary_and_an_app_page(tmp_path):
    """``report.top_kernels`` (write_pages' ``top_kernels``): the summary's chart and an app page's,
    drawn from the summary's shared spec, start at that many kernels, or the page's own when fewer."""
    write = tmp_path / "pages"
    report.write_pages(make_kernels(12, seed=5), make_ceilings(), make_diagnostics(), write / "summary.html",
                       write / "apps", "T", top_kernels=4)
    summary = _drawn_app_page(write, write / "summary.html", tmp_path / "profile-summary")
    app = _drawn_app_page(write / "apps", write / "apps" / "app1.html", tmp_path / "profile-app")
    assert attribute(summary, "chart") == "yes" and attribute(app, "chart") == "yes", app["log"][-2000:]
    assert attribute(summary, "top") == "4" and attribute(app, "top") == "4"
    report.write_pages(make_kernels(12, seed=5), make_ceilings(), make_diagnostics(), write / "summary.html",
                       write / "apps", "T", top_kernels=9)
    app = _drawn_app_page(write / "apps", write / "apps" / "app1.html", tmp_path / "profile-app-9")
    assert attribute(app, "top") == "6"  # the app's own 6 kernels, fewer than 9


def test_an_app_page_without_the_summarys_charts_says_how_to_get_them(app_pages, tmp_path):
    alone = tmp_path / "apps"
    alone.mkdir()
    shutil.copy(app_pages / "apps" / "app1.html", alone / "app1.html")  # no assets/ beside it
    drawn = _drawn_app_page(alone, alone / "app1.html", tmp_path / "profile")
    assert attribute(drawn, "chart").startswith("error: no shared chart for GPU-A")
    assert "build the summary (snakemake reports/summary.html)" in attribute(drawn, "chart-text")


WIDTH_PROBE = """<script>window.addEventListener('load', function () {
  var table = document.querySelector('#apps table');
  document.body.setAttribute('data-apps-width', String(Math.ceil(table.getBoundingClientRect().width)));
  document.body.setAttribute('data-body-width', String(Math.floor(document.body.getBoundingClientRect().width)));
});</script></body>"""


def test_the_apps_table_fits_a_laptop_screen(tmp_path):
    """At 1366 px wide (a laptop), the summary's Apps table fits the page without scrolling sideways,
    with app and input names of ~70 characters and no space to break at, and a long kernel name."""
    long = ["llama3_70b_decode_batch64_seq8192_tp8_flashattn3_fp8_nightly_2026-12-06",
            "kripke_sweep_zones_64x64x64_groups_32_directions_96_energy_groups_x"]
    names = [f"void very::long_namespace::kernel_{i}<float, 128, 64, 4, true>(float*, int)" for i in range(8)]
    kernels = make_kernels(8, names=names)
    kernels["app"] = [long[i % 2] for i in range(len(kernels))]
    sources = {app: f"/data/nightly/{app}.ncu-rep" for app in long}
    page = report.summary_html(kernels, make_ceilings(), make_diagnostics().iloc[:0], "T", sources=sources)
    head, _, tail = page.rpartition("</body>")
    path = tmp_path / "summary.html"
    path.write_text(head + WIDTH_PROBE + tail)
    drawn = {"dom": chromium(path.as_uri(), tmp_path / "profile", "--window-size=1366,900", "--dump-dom").stdout}
    assert 0 < int(attribute(drawn, "apps-width")) <= int(attribute(drawn, "body-width")) <= 1366
