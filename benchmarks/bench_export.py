"""One huge export, from the command line and through the workflow, against a columnar engine doing
the same in the same run.

Two generated 100k-launch, 5,000-kernel exports (``generate.py big``): the NERSC-style long CSV
(643 MB) and a ``--page raw`` wide one (246 MB, an A10G ``--set roofline`` launch's ~300 metrics).
For each:

- ours, the command line: the README's ``roofline show FILE --format json`` (``--device`` for the long
  export, which records no GPU), the venv's console script, in a process of its own: read, derive,
  ceilings, every kernel classified and ranked, the JSON printed;
- ours, the workflow: cold ``snakemake --cores 2 data/kernels/big.parquet`` (the parse job and the
  analysis job: ceilings, every launch classified, the kernels table), whole processes, Snakemake's
  start included;
- the peer: polars reading the same file (a lazy scan of the columns it needs, thousands separators
  stripped), its metrics per launch summed per kernel (long: pivoted to one row per kernel), written
  to Parquet, in its own process, interpreter start included.

Every command is a fresh process, run alternately with the others; for each the best time and the
least peak memory (the largest process's RSS, exact from ``wait4``) of ``--repeat`` runs are kept.

Baselines in the same run, for the workflow: Snakemake on a workflow of the same shape whose three
jobs do nothing (:func:`_common.noop_workflow`, one app, the same target), and the same workflow
whose parse job is the peer's own script: the least any workflow of separate jobs can take for the
peer's work alone, with none of ours (units, recipes, ceilings, verdicts, the four tables, the page).

Goals (issue #48): the command line <= 1.5x the peer's time and peak memory, the workflow <= 3x its
time, on each export.

    python benchmarks/bench_export.py [--repeat 3] [--only long wide] [--no-workflow]
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    BENCH_TMP,
    PY,
    REPO,
    Run,
    fresh_dir,
    gb,
    job_env,
    noop_workflow,
    record,
    run_tracked,
    snakemake_cmd,
)
from generate import NERSC_DEVICE, generate_big  # noqa: E402

CLI_GOAL, WORKFLOW_GOAL = 1.5, 3.0
ROOFLINE = str(Path(PY).parent / "roofline")  # the console script, as the README writes the command

# The efficient way to write it in polars: a lazy scan of the four columns it needs, the values'
# thousands separators stripped, summed per (kernel, metric) with the launch count, then pivoted to
# one row per kernel (units as written: the peer converts none).
PEER = '''
import sys
import polars as pl
values = (
    pl.scan_csv(sys.argv[1], schema_overrides={"ID": pl.Int64, "Metric Value": pl.Utf8})
    .select("ID", "Kernel Name", "Metric Name",
            pl.col("Metric Value").str.replace_all(",", "").cast(pl.Float64, strict=False))
)
sums = values.group_by("Kernel Name", "Metric Name").agg(pl.col("Metric Value").sum(), pl.col("ID").n_unique())
per_kernel = sums.collect().pivot(on="Metric Name", index="Kernel Name", values="Metric Value")
per_kernel.write_parquet(sys.argv[2])
print(len(per_kernel))
'''

# The same for a wide export, whose metrics are already one column each per launch: the header read
# for the metric names, the units row skipped, every metric's thousands separators stripped, summed
# per kernel with the launch count.
PEER_WIDE = '''
import sys
import polars as pl
header = pl.read_csv(sys.argv[1], n_rows=0).columns
metrics = [c for c in header if "__" in c]
values = (
    pl.scan_csv(sys.argv[1], skip_rows_after_header=1, infer_schema=False)
    .select("ID", "Kernel Name",
            *(pl.col(c).str.replace_all(",", "", literal=True).cast(pl.Float64, strict=False) for c in metrics))
)
per_kernel = values.group_by("Kernel Name").agg(pl.col(metrics).sum(), pl.col("ID").n_unique()).collect()
per_kernel.write_parquet(sys.argv[2])
print(len(per_kernel))
'''

PEERS = {"long": PEER, "wide": PEER_WIDE}
KINDS = ("long", "wide")


def leaves(seconds: float) -> str:
    """What a goal leaves, said plainly when it leaves nothing."""
    return f"{seconds:.2f} s" if seconds > 0 else f"nothing ({seconds:+.2f} s)"


def checked(run: Run, what: str) -> Run:
    if run.rc != 0:
        raise SystemExit(f"{what} failed:\n{run.text[-3000:]}")
    return run


def export(kind: str) -> tuple[Path, str | None]:
    """The generated export of ``kind`` and the device to name for it (None: the file records it)."""
    if kind == "long":
        return generate_big(BENCH_TMP / "big"), NERSC_DEVICE
    return generate_big(BENCH_TMP / "wide-100k", 100_000, 5000, kind="wide"), None


def measure(kind: str, repeat: int, workflow: bool, env: dict) -> tuple[dict[str, list[Run]], Path]:
    """Every command of one export, ``repeat`` times each, alternately."""
    path, device = export(kind)
    peer_script = BENCH_TMP / f"export-peer-{kind}.py"
    peer_script.write_text(PEERS[kind])
    runs: dict[str, list[Run]] = {}
    show = [ROOFLINE, "show", str(path), *(["--device", device] if device else []), "--format", "json"]
    for i in range(repeat):
        runs.setdefault("peer", []).append(checked(run_tracked(
            [PY, str(peer_script), str(path), str(BENCH_TMP / f"export-peer-{kind}.parquet")], env=env), "the peer"))
        runs.setdefault("cli", []).append(checked(run_tracked(show, cwd=BENCH_TMP, env=env), "roofline show"))
        said = (f"{kind} run {i + 1}: polars {runs['peer'][-1].wall_s:.2f} s, "
                f"roofline show {runs['cli'][-1].wall_s:.2f} s")
        if workflow:
            chain = noop_workflow(BENCH_TMP / "export-noop", 1)
            runs.setdefault("noop", []).append(checked(run_tracked(
                snakemake_cmd(chain / "Snakefile", chain, None, "data/kernels/app_000.parquet"), cwd=chain, env=env),
                "the no-op workflow"))
            # the peer as the parse job: its per-kernel table where the parse job writes the counters
            peer_as_job = (f"{shlex.quote(PY)} {shlex.quote(str(peer_script))} {shlex.quote(str(path))} "
                           "{output.c:q}; cp {input} {output.d}")
            chain = noop_workflow(BENCH_TMP / "export-peer-job", 1, parse_shell=peer_as_job)
            runs.setdefault("peer_job", []).append(checked(run_tracked(
                snakemake_cmd(chain / "Snakefile", chain, None, "data/kernels/app_000.parquet"), cwd=chain, env=env),
                "the workflow with the peer as its parse job"))
            work = fresh_dir(BENCH_TMP / "export-workflow")
            config = work / "config.yaml"
            named = f", device: '{device}'" if device else ""
            config.write_text(f"# benchmarks: one huge export (generated)\napps:\n  big: {{report: {path}{named}}}\n")
            runs.setdefault("workflow", []).append(checked(run_tracked(
                snakemake_cmd(REPO / "Snakefile", work, config, "--keep-going", "data/kernels/big.parquet"),
                cwd=work, env=env), "the workflow"))
            said += (f", the workflow {runs['workflow'][-1].wall_s:.2f} s (with jobs that do nothing "
                     f"{runs['noop'][-1].wall_s:.2f} s, with the peer as its parse job "
                     f"{runs['peer_job'][-1].wall_s:.2f} s)")
        print(said, flush=True)
    return runs, path


def best(runs: list[Run]) -> tuple[float, int]:
    """The least time and the least peak memory (largest process RSS) of a command's runs."""
    return min(r.wall_s for r in runs), min(r.max_proc_rss for r in runs)


