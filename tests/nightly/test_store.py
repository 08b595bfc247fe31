"""The history store: append, idempotent reruns, temp dirs, context columns, decision records."""

import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from roofline.nightly.engine import decide_all
from roofline.nightly.store import (
    DECISIONS_DIR,
    StoredNights,
    append_decisions,
    append_run,
    decisions_table,
    read_decisions,
    read_history,
    read_run,
    read_runs,
    run_files,
    run_order,
)


def kernels(n: int = 3, scale: float = 1.0, device: str = "GPU-A") -> pd.DataFrame:
    """A hand-made kernels table of ``n`` kernels."""
    return pd.DataFrame({
        "app": "app", "device": device, "kernel": [f"k<{i}>&" for i in range(n)],
        "kernel_short": [f"k{i}" for i in range(n)], "grid": "(1, 1, 1)", "block": "(32, 1, 1)",
        "launches": 2, "duration_s": [scale * 1e-3 * (i + 1) for i in range(n)],
        "flop": 1e9, "dram_bytes": 1e8,
    })


def test_append_run_writes_one_partition_with_context(tmp_path):
    path = append_run(tmp_path, "2026-01-02", kernels(), {"driver_version": "550", "app_commit": "abc"})
    assert path == tmp_path / "run=2026-01-02" / "part.parquet"
    history = read_history(tmp_path)
    assert len(history) == 3
    assert set(history["run_id"]) == {"2026-01-02"} and set(history["run_date"]) == {"2026-01-02"}
    assert set(history["driver_version"]) == {"550"} and set(history["app_commit"]) == {"abc"}
    assert history["pipeline_version"].iat[0] != ""
    assert history["kernel"].tolist() == ["k<0>&", "k<1>&", "k<2>&"]
    assert history["duration_s"].tolist() == pytest.approx([1e-3, 2e-3, 3e-3])


def test_append_run_keeps_the_counting_conventions_of_each_night(tmp_path):
    append_run(tmp_path, "2026-01-02", kernels().assign(convention="2026.11"))
    append_run(tmp_path, "2026-01-03", kernels().assign(convention="2026.12"))
    history = read_history(tmp_path)
    assert history.groupby("run_id")["convention"].unique().map(list).to_dict() == {
        "2026-01-02": ["2026.11"], "2026-01-03": ["2026.12"]}


def test_a_store_written_before_conventions_were_versioned_reads_back(tmp_path):
    """Nights stored by older versions: no ``convention`` column, or an empty one, read as ""."""
    for n, run_id in enumerate(["2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04"]):
        append_run(tmp_path, run_id, kernels())
        part = tmp_path / f"run={run_id}" / "part.parquet"
        old = pd.read_parquet(part)
        old = old.drop(columns="convention") if n % 2 == 0 else old.assign(convention=None)
        old.to_parquet(part, index=False)
    assert "convention" not in pd.read_parquet(tmp_path / "run=2026-01-01" / "part.parquet")
    append_run(tmp_path, "2026-01-05", kernels().assign(convention="2026.12"))
    history = read_history(tmp_path)
    assert len(history) == 15
    assert history["convention"].tolist() == [""] * 12 + ["2026.12"] * 3
    d = decide_all(history)
    tonight = d[d["run_id"] == "2026-01-05"]
    assert set(tonight["label"]) == {"environment_change"} and set(tonight["convention"]) == {"2026.12"}
    assert set(tonight["note"]) == {"new segment: counting conventions changed (before versioning) → 2026.12"}
    assert set(d.loc[d["run_id"] == "2026-01-04", "label"]) == {"unchanged"}


def test_nights_stored_before_the_roof_columns_were_renamed_read_back(tmp_path):
    append_run(tmp_path, "2026-01-01", kernels().assign(roof_flops=1e13))
    part = tmp_path / "run=2026-01-01" / "part.parquet"
    old = pd.read_parquet(part).drop(columns=["convention", "roof_dram_bw", "roof_l2_bw"])
    old = old.rename(columns={"roof_flops": "peak_flops"}).assign(
        peak_dram_bw=2e12, peak_dram_bw_used=2e12, peak_l2_bw_used=5e12, bound_time_s=1e-3)
    old.to_parquet(part, index=False)
    append_run(tmp_path, "2026-01-02", kernels().assign(roof_flops=1e13, roof_dram_bw=2e12))
    history = read_history(tmp_path)
    assert history["roof_flops"].tolist() == [1e13] * 6
    assert history["roof_dram_bw"].tolist() == [2e12] * 6
    assert history["roof_l2_bw"].tolist()[:3] == [5e12] * 3
    assert not {"peak_flops", "peak_dram_bw", "bound_time_s"} & set(history.columns)
    with pytest.raises(ValueError, match="does not declare"):  # appends stay strict
        append_run(tmp_path, "2026-01-03", kernels().assign(peak_flops=1e13))


