"""Shared helpers of the benchmark scripts: tmp workflow copies, tracked runs, the README figures.

Nothing here writes into the repository except :func:`record`, which rewrites one marked block of
``benchmarks/README.md`` ("Last figures"). Generated data and work folders live under
``$ROOFLINE_BENCH_TMP`` (default ``/tmp/roofline-bench``).
"""

from __future__ import annotations

import ctypes
import datetime
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import psutil

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
BENCH_TMP = Path(os.environ.get("ROOFLINE_BENCH_TMP", "/tmp/roofline-bench"))
README = REPO / "benchmarks" / "README.md"
PYCACHE = BENCH_TMP / "pycache"
WORKFLOW_PARTS = ("Snakefile", "workflow", "roofline", "config")


def fresh_dir(path: Path) -> Path:
    """An empty folder (removed first if present); refuses anything outside BENCH_TMP or /tmp."""
    path = Path(path).resolve()
    if not (str(path).startswith(str(BENCH_TMP.resolve())) or str(path).startswith("/tmp/")):
        raise ValueError(f"refusing to empty {path}: benchmark folders live under {BENCH_TMP} or /tmp")
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


# The workflow's DAG with jobs that copy a few bytes: a parse job per app, the ceilings checkpoint
# (its output byte-identical, as when a changed app moves no roof), a job per app after it, the
# report and the judging beside it, the trends page after both, the status; the rate limiter lifted
# and the workflow's own profile, as in ours (workflow/rules/*.smk has the real rules).
NOOP_SNAKEFILE = """# benchmarks/_common.py: the workflow's shape, jobs that do nothing (generated)
import sys
sys.path.insert(0, {repo!r})
from roofline.jobs.rate_limit import lift_default_rate_limit
APPS = [f"app_{{i:03d}}" for i in range({n})]
rule all:
    input: "reports/summary.html", "reports/trends.html", "reports/status.json"
rule parse:
    localrule: True
    input: "inputs/{{app}}.csv"
    output: c="data/counters/{{app}}.parquet", d="data/diagnostics/{{app}}.parse.parquet"
    shell: {parse_shell!r}
checkpoint ceilings:
    localrule: True
    input: expand("data/counters/{{app}}.parquet", app=APPS)
    output: "data/ceilings/devices.parquet"
    shell: "echo unchanged > {{output}}"
rule classify_app:
    localrule: True
    input: c="data/counters/{{app}}.parquet", d="data/diagnostics/{{app}}.parse.parquet",
           ceilings=lambda wildcards: checkpoints.ceilings.get().output[0]
    output: k="data/kernels/{{app}}.parquet", c="data/classified/{{app}}.parquet", p="reports/apps/{{app}}.html"
    shell: "cp {{input.c}} {{output.k}}; cp {{input.c}} {{output.c}}; cp {{input.c}} {{output.p}}"
rule report:
    localrule: True
    input: expand("data/kernels/{{app}}.parquet", app=APPS)
    output: "reports/summary.html", "reports/assets/charts.js"
    shell: "cat {{input}} > {{output[0]}}; touch {{output[1]}}"
rule track_history:
    localrule: True
    input: expand("data/kernels/{{app}}.parquet", app=APPS), expand("data/counters/{{app}}.parquet", app=APPS)
    output: "reports/regressions.json"
    shell: "cat {{input}} > {{output}}"
rule trends_page:
    localrule: True
    input: "reports/regressions.json", "reports/assets/charts.js"
    output: "reports/trends.html"
    shell: "cp {{input[0]}} {{output}}"
rule status:
    localrule: True
    input: expand("data/diagnostics/{{app}}.parse.parquet", app=APPS)
    output: "reports/status.json"
    shell: "cat {{input}} > {{output}}"
onstart:
    lift_default_rate_limit(workflow)
"""


NOOP_PARSE = "cp {input} {output.c}; cp {input} {output.d}"


