"""Tests of roofline.parse.readers.ncu_csv: real ncu CSV exports, hand-made edge cases, refusals and speed."""

from __future__ import annotations

import bz2
import codecs
import csv
import gzip
import io
import lzma
import re
import time
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from roofline.errors import InputError
from roofline.metrics.quantities import all_input_metrics
from roofline.metrics.units import UnitWarning
from roofline.parse.readers.ncu_csv import (
    IDENTITY_COLUMNS,
    ROOFLINE_CHART_LABELS,
    SOURCE_FORMATS,
    NcuCsvError,
    NcuCsvWarning,
    is_kept_metric,
    read_ncu_csv,
    read_ncu_csvs,
)

REAL = Path(__file__).resolve().parents[4] / "shared" / "fixtures" / "real"
DATA = Path(__file__).resolve().parents[2] / "data"
NERSC = "a100-dropout-nersc-metrics-csv/nsight162.csv"
GTX1080 = "gtx1080-vecadd-legacy-rawcsv/nsight_vectoradd_100_32_metrics_all"
RTX5090 = "rtx5090-llm-kernels-csv-ncu2025"
H200 = "h200-sglang-qwen3moe-rawcsv-ncu2026.1"
RTX5060 = "rtx5060-wmma-fp16-rawcsv-ncu2026.1/gen5_stall_async8.csv"
# ncu's units in the 2026.1 wide exports -> SI factor, written out here rather than taken from
# roofline.metrics.units, so that the expectations do not share the code they check.
NCU2026_UNITS = {
    "byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "us": 1e-6, "ms": 1e-3,
    "byte/cycle": 1, "Kbyte/cycle": 1e3, "byte/block": 1, "Kbyte/block": 1e3, "sector/ns": 1e9,
}
REAL_CSVS = sorted(REAL.glob("*/**/*.csv")) if REAL.is_dir() else []


def real(relative: str) -> Path:
    """A real fixture file or folder, or skip the test when the shared fixtures are absent."""
    path = REAL / relative
    if not path.exists():
        pytest.skip(f"real fixture {relative} is not available at {REAL}")
    return path


def csv_module_values(path: Path) -> dict[tuple[int, str], tuple[str, float]]:
    """(ID, metric) -> (unit, value) of a long export, read with the csv module only."""
    with path.open(newline="", encoding="utf-8") as fh:
        return {
            (int(r["ID"]), r["Metric Name"]): (
                r["Metric Unit"],
                float(r["Metric Value"].replace(",", "")),
            )
            for r in csv.DictReader(fh)
            if r["Metric Name"] and r["Metric Value"].replace(",", "").replace(".", "").isdigit()
        }


def check_frame(frame: pd.DataFrame) -> None:
    """The raw launch frame contract: identity columns first, one row per launch, floats."""
    assert list(frame.columns[: len(IDENTITY_COLUMNS)]) == list(IDENTITY_COLUMNS)
    assert frame["launch"].dtype == np.int64
    assert frame["launch"].is_unique and frame["launch"].is_monotonic_increasing
    for column in IDENTITY_COLUMNS:
        if column != "launch":
            assert pd.api.types.is_string_dtype(frame[column]), column
            assert frame[column].notna().all(), column
    assert set(frame["source_format"]) <= set(SOURCE_FORMATS)
    metrics = frame.columns[len(IDENTITY_COLUMNS) :]
    assert all(frame[m].dtype == np.float64 for m in metrics)
    assert all(is_kept_metric(m) for m in metrics)
    assert list(metrics) == sorted(metrics)


# -- real fixtures -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", REAL_CSVS, ids=lambda p: str(p.relative_to(REAL)))
def test_every_real_csv_fixture_parses(path: Path) -> None:
    frame = read_ncu_csv(path)
    check_frame(frame)
    assert len(frame) >= 1
    assert (frame["kernel"] != "").all()


def test_real_csv_fixtures_present() -> None:
    if not REAL_CSVS:
        pytest.skip(f"no real CSV fixtures at {REAL}")
    assert len(REAL_CSVS) >= 62  # 1 legacy raw + 1 NERSC + 20 x 3 RTX 5090


