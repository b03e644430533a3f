"""A plain URL the recipe names: no index, no versions, the recipe's own pin the only digest.

It travels over pip's session (so pip's CA bundle applies), by the same HTTP rules as the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ortbundle.config.sources import Coordinates, UrlCoordinates
from ortbundle.fetch.download import ProgressFn, download
from ortbundle.fetch.http import NotFound, exists
from ortbundle.fetch.registry import (
    Fetched,
    Location,
    RegistryBase,
    _ignore,
)
from ortbundle.fetch.trust import Voice, reconcile


def voice(coords: UrlCoordinates) -> Voice:
    """How a plain URL refuses to be pinned: nothing but a pin written by hand vouches for it."""
    return Voice(
        file=coords.url,
        unvouched=f"{coords.url} publishes no digest",
        fix="pin its sha256 by hand",
    )


class UrlRegistry(RegistryBase[UrlCoordinates]):
    coordinates = UrlCoordinates
    describes = "a plain URL"
    kind = "url"

    def where(self, project: str) -> str:
        return "the recipe's URL"

    def endpoint(self, project: str) -> str:
        return f"url {project}"

    def resolve(self, coords: Coordinates) -> Location:
        """The URL itself, once the server says (by a HEAD) that it still has the file."""
        coords = self.own(coords)
        _config, session = self.registries.pip()
        if not exists(session, coords.url, self.policy, what=coords.filename):
            raise NotFound(
                f"the server no longer has {coords.filename}",
                file=coords.url,
                fix="find where the file moved, then edit the recipe's url by hand",
            )
        return Location(coords.url, {})

    def download(
        self,
        coords: Coordinates,
        expected_sha256: str | None,
        partial: Path,
        *,
        size: int | None = None,
        progress: ProgressFn | None = None,
        warn: Callable[[str], None] = _ignore,
    ) -> Fetched:
        coords = self.own(coords)
        reconcile(expected_sha256, {}, voice(coords))  # a plain URL publishes nothing
        _config, session = self.registries.pip()
        done = download(
            session,
            coords.url,
            partial,
            sha256=expected_sha256,
            expected_size=size,
            policy=self.policy,
            what=coords.filename,
            progress=progress,
        )
        return Fetched(coords.url, done)
