"""ncu's rule results: read per launch from real reports (compared with ncu_report directly) and
aggregated per kernel."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from charts.test_roofline_chart import make_ceilings
from conftest import real_fixture

from roofline.classify.kernels import aggregate_kernels
from roofline.parse.counters import parse_input
from roofline.parse.readers import ncu_rules


def counters_of(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return parse_input(path, "app", "ncu-rep")


def direct_rules(path) -> list[list[dict]]:
    """Per launch, ncu_report's own rule results with a message worth showing."""
    import ncu_report

    report = ncu_report.load_report(str(path))
    out = []
    for r in range(report.num_ranges()):
        for a in range(report.range_by_idx(r).num_actions()):
            results = report.range_by_idx(r).action_by_idx(a).rule_results_as_dicts()
            out.append([x for x in results if (x.get("rule_message") or {}).get("type") in (2, 3, 4)
                        and (x.get("rule_message") or {}).get("message")])
    return out


@pytest.mark.parametrize("folder", ["a100sxm-silu-full-ncu2025.1", "gtx1650-heatsim-stencil-full-ncu2021.3",
                                    "a100pcie-selfjoin-full-ncu2021.2"])
def test_launch_rules_are_ncu_reports_own(folder):
    path = next(real_fixture(folder).glob("*.ncu-rep"))
    counters = counters_of(path)
    direct = direct_rules(path)
    assert len(direct) == len(counters) and any(direct)
    for text, expected in zip(counters["ncu_rules"], direct):
        ours = ncu_rules.parse_rules(text)
        assert [r["rule"] for r in ours] == [x["rule_identifier"] for x in expected]
        assert [r["speedup_pct"] for r in ours] == [
            (x.get("speedup_estimation") or {}).get("speedup") for x in expected]
        for rule in ours:
            assert "@section:" not in rule["message"] and "@url:" not in rule["message"]


def test_silu_kernel_speedup_is_ncus_estimate():
    """The SiLU report's one kernel: ncu estimates 22.9 % from issue-slot utilisation (verified with
    ncu_report above); the kernel's largest speedup is the time-weighted mean over its launches."""
    path = next(real_fixture("a100sxm-silu-full-ncu2025.1").glob("*.ncu-rep"))
    counters = counters_of(path)
    kernels = aggregate_kernels(counters, make_ceilings(counters["device"].iat[0]))
    direct = direct_rules(path)
    seconds = counters["duration_s"].to_numpy()
    for _, kernel in kernels.iterrows():
        rows = (counters["kernel"] == kernel["kernel"]) & (counters["grid"] == kernel["grid"])
        rows &= counters["block"] == kernel["block"]
        best = {}
        for i in np.flatnonzero(rows):
            for x in direct[i]:
                s = (x.get("speedup_estimation") or {}).get("speedup")
                if s is not None:
                    best[x["rule_identifier"]] = best.get(x["rule_identifier"], 0) + s * seconds[i]
        expected = max(best.values()) / seconds[rows.to_numpy()].sum() if best else np.nan
        assert kernel["ncu_speedup_pct"] == pytest.approx(expected, abs=0.01, nan_ok=True)
        listed = ncu_rules.parse_rules(kernel["ncu_rules"])
        assert listed and listed[0]["speedup_pct"] == pytest.approx(expected, abs=0.01)


def test_kernel_rules_weigh_launches_by_time():
    rule = {"rule": "R", "section": "S", "title": "T", "type": "optimization", "speedup_type": "global"}
    fired = json.dumps([{**rule, "message": "short", "speedup_pct": 40.0}])
    fired_long = json.dumps([{**rule, "message": "long", "speedup_pct": 10.0}])
    texts, top = ncu_rules.kernel_rules([fired, fired_long, "", ""], [1.0, 3.0, 4.0, 2.0],
                                        np.array([0, 0, 0, 1]), 2)
    # (40 x 1 + 10 x 3 + 0 x 4) / 8: a launch where the rule did not fire saw nothing to gain
    assert top[0] == pytest.approx(70 / 8) and np.isnan(top[1]) and texts[1] == ""
    (only,) = json.loads(texts[0])
    assert only["message"] == "long" and only["launches"] == 2


def test_links_become_labels():
    text = ("See @section:MemoryWorkloadAnalysis:Memory Workload Analysis@ and the "
            "@url:CUDA Best Practices Guide:https://docs.nvidia.com/x@ for @metric:dram__bytes.sum@.")
    assert ncu_rules._plain(text) == ("See Memory Workload Analysis and the CUDA Best Practices Guide for "
                                      "dram__bytes.sum.")


def test_exports_without_rules_have_none():
    frame = pd.DataFrame({"ncu_rules": ["", ""]})
    texts, top = ncu_rules.kernel_rules(frame["ncu_rules"].tolist(), [1.0, 1.0], np.array([0, 0]), 1)
    assert texts == [""] and np.isnan(top[0]) and ncu_rules.parse_rules("not json") == []
