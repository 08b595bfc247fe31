"""What-if tables: the bundled textbook table and the errors of hand-made bad ones."""

import gzip
import re

import pandas as pd
import pytest
import yaml
from conftest import REPO

from roofline.errors import InputError
from roofline.metrics.quantities import COMPUTE_CLASSES, MEMORY_LEVELS
from roofline.parse.readers.what_if import read_what_if, read_what_if_csv

TEXTBOOK = REPO / "data" / "examples" / "textbook.yaml"


def test_what_if_table_reads_seed_vectors(tmp_path):
    frame = read_what_if(TEXTBOOK)
    seed = frame[frame["kernel"] == "seed_normalization"].iloc[0]
    assert seed["flop_fp32"] == 240e9 and seed["dram_bytes"] == 20e9
    assert seed["peak_flops_fp32"] == 120e12 and seed["peak_dram_bw"] == 3e12


def test_what_if_table_errors_name_file_and_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("# hand-made\nkernels:\n  - {name: k, gpu: X, flop: {fp99: 1}}\n")
    with pytest.raises(InputError, match=r"bad.yaml: kernels\[0\]: flop: unknown class 'fp99'"):
        read_what_if(bad)
    bad.write_text("# hand-made\nkernels:\n  - {name: k, flop: {fp32: 1}}\n")
    with pytest.raises(InputError, match="give 'machine'"):
        read_what_if(bad)


def _table(number) -> str:
    """A hand-made what-if table with every numeric field, each written by ``number(value)``."""
    compute = ", ".join(f"{c}: {number(1.0e12 * (i + 1))}" for i, c in enumerate(COMPUTE_CLASSES))
    memory = ", ".join(f"{lv}: {number(2.0e11 * (i + 1))}" for i, lv in enumerate(MEMORY_LEVELS))
    flop = ", ".join(f"{c}: {number(3.0e9 * (i + 1))}" for i, c in enumerate(COMPUTE_CLASSES))
    traffic = ", ".join(f"{lv}: {number(4.0e8 * (i + 1))}" for i, lv in enumerate(MEMORY_LEVELS))
    return (
        "# hand-made what-if table\n"
        f"machines:\n  m: {{compute: {{{compute}}}, memory: {{{memory}}}}}\n"
        "kernels:\n"
        f"  - {{name: k, machine: m, flop: {{{flop}}}, bytes: {{{traffic}}}, duration_s: {number(8.0e-3)},\n"
        f"     algorithmic_flop: {number(2.4e11)}, algorithmic_bytes: {number(2.0e10)}, launches: {number(2.0)}}}\n"
    )


def test_numbers_written_240e9_are_numbers_in_every_field(tmp_path):
    """YAML 1.1 (PyYAML) reads 240e9 and 8e-3 as strings; the table reads them as the numbers they are."""
    assert yaml.safe_load("x: 240e9")["x"] == "240e9"  # the reason for this test
    floats = tmp_path / "floats.yaml"  # YAML 1.1 floats: a dot and a signed exponent
    floats.write_text(_table(lambda v: f"{v:.6e}"))
    plain = read_what_if(floats)
    assert plain["peak_flops_fp32"].iat[0] == 2e12 and plain["launch"].tolist() == [0, 1]
    for style in (lambda v: f"{v:g}".replace("+", ""), lambda v: f"{v:G}", lambda v: f'"{v:g}"'):
        texts = tmp_path / "texts.yaml"  # 1e+12 -> 1e12, 1E+12, "1e+12": all strings to YAML 1.1
        texts.write_text(_table(style))
        pd.testing.assert_frame_equal(read_what_if(texts), plain)
    assert {c for c in plain.columns if not c.endswith("_recipe")} >= {
        *(f"peak_flops_{c}" for c in COMPUTE_CLASSES), *(f"peak_{lv}_bw" for lv in MEMORY_LEVELS),
        *(f"flop_{c}" for c in COMPUTE_CLASSES), *(f"{lv}_bytes" for lv in MEMORY_LEVELS),
        "duration_s", "algorithmic_flop", "algorithmic_bytes",
    }


