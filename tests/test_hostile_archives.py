"""Hostile inputs, archives and binaries: a pinned wheel that is itself hostile, built for real.

The worst case is a pin that matches hostile bytes (an upstream or a re-pin gone wrong): the
download verifies, so the archive and binary readers are the last line. Each case runs
`invoke build` (run_build) and must stop with the right error class, the member or file named,
no traceback, nothing written outside the scratch stage and no version tree in dist/.
Unit-level proofs already in tests/test_archives_binaries.py (not repeated):
test_hostile_member_names_are_refused, test_duplicate_member_is_refused,
test_record_mismatch_is_refused_and_nothing_left, test_member_missing_from_record_is_refused,
test_zip_bomb_ratio_is_refused, test_truncated_elf_is_a_clear_error,
test_truncated_pe_is_a_clear_error, test_pe_with_bogus_import_directory,
test_readers_never_crash; tests/test_build.py::test_wrong_machine_type_stops; tarballs and
nested archives (symlink, hard link, duplicate, `..`, truncated, three levels deep, a nested pin
mismatch) in tests/test_nested.py.
"""

from __future__ import annotations

import stat
import struct
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from ortbundle.cli.build import run_build
from ortbundle.cli.common import CommandFailed
from tests.helpers.elf import make_elf
from tests.helpers.faults import (
    make_elf32,
    member_data_offset,
    patch_wheel,
    republish,
    set_member_field,
    unverified_in_cache,
)
from tests.helpers.pe import make_pe
from tests.helpers.project import FakeProject
from tests.helpers.wheels import make_wheel

LINUX, WINDOWS = "linux-x86_64", "windows-x86_64"
DEP = "onnxruntime/capi/libdep.so.2"
DLL = "onnxruntime/capi/dep.dll"


def _files(root: Path) -> set[str]:
    """Every file under root, except the cache (which holds the verified hostile wheel)."""
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if not p.is_dir() and "cache" not in p.relative_to(root).parts
    }


def refused(fake: FakeProject, target: str, code: int | tuple[int, ...], *needles: str) -> str:
    """Build `target`; it must fail cleanly with `code`, naming every needle, leaving nothing."""
    before = _files(fake.root.parent)
    with pytest.raises(CommandFailed) as failed:
        run_build(fake.options(targets=(target,)), root=fake.root)
    message = str(failed.value)
    assert failed.value.code in (code if isinstance(code, tuple) else (code,)), message
    for needle in needles:
        assert needle in message, message
    assert _files(fake.root.parent) == before  # nothing written outside the scratch stage
    assert not (fake.root / "dist" / "fakeproduct" / "1.2.3").exists()
    assert list((fake.root / "dist").rglob("*.partial-*")) == []
    assert unverified_in_cache(fake.root / "cache") == []
    assert not Path("/etc/x").exists()
    return message


# ---------------------------------------------------------------------- hostile member names


def _add_member(fake: FakeProject, info: zipfile.ZipInfo | str, data: bytes) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate we mean to write
        with zipfile.ZipFile(fake.wheels[LINUX], "a") as archive:
            archive.writestr(info, data)
    republish(fake, LINUX)


def _named(name: str) -> Callable[[FakeProject], None]:
    """A member with a hostile name: written under a same-length placeholder, then patched."""

    def setup(fake: FakeProject) -> None:
        raw = name.encode()
        placeholder = bytes(0x7E for _ in raw)  # '~' * len
        _add_member(fake, placeholder.decode(), b"evil")
        patch_wheel(fake, LINUX, placeholder, raw)

    return setup


def _duplicate(fake: FakeProject) -> None:
    _add_member(fake, DEP, make_elf(soname="libdep.so.2", payload=b"other"))


