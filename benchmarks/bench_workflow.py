"""Cold runs of the whole workflow: wall time, peak memory, and how time grows with the app count.

Each point is a fresh work folder and ``snakemake --snakefile <repo>/Snakefile --directory <tmp>
--configfile <tmp>/config.yaml --cores 2`` (the console script, as the README writes it) over the
first N apps of a generated set
(``generate.py apps``: NERSC long CSVs, ``--page raw`` wide CSVs, what-if tables). Baselines measured
in the same run:

- *empty workflow*: Snakemake on a Snakefile with one rule and nothing to do (its fixed cost);
- *start-up floor*: one ``python -c "import roofline.<stage>"`` per job of the DAG, divided by the
  cores: what the jobs cost before doing any work.

Runs are made with bytecode caching (as a normal install has it). The headline app count is also run
with ``python -m snakemake``: the two ways of starting Snakemake must cost the same.

    python benchmarks/bench_workflow.py                 # 10/25/50/100/200 apps x 2,000 launches
    python benchmarks/bench_workflow.py --quick         # 5/10/20 apps x 500 launches
"""

from __future__ import annotations

import argparse
import datetime
import re
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    BENCH_TMP,
    PY,
    REPO,
    fresh_dir,
    gb,
    job_env,
    jobs_in,
    record,
    run_tracked,
    snakemake_cmd,
    warm_bytecode,
)
from generate import generate_apps, write_config  # noqa: E402

# One rule whose only input exists and which has no output to make: "Nothing to be done", the
# fixed cost of starting Snakemake, parsing a Snakefile and checking the (empty) DAG.
EMPTY_SNAKEFILE = 'rule all:\n    input: "Snakefile"\n'
STAGES = ("roofline.stages.parse", "roofline.stages.classify_app", "roofline.stages.report")


def empty_workflow_time(env: dict, repeat: int = 3) -> float:
    """Median wall time of Snakemake on a workflow with nothing to do."""
    work = fresh_dir(BENCH_TMP / "empty-workflow")
    (work / "Snakefile").write_text("# benchmarks: an empty workflow (generated)\n" + EMPTY_SNAKEFILE)
    times = []
    for _ in range(repeat):
        run = run_tracked(snakemake_cmd(work / "Snakefile", work, None), env=env)
        assert run.rc == 0, run.text[-2000:]
        times.append(run.wall_s)
    return statistics.median(times)


def startup_floor(env: dict, repeat: int = 3) -> dict[str, float]:
    """Median wall time of starting one job of each stage (interpreter + imports, no work)."""
    out = {}
    for stage in STAGES:
        times = [run_tracked([PY, "-c", f"import {stage}"], cwd=REPO, env=env).wall_s for _ in range(repeat)]
        out[stage] = statistics.median(times)
    served = [run_tracked([PY, "-c", "import roofline.jobs.runner, roofline.jobs.client"], cwd=REPO, env=env).wall_s
              for _ in range(repeat)]
    out["served"] = statistics.median(served)
    return out


def timeline(work: Path) -> dict:
    """From Snakemake's log of the last run in ``work``: when the per-app jobs were all done, and the
    seconds each aggregate job (report, status, track_history) took -- the serial tail of a run."""
    logs = sorted((work / ".snakemake" / "log").glob("*.snakemake.log"))
    if not logs:
        return {}
    stamp = re.compile(r"^\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]$")
    now = first = None
    rule = None
    started, finished, rule_of = {}, {}, {}
    failed_rule = None
    for line in logs[-1].read_text().splitlines():
        if match := stamp.match(line):
            now = datetime.datetime.strptime(match.group(1), "%a %b %d %H:%M:%S %Y")
            first = first or now
        elif match := re.match(r"^(?:local)?rule (\w+):", line):
            rule = match.group(1)
        elif (match := re.match(r"^\s+jobid: (\d+)", line)) and rule:
            started[match.group(1)], rule_of[match.group(1)], rule = now, rule, None
        elif match := re.match(r"^Finished jobid: (\d+)", line):
            finished[match.group(1)] = now
        elif match := re.match(r"^Error in rule (\w+):", line):
            failed_rule = match.group(1)
        elif (match := re.match(r"^\s+jobid: (\d+)", line)) and failed_rule:
            finished[match.group(1)], failed_rule = now, None
            rule_of[match.group(1)] += " (failed)"
    per_app = [finished[j] for j, r in rule_of.items() if r in ("parse", "capture") and j in finished]
    out = {"per-app jobs done": (max(per_app) - first).total_seconds() if per_app else float("nan")}
    for job, name in rule_of.items():
        if name.split(" ")[0] not in ("parse", "capture", "all") and job in finished:
            out[name] = (finished[job] - started[job]).total_seconds()
    return out


