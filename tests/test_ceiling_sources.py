"""Ceiling sources against each other, per clock, with an oracle independent of the package.

The oracle reads raw metrics only: ``.ncu-rep`` files with NVIDIA's ``ncu_report``, CSV exports with
the ``csv`` module, the datasheet catalog ``roofline/data/gpus.yaml`` with ``yaml``. It never imports the
package's recipe code (roofline.metrics.quantities / derive / ceilings / catalog); the tests that check the
package (``test_package_*``) call ``roofline.parse.counters.parse_input`` and ``roofline.ceilings.select`` inside
the test, so the oracle tests run even while the package is being rewritten.

1. Report vs datasheet, per clock: ``<metric>.sum.peak_sustained`` x the counting factor (FLOP or
   ops per cycle, whole GPU) against datasheet value / the clock the datasheet assumes; within 5 %.
   DRAM is compared in B/s (the DRAM clock is not the SM clock): 0.85-1.1, long launches only.
2. Per-opcode SASS counts (``sass__thread_inst_executed_true_per_opcode``) against the
   ``sm__sass_thread_inst_executed_op_*_pred_on`` instruction counters, and both against the package.
3. The table of every (device, class) pair in docs/ceilings.md, section "Report vs datasheet, per
   clock": ``python tests/test_ceiling_sources.py --markdown`` prints it, ``--write`` rewrites it.
"""

from __future__ import annotations

import csv
import functools
import math
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

import ncu_report
import pytest
import yaml
from conftest import REAL, REPO, real_fixture, real_reports

CATALOG = REPO / "roofline" / "data" / "gpus.yaml"
DOCS = REPO / "docs" / "ceilings.md"
HEADING = "## Report vs datasheet, per clock"
FIXTURES_LINE = "Fixture folders read: "

LONG_LAUNCH_S = 20e-6  # shorter launches read clocks 20-50 % low (../shared/guides/roofline.md §5)
COMPUTE_TOLERANCE = 0.05
DRAM_BOUNDS = (0.85, 1.10)
PACKAGE_TOLERANCE = 0.005

# CSV exports that record no GPU name: the name their PROVENANCE.md gives (GPU row).
DEVICE_OF_FOLDER = {"rtx5090-llm-kernels-csv-ncu2025": "NVIDIA GeForce RTX 5090"}

# The RTX 5090 roofline-chart CSVs carry display labels instead of metric names: the metric each
# label shows (Nsight Compute's SpeedOfLight_RooflineChart section).
CHART_LABELS = {
    "Theoretical Predicated-On FFMA Thread Instructions Executed":
        "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained",
    "Theoretical Predicated-On DFMA Thread Instructions Executed":
        "sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained",
    "Theoretical DRAM Bytes Accessible": "dram__bytes.sum.peak_sustained",
    "SM Frequency": "sm__cycles_elapsed.avg.per_second",
    "DRAM Frequency": "dram__cycles_elapsed.avg.per_second",
}

SASS = "sm__sass_thread_inst_executed_op_{}_pred_on.sum.peak_sustained"
TENSOR = "sm__ops_path_tensor_{}.sum.peak_sustained"
DRAM_PEAK = "dram__bytes.sum.peak_sustained"

CLASS_ORDER = (
    "fp64", "fp32", "fp16",
    "tensor_fp64", "tensor_tf32", "tensor_fp16", "tensor_fp16_acc32", "tensor_bf16", "tensor_fp8",
    "tensor_fp8_acc32", "tensor_int8",
    "tensor_tf32_sparse", "tensor_fp16_sparse", "tensor_fp16_acc32_sparse", "tensor_bf16_sparse",
    "tensor_fp8_sparse", "tensor_fp8_acc32_sparse", "tensor_int8_sparse",
    "tensor_fp16_mma", "tensor_fp16_acc32_mma", "tensor_bf16_mma", "tensor_tf32_mma", "tensor_int8_mma",
    "tensor_fp16_mma_sparse", "tensor_fp16_acc32_mma_sparse", "tensor_bf16_mma_sparse", "tensor_tf32_mma_sparse",
    "tensor_int8_mma_sparse",
)  # fmt: skip

# Dense tensor variants per architecture: class -> the sm__ops_path_tensor_* variant. The sparse
# class tensor_X_sparse reads the same variant with sparsity_on (never used for the dense roof).
_AMPERE_ADA = {
    "tensor_fp16": "src_fp16_dst_fp16_sparsity_off",
    "tensor_fp16_acc32": "src_fp16_dst_fp32_sparsity_off",
    "tensor_bf16": "src_bf16_dst_fp32_sparsity_off",
    "tensor_tf32": "src_tf32_dst_fp32_sparsity_off",
    "tensor_int8": "src_int8_sparsity_off",
    "tensor_fp8": "src_fp8_sparsity_off",  # sm_89 only; absent from sm_80/86 reports
    "tensor_fp64": "src_fp64",
}
_HOPPER = {  # wgmma per-instruction split: the aggregates src_fp16 etc. are the 2:4-sparse rates
    "tensor_fp16": "op_hgmma_src_fp16_sparsity_off",  # wgmma: either accumulator, one counter
    "tensor_bf16": "op_hgmma_src_bf16_dst_fp32_sparsity_off",
    "tensor_tf32": "op_hgmma_src_tf32_dst_fp32_sparsity_off",
    "tensor_int8": "op_igmma_src_int8_sparsity_off",
    "tensor_fp8": "src_fp8_sparsity_off",
    "tensor_fp64": "src_fp64",
    # mma.sync beside wgmma: its own variants and peaks (no datasheet value)
    "tensor_fp16_mma": "op_hmma_src_fp16_dst_fp16_sparsity_off",
    "tensor_fp16_acc32_mma": "op_hmma_src_fp16_dst_fp32_sparsity_off",
    "tensor_bf16_mma": "op_hmma_src_bf16_dst_fp32_sparsity_off",
    "tensor_tf32_mma": "op_hmma_src_tf32_dst_fp32_sparsity_off",
    "tensor_int8_mma": "op_imma_src_int8_sparsity_off",
}
_BLACKWELL_GEFORCE = {
    "tensor_fp16": "op_hmma_src_fp16_dst_fp16_sparsity_off",
    "tensor_fp16_acc32": "op_hmma_src_fp16_dst_fp32_sparsity_off",
    "tensor_bf16": "op_hmma_src_bf16_dst_fp32_sparsity_off",
    "tensor_tf32": "op_hmma_src_tf32_dst_fp32_sparsity_off",
    "tensor_int8": "op_imma_src_int8_sparsity_off",
    "tensor_fp8": "src_fp8_dst_fp16_sparsity_off",
    "tensor_fp8_acc32": "src_fp8_dst_fp32_sparsity_off",
}
# sm_90 aggregate counter -> the wgmma dense split it must be exactly twice of
HOPPER_AGGREGATES = {
    "src_fp16": "op_hgmma_src_fp16_sparsity_off",
    "src_bf16_dst_fp32": "op_hgmma_src_bf16_dst_fp32_sparsity_off",
    "src_tf32_dst_fp32": "op_hgmma_src_tf32_dst_fp32_sparsity_off",
    "src_int8": "op_igmma_src_int8_sparsity_off",
}


