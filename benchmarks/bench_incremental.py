"""Reruns after a cold run: nothing changed, one input replaced, one stage module edited, one input
that moves its device's roof.

The repo's Snakefile, workflow/, roofline/ and config/ are copied into a tmp folder and Snakemake
runs there (``--snakefile <tmp>/Snakefile``), because the rules list the package files as inputs and
case (c) edits one of them. The jobs each rerun executes are read from Snakemake's output and
compared with the expected chain. Baselines in the same run: Snakemake on an empty workflow, and
Snakemake on a workflow of the same shape whose jobs do nothing (:func:`_common.noop_workflow`: one input
replaced there too), which is what the rerun of one changed app costs before any of our work.

    python benchmarks/bench_incremental.py            # 20 apps x 2,000 launches
    python benchmarks/bench_incremental.py --quick    # 5 apps x 500 launches
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    BENCH_TMP,
    copy_workflow,
    expected_jobs,
    fresh_dir,
    job_env,
    jobs_in,
    noop_workflow,
    record,
    rule_graph,
    run_tracked,
    snakemake_cmd,
    warm_bytecode,
)
from bench_workflow import empty_workflow_time  # noqa: E402
from generate import generate_apps, write_config  # noqa: E402


def noop_rerun_time(env: dict, n: int, repeat: int = 3) -> float:
    """Median wall time of rerunning the no-op workflow of ``n`` apps (:func:`_common.noop_workflow`) after
    one input changed."""
    work = noop_workflow(BENCH_TMP / "incremental-noop", n)
    cmd = snakemake_cmd(work / "Snakefile", work, None, cores=2)
    cold = run_tracked(cmd, cwd=work, env=env)
    if cold.rc != 0:
        raise SystemExit(f"the no-op workflow failed:\n{cold.text[-4000:]}")
    times = []
    for k in range(repeat):
        (work / "inputs" / "app_000.csv").write_text(f"changed {k}\n")
        rerun = run_tracked(cmd, cwd=work, env=env)
        ran = jobs_in(rerun.text)
        if rerun.rc != 0 or "classify_app:app_000" not in ran or "classify_app:app_001" in ran:
            raise SystemExit(f"the no-op workflow's rerun ran {ran}:\n{rerun.text[-4000:]}")
        times.append(rerun.wall_s)
    return statistics.median(times)


def moved_devices(before: pd.DataFrame, after: pd.DataFrame) -> list[str]:
    """The devices whose rows of the ceilings table differ between two runs."""
    devices = sorted(set(before["device"]) | set(after["device"]))
    return [d for d in devices if not before[before["device"] == d].reset_index(drop=True).equals(
        after[after["device"] == d].reset_index(drop=True))]


def _with_apps_on(devices: list[str], work: Path, jobs: list[str]) -> list[str]:
    """``jobs`` with the classify_app job of every app that ran on one of ``devices`` (its counters'
    ``device`` column): those whose roofs moved."""
    apps = [path.stem for path in sorted((work / "data" / "counters").glob("*.parquet"))
            if set(pq.read_table(path, columns=["device"]).column("device").to_pylist()) & set(devices)]
    return sorted(set(jobs) | {f"classify_app:{app}" for app in apps})


def _counted(jobs: list[str]) -> str:
    """Jobs as rule names, a per-app rule with its job count: "200 classify_app, report"."""
    counts: dict[str, int] = {}
    for job in jobs:
        counts[job.split(":")[0]] = counts.get(job.split(":")[0], 0) + 1
    return ", ".join(f"{n} {rule}" if any(j.startswith(rule + ":") for j in jobs) else rule
                     for rule, n in counts.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 apps x 500 launches")
    parser.add_argument("--apps", type=int)
    parser.add_argument("--launches", type=int)
    parser.add_argument("--no-bytecode", action="store_true", help="run as installed here (no .pyc cache)")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args(argv)
    n = args.apps or (5 if args.quick else 20)
    launches = args.launches or (500 if args.quick else 2000)
    # The set bench_workflow uses (200 apps at 2,000 launches), so that both share one generation.
    data = generate_apps(BENCH_TMP / f"apps-{launches}", max(n + 1, 20 if args.quick else 200), launches)
    env = job_env(not args.no_bytecode)
    warm_bytecode(env)

    work = fresh_dir(BENCH_TMP / "incremental")
    copy_workflow(work)
    inputs = work / "inputs"
    inputs.mkdir()
    records = []
    for rec in data["apps"][:n]:
        local = inputs / Path(rec["path"]).name
        shutil.copy2(rec["path"], local)
        records.append({**rec, "path": str(local)})
    config = write_config(work / "bench-config.yaml", records, title="incremental benchmark")

    def run(*extra: str):
        result = run_tracked(snakemake_cmd(work / "Snakefile", work, config, *extra), cwd=work, env=env)
        if result.rc != 0:
            raise SystemExit(f"snakemake {' '.join(extra)} failed:\n{result.text[-4000:]}")
        return result

    empty = empty_workflow_time(env)
    noop_dag = noop_rerun_time(env, n)
    cold = run()
    print(f"cold: {cold.wall_s:.1f} s, {len(jobs_in(cold.text))} jobs; empty workflow {empty:.2f} s")
    cold_jobs = jobs_in(cold.text)
    graph = rule_graph(run("--rulegraph").stdout)
    apps = [r["app"] for r in records]
    aggregates = sorted(j for j in cold_jobs if ":" not in j)

    # (a) nothing changed
    noop = [run() for _ in range(3)]
    noop_time = statistics.median(r.wall_s for r in noop)
    noop_jobs = sorted({j for r in noop for j in jobs_in(r.text)})
    nothing = all("Nothing to be done" in r.text for r in noop)
    dry = run("-n")
    print(f"(a) no change: {noop_time:.2f} s ({noop_time / empty:.2f}x empty), jobs {noop_jobs}, "
          f"dry-run {dry.wall_s:.2f} s")

    # (b) one input replaced by a different file (another generated app of the same kind)
    target = records[0]
    suffix = Path(target["path"]).suffix
    donor = next(r for r in data["apps"][1:] if Path(r["path"]).suffix == suffix and r["app"] != target["app"])
    shutil.copyfile(donor["path"], target["path"])
    ceilings = work / "data" / "ceilings" / "devices.parquet"
    diagnostics = work / "data" / "diagnostics" / f"{target['app']}.parse.parquet"
    before, notes_before = ceilings.read_bytes(), diagnostics.read_bytes()
    roofs_before = pd.read_parquet(ceilings)
    replaced = run()
    got_b = jobs_in(replaced.text)
    # the ceilings are a checkpoint and each app is classified against its devices' rows: when the new
    # input moves no roof only the replaced app is classified again; a moved roof reclassifies the
    # apps on that device
    roofs_moved = ceilings.read_bytes() != before
    want_b = _with_apps_on(moved_devices(roofs_before, pd.read_parquet(ceilings)), work,
                           expected_jobs(graph, cold_jobs, {"parse"}, [target["app"]], {"ceilings"}))
    if diagnostics.read_bytes() == notes_before and "status" not in got_b:
        want_b.remove("status")  # its only changed input came out byte-identical (see tests/test_incremental.py)
    print(f"(b) one input replaced: {replaced.wall_s:.1f} s, roofs {'moved' if roofs_moved else 'unchanged'}, "
          f"jobs {got_b}; the same DAG with jobs that do nothing: {noop_dag:.2f} s")
    # (b) again, the input swapped between two donors of the same kind (each run a change): one run
    # is at the mercy of this shared machine's minute; the verdict takes the median
    alike = [r for r in data["apps"][1:] if Path(r["path"]).suffix == suffix and r["app"] not in (
        target["app"], donor["app"]) and (r.get("template"), r.get("device")) == (donor.get("template"),
                                                                                 donor.get("device"))]
    repeats = [] if roofs_moved else [replaced.wall_s]
    for source in ([alike[0], donor] * 2 if alike else []):
        shutil.copyfile(source["path"], target["path"])
        before = ceilings.read_bytes()
        again = run()
        if ceilings.read_bytes() == before:  # one app's chain, as in (b); a moved roof reruns them all
            repeats.append(again.wall_s)
    b_median = statistics.median(repeats) if repeats else replaced.wall_s
    print(f"(b) repeated: {', '.join(f'{t:.1f}' for t in repeats)} s, median {b_median:.1f} s")

    # (c) one stage module edited (in the tmp copy): the analysis (which classifies) and what depends on it
    with open(work / "roofline" / "classify" / "launches.py", "a", encoding="utf-8") as handle:
        handle.write("\n# benchmark edit: rerun the analysis and its dependents\n")
    edited = run()
    got_c = jobs_in(edited.text)
    want_c = expected_jobs(graph, cold_jobs, {"classify_app"}, apps)
    print(f"(c) classify/launches.py edited: {edited.wall_s:.1f} s, {len(got_c)} jobs; upstream jobs: "
          f"{[j for j in got_c if j.split(':')[0] in ('parse', 'capture')]}")

    # (d) one input that moves its device's roof: the first what-if table (the first definition of its
    # machine is the machine's roof) gets 10 % more DRAM bandwidth; the apps on that machine are
    # classified again, no app on another device is
    table = next(r for r in records if r["path"].endswith(".yaml"))
    text = Path(table["path"]).read_text()
    machine, peaks = next(iter(yaml.safe_load(text)["machines"].items()))
    faster = f"dram: {float(peaks['memory']['dram']) * 1.1:.6e}"
    Path(table["path"]).write_text(re.sub(rf"(?m)^(\s+{re.escape(machine)}:.*?)dram: [0-9.e+-]+",
                                          lambda m: m.group(1) + faster, text, count=1))
    if Path(table["path"]).read_text() == text:
        raise SystemExit(f"no DRAM peak of {machine} in {table['path']}")
    roofs_before = pd.read_parquet(ceilings)
    roof_moved = run()
    got_d = jobs_in(roof_moved.text)
    devices_d = moved_devices(roofs_before, pd.read_parquet(ceilings))
    want_d = _with_apps_on(devices_d, work, expected_jobs(graph, cold_jobs, {"parse"}, [table["app"]], {"ceilings"}))
    on_machine = sorted(r["app"] for r in records if f"machine: {machine}" in Path(r["path"]).read_text())
    classified_d = sorted(j.split(":")[1] for j in got_d if j.startswith("classify_app:"))
    print(f"(d) a roof moved ({', '.join(devices_d) or 'none'}): {roof_moved.wall_s:.1f} s, {len(got_d)} jobs, "
          f"{len(classified_d)} apps classified of {n} ({len(on_machine)} use {machine})")

    ok_a = nothing and not noop_jobs and noop_time <= 2 * empty
    rows = [
        ["cold run", f"{cold.wall_s:.1f} s", f"{cold.wall_s / empty:.0f}x", f"{len(jobs_in(cold.text))} jobs", "", ""],
        ["(a) nothing changed", f"{noop_time:.2f} s", f"{noop_time / empty:.2f}x", "none" if not noop_jobs else
         ", ".join(noop_jobs), "no job, <= 2x empty", "met" if ok_a else "**not met**"],
        ["(a) same, `-n`", f"{dry.wall_s:.2f} s", f"{dry.wall_s / empty:.2f}x", "", "", ""],
        ["(b) one input replaced", f"{replaced.wall_s:.1f} s", f"{replaced.wall_s / empty:.1f}x", ", ".join(got_b),
         ", ".join(want_b), "met" if got_b == want_b else "**not met**"],
        ["(b) again, median of the runs that moved no roof", f"{b_median:.1f} s", f"{b_median / empty:.1f}x",
         f"{len(repeats)} runs: " + ", ".join(f"{t:.1f}" for t in repeats) + " s", "", ""],
        ["(b) the same DAG, jobs that do nothing", f"{noop_dag:.2f} s", f"{noop_dag / empty:.2f}x",
         "the same chain", "", ""],
        ["(c) classify/launches.py edited", f"{edited.wall_s:.1f} s", f"{edited.wall_s / empty:.1f}x",
         f"{sum(j.split(':')[0] in ('parse', 'capture') for j in got_c)} parse/capture, " + _counted(got_c),
         _counted(want_c), "met" if got_c == want_c else "**not met**"],
        ["(d) one input moves its device's roof", f"{roof_moved.wall_s:.1f} s", f"{roof_moved.wall_s / empty:.1f}x",
         f"{len(classified_d)} classify_app of {n}, " + _counted(got_d), _counted(want_d) + f" ({machine}: "
         f"{len(on_machine)} apps)", "met" if got_d == want_d and devices_d == [machine] else "**not met**"],
    ]
    notes = [
        f"{n} apps x {launches} launches, `--cores 2`, bytecode cache {'off' if args.no_bytecode else 'on'}; "
        f"baseline: Snakemake on an empty workflow, {empty:.2f} s (median of 3) in the same run. "
        f"(b) against the same DAG with jobs that do nothing (one input changed there too, median of 3): "
        f"{b_median / noop_dag:.1f}x (median); the goal of the issue \"Fleet scale\", one changed app of 200 "
        f"<= 5 s: {'met' if b_median <= 5 else 'not met'} (median {b_median:.1f} s, first {replaced.wall_s:.1f} s). "
        "Expected jobs come from `snakemake --rulegraph`: the changed stage's per-app dependents for the"
        f" changed app(s) and every aggregate rule downstream (aggregate rules here: {', '.join(aggregates)}).",
    ]
    if not args.no_record:
        record("bench_incremental", "Incremental reruns", ["case", "wall", "/ empty workflow", "jobs run", "expected",
                                                           "goal"], rows, notes)
    return 0 if ok_a and got_b == want_b and got_c == want_c and got_d == want_d else 1


if __name__ == "__main__":
    sys.exit(main())
