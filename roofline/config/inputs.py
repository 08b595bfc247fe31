"""Inputs: what the ``inputs:`` patterns name, the app name of every file, and what could not be used.

A night runs over folders that users and other tools fill, so nothing a pattern finds may stop the
run or vanish without a word (config/README.md, "Config or input"):

- a file a pattern found becomes an app, whatever it is called (:func:`app_name` maps any file
  name to the app-name characters; :func:`assign_names` settles collisions); a file that cannot be
  read (unknown type, broken link, not a regular file) is an app whose parse records one ``error``
  naming the file and the fix (:func:`file_problem`, :func:`write_refusal`);
- a pattern that matches nothing, a path that does not exist, a folder without exports gives no app
  but an :class:`InputProblem`: a warning in the summary and ``reports/status.json``, and
  ``roofline.status --check`` exits 4.

Only the configuration itself (roofline/config/model.py: its keys, an ``apps:`` entry) stops the run.
"""

from __future__ import annotations

import difflib
import glob
import os
import re
import stat
import unicodedata
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

APP_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
# the device of launches whose input records no GPU name (parse adds " (sm_XY)"); an app's device: key
# (roofline --device) names it
UNNAMED_GPU = "unnamed GPU"
INPUT_SUFFIXES = {
    ".ncu-rep": "ncu-rep",
    ".ncu-repz": "ncu-rep",  # zstd-compressed (roofline/files/compressed.py)
    ".csv": "csv",
    ".yaml": "what-if",
    ".yml": "what-if",
    ".nsight-cuprof-report": "legacy",
}
# A compressed input keeps its kind (``run.csv.gz`` is a CSV export): the readers open it
# (roofline/files/compressed.py, which tells the compression from the file's first bytes; its SUFFIXES are
# these, kept there with the codecs: this module is imported before any job, without pyarrow).
COMPRESSIONS = (".gz", ".xz", ".zst", ".zstd", ".bz2", ".zip")
class ConfigError(ValueError):
    """A config problem the user must fix; the message says where and how (raised by the config's
    model, :mod:`roofline.config.model`, and here, where the command line needs it without the
    model's pydantic classes)."""


ACCEPTED = (
    ".ncu-rep (.ncu-repz), ncu CSV exports (.csv) and what-if tables (.yaml/.yml or .csv), each also compressed "
    f"({', '.join(COMPRESSIONS)}; a .zip of one file)"
)
MAX_NAME = 200  # "{app}.parse.parquet" must stay a valid file name (255 bytes)
FALLBACK_NAME = "app"  # a file name with no letter or digit left, e.g. "日本語.csv"
# Letters NFKD does not decompose into an ASCII letter and a mark.
_LETTERS = str.maketrans({"ø": "o", "Ø": "O", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ß": "ss",
                          "ł": "l", "Ł": "L", "đ": "d", "Đ": "D", "ð": "d", "Ð": "D", "þ": "th", "Þ": "Th",
                          "ı": "i"})
# Other tools' files that land in capture folders: the fix names the tool that gives what we read.
_FOREIGN = {
    ".nsys-rep": "an Nsight Systems report (timeline, no counters): profile the kernels with Nsight "
                 "Compute (ncu --set roofline -o NAME)",
    ".qdrep": "an Nsight Systems report (timeline, no counters): profile the kernels with Nsight "
              "Compute (ncu --set roofline -o NAME)",
    ".ncu-proj": "an Nsight Compute project file (it lists reports, holds no counters): list the "
                 ".ncu-rep files it names",
}


@dataclass(frozen=True)
class App:
    name: str
    source: str | None  # input file (None when captured)
    kind: str  # ncu-rep, csv, csv-dir, what-if, capture, legacy, unreadable
    device: str | None = None  # GPU name to assume where the input records none
    problem: str = ""  # why the input cannot be read (kind "unreadable"): its parse records this error


@dataclass(frozen=True)
class InputProblem:
    """An ``inputs:`` entry (or a folder it matched) that gave no app."""

    pattern: str  # the entry as written in the config
    problem: str  # what was found, naming the path
    fix: str  # what to do
    path: str = ""  # the folder it matched, when the pattern matched one

    def as_dict(self) -> dict:
        return asdict(self)


# -- names -----------------------------------------------------------------------------------------