def peak_recipes(cc: tuple[int, int]) -> dict[str, tuple[str, float]]:
    """Per compute class on a GPU of compute capability ``cc``: (peak metric, counting factor)."""
    recipes = {
        "fp64": (SASS.format("dfma"), 2.0),
        "fp32": (SASS.format("ffma"), 2.0),
        "fp16": (SASS.format("hfma"), 4.0),  # half2: each HFMA2 thread instruction is 2 FMA = 4 FLOP
    }
    if (8, 0) <= cc < (9, 0):
        dense = _AMPERE_ADA
    elif cc == (9, 0):
        dense = _HOPPER
    elif (12, 0) <= cc < (13, 0):
        dense = _BLACKWELL_GEFORCE
    else:
        dense = {}  # Volta/Turing/Pascal: no per-datatype tensor peaks in the conventions
    for cls, variant in dense.items():
        recipes[cls] = (TENSOR.format(variant), 1.0)  # one ncu tensor op is one FLOP (2 per FMA)
        if variant.endswith("_sparsity_off"):
            recipes[f"{cls}_sparse"] = (TENSOR.format(variant.replace("_sparsity_off", "_sparsity_on")), 1.0)
    return recipes


def recipe_label(metric: str, factor: float) -> str:
    short = metric.removesuffix(".sum.peak_sustained")
    short = short.removeprefix("sm__sass_thread_inst_executed_op_").removeprefix("sm__ops_path_tensor_")
    short = short.removesuffix("_pred_on")
    return f"{factor:g} × {short}" if factor != 1 else short


# ---------------------------------------------------------------------------------- raw readers

_PREFIX = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_BASES = ("byte", "hz", "second", "s")


def _unit_scale(unit: str) -> float:
    """The factor to base units (s, Hz, B) of an ncu unit: 'ns', 'usecond', 'Ghz', 'Kbyte/cycle'..."""

    def one(part: str) -> float:
        part = part.strip()
        if part.lower() in _BASES:
            return 1.0
        if len(part) > 1 and part[0] in _PREFIX and part[1:].lower() in _BASES:
            return _PREFIX[part[0]]
        return 1.0  # inst, cycle, warp, %, '': no prefix

    num, _, den = (unit or "").partition("/")
    return one(num) / (one(den) if den else 1.0)


def _number(text: str) -> float | None:
    text = (text or "").strip().replace(",", "")
    if not text or text.lower() == "n/a":
        return None
    try:
        return float(text)
    except ValueError:
        return None


@dataclass
class Launch:
    source: str  # fixture folder / file
    index: int  # position in its file
    device: str
    cc: tuple[int, int]
    duration_s: float
    sm_hz: float
    dram_hz: float
    peaks: dict[str, float] = field(default_factory=dict)  # *.sum.peak_sustained, base units

    @property
    def long(self) -> bool:
        return self.duration_s >= LONG_LAUNCH_S


def _rep_value(action, name: str) -> float:
    metric = action.metric_by_name(name)
    if metric is None:
        return math.nan
    return metric.as_double() * _unit_scale(metric.unit())


def _rep_string(action, name: str) -> str:
    metric = action.metric_by_name(name)
    return "" if metric is None else metric.as_string()


def report_actions(path: Path):
    context = ncu_report.load_report(str(path))
    for r in range(context.num_ranges()):
        rng = context.range_by_idx(r)
        for a in range(rng.num_actions()):
            yield rng.action_by_idx(a)


def _cc(major, minor) -> tuple[int, int]:
    return (int(major), int(minor)) if not (math.isnan(major) or math.isnan(minor)) else (0, 0)


def rep_launches(path: Path) -> list[Launch]:
    out = []
    for i, action in enumerate(report_actions(path)):
        peaks = {n: _rep_value(action, n) for n in action.metric_names() if n.endswith(".sum.peak_sustained")}
        out.append(
            Launch(
                source=f"{path.parent.name}/{path.name}",
                index=i,
                device=_rep_string(action, "device__attribute_display_name"),
                cc=_cc(
                    _rep_value(action, "device__attribute_compute_capability_major"),
                    _rep_value(action, "device__attribute_compute_capability_minor"),
                ),
                duration_s=_rep_value(action, "gpu__time_duration.sum"),
                sm_hz=_rep_value(action, "sm__cycles_elapsed.avg.per_second"),
                dram_hz=_rep_value(action, "dram__cycles_elapsed.avg.per_second"),
                peaks=peaks,
            )
        )
    return out


