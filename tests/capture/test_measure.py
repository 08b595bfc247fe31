"""Measured ceilings: the arithmetic of the microbenchmarks, and a clear refusal without a GPU."""

import shutil

import pytest

from roofline.capture.measure import ceilings_rows, copy_bandwidth, fp64_class, gemm_rate, main
from roofline.ceilings.select import select_ceilings


def test_copy_reads_and_writes_every_byte():
    assert copy_bandwidth(2e9, 1e-3) == pytest.approx(4e12)


def test_gemm_counts_two_flop_per_fma():
    assert gemm_rate(8192, 8192, 8192, 1.0) == pytest.approx(2 * 8192**3)


@pytest.mark.parametrize(
    "cc, cls", [((7, 0), "fp64"), ((8, 0), "tensor_fp64"), ((8, 6), "fp64"), ((9, 0), "tensor_fp64")]
)
def test_fp64_gemm_class_follows_the_hardware(cc, cls):
    assert fp64_class(cc) == cls


def test_rows_are_a_measured_ceilings_table():
    table = ceilings_rows("NVIDIA H200", {"dram": 4.4e12, "tensor_fp16": 700e12}, 1.98e9, {"dram": "copy"})
    assert set(table["source"]) == {"measured"}
    assert table.set_index("name").loc["dram", "kind"] == "memory"
    assert "measured 20" in table["citation"].iat[0]
    chosen = select_ceilings(table, ["measured"])
    assert chosen["selected"].all()


def test_without_a_gpu_the_stage_says_what_is_missing(tmp_path, caplog):
    if shutil.which("nvidia-smi"):
        pytest.skip("a GPU is present: the refusal path does not apply")
    assert main(["--output", str(tmp_path / "m.parquet"), "--repeats", "1"]) == 2
    assert "cannot measure ceilings" in caplog.text
    assert not (tmp_path / "m.parquet").exists()


@pytest.mark.gpu
def test_measure_on_a_gpu(tmp_path):
    if not shutil.which("nvidia-smi"):
        pytest.skip("no GPU on this machine (nvidia-smi not found)")
    out = tmp_path / "m.parquet"
    assert main(["--output", str(out), "--copy-bytes", str(1 << 28), "--gemm-size", "2048", "--repeats", "3"]) == 0