def cold_run(records: list[dict], label: str, env: dict, launcher: str = "console") -> tuple:
    work = fresh_dir(BENCH_TMP / f"cold-{label}")
    config = write_config(work / "config.yaml", records, title=f"benchmark {label}")
    run = run_tracked(snakemake_cmd(REPO / "Snakefile", work, config, "--keep-going", launcher=launcher), cwd=work,
                      env=env)
    failed = sorted(set(re.findall(r"^Error in rule (\w+):", run.text, re.M)))
    if run.rc != 0 and not failed:
        raise SystemExit(f"cold run {label} failed:\n{run.text[-4000:]}")
    if failed:
        print(f"  {label}: jobs of rule(s) {', '.join(failed)} FAILED (see {work}/logs); the others ran")
    run.failed = failed
    run.timeline = timeline(work)
    jobs = jobs_in(run.text)
    report = work / "reports" / "summary.html"
    return run, jobs, report.stat().st_size if report.exists() else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="5/10/20 apps x 500 launches")
    parser.add_argument("--apps", type=int, nargs="*", help="app counts of the scaling curve")
    parser.add_argument("--launches", type=int, help="launches per app (2000 or 5000)")
    parser.add_argument("--headline", type=int, help="app count also run with python -m snakemake (default 50)")
    parser.add_argument("--no-record", action="store_true", help="print only; leave README.md alone")
    args = parser.parse_args(argv)
    counts = args.apps or ([5, 10, 20] if args.quick else [10, 25, 50, 100, 200])
    launches = args.launches or (500 if args.quick else 2000)
    headline = args.headline or (10 if args.quick else 50)
    data = generate_apps(BENCH_TMP / f"apps-{launches}", max(counts + [headline]), launches)
    cached = job_env(True)
    warm_bytecode(cached)

    empty = empty_workflow_time(cached)
    floor = startup_floor(cached)
    print(f"empty workflow {empty:.2f} s; job start-up (cached bytecode) {floor}")

    rows, points, max_tree, failures, tails = [], [], 0, set(), []
    for n in counts:
        run, jobs, page = cold_run(data["apps"][:n], f"{n}x{launches}", cached)
        points.append((n, run.wall_s))
        max_tree = max(max_tree, run.peak_tree_rss)
        print(f"{n:4d} apps: {run.wall_s:7.1f} s, {run.wall_s / n:.2f} s/app, tree peak {gb(run.peak_tree_rss)}, "
              f"largest process {gb(run.max_proc_rss)}, {len(jobs)} jobs, CPU {run.cpu_s:.0f} s")
        failures.update(f"{r} (from {n} apps)" for r in run.failed)
        tails.append(f"{n} apps: " + ", ".join(f"{k} {v:.0f} s" for k, v in run.timeline.items()))
        print("  timeline:", tails[-1])
        rows.append([f"{n} x {launches}", "`snakemake`", f"{run.wall_s:.1f} s", f"{run.wall_s / n:.2f}",
                     f"{run.wall_s / empty:.0f}x", gb(run.peak_tree_rss), gb(run.max_proc_rss), len(jobs),
                     f"{page / 1e6:.1f} MB", f"{run.cpu_s:.0f} s"])
    module_run, jobs, page = cold_run(data["apps"][:headline], f"{headline}x{launches}-module", cached, "module")
    module = module_run
    print(f"{headline} apps with python -m snakemake: {module.wall_s:.1f} s, tree peak {gb(module.peak_tree_rss)}")
    rows.append([f"{headline} x {launches}", "`python -m snakemake`", f"{module.wall_s:.1f} s",
                 f"{module.wall_s / headline:.2f}", f"{module.wall_s / empty:.0f}x", gb(module.peak_tree_rss),
                 gb(module.max_proc_rss), len(jobs), f"{page / 1e6:.1f} MB", f"{module.cpu_s:.0f} s"])

    n = np.array([p[0] for p in points], float)
    t = np.array([p[1] for p in points], float)
    slope, intercept = np.polyfit(n, t, 1)
    fit = slope * n + intercept
    r2 = 1 - ((t - fit) ** 2).sum() / max(((t - t.mean()) ** 2).sum(), 1e-12)
    marginal = [(t[i + 1] - t[i]) / (n[i + 1] - n[i]) for i in range(len(n) - 1)]
    print(f"linear fit: {slope:.2f} s/app + {intercept:.1f} s, R^2 {r2:.4f}; marginal s/app {marginal}")
    head = next((r for r in points if r[0] == headline), None)
    launch_ratio = head[1] / module_run.wall_s if head else float("nan")
    ok = (head is None or head[1] <= 30) and launch_ratio <= 1.2 and max_tree <= 2e9 and not failures
    notes = [
        f"Baselines in the same run: empty workflow {empty:.2f} s; job start-up in its own process (interpreter + "
        "imports) " + ", ".join(f"{s} {floor[s]:.2f} s" for s in STAGES)
        + f": what a job pays before any work when it runs itself (the first of a run does); a job handed to the "
        f"warm server (roofline/jobs/server.py, every later one) starts in {floor['served']:.2f} s and its forked "
        "child has the imports.",
        f"Scaling: linear fit {slope:.2f} s/app + {intercept:.1f} s (R² {r2:.4f}); marginal s/app between "
        "points " + ", ".join(f"{m:.2f}" for m in marginal) + ".",
        f"Goals: cold {headline} x {launches:,} <= 30 s with `snakemake --cores 2`"
        + (f" (measured {head[1]:.1f} s)" if head else "")
        + f", and at most 1.2x the same run started as `python -m snakemake` (measured {launch_ratio:.2f}x); "
        "peak memory <= 2 GB (tree peak = sampled sum of RSS over snakemake, its jobs, the jobs' server and its "
        "children, counting the pages they share once per process; largest process = "
        "exact max RSS of one process). *jobs* = jobs announced (incl. failed ones).",
    ]
    notes.append("Where the time goes (Snakemake's log; per-app jobs run 2 at a time, the aggregate jobs "
                 "after them): " + "; ".join(tails) + ".")
    if failures:
        notes.append(f"**Failed jobs** (run with --keep-going, so the others finished): {', '.join(sorted(failures))}.")
    if not args.no_record:
        record(
            "bench_workflow" if launches == 2000 else f"bench_workflow_{launches}",
            f"Cold runs, --cores 2, {launches} launches per app",
            ["apps x launches", "started as", "wall", "s/app", "/ empty workflow", "tree peak RSS", "largest process",
             "jobs", "summary.html", "CPU (user+sys)"],
            rows,
            notes,
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
