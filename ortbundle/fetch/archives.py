"""Read archive members in place: names are data, sizes are bounded, wheels are RECORD-checked.

An archive is opened once; its member names are validated up front (no `..`, absolute paths,
drive letters, NUL bytes or duplicates), so a hostile archive is refused before anything is
written. Extraction streams a member to a file while hashing it, and refuses a member that
inflates past its declared size, past a sane ratio, or to bytes its wheel RECORD disagrees with.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import errno
import hashlib
import io
import os
import stat
import struct
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import IO, TYPE_CHECKING, NoReturn, Protocol

from ortbundle._core.errors import ArchiveError, DiskError, IntegrityError
from ortbundle._core.fsio import check_member_name
from ortbundle._core.oserrors import FILESYSTEM_ERRNOS, disk_error, writing
from ortbundle._core.progress import notice_once
from ortbundle.fetch.pe_unsigned import unsigned_sha256s

if TYPE_CHECKING:  # tarfile itself is imported where a tarball is read
    import tarfile

CHUNK = 1 << 20
MAX_MEMBER_SIZE = 4 << 30  # 4 GiB: far above any runtime library
MAX_RATIO = 250  # inflated/compressed; real libraries measure under 10


@dataclass(frozen=True)
class Member:
    name: str
    size: int
    compressed_size: int
    crc: int
    record_sha256: str | None  # hex, from the wheel's RECORD

    @property
    def basename(self) -> str:
        return PurePosixPath(self.name).name


@dataclass(frozen=True)
class Extracted:
    path: Path
    size: int
    sha256: str


class Overflow(Exception):
    """More bytes than the caller allowed (a zip bomb, a file larger than pinned)."""


def copy_hashing(stream: IO[bytes], out: IO[bytes], *, limit: int | None = None) -> tuple[int, str]:
    """Copy `stream` to `out` while hashing it: (bytes written, SHA-256 hex). Raises Overflow
    before writing past `limit` bytes."""
    digest = hashlib.sha256()
    written = 0
    while chunk := stream.read(CHUNK):
        written += len(chunk)
        if limit is not None and written > limit:
            raise Overflow(written)
        with _writing_to(out):
            out.write(chunk)
        digest.update(chunk)
    with _writing_to(out):
        out.flush()  # a full disk shows here, not in a close nobody checks
    return written, digest.hexdigest()


def _writing_to(out: IO[bytes]) -> contextlib.AbstractContextManager[None]:
    """A write error on `out` is the disk's, never the archive's (a caller's ArchiveError
    handler must not call a full disk a corrupt archive)."""
    name = getattr(out, "name", None)
    return writing(
        "an extracted file", Path(os.fsdecode(name)) if isinstance(name, str | bytes) else Path()
    )


# zip "version made by" host systems whose high 16 bits of external_attr are st_mode, which an
# unzip there restores (a link, a device): Unix (3) and macOS, which Info-ZIP records as OS X (19)
UNIX_HOSTS = frozenset({3, 19})
_SPECIAL = (
    (stat.S_ISLNK, "a symlink"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def special_mode(info: zipfile.ZipInfo) -> str | None:
    """What a zip member is when its Unix mode says it is no regular file or directory (a
    link an unzip would create, a device, a FIFO, a socket), or None."""
    if info.create_system not in UNIX_HOSTS:
        return None
    mode = info.external_attr >> 16
    return next((what for test, what in _SPECIAL if test(mode)), None)


def _record_hash(value: str) -> str | None:
    algo, _, encoded = value.partition("=")
    if algo != "sha256" or not encoded:
        return None
    padded = encoded + "=" * (-len(encoded) % 4)
    try:
        return base64.urlsafe_b64decode(padded).hex()
    except ValueError:
        return None


# What writing the extracted copy can fail with and reading a zip cannot: a disk error.
_WRITE_ERRNOS = frozenset((errno.ENOSPC, errno.EDQUOT, errno.EROFS))
# Everything zipfile and zlib raise on a corrupt or unsupported archive: each becomes an
# ArchiveError naming the archive, never a traceback.
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    OSError,
    ValueError,  # includes UnicodeDecodeError (a name flagged UTF-8 that is not)
    NotImplementedError,  # unknown compression method, "version needed" too new
    struct.error,
    KeyError,
)
MAX_RECORD_SIZE = 64 << 20  # the largest real RECORD seen is ~200 KiB


class ZipArchive:
    """A wheel, an AAR or any zip, read in place."""

    def __init__(
        self,
        path: Path,
        *,
        label: str,
        component: str | None = None,
        check_record: bool = True,
    ) -> None:
        """`check_record=False` is for a wheel whose RECORD is known to be stale (files signed
        after it was written); the wheel's own pin still vouches for every byte."""
        self.path = path
        self.label = label
        self.component = component
        try:
            self._zip = zipfile.ZipFile(path)
            every = self._zip.infolist()
            infos = [i for i in every if not i.is_dir()]
        except _ZIP_ERRORS as exc:
            raise ArchiveError(
                f"{label} is not a readable zip archive ({exc})",
                component=component,
                file=str(path),
                fix="delete the cache entry and fetch again; if it persists the upstream file is "
                "broken",
            ) from None
        for info in every:  # a link is refused wherever it sits, taken by a glob or not
            special = special_mode(info)
            if special:
                self._refuse(info.orig_filename, f"member is {special}")
        self.members: dict[str, Member] = {}
        for info in infos:
            # zipfile cuts names at a NUL and turns backslashes into slashes: judge the original
            problem = check_member_name(info.orig_filename) or check_member_name(info.filename)
            if problem:
                self._refuse(info.orig_filename, f"member name {problem}")
            if info.filename in self.members:
                self._refuse(info.filename, "member name appears twice")
            self.members[info.filename] = Member(
                name=info.filename,
                size=info.file_size,
                compressed_size=info.compress_size,
                crc=info.CRC,
                record_sha256=None,
            )
        # The wheel's pin (its SHA-256, checked when it was fetched) is the trust root; RECORD
        # is a consistency check of its members. A wheel without one, or whose RECORD lists no
        # hashes (some vendors publish such), is said once and read under its pin alone.
        self.is_wheel = False
        self.record_note: str | None = None
        self.signed_after_record: list[str] = []  # members signed after RECORD was written
        record_names = [n for n in self.members if n.endswith(".dist-info/RECORD")]
        if record_names and check_record:
            self.is_wheel = self._apply_record(record_names)
            if not self.is_wheel:
                self.record_note = "its RECORD lists no hashes"
        elif check_record and label.endswith(".whl"):
            self.record_note = "it has no RECORD"
        if self.record_note is not None:
            notice_once(
                f"record {path}",
                f"warning: {label}: {self.record_note}; the wheel's pinned SHA-256 vouches "
                "for every member",
            )

    def _signed_after_record(self, name: str) -> None:
        """A member that is its recorded file with an Authenticode signature appended: the
        vendor signed it after writing RECORD. It ships as signed (its own sha256 is what the
        manifest records); said once per archive."""
        self.signed_after_record.append(name)
        notice_once(
            f"signed {self.path}",
            f"note: {self.label}: {name!r} and any like it were Authenticode-signed after the "
            "wheel's RECORD was written; with the signature removed each is the recorded file",
        )

    def _refuse(self, member: str, why: str) -> NoReturn:
        raise ArchiveError(
            f"{self.label}: {why}: {member!r}",
            component=self.component,
            file=str(self.path),
            fix="this archive is hostile or corrupt; it was not unpacked. Check the pin",
        )

    def _apply_record(self, record_names: list[str]) -> bool:
        """Read every RECORD's hash of each member; two rows that disagree about one member are
        refused, whichever comes first. Whether any member has a hash to be checked against."""
        recorded: dict[str, tuple[str | None, str]] = {}  # member: (digest, the row's field)
        for record_name in record_names:
            for row in self._record_rows(record_name):
                if not row or row[0] not in self.members:
                    continue
                field = row[1] if len(row) > 1 else ""
                digest = _record_hash(field)
                earlier = recorded.setdefault(row[0], (digest, field))
                if earlier[0] != digest:
                    raise IntegrityError(
                        f"{self.label}: its RECORD lists member {row[0]!r} twice with different "
                        f"hashes ({earlier[1] or 'none'} and {field or 'none'})",
                        component=self.component,
                        file=str(self.path),
                        fix="the wheel's RECORD contradicts itself; do not ship it",
                    )
        for name, (digest, _) in recorded.items():
            old = self.members[name]
            self.members[name] = Member(
                old.name, old.size, old.compressed_size, old.crc, record_sha256=digest
            )
        return any(digest is not None for digest, _ in recorded.values())

    def _record_rows(self, record_name: str) -> list[list[str]]:
        member = self.members[record_name]
        if member.size > MAX_RECORD_SIZE or (
            member.size > (1 << 20) and member.size > MAX_RATIO * max(member.compressed_size, 1)
        ):
            self._refuse(
                record_name,
                f"RECORD inflates to {member.size} bytes from {member.compressed_size} (zip bomb?)",
            )
        try:
            with self._zip.open(record_name) as stream:
                raw = stream.read(MAX_RECORD_SIZE + 1)
            if len(raw) > MAX_RECORD_SIZE:
                self._refuse(record_name, "RECORD inflates past any sane size (zip bomb?)")
            # csv.Error: a field past csv's limit (128 KiB), a NUL: no RECORD a tool writes
            rows = list(csv.reader(io.StringIO(raw.decode("utf-8", errors="replace"))))
        except (*_ZIP_ERRORS, csv.Error) as exc:
            raise ArchiveError(
                f"{self.label}: its RECORD cannot be read ({exc})",
                component=self.component,
                file=str(self.path),
                fix="the archive is corrupt; delete the cache entry and fetch again",
            ) from None
        return rows

    def __enter__(self) -> ZipArchive:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._zip.close()

    def extract(self, name: str, dest: Path) -> Extracted:
        """Stream one member to `dest`, hashing as it goes; verify against RECORD."""
        member = self.members.get(name)
        if member is None:
            raise ArchiveError(
                f"{self.label} has no member {name!r}",
                component=self.component,
                file=str(self.path),
                fix="check the member path in the recipe against the archive's listing",
            )
        if member.size > MAX_MEMBER_SIZE or (
            member.size > (1 << 20) and member.size > MAX_RATIO * max(member.compressed_size, 1)
        ):
            self._refuse(
                name,
                f"member inflates to {member.size} bytes from {member.compressed_size} (zip bomb?)",
            )
        if self.is_wheel and member.record_sha256 is None:
            raise IntegrityError(
                f"{self.label}: member {name!r} has no sha256 in the wheel's RECORD",
                component=self.component,
                file=str(self.path),
                fix="the wheel is malformed; do not ship it",
            )
        with writing("an extracted archive member", dest):
            out = dest.open("wb")
        try:
            with out, self._zip.open(name) as stream:
                written, actual = copy_hashing(stream, out, limit=member.size)
        except Overflow:
            dest.unlink(missing_ok=True)
            self._refuse(name, "member inflates past its declared size (zip bomb?)")
        except _ZIP_ERRORS as exc:
            dest.unlink(missing_ok=True)
            if isinstance(exc, OSError) and exc.errno in FILESYSTEM_ERRNOS:
                # the output's close (a full disk): the disk's error, never the archive's
                raise disk_error(exc, what="an extracted archive member", path=dest) from None
            raise ArchiveError(
                f"{self.label}: member {name!r} cannot be read ({exc})",
                component=self.component,
                file=str(self.path),
                fix="the archive is corrupt; delete the cache entry and fetch again",
            ) from None
        except (ArchiveError, DiskError):
            dest.unlink(missing_ok=True)
            raise
        if member.record_sha256 is not None and actual != member.record_sha256:
            if member.record_sha256 in unsigned_sha256s(dest):
                self._signed_after_record(name)
                return Extracted(path=dest, size=written, sha256=actual)
            dest.unlink(missing_ok=True)
            raise IntegrityError(
                f"{self.label}: member {name!r} has sha256 {actual}, its RECORD says "
                f"{member.record_sha256}",
                component=self.component,
                file=str(self.path),
                fix="the wheel was altered after it was built; do not ship it",
            )
        return Extracted(path=dest, size=written, sha256=actual)


