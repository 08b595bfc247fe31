"""Chart: the roofline spec (layers, log scales, roofs and their labels, params, kernel points), SI formatting."""

import math

import numpy as np
import pandas as pd
import pytest

from roofline.charts import roofline_chart
from roofline.tables.schemas import conform


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
    frame = pd.DataFrame(
        {
            "app": [f"app{i % 2}" for i in range(n)],
            "device": device,
            "kernel": names,
            "kernel_short": [name.split("(")[0][:40] for name in names],
            "grid": "(80, 1, 1)",
            "block": "(256, 1, 1)",
            "launches": rng.integers(1, 50, n),
            "duration_s": duration,
            "flop": flop,
            "performance": performance,
            "compute_class": cls,
            "dram_bytes": flop / ai_dram,
            "ai_dram": ai_dram,
            "ai_l2": ai_dram * 3,
            "ai_l1": ai_dram * 8,
            "attainable": attainable,
            "roof_pct": 100 * performance / attainable,
            "bound": np.where(attainable >= peak, "compute:" + cls, "memory:dram"),
            "bound_kind": np.where(attainable >= peak, "compute", "memory"),
            "binding_level": "dram",
            "binding_roof": np.where(attainable >= peak, cls, "dram"),
            "ceiling_source": "report",
            "note": "",
        }
    )
    for c in ("fp32", "fp64"):
        frame[f"flop_{c}"] = np.where(cls == c, flop, 0.0)
    frame["time_share"] = frame["duration_s"] / frame.groupby("app")["duration_s"].transform("sum")
    frame["priority"] = frame["time_share"] * (1 - frame["roof_pct"] / 100)
    what_if = frame.index[-1]
    frame.loc[what_if, ["duration_s", "performance", "roof_pct", "time_share", "priority"]] = np.nan
    return conform(frame, "kernels")


@pytest.fixture(scope="module")
def spec() -> dict:
    return roofline_chart.roofline_chart(make_kernels(), make_ceilings(), "GPU-A").to_dict()


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
        length, height = len(row["text"]) * roofline_chart.CHAR_PX, roofline_chart.FONT
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
    spec = roofline_chart.roofline_chart(make_kernels(12, seed=seed), ceilings, "GPU-A").to_dict()
    boxes = _label_boxes(spec)
    assert len(boxes) >= 4
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
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
    assert {
        "kernel",
        "kernel_short",
        "app",
        "launches",
        "time_share",
        "ai_dram",
        "ai_l2",
        "ai_l1",
        "achieved",
        "attainable",
        "bound",
        "roof_pct",
        "ceiling_source",
        "timing",
    } <= fields
    assert points["encoding"]["shape"]["field"] == "compute_class"
    assert points["encoding"]["color"]["scale"]["range"] == roofline_chart.PALETTE
    domain = points["encoding"]["color"]["scale"]["domain"]["expr"]  # the same colour whatever is drawn
    assert domain == """colour_by == 'app' ? ["app0", "app1"] : ["compute:fp32", "compute:fp64", "memory:dram"]"""
    # one row per kernel, named, with the fields the page's table also has; y and timing computed in the spec
    assert points["data"] == {"name": roofline_chart.KERNEL_DATA}
    rows = spec["datasets"][roofline_chart.KERNEL_DATA]
    assert len(rows) == 6 and set(rows[0]) == {"kid", *roofline_chart.CHART_FIELDS}
    calculated = {k for t in points["transform"] if "calculate" in t for k in [t["as"]]}
    assert {"y", "timing", "level", "colour"} <= calculated


def test_what_if_kernel_drawn_at_attainable():
    kernels = make_kernels()
    points = roofline_chart.plot_points(kernels)
    predicted = points[points["timing"] == roofline_chart.PREDICTED]
    assert len(predicted) == 1
    assert predicted["y"].iat[0] == kernels["attainable"].iat[-1]
    assert np.isnan(predicted["achieved"].iat[0])


