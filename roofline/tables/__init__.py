"""The table contracts (columns, dtypes, units) and reading, writing and joining them as Parquet."""
