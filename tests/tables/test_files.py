"""A stage table's file (roofline/tables/files.py): what is written is the conformed frame, read back
equal to what pandas reads and conform checks; text dictionary-encoded; the Arrow table built
column by column equals pandas' own conversion."""

import pandas as pd
import pytest
from charts.test_roofline_chart import make_kernels
from pandas.testing import assert_frame_equal

from roofline.tables.files import read_table, write_table
from roofline.tables.reads import read_tables


def test_a_table_read_back_equals_the_frame_pandas_reads_and_conform_checks(tmp_path):
    # read_table takes the missing text from Arrow's null counts instead of each pandas column
    from conftest import real_reports

    from roofline.parse.counters import parse_input
    from roofline.tables.schemas import conform

    reports = real_reports()[:6]
    if not reports:
        pytest.skip("real fixtures not found (../shared/fixtures/real is absent)")
    for number, report in enumerate(reports):
        path = tmp_path / f"{number}.parquet"
        write_table(parse_input(report, "app", "ncu-rep"), "counters", path)
        assert_frame_equal(read_table(path, "counters"), conform(pd.read_parquet(path), "counters"), check_exact=True)


def test_a_file_with_missing_text_is_converted_as_before(tmp_path):
    # hand-made: a kernels table whose text columns lack values, written by pandas, not write_table
    from roofline.tables.schemas import conform

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
    from roofline.tables.schemas import conform

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

    from roofline.tables.schemas import TABLES, conform

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

    from roofline.ceilings.report_peaks import app_peaks
    from roofline.parse.counters import parse_input
    from roofline.tables.files import arrow_table
    from roofline.tables.schemas import conform, empty

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


def test_a_table_from_columns_equals_the_conformed_frame_converted():
    # hand-made columns of every kind conform takes: NumPy numbers (NaN), Arrow text with a null,
    # a list, a Series of text, and declared columns left out
    import numpy as np
    import pyarrow as pa

    from roofline.tables.files import arrow_from_columns, arrow_table
    from roofline.tables.schemas import conform_columns

    columns = {
        "kernel": pa.array(["a", None, "c"], pa.large_string()),
        "device": ["d", "d", "e"],
        "launches": np.array([1, 2, 3], dtype=np.int64),
        "duration_s": np.array([1e-3, np.nan, 2e-3]),
        "app": pd.Series(["x", "y", None], dtype=object),
    }
    table = arrow_from_columns(columns, "kernels", 3)
    expected = arrow_table(conform_columns(dict(columns), "kernels", 3), "kernels")
    assert table.schema.equals(expected.schema, check_metadata=True)
    for name in expected.column_names:
        assert table[name].equals(expected[name]), name
    assert table["kernel"].to_pylist() == ["a", "", "c"] and table["duration_s"].null_count == 1
    with pytest.raises(ValueError, match="does not declare columns \\['bogus'\\]"):
        arrow_from_columns({"bogus": [1, 2, 3]}, "kernels", 3)
