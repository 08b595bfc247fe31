"""The ``roofline`` console command (also ``python -m roofline``): the stages run in-process on a
few files, without Snakemake, through :func:`roofline.api.analyse` (the notebook API's).

``roofline show FILE...`` prints the classified kernels, highest priority first (several files are one
run, ranked by the GPU time to gain over all of them, as the summary page ranks them);
``roofline ceilings FILE...`` the ceilings of each device, with where each value comes from;
``roofline report FILE... -o out.html`` writes the offline summary page (and a page per app);
``roofline compare A B [C...]`` follows each kernel across reports of the same code (what moved,
and with ``-o`` the compare page).
A folder is its CSV exports (one app) and each report in it (an app each); each entry of it that is
no input gets a "skipped" line on stderr. A file that cannot be analysed gets one line on stderr; the
others are still shown, and the exit status is 1. ``--format csv|json`` print the full-precision
numbers in SI base units, for scripts (as ncu's ``--csv --print-units base``).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import sys
from collections.abc import Callable, Collection, Sequence
from json.encoder import encode_basestring
from pathlib import Path
from typing import TYPE_CHECKING

from roofline.ceilings import DEFAULT_POLICY
from roofline.config import inputs
from roofline.errors import EXIT_STATUS as EXIT_WRITE
from roofline.errors import cannot_write, is_environmental, message

if TYPE_CHECKING:
    import pandas as pd

EXIT_OK, EXIT_INPUT, EXIT_USAGE = 0, 1, 2
FORMATS = ("table", "csv", "json", "markdown")
SORTS = ("priority", "time", "roof")
# "of run" and "saving": the kernel's share of all the inputs' GPU time and what reaching its roof would
# save, the figures --sort priority ranks by (as the summary's At a glance; of one app, its time share)
SHOW_COLUMNS = ["kernel", "app", "device", "bound", "% roof (of)", "of run", "saving", "AI [FLOP/B]",
                "performance"]
# The machine-readable columns of ``show`` (contract names of data/kernels/{app}.parquet; units in
# roofline/tables/schemas.py), in reading order; --all-columns prints every column of the table.
KERNEL_FIELDS = [
    "rank", "kernel", "kernel_short", "app", "device", "grid", "block", "launches", "launches_used", "bound",
    "compute_class", "binding_level", "binding_roof", "roof_pct", "time_share", "run_share", "duration_s", "saving_s",
    "flop", "performance", "attainable", "roof_flops", "ai_dram", "ai_l2", "ai_l1", "ai_shared", "ceiling_source",
    "priority", "run_priority", "note",
]
CEILING_COLUMNS = ["device", "kind", "name", "value", "source", "selected", "clock", "per clock", "launches",
                   "spread", "citation"]
KERNEL_TEXT, CEILING_TEXT = range(4), (0, 1, 2, 4, 5, 10)  # the left-aligned (text) columns of the tables
# ... and the ceilings' machine-readable columns: the ceilings table's (data/ceilings/devices.parquet), with the unit
CEILING_FIELDS = ["device", "kind", "name", "value", "unit", "source", "selected", "clock_hz", "per_clock", "launches",
                  "spread", "citation"]
DEVICE_HINT = "name the GPU with --device NAME (a name of the GPU catalog, e.g. \"NVIDIA A100-SXM4-80GB\")"
EPILOG = """\
exit status:
  0   every input was analysed
  1   some input could not be analysed: one line on stderr each, naming the file
      and the fix; the other inputs are still shown
  2   usage error: an unknown option or a bad value (a catalog that cannot be read)
  75  an output could not be written (disk full, quota, read-only or forbidden
      directory): one line says which and how; fix it and rerun

--format csv and json print every number at full precision in SI base units
(s, FLOP, FLOP/s, B/s, FLOP/B; roof_pct in %, shares a fraction), empty
(csv) or null (json) where a value is missing; table and markdown are for reading.