def test_append_run_twice_replaces_the_night(tmp_path):
    append_run(tmp_path, "2026-01-02", kernels(scale=1.0))
    append_run(tmp_path, "2026-01-03", kernels(scale=1.0))
    append_run(tmp_path, "2026-01-02", kernels(scale=2.0))
    history = read_history(tmp_path)
    assert len(history) == 6
    assert not history.duplicated(["run_id", "kernel"]).any()
    again = history[history["run_id"] == "2026-01-02"]
    assert again["duration_s"].tolist() == pytest.approx([2e-3, 4e-3, 6e-3])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run=2026-01-02", "run=2026-01-03"]


def test_readers_ignore_temp_dirs_and_the_next_append_removes_dead_ones(tmp_path):
    append_run(tmp_path, "2026-01-02", kernels())
    dead = tmp_path / ".tmp-999999999-abc"  # a pid that cannot exist: an append that was killed
    dead.mkdir()
    kernels(n=5).to_parquet(dead / "part.parquet")
    assert len(read_history(tmp_path)) == 3
    assert len(pd.read_parquet(tmp_path)) == 3  # pyarrow's own discovery skips it too
    append_run(tmp_path, "2026-01-03", kernels())
    assert not dead.exists()


def test_per_device_context_overrides(tmp_path):
    frame = pd.concat([kernels(device="GPU-A"), kernels(device="GPU-B")])
    context = {"gpu_uuid": "GPU-0", "devices": {"GPU-B": {"gpu_uuid": "GPU-1", "sm_clock_hz": 1.4e9}}}
    append_run(tmp_path, "r1", frame, context)
    history = read_history(tmp_path).set_index("device")
    assert set(history.loc["GPU-A", "gpu_uuid"]) == {"GPU-0"}
    assert set(history.loc["GPU-B", "gpu_uuid"]) == {"GPU-1"}
    assert history.loc["GPU-B", "sm_clock_hz"].tolist() == [1.4e9] * 3


def test_run_order_uses_the_logical_date_then_time(tmp_path):
    append_run(tmp_path, "b", kernels(), {"run_date": "2026-01-01", "run_time": "2026-01-05T00:00:00"})
    append_run(tmp_path, "a", kernels(), {"run_date": "2026-01-02", "run_time": "2026-01-03T00:00:00"})
    append_run(tmp_path, "2025-12-31", kernels())  # a rerun of an old night, recorded today
    history = read_history(tmp_path)
    assert run_order(history) == ["2025-12-31", "b", "a"]
    assert history["run_id"].drop_duplicates().tolist() == ["2025-12-31", "b", "a"]


@pytest.mark.parametrize("run_id", ["", "../x", "a/b", "x y", ".hidden"])
def test_bad_run_ids_are_refused(tmp_path, run_id):
    with pytest.raises(ValueError, match="run id"):
        append_run(tmp_path, run_id, kernels())
    assert not any(tmp_path.glob("run=*"))


def test_undeclared_columns_are_refused(tmp_path):
    with pytest.raises(ValueError, match="does not declare"):
        append_run(tmp_path, "r1", kernels().assign(bogus=1))
    assert list(tmp_path.iterdir()) == []


def test_empty_store_reads_as_an_empty_history(tmp_path):
    history = read_history(tmp_path / "absent")
    assert history.empty and {"run_id", "kernel", "duration_s"} <= set(history.columns)
    assert read_decisions(tmp_path).empty