def split_name(name: str) -> tuple[str, str, str]:
    """``(stem, input suffix, compression)`` of a file name, the suffixes in lower case; ``""`` when unknown.

    ``run.csv.gz`` -> ``("run", ".csv", ".gz")``; ``a.b.ncu-rep`` -> ``("a.b", ".ncu-rep", "")``.
    """
    lower = name.lower()
    compression = next((c for c in COMPRESSIONS if lower.endswith(c) and len(lower) > len(c)), "")
    body = name[: len(name) - len(compression)]
    for suffix in INPUT_SUFFIXES:
        if body.lower().endswith(suffix):
            return body[: -len(suffix)], suffix, compression
    return name, "", ""


def suffix_kind(name: str) -> str | None:
    """The reader a file needs from its name (``run.csv.gz``: ``csv``), or None when unknown."""
    return INPUT_SUFFIXES.get(split_name(name)[1].lower())


def input_kind(path: str) -> str:
    """The reader an input needs, from its suffix (compressed CSV and YAML keep their kind); a
    folder holds CSV exports of one ncu run.

    Raises
    ------
    ConfigError
        For a file of no known type (the kind of an ``apps:`` entry is config; a file an
        ``inputs:`` pattern finds is judged per input, by :func:`file_problem`).
    """
    if Path(path).is_dir():
        return "csv-dir"
    kind = suffix_kind(Path(path).name)
    if kind is None:
        raise ConfigError(f"input {path!r}: unknown file type; accepted are {ACCEPTED}")
    return kind


def is_app_name(name: str) -> bool:
    """Whether ``name`` may name an app: letters, digits, ``.``, ``_``, ``-``; not ``.`` or ``..``."""
    return bool(APP_NAME.match(name)) and name not in {".", ".."}


def app_name(path: str | os.PathLike) -> str:
    """A readable app name for any input file or folder, in the app-name characters.

    The file name without its input suffix (and compression; else without its last suffix), kept
    as it is when it is a valid name, so that the names of existing inputs (and their history
    series) never change. Otherwise accents are dropped, every run of other characters becomes one
    ``_``, and leading dots go (an app is not a hidden file): ``my run (1).csv`` -> ``my_run_1``,
    ``ünïcødé.yaml`` -> ``unicode``, ``.hidden.csv`` -> ``hidden``; a name with no letter or
    digit left is ``app``.
    """
    name = Path(path).name or str(path).strip("/")
    stem, suffix, _ = split_name(name)
    if not suffix:
        stem = Path(name).stem
    if not is_app_name(stem) or stem.startswith("."):
        text = unicodedata.normalize("NFKD", stem.translate(_LETTERS)).encode("ascii", "ignore").decode()
        text = re.sub(r"[^A-Za-z0-9._-]+", "_", text)
        stem = re.sub(r"_*\._*", ".", text).strip("_.")  # "a (1).b" -> "a_1.b", not "a_1_.b"
    stem = stem[:MAX_NAME]
    return stem if is_app_name(stem) and re.search(r"[A-Za-z0-9]", stem) else FALLBACK_NAME


def unique_name(name: str, taken: Iterable[str]) -> str:
    """``name``, or the first of ``name-2``, ``name-3``, ... not in ``taken``."""
    taken = set(taken)
    unique, i = name, 2
    while unique in taken:
        unique, i = f"{name[: MAX_NAME - len(str(i)) - 1]}-{i}", i + 1
    return unique


def assign_names(paths: Iterable[str], reserved: Iterable[str] = ()) -> dict[str, str]:
    """An app name per path, unique, the same whatever order the paths come in.

    Every path gets :func:`app_name`; where several share it, the first in sorted path order keeps
    it and the others get ``-2``, ``-3``, ... in that order, skipping names another path has as its
    own or that are ``reserved`` (explicit ``apps:`` names, which always win).
    """
    paths = sorted(set(paths))
    natural = {p: app_name(p) for p in paths}
    reserved = set(reserved)
    taken = reserved | set(natural.values())
    names, seen = {}, set(reserved)
    for path in paths:
        name = natural[path]
        if name in seen:
            name = unique_name(name, taken)
            taken.add(name)
        seen.add(name)
        names[path] = name
    return names


# -- what a pattern finds --------------------------------------------------------------------------


def folder_exports(path: str | os.PathLike) -> list[Path]:
    """The CSV exports (also compressed) in a folder: an app of kind ``csv-dir``."""
    return folder_inputs(path).exports


