"""One app's job in the workflow: its launches classified against the devices' ceilings, its
kernels aggregated, and its page written, in one process.

The two steps are :func:`roofline.analysis.classify_apps` and :func:`roofline.report.write_app_page`;
one job for both, because a job costs Snakemake and the warm server about as much as a page takes
to write (the page draws the summary's device charts, so it builds none of its own).

    python -m roofline.jobs app LOG --app=a --counters=data/counters/a.parquet \\
        --ceilings=data/ceilings/devices.parquet --classified=data/classified/a.parquet \\
        --kernels=data/kernels/a.parquet --diagnostics data/diagnostics/a.parse.parquet \\
        --page=reports/apps/a.html --summary=reports/summary.html
"""

from __future__ import annotations

import argparse
import json
import logging

from roofline.analysis import classify_apps, classify_options
from roofline.report import write_app_page
from roofline.schemas import read_table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Classify one app against the devices' ceilings and write its page.")
    parser.add_argument("--app", required=True)
    parser.add_argument("--counters", required=True, help="the app's counters table")
    parser.add_argument("--ceilings", required=True, help="the devices' ceilings table (the ceilings job's)")
    classify_options(parser)
    parser.add_argument("--classified", required=True, help="the app's classified launches table to write")
    parser.add_argument("--kernels", required=True, help="the app's kernels table to write")
    parser.add_argument("--diagnostics", nargs="*", default=[], help="the app's diagnostics tables, for its page")
    parser.add_argument("--page", required=True, help="the app's page to write")
    parser.add_argument("--title", default="Roofline summary")
    parser.add_argument("--source", default="", help="the app's input file, as the config names it")
    parser.add_argument("--summary", help="the summary page, whose Vega bundle and device charts the page loads "
                        "(default: the page inlines the bundle and builds its own charts)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    options = {"low_roof_fraction": args.low_roof_fraction, "above_roof_tolerance": args.above_roof_tolerance}
    classify_apps([(args.counters, args.classified, args.kernels)], read_table(args.ceilings, "ceilings"),
                  json.loads(args.annotations), options)
    write_app_page(args.kernels, args.ceilings, args.diagnostics, args.app, args.page, args.title, args.source,
                   args.summary)
    return 0
