"""Readable kernel names (hand-made demangled names, as ncu writes them)."""

import pytest
from conftest import real_fixture
from hypothesis import given
from hypothesis import strategies as st

import roofline
from roofline.parse.kernel_names import kernel_function_name, short_kernel_name


@pytest.mark.parametrize(
    "name, short",
    [
        ("void gemm<float, 128, 8>(float *, const float *, int)", "gemm<float, …>"),
        ("rms_norm_matrix_kernel(float *, float *, float *, int, int, float)", "rms_norm_matrix_kernel"),
        (
            "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<double, double, unsigned int, 1, 4>"
            "(at::cuda::detail::TensorInfo<double, unsigned int>, double)",
            "at::native::(anonymous namespace)::fused_dropout_kernel_vec<double, …>",
        ),
    ],
)
def test_short_kernel_name(name, short):
    assert short_kernel_name(name) == short


# Hand-made CUTLASS names (the shape CUTLASS's examples give their kernels, as ncu demangles them):
# two kernels of one report whose short names used to be "cutlass::Kernel<…>" both.
B2B_GEMM = ("void cutlass::Kernel<cutlass::gemm::kernel::B2bGemm<cutlass::gemm::threadblock::B2bMmaPipelined<"
            "cutlass::gemm::GemmShape<64, 64, 32>, cutlass::half_t>, cutlass::epilogue::threadblock::Epilogue<"
            "cutlass::gemm::GemmShape<64, 64, 32>, float>, false>>(cutlass::gemm::kernel::B2bGemm<"
            "cutlass::gemm::threadblock::B2bMmaPipelined<int>, int, false>::Params)")
GEMM = ("void cutlass::Kernel<cutlass::gemm::kernel::Gemm<cutlass::gemm::threadblock::MmaPipelined<"
        "cutlass::gemm::GemmShape<128, 128, 32>, cutlass::half_t>, cutlass::epilogue::threadblock::Epilogue<"
        "cutlass::gemm::GemmShape<128, 128, 32>, float>, true>>(cutlass::gemm::kernel::Gemm<int, int, true>::Params)")


@pytest.mark.parametrize(
    "name, short",
    [
        (B2B_GEMM, "cutlass::Kernel<B2bGemm<…>>"),
        (GEMM, "cutlass::Kernel<Gemm<…>>"),
        # the architecture guard around the kernel class is passed through
        ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<"
         "flash::CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1>>, 128, cutlass::bfloat16_t>, "
         "flash::CollectiveEpilogueFwd<int>>>>(T1::Params)",
         "cutlass::device_kernel<FlashAttnFwdSm90<…>>"),
        # the arguments up to the first that names a functor
        ("void at::vectorized_elementwise_kernel<4, at::FillFunctor<int>, std::array<char *, 1>>(int, T2, T3)",
         "at::vectorized_elementwise_kernel<4, FillFunctor<…>, …>"),
        ("void activation::act_and_mul_kernel<__nv_bfloat16, &silu<float>>(T1 *, const T1 *, int)",
         "activation::act_and_mul_kernel<__nv_bfloat16, &silu<…>>"),
        # a lambda is named by the function it is defined in
        ("void at::unrolled_elementwise_kernel<at::direct_copy_kernel_cuda(at::TensorIteratorBase &)::"
         "[lambda() (instance 3)]::operator ()() const::[lambda(int) (instance 1)], std::array<char *, 2>, 4>(int)",
         "at::unrolled_elementwise_kernel<direct_copy_kernel_cuda::lambda, …>"),
        # no argument names a class: the first one
        ("void gemm<float, 128, 8>(float *, const float *, int)", "gemm<float, …>"),
        ("void gemm<double, 128, 8>(double *, const double *, int)", "gemm<double, …>"),
        ("void moe_align_block_size_kernel<int>(const T1 *, int *)", "moe_align_block_size_kernel<int>"),
        # ncu's anonymous namespace is no template
        ("void <unnamed>::fused_qknorm_warp<128, 1, __nv_bfloat16>(<unnamed>::QKNormParams)",
         "<unnamed>::fused_qknorm_warp<128, …>"),
        # names without template arguments are shown as written
        ("rms_norm_matrix_kernel(float *, float *, float *, int, int, float)", "rms_norm_matrix_kernel"),
        ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNN", "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_TNN"),
        ("triton_poi_fused_clamp_sub_0", "triton_poi_fused_clamp_sub_0"),
    ],
)
def test_short_names_keep_the_argument_that_names_the_kernel(name, short):
    assert short_kernel_name(name) == short
    assert short_kernel_name(name) == short_kernel_name(name)  # deterministic: a pure function of the name


