"""Reading many stage tables at once: the same frame as reading each, and a clear error for a file
that is not the table it is read as."""

import pandas as pd
import pytest
from pandas.testing import assert_frame_equal
from test_chart import make_kernels

from roofline.schemas import read_table, write_table
from roofline.table_reads import read_columns, read_tables


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


def test_a_table_read_back_equals_the_frame_pandas_reads_and_conform_checks(tmp_path):
    # read_table takes the missing text from Arrow's null counts instead of each pandas column
    from conftest import real_reports

    from roofline.parse import parse_input
    from roofline.schemas import conform

    reports = real_reports()[:6]
    if not reports:
        pytest.skip("real fixtures not found (../shared/fixtures/real is absent)")
    for number, report in enumerate(reports):
        path = tmp_path / f"{number}.parquet"
        write_table(parse_input(report, "app", "ncu-rep"), "counters", path)
        assert_frame_equal(read_table(path, "counters"), conform(pd.read_parquet(path), "counters"), check_exact=True)


def test_a_file_with_missing_text_is_converted_as_before(tmp_path):
    # hand-made: a kernels table whose text columns lack values, written by pandas, not write_table
    from roofline.schemas import conform

    frame = conform(make_kernels(3), "kernels")
    frame["kernel"] = pd.array(["a", None, "c"], dtype="string")
    frame["device"] = pd.array([None, None, None], dtype="string")
    frame.to_parquet(tmp_path / "gaps.parquet", index=False)
    back = read_table(tmp_path / "gaps.parquet", "kernels")
    assert back["kernel"].tolist() == ["a", "", "c"] and back["device"].tolist() == ["", "", ""]
    assert not back["kernel"].hasnans
    assert_frame_equal(back, conform(pd.read_parquet(tmp_path / "gaps.parquet"), "kernels"))
    assert_frame_equal(read_tables([tmp_path / "gaps.parquet"] * 2, "kernels"),
                       conform(pd.concat([back, back], ignore_index=True), "kernels"))


def test_a_frame_that_needs_conforming_is_written_as_its_conformed_self(tmp_path):
    # write_table writes a conformed frame's Arrow table as it is; any other frame is conformed first
    from roofline.schemas import conform

    conformed = conform(make_kernels(4), "kernels")
    untyped = conformed.astype({"kernel": object, "device": object, "launches": "float64"})
    untyped.loc[1, "device"] = None  # a missing text value is written as ""
    expected = conformed.copy()
    expected.loc[1, "device"] = ""
    write_table(expected, "kernels", tmp_path / "expected.parquet")
    write_table(untyped, "kernels", tmp_path / "untyped.parquet")
    write_table(untyped[["device", "kernel"]], "kernels", tmp_path / "two.parquet")  # the rest: their empty values
    assert (tmp_path / "expected.parquet").read_bytes() == (tmp_path / "untyped.parquet").read_bytes()
    assert_frame_equal(read_table(tmp_path / "untyped.parquet", "kernels"), expected)
    two = read_table(tmp_path / "two.parquet", "kernels")
    assert_frame_equal(two, conform(untyped[["device", "kernel"]], "kernels"))
    assert two["device"].tolist()[1] == ""


def test_text_is_dictionary_encoded_and_floats_are_written_plain(tmp_path):
    # the text of a table repeats from row to row (names, recipes); measured floats rarely do, and
    # a dictionary tried on each of them slowed the write of large tables
    import pyarrow.parquet as pq

    from roofline.schemas import TABLES, conform

    frame = make_kernels(50)
    write_table(frame, "kernels", tmp_path / "k.parquet")
    chunks = pq.ParquetFile(tmp_path / "k.parquet").metadata.row_group(0)
    kinds = {column.name: column.dtype for column in TABLES["kernels"]}
    encodings = {chunks.column(i).path_in_schema: chunks.column(i).encodings for i in range(chunks.num_columns)}
    dictionary = {name for name, used in encodings.items() if any("DICTIONARY" in e for e in used)}
    assert dictionary == {name for name, kind in kinds.items() if kind == "str"}
    assert_frame_equal(read_table(tmp_path / "k.parquet", "kernels"), conform(frame, "kernels"), check_exact=True)


def test_a_conformed_frame_becomes_the_arrow_table_pandas_makes_of_it(tmp_path):
    """arrow_table converts column by column against the table's one schema; the reference is
    pyarrow's own from_pandas (types, NaN as null, pandas metadata): every table of the workflow on
    real reports and generated kernels, a frame that is not conformed, and text held as 32-bit
    Arrow strings (cast to the schema's type, not stored under it)."""
    import numpy as np
    import pyarrow as pa
    from conftest import real_reports

    from roofline.parse import parse_input
    from roofline.report_peaks import app_peaks
    from roofline.schemas import arrow_table, conform, empty

    reports = real_reports()[:4]
    if not reports:
        pytest.skip("real fixtures not found (../shared/fixtures/real is absent)")
    frames = [(parse_input(report, "app", "ncu-rep"), "counters") for report in reports]
    frames += [(app_peaks(counters), "peaks") for counters, _ in frames]
    kernels = conform(make_kernels(6), "kernels")
    kernels.loc[2, "duration_s"] = np.nan
    frames += [(kernels, "kernels"), (kernels.iloc[3:], "kernels"), (empty("classified"), "classified")]
    for frame, table in frames:
        expected = pa.Table.from_pandas(frame, preserve_index=False)
        got = arrow_table(frame, table)
        assert got.schema.equals(expected.schema, check_metadata=True), table
        assert got.equals(expected), table  # NaN as null: equal tables (NaN would not equal NaN)
    assert arrow_table(kernels, "kernels").column("duration_s").null_count == kernels["duration_s"].isna().sum() >= 1
    narrow = kernels.assign(kernel=pd.arrays.ArrowStringArray(pa.array(kernels["kernel"].tolist(), pa.string())))
    got = arrow_table(narrow, "kernels")
    got.validate(full=True)
    assert got.equals(arrow_table(kernels, "kernels"))
    untyped = kernels.astype({"launches": "float64"})  # not conformed: pyarrow's conversion, as it is
    assert arrow_table(untyped, "kernels").equals(pa.Table.from_pandas(untyped, preserve_index=False))


def test_conform_types_every_kind_of_column_and_its_result_is_a_copy():
    """conform works column by column on arrays: text given as Python objects (None, numbers),
    pandas' NaN-text dtype or Arrow text, numbers as text, and a Series whose index is not the
    rows' positions (taken by position, not aligned). Editing the result leaves what was given."""
    import numpy as np

    from roofline.schemas import conform, conform_columns

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
