"""Tests of roofline.ceilings.catalog and roofline/data/gpus.yaml: validation, matching, numbers, overrides."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from roofline.ceilings.catalog import CATALOG_PATH, catalog_ceilings, load_catalog, match_device
from roofline.ceilings.catalog_entries import Catalog, normalise_name
from roofline.metrics.quantities import COMPUTE_CLASSES, MEMORY_LEVELS, TENSOR_CLASSES
from roofline.tables.schemas import TABLES

REAL_FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "real"

# device__attribute_display_name of every GPU behind the real test reports.
FIXTURE_DEVICES = {
    "NVIDIA A100-PCIE-40GB": "a100_pcie_40gb",
    "NVIDIA A100-SXM4-40GB": "a100_sxm4_40gb",
    "Tesla V100-SXM2-16GB": "v100_sxm2",
    "NVIDIA GeForce RTX 3080": "rtx_3080",
    "NVIDIA H100 PCIe": "h100_pcie",
    "NVIDIA A10G": "a10g",
    "NVIDIA A40": "a40",
    "NVIDIA GeForce GTX 1650": "gtx_1650",
    "NVIDIA GeForce GTX 1660 SUPER": "gtx_1660_super",
    "NVIDIA GeForce RTX 3070": "rtx_3070",
    "NVIDIA GeForce RTX 5090": "rtx_5090",
    "NVIDIA GeForce GTX 1080": "gtx_1080",
    "NVIDIA GeForce RTX 4060 Ti": "rtx_4060_ti",
    "NVIDIA GeForce RTX 5060": "rtx_5060",
    "NVIDIA H200": "h200_sxm",
}

# Models the catalog must know, by a name NVIDIA tools report (or a common alias).
REQUIRED_MODELS = {
    "Tesla V100-SXM2-16GB": "v100_sxm2",
    "Tesla V100-SXM2-32GB": "v100_sxm2",
    "Tesla V100-PCIE-16GB": "v100_pcie",
    "Tesla T4": "t4",
    "NVIDIA A100-SXM4-40GB": "a100_sxm4_40gb",
    "NVIDIA A100-SXM4-80GB": "a100_sxm4_80gb",
    "NVIDIA A100-PCIE-40GB": "a100_pcie_40gb",
    "NVIDIA A100 80GB PCIe": "a100_pcie_80gb",
    "NVIDIA A10": "a10",
    "NVIDIA A10G": "a10g",
    "NVIDIA A40": "a40",
    "NVIDIA L4": "l4",
    "NVIDIA L40S": "l40s",
    "NVIDIA GeForce RTX 3080": "rtx_3080",
    "NVIDIA GeForce RTX 3090": "rtx_3090",
    "NVIDIA GeForce RTX 4090": "rtx_4090",
    "NVIDIA GeForce RTX 5090": "rtx_5090",
    "NVIDIA H100 80GB HBM3": "h100_sxm",
    "H100 SXM5": "h100_sxm",
    "NVIDIA H100 PCIe": "h100_pcie",
    "NVIDIA H200": "h200_sxm",
    "NVIDIA GH200 480GB": "gh200_96gb",
    "NVIDIA B200": "b200",
}

# Hand-made minimal catalog; the tests below break it one way at a time.
TOY = """\
gpus:
  toy_gpu:
    names: ["Toy GPU"]
    architecture: Toy
    compute_capability: "9.0"
    sm_count: 10
    boost_clock_hz: 1.0e+9
    spec_source: "hand-made"
    compute:
      fp32: {value: 2.56e+12, source: "hand-made"}
      tensor_fp16: {value: 2.0e+13, sparse: 4.0e+13, source: "hand-made"}
    memory:
      dram: {value: 1.0e+11, source: "hand-made"}
