# Config validation and the helpers every rule uses. All Python of the workflow lives here.
import datetime
import json
import os
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

# This workflow's own folder (two above this file), also when it is used as a module of another
# workflow, whose basedir is the user's project.
REPO = Path(str(workflow.current_basedir)).parents[1]
PKG = REPO / "roofline"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# Every rule is a shell command `python -m roofline...`. Without a deployment method a job runs the
# interpreter that runs Snakemake (the project's environment, activated or not); under
# --software-deployment-method conda or apptainer, the environment's own `python`.
def python_command():
    """The interpreter with this workflow's own package first on the import path: used as a module,
    or in a conda environment that holds only the dependencies, a job runs the code the rule lists
    as its inputs."""
    python = "python" if workflow.deployment_settings.deployment_method else shlex.quote(sys.executable)
    return f"PYTHONPATH={shlex.quote(str(REPO))}${{PYTHONPATH:+:$PYTHONPATH}} {python}"


from roofline.config.model import ConfigError  # noqa: E402
from roofline.config.workflow import (  # noqa: E402
    catalog_path,
    config_hash,
    load_workflow_config,
)
from roofline.jobs.arguments import json_argument  # noqa: E402
from roofline.jobs.stages import code_digests  # noqa: E402
from roofline.config.inputs import APP_NAME, folder_exports  # noqa: E402
from roofline.jobs.rate_limit import lift_default_rate_limit  # noqa: E402

# Only a malformed config stops the run, here, before any job: one message naming the key and the
# fix (exit status 1). What the inputs: patterns find is judged per input (config/README.md).
try:
    CONFIG, APPS, INPUT_PROBLEMS = load_workflow_config(config, workflow.configfiles, ".", REPO)
except ConfigError as error:
    # Snakemake prints the frames of an error raised in a Snakefile under its message ('File
    # ".../common.smk", line 27'); with none to print it prints the message alone. The process ends
    # with this error, so the limit changes nothing else.
    sys.tracebacklimit = 0
    raise WorkflowError(f"roofline: {error}") from None
for problem in INPUT_PROBLEMS:
    logger.warning(f"roofline: input {problem.problem}: {problem.fix}")
# The pydantic model checked the config; its JSON Schema (roofline/data/config.schema.json, for
# editors and other tools) would check it again at every start: ~0.1 s at 200 apps, 0.2 s when the
# validator is first built.

# Environment problems (a read-only, forbidden or full output directory) stop the run here in one
# line, before Snakemake touches an output; one met later ends the job that meets it, in one line.
from roofline.errors import preflight, quiet_log_files  # noqa: E402

quiet_log_files()
if not workflow.dryrun and (environment_problem := preflight()) is not None:
    sys.tracebacklimit = 0  # the message alone, as for a config error above
    raise WorkflowError(environment_problem)

wildcard_constraints:
    app=APP_NAME.pattern.strip("^$"),


def pkg_code(stage):
    """The package files a stage's jobs run, each with a digest of its content (the table is
    roofline/jobs/stages.py): a rule's param, so that editing one reruns the stage's jobs (the
    profiles' rerun-triggers include params). A param rather than ~30 input files per job, for each
    of which Snakemake would stat, and checksum once per output, every job."""
    return code_digests(stage, PKG)


def python_m(module):
    """:func:`python_command` `-m MODULE`, as a rule's shell command (its braces doubled for Snakemake)."""
    return python_command().replace("{", "{{").replace("}", "}}") + f" -m {module}"


def stage(name):
    """The start of an analysis rule's shell command (roofline/jobs/runner.py: the log, and environment
    failures in one line)."""
    return python_m("roofline.jobs") + f" {name} {{log:q}}"


# The aggregate jobs' joined tables, kept between runs: a rerun reads only the apps' tables that
# changed (roofline/tables/kept_join.py); Snakemake's own folder, so that it goes where the workflow's state goes.
KEPT_JOINS = ".snakemake/roofline-joined"
ENV = "../envs/roofline.yaml"  # every rule's conda environment (--software-deployment-method conda)


def app_source(wildcards):
    """The path a parse job reads: the user's report or folder, or what capture writes."""
    app = APPS[wildcards.app]
    if app.source is not None:
        return app.source
    return f"{CONFIG.capture.raw_dir}/{app.name}.ncu-rep"


def app_input(wildcards):
    """The files behind app_source (a folder of CSV exports lists its files; an input that cannot be
    read lists none: Snakemake would stop at a broken link or a pipe)."""
    app = APPS[wildcards.app]
    if app.kind == "unreadable":
        return []
    if app.kind == "csv-dir":
        return [str(p) for p in folder_exports(app.source)]
    return app_source(wildcards)


