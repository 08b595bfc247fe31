"""Nightly tracking: tonight's kernels -> history store -> decisions -> regressions.json + trends.html.

:func:`track` appends the night (idempotent), judges every kernel series from the stored decision
state and tonight's rows (:func:`roofline.nightly.state.update`: every night again when the rule or
its parameters changed, or on a replay) and returns the machine-readable findings; :func:`write_trends_page`
draws the trends page of the last nights (:mod:`roofline.pages.trends`; offline, with the Vega bundle
``assets/vega-bundle.js`` beside it). The workflow runs them as the stages ``track_history`` and
``trends_page`` (:mod:`roofline.stages`), the second waiting for the summary's device charts.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from roofline.metrics.quantities import MEMORY_LEVELS
from roofline.nightly.params import DecisionParams
from roofline.nightly.state import update
from roofline.nightly.store import CONTEXT, DECISION_COLUMNS, append_run, read_decisions, read_run
from roofline.nightly.summary import summarize
from roofline.tables.reads import read_tables
from roofline.tables.schemas import KERNEL_KEY

log = logging.getLogger("roofline.track")

EXIT_REGRESSION = 3
TREND_NIGHTS = 90  # nights on the trends page: a fixed window, however long the history
# What the trends page reads of the nights before tonight; of tonight's records, the noise too (its
# health list). The page drawn in the judging's process, from tonight's records in memory with
# every column, is the same page (tests/nightly/test_track.py).
TREND_COLUMNS = [*KERNEL_KEY, "kernel_short", "run_id", "run_date", "label", "value_s", "baseline_s",
                 "lower_s", "upper_s", "ratio", "z", "note", "time_share", "previous_kernel", "previous_grid",
                 "previous_block"]
TONIGHT_COLUMNS = [*TREND_COLUMNS, "noise_s"]
# ---------------------------------------------------------------------------------------- inputs
def load_context(values: Sequence[str] = ()) -> dict:
    """Merge run contexts: ``$ROOFLINE_RUN_CONTEXT`` (a JSON file), then each value in order.

    A value is inline JSON (starting with ``{``) or the path of a JSON file.

    Raises
    ------
    ValueError
        If a value is neither a JSON object nor a readable JSON file.
    """
    sources = [os.environ["ROOFLINE_RUN_CONTEXT"]] if os.environ.get("ROOFLINE_RUN_CONTEXT") else []
    context: dict = {}
    for value in [*sources, *values]:
        try:
            text = value if value.lstrip()[:1] in ("{", "[") else Path(value).read_text()
            data = json.loads(text)
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"run context {value[:80]!r}: not a JSON object or file ({exc})") from None
        if not isinstance(data, dict):
            raise ValueError(f"run context {value[:80]!r}: expected a JSON object")
        devices = {**context.get("devices", {}), **data.pop("devices", {})}
        context.update(data)
        if devices:
            context["devices"] = devices
    return context


def observed_context(counters: pd.DataFrame) -> dict:
    """Per device, what the reports themselves say: the median SM clock [Hz] of its launches and
    their most frequent ncu version (the first in text order of a tie), by device name.

    ``device`` and ``ncu_version`` may be categoricals (as :func:`roofline.tables.reads.read_columns`
    reads them with ``categories``): a thousand apps' launches are millions of rows, whose texts
    would cost seconds to compare."""
    devices = {}
    for device, group in counters.groupby("device", observed=True, sort=False):
        entry = {"sm_clock_hz": float(group["sm_clock_hz"].median())}
        counts = group["ncu_version"].value_counts(sort=False)
        counts = counts[(counts > 0) & (counts.index.astype(str) != "")]
        if len(counts):
            entry["ncu_version"] = min(str(v) for v in counts.index[counts == counts.max()])
        devices[str(device)] = {k: v for k, v in entry.items() if v == v}
    return {"devices": dict(sorted(devices.items()))}


def with_observed(context: dict, observed: dict) -> dict:
    """``context`` with observed per-device values where the context gives none."""
    devices = dict(context.get("devices", {}))
    for device, values in observed.get("devices", {}).items():
        given = devices.get(device, {})
        devices[device] = {**{k: v for k, v in values.items() if not context.get(k)}, **given}
    return {**context, "devices": devices}


# ------------------------------------------------------------------------------------------- CLI
def track(kernels: pd.DataFrame, store: str | os.PathLike, run_id: str, context: Mapping,
          params: DecisionParams, *, replay: bool = False,
          trend_nights: int = TREND_NIGHTS) -> tuple[pd.DataFrame, dict]:
    """Append tonight, decide every series; return the trends page's decisions and tonight's summary.

    :func:`judge` then :func:`page_decisions`, in one process (the workflow runs them as two jobs,
    so that judging does not wait for the report).
    """
    order, summary, tonight = judge(kernels, store, run_id, context, params, replay)
    return page_decisions(store, order, summary, trend_nights, tonight), summary


def judge(kernels: pd.DataFrame, store: str | os.PathLike, run_id: str, context: Mapping,
          params: DecisionParams, replay: bool = False) -> tuple[list[str], dict, pd.DataFrame | None]:
    """Append tonight, decide every series; return the judged nights in run order, tonight's summary
    (the content of regressions.json) and tonight's decisions as stored (None for a night without
    kernels).

    Tonight is judged from the stored decision state and tonight's rows, so its cost does not grow
    with the history; ``replay`` judges every night again (after a rule change; automatic when the
    parameters or the rule's code changed). A night without any kernel (every input pattern found
    nothing: ``roofline.status --check`` says so) is not recorded: the store keeps the nights that
    ran, and the summary counts nothing.
    """
    recorded = not kernels.empty
    if recorded:
        append_run(store, run_id, kernels, context)
    return judge_recorded(store, run_id, context, params, recorded, replay)


def judge_recorded(store: str | os.PathLike, run_id: str, context: Mapping, params: DecisionParams,
                   recorded: bool, replay: bool = False) -> tuple[list[str], dict, pd.DataFrame | None]:
    """:func:`judge` once tonight's kernels are in the store (``recorded``; False for a night without
    kernels): the tracking job lets go of its kernels frame first, which at a thousand apps is about
    a third of its memory when the decision state is built."""
    if not recorded:
        done = update(store, params, replay=replay)
        nothing = pd.DataFrame(columns=DECISION_COLUMNS)
        return done.order, summarize(nothing, {**dict(context), "run_id": run_id}, params), None
    done = update(store, params, changed=[run_id], replay=replay)
    tonight = read_decisions(store, [run_id])
    wanted = [c.name for c in CONTEXT if c.name != "context_json"] + ["convention"]
    night = read_run(store, run_id, [*KERNEL_KEY, *wanted])
    stored = night.sort_values(KERNEL_KEY, kind="stable").iloc[0][wanted].to_dict()
    return done.order, summarize(tonight, {**stored, "run_id": run_id}, params), tonight


def page_decisions(store: str | os.PathLike, order: list[str], summary: Mapping,
                   trend_nights: int = TREND_NIGHTS, tonight: pd.DataFrame | None = None) -> pd.DataFrame:
    """The decisions the trends page draws: those of the last ``trend_nights`` judged nights up to
    the summary's night (tonight's with :data:`TONIGHT_COLUMNS`; ``tonight``: them, when already in
    memory), or of the last ones when that night had no kernel. ``order``: the judged nights in run order
    (:func:`judge`, or :func:`roofline.nightly.state.judged_order` in a later job)."""
    run_id = summary["run_id"]
    if not summary["kernels"]:
        return _page_decisions(store, order[-trend_nights:], None)
    if run_id not in order:
        raise ValueError(f"the history store {store} has no judged night {run_id!r}: run the tracking "
                         "stage (rule track_history) for it first")
    upto = order[: order.index(run_id) + 1]  # a rerun of an old night: the page up to it
    if tonight is None:
        tonight = read_decisions(store, [run_id], TONIGHT_COLUMNS)
    return _page_decisions(store, upto[-trend_nights:-1], tonight)


def page_rows(store: str | os.PathLike, summary: Mapping) -> tuple[pd.DataFrame, pd.DataFrame]:
    """What the trends page's rooflines draw: tonight's stored kernel rows, and the rows of the
    baseline nights of each regressed or improved series (only theirs, only those nights)."""
    from roofline.pages.trend_roofs import MOVED, TONIGHT_READS

    run_id = summary["run_id"]
    try:
        tonight = read_run(store, run_id, list(TONIGHT_READS))
    except FileNotFoundError:  # a night without kernels is not recorded
        return pd.DataFrame(), pd.DataFrame()
    moved = [f for f in summary["findings"] if f["label"] in MOVED and f.get("baseline_runs")]
    nights = sorted({r for f in moved for r in f["baseline_runs"].split(",") if r})
    columns = [*KERNEL_KEY, "run_id", "bound", "binding_level", "performance", "duration_s", "roof_pct",
               *(f"ai_{lv}" for lv in MEMORY_LEVELS)]
    wanted = pd.DataFrame([{**{k: f[k] for k in KERNEL_KEY}, "run_id": r} for f in moved
                           for r in f["baseline_runs"].split(",") if r], columns=[*KERNEL_KEY, "run_id"])
    if wanted.empty:
        return tonight, pd.DataFrame(columns=columns)
    rows = pd.concat([read_run(store, r, columns) for r in nights], ignore_index=True)
    return tonight, rows.merge(wanted.drop_duplicates(), on=[*KERNEL_KEY, "run_id"])


def _page_decisions(store: str | os.PathLike, runs: list[str], tonight: pd.DataFrame | None) -> pd.DataFrame:
    """The decisions the trends page draws: the trend columns of ``runs``, then tonight's records."""
    past = read_decisions(store, runs, TREND_COLUMNS) if runs else None
    frames = [f for f in (past, tonight) if f is not None and len(f)]
    if not frames:
        return pd.DataFrame(columns=DECISION_COLUMNS)
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def record_tonight(kernels_paths: Sequence[str], store: str | os.PathLike, run_id: str, context: Mapping,
                   keep_joined: str | os.PathLike | None = None) -> bool:
    """Append tonight's kernels tables to the store; whether the night had any kernel.
    ``keep_joined``: as for :func:`roofline.tables.reads.read_tables` (a rerun reads the changed apps' tables).

    The frame is gone when this returns, and Arrow's pool gives its memory back: at a thousand apps
    it is a third of the tracking job's memory, which the decision state then needs
    (:func:`judge_recorded`)."""
    import pyarrow as pa

    kernels = read_tables(kernels_paths, "kernels", keep_joined)
    recorded = not kernels.empty
    if recorded:
        append_run(store, run_id, kernels, context)
    del kernels
    pa.default_memory_pool().release_unused()
    return recorded


def write_trends_page(path: str, store: str, summary: Mapping, decisions: pd.DataFrame, charts: str | None) -> None:
    from roofline.pages.trends import write_trends  # Altair and the page code: only once judged

    write_trends(path, decisions, summary, *page_rows(store, summary), charts=charts)
