"""roofline.ceilings.report_peaks: the report's ceilings from samples of the launches, the same whether one
frame or many files read a batch at a time, checked against medians taken by hand."""

import numpy as np
import pandas as pd
import pytest
from conftest import real_reports

from roofline.ceilings import report_peaks
from roofline.ceilings.report_peaks import read_peak_inputs, report_ceilings
from roofline.ceilings.select import device_ceilings
from roofline.tables.files import write_table
from roofline.tables.schemas import TABLES, conform

CATALOG = report_peaks.__file__.replace("ceilings/report_peaks.py", "data/gpus.yaml")


def _launches(app: str, device: str, fp32: list[float], clocks: list[float], durations: list[float],
              first_launch: int = 0) -> pd.DataFrame:
    """Hand-made counters rows: one per launch, an FP32 peak, its SM clock and duration."""
    n = len(fp32)
    return conform(pd.DataFrame({
        "app": app, "device": device, "launch": range(first_launch, first_launch + n), "source_format": "ncu-rep",
        "duration_s": durations, "peak_flops_fp32": fp32, "peak_flops_fp32_recipe": f"recipe-of-{app}",
        "sm_clock_hz": clocks, "peak_dram_bw": [1.5e12] * n, "peak_dram_bw_recipe": "dram-recipe",
        "dram_clock_hz": 1.2e9,
    }), "counters")


LONG, SHORT = 1e-3, 1e-6
APPS = [  # device G: 11 long launches over three apps (one clock missing), 2 short ones; device H: short only
    _launches("a", "G", [10e12, 10e12, 12e12, 99e12], [1.4e9, 1.4e9, 1.5e9, 1.9e9], [LONG, LONG, LONG, SHORT]),
    _launches("b", "G", [10e12, 11e12, 11e12, 13e12, 50e12], [1.4e9, 1.45e9, np.nan, 1.6e9, 1.8e9],
              [LONG, LONG, LONG, LONG, SHORT], first_launch=10),
    _launches("c", "G", [12e12, 12e12, 9e12, 10e12], [1.5e9] * 4, [LONG] * 4, first_launch=20),
    _launches("d", "H", [5e12, 7e12], [1e9, 1.1e9], [SHORT, np.nan]),
]


def test_the_launches_clock_by_hand():
    """Per device: the median SM clock of its long launches (G: 1.4, 1.4, 1.5, 1.4, 1.45, 1.6, 1.5 x 4
    GHz, the missing reading left out, the short launches' 1.9 and 1.8 too), of all launches where
    none is long (H: 1.0 and 1.1 GHz)."""
    clocks = report_peaks.launch_clocks(report_peaks.peak_samples(pd.concat(APPS, ignore_index=True)))
    assert clocks.to_dict() == {"G": pytest.approx(1.5e9), "H": pytest.approx(1.05e9)}


def test_the_median_of_the_long_launches_by_hand():
    table = report_ceilings(pd.concat(APPS, ignore_index=True)).set_index(["device", "name"])
    long_fp32 = [10e12, 10e12, 12e12, 10e12, 11e12, 11e12, 13e12, 12e12, 12e12, 9e12, 10e12]
    g = table.loc[("G", "fp32")]
    assert g["value"] == sorted(long_fp32)[5] == 11e12  # 11 long launches: the 6th; the short 99 and 50 left out
    assert g["launches"] == 11 and g["spread"] == pytest.approx(13 / 9)
    assert np.isnan(g["clock_hz"])  # one long launch of b has no clock reading
    assert g["citation"] == "median of 11 launches [a:0,1,2; b:10,11,12,13; c:20…] (recipe-of-a)"
    h = table.loc[("H", "fp32")]
    assert h["value"] == 6e12 and h["clock_hz"] == pytest.approx(1.05e9)  # even count: the mean of the middle two
    assert h["citation"] == "median of 2 launches [0,1] (recipe-of-d); only launches under 20 us, whose clock " \
                            "readings run low"
    assert table.loc[("G", "dram"), "value"] == 1.5e12 and table.loc[("G", "dram"), "clock_hz"] == 1.2e9


