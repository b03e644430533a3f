"""Hostile inputs, fuzzed: the archive, ELF and PE readers on mutated real inputs.

tests/test_archives_binaries.py::test_readers_never_crash feeds random bytes behind a magic
number, which rarely gets past the first header. Here the inputs are valid files (a wheel, an
ELF, a PE) with bytes overwritten and tails cut, so the parsers go deep before they meet the
damage. The property everywhere: a result, or an OrtbundleError naming the file; nothing is
written outside the extraction directory.
"""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from functools import cache
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ortbundle._core.errors import ArchiveError, BinaryError, IntegrityError
from ortbundle._core.fsio import check_member_name
from ortbundle.fetch.archives import ZipArchive
from ortbundle.stage.binaries import inspect
from tests.helpers.elf import make_elf
from tests.helpers.pe import make_pe

FUZZ = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,  # the same examples every run: a strict xfail stays strict
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@cache
def seed_wheel() -> bytes:
    """A small wheel: two libraries (one stored, one deflated), a licence and a RECORD."""

    members = {
        "pkg/libstored.so": make_elf(soname="libstored.so", needed=("libc.so.6",)),
        "pkg/libdeflated.so": make_elf(soname="libdeflated.so", payload=b"abc" * 300),
        "pkg/LICENSE": b"MIT License\n",
    }
    record = "".join(
        f"{name},sha256="
        f"{base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
        f"{len(data)}\n"
        for name, data in members.items()
    )
    members["pkg-1.0.dist-info/RECORD"] = (record + "pkg-1.0.dist-info/RECORD,,\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            method = zipfile.ZIP_DEFLATED if "deflated" in name else zipfile.ZIP_STORED
            archive.writestr(name, data, compress_type=method)
    return buffer.getvalue()


def mutate(seed: bytes, writes: list[tuple[int, int]], cut: int | None) -> bytes:
    data = bytearray(seed)
    for at, value in writes:
        data[at % len(data)] = value
    return bytes(data[:cut] if cut is not None else data)


MUTATIONS = st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=6)
CUTS = st.one_of(st.none(), st.integers(0, 1 << 12))


def _deflated_first_byte() -> int:
    seed = seed_wheel()
    at = seed.index(b"pkg/libdeflated.so") + len(b"pkg/libdeflated.so")  # local header's name
    return at  # no extra field: the compressed bytes start here


@FUZZ
@given(writes=MUTATIONS, cut=CUTS)
@example(writes=[(_deflated_first_byte(), 0xFF)], cut=None)  # an invalid deflate block
def test_zip_reader_gives_members_or_a_clear_error(
    tmp_path: Path, writes: list[tuple[int, int]], cut: int | None
) -> None:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    for old in work.rglob("*"):
        old.unlink()
    path = work / "fuzz.whl"
    path.write_bytes(mutate(seed_wheel(), writes, cut))
    out = work / "out.bin"
    try:
        with ZipArchive(path, label="fuzz.whl", component="c") as archive:
            for name in archive.members:
                out.unlink(missing_ok=True)
                try:
                    extracted = archive.extract(name, out)
                except (ArchiveError, IntegrityError) as exc:
                    assert "fuzz.whl" in str(exc)
                    assert not out.exists()  # a refused member leaves nothing behind
                else:
                    assert extracted.size == out.stat().st_size
    except ArchiveError as exc:
        assert "fuzz.whl" in str(exc)
    assert {p.name for p in work.iterdir()} <= {"fuzz.whl", "out.bin"}


@cache
def seed_zip() -> bytes:
    """The seed wheel's members without its RECORD: a plain zip (an AAR, say)."""
    with zipfile.ZipFile(io.BytesIO(seed_wheel())) as wheel:
        members = [(i, wheel.read(i)) for i in wheel.infolist() if "RECORD" not in i.filename]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for info, data in members:
            archive.writestr(info, data)
    return buffer.getvalue()


