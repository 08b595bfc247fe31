"""Report stage: kernels + ceilings + diagnostics -> one offline HTML summary and a page per app.

Pure functions build the pages (:func:`summary_html`, :func:`app_html`) around the charts of
:mod:`roofline.charts.roofline_chart`; :func:`write_pages` and :func:`write_report` are the only ones
touching files. Pages
make no network request: written together they share one Vega bundle beside the summary
(``assets/vega-bundle.js``, by relative path); a page built alone inlines it (:mod:`roofline.pages.page`).

A page embeds its kernels once, as one compact JSON table (:func:`page_table`: a column per field,
numbers to 4 significant digits, rows by priority). A small inline script (``assets/report.js``; the
style sheet is ``assets/report.css``) draws the kernels table from it (a page of rows at a time, with
find and "show all"), builds the CSV download in the browser and fills each chart's kernel points (one
row per kernel; the spec folds them into one point per memory level). Charts draw the top
``top_kernels`` kernels by GPU time at first (the config's ``report.top_kernels``, default
:data:`roofline.charts.roofline_chart.TOP_N_DEFAULT`); their slider draws the others.

Kernel names are data: HTML text is escaped, the script sets names with ``textContent`` only, and
every embedded JSON has ``<`` escaped, so a name cannot close a tag or open a script.
"""

from __future__ import annotations

import copy
import os
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path

import altair as alt
import pandas as pd

from roofline.charts.instruction import instruction_chart
from roofline.charts.roofline_chart import (
    ALL,
    CHART_FIELDS,
    KERNEL_DATA,
    TOP_N_DEFAULT,
    chart_ranks,
    kernel_count_text,
    roofline_spec,
)
from roofline.config.inputs import is_app_name
from roofline.files.atomic import write_text_atomic
from roofline.pages.cache import device_spec
from roofline.pages.glance import findings_html, glance_html
from roofline.pages.markup import esc as _e
from roofline.pages.markup import script_json as _json
from roofline.pages.overview import SUMMARY_KERNELS, apps_html, summary_rows
from roofline.pages.page import (  # noqa: F401 - vega_bundle: the trends page takes it from here
    CHARTS_ASSET,
    VEGA_ASSET,
    asset_src,
    page_html,
    vega_bundle,
    write_charts_asset,
    write_vega_asset,
)
from roofline.pages.sections import (
    app_sources,
    ceilings_html,
    diagnostics_html,
    failed_apps,
    inputs_html,
    kernels_html,
    source_html,
)
from roofline.pages.table import (  # noqa: F401 - TEXT_FIELDS: the tests read the table's contract here
    COLUMN_HELP,
    CSV_COLUMNS,
    TABLE,
    TABLE_COLUMNS,
    TABLE_ROWS,
    TEXT_FIELDS,
    columns_json,
    page_table,
)
from roofline.tables.reads import read_tables
from roofline.tables.schemas import conform

CANVAS_FROM = 300  # kernels on a chart from which it is drawn on a canvas, not as SVG
# apps linked in the summary's header; beyond, the links fold (the Apps table lists every app, by GPU
# time): a thousand apps' links would fill five screens before the first chart
NAV_APPS_OPEN = 24


# -- pages -----------------------------------------------------------------------------------------

# The kernels table: (header, field of the page's embedded table or None for the row number, format).
# The inline script draws the rows and writes the CSV (these columns and the full name) from it.
def _app_href(app: str, prefix: str) -> str:
    return prefix + urllib.parse.quote(f"{app}.html")


def _chart_spec(kernels: pd.DataFrame, ceilings: pd.DataFrame, device: str, top_kernels: int) -> dict:
    """``roofline_chart(...).to_dict()`` without its kernel rows (the page fills them in from its
    table), kept on its content (:func:`roofline.pages.cache.device_spec`): the summary and an app
    page often draw the same device from the same rows, and so does the next run for every device
    whose apps did not change."""
    return device_spec(kernels, ceilings, device,
                       lambda: roofline_spec(kernels, ceilings, device, rows=False, top_kernels=top_kernels),
                       top_kernels)