"""


def write_yaml(tmp_path: Path, text: str, why: str, name: str = "gpus.yaml") -> Path:
    """Write a hand-made catalog, saying so in its first line."""
    path = tmp_path / name
    header = f"# Hand-made test file (not a vendor catalog): {why}\n"
    path.write_text(header + text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(CATALOG_PATH)


def entry(catalog: Catalog, key: str):
    return catalog.gpus[key]


def value(catalog: Catalog, key: str, kind: str, name: str) -> float:
    return getattr(getattr(catalog.gpus[key], kind), name).value


# ----------------------------------------------------------------------------- the shipped file


def test_every_value_has_a_source_and_is_positive(catalog: Catalog) -> None:
    assert len(catalog.gpus) >= 25
    for key, gpu in catalog.gpus.items():
        assert gpu.spec_source.strip(), key
        assert gpu.sm_count > 0 and 1e8 < gpu.boost_clock_hz < 1e10, key
        ceilings = [*gpu.compute.items(), *gpu.memory.items()]
        assert ceilings, key
        for name, c in ceilings:
            assert c.source.strip(), (key, name)
            for v in (c.value, c.sparse, c.fp32_accumulate, c.clock_hz):
                assert v is None or (math.isfinite(v) and v > 0), (key, name)
        assert gpu.memory.dram is not None and gpu.compute.fp32 is not None, key


def test_shipped_file_has_no_bits_or_binary_prefixes() -> None:
    raw = yaml.safe_load(CATALOG_PATH.read_text(encoding="utf-8"))
    unit_words = re.compile(r"bit|[kmgtpe]?bps\b|[kmgtpe]i(b|byte)", re.IGNORECASE)

    def walk(node, path=""):
        if isinstance(node, dict):
            for k, v in node.items():
                assert not unit_words.search(str(k)), f"{path}.{k}"
                if k not in {"source", "spec_source", "note", "notes"}:
                    walk(v, f"{path}.{k}")
        elif isinstance(node, list):
            for item in node:
                walk(item, path)
        elif isinstance(node, str):
            assert not unit_words.search(node), f"{path}: {node}"
        else:
            # YAML 1.1 readers: every number in the file must already be a number, not a string.
            assert isinstance(node, int | float), f"{path}: {node!r}"

    walk(raw["gpus"])


def test_dense_and_sparse_kept_apart(catalog: Catalog) -> None:
    a100 = entry(catalog, "a100_sxm4_80gb")
    assert a100.compute.tensor_fp16.value == pytest.approx(312e12)
    assert a100.compute.tensor_fp16.sparse == pytest.approx(624e12)
    for key, gpu in catalog.gpus.items():
        for name, c in gpu.compute.items():
            if c.sparse is not None:
                assert name in TENSOR_CLASSES, (key, name)
                assert c.sparse == pytest.approx(2 * c.value, rel=0.02), (key, name)


def test_geforce_fp32_accumulate_is_half_rate(catalog: Catalog) -> None:
    for key in ("rtx_3070", "rtx_3080", "rtx_3090", "rtx_4090", "rtx_4060_ti", "rtx_5090", "rtx_5060"):
        c = entry(catalog, key).compute
        half = c.tensor_fp16.value / 2
        assert c.tensor_fp16.fp32_accumulate == pytest.approx(half, rel=0.01), key
        assert c.tensor_bf16.value == pytest.approx(half, rel=0.01), key
        # GA10x/Ada/GB20x: non-tensor FP16 runs at the FP32 rate, not 2x or 4x.
        assert c.fp16.value == pytest.approx(c.fp32.value), key


@pytest.mark.parametrize("display_name,key", sorted(REQUIRED_MODELS.items()))
def test_required_models_are_present(catalog: Catalog, display_name: str, key: str) -> None:
    found = match_device(catalog, display_name)
    assert found is not None and found.key == key


@pytest.mark.parametrize("display_name,key", sorted(FIXTURE_DEVICES.items()))
def test_fixture_devices_match_exactly_one_entry(
    catalog: Catalog, display_name: str, key: str
) -> None:
    owners = [k for k, gpu in catalog.gpus.items() if display_name in gpu.names]
    assert owners == [key]
    assert match_device(catalog, display_name).key == key


@pytest.mark.skipif(not REAL_FIXTURES.is_dir(), reason="real fixtures not checked out")
def test_fixture_list_covers_the_real_reports() -> None:
    # "GPU(s) (device__attribute_display_name, ...): NVIDIA A40 (sm 8.6) x5" for reports,
    # "GPU (device__attribute_display_name): ['NVIDIA H200']; ..." for the wide CSV exports
    report = re.compile(r"device__attribute_display_name[^:]*:\s*([^\[\n]+?)\s+\(sm")
    export = re.compile(r"device__attribute_display_name\):\s*\[([^\]]+)\]")
    names = set()
    for provenance in REAL_FIXTURES.glob("*/PROVENANCE.md"):
        text = provenance.read_text(encoding="utf-8")
        names |= set(report.findall(text))
        names |= {n.strip(" '\"") for listed in export.findall(text) for n in listed.split(",")}
    assert {"NVIDIA GeForce RTX 4060 Ti", "NVIDIA GeForce RTX 5060", "NVIDIA H200"} <= names
    assert names <= set(FIXTURE_DEVICES)


# ---------------------------------------------------------- numbers against independent arithmetic


@pytest.mark.parametrize(
    "key,kind,name,expected",
    [
        ("a100_sxm4_40gb", "compute", "fp64", 108 * 64 * 1.41e9),  # 32 FP64 FMA/clk/SM
        ("a100_pcie_40gb", "compute", "fp64", 108 * 64 * 1.41e9),
        ("a100_sxm4_80gb", "compute", "tensor_fp16", 108 * 2048 * 1.41e9),  # 1024 FMA/clk/SM
        ("a100_sxm4_80gb", "compute", "fp16", 108 * 512 * 1.41e9),
        ("h100_sxm", "compute", "fp32", 132 * 256 * 1.98e9),
        ("h100_sxm", "compute", "fp64", 132 * 128 * 1.98e9),
        ("h100_sxm", "compute", "tensor_fp16", 132 * 4096 * 1.83e9),
        ("h100_pcie", "compute", "fp32", 114 * 256 * 1.755e9),
        ("h100_pcie", "compute", "tensor_fp16", 114 * 4096 * 1.62e9),
        ("v100_sxm2", "compute", "fp64", 80 * 64 * 1.53e9),
        ("v100_sxm2", "compute", "tensor_fp16", 640 * 64 * 2 * 1.53e9),  # 8 tensor cores/SM
        ("t4", "compute", "tensor_fp16", 320 * 64 * 2 * 1.59e9),
        ("rtx_4090", "compute", "fp32", 16384 * 2 * 2.52e9),
        ("rtx_4090", "compute", "tensor_fp16", 128 * 512 * 2 * 2.52e9),
        ("rtx_3080", "compute", "tensor_fp16", 68 * 512 * 2 * 1.71e9),
        ("rtx_5090", "compute", "fp32", 21760 * 2 * 2.407e9),
        ("l4", "compute", "tensor_fp16", 58 * 512 * 2 * 2.04e9),
        ("a40", "compute", "tensor_fp16", 84 * 512 * 2 * 1.74e9),
        ("a10", "compute", "fp32", 9216 * 2 * 1.695e9),
        ("b200", "compute", "fp32", 148 * 256 * 1.98e9),
        # DRAM: bus width [B] x 2 (double data rate) x memory clock of the fixture reports.
        ("a100_pcie_40gb", "memory", "dram", 5120 / 8 * 2 * 1.215e9),
        ("v100_sxm2", "memory", "dram", 4096 / 8 * 2 * 0.877e9),
        ("rtx_3080", "memory", "dram", 320 / 8 * 2 * 9.501e9),
        ("a40", "memory", "dram", 384 / 8 * 2 * 7.251e9),
        ("gtx_1660_super", "memory", "dram", 192 / 8 * 2 * 7.001e9),
        ("gtx_1650", "memory", "dram", 128 / 8 * 2 * 6.001e9),
        ("a10g", "memory", "dram", 384 / 8 * 2 * 6.251e9),
        ("gtx_1080", "memory", "dram", 256 / 8 * 2 * 5.005e9),
        ("rtx_5090", "memory", "dram", 512 / 8 * 28e9),  # 64 B per transfer, 28 GT/s
        ("rtx_4060_ti", "memory", "dram", 128 / 8 * 2 * 9.001e9),
        ("rtx_5060", "memory", "dram", 128 / 8 * 2 * 14.001e9),  # GDDR7, 28 GT/s
        ("h200_sxm", "memory", "dram", 6016 / 8 * 2 * 3.201e9),
        # per-SM rates of the RTX 4090 / 5090 entries (Ada and GB20x tensor cores) x SMs x clock
        ("rtx_4060_ti", "compute", "fp32", 4352 * 2 * 2.535e9),
        ("rtx_4060_ti", "compute", "tensor_fp16", 34 * 1024 * 2.535e9),
        ("rtx_4060_ti", "compute", "tensor_bf16", 34 * 512 * 2.535e9),
        ("rtx_4060_ti", "compute", "tensor_tf32", 34 * 256 * 2.535e9),
        ("rtx_4060_ti", "compute", "tensor_int8", 34 * 2048 * 2.535e9),
        ("rtx_4060_ti", "compute", "fp64", 34 * 4 * 2.535e9),
        ("rtx_5060", "compute", "fp32", 3840 * 2 * 2.497e9),
        ("rtx_5060", "compute", "tensor_fp16", 30 * 1024 * 2.497e9),
        ("rtx_5060", "compute", "tensor_bf16", 30 * 512 * 2.497e9),
        ("rtx_5060", "compute", "tensor_tf32", 30 * 256 * 2.497e9),
        ("rtx_5060", "compute", "tensor_fp8", 30 * 2048 * 2.497e9),
        ("rtx_5060", "compute", "fp64", 30 * 4 * 2.497e9),
    ],
)
def test_numbers_against_arithmetic(catalog: Catalog, key, kind, name, expected) -> None:
    assert value(catalog, key, kind, name) == pytest.approx(expected, rel=0.01)


def test_h100_pcie_dram_is_the_rounded_datasheet_figure(catalog: Catalog) -> None:
    # 5120-wide HBM2e at 1593 MHz DDR (fixture report) = 2.039 TB/s; the datasheet says 2 TB/s.
    interface = 5120 / 8 * 2 * 1.593e9
    assert value(catalog, "h100_pcie", "memory", "dram") == pytest.approx(interface, rel=0.02)


FP32_LANES_PER_SM = {  # FP32 FMA lanes per SM, by chip (each lane 2 FLOP/clk)
    "GP104": 128, "GV100": 64, "TU104": 64, "TU116": 64, "TU117": 64, "GA100": 64, "GA102": 128,
    "GA104": 128, "AD102": 128, "AD104": 128, "AD106": 128, "GH100": 128, "GB100": 128, "GB202": 128,
    "GB206": 128,
}  # fmt: skip


def test_fp32_is_sm_count_times_lanes_times_clock(catalog: Catalog) -> None:
    for key, gpu in catalog.gpus.items():
        expected = gpu.sm_count * FP32_LANES_PER_SM[gpu.chip] * 2 * gpu.boost_clock_hz
        assert gpu.compute.fp32.value == pytest.approx(expected, rel=0.02), key


# Dense FLOP (ops) per clock and SM of GH100's tensor cores, from the H100 whitepaper's per-SM
# rates (4 tensor cores per SM; FP16/BF16 512 dense FMA each per clock = 4,096 FLOP/clk/SM),
# not from the catalog: a Hopper tensor value over its clock and SM count must give these.
GH100_TENSOR_PER_SM_CLOCK = {
    "tensor_fp64": 256, "tensor_tf32": 2048, "tensor_fp16": 4096, "tensor_bf16": 4096, "tensor_fp8": 8192,
    "tensor_int8": 8192,
}  # fmt: skip


def test_every_hopper_tensor_value_is_the_per_sm_rate_at_its_clock() -> None:
    """Each Hopper entry's tensor value / its clock (the value's clock_hz, else the entry's boost
    clock) / SM count = GH100's per-SM rate: NVIDIA quotes dense tensor peaks at 1.83 GHz (SXM) or
    1.62 GHz (PCIe), below the FP32 peak's clock, so an entry missing that per-class clock is off
    by ~8 %. Read from the raw YAML, so the check does not go through the loader's defaults."""
    gpus = yaml.safe_load(CATALOG_PATH.read_text(encoding="utf-8"))["gpus"]
    hopper = {key: gpu for key, gpu in gpus.items() if gpu["architecture"] == "Hopper"}
    assert {"h100_sxm", "h100_pcie", "h200_sxm", "gh200_96gb", "gh200_144gb"} <= set(hopper)
    off = []
    for key, gpu in hopper.items():
        for name, rate in GH100_TENSOR_PER_SM_CLOCK.items():
            given = gpu["compute"].get(name)
            if given is None:
                continue
            per_sm = given["value"] / given.get("clock_hz", gpu["boost_clock_hz"]) / gpu["sm_count"]
            if abs(per_sm / rate - 1) > 0.01:
                off.append(f"{key} {name}: {per_sm:,.0f} FLOP/clk/SM, GH100 has {rate:,}")
    assert not off, "\n".join(off)


