"""Many stage tables read as one frame: a thousand apps' kernels or counters tables, joined as
Arrow tables and converted once, two files read at a time, only the columns asked for (the
tables' columns and types are :mod:`roofline.tables.schemas`)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import pandas as pd

from roofline.tables.schemas import TABLES, conform
from roofline.tables.typed_columns import typed_column


def each_file(paths: Sequence[str | os.PathLike], read) -> list:
    """``read`` of every path, in order, two files at a time: Arrow reads a file without the GIL, so
    a thousand apps' small tables take ~half the time on two cores (the aggregate jobs that read
    them run when the apps' jobs are done)."""
    if len(paths) < 8:
        return [read(path) for path in paths]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(read, paths))


def read_tables(paths: Sequence[str | os.PathLike], table: str, keep: str | os.PathLike | None = None) -> pd.DataFrame:
    """Several Parquet files written by :func:`write_table` as one frame, checked against ``table``:
    joined as Arrow tables and converted once (a thousand apps' small tables cost about what their
    rows do, not a thousand conversions); equal to concatenating :func:`read_table` of each.

    ``keep``: a folder where the joined table is kept between calls (:func:`roofline.tables.kept_join.joined`):
    a later call reads only the files that changed since (the aggregate jobs of a rerun in which one
    app of hundreds changed)."""
    import pyarrow as pa

    if keep is not None:
        from roofline.tables.kept_join import joined as kept_joined

        parts = [kept_joined(paths, table, keep, each_file, _read_file)]
    else:
        parts = each_file(paths, _read_file)
    parts = [part for part in parts if part.num_rows]
    if not parts:
        return conform(pd.DataFrame(), table)
    joined = pa.concat_tables(parts, promote_options="permissive") if len(parts) > 1 else parts[0]
    return conform(joined.to_pandas().reset_index(drop=True), table, joined)


def _read_file(path: str | os.PathLike):
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).read()  # not read_table: no dataset to set up per file, half the time


def read_columns(
    paths: str | os.PathLike | Sequence[str | os.PathLike], table: str, names: list[str],
    categories: Sequence[str] = (), keep: str | os.PathLike | None = None,
) -> pd.DataFrame:
    """Only the columns ``names`` of one or several Parquet files written by :func:`write_table`, one
    after the other, typed as declared (a reader that needs three of the counters table's ~100
    columns reads three; the files are joined as Arrow tables and converted once, so reading a
    thousand apps' tables costs little more than reading their rows).

    The text columns named in ``categories`` come back as pandas categoricals ("" for a missing
    value), read from the files' dictionaries: a column that repeats a few long values on every row
    (a recipe) then costs a small integer per row, not a string (millions of rows at a thousand
    apps). ``keep``: as for :func:`read_tables`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    declared = {c.name: c.dtype for c in TABLES[table]}
    unknown = [n for n in names if n not in declared]
    if unknown:
        raise ValueError(f"table {table!r} does not declare columns {unknown}")
    not_text = [n for n in categories if declared.get(n) != "str" or n not in names]
    if not_text:
        raise ValueError(f"only text columns among those read can be categories, not {not_text}")
    if isinstance(paths, str | os.PathLike):
        paths = [paths]

    def read(path, dictionary: Sequence[str] = tuple(categories)) -> pa.Table:  # ParquetFile: no dataset per file
        part = pq.ParquetFile(path, read_dictionary=list(dictionary)).read(columns=names)
        if part.num_columns < len(names):
            missing = sorted(set(names) - set(part.column_names))
            raise ValueError(f"{path}: no column(s) {missing}; the file was not written as a {table!r} table")
        return part

    if keep is not None:  # kept as text; each text column a dictionary of the whole, as the files' would be
        from roofline.tables.kept_join import joined

        parts = [_encoded(joined(paths, table, keep, each_file, lambda path: read(path, ()), names), categories)]
    else:
        parts = each_file(paths, read)
    parts = [part for part in parts if part.num_rows]
    if not parts:
        empty = conform(pd.DataFrame(), table)[names]
        return empty.astype({n: "category" for n in categories})
    frame = pa.concat_tables(parts, promote_options="permissive").to_pandas()
    return pd.DataFrame({n: _category(frame[n]) if n in categories else typed_column(frame[n], declared[n])
                         for n in names})


def _encoded(table, names: Sequence[str]):
    """``table`` with its columns ``names`` dictionary-encoded (their values in order of appearance)."""
    for name in names:
        at = table.schema.get_field_index(name)
        table = table.set_column(at, name, table.column(name).combine_chunks().dictionary_encode())
    return table


def _category(values: pd.Series) -> pd.Series:
    """A text column read from a dictionary, as a categorical of its text, "" where missing."""
    values = values if isinstance(values.dtype, pd.CategoricalDtype) else values.astype("category")
    if values.isna().any():
        if "" not in values.cat.categories:
            values = values.cat.add_categories([""])
        values = values.fillna("")
    return values
