"""Parse throughput against the floor: a bare read of the same metrics, without any of our logic.

Three input kinds, best of N, the floor measured in the same run: the CSV files in one process,
each ``.ncu-rep`` candidate in a child process of its own (see :func:`best_time_in_child`):

NERSC-style long CSV and ``--page raw`` wide CSV (generated, 20k or 100k launches):

- *bare read*: ``pyarrow.csv.read_csv`` of the columns the reader needs, as text (values carry
  thousands separators, so they cannot be read as numbers directly);
- *floor*: bare read + the minimal pivot to one row per launch and one float column per metric
  (separators stripped, cast, scattered into a launches x metrics array) -- no units, no checks;
- *ours, reader*: ``roofline.parse.readers.ncu_csv.read_ncu_csv`` (units to SI, checks, identity columns);
- *ours, stage*: ``roofline.parse.counters.parse_table`` (reader + recipes + provenance + schema: the table the
  parse job writes).

``.ncu-rep`` reports (the real ones in ``../shared/fixtures/real/*/*.ncu-rep``, read in place; the
part is skipped, saying why, when that folder or the ``ncu_report`` module is absent):

- *bare load*: ``ncu_report.load_report`` alone;
- *floor*: load + every launch's kernel names and the value of every metric our reader reads (the
  metrics of ``roofline.metrics.quantities.all_input_metrics()`` and the tensor-pipe ``sm__ops_path_tensor_*``
  family, numbers through ``as_double()``, the device name through ``value()``), into one dict per
  launch -- no units, no checks, no frame. After timing, the floor's metric names are checked to be
  exactly the metric columns of our reader's frame, so both read the same set;
- *ours, reader*: ``roofline.parse.readers.ncu_rep.read_ncu_rep`` (structure check, load, units to SI, frame);
- *ours, stage*: ``roofline.parse.counters.parse_table(path, "bench", "ncu-rep")``.

Each report is timed on its own (both sides load the file each time); the table gives the total
over all reports (sum of the best times) and the largest report.

Goal for every kind: our reader's and our stage's throughput >= 0.8x the floor's, i.e. time <=
1.25x. The return code is 0 when the reader meets it on every kind measured.

    python benchmarks/bench_parse.py [--quick] [--repeat 3] [--only long wide ncu-rep] [--no-record]
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BENCH_TMP, REPO, best_time, record  # noqa: E402
from generate import NERSC_DEVICE, generate_big  # noqa: E402

from roofline.errors import InputError  # noqa: E402
from roofline.jobs.client import without_huge_pages  # noqa: E402
from roofline.metrics import quantities  # noqa: E402
from roofline.parse.counters import parse_table  # noqa: E402
from roofline.parse.readers.ncu_csv import is_kept_metric, read_ncu_csv  # noqa: E402
from roofline.parse.readers.ncu_rep import read_ncu_rep  # noqa: E402

LONG_COLUMNS = ["ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value"]
KINDS = ("long", "wide", "ncu-rep")
KIND_TITLES = {"long": "long CSV", "wide": "wide CSV", "ncu-rep": "ncu-rep"}
REAL = REPO.parent / "shared" / "fixtures" / "real"
GOAL = 1.25  # time / floor; throughput >= 0.8x the floor's

FLOOR = "floor"  # the key of the floor's time in every kind's figures
READER = "ours: reader"
STAGE = "ours: stage"

# What our .ncu-rep reader reads (roofline.parse.readers.ncu_rep._wanted), restated from the public metric table so
# that the floor does not depend on the reader's private names; check_same_metrics() fails the
# run if the two ever drift apart.
REP_METRICS = frozenset(quantities.all_input_metrics())
REP_TENSOR_PREFIX = "sm__ops_path_tensor_"
REP_DEVICE = "device__attribute_display_name"  # read as text, as our reader does
REP_PER_OPCODE = quantities.HFMA2_MMA_METRIC.split("[")[0]  # its HFMA2.MMA instances summed, as our reader does


def _floats(column: pa.ChunkedArray) -> np.ndarray:
    return pc.cast(pc.replace_substring(column, ",", ""), pa.float64()).to_numpy()


def bare_long(path: Path, pivot: bool = True) -> pa.Table | tuple[np.ndarray, pa.Array]:
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


def bare_wide(path: Path, pivot: bool = True) -> pa.Table | tuple[np.ndarray, pa.ChunkedArray]:
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
    """Best times of the bare read, the floor, our reader and our stage on one CSV, and its launches."""
    bare = bare_long if kind == "long" else bare_wide
    device = NERSC_DEVICE if kind == "long" else None
    times = {}
    times["bare read"], _ = best_time(lambda: bare(path, pivot=False), repeat)
    times[FLOOR], (matrix, _) = best_time(lambda: bare(path), repeat)
    times[READER], raw = best_time(lambda: read_ncu_csv(path), repeat)
    times[STAGE], counters = best_time(lambda: parse_table(path, "bench", "csv", device), repeat)
    assert len(raw) == len(counters) == matrix.shape[0], (len(raw), len(counters), matrix.shape)
    times["launches"] = len(raw)
    return times


# -- .ncu-rep --------------------------------------------------------------------------------------


def bare_load(path: Path) -> None:
    """``ncu_report.load_report`` alone: what loading costs before any metric is read."""
    import ncu_report

    ncu_report.load_report(str(path))


def floor_ncu_rep(path: Path) -> list[dict[str, object]]:
    """Load the report and read every launch's names and the values of the metrics our reader reads."""
    import ncu_report

    demangled, mangled = ncu_report.IAction.NameBase_DEMANGLED, ncu_report.IAction.NameBase_MANGLED
    context = ncu_report.load_report(str(path))
    launches = []
    for range_index in range(context.num_ranges()):
        profiled_range = context.range_by_idx(range_index)
        for action_index in range(profiled_range.num_actions()):
            action = profiled_range.action_by_idx(action_index)
            values: dict[str, object] = {"kernel": action.name(demangled), "kernel_mangled": action.name(mangled)}
            per_opcode = action.metric_by_name(REP_PER_OPCODE)  # SASS counts, one instance per opcode
            if per_opcode is not None and per_opcode.num_instances():
                opcodes = per_opcode.correlation_ids()
                values[quantities.HFMA2_MMA_METRIC] = sum(
                    per_opcode.as_double(i) for i in range(per_opcode.num_instances())
                    if opcodes.as_string(i).startswith("HFMA2.MMA"))
            warp_opcodes = action.metric_by_name(quantities.MMA_INSTRUCTIONS_METRIC.split("[")[0])
            if warp_opcodes is not None and warp_opcodes.num_instances():  # the tensor cores' matrix opcodes
                names = warp_opcodes.correlation_ids()
                values[quantities.MMA_INSTRUCTIONS_METRIC] = sum(
                    warp_opcodes.as_double(i) for i in range(warp_opcodes.num_instances())
                    if re.fullmatch(r"(UTC)?[A-Z]G?MMA", names.as_string(i).split(".")[0]))
            for name in action.metric_names():
                if name not in REP_METRICS and not name.startswith(REP_TENSOR_PREFIX):
                    continue
                metric = action.metric_by_name(name)
                if name == REP_DEVICE:
                    values[name] = metric.value()
                    continue
                try:
                    values[name] = metric.as_double()
                except Exception:  # a text-valued metric: our reader skips it too
                    continue
            launches.append(values)
    return launches


