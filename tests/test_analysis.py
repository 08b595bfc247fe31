"""The analysis stage as the workflow runs it: one ceilings job over every app, then one classify
job per app, give the same tables as the whole stage in one process (``roofline.analysis.main``),
on real reports of two GPUs and the bundled what-if table."""

import pytest
from conftest import real_fixture
from pandas.testing import assert_frame_equal
from test_parse import TEXTBOOK

from roofline import analysis, app_job, parse
from roofline.classify import wide_ceilings
from roofline.table_files import read_table

CATALOG = str(parse.__file__).replace("parse.py", "data/gpus.yaml")
APPS = {
    "silu_a100": (lambda: real_fixture("a100sxm-silu-full-ncu2025.1") / "2025-04-21-77_06-MT.ncu-rep", "ncu-rep"),
    "heatsim_gtx1650": (lambda: real_fixture("gtx1650-heatsim-stencil-full-ncu2021.3") / "report_name.ncu-rep",
                        "ncu-rep"),
    "textbook": (lambda: TEXTBOOK, "what-if"),
}


@pytest.fixture(scope="module")
def counters(tmp_path_factory) -> list[str]:
    """Each app's counters table, written by the parse stage."""
    folder = tmp_path_factory.mktemp("counters")
    paths = []
    for app, (source, kind) in APPS.items():
        out = folder / f"{app}.parquet"
        assert parse.main([f"--input={source()}", f"--app={app}", f"--kind={kind}", f"--output={out}",
                           f"--diagnostics={folder / f'{app}.diagnostics.parquet'}"]) == 0
        paths.append(str(out))
    return paths


def test_a_ceilings_job_and_a_classify_job_per_app_equal_the_whole_stage(counters, tmp_path):
    whole, split = tmp_path / "whole", tmp_path / "split"
    for folder in (whole, split):
        folder.mkdir()
    tables = {folder: {kind: [str(folder / f"{app}.{kind}.parquet") for app in APPS]
                       for kind in ("classified", "kernels")} for folder in (whole, split)}
    common = ["--catalog", CATALOG]
    assert analysis.main(["--counters", *counters, *common, f"--ceilings={whole / 'ceilings.parquet'}",
                          f"--ceilings-diagnostics={whole / 'diagnostics.parquet'}",
                          "--classified", *tables[whole]["classified"], "--kernels", *tables[whole]["kernels"]]) == 0
    assert analysis.ceilings_main(["--counters", *counters, *common, f"--ceilings={split / 'ceilings.parquet'}",
                                   f"--ceilings-diagnostics={split / 'diagnostics.parquet'}"]) == 0
    for i, path in enumerate(counters):
        assert analysis.classify_main([f"--counters={path}", f"--ceilings={split / 'ceilings.parquet'}",
                                       f"--classified={tables[split]['classified'][i]}",
                                       f"--kernels={tables[split]['kernels'][i]}"]) == 0
    assert (whole / "ceilings.parquet").read_bytes() == (split / "ceilings.parquet").read_bytes()
    for kind in ("classified", "kernels"):
        for mine, theirs in zip(tables[split][kind], tables[whole][kind]):
            assert_frame_equal(read_table(mine, kind), read_table(theirs, kind))
    kernels = read_table(tables[split]["kernels"][0], "kernels")
    assert len(kernels) and set(kernels["app"]) == {"silu_a100"} and kernels["bound"].notna().all()


def test_the_ceilings_table_is_byte_identical_when_no_roof_moves(counters, tmp_path):
    """What lets the workflow's checkpoint rerun one app only: the same counters give the same bytes."""
    for name in ("a", "b"):
        assert analysis.ceilings_main(["--counters", *counters, "--catalog", CATALOG,
                                       f"--ceilings={tmp_path / name}.parquet",
                                       f"--ceilings-diagnostics={tmp_path / name}.diagnostics.parquet"]) == 0
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()


def test_classify_wants_one_output_of_each_kind_per_app(counters, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        analysis.classify_main(["--counters", *counters[:2], f"--ceilings={tmp_path / 'c.parquet'}", "--classified",
                                str(tmp_path / "one.parquet"), "--kernels", str(tmp_path / "k.parquet")])
    assert exit_.value.code == 2
    assert "one --classified and one --kernels path per --counters table" in capsys.readouterr().err


def test_an_app_job_classifies_and_writes_the_page_as_the_two_stages_do(counters, tmp_path):
    """The workflow's per-app job (``python -m roofline.jobs app``): the same tables as a classify
    job, the same page as a page job (roofline.app_job.page_main) given those tables."""

    ceilings, path = tmp_path / "ceilings.parquet", counters[0]
    assert analysis.ceilings_main(["--counters", *counters, "--catalog", CATALOG, f"--ceilings={ceilings}",
                                   f"--ceilings-diagnostics={tmp_path / 'd.parquet'}"]) == 0
    one = {kind: tmp_path / f"one.{kind}.parquet" for kind in ("classified", "kernels")}
    assert app_job.main(["--app=silu_a100", f"--counters={path}", f"--ceilings={ceilings}",
                         f"--classified={one['classified']}", f"--kernels={one['kernels']}",
                         f"--page={tmp_path / 'reports' / 'apps' / 'silu_a100.html'}", "--title=T",
                         f"--summary={tmp_path / 'reports' / 'summary.html'}"]) == 0
    two = {kind: tmp_path / f"two.{kind}.parquet" for kind in ("classified", "kernels")}
    assert analysis.classify_main([f"--counters={path}", f"--ceilings={ceilings}",
                                   f"--classified={two['classified']}", f"--kernels={two['kernels']}"]) == 0
    for kind in one:
        assert_frame_equal(read_table(one[kind], kind), read_table(two[kind], kind))
    assert app_job.page_main(["--app=silu_a100", f"--kernels={two['kernels']}", f"--ceilings={ceilings}",
                             f"--output={tmp_path / 'reports' / 'apps' / 'again.html'}", "--title=T",
                             f"--summary={tmp_path / 'reports' / 'summary.html'}"]) == 0
    page = (tmp_path / "reports" / "apps" / "silu_a100.html").read_text()
    assert page == (tmp_path / "reports" / "apps" / "again.html").read_text() and "silu" in page


def test_a_launches_table_that_cannot_be_written_fails_the_app_and_writes_no_kernels(counters, tmp_path):
    """The classified table is written beside the kernels' sums (roofline.analysis.classify_app): its
    failure still ends the app, with the write's own error, before the kernels table is written."""
    ceilings = tmp_path / "ceilings.parquet"
    assert analysis.ceilings_main(["--counters", counters[0], "--catalog", CATALOG, f"--ceilings={ceilings}",
                                   f"--ceilings-diagnostics={tmp_path / 'd.parquet'}"]) == 0
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the classified table's folder should be\n")
    kernels = tmp_path / "kernels.parquet"
    with pytest.raises(OSError) as raised:
        analysis.classify_app((counters[0], str(blocked / "a.parquet"), str(kernels)),
                              wide_ceilings(read_table(ceilings, "ceilings")), [], {})
    assert str(blocked) in str(raised.value)
    assert not kernels.exists()
