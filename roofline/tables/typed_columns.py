"""A table column's values as its declared dtype ("float", "int", "bool", "str"): the one conversion
every stage table goes through (:func:`roofline.tables.schemas.conform`), and what a column the table
lacks holds."""

from __future__ import annotations

import numpy as np
import pandas as pd

NUMPY_DTYPES = {"float": np.dtype("float64"), "int": np.dtype("int64"), "bool": np.dtype("bool")}
# What a column the frame lacks holds once conformed: what typed_column makes of a missing value.
ABSENT_VALUES = {"float": np.nan, "int": -1, "bool": False, "str": ""}
TEXT_DTYPE = pd.StringDtype()  # na_value=pd.NA: not pandas 3's default "str" dtype, which compares equal to "string"


def column_arrays(frame: pd.DataFrame):
    """The frame's columns as arrays, in order: pandas' own iterator where it has it (no Series
    made per column), else through a Series each."""
    iterate = getattr(frame, "_iter_column_arrays", None)
    if iterate is not None:
        return iterate()
    return (frame.iloc[:, position].array for position in range(frame.shape[1]))


def typed_array(values, dtype: str):
    """``values`` (array, Series, Arrow array or list) as a new array of the declared ``dtype``, as
    :func:`typed_column`."""
    if _is_arrow(values):  # text from the parse stage's derivation, for instance
        import pyarrow as pa

        values = (pd.arrays.ArrowStringArray(values.cast(pa.large_string())) if pa.types.is_string(values.type)
                  or pa.types.is_large_string(values.type) else values.to_numpy(zero_copy_only=False))
    if isinstance(values, pd.Series):  # its numpy array, or its extension array (text)
        values = values.to_numpy() if values.dtype.kind in "fiub" else values.array
    elif not hasattr(values, "dtype"):  # a list
        values = pd.array(values) if dtype == "str" else np.asarray(values)
    if values.dtype == NUMPY_DTYPES.get(dtype) or (
            dtype == "str" and values.dtype == TEXT_DTYPE and not values.isna().any()):
        return values.copy()  # typed already (most columns of a stage's frame): no conversion pass
    if dtype == "str" and (values.dtype == object or isinstance(values.dtype, pd.StringDtype)):
        # Python strings or pandas' other text dtype (names, grids): Arrow's text from them
        import pyarrow as pa

        try:
            text = pa.array(values, pa.large_string(), from_pandas=True).fill_null("")
            return pd.arrays.ArrowStringArray(text)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # not all text (numbers): pandas' conversion below
            pass
    typed = typed_column(pd.Series(values, copy=False), dtype)
    return typed.array if dtype == "str" else typed.to_numpy(copy=True)


def _is_arrow(values) -> bool:
    """Whether ``values`` is an Arrow array (pyarrow is not imported to tell)."""
    return type(values).__module__.startswith("pyarrow")


def absent_array(dtype: str, n: int):
    """The values of a column the frame lacks, once conformed: what typed_column makes of missing values."""
    if dtype == "str":
        return pd.array(np.full(n, "", dtype=object), dtype=TEXT_DTYPE)
    return np.full(n, ABSENT_VALUES[dtype], dtype=NUMPY_DTYPES[dtype])


def typed_column(values: pd.Series, dtype: str) -> pd.Series:
    """``values`` as the declared ``dtype`` ("float", "int", "bool", "str") of a table's column."""
    if values.dtype == NUMPY_DTYPES.get(dtype) or (
            dtype == "str" and values.dtype == TEXT_DTYPE and not values.hasnans):
        return values  # already typed (most columns of a stage's frame): no conversion pass
    if dtype == "float":
        return pd.to_numeric(values, errors="coerce").astype("float64")
    if dtype == "int":
        return pd.to_numeric(values, errors="coerce").fillna(-1).astype("int64")
    if dtype == "bool":
        return values.fillna(False).astype("bool")
    return values.astype("string").fillna("")