def check_same_metrics(path: Path, floor: list[dict[str, object]], raw: pd.DataFrame) -> None:
    """Fail unless the floor read exactly the metrics that are columns of our reader's frame.

    ncu metric names all hold ``__``; our identity columns (kernel, grid, ...) do not.
    """
    ours = {c for c in raw.columns if "__" in c}
    theirs = {name for launch in floor for name in launch if "__" in name} - {REP_DEVICE}
    if ours != theirs or len(floor) != len(raw):
        raise AssertionError(
            f"{path}: the floor and read_ncu_rep read different things: {len(floor)} vs {len(raw)} launches; "
            f"only the floor: {sorted(theirs - ours)[:5]}; only ours: {sorted(ours - theirs)[:5]}"
        )


def ncu_rep_reports() -> tuple[list[Path], str]:
    """The real reports to measure, or none and why."""
    if not REAL.is_dir():
        return [], f"the real fixtures folder {REAL} is absent"
    try:
        import ncu_report  # noqa: F401
    except ImportError as exc:
        return [], f"NVIDIA's ncu_report module cannot be imported ({exc})"
    reports = sorted(REAL.glob("*/*.ncu-rep"))
    return reports, "" if reports else f"{REAL} holds no */*.ncu-rep"


def best_time_in_child(fn, repeat: int):
    """:func:`best_time` of ``fn`` in a forked child, after one untimed call there: ``ncu_report``
    never frees what it decodes of a launch (up to ~12 MB a launch on the real reports), and a
    process that has read a few hundred launches spends most of each further read in the kernel.
    Measured in one process, each candidate paid for the reads before it; in its own child each
    starts from the parent's memory. The result comes back pickled; an exception is raised again."""
    import os
    import pickle

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: measure, send, leave without the parent's exit handlers
        os.close(read_end)
        try:
            fn()  # a lazy import or a cold page cache is not what is measured
            outcome = (True, best_time(fn, repeat))
        except BaseException as exc:  # noqa: BLE001 - the parent raises it again
            outcome = (False, exc)
        with os.fdopen(write_end, "wb") as out:
            pickle.dump(outcome, out)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as answer:
        data = answer.read()
    os.waitpid(pid, 0)
    succeeded, value = pickle.loads(data)
    if not succeeded:
        raise value
    return value


