"""Report stage: the chart spec, the pages' safety (no network, escaped names), CSV, IO edge."""

import json
import math
import re

import altair as alt
import numpy as np
import pandas as pd
import pytest

from roofline import report
from roofline.schemas import conform, write_table

HOSTILE = "<script>alert(1)</script> & \"q\" </script>"
IMG = "<img src=x onerror=document.title='pwned'>"


def make_ceilings(device: str = "GPU-A") -> pd.DataFrame:
    rows = [
        ("compute", "fp32", 19.5e12, "datasheet", True),
        ("compute", "fp64", 9.7e12, "datasheet", True),
        ("compute", "tensor_fp16", 312e12, "datasheet", True),  # not used by any kernel: no roof
        ("memory", "dram", 1.5552e12, "report", True),
        ("memory", "dram", 2.0e12, "datasheet", False),
        ("memory", "l2", 5.5e12, "report", True),
        ("memory", "l1", 19e12, "report", True),
        ("memory", "shared", 19e12, "report", True),  # same as L1: labels must not collide
    ]
    frame = pd.DataFrame(rows, columns=["kind", "name", "value", "source", "selected"]).assign(device=device)
    return conform(frame, "ceilings")


def make_kernels(n: int = 6, device: str = "GPU-A", names: list[str] | None = None, seed: int = 0) -> pd.DataFrame:
    """``n`` plausible kernel aggregates on ``device``; the last one a what-if row (no duration)."""
    rng = np.random.default_rng(seed)
    names = names or [f"void ns::kernel_{i}<float, {i}>(float*, int)" for i in range(n)]
    ai_dram = 10 ** rng.uniform(-1.5, 2.5, n)
    cls = np.where(np.arange(n) % 3 == 2, "fp64", "fp32")
    peak = np.where(cls == "fp64", 9.7e12, 19.5e12)
    attainable = np.minimum(peak, 1.555e12 * ai_dram)
    performance = attainable * rng.uniform(0.05, 0.95, n)
    flop = 10 ** rng.uniform(8, 11, n)
    duration = flop / performance
    frame = pd.DataFrame({
        "app": [f"app{i % 2}" for i in range(n)], "device": device, "kernel": names,
        "kernel_short": [name.split("(")[0][:40] for name in names], "grid": "(80, 1, 1)", "block": "(256, 1, 1)",
        "launches": rng.integers(1, 50, n), "duration_s": duration, "flop": flop, "performance": performance,
        "compute_class": cls, "dram_bytes": flop / ai_dram, "ai_dram": ai_dram, "ai_l2": ai_dram * 3,
        "ai_l1": ai_dram * 8, "attainable": attainable, "roof_pct": 100 * performance / attainable,
        "bound": np.where(attainable >= peak, "compute:" + cls, "memory:dram"), "binding_level": "dram",
        "ceiling_source": "report", "note": "",
    })
    for c in ("fp32", "fp64"):
        frame[f"flop_{c}"] = np.where(cls == c, flop, 0.0)
    frame["time_share"] = frame["duration_s"] / frame.groupby("app")["duration_s"].transform("sum")
    frame["priority"] = frame["time_share"] * (1 - frame["roof_pct"] / 100)
    what_if = frame.index[-1]
    frame.loc[what_if, ["duration_s", "performance", "roof_pct", "time_share", "priority"]] = np.nan
    return conform(frame, "kernels")


def make_diagnostics() -> pd.DataFrame:
    rows = [
        {"app": "app0", "stage": "parse", "severity": "error", "source_file": "bad.ncu-rep",
         "message": "bad.ncu-rep: not a report <b>bold</b>"},
        {"app": "app1", "stage": "parse", "severity": "warning", "source_file": "b.ncu-rep", "launch": 3,
         "message": "launch 3: cannot derive l2_bytes; collect it with --set roofline"},
    ]
    return conform(pd.DataFrame(rows), "diagnostics")


@pytest.fixture(scope="module")
def spec() -> dict:
    return report.roofline_chart(make_kernels(), make_ceilings(), "GPU-A").to_dict()


