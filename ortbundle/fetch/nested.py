"""Archives inside fetched archives (an AAR inside an npm tarball), cached by their own hash.

The inner archive is extracted once, checked against its own pin and stored in the cache beside
the download, so later builds open it directly and never read the outer tarball again. `invoke
pin` walks the same levels of a new download (`renest`), pinning each by what it hashes to.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from ortbundle._core.errors import ArchiveError, FetchError, IntegrityError
from ortbundle.config.sources import NestedMember, Source
from ortbundle.fetch.archives import extract_member
from ortbundle.fetch.cache import Cache, CacheEntry
from ortbundle.fetch.registry import Artifact


def _extract(
    cache: Cache,
    path: Path,
    member: str,
    partial: Path,
    *,
    label: str,
    url: str,
    component: str,
    source: Source,
    pinned: str | None,
) -> CacheEntry:
    """One level: `member` of the archive at `path`, into the cache. With `pinned`, bytes that
    hash otherwise are refused; without, the member is pinned by what it hashes to (and a
    member the archive lacks is named beside the ones it has)."""
    partial.parent.mkdir(parents=True, exist_ok=True)
    try:
        got = extract_member(path, member, partial, label=label, component=component)
    except ArchiveError:
        partial.unlink(missing_ok=True)
        names = None if pinned else _member_names(path)
        if names is None or member in names:
            raise
        suffix = Path(member).suffix
        alike = sorted(n for n in names if suffix and n.endswith(suffix))
        raise FetchError(
            f"source {source.id}: {label} has no member {member!r}, which the recipe "
            "reads" + (f" (its {suffix} members: {', '.join(alike[:8])})" if alike else ""),
            component=component,
            file=label,
            fix="the new release lays its files out differently: edit the source's nested "
            "member by hand, or pin another version with --version",
        ) from None
    if pinned is not None and got.sha256 != pinned:
        partial.unlink(missing_ok=True)
        raise IntegrityError(
            f"{label}: nested archive {member!r} has sha256 {got.sha256}, the recipe pins {pinned}",
            component=component,
            file=source.describe(),
            fix="the outer archive matches its pin, so the nested pin is wrong: "
            "correct it (or re-pin with `invoke pin`)",
        )
    if pinned is not None:
        return cache.store(partial, got.sha256, url=f"{url}#{member}")
    return cache.adopt(partial, got.sha256, url=f"{url}#{member}")


def unnest(cache: Cache, outer: Artifact, *, component: str) -> Artifact:
    """The innermost archive the source pins, as a cached, verified file."""
    source = outer.source
    path, url, size, label = outer.path, outer.url, outer.size, source.filename
    made = False
    for level in source.nested:
        entry = cache.get(level.sha256)
        if entry is None:
            with cache.lock(level.sha256):
                entry = cache.get(level.sha256)
                if entry is None:
                    entry = _extract(
                        cache,
                        path,
                        level.member,
                        cache.partial_path(level.sha256),
                        label=label,
                        url=url,
                        component=component,
                        source=source,
                        pinned=level.sha256,
                    )
                    made = True
        path, url, size = entry.path, entry.url, entry.size
        label = level.member.rsplit("/", 1)[-1]
    return Artifact(source, path, url, size, downloaded=made)


def renest(
    cache: Cache, outer: Path, source: Source, label: str, component: str
) -> tuple[NestedMember, ...]:
    """Each nested archive of `source`, re-extracted under the same member path from `outer`
    (a new download), stored in the cache and pinned by its own SHA-256."""
    pinned = []
    path, url = outer, label
    for depth, level in enumerate(source.nested):
        partial = cache.root / "partial" / f"pin-{os.getpid()}-{source.id}-{depth}.part"
        entry = _extract(
            cache,
            path,
            level.member,
            partial,
            label=label,
            url=url,
            component=component,
            source=source,
            pinned=None,
        )
        pinned.append(NestedMember(level.member, entry.sha256))
        path, label = entry.path, level.member.rsplit("/", 1)[-1]
        url = label
    return tuple(pinned)


def _member_names(path: Path) -> list[str] | None:
    """The member names of a zip or tarball, for an error message; None if unreadable."""
    import tarfile  # (an error path: a warm build, which finds the inner archive, never needs it)

    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                return archive.namelist()
        with tarfile.open(path, mode="r:*") as tar:
            return [n.removeprefix("./") for n in tar.getnames()]
    except (OSError, tarfile.TarError, zipfile.BadZipFile):
        return None
