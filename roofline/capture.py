"""Capture stage: run an application under Nsight Compute (ncu) and export one ``.ncu-rep``.

The metric list comes from the one planner, :func:`roofline.metric_plan.plan_metrics`.
:func:`ncu_command` builds the argv; :func:`main` (``python -m roofline.capture``) finds ncu,
records the environment (ncu version, host, GPUs, times, the exact command) in a JSON sidecar,
runs ncu, turns known failures into messages that say the fix, and renames the report into place
only when it is complete.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import logging
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from roofline.config import AppConfig, CaptureConfig, Config
from roofline.metric_plan import compute_capability, plan_metrics
from roofline.schemas import write_text_atomic

log = logging.getLogger("roofline.capture")

NCU_MISSING = "ncu not found: install Nsight Compute or set capture.ncu"
# Where ncu usually lives when it is not on PATH.
NCU_FALLBACKS = ("/usr/local/cuda/bin/ncu",)
TAIL_LINES = 40
# Settings that place the job (resources) rather than decide what is measured: not rerun triggers.
RESOURCE_FIELDS = frozenset({"report", "gpu_model", "runtime", "mem_mb"})


class CaptureError(RuntimeError):
    """A capture that cannot succeed as configured; the message says the fix."""


def app_command(app: AppConfig, name: str) -> list[str]:
    """The user's command line as argv (shlex rules, no shell)."""
    try:
        argv = shlex.split(app.command or "")
    except ValueError as exc:
        raise CaptureError(f"apps.{name}.command: cannot split {app.command!r} ({exc})") from None
    if not argv:
        raise CaptureError(f"apps.{name}.command is empty: give the command line to profile")
    return argv


def ncu_options(app: AppConfig) -> list[str]:
    """The ncu flags for the app's filters and replay settings, in a fixed order."""
    options: list[str] = []
    if app.kernel_name_base:
        options += ["--kernel-name-base", app.kernel_name_base]
    if app.kernel_filter:
        options += ["--kernel-name", app.kernel_filter]
    if app.nvtx_include or app.nvtx_exclude:
        options.append("--nvtx")
        for expression in app.nvtx_include:
            options += ["--nvtx-include", expression]
        for expression in app.nvtx_exclude:
            options += ["--nvtx-exclude", expression]
    if app.launch_skip is not None:
        options += ["--launch-skip", str(app.launch_skip)]
    if app.launch_count is not None:
        options += ["--launch-count", str(app.launch_count)]
    if app.replay_mode:
        options += ["--replay-mode", app.replay_mode]
    if app.clock_control:
        options += ["--clock-control", app.clock_control]
    if app.cache_control:
        options += ["--cache-control", app.cache_control]
    return options + list(app.extra_ncu_flags)


def ncu_command(
    app: AppConfig,
    name: str,
    ncu: str = "ncu",
    output: str | Path | None = None,
    architecture: str | None = None,
    available_metrics: set[str] | None = None,
) -> list[str]:
    """The full ncu argv: metrics, app options, ``--export`` and then the user's command.

    Parameters
    ----------
    app
        The app's settings (``command`` must be set).
    name
        The app name; the default output is ``<capture.raw_dir>/<name>.ncu-rep``.
    ncu
        The ncu executable.
    output
        The report path given to ``--export``.
    architecture
        The GPU's compute capability (``sm_90``), deciding which recipes apply.
    available_metrics
        Metric names from ``ncu --query-metrics``; recipes needing others are skipped.
    """
    if output is None:
        output = f"{CaptureConfig().raw_dir}/{name}.ncu-rep"
    plan = plan_metrics(architecture, available_metrics)
    return [
        ncu,
        "--metrics",
        ",".join(plan.metrics),
        *ncu_options(app),
        "--export",
        str(output),
        "--force-overwrite",
        *app_command(app, name),
    ]


# -- workflow glue (called from workflow/rules/capture.smk at parse time) --------------------------


def capture_settings(app: AppConfig) -> str:
    """The app's capture settings as canonical JSON: a change reruns the capture."""
    data = app.model_dump(mode="json", exclude=set(RESOURCE_FIELDS))
    return json.dumps(data, sort_keys=True)


def capture_plan(config: Config, kinds: dict[str, str]) -> dict[str, dict]:
    """Per capture app: its settings JSON and job resources (``gpu_model``, ``runtime``, ``mem_mb``).

    ``kinds`` maps app names to their kind; only apps of kind ``capture`` are planned.
    """
    plan = {}
    for name, kind in sorted(kinds.items()):
        if kind != "capture":
            continue
        app = config.apps[name]
        plan[name] = {
            "settings": capture_settings(app),
            "gpu_model": app.gpu_model or config.capture.gpu_model,
            "runtime": app.runtime or config.capture.runtime,
            "mem_mb": app.mem_mb or config.capture.mem_mb,
        }
    return plan


