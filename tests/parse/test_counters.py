"""Parse stage: every real report's numbers against independent arithmetic on its own metrics."""

import gzip
import hashlib
import lzma
import math
import os
import re
import signal
import threading
import time
import warnings

import pandas as pd
import pyarrow as pa
import pytest
from conftest import (
    CONTRACT_COLUMNS,
    REPO,
    expected_dram,
    expected_flop,
    get,
    real_fixture,
    real_reports,
    report_id,
    report_metrics,
    smsp_cycles,
)

from roofline.errors import InputError
from roofline.parse.counters import diagnostics_for, parse_input, read_input

REPORTS = real_reports()
TEXTBOOK = REPO / "data" / "examples" / "textbook.yaml"


@pytest.mark.parametrize("path", REPORTS, ids=[report_id(p) for p in REPORTS])
def test_parse_real_report_matches_rawreport_metrics(path):
    counters = parse_input(path, "app", "ncu-rep")
    oracle = report_metrics(path)
    assert len(counters) == len(oracle)
    for i, m in enumerate(oracle):
        row = counters.iloc[i]
        assert row["duration_s"] == pytest.approx(get(m, "gpu__time_duration.sum") * 1e-9, rel=1e-3)
        for p, column in (("d", "flop_fp64"), ("f", "flop_fp32")):
            expected = expected_flop(m, p)
            if math.isnan(expected):
                assert math.isnan(row[column]), f"{path.parent.name} launch {i} {column}"
            else:
                assert row[column] == pytest.approx(expected, rel=1e-3, abs=1e-9)
        expected = expected_dram(m)
        if math.isnan(expected):
            assert math.isnan(row["dram_bytes"])
        else:
            assert row["dram_bytes"] == pytest.approx(expected, rel=1e-3)
        if "lts__t_sectors.sum" in m:
            assert row["l2_bytes"] == pytest.approx(32 * get(m, "lts__t_sectors.sum"), rel=1e-3)
            assert row["l2_bytes_recipe"] == "lts_t_sectors_x32"
        if "dram__bytes.sum.peak_sustained" in m and "dram__cycles_elapsed.avg.per_second" in m:
            assert row["peak_dram_bw"] == pytest.approx(
                get(m, "dram__bytes.sum.peak_sustained") * get(m, "dram__cycles_elapsed.avg.per_second"), rel=1e-3
            )
        ffma_peak = "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained"
        if ffma_peak in m:
            assert row["peak_flops_fp32"] == pytest.approx(
                2 * get(m, ffma_peak) * get(m, "sm__cycles_elapsed.avg.per_second"), rel=1e-3
            )
        assert len(row["source_sha256"]) == 64


def test_parse_two_recipes_agree_where_both_exist():
    """Where a report has both the SMSP cycle average and the sum, both recipes give the same cycles;
    where it has DRAM read+write counts and the rate, rate x duration agrees to within 1 %."""
    spreads = []
    for path in REPORTS:
        for m in report_metrics(path):
            if "smsp__cycles_elapsed.avg" in m and "smsp__cycles_elapsed.sum" in m:
                avg = get(m, "smsp__cycles_elapsed.avg")
                rebuilt = get(m, "smsp__cycles_elapsed.sum") / (4 * get(m, "device__attribute_multiprocessor_count"))
                assert rebuilt == pytest.approx(avg, rel=1e-6)
            if "dram__bytes_read.sum" in m and "dram__bytes.sum.per_second" in m:
                counted = get(m, "dram__bytes_read.sum") + get(m, "dram__bytes_write.sum")
                rated = get(m, "dram__bytes.sum.per_second") * get(m, "gpu__time_duration.sum") * 1e-9
                if counted > 1e6:
                    spreads.append(abs(rated / counted - 1))
    if not spreads:
        pytest.skip("no report with both DRAM recipes")
    assert max(spreads) < 0.01, f"DRAM rate x duration vs counts spread {max(spreads):.4f}"


def test_parse_basic_report_marks_missing_quantities():
    folder = real_fixture("rtx3070-vecadd-basic-ncu2022.3")
    counters = parse_input(folder / "CuVectorAddDrv.ncu-rep", "vecadd", "ncu-rep")
    assert len(counters) == 1
    row = counters.iloc[0]
    assert "dram_bytes" in row["missing"] and "flop" in row["missing"]
    assert "--set roofline" in row["missing_hint"]
    assert row["duration_s"] > 0


