"""The classify_app stage (rule ``classify_app``): one app's launches classified against the devices'
ceilings, its kernels aggregated, and its page written, in one process.

One job for the three, because a job costs Snakemake and the warm server about as much as a page
takes to write (the page draws the summary's device charts, so it builds none of its own).

    python -m roofline.jobs classify_app LOG --app=a --counters=data/counters/a.parquet \\
        --ceilings=data/ceilings/apps/a.parquet --classified=data/classified/a.parquet \\
        --kernels=data/kernels/a.parquet --diagnostics data/diagnostics/a.parse.parquet \\
        --page=reports/apps/a.html --summary=reports/summary.html
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from concurrent.futures import ThreadPoolExecutor

import pandas as pd

from roofline.classify.kernels import aggregate_kernels
from roofline.classify.launches import apply_annotations, classify_launches, wide_ceilings
from roofline.pages.report import write_app_page
from roofline.tables.files import read_table, write_table


def _page_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--diagnostics", nargs="*", default=[], help="the app's diagnostics tables, for its page")
    parser.add_argument("--title", default="Roofline summary")
    parser.add_argument("--source", default="", help="the app's input file, as the config names it")
    parser.add_argument("--summary", help="the summary page, whose Vega bundle and device charts the page loads "
                        "(default: the page inlines the bundle and builds its own charts)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Classify one app against the devices' ceilings and write its page.")
    parser.add_argument("--app", required=True)
    parser.add_argument("--counters", required=True, help="the app's counters table")
    parser.add_argument("--ceilings", required=True, help="the ceilings of the app's devices (the ceilings job's)")
    classify_options(parser)
    parser.add_argument("--classified", required=True, help="the app's classified launches table to write")
    parser.add_argument("--kernels", required=True, help="the app's kernels table to write")
    parser.add_argument("--page", required=True, help="the app's page to write")
    _page_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    ceilings = read_table(args.ceilings, "ceilings")
    kernels = classify_app((args.counters, args.classified, args.kernels), wide_ceilings(ceilings),
                           json.loads(args.annotations), classify_settings(args))
    write_app_page(kernels, ceilings, args.diagnostics, args.app, args.page, args.title, args.source, args.summary)
    return 0


def classify_options(parser: argparse.ArgumentParser) -> None:
    """The classification's options."""
    parser.add_argument("--low-roof-fraction", type=float, default=0.1)
    parser.add_argument("--above-roof-tolerance", type=float, default=0.02)
    parser.add_argument("--annotations", default="[]", help="JSON list of compulsory-work annotations")


def classify_settings(args: argparse.Namespace) -> dict:
    """The keyword options of the classification, from the arguments :func:`classify_options` added."""
    return {"low_roof_fraction": args.low_roof_fraction, "above_roof_tolerance": args.above_roof_tolerance}


def classify_app(paths: tuple[str, str, str], ceilings: pd.DataFrame, annotations: list[dict],
                 options: dict) -> pd.DataFrame:
    """One app: its counters table -> its classified launches and kernels tables; returns the
    kernels table it wrote."""
    counters_path, classified_path, kernels_path = paths
    counters = apply_annotations(read_table(counters_path, "counters"), annotations)
    classified = classify_launches(counters, ceilings, **options)
    # The launches' table is written (Arrow's encoding, without the GIL) while the kernels are summed:
    # a large app's two steps then share the cores; its failure is raised here, as a plain write's.
    with ThreadPoolExecutor(max_workers=1) as writer:
        written = writer.submit(write_table, classified, "classified", classified_path)
        kernels = aggregate_kernels(counters, ceilings, **options)
        written.result()
    write_table(kernels, "kernels", kernels_path)
    return kernels


if __name__ == "__main__":
    sys.exit(main())
