"""Nightly regression decisions per kernel series, on the history store's table.

:func:`decide_all` replays every kernel series night by night with the layered rule of
../shared/guides/tracking.md §4.3 (robust median/MAD baseline, relative floor, 2-night
persistence, segments on environment changes and on changes of the counting conventions,
column ``convention``: "" for rows stored before it existed); :func:`decide` returns one night's rows.
docs/tracking.md states the rule in words and the rates measured on the simulator.
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from roofline.history import SERIES_KEY, run_order

RULE_VERSION = "track-2"  # track-2: a change of counting conventions starts a segment
LABELS = ("regression", "improvement", "suspicious", "outlier", "workload_changed",
          "environment_change", "unstable_env", "missing", "error", "new", "insufficient_data",
          "unchanged")


# ------------------------------------------------------------------------------------ parameters
@dataclass(frozen=True)
class DecisionParams:
    """Thresholds of the decision rule (docs/tracking.md); ``per_kernel`` overrides by regex."""

    window: int = 7  # K: baseline = median of the last K valid nights of the segment
    noise_window: int = 21  # nights of the segment the noise is estimated from
    noise_method: str = "diff"  # "diff": MAD of night-to-night changes; "level": MAD of baseline
    min_nights: int = 3  # fewer valid nights -> insufficient_data
    rel_min: float = 0.05
    z_min: float = 4.0
    sigma_floor: float = 0.005  # sigma >= this fraction of the baseline
    short_sigma_floor: float = 0.02  # under K nights, when no previous segment lends its sigma
    info_rel: float = 0.10  # the relative rule of insufficient_data (information only)
    big_ratio: float = 1.25
    big_z: float = 8.0
    work_tol: float = 0.02
    clock_tol: float = 0.02
    ridge_band: float = 0.15
    flip_nights: int = 2
    shift_fraction: float = 0.3
    shift_min_kernels: int = 5
    settings: tuple[str, ...] = ("clock_control", "cache_control")
    segment_fields: tuple[str, ...] = ("gpu_uuid", "driver_version", "cuda_version",
                                       "ncu_version", "mig_mode", "ceiling_source", "convention")
    per_kernel: tuple[tuple[str, Mapping], ...] = ()

    def __post_init__(self) -> None:
        if not 1 <= self.min_nights <= self.window:
            raise ValueError(f"need 1 <= min_nights ({self.min_nights}) <= window ({self.window})")
        if min(self.rel_min, self.z_min, self.sigma_floor, self.work_tol, self.ridge_band) < 0:
            raise ValueError("tracking thresholds must be non-negative")
        if self.noise_window < self.window or self.noise_method not in ("diff", "level"):
            raise ValueError("need noise_window >= window and noise_method 'diff' or 'level'")
        if self.big_ratio <= 1:
            raise ValueError(f"big_ratio must exceed 1, got {self.big_ratio}")

    @classmethod
    def from_mapping(cls, data: Mapping | None) -> DecisionParams:
        """Build from a mapping (config, JSON); unknown keys are errors."""
        data = dict(data or {})
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown tracking parameters {unknown}; known: {sorted(names)}")
        for name in ("settings", "segment_fields"):
            if name in data:
                data[name] = tuple(data[name])
        if "per_kernel" in data:
            overrides = dict(data["per_kernel"]).items()
            data["per_kernel"] = tuple((str(k), dict(v)) for k, v in overrides)
        return cls(**data)

    def for_kernel(self, name: str) -> DecisionParams:
        """These parameters with the first ``per_kernel`` override whose regex matches applied."""
        for pattern, overrides in self.per_kernel:
            if re.search(pattern, name):
                return dataclasses.replace(self, per_kernel=(), **dict(overrides))
        return self


# ------------------------------------------------------------------------------------- decisions
DECISION_COLUMNS = [
    "run_id", "run_date", *SERIES_KEY, "kernel_short", "clock_control", "cache_control",
    "convention", "label", "revised_label", "direction", "metric", "value_s", "baseline_s",
    "noise_s", "lower_s", "upper_s", "limit_rel", "ratio", "z", "n_baseline", "baseline_runs",
    "nights_in_violation", "segment", "segment_start", "launches", "time_share", "impact",
    "performance", "performance_baseline", "perf_ratio", "roof_pct", "roof_pct_baseline",
    "ai_dram", "ai_dram_baseline", "bound", "bound_side", "bound_flip", "flop_ratio",
    "dram_bytes_ratio", "roof_flops", "roof_dram_bw", "sm_clock_hz", "environment_shift",
    "note", "rule_version",
]
_USED = ("run_id", "kernel_short", "bound", "launches", "duration_s", "flop_total", "flop",
         "dram_bytes", "performance", "roof_pct", "ai_dram", "sm_clock_hz", "time_share",
         "roof_flops", "roof_dram_bw", "ridge_ratio", "clock_control", "cache_control", "convention")
_COMPARED = ("regression", "improvement", "suspicious", "outlier", "unchanged")
_DIRECTION = {1: "up", -1: "down", 0: ""}


def _f(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _rel(a: float, b: float) -> float:
    """a / b - 1; NaN when either is missing or b is zero."""
    return a / b - 1 if math.isfinite(a) and math.isfinite(b) and b != 0 else math.nan


def _median(values: list[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(statistics.median(finite)) if finite else math.nan


def _rel_sigma(values: list[float], method: str = "level") -> float:
    """Robust relative noise of nightly values.

    ``level``: 1.4826 x MAD of the values / their median. ``diff``: the night-to-night changes of
    log(value): 1.4826 x MAD, then the RMS of the changes within 3 of those, / sqrt(2); a step
    or a spike inside the window barely moves it.
    """
    if method == "diff":
        if len(values) < 3:
            return math.nan
        logs = [math.log(v) for v in values]
        d = [b - a for a, b in zip(logs, logs[1:], strict=False)]
        centre = statistics.median(d)
        dev = [abs(x - centre) for x in d]
        mad = 1.4826 * statistics.median(dev)
        kept = [x for x in dev if x <= 3 * mad]  # one reweighting step: MAD alone is noisy
        scale = math.sqrt(sum(x * x for x in kept) / len(kept)) if len(kept) >= 2 else mad
        return scale / math.sqrt(2)
    med = statistics.median(values)
    return 1.4826 * statistics.median([abs(x - med) for x in values]) / med if med > 0 else math.nan


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a else b


def _segment_note(fields: tuple[str, ...], old: tuple[str, ...], new: tuple[str, ...]) -> str:
    """What started a segment, in words: "new segment: driver_version: 550 → 560; ..."."""
    said = [f"counting conventions changed {a or '(before versioning)'} → {b or '(none)'}"
            if f == "convention" else f"{f}: {a or '?'} → {b or '?'}"
            for f, a, b in zip(fields, old, new, strict=True) if a != b]
    return "new segment: " + "; ".join(said)


def _ident(row: Mapping, fields: tuple[str, ...]) -> tuple[str, ...]:
    out = []
    for name in fields:
        value = str(row.get(name) or "").strip()
        if name == "ncu_version":  # a new segment per major.minor, not per build
            value = ".".join(re.findall(r"\d+", value)[:2]) or value
        out.append(value)
    return tuple(out)


class _Bound:
    """Memory or compute side of the ridge with a hysteresis band; flips confirmed over N nights."""

    def __init__(self, band: float, nights: int) -> None:
        self.band, self.nights = band, nights
        self.side, self.candidate, self.count = "", "", 0

    def step(self, ridge_ratio: float) -> str:
        if not (math.isfinite(ridge_ratio) and ridge_ratio > 0):
            return ""
        if not self.side:
            self.side = "compute" if ridge_ratio >= 1 else "memory"
            return ""
        raw = ""
        if ridge_ratio >= 1 + self.band:
            raw = "compute"
        elif ridge_ratio <= 1 - self.band:
            raw = "memory"
        if not raw or raw == self.side:
            self.candidate, self.count = "", 0
            return ""
        self.count = self.count + 1 if raw == self.candidate else 1
        self.candidate = raw
        if self.count < self.nights:
            return ""
        flip, self.side, self.candidate, self.count = f"{self.side}→{raw}", raw, "", 0
        return flip


def _night(row: Mapping, run_id: str) -> dict:
    """Per-launch values of one series on one night."""
    launches = _f(row.get("launches"))
    n = launches if launches > 0 else 1.0
    flop = _f(row.get("flop_total"))
    flop = flop if math.isfinite(flop) else _f(row.get("flop"))
    return {"run_id": run_id, "value": _f(row.get("duration_s")) / n, "flop": flop / n,
            "bytes": _f(row.get("dram_bytes")) / n, "perf": _f(row.get("performance")),
            "roof": _f(row.get("roof_pct")), "ai": _f(row.get("ai_dram")),
            "clock": _f(row.get("sm_clock_hz")), "label": "", "dir": 0, "record": None}


def _record(row: Mapping, run_id: str, run_date: str) -> dict:
    rec = dict.fromkeys(DECISION_COLUMNS, math.nan)
    for name in (*SERIES_KEY, "kernel_short", "clock_control", "cache_control", "convention",
                 "bound"):
        rec[name] = str(row.get(name) or "")
    for name in ("launches", "time_share", "performance", "roof_pct", "ai_dram", "roof_flops",
                 "roof_dram_bw", "sm_clock_hz"):
        rec[name] = _f(row.get(name))
    rec.update(run_id=run_id, run_date=run_date, label="", revised_label="", direction="",
               metric="time", baseline_runs="", bound_side="", bound_flip="", note="",
               environment_shift=False, rule_version=RULE_VERSION, n_baseline=0,
               nights_in_violation=0)
    return rec


def _scaled(night: dict, tonight: dict, work: str, tol: float) -> float:
    """A baseline night's time scaled to tonight's work, when the work moved beyond ``tol``."""
    w, wn = tonight[work], night[work]
    if math.isfinite(w) and math.isfinite(wn) and w > 0 and wn > 0 and abs(wn / w - 1) > tol:
        return night["value"] * w / wn
    return night["value"]


def _set_label(night: dict, label: str) -> None:
    night["label"] = label
    night["record"]["revised_label"] = label


def _judge(p: DecisionParams, night: dict, nights: list[dict], pending: dict | None, rec: dict,
           row: Mapping, carried: float) -> None:
    """Tonight's baseline, noise, limits, ratio, z and label, before the persistence bookkeeping."""
    last = nights[-1] if nights else None
    changed = []
    for name, what, column in (("flop", "FLOP", "flop_ratio"),
                               ("bytes", "DRAM bytes", "dram_bytes_ratio")):
        moved = _rel(night[name], last[name]) if last else math.nan
        rec[column] = moved + 1
        if math.isfinite(moved) and abs(moved) > p.work_tol:
            changed.append(f"{what} {moved:+.1%}")
    memory = str(row.get("bound") or "").startswith("memory") or not night["flop"] > 0
    work = "bytes" if memory else "flop"
    # Tonight and last night are judged together against the valid nights before them.
    recent = nights[-(p.noise_window + p.window + 2):]
    kept = [n for n in recent if n["label"] != "outlier" and n is not pending]
    if len(kept) > p.min_nights and kept[-1] is last:
        kept = kept[:-1]
    pool = kept[-p.window:]
    values = [_scaled(n, night, work, p.work_tol) for n in pool]
    nb = len(values)
    rec.update(n_baseline=nb, baseline_runs=",".join(n["run_id"] for n in pool),
               performance_baseline=_median([n["perf"] for n in pool]),
               roof_pct_baseline=_median([n["roof"] for n in pool]),
               ai_dram_baseline=_median([n["ai"] for n in pool]))
    rec["perf_ratio"] = _rel(night["perf"], rec["performance_baseline"]) + 1
    rec["label"] = "workload_changed" if changed else "insufficient_data"
    if changed:
        rec["metric"] = "throughput"
        rec["note"] = f"work moved ({', '.join(changed)}): time judged per unit of {work}"
    if nb == 0:
        return
    base = float(statistics.median(values))
    ratio = night["value"] / base
    rec.update(baseline_s=base, ratio=ratio, impact=(ratio - 1) * _f(rec["time_share"]))
    if nb < p.min_nights:  # information only: a plain relative rule
        info = 1 if ratio - 1 > p.info_rel else -1 if 1 - ratio > p.info_rel else 0
        rec["direction"] = _DIRECTION[info]
        if info:
            rec["note"] = _join(rec["note"], f"{ratio - 1:+.1%} vs {nb} night(s) (info only)")
        return
    if p.noise_method == "diff":
        rel = _rel_sigma([_scaled(n, night, work, p.work_tol) for n in kept[-p.noise_window:]], "diff")
    else:
        rel = _rel_sigma(values)
    if nb < p.window or not math.isfinite(rel):  # few nights: borrow, or a raised floor
        lent = carried if math.isfinite(carried) else p.short_sigma_floor
        rel = max(rel, lent) if math.isfinite(rel) else lent
    rel = max(rel, p.sigma_floor)
    limit = max(p.rel_min, p.z_min * rel)
    z = (ratio - 1) / rel
    rec.update(noise_s=rel * base, limit_rel=limit, z=z, lower_s=base * (1 - limit),
               upper_s=base * (1 + limit))
    single = 1 if ratio - 1 > limit else -1 if 1 - ratio > limit else 0
    persistent = 0
    if last is not None:
        # Two nights at one new level: both beyond rel_min, their mean beyond z_min sigma/sqrt(2),
        # and close to each other (a spike next to a blip is no level).
        prev = _scaled(last, night, work, p.work_tol) / base
        two = max(p.rel_min, p.z_min * rel / math.sqrt(2))
        mean = (ratio + prev) / 2 - 1
        level = abs(ratio - prev) <= max(p.z_min * rel * math.sqrt(2), abs(mean) / 2)
        for s in (1, -1):
            both = min(s * (ratio - 1), s * (prev - 1)) > p.rel_min
            if both and level and s * mean > two:
                persistent = s
    big = 0
    if ratio >= p.big_ratio and z >= p.big_z:
        big = 1
    elif ratio <= 1 / p.big_ratio and z <= -p.big_z:
        big = -1
    night["dir"], night["persistent"] = persistent or big or single, bool(persistent)
    rec["direction"] = _DIRECTION[night["dir"]]
    if changed:
        return
    if persistent or big:
        rec["label"] = "regression" if night["dir"] > 0 else "improvement"
        if big and not persistent:
            rec["note"] = _join(rec["note"], f"big jump: ratio {ratio:.3f}, z {z:.1f}")
    elif single:
        rec["label"] = "suspicious"
    else:
        rec["label"] = "unchanged"
        roof = _rel(night["roof"], rec["roof_pct_baseline"])
        if math.isfinite(roof) and abs(roof) > p.rel_min:
            rec["note"] = _join(rec["note"], f"% of roof {roof:+.1%} with time flat: ceiling moved")


