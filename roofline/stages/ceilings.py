"""The ceilings stage (checkpoint ``ceilings``): every app's counters -> one ceilings table per device,
and each app's share of it.

Every app on a device is judged against the same roof (the report source is the median over all
apps' launches on that device), so the ceilings are one job over every app's counters, of which it
reads the peaks table each parse job stored in the file's metadata (a few rows per app). The
workflow makes it a checkpoint, and each app's classification reads its own share of the table
(the rows of its devices), rewritten only when it changes: when one app's new counters move no
roof, only that app is classified again; when they move its device's roof, the apps on that
device are.

    python -m roofline.jobs ceilings LOG --counters data/counters/a.parquet data/counters/b.parquet \\
        --catalog roofline/data/gpus.yaml --ceilings data/ceilings/devices.parquet \\
        --ceilings-diagnostics data/diagnostics/devices.ceilings.parquet \\
        --app-ceilings data/ceilings/apps
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import pandas as pd

from roofline.ceilings import CROSS_CHECK_MARGIN, DEFAULT_POLICY
from roofline.ceilings.select import device_ceilings
from roofline.files.atomic import write_bytes_atomic
from roofline.tables.files import table_bytes, write_table


def _ceiling_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--counters", nargs="*", default=[], help="every app's counters table (none: no app)")
    parser.add_argument("--catalog", required=True, help="datasheet catalog (YAML)")
    parser.add_argument("--policy", default=",".join(DEFAULT_POLICY), help="ceiling sources in order of preference")
    parser.add_argument("--device-policy", default="{}", help="JSON: device -> list of sources")
    parser.add_argument("--measured", default="", help="measured ceilings table, if any")
    parser.add_argument("--overrides", default="{}", help="JSON: catalog additions/overrides")
    parser.add_argument("--margin", type=float, default=CROSS_CHECK_MARGIN, help="cross-check margin between sources")
    parser.add_argument("--ceilings", required=True, help="the devices' ceilings table to write")
    parser.add_argument("--ceilings-diagnostics", required=True, help="its diagnostics table to write")
    parser.add_argument("--app-ceilings", help="a folder where each app's share of the ceilings (the rows of its "
                        "devices) is kept, named as its counters file, and rewritten only when it changes")
    parser.add_argument("--keep-joined", help="a folder where the counters files' peaks are kept between runs: a "
                        "rerun reads the footers of the files that changed only")


def _write_ceilings(args: argparse.Namespace) -> pd.DataFrame:
    ceilings, diagnostics, app_devices = device_ceilings(
        args.counters, args.catalog, args.policy.split(","), json.loads(args.device_policy), args.measured,
        json.loads(args.overrides), args.margin, args.keep_joined)
    write_table(ceilings, "ceilings", args.ceilings)
    write_table(diagnostics, "diagnostics", args.ceilings_diagnostics)
    if args.app_ceilings:
        write_app_ceilings(ceilings, app_devices, [Path(path).stem for path in args.counters], args.app_ceilings)
    return ceilings


def write_app_ceilings(ceilings: pd.DataFrame, app_devices: dict[str, tuple[str, ...]], apps: list[str],
                       folder: str | Path) -> None:
    """Each app's share of the ceilings, ``FOLDER/APP.parquet`` (the rows of the devices it ran on),
    which is what its classification reads, written only where its bytes change: a roof that moves
    on one device then dates the shares of that device's apps only, and Snakemake (which judges by
    dates) reruns just their classification. The folder is no declared output of the job, so that
    Snakemake neither removes nor records it (one record per app, each listing every app's counters,
    would cost more than the job). Apps on the same devices get the same bytes, encoded once."""
    strangers = sorted(set(app_devices) - set(apps))
    if strangers:  # a share named after no app would leave that app's classification without roofs
        raise ValueError(f"the counters name apps {', '.join(strangers[:5])} that no counters file is named after "
                         f"({', '.join(apps[:5])}...): each app's counters must be data/counters/APP.parquet; "
                         "rerun the parse jobs (snakemake --forcerun parse)")
    encoded: dict[tuple[str, ...], bytes] = {}
    for app in apps:
        devices = app_devices.get(app, ())
        if devices not in encoded:
            encoded[devices] = table_bytes(ceilings[ceilings["device"].isin(devices)].reset_index(drop=True),
                                           "ceilings")
        path = Path(folder) / f"{app}.parquet"
        if not path.is_file() or path.read_bytes() != encoded[devices]:
            write_bytes_atomic(path, encoded[devices])


def main(argv: list[str] | None = None) -> int:
    """The ceilings job: every app's counters -> the devices' ceilings table and its diagnostics."""
    parser = argparse.ArgumentParser(description="Ceilings per device from every app's counters.")
    _ceiling_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    _write_ceilings(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
