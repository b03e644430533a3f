"""What one pin run shares: its options, and the registries it asks (through fetch/'s
Registries), each project read once and a registry that did not answer not asked again."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ortbundle.config.retry import RetryPolicy
from ortbundle.config.sources import (
    Coordinates,
    MavenCoordinates,
    NpmCoordinates,
    PypiCoordinates,
    Source,
)


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