def chart_controls(n: int, apps: list[str]) -> dict:
    """What fits a device chart to the page's rows, which the page's script sets in the spec before
    drawing it (``narrow`` in assets/report.js): the kernel count of its subtitle, the top-N
    slider's end for its ``n`` kernels (the slider starts at the chart's own top N, or ``n`` when
    fewer), the app filter's choices for its ``apps`` (the chart is built from every kernel of the
    device, as the summary draws it)."""
    return {"count": kernel_count_text(n), "max": max(n, 1), "apps": [ALL, *apps]}


def chart_devices(kernels: pd.DataFrame, ceilings: pd.DataFrame) -> list[str]:
    """The devices that get a roofline: a selected ceiling and a kernel the chart can place."""
    placeable = set(kernels.loc[chart_ranks(kernels).notna(), "device"].unique()) if len(kernels) else set()
    selected = set(ceilings.loc[ceilings["selected"], "device"])
    return sorted(placeable & selected)


def _body(kernels: pd.DataFrame, ceilings: pd.DataFrame, diagnostics: pd.DataFrame, title: str,
          app_prefix: str | None, nav: str, csv_name: str,
          chart_kernels: pd.DataFrame | None = None, chart_cache: dict | None = None, limit: int | None = None,
          after_glance: str = "", shared_charts: bool = False,
          top_kernels: int = TOP_N_DEFAULT, apps: Sequence[str] | None = None) -> tuple[str, list[dict | None], str]:
    """The page's body, its chart specs and its embedded data (JSON text).

    ``limit``: the page's table and charts carry at most this many kernels
    (:func:`roofline.pages.overview.summary_rows`); At a glance and the counts still see them all.

    ``chart_kernels`` (default: ``kernels``) sets each device chart's frame: an app page passes the
    summary's kernels, so that its charts share the summary's axes, roof labels and app colours (and
    the chart is built once per device, not once per page: ~0.3 s each). ``chart_cache`` keeps the
    specs by device across the pages of one :func:`write_pages` call (same frames for every page).
    ``shared_charts``: the device charts are the summary's, loaded from ``assets/charts.js``
    (:func:`roofline.pages.page.write_charts_asset`); the page carries only their controls.
    ``apps``: the apps the page lists (the summary's Apps table), which the header counts (default:
    those with kernels and those whose input failed).
    """
    kernels = conform(kernels, "kernels")
    ceilings = conform(ceilings, "ceilings")
    diagnostics = conform(diagnostics, "diagnostics")
    carried = summary_rows(kernels, limit) if limit else kernels
    table = page_table(carried)
    devices = sorted(kernels["device"].unique())
    specs, charts, sections, skipped = [], [], [], []
    with alt.data_transformers.disable_max_rows():
        for device in devices:
            n = int((table["rank"].notna() & (table["device"] == device)).sum())
            if not ((ceilings["device"] == device) & ceilings["selected"]).any():
                skipped.append(f"{_e(device or '(unnamed device)')} (no selected ceiling)")
            elif not n:
                skipped.append(f"{_e(device)} (no judged kernel with both a performance and an intensity)")
            else:
                page_apps = sorted(kernels.loc[kernels["device"] == device, "app"].unique())
                entry = {"device": device, "canvas": n >= CANVAS_FROM, "controls": chart_controls(n, page_apps)}
                if shared_charts:
                    specs.append(None)
                    entry["shared"] = True
                elif chart_cache is not None and device in chart_cache:
                    specs.append(copy.deepcopy(chart_cache[device]))
                else:
                    frame = kernels if chart_kernels is None else conform(chart_kernels, "kernels")
                    spec = _chart_spec(frame[frame["device"] == device], ceilings[ceilings["device"] == device], device,
                                       top_kernels)
                    if chart_cache is not None:
                        chart_cache[device] = copy.deepcopy(spec)
                    specs.append(spec)
                charts.append(entry)
                i = len(specs) - 1
                sections.append(f'<div class="chart" id="chart{i}"></div><p class="drawn" id="drawn{i}"></p>')
            instruction = instruction_chart(carried, device)
            if instruction is not None:  # kernels without FP work: their picture is the instruction roofline
                specs.append(instruction.to_dict(validate=False))
                charts.append({"device": device, "canvas": False, "inline": True})
                sections.append(f'<div class="chart" id="chart{len(specs) - 1}"></div>')
    if skipped:
        sections.append(f"<p>No chart for {', '.join(skipped)}: their kernels are in the table below, the reasons "
                        "in each kernel's note and under <a href=\"#diagnostics\">Diagnostics</a>.</p>")
    data = (f'{{"n":{len(table)},"cols":{columns_json(table)},"charts":{_json(charts)},'
            f'"dataset":{_json(KERNEL_DATA)},"fields":{_json(CHART_FIELDS)},"table":{_json(TABLE)},'
            f'"csv":{_json(CSV_COLUMNS)},"csvName":{_json(csv_name)},"appPrefix":{_json(app_prefix)},'
            f'"pageRows":{TABLE_ROWS}}}')
    n_err = int((diagnostics["severity"] == "error").sum())
    # the header counts the apps the page lists, failed ones too, and says how many failed
    failed = failed_apps(kernels, diagnostics)
    n_apps = len(apps) if apps is not None else len(set(kernels["app"]) | set(failed))
    failed_text = f" ({len(failed)} failed: listed under Inputs)" if failed and app_prefix is not None else (
        f" ({len(failed)} failed)" if failed else "")
    app_page = app_prefix is None
    findings = ' · <a href="#findings">ncu\'s findings</a>' if app_page else ""
    contents = ('<nav class="meta">Contents: <a href="#glance">at a glance</a> · <a href="#charts">rooflines</a> · '
                f'<a href="#kernels">kernels</a>{findings} · <a href="#ceilings">ceilings</a> · '
                '<a href="#diagnostics">diagnostics</a></nav>')
    body = (
        f"<h1>{_e(title)}</h1>\n{nav}\n{contents}\n<p class=\"meta\">{len(kernels)} kernels, "
        f"{n_apps} app(s){failed_text}, {len(devices)} device(s); {n_err} input error(s). "
        "Each kernel is drawn once per memory level: same performance, that level's arithmetic intensity "
        "(work of its dominant compute class / measured bytes at the level).</p>\n"
        + glance_html(kernels, app_page) + after_glance + "\n"
        '<section id="charts"><h2>Rooflines</h2><p class="meta">Each chart\'s ⋯ menu (top right) saves it as SVG '
        "or PNG, for slides and papers (drawn in the page, offline).</p>" + "\n".join(sections) + "</section>\n"
        '<section id="kernels"><h2>Kernels by priority</h2><p class="meta">priority = time share × (1 − fraction of '
        "the binding roof): where optimisation pays most." + (
            f" This page carries {len(carried):,} of the {len(kernels):,} kernels (half the highest priorities, half "
            "the longest GPU times; the table, its CSV and the charts); each app's page has all of its own."
            if len(carried) < len(kernels) else "") + "</p>\n" + kernels_html(
            len(table), csv_name, TABLE_COLUMNS, COLUMN_HELP, TABLE_ROWS)
        + "</section>\n" + (findings_html(kernels) if app_page else "")
        + f'\n<section id="ceilings"><h2>Ceilings</h2>{ceilings_html(ceilings, devices)}</section>\n'
        f'<section id="diagnostics"><h2>Diagnostics</h2>{diagnostics_html(diagnostics, table)}</section>'
    )
    return body, specs, data


