"""Tests of roofline.files.compressed: compressions told apart by their bytes, damaged files named with the fix.

Every compressed file here is hand-made at test time in tmp_path from a few lines of text, except
the ``.ncu-repz`` ones: a real report (../shared/fixtures/real) zstd-compressed into tmp_path.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile
import zipfile
from pathlib import Path

import ncu_report
import pyarrow as pa
import pytest
from conftest import real_fixture

from roofline.config import inputs
from roofline.errors import InputError
from roofline.files import compressed
from roofline.files.compressed import (
    archive_kind,
    compression_of,
    decompressed_copy,
    plain_name,
    read_bytes,
)
from roofline.parse.readers.ncu_rep import read_ncu_rep

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
    assert plain_name("nsight.csv.zip") == "nsight.csv"
    assert plain_name("a.ncu-repz") == "a.ncu-rep"
    assert plain_name("a.csv") == "a.csv"


def test_the_input_names_know_every_compression() -> None:
    """roofline.config.inputs (imported without pyarrow) spells the suffixes this module reads."""
    assert set(inputs.COMPRESSIONS) == set(compressed.SUFFIXES)
    assert inputs.suffix_kind("x.ncu-repz") == "ncu-rep" and inputs.app_name("x.ncu-repz") == "x"
    assert inputs.suffix_kind("nsight.csv.zip") == "csv" and inputs.app_name("nsight.csv.zip") == "nsight"


def zipped(path: Path, members: dict[str, bytes]) -> Path:
    """A zip archive at ``path`` of ``members`` (name -> bytes), deflated as `zip` writes them."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def test_zip_of_one_export_is_read_as_it(tmp_path: Path) -> None:
    # what macOS's "Compress" adds beside the file is no second member
    path = zipped(tmp_path / "nsight.csv.zip", {"nsight.csv": TEXT, "__MACOSX/._nsight.csv": b"\x00\x05",
                                                 "results/": b"", ".DS_Store": b"\x00"})
    assert compression_of(path) == "zip"
    assert read_bytes(path) == TEXT and read_bytes(path, limit=100) == TEXT[:100]
    assert compressed.zip_member(path) == "nsight.csv"


def test_zip_of_several_files_is_refused_naming_them(tmp_path: Path) -> None:
    path = zipped(tmp_path / "runs.csv.zip", {"a.csv": TEXT, "b/b.csv": TEXT})
    with pytest.raises(InputError, match=r"runs\.csv\.zip: a zip archive of 2 files \(a\.csv, b/b\.csv\); one input "
                       r"file is one application.*`unzip runs\.csv\.zip -d runs`"):
        read_bytes(path)
    empty = zipped(tmp_path / "empty.csv.zip", {"only/": b""})
    with pytest.raises(InputError, match=r"empty\.csv\.zip: the zip archive holds no file"):
        read_bytes(empty)


def test_damaged_zip_names_the_file_and_the_check(tmp_path: Path) -> None:
    data = zipped(tmp_path / "whole.zip", {"export.csv": TEXT}).read_bytes()
    cut = tmp_path / "cut.csv.zip"
    cut.write_bytes(data[: len(data) // 2])  # the central directory, at the end, is gone
    with pytest.raises(InputError, match=r"cut\.csv\.zip: the zip-compressed file is truncated or damaged.*"
                       r"`unzip -t cut\.csv\.zip` checks a copy"):
        read_bytes(cut)
    stored = io.BytesIO()
    with zipfile.ZipFile(stored, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("export.csv", TEXT)
    flipped = bytearray(stored.getvalue())
    flipped[flipped.index(b'"ID"') + 100] ^= 0xFF  # a byte of the stored file: its CRC-32 no longer matches
    crc = tmp_path / "crc.csv.zip"
    crc.write_bytes(bytes(flipped))
    with pytest.raises(InputError, match=r"crc\.csv\.zip: the zip-compressed file is truncated or damaged"):
        read_bytes(crc)


def test_decompressed_copy_of_a_zipped_report(tmp_path: Path) -> None:
    path = zipped(tmp_path / "report.ncu-rep.zip", {"profile/report.ncu-rep": TEXT})
    with decompressed_copy(path) as copy:
        assert copy.name == "report.ncu-rep" and copy.read_bytes() == TEXT
    assert not copy.exists()


def _vecadd() -> Path:
    return real_fixture("rtx3070-vecadd-basic-ncu2022.3") / "CuVectorAddDrv.ncu-rep"


def _zstd(path: Path, data: bytes) -> Path:
    if not pa.Codec.is_available("zstd"):
        pytest.skip("this pyarrow has no zstd codec")
    path.write_bytes(pa.compress(data, codec="zstd", asbytes=True))  # a zstd frame, as `zstd` writes
    return path


def test_ncu_repz_is_a_zstd_report_read_like_the_report(tmp_path: Path) -> None:
    """A zstd-compressed real report named .ncu-repz: the installed ncu_report loads it by that name
    (its load_report documents .ncu-repz), and roofline reads it, through a decompressed .ncu-rep
    copy (older ncu_report versions know no .ncu-repz), as the report itself."""
    report = _vecadd()
    repz = _zstd(tmp_path / "vecadd.ncu-repz", report.read_bytes())
    context = ncu_report.load_report(str(repz))
    assert context.num_ranges() == 1 and context.range_by_idx(0).num_actions() == 1
    with decompressed_copy(repz) as copy:
        assert copy.name == "vecadd.ncu-rep" and copy.read_bytes() == report.read_bytes()
    assert read_ncu_rep(repz).equals(read_ncu_rep(report))


def test_ncu_repz_that_is_a_plain_report_is_read_too(tmp_path: Path) -> None:
    """ncu_report reads a .ncu-repz as zstd whatever its bytes (a plain report so named gives no
    launch, silently): roofline hands it over under a .ncu-rep name."""
    report = _vecadd()
    plain = tmp_path / "renamed.ncu-repz"
    plain.write_bytes(report.read_bytes())
    assert ncu_report.load_report(str(plain)).num_ranges() == 0  # the trap this avoids
    with decompressed_copy(plain) as copy:
        assert copy.name == "renamed.ncu-rep" and copy.is_symlink()
    assert not copy.exists() and plain.exists()
    assert read_ncu_rep(plain).equals(read_ncu_rep(report))


def test_archive_kind_names_the_tool() -> None:
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w") as archive:
        archive.writestr("export.csv", TEXT)
    tarred = io.BytesIO()
    with tarfile.open(fileobj=tarred, mode="w") as archive:
        info = tarfile.TarInfo("export.csv")
        info.size = len(TEXT)
        archive.addfile(info, io.BytesIO(TEXT))
    assert archive_kind(packed.getvalue()) is None  # a zip of one input is read (compression "zip")
    assert archive_kind(tarred.getvalue())[1] == "extract it with `tar -xf`"
    assert archive_kind(TEXT) is None


def test_a_codec_pyarrow_lacks_names_the_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "export.csv.zst"
    path.write_bytes(b"\x28\xb5\x2f\xfd" + bytes(64))  # hand-made: the zstd magic bytes only
    monkeypatch.setattr(compressed, "codec_available", lambda codec: codec != "zstd")  # a pyarrow built without
    with pytest.raises(InputError, match=r"export\.csv\.zst: zstd-compressed, and this pyarrow has no zstd codec: "
                       r"decompress it with `zstd -d export\.csv\.zst`"):
        read_bytes(path)
