"""A content-addressed download cache shared by every build on the machine.

Blobs are named by their SHA-256 and only ever written by renaming a verified file into place,
so a reader never sees half a file. A per-blob lock stops two builds downloading the same file at
once. A blob whose size or mtime changed since it was stored is re-hashed before use and dropped
if it no longer matches — the cache is a convenience, never a source of truth.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ortbundle._core.errors import IntegrityError
from ortbundle._core.fsio import (
    atomic_output,
    atomic_write,
    fsync_dir,
    locked,
    remove_dead_leftovers,
    sha256_file,
)
from ortbundle._core.fsio import (
    stat_record as stat_record,  # re-exported: every cache trust uses it
)
from ortbundle._core.locations import ENV_CACHE_DIR as ENV_CACHE_DIR  # re-exported
from ortbundle._core.locations import default_cache_dir as default_cache_dir  # re-exported
from ortbundle._core.repairs import Repair, report_repair
from ortbundle.fetch.archives import copy_hashing
from ortbundle.fetch.config.urls import redact

CHUNK = 1 << 20  # read size when hashing


@dataclass(frozen=True)
class CacheEntry:
    path: Path
    sha256: str
    size: int
    url: str  # where the bytes came from when they were stored


class Cache:
    """Content-addressed downloads. A blob is hashed when stored; later it is trusted while its
    stat record holds, and re-hashed when it does not — or always, for a release (`verify_all`),
    so that a release never rests on the cache's own word."""

    def __init__(self, root: Path, *, verify_all: bool = False) -> None:
        self.root = root
        self.verify_all = verify_all
        self._verified: set[str] = set()  # re-hashed in this process already

    def blob_path(self, sha256: str) -> Path:
        return self.root / "sha256" / sha256[:2] / sha256

    def partial_path(self, sha256: str) -> Path:
        return self.root / "partial" / f"{sha256}.part"

    def _meta_path(self, sha256: str) -> Path:
        return self.blob_path(sha256).with_suffix(".json")

    @contextlib.contextmanager
    def lock(self, sha256: str) -> Iterator[None]:
        """Exclusive per-blob lock (flock: released by the kernel if the process dies)."""
        with locked(self.root / "locks" / f"{sha256}.lock", waiting=f"download {sha256[:12]}"):
            yield

    def get(self, sha256: str) -> CacheEntry | None:
        """The verified blob, or None. A blob changed on disk is re-hashed and dropped if bad."""
        blob = self.blob_path(sha256)
        try:
            stat = blob.lstat()
            meta = json.loads(self._meta_path(sha256).read_text("utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(meta, dict) or not blob.is_file() or blob.is_symlink():
            self.evict(sha256)
            return None
        current = stat_record(stat)
        trusted = all(meta.get(k) == v for k, v in current.items())
        must_hash = not trusted or (self.verify_all and sha256 not in self._verified)
        if must_hash:
            found = sha256_file(blob)
            if stat.st_size != meta.get("size") or found != sha256:
                self._evict_corrupt(blob, sha256, found)
                report_repair(Repair.evicted(blob, sha256, found, stat.st_size, meta.get("size")))
                return None
            self._verified.add(sha256)
            if not trusted:
                self._write_meta(sha256, {**meta, **current})
        return CacheEntry(path=blob, sha256=sha256, size=stat.st_size, url=str(meta.get("url", "")))

    def store(self, verified: Path, sha256: str, *, url: str) -> CacheEntry:
        """Move an already-verified file into the cache (atomic rename, flushed to disk)."""
        blob = self.blob_path(sha256)
        blob.parent.mkdir(parents=True, exist_ok=True)
        verified.chmod(0o644)
        with verified.open("rb") as handle:
            os.fsync(handle.fileno())
        os.replace(verified, blob)
        fsync_dir(blob.parent)
        stat = blob.stat()
        self._write_meta(sha256, {**stat_record(stat), "url": url})
        return CacheEntry(path=blob, sha256=sha256, size=stat.st_size, url=url)

    def adopt(self, verified: Path, sha256: str, *, url: str) -> CacheEntry:
        """Store a file hashed by the caller (`sha256` is what it hashes to, not a pin), unless
        the cache holds those bytes already; either way `verified` is gone afterwards."""
        with self.lock(sha256):
            entry = self.get(sha256)
            if entry is None:
                return self.store(verified, sha256, url=url)
            verified.unlink(missing_ok=True)
            return entry

    def evict(self, sha256: str) -> None:
        self.blob_path(sha256).unlink(missing_ok=True)
        self._meta_path(sha256).unlink(missing_ok=True)

    def _evict_corrupt(self, blob: Path, sha256: str, found: str) -> None:
        """Remove an entry whose bytes failed their hash; one that cannot be removed (a cache
        mounted read-only) is named with its digests, not left to a bare EROFS."""
        try:
            self.evict(sha256)
        except OSError as exc:
            number = exc.errno or 0
            why = errno.errorcode.get(number, str(number))
            cannot = (
                "the cache is read-only"
                if number == errno.EROFS
                else f"{os.strerror(number) if number else exc} ({why})"
            )
            raise IntegrityError(
                f"cache entry {blob} failed its hash: expected sha256 {sha256}, found {found}; "
                f"it cannot be removed: {cannot}",
                file=str(blob),
                fix="remove the entry where the cache is writable (or point "
                f"{ENV_CACHE_DIR} at a writable copy of the cache); the next build downloads "
                "it again",
            ) from None

    def _write_meta(self, sha256: str, meta: dict[str, object]) -> None:
        path = self._meta_path(sha256)
        remove_dead_leftovers(path.parent.glob(f".{path.name}.*.tmp"))  # from killed builds
        remove_dead_leftovers(path.parent.glob(f".{path.name}.tmp-*"))
        atomic_write(path, json.dumps(meta, sort_keys=True))


_HEX64 = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class TransferReport:
    copied: tuple[str, ...]
    already: tuple[str, ...]
    rejected: tuple[str, ...]  # files whose bytes do not hash to their name


def blob_names(root: Path) -> list[Path]:
    return sorted(
        p
        for p in (root / "sha256").glob("*/*")
        if p.is_file() and len(p.name) == 64 and set(p.name) <= _HEX64
    )


def export_cache(cache: Cache, dest: Path) -> TransferReport:
    """Copy every verified download into a plain directory (sha256/<hh>/<hash> + index.json) that
    CI can keep with its own cache action or object store."""
    copied, already = [], []
    index: dict[str, dict[str, object]] = {}
    for blob in blob_names(cache.root):
        entry = cache.get(blob.name)
        if entry is None:
            continue  # altered or half-written: never exported
        target = dest / "sha256" / blob.name[:2] / blob.name
        index[blob.name] = {"size": entry.size, "url": entry.url}
        if target.is_file() and target.stat().st_size == entry.size:
            already.append(blob.name)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(target) as tmp:
            shutil.copyfile(entry.path, tmp)
        copied.append(blob.name)
    dest.mkdir(parents=True, exist_ok=True)
    atomic_write(dest / "index.json", json.dumps(index, indent=2, sort_keys=True) + "\n")
    return TransferReport(tuple(copied), tuple(already), ())


def import_cache(cache: Cache, source: Path) -> TransferReport:
    """Seed the cache from an exported directory, re-hashing every file as it is copied: an
    entry whose bytes do not match its name is rejected and nothing of it is kept."""
    try:
        index = json.loads((source / "index.json").read_text("utf-8"))
    except (OSError, ValueError):
        index = {}
    copied, already, rejected = [], [], []
    for blob in blob_names(source):
        sha256 = blob.name
        with cache.lock(sha256):
            if cache.get(sha256) is not None:
                already.append(sha256)
                continue
            partial = cache.partial_path(sha256)
            partial.parent.mkdir(parents=True, exist_ok=True)
            with blob.open("rb") as src, partial.open("wb") as out:
                _size, got = copy_hashing(src, out)
            if got != sha256:
                partial.unlink()
                rejected.append(sha256)
                continue
            meta = index.get(sha256, {}) if isinstance(index, dict) else {}
            url = meta.get("url") if isinstance(meta, dict) else None
            cache.store(partial, sha256, url=redact(str(url)) if url else "")
            copied.append(sha256)
    return TransferReport(tuple(copied), tuple(already), tuple(rejected))
