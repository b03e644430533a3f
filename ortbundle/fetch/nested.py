"""Archives inside fetched archives (an AAR inside an npm tarball), cached by their own hash.

The inner archive is extracted once, checked against its own pin and stored in the cache beside
the download, so later builds open it directly and never read the outer tarball again.
"""

from __future__ import annotations

from ortbundle.archives import extract_member
from ortbundle.errors import IntegrityError
from ortbundle.fetch.artifacts import Artifact
from ortbundle.fetch.cache import Cache


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
                    partial = cache.partial_path(level.sha256)
                    partial.parent.mkdir(parents=True, exist_ok=True)
                    got = extract_member(
                        path, level.member, partial, label=label, component=component
                    )
                    if got.sha256 != level.sha256:
                        partial.unlink(missing_ok=True)
                        raise IntegrityError(
                            f"{label}: nested archive {level.member!r} has sha256 {got.sha256}, "
                            f"the recipe pins {level.sha256}",
                            component=component,
                            file=source.describe(),
                            fix="the outer archive matches its pin, so the nested pin is wrong: "
                            "correct it (or re-pin with `invoke pin`)",
                        )
                    entry = cache.store(partial, level.sha256, url=f"{url}#{level.member}")
                    made = True
        path, url, size = entry.path, entry.url, entry.size
        label = level.member.rsplit("/", 1)[-1]
    return Artifact(source, path, url, size, downloaded=made)
