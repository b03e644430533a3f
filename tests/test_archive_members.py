"""Archive members read directly, no build around them: ZipArchive, a tarball's member, a bare
file, and what they share (copy_hashing, sniff_archive, the RECORD digest).

Every refusal is asserted whole, as the user reads it (message, component, file and fix), and
the extracted file is gone after it; each size limit is crossed by one byte and met exactly.
"""

from __future__ import annotations

import base64
import bz2
import errno
import hashlib
import io
import lzma
import random
import stat
import tarfile
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from ortbundle._core.errors import ArchiveError, DiskError, IntegrityError, OrtbundleError
from ortbundle.fetch import archives
from ortbundle.fetch.archives import (
    BareFile,
    Extracted,
    Overflow,
    ZipArchive,
    copy_hashing,
    extract_member,
    open_source,
    sniff_archive,
)
from tests.helpers.faults import set_member_field

COMPONENT = "onnxruntime"
LABEL = "the wheel"
HOSTILE = "this archive is hostile or corrupt; it was not unpacked. Check the pin"
CORRUPT = "the archive is corrupt; delete the cache entry and fetch again"
BROKEN = "delete the cache entry and fetch again; if it persists the upstream file is broken"
TAR_BROKEN = "delete the cache entry and fetch again; if it persists, the upstream file is broken"
RECORD = "pkg-1.0.dist-info/RECORD"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record_hash(data: bytes) -> str:
    """A RECORD's digest field: urlsafe base64 without padding, as pip writes it."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")


def make_zip(
    path: Path,
    members: dict[str, bytes],
    *,
    record: dict[str, str] | None = None,
    method: int = zipfile.ZIP_DEFLATED,
) -> Path:
    """A zip of `members`; with `record`, a wheel whose RECORD lists those rows."""
    with zipfile.ZipFile(path, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        if record is not None:
            archive.writestr(RECORD, "".join(f"{n},{h},0\n" for n, h in record.items()))
    return path


def open_zip(path: Path, *, check_record: bool = True) -> ZipArchive:
    return ZipArchive(path, label=LABEL, component=COMPONENT, check_record=check_record)


def assert_error(
    error: OrtbundleError, message: str, path: Path, fix: str, *, component: str = COMPONENT
) -> None:
    assert (error.message, error.component, error.file, error.fix) == (
        message,
        component,
        str(path),
        fix,
    )


# --- zip: reading it, judging its members --------------------------------------------------


def test_a_zip_member_is_extracted_with_its_size_and_digest(tmp_path: Path) -> None:
    data = b"\x7fELF library bytes" * 100
    path = make_zip(tmp_path / "a.zip", {"lib/a.so": data, "lib/": b""})
    dest = tmp_path / "out.so"
    with open_zip(path) as archive:
        assert (archive.path, archive.label, archive.component) == (path, LABEL, COMPONENT)
        assert archive.is_wheel is False  # no RECORD
        assert list(archive.members) == ["lib/a.so"]  # a directory is no member
        member = archive.members["lib/a.so"]
        assert (member.name, member.basename, member.size, member.record_sha256) == (
            "lib/a.so",
            "a.so",
            len(data),
            None,
        )
        assert member.compressed_size < member.size
        assert member.crc == zipfile.ZipFile(path).getinfo("lib/a.so").CRC
        assert archive.extract("lib/a.so", dest) == Extracted(dest, len(data), sha256(data))
    assert dest.read_bytes() == data


def test_an_unreadable_zip_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "a.whl"
    path.write_bytes(b"PK\x03\x04 and then nothing a zip has")
    with pytest.raises(ArchiveError) as caught:
        open_zip(path)
    assert_error(
        caught.value,
        f"{LABEL} is not a readable zip archive (File is not a zip file)",
        path,
        BROKEN,
    )


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("../evil.so", "member name climbs out with '..'"),
        ("/etc/evil.so", "member name is an absolute path"),
        ("lib/a\x01.so", "member name contains a control character"),
    ],
)
def test_a_hostile_zip_member_name_is_refused(tmp_path: Path, name: str, why: str) -> None:
    path = make_zip(tmp_path / "a.zip", {"lib/ok.so": b"ok", name: b"x"})
    with pytest.raises(ArchiveError) as caught:
        open_zip(path)
    assert_error(caught.value, f"{LABEL}: {why}: {name!r}", path, HOSTILE)


def test_a_zip_member_named_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.zip"
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w") as archive:
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate it writes
        archive.writestr("lib/a.so", b"one")
        archive.writestr("lib/a.so", b"two")
    with pytest.raises(ArchiveError) as caught:
        open_zip(path)
    assert_error(caught.value, f"{LABEL}: member name appears twice: 'lib/a.so'", path, HOSTILE)


def test_a_zip_symlink_is_refused_even_where_no_glob_takes_it(tmp_path: Path) -> None:
    path = tmp_path / "a.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("lib/a.so", b"a")
        link = zipfile.ZipInfo("docs/link")
        link.create_system = 3
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(link, "/etc/passwd")
    with pytest.raises(ArchiveError) as caught:
        open_zip(path)
    assert_error(caught.value, f"{LABEL}: member is a symlink: 'docs/link'", path, HOSTILE)


def test_asking_for_a_member_the_zip_lacks_is_refused(tmp_path: Path) -> None:
    path = make_zip(tmp_path / "a.zip", {"lib/a.so": b"a"})
    with open_zip(path) as archive, pytest.raises(ArchiveError) as caught:
        archive.extract("lib/b.so", tmp_path / "out")
    assert_error(
        caught.value,
        f"{LABEL} has no member 'lib/b.so'",
        path,
        "check the member path in the recipe against the archive's listing",
    )
    assert not (tmp_path / "out").exists()


def test_a_member_over_the_size_limit_is_refused_and_one_at_it_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(archives, "MAX_MEMBER_SIZE", 10)
    path = make_zip(
        tmp_path / "a.zip", {"at.so": b"x" * 10, "over.so": b"x" * 11}, method=zipfile.ZIP_STORED
    )
    with open_zip(path) as archive:
        assert archive.extract("at.so", tmp_path / "at").size == 10
        with pytest.raises(ArchiveError) as caught:
            archive.extract("over.so", tmp_path / "over")
    assert_error(
        caught.value,
        f"{LABEL}: member inflates to 11 bytes from 11 (zip bomb?): 'over.so'",
        path,
        HOSTILE,
    )
    assert not (tmp_path / "over").exists()


def test_a_member_over_the_ratio_is_refused_and_a_small_one_is_not(tmp_path: Path) -> None:
    """Zeros deflate about a thousandfold: over 1 MiB that is a bomb, at 1 MiB it is not."""
    path = make_zip(tmp_path / "a.zip", {"at.so": bytes(1 << 20), "over.so": bytes((1 << 20) + 1)})
    with open_zip(path) as archive:
        assert archive.extract("at.so", tmp_path / "at").size == 1 << 20
        compressed = archive.members["over.so"].compressed_size
        with pytest.raises(ArchiveError) as caught:
            archive.extract("over.so", tmp_path / "over")
    assert caught.value.message == (
        f"{LABEL}: member inflates to {(1 << 20) + 1} bytes from {compressed} (zip bomb?): "
        "'over.so'"
    )
    assert not (tmp_path / "over").exists()


def test_a_member_longer_than_it_declares_is_cut_there_and_refused(tmp_path: Path) -> None:
    """zipfile reads no byte past the declared size, so the lie shows as a CRC mismatch: the
    member is refused as unreadable with no more than its declared size written."""
    path = make_zip(tmp_path / "a.zip", {"a.so": b"y" * 4096})
    set_member_field(path, "a.so", "usize", 100)
    dest = tmp_path / "out"
    with open_zip(path) as archive, pytest.raises(ArchiveError) as caught:
        archive.extract("a.so", dest)
    assert_error(
        caught.value,
        f"{LABEL}: member 'a.so' cannot be read (Bad CRC-32 for file 'a.so')",
        path,
        CORRUPT,
    )
    assert not dest.exists()


def test_a_member_whose_bytes_are_corrupt_is_refused(tmp_path: Path) -> None:
    data = b"library bytes " * 64
    path = make_zip(tmp_path / "a.zip", {"a.so": data}, method=zipfile.ZIP_STORED)
    raw = bytearray(path.read_bytes())
    raw[raw.index(data) + 5] ^= 0xFF
    path.write_bytes(bytes(raw))
    dest = tmp_path / "out"
    with open_zip(path) as archive, pytest.raises(ArchiveError) as caught:
        archive.extract("a.so", dest)
    assert_error(
        caught.value,
        f"{LABEL}: member 'a.so' cannot be read (Bad CRC-32 for file 'a.so')",
        path,
        CORRUPT,
    )
    assert not dest.exists()


def test_a_full_disk_while_extracting_is_the_disk_s_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The close of the extracted copy meets ENOSPC: a DiskError naming it, not a corrupt zip."""
    path = make_zip(tmp_path / "a.zip", {"a.so": b"abc"})
    dest = tmp_path / "out"

    def full(stream: io.BufferedReader, out: io.BufferedWriter, *, limit: int) -> tuple[int, str]:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(archives, "copy_hashing", full)
    with open_zip(path) as archive, pytest.raises(DiskError) as caught:
        archive.extract("a.so", dest)
    assert caught.value.message.startswith("could not write an extracted archive member: ")
    assert caught.value.file == str(dest)
    assert not dest.exists()


