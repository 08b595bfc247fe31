"""Capture stage: run an application under Nsight Compute (ncu) and export one ``.ncu-rep``.

The metric list comes from the one planner, :func:`roofline.metrics.plan.plan_metrics`.
:func:`ncu_command` builds the argv; :func:`main` (``python -m roofline.capture.capture``) finds ncu,
records the environment (ncu version, host, GPUs, times, the exact command) in a JSON sidecar,
runs ncu, turns known failures into messages that say the fix, and renames the report into place
only when it is complete. Finding ncu and probing the machine live in :mod:`roofline.capture.probe`,
running ncu and diagnosing a failed run in :mod:`roofline.capture.ncu_run`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import re
import shlex
import signal
import socket
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError

from roofline.capture import ncu_run, probe
from roofline.config.model import AppConfig, CaptureConfig, Config
from roofline.errors import CaptureError
from roofline.files.atomic import write_text_atomic
from roofline.metrics.plan import plan_metrics

log = logging.getLogger("roofline.capture")

# Settings that place the job (resources) rather than decide what is measured: not rerun triggers.
RESOURCE_FIELDS = frozenset({"report", "gpu_model", "runtime", "mem_mb"})


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


# -- one capture: probe, run, diagnose, record -----------------------------------------------------


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
    ncu_path = probe.find_ncu(ncu)
    version = probe.ncu_version(ncu_path)
    gpus, detected = probe.query_gpus()
    architecture = architecture or detected
    available, availability = probe.query_metrics(ncu_path) if query else (None, "not asked")
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
        outcome = ncu_run.run_ncu(argv, app.workdir, env, tmp)
        record["end"] = _now()
        record["duration_s"] = round(time.monotonic() - started, 3)
        record["returncode"] = outcome.returncode
        message = ncu_run.diagnose(outcome, app, name, command)
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
