"""Parse stage: one input (.ncu-rep, ncu CSV export or what-if table) -> per-launch counters.

Reading turns any input into a *raw launch frame* (one row per launch; identity columns plus one
float column per ncu metric, already in SI base units): :mod:`roofline.parse.readers.ncu_rep` reads reports,
:mod:`roofline.parse.readers.ncu_csv` CSV exports, :mod:`roofline.parse.readers.what_if` what-if tables.
:func:`roofline.parse.derive.derive_columns` then applies the recipe table to its columns; this module
adds the provenance (:mod:`roofline.parse.input_hash`, :mod:`roofline.parse.readers.ncu_rep_provenance`) and the
per-launch diagnostics. The job writes :func:`parse_table`'s Arrow table, built from the columns
without a frame (a report's few launches by ~200 columns cost pandas more than the rest of the
stage); :func:`parse_input` gives the same table as a frame.
"""

from __future__ import annotations

import contextlib
import json
import logging
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from roofline.config.inputs import UNNAMED_GPU, folder_inputs, is_what_if_csv
from roofline.errors import InputError
from roofline.metrics import quantities
from roofline.metrics.units import UnitWarning
from roofline.parse.derive import arrow_texts, derive_columns, raw_columns
from roofline.parse.input_hash import hash_beside
from roofline.parse.readers.ncu_rep import read_ncu_rep, read_ncu_rep_columns
from roofline.parse.readers.ncu_rep_provenance import report_provenance
from roofline.tables.files import arrow_from_columns
from roofline.tables.schemas import conform_columns

log = logging.getLogger("roofline.parse")


def _existing(path: str | Path) -> Path:
    """``path`` as a Path; InputError where there is no such file."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file")
    return path


def _check_captured(path: Path) -> None:
    """Raise InputError where the capture of the report ``path`` failed (its sidecar says why)."""
    failure = _capture_failure(path)
    if failure:
        raise InputError(f"{path}: the capture failed, so there is no report: {failure}")


def _capture_failure(path: Path) -> str:
    """The error a failed capture recorded in the sidecar beside its (empty) report, if any."""
    sidecar = path.with_name(path.name.removesuffix(".ncu-rep") + ".capture.json")
    if path.stat().st_size or not sidecar.exists():
        return ""
    try:
        return str(json.loads(sidecar.read_text(encoding="utf-8")).get("error") or "")
    except (OSError, ValueError):
        return ""


def read_input(path: str | Path, kind: str) -> pd.DataFrame:
    """Read one input file into the raw launch frame, dispatching on its kind.

    Any input may be compressed (gzip, xz, zstd, bzip2: see :mod:`roofline.files.compressed`); it is read
    as it is, whatever its name says.
    """
    path = _existing(path)
    if kind == "legacy":
        raise InputError(
            f"{path}: a legacy .nsight-cuprof-report (Nsight Compute 2019.x or older) with pre-2020 "
            "metric names; the roofline needs ncu 2020.1 or newer. Re-profile with a current ncu "
            f"({quantities.NCU_ROOFLINE_FLAGS})"
        )
    if kind == "ncu-rep":
        _check_captured(path)
        return read_ncu_rep(path)
    if kind == "what-if":
        from roofline.parse.readers.what_if import read_what_if  # pydantic: imported by the jobs that read a table

        return read_what_if(path)
    if kind == "csv-dir":
        from roofline.parse.readers.ncu_csv import read_ncu_csvs

        found = folder_inputs(path)
        if not found.exports:
            # one input is one app: a folder of reports is several (roofline.api.analyse and the
            # CLI take the folder apart; the workflow takes "folder/*")
            held = (f"it holds {len(found.files)} other input file(s) ({found.files[0].name}, ...), each its own "
                    f"application: give them (`{Path(path) / '*'}`), or the folder to roofline.analyse or the "
                    "roofline command" if found.files else
                    "check that the exports were written here")
            raise InputError(f"{path}: the folder holds no ncu CSV export (.csv, also compressed); {held}")
        return read_ncu_csvs(found.exports)
    if kind == "csv":
        if is_what_if_csv(path):
            from roofline.parse.readers.what_if import read_what_if_csv

            return read_what_if_csv(path)
        from roofline.parse.readers.ncu_csv import read_ncu_csv

        return read_ncu_csv(path)
    raise InputError(f"{path}: unknown input kind {kind!r}")


def read_input_columns(path: str | Path, kind: str) -> tuple[dict[str, object], int]:
    """:func:`read_input` as the raw launch frame's columns and rows (see
    :func:`roofline.parse.derive.raw_columns`); a report's without the frame between."""
    if kind == "ncu-rep":
        path = _existing(path)
        _check_captured(path)
        return read_ncu_rep_columns(path)
    raw = read_input(path, kind)
    return raw_columns(raw), len(raw)