HOSTILE_NAMES: dict[str, tuple[Callable[[FakeProject], None], str, str]] = {
    # case: (make it, why, how the member is named in the message)
    "dot-dot": (_named("../x"), "climbs out with '..'", "'../x'"),
    "absolute": (_named("/etc/x"), "is an absolute path", "'/etc/x'"),
    "drive-backslash": (_named("C:\\x"), "contains a backslash", "'C:\\\\x'"),
    "drive-slash": (_named("C:/x"), "starts with a drive letter", "'C:/x'"),
    "nul-byte": (_named("onnxruntime/capi/lib\x00evil.so"), "NUL byte", "lib\\x00evil.so"),
    "duplicate": (_duplicate, "appears twice", repr(DEP)),
}


@pytest.mark.parametrize("case", HOSTILE_NAMES)
def test_hostile_member_name_is_refused_before_anything_is_written(
    fake: FakeProject, case: str
) -> None:
    fake.write()
    setup, why, member = HOSTILE_NAMES[case]
    setup(fake)
    refused(fake, LINUX, 6, why, member, fake.wheels[LINUX].name)


def test_zip_symlink_member_is_never_a_symlink(fake: FakeProject) -> None:
    """Zip has no portable symlinks: a member flagged S_IFLNK (here a root the build must read)
    is refused as a hostile archive member (exit 6), naming it — never read, never followed."""
    fake.linux_roots.append("libevil.so")
    fake.linux["onnxruntime/capi/libevil.so"] = b"/etc/passwd"  # recorded in RECORD
    fake.write()
    link = (stat.S_IFLNK | 0o777) << 16
    set_member_field(fake.wheels[LINUX], "onnxruntime/capi/libevil.so", "external", link)
    republish(fake, LINUX)
    with zipfile.ZipFile(fake.wheels[LINUX]) as archive:
        assert stat.S_ISLNK(archive.getinfo("onnxruntime/capi/libevil.so").external_attr >> 16)
    refused(fake, LINUX, 6, "member is a symlink", "'onnxruntime/capi/libevil.so'")


SPECIAL_MODES = {
    "symlink": (stat.S_IFLNK | 0o777, "a symlink"),
    "char-device": (stat.S_IFCHR | 0o600, "a character device"),
    "block-device": (stat.S_IFBLK | 0o600, "a block device"),
    "fifo": (stat.S_IFIFO | 0o644, "a FIFO"),
    "socket": (stat.S_IFSOCK | 0o755, "a socket"),
}


@pytest.mark.parametrize("case", SPECIAL_MODES)
@pytest.mark.parametrize("taken", [True, False], ids=["taken-by-a-glob", "outside-every-glob"])
def test_zip_member_that_is_no_regular_file_is_refused_wherever_it_sits(
    fake: FakeProject, case: str, taken: bool
) -> None:
    """A link, device, FIFO or socket member is refused with exit 6 naming it, whether a take
    glob would have taken it (onnxruntime/capi/*.so) or not (a stray file at the top)."""
    member = "onnxruntime/capi/libstray.so" if taken else "stray/node"
    fake.linux[member] = b"/dev/sda"
    fake.write()
    mode, what = SPECIAL_MODES[case]
    set_member_field(fake.wheels[LINUX], member, "external", mode << 16)
    republish(fake, LINUX)
    refused(fake, LINUX, 6, f"member is {what}", repr(member))


@pytest.mark.parametrize(("host", "system"), [(3, "Unix"), (19, "macOS")])
def test_a_link_member_is_refused_from_every_host_that_stores_a_unix_mode(
    fake: FakeProject, host: int, system: str
) -> None:
    """Info-ZIP on macOS records "made on OS X" (19), not Unix (3), with the same st_mode in
    the high bits, and unzip there creates the link just the same: both are refused."""
    member = "onnxruntime/capi/libstray.so"
    fake.linux[member] = b"/etc/passwd"
    fake.write()
    set_member_field(fake.wheels[LINUX], member, "external", (stat.S_IFLNK | 0o777) << 16)
    set_member_field(fake.wheels[LINUX], member, "made_by", (host << 8) | 20)
    republish(fake, LINUX)
    with zipfile.ZipFile(fake.wheels[LINUX]) as archive:
        assert archive.getinfo(member).create_system == host, system
    refused(fake, LINUX, 6, "member is a symlink", repr(member))