@pytest.mark.parametrize("batch", [1, 2, 50])
def test_files_read_a_batch_at_a_time_give_the_frames_ceilings(tmp_path, batch):
    """The files' samples merge across batches: counts, the first launches in input order, the recipe."""
    paths = []
    for i, frame in enumerate(APPS):
        paths.append(str(tmp_path / f"{i}.parquet"))
        write_table(frame, "counters", paths[-1])
    whole = report_ceilings(pd.concat(APPS, ignore_index=True))
    inputs = read_peak_inputs(paths, batch=batch)
    pd.testing.assert_frame_equal(report_peaks.ceilings_from_samples(inputs.samples), whole)
    assert inputs.devices == ["G", "H"] and inputs.what_if.empty


def test_real_reports_give_the_same_ceilings_file_by_file_as_in_one_frame(tmp_path):
    """On the real reports (../shared/fixtures/real): one device's launches split over several
    files, read one file per batch, give the ceilings of the frame of all of them."""
    from roofline.parse.counters import parse_input

    reports = real_reports()
    if not reports:
        pytest.skip("../shared/fixtures/real is absent")
    frames, paths = [], []
    for i, report in enumerate(reports):
        counters = parse_input(report, f"app{i}", "ncu-rep")
        frames.append(counters)
        paths.append(str(tmp_path / f"app{i}.parquet"))
        write_table(counters, "counters", paths[-1])
    whole = report_ceilings(pd.concat(frames, ignore_index=True))
    assert (whole["source"] == "report").sum() > 50  # the reports' own peaks, many devices and classes
    read = report_peaks.ceilings_from_samples(read_peak_inputs(paths, batch=1).samples)
    pd.testing.assert_frame_equal(read, whole)
    ceilings = device_ceilings(paths, CATALOG, ["report", "datasheet"]).ceilings
    from_report = ceilings[ceilings["source"] == "report"].reset_index(drop=True)
    pd.testing.assert_frame_equal(from_report.drop(columns="selected"), whole.drop(columns="selected"))


def _peaks_files(tmp_path, frames: list[pd.DataFrame]) -> list[str]:
    """Each frame written as its parse job writes it: a counters table holding its peaks table."""
    paths = []
    for i, frame in enumerate(frames):
        paths.append(str(tmp_path / f"peaks{i}.parquet"))
        write_table(frame, "counters", paths[-1], metadata=report_peaks.peaks_metadata(frame))
    return paths


def test_the_apps_peaks_tables_give_the_frames_ceilings(tmp_path):
    """What each app's parse job writes (a few rows) gives the ceilings of all the launches: the
    medians, spreads, clocks and the first launches cited across apps, in input order."""
    big = _launches("big", "G", [10e12] * 2000, [1.4e9] * 2000, [LONG] * 2000)
    # per ceiling (FP32, DRAM, the SM clock): one sample (one value and clock), 8 first launches
    peaks = report_peaks.app_peaks(big)
    assert peaks["part"].value_counts().to_dict() == {"first": 24, "sample": 3, "device": 1, "measured": 1}
    assert peaks.loc[peaks["part"] == "sample", "count"].tolist() == [2000, 2000, 2000]
    paths = _peaks_files(tmp_path, APPS)
    inputs = report_peaks.read_peaks(paths)
    whole = report_ceilings(pd.concat(APPS, ignore_index=True))
    pd.testing.assert_frame_equal(report_peaks.ceilings_from_samples(inputs.samples), whole)
    assert inputs.devices == ["G", "H"] and inputs.what_if.empty
    from roofline.tables.files import read_table

    pd.testing.assert_frame_equal(read_table(paths[0], "counters"), APPS[0])  # still the counters table


def test_files_without_stored_peaks_are_read_from_their_launches(tmp_path, monkeypatch):
    """A counters table written by other means (no peaks in its metadata) is read from its launches:
    the same ceilings; the stored peaks are what the workflow's ceilings job reads instead."""
    stored = _peaks_files(tmp_path, APPS)
    plain = str(tmp_path / "plain.parquet")
    write_table(APPS[1], "counters", plain)
    mixed = [stored[0], plain, stored[2], stored[3]]
    whole = report_ceilings(pd.concat(APPS, ignore_index=True))
    pd.testing.assert_frame_equal(report_peaks.ceilings_from_samples(report_peaks.read_peaks(mixed).samples), whole)
    read = []
    monkeypatch.setattr(report_peaks, "read_peak_inputs", lambda paths, **_: read.append(paths))
    report_peaks.read_peaks(stored)
    assert read == []  # every file held its peaks: no launch was read


