"""The ``roofline`` command on the bundled what-if example and on a real report."""

from pathlib import Path

import pytest
from conftest import REPO, real_fixture

from roofline import cli

TEXTBOOK = REPO / "data" / "examples" / "textbook.yaml"


@pytest.fixture(autouse=True)
def _needs_catalog():
    if not cli.DEFAULT_CATALOG.exists():
        pytest.skip(f"GPU catalog {cli.DEFAULT_CATALOG} not found")


def test_show_textbook(capsys):
    assert cli.main(["show", str(TEXTBOOK)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["kernel", "app", "device", "bound", "%", "roof", "time", "share", "AI", "[FLOP/B]",
                              "performance"]
    body = "\n".join(out[2:])
    assert "seed_normalization" in body and "83.3 %" in body and "12 (dram)" in body
    assert "120 TFLOP/s predicted" in body  # what-if kernel without duration
    assert out[2].startswith("seed_normalization")  # highest priority first


def test_show_real_report(capsys):
    report = next(real_fixture("a100sxm-silu-full-ncu2025.1").glob("*.ncu-rep"))
    assert cli.main(["show", str(report)]) == 0
    out = capsys.readouterr().out
    assert "silu_kernel" in out and "NVIDIA A100-SXM4-40GB" in out and "memory:dram" in out


def test_bad_file_is_reported_and_others_still_shown(capsys, tmp_path):
    bad = tmp_path / "broken.ncu-rep"
    bad.write_bytes(b"not a report")
    code = cli.main(["show", str(bad), str(TEXTBOOK), str(tmp_path / "missing.csv")])
    captured = capsys.readouterr()
    assert code == 1
    errors = [line for line in captured.err.splitlines() if line.startswith("roofline: ")]
    assert len(errors) == 2
    assert str(bad) in errors[0] and "missing.csv" in errors[1]
    assert "seed_normalization" in captured.out


def test_report_writes_summary_and_app_pages(tmp_path):
    out = tmp_path / "reports" / "summary.html"
    assert cli.main(["report", str(TEXTBOOK), "-o", str(out), "--title", "Textbook"]) == 0
    page = out.read_text()
    assert "<title>Textbook</title>" in page and "seed_a100_fp16_gemm" in page
    assert (tmp_path / "reports" / "apps" / "textbook.html").exists()


def test_app_names_unique():
    taken: set[str] = set()
    names = []
    for path in ["a/profile.ncu-rep", "b/profile.ncu-rep", "c/x.yaml"]:
        names.append(cli.app_name(Path(path), taken))
        taken.add(names[-1])
    assert names == ["profile", "profile-2", "x"]


def test_app_names_are_the_workflows(tmp_path, capsys):
    """Any file name gives the app name the workflow gives it (roofline.inputs.app_name); a file of no
    known type gets the workflow's message, and the report names each app's original file."""
    odd = tmp_path / "my run (1).yaml"
    odd.write_bytes(TEXTBOOK.read_bytes())
    notes = tmp_path / "notes.txt"
    notes.write_text("hand-made notes\n")
    assert cli.app_names([str(odd), "a/ünï.csv.gz", "b/ünï.csv"]) == ["my_run_1", "uni", "uni-2"]
    out = tmp_path / "reports" / "summary.html"
    assert cli.main(["report", str(odd), str(notes), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"roofline: {notes}: unknown file type '.txt'" in err and "rename it" in err
    assert "(my run (1).yaml)" in out.read_text()
    assert f"input: <code>{odd}</code>" in (tmp_path / "reports" / "apps" / "my_run_1.html").read_text()
