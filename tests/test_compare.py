"""Trajectories: kernels matched across steps, what moved (checked against the kernels tables and
hand-made counters), the compare page and its chart, ``roofline compare``, the config's series."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from charts.test_roofline_chart import _rows_with
from conftest import real_fixture

from roofline import cli, compare
from roofline.charts import trajectory as chart_trajectory
from roofline.classify.kernels import aggregate_kernels
from roofline.config.model import load_config
from roofline.stages import report as report_stage
from roofline.tables.files import write_table
from roofline.tables.schemas import conform

PEAKS = {"fp64": 10e12, "fp32": 20e12}
BW = {"dram": 1e12, "l2": 4e12}


def ceilings() -> pd.DataFrame:
    rows = [{"device": "G", "kind": "compute", "name": c, "value": v, "source": "datasheet", "selected": True}
            for c, v in PEAKS.items()]
    rows += [{"device": "G", "kind": "memory", "name": lv, "value": v, "source": "datasheet", "selected": True}
             for lv, v in BW.items()]
    return conform(pd.DataFrame(rows), "ceilings")


def counters(cases: list[tuple], slow: float = 1.0) -> pd.DataFrame:
    """(app, kernel, class, FLOP, DRAM bytes, L2 bytes, grid) per launch, each ``slow`` x its binding time bound."""
    rows = []
    for i, (app, name, cls, flop, dram, l2, grid) in enumerate(cases):
        rows.append({"app": app, "kernel": f"void {name}(float*)", "kernel_short": name, "launch": i, "device": "G",
                     "grid": grid, "block": "(256, 1, 1)", f"flop_{cls}": flop, "dram_bytes": dram, "l2_bytes": l2,
                     "duration_s": slow * max(flop / PEAKS[cls], dram / BW["dram"], l2 / BW["l2"])})
    return conform(pd.DataFrame(rows), "counters")


@pytest.fixture(scope="module")
def series() -> pd.DataFrame:
    """Two steps: a stream kernel made 2x faster, a GEMM that became compute-bound, a kernel
    launched with two configurations, one kernel gone and one new."""
    before = counters([
        ("v1", "stream<float, 1>", "fp32", 1e9, 1e10, 1e10, "(80, 1, 1)"),
        ("v1", "gemm<64>", "fp64", 1e11, 2e10, 2e10, "(80, 1, 1)"),
        ("v1", "twice", "fp32", 1e9, 1e9, 1e9, "(10, 1, 1)"),
        ("v1", "twice", "fp32", 1e9, 2e9, 1e9, "(20, 1, 1)"),
        ("v1", "gone", "fp32", 1e9, 1e9, 1e9, "(1, 1, 1)"),
    ], slow=4.0)
    after = counters([
        ("v2", "stream<float, 2>", "fp32", 1e9, 1e10, 1e10, "(80, 1, 1)"),
        ("v2", "gemm<128>", "fp64", 1e11, 1e9, 2e9, "(160, 1, 1)"),
        ("v2", "twice", "fp32", 1e9, 1e9, 1e9, "(10, 1, 1)"),
        ("v2", "twice", "fp32", 1e9, 1e9, 1e9, "(20, 1, 1)"),
        ("v2", "new", "fp32", 1e9, 1e9, 1e9, "(2, 1, 1)"),  # not gone's launch configuration: a new kernel
    ], slow=1.0)
    before.loc[0, "duration_s"] *= 0.5  # the stream kernel: 2x the others' distance from the roof
    return aggregate_kernels(conform(pd.concat([before, after], ignore_index=True), "counters"), ceilings())


def test_matched_by_function_name_then_launch_configuration(series):
    points = compare.step_points(series, ["v1", "v2"])
    keys = points.groupby(["match", "config"])["step"].apply(list).to_dict()
    assert keys[("stream<…>", "")] == [1, 2]  # template arguments changed: the same function
    assert keys[("gemm<…>", "")] == [1, 2]  # and a new grid: the name does not repeat, so it matches
    # one function twice in a step: its full name (the same here), then the launch configuration
    assert keys[("void twice(float*)", "(10, 1, 1) × (256, 1, 1)")] == [1, 2]
    assert keys[("void twice(float*)", "(20, 1, 1) × (256, 1, 1)")] == [1, 2]
    assert keys[("gone", "")] == [1] and keys[("new", "")] == [2]
    presence = dict(zip(points["match"], points["presence"]))
    assert presence["gone"] == "only in step 1 of 2" and presence["new"] == "only in step 2 of 2"
    assert presence["stream<…>"] == "every step"
    # the evidence, said on the later step's row (the first step's is matched to nothing)
    why = points.set_index(["match", "step"])["matched_by"]
    assert why[("stream<…>", 2)] == "matched by kernel class and launch configuration: template arguments changed"
    assert why[("gemm<…>", 2)] == "matched by function name: template arguments changed"
    assert why[("void twice(float*)", 2)].tolist() == ["", ""] and why[("stream<…>", 1)] == ""


@pytest.mark.parametrize(("after_class", "evidence"), [
    ("Gemm", "matched by kernel class and launch configuration: template arguments changed"),
    ("GemmUniversal", "matched by launch configuration: template arguments changed")])
def test_a_cutlass_template_change_is_followed_by_launch_configuration(after_class, evidence):
    """Hand-made: two int8 GEMMs of one kernel class, each ``cutlass::Kernel<…>`` with its
    configuration in the template; the mainloop changed (the whole template with it, and the kernel
    class too in the second case), each launch configuration unique in its step: matched, 12 % and
    18 % slower. An explicit ``rename`` map wins over that evidence, and says so."""
    def gemm(app: str, kernel: str, mainloop: str, tile: str, grid: str) -> tuple:
        name = f"cutlass::Kernel<cutlass::gemm::kernel::{kernel}<{mainloop}<int8_t, {tile}>, Epilogue>>"
        return (app, name, "fp32", 1e11, 1e9, 1e9, grid)

    frame = counters([gemm("v1", "Gemm", "MmaPipelined", "128x128x64", "(64, 1, 1)"),
                      gemm("v1", "Gemm", "MmaPipelined", "256x128x64", "(32, 2, 1)"),
                      gemm("v2", after_class, "MmaMultistage", "128x128x64", "(64, 1, 1)"),
                      gemm("v2", after_class, "MmaMultistage", "256x128x64", "(32, 2, 1)")])
    frame.loc[2, "duration_s"] *= 1.12
    frame.loc[3, "duration_s"] *= 1.18
    kernels = aggregate_kernels(frame, ceilings())
    moved = compare.moves(compare.step_points(kernels, ["v1", "v2"]))
    assert len(moved) == 2 and (moved["presence"] == "every step").all()
    assert set(moved["matched_by"]) == {evidence}
    tile = {r["kernel_before"].split(", ")[1][:3]: r["duration_s_ratio"] for _, r in moved.iterrows()}
    assert tile == pytest.approx({"128": 1.12, "256": 1.18})
    assert all(b.split(", ")[1] == a.split(", ")[1] for b, a in zip(moved["kernel_before"], moved["kernel_after"]))
    # an explicit map pairs them otherwise (crossed here), and says so
    crossed = compare.moves(compare.step_points(kernels, ["v1", "v2"], {
        f"{after_class}<MmaMultistage<int8_t, 128": "Gemm<MmaPipelined<int8_t, 256",
        f"{after_class}<MmaMultistage<int8_t, 256": "Gemm<MmaPipelined<int8_t, 128"}))
    assert set(crossed["matched_by"]) == {"matched by the rename map"}
    assert all(b.split(", ")[1] != a.split(", ")[1] for b, a in zip(crossed["kernel_before"], crossed["kernel_after"]))


def test_moved_numbers_equal_the_kernels_tables(series):
    """AI at the verdict's level, performance, % of roof and time, before and after, straight from
    the kernels table's FLOP, bytes and durations (not its derived columns)."""
    moved = compare.moves(compare.step_points(series, ["v1", "v2"]))
    for _, row in moved.dropna(subset=["step_before", "step_after"]).iterrows():
        for side in ("before", "after"):
            app = row[f"app_{side}"]
            [k] = series[(series["app"] == app) & (series["kernel"] == row[f"kernel_{side}"])
                         & ((row["config"] == "") | (series["grid"] + " × " + series["block"] == row["config"]))
                         ].to_dict("records")
            level = row[f"level_{side}"]
            assert level == (k["bound"].split(":")[1] if k["bound"].startswith("memory:") else k["binding_level"])
            assert row[f"ai_{side}"] == pytest.approx(k["flop"] / k[f"{level}_bytes"], rel=1e-12)
            assert row[f"performance_{side}"] == pytest.approx(k["flop"] / k["duration_s"], rel=1e-12)
            assert row[f"duration_s_{side}"] == pytest.approx(k["duration_s"], rel=1e-12)
        for f in ("ai", "performance", "roof_pct", "duration_s"):
            assert row[f"{f}_ratio"] == pytest.approx(row[f"{f}_after"] / row[f"{f}_before"], rel=1e-12)
    stream = moved[moved["match"] == "stream<…>"].iloc[0]
    assert stream["duration_s_ratio"] == pytest.approx(0.5)  # 2 x the bound -> at the bound
    assert stream["roof_pct_before"] == pytest.approx(50) and stream["roof_pct_after"] == pytest.approx(100)
    gemm = moved[moved["match"] == "gemm<…>"].iloc[0]
    assert gemm["bound_before"] == "memory:dram" and gemm["bound_after"] == "compute:fp64"
    assert gemm["ai_ratio"] == pytest.approx(20.0)  # 2e10 -> 1e9 DRAM bytes, same FLOP
    one_sided = moved[moved["match"].isin(["gone", "new"])].set_index("match")
    assert one_sided.loc["gone", "step_before"] == 1 and pd.isna(one_sided.loc["gone", "step_after"])
    assert one_sided.loc["new", "step_after"] == 2 and pd.isna(one_sided.loc["new", "step_before"])
    assert np.isnan(one_sided.loc["new", "duration_s_ratio"])


