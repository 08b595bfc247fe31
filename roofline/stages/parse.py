"""The parse stage (rule ``parse``): one input -> its counters table and its diagnostics table.

    python -m roofline.jobs parse LOG --input=data/raw/a.ncu-rep --app=a --kind=ncu-rep \\
        --output=data/counters/a.parquet --diagnostics=data/diagnostics/a.parse.parquet

An input the reader refuses is not a failed job: its refusal is the app's diagnostics, and its
counters table is empty, so one bad report never stops the others (:mod:`roofline.parse.counters`).
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings

import pandas as pd

from roofline.config.inputs import write_refusal
from roofline.errors import InputError
from roofline.metrics.units import UnitError
from roofline.parse.counters import diagnostics_for, named_message, parse_table, reportable_warning
from roofline.tables.files import arrow_from_columns, write_arrow, write_table
from roofline.tables.schemas import conform_some

log = logging.getLogger("roofline.parse")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Parse one input into per-launch counters (Parquet).")
    parser.add_argument("--input", required=True)
    parser.add_argument("--app", required=True)
    parser.add_argument("--kind", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--diagnostics", required=True)
    parser.add_argument("--device", default="", help="GPU name for inputs that record none")
    parser.add_argument("--problem", default="", help="why the input cannot be read (the workflow judged it): "
                        "record this error instead of reading it")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.problem:
        log.error("%s", args.problem)
        write_refusal(args.app, args.input, args.problem, args.output, args.diagnostics)
        return 0
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            counters = parse_table(args.input, args.app, args.kind, args.device or None)
        diagnostics = diagnostics_for(counters, args.app)
        repaired = [
            {"app": args.app, "stage": "parse", "severity": "warning", "source_file": args.input, "message": text}
            for text in dict.fromkeys(named_message(str(w.message), args.input) for w in caught
                                      if reportable_warning(w))
        ]
        if repaired:
            diagnostics = pd.concat([pd.DataFrame(repaired), diagnostics], ignore_index=True)
    except Exception as exc:  # noqa: BLE001 - one bad input must not stop the batch
        # Record the error, write empty tables, go on: the other applications are still analysed.
        if isinstance(exc, InputError | UnitError | ValueError | OSError):
            message = named_message(str(exc), args.input)
        else:
            message = (
                f"{args.input}: could not be read ({type(exc).__name__}: {exc}); the file may be damaged: "
                "re-export it, and report this message if the file opens in Nsight Compute"
            )
        log.error("%s", message)
        counters = arrow_from_columns({}, "counters", 0)
        diagnostics = pd.DataFrame(
            [{"app": args.app, "stage": "parse", "severity": "error", "source_file": args.input, "message": message}]
        )
    for message in diagnostics.loc[diagnostics["severity"] == "warning", "message"]:
        log.warning("%s", named_message(message, args.input))
    from roofline.ceilings.report_peaks import peak_columns, peaks_metadata

    # what the ceilings read of the launches, in the file's metadata: the ceilings job reads no launch
    peaks = conform_some(counters.select(peak_columns()).to_pandas(), "counters", peak_columns())
    write_arrow(counters, args.output, metadata=peaks_metadata(peaks))
    write_table(diagnostics, "diagnostics", args.diagnostics)
    return 0


if __name__ == "__main__":
    sys.exit(main())
