"""The Python API for notebooks: read a profile, analyse it, draw its roofline.

In the spirit of hatchet's ``GraphFrame.from_<format>`` readers, one call per step, each returning
plain pandas tables whose columns are declared in :mod:`roofline.tables.schemas`::

    import roofline
    counters = roofline.read("profile.ncu-rep")                    # one row per launch
    result = roofline.analyse(["profile.ncu-rep", "other.csv"])    # ceilings, launches, kernels
    roofline.plot(result)                                          # the report's roofline, inline

The ``roofline`` command (:mod:`roofline.cli`) runs the same :func:`analyse`, so a notebook and the
terminal give the same numbers; the workflow runs the same stages, one job per file.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Literal

import pandas as pd

from roofline.ceilings import CROSS_CHECK_MARGIN, DEFAULT_POLICY
from roofline.config import inputs
from roofline.tables.schemas import conform

if TYPE_CHECKING:
    import altair as alt

SOURCES = ("report", "measured", "datasheet", "what-if")  # what build_ceilings can select from
PathLike = str | os.PathLike
Source = PathLike | pd.DataFrame


@dataclass(frozen=True, repr=False)
class Analysis:
    """What :func:`analyse` found: every table of the data contract for the inputs given.

    ``counters`` is the tidy per-launch table (:func:`read`'s), ``ceilings`` every candidate roof
    per device (``selected`` marks the ones applied), ``kernels`` one row per kernel, highest
    priority first, ``diagnostics`` what could not be analysed and why, ``errors`` one line per
    input that gave nothing (``"<path>: <what is wrong and the fix>"``), ``skipped`` one line per
    entry of a folder given as input that is no input (``"<path>: <why>"``, also a warning row of
    ``diagnostics``). ``launches`` (the classified per-launch table) is computed on first use: the
    kernels do not need it.
    """

    counters: pd.DataFrame
    ceilings: pd.DataFrame
    kernels: pd.DataFrame
    diagnostics: pd.DataFrame
    errors: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()

    @cached_property
    def launches(self) -> pd.DataFrame:
        """The classified per-launch table (``data/classified/{app}.parquet`` of the workflow)."""
        from roofline.classify.launches import classify_launches

        if self.counters.empty:
            return conform(pd.DataFrame(), "classified")
        return classify_launches(self.counters, self.ceilings)

    @property
    def devices(self) -> list[str]:
        """The devices the kernels ran on, in name order."""
        return sorted(d for d in self.kernels["device"].dropna().unique() if d)

    def __repr__(self) -> str:
        def count(n: int, what: str) -> str:
            return f"{n} {what}{'s' if n != 1 else ''}"

        apps = self.kernels["app"].nunique()
        return (f"<roofline.Analysis: {count(len(self.kernels), 'kernel')} of {count(apps, 'app')}"
                f" on {', '.join(self.devices) or 'no device'}; {count(len(self.errors), 'input')} not analysed>")


def read(path: PathLike, device: str | None = None, app: str | None = None, digest: bool = True) -> pd.DataFrame:
    """The tidy per-launch counters table of one input (``data/counters/{app}.parquet``).

    Parameters
    ----------
    path : path-like
        An ``.ncu-rep``, an ncu CSV export (or a folder of them), a what-if table; each may be
        compressed (``.gz``, ``.xz``, ``.zst``, ``.bz2``).
    device : str, optional
        The GPU, for exports that do not record it (e.g. ``"NVIDIA A100-SXM4-80GB"``, a name of
        the GPU catalog); without it such launches are on an ``unnamed GPU`` and get no verdict.
        A device the file records wins.
    app : str, optional
        The application's name (default: derived from the file name, as the workflow does).
    digest : bool
        Hash the input for ``source_sha256`` (its provenance; left empty with False, which saves
        reading the whole file once more).

    Raises
    ------
    ValueError
        (``roofline.errors.InputError`` and others) when the file cannot be read; the message
        names the file and the fix.
    """
    from roofline.errors import InputError
    from roofline.parse.counters import parse_input

    path = os.fspath(path)
    # the workflow's judgement of a file a pattern found: the same message, naming the fix
    problem = inputs.file_problem(path) if os.path.lexists(path) and not os.path.isdir(path) else ""
    if problem:
        raise InputError(problem)
    if not os.path.lexists(path):
        raise InputError(f"{path}: no such file")
    return parse_input(path, app or inputs.app_name(path), inputs.input_kind(path), device, digest)


def input_files(paths: Iterable[PathLike]) -> tuple[list[str], list[str]]:
    """The inputs ``paths`` name, each one application, and the folder entries left out with why.

    A file is itself. A folder (:func:`roofline.config.inputs.folder_inputs`) is its CSV exports, read
    together as one application named after the folder (the workflow's ``csv-dir``), then each
    other input in it (reports, what-if tables) as its own application named after its file; an
    entry that is no input (a note, a subfolder) is a line ``"<path>: <why>"`` of the second list.
    A folder with no input at all stays itself, so that reading it says so.
    """
    files: list[str] = []
    skipped: list[str] = []
    for path in map(os.fspath, paths):
        if not os.path.isdir(path):
            files.append(path)
            continue
        try:
            found = inputs.folder_inputs(path)
        except OSError:
            files.append(path)  # reading it names the folder and the error
            continue
        if found.exports or not found.files:
            files.append(path)
        files.extend(os.fspath(f) for f in found.files)
        skipped.extend(found.skipped)
    return files, skipped


def app_names(paths: Iterable[PathLike], taken: Iterable[str] = ()) -> list[str]:
    """The app name of each file in the order given, as the workflow names it
    (:func:`roofline.config.inputs.app_name`); a later file with a name already taken gets ``-2``, ``-3``..."""
    names: list[str] = []
    reserved = set(taken)
    for path in paths:
        names.append(inputs.unique_name(inputs.app_name(path), reserved | set(names)))
    return names


def _problem(exc: Exception, path: str) -> str:
    """The one line for an input that could not be read: its own message where it explains itself
    (naming the file), else the exception named with the fix."""
    from roofline.metrics.units import UnitError

    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, ValueError | UnitError | OSError) and text:
        text = text.removeprefix(f"{path}: ")
        return text if path in text else f"{path}: {text}"
    return (f"{path}: could not be read ({type(exc).__name__}: {text}); the file may be damaged: re-export it, "
            "and report this message if the file opens in Nsight Compute")


def _read_logged(path: str, app: str, device: str | None, digest: bool = True) -> tuple[pd.DataFrame, list[dict]]:
    """:func:`read`, with the readers' warnings about the input (repairs) as diagnostics rows, as
    the workflow's parse stage records them."""
    from roofline.parse.counters import diagnostics_for, named_message, reportable_warning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = read(path, device, app, digest)
    if frame.empty:
        raise ValueError(f"{path}: no kernel launches in the file; profile at least one kernel (check the ncu "
                         "filters -k/--kernel-name, --launch-skip, --launch-count)")
    repaired = [
        {"app": app, "stage": "parse", "severity": "warning", "source_file": path, "message": text}
        for text in dict.fromkeys(named_message(str(w.message), path) for w in caught if reportable_warning(w))
    ]
    return frame, [*repaired, *diagnostics_for(frame, app).to_dict("records")]


def _no_ceiling(counters: pd.DataFrame, ceilings: pd.DataFrame, catalog: PathLike, hint: str) -> list[dict]:
    """A warning per device with no roof at all (not in the catalog, and no peaks in the input):
    its kernels get ``unknown``, and the likely fix is to name the GPU."""
    roofed = set(ceilings.loc[ceilings["selected"], "device"])
    rows = []
    for (device, app), group in counters.groupby(["device", "app"], sort=True):
        if device and device not in roofed:
            source = str(group["source_file"].iat[0])
            rows.append({
                "app": app, "stage": "ceilings", "severity": "warning", "source_file": source,
                "message": f"{source}: no ceiling for device {device!r} (the GPU catalog {catalog} does not "
                           f"know it and the input records no peaks), so its kernels get no verdict; {hint}",
            })
    return rows


# The datasheet catalog's module (its pydantic models) takes a good part of a second to import; the
# readers spend most of theirs in Arrow, without the GIL, while a core is idle.
CATALOG_MODULE = "roofline.ceilings.catalog"


def _import_beside(module: str) -> None:
    """Import ``module`` on a thread of its own, beside what this one does. Whoever imports it
    meanwhile waits for that import (Python's lock per module); one that fails is imported again, and
    raises, where it is used."""
    import importlib
    import threading

    def load() -> None:
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001, S110 - raised again by the import where it is used
            pass

    threading.Thread(target=load, name=f"import {module}", daemon=True).start()


def analyse(
    sources: Source | Sequence[Source],
    catalog: PathLike | None = None,
    policy: Sequence[str] = DEFAULT_POLICY,
    device: str | None = None,
    measured: PathLike | None = None,
    errors: Literal["warn", "raise", "ignore"] = "warn",
    device_hint: str = "name the GPU with device= (a name in the GPU catalog)",
    digest: bool = True,
) -> Analysis:
    """Analyse inputs together, as the workflow does: one ceilings table per device, every kernel
    judged against its device's roofs.

    Parameters
    ----------
    sources : path-like or DataFrame, or a sequence of them
        Input files (read with :func:`read`) and/or counters tables :func:`read` returned. A
        folder is taken apart by :func:`input_files`: its CSV exports are one application, each
        report in it another; what is no input is a line of ``skipped``.
    catalog : path-like, optional
        GPU datasheet catalog (default: the one shipped with the package,
        ``roofline/data/gpus.yaml``).
    policy : sequence of str
        Ceiling sources in order of preference (``report``, ``measured``, ``datasheet``); a what-if
        machine's own peaks always win.
    device : str, optional
        The GPU of exports that do not record it (see :func:`read`).
    measured : path-like, optional
        A measured ceilings table (``data/ceilings/measured.parquet`` or CSV), for ``measured``.
    errors : {"warn", "raise", "ignore"}
        A file that cannot be analysed never stops the others: it is a row of ``diagnostics`` and a
        line of ``errors``; ``warn`` also issues a :class:`UserWarning`, ``raise`` raises
        ``ValueError`` on the first one instead.
    device_hint : str
        How to name a GPU, in the warning for a device without any ceiling (the CLI says ``--device``).
    digest : bool
        Hash each input for the counters' ``source_sha256`` (:func:`read`); the CLI, which shows no
        counters, leaves it empty.

    Raises
    ------
    ValueError
        For an unknown policy source or a catalog that cannot be read (the arguments), and with
        ``errors="raise"`` for the first input that cannot be analysed.
    """
    from roofline.ceilings.select import build_ceilings, clock_notes, cross_check
    from roofline.classify.kernels import aggregate_kernels

    unknown = [s for s in policy if s not in SOURCES]
    if isinstance(policy, str) or unknown:
        raise ValueError(f"policy {policy!r}: unknown source(s) {unknown}; use a list of {list(SOURCES)}")
    items = [sources] if isinstance(sources, str | os.PathLike | pd.DataFrame) else list(sources)
    frames = [conform(s, "counters") for s in items if isinstance(s, pd.DataFrame)]
    paths, skipped = input_files(s for s in items if not isinstance(s, pd.DataFrame))
    if paths:
        _import_beside(CATALOG_MODULE)
    taken = {a for f in frames for a in f["app"].dropna().unique()}
    counters, problems = [f for f in frames if len(f)], []
    notes = [{"app": "", "stage": "parse", "severity": "warning", "source_file": line.split(": ", 1)[0],
              "message": f"skipped {line}"} for line in skipped]
    for path, app in zip(paths, app_names(paths, taken)):
        try:
            frame, rows = _read_logged(path, app, device, digest)
        except Exception as exc:  # noqa: BLE001 - one bad input must not stop the others
            line = _problem(exc, path)
            if errors == "raise":
                raise ValueError(line) from exc
            problems.append(line)
            notes.append({"app": app, "stage": "parse", "severity": "error", "source_file": path,
                          "message": line})
            continue
        counters.append(frame)
        notes.extend(rows)
    if errors == "warn":
        for line in [*(f"skipped {s}" for s in skipped), *problems]:
            warnings.warn(line, UserWarning, stacklevel=2)
    from roofline.ceilings.catalog import CATALOG_PATH

    catalog = catalog or CATALOG_PATH
    everything = (conform(pd.concat(counters, ignore_index=True), "counters") if counters
                  else conform(pd.DataFrame(), "counters"))
    if everything.empty:
        ceilings, kernels = conform(pd.DataFrame(), "ceilings"), conform(pd.DataFrame(), "kernels")
    else:
        ceilings = build_ceilings(everything, catalog, list(policy), measured=measured)
        kernels = aggregate_kernels(everything, ceilings)
        notes.extend({"app": "", "stage": "ceilings", "severity": "warning", "source_file": "", "message": text}
                     for text in cross_check(ceilings, CROSS_CHECK_MARGIN) + clock_notes(ceilings))
        notes.extend(_no_ceiling(everything, ceilings, catalog, device_hint))
    diagnostics = conform(pd.DataFrame(notes), "diagnostics") if notes else conform(pd.DataFrame(), "diagnostics")
    return Analysis(everything, ceilings, kernels, diagnostics, tuple(problems), tuple(skipped))


def plot(analysis: Analysis, device: str | None = None) -> alt.LayerChart:
    """The hierarchical roofline of one device, as the report draws it
    (:func:`roofline.charts.roofline_chart.roofline_chart`):
    an Altair chart, which Jupyter renders inline and ``.save("x.html")`` writes out.

    ``device`` may be left out when the analysis has one device.

    Raises
    ------
    ValueError
        When ``device`` is not one of the analysis' devices, or is left out and there are several.
    """
    from roofline.charts.roofline_chart import roofline_chart

    devices = analysis.devices
    if device is None and len(devices) == 1:
        device = devices[0]
    if device not in devices:
        given = "no device given" if device is None else f"device {device!r} has no kernel in this analysis"
        raise ValueError(f"{given}; pass device= one of {devices}" if devices else "the analysis has no kernel")
    return roofline_chart(analysis.kernels, analysis.ceilings, device)


def ceilings_of(analysis: Analysis, selected_only: bool = False) -> pd.DataFrame:
    """The ceilings per device in reading order (device, compute classes then memory levels in the
    package's order, the selected candidate first): the table ``roofline ceilings`` prints."""
    from roofline.metrics.quantities import COMPUTE_CLASSES, MEMORY_LEVELS

    frame = analysis.ceilings
    if selected_only:
        frame = frame[frame["selected"]]
    order = {name: i for i, name in enumerate([*COMPUTE_CLASSES, *MEMORY_LEVELS])}
    keyed = frame.assign(_kind=frame["kind"].map({"compute": 0, "memory": 1}).fillna(2),
                         _name=frame["name"].map(order).fillna(len(order)),
                         _source=frame["source"].map({s: i for i, s in enumerate(SOURCES)}).fillna(len(SOURCES)))
    keyed = keyed.sort_values(["device", "_kind", "_name", "selected", "_source"],
                              ascending=[True, True, True, False, True], kind="stable")
    return keyed.drop(columns=["_kind", "_name", "_source"]).reset_index(drop=True)


def source_paths(paths: Sequence[PathLike]) -> dict[str, str]:
    """Each app's input file, as the report pages name it (``{app: path}``; a folder's reports each
    under their own app, as :func:`analyse` names them)."""
    files = input_files(paths)[0]
    return dict(zip(app_names(files), files))


__all__ = ["Analysis", "analyse", "app_names", "ceilings_of", "input_files", "plot", "read", "source_paths"]
