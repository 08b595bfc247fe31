"""Measured ceilings: microbenchmarks on the GPU node -> a ceilings table (source ``measured``).

Runs only when asked (config ``ceilings.measure: true``) and only where a GPU and a framework
(PyTorch) are present. DRAM: a large device-to-device copy (bytes read + written per second).
Compute: GEMMs per datatype through the framework's cuBLAS (2 M N K FLOP per GEMM). Each value is
the best of several timed repetitions, stored with the date, the clocks seen and how it was got.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import shutil
import subprocess
import sys
from collections.abc import Callable

import pandas as pd

from roofline.tables.files import write_table
from roofline.tables.schemas import conform

log = logging.getLogger("roofline.measure")

# GEMM datatypes -> the compute class whose roof they measure. FP32 runs with TF32 disabled,
# so it measures the CUDA-core FP32 roof; FP64 GEMMs use DMMA tensor cores from sm_80 on.
GEMM_CLASSES = {
    "fp32": "fp32",
    "tf32": "tensor_tf32",
    "fp16": "tensor_fp16",
    "bf16": "tensor_bf16",
}


class MeasureError(RuntimeError):
    """The node cannot run the microbenchmarks; the message says what is missing."""


def copy_bandwidth(bytes_copied: float, seconds: float) -> float:
    """A device-to-device copy reads and writes every byte: 2 x bytes / time [B/s]."""
    return 2.0 * bytes_copied / seconds


def gemm_rate(m: int, n: int, k: int, seconds: float) -> float:
    """FLOP/s of an M x N x K GEMM: 2 M N K / time (an FMA is 2 FLOP)."""
    return 2.0 * m * n * k / seconds


def fp64_class(compute_capability: tuple[int, int]) -> str:
    """cuBLAS DGEMM runs on DMMA tensor cores from sm_80 (A100, H100), on CUDA cores before."""
    return "tensor_fp64" if compute_capability >= (8, 0) and compute_capability != (8, 6) else "fp64"


def ceilings_rows(device: str, results: dict[str, float], clock_hz: float, details: dict[str, str]) -> pd.DataFrame:
    """Turn ``{class or 'dram': value}`` into measured ceilings rows."""
    today = datetime.date.today().isoformat()
    rows = [
        {
            "device": device,
            "kind": "memory" if name == "dram" else "compute",
            "name": name,
            "value": value,
            "source": "measured",
            "clock_hz": clock_hz,
            "citation": f"measured {today}: {details.get(name, '')}",
            "launches": 0,
        }
        for name, value in results.items()
    ]
    return conform(pd.DataFrame(rows), "ceilings")


def _best_seconds(run: Callable[[], None], synchronize: Callable[[], None], timer, repeats: int) -> float:
    run()
    synchronize()  # warm-up: cuBLAS heuristics, clocks ramping up
    best = float("inf")
    for _ in range(repeats):
        start, end = timer(), timer()
        start.record()
        run()
        end.record()
        synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    return best


def measure_with_torch(copy_bytes: int = 2 << 30, gemm_size: int = 8192, repeats: int = 10) -> tuple[str, dict, dict]:
    """Run the microbenchmarks with PyTorch on the current CUDA device."""
    try:
        import torch
    except ImportError as exc:
        raise MeasureError("PyTorch is not installed on this node: install torch to measure ceilings") from exc
    if not torch.cuda.is_available():
        raise MeasureError("no CUDA GPU visible (torch.cuda.is_available() is False); run on a GPU node")
    device = torch.cuda.get_device_name()
    capability = torch.cuda.get_device_capability()
    event = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
    sync = torch.cuda.synchronize
    results, details = {}, {}
    src = torch.empty(copy_bytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    seconds = _best_seconds(lambda src=src, dst=dst: dst.copy_(src), sync, event, repeats)
    results["dram"] = copy_bandwidth(copy_bytes, seconds)
    details["dram"] = f"{copy_bytes / 1e9:.2f} GB device-to-device copy, best of {repeats}"
    del src, dst
    dtypes = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    for label, dtype in dtypes.items():
        torch.backends.cuda.matmul.allow_tf32 = label == "tf32"
        a = torch.randn(gemm_size, gemm_size, device="cuda").to(dtype)
        b = torch.randn(gemm_size, gemm_size, device="cuda").to(dtype)
        seconds = _best_seconds(lambda a=a, b=b: a @ b, sync, event, repeats)
        results[GEMM_CLASSES[label]] = gemm_rate(gemm_size, gemm_size, gemm_size, seconds)
        details[GEMM_CLASSES[label]] = f"{label} GEMM {gemm_size}^3 via torch.matmul, best of {repeats}"
    a = torch.randn(gemm_size // 2, gemm_size // 2, device="cuda", dtype=torch.float64)
    seconds = _best_seconds(lambda: a @ a, sync, event, repeats)
    name = fp64_class(capability)
    results[name] = gemm_rate(gemm_size // 2, gemm_size // 2, gemm_size // 2, seconds)
    details[name] = f"fp64 GEMM {gemm_size // 2}^3 via torch.matmul, best of {repeats}"
    return device, results, details


def sm_clock_hz() -> float:
    """The current SM clock from nvidia-smi, NaN where unavailable."""
    if not shutil.which("nvidia-smi"):
        return float("nan")
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits"], capture_output=True, text=True
    )
    try:
        return float(out.stdout.split()[0]) * 1e6
    except (IndexError, ValueError):
        return float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Measure DRAM and GEMM ceilings on this GPU node.")
    parser.add_argument("--output", required=True, help="ceilings table (.parquet or .csv)")
    parser.add_argument("--copy-bytes", type=int, default=2 << 30)
    parser.add_argument("--gemm-size", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        device, results, details = measure_with_torch(args.copy_bytes, args.gemm_size, args.repeats)
    except MeasureError as exc:
        log.error("cannot measure ceilings: %s", exc)
        return 2
    table = ceilings_rows(device, results, sm_clock_hz(), details)
    if args.output.endswith(".csv"):
        table.to_csv(args.output, index=False)
    else:
        write_table(table, "ceilings", args.output)
    for row in table.itertuples():
        log.info("%s %s: %.4g", row.device, row.name, row.value)
    return 0


if __name__ == "__main__":
    sys.exit(main())