def test_seed_machine_a100_fp16_gemm(catalog: Catalog) -> None:
    # Guide section 2, "A100 FP16 GEMM": pi 312 TFLOP/s, beta 2039 GB/s, ridge 153.0 FLOP/B.
    rows = catalog_ceilings(catalog, "NVIDIA A100-SXM4-80GB").set_index("name")["value"]
    assert rows["tensor_fp16"] == pytest.approx(312e12)
    assert rows["dram"] == pytest.approx(2039e9)
    assert rows["tensor_fp16"] / rows["dram"] == pytest.approx(153.02, abs=0.01)


def test_seed_machine_rtx_4090_saxpy(catalog: Catalog) -> None:
    # Guide section 2, "SAXPY on RTX 4090": pi 82.6 TFLOP/s, beta 1008 GB/s, ridge 81.9 FLOP/B.
    rows = catalog_ceilings(catalog, "NVIDIA GeForce RTX 4090").set_index("name")["value"]
    assert rows["fp32"] == pytest.approx(82.6e12)
    assert rows["dram"] == pytest.approx(1008e9)
    assert rows["fp32"] / rows["dram"] == pytest.approx(81.9, abs=0.05)


# ------------------------------------------------------------------------------- matching


@pytest.mark.parametrize(
    "display_name,key",
    [
        ("A100 80GB PCIe", "a100_pcie_80gb"),
        ("nvidia a100-sxm4-40gb", "a100_sxm4_40gb"),
        ("GeForce RTX 3080", "rtx_3080"),
        ("RTX3080", "rtx_3080"),
        ("NVIDIA  H100   PCIe", "h100_pcie"),
        ("H100-SXM5", "h100_sxm"),
        ("V100-SXM2-16GB", "v100_sxm2"),
        ("NVIDIA Tesla T4", "t4"),
    ],
)
def test_match_normalised(catalog: Catalog, display_name: str, key: str) -> None:
    assert match_device(catalog, display_name).key == key