def test_an_extracted_file_that_cannot_be_created_is_the_disk_s_error(tmp_path: Path) -> None:
    path = make_zip(tmp_path / "a.zip", {"a.so": b"abc"})
    dest = tmp_path / "no such directory" / "out"
    with open_zip(path) as archive, pytest.raises(DiskError) as caught:
        archive.extract("a.so", dest)
    assert caught.value.message.startswith("could not write an extracted archive member: ")
    assert caught.value.file == str(dest)
    tar = make_tar(tmp_path / "a.tar", [("a", b"abc")])
    with pytest.raises(DiskError) as caught:
        extract(tar, "a", dest)
    assert caught.value.message.startswith("could not write an extracted archive member: ")
    assert caught.value.file == str(dest)


# --- zip: a wheel's RECORD -------------------------------------------------------------------


def test_a_wheel_member_is_checked_against_its_record(tmp_path: Path) -> None:
    data = b"the library"
    path = make_zip(
        tmp_path / "a.whl",
        {"pkg/a.so": data, "pkg/b.so": b"b"},
        record={"pkg/a.so": record_hash(data)},
    )
    with open_zip(path) as archive:
        assert archive.is_wheel
        assert archive.members["pkg/a.so"].record_sha256 == sha256(data)
        assert archive.members["pkg/a.so"].crc == zipfile.ZipFile(path).getinfo("pkg/a.so").CRC
        assert archive.members["pkg/b.so"].record_sha256 is None  # no row
        assert archive.extract("pkg/a.so", tmp_path / "a") == Extracted(
            tmp_path / "a", len(data), sha256(data)
        )
        with pytest.raises(IntegrityError) as caught:
            archive.extract("pkg/b.so", tmp_path / "b")
    assert_error(
        caught.value,
        f"{LABEL}: member 'pkg/b.so' has no sha256 in the wheel's RECORD",
        path,
        "the wheel is malformed; do not ship it",
    )
    assert not (tmp_path / "b").exists()


