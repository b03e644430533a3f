"""An npm registry on 127.0.0.1 with scriptable faults, for fetch tests.

Serves package documents at `<prefix>/<name>` (a scoped name as `@scope%2fname` or
`@scope/name`) and tarballs at `<prefix>/<name>/-/<basename>-<version>.tgz`, with the
`integrity` (sha512 SRI) and `shasum` (sha1) npm publishes.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from tests.helpers.loopback import LoopbackServer, QuietHandler


def make_tarball(package: str, version: str, files: dict[str, bytes] | None = None) -> bytes:
    """A gzipped tarball as `npm pack` lays it out: every entry under package/."""
    members = {
        "package/package.json": json.dumps({"name": package, "version": version}).encode(),
        **{f"package/{name}": data for name, data in (files or {}).items()},
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 499162500  # npm's fixed date (1985-10-26)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def sri(algorithm: str, data: bytes) -> str:
    return f"{algorithm}-{base64.b64encode(hashlib.new(algorithm, data).digest()).decode()}"


@dataclass
class NpmFaults:
    """What the registry does wrong."""

    wrong_integrity: bool = False  # integrity names other bytes
    wrong_shasum: bool = False  # shasum names other bytes
    no_digests: bool = False  # neither integrity nor shasum
    hidden_versions: set[str] = field(default_factory=set)  # left out of the document
    token: str | None = None  # every request must carry "Bearer <token>"
    tarball_base: str | None = None  # link tarballs at this absolute base URL instead


class NpmServer(LoopbackServer):
    """An npm registry under `/<prefix>/` on 127.0.0.1."""

    def __init__(self, prefix: str = "npm") -> None:
        super().__init__()
        self.prefix = prefix
        self.packages: dict[str, dict[str, bytes]] = {}  # name → version → tarball
        self.faults = NpmFaults()
        self.requests: list[tuple[str, str | None, str | None]] = []  # (path, Accept, Auth)

    @property
    def url(self) -> str:
        """The registry URL, with the trailing slash npm writes."""
        return f"{self.origin}/{self.prefix}/"

    def add(self, package: str, version: str, tarball: bytes) -> None:
        self.packages.setdefault(package, {})[version] = tarball

    def tarball_path(self, package: str, version: str) -> str:
        return f"{package}/-/{package.rsplit('/', 1)[-1]}-{version}.tgz"

    def authorizations(self) -> list[str | None]:
        return [auth for _, _, auth in self.requests]

    def document(self, package: str) -> dict[str, Any]:
        faults = self.faults
        versions: dict[str, Any] = {}
        for version, data in self.packages[package].items():
            if version in faults.hidden_versions:
                continue
            base = faults.tarball_base or self.url
            dist: dict[str, str] = {"tarball": base + self.tarball_path(package, version)}
            if not faults.no_digests:
                digested = b"tampered" + data
                dist["integrity"] = sri("sha512", digested if faults.wrong_integrity else data)
                sha1 = hashlib.sha1(digested if faults.wrong_shasum else data).hexdigest()
                dist["shasum"] = sha1
            versions[version] = {"name": package, "version": version, "dist": dist}
        releases = [v for v in versions if "-" not in v]
        latest = max(releases, default="", key=lambda v: tuple(int(p) for p in v.split(".")))
        return {"name": package, "dist-tags": {"latest": latest}, "versions": versions}

    @contextmanager
    def running(self) -> Iterator[NpmServer]:
        registry = self

        class Handler(QuietHandler):
            content_type = "application/json"

            def do_GET(self) -> None:
                authorization = self.headers.get("Authorization")
                registry.requests.append((self.path, self.headers.get("Accept"), authorization))
                if registry.faults.token and authorization != f"Bearer {registry.faults.token}":
                    return self.send(401, b'{"error":"unauthorized"}')
                head = f"/{registry.prefix}/"
                if not self.path.startswith(head):
                    return self.send(404, b'{"error":"not found"}')
                path = unquote(self.path[len(head) :])  # @scope%2fname → @scope/name
                if path in registry.packages:
                    body = json.dumps(registry.document(path)).encode()
                    return self.send(200, body, "application/vnd.npm.install-v1+json")
                for package, versions in registry.packages.items():
                    for version, data in versions.items():
                        if path == registry.tarball_path(package, version):
                            return self.send(200, data, "application/octet-stream")
                return self.send(404, b'{"error":"not found"}')

        with self.serving(Handler):
            yield self
