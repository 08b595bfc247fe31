"""What-if tables: a hand-written kernel table (YAML or CSV) -> the raw launch frame that parse derives.

The YAML table is declared once, as the pydantic models below (unknown keys refused at every level).
Every number may also be written as text: YAML 1.1, which PyYAML reads, takes ``240e9``, ``1e-3``
or ``1.5E+9`` for strings (its floats need a dot and a signed exponent), so a numeric field accepts a
string that reads as a number (:func:`roofline.metrics.units.parse_number`) and ``launches`` a whole number
written either way. Tables may be compressed (``.yaml.gz``, ``.csv.xz`` ...: :mod:`roofline.files.compressed`).
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, create_model, model_validator
from pydantic_core import PydanticCustomError

from roofline.errors import InputError
from roofline.files.compressed import compression_of, read_bytes
from roofline.metrics.quantities import COMPUTE_CLASSES, MEMORY_LEVELS
from roofline.metrics.units import MISSING_TEXT, parse_number

_WHAT_IF_WORK = {f"flop_{c}" for c in COMPUTE_CLASSES}
_WHAT_IF_BYTES = {f"{level}_bytes" for level in MEMORY_LEVELS}
_README = "see 'What-if tables' in config/README.md"
_MAX_PROBLEMS = 3


def _number(value: Any) -> float:
    """A YAML scalar as a float: YAML numbers, and text that reads as one (``240e9``)."""
    number = math.nan if isinstance(value, bool) or not isinstance(value, int | float | str) else parse_number(value)
    if math.isnan(number):
        raise PydanticCustomError("number", "expected a number in SI base units, got {got}", {"got": repr(value)})
    return number


def _launches(value: Any) -> int:
    """A whole number >= 1, written as a YAML integer, float or text (``1e3``)."""
    number = math.nan if isinstance(value, bool) or not isinstance(value, int | float | str) else parse_number(value)
    if not (math.isfinite(number) and number == round(number) and number >= 1):
        raise PydanticCustomError("launches", "expected a whole number >= 1, got {got}", {"got": repr(value)})
    return int(number)


def _text(value: Any) -> Any:
    """Names written as numbers (``name: 7``) are names; anything else is left to the str check."""
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


def _mapping(value: Any) -> Any:
    """An empty key (``flop:``) reads as None in YAML: an empty mapping."""
    return {} if value is None else value


Number = Annotated[float | None, BeforeValidator(_number)]
Text = Annotated[str, BeforeValidator(_text)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


Work = create_model(
    "Work",
    __base__=_Strict,
    __doc__="Per compute class: work [FLOP] of a kernel, or peaks [FLOP/s] of a machine.",
    **{name: (Number, None) for name in COMPUTE_CLASSES},
)
Traffic = create_model(
    "Traffic",
    __base__=_Strict,
    __doc__="Per memory level: traffic [B] of a kernel, or bandwidth [B/s] of a machine.",
    **{name: (Number, None) for name in MEMORY_LEVELS},
)
WorkBlock = Annotated[Work, BeforeValidator(_mapping)]
TrafficBlock = Annotated[Traffic, BeforeValidator(_mapping)]


class Machine(_Strict):
    """A hypothetical machine: compute peaks [FLOP/s] and bandwidths [B/s]."""

    compute: WorkBlock = Work()
    memory: TrafficBlock = Traffic()


class Kernel(_Strict):
    """One kernel: its work [FLOP] and traffic [B] on a ``machine`` (a machines: key) or ``gpu`` (a
    catalog GPU), optionally its duration [s], compulsory work and traffic, and launch count."""

    name: Text
    machine: Text | None = None
    gpu: Text | None = None
    flop: WorkBlock = Work()
    bytes: TrafficBlock = Traffic()
    duration_s: Number = None
    algorithmic_flop: Number = None
    algorithmic_bytes: Number = None
    launches: Annotated[int, BeforeValidator(_launches)] = 1
    note: Any = None

    @model_validator(mode="after")
    def _placed(self) -> Kernel:
        if self.machine is None and self.gpu is None:
            raise PydanticCustomError("placed", "give 'machine' (a machines: key) or 'gpu' (a catalog GPU name)")
        return self


class WhatIfTable(_Strict):
    """A what-if table: ``machines:`` (name -> Machine) and ``kernels:``."""

    machines: Annotated[dict[Text, Annotated[Machine, BeforeValidator(_mapping)]], BeforeValidator(_mapping)] = {}
    kernels: list[Kernel]


def _given(block: BaseModel) -> list[tuple[str, float]]:
    """(name, value) of the values a Work or Traffic block was given, in declared order."""
    return [(name, value) for name in type(block).model_fields if (value := getattr(block, name)) is not None]


def _where(loc: tuple) -> str:
    """A pydantic location as the YAML path: ``('kernels', 0, 'flop')`` -> ``kernels[0].flop``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text


