"""Ceilings stage: report-derived peaks against the raw metrics, selection policy, cross-check."""

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, real_reports

from roofline.ceilings.report_peaks import peak_samples
from roofline.ceilings.select import (
    NOT_HELD,
    SHORT_LAUNCH_S,
    build_ceilings,
    ceilings_from_samples,
    clock_notes,
    cross_check,
    hold_at_launch_clock,
    ridge_points,
    select_ceilings,
)
from roofline.parse.counters import parse_input
from roofline.tables.schemas import conform

REPORTS = real_reports()
CATALOG = REPO / "roofline" / "data" / "gpus.yaml"


def _row(source, value, name="fp32", kind="compute", device="G", clock=np.nan):
    return {"device": device, "kind": kind, "name": name, "value": value, "source": source, "clock_hz": clock}


def test_policy_order_and_device_override():
    candidates = conform(
        pd.DataFrame([_row("report", 10e12), _row("datasheet", 19.5e12), _row("measured", 18e12)]), "ceilings"
    )
    chosen = select_ceilings(candidates, ["report", "datasheet"])
    assert chosen.loc[chosen["selected"], "source"].tolist() == ["report"]
    chosen = select_ceilings(candidates, ["datasheet", "report"])
    assert chosen.loc[chosen["selected"], "source"].tolist() == ["datasheet"]
    chosen = select_ceilings(candidates, ["report"], {"G": ["measured"]})
    assert chosen.loc[chosen["selected"], "source"].tolist() == ["measured"]
    chosen = select_ceilings(candidates, ["measured"], {})
    assert chosen["selected"].sum() == 1


def test_a_zero_or_missing_value_or_clock_never_stops_the_ceilings():
    """Issue #47: one app's row with a 0 clock (a counters table written before parse refused it, or
    edited) stopped the ceilings job, which holds every device, with ZeroDivisionError; a ratio
    with a 0, NaN or inf in it is unknown, and a 0 roof is never compared."""
    rows = [_row("report", 10e12, clock=0.0), _row("datasheet", 19.5e12, clock=1410e6),
            _row("report", 0.0, "fp16", clock=1e9), _row("datasheet", 78e12, "fp16", clock=1410e6),
            _row("report", 5e12, "fp64", clock=np.nan), _row("datasheet", np.nan, "fp64", clock=0.0),
            _row("report", 0.0, "dram", "memory"), _row("datasheet", 2.0e12, "dram", "memory"),
            _row("report", 1e12, "l2", "memory"), _row("datasheet", 0.0, "l2", "memory")]
    table = conform(pd.DataFrame(rows), "ceilings")
    [warning] = cross_check(table, 0.25)  # fp32: 10 vs 19.5 with no clock to explain it
    assert warning.startswith("G: fp32 ceiling from report is 10 TFLOP/s") and "per clock" not in warning
    samples = peak_samples(pd.DataFrame({
        "device": ["G"] * 3, "launch": [0, 1, 2], "duration_s": [1e-3] * 3, "source_format": ["ncu-rep"] * 3,
        "peak_flops_fp32": [0.0, 0.0, 0.0], "sm_clock_hz": [0.0, 0.0, 0.0]}))
    [row] = ceilings_from_samples(samples).to_dict("records")
    assert row["value"] == 0.0 and np.isnan(row["per_clock"]) and np.isnan(row["spread"])
    held = hold_at_launch_clock(conform(pd.DataFrame([_row("datasheet", 19.5e12, clock=0.0)]), "ceilings"),
                                pd.Series({"G": 1e9}), measured={"G"})
    assert held["value"].iat[0] == 19.5e12 and NOT_HELD in held["citation"].iat[0]


def test_cross_check_compares_compute_roofs_per_clock():
    """Hand-made A100-like rows: 10.5 TFLOP/s at 762 MHz is 19.5 at 1410 MHz (the clock explains it,
    no warning); 39 TFLOP/s FP16 at 1410 MHz against 78 is a factor 2 per clock: a convention gap."""
    clock_only = conform(
        pd.DataFrame([_row("report", 10.55e12, clock=762e6), _row("datasheet", 19.5e12, clock=1410e6)]), "ceilings"
    )
    assert cross_check(clock_only, 0.25) == []
    gap = conform(
        pd.DataFrame([_row("report", 39e12, "fp16", clock=1410e6), _row("datasheet", 78e12, "fp16", clock=1410e6)]),
        "ceilings",
    )
    [warning] = cross_check(gap, 0.25)
    assert "39 TFLOP/s" in warning and "78 TFLOP/s" in warning and "per clock is 0.50" in warning
    assert "counting-convention gap" in warning and "not a clock difference" in warning
    memory = conform(
        pd.DataFrame([_row("report", 1.0e12, "dram", "memory"), _row("datasheet", 2.0e12, "dram", "memory")]),
        "ceilings",
    )
    [warning] = cross_check(memory, 0.25)
    assert "ratio 0.50" in warning
    assert cross_check(memory, 1.0) == []