@dataclass(frozen=True)
class FolderInputs:
    """What a folder given as one input holds (:func:`folder_inputs`), each list in name order."""

    exports: list[Path]  # CSV exports (also compressed): together one app named after the folder, kind csv-dir
    files: list[Path]  # every other input file (reports, what-if tables): one app each, named after the file
    skipped: list[str]  # "<path>: <why>" for each entry that is no input (a note, a subfolder)


def folder_inputs(path: str | os.PathLike) -> FolderInputs:
    """The inputs in a folder: its CSV exports (one ncu run, read together, as the workflow reads a
    folder), every other input file on its own, and what is no input, with why.

    A file named as an input that cannot be read (a broken link) is among ``files``: reading it
    gives the error that names it. Subfolders are not searched (a folder of CSV exports is one run:
    searching would merge runs).

    Raises
    ------
    OSError
        When the folder cannot be listed.
    """
    exports, files, skipped = [], [], []
    for entry in sorted(Path(path).iterdir()):
        kind = suffix_kind(entry.name)
        if entry.is_dir():
            skipped.append(f"{entry}: a folder; folders inside a folder are not searched: give it as an input "
                           "of its own")
        elif kind is None:
            skipped.append(file_problem(entry))
        elif kind == "csv" and entry.is_file():
            exports.append(entry)
        else:
            files.append(entry)
    return FolderInputs(exports, files, skipped)


def file_problem(path: str | os.PathLike, pattern: str = "", workdir: str | os.PathLike = ".") -> str:
    """Why an input file a pattern found cannot be read, naming it and the fix; ``""`` when it can be.

    ``path`` is named as given (relative to ``workdir``, as the pattern found it).
    """
    full = Path(workdir) / path
    narrow = f", or narrow the pattern {pattern!r} so that it does not match it" if pattern else ""
    if full.is_symlink() and not full.exists():
        return f"{path}: a link to {os.readlink(full)!r}, which does not exist: restore the file or remove the link"
    try:
        mode = full.stat().st_mode
    except OSError as exc:
        return f"{path}: cannot be examined ({exc.strerror or exc}); check its permissions{narrow}"
    if not stat.S_ISREG(mode):
        return f"{path}: not a regular file (a pipe, socket or device), so it cannot be read: remove it{narrow}"
    name = Path(path).name
    if suffix_kind(name) is not None:
        return ""
    lower = name.lower()
    foreign = next((text for end, text in _FOREIGN.items() if lower.endswith(end)), None)
    if foreign:
        return f"{path}: {foreign}{narrow}"
    packed = next((c for c in COMPRESSIONS if lower.endswith(c)), "")
    if packed:
        stem = name[: -len(packed)]
        return (f"{path}: a {packed} file whose name does not say what it holds: name it after the file inside "
                f"({stem}.ncu-rep{packed}, {stem}.csv{packed} or {stem}.yaml{packed}){narrow}")
    inner = next((s for s in INPUT_SUFFIXES if f"{s}." in lower), "")
    if inner:
        extra = name[lower.rindex(f"{inner}.") + len(inner):]
        return (f"{path}: ends in {extra!r} after {inner!r}, which is not read; accepted are {ACCEPTED}: "
                f"rename or recompress it{narrow}")
    return (f"{path}: unknown file type {Path(name).suffix or '(no suffix)'!r}; accepted are {ACCEPTED}: "
            f"rename it if it is one of these{narrow}")


def _fixed_part(pattern: str) -> Path:
    """The leading folders of a pattern that hold no glob character (``captures`` of ``captures/*.csv``)."""
    fixed = []
    for part in Path(pattern).parts:
        if glob.has_magic(part):
            break
        fixed.append(part)
    return Path(*fixed) if fixed else Path(".")


def _missing(pattern: str, workdir: Path) -> InputProblem:
    """A pattern that matched nothing, or a path that does not exist, and what may be meant."""
    where = "" if workdir == Path(".") else f" (relative to {workdir})"
    magic = glob.has_magic(pattern)
    folder = _fixed_part(pattern) if magic else Path(pattern).parent
    if not (workdir / folder).is_dir():
        return InputProblem(pattern, f"{pattern!r}: the folder {str(folder)!r} does not exist{where}",
                            "check the path; if another job (e.g. a capture) writes this folder, check that it ran")
    if magic:
        return InputProblem(pattern, f"{pattern!r} matches no file{where}",
                            "check the pattern; if another job (e.g. a capture) writes these files, check that it "
                            "ran and wrote them")
    try:
        names = [p.name for p in (workdir / folder).iterdir()]
    except OSError:
        names = []
    near = difflib.get_close_matches(Path(pattern).name, names, n=1, cutoff=0.6)
    fix = f"did you mean {str(folder / near[0])!r}?" if near else "check the path, or remove it from inputs:"
    return InputProblem(pattern, f"{pattern!r} does not exist{where}", fix)


