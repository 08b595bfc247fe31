"""The table of stages: each workflow stage's entry module and the package files its jobs run.

A stage is named as its rule is (``rule classify_app`` -> stage ``classify_app`` ->
``roofline/stages/classify_app.py``), and its entry is that module's ``main``. The job runner
(:mod:`roofline.jobs.runner`) runs the entry, the warm server imports the entries ahead of the jobs,
and each rule's ``code`` param is the digest of the stage's files (:func:`code_digests`): a rule
reruns its jobs when its params change (the profiles' ``rerun-triggers`` include params), so a stage
whose code is edited reruns exactly when an edited file is listed for it. The lists are checked
against what the stages really import, on every input kind, by ``tests/jobs/test_stages.py``.
"""

from __future__ import annotations

import os

# Light at import (no pathlib, hashlib or typing): every job imports this table before it knows whether a warm
# server runs it.
PACKAGE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # roofline/


class Stage:
    """A stage's entry ``module`` (its ``main(argv)`` returns the exit status) and its ``code``: the
    package files beyond BASE, where a pattern stands for the files it matches."""

    __slots__ = ("module", "code")

    def __init__(self, module: str, code: tuple[str, ...]) -> None:
        self.module, self.code = module, code


# what every stage's job imports: the job runner, the tables, the recipe table, the files' helpers, the switches
BASE = ("__init__.py", "errors.py", "jobs/__init__.py", "jobs/runner.py", "jobs/arguments.py", "jobs/stages.py",
        "stages/__init__.py", "files/*.py", "tables/*.py", "metrics/*.py", "config/__init__.py",
        "config/switches.py")
# what writes the pages (the report's, the app jobs' and the tracking's): the charts are keyed on these files between
# runs (roofline/pages/cache.py); the ceilings for the words their citations use for a roof's clock, the classification
# for the run-wide ranking the CLI shares, the kernel names and their matching across runs
PAGES = ("pages/*.py", "charts/*.py", "compare.py", "assets/report.css", "assets/report.js", "classify/*.py",
         "ceilings/__init__.py", "ceilings/select.py", "ceilings/report_peaks.py", "parse/__init__.py",
         "parse/derive.py", "parse/kernel_names.py", "parse/plausibility.py", "parse/readers/__init__.py",
         "parse/readers/ncu_rules.py", "config/__init__.py", "config/inputs.py", "config/switches.py",
         "nightly/__init__.py", "nightly/kernel_match.py")
STAGES: dict[str, Stage] = {
    "parse": Stage("roofline.stages.parse", ("stages/parse.py", "parse/**/*.py", "config/*.py",
                                             "ceilings/__init__.py", "ceilings/report_peaks.py")),
    "ceilings": Stage("roofline.stages.ceilings", ("stages/ceilings.py", "ceilings/*.py", "config/__init__.py",
                                                   "config/inputs.py", "parse/__init__.py", "parse/plausibility.py",
                                                   "parse/readers/__init__.py", "parse/readers/ncu_rules.py")),
    "classify_app": Stage("roofline.stages.classify_app", ("stages/classify_app.py", *PAGES)),
    "report": Stage("roofline.stages.report", ("stages/report.py", *PAGES)),
    "status": Stage("roofline.status", ("status.py",)),
    # the tracking hashes the config into each night's context (config.workflow.config_hash)
    "track_history": Stage("roofline.stages.track_history", ("stages/track_history.py", "nightly/*.py", "config/*.py",
                                                              *PAGES)),
    # the trends page shows the published detection figures in its method section
    "trends_page": Stage("roofline.stages.trends_page", ("stages/trends_page.py", "nightly/*.py",
                                                         "data/detection_figures.json", *PAGES)),
}


def stage_files(stage: str, package: str | os.PathLike = PACKAGE) -> list[str]:
    """The files of ``stage`` relative to ``package``, BASE first, each once, patterns expanded."""
    from pathlib import Path

    package = Path(package)
    files: dict[str, None] = {}
    for entry in (*BASE, *STAGES[stage].code):
        if any(c in entry for c in "*?["):
            files.update((p.relative_to(package).as_posix(), None) for p in sorted(package.glob(entry))
                         if "__pycache__" not in p.parts)
        else:
            files[entry] = None
    return list(files)


_DIGESTS: dict[str, str] = {}


def code_digests(stage: str, package: str | os.PathLike = PACKAGE) -> str:
    """``name:digest`` of each of ``stage``'s files, space-separated: the rule's ``code`` param."""
    import hashlib

    parts = []
    for name in stage_files(stage, package):
        path = os.path.join(package, name)
        if path not in _DIGESTS:
            with open(path, "rb") as file:
                _DIGESTS[path] = hashlib.blake2b(file.read(), digest_size=8).hexdigest()
        parts.append(f"{name}:{_DIGESTS[path]}")
    return " ".join(parts)
