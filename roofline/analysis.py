"""Analysis stage: every app's counters -> one ceilings table per device -> each app's verdicts.

Every app on a device is judged against the same roof (the report source is the median over all
apps' launches on that device), so the ceilings are one job over every app's counters (of which it
reads the peaks table each parse job stored in the file's metadata, a few rows per app;
:func:`ceilings_main`), and each app is then classified in a job of its own against them (the
workflow's is :mod:`roofline.app_job`, which also writes the app's page; :func:`classify_main`
classifies alone). The workflow makes the ceilings job a checkpoint: when one app's new counters
leave the ceilings table byte-identical, only that app is classified again; when they move its
device's roof, every app is. :func:`main` does both in one process.

    python -m roofline.jobs ceilings LOG --counters data/counters/a.parquet data/counters/b.parquet \\
        --catalog roofline/data/gpus.yaml --ceilings data/ceilings/devices.parquet \\
        --ceilings-diagnostics data/diagnostics/devices.ceilings.parquet
    python -m roofline.jobs classify LOG --ceilings data/ceilings/devices.parquet \\
        --counters data/counters/a.parquet --classified data/classified/a.parquet \\
        --kernels data/kernels/a.parquet
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from concurrent.futures import ThreadPoolExecutor

import pandas as pd

from roofline.table_files import read_table, write_table

# The ceilings job imports only the ceilings' modules and an app's job only the classification's
# (imported in the functions below): each rule's code param lists its own (roofline/stage_code.py),
# so an edit to the classification reruns no ceilings job, and the reverse.


def _ceiling_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--counters", nargs="*", default=[], help="every app's counters table (none: no app)")
    parser.add_argument("--catalog", required=True, help="datasheet catalog (YAML)")
    parser.add_argument("--policy", default="report,datasheet", help="ceiling sources in order of preference")
    parser.add_argument("--device-policy", default="{}", help="JSON: device -> list of sources")
    parser.add_argument("--measured", default="", help="measured ceilings table, if any")
    parser.add_argument("--overrides", default="{}", help="JSON: catalog additions/overrides")
    parser.add_argument("--margin", type=float, default=0.25, help="cross-check margin between sources")
    parser.add_argument("--ceilings", required=True, help="the devices' ceilings table to write")
    parser.add_argument("--ceilings-diagnostics", required=True, help="its diagnostics table to write")
    parser.add_argument("--keep-joined", help="a folder where the counters files' peaks are kept between runs: a "
                        "rerun reads the footers of the files that changed only")


def classify_options(parser: argparse.ArgumentParser) -> None:
    """The classification's options, for every job that classifies (roofline.app_job too)."""
    parser.add_argument("--low-roof-fraction", type=float, default=0.1)
    parser.add_argument("--above-roof-tolerance", type=float, default=0.02)
    parser.add_argument("--annotations", default="[]", help="JSON list of compulsory-work annotations")


def _classify_arguments(parser: argparse.ArgumentParser) -> None:
    classify_options(parser)
    parser.add_argument("--classified", nargs="*", default=[], help="per app, in the order of --counters")
    parser.add_argument("--kernels", nargs="*", default=[], help="per app, in the order of --counters")


def _write_ceilings(args: argparse.Namespace) -> pd.DataFrame:
    from roofline.ceilings import device_ceilings

    ceilings, diagnostics = device_ceilings(
        args.counters, args.catalog, args.policy.split(","), json.loads(args.device_policy), args.measured,
        json.loads(args.overrides), args.margin, args.keep_joined)
    write_table(ceilings, "ceilings", args.ceilings)
    write_table(diagnostics, "diagnostics", args.ceilings_diagnostics)
    return ceilings


def _app_paths(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[tuple[str, str, str]]:
    if not len(args.counters) == len(args.classified) == len(args.kernels):
        parser.error(f"give one --classified and one --kernels path per --counters table "
                     f"({len(args.counters)}, {len(args.classified)}, {len(args.kernels)} given)")
    return list(zip(args.counters, args.classified, args.kernels))


def classify_settings(args: argparse.Namespace) -> dict:
    """The keyword options of the classification, from the arguments :func:`classify_options` added."""
    return {"low_roof_fraction": args.low_roof_fraction, "above_roof_tolerance": args.above_roof_tolerance}


def main(argv: list[str] | None = None) -> int:
    """Ceilings and every app's verdicts in one process."""
    parser = argparse.ArgumentParser(
        description="Ceilings per device, then each app's classified launches and kernels.")
    _ceiling_arguments(parser)
    _classify_arguments(parser)
    args = parser.parse_args(argv)
    apps = _app_paths(parser, args)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    ceilings = _write_ceilings(args)
    classify_apps(apps, ceilings, json.loads(args.annotations), classify_settings(args))
    return 0


def ceilings_main(argv: list[str] | None = None) -> int:
    """The ceilings job: every app's counters -> the devices' ceilings table and its diagnostics."""
    parser = argparse.ArgumentParser(description="Ceilings per device from every app's counters.")
    _ceiling_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    _write_ceilings(args)
    return 0


def classify_main(argv: list[str] | None = None) -> int:
    """A classify job: apps' counters + the devices' ceilings -> their classified launches and kernels."""
    parser = argparse.ArgumentParser(description="Classify apps' launches and kernels against the devices' ceilings.")
    parser.add_argument("--counters", nargs="*", default=[], help="the apps' counters tables")
    parser.add_argument("--ceilings", required=True, help="the devices' ceilings table (the ceilings job's)")
    _classify_arguments(parser)
    args = parser.parse_args(argv)
    apps = _app_paths(parser, args)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    classify_apps(apps, read_table(args.ceilings, "ceilings"), json.loads(args.annotations), classify_settings(args))
    return 0


def classify_app(paths: tuple[str, str, str], ceilings: pd.DataFrame, annotations: list[dict],
                 options: dict) -> pd.DataFrame:
    """One app: its counters table -> its classified launches and kernels tables; returns the
    kernels table it wrote."""
    from roofline.classify import apply_annotations, classify_launches
    from roofline.kernels import aggregate_kernels

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


def classify_apps(apps: list[tuple[str, str, str]], ceilings: pd.DataFrame, annotations: list[dict],
                  options: dict) -> None:
    """Classify every app (counters, classified, kernels paths) against the devices' ceilings, one
    after the other (the workflow runs one app per job, side by side)."""
    from roofline.classify import wide_ceilings

    ceilings = wide_ceilings(ceilings)  # once, not twice per app
    for paths in apps:
        classify_app(paths, ceilings, annotations, options)


if __name__ == "__main__":
    sys.exit(main())
