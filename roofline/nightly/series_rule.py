"""The decision rule of one kernel series, one night at a time.

:class:`SeriesState` is everything the layered rule of ../shared/guides/tracking.md §4.3 keeps about
a series between nights (its segment, the valid nights it still looks at, the noise carried from
the previous segment, the lone violation awaiting tonight's verdict, the bound-side hysteresis), and
:meth:`SeriesState.step` judges one night from that state and the night's row. The full replay
(:func:`roofline.nightly.engine.decide_all`) and the nightly run from the stored state
(:mod:`roofline.nightly.state`) both advance this one object, so the two cannot drift apart.
docs/tracking.md states the rule in words.
"""

from __future__ import annotations

import functools
import math
import re
import statistics
from collections.abc import Mapping, Sequence

from roofline.nightly.params import DecisionParams
from roofline.nightly.stats import median_finite, number, rel_change, rel_sigma
from roofline.nightly.store import DECISION_COLUMNS
from roofline.tables.schemas import KERNEL_KEY, LAUNCH_RESOURCES

# track-2: a change of counting conventions starts a segment; track-3: a kernel is followed through a
# change of its name (roofline.nightly.kernel_match), its night of change judged at once; track-4: each
# app's total GPU time is a series (roofline.nightly.app_total), time moved between kernels is `moved`,
# work that changed with the time flat stays `workload_changed` until the baseline is at the new work
RULE_VERSION = "track-4"
LABELS = ("regression", "improvement", "suspicious", "outlier", "workload_changed", "moved",
          "environment_change", "unstable_env", "missing", "error", "new", "insufficient_data",
          "unchanged")
# Columns of a history row the rule reads (besides the series key and the segment fields).
USED = ("run_id", "kernel_short", "bound", "bound_kind", "launches", "duration_s", "flop_total", "flop",
        "dram_bytes", "performance", "roof_pct", "ai_dram", "sm_clock_hz", "time_share",
        "roof_flops", "roof_dram_bw", "ridge_ratio", "clock_control", "cache_control", "convention",
        *LAUNCH_RESOURCES)
# What a "missing" record copies from the series' last row (its other numbers are NaN), and the
# app commit of that row (an app total's: whether the app's code changed since its last night).
TEMPLATE_TEXT = ("kernel_short", "clock_control", "cache_control", "convention", "bound", "app_commit")
# launches: an app total's moves; the launch resources: a kernel followed through a change of its key
TEMPLATE_NUMBERS = ("time_share", "roof_flops", "roof_dram_bw", "launches", *LAUNCH_RESOURCES)
_DIRECTION = {1: "up", -1: "down", 0: ""}


def join_note(a: str, b: str) -> str:
    """Two notes in one field."""
    return f"{a}; {b}" if a else b


def _segment_note(fields: tuple[str, ...], old: tuple[str, ...], new: tuple[str, ...]) -> str:
    """What started a segment, in words: "new segment: driver_version: 550 → 560; ..."."""
    said = [f"counting conventions changed {a or '(before versioning)'} → {b or '(none)'}"
            if f == "convention" else f"{f}: {a or '?'} → {b or '?'}"
            for f, a, b in zip(fields, old, new, strict=True) if a != b]
    return "new segment: " + "; ".join(said)


@functools.lru_cache(maxsize=256)
def major_minor(version: str) -> str:
    return ".".join(re.findall(r"\d+", version)[:2]) or version


def segment_ident(row: Mapping, fields: tuple[str, ...]) -> tuple[str, ...]:
    """The row's segment fields as a segment is told apart by (ncu by major.minor)."""
    out = []
    for name in fields:
        value = str(row.get(name) or "").strip()
        if name == "ncu_version":  # a new segment per major.minor, not per build
            value = major_minor(value)
        out.append(value)
    return tuple(out)


class Bound:
    """Memory or compute side of the ridge with a hysteresis band; flips confirmed over N nights."""

    __slots__ = ("band", "nights", "side", "candidate", "count")

    def __init__(self, band: float, nights: int) -> None:
        self.band, self.nights = band, nights
        self.side, self.candidate, self.count = "", "", 0

    def step(self, ridge_ratio: float) -> str:
        """Tonight's ridge ratio; returns the confirmed flip ("memory→compute") or ""."""
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
    launches = number(row.get("launches"))
    n = launches if launches > 0 else 1.0
    flop = number(row.get("flop_total"))
    flop = flop if math.isfinite(flop) else number(row.get("flop"))
    return {"run_id": run_id, "value": number(row.get("duration_s")) / n, "flop": flop / n,
            "bytes": number(row.get("dram_bytes")) / n, "perf": number(row.get("performance")),
            "roof": number(row.get("roof_pct")), "ai": number(row.get("ai_dram")),
            "clock": number(row.get("sm_clock_hz")), "label": "", "dir": 0, "persistent": False}


