"""Resolve coordinates to URLs, download once, keep verified bytes in a content-addressed cache.

This package face holds `Registries`, the one way ortbundle reaches where sources come from:
the Fetcher and `invoke pin` ask it for the registry of an origin. It is the one module of the
package that imports others of it inside functions, on purpose: each registry kind (and with
it the HTTP stack) and each ecosystem's configuration reader is imported the first time a
download needs it, so planning a build, a no-op and a warm build import none of them. No module
of the package imports from here but the Fetcher, which sits above every registry.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ortbundle._core.errors import ConfigError
from ortbundle.config.retry import RetryPolicy

if TYPE_CHECKING:
    import requests

    from ortbundle.config.sources import Coordinates
    from ortbundle.fetch.config.maven import MavenConfig
    from ortbundle.fetch.config.npm import NpmConfig
    from ortbundle.fetch.config.pip import IndexConfig
    from ortbundle.fetch.registry import Registry

T = TypeVar("T")


class Registries:
    """Each kind's Registry, made on first use; each ecosystem's configuration read once and its
    HTTP session made once (a configuration error is remembered, not re-read). Thread-safe: the
    Fetcher's workers share it. A registry reaches its configuration and session through it
    (the `Sources` protocol of registry.py)."""

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
        from ortbundle.fetch.http import new_session  # requests: only when a download needs it

        with self._lock:
            if kind not in self._sessions:
                self._sessions[kind] = new_session(cert)
            return self._sessions[kind]

    def pip(self) -> tuple[IndexConfig, requests.Session]:
        from ortbundle.fetch.config.pip import IndexConfig, index_config  # asks pip: on first use

        config = self._config("pypi", lambda: index_config(self.index_url), IndexConfig)
        return config, self.session("pypi", config.cert)

    def maven(self) -> tuple[MavenConfig, requests.Session]:
        from ortbundle.fetch.config.maven import MavenConfig, maven_config  # the XML reader

        config = self._config("maven", lambda: maven_config(self.environ), MavenConfig)
        return config, self.session("maven")

    def npm(self) -> tuple[NpmConfig, requests.Session]:
        from ortbundle.fetch.config.npm import NpmConfig, npm_config  # the .npmrc reader

        config = self._config("npm", lambda: npm_config(self.project_root, self.environ), NpmConfig)
        return config, self.session("npm", config.cert)

    def close(self) -> None:
        with self._lock:
            for session in self._sessions.values():
                session.close()
            self._sessions.clear()


def _make(kind: str, registries: Registries) -> Registry:
    """A registry of `kind`, its module imported now (the HTTP stack with it)."""
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