def app_regex(names: Iterable[str]) -> str:
    """A wildcard constraint matching exactly these app names (nothing when there are none)."""
    names = sorted(names)
    return "|".join(re.escape(n) for n in names) if names else "(?!)"


# -- probing the machine ---------------------------------------------------------------------------


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


# -- running ncu and reading what went wrong -------------------------------------------------------


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
            f"roofline/metrics.py, or remove the metric from {where}.extra_ncu_flags"
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


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def capture(
    name: str,
    app: AppConfig,
    output: Path,
    sidecar: Path,
    ncu: str = "ncu",
    run_id: str = "",
    architecture: str | None = None,
    query: bool = True,
) -> dict:
    """Profile one app under ncu into ``output`` and describe the run in ``sidecar``.

    Returns the sidecar record.

    Raises
    ------
    CaptureError
        With the fix, when ncu is missing, lacks counter permission, the app fails or no kernel
        was profiled. Nothing is left at ``output`` then.
    """
    command = app_command(app, name)
    if app.workdir and not Path(app.workdir).is_dir():
        raise CaptureError(f"apps.{name}.workdir {app.workdir!r} is not a directory")
    ncu_path = find_ncu(ncu)
    version = ncu_version(ncu_path)
    gpus, detected = query_gpus()
    architecture = architecture or detected
    available, availability = query_metrics(ncu_path) if query else (None, "not asked")
    plan = plan_metrics(architecture, available)
    if plan.missing:
        log.warning("no usable recipe on this GPU for: %s", ", ".join(plan.missing))
    output.parent.mkdir(parents=True, exist_ok=True)
    sidecar.parent.mkdir(parents=True, exist_ok=True)
    # ncu appends .ncu-rep to an export name without it: keep the suffix on the temporary name.
    tmp = output.with_name(f".{name}.{os.getpid()}.tmp.ncu-rep").resolve()
    argv = ncu_command(app, name, ncu_path, tmp, architecture, available)
    env = {**os.environ, **app.env}
    record = {
        "app": name,
        "run_id": run_id,
        "host": socket.gethostname(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "start": _now(),
        "end": None,
        "command": argv,
        "command_line": shlex.join(argv),
        "app_command": command,
        "workdir": app.workdir,
        "env": app.env,
        "output": str(output),
        "ncu": {"path": ncu_path, **version},
        "gpus": gpus,
        "architecture": architecture,
        "metrics": {
            "source": plan.source,
            "availability": availability,
            "recipes": plan.recipes,
            "missing": list(plan.missing),
            "count": len(plan.metrics),
        },
    }
    log.info("capturing %s: %s", name, record["command_line"])
    started = time.monotonic()
    try:
        outcome = run_ncu(argv, app.workdir, env, tmp)
        record["end"] = _now()
        record["duration_s"] = round(time.monotonic() - started, 3)
        record["returncode"] = outcome.returncode
        message = diagnose(outcome, app, name, command)
        if message:
            raise CaptureError(message)
        os.replace(tmp, output)
    finally:
        tmp.unlink(missing_ok=True)
    write_text_atomic(sidecar, json.dumps(record, indent=2) + "\n")
    return record


def _terminate(signum, frame):  # noqa: ARG001 - signal handler signature
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Profile one app under ncu into an .ncu-rep.")
    parser.add_argument("--app", required=True, help="app name")
    parser.add_argument("--config-json", required=True, help="the app's settings (apps.NAME) as JSON")
    parser.add_argument("--output", required=True, help="the .ncu-rep to write")
    parser.add_argument("--sidecar", required=True, help="the JSON record of the capture")
    parser.add_argument("--ncu", default="ncu", help="ncu executable (capture.ncu)")
    parser.add_argument("--run-id", default="", help="the run id, recorded in the sidecar")
    parser.add_argument("--architecture", default=None, help="compute capability, e.g. sm_90")
    parser.add_argument("--no-query-metrics", action="store_true", help="skip ncu --query-metrics")
    parser.add_argument(
        "--record-failure",
        action="store_true",
        help="on a failed capture write the error to the sidecar and an empty report, exit 0: parse then "
        "reports the app as failed and the rest of the batch still reaches the summary",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, _terminate)
    try:
        app = AppConfig.model_validate_json(args.config_json)
        capture(
            args.app,
            app,
            Path(args.output),
            Path(args.sidecar),
            args.ncu,
            args.run_id,
            args.architecture,
            not args.no_query_metrics,
        )
    except ValidationError as exc:
        log.error("apps.%s: invalid capture settings: %s", args.app, exc)
        return 2
    except (CaptureError, ValueError) as exc:
        log.error("%s", exc)
        if not args.record_failure:
            return 1
        record = {"app": args.app, "run_id": args.run_id, "error": str(exc)}
        write_text_atomic(Path(args.sidecar), json.dumps(record, indent=2) + "\n")
        write_text_atomic(Path(args.output), "")
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
