"""Plausibility: the one-pass check of a quantity's values against the per-value refusals."""

import itertools

import numpy as np
import pytest

from roofline.metrics.quantities import QUANTITY_BY_NAME
from roofline.parse.plausibility import (
    MAX_BYTE_RATE,
    MAX_CLOCK_HZ,
    MAX_DURATION_S,
    MAX_SM_COUNT,
    MIN_CLOCK_HZ,
    all_plausible,
    implausible,
    implausible_sm_count,
)

# values at and around every limit, the special floats among them
EDGES = [0.0, -0.0, 1e-30, 1.0, -1.0, MIN_CLOCK_HZ, MIN_CLOCK_HZ * 0.99,
         MAX_DURATION_S, MAX_DURATION_S * 1.0001, MAX_CLOCK_HZ, MAX_CLOCK_HZ * 1.01,
         MAX_BYTE_RATE, MAX_BYTE_RATE * 2, 1e300, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("name", ["duration_s", "sm_clock_hz", "dram_bytes", "peak_dram_bw", "peak_flops_fp32",
                                  "flop_fp32", "tensor_pipe_active_pct"])
def test_all_plausible_agrees_with_the_refusals(name):
    # independent of the one-pass check: every value finite and implausible() refusing none of them
    quantity = QUANTITY_BY_NAME[name]
    for size in (1, 2):
        for values in itertools.product(EDGES, repeat=size):
            array = np.array(values)
            expected = bool(np.isfinite(array).all()) and not implausible(quantity, array, None)
            assert all_plausible(quantity, array) == expected, (name, values)


@pytest.mark.parametrize("name", ["duration_s", "sm_clock_hz", "l1_clock_hz", "dram_clock_hz", "peak_dram_bw",
                                  "peak_flops_fp32", "peak_flops_tensor_fp16"])
def test_a_zero_that_a_later_stage_divides_by_is_refused(name):
    """Issue #47: a 0 clock, peak or duration is as absurd as a negative one (the ceilings divide by
    them across every app of a device); a 0 count of work or bytes is a measurement."""
    quantity = QUANTITY_BY_NAME[name]
    [why] = implausible(quantity, np.array([0.0]), None).values()
    assert f"gives 0 {quantity.unit}: zero" in why
    assert not all_plausible(quantity, np.array([1.0e9, 0.0]))
    assert implausible(QUANTITY_BY_NAME["flop_fp32"], np.array([0.0]), None) == {}


def test_a_clock_below_1_mhz_is_refused():
    quantity = QUANTITY_BY_NAME["sm_clock_hz"]
    [why] = implausible(quantity, np.array([17.2, 1.4e9]), None).values()
    assert why == "the table gives 17.2 Hz: below the plausible minimum 1e+06 Hz"


def test_sm_counts_no_gpu_has_are_refused():
    values = np.array([132.0, 0.0, -4.0, 1.5, MAX_SM_COUNT + 1.0, np.nan, 1.0])
    reasons = implausible_sm_count(values, "device__attribute_multiprocessor_count")
    assert sorted(reasons) == [1, 2, 3, 4]
    assert reasons[1].startswith("device__attribute_multiprocessor_count gives 0 SMs: a GPU has a whole number")