def wide_csv_launches(path: Path) -> list[Launch]:
    """``ncu --csv --page raw``: a header of metric names, a units row, one row per launch."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header, units, body = rows[0], rows[1], rows[2:]
    col = {name: i for i, name in enumerate(header)}

    def value(row, name):
        if name not in col or col[name] >= len(row):
            return math.nan
        number = _number(row[col[name]])
        return math.nan if number is None else number * _unit_scale(units[col[name]])

    out = []
    for i, row in enumerate(body):
        peaks = {n: value(row, n) for n in header if n.endswith(".sum.peak_sustained")}
        cc = (
            _cc(value(row, "device__attribute_compute_capability_major"),
                value(row, "device__attribute_compute_capability_minor"))
            if "device__attribute_compute_capability_major" in col
            else tuple(int(x) for x in row[col["CC"]].split("."))
        )  # fmt: skip
        device = row[col["device__attribute_display_name"]] if "device__attribute_display_name" in col else ""
        out.append(
            Launch(
                source=f"{path.parent.name}/{path.name}",
                index=i,
                device=device or DEVICE_OF_FOLDER.get(path.parent.name, ""),
                cc=cc,
                duration_s=value(row, "gpu__time_duration.sum"),
                sm_hz=value(row, "sm__cycles_elapsed.avg.per_second"),
                dram_hz=value(row, "dram__cycles_elapsed.avg.per_second"),
                peaks={k: v for k, v in peaks.items() if not math.isnan(v)},
            )
        )
    return out


def chart_csv_launch(folder: Path) -> Launch:
    """One RTX 5090 kernel folder: the roofline-chart section CSV (labels) + ncu.metrics.csv (time)."""
    values: dict[str, float] = {}
    cc = (0, 0)
    with open(folder / "ncu.section_SpeedOfLight_RooflineChart.csv", newline="") as f:
        for row in csv.DictReader(f):
            name = CHART_LABELS.get(row["Metric Name"])
            number = _number(row["Metric Value"])
            if name and number is not None:
                values.setdefault(name, number * _unit_scale(row["Metric Unit"]))
            if row.get("CC"):
                cc = tuple(int(x) for x in row["CC"].split("."))
    duration = math.nan
    with open(folder / "ncu.metrics.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row["Metric Name"] == "gpu__time_duration.sum":
                duration = _number(row["Metric Value"]) * _unit_scale(row["Metric Unit"])
    fixture = folder.parent.name
    return Launch(
        source=f"{fixture}/{folder.name}",
        index=0,
        device=DEVICE_OF_FOLDER.get(fixture, ""),
        cc=cc,
        duration_s=duration,
        sm_hz=values.pop("sm__cycles_elapsed.avg.per_second", math.nan),
        dram_hz=values.pop("dram__cycles_elapsed.avg.per_second", math.nan),
        peaks=values,
    )


def _is_wide_raw_csv(path: Path) -> bool:
    with open(path, newline="") as f:
        header = next(csv.reader(f), [])
    return bool(header) and header[0] == "ID" and "Metric Name" not in header


@functools.cache
def all_launches() -> tuple[Launch, ...]:
    """Every launch of every real fixture that records a GPU (the NERSC long CSV records none)."""
    if not REAL.is_dir():
        return ()
    launches: list[Launch] = []
    for path in sorted(REAL.glob("*/*.ncu-rep")):
        launches += rep_launches(path)
    for path in sorted(REAL.glob("*/*.csv")):
        if _is_wide_raw_csv(path):
            launches += wide_csv_launches(path)
    for path in sorted(REAL.glob("*/*/ncu.section_SpeedOfLight_RooflineChart.csv")):
        launches.append(chart_csv_launch(path.parent))
    return tuple(x for x in launches if x.device)


# ------------------------------------------------------------------------------- report peaks


@dataclass
class Peak:
    per_cycle: float  # median over the device's launches (identical in every launch checked)
    metric: str
    factor: float
    launches: int
    spread: float  # max / min over launches
    sources: tuple[str, ...]


def device_peaks(launches=None) -> dict[str, dict[str, Peak]]:
    """Per device and compute class: the report's peak per cycle, whole GPU, in FLOP (ops)."""
    launches = all_launches() if launches is None else launches
    out: dict[str, dict[str, Peak]] = {}
    by_device: dict[str, list[Launch]] = {}
    for launch in launches:
        by_device.setdefault(launch.device, []).append(launch)
    for device, group in sorted(by_device.items()):
        classes = {}
        for cls in CLASS_ORDER:
            values, used = [], []
            for launch in group:
                metric, factor = peak_recipes(launch.cc).get(cls, (None, None))
                value = launch.peaks.get(metric) if metric else None
                if value is not None and value > 0 and not math.isnan(value):
                    values.append(value * factor)
                    used.append((launch, metric, factor))
            if values:
                classes[cls] = Peak(
                    per_cycle=statistics.median(values),
                    metric=used[0][1],
                    factor=used[0][2],
                    launches=len(values),
                    spread=max(values) / min(values),
                    sources=tuple(sorted({u[0].source.split("/")[0] for u in used})),
                )
        out[device] = classes
    return out


def device_dram(launches=None) -> dict[str, tuple[float, int, bool]]:
    """Per device: median DRAM peak in B/s over its long launches (all launches if none is long),
    the number of launches used, and whether they were long."""
    launches = all_launches() if launches is None else launches
    out = {}
    by_device: dict[str, list[Launch]] = {}
    for launch in launches:
        if DRAM_PEAK in launch.peaks and not math.isnan(launch.dram_hz):
            by_device.setdefault(launch.device, []).append(launch)
    for device, group in sorted(by_device.items()):
        long = [x for x in group if x.long]
        used = long or group
        out[device] = (statistics.median(x.peaks[DRAM_PEAK] * x.dram_hz for x in used), len(used), bool(long))
    return out


# ---------------------------------------------------------------------------------- datasheet


@functools.cache
def catalog_by_name() -> dict[str, tuple[str, dict]]:
    """Display name -> (catalog key, entry), from roofline/data/gpus.yaml read with yaml."""
    gpus = yaml.safe_load(CATALOG.read_text())["gpus"]
    return {name: (key, entry) for key, entry in gpus.items() for name in entry.get("names", [])}


def datasheet(entry: dict, cls: str) -> tuple[float, float] | None:
    """(value per second, the clock it assumes) of a compute class, or None where the entry has none.

    ``value`` is dense (FP16 accumulate for tensor_fp16); ``fp32_accumulate`` the FP32-accumulate
    rate (equal to ``value`` when absent); ``sparse`` the 2:4-sparse rate (with FP32 accumulate:
    sparse x fp32_accumulate / value). Clock: the value's ``clock_hz``, else the entry's boost clock.
    """
    compute = entry.get("compute", {})
    boost = entry.get("boost_clock_hz", entry.get("clock_hz"))

    def clock(item):
        return item.get("clock_hz", boost)

    if cls in compute:  # a class the catalog names itself
        item = compute[cls]
        return (item["value"], clock(item)) if "value" in item else None
    sparse = cls.endswith("_sparse")
    base = cls.removesuffix("_sparse")
    acc32 = base.endswith("_acc32")
    dense = base.removesuffix("_acc32")
    item = compute.get(dense)
    if item is None or "value" not in item:
        return None
    value = item.get("fp32_accumulate", item["value"]) if acc32 else item["value"]
    if sparse:
        if "sparse" not in item:
            return None
        value = item["sparse"] * value / item["value"]
    return value, clock(item)