def verdict(ratio: float, goal: float) -> str:
    return f"<= {goal:g}x: " + ("met" if ratio <= goal else "**not met**")


def kind_rows(kind: str, runs: dict[str, list[Run]], path: Path) -> tuple[list[list[str]], list[str], bool]:
    """The table rows of one export, its notes and whether its goals are met."""
    label = f"{kind} ({path.stat().st_size / 1e6:.0f} MB)"
    peer_s, peer_rss = best(runs["peer"])
    cli_s, cli_rss = best(runs["cli"])
    device = " --device ..." if kind == "long" else ""
    time_ratio, rss_ratio = cli_s / peer_s, cli_rss / peer_rss
    ok = time_ratio <= CLI_GOAL and rss_ratio <= CLI_GOAL
    rows = [
        [label, "polars: read + sum per kernel" + (" + pivot" if kind == "long" else "") + " (peer)",
         f"{peer_s:.2f} s", "1.00x", gb(peer_rss), "1.00x", ""],
        [label, f"ours: `roofline show {path.name}{device} --format json`", f"{cli_s:.2f} s", f"{time_ratio:.2f}x",
         gb(cli_rss), f"{rss_ratio:.2f}x",
         f"time {verdict(time_ratio, CLI_GOAL)}; memory {verdict(rss_ratio, CLI_GOAL)}"],
    ]
    notes = []
    if "workflow" in runs:
        flow_s, flow_rss = best(runs["workflow"])
        noop_s, noop_rss = best(runs["noop"])
        floor_s, floor_rss = best(runs["peer_job"])
        ratio = flow_s / peer_s
        ok = ok and ratio <= WORKFLOW_GOAL
        rows += [
            [label, "ours: `snakemake --cores 2 data/kernels/big.parquet` (parse, ceilings and app jobs)",
             f"{flow_s:.2f} s", f"{ratio:.2f}x", gb(flow_rss), f"{flow_rss / peer_rss:.2f}x",
             "time " + verdict(ratio, WORKFLOW_GOAL)],
            [label, "Snakemake alone: the same three jobs doing nothing", f"{noop_s:.2f} s", f"{noop_s / peer_s:.2f}x",
             gb(noop_rss), "", ""],
            [label, "Snakemake running the peer's script as its parse job, the other two doing nothing",
             f"{floor_s:.2f} s", f"{floor_s / peer_s:.2f}x", gb(floor_rss), "",
             "the least a workflow of jobs takes for the peer's work alone"],
        ]
        notes.append(f"{kind}: the workflow goal leaves {leaves(WORKFLOW_GOAL * peer_s - noop_s)} beyond Snakemake "
                     f"alone to read, derive, classify and write the four tables and the page; ours spends "
                     f"{flow_s - noop_s:.2f} s on them (the jobs' own start included).")
    return rows, notes, ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one run each")
    parser.add_argument("--only", nargs="+", choices=KINDS, default=list(KINDS), help="these exports only")
    parser.add_argument("--no-workflow", action="store_true", help="the command line only, not the workflow")
    parser.add_argument("--no-record", action="store_true", help="print only; leave README.md alone")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeat = 1
    env = job_env(True)
    rows, notes, met = [], [], True
    for kind in args.only:
        runs, path = measure(kind, args.repeat, not args.no_workflow, env)
        kind_row, kind_notes, ok = kind_rows(kind, runs, path)
        rows += kind_row
        notes += kind_notes
        met = met and ok
        for row in kind_row[:3]:
            print(" | ".join(row))
    notes.insert(0, (
        f"100k launches, 5,000 kernels each (`generate.py big`, long and `--kind wide`); every command a fresh "
        f"process, run alternately; best time and least peak memory (the largest process's RSS) of {args.repeat} "
        "runs each. Ours includes its interpreter start (the workflow: Snakemake's start and three jobs: parse, "
        "ceilings, the app's analysis), the peer its own; the peer computes no units, recipes, ceilings or "
        f"verdicts. Goals: `roofline show` <= {CLI_GOAL:g}x the peer's time and peak memory, the workflow "
        f"<= {WORKFLOW_GOAL:g}x its time: {'met' if met else '**not met**'}."))
    print("\n".join(notes))
    if not args.no_record and (set(args.only) != set(KINDS) or args.no_workflow):
        print("not recorded: part of the measurements only (--only, --no-workflow)")
    elif not args.no_record:
        record("bench_export", "One huge export, from the command line and through the workflow, vs polars",
               ["export", "what", "time", "/ peer", "largest process RSS", "/ peer", "goal"], rows, notes)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