def test_the_short_name_keeps_its_length_budget():
    long = "void ns::" + "very_long_kernel_name_" * 3 + "<ns::" + "AnotherLongClassName" * 3 + "<int>, 4>(int)"
    assert len(short_kernel_name(long)) <= 80
    assert short_kernel_name(long) == kernel_function_name(long)  # the argument does not fit: left out
    assert short_kernel_name(GEMM, limit=20) == "cutlass::Kernel<…>"
    assert short_kernel_name("k" * 100) == "k" * 79 + "…"


def test_the_function_name_drops_every_template_argument():
    """What roofline compare and the nightly matching match kernels by (roofline/nightly/kernel_match.py)."""
    assert kernel_function_name(B2B_GEMM) == kernel_function_name(GEMM) == "cutlass::Kernel<…>"
    assert kernel_function_name("void gemm<float, 128, 8>(float *, int)") == "gemm<…>"
    assert kernel_function_name("k" * 100) == "k" * 100  # never cut


def _first_template_argument(name: str) -> str:
    """The text of a name's first template argument ("" without one), read independently of the module."""
    text = name.strip().removeprefix("void ").replace("<unnamed>", "")
    start = text.find("<")
    if start < 0:
        return ""
    depth = 0
    for i, char in enumerate(text[start:], start):
        depth += char in "<(["
        depth -= char in ">)]"
        if depth == 0 or (depth == 1 and char == ","):
            return text[start + 1 : i]
    return text[start + 1 :]


def test_distinct_kernels_of_a_real_report_get_distinct_short_names():
    """In every export of the H200 SGLang fixtures (CUTLASS, FlashAttention, PyTorch and cuBLASLt kernels),
    two kernels with the same function but another first template argument have distinct short names."""
    folder = real_fixture("h200-sglang-qwen3moe-rawcsv-ncu2026.1")
    compared = 0
    for path in sorted(folder.glob("*.csv")):
        names = sorted(set(roofline.read(path)["kernel"]))
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                if kernel_function_name(a) == kernel_function_name(b) and (
                    _first_template_argument(a) != _first_template_argument(b)
                ):
                    compared += 1
                    assert short_kernel_name(a) != short_kernel_name(b), (a, b)
        shorts = [short_kernel_name(n) for n in names]
        assert all(len(s) <= 80 for s in shorts)
        assert "cutlass::device_kernel<FlashAttnFwdSm90<…>>" in shorts
        # nothing was lost for names that were short and distinct already (no template arguments)
        assert all(s == n for s, n in zip(shorts, names) if "<" not in n and "(" not in n)
    assert compared >= 2  # the at::vectorized_elementwise_kernel<2|4, …> pairs at least


@given(st.text(alphabet="<>()[]{},:&*-~ abcAZ09_'\"$`;", max_size=60))
def test_any_text_gets_a_short_name_without_an_exception(name: str) -> None:
    """Hostile or cut-short names (an unclosed '<', markup, shell text) never stop the parse stage."""
    short = short_kernel_name(name, limit=40)
    assert isinstance(short, str) and len(short) <= 40
    assert isinstance(kernel_function_name(name), str)
