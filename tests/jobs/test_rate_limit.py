"""Lifting Snakemake's default job rate limiter for local runs (roofline/jobs/rate_limit.py)."""

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import REPO

from roofline.jobs.rate_limit import DEFAULT_MAX_JOBS, DEFAULT_TIMESPAN_S, lift_default_rate_limit


def _workflow(max_jobs=100, timespan=1.0, dryrun=False, local_exec=True):
    limiter = SimpleNamespace(max_jobs=max_jobs, timespan=timespan)
    scheduler = SimpleNamespace(job_rate_limiter=limiter, resources={"_cores": 2, "_job_count": 100})
    return SimpleNamespace(dryrun=dryrun, local_exec=local_exec, scheduler=scheduler)


def test_the_default_limit_of_a_local_run_is_lifted():
    workflow = _workflow()
    assert lift_default_rate_limit(workflow)
    assert workflow.scheduler.job_rate_limiter is None
    assert workflow.scheduler.resources == {"_cores": 2, "_job_count": sys.maxsize}


@pytest.mark.parametrize("case", [
    {"max_jobs": 10},  # a limit the user chose
    {"timespan": 60.0},
    {"dryrun": True},
    {"local_exec": False},  # a cluster executor: the limit spares its queue
])
def test_a_chosen_limit_a_dry_run_and_a_cluster_keep_the_limiter(case):
    workflow = _workflow(**case)
    limiter = workflow.scheduler.job_rate_limiter
    assert not lift_default_rate_limit(workflow)
    assert workflow.scheduler.job_rate_limiter is limiter
    assert workflow.scheduler.resources["_job_count"] == 100


def test_a_scheduler_of_another_shape_is_left_alone():
    assert not lift_default_rate_limit(SimpleNamespace(dryrun=False, local_exec=True, scheduler=None))
    assert not lift_default_rate_limit(object())
    no_count = _workflow()
    del no_count.scheduler.resources["_job_count"]
    assert not lift_default_rate_limit(no_count)
    assert no_count.scheduler.job_rate_limiter is not None


def test_the_default_is_snakemakes_own_command_line_default():
    from snakemake.cli import get_argument_parser

    default = get_argument_parser().get_default("max_jobs_per_timespan")
    from snakemake.settings.types import MaxJobsPerTimespan

    parsed = MaxJobsPerTimespan.parse_choice(default) if isinstance(default, str) else default
    assert (parsed.max_jobs, parsed.timespan) == (DEFAULT_MAX_JOBS, DEFAULT_TIMESPAN_S)


# A run of Snakemake that counts the re-evaluation timers its scheduler starts, then prints the count.
COUNTING_RUN = """
import atexit, sys
import snakemake.scheduling.job_scheduler as scheduling
count = [0]
start_timer = scheduling.JobScheduler._schedule_reevalutation
def counted(self, delay):
    count[0] += 1
    return start_timer(self, delay)
scheduling.JobScheduler._schedule_reevalutation = counted
atexit.register(lambda: print(f"timers started: {count[0]}"))
from snakemake.cli import main
sys.argv = ["snakemake", *sys.argv[1:]]
main()
"""

SNAKEFILE = """# hand-made test workflow: 12 short jobs on one core, so jobs wait for it
import sys
sys.path.insert(0, {repo!r})
from roofline.jobs.rate_limit import lift_default_rate_limit

rule all:
    input: expand("out/{{i}}.txt", i=range(12))

rule one:
    output: "out/{{i}}.txt"
    shell: "sleep 0.05; touch {{output}}"

onstart:
    print("lifted" if lift_default_rate_limit(workflow) else "kept")
"""


def _counted_run(tmp_path: Path, *args: str) -> tuple[str, int]:
    (tmp_path / "Snakefile").write_text(SNAKEFILE.format(repo=str(REPO)))
    result = subprocess.run([sys.executable, "-c", COUNTING_RUN, "--snakefile", str(tmp_path / "Snakefile"),
                             "--directory", str(tmp_path), "--cores", "1", *args],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(list((tmp_path / "out").iterdir())) == 12
    verdict = "lifted" if "\nlifted\n" in f"\n{result.stdout}" else "kept"
    timers = int(result.stdout.rsplit("timers started: ", 1)[1].split()[0])
    return verdict, timers


def test_snakemake_schedules_on_job_ends_alone_once_lifted(tmp_path):
    verdict, timers = _counted_run(tmp_path)
    assert (verdict, timers) == ("lifted", 0)


def test_with_a_limit_of_the_users_snakemake_keeps_its_timers(tmp_path):
    verdict, timers = _counted_run(tmp_path, "--max-jobs-per-timespan", "50/1s")
    assert verdict == "kept"
    assert timers >= 12  # at least one scheduling round per job, each starting a timer
