"""The workflow configuration, declared once as pydantic models.

``python -m roofline.config`` writes the JSON Schema that Snakemake validates
(roofline/data/config.schema.json, shipped with the package); a test fails when the two drift. Unknown keys are errors.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Annotated, Literal, NamedTuple

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from roofline.inputs import (  # noqa: F401 - APP_NAME, INPUT_SUFFIXES: importers of config use them
    ACCEPTED,
    APP_NAME,
    INPUT_SUFFIXES,
    App,
    InputProblem,
    assign_names,
    expand_patterns,
    is_app_name,
    suffix_kind,
)
from roofline.strict_yaml import DuplicateKey, StrictLoader

SCHEMA_PATH = Path(__file__).resolve().parent / "data" / "config.schema.json"

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
        default_factory=lambda: ["report", "datasheet"],
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
    cross_check_margin: float = Field(0.25, gt=0, description="warn when two sources differ by more than this fraction")


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
    top_kernels: int = Field(5000, ge=1, description="at most this many kernels drawn per device")


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


class ConfigError(ValueError):
    """A config problem the user must fix; the message says where and how."""


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


def input_kind(path: str) -> str:
    """The reader an input needs, from its suffix (compressed CSV and YAML keep their kind); a
    folder holds CSV exports of one ncu run.

    Raises
    ------
    ConfigError
        For a file of no known type (the kind of an ``apps:`` entry is config; a file an
        ``inputs:`` pattern finds is judged per input, by :func:`roofline.inputs.file_problem`).
    """
    if Path(path).is_dir():
        return "csv-dir"
    kind = suffix_kind(Path(path).name)
    if kind is None:
        raise ConfigError(f"input {path!r}: unknown file type; accepted are {ACCEPTED}")
    return kind


def _check_name(name: str, origin: str) -> None:
    if not is_app_name(name):
        raise ConfigError(
            f"app name {name!r} (from {origin}) may use only letters, digits, '.', '_' and '-'; "
            "rename the app"
        )


def resolve_inputs(config: Config, workdir: str | Path = ".") -> tuple[dict[str, App], list[InputProblem]]:
    """Expand ``inputs`` patterns and ``apps`` into one App per application, and what gave nothing.

    Every file a pattern finds is an app, named from its file name (roofline.inputs.app_name;
    collisions get ``-2``, ``-3`` in sorted path order; an ``apps:`` name wins); a file that cannot
    be read is an app of kind ``unreadable`` whose parse records why. A pattern that matched
    nothing, a missing path or a folder without exports is an :class:`InputProblem`.

    Raises
    ------
    ConfigError
        For a bad ``apps:`` entry: its name, or a report that does not exist or has no known type.
    """
    workdir = Path(workdir)
    named_reports = [a.report for a in config.apps.values() if a.report]
    found, problems = expand_patterns(config.inputs, workdir, named_reports)
    apps: dict[str, App] = {}
    for name, app in config.apps.items():
        _check_name(name, "apps:")
        if app.report:
            if not (workdir / app.report).exists():
                raise ConfigError(f"apps.{name}.report: {app.report!r} does not exist")
            try:
                kind = input_kind(str(workdir / app.report))
            except ConfigError:
                raise ConfigError(f"apps.{name}.report: {app.report!r}: unknown file type; accepted are {ACCEPTED}"
                                  ) from None
            apps[name] = App(name, app.report, kind, app.device)
        else:
            apps[name] = App(name, None, "capture")
    for path, name in assign_names(found, reserved=apps).items():
        kind, problem = found[path]
        apps[name] = App(name, path, kind, problem=problem)
    return dict(sorted(apps.items())), problems


def resolve_apps(config: Config, workdir: str | Path = ".") -> dict[str, App]:
    """The applications of :func:`resolve_inputs`, by name."""
    return resolve_inputs(config, workdir)[0]


def check_config_files(paths) -> None:
    """Refuse config files that give one key twice (e.g. two ``apps:`` entries of one name).

    Raises
    ------
    ConfigError
        Naming the file, the line and the key.
    """
    for path in paths:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"config file {path}: cannot be read ({exc})") from None
        try:
            yaml.load(text, Loader=StrictLoader)  # a SafeLoader subclass
        except DuplicateKey as twice:
            raise ConfigError(
                f"config file {path}: line {twice.line}: key {twice.key!r} is given twice (first on line "
                f"{twice.first_line}); YAML would silently keep only the last: remove or rename one"
            ) from None
        except yaml.YAMLError:
            pass  # Snakemake has read the file already; its own error wins


def catalog_path(catalog: str | None, repo: str | Path | None = None) -> Path:
    """The catalog file a ``ceilings.catalog`` value names: unset, the one shipped with roofline; a
    relative path, from the working directory, else from ``repo`` (the workflow's own folder)."""
    from roofline.catalog import CATALOG_PATH

    if catalog is None:
        return CATALOG_PATH
    path = Path(catalog)
    if not path.exists() and repo is not None and (Path(repo) / path).exists():
        return Path(repo) / path
    return path


def check_catalog(config: Config, repo: str | Path | None = None) -> None:
    """Load the GPU catalog with the config's ``ceilings.gpus`` merged, as the ceilings stage will.

    Raises
    ------
    ConfigError
        Naming ``ceilings.catalog`` or ``ceilings.gpus``, the GPU entry and key (bits, binary
        prefixes, strings with units, unknown keys...).
    """
    from roofline.catalog import load_catalog

    path = catalog_path(config.ceilings.catalog, repo)
    try:
        load_catalog(path)
    except ValueError as exc:
        raise ConfigError(f"config key 'ceilings.catalog' ({config.ceilings.catalog}): {exc}") from None
    if config.ceilings.gpus:
        try:
            load_catalog(path, config.ceilings.gpus)
        except ValueError as exc:
            raise ConfigError(f"config key 'ceilings.gpus': {exc}") from None


class WorkflowConfig(NamedTuple):
    config: Config
    apps: dict[str, App]
    input_problems: list[InputProblem]  # inputs: entries (or folders they matched) that gave no app


def load_workflow_config(
    config: dict, configfiles=(), workdir: str | Path = ".", repo: str | Path | None = None
) -> WorkflowConfig:
    """Every check the workflow makes before scheduling any job (workflow/rules/common.smk).

    Duplicate keys in the config files, the config model (unknown keys, types), the ``apps:``
    entries (names, missing files) and the GPU catalog with its config overrides. What the
    ``inputs:`` patterns find is judged per input and never raises (see :func:`resolve_inputs`).

    Raises
    ------
    ConfigError
        The first problem found, naming the key or file and the fix.
    """
    check_config_files(configfiles)
    parsed = load_config(config)
    apps, problems = resolve_inputs(parsed, workdir)
    check_catalog(parsed, repo)
    return WorkflowConfig(parsed, apps, problems)


def interpreter_first_on_path() -> None:
    """Put this interpreter's bin folder first on PATH, so ``python`` in rule shells is this one."""
    import os

    folder = str(Path(sys.executable).parent)
    parts = os.environ.get("PATH", "").split(os.pathsep)
    if parts[:1] != [folder]:
        os.environ["PATH"] = os.pathsep.join([folder, *parts])


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
