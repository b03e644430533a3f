"""A file of the project (`path = "…"`): copied while hashed, so it is pinned and re-verified
exactly like a download. It may not be a link, nor lead out of the project."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ortbundle._core.errors import ConfigError, FetchError, IntegrityError
from ortbundle._core.fsio import inside_project, sha256_file
from ortbundle._core.oserrors import writing
from ortbundle.config.sources import Coordinates, LocalCoordinates
from ortbundle.fetch.archives import copy_hashing
from ortbundle.fetch.registry import (
    Downloaded,
    Fetched,
    Location,
    ProgressFn,
    RegistryBase,
    _ignore,
)


class _Missing(FetchError):
    """The project has no such file."""


class LocalRegistry(RegistryBase[LocalCoordinates]):
    coordinates = LocalCoordinates
    describes = "a file of the project"
    kind = "path"

    def _root(self) -> Path:
        if self.registries.project_root is None:
            raise ConfigError("a source with a local path needs the project root")
        return self.registries.project_root

    def where(self, project: str) -> str:
        return "the project"

    def endpoint(self, project: str) -> str:
        return "path"

    def resolve(self, coords: Coordinates) -> Location:
        """The file and its SHA-256 (read now: the project is its own registry)."""
        coords = self.own(coords)
        file = self._root() / coords.path
        inside_project(file, self._root())
        if not file.is_file():
            raise _Missing(f"{coords.path} does not exist", file=str(file))
        return Location(f"path:{coords.path}", {"sha256": frozenset({sha256_file(file)})})

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
        """Copy the file into `partial` while hashing it; refuse bytes other than the pin."""
        coords = self.own(coords)
        root = self._root()
        path = root / coords.path
        inside_project(path, root)  # a link out: named with where it leads
        if path.is_symlink():
            raise ConfigError(
                f"local source {coords.path} is a link (to {path.resolve()})",
                file=str(path),
                fix="keep the file itself in the project (a local source is the project's own)",
            )
        if not path.is_file():
            raise ConfigError(
                f"local source {coords.path} does not exist",
                file=str(path),
                fix="add the file to the project, or correct the recipe's path",
            )
        partial.parent.mkdir(parents=True, exist_ok=True)
        with (
            path.open("rb") as stream,
            writing(f"the cache's copy of {coords.path}", partial),
            partial.open("wb") as out,
        ):
            got, sha256 = copy_hashing(stream, out)
        if (size is not None and got != size) or sha256 != (expected_sha256 or sha256):
            partial.unlink()
            raise IntegrityError(
                f"local source {coords.path} has sha256 {sha256} ({got} bytes), the "
                f"recipe pins {expected_sha256}",
                file=str(path),
                fix="the file changed: check it, then re-pin its sha256 in the recipe",
            )
        return Fetched(f"path:{coords.path}", Downloaded(partial, got, sha256))