@pytest.mark.parametrize("display_name", ["A100", "H100", "NVIDIA", "", "  ", "Radeon RX 7900 XTX"])
def test_match_refuses_to_guess(catalog: Catalog, display_name: str) -> None:
    assert match_device(catalog, display_name) is None


def test_match_returns_none_between_two_candidates(catalog: Catalog) -> None:
    # Validation forbids such a catalog; build it unvalidated to check match_device never guesses.
    first = entry(catalog, "a100_sxm4_40gb").model_copy(update={"names": ["GPU-X 1"]})
    second = entry(catalog, "a100_sxm4_80gb").model_copy(update={"names": ["gpu x1", "GPU-X 1"]})
    ambiguous = Catalog.model_construct(gpus={"first": first, "second": second})
    assert match_device(ambiguous, "GPU X 1") is None
    assert match_device(ambiguous, "GPU-X 1") is None


def test_normalise_name() -> None:
    assert normalise_name("NVIDIA GeForce RTX 3080") == "rtx3080"
    assert normalise_name("Tesla V100-SXM2-16GB") == "v100sxm216gb"


# ------------------------------------------------------------------------------- ceilings rows


def test_catalog_ceilings_rows(catalog: Catalog) -> None:
    frame = catalog_ceilings(catalog, "NVIDIA H100 PCIe")
    assert list(frame.columns) == [c.name for c in TABLES["ceilings"]]
    assert set(frame["device"]) == {"NVIDIA H100 PCIe"}
    assert set(frame["source"]) == {"datasheet"}
    assert set(frame["kind"]) == {"compute", "memory"}
    assert set(frame["name"]) <= set(COMPUTE_CLASSES) | set(MEMORY_LEVELS)
    assert (frame["launches"] == 0).all() and frame["spread"].isna().all()
    assert not frame["selected"].any()
    assert frame["citation"].str.contains("h100_pcie").all()
    rows = frame.set_index("name")
    assert rows.loc["fp32", "clock_hz"] == pytest.approx(1.755e9)
    assert rows.loc["tensor_fp16", "clock_hz"] == pytest.approx(1.62e9)
    assert np.isnan(rows.loc["dram", "clock_hz"])
    assert rows.loc["tensor_fp16", "value"] == pytest.approx(756.5e12)


