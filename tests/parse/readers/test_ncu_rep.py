""".ncu-rep reader: every real report's raw launch frame against ncu_report's own values, and the
checks on the report's bytes (structure, version, command line)."""

import math
import re
import shutil

import ncu_report
import numpy as np
import pandas as pd
import pytest
from conftest import get, real_fixture, real_reports, report_actions, report_id, report_metrics, smsp_cycles

from roofline.errors import InputError
from roofline.metrics import quantities
from roofline.metrics.units import UnitError, UnitWarning
from roofline.parse.readers.ncu_rep import read_ncu_rep, report_structure_problem
from roofline.parse.readers.ncu_rep_provenance import report_provenance

REPORTS = real_reports()
RMSNORM = ("h100pcie-rmsnorm-full-ncu2025.1", "2025-04-21_v1.ncu-rep")
BASIC = ("rtx3070-vecadd-basic-ncu2022.3", "CuVectorAddDrv.ncu-rep")

# The units the read metrics of the real reports carry (ncu_report gives base units) and their
# factors to SI, written out here rather than taken from roofline.metrics.units.
SI = dict.fromkeys(
    ["", "%", "inst", "inst/cycle", "cycle", "block", "byte/block", "register/thread", "byte", "byte/cycle"]
    + ["byte/s", "sector", "sector/s", "sector/cycle", "hz"],
    1.0,
) | {"ns": 1e-9}


def _read(path):
    """Per launch of ``path``, straight from ncu_report: names, grid and block sizes."""
    out = []
    for action in report_actions(path):
        dims = {
            key: tuple(int(action.metric_by_name(f"launch__{key}_dim_{axis}").as_double()) for axis in "xyz")
            for key in ("grid", "block")
        }
        out.append((action.name(ncu_report.IAction.NameBase_DEMANGLED), dims))
    return out


@pytest.mark.parametrize("path", REPORTS, ids=[report_id(p) for p in REPORTS])
def test_read_ncu_rep_values_are_ncu_report_values_in_si_units(path):
    raw = read_ncu_rep(path)
    oracle = report_metrics(path)
    wanted = set(quantities.all_input_metrics())
    assert len(raw) == len(oracle)
    assert list(raw["launch"]) == list(range(len(oracle)))
    expected_columns = {
        name
        for m in oracle
        for name in m
        if (name in wanted or name.startswith("sm__ops_path_tensor_")) and name != "device__attribute_display_name"
    }
    synthetic = {quantities.HFMA2_MMA_METRIC, quantities.MMA_INSTRUCTIONS_METRIC}  # per-opcode instances, tested apart
    assert {c for c in raw.columns if "__" in c} - synthetic == expected_columns
    for i, m in enumerate(oracle):
        for name in expected_columns:
            if name not in m:
                assert math.isnan(raw[name].iat[i]), f"launch {i} {name}"
                continue
            value, unit = m[name]
            assert unit in SI, f"{name}: unit {unit!r} is not in this test's table: add its factor"
            assert raw[name].iat[i] == pytest.approx(value * SI[unit], rel=1e-12, nan_ok=True), f"launch {i} {name}"
    for i, (kernel, dims) in enumerate(_read(path)):
        assert raw["kernel"].iat[i] == kernel
        assert raw["grid"].iat[i] == "({}, {}, {})".format(*dims["grid"])
        assert raw["block"].iat[i] == "({}, {}, {})".format(*dims["block"])
    assert (raw["source_format"] == "ncu-rep").all()


def test_register_moves_from_the_per_opcode_counts_equal_the_silu_hfma_counter():
    """The SiLU kernels' whole HFMA count is HFMA2.MMA register moves: the per-opcode instance read by
    the reader equals the hfma counter (rate x SMSP cycles, from the raw metrics); reports without
    per-opcode counts get no value."""
    folder = real_fixture("a100sxm-silu-full-ncu2025.1")
    path = next(folder.glob("*.ncu-rep"))
    raw = read_ncu_rep(path)
    for i, m in enumerate(report_metrics(path)):
        hfma = get(m, "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum.per_cycle_elapsed") * smsp_cycles(m)
        assert raw[quantities.HFMA2_MMA_METRIC].iat[i] == pytest.approx(hfma, rel=1e-6)
    a10g = read_ncu_rep(real_fixture("a10g-sgemm-rooflineset-ncu2023.1") / "profile_output.ncu-rep")
    assert quantities.HFMA2_MMA_METRIC not in a10g.columns


def _opcode_counts(path) -> list[dict[str, float]]:
    """Per launch, the warp instructions per opcode of the report's SASS counts, read with
    ncu_report directly (the instance names of sass__inst_executed_per_opcode)."""
    out = []
    for action in report_actions(path):
        metric = action.metric_by_name("sass__inst_executed_per_opcode")
        names = metric.correlation_ids()
        out.append({names.as_string(i): metric.as_double(i) for i in range(metric.num_instances())})
    return out


