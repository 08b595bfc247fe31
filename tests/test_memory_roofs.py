"""The L2 and L1 roofs against ncu's own utilisation (issue #44, parts 2 and 3).

The oracle is ncu's ``pct_of_peak_sustained_elapsed`` of the counter a level's bytes come from,
read straight from the report (ncu_report, or the csv module for raw CSV exports), never through
the package's recipes. ncu computes it as counted / (peak per unit-cycle x units x that unit's
elapsed cycles); our share of the roof is ``100 x bytes / duration_s / peak`` with the per-launch
peak of the counters table. The two agree when the peak is that counter's own peak (one family for
bytes and roof) and ``clock x duration_s`` is the unit's elapsed cycles.

What each fixture lets this check: where the report has the unit's clock (lts__/l1tex__
cycles_elapsed) or the L1 roof is built from the SM count and SM clock (reports before ncu 2024,
which omit the LSU writeback peak), the identity tests the unit count, the clock and the family
independently of the pct. The ncu 2021-2023 reports without any L2 cycle counter (A100 PCIe, A40,
GTX 1650, RTX 3080) give the L2 clock only as sectors/s over sectors per slice-cycle, so there the
L2 identity checks the slice count, the family and the duration convention, not the clock.
"""

from __future__ import annotations

import csv
import math
import warnings
from pathlib import Path

import pytest
from conftest import REAL, real_fixture, real_reports, report_actions, report_id

from roofline import api

# Per level, ncu's utilisation of the counter family whose bytes the level should count, in order
# of preference (the first the report holds is the oracle), with the traffic counter that must be
# present for the launch to have bytes at all. L2: the tag traffic (lts__t_sectors, every source,
# and its own peak), never the L2-to-crossbar path (a different counter, a different pct).
# L1: the LSU writeback path of the architecture (lgds on sm_90+, lg on sm_75-89, plain before).
ORACLES = {
    "l2": (
        ("lts__t_sectors.avg.pct_of_peak_sustained_elapsed", ("lts__t_sectors.sum", "lts__t_sectors.sum.per_second")),
    ),
    "l1": tuple(
        (f"{counter}.sum.pct_of_peak_sustained_elapsed", (f"{counter}.sum",))
        for counter in ("l1tex__lsu_writeback_active_mem_lgds", "l1tex__lsu_writeback_active_mem_lg",
                        "l1tex__lsu_writeback_active")
    ),
}
LEVEL_COLUMNS = {"l2": ("l2_bytes", "peak_l2_bw"), "l1": ("l1_bytes", "peak_l1_bw")}
RAW_CSVS = ("h200-sglang-qwen3moe-rawcsv-ncu2026.1/R_long_prefill_ncu_raw_full.csv",
            "h200-sglang-qwen3moe-rawcsv-ncu2026.1/R_short_decode_ncu_raw_full.csv",
            "rtx5060-wmma-fp16-rawcsv-ncu2026.1/gen5_stall_async8.csv")


def _oracle(metrics: dict[str, float], level: str) -> float | None:
    """ncu's own pct of the level's counter for one launch, or None where the launch has no
    counted bytes at that level (no traffic counter, or no pct)."""
    for pct, traffic in ORACLES[level]:
        if pct in metrics and any(name in metrics for name in traffic):
            return metrics[pct]
    return None


def _report_launch_metrics(path: Path) -> list[dict[str, float]]:
    """Every launch's numeric metrics of a .ncu-rep, straight from ncu_report."""
    launches = []
    for action in report_actions(path):
        values = {}
        for name in action.metric_names():
            try:
                values[name] = action.metric_by_name(name).as_double()
            except Exception:  # a text metric (names, attributes): not a number
                continue
        launches.append(values)
    return launches


def _csv_launch_metrics(path: Path) -> list[dict[str, float]]:
    """Every launch's numeric metrics of an ``ncu --csv --page raw`` export (header, units, one row
    per launch), read with the csv module."""
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    header, launches = rows[0], []
    for row in rows[2:]:
        values = {}
        for name, text in zip(header, row, strict=False):
            try:
                values[name] = float(text.replace(",", ""))
            except ValueError:
                continue
        launches.append(values)
    return launches


def _inputs() -> list[Path]:
    return [*real_reports(), *(REAL / name for name in RAW_CSVS if (REAL / name).is_file())]


