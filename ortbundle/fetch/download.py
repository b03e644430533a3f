"""Streaming downloads: hash while writing, retry with backoff, resume with Range.

Retries happen on connection errors, read time-outs, truncated bodies, 5xx and 429; never on
another 4xx, which a retry cannot fix. A partial file is kept for the next attempt (and the next
build) and only deleted when its bytes are proven wrong. Other digests a repository publishes
(Maven's .sha1, npm's integrity) are computed in the same pass, so no file is read twice.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path
from urllib.parse import urlsplit

import requests
import urllib3

from ortbundle.errors import FetchError, IntegrityError
from ortbundle.fetch.config import redact
from ortbundle.fetch.policy import RetryPolicy as RetryPolicy  # re-exported
from ortbundle.oserrors import writing

CHUNK = 1 << 20
MAX_DOCUMENT = 64 << 20  # an index page, package document or sidecar; the largest real: ~20 MiB
MAX_UNPINNED = 16 << 30  # a download with no pinned size stops here, not when the disk fills
# A dropped connection surfaces as any of these, depending on when it drops.
TRANSIENT = (
    requests.ConnectionError,
    requests.Timeout,
    requests.exceptions.ChunkedEncodingError,
    urllib3.exceptions.HTTPError,
)
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_NOT_FOUND = frozenset({404, 410})
DIGESTS = frozenset({"sha1", "sha256", "sha384", "sha512"})  # what a repository may publish
_CREDENTIALS_FIX = (
    "the server wants credentials, or refused the ones configured: check them (pip's "
    "configuration, a <server> in settings.xml, an _authToken in .npmrc)"
)


class NotFound(FetchError):
    """HTTP 404/410: the file is not at this URL (another repository may still have it)."""


ProgressFn = Callable[[int, int | None], None]  # (bytes so far, total or None)


def _retry_after(response: requests.Response) -> float | None:
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


def _check_scheme(requested: str, response: requests.Response, what: str) -> None:
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
) -> requests.Response | None:
    """A small GET (an index page, a sidecar digest) with the same retry rules as a download."""
    last: str = ""
    for attempt in range(policy.attempts):
        try:
            response = session.get(
                url, headers=dict(headers or {}), timeout=policy.timeout, stream=True
            )
            try:
                _check_scheme(url, response, what)
                if response.status_code < 400:
                    body = _read_capped(response, MAX_DOCUMENT, what=what, url=url)
                    response._content = body  # what .content, .text and .json() read
            finally:
                response.close()  # the body is read (or not wanted): release the connection
        except TRANSIENT as exc:
            last = f"{type(exc).__name__}"
            time.sleep(policy.delay(attempt))
            continue
        except requests.RequestException as exc:
            raise _unusable(exc, what, url) from None
        if response.status_code == 404 and allow_404:
            return None
        if response.status_code in RETRY_STATUS:
            last = f"HTTP {response.status_code}"
            time.sleep(policy.delay(attempt, _retry_after(response)))
            continue
        if response.status_code >= 400:
            error = NotFound if response.status_code in _NOT_FOUND else FetchError
            raise error(
                f"{what}: HTTP {response.status_code}",
                file=redact(url),
                fix=_CREDENTIALS_FIX if response.status_code in (401, 403) else fix,
            )
        return response
    raise FetchError(
        f"{what}: gave up after {policy.attempts} attempts ({last})",
        file=redact(url),
        fix="check the network or the mirror, then build again",
    )


def _read_capped(response: requests.Response, limit: int, *, what: str, url: str) -> bytes:
    parts, size = [], 0
    for chunk in _chunks(response):
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


def _unusable(exc: requests.RequestException, what: str, url: str) -> FetchError:
    """A request that can never succeed (a redirect loop, a redirect to ftp://, a bad URL)."""
    return FetchError(
        f"{what}: {type(exc).__name__} ({redact(str(exc))})",
        file=redact(url),
        fix="the server's answer cannot be followed: check the URL and the mirror",
    )


def _chunks(response: requests.Response) -> Iterator[bytes]:
    """Bytes as they arrive (read1), so a dropped connection loses nothing already received."""
    raw = response.raw
    while chunk := raw.read1(CHUNK, decode_content=True):
        yield chunk


@dataclass(frozen=True)
class Downloaded:
    path: Path
    size: int
    sha256: str
    digests: dict[str, str] = field(default_factory=dict)  # the extra ones asked for: name → hex


class _Hashes:
    """SHA-256 and the extra digests asked for, fed the same chunks."""

    def __init__(self, extra: Collection[str]) -> None:
        unknown = set(extra) - DIGESTS
        if unknown:
            raise ValueError(f"unsupported digests: {sorted(unknown)}")
        self.sha256 = hashlib.sha256()
        self.extra = {name: hashlib.new(name) for name in sorted(set(extra) - {"sha256"})}

    def update(self, chunk: bytes) -> None:
        self.sha256.update(chunk)
        for digest in self.extra.values():
            digest.update(chunk)

    def hexdigests(self) -> dict[str, str]:
        return {name: digest.hexdigest() for name, digest in self.extra.items()}


def _hash_prefix(path: Path, extra: Collection[str]) -> tuple[_Hashes, int]:
    hashes = _Hashes(extra)
    size = 0
    with path.open("rb") as stream:
        while chunk := stream.read(CHUNK):
            hashes.update(chunk)
            size += len(chunk)
    return hashes, size


def download(
    session: requests.Session,
    url: str,
    partial: Path,
    *,
    sha256: str | None,
    expected_size: int | None,
    policy: RetryPolicy,
    what: str,
    progress: ProgressFn | None = None,
    headers: Mapping[str, str] | None = None,
    digests: Collection[str] = (),
) -> Downloaded:
    """Download `url` into `partial`, resuming what is there; return only verified bytes.

    `headers` go with every request (credentials: never logged); `digests` names extra
    algorithms ("sha1", "sha512", …) to compute while writing, returned in `Downloaded.digests`.
    `sha256=None` is for a file not pinned yet (`invoke pin`): nothing is resumed, since bytes of
    unknown provenance prove nothing, and the caller checks what the registry publishes.
    """
    partial.parent.mkdir(parents=True, exist_ok=True)
    if sha256 is None:
        partial.unlink(missing_ok=True)
    failure = ""
    # Hash what an earlier build left once; from then on the digests follow every write, so a
    # retry inside this call resumes without reading the partial file again.
    digest, have = _hash_prefix(partial, digests) if partial.exists() else (_Hashes(digests), 0)
    if expected_size is not None and have > expected_size:
        partial.unlink()
        digest, have = _Hashes(digests), 0
    resumed_stale = have > 0  # bytes from an earlier build, never verified
    limit = expected_size if expected_size is not None else MAX_UNPINNED
    deadline = time.monotonic() + policy.deadline
    for attempt in range(policy.attempts):
        sent = dict(headers or {})
        if have:
            sent["Range"] = f"bytes={have}-"
        try:
            with session.get(url, headers=sent, stream=True, timeout=policy.timeout) as resp:
                _check_scheme(url, resp, what)
                status = resp.status_code
                if status == 416 and have:
                    # Nothing left to send: the partial is either whole or wrong; the hash says.
                    break
                if status in RETRY_STATUS:
                    failure = f"HTTP {status}"
                    time.sleep(policy.delay(attempt, _retry_after(resp)))
                    continue
                if status >= 400:
                    error = NotFound if status in _NOT_FOUND else FetchError
                    raise error(
                        f"{what}: HTTP {status}",
                        file=redact(url),
                        fix=_CREDENTIALS_FIX
                        if status in (401, 403)
                        else "the artifact is not at this URL; check the pin and the index",
                    )
                if status == 200 and have:
                    digest, have = _Hashes(digests), 0  # the server ignored Range: start over
                    resumed_stale = False
                length = resp.headers.get("Content-Length")
                total = have + int(length) if length and length.isdigit() else None
                if expected_size is not None and total is not None and total > expected_size:
                    raise IntegrityError(
                        f"{what}: the server announces {total} bytes, the pin says {expected_size}",
                        file=redact(url),
                        fix="the mirror serves a different file; fix the mirror or the pin",
                    )
                need = None if total is None else total - have  # for a full disk's message
                with writing(f"the download of {what}", partial, need=need):
                    out = partial.open("ab" if have else "wb")
                with out:
                    for chunk in _chunks(resp):
                        have += len(chunk)
                        if have > limit:
                            raise IntegrityError(
                                f"{what}: more bytes than the pinned size {expected_size}"
                                if expected_size is not None
                                else f"{what}: more than {limit >> 30} GiB and still sending",
                                file=redact(url),
                                fix="the mirror serves a different file; fix the mirror or the pin",
                            )
                        if time.monotonic() > deadline:
                            raise FetchError(
                                f"{what}: still downloading after {policy.deadline:.0f} s "
                                f"({have} bytes); {have} bytes kept for resuming",
                                file=redact(url),
                                fix="the server is too slow: build again to resume, or use a "
                                "nearer mirror",
                            )
                        with writing(f"the download of {what}", partial, need=need):
                            out.write(chunk)
                        digest.update(chunk)
                        if progress is not None:
                            progress(have, total)
                if total is None and expected_size is not None:
                    total = expected_size  # no Content-Length: the pin still says how long
                if total is not None and have < total:
                    failure = f"body ended at {have} of {total} bytes"
                    time.sleep(policy.delay(attempt))
                    continue
        except TRANSIENT as exc:
            failure = f"{type(exc).__name__} after {have} bytes"
            time.sleep(policy.delay(attempt))
            continue
        except IntegrityError:
            partial.unlink(missing_ok=True)
            raise
        except requests.RequestException as exc:
            raise _unusable(exc, what, url) from None
        break
    else:
        raise FetchError(
            f"{what}: gave up after {policy.attempts} attempts ({failure}); "
            f"{partial.stat().st_size if partial.exists() else 0} bytes kept for resuming",
            file=redact(url),
            fix="build again to resume, or check the network or the mirror",
        )
    # `digest` covers the resumed prefix and every byte written since: no second read.
    actual = digest.sha256.hexdigest()
    if actual != sha256 and resumed_stale:
        # An earlier build left bytes that were never verified (a captive portal, another
        # file): they are not evidence against the server. Start over, once, from byte 0.
        partial.unlink(missing_ok=True)
        return download(
            session,
            url,
            partial,
            sha256=sha256,
            expected_size=expected_size,
            policy=policy,
            what=what,
            progress=progress,
            headers=headers,
            digests=digests,
        )
    if sha256 is not None and actual != sha256:
        partial.unlink(missing_ok=True)
        raise IntegrityError(
            f"{what}: downloaded sha256 {actual} does not match the pin {sha256} "
            f"({have} bytes); nothing was cached",
            file=redact(url),
            fix="the upstream or mirror serves different bytes; do not re-pin unless you know why",
        )
    return Downloaded(path=partial, size=have, sha256=actual, digests=digest.hexdigests())


def check_published(
    done: Downloaded,
    published: Mapping[str, Collection[str]],
    *,
    what: str,
    url: str,
    by: str,
) -> None:
    """Refuse bytes the pin accepted but the repository's own digests contradict (a sidecar or
    an integrity field): the repository is inconsistent, and nothing from it is cached.

    `published` maps an algorithm to the hex values accepted for it (SRI may list several).
    """
    for name, allowed in sorted(published.items()):
        actual = done.sha256 if name == "sha256" else done.digests[name]
        if actual not in {value.lower() for value in allowed}:
            done.path.unlink(missing_ok=True)
            raise IntegrityError(
                f"{what}: {by} publishes {name} {' or '.join(sorted(allowed))}, but the "
                f"downloaded bytes hash to {actual}; nothing was cached",
                file=redact(url),
                fix="the repository contradicts its own digest (a corrupt mirror, or a tampered "
                "file); fix or change the mirror — do not re-pin",
            )
