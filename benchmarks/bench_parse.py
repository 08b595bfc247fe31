"""Parse throughput against the floor: a bare pyarrow read (+ the minimal pivot) of the same metrics.

For a NERSC-style long CSV and a ``--page raw`` wide CSV (generated), in one process, best of N:

- *bare read*: ``pyarrow.csv.read_csv`` of the columns the reader needs, as text (values carry
  thousands separators, so they cannot be read as numbers directly);
- *floor*: bare read + the minimal pivot to one row per launch and one float column per metric
  (separators stripped, cast, scattered into a launches x metrics array) -- no units, no checks;
- *ours, reader*: ``roofline.ncu_csv.read_ncu_csv`` (units to SI, checks, identity columns);
- *ours, stage*: ``roofline.parse.parse_input`` (reader + recipes + provenance + schema).

Goal: our reader's throughput >= 0.8x the floor's, i.e. time <= 1.25x.

    python benchmarks/bench_parse.py [--quick] [--repeat 3]
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BENCH_TMP, best_time, record  # noqa: E402
from generate import NERSC_DEVICE, generate_big  # noqa: E402

from roofline.ncu_csv import is_kept_metric, read_ncu_csv  # noqa: E402
from roofline.parse import parse_input  # noqa: E402

LONG_COLUMNS = ["ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value"]


def _floats(column: pa.ChunkedArray) -> np.ndarray:
    return pc.cast(pc.replace_substring(column, ",", ""), pa.float64()).to_numpy()


def bare_long(path: Path, pivot: bool = True):
    table = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
        include_columns=LONG_COLUMNS, column_types={c: pa.string() for c in LONG_COLUMNS}))
    if not pivot:
        return table
    ids = pc.cast(table["ID"], pa.int64()).to_numpy()
    launches, launch_code = np.unique(ids, return_inverse=True)
    names = pc.dictionary_encode(table["Metric Name"]).combine_chunks()
    matrix = np.full((len(launches), len(names.dictionary)), np.nan)
    matrix[launch_code, names.indices.to_numpy()] = _floats(table["Metric Value"])
    first = np.unique(launch_code, return_index=True)[1]
    kernels = table["Kernel Name"].take(pa.array(first))
    return matrix, kernels


def bare_wide(path: Path, pivot: bool = True):
    with open(path, encoding="utf-8") as handle:
        header = next(csv.reader([handle.readline()]))
    keep = ["ID", "Kernel Name", *[c for c in header if "__" in c and is_kept_metric(c)]]
    table = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
        include_columns=keep, column_types={c: pa.string() for c in keep}))
    if not pivot:
        return table
    body = table.slice(1)  # the units row
    columns = []
    for name in keep[2:]:
        text = pc.replace_substring(body[name], ",", "")
        try:
            columns.append(pc.cast(pc.if_else(pc.equal(text, ""), None, text), pa.float64()).to_numpy(
                zero_copy_only=False))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue  # a text-valued device attribute
    return np.column_stack(columns), body["Kernel Name"]


def measure(path: Path, kind: str, repeat: int) -> dict[str, float]:
    bare = bare_long if kind == "long" else bare_wide
    device = NERSC_DEVICE if kind == "long" else None
    times = {}
    times["bare read"], _ = best_time(lambda: bare(path, pivot=False), repeat)
    times["floor (read + pivot)"], (matrix, _) = best_time(lambda: bare(path), repeat)
    times["ours: read_ncu_csv"], raw = best_time(lambda: read_ncu_csv(path), repeat)
    times["ours: parse_input"], counters = best_time(lambda: parse_input(path, "bench", "csv", device), repeat)
    assert len(raw) == len(counters) == matrix.shape[0], (len(raw), len(counters), matrix.shape)
    times["launches"] = len(raw)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="20k-launch files instead of 100k")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args(argv)
    n = 20_000 if args.quick else 100_000
    files = {
        "long": generate_big(BENCH_TMP / ("long-20k" if args.quick else "big"), n, n // 20),
        "wide": generate_big(BENCH_TMP / f"wide-{n // 1000}k", n, n // 20, kind="wide"),
    }
    rows, ok = [], True
    for kind, path in files.items():
        times = measure(path, kind, args.repeat)
        size = path.stat().st_size
        floor = times["floor (read + pivot)"]
        launches = times.pop("launches")
        print(f"{kind}: {path.name} ({size / 1e6:.0f} MB, {launches} launches)")
        for label, seconds in times.items():
            print(f"  {label:34s} {seconds:7.2f} s  {launches / seconds:9.0f} launches/s  "
                  f"{size / seconds / 1e6:6.0f} MB/s  {seconds / floor:5.2f}x floor")
            rows.append([f"{kind} ({size / 1e6:.0f} MB, {launches // 1000}k launches)", label, f"{seconds:.2f} s",
                         f"{launches / seconds:,.0f}", f"{size / seconds / 1e6:.0f}", f"{seconds / floor:.2f}x",
                         f"{floor / seconds:.2f}x"])
        ok &= times["ours: read_ncu_csv"] <= 1.25 * floor
    notes = [
        "Goal: our reader at >= 0.8x the floor's throughput (time <= 1.25x floor). Best of "
        f"{args.repeat} in one process; *floor* = bare pyarrow read + minimal pivot, measured in the same run. "
        f"Verdict: {'met' if ok else '**not met**'} for read_ncu_csv on both files.",
    ]
    if not args.no_record:
        record("bench_parse", "Parse throughput vs the bare pyarrow floor",
               ["file", "what", "time", "launches/s", "MB/s", "time / floor", "throughput / floor"], rows, notes)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