def test_si_formatting():
    assert roofline_chart.si(1.5552e12, "B/s") == "1.56 TB/s"
    assert roofline_chart.si(19.5e12, "FLOP/s") == "19.5 TFLOP/s"
    assert roofline_chart.si(1.58e-3, "s") == "1.58 ms"
    assert roofline_chart.si(float("nan"), "s") == "–"


def test_points_at_100_percent_lie_on_the_drawn_roof_of_their_class_and_level():
    """Hand-made launches on one device, each running exactly at its roof (duration = the binding
    time bound), classified by the classify stage: every point at 100 % sits on the drawn roof of the
    class and level its verdict used, compute-bound on the flat roof, memory-bound on the sloped one."""
    from roofline.classify.kernels import aggregate_kernels

    ceilings = conform(
        pd.DataFrame(
            [
                {"device": "G", "kind": kind, "name": name, "value": value, "source": "datasheet", "selected": True}
                for kind, name, value in (
                    ("compute", "fp32", 20e12),
                    ("compute", "fp64", 10e12),
                    ("compute", "tensor_fp16_acc32", 100e12),
                    ("memory", "dram", 1e12),
                    ("memory", "l2", 4e12),
                )
            ]
        ),
        "ceilings",
    )
    cases = [  # (kernel, class, FLOP, DRAM bytes, L2 bytes)
        ("dgemm", "fp64", 1e12, 1e9, 2e9),
        ("stream", "fp32", 1e9, 1e10, 1e10),
        ("l2_bound", "fp32", 1e10, 1e9, 1e11),
        ("hgemm", "tensor_fp16_acc32", 1e13, 1e9, 1e9),
    ]
    rows = []
    for i, (name, cls, flop, dram, l2) in enumerate(cases):
        peak = {"fp64": 10e12, "fp32": 20e12, "tensor_fp16_acc32": 100e12}[cls]
        rows.append(
            {
                "app": "a",
                "kernel": name,
                "kernel_short": name,
                "launch": i,
                "device": "G",
                f"flop_{cls}": flop,
                "dram_bytes": dram,
                "l2_bytes": l2,
                "duration_s": max(flop / peak, dram / 1e12, l2 / 4e12),
            }
        )
    kernels = aggregate_kernels(conform(pd.DataFrame(rows), "counters"), ceilings)
    assert kernels["roof_pct"].to_numpy() == pytest.approx(100.0)
    spec = roofline_chart.roofline_chart(kernels, ceilings, "G").to_dict()
    segments = [r for r in _rows_with(spec, "roof") if "x2" in r]
    for _, k in kernels.iterrows():
        kind, resource = k["bound"].split(":")
        if kind == "compute":
            [roof] = [
                s
                for s in segments
                if s["style"] == "compute" and s["roof"].startswith(roofline_chart.CLASS_LABEL[resource] + " ")
            ]
            assert k["performance"] == pytest.approx(roof["y"], rel=1e-9), k["kernel"]
            assert k["ai_dram"] >= roof["x"] * (1 - 1e-9)  # right of the ridge, on the flat part
        else:
            [roof] = [s for s in segments if s["style"] == resource]
            slope = roof["y2"] / roof["x2"]
            assert k["performance"] == pytest.approx(slope * k[f"ai_{resource}"], rel=1e-9), k["kernel"]
    assert {k.split(":")[0] for k in kernels["bound"]} == {"compute", "memory"}
    assert "memory:l2" in set(kernels["bound"])


