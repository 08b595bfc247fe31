"""Every real fixture through the whole workflow, numbers checked against the reports' own metrics.

The expected values are computed here from the raw metric values (ncu_report for .ncu-rep, the csv
module for the NERSC CSV), independently of the package's recipe code.
"""

import csv
import math
import subprocess
from collections import defaultdict

import pytest
from conftest import (
    REAL,
    expected_dram,
    expected_flop,
    get,
    real_reports,
    report_id,
    report_metrics,
    snakemake_command,
)

from roofline.tables.files import read_table

pytestmark = pytest.mark.slow
REPORTS = real_reports()
NERSC = REAL / "a100-dropout-nersc-metrics-csv" / "nsight162.csv"
RTX5090 = sorted((REAL / "rtx5090-llm-kernels-csv-ncu2025").glob("kernel_*"))
LEGACY = REAL / "gtx1080-vecadd-legacy-rawcsv" / "nsight_vectoradd_100_32_metrics_report.nsight-cuprof-report"
# ncu 2026.1 wide raw-page exports that name their GPU (device__attribute_display_name): file ->
# (launches, GPU, DRAM read and write metrics).
WIDE_CSVS = {
    REAL / "h200-sglang-qwen3moe-rawcsv-ncu2026.1" / "R_long_prefill_ncu_raw_full.csv": (
        50, "NVIDIA H200", "dram__bytes_read.sum", "dram__bytes_write.sum"
    ),
    REAL / "h200-sglang-qwen3moe-rawcsv-ncu2026.1" / "R_short_decode_ncu_raw_full.csv": (
        30, "NVIDIA H200", "dram__bytes_read.sum", "dram__bytes_write.sum"
    ),
    REAL / "rtx5060-wmma-fp16-rawcsv-ncu2026.1" / "gen5_stall_async8.csv": (
        1, "NVIDIA GeForce RTX 5060", "dram__bytes_op_read.sum", "dram__bytes_op_write.sum"
    ),
}
# The units those exports give the metrics checked below, and their SI factors (not roofline.metrics.units).
WIDE_UNITS = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "us": 1e-6, "ms": 1e-3}
_app = report_id  # one app per report file, also where a folder holds several


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if not REPORTS:
        pytest.skip(f"real fixtures not found at {REAL} (../shared/fixtures/real is absent)")
    work = tmp_path_factory.mktemp("real")
    lines = ["# hand-made test config: every real fixture, read in place from ../shared", "apps:"]
    for path in REPORTS:
        lines.append(f"  {_app(path)}: {{report: '{path}'}}")
    lines.append(f"  a100-dropout: {{report: '{NERSC}', device: NVIDIA A100-SXM4-80GB}}")
    lines.append(f"  gtx1080-legacy: {{report: '{LEGACY}'}}")
    for folder in RTX5090[:3]:
        lines.append(f"  rtx5090-{folder.name[:11]}: {{report: '{folder}', device: NVIDIA GeForce RTX 5090}}")
    for path in WIDE_CSVS:  # they name their GPU: no device:
        lines.append(f"  {_app(path)}: {{report: '{path}'}}")
    (work / "config.yaml").write_text("\n".join(lines) + "\n")
    result = subprocess.run(
        snakemake_command(work, "--cores", "2"),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-5000:]
    return work


@pytest.mark.parametrize("path", REPORTS, ids=[_app(p) for p in REPORTS])
def test_classified_numbers_equal_report_metrics(run, path):
    classified = read_table(run / "data" / "classified" / f"{_app(path)}.parquet", "classified")
    oracle = report_metrics(path)
    assert len(classified) == len(oracle)
    for i, m in enumerate(oracle):
        row = classified.iloc[i]
        assert row["duration_s"] == pytest.approx(get(m, "gpu__time_duration.sum") * 1e-9, rel=1e-3)
        for p, column in (("d", "flop_fp64"), ("f", "flop_fp32")):
            expected = expected_flop(m, p)
            assert (math.isnan(expected) and math.isnan(row[column])) or row[column] == pytest.approx(
                expected, rel=1e-3
            )
        expected = expected_dram(m)
        assert (math.isnan(expected) and math.isnan(row["dram_bytes"])) or row["dram_bytes"] == pytest.approx(
            expected, rel=1e-3
        )
        if row["bound"].startswith(("memory", "compute")):
            assert 0 < row["roof_pct"] < 200


def test_nersc_csv_counts_against_the_file(run):
    counts = defaultdict(dict)
    with open(NERSC, newline="") as handle:
        for record in csv.DictReader(handle):
            counts[int(record["ID"])][record["Metric Name"]] = float(record["Metric Value"].replace(",", ""))
    classified = read_table(run / "data" / "classified" / "a100-dropout.parquet", "classified").set_index("launch")
    assert len(classified) == len(counts) == 162
    prefix = "sm__sass_thread_inst_executed_op_"
    for launch in (0, 57, 161):
        m = counts[launch]
        fp64 = m[f"{prefix}dadd_pred_on.sum"] + m[f"{prefix}dmul_pred_on.sum"] + 2 * m[f"{prefix}dfma_pred_on.sum"]
        assert classified.loc[launch, "flop_fp64"] == pytest.approx(fp64, rel=1e-3)
        assert classified.loc[launch, "dram_bytes"] == pytest.approx(m["dram__bytes.sum"], rel=1e-3)
        assert classified.loc[launch, "l2_bytes"] == pytest.approx(m["lts__t_bytes.sum"], rel=1e-3)
    assert set(classified["device"]) == {"NVIDIA A100-SXM4-80GB"}
    assert set(classified["ceiling_source"]) == {"datasheet"}