def _datasets(spec: dict) -> list[list[dict]]:
    return list(spec["datasets"].values())


def _rows_with(spec: dict, key: str) -> list[dict]:
    return [row for data in _datasets(spec) for row in data if key in row]


def test_layers_marks_and_log_scales(spec):
    marks = [layer["mark"]["type"] for layer in spec["layer"]]
    assert {"rule", "text", "point", "line"} <= set(marks)
    for layer in spec["layer"]:
        assert layer["encoding"]["x"]["scale"]["type"] == "log"
        assert layer["encoding"]["y"]["scale"]["type"] == "log"
    x, y = spec["layer"][0]["encoding"]["x"], spec["layer"][0]["encoding"]["y"]
    assert x["title"] == "Arithmetic intensity [FLOP/B]" and y["title"] == "Performance [FLOP/s]"
    assert x["axis"]["format"] == "~s" and y["axis"]["format"] == "~s"
    assert all(math.log10(v) == round(math.log10(v)) for v in x["axis"]["values"] + y["axis"]["values"])


def test_roofs_per_level_and_used_class(spec):
    roofs = {row["roof"] for row in _rows_with(spec, "roof")}
    assert "DRAM 1.56 TB/s (report)" in roofs
    assert "FP32 19.5 TFLOP/s (datasheet)" in roofs
    assert any(r.startswith("FP64 9.7 TFLOP/s") for r in roofs)
    assert "L1, Shared 19 TB/s (report)" in roofs  # equal roofs: one line, one label
    assert {r.split()[0] for r in roofs} == {"DRAM", "L2", "L1,", "FP32", "FP64"}  # no tensor roof
    sloped = [row for row in _rows_with(spec, "roof") if row["style"] != "compute"]
    assert all(row["y2"] == pytest.approx(19.5e12) for row in sloped)  # cut at the highest used compute roof
    ridges = _rows_with(spec, "ridge")
    assert len(ridges) == 3 * 2
    assert any(row["x"] == pytest.approx(19.5e12 / 1.5552e12) for row in ridges)


