"""A Maven-layout repository on 127.0.0.1 with scriptable faults, for fetch tests.

Serves `<prefix>/<group path>/<artifact>/<version>/<artifact>-<version>.<packaging>` with its
`.pom`, `.sha1` (and, when asked, `.sha256`) sidecars and a `maven-metadata.xml` per artifact.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from tests.helpers.loopback import LoopbackServer, QuietHandler


@dataclass
class MavenFaults:
    """What the repository does wrong."""

    wrong_sha1: bool = False  # the .sha1 sidecar names other bytes
    no_sha1: bool = False  # 404 for .sha1
    sha256_sidecar: bool = False  # also publish .sha256 (Maven Central does not always)
    wrong_sha256: bool = False  # the .sha256 sidecar names other bytes
    sha1_with_filename: bool = False  # "hex  filename" instead of "hex"
    missing: set[str] = field(default_factory=set)  # file names answered with 404
    truncate_once: int | None = None  # send this many bytes of an artifact, then close (once)
    basic_auth: tuple[str, str] | None = None  # every request must carry these credentials
    status_first: list[int] = field(default_factory=list)  # answered before an artifact


@dataclass
class Published:
    group: str
    artifact: str
    versions: dict[str, bytes]  # version → artifact bytes
    packaging: str


class MavenServer(LoopbackServer):
    """A Maven repository layout under `/<prefix>/` on 127.0.0.1."""

    def __init__(self, prefix: str = "maven2") -> None:
        super().__init__()
        self.prefix = prefix
        self.files: dict[str, bytes] = {}  # path under the prefix → bytes
        self.published: dict[tuple[str, str], Published] = {}
        self.faults = MavenFaults()
        self.requests: list[tuple[str, str | None]] = []  # (path, Authorization)

    @property
    def url(self) -> str:
        return f"{self.origin}/{self.prefix}"

    def add(
        self, group: str, artifact: str, version: str, data: bytes, packaging: str = "aar"
    ) -> str:
        """Publish an artifact with its POM; returns its path under the repository root."""
        directory = f"{group.replace('.', '/')}/{artifact}/{version}"
        base = f"{directory}/{artifact}-{version}"
        self.files[f"{base}.{packaging}"] = data
        self.files[f"{base}.pom"] = (
            "<project><modelVersion>4.0.0</modelVersion>"
            f"<groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version><packaging>{packaging}</packaging></project>"
        ).encode()
        entry = self.published.setdefault(
            (group, artifact), Published(group, artifact, {}, packaging)
        )
        entry.versions[version] = data
        return f"{base}.{packaging}"

    def metadata(self, group: str, artifact: str) -> bytes:
        entry = self.published[(group, artifact)]
        versions = "".join(f"<version>{v}</version>" for v in entry.versions)
        newest = list(entry.versions)[-1]
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n<metadata>'
            f"<groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<versioning><latest>{newest}</latest><release>{newest}</release>"
            f"<versions>{versions}</versions><lastUpdated>20261129000000</lastUpdated>"
            "</versioning></metadata>"
        ).encode()

    def requested(self, suffix: str) -> int:
        return sum(1 for path, _ in self.requests if path.endswith(suffix))

    def _lookup(self, path: str) -> bytes | None:
        """The bytes at `path` (under the prefix), sidecars and metadata computed on demand."""
        name = path.rsplit("/", 1)[-1]
        if name in self.faults.missing:
            return None
        if path in self.files:
            return self.files[path]
        if name == "maven-metadata.xml":
            group_path, _, artifact = path.rsplit("/", 1)[0].rpartition("/")
            key = (group_path.replace("/", "."), artifact)
            return self.metadata(*key) if key in self.published else None
        for algorithm in ("sha1", "sha256"):
            if path.endswith(f".{algorithm}") and path[: -len(algorithm) - 1] in self.files:
                if algorithm == "sha1" and self.faults.no_sha1:
                    return None
                if algorithm == "sha256" and not self.faults.sha256_sidecar:
                    return None
                data = self.files[path[: -len(algorithm) - 1]]
                wrong = self.faults.wrong_sha1 if algorithm == "sha1" else self.faults.wrong_sha256
                digest = hashlib.new(algorithm, b"other" + data if wrong else data).hexdigest()
                tail = f"  {name[: -len(algorithm) - 1]}" if self.faults.sha1_with_filename else ""
                return f"{digest}{tail}\n".encode()
        return None

    @contextmanager
    def running(self) -> Iterator[MavenServer]:
        repo = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                authorization = self.headers.get("Authorization")
                repo.requests.append((self.path, authorization))
                if repo.faults.basic_auth is not None:
                    user, password = repo.faults.basic_auth
                    token = base64.b64encode(f"{user}:{password}".encode()).decode()
                    if authorization != f"Basic {token}":
                        realm = {"WWW-Authenticate": 'Basic realm="m"'}
                        return self.send(401, b"auth", headers=realm)
                head = f"/{repo.prefix}/"
                if not self.path.startswith(head):
                    return self.send(404, b"not found")
                path = self.path[len(head) :]
                data = repo._lookup(path)
                if data is None:
                    return self.send(404, b"not found")
                is_artifact = not path.endswith((".sha1", ".sha256", ".pom", ".xml"))
                if is_artifact and repo.faults.status_first:
                    return self.send(repo.faults.status_first.pop(0), b"fault")
                start = self.range_start(len(data))
                if start is None:
                    return None
                body = data[start:]
                self.begin_body(start, len(data), {"Content-Length": str(len(body))})
                cut = repo.faults.truncate_once
                if is_artifact and cut is not None:
                    repo.faults.truncate_once = None
                    return self.cut_off(body[:cut])
                self.wfile.write(body)
                return None

        with self.serving(Handler):
            yield self