def _wide_csv(path):
    """A wide raw export read with the csv module: (metric -> unit, rows of metric -> cell by ID)."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    units = dict(zip(rows[0], rows[1]))
    return units, {int(r[0]): dict(zip(rows[0], r)) for r in rows[2:]}


def _si(cell, unit):
    return float(cell.replace(",", "")) * WIDE_UNITS[unit]


@pytest.mark.parametrize("path", list(WIDE_CSVS), ids=[_app(p) for p in WIDE_CSVS])
def test_ncu2026_wide_csv_counts_against_the_file(run, path):
    launches, device, read, write = WIDE_CSVS[path]
    units, cells = _wide_csv(path)
    classified = read_table(run / "data" / "classified" / f"{_app(path)}.parquet", "classified").set_index("launch")
    assert len(classified) == len(cells) == launches
    assert set(classified["device"]) == {device}
    for launch, m in cells.items():
        row = classified.loc[launch]
        dram = _si(m[read], units[read]) + _si(m[write], units[write])
        assert row["dram_bytes"] == pytest.approx(dram, rel=1e-9)
        assert row["duration_s"] == pytest.approx(
            _si(m["gpu__time_duration.sum"], units["gpu__time_duration.sum"]), rel=1e-9
        )
    diagnostics = read_table(run / "data" / "diagnostics" / f"{_app(path)}.parse.parquet", "diagnostics")
    assert "error" not in set(diagnostics["severity"])


def test_legacy_report_is_refused_with_advice(run):
    diagnostics = read_table(run / "data" / "diagnostics" / "gtx1080-legacy.parse.parquet", "diagnostics")
    assert diagnostics["severity"].tolist() == ["error"]
    assert "ncu 2020.1 or newer" in diagnostics["message"].iat[0]


def test_rtx5090_csv_folders_have_tensor_work(run):
    """The workflow's RTX 5090 apps: device named by config, DRAM and time from the CSVs."""
    tables = [read_table(path, "classified") for path in (run / "data" / "classified").glob("rtx5090-*.parquet")]
    assert len(tables) == 3
    for table in tables:
        assert set(table["device"]) == {"NVIDIA GeForce RTX 5090"}
        assert table["dram_bytes"].notna().all() and table["duration_s"].notna().all()


def _csv_metric(folder, name):
    """Per launch ID, the value of metric ``name`` in a folder's ncu.metrics.csv (csv module; "n/a"
    and absent -> NaN; ops have no unit, so the thousands separators are the only thing to strip)."""
    values = {}
    with open(folder / "ncu.metrics.csv", newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if row["Metric Name"] == name:
                text = row["Metric Value"].replace(",", "")
                values[int(row["ID"])] = math.nan if text in ("", "n/a") else float(text)
    return values


@pytest.mark.parametrize("folder", RTX5090, ids=[f.name[:11] for f in RTX5090])
def test_rtx5090_bf16_tensor_work_equals_the_csv_and_stays_under_its_roof(folder):
    """Every RTX 5090 folder: BF16 tensor work is the CSV's `src_bf16_dst_fp32` ops (one op one
    FLOP); where there is some, the launch is judged on the tensor BF16 roof of the datasheet and
    sits under it (were an op one FMA, the CUTLASS GEMM of kernel_0005 would be at 107 %)."""
    from roofline.ceilings.catalog import CATALOG_PATH
    from roofline.ceilings.select import build_ceilings
    from roofline.classify.launches import classify_launches
    from roofline.parse.counters import parse_input

    counters = parse_input(folder, folder.name, "csv-dir", device="NVIDIA GeForce RTX 5090")
    expected = _csv_metric(folder, "sm__ops_path_tensor_src_bf16_dst_fp32.sum")
    assert len(counters) == len(expected) > 0
    for i, ops in sorted(expected.items()):
        assert counters["flop_tensor_bf16"].iat[i] == pytest.approx(ops, nan_ok=True)
    classified = classify_launches(counters, build_ceilings(counters, CATALOG_PATH, ["datasheet"]))
    tensor = classified[classified["flop_tensor_bf16"] > 0]
    for _, row in tensor.iterrows():
        if row["bound"] == "compute:tensor_bf16":
            assert row["roof_pct"] < 100, row["kernel_short"]
    if folder.name.startswith("kernel_0005"):
        row = tensor.iloc[0]
        assert row["bound"] == "compute:tensor_bf16"
        assert row["performance"] == pytest.approx(12_532_580_352 / 111.81e-6, rel=1e-3)
        assert 40 < row["roof_pct"] < 70


def test_summary_lists_every_app(run):
    html = (run / "reports" / "summary.html").read_text()
    for path in [*REPORTS, *WIDE_CSVS]:
        assert _app(path) in html
    assert "ncu 2020.1 or newer" in html