# --- a source that is the file itself ---------------------------------------------------------


class MemberReader(Protocol):
    """What staging reads from a source: a zip's members, or a bare file as itself."""

    label: str

    def extract(self, name: str, dest: Path) -> Extracted: ...

    def close(self) -> None: ...


class BareFile:
    """A source that is not an archive (a model at a URL or in the project): its one "member"
    is the empty name, the file itself."""

    def __init__(self, path: Path, *, label: str, component: str | None = None) -> None:
        self.path = path
        self.label = label
        self.component = component

    def extract(self, name: str, dest: Path) -> Extracted:
        if name:
            raise ArchiveError(
                f"{self.label} is not an archive, so it has no member {name!r}",
                component=self.component,
                file=str(self.path),
                fix="leave the member out for a source that is the file itself",
            )
        with self.path.open("rb") as stream, dest.open("wb") as out:
            written, sha256 = copy_hashing(stream, out)
        return Extracted(path=dest, size=written, sha256=sha256)

    def close(self) -> None:
        """Nothing is held open."""


def open_source(path: Path, *, label: str, component: str) -> MemberReader:
    """A zip (wheel, AAR) is read member by member; anything else is the file itself."""
    if sniff_archive(path) == "zip":
        return ZipArchive(path, label=label, component=component)
    return BareFile(path, label=label, component=component)