def _unknown_keys(parent: tuple, keys: list[str]) -> str:
    """The message for keys the model at ``parent`` does not have."""
    listed = repr(keys[0]) if len(keys) == 1 else str(keys)
    if not parent:
        return (
            f"unknown top-level keys {keys} in a what-if table: only 'machines:' and 'kernels:' are read; "
            "fix the spelling or remove them"
        )
    block = parent[-1]
    if block in ("compute", "flop"):
        return f"{_where(parent[:-1])}: {block}: unknown class {listed}; use one of {COMPUTE_CLASSES}"
    if block in ("memory", "bytes"):
        return f"{_where(parent[:-1])}: {block}: unknown level {listed}; use one of {MEMORY_LEVELS}"
    if parent[0] == "machines":
        return (
            f"{_where(parent)}: unknown keys {keys}; a machine has only 'compute: {{class: FLOP/s}}' and "
            "'memory: {level: B/s}'"
        )
    return f"{_where(parent)}: unknown keys {keys}; a kernel may have {sorted(Kernel.model_fields)} ({_README})"


def _problems(error: ValidationError) -> list[str]:
    """One message per problem pydantic found, in the table's order; unknown keys of one mapping together."""
    problems: list[str] = []
    unknown: dict[tuple, list[str]] = {}
    for item in error.errors():
        loc, kind = tuple(item["loc"]), item["type"]
        if kind == "extra_forbidden":
            if loc[:-1] not in unknown:
                problems.append(loc[:-1])  # placeholder, filled below
                unknown[loc[:-1]] = []
            unknown[loc[:-1]].append(str(loc[-1]))
        elif loc[:1] == ("kernels",) and (len(loc) == 1 or (len(loc) == 2 and kind == "model_type")):
            problems.append(
                f"{_where(loc)}: each kernel needs a 'name'"
                if len(loc) == 2
                else f"a what-if table needs a 'kernels:' list (and 'machines:' or per-kernel 'gpu:'); {_README}"
            )
        elif kind == "missing" and loc[-1] == "name":
            problems.append(f"{_where(loc[:-1])}: each kernel needs a 'name'")
        elif kind in ("model_type", "dict_type"):
            problems.append(f"{_where(loc)}: expected a mapping, got {item['input']!r} ({_README})")
        elif kind in ("number", "launches", "placed"):
            problems.append(f"{_where(loc)}: {item['msg']}")
        else:
            problems.append(f"{_where(loc)}: {item['msg']} (got {item['input']!r})")
    messages = [_unknown_keys(p, unknown[p]) if isinstance(p, tuple) else p for p in problems]
    return list(dict.fromkeys(messages))


def _load_yaml(text: str) -> Any:
    """``yaml.safe_load``, through libyaml where PyYAML has it (large tables load ~10x faster). libyaml
    refuses a few plain scalars the pure-Python loader reads (a name holding ": "), so a document it
    refuses is read again by the pure-Python loader, whose verdict stands."""
    fast = getattr(yaml, "CSafeLoader", None)
    if fast is not None:
        try:
            return yaml.load(text, Loader=fast)
        except yaml.YAMLError:
            pass
    return yaml.safe_load(text)