def test_nersc_a100_matches_values_read_with_the_csv_module() -> None:
    path = real(NERSC)
    frame = read_ncu_csv(path).set_index("launch")
    truth = csv_module_values(path)
    assert len(frame) == 162 and frame.index.tolist() == list(range(162))
    assert (frame["source_format"] == "nersc-long").all()
    assert (frame["device"] == "").all()  # the file does not record its GPU
    metrics = [
        "dram__bytes.sum",
        "sm__cycles_elapsed.avg",
        "sm__sass_thread_inst_executed_op_dadd_pred_on.sum",
        "sm__sass_thread_inst_executed_op_dmul_pred_on.sum",
        "sm__sass_thread_inst_executed_op_dfma_pred_on.sum",
    ]
    for launch in (0, 1, 57, 120, 161):
        for metric in metrics:
            unit, value = truth[(launch, metric)]
            assert unit in {"byte", "cycle", "inst"}
            assert frame.at[launch, metric] == pytest.approx(value, rel=1e-3, abs=0), (
                launch,
                metric,
            )
    unit, ns = truth[(0, "gpu__time_duration.sum")]
    assert unit == "nsecond"
    assert frame.at[0, "gpu__time_duration.sum"] == pytest.approx(ns * 1e-9, rel=1e-12)
    assert frame.at[0, "sm__sass_thread_inst_executed_op_dfma_pred_on.sum"] == 655_360


def test_nersc_a100_parse_speed() -> None:
    path = real(NERSC)
    read_ncu_csv(path)
    start = time.perf_counter()
    read_ncu_csv(path)
    assert time.perf_counter() - start < 2.0


def test_rtx5090_kernel_0001_dram_bytes_read() -> None:
    folder = next(iter(sorted(real(RTX5090).glob("kernel_0001_*"))))
    frame = read_ncu_csv(folder / "ncu.metrics.csv")
    assert len(frame) == 1
    row = frame.iloc[0]
    assert row["dram__bytes_read.sum"] == pytest.approx(2.33e6, rel=1e-12)  # "2.33 Mbyte"
    assert row["gpu__time_duration.sum"] == pytest.approx(6.75e-6, rel=1e-12)  # "6.75 us"
    assert np.isnan(row["sm__ops_path_tensor_src_bf16_dst_bf16.sum"])  # "n/a"
    assert row["compute_capability"] == "12.0"
    assert (row["grid"], row["block"]) == ("(224, 1, 1)", "(32, 4, 1)")
    assert row["device"] == ""  # the CSV's "Device" column is the device index "0"


def test_rtx5090_roofline_section_labels_map_to_metrics() -> None:
    folder = next(iter(sorted(real(RTX5090).glob("kernel_0001_*"))))
    path = folder / "ncu.section_SpeedOfLight_RooflineChart.csv"
    row = read_ncu_csv(path).iloc[0]
    assert row["source_format"] == "ncu-csv-roofline-section"
    assert row["sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"] == 21_760
    assert row["sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained"] == 340
    assert row["dram__bytes.sum.peak_sustained"] == 128  # byte/cycle
    assert row["sm__cycles_elapsed.avg.per_second"] == pytest.approx(2.15e9)  # "2.15 Ghz"
    assert row["dram__cycles_elapsed.avg.per_second"] == pytest.approx(13.72e9)
    assert row["dram__bytes.sum.per_second"] == pytest.approx(345.14e9)  # "Gbyte/s"
    # The derived "FFMA Operations Per Cycle" row (2 x the FFMA counter, read with the csv module)
    # confirms which counter the "Thread Instructions Executed Per Cycle" label names.
    with path.open(newline="", encoding="utf-8") as fh:
        ops = next(
            float(r["Metric Value"])
            for r in csv.DictReader(fh)
            if r["Metric Name"] == "Predicated-On FFMA Operations Per Cycle"
        )
    ffma = row["smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed"]
    assert 2 * ffma == pytest.approx(ops, abs=0.011)
    assert all(is_kept_metric(m) for m in ROOFLINE_CHART_LABELS.values())


