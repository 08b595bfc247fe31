"""What the pages build slowly and from the same inputs run after run, kept in the user's cache folder.

Two things: the Vega bundle (:func:`roofline.pages.page.vega_bundle`, per vl-convert version) and
each device's roofline spec (:func:`device_spec`). Altair takes ~0.2 s to build one device's chart,
and the report builds one per device from every app's kernels on it; when one app of hundreds
changes, the other devices' charts come from the very rows they came from last time. A spec is
kept under the digest of everything it is built from: the device, its kernel rows and ceilings
(every column, in order), how many kernels it draws at first, the code of the pages
(:func:`roofline.jobs.stages.code_digests`, the files whose edit reruns the report) and Altair's
version. Any problem with the folder (read-only, full, a damaged entry) just builds the spec
again; ``ROOFLINE_CHART_CACHE=off`` never reads or writes it.

The folder is ``$XDG_CACHE_HOME/roofline`` (``~/.cache/roofline`` without it); the specs keep to
the :data:`KEPT_SPECS` newest.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from roofline.config.switches import switched_on

KEPT_SPECS = 512  # a few nights of a thousand apps' devices


def cache_folder() -> Path:
    """The user's cache folder for roofline (``$XDG_CACHE_HOME/roofline``, else ``~/.cache/roofline``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "roofline"


@functools.cache
def _code_key() -> str | None:
    """What the specs are built by; None where the package's files cannot be read (then nothing is
    kept between runs: a spec from other code could not be told apart)."""
    import altair

    from roofline.jobs.stages import code_digests

    try:
        return f"{code_digests('report')} altair:{altair.__version__}"
    except OSError:
        return None


def frame_digest(frame: pd.DataFrame) -> str:
    """A digest of every value of ``frame``, its column names and their order, and its row order."""
    digest = hashlib.blake2b(json.dumps([str(c) for c in frame.columns]).encode(), digest_size=16)
    digest.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    return digest.hexdigest()


_BUILT: dict[str, dict] = {}


def device_spec(kernels: pd.DataFrame, ceilings: pd.DataFrame, device: str,
                build: Callable[[], dict], top_kernels: int) -> dict:
    """``build()``, the spec of ``device``'s chart from ``kernels`` and ``ceilings`` drawing
    ``top_kernels`` at first, or the one built from the same rows, ceilings, count and code before
    (in this process or a run before). The caller gets its own copy."""
    key = hashlib.blake2b(
        f"{device}\n{frame_digest(kernels)}\n{frame_digest(ceilings)}\n{top_kernels}\n{_code_key()}".encode(),
        digest_size=16,
    ).hexdigest()
    if key not in _BUILT:
        if len(_BUILT) > 64:
            _BUILT.clear()
        _BUILT[key] = _stored(key, build) if _code_key() is not None else build()
    return json.loads(json.dumps(_BUILT[key]))  # a deep copy, and what a stored spec reads back as


def _stored(key: str, build: Callable[[], dict]) -> dict:
    if not switched_on("ROOFLINE_CHART_CACHE", True):
        return build()
    folder = cache_folder() / "charts"
    path = folder / f"{key}.json"
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
        os.utime(path)  # the newest kept are the ones used
        return spec
    except (OSError, ValueError):
        pass
    spec = build()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        partial.write_text(json.dumps(spec, allow_nan=False), encoding="utf-8")
        os.replace(partial, path)
        _prune(folder)
    except (OSError, ValueError):
        pass  # a read-only or full cache folder: build it each time
    return spec


def _prune(folder: Path) -> None:
    entries = list(folder.glob("*.json"))
    if len(entries) <= KEPT_SPECS:
        return
    for path in sorted(entries, key=lambda p: p.stat().st_mtime)[: len(entries) - KEPT_SPECS]:
        path.unlink(missing_ok=True)