def _machine(app: str, device: str, fp32: float) -> pd.DataFrame:
    """A hand-made what-if machine's rows: two kernels, an explicit FP32 peak, a DRAM peak on the first."""
    return conform(pd.DataFrame({
        "app": app, "device": device, "launch": [0, 1], "source_format": "what-if", "duration_s": np.nan,
        "peak_flops_fp32": [fp32, fp32 * 2], "peak_flops_fp32_recipe": "what-if",
        "peak_dram_bw": [2e12, np.nan], "peak_dram_bw_recipe": ["what-if", ""],
    }), "counters")


def test_what_if_machines_and_their_conflicts_survive_the_peaks_tables(tmp_path):
    """Two apps define machine M with different FP32 peaks: the first app's first row wins, and the
    conflict is reported, as from the apps' whole counters tables (and a launch on an unnamed device)."""
    frames = [_machine("m1", "M", 10e12), _machine("m2", "M", 30e12), *APPS[:2],
              _launches("e", "", [1e12], [1e9], [LONG])]
    counter_paths = []
    for i, frame in enumerate(frames):
        counter_paths.append(str(tmp_path / f"counters{i}.parquet"))
        write_table(frame, "counters", counter_paths[-1])
    from_counters = device_ceilings(counter_paths, CATALOG, ["report", "datasheet"])
    from_peaks = device_ceilings(_peaks_files(tmp_path, frames), CATALOG, ["report", "datasheet"])
    for left, right in zip(from_counters[:2], from_peaks[:2], strict=True):
        pd.testing.assert_frame_equal(left, right)
    assert from_counters.app_devices == from_peaks.app_devices
    ceilings, diagnostics, _ = from_peaks
    machine = ceilings[(ceilings["device"] == "M") & ceilings["selected"]].set_index("name")["value"]
    assert machine["fp32"] == 10e12 and machine["dram"] == 2e12  # m1's first row
    messages = " | ".join(diagnostics["message"])
    assert "M: what-if machine defined with different fp32 peaks (m1 10 TFLOP/s, m2 30 TFLOP/s)" in messages


def test_a_refused_or_empty_input_has_no_peaks(tmp_path):
    from roofline.config.inputs import write_refusal

    empty = report_peaks.app_peaks(conform(pd.DataFrame(), "counters"))
    assert empty.empty and list(empty.columns) == [c.name for c in TABLES["peaks"]]
    refused = tmp_path / "refused.parquet"  # as the parse job writes an input it refuses: no metadata
    write_refusal("x", "in/x.csv", "unreadable", refused, tmp_path / "d.parquet")
    paths = [*_peaks_files(tmp_path, [conform(pd.DataFrame(), "counters"), APPS[3]]), str(refused)]
    assert report_peaks.read_peaks(paths).devices == ["H"]


def test_the_parse_stage_stores_the_peaks_in_the_counters_file(tmp_path):
    import pyarrow.parquet as pq

    from roofline.stages.parse import main

    source = report_peaks.__file__.replace("roofline/ceilings/report_peaks.py", "data/examples/textbook.yaml")
    out = tmp_path / "counters.parquet"
    assert main(["--input", source, "--app", "textbook", "--kind", "what-if", "--output", str(out),
                 "--diagnostics", str(tmp_path / "d.parquet")]) == 0
    assert report_peaks.PEAKS_KEY.encode() in pq.read_metadata(out).metadata
    from roofline.tables.files import read_table

    plain = tmp_path / "plain.parquet"  # the same table without the stored peaks: read from its launches
    write_table(read_table(out, "counters"), "counters", plain)
    from_file = report_peaks.read_peaks([str(out)])
    from_launches = report_peaks.read_peaks([str(plain)])
    assert from_file.devices == from_launches.devices and len(from_file.devices) >= 5
    stored = device_ceilings([str(out)], CATALOG, ["report", "datasheet"])
    from_plain = device_ceilings([str(plain)], CATALOG, ["report", "datasheet"])
    for left, right in zip(stored[:2], from_plain[:2], strict=True):
        pd.testing.assert_frame_equal(left, right)
    assert stored.app_devices == from_plain.app_devices
    what_if = device_ceilings([str(out)], CATALOG, ["report", "datasheet"])[0]
    assert (what_if["source"] == "what-if").sum() >= 5


