"""Hopper's two tensor instruction paths (roofline.metrics.compute_paths): wgmma and mma.sync work, each
judged against its own roof.

The oracle is the H200 wide raw CSVs read with the ``csv`` module: per launch, the tensor work of each
``sm__ops_path_tensor_op_{hmma,hgmma,imma,igmma}_*`` variant, that variant's ``.sum.peak_sustained``
(ops per cycle, whole GPU) and ``sm__cycles_elapsed.avg.per_second``. The package parses, builds the
ceilings and classifies; its roofs must be the raw peak of the path that did the work x the clock.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pandas as pd
import pytest
from conftest import real_fixture

H200 = "h200-sglang-qwen3moe-rawcsv-ncu2026.1"
H200_FILES = ("R_short_decode_ncu_raw_full.csv", "R_long_prefill_ncu_raw_full.csv")
TOLERANCE = 1e-3
OPS = "sm__ops_path_tensor_{}.sum"
# Hopper's per-instruction variants: (class it is judged as, variant). Written out here, not read from
# the package: the test says which class each counter must land in.
HOPPER_VARIANTS = {
    "wgmma": (
        ("tensor_fp16", "op_hgmma_src_fp16_sparsity_off"),
        ("tensor_bf16", "op_hgmma_src_bf16_dst_fp32_sparsity_off"),
        ("tensor_tf32", "op_hgmma_src_tf32_dst_fp32_sparsity_off"),
        ("tensor_int8", "op_igmma_src_int8_sparsity_off"),
        ("tensor_fp16_sparse", "op_hgmma_src_fp16_sparsity_on"),
        ("tensor_bf16_sparse", "op_hgmma_src_bf16_dst_fp32_sparsity_on"),
        ("tensor_tf32_sparse", "op_hgmma_src_tf32_dst_fp32_sparsity_on"),
        ("tensor_int8_sparse", "op_igmma_src_int8_sparsity_on"),
    ),
    "mma.sync": (
        ("tensor_fp16_mma", "op_hmma_src_fp16_dst_fp16_sparsity_off"),
        ("tensor_fp16_acc32_mma", "op_hmma_src_fp16_dst_fp32_sparsity_off"),
        ("tensor_bf16_mma", "op_hmma_src_bf16_dst_fp32_sparsity_off"),
        ("tensor_tf32_mma", "op_hmma_src_tf32_dst_fp32_sparsity_off"),
        ("tensor_int8_mma", "op_imma_src_int8_sparsity_off"),
        ("tensor_fp16_mma_sparse", "op_hmma_src_fp16_dst_fp16_sparsity_on"),
        ("tensor_fp16_acc32_mma_sparse", "op_hmma_src_fp16_dst_fp32_sparsity_on"),
        ("tensor_bf16_mma_sparse", "op_hmma_src_bf16_dst_fp32_sparsity_on"),
        ("tensor_tf32_mma_sparse", "op_hmma_src_tf32_dst_fp32_sparsity_on"),
        ("tensor_int8_mma_sparse", "op_imma_src_int8_sparsity_on"),
    ),
}
CLOCK = "sm__cycles_elapsed.avg.per_second"
_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _hz(unit: str) -> float:
    """The scale of a frequency unit of the raw page ("Ghz", "Mhz", "hz")."""
    return _PREFIX[unit.lower().removesuffix("hz")]


def raw_launches(path: Path) -> list[dict]:
    """Per launch of a wide raw-page CSV: ``clock`` (Hz), and per variant with work, its ``work``
    (ops) and ``peak`` (ops per cycle, whole GPU) -- read with ``csv``, no package code."""
    with path.open(newline="") as handle:
        rows = list(csv.reader(handle))
    header, units, data = rows[0], rows[1], rows[2:]
    column = {name: i for i, name in enumerate(header)}
    out = []
    for row in data:
        launch = {"launch": int(row[column["ID"]]), "clock": _number(row[column[CLOCK]]) * _hz(units[column[CLOCK]]),
                  "work": {}, "peak": {}}
        for path_name, variants in HOPPER_VARIANTS.items():
            for cls, variant in variants:
                work = _number(row[column[OPS.format(variant)]])
                launch["peak"][variant] = _number(row[column[OPS.format(variant) + ".peak_sustained"]])
                if work > 0:
                    launch["work"][variant] = (path_name, cls, work)
        out.append(launch)
    return out


def _classified(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The package's classified launches of one file (ceilings from its report, then the datasheet),
    and its ceilings."""
    from roofline.ceilings.catalog import CATALOG_PATH
    from roofline.ceilings.select import build_ceilings
    from roofline.classify.launches import classify_launches
    from roofline.parse.counters import parse_input

    counters = parse_input(path, "app", "csv")
    ceilings = build_ceilings(counters, CATALOG_PATH, ["report", "datasheet"])
    return classify_launches(counters, ceilings).set_index("launch"), ceilings


