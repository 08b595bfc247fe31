"""The workflow configuration, declared once as pydantic models.

The workflow checks a config with these models (roofline/config/workflow.py). ``python -m roofline.config.model``
writes their JSON Schema (roofline/data/config.schema.json, shipped with the package, for editors and other
tools); a test fails when the two drift. Unknown keys are errors.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from roofline.ceilings import CROSS_CHECK_MARGIN, DEFAULT_POLICY
from roofline.config.inputs import ConfigError, is_app_name

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "data" / "config.schema.json"

CeilingSource = Literal["report", "datasheet", "measured"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AppConfig(Strict):
    """One application: an existing report to import, or a command to capture under ncu."""

    report: str | None = Field(None, description="path of an existing .ncu-rep, ncu CSV export or what-if table")
    command: str | None = Field(None, description="command line to profile under ncu (capture stage)")
    device: str | None = Field(
        None, description="GPU name (as ncu reports it) for inputs that do not record one, e.g. CSV exports"
    )
    workdir: str | None = Field(None, description="working directory of the command")
    env: dict[str, str] = Field(default_factory=dict, description="extra environment variables")
    kernel_filter: str | None = Field(None, description="ncu -k / --kernel-name filter")
    kernel_name_base: Literal["function", "demangled", "mangled"] | None = None
    nvtx_include: list[str] = Field(default_factory=list)
    nvtx_exclude: list[str] = Field(default_factory=list)
    launch_skip: int | None = Field(None, ge=0)
    launch_count: int | None = Field(None, ge=1)
    replay_mode: Literal["kernel", "application", "range", "app-range"] | None = None
    clock_control: Literal["base", "none", "reset"] | None = None
    cache_control: Literal["all", "none"] | None = None
    extra_ncu_flags: list[str] = Field(default_factory=list)
    gpu_model: str | None = Field(None, description="SLURM gpu model for this app's capture job")
    runtime: int | None = Field(None, ge=1, description="capture job time limit [min]")
    mem_mb: int | None = Field(None, ge=1, description="capture job memory [MB]")

    @model_validator(mode="after")
    def _one_source(self) -> AppConfig:
        if (self.report is None) == (self.command is None):
            raise ValueError("an app needs exactly one of 'report' (import) or 'command' (capture)")
        return self


class CeilingsConfig(Strict):
    policy: list[CeilingSource] = Field(
        default_factory=lambda: list(DEFAULT_POLICY),
        description="ceiling sources in order of preference, for every device",
    )
    device_policy: dict[str, list[CeilingSource]] = Field(
        default_factory=dict, description="per-device override of policy (device name as reported)"
    )
    catalog: str | None = Field(
        None, description="datasheet catalog (YAML); unset: the catalog shipped with roofline (roofline/data/gpus.yaml)"
    )
    measured: str | None = Field(None, description="measured ceilings table (CSV or Parquet), if any")
    measure: bool = Field(
        False, description="run the microbenchmarks on a GPU node (rule measure) and use their table as 'measured'"
    )
    gpus: dict[str, dict] = Field(
        default_factory=dict, description="GPUs to add to the catalog, or catalog values to override"
    )
    cross_check_margin: float = Field(CROSS_CHECK_MARGIN, gt=0,
                                      description="warn when two sources differ by more than this fraction")


class Annotation(Strict):
    """Compulsory (algorithmic) work and traffic of a kernel, per launch."""

    kernel: str = Field(description="regular expression searched in the full kernel name")
    app: str | None = Field(None, description="only in this app")
    algorithmic_flop: float | None = Field(None, ge=0, description="compulsory FLOP per launch, e.g. 2MNK")
    algorithmic_bytes: float | None = Field(None, ge=0, description="compulsory DRAM bytes per launch")

    @model_validator(mode="after")
    def _valid_regex(self) -> Annotation:
        try:
            re.compile(self.kernel)
        except re.error as exc:
            raise ValueError(f"kernel pattern {self.kernel!r} is not a valid regular expression: {exc}") from None
        return self


class ClassifyConfig(Strict):
    low_roof_fraction: float = Field(
        0.1, gt=0, lt=1, description="below this fraction of every roof a launch is labelled latency/parallelism?"
    )
    above_roof_tolerance: float = Field(
        0.02, ge=0, description="achieved may exceed the roof by this fraction before above_roof is set"
    )
    annotations: list[Annotation] = Field(
        default_factory=list, description="compulsory FLOP and bytes of kernels, for traffic excess"
    )


class ReportConfig(Strict):
    title: str = Field("Roofline summary", description="page title")
    top_kernels: int = Field(
        200, ge=1,
        description="kernels each device's roofline draws at first, by GPU time (its slider draws the others)",
    )


class SeriesConfig(Strict):
    """An ordered series of apps: the same code measured several times (before/after, v1..v8, a
    size sweep), drawn as trajectories on one compare page (reports/compare/{series}.html)."""

    steps: list[str] = Field(min_length=2, description="app names in order, e.g. [fa3_before, db_full_after]")
    rename: dict[str, str] = Field(
        default_factory=dict,
        description="kernel renamed between steps: regular expression -> replacement, applied (re.sub) to every "
        "full kernel name before matching, e.g. {fa3db_full_fwd_kernel: fa3_fwd_kernel}",
    )

    @model_validator(mode="after")
    def _valid(self) -> SeriesConfig:
        if len(set(self.steps)) != len(self.steps):
            raise ValueError(f"steps {self.steps}: an app is listed twice; list each once, in order")
        bad = [s for s in self.steps if not is_app_name(s)]
        if bad:
            raise ValueError(f"steps {bad} are not app names (letters, digits, '.', '_', '-')")
        for pattern in self.rename:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"rename pattern {pattern!r} is not a valid regular expression: {exc}") from None
        return self


class CaptureConfig(Strict):
    ncu: str = Field("ncu", description="ncu executable")
    raw_dir: str = Field("data/raw", description="where captured reports are written")
    gpu_model: str | None = Field(
        None, description="SLURM gpu model for capture jobs of apps that set none (e.g. h100)"
    )
    runtime: int = Field(60, ge=1, description="capture job time limit [min] for apps that set none")
    mem_mb: int = Field(16000, ge=1, description="capture job memory [MB] for apps that set none")


class TrackingConfig(Strict):
    params: dict = Field(
        default_factory=dict,
        description="decision thresholds of nightly tracking (docs/tracking.md), e.g. {rel_min: 0.05, z_min: 4}",
    )
    context: dict[str, str] = Field(
        default_factory=dict,
        description="run context recorded with each night: app_commit, clock_control, cache_control, ...",
    )


class Config(Strict):
    """The whole config.yaml."""

    inputs: list[str] = Field(default_factory=list, description="files or glob patterns; each file is one application")
    apps: dict[str, AppConfig] = Field(default_factory=dict, description="named applications")
    run_id: str | None = Field(
        None, description="nightly run id: names the night in the history store (default: today's date) and, when set, "
        "reruns capture and measure (a nightly passes --config run_id=$(date +%F))"
    )
    ceilings: CeilingsConfig = Field(default_factory=CeilingsConfig)
    classify: ClassifyConfig = Field(default_factory=ClassifyConfig)
    report: ReportConfig = Field(default_factory=ReportConfig)
    capture: CaptureConfig = Field(default_factory=CaptureConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    series: dict[str, SeriesConfig | Annotated[list[str], Field(min_length=2)]] = Field(
        default_factory=dict,
        description="ordered series of apps compared as trajectories, e.g. {flashattn: [fa3_before, db_full_after]} "
        "or {flashattn: {steps: [...], rename: {pattern: replacement}}}",
    )

    @model_validator(mode="after")
    def _series_names(self) -> Config:
        bad = [name for name in self.series if not is_app_name(name)]
        if bad:
            raise ValueError(f"series: names {bad} cannot be file names; use letters, digits, '.', '_', '-'")
        # the shorthand {name: [app, app]} is {name: {steps: [app, app]}}
        for name, series in list(self.series.items()):
            try:
                self.series[name] = SeriesConfig(steps=series) if isinstance(series, list) else series
            except ValidationError as exc:
                raise ValueError(f"series.{name}: {exc.errors()[0]['msg'].removeprefix('Value error, ')}") from None
        return self


def load_config(data: dict) -> Config:
    """Validate a config mapping; raise ConfigError naming each bad key."""
    try:
        return Config.model_validate(data or {})
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"])
            if err["type"] == "extra_forbidden":
                lines.append(f"unknown config key '{where}': remove it or check its spelling")
            else:
                lines.append(f"config key '{where}': {err['msg']}")
        raise ConfigError(
            "invalid config:\n  " + "\n  ".join(lines) + "\n(the keys and their types are listed in config/README.md)"
        ) from None


def json_schema() -> dict:
    """The JSON Schema of :class:`Config` (draft 2020-12), as Snakemake validates it."""
    schema = Config.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the config JSON Schema for Snakemake.")
    parser.add_argument("--output", default=str(SCHEMA_PATH))
    args = parser.parse_args(argv)
    Path(args.output).write_text(json.dumps(json_schema(), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
