"""Memoised channel outputs: a tarball or installer is rebuilt only when its inputs changed.

Compressing a 115 MB stage with solid LZMA takes makensis most of a minute; the same bytes come
out for the same inputs (the outputs are reproducible), so they are stored content-addressed
under the cache, keyed by everything that determines them, and linked back on a later build.
A stored output is re-hashed before it is used, so a corrupted cache entry is rebuilt, never
shipped.

A stored output is linked into at most one build's dist/ at a time (_core/linked.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from ortbundle._core.fsio import locked, remove_dead_leftovers, sha256_file
from ortbundle._core.linked import keep, place_kept
from ortbundle._core.memo import memo_key
from ortbundle.channels import PackageInput


def input_key(package: PackageInput, kind: str, extra: Iterable[str]) -> str:
    """Everything an output can depend on: the stage's files, the epoch, the channel's own text,
    and ortbundle's code (the tarball writer…)."""
    files = [f"{f.path}\0{f.sha256}\0{f.mode:o}\0{f.link_to or ''}" for f in package.files]
    head = [kind, str(package.source_date_epoch), f"{len(files)} files"]
    return memo_key([*head, *files, *extra])


def memoized(
    package: PackageInput, kind: str, key: str, dest: Path, produce: Callable[[Path], None]
) -> str:
    """Put the output for `key` at `dest` and return its SHA-256: from the cache if it holds it
    intact (_core/linked.py: linked, or a spare where another dist/ holds it), else produced
    now (and stored).

    Concurrent builds of the same key wait for the first one instead of compressing twice.
    """
    entry = package.memo.entry(kind, key, suffix="")
    if entry is None:
        # a release produces its packages afresh: a memo's record cannot vouch for the memo
        produce(dest)
        return sha256_file(dest)
    with locked(entry.with_name(f"{key}.lock"), waiting=f"the memoised package {key[:12]}"):
        remove_dead_leftovers(entry.parent.glob(f".{key}.*"))
        placed = place_kept(entry, dest, package.memo.own, package.source_date_epoch)
        if placed is not None:
            package.memo.placed[dest] = placed[1]
            return placed[0]
        entry.unlink(missing_ok=True)
        produce(dest)
        sha256 = keep(entry, dest, package.source_date_epoch)
        package.memo.placed[dest] = entry
        return sha256