def test_real_reports_peaks_tables_give_their_ceilings(tmp_path):
    """On the real reports, one peaks table per report gives the ceilings of all their launches."""
    from roofline.ceilings.select import build_ceilings
    from roofline.parse.counters import parse_input

    reports = real_reports()
    if not reports:
        pytest.skip("../shared/fixtures/real is absent")
    frames = [parse_input(report, f"app{i}", "ncu-rep") for i, report in enumerate(reports)]
    whole = build_ceilings(pd.concat(frames, ignore_index=True), CATALOG, ["report", "datasheet"])
    ceilings = device_ceilings(_peaks_files(tmp_path, frames), CATALOG, ["report", "datasheet"]).ceilings
    assert (ceilings["source"] == "report").sum() > 50
    pd.testing.assert_frame_equal(ceilings, whole)


def test_the_samples_of_every_ceiling_counted_by_hand():
    frame = pd.concat(APPS, ignore_index=True)
    samples = report_peaks.peak_samples(frame)
    orders = {column: order for order, (column, _) in enumerate(report_peaks.PEAK_COLUMNS.values())}
    fp32, dram, clock = orders["peak_flops_fp32"], orders["peak_dram_bw"], report_peaks.SM_CLOCK_ORDER
    counts = samples.counts
    assert counts["ceiling"].is_monotonic_increasing and set(counts["ceiling"]) == {fp32, dram, clock}

    def count(ceiling, device, long, value, clock):
        same_clock = counts["clock"].isna() if np.isnan(clock) else counts["clock"] == clock
        row = counts[(counts["ceiling"] == ceiling) & (counts["device"] == device) & (counts["long"] == long)
                     & (counts["value"] == value) & same_clock]
        assert len(row) == 1  # a sample is one row
        return int(row["count"].iat[0])

    assert count(fp32, "G", True, 10e12, 1.4e9) == 3  # a's launches 0 and 1, b's 10
    assert count(fp32, "G", True, 11e12, np.nan) == 1  # the missing clock is a sample of its own
    assert count(fp32, "G", False, 99e12, 1.9e9) == 1
    assert count(fp32, "H", False, 7e12, 1.1e9) == 1  # no duration: not a long launch
    assert count(dram, "G", True, 1.5e12, 1.2e9) == 11 and count(dram, "G", False, 1.5e12, 1.2e9) == 2
    assert count(dram, "H", False, 1.5e12, 1.2e9) == 2
    assert count(clock, "G", True, 1.4e9, 1.4e9) == 3  # the SM clock of every launch with a reading
    assert count(clock, "G", True, 1.5e9, 1.5e9) == 5 and count(clock, "H", False, 1.1e9, 1.1e9) == 1
    assert counts["count"].sum() == 2 * 15 + 14  # every launch once per ceiling it has, and per clock reading
    heads = samples.heads
    first = heads[(heads["ceiling"] == fp32) & (heads["device"] == "G") & heads["long"]]
    assert first["launch"].tolist() == [0, 1, 2, 10, 11, 12, 13, 20]  # input order, LISTED_LAUNCHES of them
    assert first["recipe"].tolist() == ["recipe-of-a"] * 3 + ["recipe-of-b"] * 4 + ["recipe-of-c"]
    later = report_peaks.peak_samples(frame, first_position=100).heads
    assert (later["position"] - heads["position"]).eq(100).all()


def _same_inputs(left: report_peaks.PeakInputs, right: report_peaks.PeakInputs) -> None:
    pd.testing.assert_frame_equal(report_peaks.ceilings_from_samples(left.samples),
                                  report_peaks.ceilings_from_samples(right.samples))
    pd.testing.assert_frame_equal(left.what_if, right.what_if)
    assert left.devices == right.devices