def parse_input(path: str | Path, app: str, kind: str, device: str | None = None, digest: bool = True) -> pd.DataFrame:
    """The whole stage for one input: read, derive, add provenance; returns the counters table.

    ``device`` names the GPU for inputs that record none (CSV exports); a recorded name wins.
    ``digest=False`` leaves ``source_sha256`` empty rather than hash the input (a caller that shows
    no provenance: the command line).
    """
    counters, rows = counters_columns(path, app, kind, device, digest)
    return conform_columns(counters, "counters", rows)


def parse_table(path: str | Path, app: str, kind: str, device: str | None = None):
    """:func:`parse_input` as the Arrow table the parse job writes (the same values, no frame)."""
    counters, rows = counters_columns(path, app, kind, device)
    return arrow_from_columns(counters, "counters", rows)


def counters_columns(path: str | Path, app: str, kind: str, device: str | None = None,
                     digest: bool = True) -> tuple[dict, int]:
    """:func:`parse_input`'s columns (name -> array, as :func:`roofline.parse.derive.derive_columns`
    gives them) and rows; ``source_sha256`` empty with ``digest=False``."""
    path = Path(path)
    # the input's hash overlaps the parsing (no Python code of this stage runs on its thread, at
    # nice 19: a thread at nice 19 that holds the GIL would hold up this one)
    digest = hash_beside(path) if digest else _no_digest
    try:
        raw, rows = read_input_columns(path, kind)
        counters = derive_columns(raw, rows)
    except BaseException:
        # the hash ends with the stage, whatever happens: a job server's worker closes what a job
        # left open, and runs the next job only beside an idle hashing thread
        with contextlib.suppress(Exception):
            digest()
        raise
    counters["device"] = _device_names(counters.get("device"), counters["compute_capability"], device, rows)
    provenance = {"app": app, "source_file": str(path), "convention": quantities.CONVENTION}
    if kind == "ncu-rep":
        provenance["ncu_version"], provenance["command_line"] = report_provenance(path)
    provenance["source_sha256"] = digest()
    for column, text in provenance.items():  # one value for every launch
        counters[column] = pa.repeat(pa.scalar(text, pa.large_string()), rows)
    return counters, rows


def _no_digest() -> str:
    return ""


def _device_names(recorded, compute_capability, device: str | None, rows: int) -> pa.Array:
    """Each launch's GPU name: the recorded one, else ``device``, else "unnamed GPU (sm_XY)" from its
    compute capability."""
    names = _text_values(recorded, rows)
    unnamed = names == ""
    if unnamed.any():
        if device:
            fallback = np.full(rows, device, dtype=object)
        else:
            capabilities = _text_values(compute_capability, rows)
            texts = {c: f"{UNNAMED_GPU} (sm_{c.replace('.', '')})" if c else UNNAMED_GPU for c in set(capabilities)}
            fallback = np.array([texts[c] for c in capabilities], dtype=object)
        names = np.where(unnamed, fallback, names)
    return pa.array(names, pa.large_string())


def _text_values(values, rows: int) -> np.ndarray:
    """:func:`_texts` of a column that may be absent (None: all empty)."""
    return np.full(rows, "", dtype=object) if values is None else _texts(values)