@dataclass
class Pair:
    device: str
    cls: str
    report: Peak | None = None  # compute classes
    report_bps: float | None = None  # dram
    dram_long: bool = True
    catalog_key: str | None = None
    datasheet_value: float | None = None
    datasheet_clock: float | None = None
    held_clock: float | None = None  # the device's median SM clock: every compute roof of it is held there

    @property
    def datasheet_per_cycle(self) -> float | None:
        if self.datasheet_value is None or not self.datasheet_clock:
            return None
        return self.datasheet_value / self.datasheet_clock

    @property
    def datasheet_held(self) -> float | None:
        """The datasheet roof at the device's measured SM clock: per cycle x that clock."""
        per_cycle = self.datasheet_per_cycle
        return None if per_cycle is None or self.held_clock is None else per_cycle * self.held_clock

    @property
    def ratio(self) -> float | None:
        if self.cls == "dram":
            return None if self.datasheet_value is None else self.report_bps / self.datasheet_value
        ds = self.datasheet_per_cycle
        return None if ds is None else self.report.per_cycle / ds

    @property
    def verdict(self) -> str:
        if self.catalog_key is None:
            return "no catalog entry"
        if self.ratio is None:
            return "no datasheet value"
        if self.cls == "dram":
            if not self.dram_long:
                return "not checked: only launches under 20 µs"
            return "pass" if DRAM_BOUNDS[0] <= self.ratio <= DRAM_BOUNDS[1] else "FAIL"
        return "pass" if abs(self.ratio - 1) <= COMPUTE_TOLERANCE else "FAIL"

    def describe(self) -> str:
        if self.cls == "dram":
            return (
                f"{self.device} dram: report {self.report_bps / 1e9:.1f} GB/s, datasheet "
                f"{self.datasheet_value / 1e9:.1f} GB/s ({self.catalog_key}), ratio {self.ratio:.3f}"
            )
        return (
            f"{self.device} {self.cls}: report {recipe_label(self.report.metric, self.report.factor)} = "
            f"{self.report.per_cycle:,.1f}/cycle, datasheet {self.datasheet_value:.4g} / "
            f"{self.datasheet_clock / 1e9:.4g} GHz = {self.datasheet_per_cycle:,.1f}/cycle "
            f"({self.catalog_key}), ratio {self.ratio:.4f}"
        )


def launches_of(folders: tuple[str, ...] | None = None) -> tuple[Launch, ...]:
    """The launches of the given fixture folders (all when None)."""
    return tuple(x for x in all_launches() if folders is None or x.source.split("/")[0] in folders)


def device_clock(launches, device: str) -> float | None:
    """The median SM clock (raw ``sm__cycles_elapsed.avg.per_second``) of ``device``'s launches with a
    reading, of those of at least 20 µs where there is one: the clock its launches ran at."""
    read = [x for x in launches if x.device == device and not math.isnan(x.sm_hz)]
    used = [x for x in read if x.long] or read
    return statistics.median(x.sm_hz for x in used) if used else None


def pairs(launches=None) -> list[Pair]:
    """Every (device, class) pair with a report peak, with its datasheet counterpart where one exists."""
    launches = all_launches() if launches is None else launches
    catalog = catalog_by_name()
    drams = device_dram(launches)
    out = []
    for device, classes in device_peaks(launches).items():
        key, entry = catalog.get(device, (None, None))
        held = device_clock(launches, device)
        for cls, peak in classes.items():
            pair = Pair(device, cls, report=peak, catalog_key=key, held_clock=held)
            found = datasheet(entry, cls) if entry else None
            if found:
                pair.datasheet_value, pair.datasheet_clock = found
            out.append(pair)
        if device in drams:
            bps, _, long = drams[device]
            pair = Pair(device, "dram", report_bps=bps, dram_long=long, catalog_key=key)
            dram = (entry or {}).get("memory", {}).get("dram")
            if dram:
                pair.datasheet_value = dram["value"]
            out.append(pair)
    return out


# ------------------------------------------------------------------- tests: the oracle's pieces


def test_unit_scale():
    assert _unit_scale("ns") == 1e-9 and _unit_scale("usecond") == 1e-6 and _unit_scale("ms") == 1e-3
    assert _unit_scale("Ghz") == 1e9 and _unit_scale("hz") == 1 and _unit_scale("Mhz") == 1e6
    assert _unit_scale("Kbyte/cycle") == 1e3 and _unit_scale("byte/cycle") == 1 and _unit_scale("Gbyte/s") == 1e9
    assert _unit_scale("inst/cycle") == 1 and _unit_scale("") == 1 and _unit_scale("cycle") == 1
    assert _number("15,360") == 15360 and _number("n/a") is None and _number("") is None


def test_peak_recipes_per_architecture():
    assert peak_recipes((7, 0)).keys() == {"fp64", "fp32", "fp16"}
    assert peak_recipes((8, 6))["fp16"] == (SASS.format("hfma"), 4.0)
    ampere, hopper, blackwell = peak_recipes((8, 0)), peak_recipes((9, 0)), peak_recipes((12, 0))
    assert ampere["tensor_fp16_acc32"][0] == TENSOR.format("src_fp16_dst_fp32_sparsity_off")
    assert ampere["tensor_int8_sparse"][0] == TENSOR.format("src_int8_sparsity_on")
    assert "tensor_fp64_sparse" not in ampere
    assert hopper["tensor_fp16"] == (TENSOR.format("op_hgmma_src_fp16_sparsity_off"), 1)
    assert "tensor_fp16_acc32" not in hopper  # wgmma does not split the accumulator
    assert hopper["tensor_bf16_mma"] == (TENSOR.format("op_hmma_src_bf16_dst_fp32_sparsity_off"), 1)
    assert hopper["tensor_int8_mma_sparse"][0] == TENSOR.format("op_imma_src_int8_sparsity_on")
    assert hopper["tensor_int8"][0] == TENSOR.format("op_igmma_src_int8_sparsity_off")
    assert blackwell["tensor_fp8_acc32"][0] == TENSOR.format("src_fp8_dst_fp32_sparsity_off")
    assert "tensor_fp64" not in blackwell


def test_datasheet_side_of_a_geforce_and_a_hopper_entry():
    geforce = {
        "boost_clock_hz": 2.0e9,
        "compute": {
            "fp32": {"value": 80e12},
            "tensor_fp16": {"value": 320e12, "fp32_accumulate": 160e12, "sparse": 640e12},
            "tensor_bf16": {"value": 160e12, "sparse": 320e12},
            "tensor_tf32": {"value": 80e12},
        },
    }
    assert datasheet(geforce, "fp32") == (80e12, 2.0e9)
    assert datasheet(geforce, "tensor_fp16") == (320e12, 2.0e9)
    assert datasheet(geforce, "tensor_fp16_acc32") == (160e12, 2.0e9)
    assert datasheet(geforce, "tensor_fp16_sparse") == (640e12, 2.0e9)
    assert datasheet(geforce, "tensor_fp16_acc32_sparse") == (320e12, 2.0e9)
    assert datasheet(geforce, "tensor_bf16_sparse") == (320e12, 2.0e9)
    assert datasheet(geforce, "tensor_tf32_sparse") is None  # no sparse figure given
    assert datasheet(geforce, "tensor_int8") is None and datasheet(geforce, "fp64") is None
    hopper = {"boost_clock_hz": 1.98e9, "compute": {"tensor_fp16": {"value": 989.4e12, "clock_hz": 1.83e9}}}
    assert datasheet(hopper, "tensor_fp16_acc32") == (989.4e12, 1.83e9)  # no fp32_accumulate: same rate