def test_no_fixture_device_warns_of_a_compute_convention_gap():
    """Every real fixture together (one ceilings table per device, as the workflow builds it): no
    report-vs-datasheet compute pair is off per clock."""
    if not REPORTS:
        pytest.skip("real fixtures not found (../shared/fixtures/real is absent)")
    counters = pd.concat([parse_input(p, p.stem, "ncu-rep") for p in REPORTS], ignore_index=True)
    warnings = cross_check(build_ceilings(counters, CATALOG, ["report", "datasheet"]), 0.25)
    assert not [w for w in warnings if "per clock" in w], warnings


def test_ridge_points_from_selected():
    ceilings = select_ceilings(
        conform(pd.DataFrame([_row("datasheet", 120e12), _row("datasheet", 3e12, "dram", "memory")]), "ceilings"),
        ["datasheet"],
    )
    ridge = ridge_points(ceilings)
    assert ridge["ridge"].tolist() == [pytest.approx(40.0)]


def test_report_dram_peak_close_to_datasheet():
    """For each fixture GPU in the catalog: report-derived DRAM peak / datasheet DRAM peak."""
    if not REPORTS:
        pytest.skip("real fixtures not found (../shared/fixtures/real is absent)")
    lines = []
    for path in REPORTS:
        counters = parse_input(path, "app", "ncu-rep")
        table = build_ceilings(counters, CATALOG, ["report", "datasheet"])
        dram = table[(table["name"] == "dram")].set_index("source")["value"]
        if {"report", "datasheet"} <= set(dram.index):
            ratio = dram["report"] / dram["datasheet"]
            lines.append(
                f"{path.parent.name}: report {dram['report'] / 1e9:.0f} GB/s, "
                f"datasheet {dram['datasheet'] / 1e9:.0f} GB/s, ratio {ratio:.3f}"
            )
            if (counters["duration_s"] >= SHORT_LAUNCH_S).any():
                assert 0.85 < ratio < 1.1, lines[-1]
            else:  # short launches report clocks 20-50 % low (roofline.md §5)
                assert "under 20 us" in table.loc[table["source"] == "report", "citation"].iat[0]
    print("\n".join(lines))
    assert lines, "no fixture GPU found in the catalog"


def test_a_what_if_machine_defined_twice_with_different_peaks_is_a_diagnostic(tmp_path):
    """Two what-if tables (copies of the bundled one, the second with a higher DRAM peak for one
    machine): the first app's definition is the roof, and the ceilings' diagnostics say so."""
    from roofline.ceilings.select import device_ceilings
    from roofline.tables.files import write_table

    text = (REPO / "data" / "examples" / "textbook.yaml").read_text()
    line = "seed-120T-3TB:   {compute: {fp32: 120.0e+12}, memory: {dram: 3.0e+12}}"
    assert line in text
    paths = []
    for app, table in (("alpha", text), ("beta", text.replace(line, line.replace("3.0e+12}", "3.3e+12}")))):
        source = tmp_path / f"{app}.yaml"
        source.write_text(table)
        counters = parse_input(source, app, "what-if")
        paths.append(str(tmp_path / f"{app}.parquet"))
        write_table(counters, "counters", paths[-1])
    ceilings, diagnostics, _ = device_ceilings(paths, CATALOG, ["report", "datasheet"])
    dram = ceilings[(ceilings["device"] == "seed-120T-3TB") & (ceilings["name"] == "dram") & ceilings["selected"]]
    assert dram["value"].tolist() == [3.0e12]
    [message] = [m for m in diagnostics["message"] if "what-if machine" in m]
    assert message == ("seed-120T-3TB: what-if machine defined with different dram peaks (alpha 3000 GB/s, "
                       "beta 3300 GB/s); every app on it is judged against alpha's; give each definition its own "
                       "machine name")
    alone = device_ceilings(paths[:1], CATALOG, ["report", "datasheet"]).diagnostics
    assert not any("what-if machine" in m for m in alone["message"])


# A100 (GA100): 108 SMs x 1,024 dense FP16 FMA per clock and SM (NVIDIA A100 whitepaper), 2 FLOP
# each; the clock ncu locks an A100 PCIe at (the a100pcie-selfjoin fixture reads 764.6 MHz).
A100_TENSOR_FP16_PER_CLOCK = 108 * 1024 * 2
BASE_CLOCK = 765e6
A100_PCIE = "NVIDIA A100-PCIE-40GB"


def _base_clock_tensor_launch(clock: float = BASE_CLOCK, fp32_peak: bool = True) -> pd.DataFrame:
    """Hand-made counters row: one A100 PCIe launch at ncu's base clock doing tensor FP16 work at
    exactly the per-clock peak x that clock for 1 ms; its report has an FP32 peak (or none) and no
    tensor peak, so the tensor roof can only come from the datasheet."""
    row = {"app": "hand-made", "kernel": "hgemm", "launch": 0, "device": A100_PCIE, "source_format": "ncu-rep",
           "duration_s": 1e-3, "sm_clock_hz": clock, "flop_tensor_fp16": A100_TENSOR_FP16_PER_CLOCK * BASE_CLOCK * 1e-3,
           "dram_bytes": 1e6, "peak_dram_bw": 1.554e12, "peak_dram_bw_recipe": "hand-made", "dram_clock_hz": 1.215e9}
    if fp32_peak:
        row |= {"peak_flops_fp32": 13824 * clock, "peak_flops_fp32_recipe": "hand-made"}
    return conform(pd.DataFrame([row]), "counters")