def read_what_if(path: str | Path) -> pd.DataFrame:
    """Read a what-if kernel table (YAML) into counters rows.

    The YAML has ``machines:`` (name -> ``compute: {class: FLOP/s}``, ``memory: {level: B/s}``) and
    ``kernels:`` (each with ``name``, ``machine`` (a machines: key) or ``gpu`` (a catalog GPU),
    ``flop: {class: FLOP}``, ``bytes: {level: B}``, optional ``duration_s``, ``algorithmic_flop``,
    ``algorithmic_bytes``, ``launches``): see :class:`WhatIfTable`.

    Raises
    ------
    InputError
        Naming the file and every problem found (up to three), each with its place in the table.
    """
    path = Path(path)
    try:
        doc = _load_yaml(read_bytes(path).decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a valid YAML what-if table ({exc})") from exc
    if not isinstance(doc, dict):
        doc = {"kernels": None}  # not a mapping at all: the message of a table without kernels
    try:
        table = WhatIfTable.model_validate(doc)
    except ValidationError as exc:
        problems = _problems(exc)
        more = f" (and {len(problems) - _MAX_PROBLEMS} more)" if len(problems) > _MAX_PROBLEMS else ""
        raise InputError(f"{path}: " + "; ".join(problems[:_MAX_PROBLEMS]) + more) from None
    rows = []
    for index, kernel in enumerate(table.kernels):
        row: dict[str, object] = {"kernel": kernel.name}
        if kernel.machine is not None:
            if kernel.machine not in table.machines:
                raise InputError(f"{path}: kernels[{index}]: machine {kernel.machine!r} is not defined under machines:")
            machine = table.machines[kernel.machine]
            row["device"] = row["machine"] = kernel.machine
            for cls, value in _given(machine.compute):
                row[f"peak_flops_{cls}"], row[f"peak_flops_{cls}_recipe"] = value, "what-if"
            for level, value in _given(machine.memory):
                row[f"peak_{level}_bw"], row[f"peak_{level}_bw_recipe"] = value, "what-if"
        else:
            row["device"] = row["machine"] = kernel.gpu
        for cls, value in _given(kernel.flop):
            row[f"flop_{cls}"], row[f"flop_{cls}_recipe"] = value, "what-if"
        for level, value in _given(kernel.bytes):
            row[f"{level}_bytes"], row[f"{level}_bytes_recipe"] = value, "what-if"
        for key in ("duration_s", "algorithmic_flop", "algorithmic_bytes"):
            if getattr(kernel, key) is not None:
                row[key] = getattr(kernel, key)
        if kernel.duration_s is not None:
            row["duration_s_recipe"] = "what-if"
        rows.extend(dict(row) for _ in range(kernel.launches))
    if not rows:
        raise InputError(f"{path}: the what-if table lists no kernels")
    frame = pd.DataFrame(rows)
    frame["launch"] = range(len(frame))
    frame["source_format"] = "what-if"
    return frame


def read_what_if_csv(path: Path) -> pd.DataFrame:
    """A what-if table as CSV: columns kernel, gpu or machine peaks, flop_<class>, <level>_bytes."""
    try:
        source = io.BytesIO(read_bytes(path)) if compression_of(path) else path
        frame = pd.read_csv(source, dtype=str, keep_default_na=False, encoding="utf-8")
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a readable what-if CSV ({exc}); write plain comma-separated UTF-8") from exc
    columns_help = "columns: kernel, gpu (or peak_* columns), flop_<class>, <level>_bytes, duration_s"
    if "kernel" not in frame.columns:
        raise InputError(f"{path}: a what-if CSV needs a 'kernel' column ({columns_help})")
    if "gpu" not in frame.columns and not any(c.startswith("peak_") for c in frame.columns):
        raise InputError(
            f"{path}: a what-if CSV needs a 'gpu' column (catalog name) or peak_* columns ({columns_help})"
        )
    allowed = {"kernel", "gpu", "duration_s", "algorithmic_flop", "algorithmic_bytes"} | _WHAT_IF_WORK | _WHAT_IF_BYTES
    allowed |= {f"peak_flops_{c}" for c in COMPUTE_CLASSES} | {f"peak_{lv}_bw" for lv in MEMORY_LEVELS}
    unknown = [c for c in frame.columns if c not in allowed]
    if unknown:
        raise InputError(f"{path}: unknown what-if columns {unknown}; allowed: {sorted(allowed)}")
    if not any(c in _WHAT_IF_WORK | _WHAT_IF_BYTES for c in frame.columns):
        raise InputError(
            f"{path}: a what-if CSV needs at least one flop_<class> or <level>_bytes column ({columns_help})"
        )
    out = pd.DataFrame({"kernel": frame["kernel"]})
    if "gpu" in frame.columns:
        out["device"] = out["machine"] = frame["gpu"]
    for column in frame.columns:
        if column in ("kernel", "gpu"):
            continue
        out[column] = frame[column].map(parse_number)
        text = frame[column].str.strip().str.lower()
        bad = out[column].isna() & ~text.isin(MISSING_TEXT)
        if bad.any():
            row = int(bad.to_numpy().argmax())
            raise InputError(
                f"{path}: line {row + 2}: column {column!r} has {frame[column].iat[row]!r}, not a number; "
                "write plain numbers in SI base units (e.g. 240.0e+9), or leave the cell empty"
            )
        out[f"{column}_recipe"] = "what-if"
    out["launch"] = range(len(out))
    out["source_format"] = "what-if"
    return out