def test_parse_silu_fp16_uses_fma_only_lower_bound():
    """The SiLU report has only the HFMA rate: FP16 work is 4 x that rate x SMSP cycles (half2
    convention, from the raw metrics here), labelled a lower bound; its tensor counters are zero."""
    folder = real_fixture("a100sxm-silu-full-ncu2025.1")
    path = next(folder.glob("*.ncu-rep"))
    counters = parse_input(path, "silu", "ncu-rep")
    assert (counters["flop_fp16_recipe"] == "sass_fma_rate_only_x_smsp_cycles").all()
    for i, m in enumerate(report_metrics(path)):
        hfma = get(m, "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum.per_cycle_elapsed")
        assert counters["flop_fp16"].iat[i] == pytest.approx(4 * hfma * smsp_cycles(m), rel=1e-9)
    assert (counters["flop_tensor_fp16_recipe"] == "ampere_count").all()
    assert (counters["flop_tensor"] == 0).all()


def test_parse_refuses_legacy_report_with_version_advice():
    folder = real_fixture("gtx1080-vecadd-legacy-rawcsv")
    with pytest.raises(InputError, match="ncu 2020.1 or newer"):
        parse_input(next(folder.glob("*.nsight-cuprof-report")), "legacy", "legacy")


def test_counters_table_has_contract_columns():
    frame = parse_input(TEXTBOOK, "t", "what-if")
    for column in (*CONTRACT_COLUMNS, "source_file", "source_sha256"):
        assert column in frame.columns
    assert isinstance(frame, pd.DataFrame)


def test_parse_input_records_report_provenance():
    folder = real_fixture("h100pcie-rmsnorm-full-ncu2025.1")
    counters = parse_input(folder / "2025-04-21_v1.ncu-rep", "rmsnorm", "ncu-rep")
    assert (counters["ncu_version"] == "2025.1.0.0").all()
    assert counters["command_line"].str.endswith("-c 3 --set full ./rms_norm_matrix --profile").all()
    data = (folder / "2025-04-21_v1.ncu-rep").read_bytes()
    assert (counters["source_sha256"] == hashlib.sha256(data).hexdigest()).all()


@pytest.mark.skipif(not hasattr(os, "setpriority"), reason="no per-thread nice on this system")
def test_input_hash_runs_at_the_lowest_priority_on_its_own_thread(tmp_path):
    """The input is hashed on a thread at nice 19 (so that it takes only an idle core), which stays,
    idle, for the next input; the caller's thread keeps its priority, and the hash is the file's."""
    from roofline.parse.input_hash import hash_beside

    path = tmp_path / "data.bin"  # hand-made bytes
    path.write_bytes(b"roofline" * 100_000)
    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert hash_beside(path)() == hashlib.sha256(b"roofline" * 100_000).hexdigest()
    (hasher,) = [thread for thread in threading.enumerate() if thread.name == "roofline-hash"]
    assert os.getpriority(os.PRIO_PROCESS, hasher.native_id) == 19
    assert hasher.idle_between_jobs()
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before
    assert hash_beside(path)() == hashlib.sha256(b"roofline" * 100_000).hexdigest()
    assert [thread for thread in threading.enumerate() if thread.name == "roofline-hash"] == [hasher]


