"""Recipe derivation on hand-made raw launches: counting conventions, plausibility, provenance."""

import math

import pandas as pd
import pytest

from roofline.parse.derive import derive_counters

# -- counting conventions on hand-made raw launches (metric names as ncu writes them) --------------

SM_CLOCK = 1.5e9


def _raw(cc: str, **metrics: float) -> pd.DataFrame:
    """One hand-made launch of a GPU of compute capability ``cc``: duration 1 ms at a 1.5 GHz SM
    clock, plus the given ncu metrics (names with ``__`` for ``.``: ``a__b_sum`` -> ``a__b.sum``)."""
    major, minor = cc.split(".")
    row = {
        "kernel": "k",
        "launch": 0,
        "device": "hand-made GPU",
        "device__attribute_compute_capability_major": float(major),
        "device__attribute_compute_capability_minor": float(minor),
        "gpu__time_duration.sum": 1e-3,
        "sm__cycles_elapsed.avg.per_second": SM_CLOCK,
        "sm__cycles_elapsed.avg": SM_CLOCK * 1e-3,
        "smsp__cycles_elapsed.avg": SM_CLOCK * 1e-3,
    }
    row.update(metrics)
    return pd.DataFrame([row])


def _sass(op):
    return f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum"


def _ops(variant, suffix=""):
    return f"sm__ops_path_tensor_{variant}.sum{suffix}"


def test_fp32_counts_an_fma_as_two_flop():
    row = derive_counters(_raw("8.0", **{_sass("fadd"): 10, _sass("fmul"): 20, _sass("ffma"): 30})).iloc[0]
    assert row["flop_fp32"] == 10 + 20 + 2 * 30


def test_fp16_counts_half2_work_and_roof_alike():
    """Every H instruction is a half2 pair: 2 HADD + 2 HMUL + 4 HFMA; the roof is 4 x the HFMA peak."""
    raw = _raw("8.0", **{_sass("hadd"): 1, _sass("hmul"): 2, _sass("hfma"): 3, _sass("hfma") + ".peak_sustained": 64})
    row = derive_counters(raw).iloc[0]
    assert row["flop_fp16"] == 2 * 1 + 2 * 2 + 4 * 3
    assert row["peak_flops_fp16"] == pytest.approx(4 * 64 * SM_CLOCK)


def test_blackwell_packed_fp32_instructions_count_twice():
    """FADD2/FMUL2/FFMA2 do two lanes of work per thread instruction (sm_100 and later)."""
    metrics = {_sass(op): 1.0 for op in ("fadd", "fmul", "ffma", "fadd2", "fmul2", "ffma2")}
    row = derive_counters(_raw("10.0", **metrics)).iloc[0]
    assert row["flop_fp32"] == 1 + 1 + 2 + 2 + 2 + 4
    assert row["flop_fp32_recipe"] == "sass_inst_count_packed"
    plain = {_sass(op): 1.0 for op in ("fadd", "fmul", "ffma")}
    assert derive_counters(_raw("10.0", **plain)).iloc[0]["flop_fp32"] == 4  # older ncu: no paired counters


def test_ampere_dense_and_sparse_tensor_work_have_their_own_roofs():
    """Hand-made sm_86 launch with FP16-input FP32-accumulate work, dense and 2:4 sparse."""
    raw = _raw(
        "8.6",
        **{
            _ops("src_fp16_dst_fp32_sparsity_off"): 1e12,
            _ops("src_fp16_dst_fp32_sparsity_on"): 2e12,
            _ops("src_fp16_dst_fp32_sparsity_off", ".peak_sustained"): 512.0,
            _ops("src_fp16_dst_fp32_sparsity_on", ".peak_sustained"): 1024.0,
            _ops("src_fp16_dst_fp16_sparsity_off"): 0.0,
            _ops("src_fp16_dst_fp16_sparsity_off", ".peak_sustained"): 1024.0,
        },
    )
    row = derive_counters(raw).iloc[0]
    assert row["flop_tensor_fp16_acc32"] == 1e12 and row["flop_tensor_fp16_acc32_sparse"] == 2e12
    assert row["flop_tensor_fp16"] == 0
    assert row["peak_flops_tensor_fp16_acc32"] == pytest.approx(512 * SM_CLOCK)
    assert row["peak_flops_tensor_fp16_acc32_sparse"] == pytest.approx(1024 * SM_CLOCK)
    assert row["peak_flops_tensor_fp16"] == pytest.approx(1024 * SM_CLOCK)  # FP16 accumulate: full rate
    assert row["flop_tensor"] == 3e12