def test_kept_peaks_read_the_footers_of_changed_files_only_and_equal_a_fresh_read(tmp_path, monkeypatch):
    """The ceilings job of a rerun (--keep-joined) reads the footers of the counters files that
    changed since it last ran; its inputs equal a fresh read's, through a file replaced, emptied,
    refused or written without stored peaks (then every file is read from its launches)."""
    from roofline.config.inputs import write_refusal

    frames = [*APPS, _machine("m1", "M", 10e12), conform(pd.DataFrame(), "counters")]
    paths = _peaks_files(tmp_path, frames)
    refused = str(tmp_path / "refused.parquet")
    write_refusal("x", "in/x.csv", "unreadable", refused, tmp_path / "d.parquet")
    paths.append(refused)
    keep = tmp_path / "kept"
    read = []
    stored_peaks = report_peaks._stored_peaks
    monkeypatch.setattr(report_peaks, "_stored_peaks", lambda path: read.append(path) or stored_peaks(path))
    _same_inputs(report_peaks.read_peaks(paths, keep), report_peaks.read_peaks(paths))
    read.clear()
    _same_inputs(report_peaks.read_peaks(paths, keep), report_peaks.read_peaks(paths))
    assert read == paths  # the fresh read only: the kept call read no footer
    before = report_peaks.ceilings_from_samples(report_peaks.read_peaks(paths).samples)
    read.clear()
    faster = _launches("a", "G", [20e12] * 3, [1.5e9] * 3, [LONG] * 3)  # app a now on a faster clock
    write_table(faster, "counters", paths[0], metadata=report_peaks.peaks_metadata(faster))
    kept = report_peaks.read_peaks(paths, keep)
    assert read == [paths[0]]
    _same_inputs(kept, report_peaks.read_peaks(paths))
    assert not report_peaks.ceilings_from_samples(kept.samples).equals(before)  # the change reached the ceilings
    write_table(APPS[1], "counters", paths[1])  # written by other means: no stored peaks
    _same_inputs(report_peaks.read_peaks(paths, keep), report_peaks.read_peaks(paths))
    write_table(conform(pd.DataFrame(), "counters"), "counters", paths[1])  # emptied
    _same_inputs(report_peaks.read_peaks(paths, keep), report_peaks.read_peaks(paths))


def test_kept_peaks_of_the_real_reports_give_the_ceilings_of_all_their_launches(tmp_path):
    """On the real reports (every precision and tensor path they carry): the ceilings job's kept
    peaks, before and after one report's counters are replaced by another's, give the report
    ceilings computed from the whole frame of launches (not through the stored peaks)."""
    from roofline.parse.counters import parse_input

    reports = real_reports()
    if not reports:
        pytest.skip("../shared/fixtures/real is absent")
    frames = [parse_input(report, f"app{i}", "ncu-rep") for i, report in enumerate(reports)]
    paths = _peaks_files(tmp_path, frames)
    keep = tmp_path / "kept"

    def from_kept() -> pd.DataFrame:
        ceilings = device_ceilings(paths, CATALOG, ["report", "datasheet"], keep_joined=keep).ceilings
        return ceilings[ceilings["source"] == "report"].drop(columns="selected").reset_index(drop=True)

    whole = report_ceilings(pd.concat(frames, ignore_index=True)).drop(columns="selected")
    assert {"fp16", "fp64"} <= set(whole["name"]) and whole["name"].str.startswith("tensor").any()
    pd.testing.assert_frame_equal(from_kept(), whole)
    frames[0] = frames[-1].assign(app="app0")  # the first app now holds the last report's launches
    write_table(frames[0], "counters", paths[0], metadata=report_peaks.peaks_metadata(frames[0]))
    whole = report_ceilings(pd.concat(frames, ignore_index=True)).drop(columns="selected")
    pd.testing.assert_frame_equal(from_kept(), whole)


def test_a_citation_of_several_apps_names_each_launchs_app():
    """Two apps on one GPU, each with its launch 2: the citation names app and launch ("x:2; y:2"),
    not "2,2"; through the peaks tables the workflow writes per app, as from one frame."""
    apps = [_launches(app, "G", [10e12, 11e12], [1.4e9, 1.4e9], [LONG, LONG], first_launch=1) for app in "xy"]
    joined = report_ceilings(pd.concat(apps, ignore_index=True)).set_index(["device", "name"])
    assert joined.loc[("G", "fp32"), "citation"] == "median of 4 launches [x:1,2; y:1,2] (recipe-of-x)"
    per_app = report_peaks.ceilings_from_samples(report_peaks.peak_inputs(
        [report_peaks.app_peaks(a) for a in apps]).samples).set_index(["device", "name"])
    assert per_app.loc[("G", "fp32"), "citation"] == joined.loc[("G", "fp32"), "citation"]
    one = report_ceilings(apps[0]).set_index(["device", "name"])
    assert one.loc[("G", "fp32"), "citation"] == "median of 2 launches [1,2] (recipe-of-x)"
