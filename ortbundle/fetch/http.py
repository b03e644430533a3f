"""The one HTTP layer: the session every registry uses, and the rules every request follows.

Retries happen on connection errors, read time-outs, 5xx and 429 (honouring `Retry-After`);
never on another 4xx, which a retry cannot fix. An https URL stays https: a redirect that
downgrades it is refused. The streaming download (download.py) follows the same rules.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

import requests
import urllib3

from ortbundle._core.errors import FetchError
from ortbundle.config.retry import RetryPolicy
from ortbundle.fetch.config.urls import redact
from ortbundle.fetch.registry import NotFound as NotFound  # re-exported: raised here

USER_AGENT = "ortbundle"
CHUNK = 1 << 20
MAX_DOCUMENT = 64 << 20  # an index page, package document or sidecar; the largest real: ~20 MiB
# A dropped connection surfaces as any of these, depending on when it drops.
TRANSIENT = (
    requests.ConnectionError,
    requests.Timeout,
    requests.exceptions.ChunkedEncodingError,
    urllib3.exceptions.HTTPError,
)
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
NOT_FOUND_STATUS = frozenset({404, 410})
DIGESTS = frozenset({"sha1", "sha256", "sha384", "sha512"})  # what a repository may publish
CREDENTIALS_FIX = (
    "the server wants credentials, or refused the ones configured: check them (pip's "
    "configuration, a <server> in settings.xml, an _authToken in .npmrc)"
)


def new_session(cert: str | None = None) -> requests.Session:
    """A session as every registry uses one: ortbundle's User-Agent and the CA bundle its
    ecosystem's configuration names (None: the system's)."""
    session = requests.Session()
    session.headers["User-Agent"] = USER_AGENT
    if cert:
        session.verify = cert
    return session


def retry_after(response: requests.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def check_scheme(requested: str, response: requests.Response, what: str) -> None:
    """Refuse an https → http downgrade anywhere in the redirect chain."""
    if urlsplit(requested).scheme != "https":
        return
    for hop in [*response.history, response]:
        if urlsplit(hop.url).scheme != "https":
            raise FetchError(
                f"{what}: refused a redirect from https to {redact(hop.url)}",
                file=redact(requested),
                fix="the server downgraded the connection; use an index or mirror that stays "
                "on https, or configure it as http explicitly if that is intended",
            )


def request_with_retries(
    session: requests.Session,
    url: str,
    policy: RetryPolicy,
    *,
    headers: Mapping[str, str] | None = None,
    what: str,
    allow_404: bool = False,
    fix: str = "check the URL and the index configuration (PIP_INDEX_URL, --index-url)",
    method: str = "GET",
    read: bool = True,
    passed: frozenset[int] = frozenset(),
) -> requests.Response | None:
    """A small GET (an index page, a sidecar digest) with the same retry rules as a download.

    `read=False` leaves the body unread (a HEAD, or a GET asked only for its status); a status
    in `passed` is returned as it is, for the caller to decide."""
    last: str = ""
    for attempt in range(policy.attempts):
        try:
            response = session.request(
                method,
                url,
                headers=dict(headers or {}),
                timeout=policy.timeout,
                stream=True,
                allow_redirects=True,
            )
            try:
                check_scheme(url, response, what)
                if response.status_code in passed:
                    return response
                if response.status_code < 400 and read:
                    body = _read_capped(response, MAX_DOCUMENT, what=what, url=url)
                    response._content = body  # what .content, .text and .json() read
            finally:
                response.close()  # the body is read (or not wanted): release the connection
        except TRANSIENT as exc:
            last = f"{type(exc).__name__}"
            time.sleep(policy.delay(attempt))
            continue
        except requests.RequestException as exc:
            raise unusable(exc, what, url) from None
        if response.status_code == 404 and allow_404:
            return None
        if response.status_code in RETRY_STATUS:
            last = f"HTTP {response.status_code}"
            time.sleep(policy.delay(attempt, retry_after(response)))
            continue
        if response.status_code >= 400:
            error = NotFound if response.status_code in NOT_FOUND_STATUS else FetchError
            raise error(
                f"{what}: HTTP {response.status_code}",
                file=redact(url),
                fix=CREDENTIALS_FIX if response.status_code in (401, 403) else fix,
            )
        return response
    raise FetchError(
        f"{what}: gave up after {policy.attempts} attempts ({last})",
        file=redact(url),
        fix="check the network or the mirror, then build again",
    )


def exists(
    session: requests.Session,
    url: str,
    policy: RetryPolicy,
    *,
    headers: Mapping[str, str] | None = None,
    what: str,
    fix: str = "check the URL",
) -> bool:
    """Whether the server has the file at `url` (2xx yes, 404/410 no), by a HEAD; a server that
    does not do HEAD is asked with a GET whose body is never read."""
    for method in ("HEAD", "GET"):
        try:
            response = request_with_retries(
                session,
                url,
                policy,
                headers=headers,
                what=what,
                allow_404=True,
                fix=fix,
                method=method,
                read=False,
                passed=frozenset({405, 501}) if method == "HEAD" else frozenset(),
            )
        except NotFound:
            return False
        if response is None:
            return False
        if response.status_code not in (405, 501) or method == "GET":
            return True
    return True  # pragma: no cover - the GET above always decides


def _read_capped(response: requests.Response, limit: int, *, what: str, url: str) -> bytes:
    parts, size = [], 0
    for chunk in chunks(response):
        size += len(chunk)
        if size > limit:
            response.close()
            raise FetchError(
                f"{what}: the server sent more than {limit >> 20} MiB for a document",
                file=redact(url),
                fix="the URL serves something else than an index page or digest; check the mirror",
            )
        parts.append(chunk)
    return b"".join(parts)


def unusable(exc: requests.RequestException, what: str, url: str) -> FetchError:
    """A request that can never succeed (a redirect loop, a redirect to ftp://, a bad URL)."""
    return FetchError(
        f"{what}: {type(exc).__name__} ({redact(str(exc))})",
        file=redact(url),
        fix="the server's answer cannot be followed: check the URL and the mirror",
    )


def chunks(response: requests.Response) -> Iterator[bytes]:
    """Bytes as they arrive (read1), so a dropped connection, or a build killed while the
    server stalls, loses nothing already received: each is handed on before the next read."""
    raw = response.raw
    while chunk := raw.read1(CHUNK, decode_content=True):
        yield chunk