def _replay(p: DecisionParams, rows: dict[int, dict], runs: list[tuple[str, str]]) -> list[dict]:
    """One series' decisions on every night from its first (causal, except ``revised_label``)."""
    out: list[dict] = []
    nights: list[dict] = []  # valid nights of the current segment
    ident: tuple[str, ...] | None = None
    seg, seg_start, carried = -1, "", math.nan
    last_i: int | None = None
    streak = streak_dir = 0
    pending: dict | None = None  # last night's lone violation, awaiting tonight's verdict
    bound = _Bound(p.ridge_band, p.flip_nights)
    template = rows[min(rows)]
    for i in range(min(rows), len(runs)):
        run_id, run_date = runs[i]
        row = rows.get(i)
        if row is None:
            if last_i is not None and i - last_i <= p.window:
                rec = _record(template, run_id, run_date)
                rec.update(label="missing", revised_label="missing", segment=seg,
                           segment_start=seg_start, note=f"absent; last seen {runs[last_i][0]}",
                           baseline_s=_median([n["value"] for n in nights[-p.window:]]))
                for name in ("launches", "performance", "roof_pct", "ai_dram", "sm_clock_hz"):
                    rec[name] = math.nan
                out.append(rec)
            continue
        last_i, template = i, row
        night = _night(row, run_id)
        rec = _record(row, run_id, run_date)
        rec["value_s"], night["record"] = night["value"], rec
        out.append(rec)
        new_ident = _ident(row, p.segment_fields)
        if new_ident != ident:  # first night, or a new segment: no comparison tonight
            label, note = "new", "first night of this series"
            if ident is not None:
                label = "environment_change"
                note = _segment_note(p.segment_fields, ident, new_ident)
                kept = [n["value"] for n in nights if n["label"] != "outlier"]
                pool = kept[-(p.noise_window if p.noise_method == "diff" else p.window):]
                rel = _rel_sigma(pool, p.noise_method)
                if len(pool) >= p.min_nights and math.isfinite(rel):  # carried to the new segment
                    carried = max(rel, p.sigma_floor)
            seg, seg_start, ident = seg + 1, run_id, new_ident
            nights, streak, streak_dir, pending = [], 0, 0, None
            bound = _Bound(p.ridge_band, p.flip_nights)
            bound.step(_f(row.get("ridge_ratio")))
            rec.update(label=label, revised_label=label, note=note, segment=seg,
                       segment_start=seg_start, bound_side=bound.side)
            if night["value"] > 0:
                night["label"] = label
                nights.append(night)
            continue
        rec.update(segment=seg, segment_start=seg_start)
        if not night["value"] > 0:  # never timed (a what-if row): nothing to judge, no alarm
            label = "error" if nights else "insufficient_data"
            rec.update(label=label, revised_label=label,
                       note="no valid duration tonight (profile failed or kernel not timed)")
            continue
        clock = _rel(night["clock"], _median([n["clock"] for n in nights[-p.window:]]))
        if math.isfinite(clock) and abs(clock) > p.clock_tol:
            rec.update(label="unstable_env", revised_label="unstable_env",
                       note=f"SM clock {clock:+.1%} off the series' usual clock: not compared")
            continue
        _judge(p, night, nights, pending, rec, row, carried)
        flip = bound.step(_f(row.get("ridge_ratio")))
        rec.update(bound_side=bound.side, bound_flip=flip)
        if flip:
            same_ai = abs(_rel(night["ai"], rec["ai_dram_baseline"])) <= p.work_tol
            why = " with the intensity unchanged: the ridge moved" if same_ai else ""
            rec["note"] = _join(rec["note"], f"bound flip {flip}{why}")
        direction = night["dir"]
        streak = streak + 1 if direction and direction == streak_dir else (1 if direction else 0)
        streak_dir = direction
        rec["nights_in_violation"] = streak
        label = rec["label"]
        if pending is not None:
            if night.get("persistent") and pending["dir"] == direction:
                _set_label(pending, label)  # the lone night was the onset
            elif label != "workload_changed":
                _set_label(pending, "outlier")
                if label == "unchanged":
                    rec["label"] = "outlier"
                    rec["note"] = _join(rec["note"], f"{pending['run_id']} was a single-night "
                                        "spike, now excluded from the baseline")
        lone = label == "suspicious" or (label in ("regression", "improvement")
                                         and not night.get("persistent"))
        pending = night if lone else None
        _set_label(night, rec["label"])
        nights.append(night)
    return out


