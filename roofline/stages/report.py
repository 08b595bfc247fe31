"""The report stage (rule ``report``): every app's kernels, the ceilings and the diagnostics -> the
offline summary page, its shared assets and the compare pages (:mod:`roofline.pages.report`).

    python -m roofline.jobs report LOG --kernels data/kernels/*.parquet --ceilings=data/ceilings/devices.parquet \\
        --diagnostics data/diagnostics/*.parquet --output reports/summary.html
"""

from __future__ import annotations

import argparse
import json
import sys

from roofline.charts.roofline_chart import TOP_N_DEFAULT
from roofline.jobs.arguments import read_json_argument
from roofline.pages.report import write_report
from roofline.pages.tonight import add_tonight_slot


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the offline HTML roofline report.")
    parser.add_argument("--kernels", nargs="*", default=[])
    parser.add_argument("--ceilings", nargs="*", default=[])
    parser.add_argument("--diagnostics", nargs="*", default=[])
    parser.add_argument("--output", required=True)
    parser.add_argument("--apps-dir", help="write a page per app here too (default: the summary only; the "
                        "workflow writes each app's page in a job of its own, the classify_app stage)")
    parser.add_argument("--title", default="Roofline summary")
    parser.add_argument("--apps", nargs="*", default=[], help="apps that must get a page even without rows")
    parser.add_argument("--sources", default="{}", help="JSON: app -> its input file")
    parser.add_argument("--input-problems", default="[]", help="JSON: the inputs: entries that gave no app")
    parser.add_argument("--series", default="{}", help="JSON: the config's series: {name: {steps: [app, ...], "
                        "rename: {pattern: replacement}}}; a compare page each, in --compare-dir")
    parser.add_argument("--compare-dir", help="the series' compare pages (default: compare/ beside --output)")
    parser.add_argument("--tonight-script", help="tonight.js, which the tracking stage writes beside the pages: "
                        "the summary gets a slot that shows tonight against the baseline from it")
    parser.add_argument("--keep-joined", help="a folder where the joined tables are kept between runs: a rerun "
                        "reads only the tables that changed (the workflow: .snakemake/roofline-joined)")
    parser.add_argument("--top-kernels", type=int, default=TOP_N_DEFAULT,
                        help="kernels each device chart draws at first, by GPU time (its slider draws the others)")
    args = parser.parse_args(argv)
    if args.top_kernels < 1:
        parser.error(f"--top-kernels={args.top_kernels}: draw at least 1 kernel at first")
    series = {name: ({"steps": s} if isinstance(s, list) else s) for name, s in json.loads(args.series).items()}
    sources, problems = read_json_argument(args.sources), read_json_argument(args.input_problems)
    write_report(args.kernels, args.ceilings, args.diagnostics, args.output, args.apps_dir, args.title, args.apps,
                 sources, problems, series, args.compare_dir, args.keep_joined, args.top_kernels)
    if args.tonight_script:
        add_tonight_slot(args.output, args.tonight_script)
    return 0


if __name__ == "__main__":
    sys.exit(main())