Several files are judged as one run, as on the summary page: run_share is a
kernel's share of all the inputs' GPU time (time_share: of its own app's),
saving_s the GPU time reaching its roof would save, and --sort priority ranks
by run_priority = saving_s / the run's GPU time (of one app: its priority).
"""


def app_name(path: str | Path, taken: set[str]) -> str:
    """The app name of an input (roofline.config.inputs.app_name, as the workflow names it), made unique
    against ``taken`` with ``-2``, ``-3``, ..."""
    return inputs.unique_name(inputs.app_name(path), taken)


def app_names(paths: Sequence[str]) -> list[str]:
    """The app name of each file, in the order given (a later file with the same name gets ``-2``)."""
    from roofline.api import app_names as names

    return names(paths)


# -- choosing and ordering the kernels -------------------------------------------------------------


def sort_kernels(kernels: pd.DataFrame, by: str = "priority") -> pd.DataFrame:
    """The kernels in the order asked for: ``priority`` (over the whole run, as the summary's At a
    glance: :func:`roofline.classify.kernels.run_order`), ``time`` (total GPU time, longest first) or ``roof``
    (% of the binding roof, furthest from it first); missing values last."""
    import pandas as pd

    from roofline.classify.kernels import RUN_FIELDS, run_order, run_ranking

    frame = kernels.reset_index(drop=True)
    ranking = frame[RUN_FIELDS] if set(RUN_FIELDS) <= set(frame.columns) else run_ranking(frame)
    if by == "priority":
        return frame.loc[run_order(frame, ranking)].reset_index(drop=True)
    # the keys in a frame of their own: the kernels table is wide, and a column added to it is a copy
    keyed = pd.DataFrame({"_rank": ranking["run_priority"].fillna(ranking["run_share"]),
                          "duration_s": frame["duration_s"], "roof_pct": frame["roof_pct"]})
    keys = {"time": (["duration_s", "_rank"], [False, False]),
            "roof": (["roof_pct", "duration_s"], [True, False])}[by]
    order = keyed.sort_values(keys[0], ascending=keys[1], na_position="last", kind="stable").index
    return frame.iloc[order].reset_index(drop=True)


def select_kernels(kernels: pd.DataFrame, sort: str = "priority", pattern: re.Pattern | None = None,
                   top: int | None = None) -> pd.DataFrame:
    """The kernels with their run-level figures (:func:`roofline.classify.kernels.run_ranking`, over all of
    ``kernels``), sorted, then those whose full name matches ``pattern`` (searched, as Python's
    ``re``), then the first ``top``; ``rank`` numbers them in that order from 1."""
    import pandas as pd

    from roofline.classify.kernels import run_ranking

    frame = kernels.reset_index(drop=True)
    frame = pd.concat([frame, run_ranking(frame)], axis=1)
    frame = sort_kernels(frame, sort)
    if pattern is not None:
        frame = frame[[bool(pattern.search(str(k))) for k in frame["kernel"]]]
    if top is not None:
        frame = frame.head(top)
    frame = frame.reset_index(drop=True)
    return pd.concat([frame, pd.Series(range(1, len(frame) + 1), name="rank", dtype="int64")], axis=1)


# -- rendering -------------------------------------------------------------------------------------


def _kernel_cells(kernels: pd.DataFrame) -> list[list[str]]:
    """The readable cells of :data:`SHOW_COLUMNS`, one list per kernel."""
    from roofline.metrics.quantities import MEMORY_LEVELS
    from roofline.metrics.units import si

    def finite(value: object) -> bool:
        return isinstance(value, int | float) and math.isfinite(value)

    rows = []
    for r in kernels.to_dict("records"):
        level = r["binding_level"] if r["binding_level"] in MEMORY_LEVELS else "dram"
        performance = (si(r["performance"], "FLOP/s") if finite(r["performance"])
                       else f"{si(r['attainable'], 'FLOP/s')} predicted" if finite(r["attainable"]) else "-")
        rows.append([
            r["kernel_short"], r["app"], r["device"], r["bound"],
            (f"{r['roof_pct']:.1f} % ({r['binding_roof']})" if r.get("binding_roof") else f"{r['roof_pct']:.1f} %")
            if finite(r["roof_pct"]) else "-",
            "-" if not finite(r.get("run_share")) else f"{100 * r['run_share']:.1f} %" if r["run_share"] >= 1e-3
            else f"{100 * r['run_share']:.2g} %",  # a tiny app's kernels are not 0.0 % of the run
            si(r["saving_s"], "s") if finite(r.get("saving_s")) else "-",
            f"{r[f'ai_{level}']:.3g} ({level})" if finite(r[f"ai_{level}"]) else "-",
            performance,
        ])
    return rows


def _ceiling_cells(ceilings: pd.DataFrame) -> list[list[str]]:
    """The readable cells of :data:`CEILING_COLUMNS`, one list per ceiling."""
    from roofline.metrics.units import si

    rows = []
    for r in ceilings.to_dict("records"):
        unit = "FLOP/s" if r["kind"] == "compute" else "B/s"
        clock, spread, per_clock = r["clock_hz"], r["spread"], r["per_clock"]
        rows.append([
            r["device"], r["kind"], r["name"], si(r["value"], unit), r["source"], "yes" if r["selected"] else "",
            si(clock, "Hz") if math.isfinite(clock) else "-",
            f"{per_clock:,.0f} {unit.split('/')[0]}/clk" if math.isfinite(per_clock) else "-",
            str(r["launches"]) if r["launches"] > 0 else "-",
            f"{spread:.3f}" if math.isfinite(spread) else "-", r["citation"],
        ])
    return rows


def text_table(headers: list[str], rows: list[list[str]], left: Collection[int],
               limits: dict[int, int] | None = None) -> str:
    """Aligned plain-text columns: the columns ``left`` (text) left-aligned, the others (numbers)
    right-aligned; a column ``i`` of ``limits`` cut at ``limits[i]`` characters (with an ellipsis)."""
    limits = limits or {}

    def cut(i: int, text: object) -> str:
        text = str(text)
        return text[: limits[i] - 1] + "…" if i in limits and len(text) > limits[i] else text

    cells = [[cut(i, c) for i, c in enumerate(row)] for row in rows]
    widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(headers)]  # no row: the header's

    def line(row: list[str]) -> str:
        return "  ".join(t.ljust(w) if i in left else t.rjust(w) for i, (t, w) in enumerate(zip(row, widths))).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def markdown_table(headers: list[str], rows: list[list[str]], left: Collection[int]) -> str:
    """A GitHub-flavoured Markdown table (``|`` in a cell escaped), numbers right-aligned."""

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"

    rule = ["---" if i in left else "---:" for i in range(len(headers))]
    return "\n".join([line(headers), line(rule), *(line(r) for r in rows)])


def machine_text(frame: pd.DataFrame, fmt: str) -> str:
    """``frame`` as CSV or as a JSON list of row objects: every value at full precision (Python's
    shortest round-trip repr), a missing one empty (CSV) or ``null`` (JSON; also +-inf, which JSON
    cannot write)."""
    if fmt == "csv":
        return frame.to_csv(index=False, lineterminator="\n").rstrip("\n")
    if len(frame) and len(frame.columns) and frame.columns.is_unique:
        try:
            return json_rows(list(frame.columns), [json_cells(frame.iloc[:, i]) for i in range(frame.shape[1])])
        except TypeError:  # a value that is no JSON scalar: json's own encoder, below, says how to write it
            pass
    records = frame.astype(object).where(frame.notna(), None).to_dict("records")
    clean = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()}
             for r in records]
    return json.dumps(clean, indent=2, ensure_ascii=False, allow_nan=False)


def _json_scalar(value: object) -> str:
    """One value as ``json.dumps(..., ensure_ascii=False)`` writes it (a non-finite float as null);
    TypeError for anything but text, a number, a bool or None."""
    if isinstance(value, str):
        return encode_basestring(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return float.__repr__(value) if math.isfinite(value) else "null"
    raise TypeError(f"not a JSON scalar: {type(value).__name__}")


def json_cells(column: pd.Series) -> list[str]:
    """Each value of ``column`` as the JSON that :func:`machine_text` writes for it (a missing or
    non-finite number as null), one pass per column of the tables' dtypes; TypeError where a value
    is no JSON scalar."""
    import numpy as np
    import pandas as pd

    dtype = column.dtype
    if dtype == np.float64:
        numbers = column.to_numpy()
        cells = list(map(float.__repr__, numbers.tolist()))
        for i in np.flatnonzero(~np.isfinite(numbers)).tolist():
            cells[i] = "null"
        return cells
    if dtype == np.int64:
        return list(map(int.__repr__, column.to_numpy().tolist()))
    if dtype == np.bool_:
        return ["true" if value else "false" for value in column.to_numpy().tolist()]
    if isinstance(dtype, pd.StringDtype):
        return ["null" if text is None else encode_basestring(text)
                for text in column.to_numpy(dtype=object, na_value=None).tolist()]
    # anything else as pandas gives it as Python values (numpy scalars as Python's)
    values = column.astype(object).where(column.notna(), None).tolist()
    return [_json_scalar(value.item() if isinstance(value, np.generic) else value) for value in values]


def json_rows(names: list[str], cells: list[list[str]]) -> str:
    """Rows given as columns of JSON texts (:func:`json_cells`; at least one row) as the JSON list of
    row objects that ``json.dumps(rows, indent=2, ensure_ascii=False)`` writes, character for character.

    json's indented encoder is written in Python and visits every value through several generators;
    this joins the rows' texts once (a 5,000-kernel table in a tenth of the time). TypeError for a
    name that is not text (json writes those its own way).
    """
    if not all(isinstance(name, str) for name in names):
        raise TypeError("a column name that is not text")
    keys = ["    " + encode_basestring(name) + ": " for name in names]
    rows = ("  {\n" + ",\n".join(map(str.__add__, keys, row)) + "\n  }" for row in zip(*cells, strict=True))
    return "[\n" + ",\n".join(rows) + "\n]"


def render(frame: pd.DataFrame, fmt: str, columns: list[str], cells: Callable[[pd.DataFrame], list[list[str]]],
           headers: list[str], left: Collection[int], limits: dict[int, int]) -> str:
    """One table in the format asked for: ``columns`` of ``frame`` for csv/json, the readable
    ``cells`` under ``headers`` for table/markdown."""
    if fmt in ("csv", "json"):
        return machine_text(frame[[c for c in columns if c in frame.columns]], fmt)
    if fmt == "markdown":
        return markdown_table(headers, cells(frame), left)
    return text_table(headers, cells(frame), left, limits)


# -- the command -----------------------------------------------------------------------------------


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


def _regex(text: str) -> re.Pattern:
    try:
        return re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular expression ({exc})") from None


def _policy(text: str) -> list[str]:
    from roofline.api import SOURCES

    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in names if s not in SOURCES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: unknown ceiling source(s) {bad}; use a comma list of "
                                         f"{', '.join(SOURCES)}")
    return names


def _rename(text: str) -> tuple[str, str]:
    pattern, sep, name = text.partition("=")
    if not sep or not pattern:
        raise argparse.ArgumentTypeError(f"{text!r}: give PATTERN=NAME, e.g. 'fa3db_full_fwd=fa3_fwd'")
    _regex(pattern)
    return pattern, name


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the command (no analysis module imported: ``--help`` is instant)."""
    parser = argparse.ArgumentParser(prog="roofline", description="Hierarchical roofline of Nsight Compute profiles.",
                                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="{show,ceilings,report,compare}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("files", nargs="+", metavar="FILE",
                        help=".ncu-rep (.ncu-repz), ncu CSV export or what-if table, each also compressed "
                             "(.gz/.xz/.zst/.bz2, or a .zip of one file); or a folder: its CSV exports are one "
                             "app, each report in it its own app")
    common.add_argument("--device", metavar="NAME",
                        help="the GPU of exports that do not record it (e.g. \"NVIDIA A100-SXM4-80GB\"); "
                             "a device the file records wins")
    common.add_argument("--catalog", metavar="YAML",
                        help="GPU datasheet catalog (default: the one shipped with roofline)")
    common.add_argument("--policy", type=_policy, default=list(DEFAULT_POLICY), metavar="SOURCES",
                        help=f"ceiling sources in order of preference (default: {','.join(DEFAULT_POLICY)})")
    printed = argparse.ArgumentParser(add_help=False)
    printed.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    printed.add_argument("--csv", dest="format", action="store_const", const="csv", help="same as --format csv")
    kw = {"parents": [common, printed], "epilog": EPILOG, "formatter_class": argparse.RawDescriptionHelpFormatter}
    show = sub.add_parser("show", help="print the classified kernels, highest priority over the whole run first",
                          **kw)
    show.add_argument("--sort", choices=SORTS, default="priority",
                      help="priority (the GPU time to gain at the roof as a share of the whole run's: "
                           "several files are ranked together, as on the summary page), time (GPU time) or "
                           "roof (%% of roof, lowest first); default: priority")
    show.add_argument("--filter", type=_regex, metavar="REGEX", help="only kernels whose full name matches (re.search)")
    show.add_argument("--top", type=_positive, metavar="N", help="only the first N kernels (after --filter)")
    show.add_argument("--all-columns", action="store_true", help="csv/json: every column of the kernels table")
    ceilings = sub.add_parser("ceilings", help="print each device's ceilings and where each comes from", **kw)
    ceilings.add_argument("--selected", action="store_true", help="only the ceilings the policy selected")
    compare = sub.add_parser("compare", help="follow each kernel across reports of the same code (FILE... in order: "
                             "before/after, v1..v8, a size sweep): what moved, as a table and an HTML page", **kw)
    compare.add_argument("-o", "--output", help="also write the compare page, e.g. compare.html (its Vega bundle "
                         "goes to assets/ beside it)")
    compare.add_argument("--rename", action="append", type=_rename, default=[], metavar="PATTERN=NAME",
                         help="match a kernel renamed between steps: re.sub(PATTERN, NAME) on every full name "
                              "before matching (repeatable)")
    compare.add_argument("--title", default="Trajectories")
    kw["parents"] = [common]
    report = sub.add_parser("report", help="write the offline HTML summary", **kw)
    report.add_argument("-o", "--output", required=True, help="summary page, e.g. reports/summary.html")
    report.add_argument("--apps-dir", help="per-app pages (default: apps/ next to the summary)")
    report.add_argument("--title", default="Roofline summary")
    return parser


def _write_pages(args: argparse.Namespace, analysis) -> int:
    from roofline.api import source_paths
    from roofline.pages.report import write_pages

    output = Path(args.output)
    apps_dir = Path(args.apps_dir) if args.apps_dir else output.parent / "apps"
    try:
        write_pages(analysis.kernels, analysis.ceilings, analysis.diagnostics, output, apps_dir, args.title,
                    sources=source_paths(args.files))
    except OSError as exc:
        if is_environmental(exc):
            print(message(cannot_write(exc.filename or output, exc)), file=sys.stderr)
            return EXIT_WRITE
        print(f"roofline: cannot write {exc.filename or output}: {exc.strerror or exc}; choose another -o/--apps-dir",
              file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def _compare(args: argparse.Namespace, analysis) -> int:
    """``roofline compare``: the table of what moved, and the page with ``-o``."""
    from roofline.api import app_names, input_files, source_paths
    from roofline.compare import MOVE_COLUMNS, MOVE_HEADERS, MOVE_TEXT, move_cells, moves, step_points

    files = input_files(args.files)[0]  # a folder's reports are steps in name order
    steps = [a for a in app_names(files) if a in set(analysis.kernels["app"])]
    if len(steps) < 2:
        print(f"roofline: compare needs at least two analysed reports ({len(steps)} of {len(files)} gave "
              "kernels); give the reports of the same code in order: before after", file=sys.stderr)
        return EXIT_USAGE if len(files) < 2 else EXIT_INPUT
    rename = dict(args.rename)
    frame = moves(step_points(analysis.kernels, steps, rename))
    print(render(frame, args.format, MOVE_COLUMNS, move_cells, MOVE_HEADERS, MOVE_TEXT, {0: 60}))
    if not args.output:
        return EXIT_OK
    from roofline.pages.compare import write_compare

    try:
        write_compare(args.output, analysis.kernels, analysis.ceilings, steps, args.title, rename,
                      source_paths(args.files))
    except OSError as exc:
        if is_environmental(exc):
            print(message(cannot_write(exc.filename or args.output, exc)), file=sys.stderr)
            return EXIT_WRITE
        print(f"roofline: cannot write {exc.filename or args.output}: {exc.strerror or exc}; choose another -o",
              file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    """Analyse ``args.files`` and do what the subcommand asks; returns the exit status."""
    from roofline import api

    if args.catalog:
        from roofline.ceilings.catalog import load_catalog

        try:
            load_catalog(args.catalog)
        except ValueError as exc:
            print(f"roofline: --catalog {exc}", file=sys.stderr)
            return EXIT_USAGE
    # the counters' provenance digest is shown by no subcommand: not worked out (a second pass over the file)
    analysis = api.analyse(args.files, args.catalog, args.policy, device=args.device, errors="ignore",
                           device_hint=DEVICE_HINT, digest=False)
    for line in analysis.skipped:
        print(f"roofline: skipped {line}", file=sys.stderr)
    for line in analysis.errors:
        print(f"roofline: {line}", file=sys.stderr)
    d = analysis.diagnostics
    for line in d.loc[(d["stage"] == "ceilings") & (d["severity"] == "warning"), "message"]:
        print(f"roofline: warning: {line}", file=sys.stderr)
    status = EXIT_INPUT if analysis.errors else EXIT_OK
    if args.command == "report":
        return max(status, _write_pages(args, analysis))
    if args.command == "compare":
        return max(status, _compare(args, analysis))
    if args.command == "ceilings":
        frame = api.ceilings_of(analysis, args.selected)
        frame = frame.assign(unit=frame["kind"].map({"compute": "FLOP/s", "memory": "B/s"}))
        text = render(frame, args.format, CEILING_FIELDS, _ceiling_cells, CEILING_COLUMNS, CEILING_TEXT, {10: 70})
    else:
        frame = select_kernels(analysis.kernels, args.sort, args.filter, args.top)
        if args.filter is not None and frame.empty and len(analysis.kernels):
            print(f"roofline: no kernel name matches --filter {args.filter.pattern!r} "
                  f"(of {len(analysis.kernels)} kernels)", file=sys.stderr)
        columns = ["rank", *(c for c in frame.columns if c != "rank")] if args.all_columns else KERNEL_FIELDS
        text = render(frame, args.format, columns, _kernel_cells, SHOW_COLUMNS, KERNEL_TEXT, {0: 60})
    if len(frame) or args.format in ("csv", "json"):
        print(text)
    return status


def main(argv: list[str] | None = None) -> int:
    """The console entry point: ``roofline`` (and ``python -m roofline``)."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="roofline: %(levelname)s %(name)s: %(message)s")
    try:
        return run(args)
    except BrokenPipeError:  # `roofline show ... | head`: the reader has what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
