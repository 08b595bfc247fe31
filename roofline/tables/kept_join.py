"""Many stage tables joined once and kept, so that the next join reads only the files that changed.

The aggregate jobs (the summary, the nightly tracking) read every app's table; when one app of a
thousand changed, they would read a thousand files for one. :func:`joined` keeps the joined Arrow
table in a folder (an uncompressed Arrow IPC file, read back memory-mapped) with, per source file,
its path, identity (inode, size, modification time in ns) and row count; the next call takes the
rows of each unchanged file from it and reads the others. The result equals a fresh join (the
files' tables concatenated in the order given); where it could not (a source whose columns differ
from the kept table's, a kept file that cannot be read) the files are all read again. Any problem
with the folder (read-only, full) only costs the next call a full read.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa

from roofline.files.atomic import file_identity

_META = b"roofline_kept_join"


def _digest(texts: Sequence[str]) -> str:
    return hashlib.blake2b("\n".join(texts).encode(), digest_size=8).hexdigest()


def _kept_path(paths: Sequence[str | os.PathLike], table: str, folder: str | os.PathLike,
               columns: Sequence[str] | None) -> Path:
    """The kept file of a table and columns for a list of sources (as given: the workflow's are
    relative to its folder); one per table and columns is kept (:func:`_store`)."""
    return Path(folder) / f"{table}-{_digest(columns or ['*'])}-{_digest([str(p) for p in paths])}.arrow"


def _load(path: Path) -> tuple[pa.Table, dict[str, tuple[list[int], int, int]]] | None:
    """The kept table (its sources' own metadata) and, per source, (identity, offset, rows); None
    when there is none, it cannot be read, or its sources did not all have its columns."""
    try:
        kept = pa.ipc.open_file(pa.memory_map(str(path))).read_all()
        meta = dict(kept.schema.metadata)
        sources = json.loads(meta.pop(_META))
    except (OSError, KeyError, TypeError, ValueError, pa.ArrowException):
        return None
    if not sources.get("uniform"):
        return None
    spans, offset = {}, 0
    for name, identity, rows in sources["files"]:
        spans[name] = (identity, offset, rows)
        offset += rows
    return kept.replace_schema_metadata(meta), spans


def _store(path: Path, joined: pa.Table, sources: dict) -> None:
    meta = {**(joined.schema.metadata or {}), _META: json.dumps(sources).encode()}
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        table = joined.combine_chunks().replace_schema_metadata(meta)  # one batch: later slices one chunk
        with pa.OSFile(str(partial), "wb") as sink, pa.ipc.new_file(sink, table.schema) as out:
            out.write_table(table)
        os.replace(partial, path)
        # another list of sources (apps added or gone) replaces the table's kept file: one per table
        for other in path.parent.glob(path.name.rsplit("-", 1)[0] + "-*.arrow"):
            if other != path:
                other.unlink(missing_ok=True)
    except OSError:
        try:
            partial.unlink(missing_ok=True)
        except OSError:
            pass


def _pieces(paths: Sequence[str | os.PathLike], fresh: dict[str, pa.Table], kept: pa.Table | None,
            spans: dict[str, tuple[list[int], int, int]]) -> list[pa.Table]:
    """The join's pieces in order: each fresh file's table, and one slice of the kept table per run
    of unchanged files that lie one after the other in it (a thousand slices of ~100 columns each
    would cost ~0.25 s, and leave every column of the join in a thousand chunks)."""
    pieces: list[pa.Table] = []
    start = end = None  # the run of kept rows not yet sliced
    for path in map(str, paths):
        if path in fresh:
            if start is not None:
                pieces.append(kept.slice(start, end - start))
                start = None
            pieces.append(fresh[path])
            continue
        offset, rows = spans[path][1:]
        if start is not None and offset != end:
            pieces.append(kept.slice(start, end - start))
            start = None
        if start is None:
            start = offset
        end = offset + rows
    if start is not None:
        pieces.append(kept.slice(start, end - start))
    return pieces


def joined(paths: Sequence[str | os.PathLike], table: str, folder: str | os.PathLike,
           each_file: Callable, read: Callable[[str | os.PathLike], pa.Table],
           columns: Sequence[str] | None = None) -> pa.Table:
    """The files' tables concatenated in order (``each_file(paths, read)`` reads them; ``columns``:
    the columns ``read`` reads, None for all), the rows of the files unchanged since the last call
    taken from the table kept in ``folder``."""
    path = _kept_path(paths, table, folder, columns)
    identities = [file_identity(p) for p in paths]
    kept = _load(path)
    spans = kept[1] if kept is not None else {}
    unchanged = [p for p, i in zip(paths, identities, strict=True)
                 if i is not None and str(p) in spans and spans[str(p)][0] == i]
    reused = set(map(str, unchanged))
    changed = [p for p in paths if str(p) not in reused]
    fresh = dict(zip(map(str, changed), each_file(changed, read), strict=True))
    if unchanged and any(t.num_rows and t.schema.remove_metadata() != kept[0].schema.remove_metadata()
                         for t in fresh.values()):
        fresh.update(zip(map(str, unchanged), each_file(unchanged, read), strict=True))  # other columns now
    pieces = _pieces(paths, fresh, kept[0] if kept is not None else None, spans)
    nonempty = [piece for piece in pieces if piece.num_rows]
    if not nonempty:
        result = pieces[0] if pieces else pa.table({})
    else:
        result = pa.concat_tables(nonempty, promote_options="permissive") if len(nonempty) > 1 else nonempty[0]
    if fresh:
        uniform = len({piece.schema.remove_metadata() for piece in nonempty}) <= 1
        rows = [fresh[str(p)].num_rows if str(p) in fresh else spans[str(p)][2] for p in paths]
        _store(path, result, {"uniform": uniform, "files": [[str(p), i, n] for p, i, n in zip(
            paths, identities, rows, strict=True)]})
    return result
