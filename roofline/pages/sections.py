"""The report pages' plain HTML blocks: inputs that gave no app, the kernels table's controls,
ceilings and diagnostics (:mod:`roofline.pages.report` puts them on a page)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from roofline.metrics.units import si
from roofline.pages.markup import esc

UNPLOTTED_LISTED = 100  # kernels not on a chart listed by name under Diagnostics


def app_sources(kernels: pd.DataFrame, diagnostics: pd.DataFrame) -> dict[str, str]:
    """Each app's input file, from its rows' ``source_file`` (diagnostics; kernels tables that carry
    one), where the caller gave none."""
    frames = [f[["app", "source_file"]] for f in (kernels, diagnostics) if "source_file" in f]
    rows = pd.concat(frames) if frames else pd.DataFrame(columns=["app", "source_file"])
    rows = rows[(rows["app"] != "") & (rows["source_file"].fillna("") != "")]
    return dict(rows.drop_duplicates("app").itertuples(index=False, name=None))


FAILED_REASON_CHARS = 240  # a failed app's reason in the Apps table and the Inputs box; Diagnostics has it all


def failed_apps(kernels: pd.DataFrame, diagnostics: pd.DataFrame) -> dict[str, str]:
    """Each app whose input failed (an ``error`` diagnostic and no kernel: its parse refused it),
    with its first error's first line as the reason, in the diagnostics' order: an app with no
    kernels is either failed or empty, and the pages must not show the two alike."""
    errors = diagnostics[(diagnostics["severity"] == "error") & (diagnostics["app"] != "")]
    errors = errors[~errors["app"].isin(set(kernels["app"]))].drop_duplicates("app")
    return {app: str(message).strip().split("\n", 1)[0]
            for app, message in zip(errors["app"], errors["message"].fillna(""))}


def reason_html(reason: str) -> str:
    """A failed app's reason, cut to :data:`FAILED_REASON_CHARS` (the whole of it as the tooltip)."""
    if len(reason) <= FAILED_REASON_CHARS:
        return esc(reason)
    return f'<span title="{esc(reason)}">{esc(reason[:FAILED_REASON_CHARS - 1])}…</span>'


def source_html(source: str | None) -> str:
    """An app's original file name, next to its name (app names are derived from file names)."""
    return f' <span class="meta" title="{esc(source)}">({esc(Path(source).name)})</span>' if source else ""


def inputs_html(inputs: Sequence[Mapping], n_apps: int, failed: Mapping[str, str] | None = None,
                sources: Mapping[str, str] | None = None) -> str:
    """The inputs: entries that gave no app (roofline.config.inputs.InputProblem) and the apps whose input
    failed (``failed``: app -> reason, :func:`failed_apps`; ``sources``: app -> its file), at the
    top of the summary."""
    failed, sources = failed or {}, sources or {}
    if not inputs and not failed and n_apps:
        return ""
    none = "<p><strong>No application was analysed</strong>: no input was found.</p>" if not n_apps else ""
    items = "".join(f"<li><strong>{esc(i.get('problem'))}</strong>: {esc(i.get('fix'))}</li>" for i in inputs)
    listed = (f'<p>{len(inputs)} <code>inputs:</code> entr{"y" if len(inputs) == 1 else "ies"} gave no app '
              f"(warnings; <code>roofline.status --check</code> exits 4):</p><ul>{items}</ul>") if inputs else ""
    if failed:
        items = "".join(f'<li><strong class="error">{esc(app)} failed</strong>{source_html(sources.get(app))}: '
                        f"{reason_html(reason)}</li>" for app, reason in failed.items())
        listed += (f"<p>{len(failed)} input(s) failed: no kernel was read from them (errors, each under "
                   '<a href="#diagnostics">Diagnostics</a>; <code>roofline.status --check</code> exits 1):</p>'
                   f"<ul>{items}</ul>")
    return f'<section id="inputs" class="warning"><h2>Inputs</h2>{none}{listed}</section>'