@FUZZ
@given(writes=MUTATIONS, cut=CUTS)
def test_zip_reader_away_from_the_known_bugs_gives_members_or_a_clear_error(
    tmp_path: Path, writes: list[tuple[int, int]], cut: int | None
) -> None:
    """The same property on a plain zip (no RECORD, which is read unguarded while opening),
    with the damage kept off the deflate stream and the headers' version-needed, flags and
    method fields (the known bugs): everything else — names, sizes, CRCs, offsets, the central directory and its
    end record, stored data, cut tails — must already give members or a clear error."""
    seed = seed_zip()
    writes = [(at % len(seed), value) for at, value in writes]
    path = tmp_path / "fuzz.zip"
    path.write_bytes(mutate(seed, [w for w in writes if w[0] not in _known_bug_bytes()], cut))
    out = tmp_path / "out.bin"
    out.unlink(missing_ok=True)
    try:
        with ZipArchive(path, label="fuzz.zip") as archive:
            for name in archive.members:
                try:
                    archive.extract(name, out)
                except (ArchiveError, IntegrityError) as exc:
                    assert "fuzz.zip" in str(exc)
    except ArchiveError as exc:
        assert "fuzz.zip" in str(exc)


@cache
def _known_bug_bytes() -> frozenset[int]:
    seed = seed_zip()
    avoid: set[int] = set()
    with zipfile.ZipFile(io.BytesIO(seed)) as archive:
        for info in archive.infolist():
            local = info.header_offset
            avoid.update(range(local + 4, local + 10))  # version needed, flags, method
            data = local + 30 + len(info.filename)
            if info.compress_type != zipfile.ZIP_STORED:
                avoid.update(range(data, data + info.compress_size))
    at = 0
    while (at := seed.find(b"PK\x01\x02", at)) != -1:
        avoid.update(range(at + 6, at + 12))  # version needed, flags, method
        at += 4
    return frozenset(avoid)


@FUZZ
@given(writes=MUTATIONS, cut=CUTS, machine=st.sampled_from(["EM_X86_64", "EM_AARCH64"]))
def test_elf_reader_gives_a_result_or_a_clear_error(
    tmp_path: Path, writes: list[tuple[int, int]], cut: int | None, machine: str
) -> None:
    seed = make_elf(machine=machine, soname="libx.so.1", needed=("a.so", "b.so"), runpath="$ORIGIN")
    path = tmp_path / "libfuzz.so"
    path.write_bytes(mutate(seed, [(at % 256, v) for at, v in writes], cut))
    try:
        info = inspect(path)
    except BinaryError as exc:
        assert "libfuzz.so" in str(exc)
    else:
        assert info.format in ("elf", "pe")


@pytest.mark.slow
@settings(FUZZ, max_examples=120)  # pefile costs ~25 ms an input
@given(writes=MUTATIONS, cut=st.one_of(st.none(), st.integers(0, 1200)))
def test_pe_reader_gives_a_result_or_a_clear_error(
    tmp_path: Path, writes: list[tuple[int, int]], cut: int | None
) -> None:
    seed = SEED_PE
    path = tmp_path / "fuzz.dll"
    # the headers (first 0x200 bytes) and the import tables right after them
    path.write_bytes(mutate(seed, [(at % 0x300, v) for at, v in writes], cut))
    try:
        info = inspect(path)
    except BinaryError as exc:
        assert "fuzz.dll" in str(exc)
    else:
        assert info.format in ("elf", "pe")
        assert all(isinstance(n, str) and n for n in info.all_needed)


SEED_PE = make_pe(imports=("a.dll", "b.dll"), delay_imports=("c.dll",))
NAME_ALPHABET = st.sampled_from(["a", "b", ".", "..", "/", "\\", ":", "\x00", "C", " ", "é"])


@settings(max_examples=500, deadline=None)
@given(parts=st.lists(NAME_ALPHABET, max_size=10))
def test_an_accepted_member_name_stays_inside_the_stage(parts: list[str]) -> None:
    name = "".join(parts)
    if check_member_name(name) is not None:
        return
    root = PurePosixPath("/stage")
    joined = root / name
    # normalise without touching the disk: '.' vanishes, '..' would climb
    resolved: list[str] = []
    for part in joined.parts[1:]:
        assert part != "..", name
        if part != ".":
            resolved.append(part)
    assert resolved, name
    assert "\x00" not in name and "\\" not in name and not name.startswith("/")
