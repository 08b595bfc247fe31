"""The configuration against the working directory, as the workflow checks it before scheduling
any job (workflow/rules/common.smk): the apps that ``inputs:`` and ``apps:`` give, duplicate keys in
the config files, the GPU catalog with its overrides. The configuration's keys and types are
:mod:`roofline.config.model`.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import yaml

from roofline.config.inputs import (
    ACCEPTED,
    App,
    InputProblem,
    assign_names,
    expand_patterns,
    input_kind,
    is_app_name,
)
from roofline.config.model import Config, ConfigError, load_config
from roofline.files.strict_yaml import DuplicateKey, FastStrictLoader, StrictLoader


def _check_name(name: str, origin: str) -> None:
    if not is_app_name(name):
        raise ConfigError(
            f"app name {name!r} (from {origin}) may use only letters, digits, '.', '_' and '-'; "
            "rename the app"
        )


def resolve_inputs(config: Config, workdir: str | Path = ".") -> tuple[dict[str, App], list[InputProblem]]:
    """Expand ``inputs`` patterns and ``apps`` into one App per application, and what gave nothing.

    Every file a pattern finds is an app, named from its file name (roofline.config.inputs.app_name;
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
        # libyaml's parser first (several times faster on a thousand apps' config); the pure-Python
        # one, which Snakemake reads the config with, where libyaml refuses the text
        for loader in dict.fromkeys((FastStrictLoader, StrictLoader)):
            try:
                yaml.load(text, Loader=loader)
            except DuplicateKey as twice:
                raise ConfigError(
                    f"config file {path}: line {twice.line}: key {twice.key!r} is given twice (first on line "
                    f"{twice.first_line}); YAML would silently keep only the last: remove or rename one"
                ) from None
            except yaml.YAMLError:
                continue  # with the pure-Python parser too: Snakemake has read the file, its own error wins
            break


def catalog_path(catalog: str | None, repo: str | Path | None = None) -> Path:
    """The catalog file a ``ceilings.catalog`` value names: unset, the one shipped with roofline; a
    relative path, from the working directory, else from ``repo`` (the workflow's own folder)."""
    from roofline.ceilings.catalog import CATALOG_PATH

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
    from roofline.ceilings.catalog import load_catalog

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


def config_hash(config_json: str) -> str:
    """The first 16 hex digits of the sha256 of a config, as canonical JSON (the history's
    ``config_hash``: which configuration a night ran with)."""
    import hashlib
    import json

    canonical = json.dumps(json.loads(config_json), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
