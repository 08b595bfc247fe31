"""Compressed inputs read as they are: gzip, xz, zstd, bzip2 and zip, told apart by their magic bytes.

The readers of the parse stage ask this module for an input's bytes; a compressed file is
decompressed in memory (CSV exports and what-if tables) or to a temporary file (``.ncu-rep``
reports, which NVIDIA's ``ncu_report`` reads by path). The file's first bytes decide, not its name:
a ``.csv`` that is really gzip is read, and so is a ``.csv.gz`` that a browser already decompressed
but kept the name of. gzip, bzip2 and zstd go through pyarrow's codecs (one C++ path, in every
pyarrow wheel, that finds truncated streams and bad checksums), xz through the standard library's
``lzma`` (pyarrow has no xz codec), zip through ``zipfile``. A damaged or truncated file raises
:class:`InputError` naming the file, the compression and the command that tests a copy.

A zip archive is read as the one input inside it (``nsight.csv.zip``: the way NERSC's exports are
shared on GitHub): one file is one application in the workflow (its name, history series and
provenance hash are the file's), so an archive of several inputs is refused with the command that
unpacks it. ``.ncu-repz`` is a zstd-compressed report (the suffix NVIDIA's ``ncu_report`` module
documents in ``load_report``): its decompressed copy is named ``.ncu-rep``, since ``ncu_report``
decides by the suffix whether to decompress, and older versions do not know ``.ncu-repz``.
"""

from __future__ import annotations

import contextlib
import lzma
import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa

from roofline.errors import InputError

# compression -> (magic bytes, the command that tests a file, the one that decompresses it)
COMPRESSIONS: dict[str, tuple[bytes, str, str]] = {
    "gzip": (b"\x1f\x8b", "gzip -t", "gunzip"),
    "xz": (b"\xfd7zXZ\x00", "xz -t", "unxz"),
    "zstd": (b"\x28\xb5\x2f\xfd", "zstd -t", "zstd -d"),
    "bzip2": (b"BZh", "bzip2 -t", "bunzip2"),
    "zip": (b"PK\x03\x04", "unzip -t", "unzip"),
}
SUFFIXES: dict[str, str] = {".gz": "gzip", ".xz": "xz", ".zst": "zstd", ".zstd": "zstd", ".bz2": "bzip2",
                            ".zip": "zip"}