def test_rtx5090_three_exports_merge_into_one_launch() -> None:
    folders = sorted(real(RTX5090).glob("kernel_*"))
    assert len(folders) == 20
    for folder in folders:
        names = ("ncu.details.csv", "ncu.metrics.csv", "ncu.section_SpeedOfLight_RooflineChart.csv")
        files = [folder / name for name in names]
        merged = read_ncu_csvs(files)
        check_frame(merged)
        assert len(merged) == 1
        row = merged.iloc[0]
        assert row["source_format"] == "ncu-csv-details"
        assert row["dram__bytes_read.sum"] > 0
        assert row["gpu__time_duration.sum"] > 0
        assert row["sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"] == 21_760
        for frame in map(read_ncu_csv, files):
            for metric in frame.columns[len(IDENTITY_COLUMNS) :]:
                value = frame.at[0, metric]
                if not np.isnan(value):
                    assert merged.at[0, metric] == pytest.approx(value, rel=1e-12), metric


def csv_module_wide(path: Path) -> tuple[dict[str, str], dict[int, dict[str, str]]]:
    """A wide raw export read with the csv module only: (metric -> unit, ID -> metric -> cell)."""
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    header, units = rows[0], rows[1]
    return dict(zip(header, units, strict=True)), {int(r[0]): dict(zip(header, r, strict=True)) for r in rows[2:]}


@pytest.mark.parametrize(
    ("relative", "launches", "dram_read", "dram_write"),
    [
        (f"{H200}/R_long_prefill_ncu_raw_full.csv", 50, "dram__bytes_read.sum", "dram__bytes_write.sum"),
        (f"{H200}/R_short_decode_ncu_raw_full.csv", 30, "dram__bytes_read.sum", "dram__bytes_write.sum"),
        (RTX5060, 1, "dram__bytes_op_read.sum", "dram__bytes_op_write.sum"),
    ],
)
def test_ncu2026_wide_raw_csv_matches_values_read_with_the_csv_module(
    relative: str, launches: int, dram_read: str, dram_write: str
) -> None:
    """The 2026.1 exports carry composite units (Kbyte/block, Kbyte/cycle, sector/ns) on kept
    metrics and unknown ones (cluster, %/Kbyte ...) on metrics no recipe reads: all read, in SI."""
    path = real(relative)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnitWarning)  # every kept metric's unit converts
        frame = read_ncu_csv(path)
    check_frame(frame)
    units, cells = csv_module_wide(path)
    assert len(frame) == len(cells) == launches
    assert frame["launch"].tolist() == sorted(cells)
    frame = frame.set_index("launch")
    metrics = [
        "gpu__time_duration.sum",
        dram_read,
        dram_write,
        "dram__bytes.sum.peak_sustained",
        "launch__shared_mem_per_block_dynamic",
        "launch__shared_mem_per_block_static",
        "lts__t_sectors.sum.per_second",
    ]
    for metric in metrics:
        factor = NCU2026_UNITS[units[metric]]
        for launch, row in cells.items():
            expected = float(row[metric].replace(",", "")) * factor
            assert frame.at[launch, metric] == pytest.approx(expected, rel=1e-12, abs=0), (launch, metric)
    assert (frame["device"] == cells[0]["device__attribute_display_name"]).all()
    assert frame["device"].iat[0] in {"NVIDIA H200", "NVIDIA GeForce RTX 5060"}
    assert (frame[dram_read] > 0).all()
    # the SI figures for what the roofline reads: seconds, bytes, bytes per DRAM cycle
    assert frame["gpu__time_duration.sum"].between(1e-7, 1.0).all()
    peak = frame["dram__bytes.sum.peak_sustained"].iat[0]
    assert peak == {50: 1504, 30: 1504, 1: 32}[launches]  # "1.504 Kbyte/cycle" (H200), "32 byte/cycle"


