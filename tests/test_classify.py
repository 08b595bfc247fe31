"""Classify stage: the seed vectors exactly, the min() form vs the piecewise form, real reports."""

import math

import numpy as np
import pandas as pd
import pytest
from conftest import real_reports
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.ceilings import report_ceilings, select_ceilings
from roofline.classify import aggregate_kernels, classify_launches
from roofline.parse import parse_input
from roofline.schemas import conform


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
    assert row["peak_flops"] / row["peak_dram_bw"] == pytest.approx(40.0)  # ridge
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
    assert 312e12 / 2039e9 == pytest.approx(153.02, abs=0.005)
    assert row["bound"] == "compute:tensor_fp16"
    assert row["roof_pct"] == pytest.approx(100.0)


def test_seed_saxpy_rtx4090():
    n = 1e9
    row = _classify(2 * n, 12 * n, 82.6e12, 1008e9)
    assert row["ai_dram"] == pytest.approx(0.1667, abs=5e-5)
    assert 82.6e12 / 1008e9 == pytest.approx(81.9, abs=0.05)
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
    # fp32: 1e12 / 10e12 = 0.1 s; tensor: 100e12 / 1000e12 = 0.1 s... tie -> first listed class wins.
    assert row["time_bound_fp32"] == pytest.approx(0.1) and row["time_bound_tensor_fp16"] == pytest.approx(0.1)
    frame.loc[0, "flop_tensor_fp16"] = 300e12
    row = classify_launches(frame, ceilings).iloc[0]
    assert row["bound"] == "compute:tensor_fp16" and row["compute_class"] == "tensor_fp16"
    assert row["flop_total"] == pytest.approx(301e12)


def test_above_roof_and_far_below_are_flagged():
    row = _classify(120e12, 1e9, 120e12, 3e12, duration=0.5)  # 2x faster than the compute roof allows
    assert row["above_roof"] and "above the roof" in row["note"]
    row = _classify(1e9, 1e9, 120e12, 3e12, duration=1.0)
    assert not row["above_roof"] and row["note"].startswith("latency/parallelism?")


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


@pytest.mark.parametrize("path", REPORTS, ids=[p.parent.name for p in REPORTS])
def test_dram_verdict_matches_report_metrics(path):
    """FP32/FP64 kernels: the DRAM-level verdict equals the report's own numbers, recomputed here
    from the counters' work and bytes and ncu's peak_sustained x clock, away from the ridge."""
    counters = parse_input(path, "app", "ncu-rep")
    ceilings = select_ceilings(report_ceilings(counters), ["report"])
    classified = classify_launches(counters, ceilings)
    peaks = ceilings[ceilings["selected"]].set_index("name")["value"]
    checked = 0
    for _, row in classified.iterrows():
        for cls in ("fp64", "fp32"):
            work = row[f"flop_{cls}"]
            if not work > 0 or row["compute_class"] != cls or "dram" not in peaks or cls not in peaks:
                continue
            intensity = work / row["dram_bytes"]
            ridge = peaks[cls] / peaks["dram"]
            if abs(intensity / ridge - 1) < 0.1:
                continue
            expected = "memory" if intensity < ridge else "compute"
            dram_only = "memory" if row["time_bound_dram"] > row[f"time_bound_{cls}"] else "compute"
            assert dram_only == expected
            checked += 1
    if checked == 0:
        pytest.skip(f"{path.parent.name}: no FP32/FP64 launch with DRAM bytes away from the ridge")


def test_real_fixture_sets_tensor_and_zero_flop():
    """The 2025 sets carry tensor counters (zero for these kernels); the Julia set has zero-FLOP launches."""
    by_name = {p.parent.name: p for p in REPORTS}
    if "a40-julia-frb-full-ncu2022.4" not in by_name:
        pytest.skip("real fixtures absent")
    julia = parse_input(by_name["a40-julia-frb-full-ncu2022.4"], "julia", "ncu-rep")
    classified = classify_launches(julia, select_ceilings(report_ceilings(julia), ["report"]))
    assert (classified["bound"] == "none").sum() == 4
    assert classified.loc[classified["bound"] == "none", "roof_pct"].notna().all()
    silu = parse_input(by_name["a100sxm-silu-full-ncu2025.1"], "silu", "ncu-rep")
    assert np.isfinite(silu["flop_tensor"]).all()


def test_annotations_give_traffic_excess():
    from roofline.classify import apply_annotations

    frame = _launch("m", 2e9, 24e9, duration=1e-2)
    frame.loc[0, "kernel"] = "void saxpy<float>(int, float, float *, float *)"
    annotated = apply_annotations(
        frame, [{"kernel": r"^void saxpy<", "algorithmic_flop": 2e9, "algorithmic_bytes": 12e9}]
    )
    row = classify_launches(annotated, _machine("m", 100e12, 1e12)).iloc[0]
    assert row["traffic_excess"] == pytest.approx(2.0)
    assert row["ai_algorithmic"] == pytest.approx(1 / 6)
    assert row["ai_dram"] == pytest.approx(1 / 12)