# ----------------------------------------------------------------------------- tests: ceilings


def _need_fixtures():
    if not all_launches():
        pytest.skip(f"real fixtures not found at {REAL} (../shared/fixtures/real is absent)")


def test_report_peak_per_clock_matches_datasheet():
    """Every fixture device and compute class with both a report peak and a datasheet value: the
    per-clock peaks agree within 5 % (datasheet value / the clock it assumes)."""
    _need_fixtures()
    checked = [p for p in pairs() if p.cls != "dram" and p.ratio is not None]
    assert checked, "no (device, class) pair has both a report peak and a datasheet value"
    bad = [p.describe() for p in checked if p.verdict != "pass"]
    header = f"{len(bad)} of {len(checked)} pairs differ by more than {COMPUTE_TOLERANCE:.0%} per clock:"
    assert not bad, header + "\n" + "\n".join(bad)


def test_report_dram_peak_matches_datasheet():
    """DRAM in B/s (its clock is not the SM clock): median over launches of at least 20 µs, 0.85-1.1."""
    _need_fixtures()
    checked = [p for p in pairs() if p.cls == "dram" and p.ratio is not None and p.dram_long]
    assert checked
    bad = [p.describe() for p in checked if p.verdict != "pass"]
    assert not bad, "\n".join(bad)


def test_report_peaks_per_cycle_are_the_same_in_every_launch():
    """Per-cycle peaks are hardware constants: the same in every launch of a device (clocks vary)."""
    _need_fixtures()
    spread = [
        f"{device} {cls}: {peak.spread:.6f} over {peak.launches} launches of {peak.sources}"
        for device, classes in device_peaks().items()
        for cls, peak in classes.items()
        if peak.spread > 1 + 1e-9
    ]
    assert not spread, "\n".join(spread)


def test_hopper_aggregate_tensor_peaks_are_the_sparse_rate():
    """On every sm_90 fixture the aggregate src_fp16 / src_bf16_dst_fp32 / src_tf32_dst_fp32 /
    src_int8 peaks are exactly twice the wgmma sparsity_off peaks (they are the 2:4-sparse rates)."""
    _need_fixtures()
    hopper = [x for x in all_launches() if x.cc == (9, 0)]
    if not hopper:
        pytest.skip("no sm_90 fixture")
    checked, bad = 0, []
    for launch in hopper:
        for aggregate, split in HOPPER_AGGREGATES.items():
            a, s = launch.peaks.get(TENSOR.format(aggregate)), launch.peaks.get(TENSOR.format(split))
            if a is None or s is None:
                bad.append(f"{launch.source} launch {launch.index}: {aggregate} or {split} peak missing")
                continue
            checked += 1
            if a != 2 * s:
                bad.append(f"{launch.source} launch {launch.index}: {aggregate} {a} != 2 x {split} {s}")
    assert not bad, "\n".join(bad)
    assert {x.source.split("/")[0] for x in hopper} >= {"h100pcie-rmsnorm-full-ncu2025.1"} and checked


# ----------------------------------------------------------------- tests: the package's ceilings


def _median_clock(launches: list[Launch]) -> float:
    long = [x for x in launches if x.long]
    return statistics.median(x.sm_hz for x in (long or launches))


def package_inputs() -> list[tuple[str, str, tuple[Path, ...]]]:
    """(id, input kind, paths) of every fixture input the package reads: each .ncu-rep, each wide
    raw CSV, and each folder of per-kernel CSV exports (all its kernel folders together, one app)."""
    out = [(f"{p.parent.name}/{p.name}", "ncu-rep", (p,)) for p in real_reports()]
    if REAL.is_dir():
        out += [(f"{p.parent.name}/{p.name}", "csv", (p,)) for p in sorted(REAL.glob("*/*.csv")) if _is_wide_raw_csv(p)]
        charts = sorted(REAL.glob("*/*/ncu.section_SpeedOfLight_RooflineChart.csv"))
        for fixture in sorted({c.parent.parent for c in charts}):
            out.append((fixture.name, "csv-dir", tuple(c.parent for c in charts if c.parent.parent == fixture)))
    return out


def _oracle_launches(kind: str, paths: tuple[Path, ...]) -> list[Launch]:
    read = {"ncu-rep": rep_launches, "csv": wide_csv_launches, "csv-dir": chart_csv_launch}[kind]
    out = []
    for path in paths:
        got = read(path)
        out += got if isinstance(got, list) else [got]
    return out


@pytest.mark.parametrize("kind,paths", [i[1:] for i in package_inputs()], ids=[i[0] for i in package_inputs()])
def test_package_report_ceilings_match_oracle(kind, paths):
    """roofline.ceilings.select.report_ceilings: per class the oracle knows, value = peak per cycle x the
    median SM clock of the device's long launches (all launches if none is long), within 0.5 %."""
    launches = _oracle_launches(kind, paths)
    peaks = device_peaks(launches)
    where = paths[0].parent.name if kind == "csv-dir" else f"{paths[0].parent.name}/{paths[0].name}"
    if not any(peaks.values()):
        pytest.skip(f"{where}: no peak metrics")
    import pandas as pd

    from roofline.ceilings.select import report_ceilings
    from roofline.metrics.quantities import COMPUTE_CLASSES
    from roofline.parse.counters import parse_input

    device = DEVICE_OF_FOLDER.get(paths[0].parent.name) if kind == "csv-dir" else None
    counters = pd.concat([parse_input(p, "app", kind, device=device) for p in paths], ignore_index=True)
    table = report_ceilings(counters)
    table = table[(table["kind"] == "compute") & (table["source"] == "report")]
    got = {(r.device, r.name): r.value for r in table.itertuples()}
    problems, checked = [], 0
    for device, classes in peaks.items():
        for cls, peak in classes.items():
            if cls not in COMPUTE_CLASSES:
                continue  # an oracle class the package does not define (tensor_fp8_acc32)
            with_peak = [x for x in launches if x.device == device and peak.metric in x.peaks]
            expected = peak.per_cycle * _median_clock(with_peak)
            checked += 1
            if (device, cls) not in got:
                problems.append(f"{device} {cls}: no report ceiling from the package (oracle {expected:.4g})")
            elif abs(got[device, cls] / expected - 1) > PACKAGE_TOLERANCE:
                problems.append(
                    f"{device} {cls}: package {got[device, cls]:.5g}, oracle {expected:.5g} "
                    f"({recipe_label(peak.metric, peak.factor)} x median SM clock)"
                )
    assert checked
    assert not problems, f"{where}: {len(problems)} of {checked} classes:\n" + "\n".join(problems)