def summary_html(kernels: pd.DataFrame, ceilings: pd.DataFrame, diagnostics: pd.DataFrame, title: str,
                 chart_cache: dict | None = None, sources: Mapping[str, str] | None = None,
                 inputs: Sequence[Mapping] = (), apps: Sequence[str] = (), vega: str | None = None,
                 series_links: Mapping[str, str] | None = None, top_kernels: int = TOP_N_DEFAULT) -> str:
    """The whole offline summary page: the inputs that gave no app, a chart per device, kernel
    table, ceilings, diagnostics. Each app is listed with its input's file name (``sources``,
    default: the tables' ``source_file``). The page carries at most :data:`SUMMARY_KERNELS`
    kernels and one row per app (each app's page has all its kernels); ``vega`` is the URL of the
    shared Vega bundle (:func:`roofline.pages.page.asset_src`; default: inlined)."""
    apps = sorted((set(kernels["app"].unique()) | set(diagnostics["app"].unique()) | set(apps)) - {""})
    sources = app_sources(kernels, diagnostics) if sources is None else sources
    links = " · ".join(f'<a href="{_e(_app_href(a, "apps/"))}">{_e(a)}</a>{source_html(sources.get(a))}' for a in apps)
    header = (f"Apps: {links or 'none'}" if len(apps) <= NAV_APPS_OPEN else
              f'<details><summary>Apps: {len(apps):,} (the <a href="#apps">Apps</a> table lists them by GPU time)'
              f"</summary>{links}</details>")
    failed = failed_apps(kernels, diagnostics)
    nav = f"<nav>{header}</nav>\n{inputs_html(inputs, len(apps), failed, sources)}"
    if series_links:
        nav += "<nav>Series (trajectories): " + " · ".join(
            f'<a href="{_e(href)}">{_e(name)}</a>' for name, href in series_links.items()) + "</nav>\n"
    # ...and in the diagnostics table, which must not say "no problems" of a run that lost an input
    rows = [{"app": "", "stage": "inputs", "severity": "warning", "source_file": i.get("path") or i.get("pattern"),
             "message": f"{i.get('problem')}: {i.get('fix')}"} for i in inputs]
    if rows:
        diagnostics = pd.concat([conform(pd.DataFrame(rows), "diagnostics"), diagnostics], ignore_index=True)
    return page_html(title, *_body(kernels, ceilings, diagnostics, title, "apps/", nav, "kernels.csv",
                                   chart_cache=chart_cache, limit=SUMMARY_KERNELS,
                                   after_glance=apps_html(kernels, apps, sources, failed), top_kernels=top_kernels,
                                   apps=apps), vega=vega)


