"""The fetch step: every source of the plan downloaded once into the content-addressed cache,
its SHA-256 checked before anything uses it. Its entry is `fetch_sources`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ortbundle._core.progress import Reporter
from ortbundle._core.words import plural
from ortbundle.config.retry import RetryPolicy
from ortbundle.config.sources import Source
from ortbundle.fetch.artifacts import Artifact, Fetcher
from ortbundle.fetch.cache import Cache, default_cache_dir

__all__ = ["FetchSettings", "fetch_line", "fetch_sources"]


@dataclass(frozen=True)
class FetchSettings:
    """Where the cache is and how the registries are reached."""

    project_root: Path  # local sources and the project's own .npmrc
    cache_dir: Path | None = None  # None: the default cache
    verify_all: bool = False  # re-hash every cache entry before use (a release)
    offline: bool = False
    index_url: str | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    environ: Mapping[str, str] | None = None  # None: os.environ
    workers: int = 1


def fetch_sources(
    sources: Iterable[tuple[str, Source]], settings: FetchSettings, reporter: Reporter
) -> dict[str, Artifact]:
    """Every (component, source), verified, by SHA-256; a nested source's inner archive comes
    back too, under its own SHA-256."""
    cache = Cache(settings.cache_dir or default_cache_dir(), verify_all=settings.verify_all)
    fetcher = Fetcher(
        cache,
        reporter,
        offline=settings.offline,
        index_url=settings.index_url,
        policy=settings.retry,
        project_root=settings.project_root,
        environ=settings.environ,
    )
    return fetcher.fetch_all(sources, jobs=settings.workers)


def fetch_line(artifacts: Mapping[str, Artifact]) -> str:
    """What the fetch verified, counted as the plan counts it: the downloads (the archives
    nested in them apart), and how many of them came over the network."""
    outer = [a for sha256, a in artifacts.items() if sha256 == a.source.sha256]
    nested = len(artifacts) - len(outer)
    inside = f" (and {plural(nested, 'archive')} nested in them)" if nested else ""
    fetched = sum(1 for a in outer if a.downloaded)
    return f"{plural(len(outer), 'download')} verified{inside}, {fetched} downloaded"