def test_hopper_splits_win_over_the_aggregates_and_the_sparse_rate_is_never_a_dense_roof():
    """Hand-made sm_90 launch: wgmma and mma.sync dense work plus some 2:4-sparse wgmma work; the
    aggregate ``src_fp16`` counts all of it and peaks at the sparse rate (as in the H100 report).
    The two paths are two classes, each against its own peak (mma.sync's: 2/3 of wgmma's)."""
    split = {
        _ops("op_hgmma_src_fp16_sparsity_off"): 3e12,
        _ops("op_hmma_src_fp16_dst_fp16_sparsity_off"): 1e12,
        _ops("op_hmma_src_fp16_dst_fp32_sparsity_off"): 0.5e12,
        _ops("op_hgmma_src_fp16_sparsity_on"): 2e12,
        _ops("op_hmma_src_fp16_dst_fp16_sparsity_on"): 0.0,
        _ops("op_hgmma_src_fp16_sparsity_off", ".peak_sustained"): 4096.0 * 114,
        _ops("op_hgmma_src_fp16_sparsity_on", ".peak_sustained"): 8192.0 * 114,
        _ops("op_hmma_src_fp16_dst_fp16_sparsity_off", ".peak_sustained"): 2730.67 * 114,
        _ops("op_hmma_src_fp16_dst_fp32_sparsity_off", ".peak_sustained"): 2730.67 * 114,
        _ops("op_hmma_src_fp16_dst_fp16_sparsity_on", ".peak_sustained"): 4096.0 * 114,
    }
    aggregate = {_ops("src_fp16"): 6.5e12, _ops("src_fp16", ".peak_sustained"): 8192.0 * 114}
    row = derive_counters(_raw("9.0", **split, **aggregate)).iloc[0]
    assert row["flop_tensor_fp16"] == 3e12 and row["flop_tensor_fp16_sparse"] == 2e12
    assert row["flop_tensor_fp16_mma"] == 1e12 and row["flop_tensor_fp16_acc32_mma"] == 0.5e12
    assert row["flop_tensor_fp16_mma_sparse"] == 0.0
    assert math.isnan(row["flop_tensor_fp16_acc32"])  # wgmma does not split the accumulator
    assert row["flop_tensor"] == 6.5e12  # each op in one class: the aggregate's total
    assert row["peak_flops_tensor_fp16"] == pytest.approx(4096 * 114 * SM_CLOCK)
    assert row["peak_flops_tensor_fp16_sparse"] == pytest.approx(8192 * 114 * SM_CLOCK)
    assert row["peak_flops_tensor_fp16_mma"] == pytest.approx(2730.67 * 114 * SM_CLOCK)
    assert row["peak_flops_tensor_fp16_acc32_mma"] == pytest.approx(2730.67 * 114 * SM_CLOCK)
    assert row["peak_flops_tensor_fp16_mma_sparse"] == pytest.approx(4096 * 114 * SM_CLOCK)
    assert math.isnan(row["peak_flops_tensor_fp16_acc32"])
    only_aggregate = derive_counters(_raw("9.0", **aggregate)).iloc[0]
    assert only_aggregate["flop_tensor_fp16"] == 6.5e12
    assert only_aggregate["flop_tensor_fp16_recipe"] == "hopper_aggregate_count"
    assert only_aggregate["peak_flops_tensor_fp16"] == pytest.approx(4096 * 114 * SM_CLOCK)  # halved
    assert math.isnan(only_aggregate["flop_tensor_fp16_sparse"])
    assert math.isnan(only_aggregate["flop_tensor_fp16_mma"])


def test_blackwell_tcgen05_and_fp4_fp6_fp8_names():
    raw = _raw(
        "10.0",
        **{
            _ops("op_utcqmma_src_fp4_fp6_fp8_dst_fp16_sparsity_off"): 1e12,
            _ops("op_utcqmma_src_fp4_fp6_fp8_dst_fp32_sparsity_off"): 2e12,
            _ops("op_utcomma_src_fp4_dst_fp32_sparsity_off"): 4e12,
            _ops("op_utchmma_src_bf16_dst_fp32_sparsity_off"): 8e12,
            _ops("op_hmma_src_bf16_dst_fp32_sparsity_off"): 1e12,
        },
    )
    row = derive_counters(raw).iloc[0]
    assert row["flop_tensor_fp8"] == 1e12 and row["flop_tensor_fp8_acc32"] == 2e12
    assert row["flop_tensor_fp4"] == 4e12 and row["flop_tensor_bf16"] == 9e12
    geforce = derive_counters(_raw("12.0", **{_ops("src_fp4_fp6_fp8_dst_fp32_sparsity_off"): 1e12})).iloc[0]
    assert math.isnan(geforce["flop_tensor_fp8"])  # the data-center name is not read on sm_120


def test_ncu_2025_4_dram_names():
    raw = _raw("8.9", **{"dram__bytes_op_read.sum": 3e6, "dram__bytes_op_write.sum": 1e6})
    row = derive_counters(raw).iloc[0]
    assert row["dram_bytes"] == 4e6 and row["dram_bytes_recipe"] == "dram_op_read_plus_write"


def test_refusals_are_data_beside_the_recipe_name():
    """Hand-made: a negative DRAM count is refused: the value is empty, ``dram_bytes_refused`` says
    why, ``dram_bytes_recipe`` still names the recipe; nothing is encoded in the recipe name."""
    row = derive_counters(_raw("8.0", **{"dram__bytes.sum": -5.0, _sass("ffma"): 1.0})).iloc[0]
    assert math.isnan(row["dram_bytes"])
    assert row["dram_bytes_recipe"] == "dram_bytes"
    assert "dram__bytes.sum gives -5 B: negative" in row["dram_bytes_refused"]
    assert row["flop_fp32_refused"] == "" and "dram_bytes" in row["missing"]