def app_html(kernels: pd.DataFrame, ceilings: pd.DataFrame, diagnostics: pd.DataFrame, app: str,
             title: str = "", chart_cache: dict | None = None, source: str | None = None,
             vega: str | None = None, charts: str | None = None) -> str:
    """The page of one app (``reports/apps/{app}.html``): the summary's blocks for its rows only,
    under a line naming its input (``source``, default: its rows' ``source_file``); ``vega`` as for
    :func:`summary_html`. ``charts`` is the relative URL of the summary's device charts
    (``assets/charts.js``, :func:`write_pages`): the page then draws those, fitted to its rows, and
    needs only its own kernels; without it, each device chart is built here from ``kernels``."""
    mine, notes = kernels[kernels["app"] == app], diagnostics[diagnostics["app"] == app]
    source = source if source is not None else app_sources(mine, notes).get(app)
    return _app_page(mine, kernels, ceilings, notes, app, title, chart_cache, source, vega, charts)


def _app_page(mine: pd.DataFrame, kernels: pd.DataFrame, ceilings: pd.DataFrame, diagnostics: pd.DataFrame,
              app: str, title: str, chart_cache: dict | None, source: str | None = None,
              vega: str | None = None, charts: str | None = None) -> str:
    """:func:`app_html` from the app's rows (``mine``) and diagnostics, already picked out."""
    devices = set(mine["device"])
    # the page is the app's: its own name heads it; the run's title (a summary's) names the way back
    heading = app
    nav = f'<nav><a href="../summary.html">← {_e(title or "summary")}</a></nav>'
    if source:
        nav += f'\n<p class="meta">input: <code>{_e(source)}</code></p>'
    return page_html(heading, *_body(mine, ceilings[ceilings["device"].isin(devices)], diagnostics, heading, None, nav,
                                 f"{app}.csv", chart_kernels=kernels, chart_cache=chart_cache,
                                 shared_charts=charts is not None), vega=vega, charts=charts)