def test_zip_mode_bits_of_a_non_unix_zip_are_not_read_as_a_mode(tmp_path: Path) -> None:
    """Only a zip made on Unix carries st_mode in external_attr: the same bits from another
    host system (MS-DOS attributes) are no link."""
    from ortbundle.fetch.archives import ZipArchive

    path = tmp_path / "dos.zip"
    info = zipfile.ZipInfo("a/b.so")
    info.create_system = 0
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(info, b"x")
    with ZipArchive(path, label="dos.zip") as archive:
        assert list(archive.members) == ["a/b.so"]


# ------------------------------------------------------------------------------- zip bombs


def test_member_inflating_past_a_sane_ratio_is_refused(fake: FakeProject) -> None:
    root = "onnxruntime/capi/libonnxruntime.so.1.0.0"
    fake.linux[root] = make_elf(soname="libonnxruntime.so.1") + b"\0" * (16 << 20)
    fake.write()
    refused(fake, LINUX, 6, "zip bomb", repr(root))


def test_member_inflating_past_its_declared_size_is_refused(fake: FakeProject) -> None:
    fake.linux[DEP] = make_elf(soname="libdep.so.2", payload=b"\0" * (1 << 20))
    fake.write()
    set_member_field(fake.wheels[LINUX], DEP, "usize", 4096)  # declares 4 KiB, inflates to 1 MiB
    republish(fake, LINUX)
    refused(fake, LINUX, 6, repr(DEP))


def test_record_inflating_past_a_sane_ratio_is_refused(fake: FakeProject) -> None:
    fake.write()
    record = "onnxruntime_fake-1.0.0.dist-info/RECORD"
    members: dict[str, bytes] = {}
    with zipfile.ZipFile(fake.wheels[LINUX]) as archive:
        for name in archive.namelist():
            members[name] = archive.read(name)
    members[record] += b"\n" * (16 << 20)  # 16 MiB from ~16 KiB: a ratio of ~1000
    with zipfile.ZipFile(fake.wheels[LINUX], "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    republish(fake, LINUX)
    refused(fake, LINUX, 6, "zip bomb", "RECORD")


# ------------------------------------------------------------------------- RECORD mismatches


def test_member_disagreeing_with_record_is_refused(fake: FakeProject) -> None:
    fake.write()
    make_wheel(
        fake.wheels[LINUX],
        "onnxruntime-fake",
        "1.0.0",
        fake.linux,
        record_overrides={DEP: b"what the RECORD claims"},
    )
    republish(fake, LINUX)
    refused(fake, LINUX, 4, "RECORD says", repr(DEP))


def test_member_missing_from_record_is_refused(fake: FakeProject) -> None:
    fake.write()
    with zipfile.ZipFile(fake.wheels[LINUX], "a") as archive:
        archive.writestr("onnxruntime/capi/libsneaky.so", make_elf(soname="libsneaky.so"))
    fake.linux_roots.append("libsneaky.so")
    republish(fake, LINUX)
    refused(fake, LINUX, 4, "no sha256 in the wheel's RECORD", "libsneaky.so")


def _rewrite_record(fake: FakeProject, target: str, edit: Callable[[list[str]], list[str]]) -> None:
    """Rewrite the wheel's RECORD rows with `edit` (None: drop RECORD) and re-pin the wheel:
    the pin is right, so only RECORD can object."""
    path = fake.wheels[target]
    with zipfile.ZipFile(path) as archive:
        members = {i.filename: archive.read(i) for i in archive.infolist()}
    (record,) = (n for n in members if n.endswith(".dist-info/RECORD"))
    rows = edit(members[record].decode().splitlines())
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            if name != record:
                archive.writestr(name, data)
            elif rows:
                archive.writestr(name, "\n".join(rows) + "\n")
    republish(fake, target)


@pytest.mark.parametrize("wrong_first", [True, False])
def test_record_rows_that_contradict_each_other_are_refused_in_either_order(
    fake: FakeProject, wrong_first: bool
) -> None:
    """The same member twice in RECORD, a wrong hash and the right one: refused whichever
    comes first (the last row once won, so one order was accepted)."""
    fake.write()
    wrong = f"{DEP},sha256={'A' * 43},5"

    def twice(rows: list[str]) -> list[str]:
        right = next(r for r in rows if r.startswith(f"{DEP},"))
        at = rows.index(right)
        return [*rows[:at], *((wrong, right) if wrong_first else (right, wrong)), *rows[at + 1 :]]

    _rewrite_record(fake, LINUX, twice)
    refused(fake, LINUX, 4, "RECORD lists member", repr(DEP), "twice with different hashes")


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda rows: [r.split(",")[0] + ",," for r in rows], "its RECORD lists no hashes"),
        (lambda rows: [], "it has no RECORD"),
    ],
    ids=["no-hashes", "no-record"],
)
def test_a_wheel_whose_record_vouches_for_nothing_builds_under_its_pin_with_one_warning(
    fake: FakeProject,
    capsys: pytest.CaptureFixture[str],
    edit: Callable[[list[str]], list[str]],
    said: str,
) -> None:
    """Real vendors publish wheels whose RECORD has no hashes; some zips named .whl have none.
    The pin is the trust root: the build goes on, and says so once for that wheel (not once
    per member or per reading), never silently."""
    fake.write()
    _rewrite_record(fake, LINUX, edit)
    run_build(fake.options(targets=(LINUX,)), root=fake.root)
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if said in line]
    assert len(lines) == 1, out
    assert (
        lines[0].startswith("warning: ") and "pinned SHA-256 vouches for every member" in lines[0]
    )
    assert (fake.root / "dist" / "fakeproduct" / "1.2.3" / "manifest.json").is_file()


