"""The workflow configuration, declared once as pydantic models.

``python -m roofline.config`` writes the JSON Schema that Snakemake validates
(workflow/schemas/config.schema.json); a test fails when the two drift. Unknown keys are errors.
"""

from __future__ import annotations

import argparse
import glob
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

APP_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
INPUT_SUFFIXES = {
    ".ncu-rep": "ncu-rep",
    ".csv": "csv",
    ".yaml": "what-if",
    ".yml": "what-if",
    ".nsight-cuprof-report": "legacy",
}
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "workflow" / "schemas" / "config.schema.json"

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
    catalog: str = Field("config/gpus.yaml", description="datasheet catalog (YAML)")
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


class CaptureConfig(Strict):
    ncu: str = Field("ncu", description="ncu executable")
    raw_dir: str = Field("data/raw", description="where captured reports are written")
    gpu_model: str | None = Field(
        None, description="SLURM gpu model for capture jobs of apps that set none (e.g. h100)"
    )
    runtime: int = Field(60, ge=1, description="capture job time limit [min] for apps that set none")
    mem_mb: int = Field(16000, ge=1, description="capture job memory [MB] for apps that set none")
    local_rules: list[str] = Field(
        default_factory=list,
        description="rules run on the submitting host under a cluster executor (e.g. report)",
    )


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
    run_id: str | None = Field(None, description="nightly run id (default: today's date)")
    ceilings: CeilingsConfig = Field(default_factory=CeilingsConfig)
    classify: ClassifyConfig = Field(default_factory=ClassifyConfig)
    report: ReportConfig = Field(default_factory=ReportConfig)
    capture: CaptureConfig = Field(default_factory=CaptureConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)


@dataclass(frozen=True)
class App:
    name: str
    source: str | None  # input file (None when captured)
    kind: str  # ncu-rep, csv, csv-dir, what-if, capture, legacy
    device: str | None = None  # GPU name to assume where the input records none


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
    """The reader an input needs, from its suffix; a folder holds CSV exports of one ncu run."""
    if Path(path).is_dir():
        return "csv-dir"
    for suffix, kind in INPUT_SUFFIXES.items():
        if path.lower().endswith(suffix):
            return kind
    raise ConfigError(
        f"input {path!r}: unknown file type; accepted are .ncu-rep, ncu CSV exports (.csv) "
        "and what-if tables (.yaml/.yml or .csv)"
    )


def _check_name(name: str, origin: str) -> None:
    if not APP_NAME.match(name) or name in {".", ".."}:
        raise ConfigError(
            f"app name {name!r} (from {origin}) may use only letters, digits, '.', '_' and '-'; "
            "rename the file or name it under apps:"
        )


def resolve_apps(config: Config, workdir: str | Path = ".") -> dict[str, App]:
    """Expand ``inputs`` globs and ``apps`` into one App per application, names checked unique."""
    workdir = Path(workdir)
    apps: dict[str, App] = {}
    named_reports = {a.report for a in config.apps.values() if a.report}
    for pattern in config.inputs:
        matches = sorted(glob.glob(str(workdir / pattern)))
        if not matches and not glob.has_magic(pattern):
            raise ConfigError(f"input {pattern!r} does not exist (relative to {workdir.resolve()})")
        for match in matches:
            rel = str(Path(match).relative_to(workdir)) if workdir != Path(".") else match
            if rel in named_reports:
                continue
            if Path(match).is_dir() and not any(Path(match).glob("*.csv")):
                continue  # a folder is an app only when it holds CSV exports of one ncu run
            name = _stem(rel)
            _check_name(name, rel)
            if name in apps:
                raise ConfigError(
                    f"two inputs give the app name {name!r}: {apps[name].source} and {rel}; "
                    "name one of them under apps:"
                )
            apps[name] = App(name, rel, input_kind(str(match)))
    for name, app in config.apps.items():
        _check_name(name, "apps:")
        if name in apps:
            raise ConfigError(f"app {name!r} is both an input file and an apps: entry; keep one")
        if app.report:
            if not (workdir / app.report).exists():
                raise ConfigError(f"apps.{name}.report: {app.report!r} does not exist")
            apps[name] = App(name, app.report, input_kind(str(workdir / app.report)), app.device)
        else:
            apps[name] = App(name, None, "capture")
    return apps


def _stem(path: str) -> str:
    name = Path(path).name
    for suffix in INPUT_SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return Path(path).stem


class _UniqueKeyLoader(yaml.SafeLoader):
    """Safe YAML that refuses a key given twice in one mapping (plain YAML keeps the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str | int | float | bool) and key in seen:
                raise ConfigError(
                    f"line {key_node.start_mark.line + 1}: key {key!r} is given twice (first on line "
                    f"{seen[key]}); YAML would silently keep only the last: remove or rename one"
                )
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


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
            yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
        except ConfigError as exc:
            raise ConfigError(f"config file {path}: {exc}") from None
        except yaml.YAMLError:
            pass  # Snakemake has read the file already; its own error wins


def check_catalog(config: Config, repo: str | Path | None = None) -> None:
    """Load the GPU catalog with the config's ``ceilings.gpus`` merged, as the ceilings stage will.

    Raises
    ------
    ConfigError
        Naming ``ceilings.catalog`` or ``ceilings.gpus``, the GPU entry and key (bits, binary
        prefixes, strings with units, unknown keys...).
    """
    from roofline.catalog import load_catalog

    repo = Path(repo) if repo is not None else Path(__file__).resolve().parent.parent
    path = Path(config.ceilings.catalog)
    if not path.exists():
        path = repo / config.ceilings.catalog
    try:
        load_catalog(path)
    except ValueError as exc:
        raise ConfigError(f"config key 'ceilings.catalog' ({config.ceilings.catalog}): {exc}") from None
    if config.ceilings.gpus:
        try:
            load_catalog(path, config.ceilings.gpus)
        except ValueError as exc:
            raise ConfigError(f"config key 'ceilings.gpus': {exc}") from None


def load_workflow_config(
    config: dict, configfiles=(), workdir: str | Path = ".", repo: str | Path | None = None
) -> tuple[Config, dict[str, App]]:
    """Every check the workflow makes before scheduling any job (workflow/rules/common.smk).

    Duplicate keys in the config files, the config model (unknown keys, types), the applications
    (names, duplicates, missing files) and the GPU catalog with its config overrides.

    Raises
    ------
    ConfigError
        The first problem found, naming the key or file and the fix.
    """
    check_config_files(configfiles)
    parsed = load_config(config)
    apps = resolve_apps(parsed, workdir)
    check_catalog(parsed, repo)
    return parsed, apps


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
