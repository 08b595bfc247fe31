"""Reading many stage tables at once: the same frame as reading each, and a clear error for a file
that is not the table it is read as."""

import pandas as pd
import pytest
from charts.test_roofline_chart import make_kernels
from pandas.testing import assert_frame_equal

from roofline.tables.files import read_table, write_table
from roofline.tables.reads import read_columns, read_tables


def test_read_tables_equals_the_concatenated_frames(tmp_path):
    paths = []
    frames = [make_kernels(5, seed=1), make_kernels(3).iloc[:0], make_kernels(7, device="GPU-B", seed=2)]
    for i, frame in enumerate(frames):
        paths.append(tmp_path / f"k{i}.parquet")
        write_table(frame, "kernels", paths[-1])
    expected = pd.concat([f for f in (read_table(p, "kernels") for p in paths) if len(f)], ignore_index=True)
    assert_frame_equal(read_tables(paths, "kernels"), expected)
    assert len(read_tables(paths[1:2], "kernels")) == 0 and list(read_tables([], "kernels").columns)
    assert_frame_equal(read_columns(paths, "kernels", ["app", "duration_s"]), expected[["app", "duration_s"]])


def test_read_columns_names_a_file_without_the_columns(tmp_path):
    path = tmp_path / "other.parquet"
    pd.DataFrame({"app": ["a"]}).to_parquet(path)  # hand-made: not written as a kernels table
    with pytest.raises(ValueError, match=r"other.parquet: no column\(s\) \['duration_s'\]; the file was not written"):
        read_columns([path], "kernels", ["app", "duration_s"])


def test_many_files_are_read_in_their_order_and_the_first_bad_one_named(tmp_path):
    """Twelve files (read two at a time): the rows in the files' order, and a file without the asked
    columns among them named, as when one file is read."""
    paths = []
    for i in range(12):
        paths.append(tmp_path / f"k{i:02d}.parquet")
        write_table(make_kernels(3, seed=i).assign(app=f"app{i:02d}"), "kernels", paths[-1])
    expected = pd.concat([read_table(p, "kernels") for p in paths], ignore_index=True)
    assert_frame_equal(read_tables(paths, "kernels"), expected)
    assert read_columns(paths, "kernels", ["app"])["app"].tolist() == [f"app{i:02d}" for i in range(12) for _ in "abc"]
    pd.DataFrame({"app": ["a"]}).to_parquet(paths[9])  # hand-made: not a kernels table
    with pytest.raises(ValueError, match=r"k09.parquet: no column\(s\) \['duration_s'\]"):
        read_columns(paths, "kernels", ["app", "duration_s"])


def test_conform_types_every_kind_of_column_and_its_result_is_a_copy():
    """conform works column by column on arrays: text given as Python objects (None, numbers),
    pandas' NaN-text dtype or Arrow text, numbers as text, and a Series whose index is not the
    rows' positions (taken by position, not aligned). Editing the result leaves what was given."""
    import numpy as np

    from roofline.tables.schemas import conform, conform_columns

    frame = pd.DataFrame({
        "app": np.array(["a", None, 3], dtype=object),  # hand-made: a None and a number among text
        "kernel": pd.array(["k", np.nan, "m"], dtype=pd.StringDtype(na_value=np.nan)),
        "device": pd.array(["d0", "d1", "d2"], dtype="string"),
        "launches": ["4", "x", None],  # text that is a number, text that is not, nothing
        "duration_s": [1.0, np.nan, 3.0],
    })
    out = conform(frame, "kernels")
    assert out["app"].tolist() == ["a", "", "3"] and str(out["app"].dtype) == "string"
    assert out["kernel"].tolist() == ["k", "", "m"] and out["device"].tolist() == ["d0", "d1", "d2"]
    assert out["launches"].tolist() == [4, -1, -1] and out["launches"].dtype == "int64"
    assert np.isnan(out["duration_s"][1]) and out["kernel_short"].tolist() == ["", "", ""]
    out.loc[0, "duration_s"] = 9.0
    out.loc[0, "device"] = "edited"
    assert frame["duration_s"].tolist()[0] == 1.0 and frame["device"].tolist()[0] == "d0"

    durations = np.array([5.0, 6.0])
    columns = {"duration_s": durations, "app": pd.Series(["x", "y"], index=[7, 3])}
    made = conform_columns(columns, "kernels", 2)
    assert made["app"].tolist() == ["x", "y"] and list(made.index) == [0, 1]
    made.loc[1, "duration_s"] = 0.0
    assert durations.tolist() == [5.0, 6.0]
    with pytest.raises(ValueError, match=r"does not declare columns \['bogus'\]"):
        conform_columns({"bogus": durations}, "kernels", 2)
