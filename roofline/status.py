"""Status stage: every diagnostics table -> ``reports/status.json``, an exit status for schedulers.

The pipeline analyses every input it can and records the rest (an unreadable report, a refused
launch quantity) in ``data/diagnostics/{app}.{stage}.parquet``; Snakemake itself succeeds. A nightly
job wants one answer: did any input fail, did a kernel regress? The nightly gate (README.md, "Exit
status for schedulers", has the table users read; docs/tracking.md the nightly command) ::

    python -m roofline.status --check reports/status.json --regressions reports/regressions.json

``--check`` exits

- 0 when every input was analysed (warnings about launches, kept but marked, never fail it);
- 1 when at least one input failed (an ``error`` diagnostic: the app has no results);
- 2 when the status file is missing or unreadable (the workflow did not finish);
- 4 (:data:`EXIT_NO_INPUT`) when no input failed but an ``inputs:`` entry gave no app: a pattern
  that matched nothing, a path that does not exist, a folder without exports (``"inputs"`` in the
  JSON), so that a night whose capture folder stayed empty does not pass green;
- 3 with ``--regressions`` when a kernel regressed tonight, or an app's total GPU time
  (:mod:`roofline.nightly.app_total`; checked after the above).

The JSON is deterministic (sorted keys, no timestamp), so an unchanged run rewrites identical bytes.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from roofline.files.atomic import atomic_output
from roofline.jobs.arguments import read_json_argument
from roofline.tables.files import read_table
from roofline.tables.schemas import conform

STATUS_VERSION = 1


def app_of(path: str | Path) -> str:
    """The app of ``data/diagnostics/{app}.{stage}.parquet`` (app names may contain dots)."""
    name = Path(path).name
    return name.rsplit(".", 2)[0] if name.count(".") >= 2 else Path(path).stem


def build_status(tables: Iterable[pd.DataFrame], apps: Iterable[str] = (), sources: Mapping[str, str] | None = None,
                 inputs: Sequence[Mapping] = ()) -> dict:
    """The status of a run from all its diagnostics tables; a pure function.

    Parameters
    ----------
    tables
        Diagnostics tables (``roofline.tables.schemas.DIAGNOSTICS`` columns), any number, any stages.
    apps
        Every application of the run, also those without any diagnostic.
    sources
        Each app's input as the config found it; shown per app as ``source``.
    inputs
        The ``inputs:`` entries that gave no app (``pattern``, ``problem``, ``fix``, ``path``;
        roofline.config.inputs.InputProblem).

    Returns
    -------
    dict
        ``ok`` (no input failed and every ``inputs:`` entry gave an app), ``counts`` (apps, failed,
        warned, errors, warnings, input_warnings), ``apps`` (per app: ``status``
        ``ok``/``warning``/``failed``, ``errors``, ``warnings``, ``source`` where known),
        ``failed`` (one entry per error: app, stage, source_file, message), ``inputs`` (as
        given, sorted), sorted, JSON-serialisable.
    """
    frames = [conform(t, "diagnostics") for t in tables]
    frames = [f for f in frames if len(f)]
    diagnostics = pd.concat(frames, ignore_index=True) if frames else conform(pd.DataFrame(), "diagnostics")
    names = sorted(set(apps) | (set(diagnostics["app"]) - {""}))
    per_app = {}
    for name in names:
        mine = diagnostics[diagnostics["app"] == name]
        errors = int((mine["severity"] == "error").sum())
        warnings = int((mine["severity"] == "warning").sum())
        per_app[name] = {
            "status": "failed" if errors else "warning" if warnings else "ok",
            "errors": errors,
            "warnings": warnings,
        }
        if sources and sources.get(name):
            per_app[name]["source"] = str(sources[name])
    errors = diagnostics[diagnostics["severity"] == "error"].sort_values(
        ["app", "stage", "source_file", "message"], kind="stable"
    )
    failed = [
        {"app": r.app, "stage": r.stage, "source_file": r.source_file, "message": r.message}
        for r in errors.itertuples(index=False)
    ]
    counts = {
        "apps": len(names),
        "failed": sum(1 for a in per_app.values() if a["status"] == "failed"),
        "warned": sum(1 for a in per_app.values() if a["status"] == "warning"),
        "errors": int((diagnostics["severity"] == "error").sum()),
        "warnings": int((diagnostics["severity"] == "warning").sum()),
        "input_warnings": len(inputs),
    }
    unmatched = sorted(({k: str(v) for k, v in dict(i).items()} for i in inputs),
                       key=lambda i: (i.get("pattern", ""), i.get("path", ""), i.get("problem", "")))
    return {"version": STATUS_VERSION, "ok": not failed and not unmatched, "counts": counts, "apps": per_app,
            "failed": failed, "inputs": unmatched}


def summary_line(status: dict) -> str:
    """One line for a log: how many apps, which failed and why (first line of each message)."""
    counts = status["counts"]
    inputs = status.get("inputs") or []
    gave_nothing = ""
    if inputs:
        listed = "; ".join(f"{i.get('problem', i.get('pattern', ''))}: {i.get('fix', '')}" for i in inputs)
        gave_nothing = f"{len(inputs)} input(s) gave no app: {listed}"
    if not status.get("failed"):
        if gave_nothing:
            return f"roofline: {counts['apps']} app(s) analysed, but {gave_nothing}"
        return f"roofline: all {counts['apps']} app(s) analysed ({counts['warnings']} warning(s))"
    failures = "; ".join(
        f"{f['app']}: {str(f['message']).splitlines()[0] if f['message'] else f['stage']}" for f in status["failed"]
    )
    line = f"roofline: {counts['failed']} of {counts['apps']} app(s) failed: {failures}"
    return f"{line}; and {gave_nothing}" if gave_nothing else line


EXIT_REGRESSION = 3
EXIT_NO_INPUT = 4


def check(path: str | Path, regressions: str | Path | None = None) -> int:
    """Exit status for a scheduler: 0 all inputs analysed, 1 an input failed, 2 no readable status,
    4 an ``inputs:`` entry gave no app, 3 (only when ``regressions`` names reports/regressions.json)
    a kernel or an app's total GPU time regressed tonight; the first that applies in this order."""
    try:
        status = json.loads(Path(path).read_text(encoding="utf-8"))
        ok = status["ok"]
        summary = summary_line(status)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        print(f"roofline: no readable status at {path} ({exc}): the workflow did not finish; rerun it", file=sys.stderr)
        return 2
    print(summary, file=sys.stderr)
    inputs = status.get("inputs") or []
    if status.get("failed") or (ok is not True and not inputs):
        return 1
    if inputs:
        return EXIT_NO_INPUT
    if regressions is not None:
        try:
            report = json.loads(Path(regressions).read_text(encoding="utf-8"))
            count = int(report["counts"]["regression"])  # kernel series and app totals alike
            totals = int(report.get("app_total_regressions") or 0)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(
                f"roofline: no readable regressions at {regressions} ({exc}): the nightly run did not finish; "
                f"rerun it (snakemake --cores 4 nightly)", file=sys.stderr
            )
            return 2
        if count:
            what = f"{count - totals} kernel(s) and {totals} app total(s)" if totals else f"{count} kernel(s)"
            print(f"roofline: {what} regressed tonight (see {regressions})", file=sys.stderr)
            return EXIT_REGRESSION
    return 0