def test_catalog_ceilings_keeps_the_reported_name(catalog: Catalog) -> None:
    frame = catalog_ceilings(catalog, "GeForce RTX 3080")
    assert len(frame) and set(frame["device"]) == {"GeForce RTX 3080"}


def test_catalog_ceilings_unknown_device(catalog: Catalog) -> None:
    frame = catalog_ceilings(catalog, "Mystery GPU 9000")
    assert frame.empty
    assert list(frame.columns) == [c.name for c in TABLES["ceilings"]]


# ------------------------------------------------------------------------------- refusals


def test_toy_catalog_loads(tmp_path: Path) -> None:
    toy = load_catalog(write_yaml(tmp_path, TOY, "the valid baseline of the refusal tests"))
    assert match_device(toy, "Toy GPU").key == "toy_gpu"


def test_plain_e_notation_is_a_number(tmp_path: Path) -> None:
    # YAML 1.1 reads 1.0e11 (no sign in the exponent) as a string; the catalog takes it as a number.
    text = TOY.replace("dram: {value: 1.0e+11", "dram: {value: 1.0e11")
    toy = load_catalog(write_yaml(tmp_path, text, "exponent written without a sign"))
    assert toy.gpus["toy_gpu"].memory.dram.value == 1e11


BAD_CASES = [
    ("string with units", ("value: 1.0e+11", 'value: "900 GB/s"'), r"900 GB/s.*plain number"),
    ("bits in a value", ("value: 1.0e+11", 'value: "7 Gbit/s"'), r"memory\.dram\.value.*bits"),
    ("Gbps in a value", ("value: 1.0e+11", 'value: "14 Gbps"'), r"bits"),
    ("binary prefix", ("value: 1.0e+11", 'value: "1.5 TiB/s"'), r"binary prefix"),
    ("bits in a key", ("dram: {value", "dram_gbps: {value"), r"dram_gbps.*bits"),
    ("binary prefix in a key", ("dram: {value", "dram_GiBs: {value"), r"dram_GiBs.*binary prefix"),
    ("GB/s, not B/s", ("value: 1.0e+11", "value: 1555"), r"memory\.dram\.value = 1555.*SI base"),
    ("MHz, not Hz", ("boost_clock_hz: 1.0e+9", "boost_clock_hz: 1410"), r"boost_clock_hz 1410"),
    ("negative", ("value: 2.56e+12", "value: -2.56e+12"), r"compute\.fp32\.value.*positive"),
    ("not finite", ("value: 2.56e+12", "value: .nan"), r"compute\.fp32\.value.*finite"),
    ("missing source", (', source: "hand-made"}\n    memory', "}\n    memory"), r"source"),
    (
        "empty source",
        ('fp32: {value: 2.56e+12, source: "hand-made"}', 'fp32: {value: 2.56e+12, source: " "}'),
        r"fp32\.source: is empty",
    ),
    ("unknown class", ("fp32: {", "fp128: {"), r"unknown key 'fp128' \(one of fp64, fp32"),
    (
        "sparse on CUDA cores",
        ("fp32: {value: 2.56e+12,", "fp32: {value: 2.56e+12, sparse: 5.0e+12,"),
        r"tensor_\* classes only",
    ),
    ("sparse below dense", ("sparse: 4.0e+13", "sparse: 1.0e+13"), r"swapped"),
    (
        "no memory ceiling",
        ('      dram: {value: 1.0e+11, source: "hand-made"}\n', "      {}\n"),
        r"memory: give at least one ceiling",
    ),
]


