"""Memoised channel outputs: a tarball or installer is rebuilt only when its inputs changed.

Compressing a 115 MB stage with solid LZMA takes makensis most of a minute; the same bytes come
out for the same inputs (the outputs are reproducible), so they are stored content-addressed
under the cache, keyed by everything that determines them, and linked back on a later build.
A stored output is re-hashed before it is used, so a corrupted cache entry is rebuilt, never
shipped.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ortbundle.channels import PackageInput

_CHUNK = 1 << 20


def input_key(package: PackageInput, kind: str, extra: Iterable[str]) -> str:
    """Everything an output can depend on: the stage's files, the epoch, the channel's own text."""
    digest = hashlib.sha256(f"ortbundle-memo/1\n{kind}\n{package.source_date_epoch}\n".encode())
    for f in package.files:
        digest.update(f"{f.path}\0{f.sha256}\0{f.mode:o}\0{f.link_to or ''}\n".encode())
    for part in extra:
        digest.update(hashlib.sha256(part.encode()).digest())
    return digest.hexdigest()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _place(stored: Path, dest: Path) -> None:
    tmp = dest.with_name(f".{dest.name}.memo-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    try:
        os.link(stored, tmp)
    except OSError:
        shutil.copyfile(stored, tmp)
    os.replace(tmp, dest)


def memoized(
    package: PackageInput, kind: str, key: str, dest: Path, produce: Callable[[Path], None]
) -> bool:
    """Put the output for `key` at `dest`: from the cache if it holds it intact, else produce it.

    Returns True when it came from the cache. Concurrent builds of the same key wait for the
    first one instead of compressing twice.
    """
    if package.cache is None:
        produce(dest)
        return False
    entry = package.cache / "outputs" / kind / key[:2] / key
    sidecar = entry.with_name(f"{key}.sha256")
    with _locked(entry.with_name(f"{key}.lock")):
        if entry.is_file() and sidecar.is_file():
            if _sha256(entry) == sidecar.read_text().strip():
                _place(entry, dest)
                return True
            entry.unlink()  # corrupted: rebuild
        produce(dest)
        tmp = entry.with_name(f".{key}.partial-{os.getpid()}")
        tmp.unlink(missing_ok=True)
        try:
            os.link(dest, tmp)
        except OSError:
            shutil.copyfile(dest, tmp)
        sidecar.write_text(_sha256(tmp) + "\n")
        os.replace(tmp, entry)
    return False