HELD_FIXTURES = {  # fixture folder -> the datasheet compute classes its device must hold at its clock
    "a100pcie-selfjoin-full-ncu2021.2": ("fp16", "tensor_fp64", "tensor_tf32", "tensor_fp16", "tensor_bf16",
                                         "tensor_int8"),
    "a100sxm-silu-full-ncu2025.1": (),  # the report gives every class: datasheet candidates only
    "v100-kripke-full-ncu2023.3": ("fp16", "tensor_fp16"),
}


@pytest.mark.parametrize("folder", list(HELD_FIXTURES))
def test_package_holds_every_compute_roof_at_the_launches_clock(folder):
    """roofline.ceilings.select.build_ceilings on one fixture: every compute candidate (datasheet ones too)
    = the datasheet's value / the clock it assumes (raw YAML) x the report's median SM clock (raw
    ``sm__cycles_elapsed.avg.per_second``, read with ncu_report); every selected compute roof of the
    device at that one clock; the vendor's value and clock kept in the datasheet row's citation."""
    paths = sorted(real_fixture(folder).glob("*.ncu-rep"))
    launches = [x for p in paths for x in rep_launches(p)]
    [device] = {x.device for x in launches}
    clock = device_clock(launches, device)
    _, entry = catalog_by_name()[device]
    import pandas as pd

    from roofline.ceilings.select import build_ceilings
    from roofline.parse.counters import parse_input

    counters = pd.concat([parse_input(p, p.stem, "ncu-rep") for p in paths], ignore_index=True)
    table = build_ceilings(counters, CATALOG, ["report", "datasheet"])
    compute = table[(table["kind"] == "compute") & (table["device"] == device)]
    selected = compute[compute["selected"]]
    assert selected["clock_hz"].to_numpy() == pytest.approx([clock] * len(selected), rel=1e-9)
    sheet = compute[compute["source"] == "datasheet"].set_index("name")
    problems = []
    for name, row in sheet.iterrows():
        value, vendor_clock = datasheet(entry, name)
        expected = value / vendor_clock * clock
        if abs(row["value"] / expected - 1) > 1e-9 or abs(row["per_clock"] / (value / vendor_clock) - 1) > 1e-9:
            problems.append(f"{name}: package {row['value']:.6g} ({row['per_clock']:,.1f}/clk), oracle "
                            f"{value:.6g} / {vendor_clock / 1e6:.0f} MHz x {clock / 1e6:.1f} MHz = {expected:.6g}")
        if f"at {vendor_clock / 1e6:.0f} MHz" not in row["citation"]:
            problems.append(f"{name}: the vendor's clock is not in the citation: {row['citation']}")
    assert not problems, "\n".join(problems)
    held = set(selected.loc[selected["source"] == "datasheet", "name"])
    assert set(HELD_FIXTURES[folder]) <= held


# ----------------------------------------------------------------------- tests: per-opcode SASS

FP_OPS = {  # precision -> {counter op: (opcode, FLOP per thread instruction)}
    "fp32": {"fadd": ("FADD", 1), "fmul": ("FMUL", 1), "ffma": ("FFMA", 2)},
    "fp64": {"dadd": ("DADD", 1), "dmul": ("DMUL", 1), "dfma": ("DFMA", 2)},
    "fp16": {"hadd": ("HADD2", 2), "hmul": ("HMUL2", 2), "hfma": ("HFMA2", 4)},  # half2 convention
}
THREAD_OPCODES = "sass__thread_inst_executed_true_per_opcode"
WARP_OPCODES = "sass__inst_executed_per_opcode"
MODIFIER_OPCODES = "sass__thread_inst_executed_true_per_opcode_with_modifier_all"


def _instances(action, name: str) -> dict[str, float]:
    metric = action.metric_by_name(name)
    if metric is None or metric.num_instances() == 0:
        return {}
    ids = metric.correlation_ids()
    return {ids.as_string(i): float(metric.value(i)) for i in range(metric.num_instances())}


def _smsp_cycles(action) -> float:
    cycles = _rep_value(action, "smsp__cycles_elapsed.avg")
    if math.isnan(cycles):  # ncu 2021.2-2023.3 reports lack the .avg (roofline.md §5)
        cycles = _rep_value(action, "smsp__cycles_elapsed.sum") / (
            4 * _rep_value(action, "device__attribute_multiprocessor_count")
        )
    return cycles


def _counter(action, op: str) -> float | None:
    """Thread instructions of one sm__sass_thread_inst_executed_op_{op}_pred_on counter, from its
    .sum, or rate x smsp cycles, or Nsight Compute's derived x2 / x4 rates; None where absent."""
    base = f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum"
    for name, scale in ((base, 1.0), (base + ".per_cycle_elapsed", None)):
        value = _rep_value(action, name)
        if not math.isnan(value):
            return value if scale else value * _smsp_cycles(action)
    for k in (2, 4):
        value = _rep_value(action, f"derived__smsp__sass_thread_inst_executed_op_{op}_pred_on_x{k}")
        if not math.isnan(value):
            return value / k * _smsp_cycles(action)
    return None


@dataclass
class OpcodeLaunch:
    source: str
    index: int
    level: str  # "thread": predicated-true thread instructions; "warp": warp instructions only
    opcodes: dict[str, float]
    modifiers: dict[str, float]
    counters: dict[str, float | None]

    def flop(self, precision: str) -> float:
        """FLOP from the opcode counts (thread level only)."""
        return sum(per * self.opcodes.get(opcode, 0.0) for opcode, per in FP_OPS[precision].values())

    def counter_flop(self, precision: str) -> float | None:
        parts = {op: self.counters[op] for op in FP_OPS[precision]}
        if parts[next(op for op in FP_OPS[precision] if op.endswith("fma"))] is None:
            return None
        return sum(per * (parts[op] or 0.0) for op, (_, per) in FP_OPS[precision].items())


@functools.cache
def opcode_launches(path: Path) -> tuple[OpcodeLaunch, ...]:
    out = []
    for i, action in enumerate(report_actions(path)):
        thread = _instances(action, THREAD_OPCODES)
        warp = _instances(action, WARP_OPCODES)
        if not thread and not warp:
            continue
        out.append(
            OpcodeLaunch(
                source=f"{path.parent.name}/{path.name}",
                index=i,
                level="thread" if thread else "warp",
                opcodes=thread or warp,
                modifiers=_instances(action, MODIFIER_OPCODES),
                counters={op: _counter(action, op) for ops in FP_OPS.values() for op in ops},
            )
        )
    return tuple(out)


def _opcode_reports() -> list[Path]:
    return [p for p in real_reports() if opcode_launches(p)]


