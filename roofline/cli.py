"""The ``roofline`` console command: the stages run in-process on a few files, without Snakemake.

``roofline show FILE...`` prints the classified kernels as a text table, highest priority first;
``roofline report FILE... -o out.html`` writes the offline summary page (and a page per app).
A file that cannot be analysed gets one line on stderr; the others are still shown, and the exit
status is 1.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from roofline import inputs
from roofline.metrics import MEMORY_LEVELS
from roofline.schemas import conform

DEFAULT_CATALOG = Path(__file__).resolve().parent.parent / "config" / "gpus.yaml"
DEFAULT_POLICY = "report,datasheet"
SHOW_COLUMNS = ["kernel", "app", "device", "bound", "% roof", "time share", "AI [FLOP/B]", "performance"]


def app_name(path: str | Path, taken: set[str]) -> str:
    """The app name of an input (roofline.inputs.app_name, as the workflow names it), made unique
    against ``taken`` with ``-2``, ``-3``, ..."""
    return inputs.unique_name(inputs.app_name(path), taken)


def app_names(paths: Sequence[str]) -> list[str]:
    """The app name of each file, in the order given (a later file with the same name gets ``-2``)."""
    names: list[str] = []
    for path in paths:
        names.append(app_name(path, set(names)))
    return names


def analyse(path: str | Path, app: str, catalog: str | Path, policy: list[str]) -> tuple[pd.DataFrame, ...]:
    """Run parse -> ceilings -> classify on one input; returns (kernels, ceilings, diagnostics)."""
    kernels, ceilings, diagnostics, errors = analyse_all([str(path)], catalog, policy, names=[app])
    if errors:
        raise ValueError(errors[0].split(": ", 2)[-1])
    return kernels, ceilings, diagnostics


def analyse_all(
    paths: Sequence[str], catalog: str | Path, policy: list[str], names: Sequence[str] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, list[str]]:
    """Analyse every file against one ceilings table per device (as the workflow does); a failing
    file becomes an error row and a message, the rest go on."""
    from roofline.ceilings import build_ceilings
    from roofline.classify import aggregate_kernels
    from roofline.config import input_kind
    from roofline.parse import diagnostics_for, parse_input

    counters, diagnostics, errors = [], [], []
    for path, app in zip(paths, names or app_names(paths)):
        try:
            # the workflow's judgement of a file a pattern found: the same message, naming the fix
            problem = inputs.file_problem(path) if os.path.lexists(path) and not os.path.isdir(path) else ""
            if problem:
                raise ValueError(problem)
            frame = parse_input(path, app, input_kind(str(path)))
            if frame.empty:
                raise ValueError("no kernel launches in the file")
        except Exception as exc:  # one bad input must not stop the others
            kind = "" if isinstance(exc, (ValueError, OSError)) else f"{type(exc).__name__}: "
            message = f"{kind}{exc}".strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            message = message.removeprefix(f"{path}: ")
            errors.append(f"roofline: {path}: {message}")
            diagnostics.append(
                conform(
                    pd.DataFrame(
                        [
                            {
                                "app": app,
                                "stage": "cli",
                                "severity": "error",
                                "source_file": str(path),
                                "message": message,
                            }
                        ]
                    ),
                    "diagnostics",
                )
            )
            continue
        counters.append(frame)
        diagnostics.append(conform(diagnostics_for(frame, app), "diagnostics"))

    def cat(frames: list[pd.DataFrame], table: str) -> pd.DataFrame:
        frames = [f for f in frames if len(f)]
        return conform(pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(), table)

    if not counters:
        return cat([], "kernels"), cat([], "ceilings"), cat(diagnostics, "diagnostics"), errors
    everything = cat(counters, "counters")
    ceilings = build_ceilings(everything, catalog, policy)
    kernels = aggregate_kernels(everything, ceilings)
    return kernels, ceilings, cat(diagnostics, "diagnostics"), errors


def show_table(kernels: pd.DataFrame) -> str:
    """The kernels as a plain text table, highest priority first."""
    from roofline.chart import si

    k = kernels.sort_values(["priority", "duration_s"], ascending=False, na_position="last")
    rows = []
    for r in k.to_dict("records"):
        level = r["binding_level"] if r["binding_level"] in MEMORY_LEVELS else "dram"
        measured = np.isfinite(r["performance"])
        rows.append(
            [
                r["kernel_short"],
                r["app"],
                r["device"],
                r["bound"],
                f"{r['roof_pct']:.1f} %" if np.isfinite(r["roof_pct"]) else "-",
                f"{100 * r['time_share']:.1f} %" if np.isfinite(r["time_share"]) else "-",
                f"{r[f'ai_{level}']:.3g} ({level})" if np.isfinite(r[f"ai_{level}"]) else "-",
                si(r["performance"], "FLOP/s")
                if measured
                else (f"{si(r['attainable'], 'FLOP/s')} predicted" if np.isfinite(r["attainable"]) else "-"),
            ]
        )
    widths = [max(len(h), *(len(str(row[i])) for row in rows)) for i, h in enumerate(SHOW_COLUMNS)]
    widths[0] = min(widths[0], 60)

    def line(cells: list[str]) -> str:
        text = [
            str(c)[: widths[0] - 1] + "…" if i == 0 and len(str(c)) > widths[0] else str(c) for i, c in enumerate(cells)
        ]
        return "  ".join(t.ljust(w) if i < 4 else t.rjust(w) for i, (t, w) in enumerate(zip(text, widths))).rstrip()

    return "\n".join([line(SHOW_COLUMNS), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="roofline", description="Hierarchical roofline of Nsight Compute profiles.")
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("files", nargs="+", metavar="FILE", help=".ncu-rep, ncu CSV export or what-if table")
    common.add_argument("--catalog", default=str(DEFAULT_CATALOG), help="GPU datasheet catalog (YAML)")
    common.add_argument("--policy", default=DEFAULT_POLICY, help="ceiling sources in order of preference")
    sub.add_parser("show", parents=[common], help="print the classified kernels as a table")
    report = sub.add_parser("report", parents=[common], help="write the offline HTML summary")
    report.add_argument("-o", "--output", required=True, help="summary page, e.g. reports/summary.html")
    report.add_argument("--apps-dir", help="per-app pages (default: apps/ next to the summary)")
    report.add_argument("--title", default="Roofline summary")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="roofline: %(levelname)s %(name)s: %(message)s")

    kernels, ceilings, diagnostics, errors = analyse_all(args.files, args.catalog, args.policy.split(","))
    for message in errors:
        print(message, file=sys.stderr)
    if args.command == "show":
        if len(kernels):
            print(show_table(kernels))
    else:
        from roofline.report import write_pages

        output = Path(args.output)
        apps_dir = Path(args.apps_dir) if args.apps_dir else output.parent / "apps"
        sources = dict(zip(app_names(args.files), args.files))
        write_pages(kernels, ceilings, diagnostics, output, apps_dir, args.title, sources=sources)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
