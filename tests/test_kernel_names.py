"""Readable kernel names (hand-made demangled names, as ncu writes them)."""

import pytest

from roofline.kernel_names import short_kernel_name


@pytest.mark.parametrize(
    "name, short",
    [
        ("void gemm<float, 128, 8>(float *, const float *, int)", "gemm<…>"),
        ("rms_norm_matrix_kernel(float *, float *, float *, int, int, float)", "rms_norm_matrix_kernel"),
        (
            "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<double, double, unsigned int, 1, 4>"
            "(at::cuda::detail::TensorInfo<double, unsigned int>, double)",
            "at::native::(anonymous namespace)::fused_dropout_kernel_vec<…>",
        ),
    ],
)
def test_short_kernel_name(name, short):
    assert short_kernel_name(name) == short
