"""What one pin run shares: its options, and the registries it asks (through fetch/'s
Registries), each project read once and a registry that did not answer not asked again."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ortbundle._core.errors import FetchError, OrtbundleError
from ortbundle.config.recipes import (
    Coordinates,
    MavenCoordinates,
    NpmCoordinates,
    PypiCoordinates,
    Source,
)
from ortbundle.config.retry import RetryPolicy
from ortbundle.fetch import Registries
from ortbundle.fetch.registry import Digests, Published, Registry


@dataclass(frozen=True)
class PinOptions:
    version: str | None = None  # None: the newest release with a file for every moved source
    sources: tuple[str, ...] = ()  # move only these source ids (any project); else the main ones
    build: bool = True  # False (--no-build): skip the old/new comparison builds
    force: bool = False  # rewrite even when the new build fails
    index_url: str | None = None  # None: pip's configuration
    cache_dir: Path | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    jobs: int = 0
    # the comparison builds' environment, and where the Maven and npm settings are read from
    # (ORTBUNDLE_MAVEN_URL, settings.xml, .npmrc, HOME, PATH); None: os.environ
    environ: Mapping[str, str] | None = None


VERSIONED = ("pypi", "maven", "npm")  # the kinds a registry publishes versions of


def project_of(source: Source) -> str:
    """What moves together: a PyPI project, a Maven `group:artifact`, an npm package; a source
    of another kind (a plain URL, a file in the project) is its own."""
    origin = source.origin
    if isinstance(origin, MavenCoordinates):
        return f"{origin.group}:{origin.artifact}"
    if isinstance(origin, NpmCoordinates):
        return origin.package
    if isinstance(origin, PypiCoordinates):
        return origin.project
    return origin.describe()


def version_of(origin: Coordinates) -> str:
    """The pinned version; "" for a kind without versions."""
    return str(getattr(origin, "version", ""))


def names_of(origin: Coordinates) -> tuple[str, ...]:
    """How a licence rule or a version phrase may name the project: Maven's artifact alone too,
    an npm package without its scope too."""
    if isinstance(origin, MavenCoordinates):
        return (f"{origin.group}:{origin.artifact}", origin.artifact)
    if isinstance(origin, NpmCoordinates):
        bare = origin.package.rsplit("/", 1)[-1]
        return (origin.package, bare) if bare != origin.package else (origin.package,)
    if isinstance(origin, PypiCoordinates):
        return (origin.project,)
    return ()


class Lookups:
    """The registries of one pin run."""

    def __init__(self, options: PinOptions, root: Path | None) -> None:
        self.registries = Registries(
            policy=options.retry,
            index_url=options.index_url,
            project_root=root,
            environ=options.environ,
        )
        self._down: dict[str, OrtbundleError] = {}  # endpoint → why it is not asked again
        self._published: dict[str, Published | None] = {}

    def registry(self, origin: Coordinates | str) -> Registry:
        return self.registries.registry_for(origin)

    def where(self, kind: str, name: str) -> str:
        """Where a kind's settings say to look, without a URL (for a report line)."""
        try:
            return self.registry(kind).where(name)
        except OrtbundleError:
            return "not configured"

    def _guarded(self, registry: Registry, project: str) -> str:
        endpoint = registry.endpoint(project)
        if endpoint in self._down:
            raise self._down[endpoint]
        return endpoint

    def published(self, source: Source) -> Published | None:
        """The project's versions; None when the registry has no such project. Raises
        ConfigError (not configured) or FetchError (did not answer) otherwise."""
        project = project_of(source)
        key = f"{source.origin.kind}:{project}"
        if key not in self._published:
            registry = self.registry(source.origin)
            endpoint = self._guarded(registry, project)
            try:
                self._published[key] = registry.versions(project)
            except FetchError as exc:
                self._down[endpoint] = exc
                raise
        return self._published[key]

    def digests(self, source: Source) -> Digests | None:
        """What the registry publishes for the pinned file; None when it is not there."""
        registry = self.registry(source.origin)
        self._guarded(registry, project_of(source))
        return registry.published_digests(source.origin)

    def close(self) -> None:
        self.registries.close()


@contextmanager
def lookups(options: PinOptions, root: Path | None) -> Iterator[Lookups]:
    found = Lookups(options, root)
    try:
        yield found
    finally:
        found.close()


@dataclass(frozen=True)
class PinStatus:
    component: str
    source: str
    project: str  # a PyPI project, a Maven group:artifact, an npm package
    version: str
    filename: str
    # current, held, stale (newer release), unpinned (no sha256/size), gone, mismatch,
    # unreachable (not checked: the registry is not configured or did not answer)
    state: str
    details: tuple[str, ...]
    newest: str | None  # the newest release with a file for this source, when newer
    command: str  # what moves it (for unreachable: what to configure)
    kind: str = "pypi"  # pypi, maven, npm
