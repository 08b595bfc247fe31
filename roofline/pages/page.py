"""The one page builder: every page (summary, app pages, compare page) has the same head, style
sheet, Vega bundle and inline script, so they look and behave alike.

The Vega bundle (~1 MB of JavaScript) is either inlined (a page written alone, e.g.
:func:`roofline.pages.report.summary_html`'s string) or, for pages written together, one shared file,
``assets/vega-bundle.js`` beside the summary, loaded by relative path (:func:`write_vega_asset`,
:func:`asset_src`): a classic ``<script src>`` loads from ``file://`` in every browser, so the
pages still open offline, and a thousand app pages do not carry a thousand copies.

The device rooflines an app page draws are the summary's (same axes, roofs and app colours), so they
are one more shared file beside the bundle, ``assets/charts.js`` (:func:`write_charts_asset`),
written with the summary: an app page carries only its own rows and the controls that fit them,
and is built without drawing a chart, in a job of its own.
"""

from __future__ import annotations

import functools
import importlib.resources
import os
import posixpath
import urllib.parse
from pathlib import Path

from roofline.files.atomic import write_text_atomic
from roofline.pages.cache import cache_folder
from roofline.pages.markup import esc, script_json

ASSETS = importlib.resources.files("roofline") / "assets"
CSS = (ASSETS / "report.css").read_text(encoding="utf-8")
# Draws the kernels table and the charts from DATA (one column per field, rows in priority order).
# Names are data: every text goes in with textContent or a property, never as markup.
SCRIPT = (ASSETS / "report.js").read_text(encoding="utf-8")
VEGA_ASSET = Path("assets") / "vega-bundle.js"  # beside the summary page
CHARTS_ASSET = Path("assets") / "charts.js"  # the summary's device rooflines, which app pages load


@functools.cache
def vega_bundle() -> str:
    """vega + vega-lite + vega-embed as one script (defines ``vegaEmbed``).

    Building it takes ~1.2 s (vl_convert bundles the JavaScript on each call), so it is built once
    per vl-convert version and kept in the user's cache folder; any problem there just rebuilds it.
    """
    import vl_convert

    version = getattr(vl_convert, "__version__", "unknown")
    cache = cache_folder() / f"vega-{version}.js"
    try:
        bundle = cache.read_text(encoding="utf-8")
        if "vegaEmbed" in bundle:
            return bundle
    except (OSError, UnicodeDecodeError):
        pass
    bundle = vl_convert.javascript_bundle()
    try:
        write_text_atomic(cache, bundle)
    except OSError:
        pass  # a read-only home: build it each time
    return bundle


def _write_if_changed(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically, leaving the file alone when it already holds it (so
    that a rerun does not touch it); return the path."""
    try:
        if path.stat().st_size == len(text.encode("utf-8")) and path.read_text(encoding="utf-8") == text:
            return path
    except (OSError, UnicodeDecodeError):
        pass
    write_text_atomic(path, text)
    return path


def write_vega_asset(folder: str | os.PathLike) -> Path:
    """Write the Vega bundle to ``folder/assets/vega-bundle.js`` (atomically; left alone when it
    already holds this bundle) and return its path."""
    return _write_if_changed(Path(folder) / VEGA_ASSET, vega_bundle())


def write_charts_asset(folder: str | os.PathLike, specs: dict[str, dict]) -> Path:
    """Write the device chart specs (device -> Vega-Lite spec without kernel rows) to
    ``folder/assets/charts.js`` as ``ROOFLINE_CHARTS`` (atomically; left alone when unchanged) and
    return its path."""
    return _write_if_changed(Path(folder) / CHARTS_ASSET, f"window.ROOFLINE_CHARTS = {script_json(specs)};\n")


def asset_src(page: str | os.PathLike, asset: str | os.PathLike) -> str:
    """The relative URL from ``page`` (a file) to ``asset``, for ``<script src>``."""
    rel = os.path.relpath(os.path.abspath(asset), os.path.dirname(os.path.abspath(page)))
    return urllib.parse.quote(posixpath.join(*Path(rel).parts))


def page_html(title: str, body: str, specs: list[dict | None], data: str, vega: str | None = None,
              charts: str | None = None) -> str:
    """A whole page: ``body`` (HTML), the chart ``specs`` and the page's ``data`` (JSON text, the
    ``DATA`` the inline script reads). ``vega`` is the relative URL of the shared Vega bundle
    (:func:`asset_src`); without it the bundle is inlined. ``charts`` is the relative URL of the
    shared device charts (:func:`write_charts_asset`), for a page whose specs leave them out (None)."""
    script = f'<script src="{esc(vega)}"></script>' if vega else f"<script>{vega_bundle()}</script>"
    if charts:
        script += f'\n<script src="{esc(charts)}"></script>'
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>\n'
        f"<style>\n{CSS}</style>\n{script}\n</head><body>\n{body}\n"
        f"<script>\nvar DATA = {data};\nvar SPECS = {script_json(specs)};\nvar VIEWS = [];\n\n{SCRIPT}</script>\n"
        "</body></html>\n"
    )
