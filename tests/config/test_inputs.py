"""Inputs: app names from any file name, what a pattern finds, what gave no app (all hand-made)."""

import importlib.util
import os
import random
import re

import pytest

from roofline.config import inputs
from roofline.tables.files import read_table


@pytest.mark.parametrize("path, name", [
    ("inputs/gemm.ncu-rep", "gemm"),
    ("my run (1).csv", "my_run_1"),
    ("my run (1) (2).csv", "my_run_1_2"),
    ("report [final].ncu-rep", "report_final"),
    ("ünïcødé.yaml", "unicode"),
    ("Straße Ærø.csv", "Strasse_AEro"),
    ("日本語.csv", "app"),
    ("日本語 v2.csv", "v2"),
    (".hidden.csv", "hidden"),
    ("..yaml", "app"),
    ("...yaml", "app"),
    ("a.b.c.csv", "a.b.c"),  # several dots: valid as it is
    ("a (1).b.csv", "a_1.b"),
    ("run.v2.csv.gz", "run.v2"),
    ("run.yml.zst", "run"),
    ("run.CSV", "run"),
    ("notes.txt", "notes"),  # an unknown type: the stem, like any other file
    ("captures.d", "captures"),  # a folder: as before (its stem)
    ("-rf.csv", "-rf"),  # valid, and never on a shell line (stage arguments are --app=NAME)
    ("$(id); rm -rf ~.csv", "id_rm_-rf"),
    ("x" * 300 + ".csv", "x" * inputs.MAX_NAME),
])
def test_app_name(path, name):
    assert inputs.app_name(path) == name
    assert inputs.is_app_name(name)


def test_valid_names_never_change():
    """Names that were valid before stay the same, so nightly history series keep their app."""
    for stem in ("gemm", "GEMM_v2", "a.b", "x-1", "_private", "a..b"):
        assert inputs.app_name(f"in/{stem}.ncu-rep") == stem


def test_assign_names_is_the_same_in_any_order():
    paths = ["b/gemm.csv", "a/gemm.ncu-rep", "c/gemm-2.yaml", "d/gemm.yaml", "e/my run.csv", "f/my_run.csv"]
    expected = {"a/gemm.ncu-rep": "gemm", "b/gemm.csv": "gemm-3", "c/gemm-2.yaml": "gemm-2",
                "d/gemm.yaml": "gemm-4", "e/my run.csv": "my_run", "f/my_run.csv": "my_run-2"}
    for seed in range(5):
        shuffled = list(paths)
        random.Random(seed).shuffle(shuffled)
        assert inputs.assign_names(shuffled) == expected
    assert inputs.assign_names(["x/gemm.csv"], reserved={"gemm"}) == {"x/gemm.csv": "gemm-2"}


@pytest.mark.parametrize("name, parts", [
    ("run.csv.gz", ("run", ".csv", ".gz")),
    ("a.b.ncu-rep", ("a.b", ".ncu-rep", "")),
    ("x.YML.XZ", ("x", ".yml", ".xz")),  # suffix and compression as listed (lower case)
    ("data.gz", ("data.gz", "", "")),
    (".gz", (".gz", "", "")),
])
def test_split_name(name, parts):
    assert inputs.split_name(name) == parts


def test_file_problems_name_the_file_and_the_fix(tmp_path):
    (tmp_path / "notes.txt").write_text("hand-made")
    (tmp_path / "run.csv.bak").write_text("hand-made")
    (tmp_path / "timeline.nsys-rep").write_text("hand-made")
    (tmp_path / "ok.csv.gz").write_text("hand-made")
    os.symlink("nowhere.ncu-rep", tmp_path / "gone.ncu-rep")
    assert inputs.file_problem("ok.csv.gz", "in/*", tmp_path) == ""
    cases = {
        "notes.txt": r"notes\.txt: unknown file type '\.txt'; accepted are .*narrow the pattern 'in/\*'",
        "run.csv.bak": r"run\.csv\.bak: ends in '\.bak' after '\.csv', which is not read.*rename or recompress",
        "timeline.nsys-rep": r"Nsight Systems report.*ncu --set roofline",
        "gone.ncu-rep": r"gone\.ncu-rep: a link to 'nowhere\.ncu-rep', which does not exist: restore the file",
    }
    for name, message in cases.items():
        assert re.search(message, inputs.file_problem(name, "in/*", tmp_path)), name
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "pipe.csv")
        assert "not a regular file" in inputs.file_problem("pipe.csv", "in/*", tmp_path)


def test_expand_patterns_reports_what_gave_no_app(tmp_path):
    (tmp_path / "in" / "empty").mkdir(parents=True)
    (tmp_path / "in" / "reports").mkdir()
    (tmp_path / "in" / "reports" / "a.ncu-rep").write_text("hand-made")
    (tmp_path / "in" / "exports").mkdir()
    (tmp_path / "in" / "exports" / "a.csv.gz").write_text("hand-made")
    (tmp_path / "in" / "stencil_v1.yaml").write_text("hand-made")
    (tmp_path / "captures").mkdir()
    found, problems = inputs.expand_patterns(
        ["in/*", "captures/*.ncu-rep", "nightly/*.ncu-rep", "in/stencil_v2.yaml", "in/stencil_v1.yaml"], tmp_path)
    assert found == {"in/exports": ("csv-dir", ""), "in/stencil_v1.yaml": ("what-if", "")}
    text = {p.path or p.pattern: f"{p.problem}: {p.fix}" for p in problems}
    assert set(text) == {"in/empty", "in/reports", "captures/*.ncu-rep", "nightly/*.ncu-rep", "in/stencil_v2.yaml"}
    assert "it is empty" in text["in/empty"]
    assert "holds 1 input file(s) (.ncu-rep)" in text["in/reports"] and "'in/reports/*'" in text["in/reports"]
    assert "matches no file" in text["captures/*.ncu-rep"] and "check that it ran" in text["captures/*.ncu-rep"]
    assert "the folder 'nightly' does not exist" in text["nightly/*.ncu-rep"]
    assert "did you mean 'in/stencil_v1.yaml'?" in text["in/stencil_v2.yaml"]


def test_a_workdir_with_glob_characters_is_not_a_pattern(tmp_path):
    work = tmp_path / "run [1]"
    work.mkdir()
    (work / "a.csv").write_text("hand-made")
    assert inputs.expand_patterns(["*.csv"], work)[0] == {"a.csv": ("csv", "")}


def test_write_refusal_writes_an_error_and_no_launch(tmp_path):
    message = "in/notes.txt: unknown file type '.txt'; accepted are ...: rename it"
    inputs.write_refusal("notes", "in/notes.txt", message, tmp_path / "c.parquet", tmp_path / "d.parquet",
                         tmp_path / "logs" / "notes.log")
    assert read_table(tmp_path / "c.parquet", "counters").empty
    diagnostics = read_table(tmp_path / "d.parquet", "diagnostics")
    assert diagnostics[["app", "stage", "severity", "source_file", "message"]].values.tolist() == [
        ["notes", "parse", "error", "in/notes.txt", message]]
    assert message in (tmp_path / "logs" / "notes.log").read_text()


def test_the_compressions_are_those_the_readers_open():
    if importlib.util.find_spec("roofline.files.compressed") is None:
        pytest.skip("roofline/files/compressed.py (the readers' part) is not here yet")
    from roofline.files.compressed import SUFFIXES

    assert set(inputs.COMPRESSIONS) == set(SUFFIXES)