def _launch_problems(row, refusal_columns: list[str]) -> list[str]:
    """What is wrong with one launch: refused quantities first, then quantities no recipe gave."""
    problems = []
    refused = set()
    for column in refusal_columns:
        text = str(row[column])
        if text:
            quantity = column.removesuffix("_refused")
            refused.add(quantity)
            problems.append(f"{quantity} refused ({text})")
    if problems:
        problems[-1] += "; the launch is kept with these quantities empty: check the export (units, values)"
    lacking = [q for q in str(row["missing"]).split(";") if q and q not in refused]
    if row.get("source_format") == "what-if" and "duration_s" in lacking:
        lacking.remove("duration_s")  # optional in a what-if table: the report shows the predicted time
    if "flop" in lacking and any(q.startswith("flop_") for q in refused):
        lacking.remove("flop")
    if lacking:
        hints = [quantities.NCU_ROOFLINE_FLAGS if q == "flop" else quantities.metric_hint(q) for q in lacking]
        problems.append(f"cannot derive {', '.join(lacking)}; collect it with {' ; '.join(dict.fromkeys(hints))}")
    return problems


def diagnostics_for(counters, app: str) -> pd.DataFrame:
    """One warning row per launch that lacks or had refused a roofline quantity, and one per file
    whose launches ran on several devices; a ``note`` per memory level the capture left without a
    roof (what the capture did not collect, not a fault of the input). ``counters``: the counters
    table as a frame or as the Arrow table :func:`parse_table` gives."""
    names = counters.column_names if isinstance(counters, pa.Table) else list(counters.columns)
    refusal_columns = [c for c in names if c.endswith("_refused")]
    missing = counters["missing"]
    what_if = (_equals(counters["source_format"], "what-if") if "source_format" in names
               else np.zeros(len(missing), dtype=bool))
    flagged = _non_empty(missing) & ~(what_if & _equals(missing, "duration_s"))
    for column in refusal_columns:  # ~60 columns, mostly one shared array of empty texts each
        flagged |= _non_empty(counters[column])
    rows = []
    where = np.flatnonzero(flagged)
    if len(where):
        read = [c for c in (*refusal_columns, "missing", "source_format", "source_file", "kernel_short")
                if c in names]
        picked = {c: _texts(counters[c])[where] for c in read}
        picked["launch"] = _numbers(counters["launch"])[where]
        for i in range(len(where)):
            row = {c: values[i] for c, values in picked.items()}
            problems = _launch_problems(row, refusal_columns)
            if problems:
                rows.append({
                    "source_file": row["source_file"],
                    "launch": row["launch"],
                    "message": f"launch {row['launch']} ({row['kernel_short']}): {'; '.join(problems)}",
                })
    measured = ~what_if
    rows += _level_gaps(counters, names, measured)
    distinct = [d for d in _distinct_texts(counters["device"], measured) if d] if "device" in names else []
    if len(distinct) > 1:
        devices = _texts(counters["device"])[measured]
        launches = _numbers(counters["launch"])[measured]
        source = _first_text(counters["source_file"], measured)
        spans = "; ".join(f"{device}: {_launch_span(launches[devices == device])}" for device in distinct)
        rows.append(
            {
                "source_file": source,
                "launch": np.nan,
                "message": (
                    f"{source}: the launches ran on {len(distinct)} devices ({spans}); each "
                    "is analysed against its own ceilings. If one application should run on one GPU, the file "
                    "mixes exports: split it, one file per device"
                ),
            }
        )
    frame = pd.DataFrame(rows, columns=["source_file", "launch", "message", "severity"])
    frame.insert(0, "app", app)
    frame.insert(1, "stage", "parse")
    frame.insert(2, "severity", frame.pop("severity").astype(object).fillna("warning"))
    return frame