@pytest.mark.parametrize("folder, opcode", [("a40-julia-imma-trajectory-full-ncu2022.1", "IMMA"),
                                            ("a40-julia-frb-full-ncu2022.4", "HMMA")])
def test_mma_instructions_are_the_reports_own_per_opcode_counts(folder, opcode):
    """The A40 Julia reports ran IMMA / HMMA without tensor op counters: the reader's MMA count is
    that opcode's warp instructions as ncu_report gives them (0 where a launch has none)."""
    for path in sorted(real_fixture(folder).glob("*.ncu-rep")):
        raw = read_ncu_rep(path)
        counts = _opcode_counts(path)
        assert not any(name.startswith("sm__ops_path_tensor_") for name in raw.columns)
        for i, per_opcode in enumerate(counts):
            assert raw[quantities.MMA_INSTRUCTIONS_METRIC].iat[i] == per_opcode.get(opcode, 0.0)
        assert max(c.get(opcode, 0.0) for c in counts) > 1e7  # the evidence is there to be read


def test_hfma2_mma_moves_are_no_mma_instructions():
    """SiLU's HFMA2.MMA register moves (opcode HFMA2 in the warp counts) are not tensor instructions."""
    path = next(real_fixture("a100sxm-silu-full-ncu2025.1").glob("*.ncu-rep"))
    raw = read_ncu_rep(path)
    assert (raw[quantities.HFMA2_MMA_METRIC] > 0).all()
    assert all(c["HFMA2"] > 0 for c in _opcode_counts(path))
    assert (raw[quantities.MMA_INSTRUCTIONS_METRIC] == 0).all()


def test_read_ncu_rep_duration_in_seconds():
    raw = read_ncu_rep(real_fixture(BASIC[0]) / BASIC[1])
    (m,) = report_metrics(real_fixture(BASIC[0]) / BASIC[1])
    value, unit = m["gpu__time_duration.sum"]
    assert unit == "ns"
    assert raw["gpu__time_duration.sum"].iat[0] == pytest.approx(value * 1e-9, rel=1e-12)


@pytest.mark.parametrize(
    "bad_unit, message",
    [
        ("Kibyte", "unit 'Kibyte' of metric '{}' is in bits or binary prefixes; ncu writes decimal bytes"),
        ("furlong", "unknown unit 'furlong' of metric '{}'; expected ncu's units"),
    ],
)
def test_read_ncu_rep_unknown_unit_raises_naming_the_first_metric(monkeypatch, bad_unit, message):
    """The reader works out each unit's SI factor once and never keeps a refused one, so it raises
    as it did when it asked per metric: at the first metric with the bad unit, naming it."""
    path = real_fixture(RMSNORM[0]) / RMSNORM[1]
    # Every "byte" unit becomes bad_unit (the dimensionless metrics before it are read, and their
    # factor kept, first): the first metric the reader reads with it is, in ncu_report's order,
    # launch 0's first metric of the roofline set in bytes.
    action = ncu_report.load_report(str(path)).range_by_idx(0).action_by_idx(0)
    wanted = set(quantities.all_input_metrics())
    first = next(
        n
        for n in action.metric_names()
        if n in wanted and action.metric_by_name(n).unit() == "byte"  # metrics no recipe reads are left out
    )
    original = ncu_report.IMetric.unit
    monkeypatch.setattr(
        ncu_report.IMetric, "unit", lambda self: bad_unit if original(self) == "byte" else original(self)
    )
    with pytest.raises(UnitError, match="^" + re.escape(message.format(first))):
        read_ncu_rep(path)


def test_read_ncu_rep_leaves_out_unknown_units_no_recipe_reads(monkeypatch):
    """A tensor-path metric no recipe reads, in a unit the converter does not know, is left out
    with one warning; the rest of the frame is what it was."""
    path = real_fixture(RMSNORM[0]) / RMSNORM[1]
    expected = read_ncu_rep(path)
    wanted = set(quantities.all_input_metrics())
    odd = [c for c in expected.columns if c.startswith("sm__ops_path_tensor_") and c not in wanted]
    assert odd
    original_unit, original_name = ncu_report.IMetric.unit, ncu_report.IMetric.name
    monkeypatch.setattr(
        ncu_report.IMetric,
        "unit",
        lambda self: "furlong" if original_name(self) in odd else original_unit(self),
    )
    first = re.escape(sorted(odd)[0])
    with pytest.warns(UnitWarning, match=rf"{len(odd)} metric\(s\) left out.*'{first}' \('furlong'\)"):
        raw = read_ncu_rep(path)
    assert not set(odd) & set(raw.columns)
    pd.testing.assert_frame_equal(raw, expected.drop(columns=odd))