def test_decision_records_round_trip_and_stay_out_of_the_history(tmp_path):
    append_run(tmp_path, "r1", kernels())
    decisions = pd.DataFrame({"run_id": ["r1"], "kernel": ["k<0>&"], "label": ["new"]})
    append_decisions(tmp_path, "r1", decisions)
    append_decisions(tmp_path, "r1", decisions.assign(label="unchanged"))
    assert read_decisions(tmp_path)["label"].tolist() == ["unchanged"]
    assert (tmp_path / DECISIONS_DIR / "run=r1" / "part.parquet").exists()
    assert len(read_history(tmp_path)) == 3


def _record_columns(n: int = 6) -> dict[str, np.ndarray]:
    """The decision records of ``n`` kernels over nine hand-made nights, as the replay holds a
    night's records: numpy columns, text as objects."""
    history = pd.concat([kernels(n, scale=1 + 0.01 * (night % 3)).assign(
        run_id=f"r{night}", run_date=f"2026-01-0{night + 1}", run_time="") for night in range(9)], ignore_index=True)
    records = decide_all(history)
    return {name: records[name].to_numpy(dtype=object) if records[name].dtype == "str" else records[name].to_numpy()
            for name in records.columns}


@pytest.mark.parametrize("change", ["none", "a missing text", "text all missing", "no rows", "numbers as objects",
                                    "text as Arrow", "text as Arrow, no rows", "text as categories",
                                    "text as categories, one missing", "text as categories, no rows"])
def test_decisions_table_is_the_table_of_the_records_frame(change):
    columns = _record_columns()
    if change == "a missing text":
        columns["note"][2] = None
    elif change == "text all missing":
        columns["previous_kernel"] = np.full(len(columns["note"]), None, dtype=object)
    elif change.endswith("no rows"):
        columns = {name: values[:0] for name, values in columns.items()}
    elif change == "numbers as objects":
        columns["segment_start"] = np.arange(len(columns["note"])).astype(object)
    expected = pa.Table.from_pandas(pd.DataFrame(columns), preserve_index=False)
    if change.startswith("text as Arrow"):
        columns["run_id"] = pa.array(columns["run_id"], pa.large_string())
    if change.startswith("text as categories"):  # the values in another order, one no record has
        columns["label"] = pd.Categorical(columns["label"], categories=["zz", *sorted(set(columns["label"]))[::-1]])
        if change.endswith("one missing"):
            expected = expected.set_column(expected.schema.get_field_index("direction"), "direction",
                                           pa.array([None, *columns["direction"][1:]], pa.large_string()))
            columns["direction"] = pd.Categorical([None, *columns["direction"][1:]])
    table = decisions_table(columns)
    assert table.equals(expected, check_metadata=True)
    assert table.num_rows == (0 if change.endswith("no rows") else 9 * (6 + 1))  # the kernels and the app total


def test_store_files_are_fsynced_parquet(tmp_path):
    append_run(tmp_path, "r1", kernels())
    part = tmp_path / "run=r1" / "part.parquet"
    assert part.stat().st_size > 0 and os.access(part, os.R_OK)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


def test_run_files_lists_nights_with_a_fingerprint_that_a_rerun_changes(tmp_path):
    assert run_files(tmp_path / "absent") == {}
    append_run(tmp_path, "2026-01-02", kernels())
    append_run(tmp_path, "2026-01-03", kernels())
    (tmp_path / ".tmp-999999999-x").mkdir()
    (tmp_path / "run=2026-01-04").mkdir()  # no file (yet): not a night
    first = run_files(tmp_path)
    assert list(first) == ["2026-01-02", "2026-01-03"]
    append_run(tmp_path, "2026-01-03", kernels())
    again = run_files(tmp_path)
    assert again["2026-01-02"] == first["2026-01-02"] and again["2026-01-03"] != first["2026-01-03"]