@pytest.mark.parametrize("why,edit,message", BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_catalog_is_refused(
    tmp_path: Path, why: str, edit: tuple[str, str], message: str
) -> None:
    assert edit[0] in TOY
    path = write_yaml(tmp_path, TOY.replace(edit[0], edit[1], 1), f"refused because: {why}")
    with pytest.raises(ValueError, match=message) as info:
        load_catalog(path)
    assert str(path) in str(info.value)
    assert "toy_gpu" in str(info.value)


def test_duplicate_names_across_entries_are_refused(tmp_path: Path) -> None:
    second = TOY.split("gpus:\n", 1)[1].replace("toy_gpu:", "toy_gpu_2:")
    path = write_yaml(tmp_path, TOY + second, "two entries claim the name 'Toy GPU'")
    with pytest.raises(ValueError, match=r"'Toy GPU' is in both 'toy_gpu' and 'toy_gpu_2'"):
        load_catalog(path)


def test_names_equal_once_normalised_are_refused(tmp_path: Path) -> None:
    second = TOY.split("gpus:\n", 1)[1].replace("toy_gpu:", "toy_gpu_2:")
    second = second.replace('["Toy GPU"]', '["NVIDIA toy-gpu"]')
    path = write_yaml(tmp_path, TOY + second, "two entries whose names normalise alike")
    with pytest.raises(ValueError, match=r"matches 'toy_gpu' once normalised"):
        load_catalog(path)


def test_duplicate_yaml_key_is_refused(tmp_path: Path) -> None:
    second = TOY.split("gpus:\n", 1)[1].replace('["Toy GPU"]', '["Other GPU"]')
    path = write_yaml(tmp_path, TOY + second, "the key toy_gpu written twice")
    with pytest.raises(ValueError, match=r"duplicate key 'toy_gpu'"):
        load_catalog(path)


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"nowhere\.yaml.*not found"):
        load_catalog(tmp_path / "nowhere.yaml")


