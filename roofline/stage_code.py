"""The package files each stage's jobs run, and their digests: every rule's ``code`` param.

A rule reruns its jobs when its params change (the profiles' ``rerun-triggers`` include params), so
a stage whose code is edited reruns only when the edited file is listed here for it. The lists are
checked against what the stages really import, on every input kind, by
``tests/test_stage_code.py``: a module a stage imports but this table does not list fails it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent

# what every stage's job imports: the job runner, the tables, the recipe table
BASE = ("__init__.py", "jobs.py", "errors.py", "atomic_files.py", "schemas.py", "typed_columns.py", "table_files.py",
        "table_reads.py", "metrics.py", "compute_paths.py", "recipe.py", "sass_recipes.py")
# how a job starts and reaches the warm server: not what it computes, so in no digest
RUNNER = ("job_client.py", "job_server.py")
# what writes the pages: the report's, the app jobs' and (with its own modules) the tracking's; stage_code.py
# because the chart specs kept between runs are keyed on these files (roofline/pages/cache.py); ceilings.py for the
# words its citations use for the clock a roof is held at, which the charts' clock line reads; kernels.py for the
# run-wide ranking At a glance shares with the CLI
PAGES = ("report.py", "chart.py", "chart_roofs.py", "chart_instruction.py", "chart_trajectory.py", "trajectory.py",
         "derive.py", "kernel_names.py", "plausibility.py", "instruction.py", "ncu_rules.py", "inputs.py", "units.py",
         "assets/report.css", "assets/report.js", "pages/*.py", "stage_code.py", "ceilings.py", "report_peaks.py",
         "kernels.py", "classify.py", "kernel_match.py")
# stage (roofline.jobs.STAGES) -> its files beyond BASE; a pattern stands for the files it matches
STAGE_CODE: dict[str, tuple[str, ...]] = {
    "parse": ("parse.py", "derive.py", "kernel_names.py", "plausibility.py", "input_hash.py", "what_if.py", "units.py",
              "ncu_rep.py", "report_provenance.py", "config.py", "inputs.py", "compressed.py", "ncu_log.py",
              "ncu_rules.py", "report_peaks.py", "ncu_csv/*.py"),
    "ceilings": ("analysis.py", "ceilings.py", "report_peaks.py", "catalog.py", "catalog_entries.py", "strict_yaml.py",
                 "ncu_rules.py", "kept_join.py", "inputs.py", "plausibility.py"),
    "app": ("analysis.py", "classify.py", "kernels.py", "instruction.py", "ncu_rules.py", "app_job.py", *PAGES),
    "report": (*PAGES, "kept_join.py"),
    "status": ("status.py",),
    # the tracking hashes the config into each night's context (workflow_config.config_hash)
    "track": ("history.py", "track*.py", "decide*.py", "workflow_config.py", "config.py", "strict_yaml.py",
              "kept_join.py", *PAGES),
    # the trends page of the night the tracking judged, from the store (the state's run order); its method
    # section shows the published detection figures
    "trends": ("history.py", "track*.py", "decide*.py", "detection_figures.py", "data/detection_figures.json",
               *PAGES),
}


def stage_files(stage: str, package: Path = PACKAGE) -> list[str]:
    """The files of ``stage`` relative to ``package``, BASE first, each once, patterns expanded."""
    files: dict[str, None] = {}
    for entry in (*BASE, *STAGE_CODE[stage]):
        if any(c in entry for c in "*?["):
            files.update((p.relative_to(package).as_posix(), None) for p in sorted(package.glob(entry)))
        else:
            files[entry] = None
    return list(files)


_DIGESTS: dict[Path, str] = {}


def code_digests(stage: str, package: Path = PACKAGE) -> str:
    """``name:digest`` of each of ``stage``'s files, space-separated: the rule's ``code`` param."""
    parts = []
    for name in stage_files(stage, package):
        path = package / name
        if path not in _DIGESTS:
            _DIGESTS[path] = hashlib.blake2b(path.read_bytes(), digest_size=8).hexdigest()
        parts.append(f"{name}:{_DIGESTS[path]}")
    return " ".join(parts)
