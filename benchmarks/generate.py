"""Generate large, realistic, seeded input sets for the benchmarks (never real measurements).

Everything is derived from the structure of the real fixtures in ``../shared/fixtures/real``:

- **long** (NERSC style, ``nersc-long``): the column layout, the 21 metrics, their units and number
  formats, and the per-launch values of the A100 dropout export
  (``a100-dropout-nersc-metrics-csv/nsight162.csv``); each generated kernel starts from one real
  launch, scaled in size and arithmetic intensity, each launch jittered;
- **wide** (``ncu --csv --page raw``, ``ncu-csv-raw``): one header row of metric names and one units
  row, then one row per launch, with the complete metric set (names, units, values) of a real
  ``.ncu-rep`` launch read with ``ncu_report`` (A10G ``--set roofline``, A100 PCIe, V100, RTX 3080,
  H100 "full" sets);
- **what-if** YAML tables shaped like ``data/examples/textbook.yaml`` (catalog GPUs and ``machines:``).

Kernel names are the fixtures' real names with their template arguments and namespaces varied;
launch counts per kernel follow a Zipf law (a few hot kernels, a long tail). All randomness comes
from ``numpy.random.default_rng(seed)``: the same arguments give the same bytes.

Every generated folder holds a ``GENERATED.md`` sidecar naming each file, the generator, the seed and
the fixtures it was derived from; YAML files also say so in their first line. CSV files carry no
marker line so that they read exactly like an ncu export (a line before the header would send
``read_ncu_csv`` down its slower re-encoding path).

Usage::

    python benchmarks/generate.py apps --out /tmp/rl-bench/apps --apps 200 --launches 2000
    python benchmarks/generate.py big --out /tmp/rl-bench/big --launches 100000 --kernels 5000

``apps`` writes ``inputs/app_NNN.{csv,yaml}`` and ``manifest.json``; :func:`write_config` writes a
workflow config for the first N apps of it. A folder whose manifest matches the arguments is reused.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
REAL = REPO.parent / "shared" / "fixtures" / "real"
NERSC_CSV = REAL / "a100-dropout-nersc-metrics-csv" / "nsight162.csv"
WIDE_SOURCES = {  # fixture report -> weight among wide apps
    "a10g-sgemm-rooflineset-ncu2023.1/profile_output.ncu-rep": 3,
    "a100pcie-selfjoin-full-ncu2021.2/profile.out.ncu-rep": 2,
    "v100-kripke-full-ncu2023.3/output.ncu-rep": 1,
    "rtx3080-sgemm-vs-cublas-full-ncu2023.2/gemm_v9.ncu-rep": 2,
    "h100pcie-rmsnorm-full-ncu2025.1/2025-04-21_v1.ncu-rep": 1,
}
# The NERSC export records no GPU; its DRAM percentages imply an 80 GB A100 (roofline.md §5).
NERSC_DEVICE = "NVIDIA A100-SXM4-80GB"
GENERATOR = "benchmarks/generate.py"
VERSION = 2  # bump when the output of a given seed changes
MIX = {"long": 0.5, "wide": 0.35, "what-if": 0.15}


# -- templates from the real fixtures --------------------------------------------------------------


@dataclass
class LongTemplate:
    """The NERSC export: metric names, units, value formats and the real per-launch values."""

    metrics: list[str]
    units: list[str]
    decimals: list[int]  # 0: integer text, 2: two decimals
    values: np.ndarray  # launches x metrics
    kernel: str
    ident: dict[str, str]


@dataclass
class WideTemplate:
    """One real report launch: every scalar metric (name, unit, value) as ncu's raw page lists it."""

    source: str
    names: list[str]
    units: list[str]
    launches: list[list[object]]  # per real launch, a value per metric (float or str)
    kernels: list[str]
    scaled: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # extensive counters
    varying: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # vary per launch
    rates: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # FLOP rates (intensity)


def _number(text: str) -> float:
    return float(text.replace(",", "")) if text.strip() else math.nan