def _read(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return api.read(path)


@pytest.mark.parametrize("path", _inputs(), ids=lambda p: report_id(p) if p.suffix == ".ncu-rep" else p.stem)
@pytest.mark.parametrize("level", ["l2", "l1"])
def test_share_of_the_roof_is_ncus_own_utilisation(path: Path, level: str) -> None:
    raw = _report_launch_metrics(path) if path.suffix == ".ncu-rep" else _csv_launch_metrics(path)
    counters = _read(path)
    assert len(counters) == len(raw)
    traffic, peak = LEVEL_COLUMNS[level]
    checked = 0
    for row, metrics in zip(counters.itertuples(index=False), raw, strict=True):
        pct = _oracle(metrics, level)
        if pct is None:
            continue
        checked += 1
        achieved = getattr(row, traffic)
        if pct == 0:  # no traffic: nothing to share (a roof built from the traffic rate has no value)
            assert achieved == 0, (row.launch, achieved)
            continue
        share = 100 * achieved / row.duration_s / getattr(row, peak)
        assert share == pytest.approx(pct, rel=0.01), (
            f"launch {row.launch}: {share:.4f} % of the {level} roof ({getattr(row, f'{peak}_recipe')}) "
            f"vs ncu's {pct:.4f} %")
    if not checked:
        pytest.skip(f"{path.name} holds no {level} traffic counter with ncu's utilisation of it")


# The fixtures whose selected ceilings lacked an L2 roof (issue #44, item 2), and whether their
# reports also carry an L1 LSU-writeback count (all of them do).
HIERARCHICAL = {
    "a100pcie-selfjoin-full-ncu2021.2": "profile.out.ncu-rep",
    "a40-julia-frb-full-ncu2022.4": "profile.ncu-rep",
    "gtx1650-heatsim-stencil-full-ncu2021.3": "report_name.ncu-rep",
    "gtx1660s-sgemm-naive-full-ncu2024.1": "naive.ncu-rep",
    "rtx3080-sgemm-vs-cublas-full-ncu2023.2": "gemm_v9.ncu-rep",
    "v100-kripke-full-ncu2023.3": "output.ncu-rep",
}


@pytest.mark.parametrize("folder", sorted(HIERARCHICAL))
def test_full_set_reports_get_selected_l2_and_l1_report_roofs(folder: str) -> None:
    path = real_fixture(folder) / HIERARCHICAL[folder]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ceilings = api.analyse([path]).ceilings
    selected = ceilings[ceilings["selected"] & (ceilings["kind"] == "memory")]
    for level in ("l2", "l1"):
        rows = selected[selected["name"] == level]
        assert len(rows) == 1, f"{folder}: no selected {level} roof"
        value = float(rows["value"].iat[0])
        assert math.isfinite(value) and value > 0
    dram = float(selected.loc[selected["name"] == "dram", "value"].iat[0])
    l2 = float(selected.loc[selected["name"] == "l2", "value"].iat[0])
    assert l2 > dram  # the hierarchy: L2 serves more than DRAM


def test_h100_l2_share_is_counted_in_one_convention() -> None:
    """The H100 RMSNorm report: its L2 bytes are 32 x lts__t_sectors (every source, the L2-fabric
    traffic between the two partitions included), so their roof is that counter's own peak
    (3 sectors per slice-cycle), not the L2-to-crossbar one: ncu's 26.7 %, not 40.1 %."""
    path = real_fixture("h100pcie-rmsnorm-full-ncu2025.1") / "2025-04-21_v1.ncu-rep"
    counters = _read(path)
    assert set(counters["l2_bytes_recipe"]) == {"lts_t_sectors_x32"}
    assert set(counters["peak_l2_bw_recipe"]) == {"lts_t_sectors_slice_peak_x32_x_slices_x_lts_clock"}
    share = 100 * counters["l2_bytes"] / counters["duration_s"] / counters["peak_l2_bw"]
    assert share.iloc[0] == pytest.approx(26.72, abs=0.01)


def test_a_level_without_a_roof_of_its_bytes_family_says_so() -> None:
    """The NERSC long CSV holds lts__t_bytes and l1tex__t_bytes but no peak of either: bytes, no
    roof (never another family's), and a diagnostic naming the ncu flags."""
    from roofline.parse.counters import diagnostics_for

    path = real_fixture("a100-dropout-nersc-metrics-csv") / "nsight162.csv"
    counters = _read(path)
    assert counters["l2_bytes"].notna().all() and counters["peak_l2_bw"].isna().all()
    assert counters["l1_bytes"].notna().all() and counters["peak_l1_bw"].isna().all()
    messages = " ".join(diagnostics_for(counters, "nersc")["message"])
    for level, recipe in (("L2", "lts_t_bytes"), ("L1", "l1tex_t_bytes")):
        assert f"{path}: {len(counters)} of {len(counters)} launch(es) have {level} bytes (recipe {recipe})" in messages
        assert "--set full" in messages


def test_a_report_without_level_counters_says_so() -> None:
    path = real_fixture("a10g-sgemm-rooflineset-ncu2023.1") / "profile_output.ncu-rep"
    from roofline.parse.counters import diagnostics_for

    messages = " ".join(diagnostics_for(_read(path), "a10g")["message"])
    assert "have no L2 and L1 traffic counters" in messages and "lts__" in messages and "l1tex__" in messages
