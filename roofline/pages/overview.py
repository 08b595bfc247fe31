"""The summary at scale: at a thousand apps (~100,000 kernels) the summary cannot carry every
kernel and stay small and quick to draw (goal: <= 5 MB, <= 3 s), so it carries the kernels that
matter most and one row per app; each app's page has all of its kernels.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping

import numpy as np
import pandas as pd

from roofline.metrics.units import si
from roofline.pages.markup import esc
from roofline.pages.sections import reason_html

SUMMARY_KERNELS = 2000  # kernels the summary's table and charts carry: half by priority, half by GPU time


def summary_rows(kernels: pd.DataFrame, limit: int = SUMMARY_KERNELS) -> pd.DataFrame:
    """The kernels the summary carries: all when there are at most ``limit``, else the first
    ``limit // 2`` by priority and as many more by GPU time (the longest kernels drawn on the chart
    by default, even those already at their roof)."""
    if len(kernels) <= limit:
        return kernels
    by_priority = kernels["priority"].fillna(kernels["time_share"]).sort_values(ascending=False, kind="stable")
    keep = list(by_priority.index[: limit // 2])
    taken = set(keep)
    by_time = kernels["duration_s"].fillna(kernels.get("predicted_duration_s", np.nan)).sort_values(
        ascending=False, kind="stable", na_position="last")
    keep += [i for i in by_time.index if i not in taken][: limit - len(keep)]
    return kernels.loc[sorted(keep)]


def apps_html(kernels: pd.DataFrame, apps: list[str], sources: Mapping[str, str],
              failed: Mapping[str, str] | None = None) -> str:
    """One row per app, longest GPU time first: its devices, kernels, GPU time and share of the run,
    the time-weighted % of the binding roof of its judged kernels, and its top kernel by priority;
    an app whose input failed (``failed``: app -> reason) says so and why instead, never "0 kernels"."""
    failed = failed or {}
    if len(apps) < 2:
        return ""
    # per app, the positions of its kernels (in table order) and plain arrays: a sub-frame per app
    # costs ~1 ms, seconds at a thousand apps
    codes, names = pd.factorize(kernels["app"])
    by_app = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[by_app], np.arange(len(names) + 1))
    rows_of = {name: by_app[bounds[i]:bounds[i + 1]] for i, name in enumerate(names)}
    duration = kernels["duration_s"].to_numpy(dtype="float64", na_value=np.nan)
    roof_pct = kernels["roof_pct"].to_numpy(dtype="float64", na_value=np.nan)
    judged = ~np.isnan(roof_pct) & ~np.isnan(duration)
    priority = kernels["priority"].to_numpy(dtype="float64", na_value=np.nan)
    device = kernels["device"].to_numpy(dtype=object)
    kernel, kernel_short = kernels["kernel"].to_numpy(dtype=object), kernels["kernel_short"].to_numpy(dtype=object)
    total = float(kernels["duration_s"].sum())
    none = np.zeros(0, dtype=np.intp)
    app_time = {app: float(pd.Series(duration[rows]).sum()) for app, rows in rows_of.items()}
    rows = []
    any_source = any(sources.get(a) for a in apps)  # no empty column when no input is known
    order = sorted(apps, key=lambda a: -app_time[a] if a in app_time else 0.0)
    for app in order:
        at = rows_of.get(app, none)
        time = app_time.get(app, 0.0)
        judged_at = at[judged[at]]
        weight = float(pd.Series(duration[judged_at]).sum())
        roof = (float(pd.Series(roof_pct[judged_at] * duration[judged_at]).sum() / weight) if weight > 0
                else np.nan)
        # the first of the app's kernels by priority as the frame's sort_values orders them (same sort)
        top = at[pd.Series(priority[at]).sort_values(ascending=False, na_position="last").index[:1]]
        top_name = (f'<span class="kname" title="{esc(kernel[top[0]])}">{esc(kernel_short[top[0]])}'
                    "</span>") if len(top) else ""
        href = "apps/" + urllib.parse.quote(f"{app}.html")
        source = sources.get(app)
        source_cell = f'<td class="cfg">{esc(source and source.split("/")[-1])}</td>' if any_source else ""
        if app in failed:
            rows.append(f'<tr class="failed"><td><a href="{esc(href)}">{esc(app)}</a></td>{source_cell}'
                        f'<td colspan="6" class="error"><strong>failed</strong>: {reason_html(failed[app])}</td></tr>')
            continue
        rows.append(
            f'<tr><td><a href="{esc(href)}">{esc(app)}</a></td>{source_cell}'
            f'<td>{esc(", ".join(sorted(set(device[at]))))}</td><td class="n">{len(at)}</td>'
            f'<td class="n">{si(time, "s")}</td><td class="n">'
            f'{f"{100 * time / total:.1f} %" if total > 0 else "–"}</td>'
            f'<td class="n">{"–" if not np.isfinite(roof) else f"{roof:.1f} %"}</td><td>{top_name}</td></tr>'
        )
    return ('<section id="apps"><h2>Apps</h2><p class="meta">One row per app, longest GPU time first; % of roof is '
            "time-weighted over its judged kernels. Each app's page has all its kernels.</p>"
            '<div class="scroll"><table><thead><tr><th>app</th>' + ("<th>input</th>" if any_source else "")
            + "<th>device</th><th>kernels</th>"
            "<th>GPU time</th><th>of the run</th><th>% of roof</th><th>top kernel by priority</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div></section>")