def _record(row: Mapping, run_id: str, run_date: str) -> dict:
    rec = dict.fromkeys(DECISION_COLUMNS, math.nan)
    for name in (*KERNEL_KEY, "kernel_short", "clock_control", "cache_control", "convention",
                 "bound"):
        rec[name] = str(row.get(name) or "")
    for name in ("launches", "time_share", "performance", "roof_pct", "ai_dram", "roof_flops",
                 "roof_dram_bw", "sm_clock_hz"):
        rec[name] = number(row.get(name))
    rec.update(run_id=run_id, run_date=run_date, label="", revised_label="", direction="",
               metric="time", baseline_runs="", bound_side="", bound_flip="", note="",
               previous_kernel="", previous_grid="", previous_block="",
               environment_shift=False, rule_version=RULE_VERSION, n_baseline=0,
               nights_in_violation=0)
    return rec


def _scaled(nights: list[dict], tonight: dict, work: str, tol: float) -> list[float]:
    """Baseline nights' times, each scaled to tonight's work where its work moved beyond ``tol``."""
    w = tonight[work]
    if not (math.isfinite(w) and w > 0):
        return [n["value"] for n in nights]
    out = []
    for n in nights:
        wn = n[work]
        if math.isfinite(wn) and wn > 0 and abs(wn / w - 1) > tol:
            out.append(n["value"] * w / wn)
        else:
            out.append(n["value"])
    return out


def _work_moved(p: DecisionParams, night: dict, nights: list[dict], pool: list[dict]) -> list[tuple[str, float, str]]:
    """The work quantities per launch (FLOP, DRAM bytes) tonight beyond ``work_tol`` (the noise of
    counted work) off the median of the baseline nights: (what, relative change, the first night
    of the run of nights at tonight's work)."""
    out = []
    for name, what in (("flop", "FLOP"), ("bytes", "DRAM bytes")):
        w = night[name]
        change = rel_change(w, median_finite([n[name] for n in pool]))
        if not (math.isfinite(change) and abs(change) > p.work_tol):
            continue
        since = night["run_id"]
        for n in reversed(nights):
            if not abs(rel_change(n[name], w)) <= p.work_tol:
                break
            since = n["run_id"]
        out.append((what, change, since))
    return out