def write_status(diagnostics_paths: Iterable[str | Path], output: str | Path, sources: Mapping[str, str] | None = None,
                 inputs: Sequence[Mapping] = ()) -> dict:
    """Read the diagnostics tables, write the status JSON atomically; return it."""
    paths = [Path(p) for p in diagnostics_paths]
    # every app has a parse table; the devices' ceilings table names no app of its own
    apps = (app_of(p) for p in paths if p.name.endswith(".parse.parquet"))
    status = build_status((read_table(p, "diagnostics") for p in paths), apps, sources, inputs)
    with atomic_output(output) as tmp:
        tmp.write_text(json.dumps(status, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write or check the run status (reports/status.json).")
    parser.add_argument("--diagnostics", nargs="*", default=[], help="data/diagnostics/*.parquet")
    parser.add_argument("--output", help="status JSON to write")
    parser.add_argument("--sources", default="{}", help="JSON: app -> its input file")
    parser.add_argument("--input-problems", default="[]", help="JSON: the inputs: entries that gave no app")
    parser.add_argument("--check", metavar="STATUS_JSON",
                        help=f"exit 1 when any input failed, {EXIT_NO_INPUT} when an inputs: entry gave no app")
    parser.add_argument(
        "--regressions", metavar="REGRESSIONS_JSON", help="with --check: also exit 3 when a kernel regressed"
    )
    args = parser.parse_args(argv)
    if args.check:
        return check(args.check, args.regressions)
    if not args.output:
        parser.error("give --output (write) or --check (read)")
    sources, problems = read_json_argument(args.sources), read_json_argument(args.input_problems)
    status = write_status(args.diagnostics, args.output, sources, problems)
    print(summary_line(status), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