# -- IO edge ---------------------------------------------------------------------------------------


def write_pages(
    kernels: pd.DataFrame, ceilings: pd.DataFrame, diagnostics: pd.DataFrame,
    output: str | os.PathLike, apps_dir: str | os.PathLike | None, title: str, apps: Sequence[str] = (),
    sources: Mapping[str, str] | None = None, inputs: Sequence[Mapping] = (),
    series_links: Mapping[str, str] | None = None, top_kernels: int = TOP_N_DEFAULT,
) -> list[Path]:
    """Write the summary page and one page per app in ``apps_dir`` (atomically); return the pages
    written. With ``apps_dir`` None only the summary is written (the workflow writes each app's page
    in a job of its own, :func:`page_main`); it links to ``apps/`` beside it all the same.
    ``series_links`` (name -> relative URL) are the compare pages the summary links to.

    The pages share one Vega bundle, ``assets/vega-bundle.js`` beside the summary
    (:data:`VEGA_ASSET`, written once and loaded by relative path), and the summary's device charts,
    ``assets/charts.js`` (:data:`CHARTS_ASSET`), which the app pages draw fitted to their rows.

    Every app in the tables gets a page, and so does every name in ``apps`` (an app whose input
    gave no kernel and no diagnostic still gets its, empty, page). ``sources`` names each app's
    input file (default: the tables' ``source_file``); ``inputs`` lists the ``inputs:`` entries
    that gave no app (roofline.config.inputs.InputProblem as dicts), shown at the top of the summary.

    Raises
    ------
    ValueError
        If an app name could not be a file name (letters, digits, ``.``, ``_``, ``-`` only).
    """
    apps = sorted((set(kernels["app"].unique()) | set(diagnostics["app"].unique()) | set(apps)) - {""})
    bad = [a for a in apps if not is_app_name(a)]
    if bad:
        raise ValueError(f"app names {bad} cannot be file names; use letters, digits, '.', '_', '-'")
    output = Path(output)
    # Conformed once here, so that each page's own conform is a check; one chart per device for all pages.
    kernels, ceilings = conform(kernels, "kernels"), conform(ceilings, "ceilings")
    diagnostics, charts = conform(diagnostics, "diagnostics"), {}
    sources = {**app_sources(kernels, diagnostics), **(sources or {})}
    # one copy of the Vega bundle for every page, beside the summary (the pages still open offline)
    bundle = write_vega_asset(output.parent)
    write_text_atomic(output, summary_html(kernels, ceilings, diagnostics, title, charts, sources, inputs, apps,
                                           vega=asset_src(output, bundle), series_links=series_links,
                                           top_kernels=top_kernels))
    # every device an app page may chart: the summary's own charts skip devices none of its carried rows reach
    shared = write_charts_asset(output.parent, {
        device: charts[device] if device in charts else _chart_spec(
            kernels[kernels["device"] == device], ceilings[ceilings["device"] == device], device, top_kernels)
        for device in chart_devices(kernels, ceilings)})
    written = [output]
    if apps_dir is None:
        return written
    apps_dir = Path(apps_dir)
    app_vega, app_charts = asset_src(apps_dir / "x.html", bundle), asset_src(apps_dir / "x.html", shared)
    # Split once: picking each app's rows out of all of them would make the pages quadratic in apps.
    rows_of, notes_of = dict(tuple(kernels.groupby("app"))), dict(tuple(diagnostics.groupby("app")))
    for app in apps:
        page = apps_dir / f"{app}.html"
        write_text_atomic(page, _app_page(rows_of.get(app, kernels.iloc[:0]), kernels, ceilings,
                                          notes_of.get(app, diagnostics.iloc[:0]), app, title, None,
                                          sources.get(app), app_vega, app_charts))
        written.append(page)
    return written