def nersc_template(path: Path = NERSC_CSV) -> LongTemplate:
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    header, body = rows[0], rows[1:]
    col = {name: i for i, name in enumerate(header)}
    metrics: list[str] = []
    units: dict[str, str] = {}
    decimals: dict[str, int] = {}
    per_launch: dict[str, dict[str, float]] = {}
    for row in body:
        name = row[col["Metric Name"]]
        if name not in units:
            metrics.append(name)
            units[name] = row[col["Metric Unit"]]
        if "." in row[col["Metric Value"]].replace(",", "").split("e")[0]:
            decimals[name] = 2
        per_launch.setdefault(row[col["ID"]], {})[name] = _number(row[col["Metric Value"]])
    values = np.array([[launch.get(m, np.nan) for m in metrics] for launch in per_launch.values()])
    first = body[0]
    ident = {k: first[col[k]] for k in ("Process ID", "Process Name", "Host Name", "Context", "Stream", "Section Name")}
    return LongTemplate(
        metrics, [units[m] for m in metrics], [decimals.get(m, 0) for m in metrics], values, first[col["Kernel Name"]],
        ident,
    )


_SCALED_SUFFIX = (".sum", ".avg", ".max", ".min")
_NOT_SCALED = ("per_second", "pct", "peak", "per_cycle", "ratio")  # in the part after the first "."
_VARYING = ("gpu__time_duration", "sm__cycles_elapsed", "smsp__cycles_elapsed", "gpc__cycles_elapsed", "dram__bytes")


def wide_template(relative: str) -> WideTemplate:
    """The metric set of one real report (needs NVIDIA's ``ncu_report``, a project dependency)."""
    import ncu_report

    path = REAL / relative
    context = ncu_report.load_report(str(path))
    actions = [
        context.range_by_idx(r).action_by_idx(a)
        for r in range(context.num_ranges())
        for a in range(context.range_by_idx(r).num_actions())
    ]
    names: list[str] = []
    units: list[str] = []
    for name in sorted(actions[0].metric_names()):
        metric = actions[0].metric_by_name(name)
        if ":" in name or metric.num_instances() > 0 or not metric.has_value():
            continue
        names.append(name)
        units.append(metric.unit())
    launches = []
    for action in actions:
        values: list[object] = []
        for name in names:
            metric = action.metric_by_name(name)
            if metric is None or not metric.has_value():
                values.append("")
            elif metric.kind() == ncu_report.IMetric.ValueKind_STRING:
                values.append(metric.as_string())
            else:
                values.append(metric.as_double())
        launches.append(values)
    kernels = [a.name(ncu_report.IAction.NameBase_DEMANGLED) for a in actions]
    numeric = np.array([isinstance(v, float) for v in launches[0]])
    plain = np.array(
        [
            not n.startswith(("device__", "launch__"))
            and not n.partition(".")[0].endswith("throughput")
            and not any(s in n.partition(".")[2] for s in _NOT_SCALED)
            for n in names
        ]
    )
    scaled = numeric & plain & np.array([n.endswith(_SCALED_SUFFIX) for n in names])
    varying = scaled & np.array([n.startswith(_VARYING) for n in names])
    # the FLOP rates a kernel achieves vary with it; the hardware's peaks (.peak_sustained) do not
    rates = numeric & np.array([(n.endswith(".per_cycle_elapsed") and "_pred_on" in n or "ops_path" in n)
                                and "peak" not in n.partition(".")[2] for n in names])
    rates &= ~scaled
    return WideTemplate(relative, names, units, launches, kernels, scaled, varying, rates)


# -- kernel names and launch plans -----------------------------------------------------------------

_TYPES = ["float", "double", "__half", "__nv_bfloat16", "int", "unsigned int", "long", "c10::Half", "c10::BFloat16"]
_TILES = ["1", "2", "4", "8", "16", "32", "64", "128", "256", "512"]
_OPS = [
    "gemm", "gemv", "softmax_warp_forward", "layer_norm_kernel", "rms_norm", "reduce_kernel", "elementwise_kernel",
    "vectorized_elementwise_kernel", "fmha_fwd", "flash_fwd_kernel", "conv2d_fprop", "scan_kernel", "spmv_csr",
    "stencil7", "transpose", "cat_batched_copy", "index_select", "embedding_bag", "nll_loss", "adam_update",
]
_NAMESPACES = ["at::native::", "at::native::(anonymous namespace)::", "cutlass::", "cub::", "", "", "flash::", "ns_"]


