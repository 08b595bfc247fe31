"""The summary's "Tonight against the baseline" block: when a history exists, the nightly tracking
stage's findings (``reports/regressions.json``, :func:`roofline.nightly.summary.summarize`), regressions first,
each linked to its row on the trends page.

The workflow writes the summary and tracks the night side by side, so the summary does not wait
for the tracking stage: the tracking stage writes the block as a script beside the pages
(``reports/tonight.js``, :func:`write_tonight_script`), and the summary holds a slot that loads it
(:func:`add_tonight_slot`). Pages written without tracking (``roofline report``) have no slot.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from roofline.files.atomic import write_text_atomic
from roofline.metrics.units import si
from roofline.pages.markup import esc, script_json
from roofline.pages.page import asset_src

TONIGHT_LISTED = 8  # findings listed on the summary; the trends page lists more (MAX_FINDING_ROWS)
# Reading order: what needs action first, then what is good news, then what to keep an eye on.
LABEL_ORDER = ["regression", "improvement", "suspicious", "workload_changed", "moved", "environment_change",
               "outlier", "error", "missing", "new", "insufficient_data", "unchanged"]
COUNTED = 5  # the labels of LABEL_ORDER counted in tonight's line
SERIES_FIELDS = ["app", "device", "kernel", "grid", "block"]  # a series' identity, as history.KERNEL_KEY


def series_anchor(finding: Mapping) -> str:
    """A stable HTML id for one kernel series (its row on the trends page), from its identity:
    the same on both pages, whatever the order of the findings."""
    key = "\x1f".join(str(finding.get(f, "")) for f in SERIES_FIELDS)
    return "s-" + hashlib.sha1(key.encode("utf-8")).hexdigest()[:12]


def ordered(findings: Sequence[Mapping]) -> list[Mapping]:
    """Findings by label in :data:`LABEL_ORDER` (regressions first), by impact within a label
    (the order regressions.json keeps them in)."""
    rank = {label: i for i, label in enumerate(LABEL_ORDER)}
    return sorted(findings, key=lambda f: rank.get(f.get("label"), len(rank)))


def started_totals(started: Sequence[Mapping]) -> tuple[int, int]:
    """The series and the apps whose history starts tonight (regressions.json's ``started``)."""
    return sum(s["series"] for s in started), len({s["app"] for s in started})


def _count(n: int, label: str) -> str:
    """"1 regression", "2 improvements", "3 suspicious", "1 workload changed"."""
    plural = "s" if n != 1 and label in ("regression", "improvement") else ""
    return f"{n} {label.replace('_', ' ')}{plural}"


def _change(f: Mapping) -> str:
    before, after, pct = f.get("baseline_s"), f.get("value_s"), f.get("change_pct")
    moved = f"{si(before, 's')} → {si(after, 's')}" if before is not None and after is not None else "–"
    return moved + (f" ({pct:+.1f} %)" if isinstance(pct, int | float) else "")


def tonight_html(summary: Mapping, trends_href: str) -> str:
    """The block: tonight's counts in one line, then the first :data:`TONIGHT_LISTED` findings
    (regressions first), each kernel linked to its row on the trends page (``trends_href``)."""
    counts = summary.get("counts", {})
    found = ordered(summary.get("findings", []))
    run = esc(summary.get("run_id", ""))
    moved = [_count(counts[label], label) for label in LABEL_ORDER[:COUNTED] if counts.get(label)]
    line = (f'<strong class="error">{esc(", ".join(moved))}</strong>' if counts.get("regression")
            else esc(", ".join(moved)) if moved else "no kernel moved")
    head = (f'<section id="tonight"><h2>Tonight against the baseline</h2><p>Run {run}: {line}, of '
            f'{summary.get("kernels", 0):,} kernel series (time per launch against each series\' baseline of recent '
            f'nights). <a href="{esc(trends_href)}">Trends page</a>.</p>')
    shift = ('<p class="warning">Environment shift: many kernels moved the same way tonight (GPU, driver or '
             "clocks?); see the trends page.</p>") if summary.get("environment_shift") else ""
    series, apps = started_totals(summary.get("started", []))
    starting = (f'<p>History starts tonight for {series:,} series of {apps:,} app{"s" if apps != 1 else ""} '
                "on their devices: nothing to compare with yet.</p>") if series else ""
    shift += starting
    if not found:
        return head + shift + "</section>"
    rows = []
    for f in found[:TONIGHT_LISTED]:
        href = f"{trends_href}#{series_anchor(f)}"
        name = f.get("kernel_short") or f.get("kernel")
        cls = ' class="error"' if f.get("label") == "regression" else ""
        roof = (f"{f['roof_pct_baseline']:.1f} → {f['roof_pct']:.1f} %"
                if isinstance(f.get("roof_pct_baseline"), int | float) and isinstance(f.get("roof_pct"), int | float)
                else "–")
        rows.append(f'<tr><td{cls}>{esc(f.get("label"))}</td><td><a class="kname" href="{esc(href)}" '
                    f'title="{esc(f.get("kernel"))}">{esc(name)}</a></td><td>{esc(f.get("app"))}</td>'
                    f'<td class="n">{esc(_change(f))}</td><td class="n">{esc(roof)}</td>'
                    f'<td>{esc(f.get("bound"))}</td></tr>')
    more = (f'<p class="meta">… and {len(found) - TONIGHT_LISTED} more on the <a href="{esc(trends_href)}">trends '
            "page</a>.</p>") if len(found) > TONIGHT_LISTED else ""
    return (head + shift + '<div class="scroll"><table><thead><tr><th>label</th><th>kernel (its trend)</th>'
            "<th>app</th><th>time per launch: baseline → tonight</th><th>% of roof</th><th>bound</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>{more}</section>")


def insert_tonight(page: str, block: str) -> str:
    """``page`` with ``block`` right after its At a glance section (before the rooflines when it has none)."""
    start = page.find('<section id="glance">')
    at = page.find("</section>", start) + len("</section>") if start >= 0 else page.find('<section id="charts">')
    if at < 0:
        at = page.find("</h1>") + len("</h1>")
    return page[:at] + "\n" + block + page[at:]


TONIGHT_GLOBAL = "rooflineTonight"  # what tonight.js sets, and the slot's script reads


def tonight_script(summary: Mapping, trends_href: str) -> str:
    """tonight.js: the block's HTML as a script that sets ``window.rooflineTonight`` (a script file
    loads from file:// where a fetch of an HTML fragment would not)."""
    return f"window.{TONIGHT_GLOBAL} = {script_json(tonight_html(summary, trends_href))};\n"


def write_tonight_script(path: str | os.PathLike, summary: Mapping, trends_page: str | os.PathLike) -> None:
    """Write tonight.js for the tracking stage's ``summary`` (regressions.json's content); its links
    point at ``trends_page``, relative to the script's folder (the summary's)."""
    write_text_atomic(path, tonight_script(summary, asset_src(path, Path(trends_page))))


def tonight_slot(script_src: str) -> str:
    """Where the summary shows tonight's block: filled from ``script_src`` (tonight.js) when the page
    is opened, so the summary never waits for, nor goes stale with, the tracking stage."""
    return (f'<div id="tonight-slot"></div><script src="{esc(script_src)}"></script>'
            f"<script>if (window.{TONIGHT_GLOBAL}) document.getElementById('tonight-slot').outerHTML = "
            f"window.{TONIGHT_GLOBAL};</script>")


def add_tonight_slot(summary_page: str | os.PathLike, script: str | os.PathLike) -> None:
    """Put the slot for ``script`` (tonight.js, written by the tracking stage) into the written summary.

    When the tracking stage has not written the script (the summary built alone, or before it), an
    empty one is created, so that the page loads no missing file; it is created only if absent, in
    one step, so it never replaces the tracking stage's."""
    page = Path(summary_page).read_text(encoding="utf-8")
    write_text_atomic(summary_page, insert_tonight(page, tonight_slot(asset_src(summary_page, Path(script)))))
    try:
        descriptor = os.open(script, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(f"window.{TONIGHT_GLOBAL} = \"\";  // no night tracked yet\n")