@pytest.mark.parametrize("name", H200_FILES)
def test_h200_tensor_roof_is_the_peak_of_the_path_that_did_the_work(name: str) -> None:
    """Every H200 launch with tensor work on one path only: its compute class is that path's, the
    launch's peak is that variant's raw ``peak_sustained`` x its SM clock, the device roof it is
    judged against is that raw peak per cycle (x the device's clock), and the class's time bound is
    the raw work / that roof; all within 0.1 %."""
    path = real_fixture(H200) / name
    launches = raw_launches(path)
    classified, ceilings = _classified(path)
    selected = ceilings[ceilings["selected"] & (ceilings["kind"] == "compute")].set_index("name")
    checked = {"wgmma": 0, "mma.sync": 0}
    for launch in launches:
        paths = {p for p, _, _ in launch["work"].values()}
        if len(paths) != 1:
            continue  # no tensor work (a launch on both paths has none in these files)
        (variant, (path_name, cls, work)), = launch["work"].items()
        row = classified.loc[launch["launch"]]
        per_cycle = launch["peak"][variant]
        where = f"{name} launch {launch['launch']} {row['kernel_short']} ({variant})"
        assert row["compute_class"] == cls, where
        assert row["launch_peak_flops"] == pytest.approx(per_cycle * launch["clock"], rel=TOLERANCE), where
        device_clock = selected.at[cls, "clock_hz"]
        assert selected.at[cls, "source"] == "report", where  # never a datasheet (wgmma) figure
        assert row["roof_flops"] / device_clock == pytest.approx(per_cycle, rel=TOLERANCE), where
        assert row[f"time_bound_{cls}"] == pytest.approx(work / (per_cycle * device_clock), rel=TOLERANCE), where
        assert row["flop"] == pytest.approx(work, rel=TOLERANCE), where
        if row["bound"].startswith("compute:"):
            assert row["bound"] == f"compute:{cls}", where
        checked[path_name] += 1
    assert checked["wgmma"] > 0, f"{name}: no wgmma-only launch"
    if name.startswith("R_short_decode"):
        assert checked["mma.sync"] == 2, checked  # the two fused_moe_kernel launches (PROVENANCE.md)


def test_h200_mma_sync_peak_is_two_thirds_of_wgmma_and_the_roofs_follow() -> None:
    """The raw peaks themselves, and that the package's device roofs are each path's own: dense
    mma.sync is 2/3 of wgmma per clock, 2:4-sparse mma.sync 1/2 (so the old wgmma roof held the
    fused_moe_kernel launches 1.5x too high)."""
    path = real_fixture(H200) / H200_FILES[0]
    launch = raw_launches(path)[0]
    peak = launch["peak"]
    sms = 132  # device__attribute_multiprocessor_count of the H200
    assert peak["op_hmma_src_bf16_dst_fp32_sparsity_off"] / sms == pytest.approx(2730.67, abs=0.01)
    assert peak["op_hgmma_src_bf16_dst_fp32_sparsity_off"] / sms == 4096
    for dense_ratio, hmma, hgmma in (
        (2 / 3, "op_hmma_src_bf16_dst_fp32_sparsity_off", "op_hgmma_src_bf16_dst_fp32_sparsity_off"),
        (2 / 3, "op_hmma_src_fp16_dst_fp16_sparsity_off", "op_hgmma_src_fp16_sparsity_off"),
        (2 / 3, "op_hmma_src_tf32_dst_fp32_sparsity_off", "op_hgmma_src_tf32_dst_fp32_sparsity_off"),
        (2 / 3, "op_imma_src_int8_sparsity_off", "op_igmma_src_int8_sparsity_off"),
        (1 / 2, "op_hmma_src_bf16_dst_fp32_sparsity_on", "op_hgmma_src_bf16_dst_fp32_sparsity_on"),
        (1 / 2, "op_imma_src_int8_sparsity_on", "op_igmma_src_int8_sparsity_on"),
    ):
        assert peak[hmma] / peak[hgmma] == pytest.approx(dense_ratio, rel=TOLERANCE), hmma
    _, ceilings = _classified(path)
    roof = ceilings[ceilings["selected"]].set_index("name")
    for cls, variant in (*HOPPER_VARIANTS["wgmma"], *HOPPER_VARIANTS["mma.sync"]):
        per_cycle = roof.at[cls, "value"] / roof.at[cls, "clock_hz"]
        assert per_cycle == pytest.approx(peak[variant], rel=TOLERANCE), cls


