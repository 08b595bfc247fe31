"""Shared test helpers: where the real Nsight Compute fixtures live (read from ../shared, never copied)."""

import csv
import importlib.util
import math
import re
import statistics
import sys
from pathlib import Path

import ncu_report
import pytest

from roofline.config.inputs import APP_NAME

REPO = Path(__file__).resolve().parents[1]
REAL = REPO.parent / "shared" / "fixtures" / "real"
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")  # the environment's console script

# Columns the public data contract (issue "The pipeline end to end") names for every launch table.
CONTRACT_COLUMNS = (
    "app",
    "kernel",
    "launch",
    "device",
    "duration_s",
    "flop_fp64",
    "flop_fp32",
    "flop_fp16",
    "flop_tensor",
    "dram_bytes",
    "l2_bytes",
    "l1_bytes",
)


def snakemake_command(workdir: Path, *args: str, configfile: str | None = "config.yaml",
                      snakefile: Path = REPO / "Snakefile") -> list[str]:
    """``snakemake`` (the console script, as the README has users type it) on the repository's workflow
    (or ``snakefile``), run in ``workdir`` with its ``configfile`` (None: the workflow's default
    config), then ``args``."""
    command = [SNAKEMAKE, "--snakefile", str(snakefile), "--directory", str(workdir)]
    if configfile is not None:
        command += ["--configfile", str(Path(workdir) / configfile)]
    return [*command, *args]


def real_fixture(folder: str) -> Path:
    """The path of a real fixture folder, or skip the test saying why."""
    path = REAL / folder
    if not path.is_dir():
        pytest.skip(f"real fixtures not found at {path} (../shared/fixtures/real is absent)")
    return path


def real_reports() -> list[Path]:
    """Every .ncu-rep in ../shared/fixtures/real (empty when absent); a folder may hold several."""
    return sorted(REAL.glob("*/*.ncu-rep")) if REAL.is_dir() else []


def report_id(path: Path) -> str:
    """One name per real fixture file, unique where a folder holds several reports: the folder and
    the file stem (``a40-julia-imma-trajectory-full-ncu2022.1_profile_1_db02bc1``), in the characters
    an app name allows (roofline.config.inputs.APP_NAME); the app name and test id of that file."""
    stem = path.name[: -len(".ncu-rep")] if path.name.endswith(".ncu-rep") else path.stem
    name = re.sub(r"[^A-Za-z0-9._-]", "_", f"{path.parent.name}_{stem}")
    assert APP_NAME.match(name), name
    return name


@pytest.fixture
def real_root() -> Path:
    if not REAL.is_dir():
        pytest.skip(f"real fixtures not found at {REAL} (../shared/fixtures/real is absent)")
    return REAL


# -- the oracle: numbers straight from ncu_report, computed without the package --


def report_actions(path):
    """Every launch (ncu_report action) of a report, in range and launch order."""
    context = ncu_report.load_report(str(path))
    for r in range(context.num_ranges()):
        rng = context.range_by_idx(r)
        for a in range(rng.num_actions()):
            yield rng.action_by_idx(a)


def report_metrics(path):
    """Every launch's metrics straight from ncu_report, as {name: (value, unit)}: the oracle."""
    out = []
    for action in report_actions(path):
        values = {}
        for name in action.metric_names():
            metric = action.metric_by_name(name)
            try:
                values[name] = (metric.as_double(), metric.unit())
            except Exception:
                pass
        out.append(values)
    return out


def get(m, name):
    value = m.get(name)
    return math.nan if value is None or value[0] is None else value[0]


def smsp_cycles(m):
    if "smsp__cycles_elapsed.avg" in m:
        return get(m, "smsp__cycles_elapsed.avg")
    if "smsp__cycles_elapsed.sum" in m:
        return get(m, "smsp__cycles_elapsed.sum") / (4 * get(m, "device__attribute_multiprocessor_count"))
    return get(m, "smsp__cycles_elapsed.avg.per_second") * get(m, "gpu__time_duration.sum") * 1e-9


def expected_flop(m, p):
    rate = "smsp__sass_thread_inst_executed_op_{}{}_pred_on.sum.per_cycle_elapsed"
    names = [rate.format(p, op) for op in ("add", "mul", "fma")]
    if not all(n in m for n in names):
        return math.nan
    add, mul, fma = (get(m, n) for n in names)
    return (add + mul + 2 * fma) * smsp_cycles(m)


def expected_dram(m):
    if "dram__bytes_read.sum" in m and "dram__bytes_write.sum" in m:
        return get(m, "dram__bytes_read.sum") + get(m, "dram__bytes_write.sum")
    if "dram__bytes_op_read.sum" in m and "dram__bytes_op_write.sum" in m:  # as in the RTX 5060 export (ncu 2026.1)
        return get(m, "dram__bytes_op_read.sum") + get(m, "dram__bytes_op_write.sum")
    if "dram__bytes.sum.per_second" in m:
        return get(m, "dram__bytes.sum.per_second") * get(m, "gpu__time_duration.sum") * 1e-9
    return math.nan


def nersc_sm_clock(path: Path) -> float:
    """The SM clock the NERSC export's launches ran at, read with the csv module: the median
    sm__cycles_elapsed.avg.per_second of its launches of at least 20 us (short ones read low)."""
    clock, duration = {}, {}
    with path.open(newline="") as f:
        for rec in csv.DictReader(f):
            value = float(rec["Metric Value"].replace(",", ""))
            if rec["Metric Name"] == "sm__cycles_elapsed.avg.per_second":
                clock[rec["ID"]] = value * {"cycle/second": 1.0, "cycle/nsecond": 1e9}[rec["Metric Unit"]]
            elif rec["Metric Name"] == "gpu__time_duration.sum":
                duration[rec["ID"]] = value * {"nsecond": 1e-9, "usecond": 1e-6}[rec["Metric Unit"]]
    long = [clock[i] for i in clock if duration.get(i, 0.0) >= 20e-6]
    return statistics.median(long or list(clock.values()))


def tracking_simulator():
    """benchmarks/tracking_simulation.py as a module (the benchmarks are no package), loaded once."""
    if "tracking_simulation" not in sys.modules:
        spec = importlib.util.spec_from_file_location("tracking_simulation",
                                                      REPO / "benchmarks" / "tracking_simulation.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    return sys.modules["tracking_simulation"]