def seed_kernel_names() -> list[str]:
    """Real kernel names of the fixtures (CSV exports only: no ncu_report needed)."""
    names = [nersc_template().kernel]
    for path in sorted(REAL.glob("rtx5090-llm-kernels-csv-ncu2025/*/ncu.metrics.csv")):
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle)
            header = next(reader)
            names.append(next(reader)[header.index("Kernel Name")])
    return names


def _vary(name: str, rng: np.random.Generator) -> str:
    """A real name with its template arguments and leading identifier redrawn."""
    out, token = [], []
    for ch in name:
        if ch in "<>, ()":
            word = "".join(token)
            if word.isdigit():
                word = _TILES[rng.integers(len(_TILES))]
            elif word in _TYPES or word in ("double", "float"):
                word = _TYPES[rng.integers(len(_TYPES))]
            out.append(word)
            out.append(ch)
            token = []
        else:
            token.append(ch)
    out.append("".join(token))
    return "".join(out)


def kernel_names(n: int, rng: np.random.Generator, seeds: list[str]) -> list[str]:
    """``n`` distinct kernel names: varied real names and synthetic library-style ones."""
    names: dict[str, None] = {}
    attempt = 0
    while len(names) < n:
        attempt += 1
        if rng.random() < 0.6:
            name = _vary(seeds[rng.integers(len(seeds))], rng)
        else:
            ns = _NAMESPACES[rng.integers(len(_NAMESPACES))]
            op = _OPS[rng.integers(len(_OPS))]
            args = ", ".join(
                _TYPES[rng.integers(len(_TYPES))] if rng.random() < 0.5 else _TILES[rng.integers(len(_TILES))]
                for _ in range(rng.integers(1, 7))
            )
            name = f"void {ns}{op}<{args}>({_TYPES[rng.integers(len(_TYPES))]} const*, int)"
        if name in names or attempt > 20 * n:
            name = name.replace("(", f"_v{len(names)}(", 1) if "(" in name else f"{name}_v{len(names)}"
        names[name] = None
    return list(names)


def launch_plan(launches: int, kernels: int, rng: np.random.Generator) -> np.ndarray:
    """Kernel index of each launch: every kernel at least once, then Zipf-distributed, shuffled."""
    kernels = min(kernels, launches)
    weights = 1.0 / np.arange(1, kernels + 1) ** 1.1
    rest = rng.choice(kernels, size=launches - kernels, p=weights / weights.sum())
    plan = np.concatenate([np.arange(kernels), rest])
    rng.shuffle(plan)
    return plan


# -- writers ---------------------------------------------------------------------------------------