def _judge(p: DecisionParams, night: dict, nights: list[dict], pending: dict | None, rec: dict,
           row: Mapping, carried: float, code_changed: bool = False) -> None:
    """Tonight's baseline, noise, limits, ratio, z and label, before the persistence bookkeeping.

    ``code_changed``: the kernel was followed through a change of its name tonight (a code change,
    :mod:`roofline.nightly.kernel_match`): a violation tonight is the change's step, not noise to wait a
    second night for, so it is a regression (or improvement) at once, as a big jump is."""
    last = nights[-1] if nights else None
    said_before = rec["note"]  # a work change with the time flat says so instead of the throughput note
    changed = []
    for name, what, column in (("flop", "FLOP", "flop_ratio"),
                               ("bytes", "DRAM bytes", "dram_bytes_ratio")):
        moved = rel_change(night[name], last[name]) if last else math.nan
        rec[column] = moved + 1
        if math.isfinite(moved) and abs(moved) > p.work_tol:
            changed.append(f"{what} {moved:+.1%}")
    memory = row.get("bound_kind") == "memory" or not night["flop"] > 0
    work = "bytes" if memory else "flop"
    # Tonight and last night are judged together against the valid nights before them.
    recent = nights[-(p.noise_window + p.window + 2):]
    kept = [n for n in recent if n["label"] != "outlier" and n is not pending]
    if len(kept) > p.min_nights and kept[-1] is last:
        kept = kept[:-1]
    pool = kept[-p.window:]
    values = _scaled(pool, night, work, p.work_tol)
    nb = len(values)
    rec.update(n_baseline=nb, baseline_runs=",".join(n["run_id"] for n in pool),
               performance_baseline=median_finite([n["perf"] for n in pool]),
               roof_pct_baseline=median_finite([n["roof"] for n in pool]),
               ai_dram_baseline=median_finite([n["ai"] for n in pool]))
    rec["perf_ratio"] = rel_change(night["perf"], rec["performance_baseline"]) + 1
    moved_work = _work_moved(p, night, nights, pool)
    rec["label"] = "workload_changed" if changed else "insufficient_data"
    if changed:
        rec["metric"] = "throughput"
        rec["note"] = join_note(rec["note"], f"work moved ({', '.join(changed)}): time judged per unit of {work}")
    if nb == 0:
        return
    base = float(statistics.median(values))
    ratio = night["value"] / base
    rec.update(baseline_s=base, ratio=ratio, impact=(ratio - 1) * number(rec["time_share"]))
    if nb < p.min_nights:  # information only: a plain relative rule
        info = 1 if ratio - 1 > p.info_rel else -1 if 1 - ratio > p.info_rel else 0
        rec["direction"] = _DIRECTION[info]
        if info:
            rec["note"] = join_note(rec["note"], f"{ratio - 1:+.1%} vs {nb} night(s) (info only)")
        return
    if p.noise_method == "diff":
        rel = rel_sigma(_scaled(kept[-p.noise_window:], night, work, p.work_tol), "diff")
    else:
        rel = rel_sigma(values)
    if nb < p.window or not math.isfinite(rel):  # few nights: borrow, or a raised floor
        lent = carried if math.isfinite(carried) else p.short_sigma_floor
        rel = max(rel, lent) if math.isfinite(rel) else lent
    rel = max(rel, p.sigma_floor)
    limit = max(p.rel_min, p.z_min * rel)
    z = (ratio - 1) / rel
    rec.update(noise_s=rel * base, limit_rel=limit, z=z, lower_s=base * (1 - limit),
               upper_s=base * (1 + limit))
    if moved_work:
        plain = median_finite([n["value"] for n in pool])
        flat = night["value"] / plain
        if abs(flat - 1) <= limit:
            # The work per launch moved and the time did not (yet): per unit of work it would read
            # as a step of the size of the work change, which is no verdict on the kernel; the
            # first sign of a slowdown on a larger problem, reported until the baseline is at the
            # new work.
            said = ", ".join(f"{what} per launch {change:+.1%} since {since}"
                             for what, change, since in moved_work)
            rec.update(label="workload_changed", revised_label="workload_changed", metric="time",
                       direction="", baseline_s=plain, ratio=flat, z=(flat - 1) / rel,
                       impact=(flat - 1) * number(rec["time_share"]), noise_s=rel * plain,
                       lower_s=plain * (1 - limit), upper_s=plain * (1 + limit),
                       note=join_note(said_before, f"{said}, time unchanged ({flat - 1:+.1%})".replace("%", " %")))
            night["dir"] = 0
            return
    single = 1 if ratio - 1 > limit else -1 if 1 - ratio > limit else 0
    persistent = 0
    if last is not None:
        # Two nights at one new level: both beyond rel_min, their mean beyond z_min sigma/sqrt(2),
        # and close to each other (a spike next to a blip is no level).
        prev = _scaled([last], night, work, p.work_tol)[0] / base
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
    elif code_changed:
        big = single
    night["dir"], night["persistent"] = persistent or big or single, bool(persistent)
    rec["direction"] = _DIRECTION[night["dir"]]
    if changed:
        return
    if persistent or big:
        rec["label"] = "regression" if night["dir"] > 0 else "improvement"
        if big and not persistent and not code_changed:
            rec["note"] = join_note(rec["note"], f"big jump: ratio {ratio:.3f}, z {z:.1f}")
    elif single:
        rec["label"] = "suspicious"
    else:
        rec["label"] = "unchanged"
        roof = rel_change(night["roof"], rec["roof_pct_baseline"])
        if math.isfinite(roof) and abs(roof) > p.rel_min:
            rec["note"] = join_note(rec["note"], f"% of roof {roof:+.1%} with time flat: ceiling moved")


