"""The benchmark generator (benchmarks/generate.py): generated inputs must keep what a GPU does not
change from kernel to kernel, so that the benchmarks' ceilings and verdicts are those of real data."""

import importlib.util
import sys

import pytest
from conftest import REAL, REPO

from roofline.ceilings.select import build_ceilings
from roofline.parse.counters import parse_input

CATALOG = REPO / "roofline" / "data" / "gpus.yaml"


def _generator():
    spec = importlib.util.spec_from_file_location("bench_generate", REPO / "benchmarks" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_generate", module)
    spec.loader.exec_module(module)
    return module


def _peaks_per_cycle(counters) -> dict:
    """Per compute class with a report peak, its values per SM cycle over the launches (the
    report's peak metric x SM clock, divided by that clock again: what the hardware does per cycle)."""
    columns = [c for c in counters.columns if c.startswith("peak_flops_") and not c.endswith(("_recipe", "_refused"))
               and counters[c].notna().any()]
    return {c: (counters[c] / counters["sm_clock_hz"]).dropna() for c in columns}


@pytest.mark.parametrize("template", ["h100pcie-rmsnorm-full-ncu2025.1/2025-04-21_v1.ncu-rep",
                                      "a100pcie-selfjoin-full-ncu2021.2/profile.out.ncu-rep"])
def test_a_generated_wide_export_keeps_the_peaks_of_its_report(tmp_path, template):
    if not (REAL / template).is_file():
        pytest.skip(f"real fixtures not found at {REAL / template} (../shared/fixtures/real is absent)")
    generate = _generator()
    path = generate.generate_big(tmp_path, launches=300, kernels=20, kind="wide", template=template)
    generated = _peaks_per_cycle(parse_input(path, "generated", "csv"))
    real = _peaks_per_cycle(parse_input(REAL / template, "real", "ncu-rep"))
    assert generated.keys() == real.keys() and real, "the same compute classes have a report peak"
    for column, per_cycle in real.items():
        expected = float(per_cycle.median())
        off = generated[column][(generated[column] / expected - 1).abs() > 1e-6]
        assert off.empty, f"{column}: {len(off)} of 300 generated launches have another peak per cycle " \
                          f"({off.min():.4g}-{off.max():.4g}, the report's {expected:.4g})"
    # and the ceilings the workflow selects from them are the report's, within the clocks' jitter
    ceilings = {name: _report_ceilings(parse_input(p, "x", kind)) for name, p, kind in
                (("generated", path, "csv"), ("real", REAL / template, "ncu-rep"))}
    moved = {n: v / ceilings["real"][n] for n, v in ceilings["generated"].items()
             if abs(v / ceilings["real"][n] - 1) > 0.03}
    assert ceilings["generated"].keys() == ceilings["real"].keys() and not moved, moved


def _report_ceilings(counters) -> dict:
    ceilings = build_ceilings(counters, CATALOG, ["report"])
    report = ceilings[ceilings["selected"] & (ceilings["source"] == "report")]
    return dict(zip(report["name"], report["value"].astype(float), strict=True))