def test_trajectory_points_at_100_percent_lie_on_the_drawn_roof_of_their_class_and_level(series):
    """The after step runs every kernel at its roof: each of its points on the chart sits on the
    drawn roof of the class and level its verdict used (flat for compute-bound, sloped for memory)."""
    points = compare.step_points(series, ["v1", "v2"])
    spec = chart_trajectory.trajectory_chart(points, series, ceilings(), "G", 2).to_dict(validate=False)
    segments = [r for r in _rows_with(spec, "roof") if "x2" in r]
    drawn = spec["datasets"][chart_trajectory.STEP_DATA]
    at_roof = [p for p in drawn if p["step"] == 2]
    assert len(at_roof) == 5 and all(p["roof_pct"] == pytest.approx(100) for p in at_roof)
    for p in at_roof:
        kind, resource = p["bound"].split(":")
        if kind == "compute":
            [roof] = [s for s in segments if s["style"] == "compute" and s["roof"].startswith(resource.upper() + " ")]
            assert p["performance"] == pytest.approx(roof["y"], rel=1e-9)
            assert p["ai"] >= roof["x"] * (1 - 1e-9)
        else:
            [roof] = [s for s in segments if s["style"] == resource]
            assert p["performance"] == pytest.approx(roof["y2"] / roof["x2"] * p["ai"], rel=1e-9)
    assert {p["bound"].split(":")[0] for p in at_roof} == {"compute", "memory"}
    heads = [layer for layer in spec["layer"] if layer["mark"].get("shape") == "triangle-up"]
    assert heads and len(spec["datasets"][heads[0]["data"]["name"]]) >= 3  # one per segment long enough for one