# -------------------------------------------------------------- malformed zip structures

_RECORD = "onnxruntime_fake-1.0.0.dist-info/RECORD"


def _bad_utf8_name(fake: FakeProject) -> None:
    _add_member(fake, "onnxruntime/capi/lib\u00e9.so", b"x")  # é: the UTF-8 flag is set
    patch_wheel(fake, LINUX, "lib\u00e9.so".encode(), b"lib\xff\xfe.so")


def _unknown_method(fake: FakeProject) -> None:
    set_member_field(fake.wheels[LINUX], DEP, "method", 99)
    republish(fake, LINUX)


def _corrupt_deflate(fake: FakeProject) -> None:
    wheel = fake.wheels[LINUX]
    raw = bytearray(wheel.read_bytes())
    raw[member_data_offset(wheel, DEP)] = 0xFF  # BTYPE 11: reserved, an invalid deflate block
    wheel.write_bytes(bytes(raw))
    republish(fake, LINUX)


def _version_too_new(fake: FakeProject) -> None:
    set_member_field(fake.wheels[LINUX], DEP, "version", 64)  # needs "zip 6.4" to extract
    republish(fake, LINUX)


def _record_bad_crc(fake: FakeProject) -> None:
    set_member_field(fake.wheels[LINUX], _RECORD, "crc", 0xDEADBEEF)
    republish(fake, LINUX)


