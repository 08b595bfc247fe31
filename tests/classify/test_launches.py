"""Classify stage: the seed vectors exactly, the min() form vs the piecewise form, real reports."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import expected_dram, expected_flop, get, real_reports, report_metrics
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.ceilings.select import report_ceilings, select_ceilings
from roofline.classify.kernels import aggregate_kernels
from roofline.classify.launches import classify_launches
from roofline.parse.counters import parse_input
from roofline.tables.schemas import conform


def _machine(device, peak, bw, cls="fp32"):
    rows = [
        {"device": device, "kind": "compute", "name": cls, "value": peak, "source": "what-if", "selected": True},
        {"device": device, "kind": "memory", "name": "dram", "value": bw, "source": "what-if", "selected": True},
    ]
    return conform(pd.DataFrame(rows), "ceilings")


def _launch(device, flop, dram, duration=math.nan, cls="fp32"):
    frame = pd.DataFrame(
        [
            {
                "app": "seed",
                "kernel": "k",
                "launch": 0,
                "device": device,
                f"flop_{cls}": flop,
                "dram_bytes": dram,
                "duration_s": duration,
            }
        ]
    )
    return conform(frame, "counters")


def _classify(flop, dram, peak, bw, duration=math.nan, cls="fp32"):
    return classify_launches(_launch("m", flop, dram, duration, cls), _machine("m", peak, bw, cls)).iloc[0]


def test_seed_normalization():
    row = _classify(240e9, 20e9, 120e12, 3e12, duration=240e9 / 30e12)
    assert row["ai_dram"] == pytest.approx(12.0)
    assert row["roof_flops"] / row["roof_dram_bw"] == pytest.approx(40.0)  # ridge
    assert row["attainable"] == pytest.approx(36e12)
    assert row["bound"] == "memory:dram"
    assert row["performance"] == pytest.approx(30e12)
    assert row["dram_bytes"] / row["duration_s"] == pytest.approx(2.5e12)
    assert row["roof_pct"] == pytest.approx(100 * 30 / 36)


@pytest.mark.parametrize(
    "intensity, bw, bound, attainable",
    [
        (90, 3e12, "compute:fp32", 120e12),  # tiled GEMM
        (20, 3e12, "memory:dram", 60e12),  # knowledge check
        (20, 2e12, "memory:dram", 40e12),  # bandwidth drop, I = 20
        (80, 2e12, "compute:fp32", 120e12),  # bandwidth drop, I = 80 >= ridge 60
    ],
)
def test_seed_cases_on_the_120_tflops_machine(intensity, bw, bound, attainable):
    row = _classify(intensity * 1e9, 1e9, 120e12, bw)
    assert row["bound"] == bound
    assert row["attainable"] == pytest.approx(attainable)


def test_seed_a100_fp16_gemm():
    n = 8192
    row = _classify(2 * n**3, 3 * n * n * 2, 312e12, 2039e9, duration=2 * n**3 / 312e12, cls="tensor_fp16")
    assert row["ai_dram"] == pytest.approx(2730.7, abs=0.05)
    assert row["ai_dram"] / row["ridge_ratio"] == pytest.approx(153.02, abs=0.005)  # the ridge it used
    assert row["bound"] == "compute:tensor_fp16"
    assert row["roof_pct"] == pytest.approx(100.0)


def test_seed_saxpy_rtx4090():
    n = 1e9
    row = _classify(2 * n, 12 * n, 82.6e12, 1008e9)
    assert row["ai_dram"] == pytest.approx(0.1667, abs=5e-5)
    assert row["ai_dram"] / row["ridge_ratio"] == pytest.approx(81.9, abs=0.05)
    assert row["bound"] == "memory:dram"
    assert row["attainable"] == pytest.approx(0.168e12, rel=1e-3)
    assert row["attainable"] / 82.6e12 == pytest.approx(0.002, abs=0.0005)


def test_seed_exactly_on_the_ridge_is_compute_bound():
    row = _classify(100, 1, 100e12, 1e12, duration=1e-12)
    assert row["ai_dram"] == 100
    assert row["bound"] == "compute:fp32"
    assert row["roof_pct"] == pytest.approx(100.0)


positive = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(intensity=positive, peak=st.floats(1e9, 1e16), bw=st.floats(1e8, 1e14))
def test_min_form_equals_piecewise_form(intensity, peak, bw):
    row = _classify(intensity * 1e6, 1e6, peak, bw)
    ridge = peak / bw
    piecewise = peak if intensity >= ridge else bw * intensity
    assert row["attainable"] == pytest.approx(min(peak, bw * intensity), rel=1e-9)
    assert row["attainable"] == pytest.approx(piecewise, rel=1e-9)
    if intensity > ridge * (1 + 1e-6):
        assert row["bound"] == "compute:fp32"
    elif intensity < ridge * (1 - 1e-6):
        assert row["bound"] == "memory:dram"


@settings(max_examples=100, deadline=None)
@given(peak=st.floats(1e9, 1e16), bw=st.floats(1e8, 1e14))
def test_boundary_belongs_to_compute(peak, bw):
    ridge = peak / bw
    row = _classify(ridge * 1e6, 1e6, peak, bw)
    assert row["bound"] == "compute:fp32"


def test_no_flop_kernel_is_classified_by_memory_roof():
    row = _classify(0.0, 1e9, 100e12, 1e12, duration=2e-3)
    assert row["bound"] == "none"
    assert math.isnan(row["ai_dram"])
    assert row["roof_pct"] == pytest.approx(100 * (1e9 / 1e12) / 2e-3)  # achieved BW / peak BW


def test_mixed_classes_bound_by_largest_time():
    frame = conform(
        pd.DataFrame(
            [
                {
                    "app": "a",
                    "kernel": "attn",
                    "launch": 0,
                    "device": "m",
                    "flop_fp32": 1e12,
                    "flop_tensor_fp16": 100e12,
                    "dram_bytes": 1e9,
                    "duration_s": 1.0,
                }
            ]
        ),
        "counters",
    )
    ceilings = pd.concat([_machine("m", 10e12, 1e12), _machine("m", 1000e12, 1e12, "tensor_fp16").iloc[:1]])
    row = classify_launches(frame, ceilings).iloc[0]
    # fp32: 1e12 / 10e12 = 0.1 s; tensor: 100e12 / 1000e12 = 0.1 s: a tie, and the first listed class wins
    assert row["time_bound_fp32"] == pytest.approx(0.1) and row["time_bound_tensor_fp16"] == pytest.approx(0.1)
    assert row["compute_class"] == "fp32" and row["bound"] == "compute:fp32"
    frame.loc[0, "flop_tensor_fp16"] = 300e12
    row = classify_launches(frame, ceilings).iloc[0]
    assert row["bound"] == "compute:tensor_fp16" and row["compute_class"] == "tensor_fp16"
    assert row["flop_total"] == pytest.approx(301e12)


def test_above_roof_and_far_below_are_flagged():
    row = _classify(120e12, 1e9, 120e12, 3e12, duration=0.5)  # 2x faster than the compute roof allows
    assert row["above_roof"] and "above the roof" in row["note"]
    row = _classify(1e9, 1e9, 120e12, 3e12, duration=1.0)
    assert not row["above_roof"] and row["note"].startswith("latency/parallelism?")


def test_each_launch_gets_its_own_devices_roof_in_any_row_order():
    """Launches of three devices (one without ceilings), interleaved under a shuffled index: each
    row is classified as it is alone against its own device's machine."""
    machines = {"a": (100e12, 1e12), "b": (10e12, 2e12)}
    ceilings = pd.concat([_machine(d, peak, bw) for d, (peak, bw) in machines.items()], ignore_index=True)
    devices = ["b", "a", "none", "a", "b", "b", "none", "a"]
    rows = [_launch(d, 1e9 * (i + 1), 1e8 * (8 - i), 1e-3) for i, d in enumerate(devices)]
    launches = pd.concat(rows, ignore_index=True)
    launches.index = [7, 3, 5, 0, 6, 1, 4, 2]
    together = classify_launches(launches, ceilings)
    for i, device in enumerate(devices):
        alone = classify_launches(rows[i], ceilings).iloc[0]
        row = together.iloc[i]
        assert row["device"] == device and row["bound"] == alone["bound"]
        for name in ("roof_flops", "roof_dram_bw", "attainable", "roof_pct"):
            assert row[name] == alone[name] or (math.isnan(row[name]) and math.isnan(alone[name])), (device, name)
        if device == "none":
            assert math.isnan(row["roof_dram_bw"]) and row["bound"] == "unknown"
        else:
            assert row["roof_dram_bw"] == machines[device][1]