def test_read_run_reads_one_night_as_read_history_does(tmp_path):
    append_run(tmp_path, "2026-01-01", kernels().assign(roof_flops=1e13))
    part = tmp_path / "run=2026-01-01" / "part.parquet"
    old = pd.read_parquet(part).drop(columns=["convention", "roof_flops"]).assign(peak_flops=1e13)
    old.to_parquet(part, index=False)  # a night stored by an older version
    append_run(tmp_path, "2026-01-02", kernels(scale=2.0))
    history = read_history(tmp_path)
    for run_id in ("2026-01-01", "2026-01-02"):
        one = read_run(tmp_path, run_id)
        pd.testing.assert_frame_equal(one, history[history["run_id"] == run_id].reset_index(drop=True))
    narrow = read_run(tmp_path, "2026-01-01", ["kernel", "roof_flops", "convention", "run_date"])
    assert list(narrow.columns) == ["kernel", "roof_flops", "convention", "run_date"]
    assert narrow["roof_flops"].tolist() == [1e13] * 3 and narrow["convention"].tolist() == [""] * 3
    with pytest.raises(FileNotFoundError):
        read_run(tmp_path, "2026-01-09")
    # some columns are those columns of the whole night, typed alike, whichever table they come from
    # (the run context, the kernels table), present in the file or not, in the order asked
    context = {"driver_version": "550", "app_commit": "abc", "devices": {"GPU-A": {"sm_clock_hz": 1.4e9}}}
    append_run(tmp_path, "2026-01-03", kernels(scale=3.0), context)
    for run_id in ("2026-01-01", "2026-01-03"):
        whole = read_run(tmp_path, run_id)
        for columns in (["sm_clock_hz", "kernel", "driver_version", "roof_flops", "launches"],
                        ["no_such_column", "run_id", "ncu_version", "duration_s", "bound", "grid"],
                        list(reversed(whole.columns))[::4]):
            pd.testing.assert_frame_equal(read_run(tmp_path, run_id, columns),
                                          whole[[c for c in columns if c in whole.columns]])


def test_read_decisions_of_some_nights_and_columns(tmp_path):
    for run_id in ("r1", "r2", "r3"):
        append_decisions(tmp_path, run_id, pd.DataFrame({"run_id": [run_id], "label": ["new"], "z": [1.0]}))
    some = read_decisions(tmp_path, ["r3", "r1", "absent"], ["run_id", "z", "not_there"])
    assert some.to_dict("list") == {"run_id": ["r3", "r1"], "z": [1.0, 1.0]}
    assert read_decisions(tmp_path, [], ["run_id"]).columns.tolist() == ["run_id"]


def test_the_store_is_a_plain_hive_partitioned_dataset(tmp_path):
    """The pyarrow query of docs/tracking.md: one kernel over the last nights, decisions and the
    decision state beside the nights left out by the dataset discovery."""
    import pyarrow.dataset as ds

    for day in range(1, 5):
        append_run(tmp_path, f"2026-01-0{day}", kernels(scale=day))
        append_decisions(tmp_path, f"2026-01-0{day}", pd.DataFrame({"label": ["new"]}))
    (tmp_path / "_state" / "n=4").mkdir(parents=True)
    pd.DataFrame({"x": [1]}).to_parquet(tmp_path / "_state" / "n=4" / "part.parquet")
    dataset = ds.dataset(tmp_path, format="parquet", partitioning="hive")
    last = sorted(dataset.to_table(columns=["run_id"]).column("run_id").unique().to_pylist())[-2:]
    rows = dataset.to_table(filter=(ds.field("kernel") == "k<1>&") & ds.field("run").isin(last),
                            columns=["run_id", "duration_s"]).to_pandas().sort_values("run_id")
    assert rows["run_id"].tolist() == ["2026-01-03", "2026-01-04"]
    assert rows["duration_s"].tolist() == pytest.approx([6e-3, 8e-3])


@pytest.mark.parametrize("older", [False, True])
def test_read_runs_reads_several_nights_as_read_run_reads_each(tmp_path, older):
    """The replay's one scan of every night (one dataset when the nights share a schema, a table per
    run of nights with one schema otherwise) gives read_run's rows and types, night after night."""
    for n, day in enumerate(("2026-01-01", "2026-01-02", "2026-01-03")):
        append_run(tmp_path, day, kernels(scale=1.0 + n).assign(roof_flops=1e13, roof_dram_bw=2e12))
    if older:  # the middle night stored before the roof columns were renamed
        part = tmp_path / "run=2026-01-02" / "part.parquet"
        old = pd.read_parquet(part).drop(columns=["convention", "roof_dram_bw"])
        old.rename(columns={"roof_flops": "peak_flops"}).assign(peak_dram_bw=2e12).to_parquet(part, index=False)
    columns = ["run_id", "run_date", "app", "kernel", "duration_s", "roof_flops", "roof_dram_bw", "convention"]
    runs = ["2026-01-03", "2026-01-01", "2026-01-02"]
    together = read_runs(tmp_path, runs, columns)
    each = pd.concat([read_run(tmp_path, r, columns) for r in runs], ignore_index=True)
    pd.testing.assert_frame_equal(together, each)
    assert together["run_id"].tolist() == [r for r in runs for _ in range(3)]