def test_a_wheel_member_disagreeing_with_its_record_is_refused_and_removed(
    tmp_path: Path,
) -> None:
    path = make_zip(
        tmp_path / "a.whl", {"pkg/a.so": b"new"}, record={"pkg/a.so": record_hash(b"old")}
    )
    dest = tmp_path / "a"
    with open_zip(path) as archive, pytest.raises(IntegrityError) as caught:
        archive.extract("pkg/a.so", dest)
    assert_error(
        caught.value,
        f"{LABEL}: member 'pkg/a.so' has sha256 {sha256(b'new')}, its RECORD says {sha256(b'old')}",
        path,
        "the wheel was altered after it was built; do not ship it",
    )
    assert not dest.exists()


def test_a_stale_record_is_not_read_when_told(tmp_path: Path) -> None:
    path = make_zip(
        tmp_path / "a.whl", {"pkg/a.so": b"new"}, record={"pkg/a.so": record_hash(b"old")}
    )
    with open_zip(path, check_record=False) as archive:
        assert not archive.is_wheel
        assert archive.members["pkg/a.so"].record_sha256 is None
        assert archive.extract("pkg/a.so", tmp_path / "a").sha256 == sha256(b"new")


def test_record_rows_that_name_nothing_or_carry_no_digest_are_skipped(tmp_path: Path) -> None:
    """A row for another file, a blank row, a row of one field or an empty digest is passed
    over, and the rows after it are still read; two fields are enough; bytes that are not
    UTF-8 in another row do not stop it."""
    path = tmp_path / "a.whl"
    rows = (
        (
            f"pkg/gone.so,{record_hash(b'x')},1\n\npkg/a.so\npkg/b.so,,\n"
            f"pkg/c.so,{record_hash(b'c')}\n"
        ).encode()
        + b"pkg/\xff\xfe.so,sha256=x,1\n"
        + f"pkg/d.so,{record_hash(b'd')},1\n".encode()
    )
    with zipfile.ZipFile(path, "w") as archive:
        for name in ("a", "b", "c", "d"):
            archive.writestr(f"pkg/{name}.so", name.encode())
        archive.writestr(RECORD, rows)
    with open_zip(path) as archive:
        assert [archive.members[f"pkg/{n}.so"].record_sha256 for n in "abcd"] == [
            None,
            None,
            sha256(b"c"),
            sha256(b"d"),
        ]


