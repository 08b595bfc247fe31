"""Probing the capture machine: where ncu is, its version, the metrics it offers and the visible GPUs.

:func:`roofline.capture.capture.capture` records these in the sidecar and plans the metric list from them.
A probe that cannot run logs a warning and reports nothing rather than failing the capture; only a
missing ncu is an error (:class:`roofline.errors.CaptureError`).
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import subprocess

from roofline.errors import CaptureError
from roofline.metrics.plan import compute_capability

# The capture job's log names one logger for the whole stage.
log = logging.getLogger("roofline.capture")

NCU_MISSING = "ncu not found: install Nsight Compute or set capture.ncu"
# Where ncu usually lives when it is not on PATH.
NCU_FALLBACKS = ("/usr/local/cuda/bin/ncu",)


def find_ncu(ncu: str = "ncu") -> str:
    """The path of the ncu executable.

    Raises
    ------
    CaptureError
        If neither ``ncu`` (a name on PATH or a path) nor a standard CUDA location has it.
    """
    found = shutil.which(ncu)
    if found is None and ncu == "ncu":
        cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
        extra = [f"{cuda_home}/bin/ncu"] if cuda_home else []
        found = next((p for p in [*extra, *NCU_FALLBACKS] if os.access(p, os.X_OK)), None)
    if found is None:
        raise CaptureError(f"{NCU_MISSING} (looked for {ncu!r})")
    return found


def _probe(argv: list[str], timeout: float) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("%s: %s", shlex.join(argv), exc)
        return None


def ncu_version(ncu: str) -> dict:
    """``ncu --version``: the full text and the version number (empty when not found)."""
    result = _probe([ncu, "--version"], 60)
    text = (result.stdout + result.stderr).strip() if result else ""
    match = re.search(r"Version\s+(\S+)", text)
    return {"text": text, "version": match.group(1) if match else ""}


def parse_query_metrics(text: str) -> set[str]:
    """Metric names from ``ncu --query-metrics`` output (the first column of the table)."""
    names = set()
    for line in text.splitlines():
        token = line.strip().split(" ", 1)[0] if line.strip() else ""
        if re.fullmatch(r"[a-z][a-z0-9_]*__[A-Za-z0-9_.]+", token):
            names.add(token)
    return names


def query_metrics(ncu: str) -> tuple[set[str] | None, str]:
    """The metrics the local GPU offers, or None and why not."""
    result = _probe([ncu, "--query-metrics"], 300)
    if result is None:
        return None, "ncu --query-metrics did not run"
    names = parse_query_metrics(result.stdout)
    if result.returncode != 0 or not names:
        tail = (result.stdout + result.stderr).strip().splitlines()[-3:]
        return None, f"ncu --query-metrics failed (exit {result.returncode}): {' | '.join(tail)}"
    return names, f"{len(names)} metrics listed"


def parse_gpu_list(text: str) -> list[dict]:
    """``nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader`` -> dicts."""
    gpus = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3:
            gpus.append({"name": parts[0], "uuid": parts[1], "driver_version": parts[2]})
    return gpus


def query_gpus() -> tuple[list[dict] | None, str | None]:
    """The visible GPUs and the first one's architecture (``sm_90``), None where unknown."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        log.warning("nvidia-smi not found: the sidecar records no GPU")
        return None, None
    result = _probe([smi, "--query-gpu=name,uuid,driver_version", "--format=csv,noheader"], 60)
    gpus = parse_gpu_list(result.stdout) if result and result.returncode == 0 else None
    cap = _probe([smi, "--query-gpu=compute_cap", "--format=csv,noheader"], 60)
    architecture = None
    if cap and cap.returncode == 0 and cap.stdout.strip():
        try:
            cc = compute_capability(cap.stdout.strip().splitlines()[0])
            architecture = f"sm_{cc}" if cc else None
        except ValueError:
            architecture = None
    return gpus, architecture