def test_ncu2026_rtx5060_tensor_work_and_identity() -> None:
    row = read_ncu_csv(real(RTX5060)).iloc[0]
    assert row["sm__ops_path_tensor_op_hmma_src_fp16_dst_fp32_sparsity_off.sum"] == 2 * 1024**3
    assert row["compute_capability"] == "12.0"
    assert row["device__attribute_multiprocessor_count"] == 30
    assert row["device__attribute_max_gpu_frequency_khz"] == 2_497_000  # "2,497,000"
    assert row["launch__shared_mem_per_block_dynamic"] == 16_384  # "16.384000 Kbyte/block"
    assert (row["grid"], row["block"]) == ("(64, 8, 1)", "(32, 8, 1)")


def test_gtx1080_legacy_raw_csv_and_its_text_log() -> None:
    frame = read_ncu_csv(real(GTX1080 + ".csv"))
    check_frame(frame)
    assert frame["launch"].tolist() == [0, 1, 2]
    assert (frame["kernel"] == "vecAdd").all()
    assert (frame["device"] == "NVIDIA GeForce GTX 1080").all()
    assert (frame["compute_capability"] == "6.1").all()
    assert (frame["source_format"] == "ncu-csv-raw").all()
    assert frame.at[0, "launch__block_size"] == 1024  # "1,024.00"
    assert frame.at[0, "device__attribute_multiprocessor_count"] == 20
    assert "dram__bytes.sum" not in frame  # legacy names: no roofline metrics
    # The same CSV behind program output and ==PROF== lines.
    log = read_ncu_csv(real(GTX1080 + ".txt"))
    pd.testing.assert_frame_equal(log, frame)


def test_binary_report_is_refused() -> None:
    path = real(GTX1080.replace("_all", "_report") + ".nsight-cuprof-report")
    with pytest.raises(NcuCsvError, match="binary file.*--csv --page raw"):
        read_ncu_csv(path)


# -- hand-made edge cases ------------------------------------------------------------------------


def test_raw_thousands_separators_na_units_short_rows() -> None:
    frame = read_ncu_csv(DATA / "ncu_raw_edge_cases.csv").set_index("launch")
    assert frame.index.tolist() == [0, 1, 2]  # the trailing ==PROF== line is not a launch
    assert frame.at[0, "dram__bytes.sum"] == pytest.approx(2_906_085.08e3)  # Kbyte
    assert np.isnan(frame.at[1, "dram__bytes.sum"])  # n/a
    assert frame.at[2, "dram__bytes.sum"] == pytest.approx(512e3)
    assert frame.at[0, "gpu__time_duration.sum"] == pytest.approx(1234.5e-6)  # usecond
    assert frame.at[0, "sm__cycles_elapsed.avg.per_second"] == pytest.approx(1.98e9)
    assert frame.at[1, "lts__t_bytes.sum"] == pytest.approx(0.5e6)  # Mbyte
    assert frame.at[1, "sm__ops_path_tensor_src_fp16_dst_fp32.sum"] == 1024
    for metric in ("lts__t_bytes.sum", "sm__cycles_elapsed.avg.per_second"):
        assert np.isnan(frame.at[2, metric])  # the short row
    assert "dram__throughput.avg.pct_of_peak_sustained_elapsed" not in frame
    assert frame.at[2, "kernel"] == "scale(float*)"
    assert (frame["device"] == "NVIDIA H200").all()
    assert (frame.at[2, "grid"], frame.at[2, "block"], frame.at[2, "stream"]) == (
        "(8, 1, 1)",
        "(128, 1, 1)",
        "13",
    )


def test_long_mixed_unit_prefixes_per_row() -> None:
    frame = read_ncu_csv(DATA / "ncu_long_mixed_units.csv")
    check_frame(frame)
    frame = frame.set_index("launch")
    assert frame["dram__bytes_read.sum"].tolist() == pytest.approx([512_250, 2.33e6, 96])
    assert frame["gpu__time_duration.sum"].tolist() == pytest.approx([1.5e-3, 6.75e-6, 2.72e-6])
    tensor = frame["sm__ops_path_tensor_src_bf16_dst_fp32.sum"]
    assert np.isnan(tensor[0]) and tensor[1] == 1_048_576 and np.isnan(tensor[2])
    assert (frame["source_format"] == "ncu-csv-details").all()
    assert frame.at[1, "kernel"] == "softmax<__nv_bfloat16>(Params)"
    assert frame.at[1, "grid"] == "(64, 1, 1)"