def decide_all(history: pd.DataFrame,
               params: DecisionParams | Mapping | None = None) -> pd.DataFrame:
    """Decision records of every kernel series on every night of ``history``.

    A night's ``label`` uses only that night and earlier ones, so it equals what the nightly run
    decided; ``revised_label`` adds hindsight (a lone spike becomes ``outlier`` the next night).

    Parameters
    ----------
    history : DataFrame
        The store as :func:`read_history` returns it.
    params : DecisionParams or mapping, optional
        Thresholds; the defaults are those of docs/tracking.md.

    Returns
    -------
    DataFrame
        One row per series per night (:data:`DECISION_COLUMNS`); times per launch [s].
    """
    p = params if isinstance(params, DecisionParams) else DecisionParams.from_mapping(params)
    if history.empty:
        return pd.DataFrame(columns=DECISION_COLUMNS)
    order = run_order(history)
    dates = history.groupby("run_id")["run_date"].first()
    runs = [(r, str(dates[r])) for r in order]
    position = {r: i for i, r in enumerate(order)}
    keys = SERIES_KEY + list(p.settings)
    wanted = list(dict.fromkeys([*keys, *p.segment_fields, *_USED]))
    # plain Python objects: iterating Arrow-backed strings row by row is slow
    table = {c: history[c].to_numpy(dtype=object).tolist() for c in wanted if c in history}
    series: dict[tuple, dict[int, dict]] = {}
    for values in zip(*table.values(), strict=True):
        row = dict(zip(table, values, strict=True))
        series.setdefault(tuple(row.get(k, "") for k in keys), {})[position[row["run_id"]]] = row
    records: list[dict] = []
    for key in sorted(series):
        records += _replay(p.for_kernel(str(key[2])), series[key], runs)
    return _night_level(pd.DataFrame(records, columns=DECISION_COLUMNS), history, order, p)