@pytest.mark.parametrize(
    ("value", "digest"),
    [
        (record_hash(b"x"), sha256(b"x")),
        (record_hash(b"x") + "=", sha256(b"x")),  # padded: still the same digest
        ("sha256=" + base64.urlsafe_b64encode(b"\xff\xfe").decode(), "fffe"),  # '=' padding kept
        ("md5=" + record_hash(b"x").split("=", 1)[1], None),
        ("sha256=", None),
        ("sha256=a", None),  # not base64
        ("", None),
    ],
)
def test_a_record_digest_field_is_read_as_sha256_only(value: str, digest: str | None) -> None:
    assert archives._record_hash(value) == digest


def test_a_record_over_the_size_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A RECORD of exactly the limit is read to its last byte (the digest ends it); one byte
    more is refused."""
    monkeypatch.setattr(archives, "MAX_RECORD_SIZE", 100)
    row = f"pkg/a.so,{record_hash(b'a')}"
    at = make_zip(tmp_path / "at.whl", {"pkg/a.so": b"a"}, method=zipfile.ZIP_STORED)
    with zipfile.ZipFile(at, "a", zipfile.ZIP_STORED) as archive:
        archive.writestr(RECORD, "#" * (99 - len(row)) + "\n" + row)
    assert open_zip(at).members["pkg/a.so"].record_sha256 == sha256(b"a")
    over = make_zip(tmp_path / "over.whl", {"pkg/a.so": b"a"}, method=zipfile.ZIP_STORED)
    with zipfile.ZipFile(over, "a", zipfile.ZIP_STORED) as archive:
        archive.writestr(RECORD, "#" * (100 - len(row)) + "\n" + row)
    with pytest.raises(ArchiveError) as caught:
        open_zip(over)
    assert_error(
        caught.value,
        f"{LABEL}: RECORD inflates to 101 bytes from 101 (zip bomb?): {RECORD!r}",
        over,
        HOSTILE,
    )


def test_a_record_csv_cannot_parse_is_refused_not_a_traceback(tmp_path: Path) -> None:
    """csv refuses a field over 128 KiB: that is a corrupt RECORD, said as one."""
    path = make_zip(tmp_path / "a.whl", {"pkg/a.so": b"a"})
    with zipfile.ZipFile(path, "a", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(RECORD, f"pkg/a.so,{record_hash(b'a')},0\n" + "#" * (1 << 18))
    with pytest.raises(ArchiveError) as caught:
        open_zip(path)
    assert_error(
        caught.value,
        f"{LABEL}: its RECORD cannot be read (field larger than field limit (131072))",
        path,
        CORRUPT,
    )


def _noise(size: int) -> bytes:
    """Bytes deflate cannot shrink (a fixed seed: the same every run)."""
    return random.Random(size).randbytes(size)


def test_a_large_member_or_record_that_does_not_compress_is_no_bomb(tmp_path: Path) -> None:
    big = _noise((1 << 20) + 10)
    path = make_zip(tmp_path / "a.whl", {"pkg/a.so": big}, method=zipfile.ZIP_STORED)
    record = f"pkg/a.so,{record_hash(big)},0\n" + "#\n" * (1 << 19)
    with zipfile.ZipFile(path, "a", zipfile.ZIP_STORED) as archive:
        archive.writestr(RECORD, record)
    with open_zip(path) as archive:
        assert archive.extract("pkg/a.so", tmp_path / "a").size == len(big)


def test_a_member_exactly_at_the_ratio_is_no_bomb(tmp_path: Path) -> None:
    """Declared 250 times its stored size (over a mebibyte): not refused as a bomb; zipfile
    then reads the bytes stored, whose CRC holds."""
    path = make_zip(tmp_path / "a.zip", {"a.so": _noise(4200)}, method=zipfile.ZIP_STORED)
    set_member_field(path, "a.so", "usize", 250 * 4200)
    with open_zip(path) as archive:
        assert archive.extract("a.so", tmp_path / "a").size == 4200


def test_a_record_exactly_at_the_ratio_is_no_bomb(tmp_path: Path) -> None:
    path = make_zip(tmp_path / "a.whl", {"pkg/a.so": b"a"}, method=zipfile.ZIP_STORED)
    with zipfile.ZipFile(path, "a", zipfile.ZIP_STORED) as archive:
        archive.writestr(RECORD, _noise(4200).hex()[:4200])
    set_member_field(path, RECORD, "usize", 250 * 4200)
    assert open_zip(path).record_note == "its RECORD lists no hashes"  # read, not refused


def test_a_record_over_the_ratio_is_refused_and_one_at_a_mebibyte_is_not(tmp_path: Path) -> None:
    line = f"pkg/a.so,{record_hash(b'a')},0\n"
    at = make_zip(tmp_path / "at.whl", {"pkg/a.so": b"a"})
    with zipfile.ZipFile(at, "a", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(RECORD, line + "\n" * ((1 << 20) - len(line)))
    assert open_zip(at).is_wheel
    over = make_zip(tmp_path / "over.whl", {"pkg/a.so": b"a"})
    with zipfile.ZipFile(over, "a", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(RECORD, line + "\n" * ((1 << 20) + 1 - len(line)))
    with pytest.raises(ArchiveError) as caught:
        open_zip(over)
    compressed = zipfile.ZipFile(over).getinfo(RECORD).compress_size
    assert caught.value.message == (
        f"{LABEL}: RECORD inflates to {(1 << 20) + 1} bytes from {compressed} (zip bomb?): "
        f"{RECORD!r}"
    )


def test_a_record_that_cannot_be_read_is_refused(tmp_path: Path) -> None:
    line = f"pkg/a.so,{record_hash(b'a')},0\n"
    path = make_zip(tmp_path / "a.whl", {"pkg/a.so": b"a"}, method=zipfile.ZIP_STORED)
    with zipfile.ZipFile(path, "a", zipfile.ZIP_STORED) as archive:
        archive.writestr(RECORD, line)
    raw = bytearray(path.read_bytes())
    raw[raw.rindex(line.encode()) + 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(ArchiveError) as caught:
        open_zip(path)
    assert_error(
        caught.value,
        f"{LABEL}: its RECORD cannot be read (Bad CRC-32 for file {RECORD!r})",
        path,
        CORRUPT,
    )


# --- a tarball's member (nested sources) -----------------------------------------------------


def make_tar(
    path: Path, entries: list[tarfile.TarInfo | tuple[str, bytes]], mode: str = "w"
) -> Path:
    with tarfile.open(path, mode) as tar:  # type: ignore[call-overload]  # mode: a str here
        for entry in entries:
            if isinstance(entry, tarfile.TarInfo):
                tar.addfile(entry)
            else:
                name, data = entry
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def special(name: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = "package/other"
    return info


def extract(path: Path, member: str, dest: Path) -> Extracted:
    return extract_member(path, member, dest, label=LABEL, component=COMPONENT)


def tar_refused(path: Path, member: str, dest: Path) -> ArchiveError:
    with pytest.raises(ArchiveError) as caught:
        extract(path, member, dest)
    assert not dest.exists()
    return caught.value


@pytest.mark.parametrize("mode", ["w", "w:gz", "w:bz2", "w:xz"])
def test_a_tar_member_is_extracted_with_its_size_and_digest(tmp_path: Path, mode: str) -> None:
    data = b"an AAR inside an npm tarball"
    path = make_tar(
        tmp_path / "a.tgz", [("./package/other", b"o"), ("./package/a.aar", data)], mode
    )
    dest = tmp_path / "a.aar"
    assert extract(path, "package/a.aar", dest) == Extracted(dest, len(data), sha256(data))
    assert dest.read_bytes() == data
    plain = make_tar(tmp_path / "b.tar", [("package/a.aar", data)])
    assert extract(plain, "package/a.aar", tmp_path / "b").sha256 == sha256(data)


def test_a_hostile_tar_member_name_is_refused_wherever_it_sits(tmp_path: Path) -> None:
    path = make_tar(tmp_path / "a.tar", [("package/a.aar", b"a"), ("../evil", b"x")])
    error = tar_refused(path, "package/a.aar", tmp_path / "out")
    assert_error(error, f"{LABEL}: member name climbs out with '..': '../evil'", path, HOSTILE)


def test_tar_members_over_the_total_are_refused_and_at_it_are_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(archives, "MAX_TAR_TOTAL", 20)
    at = make_tar(tmp_path / "at.tar", [("empty", b""), ("a", b"x" * 10), ("b", b"y" * 10)])
    assert extract(at, "b", tmp_path / "at").size == 10
    over = make_tar(tmp_path / "over.tar", [("a", b"x" * 10), ("b", b"y" * 11)])
    error = tar_refused(over, "a", tmp_path / "over")  # refused after `a` was written
    assert_error(
        error, f"{LABEL}: members inflate past any sane total (tar bomb?): 'b'", over, HOSTILE
    )


def test_a_tar_member_named_twice_is_refused(tmp_path: Path) -> None:
    path = make_tar(tmp_path / "a.tar", [("./a", b"one"), ("a", b"two")])
    error = tar_refused(path, "a", tmp_path / "out")
    assert_error(error, f"{LABEL}: member name appears twice: 'a'", path, HOSTILE)


@pytest.mark.parametrize(
    ("kind", "what"),
    [
        (tarfile.SYMTYPE, "a symlink"),
        (tarfile.LNKTYPE, "a hard link"),
        (tarfile.FIFOTYPE, "not a regular file"),
        (tarfile.DIRTYPE, "not a regular file"),
    ],
)
def test_a_tar_member_that_is_no_regular_file_is_refused(
    tmp_path: Path, kind: bytes, what: str
) -> None:
    path = make_tar(tmp_path / "a.tar", [("package/other", b"o"), special("package/a", kind)])
    error = tar_refused(path, "package/a", tmp_path / "out")
    assert_error(error, f"{LABEL}: member is {what}: 'package/a'", path, HOSTILE)


def test_a_tar_member_over_the_size_limit_is_refused_and_one_at_it_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(archives, "MAX_MEMBER_SIZE", 10)
    path = make_tar(tmp_path / "a.tar", [("at", b"x" * 10), ("over", b"x" * 11)])
    assert extract(path, "at", tmp_path / "at").size == 10
    error = tar_refused(path, "over", tmp_path / "over")
    assert_error(error, f"{LABEL}: member is 11 bytes: 'over'", path, HOSTILE)


def test_a_truncated_tarball_is_refused_as_unreadable(tmp_path: Path) -> None:
    data = b"z" * 4096
    whole = make_tar(tmp_path / "whole.tar", [("a", data)]).read_bytes()
    path = tmp_path / "cut.tar"
    path.write_bytes(whole[: 512 + 1000])  # the header and part of the body
    error = tar_refused(path, "a", tmp_path / "out")
    assert error.message.startswith(f"{LABEL} is not a readable tar archive (ReadError: ")
    assert_error(error, error.message, path, TAR_BROKEN)


def test_a_corrupt_compressed_tarball_is_refused_as_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "a.tgz"
    path.write_bytes(b"\x1f\x8b" + b"not gzip at all" * 10)
    error = tar_refused(path, "a", tmp_path / "out")
    assert error.message.startswith(f"{LABEL} is not a readable tar archive (ReadError: ")
    assert_error(error, error.message, path, TAR_BROKEN)


def test_asking_for_a_member_the_tarball_lacks_is_refused(tmp_path: Path) -> None:
    path = make_tar(tmp_path / "a.tar", [("package/a.aar", b"a")])
    error = tar_refused(path, "package/b.aar", tmp_path / "out")
    assert_error(
        error,
        f"{LABEL} has no member 'package/b.aar'",
        path,
        "check the nested member path in the recipe against the archive's listing",
    )


def test_a_nested_member_of_a_zip_is_read_from_the_zip(tmp_path: Path) -> None:
    path = make_zip(tmp_path / "a.aar", {"jni/arm64-v8a/a.so": b"so"})
    dest = tmp_path / "out"
    assert extract(path, "jni/arm64-v8a/a.so", dest) == Extracted(dest, 2, sha256(b"so"))
    with pytest.raises(ArchiveError) as caught:
        extract(path, "jni/x86/a.so", tmp_path / "other")
    assert_error(
        caught.value,
        f"{LABEL} has no member 'jni/x86/a.so'",
        path,
        "check the member path in the recipe against the archive's listing",
    )


def test_a_nested_member_of_neither_a_zip_nor_a_tarball_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.bin"
    path.write_bytes(b"plain bytes")
    with pytest.raises(ArchiveError) as caught:
        extract(path, "x", tmp_path / "out")
    assert_error(
        caught.value,
        f"{LABEL} is neither a zip nor a tar archive, so 'x' cannot be read from it",
        path,
        "check the recipe's nested member path and the pin of the outer archive",
    )


# --- what kind of file it is; a bare file ----------------------------------------------------


def _written(compress: Callable[[bytes], bytes]) -> Callable[[Path], object]:
    return lambda path: path.write_bytes(compress(b"data"))


@pytest.mark.parametrize(
    ("write", "kind"),
    [
        (lambda p: make_zip(p, {"a": b"a"}), "zip"),
        (lambda p: zipfile.ZipFile(p, "w").close(), "zip"),  # an empty zip: the end record only
        (lambda p: make_tar(p, [("a", b"a")], "w:gz"), "tar"),
        (_written(bz2.compress), "tar"),
        (_written(lzma.compress), "tar"),
        (lambda p: make_tar(p, [("a", b"a")]), "tar"),
        (lambda p: p.write_bytes(b"PK\x01\x02" + bytes(300)), None),
        (lambda p: p.write_bytes(b"\x1f\x8c" + bytes(300)), None),
        (lambda p: p.write_bytes(b"BZ" + bytes(300)), None),
        (lambda p: p.write_bytes(b"\xfd7zXZ\x01" + bytes(300)), None),
        (lambda p: p.write_bytes(bytes(257) + b"ustaR"), None),
        (lambda p: p.write_bytes(b""), None),
    ],
)
def test_an_archive_is_told_by_its_first_bytes(
    tmp_path: Path, write: Callable[[Path], object], kind: str | None
) -> None:
    path = tmp_path / "file"
    write(path)
    assert sniff_archive(path) == kind


def test_a_source_is_a_zip_or_the_file_itself(tmp_path: Path) -> None:
    zipped = make_zip(tmp_path / "a.whl", {"a": b"a"})
    reader = open_source(zipped, label=LABEL, component=COMPONENT)
    assert isinstance(reader, ZipArchive)
    assert (reader.path, reader.label, reader.component) == (zipped, LABEL, COMPONENT)
    reader.close()
    model = tmp_path / "model.onnx"
    model.write_bytes(b"onnx bytes")
    bare = open_source(model, label="the model", component="models")
    assert isinstance(bare, BareFile)
    assert (bare.path, bare.label, bare.component) == (model, "the model", "models")
    dest = tmp_path / "out"
    assert bare.extract("", dest) == Extracted(dest, 10, sha256(b"onnx bytes"))
    assert dest.read_bytes() == b"onnx bytes"
    bare.close()
    with pytest.raises(ArchiveError) as caught:
        bare.extract("model.onnx", tmp_path / "other")
    assert_error(
        caught.value,
        "the model is not an archive, so it has no member 'model.onnx'",
        model,
        "leave the member out for a source that is the file itself",
        component="models",
    )
    assert not (tmp_path / "other").exists()


# --- copy_hashing -----------------------------------------------------------------------------


def test_copy_hashing_counts_every_chunk_and_stops_one_past_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(archives, "CHUNK", 4)
    out = io.BytesIO()
    assert copy_hashing(io.BytesIO(b"0123456789"), out, limit=10) == (10, sha256(b"0123456789"))
    assert out.getvalue() == b"0123456789"
    with pytest.raises(Overflow) as caught:
        copy_hashing(io.BytesIO(b"0123456789"), io.BytesIO(), limit=9)
    assert caught.value.args == (10,)  # the count when the third chunk crossed it


class _Full(io.BytesIO):
    """An output on a full disk."""

    name = "/media/full/out.so"

    def write(self, data: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_write_the_disk_refuses_is_a_disk_error_naming_the_file() -> None:
    with pytest.raises(DiskError) as caught:
        copy_hashing(io.BytesIO(b"abc"), _Full())
    assert caught.value.message.startswith("could not write an extracted file: ")
    assert caught.value.file == "/media/full/out.so"


class _FullOnFlush(io.BytesIO):
    """An output whose writes are buffered and whose flush meets the full disk."""

    name = "/media/full/flushed.so"

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")


def test_a_flush_the_disk_refuses_names_the_file_too() -> None:
    with pytest.raises(DiskError) as caught:
        copy_hashing(io.BytesIO(b"abc"), _FullOnFlush())
    assert caught.value.message.startswith("could not write an extracted file: ")
    assert caught.value.file == "/media/full/flushed.so"
