"""`invoke cache-verify`: re-hash every download in the cache, whatever its stat record says.

A build re-hashes an entry only when its stat record changed (or for a release): bytes that
rot in place under an unchanged record (a failing disk) are found by this sweep, each bad
entry removed and named with the digest it should have and the one it has.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ortbundle._core.repairs import Repair, watching
from ortbundle.fetch.cache import Cache, blob_names


@dataclass(frozen=True)
class CacheVerifyReport:
    root: Path
    good: tuple[str, ...]  # sha256 of each entry whose bytes match
    repaired: tuple[Repair, ...]  # entries that did not, now removed
    unrecorded: tuple[str, ...]  # blobs without their record (a half-stored entry), removed


def verify_cache(root: Path) -> CacheVerifyReport:
    cache = Cache(root, verify_all=True)  # every entry is re-hashed, trusted or not
    good, unrecorded = [], []
    with watching() as repaired:
        for sha256 in (p.name for p in blob_names(root)):
            if cache.get(sha256) is not None:
                good.append(sha256)
            elif not any(r.expected == sha256 for r in repaired):
                cache.evict(sha256)
                unrecorded.append(sha256)
    return CacheVerifyReport(root, tuple(good), tuple(repaired), tuple(unrecorded))