# --- members of any archive, for nested sources (an AAR inside an npm tarball) ----------------

MAX_TAR_TOTAL = 16 << 30  # the sum of a tarball's member sizes; a gzip bomb stops here


def sniff_archive(path: Path) -> str | None:
    """'zip', 'tar' (optionally gzip/bzip2/xz-compressed) or None."""
    with path.open("rb") as stream:
        head = stream.read(262)
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "zip"
    if head[:2] == b"\x1f\x8b" or head[:3] == b"BZh" or head[:6] == b"\xfd7zXZ\x00":
        return "tar"
    if head[257:262] == b"ustar":
        return "tar"
    return None


def extract_member(path: Path, member: str, dest: Path, *, label: str, component: str) -> Extracted:
    """Stream one member of a zip or tarball to `dest`, hashing as it goes."""
    kind = sniff_archive(path)
    if kind == "zip":
        with ZipArchive(path, label=label, component=component) as archive:
            return archive.extract(member, dest)
    if kind == "tar":
        return _extract_tar_member(path, member, dest, label=label, component=component)
    raise ArchiveError(
        f"{label} is neither a zip nor a tar archive, so {member!r} cannot be read from it",
        component=component,
        file=str(path),
        fix="check the recipe's nested member path and the pin of the outer archive",
    )


