"""Running ncu with its output copied to the job log, and reading a failed run: the message with its fix.

:func:`run_ncu` keeps the last lines of each stream in an :class:`Outcome`; :func:`diagnose` turns a
failed outcome (counter permission, unknown metric, the application's exit code, ncu's own error,
no kernel profiled) into the text of a :class:`roofline.errors.CaptureError`.
"""

from __future__ import annotations

import collections
import re
import shlex
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from roofline.config.model import AppConfig
from roofline.errors import CaptureError

TAIL_LINES = 40


@dataclass
class Outcome:
    """What one ncu run left behind."""

    returncode: int
    stdout_tail: list[str]
    stderr_tail: list[str]
    report_written: bool


def _ncu_line(line: str) -> bool:
    return line.startswith("==PROF==") or line.startswith("==ERROR==") or line.startswith("==WARNING==")


def diagnose(outcome: Outcome, app: AppConfig, name: str, command: list[str]) -> str | None:
    """The error message (with its fix) for a failed capture, or None when it succeeded."""
    lines = outcome.stdout_tail + outcome.stderr_tail
    text = "\n".join(lines)
    where = f"apps.{name}"
    if "ERR_NVGPUCTRPERM" in text:
        return (
            f"{where}: ncu may not read the GPU performance counters on {socket.gethostname()} "
            "(ERR_NVGPUCTRPERM). Fix: an administrator loads the nvidia driver with "
            "NVreg_RestrictProfilingToAdminUsers=0 (e.g. 'options nvidia "
            "NVreg_RestrictProfilingToAdminUsers=0' in /etc/modprobe.d/, then reload the driver "
            "or reboot), or run the capture as an admin/root (containers: --cap-add=SYS_ADMIN). "
            "See https://developer.nvidia.com/ERR_NVGPUCTRPERM"
        )
    metric_errors = [ln for ln in lines if "Failed to find metric" in ln or "Invalid metric" in ln]
    if metric_errors:
        return (
            f"{where}: ncu does not know a requested metric on this GPU: {metric_errors[0].strip()}. "
            "Fix: check the GPU's metrics with 'ncu --query-metrics' and the recipe table in "
            f"roofline/metrics/quantities.py, or remove the metric from {where}.extra_ncu_flags"
        )
    app_code = None
    for line in lines:
        if match := re.search(r"application returned an error code \((-?\d+)\)", line):
            app_code = int(match.group(1))
    ncu_errors = [
        ln.strip() for ln in lines if ln.startswith("==ERROR==") and "application returned an error code" not in ln
    ]
    if app_code is not None or (outcome.returncode != 0 and not ncu_errors):
        code = app_code if app_code is not None else outcome.returncode
        app_lines = [ln for ln in outcome.stderr_tail if not _ncu_line(ln)] or [
            ln for ln in outcome.stdout_tail if not _ncu_line(ln)
        ]
        tail = "\n    ".join(app_lines[-15:]) or "(no output)"
        return (
            f"{where}: the application exited with code {code} under ncu: {shlex.join(command)}\n"
            f"  last lines of its output:\n    {tail}\n"
            f"  Fix: run the command without ncu (cwd {app.workdir or '.'}) until it succeeds; "
            f"check apps.{name}.command, workdir and env."
        )
    if outcome.returncode != 0:
        return (
            f"{where}: ncu failed (exit {outcome.returncode}): "
            + " | ".join(ncu_errors[-5:])
            + f"\n  command: {shlex.join(command)}"
        )
    if "No kernels were profiled" in text or not outcome.report_written:
        filters = {
            "kernel_filter (-k)": app.kernel_filter,
            "launch_skip": app.launch_skip,
            "launch_count": app.launch_count,
            "nvtx_include": app.nvtx_include or None,
            "nvtx_exclude": app.nvtx_exclude or None,
        }
        active = ", ".join(f"{k}={v!r}" for k, v in filters.items() if v is not None) or "none set"
        return (
            f"{where}: ncu profiled no kernel (no report written). Fix: check the kernel filter "
            f"and launch settings ({active}): the -k regex must match a launched kernel name "
            "(see --kernel-name-base), launch_skip must be below the number of matching launches, "
            "NVTX filters need ranges the app pushes; and check that the command launches CUDA "
            f"kernels at all. Command: {shlex.join(command)}"
        )
    return None


def _pump(stream, sink, tail: collections.deque) -> None:
    for line in iter(stream.readline, ""):
        sink.write(line)
        sink.flush()
        tail.append(line.rstrip("\n"))
    stream.close()


def run_ncu(argv: list[str], cwd: str | None, env: dict[str, str], report: Path) -> Outcome:
    """Run ncu, copying its output to our stderr (the job log) and keeping the last lines."""
    out_tail: collections.deque = collections.deque(maxlen=TAIL_LINES)
    err_tail: collections.deque = collections.deque(maxlen=TAIL_LINES)
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
        )
    except OSError as exc:
        raise CaptureError(f"cannot start {argv[0]} (cwd {cwd or '.'}): {exc}") from None
    pumps = [
        threading.Thread(target=_pump, args=(proc.stdout, sys.stderr, out_tail), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, sys.stderr, err_tail), daemon=True),
    ]
    for pump in pumps:
        pump.start()
    try:
        returncode = proc.wait()
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait()
    for pump in pumps:
        pump.join()
    written = report.exists() and report.stat().st_size > 0
    return Outcome(returncode, list(out_tail), list(err_tail), written)