def _night_level(frame: pd.DataFrame, history: pd.DataFrame, order: list[str],
                 p: DecisionParams) -> pd.DataFrame:
    """Many kernels moving together on one night: one ``environment_shift`` flag, not N alerts."""
    commits = history.groupby("run_id")["app_commit"].agg(lambda s: ",".join(sorted(set(s))))
    nights = frame.groupby("run_id").indices
    for n, run in enumerate(order):
        night = frame.index[nights.get(run, [])]
        labels, directions = frame.loc[night, "label"], frame.loc[night, "direction"]
        compared = labels.isin(_COMPARED)
        for direction in ("up", "down"):
            moved = int((compared & (directions == direction)).sum())
            if moved < p.shift_min_kernels or moved < p.shift_fraction * compared.sum():
                continue
            frame.loc[night, "environment_shift"] = True
            commit = commits.get(run, "")
            if n == 0 or not commit or commit != commits.get(order[n - 1]):
                continue  # the app changed too: the kernels' own alerts stand
            hit = night[((labels == "regression") & (directions == direction)).to_numpy()]
            frame.loc[hit, ["label", "revised_label"]] = "suspicious"
            why = f"environment shift: {moved} kernels moved {direction}, app commit unchanged"
            frame.loc[hit, "note"] = [_join(s, why) for s in frame.loc[hit, "note"]]
    return frame


def decide(history: pd.DataFrame, run_id: str,
           params: DecisionParams | Mapping | None = None) -> pd.DataFrame:
    """Tonight's decision records: every series of ``run_id`` judged on the nights up to it.

    Raises
    ------
    ValueError
        If ``run_id`` is not in ``history``.
    """
    order = run_order(history)
    if run_id not in order:
        raise ValueError(f"run {run_id!r} is not in the history ({len(order)} runs stored)")
    keep = set(order[: order.index(run_id) + 1])
    decisions = decide_all(history[history["run_id"].isin(keep)], params)
    return decisions[decisions["run_id"] == run_id].reset_index(drop=True)
