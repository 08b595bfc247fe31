"""The bad-input corpus: every case is built at test time in a temporary folder.

Cases derived from the real reports in ../shared/fixtures/real (truncated copies, edited CSV
exports) read them there and write the derived file to the test's folder; nothing from there is
copied into this repository. Hand-made cases say so in their ``origin``. A derived case skips,
saying why, where the real fixtures are absent.

Each case declares the behaviour the pipeline must show:

- ``refused``: the input is not analysed; exactly one ``error`` diagnostic names the file, says what
  is wrong and how to fix it; no launch is written.
- ``kept``: an oddity, not an error: every launch is kept and the odd ones are marked with exactly
  one ``warning`` naming the launch (or, for ``launch=None``, the file); nothing is dropped.
- ``accepted``: nothing is wrong (odd but valid bytes); no diagnostic, values checked.
- ``config``: a configuration problem: the workflow stops before any job with one message naming
  the key (ConfigError).

:data:`PATTERN_CASES` are what an ``inputs:`` pattern finds beside a good input (roofline/config/inputs.py);
none stops the run, and the good input is analysed:

- ``named``: an odd file name or a compressed export: the file is an app under a derived name and
  is analysed;
- ``unreadable``: a file that cannot be read: an app whose parse records one ``error`` naming the
  file and the fix;
- ``no_app``: a pattern that matches nothing, a missing path, a folder without exports: no app, one
  input warning naming the pattern (or folder) and the fix.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, real_fixture

TEXTBOOK = REPO / "data" / "examples" / "textbook.yaml"
SILU = ("a100sxm-silu-full-ncu2025.1", "2025-04-21-77_06-MT.ncu-rep")
BASIC = ("rtx3070-vecadd-basic-ncu2022.3", "CuVectorAddDrv.ncu-rep")
LEGACY = ("gtx1080-vecadd-legacy-rawcsv", "nsight_vectoradd_100_32_metrics_report.nsight-cuprof-report")
LEGACY_CSV = ("gtx1080-vecadd-legacy-rawcsv", "nsight_vectoradd_100_32_metrics_all.csv")
NERSC = ("a100-dropout-nersc-metrics-csv", "nsight162.csv")
RTX5060_RAW = ("rtx5060-wmma-fp16-rawcsv-ncu2026.1", "gen5_stall_async8.csv")
NERSC_LAUNCHES = 3  # the derived CSV cases keep the first three launches of the real export
SCRIPT_NAME = "<script>alert(\"roofline\")</script> & 'single' \"double\" </script><!--"
SHELL_NAME = "$(touch PWNED_dollar); `touch PWNED_tick`; echo x | tee PWNED_pipe && rm -rf ./PWNED_none # > PWNED_gt"


@dataclass(frozen=True)
class Case:
    """One bad input (or bad config) and the behaviour the pipeline must show for it."""

    id: str
    behaviour: str  # refused | kept | accepted | config
    build: Callable[[Path], object]  # input cases: -> Path; config cases: -> (config dict, [config files])
    message: str = ""  # regex the one message must match (besides the file name, checked separately)
    origin: str = "hand-made"  # "hand-made" or "derived from <real fixture>"
    launches: int | None = None  # kept/accepted: launches that must all be kept
    launch: int | None = None  # kept: the launch the warning names (None: a file-level warning)
    check: Callable[[pd.DataFrame], None] | None = field(default=None, compare=False)

    @property
    def is_config(self) -> bool:
        return self.behaviour == "config"


# -- helpers ---------------------------------------------------------------------------------------


def _real(pair: tuple[str, str]) -> Path:
    return real_fixture(pair[0]) / pair[1]


def _write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


def _truncated(name: str, fraction: float | None = None, size: int | None = None) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        data = _real(SILU).read_bytes()
        cut = size if size is not None else int(len(data) * fraction)
        if cut < 0:
            cut = len(data) + cut
        return _write(tmp / f"{name}.ncu-rep", data[:cut])

    return build


def nersc_rows() -> tuple[list[str], list[list[str]]]:
    """Header and rows of the first launches of the real NERSC long CSV export."""
    with open(_real(NERSC), newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        rows = [r for r in reader if int(r[0]) < NERSC_LAUNCHES]
    return header, rows


def _csv_text(header: list[str], rows: list[list[str]], delimiter: str = ",") -> str:
    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def _nersc(name: str, edit: Callable[[list[str], list[list[str]]], None] | None = None, delimiter: str = ","):
    """A case built from the real NERSC export: ``edit(header, rows)`` changes it in place."""

    def build(tmp: Path) -> Path:
        header, rows = nersc_rows()
        if edit is not None:
            edit(header, rows)
        return _write(tmp / f"{name}.csv", _csv_text(header, rows, delimiter))

    return build


def _cell(header: list[str], rows: list[list[str]], launch: int, metric: str) -> list[str]:
    """The row of ``launch`` and ``metric``, to edit in place."""
    for row in rows:
        if int(row[0]) == launch and row[header.index("Metric Name")] == metric:
            return row
    raise KeyError(f"launch {launch} metric {metric} not in the NERSC export")


def _set(launch: int, metric: str, value: str | None = None, unit: str | None = None):
    def edit(header: list[str], rows: list[list[str]]) -> None:
        row = _cell(header, rows, launch, metric)
        if value is not None:
            row[header.index("Metric Value")] = value
        if unit is not None:
            row[header.index("Metric Unit")] = unit

    return edit


def _rename_kernel(launch: int, name: str):
    def edit(header: list[str], rows: list[list[str]]) -> None:
        column = header.index("Kernel Name")
        for row in rows:
            if int(row[0]) == launch:
                row[column] = name

    return edit


def _markup_names(header: list[str], rows: list[list[str]]) -> None:
    _rename_kernel(0, SCRIPT_NAME)(header, rows)
    _rename_kernel(1, SHELL_NAME)(header, rows)


def _nan_launch(header: list[str], rows: list[list[str]]) -> None:
    for row in rows:
        if int(row[0]) == 1:
            row[header.index("Metric Value")] = "nan"


def _duplicate_launch(header: list[str], rows: list[list[str]]) -> None:
    again = [list(r) for r in rows if int(r[0]) == 0]
    for row in again:
        if row[header.index("Metric Name")] == "dram__bytes.sum":
            row[header.index("Metric Value")] = "5,000,000"
    rows.extend(again)


def _two_devices(header: list[str], rows: list[list[str]]) -> None:
    names = {0: "NVIDIA A100-SXM4-40GB", 1: "NVIDIA A100-SXM4-40GB", 2: "NVIDIA H100 PCIe"}
    extra = []
    for launch, device in names.items():
        row = list(next(r for r in rows if int(r[0]) == launch))
        row[header.index("Metric Name")] = "device__attribute_display_name"
        row[header.index("Metric Unit")] = ""
        row[header.index("Metric Value")] = device
        extra.append(row)
    rows.extend(extra)


def _mixed_prefixes(header: list[str], rows: list[list[str]]) -> None:
    value, unit = header.index("Metric Value"), header.index("Metric Unit")
    scale = {("dram__bytes.sum", 1): ("Mbyte", 1e6), ("gpu__time_duration.sum", 2): ("usecond", 1e3),
             ("l1tex__t_bytes.sum", 0): ("Kbyte", 1e3), ("lts__t_bytes.sum", 2): ("Gbyte", 1e9)}
    for row in rows:
        key = (row[header.index("Metric Name")], int(row[0]))
        if key in scale:
            new_unit, factor = scale[key]
            row[value] = repr(float(row[value].replace(",", "")) / factor)
            row[unit] = new_unit


def _narrow_spaces(header: list[str], rows: list[list[str]]) -> None:
    row = _cell(header, rows, 2, "dram__bytes.sum")
    row[header.index("Metric Value")] = row[header.index("Metric Value")].replace(",", "\u202f")


def _reference_counters() -> pd.DataFrame:
    """The counters of the unedited derived NERSC CSV, for value checks."""
    import tempfile

    from roofline.parse.counters import parse_input

    with tempfile.TemporaryDirectory() as tmp:
        path = _nersc("reference")(Path(tmp))
        return parse_input(path, "reference", "csv")


def _same_values_as_unedited(counters: pd.DataFrame) -> None:
    reference = _reference_counters()
    for column in ("duration_s", "dram_bytes", "l1_bytes", "l2_bytes", "flop_fp64", "flop_fp32"):
        np.testing.assert_allclose(counters[column].to_numpy(), reference[column].to_numpy(), rtol=1e-12)


def _thousands_parsed(counters: pd.DataFrame) -> None:
    assert counters["dram_bytes"].iat[0] == 4_194_688.0  # "4,194,688" in the export
    assert counters["duration_s"].iat[0] == pytest.approx(11_744e-9, rel=1e-12)  # "11,744" nsecond
    _same_values_as_unedited(counters)


def _long_name_kept(counters: pd.DataFrame) -> None:
    assert len(counters["kernel"].iat[0]) >= 10_240
    assert len(counters["kernel_short"].iat[0]) <= 80


def _script_name_kept(counters: pd.DataFrame) -> None:
    assert counters["kernel"].iat[0] == SCRIPT_NAME
    assert counters["kernel"].iat[1] == SHELL_NAME


def _refused_value(column: str, launch: int) -> Callable[[pd.DataFrame], None]:
    def check(counters: pd.DataFrame) -> None:
        row = counters[counters["launch"] == launch].iloc[0]
        assert np.isnan(row[column]), f"{column} of launch {launch} should be refused (NaN)"
        assert str(row[f"{column}_refused"]) != "", f"{column}_refused should say why"
        others = counters[counters["launch"] != launch]
        assert others[column].notna().all(), "the other launches keep their values"

    return check


def _zero_duration(counters: pd.DataFrame) -> None:
    _refused_value("duration_s", 1)(counters)
    row = counters[counters["launch"] == 1].iloc[0]
    assert row["dram_bytes"] > 0, "counted quantities that need no time are kept"


# -- hand-made text cases --------------------------------------------------------------------------

_WHAT_IF_OK = (
    "# hand-made what-if table\n"
    "machines:\n  m: {compute: {fp32: 100.0e+12}, memory: {dram: 1.0e+12}}\n"
    "kernels:\n  - {name: k1, machine: m, flop: {fp32: 1.0e+9}, bytes: {dram: 1.0e+8}, duration_s: 1.0e-3}\n"
)


def _text(name: str, text: str) -> Callable[[Path], Path]:
    return lambda tmp: _write(tmp / name, text)


def _random_bytes(name: str, prefix: bytes = b"", seed: int = 1) -> Callable[[Path], Path]:
    return lambda tmp: _write(tmp / name, prefix + random.Random(seed).randbytes(65_536))


def _appended(name: str, extra: bytes) -> Callable[[Path], Path]:
    return lambda tmp: _write(tmp / name, _real(SILU).read_bytes() + extra)


def _copy(pair: tuple[str, str], name: str, transform: Callable[[bytes], bytes] = lambda b: b):
    return lambda tmp: _write(tmp / name, transform(_real(pair).read_bytes()))


def _without_units_row(data: bytes) -> bytes:
    lines = data.splitlines(keepends=True)
    return b"".join(lines[:1] + lines[2:])


def _nersc_head_bytes(_: bytes) -> bytes:
    header, rows = nersc_rows()
    return _csv_text(header, rows).encode()


def _duplicated_header_range(data: bytes) -> bytes:
    """The raw export with bytes 4683-6311 of its header written twice (a half-written export
    appended to): every later value falls under another metric's name, which gives a 0 L1 clock,
    17 Hz SM clock, 0 peaks and 1e10 SMs (issue #47: the ceilings job divided by that 0 clock)."""
    return data[:6311] + data[4683:6311] + data[6311:]


def _latin1_kernel(tmp: Path) -> Path:
    header, rows = nersc_rows()
    _rename_kernel(0, "void fused_dropout_kernel_v\x00c<double>(double *)")(header, rows)
    text = _csv_text(header, rows).encode("utf-8").replace(b"\x00", b"\xe9")  # é in Latin-1
    return _write(tmp / "csv_latin1_kernel_name.csv", text)


# -- config cases (hand-made) ----------------------------------------------------------------------


def _config(config: dict, files: dict[str, str] | None = None, raw_yaml: str | None = None):
    def build(tmp: Path):
        for name, text in (files or {}).items():
            _write(tmp / name, text)
        configfiles = []
        if raw_yaml is not None:
            configfiles.append(_write(tmp / "config.yaml", raw_yaml))
        return config, configfiles

    return build


_GPU = {
    "names": ["Hand-made GPU"],
    "architecture": "Test",
    "compute_capability": "9.0",
    "sm_count": 10,
    "boost_clock_hz": 1.5e9,
    "spec_source": "hand-made test entry",
    "compute": {"fp32": {"value": 1.0e13, "source": "hand-made"}},
    "memory": {"dram": {"value": 9.0e11, "source": "hand-made"}},
}


def _gpu(**memory) -> dict:
    entry = dict(_GPU)
    entry["memory"] = {"dram": {"source": "hand-made", **memory}}
    return {"ceilings": {"gpus": {"hand_made_gpu": entry}}}


_CATALOG_GIB = (
    "# hand-made catalog with a binary prefix\ngpus:\n  hand_made_gpu:\n    names: [Hand-made GPU]\n"
    "    architecture: Test\n    compute_capability: '9.0'\n    sm_count: 10\n    boost_clock_hz: 1.5e+9\n"
    "    spec_source: hand-made\n    compute: {fp32: {value: 1.0e+13, source: hand-made}}\n"
    "    memory: {dram: {value: 900 GiB/s, source: hand-made}}\n"
)


def _catalog_file(tmp_name: str):
    def build(tmp: Path):
        path = _write(tmp / tmp_name, _CATALOG_GIB)
        return {"ceilings": {"catalog": str(path)}}, []

    return build


# -- the corpus ------------------------------------------------------------------------------------

TRUNCATED = r"truncated.*(Copy the report again|re-run ncu with --export)"
REEXPORT = r"(re-export|--export|ncu --csv)"
FROM_SILU = f"derived from {SILU[0]}"
FROM_NERSC = f"derived from {NERSC[0]} (first {NERSC_LAUNCHES} launches)"

CASES: list[Case] = [
    # .ncu-rep files
    Case("empty_ncu_rep", "refused", _text("empty.ncu-rep", ""), r"empty.*--export"),
    Case("truncated_8_bytes", "refused", _truncated("trunc_8b", size=8), TRUNCATED, FROM_SILU),
    Case("truncated_16_bytes", "refused", _truncated("trunc_16b", size=16), TRUNCATED, FROM_SILU),
    Case("truncated_4_kib", "refused", _truncated("trunc_4k", size=4096), TRUNCATED, FROM_SILU),
    Case("truncated_25_percent", "refused", _truncated("trunc_25pct", 0.25), TRUNCATED, FROM_SILU),
    Case("truncated_50_percent", "refused", _truncated("trunc_50pct", 0.50), TRUNCATED, FROM_SILU),
    Case("truncated_90_percent", "refused", _truncated("trunc_90pct", 0.90), TRUNCATED, FROM_SILU),
    Case("truncated_last_byte", "refused", _truncated("trunc_minus1", size=-1), TRUNCATED, FROM_SILU),
    Case("stray_bytes_appended", "refused", _appended("stray_bytes.ncu-rep", b"\x00\x01\x02"),
         r"stray byte.*(Copy the report again|--export)", FROM_SILU),
    Case("random_binary_renamed", "refused", _random_bytes("random_binary.ncu-rep"),
         r"not an Nsight Compute report.*'NVR' signature.*no kernel launch.*--export"),
    Case("random_binary_with_signature", "refused", _random_bytes("random_nvr.ncu-rep", b"NVR\x00\x02\x00\x00\x00"),
         TRUNCATED),
    Case("text_renamed", "refused", _text("text_renamed.ncu-rep", "hand-made: just some notes\nnot a report\n"),
         r"a text file.*not an Nsight Compute report.*--export"),
    Case("csv_export_renamed", "refused", _copy(NERSC, "csv_renamed.ncu-rep", _nersc_head_bytes),
         r"a text file.*ncu CSV export: rename it to \.csv", FROM_NERSC),
    Case("legacy_report", "refused", _copy(LEGACY, "legacy.nsight-cuprof-report"),
         r"legacy \.nsight-cuprof-report.*ncu 2020\.1 or newer.*--set roofline", f"derived from {LEGACY[0]}"),
    Case("report_without_roofline_metrics", "kept", _copy(BASIC, "basic_sections.ncu-rep"),
         r"cannot derive dram_bytes, flop; collect it with --metrics dram__bytes\.sum.*--set roofline",
         f"derived from {BASIC[0]}", launches=1, launch=0),
    # ncu CSV exports
    Case("csv_empty", "refused", _text("csv_empty.csv", ""), r"empty.*ncu --import .*--csv"),
    Case("csv_header_only", "refused", _copy(NERSC, "csv_header_only.csv", lambda b: b.splitlines(True)[0]),
         r"no rows.*ncu profiled no kernel.*--kernel-name", FROM_NERSC),
    Case("csv_missing_units_row", "refused", _copy(LEGACY_CSV, "csv_no_units.csv", _without_units_row),
         r"no units row.*--page raw", f"derived from {LEGACY_CSV[0]}"),
    Case("csv_semicolon_delimiter", "refused", _nersc("csv_semicolon", delimiter=";"),
         r"separated by ';'.*ncu --csv", FROM_NERSC),
    Case("csv_tab_delimiter", "refused", _nersc("csv_tab", delimiter="\t"), r"separated by '\\t'.*ncu --csv",
         FROM_NERSC),
    Case("csv_not_an_ncu_export", "refused", _text("csv_notes.csv", "hand-made,notes\n1,2\n"),
         r"not an ncu CSV export.*--page raw"),
    Case("csv_mixed_unit_prefixes", "accepted", _nersc("csv_mixed_prefixes", _mixed_prefixes), origin=FROM_NERSC,
         launches=3, check=_same_values_as_unedited),
    Case("csv_thousands_separators", "accepted", _nersc("csv_thousands", _narrow_spaces), origin=FROM_NERSC,
         launches=3, check=_thousands_parsed),
    Case("csv_binary_prefix_unit", "refused", _nersc("csv_kibyte", _set(1, "dram__bytes.sum", unit="Kibyte")),
         r"line \d+:.*'Kibyte'.*dram__bytes\.sum.*binary prefixes.*decimal", FROM_NERSC),
    Case("csv_bit_unit", "refused", _nersc("csv_mbit", _set(1, "dram__bytes.sum", unit="Mbit")),
         r"'Mbit'.*bits.*decimal bytes", FROM_NERSC),
    Case("csv_unknown_unit", "refused", _nersc("csv_furlong", _set(1, "gpu__time_duration.sum", unit="furlong")),
         r"unknown unit 'furlong'.*gpu__time_duration\.sum.*ncu --csv", FROM_NERSC),
    Case("csv_value_not_a_number", "refused", _nersc("csv_apples", _set(2, "dram__bytes.sum", "12 apples")),
         r"line \d+:.*dram__bytes\.sum.*'12 apples', not a number.*re-export", FROM_NERSC),
    Case("csv_na_value", "kept", _nersc("csv_na", _set(1, "dram__bytes.sum", "n/a")),
         r"launch 1 .*cannot derive dram_bytes; collect it with --metrics dram__bytes\.sum", FROM_NERSC,
         launches=3, launch=1),
    Case("csv_nan_launch", "kept", _nersc("csv_nan_launch", _nan_launch),
         r"launch 1 .*cannot derive duration_s, dram_bytes, flop; collect it with", FROM_NERSC, launches=3, launch=1),
    Case("csv_zero_duration", "kept", _nersc("csv_zero_duration", _set(1, "gpu__time_duration.sum", "0")),
         r"launch 1 .*duration_s refused.*gpu__time_duration\.sum gives 0 s: zero.*launch is kept.*check the export",
         FROM_NERSC, launches=3, launch=1, check=_zero_duration),
    Case("csv_zero_sm_clock", "kept",
         _nersc("csv_zero_sm_clock", _set(1, "sm__cycles_elapsed.avg.per_second", "0")),
         r"launch 1 .*sm_clock_hz refused.*sm__cycles_elapsed\.avg\.per_second gives 0 Hz: zero.*check the export",
         FROM_NERSC, launches=3, launch=1, check=_refused_value("sm_clock_hz", 1)),
    Case("rawcsv_duplicated_header_range", "kept", _copy(RTX5060_RAW, "dup_range.csv", _duplicated_header_range),
         r"launch 0 .*sm_clock_hz refused.*gives 17\.21 Hz: below the plausible minimum 1e\+06 Hz.*"
         r"l1_clock_hz refused.*gives 0 Hz: zero.*peak_l2_bw refused.*gives 0 B/s: zero.*"
         r"sm_count refused \(device__attribute_multiprocessor_count gives 1\.044e\+10 SMs.*check the export",
         f"derived from {RTX5060_RAW[0]} (a header range written twice)", launches=1, launch=0,
         check=_refused_value("l1_clock_hz", 0)),
    Case("csv_negative_bytes", "kept", _nersc("csv_negative_bytes", _set(1, "dram__bytes.sum", "-4,194,688")),
         r"launch 1 .*dram_bytes refused.*dram__bytes\.sum gives -4\.195e\+06 B: negative.*check the export",
         FROM_NERSC, launches=3, launch=1, check=_refused_value("dram_bytes", 1)),
    Case("csv_duration_of_years", "kept", _nersc("csv_years", _set(2, "gpu__time_duration.sum", "3.2e+16")),
         r"launch 2 .*duration_s refused.*3\.2e\+07 s: above the plausible maximum 86400 s",
         FROM_NERSC, launches=3, launch=2, check=_refused_value("duration_s", 2)),
    Case("csv_flops_above_1e18", "kept",
         _nersc("csv_exaflops", _set(0, "sm__sass_thread_inst_executed_op_dfma_pred_on.sum", "1e+20")),
         r"launch 0 .*flop_fp64 refused.*FLOP/s: above the plausible maximum 1e\+18 FLOP/s",
         FROM_NERSC, launches=3, launch=0, check=_refused_value("flop_fp64", 0)),
    Case("csv_negative_peak_clock", "kept",
         _nersc("csv_negative_clock", _set(2, "sm__cycles_elapsed.avg.per_second", "-1,046,387,753.56")),
         r"launch 2 .*sm_clock_hz refused.*negative", FROM_NERSC, launches=3, launch=2,
         check=_refused_value("sm_clock_hz", 2)),
    Case("csv_duplicate_launch_ids", "refused", _nersc("csv_duplicate_ids", _duplicate_launch),
         r"launch ID 0 gives metric 'dram__bytes\.sum' twice with different values.*split it", FROM_NERSC),
    Case("csv_two_devices", "kept", _nersc("csv_two_devices", _two_devices),
         r"launches ran on 2 devices \(NVIDIA A100-SXM4-40GB: 2 launch\(es\) \[0, 1\]; NVIDIA H100 PCIe: 1 "
         r"launch\(es\) \[2\]\).*split it, one file per device", FROM_NERSC, launches=3),
    Case("csv_non_utf8_kernel_name", "kept", _latin1_kernel, r"not UTF-8 were replaced by U\+FFFD.*re-export",
         FROM_NERSC, launches=3),
    Case("csv_10kb_kernel_name", "accepted",
         _nersc("csv_long_name", _rename_kernel(0, "void huge<" + "float, " * 1500 + "int>(float *)")),
         origin=FROM_NERSC, launches=3, check=_long_name_kept),
    Case("csv_markup_and_shell_kernel_names", "accepted",
         _nersc("csv_markup_names", _markup_names),
         origin=FROM_NERSC, launches=3, check=_script_name_kept),
    # what-if tables (hand-made)
    Case("whatif_yaml_unknown_kernel_key", "refused",
         _text("whatif_flops.yaml", _WHAT_IF_OK.replace("flop: {", "flops: {")),
         r"kernels\[0\]: unknown keys \['flops'\]; a kernel may have .*config/README\.md"),
    Case("whatif_yaml_unknown_top_level_key", "refused",
         _text("whatif_machine.yaml", _WHAT_IF_OK.replace("machines:", "machine:")),
         r"unknown top-level keys \['machine'\].*only 'machines:' and 'kernels:'"),
    Case("whatif_yaml_unknown_machine_key", "refused",
         _text("whatif_machine_key.yaml", _WHAT_IF_OK.replace("memory: {dram", "memroy: {dram")),
         r"machines\.m: unknown keys \['memroy'\]"),
    Case("whatif_yaml_without_kernels", "refused", _text("whatif_empty.yaml", "# hand-made\nmachines: {}\n"),
         r"needs a 'kernels:' list.*config/README\.md"),
    Case("whatif_yaml_bad_launches", "refused",
         _text("whatif_launches.yaml", _WHAT_IF_OK.replace("duration_s: 1.0e-3}", "duration_s: 1.0e-3, launches: x}")),
         r"kernels\[0\]\.launches: expected a whole number"),
    Case("whatif_yaml_negative_bytes", "kept",
         _text("whatif_negative.yaml", _WHAT_IF_OK.replace("dram: 1.0e+8", "dram: -1.0e+8")),
         r"launch 0 .*dram_bytes refused.*-1e\+08 B: negative", launches=1, launch=0),
    Case("whatif_csv_missing_gpu_column", "refused",
         _text("whatif_nogpu.csv", "kernel,flop_fp32,dram_bytes\nk1,1.0e+9,1.0e+8\n"),
         r"needs a 'gpu' column.*columns: kernel, gpu"),
    Case("whatif_csv_missing_work_columns", "refused",
         _text("whatif_nowork.csv", "kernel,gpu\nk1,NVIDIA A100-SXM4-80GB\n"),
         r"at least one flop_<class> or <level>_bytes column"),
    Case("whatif_csv_unknown_column", "refused",
         _text("whatif_flops.csv", "kernel,gpu,flops\nk1,NVIDIA A100-SXM4-80GB,1.0e+9\n"),
         r"unknown what-if columns \['flops'\]; allowed"),
    Case("whatif_csv_not_a_number", "refused",
         _text("whatif_lots.csv", "kernel,gpu,flop_fp32\nk1,NVIDIA A100-SXM4-80GB,lots\n"),
         r"line 2: column 'flop_fp32' has 'lots', not a number"),
    # configuration (hand-made): the run stops before any job, naming the key
    Case("config_unknown_top_level_key", "config", _config({"inptus": ["x.ncu-rep"]}),
         r"unknown config key 'inptus': remove it or check its spelling"),
    Case("config_unknown_nested_key", "config", _config({"ceilings": {"polcy": ["report"]}}),
         r"unknown config key 'ceilings\.polcy'"),
    Case("config_unknown_app_key", "config", _config({"apps": {"gemm": {"reprot": "x.ncu-rep", "command": "x"}}}),
         r"unknown config key 'apps\.gemm\.reprot'"),
    Case("config_wrong_type_number", "config", _config({"classify": {"low_roof_fraction": "lots"}}),
         r"config key 'classify\.low_roof_fraction'.*number.*config/README\.md"),
    Case("config_wrong_type_list", "config", _config({"inputs": 5}), r"config key 'inputs'.*list"),
    Case("config_out_of_range", "config", _config({"report": {"top_kernels": -3}}),
         r"config key 'report\.top_kernels'.*greater than or equal to 1"),
    Case("app_name_with_slash", "config", _config({"apps": {"a/b": {"command": "./a"}}}),
         r"app name 'a/b' \(from apps:\) may use only letters, digits"),
    Case("app_name_dotdot", "config", _config({"apps": {"..": {"command": "./a"}}}), r"app name '\.\.'"),
    Case("app_name_parent_path", "config", _config({"apps": {"../evil": {"command": "./a"}}}),
         r"app name '\.\./evil'"),
    Case("app_name_with_space", "config", _config({"apps": {"my app": {"command": "./a"}}}),
         r"app name 'my app' \(from apps:\) may use only letters, digits"),
    Case("app_name_unicode", "config", _config({"apps": {"ünïcødé": {"command": "./a"}}}),
         r"app name 'ünïcødé'.*may use only letters"),
    Case("apps_report_missing", "config", _config({"apps": {"gemm": {"report": "gone/gemm.ncu-rep"}}}),
         r"apps\.gemm\.report: 'gone/gemm\.ncu-rep' does not exist"),
    Case("apps_report_unknown_type", "config", _config({"apps": {"notes": {"report": "notes.txt"}}},
                                                       {"notes.txt": "hand-made notes\n"}),
         r"apps\.notes\.report: 'notes\.txt': unknown file type; accepted are \.ncu-rep"),
    Case("duplicate_app_key_in_yaml", "config",
         _config({"apps": {"gemm": {"command": "./b"}}},
                 raw_yaml="# hand-made\napps:\n  gemm: {command: ./a}\n  gemm: {command: ./b}\n"),
         r"config\.yaml: line 4: key 'gemm' is given twice.*remove or rename one"),
    Case("catalog_entry_in_bits", "config", _config(_gpu(value="7.2 Tbit/s")),
         r"config key 'ceilings\.gpus'.*GPU 'hand_made_gpu', memory\.dram\.value.*bits.*bytes per second"),
    Case("catalog_entry_binary_prefix", "config", _config(_gpu(value="900 GiB/s")),
         r"config key 'ceilings\.gpus'.*memory\.dram\.value.*binary prefix.*decimal SI"),
    Case("catalog_file_binary_prefix", "config", _catalog_file("my_gpus.yaml"),
         r"config key 'ceilings\.catalog'.*my_gpus\.yaml.*binary prefix"),
]

INPUT_CASES = [c for c in CASES if not c.is_config]
CONFIG_CASES = [c for c in CASES if c.is_config]


def case(case_id: str) -> Case:
    """The case of that id."""
    return next(c for c in CASES if c.id == case_id)


# -- what inputs: patterns find beside a good input ------------------------------------------------


@dataclass(frozen=True)
class PatternCase:
    """What an ``inputs:`` pattern finds (or does not) beside a good input, and what must follow.

    ``build(tmp, folder)`` writes the case's files under ``tmp / folder`` (``inputs/<id>``, so that
    cases can share one run) and returns its config: ``inputs`` patterns, perhaps ``apps``.
    """

    id: str
    behaviour: str  # named | unreadable | no_app
    build: Callable[[Path, str], dict]
    message: str = ""  # unreadable, no_app: regex the error or the warning (problem: fix) must match
    apps: dict[str, str] = field(default_factory=dict)  # named, unreadable: file (under folder) -> app name
    launches: int | None = None  # named: launches each of its apps must have
    origin: str = "hand-made"
    names: str = ""  # no_app: what the warning names ("" = the pattern); {d} is the case's folder


def _found(files: dict[str, Callable[[], bytes | str] | bytes | str], patterns: list[str],
           apps: dict | None = None) -> Callable[[Path, str], dict]:
    """Files (name -> content, or a function making it) under the case's folder and its patterns;
    ``{d}`` in a name, pattern or apps: path is that folder."""

    def build(tmp: Path, folder: str) -> dict:
        (tmp / folder).mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            _write(tmp / folder / name.format(d=folder), content() if callable(content) else content)
        config = {"inputs": [p.format(d=folder) for p in patterns]}
        if apps:
            config["apps"] = {n: {k: v.format(d=folder) for k, v in a.items()} for n, a in apps.items()}
        return config

    return build


def _nersc_csv() -> str:
    header, rows = nersc_rows()
    return _csv_text(header, rows)


def _gzipped_nersc() -> bytes:
    return gzip.compress(_nersc_csv().encode(), mtime=0)


def _link(name: str, target: str) -> Callable[[Path, str], dict]:
    def build(tmp: Path, folder: str) -> dict:
        (tmp / folder).mkdir(parents=True, exist_ok=True)
        os.symlink(target, tmp / folder / name)
        return {"inputs": [f"{folder}/*"]}

    return build


def _pipe(name: str) -> Callable[[Path, str], dict]:
    def build(tmp: Path, folder: str) -> dict:
        if not hasattr(os, "mkfifo"):
            pytest.skip("no named pipes on this system")
        (tmp / folder).mkdir(parents=True, exist_ok=True)
        os.mkfifo(tmp / folder / name)
        return {"inputs": [f"{folder}/*"]}

    return build


def _folders(*names: str, files: dict[str, str] | None = None, pattern: str = "{d}/*") -> Callable[[Path, str], dict]:
    def build(tmp: Path, folder: str) -> dict:
        for name in names:
            (tmp / folder / name).mkdir(parents=True, exist_ok=True)
        for name, text in (files or {}).items():
            _write(tmp / folder / name, text)
        return {"inputs": [pattern.format(d=folder)]}

    return build


NARROW = r"narrow the pattern '{d}/\*' so that it does not match it"

PATTERN_CASES: list[PatternCase] = [
    # odd names and compressed exports: analysed under a derived name
    PatternCase("csv_gzip_beside_good", "named", _found({"nersc_gz.csv.gz": _gzipped_nersc}, ["{d}/*"]),
                apps={"nersc_gz.csv.gz": "nersc_gz"}, launches=NERSC_LAUNCHES, origin=FROM_NERSC),
    PatternCase("csv_name_spaces_brackets", "named", _found({"my run (1).csv": _nersc_csv}, ["{d}/*"]),
                apps={"my run (1).csv": "my_run_1"}, launches=NERSC_LAUNCHES, origin=FROM_NERSC),
    PatternCase("yaml_name_unicode", "named", _found({"ünïcødé.yaml": _WHAT_IF_OK}, ["{d}/*"]),
                apps={"ünïcødé.yaml": "unicode"}, launches=1),
    PatternCase("yaml_name_leading_dot", "named", _found({".hidden_run.yaml": _WHAT_IF_OK}, ["{d}/.hidden_run.yaml"]),
                apps={".hidden_run.yaml": "hidden_run"}, launches=1),
    PatternCase("yaml_name_dots_only", "named", _found({"...yaml": _WHAT_IF_OK}, ["{d}/...yaml"]),
                apps={"...yaml": "app"}, launches=1),
    PatternCase("yaml_name_several_dots", "named", _found({"run.v1.2.yaml": _WHAT_IF_OK}, ["{d}/*"]),
                apps={"run.v1.2.yaml": "run.v1.2"}, launches=1),
    PatternCase("two_inputs_one_name", "named",
                _found({"b/twin.yaml": _WHAT_IF_OK, "a/twin.yml": _WHAT_IF_OK}, ["{d}/b/*", "{d}/a/*"]),
                apps={"a/twin.yml": "twin", "b/twin.yaml": "twin-2"}, launches=1),
    PatternCase("input_name_taken_by_apps_entry", "named",
                _found({"taken.yaml": _WHAT_IF_OK, "own.yaml": _WHAT_IF_OK}, ["{d}/taken.yaml"],
                       {"taken": {"report": "{d}/own.yaml"}}),
                apps={"taken.yaml": "taken-2", "own.yaml": "taken"}, launches=1),
    # files a pattern found that cannot be read: an app with one error
    PatternCase("unknown_file_type", "unreadable", _found({"notes.txt": "hand-made notes\n"}, ["{d}/*"]),
                r"notes\.txt: unknown file type '\.txt'; accepted are \.ncu-rep.*rename it.*" + NARROW,
                apps={"notes.txt": "notes"}),
    PatternCase("unknown_compression", "unreadable", _found({"packed.csv.7z": "hand-made\n"}, ["{d}/*"]),
                r"packed\.csv\.7z: ends in '\.7z' after '\.csv', which is not read.*\.gz.*rename or recompress",
                apps={"packed.csv.7z": "packed.csv"}),
    PatternCase("nsight_systems_report", "unreadable", _found({"timeline.nsys-rep": "hand-made\n"}, ["{d}/*"]),
                r"timeline\.nsys-rep: an Nsight Systems report.*ncu --set roofline",
                apps={"timeline.nsys-rep": "timeline"}),
    PatternCase("broken_link", "unreadable", _link("moved.ncu-rep", "../elsewhere/moved.ncu-rep"),
                r"moved\.ncu-rep: a link to '\.\./elsewhere/moved\.ncu-rep', which does not exist: restore the file",
                apps={"moved.ncu-rep": "moved"}),
    PatternCase("named_pipe", "unreadable", _pipe("stream.csv"),
                r"stream\.csv: not a regular file.*remove it.*" + NARROW, apps={"stream.csv": "stream"}),
    # what gave no app: one warning each
    PatternCase("glob_matches_nothing", "no_app", _folders("captures", pattern="{d}/captures/*.ncu-rep"),
                r"'{d}/captures/\*\.ncu-rep' matches no file.*check that it ran and wrote them"),
    PatternCase("glob_folder_missing", "no_app", _folders(pattern="{d}/nightly/*.ncu-rep"),
                r"'{d}/nightly/\*\.ncu-rep': the folder '{d}/nightly' does not exist.*check that it ran"),
    PatternCase("path_does_not_exist", "no_app",
                _found({"stencil_v1.yaml": _WHAT_IF_OK}, ["{d}/stencil_v1.yaml", "{d}/stencil_v2.yaml"]),
                r"'{d}/stencil_v2\.yaml' does not exist.*did you mean '{d}/stencil_v1\.yaml'\?"),
    PatternCase("folder_without_exports", "no_app", _folders("empty_night"),
                r"{d}/empty_night: a folder without ncu CSV exports.*it is empty: check that the exports were written",
                names="{d}/empty_night"),
    PatternCase("folder_of_reports", "no_app",
                _folders(files={"reports/a.yaml": _WHAT_IF_OK, "reports/b.yaml": _WHAT_IF_OK},
                         pattern="{d}/reports"),
                r"{d}/reports: a folder without ncu CSV exports.*holds 2 input file\(s\) \(\.yaml\).*'{d}/reports/\*'",
                names="{d}/reports"),
]


def pattern_case(case_id: str) -> PatternCase:
    """The pattern case of that id."""
    return next(c for c in PATTERN_CASES if c.id == case_id)