def _q(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def _fmt(value: float, decimals: int) -> str:
    if not np.isfinite(value):
        return ""
    return f"{value:,.{decimals}f}" if decimals else f"{round(value):,}"


def write_long_csv(path: Path, launches: int, kernels: int, rng: np.random.Generator, names: list[str]) -> None:
    """A NERSC-style long export: one row per (launch, metric), the real layout and formats."""
    t = nersc_template()
    plan = launch_plan(launches, kernels, rng)
    k = plan.max() + 1
    m = {name: i for i, name in enumerate(t.metrics)}
    base = t.values[rng.integers(len(t.values), size=k)].copy()  # a real launch per kernel
    size = np.exp(rng.normal(0.0, 1.6, size=k))  # work and traffic scale with the problem size
    extensive = np.array([u not in ("%", "cycle/second") for u in t.units])
    base[:, extensive] *= size[:, None]
    flop = [i for name, i in m.items() if "_pred_on" in name or "tensor" in name]
    base[:, flop] *= np.exp(rng.normal(0.0, 1.2, size=(k, 1)))  # arithmetic intensity varies by kernel
    fp64 = np.array(["_op_d" in t.metrics[i] for i in flop])
    to_fp32 = rng.random(k) < 0.4  # some kernels do their work in FP32 instead
    cols = np.array(flop)
    base[np.ix_(to_fp32, cols[~fp64])] += base[np.ix_(to_fp32, cols[fp64])].sum(axis=1, keepdims=True) / 3
    base[np.ix_(to_fp32, cols[fp64])] = 0.0
    values = base[plan] * np.exp(rng.normal(0.0, 0.03, size=(launches, len(t.metrics))))
    values[:, ~extensive] = base[plan][:, ~extensive] * np.exp(rng.normal(0.0, 0.01, size=(launches, 1)))
    pct = [i for i, u in enumerate(t.units) if u == "%"]
    values[:, pct] = np.minimum(values[:, pct], 99.0)
    cycles, clock = m.get("sm__cycles_elapsed.avg"), m.get("sm__cycles_elapsed.avg.per_second")
    if cycles is not None and clock is not None and "gpu__time_duration.sum" in m:
        values[:, m["gpu__time_duration.sum"]] = values[:, cycles] / values[:, clock] * 1e9
    texts = [[_fmt(v, t.decimals[j]) for v in values[:, j]] for j in range(len(t.metrics))]
    mid = f'{_q(t.ident["Context"])},{_q(t.ident["Stream"])},{_q(t.ident["Section Name"])},'
    head = f'{_q(t.ident["Process ID"])},{_q(t.ident["Process Name"])},{_q(t.ident["Host Name"])},'
    prefix = [head + _q(name) + "," for name in names[:k]]
    suffix = [f"{_q(name)},{_q(unit)}," for name, unit in zip(t.metrics, t.units)]
    start = 1668694406  # the fixture's capture time, 2022-Nov-17
    header = [
        "ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context", "Stream",
        "Section Name", "Metric Name", "Metric Unit", "Metric Value",
    ]
    with open(path, "w", encoding="utf-8", newline="") as out:
        out.write(",".join(_q(h) for h in header) + "\n")
        lines = []
        for i in range(launches):
            stamp = time.strftime("%Y-%b-%d %H:%M:%S", time.gmtime(start + i // 50))
            lead = f'"{i}",{prefix[plan[i]]}"{stamp}",{mid}'
            lines.extend(f'{lead}{suffix[j]}"{texts[j][i]}"\n' for j in range(len(suffix)))
            if len(lines) > 200_000:
                out.write("".join(lines))
                lines = []
        out.write("".join(lines))


def _wide_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if not np.isfinite(value):
        return ""
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.2f}" if abs(value) >= 100 else f"{value:.6g}"


def write_wide_csv(
    path: Path, launches: int, kernels: int, rng: np.random.Generator, names: list[str], t: WideTemplate
) -> None:
    """An ``ncu --csv --page raw`` export: header, units row, one row per launch, all metrics."""
    plan = launch_plan(launches, kernels, rng)
    k = plan.max() + 1
    col = {n: i for i, n in enumerate(t.names)}
    kernel_rows: list[list[str]] = []
    kernel_base: list[np.ndarray] = []
    ident: list[list[str]] = []
    device = next((str(v) for n, v in zip(t.names, t.launches[0]) if n == "device__attribute_display_name"), "")
    major = t.launches[0][col["device__attribute_compute_capability_major"]]
    minor = t.launches[0][col["device__attribute_compute_capability_minor"]]
    varying = np.flatnonzero(t.varying)
    for j in range(k):
        real = list(t.launches[rng.integers(len(t.launches))])
        size = math.exp(rng.normal(0.0, 1.4))
        intensity = float(np.clip(math.exp(rng.normal(-0.5, 0.8)), 0.02, 1.0))
        for i in np.flatnonzero(t.scaled):
            real[i] = float(real[i]) * size
        for i in np.flatnonzero(t.rates):
            real[i] = float(real[i]) * intensity
        block, grid = (
            [max(1.0, float(real[col[f"launch__{what}_dim_{a}"]])) for a in "xyz"]
            if f"launch__{what}_dim_x" in col
            else []
            for what in ("block", "grid")
        )
        if grid:
            grid[0] = max(1.0, round(grid[0] * size))
            real[col["launch__grid_dim_x"]] = grid[0]
            if "launch__grid_size" in col:
                real[col["launch__grid_size"]] = grid[0] * grid[1] * grid[2]
        kernel_rows.append([_q(_wide_text(v)) for v in real])
        kernel_base.append(np.array([float(real[i]) for i in varying]))
        dims = ["(" + ", ".join(f"{d:.0f}" for d in dim) + ")" if dim else "" for dim in (block, grid)]
        ident.append([names[j], "1", "7", *dims])
    # One factor per launch for its time (cycles, duration move together), another for its traffic.
    timing = np.array([not t.names[i].startswith("dram__") for i in varying])
    factors = np.exp(rng.normal(0.0, [0.02, 0.01], size=(launches, 2)))
    jitter = np.where(timing, factors[:, :1], factors[:, 1:])
    header = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
              "Grid Size", "Device", "CC", *t.names]
    with open(path, "w", encoding="utf-8", newline="") as out:
        out.write(",".join(_q(h) for h in header) + "\n")
        out.write(",".join(['""'] * 11 + [_q(u) for u in t.units]) + "\n")
        for i in range(launches):
            j = plan[i]
            row = kernel_rows[j]
            values = kernel_base[j] * jitter[i]
            row = row.copy()
            for pos, value in zip(varying, values):
                row[pos] = _q(_wide_text(float(value)))
            name, ctx, stream, block, grid = ident[j]
            cc = f"{major:.0f}.{minor:.0f}"
            lead = [str(i), "4242", "bench_app", "127.0.0.1", name, ctx, stream, block, grid, "0", cc]
            out.write(",".join([*(_q(x) for x in lead), *row]) + "\n")
    del device


# Catalog GPUs (roofline/data/gpus.yaml) and the datasheet peaks used to keep durations below the roofs:
# (fp32 FLOP/s, fp64 FLOP/s, DRAM B/s).
_WHAT_IF_GPUS = {
    "NVIDIA A100-SXM4-80GB": (19.5e12, 9.7e12, 2.039e12),
    "NVIDIA H100 80GB HBM3": (67e12, 34e12, 3.35e12),
    "NVIDIA GeForce RTX 4090": (82.6e12, 1.29e12, 1.008e12),
}
_WHAT_IF_MACHINE = ("bench-60T-2TB", (60e12, 30e12, 2e12))


def write_what_if(
    path: Path, launches: int, kernels: int, rng: np.random.Generator, names: list[str], seed: int
) -> None:
    """A what-if YAML table (textbook.yaml's shape): a machine, catalog GPUs, kernels with launches."""
    plan = launch_plan(launches, kernels, rng)
    counts = np.bincount(plan)
    lines = [
        f"# {GENERATOR} (seed {seed}): generated what-if table, not measured; shaped like data/examples/textbook.yaml",
        "machines:",
        f"  {_WHAT_IF_MACHINE[0]}: {{compute: {{fp32: 60.0e+12, fp64: 30.0e+12}}, memory: {{dram: 2.0e+12}}}}",
        "kernels:",
    ]
    gpus = list(_WHAT_IF_GPUS)
    for j, count in enumerate(counts):
        if rng.random() < 0.4:
            where, peaks = f"machine: {_WHAT_IF_MACHINE[0]}", _WHAT_IF_MACHINE[1]
        else:
            gpu = gpus[rng.integers(len(gpus))]
            where, peaks = f"gpu: {gpu}", _WHAT_IF_GPUS[gpu]
        fp32 = rng.random() < 0.7
        cls = "fp32" if fp32 else "fp64"
        nbytes = float(np.exp(rng.normal(20, 2.5)))
        flop = nbytes * float(np.exp(rng.normal(0.0, 2.0)))
        at_roof = max(nbytes / peaks[2], flop / peaks[0 if fp32 else 1])
        duration = at_roof / float(np.clip(np.exp(rng.normal(-0.7, 0.6)), 0.01, 0.97))
        name = names[j].replace("'", "''")
        lines.append(
            f"  - {{name: '{name}', {where}, flop: {{{cls}: {flop:.6e}}}, bytes: {{dram: {nbytes:.6e}}}, "
            f"duration_s: {duration:.6e}, launches: {int(count)}}}"
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# -- sets ------------------------------------------------------------------------------------------


def _sidecar(folder: Path, what: str, files: list[str], args: dict) -> None:
    text = [
        f"# Generated input set ({what})",
        "",
        f"Every file in this folder was written by `{GENERATOR}` with {json.dumps(args, sort_keys=True)}.",
        "These are synthetic benchmark inputs, not measurements: values are derived from the real fixtures",
        f"in {REAL} ({NERSC_CSV.name} and the reports {', '.join(WIDE_SOURCES)}) with a seeded RNG.",
        "",
        *[f"- {name}: generated" for name in files],
    ]
    (folder / "GENERATED.md").write_text("\n".join(text) + "\n", encoding="utf-8")


def _matches(folder: Path, args: dict) -> dict | None:
    manifest = folder / "manifest.json"
    if not manifest.exists():
        return None
    data = json.loads(manifest.read_text())
    if data.get("args") != args or not all(Path(a["path"]).exists() for a in data["apps"]):
        return None
    return data


def generate_apps(out: Path, apps: int, launches: int, seed: int = 7, kernels: int | None = None,
                  mix: dict[str, float] | None = None, force: bool = False) -> dict:
    """``apps`` applications of ``launches`` launches each, in ``out/inputs``; returns the manifest.

    App ``i`` depends only on (seed, i, launches, kernels, mix), so a folder generated with the same
    arguments and at least ``apps`` apps is reused (its first ``apps`` apps), and a smaller one is
    extended.
    """
    mix = mix or MIX
    kernels = kernels or max(5, launches // 20)
    args = {"launches": launches, "seed": seed, "kernels": kernels, "mix": mix, "version": VERSION}
    out = Path(out)
    inputs = out / "inputs"
    records: list[dict] = []
    manifest = out / "manifest.json"
    if not force and manifest.exists():
        data = json.loads(manifest.read_text())
        if data.get("args") == args and all(Path(a["path"]).exists() for a in data["apps"]):
            records = data["apps"]
    if len(records) >= apps:
        return {**data, "apps": records[:apps]}
    inputs.mkdir(parents=True, exist_ok=True)
    if not records:
        for old in inputs.iterdir():
            old.unlink()
    seeds = seed_kernel_names()
    wide_keys = list(WIDE_SOURCES)
    wide_weights = np.array([WIDE_SOURCES[k] for k in wide_keys], float)
    templates: dict[str, WideTemplate] = {}
    kinds = list(mix)
    probs = np.array([mix[k] for k in kinds], float)
    for a in range(len(records), apps):
        rng = np.random.default_rng([seed, a])
        kind = kinds[rng.choice(len(kinds), p=probs / probs.sum())]
        n_kernels = max(3, int(kernels * math.exp(rng.normal(0.0, 0.4))))
        names = kernel_names(n_kernels, rng, seeds)
        name = f"app_{a:03d}"
        if kind == "long":
            path = inputs / f"{name}.csv"
            write_long_csv(path, launches, n_kernels, rng, names)
            records.append({"app": name, "path": str(path), "kind": kind, "device": NERSC_DEVICE})
        elif kind == "wide":
            key = wide_keys[rng.choice(len(wide_keys), p=wide_weights / wide_weights.sum())]
            if key not in templates:
                templates[key] = wide_template(key)
            path = inputs / f"{name}.csv"
            write_wide_csv(path, launches, n_kernels, rng, names, templates[key])
            records.append({"app": name, "path": str(path), "kind": kind, "template": key})
        else:
            path = inputs / f"{name}.yaml"
            write_what_if(path, launches, n_kernels, rng, names, seed)
            records.append({"app": name, "path": str(path), "kind": kind})
        records[-1]["bytes"] = path.stat().st_size
    data = {"generator": GENERATOR, "generated": True, "args": args, "apps": records}
    manifest.write_text(json.dumps(data, indent=1) + "\n")
    _sidecar(inputs, f"{apps} apps x {launches} launches", [Path(r["path"]).name for r in records], args)
    return data


def generate_big(out: Path, launches: int = 100_000, kernels: int = 5000, seed: int = 11, force: bool = False,
                 kind: str = "long", template: str = "a10g-sgemm-rooflineset-ncu2023.1/profile_output.ncu-rep") -> Path:
    """One large export in ``out``: NERSC-style long CSV (default) or ``--page raw`` wide CSV."""
    args = {"launches": launches, "kernels": kernels, "seed": seed, "kind": kind, "version": VERSION}
    if kind == "wide":
        args["template"] = template
    out = Path(out)
    if not force and (data := _matches(out, args)):
        return Path(data["apps"][0]["path"])
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    names = kernel_names(kernels, rng, seed_kernel_names())
    if kind == "long":
        path = out / f"nersc_long_{launches // 1000}k.csv"
        write_long_csv(path, launches, kernels, rng, names)
    else:
        path = out / f"raw_wide_{launches // 1000}k.csv"
        write_wide_csv(path, launches, kernels, rng, names, wide_template(template))
    record = {"app": path.stem, "path": str(path), "kind": kind, "bytes": path.stat().st_size}
    if kind == "long":
        record["device"] = NERSC_DEVICE
    data = {"generator": GENERATOR, "generated": True, "args": args, "apps": [record]}
    (out / "manifest.json").write_text(json.dumps(data, indent=1) + "\n")
    _sidecar(out, f"one {kind} CSV, {launches} launches, {kernels} kernels", [path.name], args)
    return path


def write_config(path: Path, records: list[dict], title: str = "Generated benchmark set") -> Path:
    """A workflow config naming each generated app (CSV exports without a GPU get the NERSC device)."""
    lines = [f"# {GENERATOR}: workflow config for a generated benchmark set (synthetic inputs)", "inputs: []", "apps:"]
    for record in records:
        device = f", device: {json.dumps(record['device'])}" if record.get("device") else ""
        lines.append(f"  {record['app']}: {{report: {json.dumps(record['path'])}{device}}}")
    lines += [f"report: {{title: {json.dumps(title)}}}", "run_id: bench"]
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return Path(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    apps = sub.add_parser("apps", help="N apps of L launches (mixed long / wide / what-if)")
    apps.add_argument("--out", type=Path, required=True)
    apps.add_argument("--apps", type=int, default=50)
    apps.add_argument("--launches", type=int, default=2000)
    apps.add_argument("--kernels", type=int, default=None, help="kernels per app (default launches/20)")
    apps.add_argument("--seed", type=int, default=7)
    apps.add_argument("--mix", default=",".join(f"{k}={v}" for k, v in MIX.items()))
    apps.add_argument("--config", type=Path, help="also write a workflow config for all apps here")
    apps.add_argument("--force", action="store_true")
    big = sub.add_parser("big", help="one large CSV export (NERSC-style long, or --page raw wide)")
    big.add_argument("--kind", choices=("long", "wide"), default="long")
    big.add_argument("--out", type=Path, required=True)
    big.add_argument("--launches", type=int, default=100_000)
    big.add_argument("--kernels", type=int, default=5000)
    big.add_argument("--seed", type=int, default=11)
    big.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.what == "apps":
        mix = {k: float(v) for k, v in (item.split("=") for item in args.mix.split(","))}
        data = generate_apps(args.out, args.apps, args.launches, args.seed, args.kernels, mix, args.force)
        if args.config:
            write_config(args.config, data["apps"])
        size = sum(r["bytes"] for r in data["apps"])
        print(f"{len(data['apps'])} apps, {size / 1e6:.0f} MB in {args.out} ({time.perf_counter() - start:.1f} s)")
    else:
        path = generate_big(args.out, args.launches, args.kernels, args.seed, args.force, args.kind)
        print(f"{path} ({path.stat().st_size / 1e6:.0f} MB, {time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