def forgotten(outlier: Sequence[bool], p: DecisionParams) -> int:
    """How many of a series' first nights (whether each is an outlier, oldest first) no later night
    can look at: :meth:`SeriesState.trim`'s cut."""
    excess = len(outlier) - (p.noise_window + p.window + 2)
    valid = sum(not o for o in outlier[:-1])
    cut = 0
    while cut < excess:
        left = valid - (not outlier[cut])
        if left < p.noise_window:
            break
        valid, cut = left, cut + 1
    return cut


class SeriesState:
    """What the rule keeps about one series between nights, and the step that judges a night.

    ``nights`` holds the valid nights of the current segment that a later night can still look at
    (:meth:`trim`), each a dict of per-launch values and its label; ``pending`` is the last of them
    when it was a lone violation (suspicious, or a big jump) whose verdict the next judged night
    gives; a pending night's ``row`` is the place of its record in that night's decisions, and
    ``pinned`` says the night-level rule already made that record ``suspicious`` for good.
    ``last_i`` is the place in the run order of the series' last row; a series exists from its
    first row on.
    """

    __slots__ = ("p", "ident", "seg", "seg_start", "carried", "last_i", "last_run", "template",
                 "nights", "streak", "streak_dir", "pending", "bound", "followed")

    def __init__(self, p: DecisionParams) -> None:
        self.p = p
        self.ident: tuple[str, ...] | None = None
        self.seg, self.seg_start, self.carried = -1, "", math.nan
        self.last_i, self.last_run = -1, ""
        self.template: Mapping = {}
        self.nights: list[dict] = []
        self.streak = self.streak_dir = 0
        self.pending: dict | None = None
        self.bound = Bound(p.ridge_band, p.flip_nights)
        # set by the engine for the night the series is followed through a change of its key: what
        # matched it (kernel_match's words) and its kernel before; cleared by that night's step
        self.followed: tuple[str, tuple[str, ...]] | None = None

    def absent(self, i: int, run_id: str, run_date: str) -> dict | None:
        """The record of a night without this series: ``missing`` within a window of its last
        night, else none."""
        p = self.p
        if i - self.last_i > p.window:
            return None
        rec = _record(self.template, run_id, run_date)
        rec.update(label="missing", revised_label="missing", segment=self.seg,
                   segment_start=self.seg_start, note=f"absent; last seen {self.last_run}",
                   baseline_s=median_finite([n["value"] for n in self.nights[-p.window:]]))
        for name in ("launches", "performance", "roof_pct", "ai_dram", "sm_clock_hz"):
            rec[name] = math.nan
        return rec

    def step(self, i: int, run_id: str, run_date: str, row: Mapping, code_changed: bool = False) -> dict:
        """Judge the night at place ``i`` of the run order from this state and the series' row;
        returns its decision record and advances the state. A pending night's new label (its
        revision) is left in ``pending["label"]`` for the caller to write into its record.
        ``code_changed``: the app's kernels changed tonight (an app total whose kernels were fused,
        split or renamed): a violation is a verdict at once, as for a followed kernel."""
        p = self.p
        self.last_i, self.last_run, self.template = i, run_id, row
        night = _night(row, run_id)
        rec = _record(row, run_id, run_date)
        rec["value_s"] = night["value"]
        followed = None
        if self.followed is not None:
            why, old = self.followed
            followed, self.followed = f"{why or 'launch configuration changed'} (was {old[2][:200]})", None
            # its key before, as data: the trends page draws the nights before as the same series
            rec.update(previous_kernel=old[2], previous_grid=old[3], previous_block=old[4])
        new_ident = segment_ident(row, p.segment_fields)
        if new_ident != self.ident:  # first night, or a new segment: no comparison tonight
            self._new_segment(run_id, row, night, rec, new_ident)
            if followed is not None:
                rec["note"] = join_note(rec["note"], followed)
            return rec
        if followed is not None:
            # a new segment of the same series: the plot marks the change, the baseline stays the
            # nights before it, so the night of the change is judged against them
            self.seg, self.seg_start = self.seg + 1, run_id
            rec["note"] = followed
        rec.update(segment=self.seg, segment_start=self.seg_start)
        if not night["value"] > 0:  # never timed (a what-if row): nothing to judge, no alarm
            label = "error" if self.nights else "insufficient_data"
            rec.update(label=label, revised_label=label,
                       note="no valid duration tonight (profile failed or kernel not timed)")
            return rec
        clock = rel_change(night["clock"], median_finite([n["clock"] for n in self.nights[-p.window:]]))
        if math.isfinite(clock) and abs(clock) > p.clock_tol:
            rec.update(label="unstable_env", revised_label="unstable_env",
                       note=f"SM clock {clock:+.1%} off the series' usual clock: not compared")
            return rec
        pending = self.pending
        _judge(p, night, self.nights, pending, rec, row, self.carried, code_changed or followed is not None)
        flip = self.bound.step(number(row.get("ridge_ratio")))
        rec.update(bound_side=self.bound.side, bound_flip=flip)
        if flip:
            same_ai = abs(rel_change(night["ai"], rec["ai_dram_baseline"])) <= p.work_tol
            why = " with the intensity unchanged: the ridge moved" if same_ai else ""
            rec["note"] = join_note(rec["note"], f"bound flip {flip}{why}")
        direction = night["dir"]
        same = direction and direction == self.streak_dir
        self.streak = self.streak + 1 if same else (1 if direction else 0)
        self.streak_dir = direction
        rec["nights_in_violation"] = self.streak
        label = rec["label"]
        if pending is not None:
            if night["persistent"] and pending["dir"] == direction:
                pending["label"] = label  # the lone night was the onset
            elif label != "workload_changed":
                pending["label"] = "outlier"
                if label == "unchanged":
                    rec["label"] = "outlier"
                    rec["note"] = join_note(rec["note"], f"{pending['run_id']} was a single-night "
                                            "spike, now excluded from the baseline")
        lone = label == "suspicious" or (label in ("regression", "improvement")
                                         and not night["persistent"])
        self.pending = night if lone else None
        night["label"] = rec["revised_label"] = rec["label"]
        self.nights.append(night)
        self.trim()
        return rec

    def _new_segment(self, run_id: str, row: Mapping, night: dict, rec: dict,
                     new_ident: tuple[str, ...]) -> None:
        p = self.p
        label, note = "new", "first night of this series"
        if self.ident is not None:
            label = "environment_change"
            note = _segment_note(p.segment_fields, self.ident, new_ident)
            self._carry_noise(self.nights)
        self.seg, self.seg_start, self.ident = self.seg + 1, run_id, new_ident
        self.nights, self.streak, self.streak_dir, self.pending = [], 0, 0, None
        self.bound = Bound(p.ridge_band, p.flip_nights)
        self.bound.step(number(row.get("ridge_ratio")))
        rec.update(label=label, revised_label=label, note=note, segment=self.seg,
                   segment_start=self.seg_start, bound_side=self.bound.side)
        if night["value"] > 0:
            night["label"] = label
            self.nights.append(night)

    def _carry_noise(self, nights: list[dict]) -> None:
        """The noise of ``nights`` (the segment ending), carried to the next one."""
        p = self.p
        kept = [n["value"] for n in nights if n["label"] != "outlier"]
        pool = kept[-(p.noise_window if p.noise_method == "diff" else p.window):]
        if len(pool) >= p.min_nights:
            rel = rel_sigma(pool, p.noise_method)
            if math.isfinite(rel):
                self.carried = max(rel, p.sigma_floor)

    def restart(self, run_id: str) -> None:
        """Judge this series from tonight (``run_id``, just stepped) on, as a new segment: time
        moved into it from other kernels, so its nights before are another kernel's work. The
        noise of those nights is carried, tonight is the first baseline night."""
        before = [n for n in self.nights if n["run_id"] != run_id]
        tonight = [n for n in self.nights if n["run_id"] == run_id]
        self._carry_noise(before)
        if self.seg_start != run_id:
            self.seg, self.seg_start = self.seg + 1, run_id
        for n in tonight:
            n["label"], n["dir"], n["persistent"] = "moved", 0, False
        self.nights, self.streak, self.streak_dir, self.pending = tonight, 0, 0, None

    def trim(self) -> None:
        """Forget the nights no later night can look at, so the state stays the same size however
        long the history: a night reads the last noise_window + window + 2 nights; a new segment
        reads the last noise_window of them that are no outlier (the last night's label can still
        change, so it does not count towards those)."""
        p = self.p
        if len(self.nights) <= p.noise_window + p.window + 2:
            return
        cut = forgotten([n["label"] == "outlier" for n in self.nights], p)
        if cut:
            del self.nights[:cut]