# Suffixes that say "compressed" themselves: the decompressed copy's name (ncu_report decompresses
# a .ncu-repz by its name, and would read the decompressed bytes as compressed again).
COMPRESSED_NAMES: dict[str, str] = {".ncu-repz": ".ncu-rep"}
# Members of a zip archive that are no input: what macOS's Finder and Windows add beside the files
# (and ``._name`` resource forks, ``__MACOSX/`` folders).
_ZIP_LITTER = {".DS_Store", "Thumbs.db", "desktop.ini"}
_PYARROW_CODEC = {"gzip": "gzip", "zstd": "zstd", "bzip2": "bz2"}
_MAGIC_BYTES = max(len(magic) for magic, _, _ in COMPRESSIONS.values())
# Containers of several files, which no reader opens: what they are and how to unpack them (a zip
# archive of one input is read: COMPRESSIONS).
_ARCHIVES: tuple[tuple[int, bytes, str, str], ...] = (
    (0, b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive", "extract it with `7z x`"),
    (0, b"Rar!\x1a\x07", "a RAR archive", "extract it with `unrar x`"),
    (257, b"ustar", "a tar archive", "extract it with `tar -xf`"),
)


def compression_of_bytes(head: bytes) -> str | None:
    """The compression whose magic bytes ``head`` (a file's first bytes) starts with, or None."""
    for name, (magic, _, _) in COMPRESSIONS.items():
        if head.startswith(magic):
            return name
    return None


def compression_of(path: str | Path) -> str | None:
    """The compression of the file at ``path`` from its magic bytes, or None for a plain file."""
    with open(path, "rb") as handle:
        return compression_of_bytes(handle.read(_MAGIC_BYTES))


def plain_name(name: str) -> str:
    """``name`` without a compression suffix: ``a.csv.gz`` -> ``a.csv``, ``a.ncu-repz`` -> ``a.ncu-rep``;
    other names unchanged."""
    for suffix in SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    for suffix, plain in COMPRESSED_NAMES.items():
        if name.lower().endswith(suffix):
            return name[: -len(suffix)] + plain
    return name


def _zip_litter(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return name.startswith("__MACOSX/") or base.startswith("._") or base in _ZIP_LITTER


def zip_member(path: str | Path) -> str:
    """The name of the one input inside the zip archive ``path`` (folders and what macOS or Windows add
    beside files, ``__MACOSX/``, ``.DS_Store``, left out).

    Raises
    ------
    InputError
        An archive that cannot be opened, holds no file or several (one file is one application: the
        message names them and the command that unpacks them).
    """
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as archive:
            names = [i.filename for i in archive.infolist() if not i.is_dir()]
    except zipfile.BadZipFile as exc:
        raise _damaged(path, "zip", exc) from exc
    members = [n for n in names if not _zip_litter(n)]
    if len(members) == 1:
        return members[0]
    if not members:
        raise InputError(f"{path}: the zip archive holds no file; zip the export itself (`zip {path.name} run.csv`)")
    shown = ", ".join(members[:4]) + (f" and {len(members) - 4} more" if len(members) > 4 else "")
    raise InputError(
        f"{path}: a zip archive of {len(members)} files ({shown}); one input file is one application, so a zip "
        "is read only when it holds one: unpack it "
        f"(`unzip {path.name} -d {Path(plain_name(path.name)).stem}`) and give the "
        "files, or the folder (its CSV exports are read as one ncu run, each report as its own application)"
    )


def _damaged(path: Path, compression: str, exc: Exception) -> InputError:
    test = COMPRESSIONS[compression][1]
    # No advice to decompress what can be read: a cut export would lose its last launches without a word.
    return InputError(
        f"{path}: the {compression}-compressed file is truncated or damaged ({exc}); no launch of it is "
        f"analysed. Copy it again from where it was written (`{test} {path.name}` checks a copy)"
    )


def codec_available(codec: str) -> bool:
    """Whether pyarrow has ``codec``: every pyarrow wheel has gzip, bz2 and zstd, a source build may not."""
    return pa.Codec.is_available(codec)


def _open(path: Path, compression: str) -> BinaryIO:
    if compression == "xz":
        return lzma.open(path, "rb")
    if compression == "zip":
        member = zip_member(path)
        try:
            # the member's stream keeps the archive's file open after the archive object is closed
            with zipfile.ZipFile(path) as archive:
                return archive.open(member)
        except NotImplementedError as exc:  # Deflate64 (Windows Explorer, files over 2 GB), ...
            raise InputError(f"{path}: zipped with a method Python's zipfile cannot read ({exc}): unpack it with "
                             f"`unzip {path.name}` and give the file inside") from exc
        except RuntimeError as exc:  # encrypted
            raise InputError(f"{path}: {exc}; unpack it with `unzip {path.name}` and give the file inside") from exc
    codec = _PYARROW_CODEC[compression]
    if not codec_available(codec):
        unpack = COMPRESSIONS[compression][2]
        raise InputError(
            f"{path}: {compression}-compressed, and this pyarrow has no {compression} codec: decompress it with "
            f"`{unpack} {path.name}` and give the decompressed file"
        )
    return pa.input_stream(str(path), compression=codec)


def read_bytes(path: str | Path, limit: int | None = None) -> bytes:
    """The bytes of ``path``, decompressed when it is compressed; the first ``limit`` bytes only, when given.

    Raises
    ------
    InputError
        A truncated or damaged compressed file, naming the file and the command that tests a copy.
    """
    path = Path(path)
    with open(path, "rb") as handle:
        compression = compression_of_bytes(handle.read(_MAGIC_BYTES))
        if compression is None:
            handle.seek(0)
            if limit is None:
                return handle.read()
            # read(n) allocates n bytes first: a 2.7 MB file read as read(8 MB) takes 5x longer
            return handle.read(min(os.fstat(handle.fileno()).st_size, limit))
    try:
        with _open(path, compression) as stream:
            return stream.read() if limit is None else stream.read(limit)
    except (OSError, EOFError, lzma.LZMAError, zipfile.BadZipFile) as exc:  # BadZipFile: a bad CRC
        raise _damaged(path, compression, exc) from exc


def archive_kind(head: bytes) -> tuple[str, str] | None:
    """(what it is, how to unpack it) when ``head`` starts an archive of several files, else None."""
    for offset, magic, kind, fix in _ARCHIVES:
        if head[offset : offset + len(magic)] == magic:
            return kind, fix
    return None


@contextlib.contextmanager
def decompressed_copy(path: str | Path) -> Iterator[Path]:
    """A decompressed copy of ``path`` in a temporary folder, named as ``path`` without its compression
    suffix (:func:`plain_name`), removed on exit; ``path`` itself when it is not compressed, or a link to
    it of that name when its name says compressed (a ``.ncu-repz`` that is a plain report)."""
    path = Path(path)
    compression = compression_of(path)
    if compression is None and plain_name(path.name) == path.name:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="roofline-") as folder:
        copy = Path(folder) / plain_name(path.name)
        if compression is None:
            copy.symlink_to(path.resolve())
            yield copy
            return
        try:
            with _open(path, compression) as stream, open(copy, "wb") as out:
                shutil.copyfileobj(stream, out, 1 << 20)
        except (EOFError, lzma.LZMAError, zipfile.BadZipFile) as exc:
            raise _damaged(path, compression, exc) from exc
        except OSError as exc:
            if exc.errno is None:  # pyarrow's codec errors carry no errno
                raise _damaged(path, compression, exc) from exc
            # the copy could not be written (a full /tmp): say so, not "damaged"
            raise OSError(
                exc.errno,
                f"{path}: could not write its decompressed copy to {folder} ({exc.strerror}); set TMPDIR to a "
                "folder with room for it",
            ) from exc
        yield copy
