"""The per-app stages as the workflow runs them (one ceilings job over every app, then one
classify_app job per app) give the tables :func:`roofline.api.analyse` gives for the same inputs in
one process, on real reports of two GPUs and the bundled what-if table."""

import pandas as pd
import pytest
from conftest import real_fixture
from pandas.testing import assert_frame_equal
from parse.test_counters import TEXTBOOK

from roofline import api
from roofline.ceilings.catalog import CATALOG_PATH
from roofline.ceilings.report_peaks import peaks_metadata
from roofline.classify.launches import wide_ceilings
from roofline.files.atomic import file_identity
from roofline.stages import ceilings as ceilings_stage
from roofline.stages import classify_app
from roofline.stages import parse as parse_stage
from roofline.tables.files import read_table, write_table

CATALOG = str(CATALOG_PATH)
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
        assert parse_stage.main([f"--input={source()}", f"--app={app}", f"--kind={kind}", f"--output={out}",
                           f"--diagnostics={folder / f'{app}.diagnostics.parquet'}"]) == 0
        paths.append(str(out))
    return paths


def _ceilings(counters: list[str], folder) -> str:
    path = folder / "ceilings.parquet"
    assert ceilings_stage.main(["--counters", *counters, "--catalog", CATALOG, f"--ceilings={path}",
                                f"--ceilings-diagnostics={folder / 'ceilings.diagnostics.parquet'}",
                                f"--app-ceilings={folder / 'apps'}"]) == 0
    return str(path)


def _classify(app: str, counters: str, ceilings: str, folder) -> dict[str, str]:
    out = {kind: str(folder / f"{app}.{kind}.parquet") for kind in ("classified", "kernels")}
    assert classify_app.main([f"--app={app}", f"--counters={counters}", f"--ceilings={ceilings}",
                              f"--classified={out['classified']}", f"--kernels={out['kernels']}",
                              f"--page={folder / 'reports' / 'apps' / f'{app}.html'}", "--title=T"]) == 0
    return out


def test_the_stage_jobs_give_the_tables_of_one_analysis(counters, tmp_path):
    """The oracle is the API's one-process analysis of the same counters: the ceilings, each app's
    kernels and its classified launches are the same rows, each app classified (as the workflow
    does) against its own share of the ceilings, the rows of its devices."""
    ceilings = _ceilings(counters, tmp_path)
    oracle = api.analyse([read_table(path, "counters") for path in counters], CATALOG, errors="raise")
    assert_frame_equal(read_table(ceilings, "ceilings"), oracle.ceilings.reset_index(drop=True))
    launches = []
    for app, path in zip(APPS, counters):
        share = tmp_path / "apps" / f"{app}.parquet"
        devices = set(read_table(path, "counters")["device"])
        whole = read_table(ceilings, "ceilings")
        assert_frame_equal(read_table(share, "ceilings"),
                           whole[whole["device"].isin(devices)].reset_index(drop=True))
        assert 0 < len(read_table(share, "ceilings")) < len(whole)
        tables = _classify(app, path, str(share), tmp_path)
        kernels = read_table(tables["kernels"], "kernels")
        expected = oracle.kernels[oracle.kernels["app"] == app].reset_index(drop=True)
        assert len(kernels) and set(kernels["app"]) == {app}
        assert_frame_equal(kernels, expected)
        launches.append(read_table(tables["classified"], "classified"))
    assert_frame_equal(pd.concat(launches, ignore_index=True), oracle.launches.reset_index(drop=True))
    assert read_table(_classify("silu_a100", counters[0], ceilings, tmp_path / "x")["kernels"],
                      "kernels")["bound"].notna().all()


def test_the_ceilings_table_is_byte_identical_when_no_roof_moves(counters, tmp_path):
    """What lets the workflow's checkpoint rerun one app only: the same counters give the same bytes."""
    for name in ("a", "b"):
        assert ceilings_stage.main(["--counters", *counters, "--catalog", CATALOG,
                                       f"--ceilings={tmp_path / name}.parquet",
                                       f"--ceilings-diagnostics={tmp_path / name}.diagnostics.parquet",
                                       f"--app-ceilings={tmp_path / name}"]) == 0
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    for app in APPS:
        assert (tmp_path / "a" / f"{app}.parquet").read_bytes() == (tmp_path / "b" / f"{app}.parquet").read_bytes()


def test_a_moved_roof_rewrites_the_shares_of_that_devices_apps_only(counters, tmp_path):
    """The A100 app's report replaced by one whose clocks read 10 % higher moves the A100 roofs: the
    A100 app's share of the ceilings is rewritten with the new rows; the GTX 1650 and what-if apps'
    shares are left as they were, not even rewritten (the workflow judges by dates, so it classifies
    only the apps of the device whose roof moved)."""
    faster = tmp_path / "silu_a100.parquet"
    frame = read_table(counters[0], "counters")
    clocks = [c for c in frame.columns if c.endswith("clock_hz")]
    assert clocks
    frame[clocks] = frame[clocks] * 1.1
    write_table(frame, "counters", faster, metadata=peaks_metadata(frame))
    shares, identity = tmp_path / "apps", {}
    for name, first in (("before", counters[0]), ("after", str(faster))):
        assert ceilings_stage.main(["--counters", first, *counters[1:], "--catalog", CATALOG,
                                    f"--ceilings={tmp_path / name}.parquet",
                                    f"--ceilings-diagnostics={tmp_path / name}.diagnostics.parquet",
                                    f"--app-ceilings={shares}"]) == 0
        identity[name] = {app: file_identity(shares / f"{app}.parquet") for app in APPS}
    assert {app for app in APPS if identity["before"][app] != identity["after"][app]} == {"silu_a100"}
    after = read_table(tmp_path / "after.parquet", "ceilings")
    devices = set(frame["device"])
    assert_frame_equal(read_table(shares / "silu_a100.parquet", "ceilings"),
                       after[after["device"].isin(devices)].reset_index(drop=True))


def test_a_launches_table_that_cannot_be_written_fails_the_app_and_writes_no_kernels(counters, tmp_path):
    """The classified table is written beside the kernels' sums (roofline.stages.classify_app.classify_app): its
    failure still ends the app, with the write's own error, before the kernels table is written."""
    ceilings = tmp_path / "ceilings.parquet"
    assert ceilings_stage.main(["--counters", counters[0], "--catalog", CATALOG, f"--ceilings={ceilings}",
                                   f"--ceilings-diagnostics={tmp_path / 'd.parquet'}"]) == 0
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the classified table's folder should be\n")
    kernels = tmp_path / "kernels.parquet"
    with pytest.raises(OSError) as raised:
        classify_app.classify_app((counters[0], str(blocked / "a.parquet"), str(kernels)),
                              wide_ceilings(read_table(ceilings, "ceilings")), [], {})
    assert str(blocked) in str(raised.value)
    assert not kernels.exists()


def test_counters_of_an_app_named_otherwise_than_its_file_are_refused(counters, tmp_path):
    """Each app's share is named after its counters file and holds the devices of the app its rows
    name: where the two disagree the share would hold no roof, so the job says so instead."""
    renamed = tmp_path / "other_name.parquet"
    renamed.write_bytes(open(counters[0], "rb").read())
    with pytest.raises(ValueError, match="silu_a100.*data/counters/APP.parquet"):
        ceilings_stage.main(["--counters", str(renamed), *counters[1:], "--catalog", CATALOG,
                             f"--ceilings={tmp_path / 'c.parquet'}", f"--ceilings-diagnostics={tmp_path / 'd.parquet'}",
                             f"--app-ceilings={tmp_path / 'apps'}"])
