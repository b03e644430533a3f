"""The Registry protocol, and `Registries`: the one way ortbundle talks to where sources come from.

Each source kind has one module (index.py: a PyPI index, maven.py, npm.py, url.py, local.py: a
file of the project) with a class that speaks this protocol. The Fetcher and `invoke pin` both
reach them through `Registries.registry_for(origin)`, which makes each one, with its
ecosystem's configuration and HTTP session, the first time it is needed: a warm build asks for
none, so it neither imports the HTTP stack nor reads a settings file.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from ortbundle._core.errors import ConfigError, FetchError
from ortbundle.fetch.policy import RetryPolicy

if TYPE_CHECKING:
    import requests

    from ortbundle.config.recipes import Coordinates, Source
    from ortbundle.fetch.config.maven import MavenConfig
    from ortbundle.fetch.config.npm import NpmConfig
    from ortbundle.fetch.config.pip import IndexConfig

T = TypeVar("T")
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
    """What every registry shares: its `Registries` (configuration, sessions, retry policy),
    the check that a source is of its kind, the published digests as `resolve` finds them,
    and (for kinds without versions) versions ordered as text, none a pre-release."""

    kind: str
    coordinates: type[C]  # the Coordinates class this registry serves
    describes: str  # "a PyPI file": for the error a source of another kind gets

    def __init__(self, registries: Registries) -> None:
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


class Registries:
    """Each kind's Registry, made on first use; each ecosystem's configuration read once and its
    HTTP session made once (a configuration error is remembered, not re-read). Thread-safe: the
    Fetcher's workers share it."""

    def __init__(
        self,
        *,
        policy: RetryPolicy | None = None,
        index_url: str | None = None,
        project_root: Path | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.policy = policy or RetryPolicy()
        self.index_url = index_url  # None: pip's configuration
        self.project_root = project_root  # where a project .npmrc and local sources are
        self.environ = environ  # where Maven and npm settings are read from; None: os.environ
        self._lock = threading.RLock()
        self._registries: dict[str, Registry] = {}
        self._configs: dict[str, object] = {}
        self._sessions: dict[str, requests.Session] = {}

    def registry_for(self, origin: Coordinates | str) -> Registry:
        """The registry of an origin (or of a kind: "pypi", "maven", "npm", "url", "path")."""
        kind = origin if isinstance(origin, str) else origin.kind
        with self._lock:
            if kind not in self._registries:
                self._registries[kind] = _make(kind, self)
            return self._registries[kind]

    def _config(self, kind: str, read: Callable[[], T], cls: type[T]) -> T:
        with self._lock:
            if kind not in self._configs:
                try:
                    self._configs[kind] = read()
                except ConfigError as exc:
                    self._configs[kind] = exc
            found = self._configs[kind]
        if isinstance(found, ConfigError):
            raise found
        assert isinstance(found, cls)
        return found

    def session(self, kind: str, cert: str | None = None) -> requests.Session:
        """One HTTP session per ecosystem: each has its own CA bundle setting."""
        from ortbundle.fetch.http import new_session

        with self._lock:
            if kind not in self._sessions:
                self._sessions[kind] = new_session(cert)
            return self._sessions[kind]

    def pip(self) -> tuple[IndexConfig, requests.Session]:
        from ortbundle.fetch.config.pip import IndexConfig, index_config

        config = self._config("pypi", lambda: index_config(self.index_url), IndexConfig)
        return config, self.session("pypi", config.cert)

    def maven(self) -> tuple[MavenConfig, requests.Session]:
        from ortbundle.fetch.config.maven import MavenConfig, maven_config

        config = self._config("maven", lambda: maven_config(self.environ), MavenConfig)
        return config, self.session("maven")

    def npm(self) -> tuple[NpmConfig, requests.Session]:
        from ortbundle.fetch.config.npm import NpmConfig, npm_config

        config = self._config("npm", lambda: npm_config(self.project_root, self.environ), NpmConfig)
        return config, self.session("npm", config.cert)

    def close(self) -> None:
        with self._lock:
            for session in self._sessions.values():
                session.close()
            self._sessions.clear()


def _make(kind: str, registries: Registries) -> Registry:
    if kind == "pypi":
        from ortbundle.fetch.index import PypiRegistry

        return PypiRegistry(registries)
    if kind == "maven":
        from ortbundle.fetch.maven import MavenRegistry

        return MavenRegistry(registries)
    if kind == "npm":
        from ortbundle.fetch.npm import NpmRegistry

        return NpmRegistry(registries)
    if kind == "url":
        from ortbundle.fetch.url import UrlRegistry

        return UrlRegistry(registries)
    if kind == "path":
        from ortbundle.fetch.local import LocalRegistry

        return LocalRegistry(registries)
    raise ConfigError(f"ortbundle cannot fetch sources of kind {kind!r}")


def no_versions(kind: str, project: str) -> ConfigError:
    """A kind no registry publishes versions of (a plain URL, a file of the project)."""
    return ConfigError(
        f"{project} is a {kind} source: no registry publishes versions of it, so there is "
        "nothing to move it to",
        fix="edit its sha256 (and size) by hand",
    )
