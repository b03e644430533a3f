"""PEP 691 (JSON) and PEP 503 (HTML) simple-index resolution: a pinned filename to its URL."""

from __future__ import annotations

import json
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin, urlsplit

import requests
from packaging.utils import canonicalize_name

from ortbundle.errors import FetchError, IntegrityError
from ortbundle.fetch.config import redact
from ortbundle.fetch.download import RetryPolicy, request_with_retries
from ortbundle.recipes import Source

ACCEPT = (
    "application/vnd.pypi.simple.v1+json, "
    "application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
)


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    hashes: dict[str, str]
    yanked: bool = False  # PEP 592: `yanked` in JSON, `data-yanked` on an HTML anchor
    size: int | None = None  # PEP 700, when the index publishes it


@dataclass(frozen=True)
class Resolved:
    url: str
    index_url: str
    published_sha256: str | None


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


def resolve(
    session: requests.Session,
    index_urls: tuple[str, ...],
    source: Source,
    policy: RetryPolicy,
    *,
    component: str,
) -> Resolved:
    """Find the pinned file in the configured indexes; refuse a published digest ≠ the pin."""
    project = canonicalize_name(source.pypi.project)
    looked: list[str] = []
    for index_url in index_urls:
        page_url = index_url.rstrip("/") + f"/{project}/"
        response = request_with_retries(
            session,
            page_url,
            policy,
            headers={"Accept": ACCEPT},
            what=f"index page for {source.pypi.project}",
            allow_404=True,
        )
        if response is None:
            looked.append(f"{_host(index_url)} (no such project)")
            continue
        files = parse_project_page(
            response.content, response.headers.get("Content-Type", ""), response.url
        )
        for entry in files:
            if entry.filename != source.filename:
                continue
            published = entry.hashes.get("sha256")
            if published is not None and published != source.sha256:
                raise IntegrityError(
                    f"the index publishes sha256 {published} for this file, "
                    f"but the recipe pins {source.sha256}",
                    component=component,
                    file=source.filename,
                    fix="find out which is right before building; re-pin with `invoke pin` "
                    "only if the upstream release really changed",
                )
            if urlsplit(index_url).scheme == "https" and urlsplit(entry.url).scheme != "https":
                raise FetchError(
                    f"the https index links {source.filename} over "
                    f"{urlsplit(entry.url).scheme or 'a relative'} URL {redact(entry.url)}",
                    component=component,
                    file=source.filename,
                    fix="the index downgrades the download; use an index or mirror that links "
                    "files over https, or configure it as http explicitly if that is intended",
                )
            return Resolved(url=entry.url, index_url=index_url, published_sha256=published)
        looked.append(f"{_host(index_url)} ({len(files)} files, not this one)")
    raise FetchError(
        f"{source.filename} is not in the configured index: looked in {'; '.join(looked)}",
        component=component,
        file=source.filename,
        fix="check the pin's filename, or point PIP_INDEX_URL / --index-url at an index "
        "that carries it",
    )


def _host(url: str) -> str:
    parts = urlsplit(redact(url))
    return f"{parts.scheme}://{parts.netloc}{parts.path}"
