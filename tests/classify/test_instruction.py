"""Instruction roofline (Ding & Williams): the verdict in the time form, and warp_ips / the issue
roof checked against the raw metrics of a real report read with ncu_report, not the recipe table."""

import warnings

import numpy as np
import pandas as pd
import pytest
from charts.test_roofline_chart import make_ceilings
from conftest import real_fixture

from roofline.classify import instruction
from roofline.classify import launches as classify
from roofline.classify.kernels import aggregate_kernels
from roofline.parse.counters import parse_input
from roofline.tables.schemas import conform


def launch(**values) -> pd.DataFrame:
    row = {"app": "a", "device": "GPU-A", "kernel": "k", "grid": "", "block": "", "compute_capability": "8.0",
           "sm_count": 100.0, "sm_clock_hz": 1e9, "duration_s": 1e-3, "dram_bytes": 1e8, "warp_instructions": 1e8,
           "flop_fp32": 0.0}
    row.update(values)
    return pd.DataFrame([row])


def test_issue_peak_is_sms_x_schedulers_x_clock():
    frame = pd.DataFrame({"sm_count": [108.0, 56.0, 20.0, 4.0], "sm_clock_hz": [1.41e9, 1.3e9, 1.6e9, 1e9],
                          "compute_capability": ["8.0", "6.0", "6.1", ""]})
    peak = instruction.issue_peak_ips(frame)
    assert peak[0] == pytest.approx(609.12e9)  # A100: 108 SM x 4 x 1.41 GHz, the guide's figure
    assert peak[1] == pytest.approx(56 * 2 * 1.3e9)  # GP100: 2 schedulers per SM
    assert peak[2] == pytest.approx(20 * 4 * 1.6e9)
    assert np.isnan(peak[3])  # unknown architecture: no roof rather than a guess


def test_schedulers_per_sm_of_each_launch_in_a_column_of_repeats():
    """Each launch gets its own capability's count, however the capabilities repeat and interleave
    (a big export's launches share a few)."""
    column = pd.Series(["8.0", "6.0", None, "8.0", "", "5.2", "6.0", "not a number", "8.0"], dtype="str")
    expected = [4.0, 2.0, np.nan, 4.0, np.nan, 4.0, 2.0, np.nan, 4.0]
    np.testing.assert_array_equal(instruction.warp_schedulers_per_sm(column), expected)
    numbers = pd.Series([6.0, np.nan, 9.0, 6.0, 3.5])
    np.testing.assert_array_equal(instruction.warp_schedulers_per_sm(numbers), [2.0, np.nan, 4.0, 2.0, np.nan])


def test_verdict_issue_vs_memory_without_flops():
    # 1e8 warp instructions at 4e11 inst/s take >= 0.25 ms; 1e8 B at 1.5552 TB/s >= 64 us: issue binds
    issue = classify.classify_frame(launch(), make_ceilings())
    assert issue["bound"].iat[0] == "none"  # the FLOP roofline has nothing to say
    assert issue["instruction_bound"].iat[0] == "issue"
    assert issue["issue_peak_ips"].iat[0] == pytest.approx(4e11)
    assert issue["instruction_roof_pct"].iat[0] == pytest.approx(100 * 0.25e-3 / 1e-3)
    # 1e9 B take 643 us > 250 us: DRAM transactions bind (1e9/32 sectors at 1.5552e12/32 sectors/s)
    memory = classify.classify_frame(launch(dram_bytes=1e9), make_ceilings())
    assert memory["instruction_bound"].iat[0] == "memory:dram"
    assert memory["instruction_roof_pct"].iat[0] == pytest.approx(100 * (1e9 / 1.5552e12) / 1e-3)
    # a tie is issue-bound, as a point on the FLOP ridge is compute-bound
    tie = classify.classify_frame(launch(dram_bytes=0.25e-3 * 1.5552e12), make_ceilings())
    assert tie["instruction_bound"].iat[0] == "issue"


def test_missing_evidence_is_unknown():
    for values in ({"warp_instructions": np.nan}, {"sm_count": np.nan}, {"dram_bytes": np.nan}):
        out = classify.classify_frame(launch(**values), make_ceilings())
        assert out["instruction_bound"].iat[0] == "unknown", values
        assert np.isnan(out["instruction_roof_pct"].iat[0])


def test_kernel_uses_the_devices_median_issue_roof():
    launches = pd.concat([launch(sm_clock_hz=c, launch=i) for i, c in enumerate((1.0e9, 1.1e9, 0.5e9))],
                         ignore_index=True)
    kernels = aggregate_kernels(conform(launches, "counters"), make_ceilings())
    assert kernels["issue_peak_ips"].iat[0] == pytest.approx(100 * 4 * 1.0e9)
    assert kernels["warp_instructions"].iat[0] == pytest.approx(3e8)
    assert kernels["time_bound_issue"].iat[0] == pytest.approx(3e8 / 4e11)


@pytest.mark.parametrize("folder", ["a100sxm-silu-full-ncu2025.1", "gtx1650-heatsim-stencil-full-ncu2021.3"])
def test_warp_ips_and_issue_roof_match_the_raw_report(folder):
    """warp_ips = smsp__inst_executed.sum / gpu__time_duration.sum; issue roof = SM count x 4 x SM
    clock, straight from ncu_report; and their ratio is ncu's own issue utilisation
    (sm__inst_executed.avg.pct_of_peak_sustained_elapsed, whose peak is 4 per SM and cycle)."""
    import ncu_report

    path = next(real_fixture(folder).glob("*.ncu-rep"))
    report = ncu_report.load_report(str(path))
    raw = []
    for r in range(report.num_ranges()):
        for a in range(report.range_by_idx(r).num_actions()):
            action = report.range_by_idx(r).action_by_idx(a)

            def value(name: str, action=action) -> float:
                return action.metric_by_name(name).as_double()

            seconds = value("gpu__time_duration.sum") * 1e-9  # ns in these reports
            assert action.metric_by_name("gpu__time_duration.sum").unit() in ("ns", "nsecond")
            raw.append({
                "warp_ips": value("smsp__inst_executed.sum") / seconds,
                "issue_peak": value("device__attribute_multiprocessor_count") * 4
                * value("sm__cycles_elapsed.avg.per_second"),
                "ncu_pct": value("sm__inst_executed.avg.pct_of_peak_sustained_elapsed"),
            })
    raw = pd.DataFrame(raw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        counters = parse_input(path, "app", "ncu-rep")
    launches = classify.classify_frame(counters, make_ceilings(counters["device"].iat[0]))
    np.testing.assert_allclose(launches["warp_ips"], raw["warp_ips"], rtol=0.02)
    np.testing.assert_allclose(launches["issue_peak_ips"], raw["issue_peak"], rtol=1e-6)
    # duration (ours) vs elapsed cycles (ncu's): a few % apart on launches of a few microseconds
    utilisation = 100 * launches["warp_ips"] / launches["issue_peak_ips"]
    np.testing.assert_allclose(utilisation, raw["ncu_pct"], rtol=0.05)