def test_utf16_and_bom_files_read_like_utf8(tmp_path: Path) -> None:
    source = DATA / "ncu_long_mixed_units.csv"
    expected = read_ncu_csv(source)
    text = source.read_text(encoding="utf-8")
    for name, data in (
        ("utf16.csv", text.encode("utf-16")),
        ("bom.csv", codecs.BOM_UTF8 + text.encode("utf-8")),
    ):
        (tmp_path / name).write_bytes(data)
        pd.testing.assert_frame_equal(read_ncu_csv(tmp_path / name), expected)


def test_non_utf8_bytes_are_replaced_with_a_warning(tmp_path: Path) -> None:
    data = (DATA / "ncu_long_mixed_units.csv").read_bytes().replace(b"softmax", b"softm\xe4x")
    path = tmp_path / "latin1.csv"
    path.write_bytes(data)
    with pytest.warns(NcuCsvWarning, match="not UTF-8"):
        frame = read_ncu_csv(path)
    assert frame.at[1, "kernel"] == "softm\ufffdx<__nv_bfloat16>(Params)"
    assert frame.at[1, "dram__bytes_read.sum"] == pytest.approx(2.33e6)


def test_utf8_file_gives_no_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_ncu_csv(DATA / "ncu_long_mixed_units.csv")


# -- refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("empty.csv", r"empty\.csv: the file is empty"),
        ("not_ncu.csv", r"not an ncu CSV export"),
        ("ncu_no_kernel_name.csv", r"line 2: the header has no 'Kernel Name' column"),
        ("ncu_semicolon.csv", r"line 2: the columns are separated by ';', not commas"),
        (
            "ncu_raw_no_units_row.csv",
            r"line 3: the second row holds values, not units.*`ncu --csv --page raw`.*"
            r"`--print-units base`",
        ),
        ("ncu_long_binary_unit.csv", r"line 3: unit 'Mibyte' of metric 'dram__bytes.sum'.*binary"),
        ("ncu_long_bit_unit.csv", r"line 3: unit 'Mbit' of metric 'dram__bytes.sum'.*bits"),
        ("ncu_long_unknown_unit.csv", r"unknown unit 'fortnight' of metric 'gpu__time_duration"),
        ("ncu_long_not_a_number.csv", r"line 4: metric 'dram__bytes.sum' has the value '12.5.3'"),
        (
            "ncu_long_duplicate_conflict.csv",
            r"line 5: launch ID 0 gives metric 'dram__bytes.sum' twice with different values",
        ),
        ("ncu_long_two_kernels_one_id.csv", r"line 4: launch ID 0 names two kernels"),
    ],
)
def test_refusals_name_the_file_and_the_fix(name: str, message: str) -> None:
    with pytest.raises(NcuCsvError, match=message) as info:
        read_ncu_csv(DATA / name)
    assert str(info.value).startswith(str(DATA / name))
    assert isinstance(info.value, ValueError)


def _with_unit(tmp_path: Path, source: str, metric: str, unit: str) -> Path:
    """A copy of a hand-made wide export in which ``metric`` (added when absent, value 7) is in ``unit``."""
    lines = (DATA / source).read_text(encoding="utf-8").splitlines()
    header, units = next(csv.reader([lines[1]])), next(csv.reader([lines[2]]))
    rows = [next(csv.reader([line])) if not line.startswith("==") else line for line in lines[3:]]
    if metric in header:
        units[header.index(metric)] = unit
    else:
        header, units = [*header, metric], [*units, unit]
        rows = [r if isinstance(r, str) else [*r, *[""] * (len(header) - 1 - len(r)), "7"] for r in rows]
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    out.write(lines[0] + "\n")
    writer.writerows([header, units])
    for r in rows:
        out.write(r + "\n") if isinstance(r, str) else writer.writerow(r)
    path = tmp_path / f"{source}.{unit.replace('/', '_')}.csv"
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "metric", ["device__attribute_l2_cache_size", "sm__ops_path_tensor_op_imma_src_int4.sum.per_second"]
)
def test_unknown_unit_on_a_metric_no_recipe_reads_is_left_out(tmp_path: Path, metric: str) -> None:
    assert metric not in all_input_metrics() and is_kept_metric(metric)
    path = _with_unit(tmp_path, "ncu_raw_edge_cases.csv", metric, "furlong/fortnight")
    with pytest.warns(UnitWarning, match=rf"1 metric\(s\) left out.*no recipe reads them: '{re.escape(metric)}' "
                      r"\('furlong/fortnight'\)") as caught:
        frame = read_ncu_csv(path)
    assert caught[0].filename == __file__  # the warning points at the caller
    pd.testing.assert_frame_equal(frame, read_ncu_csv(DATA / "ncu_raw_edge_cases.csv"))