def test_what_if_csv_numbers_written_240e9(tmp_path):
    path = tmp_path / "whatif.csv"  # hand-made
    path.write_text("kernel,gpu,flop_fp32,dram_bytes,duration_s\nk,NVIDIA A100-SXM4-80GB,240e9,20E9,8e-3\n")
    frame = read_what_if_csv(path)
    assert (frame["flop_fp32"].iat[0], frame["dram_bytes"].iat[0], frame["duration_s"].iat[0]) == (240e9, 20e9, 8e-3)


def test_gzipped_textbook_table_reads_like_the_plain_one(tmp_path):
    path = tmp_path / "textbook.yaml.gz"  # derived from data/examples/textbook.yaml at test time
    path.write_bytes(gzip.compress(TEXTBOOK.read_bytes()))
    pd.testing.assert_frame_equal(read_what_if(path), read_what_if(TEXTBOOK))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kernels:\n  - {name: k, gpu: X, flop: {fp32: 12 apples}}\n",
         r"kernels\[0\]\.flop\.fp32: expected a number in SI base units, got '12 apples'"),
        ("kernels:\n  - {name: k, gpu: X, bytes: {dram: true}}\n", r"kernels\[0\]\.bytes\.dram: expected a number"),
        ("kernels:\n  - {name: k, gpu: X, duration_s: null}\n", r"kernels\[0\]\.duration_s: expected a number"),
        ("kernels:\n  - {name: k, gpu: X, launches: 1.5}\n", r"kernels\[0\]\.launches: expected a whole number >= 1"),
        ("kernels:\n  - {name: k, gpu: X, launches: 0}\n", r"kernels\[0\]\.launches: expected a whole number >= 1"),
        ("kernels:\n  - {gpu: X}\n", r"kernels\[0\]: each kernel needs a 'name'"),
        ("kernels:\n  - just a name\n", r"kernels\[0\]: each kernel needs a 'name'"),
        ("kernels:\n  - {name: k, machine: m}\n", r"kernels\[0\]: machine 'm' is not defined under machines:"),
        ("machines:\n  m: 5\nkernels:\n  - {name: k, machine: m}\n", r"machines\.m: expected a mapping, got 5"),
        ("machines:\n  m: {compute: {fp99: 1.0e+12}}\nkernels: []\n", r"machines\.m: compute: unknown class 'fp99'"),
        ("machines:\n  m: {memory: {hbm: 1.0e+12}}\nkernels: []\n", r"machines\.m: memory: unknown level 'hbm'"),
        ("kernels:\n  - {name: k, gpu: X, bytes: {hbm: 1}}\n", r"kernels\[0\]: bytes: unknown level 'hbm'"),
        ("kernels: []\n", r"the what-if table lists no kernels"),
        ("- a list\n", r"a what-if table needs a 'kernels:' list"),
        ("kernels:\n  - {name: a, gpu: X, flop: {fp32: x}}\n  - {name: b, gpu: X, flop: {fp32: y}}\n",
         r"kernels\[0\]\.flop\.fp32: expected a number.*; kernels\[1\]\.flop\.fp32: expected a number"),
    ],
)
def test_what_if_table_errors_name_the_place(tmp_path, text, message):
    bad = tmp_path / "bad.yaml"  # hand-made
    bad.write_text("# hand-made\n" + text)
    with pytest.raises(InputError, match=rf"^{re.escape(str(bad))}: {message}"):
        read_what_if(bad)


def test_names_written_as_numbers_and_empty_blocks(tmp_path):
    path = tmp_path / "odd.yaml"  # hand-made
    path.write_text("machines:\n  7: {compute: {fp32: 1e12}, memory:}\nkernels:\n  - {name: 42, machine: 7, flop:,"
                    " bytes: {dram: 1e6}, note: [free, text]}\n")
    frame = read_what_if(path)
    assert frame[["kernel", "machine", "dram_bytes", "peak_flops_fp32"]].values.tolist() == [["42", "7", 1e6, 1e12]]
