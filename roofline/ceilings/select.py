"""Ceilings stage: counters of every app -> one ceilings table per device (every source, the
selected one flagged), so that every app on a device is judged against the same roof.

Three sources, recorded in every row: ``report`` (ncu's per-unit ``peak_sustained`` x the unit's
clock measured in each launch, aggregated robustly per device), ``datasheet`` (roofline/data/gpus.yaml)
and ``measured`` (microbenchmark tables). A what-if machine's explicit peaks are source
``what-if`` and always win. The policy in config picks, per device and ceiling, the first source
in its order that has a value; a cross-check warns when sources disagree.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from roofline.ceilings import CROSS_CHECK_MARGIN
from roofline.ceilings.report_peaks import PEAK_COLUMNS as _PEAK_COLUMNS
from roofline.ceilings.report_peaks import (
    SHORT_LAUNCH_S,
    ceilings_from_samples,
    launch_clocks,
    peak_columns,
    peak_samples,
    read_peaks,
    report_ceilings,
)
from roofline.config.inputs import UNNAMED_GPU

__all__ = ["SHORT_LAUNCH_S", "DeviceCeilings", "build_ceilings", "clock_notes", "cross_check", "device_ceilings",
           "hold_at_launch_clock", "report_ceilings", "ridge_points", "select_ceilings"]
from roofline.parse.plausibility import ratio
from roofline.tables.schemas import conform

log = logging.getLogger("roofline.ceilings")

_SOURCE_ORDER = ["report", "measured", "datasheet", "what-if"]
_UNITS = {"compute": ("FLOP/s", 1e12, "T"), "memory": ("B/s", 1e9, "G")}


def no_ceiling_message(device: str) -> str:
    """What to do about a device without a roof from any source: an input that records no GPU name
    (an export's ``unnamed GPU``) needs its app's ``device:`` key; a GPU the catalog lacks, an entry."""
    if not device or device.startswith(UNNAMED_GPU):
        return (f"{device or '(unnamed device)'}: no ceiling, since the input does not record which GPU it ran "
                "on; name it with the app's device: key (apps: NAME: {report: PATH, device: \"NVIDIA "
                "A100-SXM4-80GB\"}, a name of the GPU catalog; roofline --device on the command line)")
    return (f"{device}: no ceiling from any source; add it to the catalog (config key ceilings.gpus) or collect "
            "peaks with ncu --set roofline")


def _narrow(counters: pd.DataFrame) -> pd.DataFrame:
    """Only the columns the ceilings read: row filters then copy a few columns, not all ~100."""
    return counters[[c for c in peak_columns() if c in counters.columns]]


def _defined(counters: pd.DataFrame, column: str) -> np.ndarray:
    """Row numbers of ``counters`` where ``column`` is a what-if machine's explicit peak."""
    recipe = counters.get(f"{column}_recipe")
    if recipe is None:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero((recipe == "what-if").to_numpy(dtype=bool, na_value=False))


def what_if_ceilings(counters: pd.DataFrame) -> pd.DataFrame:
    """Explicit peaks of what-if machines, one row per machine and ceiling: the first row's value
    of each machine, machines in name order."""
    rows = []
    counters = _narrow(counters)
    for (kind, name), (column, _) in _PEAK_COLUMNS.items():
        at = _defined(counters, column)
        if not len(at):
            continue
        devices = counters["device"].to_numpy(dtype=object)[at]
        named = pd.notna(devices)
        devices, values = devices[named], counters[column].to_numpy(dtype="float64", na_value=np.nan)[at][named]
        machines, first = np.unique(devices, return_index=True)
        for device, i in zip(machines, first, strict=True):
            rows.append(
                {
                    "device": device,
                    "kind": kind,
                    "name": name,
                    "value": float(values[i]),
                    "source": "what-if",
                    "citation": "what-if machine definition",
                    "launches": 0,
                }
            )
    return conform(pd.DataFrame(rows), "ceilings")


def what_if_conflicts(counters: pd.DataFrame) -> list[str]:
    """One message per what-if machine that two apps' tables define with different peaks: every
    app on it is judged against the first app's definition (:func:`what_if_ceilings`)."""
    messages = []
    if "app" not in counters.columns:
        return messages
    for (kind, name), (column, _) in _PEAK_COLUMNS.items():
        at = _defined(counters, column)
        if not len(at):
            continue
        defined: dict[str, dict[object, float]] = {}  # machine -> app -> its first definition
        for device, app, value in zip(counters["device"].to_numpy(dtype=object)[at],
                                      counters["app"].to_numpy(dtype=object)[at],
                                      counters[column].to_numpy(dtype="float64", na_value=np.nan)[at], strict=True):
            if pd.notna(device):
                defined.setdefault(device, {}).setdefault(None if pd.isna(app) else app, value)
        for device in sorted(defined):
            apps = defined[device]
            if len({value for value in apps.values() if not np.isnan(value)}) < 2:
                continue
            unit, scale, prefix = _UNITS[kind]
            listed = ", ".join(f"{app} {value / scale:.4g} {prefix}{unit}" for app, value in apps.items())
            messages.append(
                f"{device}: what-if machine defined with different {name} peaks ({listed}); every app on "
                f"it is judged against {next(iter(apps))}'s; give each definition its own machine name"
            )
    return messages


def datasheet_ceilings(devices: list[str], catalog_path: str | Path, overrides: dict | None = None) -> pd.DataFrame:
    """Catalog rows for every device that the catalog knows."""
    from roofline.ceilings.catalog import catalog_ceilings, load_catalog

    catalog = load_catalog(catalog_path, overrides or None)
    frames = [catalog_ceilings(catalog, device) for device in devices]
    frames = [f for f in frames if len(f)]
    if not frames:
        return conform(pd.DataFrame(), "ceilings")
    return conform(pd.concat(frames, ignore_index=True), "ceilings")


def measured_ceilings(path: str | Path | None) -> pd.DataFrame:
    """A measured ceilings table (CSV or Parquet with the ceilings columns), or an empty one."""
    if not path:
        return conform(pd.DataFrame(), "ceilings")
    path = Path(path)
    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    frame["source"] = "measured"
    return conform(frame, "ceilings")


def select_ceilings(
    candidates: pd.DataFrame, policy: list[str], device_policy: dict[str, list[str]] | None = None
) -> pd.DataFrame:
    """Flag, per (device, kind, name), the row of the first source in the policy order.

    What-if machine peaks are always selected: the table defined the machine.
    """
    device_policy = device_policy or {}
    frame = candidates.copy().reset_index(drop=True)
    if frame.empty:
        return conform(frame, "ceilings")

    def rank(device: str, source: str) -> float:
        order = ["what-if", *device_policy.get(device, policy)]
        return float(order.index(source)) if source in order else np.inf

    frame["_rank"] = [rank(d, s) for d, s in zip(frame["device"], frame["source"])]
    eligible = frame[np.isfinite(frame["_rank"])]
    best = eligible.sort_values("_rank", kind="stable").groupby(["device", "kind", "name"]).head(1).index
    frame["selected"] = frame.index.isin(best)
    return conform(frame.drop(columns="_rank"), "ceilings")


# Report and datasheet compute roofs of one class agree per clock within this (docs/ceilings.md).
PER_CLOCK_TOLERANCE = 0.05
# The citation of a compute roof that stays at the clock its source assumes (clock_notes finds it),
# and of one on a device of what-if kernels only, which ran at no clock (nothing to bring it to).
NOT_HELD = "not brought to the launches' clock"
AT_SOURCE_CLOCK = "at its source's clock: what-if kernels, no measured clock"


def hold_at_launch_clock(candidates: pd.DataFrame, clocks: pd.Series, measured: Collection[str] = ()) -> pd.DataFrame:
    """Every compute candidate held at the SM clock its device's launches ran at (``clocks``:
    device -> Hz, :func:`roofline.ceilings.report_peaks.launch_clocks`), so that one device's compute roofs
    share the clock its performance was measured at; ``per_clock`` filled for every row with a clock.

    A compute roof is a per-clock rate x a clock: ``value / clock_hz x`` the launches' clock (ncu's
    locked base clock by default, where vendors quote the boost clock). A device without a clock
    reading is held at its report roofs' clock; without either, datasheet and measured roofs keep
    their own clocks. On a device of ``measured`` launches (a CSV export with no clock reading) their
    citation says so (:data:`NOT_HELD`); the kernels of a what-if table ran at no clock, and are
    judged at the vendor's. Memory roofs keep their own clocks: DRAM bandwidth does not follow the SM
    clock (the report's DRAM peaks at base clock match the datasheets within ~1 %). What-if peaks
    are definitions, at no clock.
    """
    frame = candidates.copy()
    if frame.empty:
        frame["per_clock"] = pd.Series(dtype="float64")
        return conform(frame, "ceilings")
    frame["per_clock"] = frame["value"] / frame["clock_hz"]
    compute = frame["kind"] == "compute"
    report_clock = frame[compute & (frame["source"] == "report")].groupby("device")["clock_hz"].median()
    held = frame["device"].map(clocks.dropna()).fillna(frame["device"].map(report_clock))
    held = held.to_numpy(dtype="float64", na_value=np.nan)
    given = frame["clock_hz"].to_numpy(dtype="float64", na_value=np.nan)
    values = frame["value"].to_numpy(dtype="float64", na_value=np.nan, copy=True)
    clocks_hz = given.copy()
    citations = frame["citation"].tolist()
    sources, devices, names = (frame[c].tolist() for c in ("source", "device", "name"))
    for i in np.flatnonzero(compute & (frame["source"] != "what-if")):
        clock, target, value = given[i], held[i], float(values[i])
        if not (np.isfinite(target) and target > 0) or not (np.isfinite(clock) and clock > 0):
            if sources[i] != "report" and devices[i] in measured:
                why = "no SM clock reading in its launches" if not np.isfinite(target) else "no clock given with it"
                at = f"it stays at {clock / 1e6:.0f} MHz" if np.isfinite(clock) else "its clock is unknown"
                citations[i] += f"; {NOT_HELD} ({why}): {at}"
            elif sources[i] != "report":
                citations[i] += f"; {AT_SOURCE_CLOCK}"
            continue
        if target == clock:
            continue
        unit = "OP" if names[i].startswith("tensor_int8") else "FLOP"
        citations[i] += (f"; held at {target / 1e6:.0f} MHz, the launches' SM clock: {value / 1e12:.4g} T{unit}/s at "
                         f"{clock / 1e6:.0f} MHz = {value / clock:,.0f} {unit}/cycle x {target / 1e6:.0f} MHz")
        values[i], clocks_hz[i] = value / clock * target, target
    frame["value"], frame["clock_hz"], frame["citation"] = values, clocks_hz, citations
    return conform(frame, "ceilings")


# A device whose launches' SM clocks spread wider than this (max/min) was not held at one clock
# (ncu --clock-control none): its roofs at the median clock misjudge the launches far from it.
CLOCK_SPREAD_NOTED = 1.10


def clock_notes(ceilings: pd.DataFrame) -> list[str]:
    """One message per device whose selected compute roofs could not all be held at the clock its
    launches ran at (:func:`hold_at_launch_clock`): a percentage of such a roof mixes two clocks; and
    one per device whose launches ran at clocks too far apart to share one roof (the report's compute
    peaks, per cycle the same, spread as the clocks do)."""
    held = ceilings[ceilings["selected"] & (ceilings["kind"] == "compute")
                    & ceilings["citation"].str.contains(NOT_HELD, regex=False)]
    messages = []
    for device, group in held.groupby("device"):
        clocks = group["clock_hz"].to_numpy(dtype="float64", na_value=np.nan)
        at = sorted({f"{c / 1e6:.0f} MHz" if np.isfinite(c) else "an unknown clock" for c in clocks})
        messages.append(
            f"{device}: {len(group)} compute roof(s) ({', '.join(sorted(set(group['source'])))}: "
            f"{', '.join(group['name'])}) stay at {' and '.join(at)}, {NOT_HELD}: its launches carry no SM clock "
            "reading (sm__cycles_elapsed.avg.per_second) or the roof no clock. ncu locks the base clock by "
            "default, so a launch's percentage of these roofs can read low; capture the SM clock (e.g. --set "
            "roofline) to have them held at the clock the launches ran at"
        )
    report = ceilings[ceilings["selected"] & (ceilings["kind"] == "compute") & (ceilings["source"] == "report")]
    for device, group in report.groupby("device"):
        spread = float(group["spread"].max())
        if not spread > CLOCK_SPREAD_NOTED:
            continue
        clock = float(group["clock_hz"].median())
        messages.append(
            f"{device}: its launches ran at SM clocks {spread:.2f}x apart (the report's compute peaks, the same "
            f"per cycle, spread as much): the clocks were not locked (ncu --clock-control none?). Its roofs are "
            f"held at the median {clock / 1e6:.0f} MHz, so a launch at another clock reads up to "
            f"{100 * (spread - 1):.0f} % off its true share of the roof; capture with ncu's default "
            "--clock-control base to judge every launch at one clock"
        )
    return messages


def cross_check(ceilings: pd.DataFrame, margin: float) -> list[str]:
    """Warnings, with numbers, where two sources of one ceiling differ by more than ``margin``.

    Compute roofs of the report and the datasheet are compared per clock (``value / clock_hz``): the
    report's is ncu's per-cycle peak at the clock measured under its clock control, the datasheet's
    the vendor's at the boost clock. Agreement per clock means the clock explains the gap (no
    warning); a gap near 2x per clock is a counting-convention gap (half2 FP16, dense vs sparse,
    ops vs FMA), named as such.
    """
    warnings = []
    for (device, kind, name), group in ceilings.groupby(["device", "kind", "name"]):
        if group["source"].nunique() < 2:
            continue
        values = dict(zip(group["source"], group["value"]))
        clocks = dict(zip(group["source"], group["clock_hz"]))
        sources = sorted(values, key=_SOURCE_ORDER.index)
        for i, a in enumerate(sources):
            for b in sources[i + 1 :]:
                between = ratio(values[a], values[b])
                if not between > 0:
                    continue  # a value of 0 or none: nothing to compare (parse refuses a 0 roof)
                unit, scale, prefix = _UNITS[kind]
                message = (
                    f"{device}: {name} ceiling from {a} is {values[a] / scale:.3g} {prefix}{unit}, "
                    f"from {b} {values[b] / scale:.3g} {prefix}{unit} (ratio {between:.2f})"
                )
                per_clock = between * ratio(clocks.get(b, np.nan), clocks.get(a, np.nan))
                if kind == "compute" and np.isfinite(per_clock) and per_clock > 0:
                    clock_text = (
                        f"; at {clocks[a] / 1e6:.0f} MHz ({a}) and {clocks[b] / 1e6:.0f} MHz ({b}) "
                        f"the ratio per clock is {per_clock:.2f}"
                    )
                    if abs(per_clock - 1) <= PER_CLOCK_TOLERANCE:
                        continue  # the clock explains the gap
                    if min(abs(per_clock - 2), abs(per_clock - 0.5) * 2) <= 0.2:
                        warnings.append(
                            message + clock_text + ": a factor 2 per clock is a counting-convention gap "
                            "(FP16 half2 vs scalar, dense vs 2:4 sparse, one op per FMA vs per FLOP), not a "
                            "clock difference; check the catalog value against docs/metrics.md"
                        )
                    else:
                        warnings.append(message + clock_text + ": check the catalog entry and the recipe")
                elif abs(between - 1) > margin:
                    warnings.append(message)
    return warnings


def build_ceilings(
    counters: pd.DataFrame,
    catalog_path: str | Path,
    policy: list[str],
    device_policy: dict[str, list[str]] | None = None,
    measured: str | Path | None = None,
    overrides: dict | None = None,
) -> pd.DataFrame:
    """All candidate ceilings for the devices of ``counters``, the selected ones flagged."""
    devices = sorted(d for d in counters["device"].dropna().unique() if d)
    counters = _narrow(counters)
    ran = counters[counters["source_format"] != "what-if"]
    samples = peak_samples(ran)
    return _selected([ceilings_from_samples(samples), what_if_ceilings(counters)],
                     (launch_clocks(samples), set(ran["device"].dropna().unique())), devices, catalog_path, policy,
                     device_policy, measured, overrides)


def _selected(parts: list[pd.DataFrame], clocks: tuple[pd.Series, Collection[str]], devices: list[str],
              catalog_path: str | Path, policy: list[str], device_policy: dict[str, list[str]] | None,
              measured: str | Path | None, overrides: dict | None) -> pd.DataFrame:
    """The report's and what-if ``parts``, the catalog's and the measured rows of ``devices``, held
    at the launches' ``clocks`` (per device, and the devices of measured launches:
    :func:`hold_at_launch_clock`) and selected."""
    parts = [*parts, datasheet_ceilings(devices, catalog_path, overrides)]
    measured_rows = measured_ceilings(measured)
    parts.append(measured_rows[measured_rows["device"].isin(devices)])
    parts = [p for p in parts if len(p)]
    candidates = pd.concat(parts, ignore_index=True) if parts else conform(pd.DataFrame(), "ceilings")
    return select_ceilings(hold_at_launch_clock(candidates, *clocks), policy, device_policy)


def ridge_points(ceilings: pd.DataFrame) -> pd.DataFrame:
    """Ridge point (FLOP/B) per device, compute class and memory level, from selected ceilings."""
    selected = ceilings[ceilings["selected"]]
    compute = selected[selected["kind"] == "compute"][["device", "name", "value"]]
    memory = selected[selected["kind"] == "memory"][["device", "name", "value"]]
    pairs = compute.merge(memory, on="device", suffixes=("_compute", "_memory"))
    pairs["ridge"] = pairs["value_compute"] / pairs["value_memory"]
    return pairs.rename(columns={"name_compute": "compute_class", "name_memory": "level"})[
        ["device", "compute_class", "level", "ridge"]
    ]


class DeviceCeilings(NamedTuple):
    """The ceilings job's result: every device's ceilings, the diagnostics they raise, and the
    devices each app ran on (so that each app can be given the roofs of its own devices only)."""

    ceilings: pd.DataFrame
    diagnostics: pd.DataFrame
    app_devices: dict[str, tuple[str, ...]]


def device_ceilings(
    counter_paths: list[str],
    catalog: str | Path,
    policy: list[str],
    device_policy: dict | None = None,
    measured: str | Path | None = None,
    overrides: dict | None = None,
    margin: float = CROSS_CHECK_MARGIN,
    keep_joined: str | Path | None = None,
) -> DeviceCeilings:
    """One ceilings table for every device of the apps whose counters tables are given, and the
    diagnostics it raises (sources that disagree, devices with no ceiling from any source).
    ``keep_joined``: a folder where the files' peaks are kept between calls (a rerun reads those
    of the files that changed only)."""
    # each file's peaks table from its metadata (a file without: its launches, a batch of files at a time)
    inputs = read_peaks(counter_paths, keep_joined)
    ceilings = _selected([ceilings_from_samples(inputs.samples), what_if_ceilings(inputs.what_if)],
                         (launch_clocks(inputs.samples), inputs.measured), [d for d in inputs.devices if d],
                         catalog, policy, device_policy, measured or None, overrides)
    messages = cross_check(ceilings, margin) + what_if_conflicts(inputs.what_if) + clock_notes(ceilings)
    for device in sorted(set(inputs.devices) - set(ceilings.loc[ceilings["selected"], "device"])):
        messages.append(no_ceiling_message(device))
    for message in messages:
        log.warning("%s", message)
    diagnostics = pd.DataFrame(
        {"app": "", "stage": "ceilings", "severity": "warning", "source_file": "", "message": messages}
    )
    return DeviceCeilings(ceilings, conform(diagnostics, "diagnostics"), inputs.app_devices)