def _label_boxes(spec: dict) -> list[np.ndarray]:
    """Corner pixels of every roof label, from the text rows and the chart's scales."""
    enc = spec["layer"][0]["encoding"]
    (x0, x1), (y0, y1) = enc["x"]["scale"]["domain"], enc["y"]["scale"]["domain"]
    w, h = spec["width"], spec["height"]
    boxes = []
    for row in _rows_with(spec, "text"):
        px = w * math.log10(row["x"] / x0) / math.log10(x1 / x0)
        py = h * (1 - math.log10(row["y"] / y0) / math.log10(y1 / y0))
        length, height = len(row["text"]) * report.CHAR_PX, report.FONT
        a = math.radians(row["angle"])
        u, n = np.array([math.cos(a), math.sin(a)]), np.array([-math.sin(a), math.cos(a)])
        start = -length if row["align"] == "right" else 0.0
        top = -height if row["baseline"] == "bottom" else 0.0
        origin = np.array([px, py])
        boxes.append(np.array([origin + u * s + n * t for s in (start, start + length) for t in (top, top + height)]))
    return boxes


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Separating-axis test of two rectangles given by 4 corners each."""
    for box in (a, b):
        for edge in (box[1] - box[0], box[2] - box[0]):
            axis = np.array([-edge[1], edge[0]])
            pa, pb = a @ axis, b @ axis
            if pa.max() <= pb.min() or pb.max() <= pa.min():
                return False
    return True


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_roof_labels_do_not_overlap(seed):
    ceilings = make_ceilings()
    ceilings.loc[ceilings["name"] == "l2", "value"] = 2.0e12  # close to DRAM
    spec = report.roofline_chart(make_kernels(12, seed=seed), ceilings, "GPU-A").to_dict()
    boxes = _label_boxes(spec)
    assert len(boxes) >= 4
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not _overlap(a, b)
        assert (a[:, 0] > -2).all() and (a[:, 0] < spec["width"] + 2).all()
        assert (a[:, 1] > -2).all() and (a[:, 1] < spec["height"] + 2).all()


def test_params_and_bindings(spec):
    params = {p["name"]: p for p in spec["params"]}
    assert params["colour_by"]["bind"]["input"] == "radio"
    assert set(params["colour_by"]["bind"]["options"]) == {"app", "bound"}
    for name in ("app_filter", "compute_class_filter", "bound_filter"):
        assert params[name]["bind"]["input"] == "select"
    assert params["top_n"]["bind"]["input"] == "range"
    points = _kernel_layer(spec)
    assert params["pick"]["select"]["type"] == "point" and params["pick"]["select"]["fields"] == ["kid"]
    assert params["pick"]["views"] == [points["name"]]  # clicks on kernel points
    assert "colour_by" in str(points["transform"]) and "top_n" in str(points["transform"])


def _kernel_layer(spec: dict) -> dict:
    return next(layer for layer in spec["layer"] if layer["mark"]["type"] == "point" and "transform" in layer)


def test_points_one_per_level_with_tooltips(spec):
    points = _kernel_layer(spec)
    fold = next(t for t in points["transform"] if "fold" in t)
    assert fold["fold"] == ["ai_dram", "ai_l2", "ai_l1"]  # levels with data
    fields = {t["field"] for t in points["encoding"]["tooltip"]}
    assert {"kernel", "kernel_short", "app", "launches", "time_share", "ai_dram", "ai_l2", "ai_l1", "achieved",
            "attainable", "bound", "roof_pct", "ceiling_source", "timing"} <= fields
    assert points["encoding"]["shape"]["field"] == "compute_class"
    assert points["encoding"]["color"]["scale"]["range"] == report.PALETTE
    domain = points["encoding"]["color"]["scale"]["domain"]["expr"]  # the same colour whatever is drawn
    assert domain == """colour_by == 'app' ? ["app0", "app1"] : ["compute:fp32", "compute:fp64", "memory:dram"]"""
    # one row per kernel, named, with the fields the page's table also has; y and timing computed in the spec
    assert points["data"] == {"name": report.KERNEL_DATA}
    rows = spec["datasets"][report.KERNEL_DATA]
    assert len(rows) == 6 and set(rows[0]) == {"kid", *report.CHART_FIELDS}
    calculated = {k for t in points["transform"] if "calculate" in t for k in [t["as"]]}
    assert {"y", "timing", "level", "colour"} <= calculated


def test_what_if_kernel_drawn_at_attainable():
    kernels = make_kernels()
    points = report.plot_points(kernels)
    predicted = points[points["timing"] == report.PREDICTED]
    assert len(predicted) == 1
    assert predicted["y"].iat[0] == kernels["attainable"].iat[-1]
    assert np.isnan(predicted["achieved"].iat[0])


def test_unplottable_kernels_are_left_out_and_listed():
    kernels = make_kernels()
    kernels.loc[0, ["performance", "attainable"]] = np.nan  # no ceiling: cannot be placed
    kernels.loc[0, "note"] = "no ceiling for fp32: that work is not judged"
    assert len(report.plot_points(kernels)) == len(kernels) - 1
    page = report.summary_html(kernels, make_ceilings(), make_diagnostics(), "t")
    assert "not on a chart" in page and "no ceiling for fp32" in page


def test_si_formatting():
    assert report.si(1.5552e12, "B/s") == "1.56 TB/s"
    assert report.si(19.5e12, "FLOP/s") == "19.5 TFLOP/s"
    assert report.si(1.58e-3, "s") == "1.58 ms"
    assert report.si(float("nan"), "s") == "–"


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
    assert 'id="chart0"' in page and "vegaEmbed(" in page and "actions: false" in page
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
    assert spec["datasets"][report.KERNEL_DATA] == []  # filled in the browser from DATA
    assert set(report.CHART_FIELDS) <= set(data["cols"]) and data["fields"] == report.CHART_FIELDS


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
    assert rows["rank"].notna().all() and data["charts"] == [{"device": "GPU-A", "canvas": False}]


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


def test_app_page_shares_the_summary_axes_with_its_own_controls(tmp_path):
    """An app page draws its rows in the summary's frame for that device (same axes and roofs, app
    colours as on the summary); its slider and app filter fit its own rows."""
    kernels = make_kernels(12, seed=5)
    pages = report.write_pages(kernels, make_ceilings(), make_diagnostics(), tmp_path / "summary.html",
                               tmp_path / "apps", "T")
    summary = _specs((tmp_path / "summary.html").read_text())[0]
    app_page = _specs((tmp_path / "apps" / "app1.html").read_text())[0]
    assert len(pages) == 3

    def scales(spec: dict) -> list:
        return [(layer["encoding"][axis]["scale"]) for layer in spec["layer"] for axis in ("x", "y")
                if axis in layer.get("encoding", {})]

    assert scales(app_page) == scales(summary) and len(scales(summary)) >= 4
    params = {p["name"]: p for p in app_page["params"]}
    n_app1 = int((kernels["app"] == "app1").sum())  # every row is drawn (the what-if one at its attainable)
    assert params["app_filter"]["bind"]["options"] == [report.ALL, "app1"]
    assert params["top_n"]["bind"]["max"] == n_app1 == params["top_n"]["value"]
    assert app_page["title"]["subtitle"][0].startswith(f"{n_app1} kernels; ")
    assert summary["title"]["subtitle"][0].startswith(f"{len(kernels)} kernels; ")
    summary_params = {p["name"]: p for p in summary["params"]}
    assert summary_params["app_filter"]["bind"]["options"] == [report.ALL, "app0", "app1"]
    assert summary_params["top_n"]["bind"]["max"] == len(kernels) > n_app1
    # the same page from app_html alone (no shared cache) is identical
    alone = report.app_html(conform(kernels, "kernels"), make_ceilings(), make_diagnostics(), "app1", "T")
    assert alone == (tmp_path / "apps" / "app1.html").read_text()


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
        spec = report.roofline_chart(kernels, make_ceilings(), "GPU-A").to_dict(validate=False)
    params = {p["name"]: p for p in spec["params"]}
    assert params["top_n"]["value"] == report.TOP_N_DEFAULT and params["top_n"]["bind"]["max"] == 3000
    assert len(spec["datasets"][report.KERNEL_DATA]) == 3000  # a standalone chart carries its points
    page = report.summary_html(kernels, make_ceilings(), make_diagnostics(), "big")
    data = page_data(page)
    assert data["n"] == 3000 and data["charts"] == [{"device": "GPU-A", "canvas": True}]
    assert page[page.index('<table class="kernels"'):page.index('id="ceilings"')].count("<tr>") == 1  # the head
    assert len(page) - len(report.vega_bundle()) < 3000 * 400  # bytes per kernel


def test_write_report_and_main(tmp_path):
    paths = {name: tmp_path / f"{name}.parquet" for name in ("kernels", "ceilings", "diagnostics")}
    write_table(make_kernels(), "kernels", paths["kernels"])
    write_table(make_ceilings(), "ceilings", paths["ceilings"])
    write_table(make_diagnostics(), "diagnostics", paths["diagnostics"])
    out = tmp_path / "reports" / "summary.html"
    code = report.main([
        "--kernels", str(paths["kernels"]), "--ceilings", str(paths["ceilings"]),
        "--diagnostics", str(paths["diagnostics"]), "--output", str(out),
        "--apps-dir", str(tmp_path / "reports" / "apps"), "--title", "T", "--apps", "app0", "quiet",
    ])
    assert code == 0
    assert out.read_text().startswith("<!DOCTYPE html>")
    pages = sorted(p.name for p in (tmp_path / "reports" / "apps").iterdir())
    assert pages == ["app0.html", "app1.html", "quiet.html"]  # quiet: no rows, still a page
    assert "No kernels." in (tmp_path / "reports" / "apps" / "quiet.html").read_text()
    assert not list((tmp_path / "reports").glob(".*.tmp"))
    assert out.stat().st_mode & 0o044  # readable by others, as a report should be


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