def test_per_opcode_counts_match_instruction_counters():
    """Per launch and counter: the per-opcode SASS count (predicated-true thread instructions, every
    modifier folded into the base opcode) equals sm__sass_thread_inst_executed_op_*_pred_on. Where a
    report has only warp-level counts, 32 x warp instructions bound the thread count from above."""
    reports = _opcode_reports()
    if not reports:
        pytest.skip(f"no report with per-opcode SASS counts under {REAL}")
    bad, checked = [], 0
    for path in reports:
        for launch in opcode_launches(path):
            for ops in FP_OPS.values():
                for op, (opcode, _) in ops.items():
                    counter = launch.counters[op]
                    if counter is None:
                        continue
                    count = launch.opcodes.get(opcode, 0.0)
                    checked += 1
                    where = f"{launch.source} launch {launch.index} {op}"
                    if launch.level == "thread" and not math.isclose(count, counter, rel_tol=1e-6, abs_tol=0.5):
                        bad.append(f"{where}: opcode {opcode} {count:.0f} != counter {counter:.1f}")
                    if launch.level == "warp" and 32 * count < counter * (1 - 1e-6):
                        bad.append(f"{where}: 32 x warp {opcode} {32 * count:.0f} < counter {counter:.1f}")
    assert checked
    assert not bad, "\n".join(bad)


def test_hfma2_mma_is_separable_and_is_the_a100_silu_fp16_work():
    """HFMA2.MMA (the compiler's register-move idiom) is folded into HFMA2 in the per-opcode counts
    and in the hfma counter; only the with-modifier breakdown separates it. In the A100 SiLU report
    it is all of the FP16 'work'."""
    (path,) = sorted(real_fixture("a100sxm-silu-full-ncu2025.1").glob("*.ncu-rep"))
    launches = opcode_launches(path)
    assert launches
    for launch in launches:
        mma = launch.modifiers.get("HFMA2.MMA", 0.0)
        assert mma > 0
        assert launch.opcodes["HFMA2"] == mma  # no other HFMA2 in these FP32 kernels
        assert launch.counters["hfma"] == pytest.approx(mma, rel=1e-9)
        assert launch.flop("fp16") == 4 * mma


@pytest.mark.parametrize("path", real_reports(), ids=[f"{p.parent.name}/{p.name}" for p in real_reports()])
def test_package_fp_work_matches_per_opcode_oracle(path):
    """The package's flop_fp32 / flop_fp64 / flop_fp16 per launch against the per-opcode oracle:
    FP32 = 2 FFMA + FADD + FMUL, FP64 likewise, FP16 (half2) = 4 HFMA2 + 2 HADD2 + 2 HMUL2; checked
    where the report has the precision's FMA counter (the package reads counters, not opcodes)."""
    launches = [x for x in opcode_launches(path) if x.level == "thread"]
    if not launches:
        pytest.skip(f"{path.parent.name}/{path.name}: no thread-level per-opcode counts")
    from roofline.parse.counters import parse_input

    counters = parse_input(path, "app", "ncu-rep").reset_index(drop=True)
    assert len(counters) == len(list(report_actions(path)))
    bad, checked = [], 0
    for launch in launches:
        row = counters.iloc[launch.index]
        for precision in FP_OPS:
            expected, got = launch.flop(precision), row[f"flop_{precision}"]
            if launch.counter_flop(precision) is None:
                # no counter: the package cannot see this work; it must say unknown, never 0
                if expected > 0 and got == 0:
                    bad.append(f"launch {launch.index} flop_{precision}: package 0, opcodes show {expected:.6g}")
                continue
            checked += 1
            if not math.isclose(got, expected, rel_tol=1e-6, abs_tol=0.5):
                bad.append(
                    f"launch {launch.index} flop_{precision}: package {got:.6g}, per-opcode oracle {expected:.6g}"
                )
    if not checked:
        pytest.skip(f"{path.parent.name}/{path.name}: no FMA counters next to the per-opcode counts")
    assert not bad, f"{path.parent.name}/{path.name}:\n" + "\n".join(bad)


# ------------------------------------------------------------------------------- the docs table


def _fmt(value: float | None, digits: str = ",.0f") -> str:
    if value is None:
        return "—"
    text = format(value, digits)
    return text if text != "0" else format(value, ".3g")


