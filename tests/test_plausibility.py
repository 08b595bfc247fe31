"""Plausibility: the one-pass check of a quantity's values against the per-value refusals."""

import itertools

import numpy as np
import pytest

from roofline.metrics import QUANTITY_BY_NAME
from roofline.plausibility import MAX_BYTE_RATE, MAX_CLOCK_HZ, MAX_DURATION_S, all_plausible, implausible

# values at and around every limit, the special floats among them
EDGES = [0.0, -0.0, 1e-30, 1.0, -1.0, MAX_DURATION_S, MAX_DURATION_S * 1.0001, MAX_CLOCK_HZ, MAX_CLOCK_HZ * 1.01,
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