def test_top_level_shape(tmp_path: Path) -> None:
    path = write_yaml(tmp_path, "gpu:\n  toy: {}\n", "misspelt top-level key")
    with pytest.raises(ValueError, match=r"top-level 'gpus:'"):
        load_catalog(path)


# ------------------------------------------------------------------------------- overrides


NEW_GPU = {
    "names": ["What-if GPU"],
    "architecture": "Hypothetical",
    "compute_capability": "9.0",
    "sm_count": 100,
    "boost_clock_hz": 2.0e9,
    "spec_source": "design study, hand-made",
    "compute": {"fp32": {"value": 51.2e12, "source": "100 SM x 256 x 2 GHz"}},
    "memory": {"dram": {"value": 4.0e12, "source": "design target"}},
}


def test_override_adds_a_gpu() -> None:
    cat = load_catalog(CATALOG_PATH, {"what_if_gpu": NEW_GPU})
    frame = catalog_ceilings(cat, "What-if GPU").set_index("name")
    assert frame.loc["fp32", "value"] == pytest.approx(51.2e12)
    assert frame.loc["fp32", "clock_hz"] == pytest.approx(2.0e9)
    assert "what_if_gpu" in frame.loc["dram", "citation"]
    assert match_device(cat, "NVIDIA A40").key == "a40"  # the file's entries are still there


