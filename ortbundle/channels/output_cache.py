"""Memoised channel outputs: a tarball or installer is rebuilt only when its inputs changed.

Compressing a 115 MB stage with solid LZMA takes makensis most of a minute; the same bytes come
out for the same inputs (the outputs are reproducible), so they are stored content-addressed
under the cache, keyed by everything that determines them, and linked back on a later build.
A stored output is re-hashed before it is used, so a corrupted cache entry is rebuilt, never
shipped.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from ortbundle._core.fsio import (
    atomic_output,
    atomic_write,
    locked,
    remove_dead_leftovers,
    sha256_file,
)
from ortbundle._core.memo import memo_key
from ortbundle.channels import PackageInput
from ortbundle.fetch.cache import stat_record

_CHUNK = 1 << 20


def input_key(package: PackageInput, kind: str, extra: Iterable[str]) -> str:
    """Everything an output can depend on: the stage's files, the epoch, the channel's own text,
    and ortbundle's code (the tarball writer…)."""
    files = [f"{f.path}\0{f.sha256}\0{f.mode:o}\0{f.link_to or ''}" for f in package.files]
    head = [kind, str(package.source_date_epoch), f"{len(files)} files"]
    return memo_key([*head, *files, *extra])


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


def memoized(
    package: PackageInput, kind: str, key: str, dest: Path, produce: Callable[[Path], None]
) -> str:
    """Put the output for `key` at `dest` and return its SHA-256: from the cache if it holds it
    intact, else produced now (and stored).

    Concurrent builds of the same key wait for the first one instead of compressing twice.
    """
    entry = package.memo.entry(kind, key, suffix="")
    if entry is None:
        # a release produces its packages afresh: a memo's record cannot vouch for the memo
        produce(dest)
        return sha256_file(dest)
    sidecar = entry.with_name(f"{key}.json")
    with locked(entry.with_name(f"{key}.lock"), waiting=f"the memoised package {key[:12]}"):
        remove_dead_leftovers(entry.parent.glob(f".{key}.*"))
        sha256 = _trusted(entry, sidecar)
        if sha256 is not None:
            _place(entry, dest)
            return sha256
        entry.unlink(missing_ok=True)  # corrupted or half-written: rebuild
        produce(dest)
        with atomic_output(entry, tag="partial") as tmp:
            try:
                os.link(dest, tmp)
            except OSError:
                shutil.copyfile(dest, tmp)
            sha256 = sha256_file(tmp)
            epoch = package.source_date_epoch  # stamped as the build stamps dist/: it stays so
            os.utime(tmp, (epoch, epoch))
        _write_record(sidecar, sha256, stat_record(entry.lstat()))
    return sha256
