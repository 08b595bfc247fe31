"""What-if tables: the bundled textbook table and the errors of hand-made bad ones."""

import pytest
from conftest import REPO

from roofline.ncu_rep import InputError
from roofline.what_if import read_what_if

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