def test_override_replaces_a_value_and_its_source() -> None:
    measured = {"value": 1.40e12, "source": "measured: 1 GiB device-to-device copy"}
    cat = load_catalog(CATALOG_PATH, {"a100_pcie_40gb": {"memory": {"dram": measured}}})
    dram = cat.gpus["a100_pcie_40gb"].memory.dram
    assert dram.value == pytest.approx(1.40e12) and dram.source.startswith("measured")
    assert cat.gpus["a100_pcie_40gb"].compute.fp64.value == pytest.approx(9.7e12)  # rest kept
    assert cat.gpus["a100_sxm4_40gb"].memory.dram.value == pytest.approx(1.555e12)  # others kept


def test_override_does_not_leak_into_shared_yaml_anchors() -> None:
    new_fp16 = {"value": 70e12, "source": "hand-made override"}
    cat = load_catalog(CATALOG_PATH, {"gpus": {"a100_sxm4_40gb": {"compute": {"fp16": new_fp16}}}})
    assert cat.gpus["a100_sxm4_40gb"].compute.fp16.value == pytest.approx(70e12)
    assert cat.gpus["a100_sxm4_80gb"].compute.fp16.value == pytest.approx(78e12)
    fresh = load_catalog(CATALOG_PATH)
    assert fresh.gpus["a100_sxm4_40gb"].compute.fp16.value == pytest.approx(78e12)


def test_override_of_a_scalar_field_and_a_note() -> None:
    patch = {"boost_clock_hz": 1.665e9, "memory": {"dram": {"note": "GDDR5 board"}}}
    cat = load_catalog(CATALOG_PATH, {"gtx_1650": patch})
    gpu = cat.gpus["gtx_1650"]
    assert gpu.boost_clock_hz == pytest.approx(1.665e9)
    assert gpu.memory.dram.note == "GDDR5 board" and gpu.memory.dram.value == pytest.approx(192e9)


def test_override_value_without_source_is_refused() -> None:
    with pytest.raises(ValueError, match=r"'a40', memory\.dram.*own 'source'"):
        load_catalog(CATALOG_PATH, {"a40": {"memory": {"dram": {"value": 6.5e11}}}})


def test_override_with_units_is_refused() -> None:
    bad = {"a40": {"memory": {"dram": {"value": "696 GB/s", "source": "typed by hand"}}}}
    with pytest.raises(ValueError, match=r"(?s)with config overrides.*'a40', memory\.dram\.value"):
        load_catalog(CATALOG_PATH, bad)
    bad = {"a40": {"memory": {"dram": {"value": "5.6 Tbit/s", "source": "typed by hand"}}}}
    with pytest.raises(ValueError, match=r"bits"):
        load_catalog(CATALOG_PATH, bad)


def test_override_name_clash_is_refused() -> None:
    clash = {**NEW_GPU, "names": ["NVIDIA A40"]}
    with pytest.raises(ValueError, match=r"'NVIDIA A40' is in both 'a40' and 'clash'"):
        load_catalog(CATALOG_PATH, {"clash": clash})


def test_incomplete_new_gpu_is_refused() -> None:
    partial = {k: v for k, v in NEW_GPU.items() if k != "spec_source"}
    with pytest.raises(ValueError, match=r"GPU 'what_if_gpu', spec_source: missing required key"):
        load_catalog(CATALOG_PATH, {"what_if_gpu": partial})