def test_unknown_unit_on_a_metric_a_recipe_reads_is_refused(tmp_path: Path) -> None:
    assert "dram__bytes.sum" in all_input_metrics()
    path = _with_unit(tmp_path, "ncu_raw_edge_cases.csv", "dram__bytes.sum", "Kbyte/fortnight")
    with pytest.raises(NcuCsvError, match=r"line 3: unknown unit 'Kbyte/fortnight' of metric 'dram__bytes.sum'"):
        read_ncu_csv(path)


def test_long_export_leaves_out_unknown_units_no_recipe_reads(tmp_path: Path) -> None:
    source = (DATA / "ncu_long_mixed_units.csv").read_text(encoding="utf-8")
    line = next(ln for ln in source.splitlines() if '"dram__bytes_read.sum"' in ln)
    extra = line.replace('"dram__bytes_read.sum"', '"device__attribute_l2_cache_size"')
    unit = next(csv.reader([line]))[13]
    path = tmp_path / "long.csv"
    path.write_text(source + extra.replace(f'"{unit}"', '"cubit"', 1) + "\n", encoding="utf-8")
    with pytest.warns(UnitWarning, match=r"'device__attribute_l2_cache_size' \('cubit'\)"):
        frame = read_ncu_csv(path)
    assert "device__attribute_l2_cache_size" not in frame
    pd.testing.assert_frame_equal(frame, read_ncu_csv(DATA / "ncu_long_mixed_units.csv"))


def test_raw_duplicate_launch_ids(tmp_path: Path) -> None:
    lines = (DATA / "ncu_raw_edge_cases.csv").read_text(encoding="utf-8").splitlines()
    same = tmp_path / "same.csv"  # launch 0 exported twice, identically: kept once
    same.write_text("\n".join([*lines[:4], lines[3], *lines[4:]]) + "\n", encoding="utf-8")
    assert read_ncu_csv(same)["launch"].tolist() == [0, 1, 2]
    differ = tmp_path / "differ.csv"  # launch 1 twice with different values: refused
    lines[5] = lines[5].replace('"2"', '"1"', 1)
    differ.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(NcuCsvError, match="line 6: launch ID 1 appears twice with different"):
        read_ncu_csv(differ)


def test_binary_bytes_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "report.csv"
    path.write_bytes(b"NVR\x00\x02\x00\x00\x00" + bytes(range(256)))
    with pytest.raises(NcuCsvError, match="binary file"):
        read_ncu_csv(path)


def test_merge_refuses_different_kernels_under_one_launch_id() -> None:
    files = [DATA / "ncu_long_mixed_units.csv", DATA / "ncu_raw_edge_cases.csv"]
    with pytest.raises(NcuCsvError, match="launch 0 is kernel 'vecAdd"):
        read_ncu_csvs(files)
    with pytest.raises(NcuCsvError, match="no CSV files"):
        read_ncu_csvs([])


def test_merge_fills_metrics_earlier_files_lack(tmp_path: Path) -> None:
    text = (DATA / "ncu_long_mixed_units.csv").read_text(encoding="utf-8")
    lines = [ln for ln in text.splitlines() if "gpu__time_duration" not in ln]
    first = tmp_path / "no_time.csv"
    first.write_text("\n".join(lines) + "\n", encoding="utf-8")
    partial = read_ncu_csv(first)
    assert partial["gpu__time_duration.sum"].tolist() == pytest.approx([1.5e-3, 6.75e-6, np.nan], nan_ok=True)
    merged = read_ncu_csvs([first, DATA / "ncu_long_mixed_units.csv"])
    assert merged["gpu__time_duration.sum"].tolist() == pytest.approx([1.5e-3, 6.75e-6, 2.72e-6])