REP_ROUNDS = 3  # children per candidate and report, in turn: one child's time moves by +-15 % here


def measure_ncu_rep(path: Path, repeat: int) -> dict[str, float]:
    """Best times of the bare load, the floor, our reader and our stage on one report, and its
    launches; each candidate in a child process of its own (:func:`best_time_in_child`), the
    candidates in turn for :data:`REP_ROUNDS` rounds, the best round kept for each."""
    candidates = {
        # the reader first: a report it refuses raises InputError before the floor's plain errors
        READER: lambda: read_ncu_rep(path),
        "bare load": lambda: bare_load(path),
        FLOOR: lambda: floor_ncu_rep(path),
        STAGE: lambda: parse_table(path, "bench", "ncu-rep"),
    }
    times, results = {}, {}
    for _ in range(REP_ROUNDS):
        for key, candidate in candidates.items():
            seconds, results[key] = best_time_in_child(candidate, repeat)
            times[key] = min(seconds, times.get(key, seconds))
    raw, floor, counters = results[READER], results[FLOOR], results[STAGE]
    times = {key: times[key] for key in ("bare load", FLOOR, READER, STAGE)}  # the table's order
    check_same_metrics(path, floor, raw)
    assert len(counters) == len(raw), (path, len(counters), len(raw))
    times["launches"] = len(raw)
    return times


# -- the table ------------------------------------------------------------------------------------


def _duration(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1e3:.1f} ms"


LABELS = {
    "long": {READER: "ours: read_ncu_csv", STAGE: "ours: parse_table", FLOOR: "floor (read + pivot)"},
    "wide": {READER: "ours: read_ncu_csv", STAGE: "ours: parse_table", FLOOR: "floor (read + pivot)"},
    "ncu-rep": {READER: "ours: read_ncu_rep", STAGE: "ours: parse_table", FLOOR: "floor (load + values)",
                "bare load": "bare load_report"},
}


def table_rows(kind: str, file_label: str, times: dict[str, float], size: int, launches: int) -> list[list[str]]:
    """Print one input's figures and return its table rows (one per candidate)."""
    floor = times[FLOOR]
    rows = []
    print(f"{file_label}")
    for key, seconds in times.items():
        label = LABELS[kind].get(key, key)
        print(f"  {label:34s} {_duration(seconds):>9s}  {launches / seconds:9.0f} launches/s  "
              f"{size / seconds / 1e6:6.0f} MB/s  {seconds / floor:5.2f}x floor")
        rows.append([file_label, label, _duration(seconds), f"{launches / seconds:,.0f}",
                     f"{size / seconds / 1e6:.0f}", f"{seconds / floor:.2f}x", f"{floor / seconds:.2f}x"])
    return rows