def noop_workflow(work: Path, n: int, parse_shell: str = NOOP_PARSE) -> Path:
    """A fresh folder ``work`` with :data:`NOOP_SNAKEFILE` for ``n`` apps, its inputs and the
    workflow's own profile: what Snakemake alone costs for the workflow's DAG. ``parse_shell`` is the
    parse jobs' command (Snakemake's ``shell:`` text; it must write ``{output.c}`` and ``{output.d}``)."""
    work = fresh_dir(work)
    (work / "Snakefile").write_text(NOOP_SNAKEFILE.format(repo=str(REPO), n=n, parse_shell=parse_shell))
    profile = work / "workflow" / "profiles" / "default"
    profile.mkdir(parents=True)
    shutil.copy2(REPO / "workflow" / "profiles" / "default" / "config.yaml", profile / "config.yaml")
    (work / "inputs").mkdir()
    for i in range(n):
        (work / "inputs" / f"app_{i:03d}.csv").write_text(f"app {i}\n")
    return work


def copy_workflow(dest: Path) -> Path:
    """Copy the repo's Snakefile, workflow/, roofline/ and config/ into ``dest`` (a tmp folder), with
    the ``profiles`` link of a checkout."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".*.tmp")
    for part in WORKFLOW_PARTS:
        source = REPO / part
        if source.is_dir():
            shutil.copytree(source, dest / part, ignore=ignore, dirs_exist_ok=True)
        else:
            shutil.copy2(source, dest / part)
    # As in a checkout: Snakemake finds the default workflow profile (force-use-threads etc.) here.
    if not (dest / "profiles").exists():
        (dest / "profiles").symlink_to("workflow/profiles")
    return dest


def job_env(bytecode: bool) -> dict[str, str]:
    """The environment of a measured run.

    ``bytecode=False`` is this environment as it is (here ``PYTHONDONTWRITEBYTECODE=1`` and a venv
    installed without ``.pyc`` files: every job compiles pandas & co. from source). ``bytecode=True``
    lets Python cache bytecode under ``BENCH_TMP/pycache`` (``PYTHONPYCACHEPREFIX``), as a normal
    install (``uv sync --compile-bytecode``) would, without writing into the venv.
    """
    env = dict(os.environ)
    env.pop("PYTHONPYCACHEPREFIX", None)
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    # The jobs run `python -m roofline.jobs <stage>`: make sure `python` is this venv's interpreter.
    env["PATH"] = f"{Path(PY).parent}{os.pathsep}{env.get('PATH', '')}"
    # The jobs' warm server (roofline/jobs/server.py) ends soon after a run's last job, so that every
    # measured run starts without one, as a user's first run does; its time is counted (SUBREAPER).
    env["ROOFLINE_JOB_SERVER_IDLE"] = "3"
    return env


def warm_bytecode(env: dict[str, str]) -> None:
    """Fill the bytecode cache (not timed) so that measured runs start as a normal install would."""
    from roofline.jobs.stages import STAGES

    modules = ", ".join(["roofline.jobs.runner", "roofline.jobs.client", *(s.module for s in STAGES.values()),
                         "snakemake.cli"])
    subprocess.run([PY, "-c", f"import {modules}"], env=env, cwd=REPO, check=True, capture_output=True)


@dataclass
class Run:
    """A finished command: wall time, memory (sampled tree sum and exact per-process max), output."""

    cmd: list[str]
    rc: int
    wall_s: float
    peak_tree_rss: int  # bytes, the largest sum of RSS over the process tree (sampled)
    max_proc_rss: int  # bytes, largest RSS of any one process of the tree (exact, from wait4)
    cpu_s: float  # user + system time of the tree
    stdout: str
    stderr: str
    samples: int = 0

    @property
    def text(self) -> str:
        return self.stdout + self.stderr


def _subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux), so their CPU time counts.

    The workflow's stage jobs fork from a server process (roofline/jobs/server.py) that leaves the
    job that started it and outlives snakemake by a moment; without this it would be reparented to
    init and its CPU time and memory (those of every job it ran) would be missing from the figures."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(36, 1) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


SUBREAPER = _subreaper()


def _reap_orphans(usage):
    """``usage`` (of the command) plus that of descendants reparented here, once they have exited."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # RUSAGE_CHILDREN's maxrss is the largest of every child ever reaped here: it is one of this
    # run's orphans only if reaping them raised it.
    orphan_peak = after.ru_maxrss if after.ru_maxrss > before.ru_maxrss else 0
    return SimpleNamespace(
        ru_utime=usage.ru_utime + after.ru_utime - before.ru_utime,
        ru_stime=usage.ru_stime + after.ru_stime - before.ru_stime,
        ru_maxrss=max(usage.ru_maxrss, orphan_peak),
    )


