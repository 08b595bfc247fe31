"""The track_history stage (rule ``track_history``): tonight's kernels appended to the history store,
every kernel's series judged, and the findings written (regressions.json; :mod:`roofline.nightly.track`).

    python -m roofline.jobs track_history LOG --kernels data/kernels/*.parquet --counters data/counters/*.parquet \\
        --store data/history --run-id 2026-12-06 --trends reports/trends.html --regressions reports/regressions.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence

from roofline.files.atomic import write_text_atomic
from roofline.nightly.params import DecisionParams
from roofline.nightly.track import (
    EXIT_REGRESSION,
    TREND_NIGHTS,
    judge_recorded,
    load_context,
    observed_context,
    page_decisions,
    record_tonight,
    with_observed,
    write_trends_page,
)
from roofline.tables.reads import read_columns

log = logging.getLogger("roofline.track")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Record tonight's kernels and judge regressions.")
    parser.add_argument("--kernels", nargs="*", default=[], help="kernels tables (Parquet; none: no app)")
    parser.add_argument("--counters", nargs="*", default=[],
                        help="counters tables: ncu version and SM clock where the context lacks them")
    parser.add_argument("--store", required=True, help="history store directory")
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--context-json", action="append", default=[],
                        help="run context: inline JSON or a JSON file (repeatable)")
    parser.add_argument("--config-json", help="the workflow config as JSON (hashed into the context)")
    parser.add_argument("--config-hash", help="that hash, already taken (the workflow's: a thousand apps' "
                        "config is too long for one argument)")
    parser.add_argument("--params", help="decision parameters as JSON (docs/tracking.md)")
    parser.add_argument("--trends", required=True)
    parser.add_argument("--regressions", required=True)
    parser.add_argument("--charts-asset", help="the summary's device charts (reports/assets/charts.js, written "
                        "by the report), which the trends page's rooflines of tonight's kernels then draw")
    parser.add_argument("--tonight-script", help="also write the summary's tonight block as this script "
                        "(reports/tonight.js; roofline.pages.tonight)")
    parser.add_argument("--fail-on-regression", action="store_true",
                        help=f"exit {EXIT_REGRESSION} when a kernel regressed")
    parser.add_argument("--replay", action="store_true",
                        help="judge every stored night again and rewrite their decisions "
                             "(automatic when the parameters or the rule changed)")
    parser.add_argument("--trend-nights", type=int, default=TREND_NIGHTS,
                        help=f"nights on the trends page (default {TREND_NIGHTS})")
    parser.add_argument("--keep-joined", help="a folder where the joined kernels and counters are kept between runs: "
                        "a rerun reads only the tables that changed (the workflow: .snakemake/roofline-joined)")
    parser.add_argument("--no-trends-page", action="store_true",
                        help="judge and write the findings only; --trends is then where the page will be "
                             "(tonight's links point there), written by a later job (the workflow's "
                             "trends_page: python -m roofline.jobs trends_page LOG --store ... --regressions ...)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        context = load_context(args.context_json)
        if args.config_hash:
            context.setdefault("config_hash", args.config_hash)
        elif args.config_json:
            from roofline.config.workflow import config_hash  # pydantic's model of the config: ~0.15 s

            context.setdefault("config_hash", config_hash(args.config_json))
        if args.counters:
            context = with_observed(context, _observed_in(args.counters, args.keep_joined))
        params = DecisionParams.from_mapping(json.loads(args.params) if args.params else None)
        if args.trend_nights < 1:
            raise ValueError(f"--trend-nights must be at least 1, got {args.trend_nights}")
        recorded = record_tonight(args.kernels, args.store, args.run_id, context, args.keep_joined)
        order, summary, tonight = judge_recorded(args.store, args.run_id, context, params, recorded, args.replay)
    except ValueError as exc:
        log.error("%s", exc)
        return 2
    # one line: indenting would take Python's pure encoder, seconds for thousands of kernels' findings
    write_text_atomic(args.regressions, json.dumps(summary, allow_nan=False) + "\n")
    if not args.no_trends_page:
        decisions = page_decisions(args.store, order, summary, args.trend_nights, tonight)
        write_trends_page(args.trends, args.store, summary, decisions, args.charts_asset)
    if args.tonight_script:
        from roofline.pages.tonight import write_tonight_script

        write_tonight_script(args.tonight_script, summary, args.trends)
    counts = summary["counts"]
    log.info("run %s: %d kernels; %s", args.run_id, summary["kernels"],
             ", ".join(f"{k} {v}" for k, v in counts.items() if v))
    if args.fail_on_regression and counts["regression"]:
        return EXIT_REGRESSION
    return 0


def _observed_in(counters_paths: Sequence[str], keep_joined: str | os.PathLike | None = None) -> dict:
    """:func:`observed_context` of the counters tables (only the three columns it reads)."""
    needed = ["device", "ncu_version", "sm_clock_hz"]
    return observed_context(read_columns(counters_paths, "counters", needed, categories=["device", "ncu_version"],
                                         keep=keep_joined))


if __name__ == "__main__":
    from roofline.jobs.client import without_huge_pages

    # by hand (a replay: docs/tracking.md) as the workflow's job runs: a replay's columns are fresh
    # memory, and a huge page costs its whole 2 MB at first touch (roofline.jobs.client)
    without_huge_pages()
    sys.exit(main())
