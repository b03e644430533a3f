"""Fetch pinned sources: from the cache when it holds them, else resolve and download once."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ortbundle.errors import OfflineError, OrtbundleError
from ortbundle.fetch.cache import Cache
from ortbundle.fetch.config import IndexConfig, index_config, redact
from ortbundle.fetch.policy import RetryPolicy
from ortbundle.recipes import Source

if TYPE_CHECKING:
    import requests

    from ortbundle.progress import Reporter

# The HTTP stack (requests, urllib3, the index and download code) is imported only when an
# artifact is missing from the cache: a warm build never pays for it.


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
    ) -> None:
        self.cache = cache
        self.reporter = reporter
        self.offline = offline
        self.explicit_index_url = index_url
        self.policy = policy or RetryPolicy()
        self._config: IndexConfig | None = None
        self._session: requests.Session | None = None

    def _network(self) -> tuple[IndexConfig, requests.Session]:
        """Index configuration and HTTP session, made only when something must be downloaded."""
        if self._config is None or self._session is None:
            import requests

            self._config = index_config(self.explicit_index_url)
            session = requests.Session()
            session.headers["User-Agent"] = "ortbundle"
            if self._config.cert:
                session.verify = self._config.cert
            self._session = session
        return self._config, self._session

    def fetch(self, source: Source, *, component: str) -> Artifact:
        cached = self.cache.get(source.sha256)
        if cached is not None:
            return Artifact(source, cached.path, cached.url, cached.size, downloaded=False)
        if self.offline:
            raise OfflineError(
                "offline build, and the cache lacks this artifact",
                component=component,
                file=source.filename,
                fix="run `invoke fetch` once with network access, or import a cache "
                "(`invoke cache-import`)",
            )
        from ortbundle.fetch.download import download
        from ortbundle.fetch.index import resolve

        config, session = self._network()
        with self.cache.lock(source.sha256):
            cached = self.cache.get(source.sha256)  # another build may have finished it
            if cached is not None:
                return Artifact(source, cached.path, cached.url, cached.size, downloaded=False)
            resolved = resolve(session, config.index_urls, source, self.policy, component=component)
            update, finish = self.reporter.download(source.filename)
            try:
                done = download(
                    session,
                    resolved.url,
                    self.cache.partial_path(source.sha256),
                    sha256=source.sha256,
                    expected_size=source.size,
                    policy=self.policy,
                    what=source.filename,
                    progress=update,
                )
            except OrtbundleError as exc:
                exc.component = exc.component or component
                raise
            finally:
                finish()
            entry = self.cache.store(done.path, source.sha256, url=redact(resolved.url))
        return Artifact(source, entry.path, entry.url, entry.size, downloaded=True)

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
