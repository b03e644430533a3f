"""Files kept under the cache and hard-linked into dist/ trees, each trusted by a record
beside it (its SHA-256 and stat) and linked into at most one dist/ tree at a time.

Linking a file, or removing one of its names, moves the ctime of every name of its inode: if
two dist/ trees held one inode, building into (or deleting) one would move the ctime of the
other's published file, and the other's no-op (pipeline/noop.py), which cannot tell that from an
edit with its mtime put back, would have to hash it again. So where another tree holds the
entry, a spare (`<name>-<n>`) is linked instead, copied the first time: the cache keeps one copy
per dist/ that holds the file at once, and no build touches the inode of another's.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from ortbundle._core.fsio import atomic_output, atomic_write, sha256_file, stat_record

_CHUNK = 1 << 20


def place_kept(entry: Path, dest: Path, own: Sequence[Path], epoch: int) -> tuple[str, Path] | None:
    """Link a trusted copy of `entry` (itself or a spare) that no other tree holds at `dest`,
    making a spare if each is held; its SHA-256 and which copy, or None when no copy is intact
    (each untrusted one is removed). `own`: the trees the caller writes and replaces; `epoch`:
    the mtime a spare is given. The caller holds the entry's lock."""
    trusted: list[tuple[Path, str]] = []
    for copy in _copies(entry):
        sha256 = _trusted(copy, _sidecar(copy))
        if sha256 is None:  # corrupted or half-written: not used, not copied
            copy.unlink(missing_ok=True)
            _sidecar(copy).unlink(missing_ok=True)
        else:
            trusted.append((copy, sha256))
    for copy, sha256 in trusted:
        if not _held_elsewhere(copy, (*own, dest)):
            _place(copy, dest)
            return sha256, copy
    for copy, sha256 in trusted:  # each held by another dist/: a spare of its own
        spare = _spare(entry, copy, sha256, epoch)
        if spare is not None:
            _place(spare, dest)
            return sha256, spare
        copy.unlink(missing_ok=True)  # its bytes no longer hash to its record
        _sidecar(copy).unlink(missing_ok=True)
    return None


def keep(entry: Path, made: Path, epoch: int) -> str:
    """Store `made` (just produced, in dist/) as `entry`, linked to it, stamped `epoch`."""
    with atomic_output(entry, tag="partial") as tmp:
        try:
            os.link(made, tmp)
        except OSError:
            shutil.copyfile(made, tmp)
        sha256 = sha256_file(tmp)
        os.utime(tmp, (epoch, epoch))  # stamped as the build stamps dist/: it stays so
    _write_record(_sidecar(entry), sha256, stat_record(entry.lstat()))
    return sha256


def _place(stored: Path, dest: Path) -> None:
    """A hard link (a copy across file systems): 108 MB of packages are not written again.
    Editing the file in dist/ moves its mtime, which the memo's record then no longer matches."""
    with atomic_output(dest, tag="memo") as tmp:
        try:
            os.link(stored, tmp)
        except OSError:
            shutil.copyfile(stored, tmp)


def _recorded(sidecar: Path) -> dict[str, int | str] | None:
    try:
        record = json.loads(sidecar.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _trusted(entry: Path, sidecar: Path) -> str | None:
    """The entry's SHA-256 if it is intact: by its stat record (size, mtime, ctime, inode),
    else by re-hashing it."""
    record = _recorded(sidecar)
    try:
        current = stat_record(entry.lstat())
    except OSError:
        return None
    if record is None or record.get("size") != current["size"] or not entry.is_file():
        return None
    sha256 = str(record.get("sha256", ""))
    # ctime is left out: linking the entry into dist/ (and deleting dist/) moves it
    if all(record.get(k) == current[k] for k in ("size", "mtime_ns", "ino")):
        return sha256
    if sha256_file(entry) != sha256:
        return None
    _write_record(sidecar, sha256, current)  # touched, not changed
    return sha256


def _write_record(sidecar: Path, sha256: str, stat: dict[str, int]) -> None:
    atomic_write(sidecar, json.dumps({"sha256": sha256, **stat}))


def _sidecar(copy: Path) -> Path:
    return copy.with_name(f"{copy.name}.json")


def _copies(entry: Path) -> list[Path]:
    """The entry and its spares (`<name>-<n>`), the entry first, then by number."""
    key = entry.name
    spares: list[tuple[int, Path]] = []
    try:
        names = [path.name for path in entry.parent.iterdir()]
    except OSError:
        names = []
    for name in names:
        number = name[len(key) + 1 :] if name.startswith(f"{key}-") else ""
        if number.isdigit() and number.isascii():
            spares.append((int(number), entry.with_name(name)))
    return [entry, *(path for _, path in sorted(spares))]


def _held_elsewhere(copy: Path, own: Sequence[Path]) -> bool:
    """Whether a name of `copy`'s inode lives outside the cache and outside this build's own
    trees (`own`: the scratch tree it writes, the version directory it replaces, the file it
    writes over): then linking it here would move that name's ctime."""
    try:
        info = copy.stat()
    except OSError:
        return True
    if info.st_nlink <= 1:
        return False
    names: set[str] = set()
    for top in own:
        _names_of(os.fspath(top), info, names)
    return info.st_nlink - 1 > len(names)


def _names_of(top: str, info: os.stat_result, names: set[str]) -> None:
    """Add every path under `top` (or `top` itself) that is a name of `info`'s inode. The
    directory entries' inode numbers need no stat; a match is stat'ed for its device."""
    pending = [top]
    while pending:
        path = pending.pop()
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
                    elif entry.inode() == info.st_ino and _same_inode(entry.path, info):
                        names.add(entry.path)
        except NotADirectoryError:
            if _same_inode(path, info):
                names.add(path)
        except OSError:
            continue  # absent (no earlier version), or gone meanwhile


def _same_inode(path: str, info: os.stat_result) -> bool:
    try:
        found = os.lstat(path)
    except OSError:
        return False
    return (found.st_dev, found.st_ino) == (info.st_dev, info.st_ino)


def _spare(entry: Path, source: Path, sha256: str, epoch: int) -> Path | None:
    """A new spare copy of `source`, its bytes hashed as they are copied; None if they no
    longer hash to `sha256` (the entry was altered behind its record)."""
    numbers = [int(p.name[len(entry.name) + 1 :]) for p in _copies(entry)[1:]]
    spare = entry.with_name(f"{entry.name}-{max(numbers, default=0) + 1}")
    try:
        with atomic_output(spare, tag="partial") as tmp:
            digest = hashlib.sha256()
            with source.open("rb") as reader, tmp.open("wb") as writer:
                while chunk := reader.read(_CHUNK):
                    digest.update(chunk)
                    writer.write(chunk)
            if digest.hexdigest() != sha256:
                raise _Altered  # atomic_output removes the partial copy
            shutil.copymode(source, tmp)
            os.utime(tmp, (epoch, epoch))
    except _Altered:
        return None
    _write_record(_sidecar(spare), sha256, stat_record(spare.lstat()))
    return spare


class _Altered(Exception):
    """A memoised output's bytes no longer hash to its record."""