# -- compressed exports --------------------------------------------------------------------------


def _compressed(data: bytes, compression: str) -> bytes:
    if compression == "zstd":
        if not pa.Codec.is_available("zstd"):
            pytest.skip("this pyarrow has no zstd codec")
        return pa.compress(data, codec="zstd", asbytes=True)
    return {"gzip": gzip.compress, "xz": lzma.compress, "bzip2": bz2.compress}[compression](data)


@pytest.mark.parametrize(
    ("compression", "suffix"), [("gzip", ".gz"), ("xz", ".xz"), ("zstd", ".zst"), ("bzip2", ".bz2")]
)
def test_compressed_nersc_export_reads_like_the_plain_file(tmp_path: Path, compression: str, suffix: str) -> None:
    source = real(NERSC)
    path = tmp_path / f"nsight162.csv{suffix}"  # derived from the real NERSC export at test time
    path.write_bytes(_compressed(source.read_bytes(), compression))
    pd.testing.assert_frame_equal(read_ncu_csv(path), read_ncu_csv(source))


def test_gzip_without_its_suffix_and_with_program_output_before_the_header(tmp_path: Path) -> None:
    source = real(GTX1080 + ".txt")  # program output and ==PROF== lines before the table
    path = tmp_path / "log.csv"  # gzip bytes under a plain name: the bytes decide
    path.write_bytes(gzip.compress(source.read_bytes()))
    pd.testing.assert_frame_equal(read_ncu_csv(path), read_ncu_csv(source))


def test_truncated_gzip_export_names_the_file(tmp_path: Path) -> None:
    data = gzip.compress(real(NERSC).read_bytes())
    path = tmp_path / "cut.csv.gz"  # derived from the real NERSC export: its gzip cut in half
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=rf"^{re.escape(str(path))}: the gzip-compressed file is truncated or "
                       r"damaged.*Copy it again.*`gzip -t cut\.csv\.gz`"):
        read_ncu_csv(path)


# -- files that hold ncu's log, or another tool's export, instead of a table (hand-made) -----------

# What ncu prints around a run, as in the real GTX 1080 log (program output, ==PROF== lines).
_PROGRAM = "grid: (1,1,1)\nFinal sum = 100.000000\n==PROF== Connected to process 40213 (/home/user/vecadd)\n"
_NO_KERNEL = "==PROF== Disconnected from process 40213\n==WARNING== No kernels were profiled.\n"
_PERMISSION = (
    "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters "
    "on the target device 0. For instructions on enabling permissions and to get more information see "
    "https://developer.nvidia.com/ERR_NVGPUCTRPERM\n"
)
_ERROR = r"the file holds ncu's log, which reports an error: "


