"""Columns read as dictionary-encoded text, turned into launch codes and numbers (both layouts)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from roofline.metrics.units import MISSING_TEXT
from roofline.parse.readers.ncu_csv.errors import Where

# bytes: a file up to this size is read as one block with ``one_block``. A larger one is read in
# blocks of this size: the reader holds every column of a block being parsed on each core at once
# (several times the block's bytes across a wide export's hundreds of columns), so larger blocks
# raise the peak memory more than they save in unifying the blocks' dictionaries.
_ONE_BLOCK_MAX = 1 << 24


def _block_size(source: str | io.BytesIO) -> int:
    """A block that holds the whole file (at most :data:`_ONE_BLOCK_MAX`)."""
    import os

    size = source.getbuffer().nbytes if isinstance(source, io.BytesIO) else os.path.getsize(source)
    return max(1 << 20, min(size + 1, _ONE_BLOCK_MAX))


def read_table(source: str | io.BytesIO, encoding: str, columns: list[str], where: Where,
               integer_ids: bool = False, one_block: bool = False) -> pa.Table:
    """``columns`` as dictionary-encoded text ("Metric Value" as plain text): pyarrow's fast reader,
    pandas' when rows are ragged or odd. With ``integer_ids``, "ID" is first tried as integers (a
    long export's ID column, without log lines: no dictionary of 100k texts to build).

    Dictionaries let every later step work once per distinct text (a kernel name on each of its
    metric rows, a device attribute on every launch) instead of once per row. pyarrow lists each
    dictionary in order of first appearance, as ``pandas.factorize`` would. ``one_block`` reads the
    file as one block (up to 16 MB): a wide export's hundreds of dictionary columns then need no
    unifying of one dictionary per block each (:func:`text_codes`).
    """
    dictionary = pa.dictionary(pa.int32(), pa.string())
    types = {c: pa.string() if c == "Metric Value" else dictionary for c in columns}
    for id_type in ((pa.int64(), dictionary) if integer_ids and "ID" in columns else (dictionary,)):
        if isinstance(source, io.BytesIO):
            source.seek(0)
        try:
            table = pacsv.read_csv(
                source,
                read_options=pacsv.ReadOptions(encoding="utf8" if "8" in encoding else encoding,
                                               **({"block_size": _block_size(source)} if one_block else {})),
                convert_options=pacsv.ConvertOptions(
                    include_columns=columns,
                    column_types={**types, "ID": id_type} if "ID" in columns else types,
                    strings_can_be_null=False,
                    quoted_strings_can_be_null=False,
                ),
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeError):
            continue  # log lines among the IDs; short rows, embedded newlines, bytes that are not UTF-8
        # The parse's working memory (several times the table, for a wide export) is free again, but
        # Arrow's allocator keeps such pages for reuse: given back, they do not add to every array
        # made after (by numpy, which does not use them) in the process's peak.
        pa.default_memory_pool().release_unused()
        return table
    if isinstance(source, io.BytesIO):
        source.seek(0)
    try:
        frame = pd.read_csv(
            source,
            usecols=columns,
            dtype=str,
            keep_default_na=False,
            na_filter=False,
            index_col=False,
            encoding=encoding,
            encoding_errors="replace",
            engine="c",
        )
    except (pd.errors.ParserError, ValueError) as err:
        raise where.error(f"not readable as an ncu CSV export ({err}); re-export it with `ncu --csv`") from err
    text = {c: pa.array(frame[c].fillna("").to_numpy(dtype=object), pa.string()) for c in columns}
    return pa.table({c: a if c == "Metric Value" else a.dictionary_encode() for c, a in text.items()})


def text_codes(table: pa.Table, column: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-row codes into the distinct texts of a dictionary column, and those texts ("" everywhere
    when the column is absent)."""
    codes, texts = arrow_codes(table, column)
    return codes, texts.to_numpy(zero_copy_only=False)


def arrow_codes(table: pa.Table, column: str) -> tuple[np.ndarray, pa.Array]:
    """:func:`text_codes` with the distinct texts as an Arrow array: no Python string per text (a
    wide export's metric columns hold about as many distinct texts as launches). The codes are the
    dictionary's own 32-bit indices, read-only and not copied: a big export's columns are millions
    of rows, and each fresh copy costs its pages' first touch."""
    if not table.schema.get_all_field_indices(column):  # not ``column_names``: a list of ~600 names a call
        return np.zeros(table.num_rows, dtype=np.int32), pa.array([""], pa.string())
    array = table[column].combine_chunks()
    return array.indices.to_numpy(), array.dictionary


def is_log(texts: np.ndarray) -> np.ndarray:
    """Which ID texts are ncu log lines ("==PROF==" ...) rather than launches."""
    return np.array([text.startswith("==") for text in texts], dtype=bool)


_NUMBER = r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$"


def to_numbers(text: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """ncu value text -> floats (thousands separators, n/a -> NaN) and a mask of non-numbers."""
    plain = pc.replace_substring(text, ",", "")
    for empty_as_null in (False, True):  # the common case, plain numbers: one cast, no regular expression
        try:
            if empty_as_null:  # "" (a value ncu left out) fails the cast: make it a null first
                plain = pc.if_else(pc.equal(plain, ""), pa.scalar(None, pa.string()), plain)
            cast = pc.cast(plain, pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
        values = cast.to_numpy(zero_copy_only=False)
        if (np.isfinite(values) | cast.is_null().to_numpy(zero_copy_only=False)).all():  # "inf", "nan": below
            return values, np.zeros(len(values), dtype=bool)
        break
    arr = pc.cast(text, pa.large_string())
    arr = pc.replace_substring(pc.replace_substring(arr, ",", ""), "\u202f", "")
    arr = pc.utf8_trim_whitespace(arr)
    missing = pc.is_in(pc.utf8_lower(arr), value_set=pa.array(MISSING_TEXT, pa.large_string()))
    number = pc.match_substring_regex(arr, _NUMBER)
    values = pc.cast(pc.if_else(number, arr, pa.scalar(None, pa.large_string())), pa.float64())
    bad = pc.invert(pc.or_(missing, number))
    return values.to_numpy(zero_copy_only=False), bad.to_numpy(zero_copy_only=False)


def launch_ids(id_codes: np.ndarray, id_texts: np.ndarray, rows: np.ndarray, where: Where):
    """Launch code of each row (order of first appearance) and the ncu ID of each code.

    ``id_codes`` index the rows' ID texts in ``id_texts``; ``rows`` are their row numbers.
    """
    codes, first = pd.factorize(id_codes)
    uniques = id_texts[first]
    numbers = pd.to_numeric(pd.Series(uniques).str.strip(), errors="coerce").to_numpy(float)
    bad = np.isnan(numbers) | (numbers != np.round(numbers))
    if bad.any():
        first_bad = np.flatnonzero(bad)[0]
        raise where.error(
            f"ID {uniques[first_bad]!r} is not a launch number: keep ncu's ID column and remove "
            "lines that are not part of the export",
            rows[np.argmax(codes == first_bad)],
        )
    merged, launches = pd.factorize(numbers.astype(np.int64))  # " 0" and "0" are one launch
    return merged[codes], np.asarray(launches, dtype=np.int64)


def first_rows(codes: np.ndarray, n: int) -> np.ndarray:
    """Position of the first row of each of ``n`` codes."""
    first = np.empty(n, dtype=np.int64)
    first[codes[::-1]] = np.arange(len(codes))[::-1]
    return first