def test_compare_page_and_report_series(series, tmp_path):
    paths = {t: tmp_path / f"{t}.parquet" for t in ("kernels", "ceilings", "diagnostics")}
    write_table(series, "kernels", paths["kernels"])
    write_table(ceilings(), "ceilings", paths["ceilings"])
    write_table(conform(pd.DataFrame(), "diagnostics"), "diagnostics", paths["diagnostics"])
    config = load_config({"series": {"opt": ["v1", "v2"], "gap": {"steps": ["v1", "v9", "v2"]}}})
    out = tmp_path / "reports" / "summary.html"
    code = report_stage.main(["--kernels", str(paths["kernels"]), "--ceilings", str(paths["ceilings"]), "--diagnostics",
                        str(paths["diagnostics"]), "--output", str(out), "--apps-dir", str(out.parent / "apps"),
                        "--series", json.dumps({k: v.model_dump() for k, v in config.series.items()})])
    assert code == 0
    page = (out.parent / "compare" / "opt.html").read_text()
    assert '<script src="../assets/vega-bundle.js"></script>' in page and page.count("<script") == 2
    assert "only in step 1 of 2" in page and "only in step 2 of 2" in page and "in only some steps" in page
    assert 'href="compare/opt.html"' in out.read_text()
    assert "Left out: v9" in (out.parent / "compare" / "gap.html").read_text()


