"""The Registry protocol and what fetching hands around: the one module every source kind shares.

Each source kind has one module (index.py: a PyPI index, maven.py, npm.py, url.py, local.py: a
file of the project) with a class that speaks this protocol. They import this module, never
`Registries`: that class (the package face, fetch/__init__.py) makes each of them on first use
and is the only one that knows them all, so the kinds and what they share form no import cycle.
A registry reaches its configuration and session through the `Sources` protocol below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from ortbundle._core.errors import ConfigError, FetchError

if TYPE_CHECKING:
    import requests

    from ortbundle.config.retry import RetryPolicy
    from ortbundle.config.sources import Coordinates, Source
    from ortbundle.fetch.config.maven import MavenConfig
    from ortbundle.fetch.config.npm import NpmConfig
    from ortbundle.fetch.config.pip import IndexConfig

Digests = Mapping[str, frozenset[str]]  # algorithm → the hex values a registry accepts for it
ProgressFn = Callable[[int, int | None], None]  # (bytes so far, total or None)


class NotFound(FetchError):
    """HTTP 404/410: the file is not at this URL (another repository may still have it)."""


@dataclass(frozen=True)
class IndexFile:
    """A file a PyPI index lists (index.py reads the pages): `Published.files` carries them."""

    filename: str
    url: str
    hashes: dict[str, str]
    yanked: bool = False  # PEP 592: `yanked` in JSON, `data-yanked` on an HTML anchor
    size: int | None = None  # PEP 700, when the index publishes it


@dataclass(frozen=True)
class Published:
    """What a registry says about one project."""

    versions: tuple[str, ...]  # oldest first, in the registry's own order
    latest: str | None = None  # npm's dist-tags.latest; Maven's <release>
    files: tuple[IndexFile, ...] = ()  # a PyPI project: the wheels its indexes list


@dataclass(frozen=True)
class Location:
    """Where a pinned file is served, and the digests its registry publishes for it."""

    url: str
    digests: Digests


@dataclass(frozen=True)
class Downloaded:
    path: Path
    size: int
    sha256: str
    digests: dict[str, str] = field(default_factory=dict)  # the extra ones asked for: name → hex


@dataclass(frozen=True)
class Fetched:
    url: str  # the URL that served the bytes (credentials never in it)
    downloaded: Downloaded


@dataclass(frozen=True)
class Artifact:
    """A verified upstream file on local disk: what the Fetcher (artifacts.py) hands a build,
    and what nested.py unpacks an inner archive from and into."""

    source: Source
    path: Path
    url: str
    size: int
    downloaded: bool  # False when the cache already held it


def _ignore(_message: str) -> None:
    return None


class Sources(Protocol):
    """What a registry asks of the `Registries` that made it: each ecosystem's configuration
    and HTTP session (made on first use), the retry policy, the project's root."""

    @property
    def policy(self) -> RetryPolicy: ...

    @property
    def project_root(self) -> Path | None: ...

    def pip(self) -> tuple[IndexConfig, requests.Session]: ...

    def maven(self) -> tuple[MavenConfig, requests.Session]: ...

    def npm(self) -> tuple[NpmConfig, requests.Session]: ...


class Registry(Protocol):
    kind: str

    def where(self, project: str) -> str:
        """Where the settings say to look for `project` (for a message; no URL)."""

    def endpoint(self, project: str) -> str:
        """The registry `project` is read from: one that did not answer is not asked again."""

    def resolve(self, coords: Coordinates) -> Location:
        """The pinned file's URL and published digests; NotFound when no registry has it."""

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
        """Download into `partial`: bytes that match `expected_sha256` and every digest the
        registry publishes. None (a file not pinned yet): the published digests must vouch
        for the bytes, and at least one must exist."""

    def versions(self, project: str) -> Published | None:
        """The published versions of `project`; None when the registry has no such project."""

    def published_digests(self, coords: Coordinates) -> Digests | None:
        """What the registry publishes for the pinned file ({} nothing); None: not there."""

    def version_key(self, version: str) -> Any:
        """Orders this kind's versions as its ecosystem does."""

    def is_prerelease(self, version: str) -> bool:
        """A version the newest-release choice passes over unless a pin already is one."""


C = TypeVar("C")


class RegistryBase(Generic[C]):
    """What every registry shares: its `Sources` (configuration, sessions, retry policy),
    the check that a source is of its kind, the published digests as `resolve` finds them,
    and (for kinds without versions) versions ordered as text, none a pre-release."""

    kind: str
    coordinates: type[C]  # the Coordinates class this registry serves
    describes: str  # "a PyPI file": for the error a source of another kind gets

    def __init__(self, registries: Sources) -> None:
        self.registries = registries
        self.policy = registries.policy

    def own(self, coords: Coordinates) -> C:
        """`coords` as this registry's own kind, or a configuration error."""
        if not isinstance(coords, self.coordinates):
            raise ConfigError(f"{coords.describe()} is not {self.describes}")
        return coords

    def resolve(self, coords: Coordinates) -> Location:
        raise NotImplementedError  # pragma: no cover - every registry has its own

    def absent(self) -> tuple[type[Exception], ...]:
        """What `resolve` raises when the registry does not have the file."""
        return (NotFound,)

    def published_digests(self, coords: Coordinates) -> Digests | None:
        try:
            return self.resolve(coords).digests
        except self.absent():
            return None

    def versions(self, project: str) -> Published | None:
        raise no_versions(self.kind, project)

    def version_key(self, version: str) -> Any:
        return version

    def is_prerelease(self, version: str) -> bool:
        return False


def no_versions(kind: str, project: str) -> ConfigError:
    """A kind no registry publishes versions of (a plain URL, a file of the project)."""
    return ConfigError(
        f"{project} is a {kind} source: no registry publishes versions of it, so there is "
        "nothing to move it to",
        fix="edit its sha256 (and size) by hand",
    )
