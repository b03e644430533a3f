"""A PyPI index (PEP 691 JSON, PEP 503 HTML): a pinned wheel to its URL, a project to its wheels.

The index's published sha256 is checked against the pin before a byte is downloaded; an https
index that links a file over http is refused.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

from packaging.tags import Tag
from packaging.utils import (
    BuildTag,
    InvalidWheelFilename,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from ortbundle._core.errors import FetchError
from ortbundle._core.words import plural
from ortbundle.config.sources import Coordinates, PypiCoordinates
from ortbundle.fetch.config.urls import redact
from ortbundle.fetch.download import ProgressFn, download
from ortbundle.fetch.http import NotFound, request_with_retries
from ortbundle.fetch.registry import (
    Fetched,
    IndexFile,
    Location,
    Published,
    RegistryBase,
    Sources,
    _ignore,
)
from ortbundle.fetch.trust import Voice, reconcile

ACCEPT = (
    "application/vnd.pypi.simple.v1+json, "
    "application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
)


class _AnchorParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.anchors: list[tuple[str, str, bool]] = []  # href, text, yanked
        self._href: str | None = None
        self._yanked = False
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            values = dict(attrs)
            self._href = values.get("href") or ""
            self._yanked = "data-yanked" in values  # present, even empty, means yanked
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.anchors.append((self._href, "".join(self._text).strip(), self._yanked))
            self._href = None


def parse_project_page(body: bytes, content_type: str, page_url: str) -> list[IndexFile]:
    """Files listed on a project page, with absolute URLs and any published digests."""
    if "json" in content_type:
        try:
            data = json.loads(body)
            files = data["files"]
            return [
                IndexFile(
                    filename=str(f["filename"]),
                    url=urljoin(page_url, str(f["url"])),
                    hashes={str(k): str(v).lower() for k, v in dict(f.get("hashes", {})).items()},
                    yanked=f.get("yanked", False) is True or isinstance(f.get("yanked"), str),
                    size=f["size"] if type(f.get("size")) is int else None,
                )
                for f in files
            ]
        except (ValueError, KeyError, TypeError) as exc:
            raise FetchError(
                f"the index answered with malformed PEP 691 JSON ({exc})", file=redact(page_url)
            ) from None
    parser = _AnchorParser()
    parser.feed(body.decode("utf-8", errors="replace"))
    result = []
    for href, text, yanked in parser.anchors:
        url, fragment = urldefrag(urljoin(page_url, href))
        filename = text or url.rsplit("/", 1)[-1]
        hashes = {}
        if "=" in fragment:
            algo, _, value = fragment.partition("=")
            hashes[algo] = value.lower()
        result.append(IndexFile(filename=filename, url=url, hashes=hashes, yanked=yanked))
    return result


WheelName = tuple[str, Version, BuildTag, frozenset[Tag]]


def wheel_name(filename: str) -> WheelName | None:
    """(project, version, build tag, tags) of a wheel's file name; None for anything else."""
    if not filename.endswith(".whl"):
        return None
    try:
        return parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None