def _level_gaps(counters, names: list[str], measured: np.ndarray) -> list[dict]:
    """One row per memory level of :data:`roofline.metrics.quantities.LEVEL_PAIRS` whose measured launches
    lack a roof there: those with bytes but no roof of the same counter family (the level is left
    out of their verdict), and those without the level's counters at all, with the ncu flags that
    supply both."""
    if not measured.any() or "source_file" not in names:
        return []
    source = _first_text(counters["source_file"], measured)
    launches = int(measured.sum())
    rows = []
    # a launch without DRAM bytes already has its own message: no roofline at all, not a level short
    has_dram = (~np.isnan(_numbers(counters["dram_bytes"]).astype("float64")[measured]) if "dram_bytes" in names
                else np.zeros(launches, dtype=bool))
    absent_levels: dict[str, int] = {}
    for level, (traffic, peak) in quantities.LEVEL_PAIRS.items():
        if traffic not in names or peak not in names:
            continue
        has_bytes = ~np.isnan(_numbers(counters[traffic]).astype("float64")[measured])
        has_roof = ~np.isnan(_numbers(counters[peak]).astype("float64")[measured])
        unjudged, absent = has_bytes & ~has_roof, ~has_bytes & has_dram
        name = level.upper()
        if unjudged.any():
            rows_unjudged = measured.copy()
            rows_unjudged[measured] = unjudged
            used = [r for r in _distinct_texts(counters[f"{traffic}_recipe"], rows_unjudged) if r]
            message = (f"{source}: {int(unjudged.sum())} of {launches} launch(es) have {name} bytes "
                       f"(recipe {', '.join(used)}) but the report holds no {name} peak of the same counter "
                       f"family, so the {name} level is left out of their verdict (a roof of another family "
                       f"counts other bytes); collect it with {quantities.level_hint(level)}")
            rows.append({"source_file": source, "launch": np.nan, "message": message, "severity": "note"})
        if absent.any():
            absent_levels[level] = int(absent.sum())
    if absent_levels:  # one message for the levels a capture left out: one capture option gives them all
        named = " and ".join(level.upper() for level in absent_levels)
        counts = sorted(set(absent_levels.values()))
        count = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
        hints = quantities.level_hint(*absent_levels)
        message = (f"{source}: {count} of {launches} launch(es) have no {named} traffic counters, so their "
                   f"roofline has no {named} level; collect them with {hints}")
        rows.append({"source_file": source, "launch": np.nan, "message": message, "severity": "note"})
    return rows


def _numbers(values) -> np.ndarray:
    """A numeric column (Series, array or Arrow array) as a NumPy array."""
    return np.asarray(values.to_numpy() if hasattr(values, "to_numpy") else values)


def _texts(values) -> np.ndarray:
    """A text column's values (Series, array or Arrow array) as a NumPy object array, a missing
    text as empty."""
    return np.asarray(arrow_texts(values).to_numpy(zero_copy_only=False), dtype=object)


def _equals(values, text: str) -> np.ndarray:
    """Which values of a text column (as :func:`_texts` takes it) are ``text``, without a Python
    string per value."""
    return np.asarray(pc.equal(arrow_texts(values), text).to_numpy(zero_copy_only=False), dtype=bool)


def _distinct_texts(values, rows: np.ndarray) -> list[str]:
    """The distinct texts of a text column at ``rows`` (a mask), sorted."""
    return sorted(pc.unique(arrow_texts(values).filter(pa.array(rows))).to_pylist())


def _first_text(values, rows: np.ndarray) -> str:
    """The text of a text column at the first of ``rows`` (a mask with at least one row)."""
    return arrow_texts(values)[int(np.argmax(rows))].as_py()


def _non_empty(column: pd.Series) -> np.ndarray:
    """Which values of a text column say something (a missing text says nothing)."""
    arrow = arrow_texts(column)
    chunks = arrow.chunks if isinstance(arrow, pa.ChunkedArray) else [arrow]
    if all(len(chunk.buffers()[2] or b"") == 0 for chunk in chunks):  # no character at all: every text empty
        return np.zeros(len(column), dtype=bool)
    return np.asarray(pc.not_equal(arrow, "").to_numpy(zero_copy_only=False), dtype=bool)


def _launch_span(launches: np.ndarray) -> str:
    ids = sorted(int(i) for i in launches)
    text = ", ".join(str(i) for i in ids[:6]) + (", …" if len(ids) > 6 else "")
    return f"{len(ids)} launch(es) [{text}]"


def named_message(message: str, path: str) -> str:
    """``message`` starting with the input's path, so that every diagnostic names its file."""
    return message if path in message or Path(path).name in message else f"{path}: {message}"


def reportable_warning(caught: warnings.WarningMessage) -> bool:
    """Warnings the readers raise about the input itself (repairs), not library chatter."""
    from roofline.parse.readers.ncu_csv import NcuCsvWarning

    return issubclass(caught.category, NcuCsvWarning | UnitWarning)