def ncu_rep_part(repeat: int) -> tuple[list[list[str]], dict[str, float] | None, list[str]]:
    """Rows for the total over the real reports and the largest one, the total times, and notes."""
    reports, why = ncu_rep_reports()
    if not reports:
        print(f"ncu-rep: skipped: {why}")
        return [], None, [f"ncu-rep part skipped: {why}."]
    per_file, notes = {}, []
    for path in reports:
        try:
            per_file[path] = measure_ncu_rep(path, repeat)
        except InputError as exc:  # a report our reader refuses is not a throughput figure
            print(f"ncu-rep: {path.parent.name}/{path.name} left out: {exc}")
            notes.append(f"Left out of the ncu-rep total: `{path.parent.name}/{path.name}` ({exc}).")
    if not per_file:
        return [], None, notes
    print(f"ncu-rep: {len(per_file)} reports, each best of {repeat}:")
    for path, times in per_file.items():
        print(f"  {path.parent.name:40s} {times['launches']:3.0f} launches  floor {_duration(times[FLOOR]):>9s}  "
              f"reader {times[READER] / times[FLOOR]:5.2f}x  stage {times[STAGE] / times[FLOOR]:5.2f}x")
    total = {key: sum(t[key] for t in per_file.values()) for key in next(iter(per_file.values()))}
    launches = int(total.pop("launches"))
    size = sum(path.stat().st_size for path in per_file)
    rows = table_rows("ncu-rep", f"ncu-rep ({len(per_file)} reports, {launches} launches, {size / 1e6:.1f} MB)",
                      total, size, launches)
    largest = max(per_file, key=lambda p: p.stat().st_size)
    times = dict(per_file[largest])
    count = int(times.pop("launches"))
    rows += table_rows("ncu-rep", f"ncu-rep, largest: {largest.parent.name} ({largest.stat().st_size / 1e6:.1f} MB, "
                       f"{count} launches)", times, largest.stat().st_size, count)
    return rows, total, notes


def verdict(figures: dict[str, dict[str, float]]) -> tuple[bool, str]:
    """Whether our reader meets the goal on every kind measured, and the sentence saying so per kind."""
    parts = []
    for kind, times in figures.items():
        said = []
        for key in (READER, STAGE):
            ratio = times[key] / times[FLOOR]
            said.append(f"{LABELS[kind][key].removeprefix('ours: ')} {'met' if ratio <= GOAL else '**not met**'} "
                        f"({ratio:.2f}x)")
        parts.append(f"{KIND_TITLES[kind]}: {', '.join(said)}")
    ok = all(times[READER] <= GOAL * times[FLOOR] for times in figures.values())
    return ok, "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="20k-launch CSV files instead of 100k")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", nargs="+", choices=KINDS, default=list(KINDS),
                        help="measure only these input kinds (default: all)")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args(argv)
    n = 20_000 if args.quick else 100_000
    files = {
        "long": lambda: generate_big(BENCH_TMP / ("long-20k" if args.quick else "big"), n, n // 20),
        "wide": lambda: generate_big(BENCH_TMP / f"wide-{n // 1000}k", n, n // 20, kind="wide"),
    }
    # as the parse jobs run (their server and its workers: roofline.jobs.client.without_huge_pages)
    without_huge_pages()
    rows, notes, figures = [], [], {}
    if "ncu-rep" in args.only:
        # first: the reports' children fork from this process as the jobs' workers fork from their
        # server, before it holds the CSV parts' tables (whose pages a child's first writes would copy)
        rep_rows, total, rep_notes = ncu_rep_part(args.repeat)
        notes += rep_notes
        if total is not None:
            figures["ncu-rep"] = total
    for kind, generate in files.items():
        if kind not in args.only:
            continue
        path = generate()
        times = measure(path, kind, args.repeat)
        size = path.stat().st_size
        launches = int(times.pop("launches"))
        rows += table_rows(kind, f"{kind} ({size / 1e6:.0f} MB, {launches // 1000}k launches)", times, size, launches)
        figures[kind] = times
    if "ncu-rep" in args.only:
        rows += rep_rows  # the table's order: CSV kinds, then the reports
    ok, said = verdict(figures)
    notes.insert(0, (
        f"Goal for each input kind: our reader and our stage at >= 0.8x the floor's throughput (time <= {GOAL}x "
        f"floor). Best of {args.repeat}, in one process for CSV, each ncu-rep candidate and report in a forked "
        f"child of its own (ncu_report keeps what it decoded of every launch), the best of {REP_ROUNDS} children "
        "taken in turn, THP off as in the jobs; *floor* = bare pyarrow read + minimal "
        "pivot (CSV), ncu_report load + the values of the metrics our reader reads (ncu-rep, sum over the "
        f"reports), measured in the same run. Verdict: {said}. Overall: {'met' if ok else '**not met**'} for the "
        f"reader on {', '.join(KIND_TITLES[k] for k in figures) or 'nothing measured'}."
    ))
    print(notes[0])
    if not args.no_record and set(args.only) != set(KINDS):  # a partial table would replace the full one
        print("not recorded: --only measured part of the inputs")
    elif not args.no_record:
        record("bench_parse", "Parse throughput vs the bare read floor (pyarrow, ncu_report)",
               ["file", "what", "time", "launches/s", "MB/s", "time / floor", "throughput / floor"], rows, notes)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