def tar_refusal(path: Path, name: str, why: str, *, label: str, component: str) -> ArchiveError:
    """A tarball member judged hostile or malformed: nothing of it was unpacked."""
    return ArchiveError(
        f"{label}: {why}: {name!r}",
        component=component,
        file=str(path),
        fix="this archive is hostile or corrupt; it was not unpacked. Check the pin",
    )


def walk_tar(
    path: Path,
    visit: Callable[[str, tarfile.TarInfo, tarfile.TarFile], None],
    *,
    label: str,
    component: str,
    undo: Callable[[], None] = lambda: None,
) -> None:
    """Hand every member of the tarball at `path` to `visit` (its name without "./"), each name
    judged first (no `..`, absolute path or control character) and the members' total sizes
    bounded (a tar bomb). Whatever goes wrong, `undo` runs first: a tarball that cannot be read
    (truncated, not a tar) is an ArchiveError naming it, as is a name or size refused here."""
    import tarfile

    total = 0
    try:
        with tarfile.open(path, mode="r:*") as tar:
            while (info := tar.next()) is not None:
                name = info.name[2:] if info.name.startswith("./") else info.name
                problem = check_member_name(name)
                if problem:
                    raise tar_refusal(
                        path, info.name, f"member name {problem}", label=label, component=component
                    )
                total += max(info.size, 0)
                if total > MAX_TAR_TOTAL:
                    why = "members inflate past any sane total (tar bomb?)"
                    raise tar_refusal(path, info.name, why, label=label, component=component)
                visit(name, info, tar)
    except (ArchiveError, DiskError):
        undo()
        raise
    except (tarfile.TarError, *_ZIP_ERRORS) as exc:
        undo()
        raise ArchiveError(
            f"{label} is not a readable tar archive ({type(exc).__name__}: {exc})",
            component=component,
            file=str(path),
            fix="delete the cache entry and fetch again; if it persists, the upstream file is "
            "broken",
        ) from None


def _extract_tar_member(
    path: Path, member: str, dest: Path, *, label: str, component: str
) -> Extracted:
    """Walk the whole tarball: every name is judged, the member must be one regular file."""
    found: list[Extracted] = []

    def refuse(name: str, why: str) -> ArchiveError:
        return tar_refusal(path, name, why, label=label, component=component)

    def visit(name: str, info: tarfile.TarInfo, tar: tarfile.TarFile) -> None:
        if name != member:
            return
        if found:
            raise refuse(name, "member name appears twice")
        if not info.isreg():
            kind = "a symlink" if info.issym() else "a hard link" if info.islnk() else None
            raise refuse(name, f"member is {kind or 'not a regular file'}")
        if info.size > MAX_MEMBER_SIZE:
            raise refuse(name, f"member is {info.size} bytes")
        stream = tar.extractfile(info)
        assert stream is not None  # a regular file always has data
        with writing("an extracted archive member", dest):
            out = dest.open("wb")
        with out:
            written, sha256 = copy_hashing(stream, out)
        if written != info.size:
            raise refuse(name, "member is truncated")
        found.append(Extracted(path=dest, size=written, sha256=sha256))

    walk_tar(
        path, visit, label=label, component=component, undo=lambda: dest.unlink(missing_ok=True)
    )
    if not found:
        raise ArchiveError(
            f"{label} has no member {member!r}",
            component=component,
            file=str(path),
            fix="check the nested member path in the recipe against the archive's listing",
        )
    return found[0]
