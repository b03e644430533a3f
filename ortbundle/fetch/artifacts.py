"""Fetch pinned sources: from the cache when it holds them, else resolve and download once.

A source is a PyPI wheel (through pip's index configuration), a Maven artifact (through Maven's
repositories) or an npm tarball (through npm's registry); whichever it is, the cache key is the
pinned SHA-256 of the fetched file, and only bytes that match it are stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ortbundle._core.errors import OfflineError, OrtbundleError
from ortbundle.config.retry import RetryPolicy
from ortbundle.config.sources import LocalCoordinates, Source
from ortbundle.fetch import Registries
from ortbundle.fetch.cache import Cache
from ortbundle.fetch.config.urls import redact
from ortbundle.fetch.nested import unnest
from ortbundle.fetch.registry import Artifact as Artifact  # re-exported: builds take it from here
from ortbundle.fetch.registry import Fetched, ProgressFn

if TYPE_CHECKING:
    from ortbundle._core.progress import Reporter

# The HTTP stack (requests, urllib3, the index, Maven, npm and download code) is imported only
# when an artifact is missing from the cache (Registries makes a registry on first use): a warm
# build never pays for it. So is each ecosystem's configuration: a build of wheels alone never
# reads settings.xml or asks npm.


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
        registries: Registries | None = None,
    ) -> None:
        self.cache = cache
        self.reporter = reporter
        self.offline = offline
        self.policy = policy or RetryPolicy()
        self.project_root = project_root  # where local sources and a project .npmrc are
        # each ecosystem's configuration and session, made when something must be downloaded
        self.registries = registries or Registries(
            policy=self.policy, index_url=index_url, project_root=project_root, environ=environ
        )

    def _warn(self, message: str) -> None:
        self.reporter.line(f"warning: {message}")

    def fetch(self, source: Source, *, component: str) -> Artifact:
        cached = self.cache.get(source.sha256)
        if cached is not None:
            return Artifact(source, cached.path, cached.url, cached.size, downloaded=False)
        local = isinstance(source.origin, LocalCoordinates)
        if self.offline and not local:
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
                fetched = self._download(source, progress=not local)
            except OrtbundleError as exc:
                exc.component = exc.component or component
                raise
            url = fetched.url if local else redact(fetched.url)
            entry = self.cache.store(fetched.downloaded.path, source.sha256, url=url)
        return Artifact(source, entry.path, entry.url, entry.size, downloaded=True)

    def _download(self, source: Source, *, progress: bool) -> Fetched:
        """Through the source's registry into the cache's partial file: the verified file and
        the URL that served it. A local source is copied, with no progress to show."""
        registry = self.registries.registry_for(source.origin)
        partial = self.cache.partial_path(source.sha256)
        with self._progress(source, shown=progress) as update:
            return registry.download(
                source.origin,
                source.sha256,
                partial,
                size=source.size,
                progress=update,
                warn=self._warn,
            )

    @contextmanager
    def _progress(self, source: Source, *, shown: bool = True) -> Iterator[ProgressFn | None]:
        """The reporter's progress for one download, finished however the download ends."""
        if not shown:
            yield None
            return
        update, finish = self.reporter.download(source.filename)
        try:
            yield update
        finally:
            finish()

    def fetch_all(self, wanted: Iterable[tuple[str, Source]], *, jobs: int) -> dict[str, Artifact]:
        """Fetch every (component, source) once, in parallel; keyed by SHA-256.

        A nested source's inner archive (an AAR inside an npm tarball) is unpacked by the same
        worker as soon as the outer one is in, beside the other downloads, and keyed by its own
        SHA-256: walking a 400 MB tarball was a second-long step after all of them."""
        unique: dict[tuple[str, str], tuple[str, Source]] = {}
        for component, source in wanted:
            unique.setdefault((source.sha256, source.archive_sha256), (component, source))
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            # the largest first (a nested one also waits for its unpacking): no big download
            # is left to start last while the other worker idles
            order = sorted(unique.items(), key=lambda i: (-(i[1][1].size or 0), i[0]))
            futures = [
                pool.submit(self._fetch_unnested, source, component)
                for _, (component, source) in order
            ]
            return {sha: artifact for future in futures for sha, artifact in future.result()}

    def _fetch_unnested(self, source: Source, component: str) -> list[tuple[str, Artifact]]:
        outer = self.fetch(source, component=component)
        if not source.nested:
            return [(source.sha256, outer)]
        inner = unnest(self.cache, outer, component=component)
        return [(source.sha256, outer), (source.archive_sha256, inner)]