def test_a_kernel_without_a_verdict_is_no_point_but_named_under_the_chart():
    """Hand-made: a kernel whose tensor work was not counted keeps the performance and intensities of its
    partial (FP32) FLOP; it is not drawn as a slow kernel, and the subtitle names it with its reason."""
    kernels = make_kernels(6)
    unjudged = kernels.index[1]
    kernels.loc[unjudged, ["bound", "bound_kind", "binding_roof"]] = ["unknown", "unknown", ""]
    kernels.loc[unjudged, "note"] = "tensor work not counted: 440,000 MMA instructions; no verdict"
    assert kernels.loc[unjudged, "performance"] > 0 and kernels.loc[unjudged, "ai_dram"] > 0
    points = roofline_chart.plot_points(kernels)
    assert len(points) == 5 and kernels.loc[unjudged, "kernel"] not in set(points["kernel"])
    assert pd.isna(roofline_chart.chart_ranks(kernels).loc[unjudged])  # the page draws ranked rows only
    spec = roofline_chart.roofline_spec(kernels, make_ceilings(), "GPU-A")
    assert len(spec["datasets"][roofline_chart.KERNEL_DATA]) == 5
    line = [s for s in spec["title"]["subtitle"] if "not drawn, no verdict" in s]
    assert len(line) == 1
    assert kernels.loc[unjudged, "kernel_short"] in line[0] and "(tensor work not counted)" in line[0]
    complete = roofline_chart.roofline_spec(make_kernels(6), make_ceilings(), "GPU-A")
    assert not any("no verdict" in s for s in complete["title"]["subtitle"])


def test_the_subtitle_names_the_clock_the_compute_roofs_are_held_at():
    """Hand-made launches of an A100 PCIe at ncu's 765 MHz base clock, roofs from the catalog only:
    the chart says its compute roofs are at 765 MHz, not the catalog's 1410 MHz; without a clock
    reading it says they could not be brought there."""
    from roofline.ceilings.catalog import CATALOG_PATH
    from roofline.ceilings.select import build_ceilings
    from roofline.classify.kernels import aggregate_kernels

    def subtitle(clock: float) -> list[str]:
        counters = conform(pd.DataFrame([{
            "app": "hand-made", "kernel": "saxpy", "kernel_short": "saxpy", "launch": 0,
            "device": "NVIDIA A100-PCIE-40GB", "source_format": "ncu-rep", "duration_s": 1e-3,
            "sm_clock_hz": clock, "flop_fp32": 1e9, "dram_bytes": 1e9}]), "counters")
        ceilings = build_ceilings(counters, CATALOG_PATH, ["datasheet"])
        return roofline_chart.roofline_spec(aggregate_kernels(counters, ceilings), ceilings, "NVIDIA A100-PCIE-40GB")[
            "title"]["subtitle"]

    held = [s for s in subtitle(765e6) if "SM clock" in s]
    assert len(held) == 1 and held[0].startswith("compute roofs at 765 MHz SM clock") and "1410" not in held[0]
    assert any("not brought to the launches' clock" in s for s in subtitle(np.nan))


def test_a_level_without_a_roof_draws_no_point_and_no_legend_entry():
    """Hand-made: the kernels have L2 and L1 intensities, the device's ceilings an L1 roof but no L2
    one. No L2 point, legend entry or tooltip; the subtitle says why; the L1 points stay."""
    ceilings = make_ceilings()
    ceilings = ceilings[ceilings["name"] != "l2"]
    spec = roofline_chart.roofline_chart(make_kernels(), ceilings, "GPU-A").to_dict()
    points = _kernel_layer(spec)
    fold = next(t for t in points["transform"] if "fold" in t)
    assert fold["fold"] == ["ai_dram", "ai_l1"]
    assert roofline_chart.MEMORY_LEVELS.index("l2") not in points["encoding"]["size"]["legend"]["values"]
    assert "ai_l2" not in {t["field"] for t in points["encoding"]["tooltip"]}
    assert all(row["ai_l2"] is None for row in spec["datasets"][roofline_chart.KERNEL_DATA])
    subtitle = " ".join(spec["title"]["subtitle"])
    assert "L2 not drawn: the ceilings hold no roof for that level" in subtitle
    # with every level roofed nothing is said
    full = roofline_chart.roofline_chart(make_kernels(), make_ceilings(), "GPU-A").to_dict()
    assert "not drawn: the ceilings hold no roof" not in " ".join(full["title"]["subtitle"])
