"""Status stage: every diagnostics table -> ``reports/status.json``, an exit status for schedulers.

The pipeline analyses every input it can and records the rest (an unreadable report, a refused
launch quantity) in ``data/diagnostics/{app}.{stage}.parquet``; Snakemake itself succeeds. A nightly
job wants one answer: did any input fail? ::

    snakemake --cores 4 && python -m roofline.status --check reports/status.json

``--check`` exits 0 when every input was analysed, 1 when at least one input failed (an ``error``
diagnostic: the app has no results), and 2 when the status file is missing or unreadable (the
workflow did not finish). Warnings (launches kept but marked) never fail the check.

The JSON is deterministic (sorted keys, no timestamp), so an unchanged run rewrites identical bytes.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from roofline.schemas import atomic_output, conform, read_table

STATUS_VERSION = 1


def app_of(path: str | Path) -> str:
    """The app of ``data/diagnostics/{app}.{stage}.parquet`` (app names may contain dots)."""
    name = Path(path).name
    return name.rsplit(".", 2)[0] if name.count(".") >= 2 else Path(path).stem


def build_status(tables: Iterable[pd.DataFrame], apps: Iterable[str] = ()) -> dict:
    """The status of a run from all its diagnostics tables; a pure function.

    Parameters
    ----------
    tables
        Diagnostics tables (``roofline.schemas.DIAGNOSTICS`` columns), any number, any stages.
    apps
        Every application of the run, also those without any diagnostic.

    Returns
    -------
    dict
        ``ok`` (no input failed), ``counts`` (apps, failed, warned, errors, warnings), ``apps``
        (per app: ``status`` ``ok``/``warning``/``failed``, ``errors``, ``warnings``), ``failed``
        (one entry per error: app, stage, source_file, message), sorted, JSON-serialisable.
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
    }
    return {"version": STATUS_VERSION, "ok": not failed, "counts": counts, "apps": per_app, "failed": failed}


def summary_line(status: dict) -> str:
    """One line for a log: how many apps, which failed and why (first line of each message)."""
    counts = status["counts"]
    if status["ok"]:
        return f"roofline: all {counts['apps']} app(s) analysed ({counts['warnings']} warning(s))"
    failures = "; ".join(
        f"{f['app']}: {str(f['message']).splitlines()[0] if f['message'] else f['stage']}" for f in status["failed"]
    )
    return f"roofline: {counts['failed']} of {counts['apps']} app(s) failed: {failures}"


EXIT_REGRESSION = 3


def check(path: str | Path, regressions: str | Path | None = None) -> int:
    """Exit status for a scheduler: 0 all inputs analysed, 1 an input failed, 2 no readable status,
    3 (only when ``regressions`` names reports/regressions.json) a kernel regressed tonight."""
    try:
        status = json.loads(Path(path).read_text(encoding="utf-8"))
        ok = status["ok"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"roofline: no readable status at {path} ({exc}): the workflow did not finish; rerun it", file=sys.stderr)
        return 2
    print(summary_line(status), file=sys.stderr)
    if ok is not True:
        return 1
    if regressions is not None:
        try:
            count = int(json.loads(Path(regressions).read_text(encoding="utf-8"))["counts"]["regression"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(
                f"roofline: no readable regressions at {regressions} ({exc}); run the nightly target", file=sys.stderr
            )
            return 2
        if count:
            print(f"roofline: {count} kernel(s) regressed tonight (see {regressions})", file=sys.stderr)
            return EXIT_REGRESSION
    return 0


def write_status(diagnostics_paths: Iterable[str | Path], output: str | Path) -> dict:
    """Read the diagnostics tables, write the status JSON atomically; return it."""
    paths = [Path(p) for p in diagnostics_paths]
    # every app has a parse table; the devices' ceilings table names no app of its own
    apps = (app_of(p) for p in paths if p.name.endswith(".parse.parquet"))
    status = build_status((read_table(p, "diagnostics") for p in paths), apps)
    with atomic_output(output) as tmp:
        tmp.write_text(json.dumps(status, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write or check the run status (reports/status.json).")
    parser.add_argument("--diagnostics", nargs="*", default=[], help="data/diagnostics/*.parquet")
    parser.add_argument("--output", help="status JSON to write")
    parser.add_argument("--check", metavar="STATUS_JSON", help="exit 1 when any input failed, 0 otherwise")
    parser.add_argument(
        "--regressions", metavar="REGRESSIONS_JSON", help="with --check: also exit 3 when a kernel regressed"
    )
    args = parser.parse_args(argv)
    if args.check:
        return check(args.check, args.regressions)
    if not args.output:
        parser.error("give --output (write) or --check (read)")
    status = write_status(args.diagnostics, args.output)
    print(summary_line(status), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