def app_problem(wildcards):
    """Why the app's input cannot be read ("" when it can): its parse job records this error."""
    return APPS[wildcards.app].problem


def app_device(wildcards):
    return APPS[wildcards.app].device or ""


def app_kind(wildcards):
    app = APPS[wildcards.app]
    return "ncu-rep" if app.kind == "capture" else app.kind


def catalog_file():
    """The datasheet catalog: ceilings.catalog, else the one shipped with the package."""
    return str(catalog_path(CONFIG.ceilings.catalog, REPO))


MEASURED_TABLE = "data/ceilings/measured.parquet"
DEVICE_CEILINGS = "data/ceilings/devices.parquet"
APP_CEILINGS_FOLDER = "data/ceilings/apps"


def checked_ceilings(wildcards):
    """The app's share of the devices' ceilings (the rows of its devices), through their checkpoint
    (workflow/rules/ceilings.smk). The ceilings job rewrites a share only when it changes, so a job
    that reads one is looked at again once that job has run and reruns only if its roofs moved.
    Where the share is gone (its folder removed by hand), the whole table, which classifies alike."""
    checkpoints.ceilings.get()
    share = f"{APP_CEILINGS_FOLDER}/{wildcards.app}.parquet"
    return share if os.path.exists(share) else DEVICE_CEILINGS


def measured_table():
    """The measured ceilings table for the ceilings stage: measured here, given, or none."""
    if CONFIG.ceilings.measure:
        return MEASURED_TABLE
    return CONFIG.ceilings.measured or []


def ceilings_options():
    """The ceilings stage's policy options, as one param: changing one reruns the stage."""
    return {
        "policy": ",".join(CONFIG.ceilings.policy),
        "device_policy": as_json(CONFIG.ceilings.device_policy),
        "overrides": as_json(CONFIG.ceilings.gpus),
        "margin": CONFIG.ceilings.cross_check_margin,
    }


def one_path(paths):
    """The single path of an optional input (given as a path or an empty list), or ""."""
    if isinstance(paths, str):
        return paths
    return paths[0] if len(paths) else ""


def as_json(value):
    return json.dumps(value, sort_keys=True)


def run_id():
    """The night's id in the history store: run_id from the config, else today's date."""
    return CONFIG.run_id or datetime.date.today().isoformat()


def capture_run_id():
    """What reruns the GPU rules every night: the config's run_id only (a nightly scheduler passes
    `--config run_id=$(date +%F)`); without one they rerun only when what they run changes."""
    return CONFIG.run_id or ""


def all_kernel_tables():
    return expand("data/kernels/{app}.parquet", app=sorted(APPS))


def diagnostics_tables():
    """Every diagnostics table: one per app from parse, one for the devices' ceilings."""
    return [*expand("data/diagnostics/{app}.parse.parquet", app=sorted(APPS)),
            "data/diagnostics/devices.ceilings.parquet"]


def app_sources():
    """Each app's input as the config found it (captured apps: none), for the pages and status;
    at a thousand apps too long for one argument, so then a file (roofline.jobs.arguments.json_argument)."""
    return json_argument(as_json({name: app.source for name, app in sorted(APPS.items()) if app.source}))


def input_problems():
    """The inputs: entries that gave no app, for the summary and status.json (as app_sources)."""
    return json_argument(as_json([problem.as_dict() for problem in INPUT_PROBLEMS]))


# Up to this many apps the tracking judges beside the report (the nightly result sooner); beyond, after
# it: the two jobs that read every app would otherwise hold their memory at once (at 1,000 apps
# ~1.5 and ~0.8 GB: a night in 2 GB on two cores needs them one after the other).
TRACK_BESIDE_REPORT_MAX_APPS = 400


def report_before_tracking():
    """The report output the tracking waits for at fleet scale (none up to TRACK_BESIDE_REPORT_MAX_APPS)."""
    return [] if len(APPS) <= TRACK_BESIDE_REPORT_MAX_APPS else ["reports/assets/charts.js"]


def final_outputs():
    return ["reports/summary.html", "reports/status.json", "reports/trends.html"]


def nightly_outputs():
    # the pages and both files the nightly gate reads (`python -m roofline.status --check
    # reports/status.json --regressions reports/regressions.json`; docs/tracking.md)
    return [*final_outputs(), "reports/regressions.json"]


onstart:
    # Snakemake's default job rate limiter costs a scheduling round per job end per second of the
    # run and delays the exit; a local run of ours never reaches its limit (roofline/jobs/rate_limit.py).
    if lift_default_rate_limit(workflow):
        logger.info("roofline: Snakemake's default job rate limit lifted for this local run")
