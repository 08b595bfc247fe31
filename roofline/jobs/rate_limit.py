"""Snakemake's default job rate limiter, lifted for local runs.

Snakemake starts every run with a job rate limiter (``--max-jobs-per-timespan``, default 100 jobs per
second) and ends every scheduling round with a ``threading.Timer`` of that timespan that starts
another round. Each round that finds ready jobs starts a timer again, so every job end adds a chain
of rounds that repeats once a second for as long as jobs wait for a core: the rounds grow
faster than the jobs. The timers are not daemon threads either,
so Snakemake's exit waits for the last one (up to a second).

The limit is there to spare a cluster's queue; on a local run the cores already bound how many
jobs run at once. So when the run is local and the limit is Snakemake's default,
:func:`lift_default_rate_limit` removes the limiter from the run's scheduler, which then schedules
on job ends alone, as Snakemake's Python API does when no limit is given. A limit the user chose
(any other value), a dry run, and a cluster executor keep it.
"""

from __future__ import annotations

import sys

# Snakemake's command-line default for --max-jobs-per-timespan ("100/1s").
DEFAULT_MAX_JOBS = 100
DEFAULT_TIMESPAN_S = 1.0


def lift_default_rate_limit(workflow: object) -> bool:
    """Remove the default job rate limiter from ``workflow``'s scheduler (call it from ``onstart``,
    after Snakemake built the scheduler and before it schedules); whether it was removed.

    Nothing changes, and False comes back, for a dry run, a non-local executor, a limit other than
    the default, or a Snakemake whose scheduler does not look as this expects.
    """
    if getattr(workflow, "dryrun", True) or not getattr(workflow, "local_exec", False):
        return False
    scheduler = getattr(workflow, "scheduler", None)
    limiter = getattr(scheduler, "job_rate_limiter", None)
    resources = getattr(scheduler, "resources", None)
    if limiter is None or not isinstance(resources, dict) or "_job_count" not in resources:
        return False
    if (getattr(limiter, "max_jobs", None), getattr(limiter, "timespan", None)) != (DEFAULT_MAX_JOBS,
                                                                                  DEFAULT_TIMESPAN_S):
        return False
    scheduler.job_rate_limiter = None
    # what an unlimited scheduler holds (and checks before each selection of jobs)
    resources["_job_count"] = sys.maxsize
    return True