def test_read_ncu_rep_refuses_empty_and_garbage(tmp_path):
    empty = tmp_path / "empty.ncu-rep"
    empty.write_bytes(b"")
    with pytest.raises(InputError, match="empty"):
        read_ncu_rep(empty)
    garbage = tmp_path / "garbage.ncu-rep"  # hand-made: random bytes renamed .ncu-rep
    garbage.write_bytes(np.random.default_rng(1).bytes(4096))
    with pytest.raises(InputError, match="no kernel launch|not a readable"):
        read_ncu_rep(garbage)


def test_report_structure_problem_sees_a_cut_and_stray_bytes(tmp_path):
    source = real_fixture(BASIC[0]) / BASIC[1]
    assert report_structure_problem(source) is None
    data = source.read_bytes()
    cut = tmp_path / "cut.ncu-rep"
    cut.write_bytes(data[: len(data) - 1000])
    assert re.match(
        rf"the file is truncated or damaged: its block \d+ ends at byte [\d,]+ but the file has only "
        rf"{len(data) - 1000:,} bytes$",
        report_structure_problem(cut),
    )
    stray = tmp_path / "stray.ncu-rep"
    shutil.copyfile(source, stray)
    with open(stray, "ab") as handle:
        handle.write(b"\x00\x01\x02")
    assert report_structure_problem(stray) == "the file ends with 3 stray byte(s) after its last block"
    with pytest.raises(InputError, match="3 stray byte.*Copy the report again"):
        read_ncu_rep(stray)


@pytest.mark.parametrize("path", REPORTS, ids=[report_id(p) for p in REPORTS])
def test_report_version_matches_the_fixture_folder(path):
    """The fixture folders are named after the ncu that wrote them (``...-ncu2023.1``)."""
    version, _ = report_provenance(path)
    assert version.startswith(re.search(r"ncu(\d{4}\.\d+)$", path.parent.name).group(1) + ".")


def test_report_command_line():
    _, command = report_provenance(real_fixture(RMSNORM[0]) / RMSNORM[1])
    assert command.endswith("ncu -o ../ncu-reports/2025-04-21_v1 -c 3 --set full ./rms_norm_matrix --profile")
    _, old = report_provenance(real_fixture("a100pcie-selfjoin-full-ncu2021.2") / "profile.out.ncu-rep")
    assert old == ""  # ncu 2021.2 did not store it


@pytest.mark.parametrize("path", REPORTS, ids=[report_id(p) for p in REPORTS])
def test_report_command_line_starts_at_the_ncu_path(path):
    """Every fixture that stores its command ran ncu by an absolute path: the text starts there,
    without protobuf bytes that happen to be printable (the silu report wraps its 122-byte command
    in a field whose tag and length read "Zz")."""
    _, command = report_provenance(path)
    if command:
        assert command.startswith("/"), command[:40]
        assert re.match(r"/\S*/ncu ", command), command[:80]


def test_report_command_line_unwraps_a_printable_field():
    _, command = report_provenance(real_fixture("a100sxm-silu-full-ncu2025.1") / "2025-04-21-77_06-MT.ncu-rep")
    assert command == (
        "/usr/lib/nsight-compute/target/linux-desktop-glibc_2_11_3-x64/ncu -c 3 -o ../ncu-reports/test "
        "--set full ./silu --profile"
    )


@pytest.mark.parametrize(
    "launches",
    [
        [{"a": 1.0, "b": 2.0}, {"a": 3.0, "b": 4.0}],  # every launch's metrics in one order (the rule)
        [{"a": 1.0, "b": 2.0}, {"b": 4.0, "a": 3.0}],  # the same metrics in another order
        [{"a": 1.0}, {"a": 3.0, "c": 5.0}, {"b": 6.0}],  # a metric some launches lack
        [{}, {"a": 1.0}],
        [],
    ],
)
def test_metric_matrix_puts_each_value_under_its_metric(launches):
    # hand-made launches: each value at its own launch and metric, NaN where the launch lacks it
    from roofline.parse.readers.ncu_rep import _metric_matrix

    names, matrix = _metric_matrix(launches)
    assert sorted(names) == sorted({name for values in launches for name in values})
    assert names == list(dict.fromkeys(name for values in launches for name in values))  # first seen first
    assert matrix.shape == (len(launches), len(names))
    for row, values in enumerate(launches):
        for column, name in enumerate(names):
            if name in values:
                assert matrix[row, column] == values[name]
            else:
                assert math.isnan(matrix[row, column])