def test_kernel_aggregate_is_total_work_over_total_time():
    frame = conform(
        pd.DataFrame(
            [
                {
                    "app": "a",
                    "kernel": "k",
                    "launch": 0,
                    "device": "m",
                    "flop_fp32": 1e9,
                    "dram_bytes": 1e9,
                    "duration_s": 1e-3,
                },
                {
                    "app": "a",
                    "kernel": "k",
                    "launch": 1,
                    "device": "m",
                    "flop_fp32": 3e9,
                    "dram_bytes": 1e9,
                    "duration_s": 3e-3,
                },
                {
                    "app": "a",
                    "kernel": "other",
                    "launch": 2,
                    "device": "m",
                    "flop_fp32": 0,
                    "dram_bytes": 1e9,
                    "duration_s": 4e-3,
                },
            ]
        ),
        "counters",
    )
    kernels = aggregate_kernels(frame, _machine("m", 100e12, 1e12)).set_index("kernel")
    assert kernels.loc["k", "launches"] == 2
    assert kernels.loc["k", "performance"] == pytest.approx(4e9 / 4e-3)  # not the mean of 1e12 and 1e12
    assert kernels.loc["k", "ai_dram"] == pytest.approx(2.0)
    assert kernels.loc["k", "time_share"] == pytest.approx(0.5)
    roof = kernels.loc["k", "roof_pct"] / 100
    assert kernels.loc["k", "priority"] == pytest.approx(0.5 * (1 - roof))