def test_input_hash_does_not_wait_for_a_starved_hashing_thread(tmp_path, monkeypatch):
    """On a busy machine the thread at nice 19 may get no core: the caller that needs the digest
    hashes what is left itself, and the digest is still the file's."""
    from roofline.parse import input_hash

    path = tmp_path / "data.bin"  # hand-made bytes, three windows and a part
    data = bytes(range(256)) * ((49 << 20) // 256) + b"tail"
    path.write_bytes(data)
    own = input_hash._hash_window
    stalled = threading.Event()

    def starved(*args):
        if threading.current_thread().name == "roofline-hash":
            stalled.wait(5)  # what a thread the system does not run looks like to the others
        own(*args)

    monkeypatch.setattr(input_hash, "_hash_window", starved)
    try:
        start = time.perf_counter()
        assert input_hash.hash_beside(path)() == hashlib.sha256(data).hexdigest()
        assert time.perf_counter() - start < 3
    finally:
        stalled.set()


@pytest.mark.parametrize("path", REPORTS, ids=[report_id(p) for p in REPORTS])
def test_l1_bytes_and_fp16_match_raw_metrics(path):
    counters = parse_input(path, "app", "ncu-rep")
    for i, m in enumerate(report_metrics(path)):
        row = counters.iloc[i]
        for suffix in ("_mem_lgds", "_mem_lg", ""):
            name = f"l1tex__lsu_writeback_active{suffix}.sum"
            if name in m:
                assert row["l1_bytes"] == pytest.approx(128 * get(m, name), rel=1e-3)
                break
        else:
            assert math.isnan(row["l1_bytes"])
        expected = expected_flop(m, "h")
        if not math.isnan(expected):
            assert row["flop_fp16"] == pytest.approx(expected, rel=1e-3, abs=1e-9)


def test_sha256_of_files_and_folders(tmp_path):
    """The provenance digest equals hashlib's over the bytes: a file (mapped), one larger than the
    mapped window, an empty file (which cannot be mapped) and a folder's files in name order."""
    from roofline.parse.input_hash import sha256

    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "b.csv").write_bytes(b"second" * 1000)
    (folder / "a.csv").write_bytes(b"first\n")
    (folder / "empty.csv").write_bytes(b"")
    assert sha256(folder / "a.csv") == hashlib.sha256(b"first\n").hexdigest()
    assert sha256(folder / "empty.csv") == hashlib.sha256(b"").hexdigest()
    assert sha256(folder) == hashlib.sha256(b"first\n" + b"second" * 1000).hexdigest()
    # a big export is mapped a window at a time (16 MiB): a file of two windows and a part
    big = tmp_path / "big.csv"
    data = bytes(range(256)) * ((33 << 20) // 256) + b"tail"
    big.write_bytes(data)
    assert sha256(big) == hashlib.sha256(data).hexdigest()


# -- compressed inputs: copies written to tmp_path at test time, read as they are -----------------

PROVENANCE = ("source_file", "source_sha256")


def _compressed(data: bytes, compression: str) -> bytes:
    if compression == "zstd":
        if not pa.Codec.is_available("zstd"):
            pytest.skip("this pyarrow has no zstd codec")
        return pa.compress(data, codec="zstd", asbytes=True)
    return {"gzip": gzip.compress, "xz": lzma.compress}[compression](data)


def _same_but_provenance(left: pd.DataFrame, right: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(left.drop(columns=list(PROVENANCE)), right.drop(columns=list(PROVENANCE)))


@pytest.mark.parametrize(("compression", "suffix"), [("gzip", ".gz"), ("xz", ".xz"), ("zstd", ".zst")])
def test_parse_compressed_nersc_export_equals_the_plain_file(tmp_path, compression, suffix):
    plain = real_fixture("a100-dropout-nersc-metrics-csv") / "nsight162.csv"
    path = tmp_path / f"nsight162.csv{suffix}"  # derived from the real NERSC export
    path.write_bytes(_compressed(plain.read_bytes(), compression))
    counters = parse_input(path, "nersc", "csv", "NVIDIA A100-SXM4-40GB")
    expected = parse_input(plain, "nersc", "csv", "NVIDIA A100-SXM4-40GB")
    assert len(counters) == 162
    _same_but_provenance(counters, expected)
    # the hash is that of the file as it is on disk, compressed
    assert (counters["source_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()).all()
    assert (counters["source_file"] == str(path)).all()


def test_parse_gzipped_what_if_tables_equal_the_plain_ones(tmp_path):
    yaml_gz = tmp_path / "textbook.yaml.gz"  # derived from data/examples/textbook.yaml
    yaml_gz.write_bytes(gzip.compress(TEXTBOOK.read_bytes()))
    _same_but_provenance(parse_input(yaml_gz, "t", "what-if"), parse_input(TEXTBOOK, "t", "what-if"))
    table = "kernel,gpu,flop_fp32,dram_bytes,duration_s\nsaxpy,NVIDIA A100-SXM4-80GB,2e9,12e9,8e-3\n"
    plain = tmp_path / "whatif.csv"  # hand-made what-if CSV
    plain.write_text(table, encoding="utf-8")
    packed = tmp_path / "whatif.csv.xz"
    packed.write_bytes(lzma.compress(table.encode()))
    counters = parse_input(packed, "w", "csv")
    _same_but_provenance(counters, parse_input(plain, "w", "csv"))
    assert counters["flop_fp32"].tolist() == [2e9] and counters["source_format"].tolist() == ["what-if"]


def test_parse_folder_of_compressed_exports(tmp_path):
    plain = real_fixture("a100-dropout-nersc-metrics-csv") / "nsight162.csv"
    folder = tmp_path / "exports"  # derived from the real NERSC export
    folder.mkdir()
    (folder / "nsight162.csv.gz").write_bytes(gzip.compress(plain.read_bytes()))
    (folder / "notes.txt").write_text("hand-made: not an export\n")
    reference = tmp_path / "reference"
    reference.mkdir()
    (reference / "nsight162.csv").write_bytes(plain.read_bytes())
    _same_but_provenance(parse_input(folder, "n", "csv-dir", "A100"), parse_input(reference, "n", "csv-dir", "A100"))


def test_parse_compressed_report_equals_the_plain_report(tmp_path):
    plain = real_fixture("h100pcie-rmsnorm-full-ncu2025.1") / "2025-04-21_v1.ncu-rep"
    path = tmp_path / "2025-04-21_v1.ncu-rep.gz"  # derived from the real report
    path.write_bytes(gzip.compress(plain.read_bytes(), compresslevel=1))
    counters = parse_input(path, "rmsnorm", "ncu-rep")
    _same_but_provenance(counters, parse_input(plain, "rmsnorm", "ncu-rep"))
    assert (counters["ncu_version"] == "2025.1.0.0").all()
    assert counters["command_line"].str.endswith("--profile").all()


def test_parse_truncated_compressed_inputs_name_the_file(tmp_path):
    report = real_fixture("rtx3070-vecadd-basic-ncu2022.3") / "CuVectorAddDrv.ncu-rep"
    data = gzip.compress(report.read_bytes())
    path = tmp_path / "cut.ncu-rep.gz"  # derived from the real report: its gzip cut short
    path.write_bytes(data[:-100])
    with pytest.raises(InputError, match=r"cut\.ncu-rep\.gz: the gzip-compressed file is truncated or damaged"):
        read_input(path, "ncu-rep")
    yaml_cut = tmp_path / "cut.yaml.gz"  # derived from data/examples/textbook.yaml
    yaml_cut.write_bytes(gzip.compress(TEXTBOOK.read_bytes())[:200])
    with pytest.raises(InputError, match=r"cut\.yaml\.gz: the gzip-compressed file is truncated.*gzip -t"):
        read_input(yaml_cut, "what-if")


def test_ncu_log_saved_as_a_report_points_to_the_fix(tmp_path):
    path = tmp_path / "capture.ncu-rep"  # hand-made: ncu's log where the report should be
    path.write_text("==PROF== Connected to process 40213 (/home/user/app)\n"
                    "==PROF== Disconnected from process 40213\n==WARNING== No kernels were profiled.\n")
    with pytest.raises(InputError, match=r"capture\.ncu-rep: a text file, not an Nsight Compute report: ncu "
                       r"profiled no kernel.*--kernel-name/-k.*--launch-skip/-s"):
        read_input(path, "ncu-rep")


def test_a_launch_is_flagged_by_any_refusal_text_however_its_column_is_stored():
    # hand-made: three launches; the refusal texts come as an Arrow slice whose buffer holds a
    # text outside the slice, as plain Python objects with a missing value, and as nothing at all
    sliced = pa.array(["outside the slice", "", "gives 1e30 FLOP: above any GPU"], pa.large_string()).slice(1)
    counters = pd.DataFrame({
        "launch": [0, 1, 2],
        "kernel_short": ["a", "b", "c"],
        "source_file": ["hand-made.csv"] * 3,
        "source_format": ["ncu-csv"] * 3,
        "missing": pd.array(["", "", ""], dtype="string[pyarrow]"),
        "flop_fp32_refused": pd.arrays.ArrowStringArray(pa.concat_arrays([sliced, pa.array([""], pa.large_string())])),
        "dram_bytes_refused": pd.Series([None, "", "gives -5 B: negative"], dtype=object),
        "duration_s_refused": pd.arrays.ArrowStringArray(pa.repeat(pa.scalar("", pa.large_string()), 3)),
    })
    messages = diagnostics_for(counters, "hand-made")["message"].tolist()
    assert messages == [
        "launch 1 (b): flop_fp32 refused (gives 1e30 FLOP: above any GPU); the launch is kept with these "
        "quantities empty: check the export (units, values)",
        "launch 2 (c): dram_bytes refused (gives -5 B: negative); the launch is kept with these quantities "
        "empty: check the export (units, values)",
    ]


def _every_input() -> list:
    """Every real fixture the workflow reads, the hand-made CSV exports of tests/data and the
    bundled what-if table."""
    from conftest import REAL

    from roofline.config.workflow import input_kind

    found = [*sorted(REAL.glob("*/*")), *sorted((REPO / "tests" / "data").glob("*.csv")), TEXTBOOK]
    inputs = []
    for path in found:
        try:
            inputs.append((path, input_kind(path)))
        except ValueError:  # not an input (PROVENANCE.md, a README)
            continue
    return inputs


INPUTS = _every_input()


@pytest.mark.parametrize(("path", "kind"), INPUTS, ids=[f"{p.parent.name}/{p.name}" for p, _ in INPUTS])
def test_the_written_table_equals_the_parsed_frame(path, kind):
    # parse_table (what the job writes, built without a frame) against parse_input's frame converted
    # as write_table converts it: the same values, nulls and types, column by column; and the same
    # diagnostics from either
    from roofline.parse.counters import parse_table
    from roofline.tables.files import arrow_table

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            frame = parse_input(path, "app", kind, "NVIDIA A100-SXM4-80GB")
        except ValueError as exc:  # a hand-made file the reader refuses: both refuse it alike
            with pytest.raises(type(exc), match=re.escape(str(exc))):
                parse_table(path, "app", kind, "NVIDIA A100-SXM4-80GB")
            return
        table = parse_table(path, "app", kind, "NVIDIA A100-SXM4-80GB")
    expected = arrow_table(frame, "counters")
    assert table.schema.equals(expected.schema, check_metadata=True)
    for name in expected.column_names:
        assert table[name].equals(expected[name]), name
    pd.testing.assert_frame_equal(diagnostics_for(table, "app"), diagnostics_for(frame, "app"))


def test_the_hash_beside_the_parsing_starts_before_it_returns_and_works_after_a_fork(tmp_path):
    # hand-made bytes. hash_beside returns once the thread hashes (the GIL released), its digest is
    # hashlib's; a forked process (a job server's worker) gets a hashing thread of its own (the
    # parent's is not in the child); an error comes back from the digest
    from roofline.parse.input_hash import hash_beside

    path = tmp_path / "data.bin"
    path.write_bytes(b"roofline" * 200_000)
    expected = hashlib.sha256(b"roofline" * 200_000).hexdigest()
    assert hash_beside(path)() == expected
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: hash again, report, leave without the parent's exit handlers
        signal.alarm(30)  # a hashing thread that never came would end the child, not hang the test
        try:
            os.write(write_end, hash_beside(path)().encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as answer:
        assert answer.read().decode() == expected
    os.waitpid(pid, 0)
    with pytest.raises(FileNotFoundError):
        hash_beside(tmp_path / "absent.bin")()


def test_a_refused_input_leaves_the_hashing_thread_idle(tmp_path):
    # hand-made: 44 MB of binary bytes named .csv, which the reader refuses from its first bytes; the
    # stage raises only once the hash of the input ended (a job server's worker runs its next job
    # only beside an idle hashing thread, and closes what the job left open)
    from roofline.parse.counters import parse_table
    from roofline.parse.readers.ncu_csv import NcuCsvError

    path = tmp_path / "binary.csv"
    path.write_bytes(b"\x00\x01not a csv" * 4_000_000)
    with pytest.raises(NcuCsvError, match="binary file, not a CSV export"):
        parse_table(path, "app", "csv")
    (hasher,) = [thread for thread in threading.enumerate() if thread.name == "roofline-hash"]
    assert hasher.idle_between_jobs()