def markdown(folders: tuple[str, ...] | None = None) -> str:
    """The docs section: every (device, class) pair, report per clock against datasheet per clock,
    from the launches of ``folders`` (every fixture folder when None)."""
    launches = launches_of(folders)
    folders = tuple(sorted({x.source.split("/")[0] for x in launches}))
    rows = pairs(launches)
    lines = [
        HEADING,
        "",
        "Generated by `python tests/test_ceiling_sources.py --markdown` from the real fixtures' raw metrics",
        "(read with `ncu_report` and `csv`, not with the package's recipes) and `roofline/data/gpus.yaml` (read with",
        "`yaml`); `tests/test_ceiling_sources.py` asserts the verdicts and that this table is current.",
        "Report: `<metric>.sum.peak_sustained` × the counting factor, FLOP (ops for int8) per cycle, whole GPU",
        "(fp64/fp32 2 × FMA, fp16 4 × HFMA in the half2 convention, tensor ops = FLOP; dense tensor classes",
        "from the `sparsity_off` variants, sm_90 from the wgmma `op_hgmma`/`op_igmma` split, `_sparse` from",
        "`sparsity_on`). Datasheet: the catalog value ÷ the clock it assumes (the value's `clock_hz`, else",
        "the entry's `boost_clock_hz`); `tensor_*_acc32` is `fp32_accumulate` (else `value`), `_sparse` is",
        "`sparse` (× fp32_accumulate / value for acc32). Pass: within 5 %. DRAM is not per SM clock: report",
        "`dram__bytes.sum.peak_sustained` × `dram__cycles_elapsed.avg.per_second` in GB/s, median over",
        "launches of at least 20 µs, against the datasheet GB/s; pass within 0.85–1.1.",
        "Held at: the clock every compute roof of the device is held at, the median SM clock of its launches",
        "(`sm__cycles_elapsed.avg.per_second`, launches of at least 20 µs where there are any): the report roof is",
        "report /cycle × that clock, the datasheet roof (the next column) datasheet /cycle × that clock. DRAM",
        "roofs keep their own clock.",
        "",
        "| device | class | report metric | report /cycle | datasheet | datasheet /cycle | ratio | held at | "
        "datasheet held | result |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in rows:
        if p.cls == "dram":
            ds = "—" if p.datasheet_value is None else f"{p.datasheet_value / 1e9:,.0f} GB/s"
            lines.append(
                f"| {p.device} | dram | dram__bytes × dram clock | {p.report_bps / 1e9:,.0f} GB/s | {ds} | — | "
                f"{'—' if p.ratio is None else f'{p.ratio:.3f}'} | DRAM clock | {ds} | {p.verdict} |"
            )
            continue
        ds = (
            "—"
            if p.datasheet_value is None
            else f"{p.datasheet_value / 1e12:.4g} T/s @ {p.datasheet_clock / 1e6:.0f} MHz"
        )
        held = "—" if p.held_clock is None else f"{p.held_clock / 1e6:.0f} MHz"
        ds_held = "—" if p.datasheet_held is None else f"{p.datasheet_held / 1e12:.4g} T/s"
        lines.append(
            f"| {p.device} | {p.cls} | {recipe_label(p.report.metric, p.report.factor)} | "
            f"{_fmt(p.report.per_cycle)} | {ds} | {_fmt(p.datasheet_per_cycle)} | "
            f"{'—' if p.ratio is None else f'{p.ratio:.3f}'} | {held} | {ds_held} | {p.verdict} |"
        )
    devices = sorted({x.device for x in launches})
    with_peaks = {p.device for p in rows}
    without = [d for d in devices if d not in with_peaks]
    failing = [p for p in rows if p.verdict == "FAIL"]
    lines += [
        "",
        f"{len(rows)} pairs over {len(with_peaks)} devices; "
        f"{sum(p.verdict == 'pass' for p in rows)} pass, {len(failing)} fail, "
        f"{sum(p.verdict == 'no catalog entry' for p in rows)} without a catalog entry, "
        f"{sum(p.verdict == 'no datasheet value' for p in rows)} without a datasheet value.",
    ]
    if without:
        lines.append(f"Fixture devices without any peak metric: {', '.join(without)}.")
    lines.append(FIXTURES_LINE + ", ".join(f"`{f}`" for f in folders) + ".")
    lines.append(
        "The NERSC-format A100 dropout CSV records neither its GPU nor any peak and is not in the table. "
        "V100 (sm_70), Turing and the A10G's `--set roofline` report carry no per-datatype tensor peaks; "
        "the RTX 5090 CSVs carry only the FP32/FP64/DRAM roofline-chart peaks."
    )
    lines += opcode_markdown(folders)
    return "\n".join(lines) + "\n"


def _cell(opcodes: float, counters: float | None, level: str) -> str:
    left = f"{opcodes:.4g}" if level == "thread" else f"≤ {32 * opcodes:.4g}"
    right = "no counter" if counters is None else f"{counters:.4g}"
    return f"{left} / {right}"


def opcode_markdown(folders: tuple[str, ...]) -> list[str]:
    """Per report with per-opcode SASS counts: FP work from opcodes against the instruction counters,
    summed over its launches (checked per launch by test_per_opcode_counts_match_instruction_counters)."""
    reports = [p for p in real_reports() if p.parent.name in folders and opcode_launches(p)]
    if not reports:
        return []
    lines = [
        "",
        "### Per-opcode SASS counts against the instruction counters",
        "",
        "FLOP from `sass__thread_inst_executed_true_per_opcode` (predicated-true thread instructions; every",
        "modifier folds into its base opcode: FMUL.FTZ is FMUL, HFMA2.MMA is HFMA2) / FLOP from the",
        "`smsp__sass_thread_inst_executed_op_*_pred_on` counters (rate × smsp cycles), summed over each",
        "report's launches: FP32 = 2 FFMA + FADD + FMUL, FP64 likewise, FP16 (half2) = 4 HFMA2 + 2 HADD2 +",
        "2 HMUL2. Only `sass__thread_inst_executed_true_per_opcode_with_modifier_all` separates HFMA2.MMA",
        "(the compiler's register-move idiom); the `hfma` counter and `per_opcode` include it. Reports with",
        "warp-level counts only (`sass__inst_executed_per_opcode`) bound the counters: ≤ 32 × warp FLOP.",
        "",
        "| report | launches | counts | FP32 | FP64 | FP16 (half2) | of which HFMA2.MMA |",
        "|---|---|---|---|---|---|---|",
    ]
    for path in reports:
        launches = opcode_launches(path)
        level = launches[0].level
        cells = []
        for precision in FP_OPS:
            counters = [x.counter_flop(precision) for x in launches]
            counter = None if any(c is None for c in counters) else sum(counters)
            cells.append(_cell(sum(x.flop(precision) for x in launches), counter, level))
        mma = sum(4 * x.modifiers.get("HFMA2.MMA", 0.0) for x in launches)
        fp16 = sum(x.flop("fp16") for x in launches)
        share = "—" if level != "thread" or not fp16 else f"{mma:.4g} FLOP ({mma / fp16:.0%})"
        lines.append(
            f"| {path.parent.name}/{path.name} | {len(launches)} | {level} | " + " | ".join(cells) + f" | {share} |"
        )
    return lines


def _docs_section(text: str) -> str | None:
    start = text.find(HEADING + "\n")
    if start < 0:
        return None
    end = text.find("\n## ", start + len(HEADING))
    return text[start:] if end < 0 else text[start : end + 1]


def _docs_folders(section: str) -> tuple[str, ...]:
    line = next((x for x in section.splitlines() if x.startswith(FIXTURES_LINE)), "")
    return tuple(f.strip(" `.") for f in line.removeprefix(FIXTURES_LINE).split(",") if f.strip(" `."))


def test_docs_table_is_current():
    """The docs table equals the one generated now from the fixture folders it names (so fixtures
    added later, e.g. an acceptance set, do not make it stale; a catalog change does)."""
    _need_fixtures()
    section = _docs_section(DOCS.read_text())
    assert section is not None, f"{DOCS} has no section {HEADING!r}: run python tests/test_ceiling_sources.py --write"
    folders = _docs_folders(section)
    assert folders, f"the section names no fixture folders ({FIXTURES_LINE!r})"
    missing = [f for f in folders if not (REAL / f).is_dir()]
    if missing:
        pytest.skip(f"fixture folders of the docs table absent: {missing}")
    assert section == markdown(folders), (
        "docs/ceilings.md is out of date: run python tests/test_ceiling_sources.py --write"
    )


def write_docs() -> None:
    text = DOCS.read_text()
    section = _docs_section(text)
    new = markdown()
    if section is None:
        text = text.rstrip("\n") + "\n\n" + new
    else:
        text = text.replace(section, new)
    DOCS.write_text(text)


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        write_docs()
    elif "--markdown" in sys.argv[1:]:
        sys.stdout.write(markdown())
    else:
        sys.exit("usage: python tests/test_ceiling_sources.py --markdown | --write")