REPORTS = real_reports()


def _raw_peak(launches, name, clock, factor=1.0):
    """A device ceiling from the reports' raw metrics: factor x peak_sustained x clock, median over
    the launches of at least 20 us (shorter ones read their clocks low)."""
    values = [factor * get(m, name) * get(m, clock) for m in launches if get(m, "gpu__time_duration.sum") >= 20e3]
    values = [v for v in values if math.isfinite(v)] or [
        factor * get(m, name) * get(m, clock) for m in launches
    ]
    return float(np.median(values))


@pytest.mark.parametrize("path", REPORTS, ids=[f"{p.parent.name}/{p.stem}" for p in REPORTS])
def test_verdict_against_raw_report_metrics(path):
    """FP32/FP64 launches: the time bounds and the verdict against the numbers recomputed here from
    the report's raw metrics (ncu_report; instruction rates x cycles, DRAM bytes, peak_sustained x
    clock), away from the ridge: a launch clearly over its DRAM bound is never called compute-bound
    and one clearly over its compute bound never memory-bound."""
    launches = report_metrics(path)
    counters = parse_input(path, "app", "ncu-rep")
    classified = classify_launches(counters, select_ceilings(report_ceilings(counters), ["report"]))
    beta = _raw_peak(launches, "dram__bytes.sum.peak_sustained", "dram__cycles_elapsed.avg.per_second")
    checked = 0
    for i, m in enumerate(launches):
        row = classified.iloc[i]
        works = {p: expected_flop(m, p) for p in ("d", "f")}
        if not (np.nan_to_num(list(works.values())) > 0).any() or not math.isfinite(beta):
            continue
        tensor_ops = [get(m, n) for n in m if n.startswith("sm__ops_path_tensor_") and n.endswith(".sum")]
        tensor_busy = get(m, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed")
        if (np.nan_to_num(tensor_ops) > 0).any() or np.nan_to_num(tensor_busy) >= 5:
            continue  # tensor work: not an FP32/FP64 launch
        p = max(works, key=lambda q: np.nan_to_num(works[q]))
        pi = _raw_peak(launches, f"sm__sass_thread_inst_executed_op_{p}fma_pred_on.sum.peak_sustained",
                       "sm__cycles_elapsed.avg.per_second", 2.0)
        compute_time, dram_time = works[p] / pi, expected_dram(m) / beta
        cls = {"d": "fp64", "f": "fp32"}[p]
        assert row[f"time_bound_{cls}"] == pytest.approx(compute_time, rel=5e-3)
        assert row["time_bound_dram"] == pytest.approx(dram_time, rel=5e-3)
        if dram_time > 1.1 * compute_time:
            assert row["bound"].startswith("memory:"), (i, row["bound"], dram_time, compute_time)
            checked += 1
        elif compute_time > 1.1 * dram_time and row["bound"].startswith("compute:"):
            assert row["bound"] == f"compute:{cls}"
            checked += 1
        elif compute_time > 1.1 * dram_time:
            assert row["bound"] in ("memory:l2", "memory:l1"), (i, row["bound"])  # another level binds
            checked += 1
    if checked == 0:
        pytest.skip(f"{path.parent.name}: no FP32/FP64 launch with DRAM bytes away from the ridge")


def _fixture(name):
    by_name = {f"{p.parent.name}/{p.name}": p for p in REPORTS}
    if name not in by_name:
        pytest.skip(f"real fixture {name} absent (../shared/fixtures/real)")
    return by_name[name]


def test_invisible_tensor_work_is_never_flop_free():
    """The A40 Julia FRB launch ran HMMA (tensor pipe 32 % busy) in a report without tensor op
    counters: no verdict, a note with the flags; the four FP-free launches stay `none`."""
    julia = parse_input(_fixture("a40-julia-frb-full-ncu2022.4/profile.ncu-rep"), "julia", "ncu-rep")
    classified = classify_launches(julia, select_ceilings(report_ceilings(julia), ["report"]))
    frb = classified["kernel"].str.contains("frb")
    assert frb.sum() == 1
    row = classified[frb].iloc[0]
    assert row["bound"] == "unknown" and math.isnan(row["roof_pct"])
    assert "tensor work not counted" in row["note"] and "SpeedOfLight_HierarchicalTensorRooflineChart" in row["note"]
    assert (classified.loc[~frb, "bound"] == "none").all()
    assert classified.loc[~frb, "roof_pct"].notna().all()


def test_imma_trajectory_launches_are_unknown_not_none():
    for step in ("profile_1_db02bc1", "profile_5_87e1f37"):
        path = _fixture(f"a40-julia-imma-trajectory-full-ncu2022.1/{step}.ncu-rep")
        counters = parse_input(path, "imma", "ncu-rep")
        row = classify_launches(counters, select_ceilings(report_ceilings(counters), ["report"])).iloc[0]
        assert counters["tensor_pipe_active_pct"].iat[0] > 30
        assert row["bound"] == "unknown" and "tensor work not counted" in row["note"]


def test_hfma2_mma_register_moves_do_not_make_silu_fp16():
    """SiLU (FP32 elementwise): ncu counts the compiler's HFMA2.MMA moves as HFMA; the tensor pipe is
    busy with zero tensor ops. The launch stays an FP32 kernel, bound by DRAM, and says why."""
    silu = parse_input(_fixture("a100sxm-silu-full-ncu2025.1/2025-04-21-77_06-MT.ncu-rep"), "silu", "ncu-rep")
    assert (silu["flop_fp16"] > 0).all() and np.isfinite(silu["flop_tensor"]).all()
    classified = classify_launches(silu, select_ceilings(report_ceilings(silu), ["report"]))
    assert (classified["compute_class"] == "fp32").all()
    assert (classified["bound"] == "memory:dram").all()
    assert classified["note"].str.contains("HFMA2.MMA").all()
    assert classified["time_bound_fp16"].isna().all()


def test_flop_without_bytes_gets_no_verdict():
    """Hand-made: FP32 work on a machine with a DRAM roof, but the launch has no byte counter."""
    row = _classify(1e12, math.nan, 100e12, 1e12, duration=1.0)
    assert row["bound"] == "unknown"
    assert math.isnan(row["roof_pct"])
    assert "no memory level with both bytes and a roof" in row["note"] and "dram__bytes" in row["note"]
    assert row["time_bound_fp32"] == pytest.approx(0.01)  # the compute bound is still reported


def test_no_flop_counters_give_no_verdict():
    """Hand-made: bytes but no FLOP counter at all (NaN, not zero) is `unknown`, not `none`."""
    row = _classify(math.nan, 1e9, 100e12, 1e12, duration=1e-2)
    assert row["bound"] == "unknown"
    assert "no FLOP counters" in row["note"] and "--set roofline" in row["note"]


def test_nersc_export_without_dram_rows_is_unknown(tmp_path):
    """The real NERSC dropout export with its dram__bytes.sum rows removed (a variant written here):
    it has L2/L1 bytes but no roofs for them, so no verdict, where the complete export is memory:dram."""
    from conftest import REAL

    source = REAL / "a100-dropout-nersc-metrics-csv" / "nsight162.csv"
    if not source.is_file():
        pytest.skip(f"real fixture {source} absent")
    variant = tmp_path / "nsight162-no-dram.csv"
    lines = source.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
    variant.write_text("".join(line for line in lines if "dram__bytes" not in line), encoding="utf-8")
    from roofline.ceilings.catalog import CATALOG_PATH
    from roofline.ceilings.select import build_ceilings

    verdicts = {}
    for name, path in (("complete", source), ("no_dram", variant)):
        counters = parse_input(path, name, "csv", device="NVIDIA A100-SXM4-80GB")
        ceilings = build_ceilings(counters, CATALOG_PATH, ["report", "datasheet"])
        verdicts[name] = aggregate_kernels(counters, ceilings).iloc[0]
    assert verdicts["complete"]["bound"] == "memory:dram"
    assert verdicts["no_dram"]["bound"] == "unknown"
    assert "dram__bytes" in verdicts["no_dram"]["note"]


def test_kernel_totals_use_complete_launches_only():
    """Hand-made: three launches of one kernel; the third lacks DRAM bytes. Work, bytes and time are
    summed over the two complete launches (a missing value is never a zero)."""
    rows = [
        {"flop_fp32": 1e9, "dram_bytes": 1e9, "duration_s": 1e-3},
        {"flop_fp32": 3e9, "dram_bytes": 1e9, "duration_s": 3e-3},
        {"flop_fp32": 4e9, "dram_bytes": math.nan, "duration_s": 4e-3},
    ]
    frame = conform(
        pd.DataFrame([{"app": "a", "kernel": "k", "launch": i, "device": "m", **r} for i, r in enumerate(rows)]),
        "counters",
    )
    k = aggregate_kernels(frame, _machine("m", 100e12, 1e12)).iloc[0]
    assert k["launches"] == 3 and k["launches_used"] == 2
    assert k["flop_fp32"] == pytest.approx(4e9) and k["dram_bytes"] == pytest.approx(2e9)
    assert k["duration_s"] == pytest.approx(4e-3)
    assert k["ai_dram"] == pytest.approx(2.0)  # 4e9 / 2e9, not 8e9 / 2e9
    assert k["time_share"] == pytest.approx(1.0)
    assert "2 of 3 launches" in k["note"] and "dram_bytes" in k["note"]


def test_annotations_give_traffic_excess():
    from roofline.classify.launches import apply_annotations

    frame = _launch("m", 2e9, 24e9, duration=1e-2)
    frame.loc[0, "kernel"] = "void saxpy<float>(int, float, float *, float *)"
    annotated = apply_annotations(
        frame, [{"kernel": r"^void saxpy<", "algorithmic_flop": 2e9, "algorithmic_bytes": 12e9}]
    )
    row = classify_launches(annotated, _machine("m", 100e12, 1e12)).iloc[0]
    assert row["traffic_excess"] == pytest.approx(2.0)
    assert row["ai_algorithmic"] == pytest.approx(1 / 6)
    assert row["ai_dram"] == pytest.approx(1 / 12)


def test_geforce_fp32_accumulate_is_judged_against_its_half_rate_roof():
    """Hand-made RTX 3080 launch (datasheet roofs only): FP16 tensor work with FP32 accumulate at the
    catalog's fp32_accumulate rate (59.5 TFLOP/s, half the FP16-accumulate 119) is at 100 % of its
    roof; the same work with FP16 accumulate at the same speed is at 50 %."""
    from roofline.ceilings.catalog import CATALOG_PATH
    from roofline.ceilings.select import datasheet_ceilings

    device = "NVIDIA GeForce RTX 3080"
    ceilings = select_ceilings(datasheet_ceilings([device], CATALOG_PATH), ["datasheet"])
    rows = []
    for i, cls in enumerate(("tensor_fp16_acc32", "tensor_fp16")):
        rows.append({"app": "a", "kernel": cls, "launch": i, "device": device, f"flop_{cls}": 59.5e12,
                     "dram_bytes": 1e9, "duration_s": 1.0})
    classified = classify_launches(conform(pd.DataFrame(rows), "counters"), ceilings).set_index("kernel")
    acc32, acc16 = classified.loc["tensor_fp16_acc32"], classified.loc["tensor_fp16"]
    assert acc32["bound"] == "compute:tensor_fp16_acc32" and acc32["roof_pct"] == pytest.approx(100.0)
    assert acc32["roof_flops"] == pytest.approx(59.5e12) and acc32["ceiling_source"] == "datasheet"
    assert acc16["bound"] == "compute:tensor_fp16" and acc16["roof_pct"] == pytest.approx(50.0)


def test_a100_datasheet_runs_fp32_accumulate_at_full_rate_and_sparse_apart():
    """Hand-made A100 launches: FP32-accumulate FP16 work has the full 312 TFLOP/s roof (the entry has
    no fp32_accumulate); 2:4-sparse work is judged against the sparse 624, never dense work."""
    from roofline.ceilings.catalog import CATALOG_PATH
    from roofline.ceilings.select import datasheet_ceilings

    device = "NVIDIA A100-SXM4-40GB"
    ceilings = select_ceilings(datasheet_ceilings([device], CATALOG_PATH), ["datasheet"])
    rows = [{"app": "a", "kernel": cls, "launch": i, "device": device, f"flop_{cls}": 312e12, "dram_bytes": 1e9,
             "duration_s": 1.0} for i, cls in enumerate(("tensor_fp16_acc32", "tensor_fp16_sparse"))]
    classified = classify_launches(conform(pd.DataFrame(rows), "counters"), ceilings).set_index("kernel")
    assert classified.loc["tensor_fp16_acc32", "roof_pct"] == pytest.approx(100.0)
    assert classified.loc["tensor_fp16_sparse", "roof_flops"] == pytest.approx(624e12)
    assert classified.loc["tensor_fp16_sparse", "roof_pct"] == pytest.approx(50.0)


DATA = Path(__file__).parents[1] / "data"


def _tensor_machine(device):
    rows = [
        {"device": device, "kind": "compute", "name": "fp32", "value": 19.5e12, "source": "what-if", "selected": True},
        {"device": device, "kind": "compute", "name": "tensor_int8", "value": 624e12, "source": "what-if",
         "selected": True},
        {"device": device, "kind": "memory", "name": "dram", "value": 1.94e12, "source": "what-if", "selected": True},
    ]
    return conform(pd.DataFrame(rows), "ceilings")


def _tensor_launch(**values):
    """Hand-made: one launch with FP32 (epilogue) work and DRAM bytes, and the given tensor evidence."""
    row = {"app": "t", "kernel": "k", "launch": 0, "device": "m", "flop_fp32": 4e6, "dram_bytes": 1.5e7,
           "duration_s": 4e-4, **values}
    return classify_launches(conform(pd.DataFrame([row]), "counters"), _tensor_machine("m")).iloc[0]


def test_tensor_instructions_the_op_counters_miss_give_no_verdict():
    """Hand-made after the CUTLASS int8 GEMM of issue 44: 440,000 IMMA warp instructions in the SASS
    per-opcode counts, the tensor pipe 11.4 % busy, the tensor op counters present and zero, and FP32
    epilogue work that alone would make it memory:dram at 1.9 %: no verdict, the evidence and the flags."""
    sass = {"tensor_instructions_recipe": "sass_per_opcode_mma", "flop_tensor_int8": 0.0}
    row = _tensor_launch(tensor_instructions=440_000.0, tensor_pipe_active_pct=11.4, **sass)
    assert row["bound"] == "unknown" and math.isnan(row["roof_pct"]) and row["binding_roof"] == ""
    assert "440,000 MMA instructions" in row["note"] and "SASS per-opcode counts" in row["note"]
    assert "are all zero" in row["note"] and "SpeedOfLight_HierarchicalTensorRooflineChart" in row["note"]
    # the same launch without MMA instructions is judged on what it counted (HFMA2.MMA moves keep the
    # pipe busy without any: a count of zero outweighs the pipe)
    for pipe in (2.1, 30.0):
        judged = _tensor_launch(tensor_instructions=0.0, tensor_pipe_active_pct=pipe, **sass)
        assert judged["bound"] == "memory:dram" and judged["roof_pct"] == pytest.approx(100 * 1.5e7 / 1.94e12 / 4e-4)
    # counted tensor work is judged as before, instructions or not
    counted = _tensor_launch(tensor_instructions=440_000.0, tensor_pipe_active_pct=11.4,
                             tensor_instructions_recipe="sass_per_opcode_mma", flop_tensor_int8=1e11)
    assert counted["bound"] == "compute:tensor_int8" and "tensor work not counted" not in counted["note"]


@pytest.mark.parametrize("pipe_pct, bound", [(11.4, "unknown"), (5.0, "unknown"), (2.1, "memory:dram"),
                                             (0.0, "memory:dram")])
def test_tensor_pipe_activity_is_the_evidence_where_instructions_are_not_counted(pipe_pct, bound):
    """Hand-made: no instruction count; tensor op counters zero (present) or absent alike."""
    from roofline.classify.launches import TENSOR_PIPE_BUSY_PCT

    assert 2.1 < TENSOR_PIPE_BUSY_PCT <= 5.0  # above the A100 SiLU's HFMA2.MMA moves, at or below 5 %
    for counters in ({"flop_tensor_int8": 0.0}, {}):
        row = _tensor_launch(tensor_pipe_active_pct=pipe_pct, **counters)
        assert row["bound"] == bound
        if bound == "unknown":
            assert f"the tensor pipe was {pipe_pct:.1f} % busy" in row["note"]


def _ceilings_of(counters):
    from roofline.ceilings.catalog import CATALOG_PATH
    from roofline.ceilings.select import build_ceilings

    return build_ceilings(counters, CATALOG_PATH, ["report", "datasheet"])


@pytest.mark.parametrize("name, device, evidence", [
    ("ncu_raw_tensor_without_ops.csv", None, "the tensor pipe was 11.4 % busy, but the input's tensor op counters "
     "are all zero"),
    ("ncu_long_pipe_tensor_without_ops.csv", "NVIDIA A100-SXM4-80GB",
     "2,048 tensor-pipe instructions (sm__inst_executed_pipe_tensor), but the input's tensor op counters are absent"),
])
def test_csv_readers_give_no_verdict_to_tensor_work_they_cannot_count(name, device, evidence):
    """Hand-made exports (tests/data): the launch with tensor evidence and no counted tensor work has no
    verdict at launch and kernel level; the HFMA2.MMA-move launch, the one without tensor instructions
    and the one whose op counters count its work are judged."""
    counters = parse_input(DATA / name, "t", "csv", device=device)
    ceilings = _ceilings_of(counters)
    for table in (classify_launches(counters, ceilings), aggregate_kernels(counters, ceilings)):
        rows = table.set_index("kernel")
        tensor = rows.index[0] if "raw" in name else "ampere_fp16_s16816gemm_fp16_64x64_nn"
        assert rows.loc[tensor, "bound"] == "unknown" and evidence in rows.loc[tensor, "note"]
        assert "--section SpeedOfLight_HierarchicalTensorRooflineChart" in rows.loc[tensor, "note"]
        others = rows.drop(index=tensor)
        assert (others["bound"] != "unknown").all() and not others["note"].str.contains("tensor work").any()
    if "raw" in name:
        assert rows.loc["fp16_gemm_kernel", "bound"].startswith("compute:tensor_fp16")


def _per_opcode_mma(path) -> list[float]:
    """Per launch, the HMMA + IMMA warp instructions of a report's SASS counts, read with ncu_report."""
    from conftest import report_actions

    out = []
    for action in report_actions(path):
        metric = action.metric_by_name("sass__inst_executed_per_opcode")
        names = metric.correlation_ids()
        out.append(sum(metric.as_double(i) for i in range(metric.num_instances())
                       if names.as_string(i) in ("HMMA", "IMMA")))
    return out


@pytest.mark.parametrize("report", ["a40-julia-imma-trajectory-full-ncu2022.1/profile_1_db02bc1.ncu-rep",
                                    "a40-julia-frb-full-ncu2022.4/profile.ncu-rep"])
def test_real_tensor_notes_name_the_reports_own_instruction_counts(report):
    """The A40 Julia reports have MMA opcodes but no tensor counters: each launch with them has no
    verdict and its note gives the count ncu_report reads; the others keep theirs."""
    path = _fixture(report)
    counters = parse_input(path, "julia", "ncu-rep")
    classified = classify_launches(counters, select_ceilings(report_ceilings(counters), ["report"]))
    counts = _per_opcode_mma(path)
    assert max(counts) > 1e7
    for count, (_, row) in zip(counts, classified.iterrows(), strict=True):
        if count:
            assert row["bound"] == "unknown" and f"{count:,.0f} MMA instructions" in row["note"]
        else:
            assert row["bound"] != "unknown"


@pytest.mark.parametrize("name, device, failed", [
    ("ncu_raw_failed_replay.csv", None, [False, True, False, False, True]),
    ("ncu_long_failed_replay.csv", "NVIDIA A100-SXM4-80GB", [False, True, False]),
])
def test_a_failed_replay_is_said_and_has_no_time(name, device, failed):
    """Hand-made exports: launches with every counter empty (duration included). They are said to have
    failed their replay, with ncu's fixes, never told to collect counters the input has; a kernel made
    only of them has no time share (NaN, shown as "–"), never 0, and no verdict."""
    from roofline.pages.glance import glance_html

    counters = parse_input(DATA / name, "t", "csv", device=device)
    assert counters["replay_failed"].tolist() == failed
    ceilings = _ceilings_of(counters)
    launches = classify_launches(counters, ceilings)
    for _, row in launches[launches["replay_failed"]].iterrows():
        assert row["bound"] == "unknown" and "ncu recorded no values" in row["note"]
        assert "--replay-mode application" in row["note"] and "--set roofline" not in row["note"]
    assert (launches.loc[~launches["replay_failed"], "bound"] != "unknown").all()
    kernels = aggregate_kernels(counters, ceilings).set_index("kernel")
    flash = kernels.loc["flash_fwd_kernel"]
    assert flash["bound"] == "unknown" and math.isnan(flash["time_share"]) and math.isnan(flash["duration_s"])
    assert "ncu recorded no values" in flash["note"] and "--set roofline" not in flash["note"]
    assert kernels["time_share"].sum() == pytest.approx(1.0)  # the shares of the time that is known
    glance = glance_html(kernels.reset_index().copy(), app_page=True)
    assert "flash_fwd_kernel</span>, – of its app" in glance
    if "raw" in name:  # a kernel with one failed launch among three: totals and time share say so
        gemm = kernels.loc["gemm_kernel"]
        assert gemm["launches"] == 3 and gemm["launches_used"] == 2 and gemm["time_share"] == pytest.approx(2 / 3)
        assert "ncu recorded no values for 1 of them" in gemm["note"] and gemm["bound"] == "memory:dram"


def test_a_kernel_without_fp_work_has_one_percent_of_roof_everywhere():
    """Hand-made: no FP work, DRAM 1.3 % busy, the issue roof (100 SMs x 4 schedulers x 1 GHz) 10.5 %:
    the binding roof is the issue rate, and its 10.5 % is % of roof on the launch row, the kernel row,
    the kernels table and At a glance alike; with few instructions DRAM binds at 1.3 %."""
    from roofline.pages.glance import glance_html
    from roofline.pages.table import TABLE, page_table

    def counters(warp_instructions):
        row = {"app": "a", "kernel": "int_kernel", "launch": 0, "device": "m", "flop_fp32": 0.0, "flop_fp64": 0.0,
               "dram_bytes": 1.3e7, "duration_s": 1e-3, "warp_instructions": warp_instructions,
               "sm_count": 100.0, "compute_capability": "8.0", "sm_clock_hz": 1e9}
        return conform(pd.DataFrame([row]), "counters")

    machine = _machine("m", 19.5e12, 1e12)
    launch = classify_launches(counters(4.2e7), machine).iloc[0]
    kernels = aggregate_kernels(counters(4.2e7), machine)
    kernel = kernels.iloc[0]
    for row in (launch, kernel):
        assert row["bound"] == "none" and row["binding_roof"] == "issue" and row["instruction_bound"] == "issue"
        assert row["roof_pct"] == pytest.approx(10.5) and row["instruction_roof_pct"] == pytest.approx(10.5)
        assert row["predicted_duration_s"] == pytest.approx(1.05e-4)
    assert kernel["priority"] == pytest.approx(1.0 - 0.105)
    table = page_table(kernels)
    assert table["roof_pct"].iat[0] == pytest.approx(10.5) and table["binding_roof"].iat[0] == "issue"
    heads = [head for head, *_ in TABLE]
    assert heads.index("binding roof") + 1 == heads.index("% of roof")
    glance = glance_html(kernels, app_page=True)
    assert "instruction issue rate" in glance and "10.5 %" in glance and "1.3 %" not in glance
    memory = aggregate_kernels(counters(4.2e5), machine).iloc[0]  # issue time 1.05 us < DRAM time 13 us
    assert memory["binding_roof"] == "dram" and memory["roof_pct"] == pytest.approx(1.3)
