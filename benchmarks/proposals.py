"""Proposed speed-ups for modules the benchmarks' owner does not own, measured on patched copies.

These are drop-in replacements applied *in the benchmark process only* (monkeypatching), to measure
what the owners of ``roofline/parse.py``, ``roofline/ncu_csv.py`` and ``roofline/catalog.py`` would
gain; :func:`check` verifies that the patched functions return exactly what the originals do.
Nothing here is imported by the package or the workflow.

    python benchmarks/proposals.py          # equality check + timings on the generated files
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))

from roofline import ncu_csv, parse  # noqa: E402

# Adopted into the package (commit "Parse speed: ..."): the per-combination `parse._missing`, the
# per-distinct-name `short_kernel_name` and the dictionary-encoded reader of `ncu_csv._read_table`.


def fast_numbers(text: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``ncu_csv._numbers`` with a fast path: one cast, and the per-value regex only when it fails.

    The original runs a regular expression over every value of every column; here a column whose
    stripped text all casts to finite floats (empty text -> NaN, as before) skips it. Anything else
    (n/a, '-', inf, words) goes through the original unchanged.
    """
    arr = pa.array(text.astype(str), type=pa.large_string())
    arr = pc.utf8_trim_whitespace(pc.replace_substring(pc.replace_substring(arr, ",", ""), "\u202f", ""))
    try:
        values = pc.cast(pc.if_else(pc.equal(arr, ""), pa.scalar(None, pa.large_string()), arr), pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return _ORIGINAL["numbers"](text)
    out = values.to_numpy(zero_copy_only=False)
    finite = np.isfinite(out)
    if not (finite | values.is_null().to_numpy(zero_copy_only=False)).all():
        return _ORIGINAL["numbers"](text)  # inf / nan spelled out: let the original judge them
    return out, np.zeros(len(out), dtype=bool)


def fast_dims(values: pd.DataFrame, what: str) -> pd.Series:
    """``ncu_csv._dims`` formatting each distinct dimension once instead of once per launch."""
    cols = [f"launch__{what}_dim_{a}" for a in "xyz"]
    if not all(c in values for c in cols):
        return pd.Series("", index=values.index)
    dims = values[cols]
    text = {}
    for col in cols:
        codes, uniques = pd.factorize(dims[col], use_na_sentinel=True)
        labels = np.array([f"{u:.0f}" for u in uniques] + [""], dtype=object)
        text[col] = pd.Series(labels[codes], index=dims.index)
    out = "(" + text[cols[0]] + ", " + text[cols[1]] + ", " + text[cols[2]] + ")"
    return out.where(dims.notna().all(axis=1), "")


def fast_deduplicate(key, values, rows, metric_names, launches, where) -> pd.Series:
    """``ncu_csv._deduplicate`` skipping the 2-million-row group-by when no key repeats.

    ``np.bincount`` over the (launch, metric) keys finds repeats in one pass; without any, each key's
    value is its only value, which is what ``groupby(...).first()`` returns (the caller scatters
    by key, so order does not matter). With repeats the original runs unchanged.
    """
    key = np.asarray(key)
    if len(key) == 0 or np.bincount(key).max() <= 1:
        return pd.Series(np.asarray(values, dtype=float), index=key)
    return _ORIGINAL["dedupe"](key, values, rows, metric_names, launches, where)


_HASHES: dict = {}


def read_input_hashing(path, kind):
    """``parse.read_input`` that starts the file's sha256 on a thread first (hashlib releases the
    GIL), so hashing overlaps the reading instead of following it."""
    from concurrent.futures import ThreadPoolExecutor

    executor = ThreadPoolExecutor(max_workers=1)
    _HASHES[str(Path(path))] = executor.submit(_ORIGINAL["sha256"], path)
    executor.shutdown(wait=False)
    return _ORIGINAL["read_input"](path, kind)


def sha256_joined(path) -> str:
    future = _HASHES.pop(str(Path(path)), None)
    return future.result() if future is not None else _ORIGINAL["sha256"](path)


_ORIGINAL = {
    "dedupe": ncu_csv._deduplicate,
    "sha256": parse.sha256,
    "read_input": parse.read_input,
    "numbers": ncu_csv._numbers,
    "dims": ncu_csv._dims,
}


@contextlib.contextmanager
def patched(numbers: bool = True, dedupe: bool = True, hash_overlap: bool = True):
    """Apply the proposals (each switchable) to the imported modules for the duration of the block."""
    try:
        if dedupe:
            ncu_csv._deduplicate = fast_deduplicate
        if hash_overlap:
            parse.read_input = read_input_hashing
            parse.sha256 = sha256_joined
        if numbers:
            ncu_csv._numbers = fast_numbers
            ncu_csv._dims = fast_dims
        yield
    finally:
        ncu_csv._numbers = _ORIGINAL["numbers"]
        ncu_csv._deduplicate = _ORIGINAL["dedupe"]
        parse.read_input = _ORIGINAL["read_input"]
        parse.sha256 = _ORIGINAL["sha256"]
        ncu_csv._dims = _ORIGINAL["dims"]


def c_yaml_loader():
    """The catalog's loader rebuilt on libyaml (``yaml.CSafeLoader``) with the same two rules."""
    import yaml

    from roofline import catalog

    class CLoader(yaml.CSafeLoader):
        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    CLoader.yaml_implicit_resolvers = {k: list(v) for k, v in catalog._Loader.yaml_implicit_resolvers.items()}
    return CLoader


def catalog_yaml_times(path: Path) -> tuple[float, float, bool]:
    """(pure-Python SafeLoader, libyaml CSafeLoader) seconds to load the catalog, and equality."""
    import yaml

    from roofline import catalog

    text = path.read_text(encoding="utf-8")
    start = time.perf_counter()
    slow = yaml.load(text, Loader=catalog._Loader)
    mid = time.perf_counter()
    fast = yaml.load(text, Loader=c_yaml_loader())
    end = time.perf_counter()
    return mid - start, end - mid, slow == fast


def check(paths: list[Path], device: str = "NVIDIA A100-SXM4-80GB") -> list[str]:
    """Paths (CSV exports / what-if tables / reports) whose patched parse differs from the original."""
    differ = []
    for path in paths:
        kind = "csv-dir" if path.is_dir() else parse_kind(path)
        with warnings_off():
            before = parse.parse_input(path, "x", kind, device)
            with patched():
                after = parse.parse_input(path, "x", kind, device)
        if kind == "csv" and path.suffix == ".csv":
            with warnings_off():
                raw_before = ncu_csv.read_ncu_csv(path)
                with patched():
                    raw_after = ncu_csv.read_ncu_csv(path)
            try:
                pd.testing.assert_frame_equal(raw_before, raw_after, check_exact=True)
            except AssertionError as err:
                differ.append(f"{path} (reader): {str(err)[:300]}")
        try:
            pd.testing.assert_frame_equal(before, after, check_exact=True)
        except AssertionError as err:
            differ.append(f"{path}: {str(err)[:300]}")
    return differ


def parse_kind(path: Path) -> str:
    return {".csv": "csv", ".yaml": "what-if", ".ncu-rep": "ncu-rep"}[path.suffix]


@contextlib.contextmanager
def warnings_off():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def main() -> int:
    from _common import BENCH_TMP, REPO
    from generate import REAL, generate_apps, generate_big

    files = sorted(REAL.glob("*/*.ncu-rep")) + sorted(REAL.glob("*/*.csv"))
    files += [d for d in sorted(REAL.glob("rtx5090*/kernel_*"))[:3]]
    files += [Path(r["path"]) for r in generate_apps(BENCH_TMP / "apps-500", 20, 500)["apps"][:8]]
    files.append(REPO / "data" / "examples" / "textbook.yaml")
    files = [f for f in files if "legacy" not in str(f)]
    differ = check(files)
    print(f"equality check on {len(files)} inputs: {'identical' if not differ else differ}")
    big = generate_big(BENCH_TMP / "big")
    for label, options in (("original", None), ("all proposals", {})):
        start = time.perf_counter()
        if options is None:
            parse.parse_input(big, "big", "csv", "NVIDIA A100-SXM4-80GB")
        else:
            with patched(**options):
                parse.parse_input(big, "big", "csv", "NVIDIA A100-SXM4-80GB")
        print(f"parse_input on {big.name}, {label}: {time.perf_counter() - start:.2f} s")
    slow, fast, same = catalog_yaml_times(REPO / "config" / "gpus.yaml")
    print(f"catalog YAML: SafeLoader {slow:.3f} s, CSafeLoader {fast:.3f} s, same result: {same}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