MALFORMED: dict[str, tuple[Callable[[FakeProject], None], str]] = {
    # case: (make it, the member the message must name)
    # zipfile stops reading the central directory at these two, before the member's name is
    # known: the error names the archive and what zipfile found
    "name-not-utf8-despite-flag": (_bad_utf8_name, "codec can't decode"),
    "unknown-compression-method": (_unknown_method, DEP),
    "version-needed-too-new": (_version_too_new, "zip file version"),
    "corrupt-deflate-stream": (_corrupt_deflate, DEP),
    "record-fails-its-crc": (_record_bad_crc, "RECORD"),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_zip_is_a_clear_archive_error(fake: FakeProject, case: str) -> None:
    fake.write()
    setup, member = MALFORMED[case]
    setup(fake)
    refused(fake, LINUX, 6, member, fake.wheels[LINUX].name)


# ------------------------------------------------------------------------ corrupt binaries


def _pe_import_rva(data: bytearray, rva: int) -> bytearray:
    offset = 64 + 4 + 20 + 112 + 8  # DOS header, signature, COFF, PE32+ fields, export dir
    data[offset : offset + 4] = rva.to_bytes(4, "little")
    return data


def _elf_machine(data: bytearray, machine: int) -> bytearray:
    struct.pack_into("<H", data, 18, machine)
    return data


def _elf() -> bytearray:
    return bytearray(make_elf(soname="libdep.so.2", needed=("libm.so.6",)))


def _pe() -> bytearray:
    return bytearray(make_pe(imports=("kernel32.dll",)))


def _pe_machine(machine: int) -> bytes:
    data = _pe()
    struct.pack_into("<H", data, 64 + 4, machine)  # COFF Machine, after the PE signature
    return bytes(data)


CORRUPT: dict[str, tuple[str, str, bytes, int, str]] = {
    # case: (target, member, bytes, exit code, what the message says)
    "elf-truncated-header": (LINUX, DEP, bytes(_elf()[:40]), 7, "is not a readable ELF file"),
    "elf-truncated-program-headers": (LINUX, DEP, bytes(_elf()[:100]), 7, "not a readable ELF"),
    "elf-unknown-machine": (LINUX, DEP, bytes(_elf_machine(_elf(), 0xBEEF)), 8, "48879"),
    "elf-other-machine": (LINUX, DEP, bytes(_elf_machine(_elf(), 40)), 8, "EM_ARM"),
    "elf-not-elf": (LINUX, DEP, b"\x7fELF" + b"\xff" * 20, 7, "not a readable ELF file"),
    "pe-truncated-header": (WINDOWS, DLL, bytes(_pe()[:100]), 7, "not a readable PE file"),
    "pe-bogus-import-directory": (
        WINDOWS,
        DLL,
        bytes(_pe_import_rva(_pe(), 0x7FFF0000)),
        7,
        "import directory",
    ),
    "pe-unknown-machine": (WINDOWS, DLL, _pe_machine(0x1234), 7, "unknown PE machine type 0x1234"),
}


@pytest.mark.parametrize("case", CORRUPT)
def test_corrupt_binary_is_a_clear_error_naming_it(fake: FakeProject, case: str) -> None:
    target, member, data, code, says = CORRUPT[case]
    (fake.linux if target == LINUX else fake.windows)[member] = data
    if member == DEP:
        fake.linux["onnxruntime/capi/libdep.so"] = data  # keep the alias identical
    fake.write()
    message = refused(fake, target, code, says)
    assert member.rsplit("/", 1)[-1] in message
    assert "Traceback" not in message


def test_x32_library_is_refused_on_x86_64(fake: FakeProject) -> None:
    x32 = make_elf32(soname="libdep.so.2", needed=("libm.so.6",))
    fake.linux[DEP] = fake.linux["onnxruntime/capi/libdep.so"] = x32
    fake.write()
    refused(fake, LINUX, 8, "libdep.so.2")


def test_a_model_form_that_is_no_onnx_model_names_the_recipe_and_the_source(
    fake: FakeProject,
) -> None:
    """A model recipe whose form points at the wheel's LICENSE (pinned right): the message
    names the recipe, the form, the source and its member — not the copy the build made in
    its scratch directory, which is gone by the time anyone reads the message."""
    from tests.test_models import with_model

    with_model(fake, b"MIT License\n\nCopyright (c) Fake Corp\n")
    message = refused(
        fake,
        LINUX,
        7,
        "not a readable ONNX model",
        "form f32",
        "linux:onnxruntime/models/yolo.onnx",
        "component yolo",
        f"file {fake.root / 'recipes' / 'yolo.toml'}",
    )
    assert ".partial-" not in message and "Traceback" not in message, message
