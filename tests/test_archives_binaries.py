"""Archive and binary readers: hostile or corrupt input gives a clear error naming the file."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ortbundle._core.errors import ArchiveError, BinaryError, IntegrityError
from ortbundle._core.fsio import check_member_name
from ortbundle.fetch.archives import ZipArchive
from ortbundle.stage.binaries import inspect
from tests.helpers.elf import make_elf
from tests.helpers.pe import make_pe
from tests.helpers.wheels import make_wheel


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("../x", "climbs out"),
        ("a/../../x", "climbs out"),
        ("/etc/x", "absolute"),
        ("C:\\x", "backslash"),
        ("C:x", "drive letter"),
        ("a\x00b", "NUL"),
    ],
)
def test_hostile_member_names_are_refused(tmp_path: Path, name: str, why: str) -> None:
    assert why in (check_member_name(name) or "")
    path = tmp_path / "hostile.zip"
    placeholder = name.replace("\x00", "\x01")  # zipfile cuts NULs when writing; patch the bytes
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("ok.txt", b"fine")
        archive.writestr(zipfile.ZipInfo(placeholder), b"evil")
    raw = path.read_bytes().replace(placeholder.encode(), name.encode())
    path.write_bytes(raw)
    with pytest.raises(ArchiveError) as err:
        ZipArchive(path, label="hostile.zip", component="c")
    assert why in str(err.value) and "hostile.zip" in str(err.value)
    assert not (tmp_path.parent / "x").exists()


def test_duplicate_member_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.zip"
    with pytest.warns(UserWarning, match="Duplicate name"), zipfile.ZipFile(path, "w") as archive:
        archive.writestr("lib/a.so", b"one")
        archive.writestr("lib/a.so", b"two")
    with pytest.raises(ArchiveError, match="appears twice"):
        ZipArchive(path, label="dup.zip")


def test_record_mismatch_is_refused_and_nothing_left(tmp_path: Path) -> None:
    wheel = make_wheel(
        tmp_path / "w-1.0-py3-none-any.whl",
        "w",
        "1.0",
        {"w/lib.so": b"real bytes"},
        record_overrides={"w/lib.so": b"other bytes"},
    )
    dest = tmp_path / "out.so"
    with ZipArchive(wheel, label=wheel.name, component="w") as archive:
        with pytest.raises(IntegrityError, match="RECORD says"):
            archive.extract("w/lib.so", dest)
    assert not dest.exists()


def test_member_missing_from_record_is_refused(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "w-1.0-py3-none-any.whl", "w", "1.0", {"w/a.so": b"a"})
    with zipfile.ZipFile(wheel, "a") as archive:
        archive.writestr("w/sneaky.so", b"not recorded")
    with ZipArchive(wheel, label=wheel.name) as archive:
        with pytest.raises(IntegrityError, match="no sha256 in the wheel's RECORD"):
            archive.extract("w/sneaky.so", tmp_path / "s.so")


def test_zip_bomb_ratio_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("big.so", b"\x00" * (64 << 20))
    with ZipArchive(path, label="bomb.zip") as archive:
        with pytest.raises(ArchiveError, match="zip bomb"):
            archive.extract("big.so", tmp_path / "big.so")
    assert not (tmp_path / "big.so").exists()


def test_elf_fields_read_back(tmp_path: Path) -> None:
    path = tmp_path / "liba.so"
    path.write_bytes(make_elf(machine="EM_AARCH64", soname="liba.so.1", needed=("libc.so",)))
    info = inspect(path)
    assert (info.format, info.machine, info.soname, info.needed) == (
        "elf",
        "EM_AARCH64",
        "liba.so.1",
        ("libc.so",),
    )
    assert info.loads[0].align == 0x1000


def test_pe_fields_read_back(tmp_path: Path) -> None:
    path = tmp_path / "a.dll"
    path.write_bytes(make_pe(machine="ARM64", imports=("b.dll",), delay_imports=("c.dll",)))
    info = inspect(path)
    assert (info.machine, info.needed, info.delay_needed) == ("ARM64", ("b.dll",), ("c.dll",))


@pytest.mark.parametrize("cut", [8, 40, 70, 130])
def test_truncated_elf_is_a_clear_error(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "lib.so"
    path.write_bytes(make_elf(soname="lib.so", needed=("libc.so.6",))[:cut])
    with pytest.raises(BinaryError, match="lib.so is not a readable ELF file"):
        inspect(path)


@pytest.mark.parametrize("cut", [2, 64, 100, 300])
def test_truncated_pe_is_a_clear_error(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "a.dll"
    path.write_bytes(make_pe(imports=("b.dll",))[:cut])
    with pytest.raises(BinaryError, match="a.dll"):
        inspect(path)


def test_pe_with_bogus_import_directory(tmp_path: Path) -> None:
    data = bytearray(make_pe(imports=("b.dll",)))
    # point the import directory far outside the image
    offset = 64 + 4 + 20 + 112 + 8  # DOS, signature, COFF, PE32+ fields, export dir
    data[offset : offset + 4] = (0x7FFF0000).to_bytes(4, "little")
    path = tmp_path / "bogus.dll"
    path.write_bytes(bytes(data))
    with pytest.raises(BinaryError, match="bogus.dll"):
        inspect(path)


def test_not_a_library(tmp_path: Path) -> None:
    path = tmp_path / "readme.so"
    path.write_bytes(b"hello")
    with pytest.raises(BinaryError, match="neither an ELF, PE nor Mach-O"):
        inspect(path)


@pytest.mark.slow
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=600), prefix=st.sampled_from([b"\x7fELF", b"MZ", b""]))
def test_readers_never_crash(tmp_path: Path, data: bytes, prefix: bytes) -> None:
    path = tmp_path / "fuzz.bin"
    path.write_bytes(prefix + data)
    try:
        inspect(path)
    except BinaryError as exc:
        assert "fuzz.bin" in str(exc)
