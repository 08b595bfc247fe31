"""The joined tables kept between runs: a later join reads only the files that changed, and equals
a fresh join of every file (hand-made kernels-like tables; the aggregate jobs' use is tested through
the workflow in tests/test_incremental.py)."""

import os

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from roofline.tables import kept_join
from roofline.tables.reads import _read_file, read_tables
from roofline.tables.reads import each_file as read_each_file


def _write(path, app: str, n: int, scale: float = 1.0, extra: bool = False) -> None:
    columns = {"app": [app] * n, "kernel": [f"k{i}" for i in range(n)],
               "duration_s": [scale * (i + 1) for i in range(n)]}
    if extra:
        columns["note"] = ["a new column"] * n
    table = pa.table(columns)
    partial = path.with_suffix(".tmp")
    pq.write_table(table, partial)
    os.replace(partial, path)  # as the jobs write: a new file, never one changed in place


def _fresh(paths) -> pa.Table:
    parts = [pq.read_table(p) for p in paths]
    return pa.concat_tables([t for t in parts if t.num_rows], promote_options="permissive")


@pytest.fixture
def files(tmp_path):
    paths = [tmp_path / f"app_{i:02d}.parquet" for i in range(12)]
    for i, path in enumerate(paths):
        _write(path, f"app_{i:02d}", i % 4)  # some empty
    return paths


def _counting():
    read: list[str] = []

    def each_file(paths, reader):
        read.extend(map(str, paths))
        return read_each_file(paths, reader)

    return each_file, read


def test_a_second_join_reads_only_what_changed_and_equals_a_fresh_one(tmp_path, files):
    keep = tmp_path / "kept"
    each_file, read = _counting()
    first = kept_join.joined(files, "kernels", keep, each_file, _read_file)
    assert first.equals(_fresh(files)) and len(read) == len(files)
    read.clear()
    again = kept_join.joined(files, "kernels", keep, each_file, _read_file)
    assert again.equals(first) and read == []  # nothing changed: nothing read
    _write(files[5], "app_05", 7, scale=2.0)  # one app changed, with more rows
    _write(files[8], "app_08", 0)  # another now empty
    changed = kept_join.joined(files, "kernels", keep, each_file, _read_file)
    assert read == [str(files[5]), str(files[8])]
    assert changed.equals(_fresh(files))
    read.clear()
    unchanged = kept_join.joined(files, "kernels", keep, each_file, _read_file)
    assert unchanged.equals(changed) and read == []
    # the unchanged files' rows come as one slice of the kept table, not a piece per file
    assert {unchanged.column(i).num_chunks for i in range(unchanged.num_columns)} == {1}


def test_a_changed_file_with_other_columns_reads_everything_again(tmp_path, files):
    keep = tmp_path / "kept"
    each_file, read = _counting()
    kept_join.joined(files, "kernels", keep, each_file, _read_file)
    _write(files[3], "app_03", 3, extra=True)
    read.clear()
    joined = kept_join.joined(files, "kernels", keep, each_file, _read_file)
    assert joined.equals(_fresh(files)) and sorted(read) == sorted(map(str, files))
    read.clear()  # the kept table's sources differ in columns now: the next join reads all again
    assert kept_join.joined(files, "kernels", keep, each_file, _read_file).equals(_fresh(files))
    assert len(read) == len(files)


def test_other_sources_a_damaged_or_unwritable_folder_still_give_a_fresh_join(tmp_path, files):
    keep = tmp_path / "kept"
    each_file, read = _counting()
    kept_join.joined(files, "kernels", keep, each_file, _read_file)
    fewer = files[:-3]  # another list of sources (apps gone): its kept table replaces the other one
    assert kept_join.joined(fewer, "kernels", keep, each_file, _read_file).equals(_fresh(fewer))
    assert len(list(keep.iterdir())) == 1
    for kept in keep.iterdir():
        kept.write_bytes(b"not an Arrow file")
    read.clear()
    assert kept_join.joined(files, "kernels", keep, each_file, _read_file).equals(_fresh(files))
    assert len(read) == len(files)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the folder would be")
    assert kept_join.joined(files, "kernels", blocked, each_file, _read_file).equals(_fresh(files))


def test_read_tables_with_a_kept_join_equals_without(tmp_path):
    from pages.test_report import make_kernels

    from roofline.tables.files import write_table

    kernels = make_kernels()
    paths = []
    for app, rows in kernels.groupby("app"):
        paths.append(tmp_path / f"{app}.parquet")
        write_table(rows, "kernels", paths[-1])
    plain = read_tables(paths, "kernels")
    pd.testing.assert_frame_equal(read_tables(paths, "kernels", tmp_path / "kept"), plain)
    pd.testing.assert_frame_equal(read_tables(paths, "kernels", tmp_path / "kept"), plain)  # from the kept table


def test_read_columns_with_a_kept_join_equals_without(tmp_path):
    """Three columns of counters-like tables, two as categories: each file's own dictionary (other
    values, other orders, a missing value) as without the kept table."""
    from roofline.tables.reads import read_columns

    paths = []
    for i, (devices, versions) in enumerate([(["B", "A", "B"], ["2024.1", None, "2024.1"]),
                                             (["C"], ["2023.2"]), ([], []), (["A", "C"], ["2024.1", "2025.1"])]):
        paths.append(tmp_path / f"app_{i}.parquet")
        pq.write_table(pa.table({"device": pa.array(devices, pa.string()),
                                 "ncu_version": pa.array(versions, pa.string()),
                                 "sm_clock_hz": pa.array([1.4e9 + j for j in range(len(devices))], pa.float64())}),
                       paths[-1])
    names, categories = ["device", "ncu_version", "sm_clock_hz"], ["device", "ncu_version"]
    plain = read_columns(paths, "counters", names, categories)
    for _ in range(2):  # built, then from the kept table
        pd.testing.assert_frame_equal(read_columns(paths, "counters", names, categories, keep=tmp_path / "kept"), plain)
    changed = tmp_path / "changed.parquet"  # app_1 replaced, as a job writes it: a new file
    pq.write_table(pa.table({"device": pa.array(["D", "C"]), "ncu_version": pa.array(["2022.1", "2023.2"]),
                             "sm_clock_hz": pa.array([1.0e9, 1.1e9])}), changed)
    os.replace(changed, paths[1])
    pd.testing.assert_frame_equal(read_columns(paths, "counters", names, categories, keep=tmp_path / "kept"),
                                  read_columns(paths, "counters", names, categories))
