"""One app's job in the workflow: its launches classified against the devices' ceilings, its
kernels aggregated, and its page written, in one process.

The two steps are :func:`roofline.analysis.classify_app` and :func:`write_page_of`; one job for
both, because a job costs Snakemake and the warm server about as much as a page takes to write
(the page draws the summary's device charts, so it builds none of its own).

    python -m roofline.jobs app LOG --app=a --counters=data/counters/a.parquet \\
        --ceilings=data/ceilings/devices.parquet --classified=data/classified/a.parquet \\
        --kernels=data/kernels/a.parquet --diagnostics data/diagnostics/a.parse.parquet \\
        --page=reports/apps/a.html --summary=reports/summary.html
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from roofline.analysis import classify_app, classify_options, classify_settings
from roofline.atomic_files import write_text_atomic
from roofline.classify import wide_ceilings
from roofline.inputs import is_app_name
from roofline.pages.page import CHARTS_ASSET, VEGA_ASSET, asset_src
from roofline.report import app_html
from roofline.schemas import conform
from roofline.table_files import read_table
from roofline.table_reads import read_tables


def write_app_page(kernels_path: str | os.PathLike, ceilings_path: str | os.PathLike,
                   diagnostics_paths: Sequence[str | os.PathLike], app: str, output: str | os.PathLike,
                   title: str = "", source: str | None = None, summary: str | os.PathLike | None = None) -> Path:
    """Write one app's page from its own kernels and diagnostics tables and the devices' ceilings.
    ``summary`` is the summary page's path: the page loads the Vega bundle and the device charts the
    summary's job writes beside it (:data:`VEGA_ASSET`, :data:`CHARTS_ASSET`), so building it draws
    no chart. Without one, the bundle is inlined and the charts are built from the app's kernels."""
    return write_page_of(read_tables([kernels_path], "kernels"), read_table(ceilings_path, "ceilings"),
                         diagnostics_paths, app, output, title, source, summary)


def write_page_of(kernels: pd.DataFrame, ceilings: pd.DataFrame, diagnostics_paths: Sequence[str | os.PathLike],
                  app: str, output: str | os.PathLike, title: str = "", source: str | None = None,
                  summary: str | os.PathLike | None = None) -> Path:
    """:func:`write_app_page` of the app's kernels and the devices' ceilings as tables in memory: the
    app job's own, which it has just written (not read back)."""
    if not is_app_name(app):
        raise ValueError(f"app name {app!r} cannot be a file name; use letters, digits, '.', '_', '-'")
    ceilings = conform(ceilings.drop_duplicates(), "ceilings")
    diagnostics = read_tables(diagnostics_paths, "diagnostics")
    output = Path(output)
    vega = charts = None
    if summary:
        folder = Path(summary).parent
        vega, charts = asset_src(output, folder / VEGA_ASSET), asset_src(output, folder / CHARTS_ASSET)
    write_text_atomic(output, app_html(kernels, ceilings, diagnostics, app, title, source=source or None, vega=vega,
                                       charts=charts))
    return output


def _page_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--diagnostics", nargs="*", default=[], help="the app's diagnostics tables, for its page")
    parser.add_argument("--title", default="Roofline summary")
    parser.add_argument("--source", default="", help="the app's input file, as the config names it")
    parser.add_argument("--summary", help="the summary page, whose Vega bundle and device charts the page loads "
                        "(default: the page inlines the bundle and builds its own charts)")


def page_main(argv: list[str] | None = None) -> int:
    """One app's page alone (``python -m roofline.jobs page LOG ...``), from its tables."""
    parser = argparse.ArgumentParser(description="Write one app's offline HTML roofline page.")
    parser.add_argument("--app", required=True)
    parser.add_argument("--kernels", required=True, help="the app's kernels table")
    parser.add_argument("--ceilings", required=True, help="the devices' ceilings table")
    parser.add_argument("--output", required=True)
    _page_arguments(parser)
    args = parser.parse_args(argv)
    write_app_page(args.kernels, args.ceilings, args.diagnostics, args.app, args.output, args.title,
                   args.source, args.summary)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Classify one app against the devices' ceilings and write its page.")
    parser.add_argument("--app", required=True)
    parser.add_argument("--counters", required=True, help="the app's counters table")
    parser.add_argument("--ceilings", required=True, help="the devices' ceilings table (the ceilings job's)")
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
    write_page_of(kernels, ceilings, args.diagnostics, args.app, args.page, args.title, args.source, args.summary)
    return 0