def write_report(
    kernels_paths: Sequence[str | os.PathLike],
    ceilings_paths: Sequence[str | os.PathLike],
    diagnostics_paths: Sequence[str | os.PathLike],
    output: str | os.PathLike,
    apps_dir: str | os.PathLike | None,
    title: str,
    apps: Sequence[str] = (),
    sources: Mapping[str, str] | None = None,
    inputs: Sequence[Mapping] = (),
    series: Mapping[str, Mapping] | None = None,
    compare_dir: str | os.PathLike | None = None,
    keep_joined: str | os.PathLike | None = None,
    top_kernels: int = TOP_N_DEFAULT,
) -> list[Path]:
    """Read the stage tables (Parquet) and write the pages with :func:`write_pages`, and a compare
    page per ``series`` (the config's ``series:``) in ``compare_dir`` (default: ``compare/`` beside
    ``output``), sharing the summary's Vega bundle. ``keep_joined``: a folder where the joined
    kernels and diagnostics are kept between runs, so that a rerun reads only the apps' tables that
    changed (:mod:`roofline.tables.kept_join`). ``top_kernels``: the kernels each device chart draws at first."""
    from roofline.pages.compare import write_series

    kernels = read_tables(kernels_paths, "kernels", keep_joined)
    ceilings = read_tables(ceilings_paths, "ceilings").drop_duplicates()
    diagnostics = read_tables(diagnostics_paths, "diagnostics", keep_joined)
    series = series or {}
    folder = Path(compare_dir) if compare_dir else Path(output).parent / "compare"
    written = write_pages(kernels, ceilings, diagnostics, output, apps_dir, title, apps, sources, inputs,
                          series_links={name: asset_src(output, folder / f"{name}.html") for name in series},
                          top_kernels=top_kernels)
    return written + write_series(series, kernels, ceilings, folder, Path(output).parent, title,
                                  {**app_sources(conform(kernels, "kernels"), conform(diagnostics, "diagnostics")),
                                   **(sources or {})})


def write_app_page(kernels: pd.DataFrame, ceilings: pd.DataFrame, diagnostics_paths: Sequence[str | os.PathLike],
                  app: str, output: str | os.PathLike, title: str = "", source: str | None = None,
                  summary: str | os.PathLike | None = None) -> Path:
    """Write one app's page from its kernels, the devices' ceilings and its diagnostics tables.
    ``summary`` is the summary page's path: the page loads the Vega bundle and the device charts the
    summary's job writes beside it (:data:`VEGA_ASSET`, :data:`CHARTS_ASSET`), so building it draws
    no chart. Without one, the bundle is inlined and the charts are built from the app's kernels."""
    if not is_app_name(app):
        raise ValueError(f"app name {app!r} cannot be a file name; use letters, digits, '.', '_', '-'")
    ceilings = conform(ceilings.drop_duplicates(), "ceilings")
    diagnostics = read_tables(diagnostics_paths, "diagnostics")
    output = Path(output)
    vega = charts = None
    if summary:
        folder = Path(summary).parent
        vega, charts = asset_src(output, folder / VEGA_ASSET), asset_src(output, folder / CHARTS_ASSET)
    write_text_atomic(output, app_html(kernels, ceilings, diagnostics, app, title, source=source or None, vega=vega,
                                       charts=charts))
    return output