@pytest.mark.parametrize("fp32_peak", [True, False], ids=["report-fp32-roof", "no-report-compute-roof"])
def test_a_tensor_kernel_at_the_per_clock_peak_at_base_clock_is_at_100_percent(fp32_peak):
    """The datasheet's 312 TFLOP/s is quoted at the 1410 MHz boost clock; a launch at the 765 MHz
    base clock can do at most 54 % of it. Held at the launch's clock, a kernel at the per-clock peak
    is at 100 % of its roof, and every compute roof of the device is at that one clock."""
    from roofline.classify.launches import classify_launches

    counters = _base_clock_tensor_launch(fp32_peak=fp32_peak)
    ceilings = build_ceilings(counters, CATALOG, ["report", "datasheet"])
    row = classify_launches(counters, ceilings).iloc[0]
    assert row["compute_class"] == "tensor_fp16" and row["bound"] == "compute:tensor_fp16"
    assert row["roof_pct"] == pytest.approx(100.0, rel=1e-3)  # the catalog's 312 T is 0.04 % above 2048 x 108
    compute = ceilings[ceilings["selected"] & (ceilings["kind"] == "compute")]
    assert (compute["clock_hz"] == BASE_CLOCK).all() and "datasheet" in set(compute["source"])
    tensor = compute.set_index("name").loc["tensor_fp16"]
    assert tensor["per_clock"] == pytest.approx(A100_TENSOR_FP16_PER_CLOCK, rel=1e-3)
    assert "312 TFLOP/s at 1410 MHz" in tensor["citation"]  # the vendor's figure stays visible
    assert ceilings.loc[ceilings["name"] == "dram", "value"].tolist() == [1.554e12, 1.555e12]  # memory: as given
    assert clock_notes(ceilings) == []


def test_a_roof_that_cannot_be_brought_to_the_launch_clock_is_said():
    """Hand-made: the same launch without an SM clock reading (a CSV export without it): the tensor
    roof stays at the vendor's 1410 MHz, its citation and a diagnostic say so."""
    counters = _base_clock_tensor_launch(clock=np.nan, fp32_peak=False)
    ceilings = build_ceilings(counters, CATALOG, ["report", "datasheet"])
    tensor = ceilings[ceilings["selected"] & (ceilings["name"] == "tensor_fp16")].iloc[0]
    assert tensor["value"] == 312e12 and tensor["clock_hz"] == 1.41e9
    assert NOT_HELD in tensor["citation"]
    [note] = clock_notes(ceilings)
    assert note.startswith(f"{A100_PCIE}: ") and "1410 MHz" in note and "tensor_fp16" in note and NOT_HELD in note


def test_launches_at_clocks_far_apart_are_said_to_be_judged_at_their_median() -> None:
    """Hand-made ceilings: report compute peaks spread as the launches' clocks do (unlocked clocks,
    as the H200 and RTX 5090 captures); one spread past the threshold is named, a locked one is not."""
    from roofline.ceilings.select import CLOCK_SPREAD_NOTED, clock_notes

    def table(spread: float) -> pd.DataFrame:
        return pd.DataFrame({"device": ["G", "G"], "kind": ["compute", "memory"], "name": ["fp32", "dram"],
                             "value": [60e12, 3e12], "source": "report", "selected": True,
                             "clock_hz": [1.9e9, 1.5e9], "spread": [spread, 1.3], "citation": "median"})

    assert clock_notes(table(CLOCK_SPREAD_NOTED - 0.01)) == []  # the DRAM spread is no clock's
    (message,) = clock_notes(table(1.25))
    assert message.startswith("G: ") and "1.25x apart" in message and "1900 MHz" in message
    assert "--clock-control base" in message


def test_an_export_without_a_gpu_name_is_told_of_the_apps_device_key(tmp_path):
    """The NERSC export records no GPU: its launches are on an 'unnamed GPU', and the ceilings'
    diagnostic (the summary's Diagnostics) names the fix, the app's device: key; with it, a roof."""
    from conftest import real_fixture

    from roofline.ceilings.select import device_ceilings
    from roofline.tables.files import write_table

    source = real_fixture("a100-dropout-nersc-metrics-csv") / "nsight162.csv"
    for device in (None, "NVIDIA A100-SXM4-80GB"):
        path = str(tmp_path / f"{device is None}.parquet")
        write_table(parse_input(source, "dropout", "csv", device), "counters", path)
        ceilings, diagnostics, _ = device_ceilings([path], CATALOG, ["report", "datasheet"])
        told = [m for m in diagnostics["message"] if "device: key" in m]
        if device is None:
            assert len(told) == 1 and told[0].startswith("unnamed GPU") and "apps: NAME:" in told[0]
        else:
            assert not told and ceilings["selected"].any()