@pytest.mark.parametrize(
    ("text", "message", "not_in"),
    [
        (
            _PROGRAM + _NO_KERNEL,
            r"ncu profiled no kernel \(its log says 'No kernels were profiled\.'\): "
            r"check the kernel filters.*--kernel-name/-k, --kernel-name-base.*--nvtx-include.*"
            r"--launch-skip/-s, --launch-count/-c.*launched a kernel at all.*--target-processes all",
            "not an ncu CSV export",
        ),
        (
            _PROGRAM + _NO_KERNEL + "==WARNING== Profiling kernels launched by child processes requires the "
            "--target-processes all option.\n",
            r"ncu profiled no kernel.*--target-processes all when the kernels run in a child process",
            "not an ncu CSV export",
        ),
        (
            _PROGRAM + _PERMISSION + _NO_KERNEL,
            _ERROR + r"'ERR_NVGPUCTRPERM - The user does not have permission.*; it profiled no kernel; "
            r"the user may not read the GPU's performance counters: profile as root \(sudo\) or with CAP_SYS_ADMIN"
            r".*NVreg_RestrictProfilingToAdminUsers=0.*developer\.nvidia\.com/ERR_NVGPUCTRPERM",
            "--kernel-name",
        ),
        (
            "==ERROR== The application returned an error code (139).\n" + _NO_KERNEL,
            _ERROR + r"'The application returned an error code \(139\)\.'.*run it without ncu",
            "--kernel-name",
        ),
        (
            "==ERROR== Something ncu has never said before.\n",
            _ERROR + r"'Something ncu has never said before\.'; fix what it reports, then profile again",
            "not an ncu CSV export",
        ),
        (
            '"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)","Max (ns)","StdDev (ns)",'
            '"Name"\n"91.2","1234","2","617.0","617.0","600","634","24.0","vecAdd(float*)"\n',
            r"it looks like an Nsight Systems \(nsys\) statistics export.*not the hardware counters.*"
            r"ncu --set roofline",
            "not an ncu CSV export",
        ),
    ],
    ids=["no_kernel", "no_kernel_child_process", "permission", "application_failed", "unknown_error", "nsys"],
)
def test_logs_and_other_exports_point_to_the_fix(tmp_path: Path, text: str, message: str, not_in: str) -> None:
    path = tmp_path / "capture.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(NcuCsvError, match=rf"^{re.escape(str(path))}: no ncu CSV table in the file: {message}") as info:
        read_ncu_csv(path)
    assert not_in not in str(info.value)


def test_header_without_rows_quotes_the_error_in_the_log(tmp_path: Path) -> None:
    header = (DATA / "ncu_long_mixed_units.csv").read_text(encoding="utf-8").splitlines()[1]
    path = tmp_path / "header_and_error.csv"  # hand-made: the table's header, then ncu's error
    path.write_text(header + "\n" + _PERMISSION + _NO_KERNEL, encoding="utf-8")
    with pytest.raises(NcuCsvError, match=r"the export holds no rows: the file holds ncu's log, which reports an "
                       r"error: 'ERR_NVGPUCTRPERM.*CAP_SYS_ADMIN"):
        read_ncu_csv(path)


def test_binary_files_say_what_they_are(tmp_path: Path) -> None:
    report = tmp_path / "report.csv"
    report.write_bytes(b"NVR\x00\x02\x00\x00\x00" + bytes(range(256)))
    with pytest.raises(NcuCsvError, match=r"binary file, an Nsight Compute report.*give it as an \.ncu-rep input"):
        read_ncu_csv(report)
    archive = tmp_path / "exports.csv"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("a.csv", (DATA / "ncu_long_mixed_units.csv").read_text(encoding="utf-8"))
    # a zip of one export is read as that export, whatever the archive is named (how exports are shared)
    pd.testing.assert_frame_equal(read_ncu_csv(archive), read_ncu_csv(DATA / "ncu_long_mixed_units.csv"))
    named = tmp_path / "noise.csv.gz"
    named.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(NcuCsvError, match=r"named as gzip-compressed, but the bytes are not gzip"):
        read_ncu_csv(named)


# -- speed ---------------------------------------------------------------------------------------


def test_long_csv_with_a_million_rows_parses_in_seconds(tmp_path: Path) -> None:
    source = real(NERSC)
    with source.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        rows = list(reader)
    kernel = header.index("Kernel Name")
    for row in rows:
        row[kernel] = "fused_dropout_kernel_vec<double, double, unsigned int, 1, 4>"
    copies = 300  # 300 x 3,402 rows = 1,020,600 rows, 48,600 launches
    path = tmp_path / "big.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerow(header)
        for copy in range(copies):
            writer.writerows([str(int(r[0]) + 162 * copy), *r[1:]] for r in rows)
    start = time.perf_counter()
    frame = read_ncu_csv(path)
    elapsed = time.perf_counter() - start
    assert len(frame) == 162 * copies
    assert frame["dram__bytes.sum"].iloc[162 * 7] == frame["dram__bytes.sum"].iloc[0]
    assert elapsed < 20, f"{elapsed:.1f} s for {len(rows) * copies} rows"
