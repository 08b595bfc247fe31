"""A stage table's file: a conformed frame written to Parquet atomically and read back, through
the table's one Arrow schema (:mod:`roofline.tables.schemas` declares the tables; many files read as one
frame: :mod:`roofline.tables.reads`)."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from roofline.files.atomic import atomic_output
from roofline.tables.schemas import TABLES, check_declared, conform, empty, is_typed, text_complete
from roofline.tables.typed_columns import NUMPY_DTYPES, absent_array, typed_array


def write_table(frame: pd.DataFrame, table: str, path: str | os.PathLike,
                metadata: dict[str, bytes] | None = None) -> None:
    """Conform ``frame`` and write it to Parquet atomically (temp file + rename); ``metadata``
    goes in the file's key-value metadata beside pandas' own."""
    write_arrow(_table_arrow(frame, table), path, metadata)


def _table_arrow(frame: pd.DataFrame, table: str):
    arrow = _conformed_arrow(frame, table)
    return arrow_table(conform(frame, table), table) if arrow is None else arrow


def table_bytes(frame: pd.DataFrame, table: str) -> bytes:
    """The Parquet file :func:`write_table` would write for ``frame``, as bytes (to write many
    copies of one table, or to compare one with a file)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrow = _table_arrow(frame, table)
    sink = pa.BufferOutputStream()
    pq.write_table(arrow, sink, use_dictionary=_repetitive(arrow))
    return sink.getvalue().to_pybytes()


def write_arrow(arrow, path: str | os.PathLike, metadata: dict[str, bytes] | None = None) -> None:
    """Write an Arrow table with a table's schema (:func:`arrow_table`, :func:`arrow_from_columns`) to
    Parquet atomically, as :func:`write_table` does."""
    import pyarrow.parquet as pq

    if metadata:
        extra = {key.encode(): value for key, value in metadata.items()}
        arrow = arrow.replace_schema_metadata({**(arrow.schema.metadata or {}), **extra})
    with atomic_output(path) as tmp:
        pq.write_table(arrow, tmp, use_dictionary=_repetitive(arrow))


def _repetitive(arrow) -> list[str]:
    """The columns worth dictionary-encoding: the text (recipes, names, notes repeat from launch
    to launch). Float columns are written plain: Parquet's default builds a dictionary for every
    column and gives it up for most measured values, which made the write of a large table about
    twice as slow (and its file no smaller)."""
    import pyarrow as pa

    return [field.name for field in arrow.schema
            if pa.types.is_string(field.type) or pa.types.is_large_string(field.type)
            or pa.types.is_dictionary(field.type)]


def _conformed_arrow(frame: pd.DataFrame, table: str):
    """``frame`` as the Arrow table that is written, when it already is what :func:`conform` returns
    (most frames a stage writes were conformed when made): its missing text then comes from the
    Arrow table's null counts, which the write needs anyway. None when it needs conforming."""
    if not is_typed(frame, table):
        return None
    arrow = arrow_table(frame, table)
    return arrow if text_complete(frame, table, arrow) else None


def arrow_table(frame: pd.DataFrame, table: str):
    """A frame with the columns and dtypes of ``table`` (:func:`conform`'s) as an Arrow table: what
    ``pa.Table.from_pandas(frame, preserve_index=False)`` returns, pandas metadata included.

    Column by column against the table's one schema: ``from_pandas`` works out every column's type
    and the pandas metadata again for each frame, most of its time on a ~200-column table."""
    import pyarrow as pa

    schema = _arrow_schema(table)
    column_arrays = getattr(frame, "_iter_column_arrays", None)  # pandas' own iterator: no Series per column
    if column_arrays is None or not is_typed(frame, table):
        return pa.Table.from_pandas(frame, preserve_index=False)
    # NaN -> null as from_pandas; from_arrays casts an array to its field's type (32-bit text offsets)
    arrays = [pa.array(values, from_pandas=True) for values in column_arrays()]
    return pa.Table.from_arrays(arrays, schema=schema)


# Up to this many rows the float columns are converted together (a copy of each): one conversion
# per column costs more than its few values; a longer column is converted in place.
_BATCHED_ROWS = 1024


