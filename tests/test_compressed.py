"""Tests of roofline.compressed: compressions told apart by their bytes, damaged files named with the fix.

Every compressed file here is hand-made at test time in tmp_path from a few lines of text.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest

from roofline import compressed
from roofline.compressed import (
    archive_kind,
    compression_of,
    decompressed_copy,
    plain_name,
    read_bytes,
)
from roofline.errors import InputError

TEXT = b'"ID","Kernel Name"\n"0","hand-made"\n' * 2000


def compress(data: bytes, compression: str) -> bytes:
    """``data`` compressed as the command-line tools would write it."""
    if compression == "zstd":
        if not pa.Codec.is_available("zstd"):
            pytest.skip("this pyarrow has no zstd codec")
        return pa.compress(data, codec="zstd", asbytes=True)
    return {"gzip": gzip.compress, "xz": lzma.compress, "bzip2": bz2.compress}[compression](data)


COMPRESSIONS = ["gzip", "xz", "zstd", "bzip2"]


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_read_bytes_decompresses_whatever_the_name(tmp_path: Path, compression: str) -> None:
    for name in ("export.csv", f"export.csv.{compression}"):  # the bytes decide, not the suffix
        path = tmp_path / name
        path.write_bytes(compress(TEXT, compression))
        assert compression_of(path) == compression
        assert read_bytes(path) == TEXT
        assert read_bytes(path, limit=100) == TEXT[:100]


def test_plain_file_named_compressed_is_read_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "export.csv.gz"  # a browser decompressed it and kept the name
    path.write_bytes(TEXT)
    assert compression_of(path) is None
    assert read_bytes(path) == TEXT
    assert read_bytes(path, limit=10**9) == TEXT


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_truncated_file_names_the_file_and_the_check(tmp_path: Path, compression: str) -> None:
    data = compress(TEXT, compression)
    path = tmp_path / "cut.csv.z"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=rf"cut\.csv\.z: the {compression}-compressed file is truncated or damaged"
                       r".*Copy it again.*-t cut\.csv\.z"):
        read_bytes(path)


def test_damaged_gzip_checksum_is_refused(tmp_path: Path) -> None:
    data = bytearray(gzip.compress(TEXT))
    data[-6] ^= 0xFF  # the CRC-32 trailer
    path = tmp_path / "crc.csv.gz"
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"crc\.csv\.gz: the gzip-compressed file is truncated or damaged"):
        read_bytes(path)


def test_concatenated_gzip_members_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "two.csv.gz"  # `gzip -c a >> f; gzip -c b >> f`
    path.write_bytes(gzip.compress(TEXT[:999]) + gzip.compress(TEXT[999:]))
    assert read_bytes(path) == TEXT


def test_decompressed_copy_keeps_the_plain_name_and_is_removed(tmp_path: Path) -> None:
    path = tmp_path / "report.ncu-rep.xz"
    path.write_bytes(lzma.compress(TEXT))
    with decompressed_copy(path) as copy:
        assert copy.name == "report.ncu-rep" and copy.read_bytes() == TEXT
    assert not copy.exists()
    plain = tmp_path / "plain.ncu-rep"
    plain.write_bytes(TEXT)
    with decompressed_copy(plain) as copy:
        assert copy == plain
    assert plain.exists()


def test_decompressed_copy_of_a_truncated_file(tmp_path: Path) -> None:
    path = tmp_path / "report.ncu-rep.gz"
    path.write_bytes(gzip.compress(TEXT)[:-20])
    with pytest.raises(InputError, match=r"report\.ncu-rep\.gz: the gzip-compressed file is truncated"):
        with decompressed_copy(path):
            pass


def test_plain_name() -> None:
    assert plain_name("a.csv.gz") == "a.csv"
    assert plain_name("a.yaml.ZST") == "a.yaml"
    assert plain_name("a.ncu-rep.zstd") == "a.ncu-rep"
    assert plain_name("a.csv") == "a.csv"


def test_archive_kind_names_the_tool() -> None:
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("export.csv", TEXT)
    tarred = io.BytesIO()
    with tarfile.open(fileobj=tarred, mode="w") as archive:
        info = tarfile.TarInfo("export.csv")
        info.size = len(TEXT)
        archive.addfile(info, io.BytesIO(TEXT))
    assert archive_kind(zipped.getvalue()) == ("a zip archive", "unzip it")
    assert archive_kind(tarred.getvalue())[1] == "extract it with `tar -xf`"
    assert archive_kind(TEXT) is None


def test_a_codec_pyarrow_lacks_names_the_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "export.csv.zst"
    path.write_bytes(b"\x28\xb5\x2f\xfd" + bytes(64))  # hand-made: the zstd magic bytes only
    monkeypatch.setattr(compressed, "codec_available", lambda codec: codec != "zstd")  # a pyarrow built without
    with pytest.raises(InputError, match=r"export\.csv\.zst: zstd-compressed, and this pyarrow has no zstd codec: "
                       r"decompress it with `zstd -d export\.csv\.zst`"):
        read_bytes(path)