def kernels_html(n: int, csv_name: str, columns: Sequence[str], column_help: Mapping[str, str], page_rows: int) -> str:
    """The kernels section's controls and empty table (``columns`` headed, with ``column_help`` as
    their tooltips); the inline script fills the rows, ``page_rows`` at a time."""
    if not n:
        return "<p>No kernels.</p>"
    head = "".join(f'<th title="{esc(column_help.get(c, ""))}">{esc(c)}</th>' for c in columns)
    return (
        '<p class="pager"><input id="find" type="search" size="40" placeholder="find: kernel, app, bound or note" '
        f'aria-label="find kernels"><button id="csv" type="button" title="all {n} kernels, as {esc(csv_name)}">'
        f'download CSV</button><span id="shown">{n} kernels</span></p>\n'
        f'<div class="scroll"><table class="kernels"><thead><tr>{head}</tr></thead><tbody id="rows"></tbody>'
        f'</table></div>\n<p class="pager"><button id="more" type="button" hidden>show {page_rows} more</button>'
        '<button id="all" type="button" hidden>show all</button></p>'
    )


def ceilings_html(ceilings: pd.DataFrame, devices: list[str]) -> str:
    rows = ceilings[ceilings["device"].isin(devices)].sort_values(["device", "kind", "name", "selected"],
                                                                  ascending=[True, True, True, False])
    if rows.empty:
        return "<p>No ceilings.</p>"
    body = "".join(
        f"<tr><td>{esc(r.device)}</td><td>{esc(r.kind)}</td><td>{esc(r.name)}</td>"
        f'<td class="n">{si(r.value, "FLOP/s" if r.kind == "compute" else "B/s")}</td><td>{esc(r.source)}</td>'
        f'<td class="n">{si(r.clock_hz, "Hz")}</td><td>{"yes" if r.selected else ""}</td>'
        f'<td class="note">{esc(r.citation)}</td></tr>'
        for r in rows.itertuples(index=False)
    )
    return ("<table><thead><tr><th>device</th><th>kind</th><th>name</th><th>value</th><th>source</th>"
            f"<th>clock</th><th>selected</th><th>citation</th></tr></thead><tbody>{body}</tbody></table>")


def diagnostics_html(diagnostics: pd.DataFrame, table: pd.DataFrame) -> str:
    d = diagnostics.sort_values(["severity", "app"], kind="stable")
    parts = []
    if len(d):
        body = "".join(
            f'<tr class="{esc(r.severity)}"><td>{esc(r.severity)}</td><td>{esc(r.app)}</td><td>{esc(r.stage)}</td>'
            f"<td>{esc(r.source_file)}</td><td>{'' if not np.isfinite(r.launch) else int(r.launch)}</td>"
            f"<td>{esc(r.message)}</td></tr>"
            for r in d.itertuples(index=False)
        )
        parts.append("<table><thead><tr><th>severity</th><th>app</th><th>stage</th><th>input</th><th>launch</th>"
                     f"<th>message</th></tr></thead><tbody>{body}</tbody></table>")
    unplotted = table[table["rank"].isna()]
    if len(unplotted):
        items = "".join(
            f'<li><span class="kname" title="{esc(r.kernel)}">{esc(r.kernel_short)}</span> ({esc(r.app)}, '
            f"{esc(r.device)}): {esc(r.note or ('bound ' + r.bound + ': no FLOP/s or no intensity to place it'))}</li>"
            for r in unplotted.head(UNPLOTTED_LISTED).itertuples(index=False)
        )
        rest = len(unplotted) - UNPLOTTED_LISTED
        items += f"<li>… and {rest} more: their notes are in the kernels table and its CSV</li>" if rest > 0 else ""
        parts.append(f"<p>{len(unplotted)} kernel(s) are in the table but not on a chart:</p><ul>{items}</ul>")
    return "".join(parts) or "<p>No problems: every input and launch was analysed.</p>"