def version_or_none(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


class PypiRegistry(RegistryBase[PypiCoordinates]):
    """The configured indexes (pip's configuration, or --index-url): the first to list a pinned
    file serves it; a project's wheels are merged over all of them, each page read once."""

    coordinates = PypiCoordinates
    describes = "a PyPI file"
    kind = "pypi"

    def __init__(self, registries: Sources) -> None:
        super().__init__(registries)
        self._lock = threading.Lock()
        self._published: dict[str, Published | None] = {}

    def _page(self, index_url: str, project: str) -> list[IndexFile] | None:
        """The files a project page lists; None when the index has no such project."""
        _config, session = self.registries.pip()
        response = request_with_retries(
            session,
            index_url.rstrip("/") + f"/{canonicalize_name(project)}/",
            self.policy,
            headers={"Accept": ACCEPT},
            what=f"index page for {project}",
            allow_404=True,
        )
        if response is None:
            return None
        ctype = response.headers.get("Content-Type", "")
        return parse_project_page(response.content, ctype, response.url)

    def where(self, project: str) -> str:
        return ", ".join(self.registries.pip()[0].index_urls)

    def endpoint(self, project: str) -> str:
        return "pypi " + self.where(project)

    def resolve(self, coords: Coordinates) -> Location:
        """The first index listing the file; refuses an https index linking it over http."""
        coords = self.own(coords)
        config, _session = self.registries.pip()
        looked: list[str] = []
        for index_url in config.index_urls:
            files = self._page(index_url, coords.project)
            if files is None:
                looked.append(f"{_host(index_url)} (no such project)")
                continue
            for entry in files:
                if entry.filename != coords.filename:
                    continue
                if urlsplit(index_url).scheme == "https" and urlsplit(entry.url).scheme != "https":
                    raise FetchError(
                        f"the https index links {coords.filename} over "
                        f"{urlsplit(entry.url).scheme or 'a relative'} URL {redact(entry.url)}",
                        file=coords.filename,
                        fix="the index downgrades the download; use an index or mirror that "
                        "links files over https, or configure it as http explicitly if that is "
                        "intended",
                    )
                digests = {k: frozenset({v}) for k, v in entry.hashes.items()}
                return Location(entry.url, digests)
            looked.append(f"{_host(index_url)} ({plural(len(files), 'file')}, not this one)")
        raise NotFound(
            f"{coords.filename} is not in the configured index: looked in {'; '.join(looked)}",
            file=coords.filename,
            fix="check the pin's filename, or point PIP_INDEX_URL / --index-url at an index "
            "that carries it",
        )

    def download(
        self,
        coords: Coordinates,
        expected_sha256: str | None,
        partial: Path,
        *,
        size: int | None = None,
        progress: ProgressFn | None = None,
        warn: Callable[[str], None] = _ignore,
    ) -> Fetched:
        """Refuse a published digest other than the pin before downloading anything."""
        coords = self.own(coords)
        found = self.resolve(coords)
        # only the sha256 is checked (as `wanted`, by download): the index's other digests
        # vouch for nothing
        reconcile(expected_sha256, found.digests, voice(coords), checks={"sha256"})
        # unpinned, the bytes must hash to the published sha256 (reconcile refused a wheel
        # without one); an index lists one value per algorithm
        wanted = expected_sha256
        if wanted is None:
            (wanted,) = found.digests["sha256"]
        _config, session = self.registries.pip()
        done = download(
            session,
            found.url,
            partial,
            sha256=wanted,
            expected_size=size,
            policy=self.policy,
            what=coords.filename,
            progress=progress,
        )
        return Fetched(found.url, done)

    def versions(self, project: str) -> Published | None:
        """Every wheel of `project` over all indexes (the first index listing a name wins);
        None when no index has the project."""
        key = canonicalize_name(project)
        with self._lock:
            if key in self._published:
                return self._published[key]
        config, _session = self.registries.pip()
        seen: dict[str, IndexFile] = {}
        pages = 0
        for index_url in config.index_urls:
            files = self._page(index_url, project)
            pages += files is not None
            for entry in files or []:
                wheel = wheel_name(entry.filename)
                if entry.filename not in seen and wheel is not None and wheel[0] == key:
                    seen[entry.filename] = entry
        versions = sorted({wheel_name(f)[1] for f in seen if wheel_name(f)})  # type: ignore[index]
        found = Published(tuple(map(str, versions)), None, tuple(seen.values())) if pages else None
        with self._lock:
            self._published[key] = found
        return found

    def version_key(self, version: str) -> Any:
        parsed = version_or_none(version)
        return (0, Version("0"), version) if parsed is None else (1, parsed, "")

    def is_prerelease(self, version: str) -> bool:
        parsed = version_or_none(version)
        return parsed is None or parsed.is_prerelease


def voice(coords: PypiCoordinates) -> Voice:
    """How an index refuses a pin it contradicts, or an unpinned wheel it lists no sha256 for."""
    return Voice(
        file=coords.filename,
        contradicts="the index publishes sha256 {published} for this file",
        unvouched=f"the index publishes no sha256 for {coords.filename}",
        fix="use an index that publishes digests (PEP 503 #sha256= or PEP 691 hashes)",
        why="it cannot check",
    )


def _host(url: str) -> str:
    parts = urlsplit(redact(url))
    return f"{parts.scheme}://{parts.netloc}{parts.path}"