def run_tracked(cmd: list[str], cwd: Path | None = None, env: dict | None = None, interval: float = 0.05,
                timeout: float = 3600) -> Run:
    """Run ``cmd``, sampling the RSS of its whole process tree every ``interval`` seconds."""
    out_path = BENCH_TMP / f".run-{os.getpid()}-{time.monotonic_ns()}"
    BENCH_TMP.mkdir(parents=True, exist_ok=True)
    with open(f"{out_path}.out", "w") as out, open(f"{out_path}.err", "w") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err)
        peak, samples, done = 0, 0, threading.Event()

        def sample() -> None:
            nonlocal peak, samples
            # every descendant of this process: the command's tree and, with SUBREAPER, what left it
            # (the jobs' server and the children it forks for them)
            me = psutil.Process()
            while not done.is_set():
                total = 0
                try:
                    procs = me.children(recursive=True)
                except psutil.NoSuchProcess:
                    break
                for p in procs:
                    try:
                        total += p.memory_info().rss
                    except (psutil.NoSuchProcess, psutil.AccessDenied):
                        pass
                peak = max(peak, total)
                samples += 1
                done.wait(interval)

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
            time.sleep(0.01)
        wall = time.perf_counter() - start
        done.set()
        thread.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        usage = _reap_orphans(usage)
    stdout = Path(f"{out_path}.out").read_text(errors="replace")
    stderr = Path(f"{out_path}.err").read_text(errors="replace")
    for suffix in (".out", ".err"):
        Path(f"{out_path}{suffix}").unlink()
    return Run(cmd, proc.returncode, wall, peak, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime,
               stdout, stderr, samples)


# How Snakemake is started: "console" is the README's `snakemake` command (the venv's console
# script), "module" is `python -m snakemake`; the benchmarks measure the first, as users type it.
LAUNCHERS = {"console": [str(Path(PY).parent / "snakemake")], "module": [PY, "-m", "snakemake"]}


def snakemake_cmd(snakefile: Path, workdir: Path, configfile: Path | None, *extra: str, cores: int = 2,
                  launcher: str = "console") -> list[str]:
    cmd = [*LAUNCHERS[launcher], "--snakefile", str(snakefile), "--directory", str(workdir), "--cores", str(cores)]
    if configfile is not None:
        cmd += ["--configfile", str(configfile)]
    return cmd + list(extra)


_JOB = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):\s*$")
_WILDCARDS = re.compile(r"^\s+wildcards: (.*)$")


def jobs_in(text: str) -> list[str]:
    """Jobs Snakemake announced in its output (run or ``-n``), as ``rule`` or ``rule:app``; sorted.

    The ``all`` target rule is left out.
    """
    jobs: list[str] = []
    current: str | None = None
    for line in text.splitlines():
        match = _JOB.match(line)
        if match:
            if current:
                jobs.append(current)
            current = match.group(1)
            continue
        if current and (wild := _WILDCARDS.match(line)):
            values = dict(item.split("=", 1) for item in wild.group(1).split(", ") if "=" in item)
            current = f"{current}:{values.get('app', wild.group(1))}"
            jobs.append(current)
            current = None
        elif current and not line.startswith(" "):
            jobs.append(current)
            current = None
    if current:
        jobs.append(current)
    return sorted(j for j in jobs if j != "all")


