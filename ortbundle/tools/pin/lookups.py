"""pin's registry look-ups, public to every tool that pins: the registries of one run (each
project read once, a registry that did not answer not asked again), the wheels a project page
lists, the digest an index publishes, the newest release, and downloading a version not pinned
yet into the cache. `invoke pin` and `invoke new-recipe` both ask through here."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from packaging.tags import Tag
from packaging.utils import BuildTag
from packaging.version import Version

from ortbundle._core.errors import FetchError, IntegrityError, OrtbundleError
from ortbundle._core.progress import Reporter
from ortbundle.config.sources import Coordinates, Source
from ortbundle.fetch import Registries
from ortbundle.fetch.cache import Cache
from ortbundle.fetch.config.urls import redact
from ortbundle.fetch.index import wheel_name
from ortbundle.fetch.registry import Digests, Published, Registry
from ortbundle.tools.pin.options import PinOptions, project_of

__all__ = [
    "Listed",
    "Lookups",
    "download_new",
    "listed_files",
    "lookups",
    "newest_release",
    "published_sha256",
]


class Lookups:
    """The registries of one pin or new-recipe run."""

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
class Listed:
    """One wheel a project page lists."""

    filename: str
    url: str
    version: Version
    build: BuildTag
    tags: frozenset[Tag]
    sha256: str | None
    size: int | None  # PEP 700, when the index publishes it
    yanked: bool


def listed_files(found: Lookups, project: str) -> tuple[Listed, ...]:
    """Every wheel of `project` the configured indexes list, as pin compares them."""
    published = found.registry("pypi").versions(project)
    out = []
    for entry in published.files if published else ():
        wheel = wheel_name(entry.filename)
        if wheel is not None:
            out.append(
                Listed(
                    entry.filename,
                    entry.url,
                    wheel[1],
                    wheel[2],
                    wheel[3],
                    entry.hashes.get("sha256"),
                    entry.size,
                    entry.yanked,
                )
            )
    return tuple(out)


def published_sha256(found: Listed, component: str, who: str = "pin") -> str:
    """The digest the index publishes for a wheel: nothing is pinned that it cannot check."""
    if found.sha256 is None:
        raise IntegrityError(
            f"the index publishes no sha256 for {found.filename}; {who} does not trust a "
            "download it cannot check",
            component=component,
            file=found.filename,
            fix="use an index that publishes digests (PEP 503 #sha256= or PEP 691 hashes)",
        )
    return found.sha256


def newest_release(
    registry: Registry,
    versions: Sequence[str],
    pinned: Sequence[str],
    lacking: Mapping[str, Sequence[str]],
) -> tuple[str | None, list[str]]:
    """The newest version to move to and why newer ones lost. Pre-releases count only when a
    pin already is one; `lacking` maps a version to the sources it is not published for."""
    pre_ok = any(registry.is_prerelease(v) for v in pinned)
    snapshot_ok = any(v.upper().endswith("SNAPSHOT") for v in pinned)
    notes: list[str] = []
    for version in sorted(versions, key=registry.version_key, reverse=True):
        snapshot = version.upper().endswith("SNAPSHOT")
        if (snapshot and not snapshot_ok) or (registry.is_prerelease(version) and not pre_ok):
            notes.append(f"{version} skipped: {'SNAPSHOT' if snapshot else 'pre-release'}")
            continue
        if lacking.get(version):
            notes.append(
                f"{version} skipped: not published for source {', '.join(lacking[version])}"
            )
            continue
        return version, notes
    return None, notes


def download_new(
    source: Source, origin: Coordinates, cache: Cache, reporter: Reporter, ask: Lookups
) -> str:
    """Download `origin` (a version not pinned yet) into the cache, checked against the
    digests its registry publishes: its SHA-256."""
    partial = cache.root / "partial" / f"pin-{os.getpid()}-{source.id}.part"
    update, finish = reporter.download(origin.filename)
    try:
        fetched = ask.registry(origin).download(origin, None, partial, progress=update)
    except OrtbundleError:
        partial.unlink(missing_ok=True)
        raise
    finally:
        finish()
    done = fetched.downloaded
    cache.adopt(done.path, done.sha256, url=redact(fetched.url))
    return done.sha256