def test_the_datasheet_gives_no_mma_sync_roof() -> None:
    """The catalog's H200 and H100 entries yield no row for an mma.sync class: without the report's
    peak such work has no roof (and says so), never the wgmma figure."""
    from roofline.ceilings.catalog import CATALOG_PATH, catalog_ceilings, load_catalog
    from roofline.metrics.compute_paths import MMA_OF, SPARSE_OF

    catalog = load_catalog(CATALOG_PATH)
    mma_classes = set(MMA_OF) | {c for c, dense in SPARSE_OF.items() if dense in MMA_OF}
    for device in ("NVIDIA H200", "NVIDIA H100 PCIe"):
        names = set(catalog_ceilings(catalog, device)["name"])
        assert "tensor_bf16" in names, device
        assert not names & mma_classes, (device, names & mma_classes)


def test_a_launch_on_both_paths_holds_each_paths_work_to_its_own_roof() -> None:
    """Hand-made: one launch with wgmma and mma.sync BF16 work; each class's time bound is its own
    work over its own roof, and the verdict's roof is that of the class whose bound binds."""
    from roofline.classify.launches import classify_frame

    wgmma, mma = 4096.0 * 132 * 1.98e9, 2730.67 * 132 * 1.98e9
    launch = pd.DataFrame({"device": ["H"], "launch": [0], "duration_s": [1e-3], "dram_bytes": [1e6],
                           "flop_tensor_bf16": [4e11], "flop_tensor_bf16_mma": [4e11]})
    ceilings = pd.DataFrame({"device": ["H", "H", "H"], "kind": ["compute", "compute", "memory"],
                             "name": ["tensor_bf16", "tensor_bf16_mma", "dram"], "value": [wgmma, mma, 4.8e12],
                             "source": "report", "selected": True})
    row = classify_frame(launch, ceilings).iloc[0]
    assert row["time_bound_tensor_bf16"] == pytest.approx(4e11 / wgmma)
    assert row["time_bound_tensor_bf16_mma"] == pytest.approx(4e11 / mma)
    assert row["compute_class"] == "tensor_bf16_mma" and row["roof_flops"] == pytest.approx(mma)
    assert row["flop"] == 4e11 and not math.isclose(row["roof_flops"], wgmma)
    # both paths run on the same tensor cores: the launch needs both bounds, one after the other
    both = 4e11 / wgmma + 4e11 / mma
    assert row["bound"] == "compute:tensor_bf16_mma"
    assert row["predicted_duration_s"] == pytest.approx(both)
    assert row["roof_pct"] == pytest.approx(100 * both / 1e-3)
    assert "share the tensor cores" in row["note"]


def test_tensor_and_cuda_core_work_overlap_but_two_tensor_classes_do_not() -> None:
    """Hand-made: FP32 beside one tensor class keeps the largest bound (the pipes overlap); FP32
    beside two tensor classes whose bounds add up past the FP32 one binds on the tensor cores."""
    from roofline.classify.launches import classify_frame

    ceilings = pd.DataFrame({"device": ["H"] * 4, "kind": ["compute"] * 3 + ["memory"],
                             "name": ["fp32", "tensor_bf16", "tensor_tf32", "dram"],
                             "value": [50e12, 800e12, 400e12, 3e12], "source": "report", "selected": True})
    one = pd.DataFrame({"device": ["H"], "launch": [0], "duration_s": [1e-3], "dram_bytes": [1e3],
                        "flop_fp32": [30e9], "flop_tensor_bf16": [400e9]})
    row = classify_frame(one, ceilings).iloc[0]
    assert row["bound"] == "compute:fp32" and row["predicted_duration_s"] == pytest.approx(30e9 / 50e12)
    two = one.assign(flop_tensor_tf32=[100e9])  # 0.5 ms + 0.25 ms on the tensor cores > 0.6 ms FP32
    row = classify_frame(two, ceilings).iloc[0]
    assert row["bound"] == "compute:tensor_bf16"
    assert row["predicted_duration_s"] == pytest.approx(400e9 / 800e12 + 100e9 / 400e12)


def test_every_class_has_its_own_label() -> None:
    """The charts' legends and the pages' words name each class once (an mma.sync class is never
    shown as its wgmma namesake)."""
    from roofline.charts.roofs import CLASS_LABEL
    from roofline.metrics.quantities import COMPUTE_CLASSES
    from roofline.pages.glance import class_words

    assert len(set(CLASS_LABEL.values())) == len(COMPUTE_CLASSES)
    assert len({class_words(c) for c in COMPUTE_CLASSES}) == len(COMPUTE_CLASSES)
    assert CLASS_LABEL["tensor_bf16_mma"] == "Tensor BF16 mma.sync"
    assert class_words("tensor_int8_mma_sparse") == "INT8 tensor mma.sync 2:4 sparse"