def arrow_from_columns(values: dict, table: str, rows: int):
    """``arrow_table(conform_columns(values, table, rows), table)`` without the frame between: a
    stage's columns (name -> NumPy array, Arrow array, Series or list of ``rows`` values) as the
    Arrow table that is written. A parse job's table is often a few launches long and ~200 columns
    wide, where building the frame would cost more than the rest of the stage.

    Raises
    ------
    ValueError
        If ``values`` has a column the table does not declare.
    """
    import pyarrow as pa

    check_declared(values, table)
    schema = _arrow_schema(table)
    absent: dict = {}  # one array of a declared column's empty values per type, shared (Arrow arrays are immutable)
    arrays: list = []
    floats: dict[int, np.ndarray] = {}  # position -> a float column given as float64: converted together below
    converted: dict[tuple, object] = {}  # (id of a given Arrow array, dtype, type) -> its column
    for name, dtype, arrow_type in _typed_fields(table):
        given = values.get(name)
        if given is None:
            if arrow_type not in absent:
                absent[arrow_type] = _arrow_column(None, dtype, arrow_type, rows)
            arrays.append(absent[arrow_type])
        elif dtype == "float" and rows <= _BATCHED_ROWS and type(given) is np.ndarray and given.dtype == np.float64:
            floats[len(arrays)] = given
            arrays.append(None)
        elif isinstance(given, pa.Array):  # one array often given for many columns (no refusal): judged once
            key = (id(given), dtype, arrow_type)
            if key not in converted:
                converted[key] = _arrow_column(given, dtype, arrow_type, rows)
            arrays.append(converted[key])
        else:
            arrays.append(_arrow_column(given, dtype, arrow_type, rows))
    if floats:  # one conversion (NaN -> null), each column a slice of it
        block = pa.array(np.concatenate(list(floats.values())), pa.float64(), from_pandas=True)
        for order, position in enumerate(floats):
            arrays[position] = block.slice(order * rows, rows)
    return pa.Table.from_batches([pa.RecordBatch.from_arrays(arrays, schema=schema)])


def _arrow_column(values, dtype: str, arrow_type, rows: int):
    """One column of :func:`arrow_from_columns`: what ``arrow_table`` makes of its conformed values."""
    import pyarrow as pa

    if type(values) is np.ndarray and dtype != "str" and values.dtype == NUMPY_DTYPES[dtype]:
        return pa.array(values, arrow_type, from_pandas=True)  # NaN is null in the written table
    if isinstance(values, pa.Array | pa.ChunkedArray) and values.type == arrow_type and not values.null_count:
        return values
    if values is None:  # declared, not given: conform's empty values
        if dtype == "str":
            return pa.repeat(pa.scalar("", arrow_type), rows)
        if dtype == "float":
            return pa.nulls(rows, arrow_type)
    if dtype == "str" and isinstance(values, pa.Array | pa.ChunkedArray) and (
            pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        text = values.fill_null("") if values.null_count else values
        return text if text.type == arrow_type else text.cast(arrow_type)
    typed = typed_array(values, dtype) if values is not None else absent_array(dtype, rows)
    return pa.array(typed, from_pandas=True).cast(arrow_type)


_ARROW_SCHEMAS: dict = {}
_TYPED_FIELDS: dict[str, list[tuple]] = {}


def _typed_fields(table: str) -> list[tuple]:
    """Each column of ``table`` as (name, declared dtype, Arrow type), in the schema's order: a
    schema's fields are made anew as Python objects each time they are read, ~200 of them a table."""
    fields = _TYPED_FIELDS.get(table)
    if fields is None:
        fields = _TYPED_FIELDS[table] = [(column.name, column.dtype, field.type)
                                         for column, field in zip(TABLES[table], _arrow_schema(table), strict=True)]
    return fields


def arrow_schemas() -> dict:
    """Every table's Arrow schema (:func:`arrow_table`), built now: the job server builds them before
    its workers fork, so that no job builds one (a wide table's takes about as long as a conversion)."""
    schemas = {table: _arrow_schema(table) for table in TABLES}
    for table in TABLES:
        _typed_fields(table)
    return schemas


def _arrow_schema(table: str):
    """The Arrow schema of a conformed ``table``: the same for every frame of it, pandas metadata
    included (its columns' dtypes are the declared ones whatever the rows)."""
    import pyarrow as pa

    schema = _ARROW_SCHEMAS.get(table)
    if schema is None:
        schema = _ARROW_SCHEMAS[table] = pa.Table.from_pandas(empty(table), preserve_index=False).schema
    return schema


def read_table(path: str | os.PathLike, table: str) -> pd.DataFrame:
    """Read a Parquet file written by :func:`write_table` and check it against ``table``."""
    import pyarrow.parquet as pq

    arrow = pq.ParquetFile(path).read()  # ParquetFile: no dataset to set up, as table_reads does
    return conform(arrow.to_pandas(), table, arrow)