@pytest.mark.parametrize("older", [False, True])
def test_read_runs_table_holds_what_read_runs_gives(tmp_path, older, monkeypatch):
    """The replay's Arrow read: nights of today's schema read as stored (text dictionary-encoded,
    missing text and numbers filled as history_frame fills them, columns no night stores added);
    a store with an older night through read_runs. Either way the values of read_runs."""
    for n, day in enumerate(("2026-01-01", "2026-01-02", "2026-01-03")):
        rows = kernels(scale=1.0 + n).assign(roof_flops=1e13, roof_dram_bw=2e12)
        part = append_run(tmp_path, day, rows, {"app_commit": f"c{n}", "sm_clock_hz": 1.4e9})
        stored = pq.read_table(part)  # a missing text and a missing count, their types kept
        stored = stored.set_column(stored.schema.get_field_index("grid"), "grid",
                                   pa.array([None, *stored["grid"].to_pylist()[1:]], pa.large_string()))
        stored = stored.set_column(stored.schema.get_field_index("launches"), "launches",
                                   pa.array([1, None, *stored["launches"].to_pylist()[2:]], pa.int64()))
        # columns no night stores: a text and two numbers
        pq.write_table(stored.drop_columns(["gpu_uuid", "registers_per_thread", "shared_mem_bytes"]), part)
    if older:  # the middle night stored before the roof columns were renamed
        part = tmp_path / "run=2026-01-02" / "part.parquet"
        old = pd.read_parquet(part).drop(columns=["convention", "roof_dram_bw"])
        old.rename(columns={"roof_flops": "peak_flops"}).assign(peak_dram_bw=2e12).to_parquet(part, index=False)
    from roofline.nightly import store as store_module

    read_through = []
    monkeypatch.setattr(store_module, "read_runs", lambda *a: read_through.append(a) or read_runs(*a))
    columns = ["run_id", "run_date", "app", "kernel", "grid", "launches", "duration_s", "roof_flops",
               "roof_dram_bw", "convention", "app_commit", "sm_clock_hz", "gpu_uuid", "registers_per_thread",
               "shared_mem_bytes", "not_a_column"]
    runs = ["2026-01-03", "2026-01-01", "2026-01-02"]
    table = store_module.read_runs_table(tmp_path, runs, columns)
    assert bool(read_through) == older
    expected = read_runs(tmp_path, runs, columns)
    assert table.column_names == list(expected.columns)
    if not older:
        assert pa.types.is_dictionary(table["kernel"].type)
    for name in expected.columns:
        got = table[name].to_pylist() if table[name].type != pa.float64() else table[name].to_numpy().tolist()
        want = expected[name].tolist()
        assert got == pytest.approx(want, nan_ok=True) if table[name].type == pa.float64() else got == want, name
    assert "" in table["grid"].to_pylist() and -1 in table["launches"].to_pylist()


def test_stored_nights_count_their_rows_from_the_footers(tmp_path):
    """StoredNights counts the rows of the nights it opened (what decides whether a replay holds
    them all at once) and reads those nights, and only those."""
    sizes = {}
    for n, day in enumerate(("2026-01-01", "2026-01-02", "2026-01-03")):
        rows = kernels(scale=1.0 + n).iloc[: 1 + n]
        append_run(tmp_path, day, rows, {"app_commit": f"c{n}"})
        sizes[day] = len(rows)
    nights = StoredNights(tmp_path, ["2026-01-03", "2026-01-01"])
    assert sizes == {"2026-01-01": 1, "2026-01-02": 2, "2026-01-03": 3}
    assert nights.rows == 4
    assert nights.table(["run_id", "kernel"])["run_id"].to_pylist() == ["2026-01-03"] * 3 + ["2026-01-01"]
    assert StoredNights(tmp_path, []).rows == 0
