"""Fetch pinned sources: from the cache when it holds them, else resolve and download once.

A source is a PyPI wheel (through pip's index configuration), a Maven artifact (through Maven's
repositories) or an npm tarball (through npm's registry); whichever it is, the cache key is the
pinned SHA-256 of the fetched file, and only bytes that match it are stored.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ortbundle.archives import copy_hashing
from ortbundle.errors import ConfigError, IntegrityError, OfflineError, OrtbundleError
from ortbundle.fetch.cache import Cache
from ortbundle.fetch.config import (
    IndexConfig,
    MavenConfig,
    NpmConfig,
    index_config,
    maven_config,
    npm_config,
    redact,
)
from ortbundle.fetch.policy import RetryPolicy
from ortbundle.recipes import (
    LocalCoordinates,
    MavenCoordinates,
    NpmCoordinates,
    PypiCoordinates,
    Source,
    UrlCoordinates,
)

if TYPE_CHECKING:
    import requests

    from ortbundle.fetch.download import Downloaded, ProgressFn
    from ortbundle.progress import Reporter

# The HTTP stack (requests, urllib3, the index, Maven, npm and download code) is imported only
# when an artifact is missing from the cache: a warm build never pays for it. So is each
# ecosystem's configuration: a build of wheels alone never reads settings.xml or asks npm.


@dataclass(frozen=True)
class Artifact:
    """A verified upstream file on local disk."""

    source: Source
    path: Path
    url: str
    size: int
    downloaded: bool  # False when the cache already held it


class Fetcher:
    def __init__(
        self,
        cache: Cache,
        reporter: Reporter,
        *,
        offline: bool = False,
        index_url: str | None = None,
        policy: RetryPolicy | None = None,
        project_root: Path | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.cache = cache
        self.reporter = reporter
        self.offline = offline
        self.explicit_index_url = index_url
        self.policy = policy or RetryPolicy()
        self.project_root = project_root  # where a project .npmrc is looked for
        self.environ = environ  # where Maven and npm settings are read from; None: os.environ
        self._lock = threading.Lock()  # fetch_all's workers share the lazily made state below
        self._config: IndexConfig | None = None
        self._maven: MavenConfig | None = None
        self._npm: NpmConfig | None = None
        self._sessions: dict[str, requests.Session] = {}

    def _session(self, kind: str, cert: str | None) -> requests.Session:
        """One HTTP session per ecosystem: each has its own CA bundle setting."""
        session = self._sessions.get(kind)
        if session is None:
            import requests

            session = requests.Session()
            session.headers["User-Agent"] = "ortbundle"
            if cert:
                session.verify = cert
            self._sessions[kind] = session
        return session

    def _network(self) -> tuple[IndexConfig, requests.Session]:
        """Index configuration and HTTP session, made only when something must be downloaded."""
        with self._lock:
            if self._config is None:
                self._config = index_config(self.explicit_index_url)
            return self._config, self._session("pypi", self._config.cert)

    def _maven_network(self) -> tuple[MavenConfig, requests.Session]:
        with self._lock:
            if self._maven is None:
                self._maven = maven_config(self.environ)
            return self._maven, self._session("maven", None)

    def _npm_network(self) -> tuple[NpmConfig, requests.Session]:
        with self._lock:
            if self._npm is None:
                self._npm = npm_config(self.project_root, self.environ)
            return self._npm, self._session("npm", self._npm.cert)

    def _warn(self, message: str) -> None:
        self.reporter.line(f"warning: {message}")

    def fetch(self, source: Source, *, component: str) -> Artifact:
        cached = self.cache.get(source.sha256)
        if cached is not None:
            return Artifact(source, cached.path, cached.url, cached.size, downloaded=False)
        if isinstance(source.origin, LocalCoordinates):
            return self._local(source, source.origin, component)
        if self.offline:
            raise OfflineError(
                "offline build, and the cache lacks this artifact",
                component=component,
                file=source.filename,
                fix="run `invoke fetch` once with network access, or import a cache "
                "(`invoke cache-import`)",
            )
        with self.cache.lock(source.sha256):
            cached = self.cache.get(source.sha256)  # another build may have finished it
            if cached is not None:
                return Artifact(source, cached.path, cached.url, cached.size, downloaded=False)
            try:
                url, done = self._download(source, component)
            except OrtbundleError as exc:
                exc.component = exc.component or component
                raise
            entry = self.cache.store(done.path, source.sha256, url=redact(url))
        return Artifact(source, entry.path, entry.url, entry.size, downloaded=True)

    def _download(self, source: Source, component: str) -> tuple[str, Downloaded]:
        """Resolve the source through its ecosystem and download it into the cache's partial
        file: (the URL that served it, the verified file)."""
        origin = source.origin
        partial = self.cache.partial_path(source.sha256)
        if isinstance(origin, PypiCoordinates | UrlCoordinates):
            from ortbundle.fetch.download import download
            from ortbundle.fetch.index import resolve

            # a plain URL uses pip's session too (its CA bundle); the URL is the recipe's own
            config, session = self._network()
            url = (
                origin.url
                if isinstance(origin, UrlCoordinates)
                else resolve(
                    session, config.index_urls, source, self.policy, component=component
                ).url
            )
            with self._progress(source) as update:
                done = download(
                    session,
                    url,
                    partial,
                    sha256=source.sha256,
                    expected_size=source.size,
                    policy=self.policy,
                    what=source.filename,
                    progress=update,
                )
            return url, done
        if isinstance(origin, MavenCoordinates):
            from ortbundle.fetch.maven import fetch_maven

            maven, session = self._maven_network()
            with self._progress(source) as update:
                fetched = fetch_maven(
                    session,
                    maven.repositories,
                    source,
                    partial,
                    self.policy,
                    progress=update,
                    warn=self._warn,
                )
            return fetched.url, fetched.downloaded
        if isinstance(origin, NpmCoordinates):
            from ortbundle.fetch.npm import fetch_npm

            npm, session = self._npm_network()
            with self._progress(source) as update:
                got = fetch_npm(
                    session, npm, source, partial, self.policy, progress=update, warn=self._warn
                )
            return got.url, got.downloaded
        raise ConfigError(  # pragma: no cover - recipes.py admits no other origin
            f"source {source.id} comes from {origin.kind}, which ortbundle cannot fetch",
            file=source.filename,
        )

    def _local(self, source: Source, origin: LocalCoordinates, component: str) -> Artifact:
        """A file of the project: copied into the cache while hashed, so it is pinned and
        re-verified exactly like a download."""
        if self.project_root is None:
            raise ConfigError(
                "a source with a local path needs the project root",
                component=component,
                file=origin.path,
            )
        path = self.project_root / origin.path
        root = self.project_root.resolve()
        if path.is_symlink() or not path.resolve().is_relative_to(root):
            raise ConfigError(
                f"local source {origin.path} is a link or leads out of the project",
                component=component,
                file=str(path),
                fix="keep the file itself in the project (a local source is the project's own)",
            )
        if not path.is_file():
            raise ConfigError(
                f"local source {origin.path} does not exist",
                component=component,
                file=str(path),
                fix="add the file to the project, or correct the recipe's path",
            )
        with self.cache.lock(source.sha256):
            partial = self.cache.partial_path(source.sha256)
            partial.parent.mkdir(parents=True, exist_ok=True)
            with path.open("rb") as stream, partial.open("wb") as out:
                size, sha256 = copy_hashing(stream, out)
            if (source.size is not None and size != source.size) or sha256 != source.sha256:
                partial.unlink()
                raise IntegrityError(
                    f"local source {origin.path} has sha256 {sha256} ({size} bytes), the "
                    f"recipe pins {source.sha256}",
                    component=component,
                    file=str(path),
                    fix="the file changed: check it, then re-pin its sha256 in the recipe",
                )
            entry = self.cache.store(partial, source.sha256, url=f"path:{origin.path}")
        return Artifact(source, entry.path, entry.url, entry.size, downloaded=True)

    @contextmanager
    def _progress(self, source: Source) -> Iterator[ProgressFn]:
        """The reporter's progress for one download, finished however the download ends."""
        update, finish = self.reporter.download(source.filename)
        try:
            yield update
        finally:
            finish()

    def fetch_all(self, wanted: Iterable[tuple[str, Source]], *, jobs: int) -> dict[str, Artifact]:
        """Fetch every (component, source) once, in parallel; keyed by SHA-256."""
        unique: dict[str, tuple[str, Source]] = {}
        for component, source in wanted:
            unique.setdefault(source.sha256, (component, source))
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = {
                sha: pool.submit(self.fetch, source, component=component)
                for sha, (component, source) in sorted(unique.items())
            }
            return {sha: future.result() for sha, future in futures.items()}