def _empty_folder(pattern: str, path: str, workdir: Path) -> InputProblem:
    """A folder a pattern found that holds no CSV export, and what it holds instead."""
    problem = f"{path}: a folder without ncu CSV exports (*.csv), so no app"
    try:
        files = [p for p in (workdir / path).iterdir() if p.is_file()]
    except OSError as exc:
        return InputProblem(pattern, f"{path}: a folder that cannot be listed ({exc.strerror or exc})",
                            "check its permissions", path)
    inputs = [p for p in files if suffix_kind(p.name) is not None]
    if inputs:
        kinds = ", ".join(sorted({split_name(p.name)[1] for p in inputs}))
        fix = (f"it holds {len(inputs)} input file(s) ({kinds}): a folder is read as the CSV exports of one ncu "
               f"run; to analyse its files one app each, list them with {str(Path(path) / '*')!r}")
    elif files:
        fix = f"it holds {len(files)} file(s), none an input ({ACCEPTED}): check that the exports were written here"
    else:
        fix = "it is empty: check that the exports were written here, or remove it from inputs:"
    return InputProblem(pattern, problem, fix, path)


def expand_patterns(patterns: Iterable[str], workdir: str | os.PathLike = ".",
                    skip: Iterable[str] = ()) -> tuple[dict[str, tuple[str, str]], list[InputProblem]]:
    """Every input path the patterns find, with its kind and problem, and what gave nothing.

    Returns
    -------
    (found, problems)
        ``found``: path (as the pattern spelled it, relative to ``workdir``) -> (kind, problem),
        kind ``unreadable`` with the error for a file that cannot be read; paths in ``skip``
        (named under ``apps:``) are left out. ``problems``: one :class:`InputProblem` per pattern
        that matched nothing, path that does not exist, or folder without exports.
    """
    workdir, skip = Path(workdir), {os.path.normpath(s) for s in skip}
    found: dict[str, tuple[str, str]] = {}
    problems: list[InputProblem] = []
    for pattern in patterns:
        # root_dir: a working directory whose name has glob characters ("run [1]") is no pattern
        matches = sorted(glob.glob(pattern, root_dir=workdir))
        if not matches:
            problems.append(_missing(pattern, workdir))
        for match in matches:
            path = os.path.normpath(match)
            if path in skip or path in found:
                continue
            if (workdir / path).is_dir():
                try:
                    exports = folder_exports(workdir / path)
                except OSError:
                    exports = []
                if exports:
                    found[path] = ("csv-dir", "")
                else:
                    problems.append(_empty_folder(pattern, path, workdir))
                continue
            problem = file_problem(path, pattern, workdir)
            found[path] = ("unreadable", problem) if problem else (suffix_kind(Path(path).name), "")
    return found, problems


def write_refusal(app: str, source: str, message: str, counters: str | os.PathLike,
                  diagnostics: str | os.PathLike, log: str | os.PathLike | None = None) -> None:
    """The parse outputs of an input that cannot be read: no launch, one ``error`` naming the file
    and the fix (as the parse stage writes for a file its readers refuse), the message in ``log``
    (None: the caller logs it)."""
    import pandas as pd  # here, not at the top: config.py imports this module before any job

    from roofline.tables.files import write_table
    from roofline.tables.schemas import conform

    if log is not None:
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        Path(log).write_text(f"ERROR roofline.config.inputs: {message}\n", encoding="utf-8")
    row = {"app": app, "stage": "parse", "severity": "error", "source_file": source, "message": message}
    write_table(conform(pd.DataFrame(), "counters"), "counters", counters)
    write_table(pd.DataFrame([row]), "diagnostics", diagnostics)


def is_what_if_csv(path: str | os.PathLike) -> bool:
    """Whether a ``.csv`` input is a what-if table (its header starts with a kernel column) rather than an
    ncu export."""
    from roofline.files.compressed import read_bytes

    head = read_bytes(path, limit=1 << 16).decode("utf-8", errors="replace")  # decompressed, if compressed
    header = (head.splitlines() or [""])[0].lower()
    return "kernel name" not in header and '"id"' not in header and header.startswith(("kernel", '"kernel'))