def test_bad_series_refused():
    with pytest.raises(compare.SeriesError, match="given twice"):
        compare.step_points(pd.DataFrame({"app": ["a"]}), ["a", "a"])
    with pytest.raises(ValueError, match="at least 2"):
        load_config({"series": {"one": ["a"]}})


def test_real_before_after_compare_cli(tmp_path, capsys):
    """The FlashAttention before/after pair: the kernel was renamed (fa3 -> fa3db_full), --rename
    matches it; the printed numbers equal the kernels table's FLOP / time and FLOP / bytes. Without
    the rename it is matched all the same, by its launch configuration (unique in each report)."""
    import roofline

    folder = real_fixture("rtx4060ti-flashattn-fp16-tensorroofline-ncu2025.4")
    files = [str(folder / "fa3_before_n4096_full.ncu-rep"), str(folder / "db_full_after_n4096_full.ncu-rep")]
    code = cli.main(["compare", *files, "--rename", "fa3db_full_fwd_kernel=fa3_fwd_kernel", "--format", "json",
                     "-o", str(tmp_path / "compare.html")])
    assert code == 0
    [row] = json.loads(capsys.readouterr().out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kernels = roofline.analyse(files).kernels.set_index("app")
    for side, app in (("before", "fa3_before_n4096_full"), ("after", "db_full_after_n4096_full")):
        k = kernels.loc[app]
        assert row[f"performance_{side}"] == pytest.approx(k["flop"] / k["duration_s"], rel=1e-12)
        assert row[f"ai_{side}"] == pytest.approx(k["flop"] / k[f"{row[f'level_{side}']}_bytes"], rel=1e-12)
    assert row["presence"] == "every step" and row["bound_after"] == "compute:tensor_fp16_acc32"
    assert row["matched_by"] == "matched by the rename map"
    assert row["duration_s_ratio"] < 1 < row["performance_ratio"]  # the double-buffered kernel is faster
    assert (tmp_path / "assets" / "vega-bundle.js").exists()
    # without the rename: one kernel, followed by its launch configuration ((64, 8, 1) × (128, 1, 1))
    assert cli.main(["compare", *files, "--format", "json"]) == 0
    [plain] = json.loads(capsys.readouterr().out)
    assert plain["matched_by"] == "matched by launch configuration: name changed"
    assert plain["duration_s_ratio"] == pytest.approx(row["duration_s_ratio"], rel=1e-12)
    assert cli.main(["compare", *files]) == 0
    text = capsys.readouterr().out
    assert "every step; matched by launch configuration: name changed" in text and "only in step" not in text


def test_the_chart_says_how_many_kernels_matched_and_why_none_did(series):
    """The subtitle counts the kernels matched across the steps (the series: stream, gemm and both
    launch configurations of twice; gone and new are in one step each); when none matched, it says
    so and why (a renamed kernel needs a rename), not "2 kernel path(s)"."""
    def subtitle(frame: pd.DataFrame, steps: list[str]) -> str:
        points = compare.step_points(frame, steps)
        spec = chart_trajectory.trajectory_chart(points, frame, ceilings(), "G", len(steps)).to_dict(validate=False)
        return spec["title"]["subtitle"][0]

    assert subtitle(series, ["v1", "v2"]).startswith("4 of 6 kernels matched across 2 steps; ceilings: ")
    renamed = series[series["kernel"].str.contains("gone|new")]
    text = subtitle(renamed, ["v1", "v2"])
    assert text.startswith("no kernel matched across the 2 steps: each of the 2 kernels is in one step only")
    assert "--rename" in text and "path(s)" not in text