_NODE = re.compile(r'^\s*(\d+)\[label = "([^"]+)"')
_EDGE = re.compile(r"^\s*(\d+) -> (\d+)")


def rule_graph(text: str) -> dict[str, set[str]]:
    """Rule -> rules that consume its outputs, from ``snakemake --rulegraph`` (DOT) output."""
    names: dict[str, str] = {}
    edges: list[tuple[str, str]] = []
    for line in text.splitlines():
        if node := _NODE.match(line):
            names[node.group(1)] = node.group(2)
        elif edge := _EDGE.match(line):
            edges.append((edge.group(1), edge.group(2)))
    graph: dict[str, set[str]] = {name: set() for name in names.values()}
    for a, b in edges:
        graph[names[a]].add(names[b])
    return graph


def downstream(graph: dict[str, set[str]], start: set[str]) -> set[str]:
    """``start`` and every rule that depends on it, transitively."""
    seen, todo = set(start), list(start)
    while todo:
        for child in graph.get(todo.pop(), ()):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen


def expected_jobs(graph: dict[str, set[str]], cold_jobs: list[str], changed: set[str], apps: list[str],
                  same_output: set[str] = frozenset()) -> list[str]:
    """Jobs a rerun should execute when rules ``changed`` rerun for ``apps``: their per-app dependents
    for those apps, every aggregate (no-wildcard) rule downstream except ``all``, and for every app
    the per-app rules downstream of such an aggregate (the device ceilings feed every classify),
    unless the aggregate is in ``same_output``: a checkpoint whose outputs came out byte-identical,
    after which Snakemake reruns only what changed for other reasons."""
    per_app = {j.split(":")[0] for j in cold_jobs if ":" in j}
    aggregate = {j for j in cold_jobs if ":" not in j}
    every_app = sorted({j.split(":", 1)[1] for j in cold_jobs if ":" in j})
    rules = downstream(graph, changed) - {"all"}
    fanning = (rules & aggregate) - set(same_output)
    after_aggregate = downstream(graph, fanning) - fanning if fanning else set()
    jobs = [f"{r}:{a}" for r in (rules & per_app) - after_aggregate for a in apps]
    jobs += [f"{r}:{a}" for r in after_aggregate & per_app for a in every_app]
    return sorted(jobs + [r for r in rules & aggregate])


def median_time(fn, repeat: int = 3) -> float:
    """Median wall time of ``fn()`` over ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def best_time(fn, repeat: int = 3):
    """(best wall time, last result) of ``fn()`` over ``repeat`` calls."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def load() -> str:
    """The 1-minute load average and core count, for the record (the machine is shared)."""
    return f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def record(name: str, title: str, header: list[str], rows: list[list[object]], notes: list[str] | None = None) -> None:
    """Replace the ``name`` block under "Last figures" in benchmarks/README.md with a new table."""
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    lines = [
        f"<!-- figures:{name} -->",
        f"#### {title}",
        "",
        f"_{stamp}, {platform.node()}, {load()}; written by `benchmarks/{name}.py`._",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(str(c) for c in row) + " |" for row in rows),
    ]
    if notes:
        lines += ["", *notes]
    lines.append(f"<!-- /figures:{name} -->")
    block = "\n".join(lines)
    text = README.read_text(encoding="utf-8") if README.exists() else "# Benchmarks\n\n## Last figures\n"
    pattern = re.compile(rf"<!-- figures:{re.escape(name)} -->.*?<!-- /figures:{re.escape(name)} -->", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _m: block, text)
    else:
        marker = "<!-- /last-figures -->"
        if marker in text:
            text = text.replace(marker, f"{block}\n\n{marker}")
        else:
            text = text.rstrip("\n") + f"\n\n{block}\n"
    README.write_text(text, encoding="utf-8")


@dataclass
class Verdict:
    """A goal and whether a figure meets it, for the tables."""

    goal: str
    ok: bool
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{'met' if self.ok else '**not met**'} ({self.goal})"
