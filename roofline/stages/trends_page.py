"""The trends_page stage (rule ``trends_page``): the trends page of the night the track_history stage
judged, from its regressions.json and the history store (:mod:`roofline.pages.trends`).

    python -m roofline.jobs trends_page LOG --store=data/history --regressions=reports/regressions.json \\
        --trends=reports/trends.html --charts-asset=reports/assets/charts.js
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from roofline.nightly.state import judged_order
from roofline.nightly.track import TREND_NIGHTS, page_decisions, write_trends_page

log = logging.getLogger("roofline.track")


_PAGE_READS = ("run_id", "kernels", "findings", "started", "counts", "context", "environment_changes", "alert",
               "environment_shift", "method", "rule_version")


def _read_summary(path: str) -> dict:
    """regressions.json as :func:`summarize` wrote it, or a ValueError naming the file and the fix."""
    try:
        summary = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{path}: not JSON ({exc}); run the tracking stage again") from None
    missing = [key for key in _PAGE_READS if not isinstance(summary, dict) or key not in summary]
    if missing:
        raise ValueError(f"{path}: not the findings of the track_history stage (no {missing[0]!r}); "
                         "run the tracking stage again")
    return summary


def main(argv: list[str] | None = None) -> int:
    """The trends page of the night that the track_history stage (``--no-trends-page``) judged, from
    its regressions.json and the history store (the workflow's trends_page job, which waits for
    the summary's device charts while the judging does not)."""
    parser = argparse.ArgumentParser(description="Write the trends page of the night judged last.")
    parser.add_argument("--store", required=True, help="history store directory")
    parser.add_argument("--regressions", required=True, help="that night's regressions.json")
    parser.add_argument("--trends", required=True, help="the page to write")
    parser.add_argument("--charts-asset", help="the summary's device charts (reports/assets/charts.js), which "
                        "the page's rooflines of tonight's kernels draw")
    parser.add_argument("--trend-nights", type=int, default=TREND_NIGHTS,
                        help=f"nights on the trends page (default {TREND_NIGHTS})")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.trend_nights < 1:
            raise ValueError(f"--trend-nights must be at least 1, got {args.trend_nights}")
        summary = _read_summary(args.regressions)
        decisions = page_decisions(args.store, judged_order(args.store), summary, args.trend_nights)
    except (OSError, ValueError) as exc:
        log.error("%s", exc)
        return 2
    write_trends_page(args.trends, args.store, summary, decisions, args.charts_asset)
    return 0


if __name__ == "__main__":
    sys.exit(main())
