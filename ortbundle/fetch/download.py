"""Streaming downloads: hash while writing, retry with backoff, resume with Range.

Retries happen on connection errors, read time-outs, truncated bodies, 5xx and 429; never on
another 4xx, which a retry cannot fix. A partial file is kept for the next attempt (and the next
build) and only deleted when its bytes are proven wrong.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from urllib.parse import urlsplit

import requests
import urllib3

from ortbundle.errors import FetchError, IntegrityError
from ortbundle.fetch.config import redact
from ortbundle.fetch.policy import RetryPolicy as RetryPolicy  # re-exported

CHUNK = 1 << 20
# A dropped connection surfaces as any of these, depending on when it drops.
_TRANSIENT = (
    requests.ConnectionError,
    requests.Timeout,
    requests.exceptions.ChunkedEncodingError,
    urllib3.exceptions.HTTPError,
)
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


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
    headers: dict[str, str] | None = None,
    what: str,
    allow_404: bool = False,
) -> requests.Response | None:
    """A small GET (an index page) with the same retry rules as a download."""
    last: str = ""
    for attempt in range(policy.attempts):
        try:
            response = session.get(url, headers=headers, timeout=policy.timeout)
        except _TRANSIENT as exc:
            last = f"{type(exc).__name__}"
            time.sleep(policy.delay(attempt))
            continue
        _check_scheme(url, response, what)
        if response.status_code == 404 and allow_404:
            return None
        if response.status_code in _RETRY_STATUS:
            last = f"HTTP {response.status_code}"
            time.sleep(policy.delay(attempt, _retry_after(response)))
            continue
        if response.status_code >= 400:
            raise FetchError(
                f"{what}: HTTP {response.status_code}",
                file=redact(url),
                fix="check the URL and the index configuration (PIP_INDEX_URL, --index-url)",
            )
        return response
    raise FetchError(
        f"{what}: gave up after {policy.attempts} attempts ({last})",
        file=redact(url),
        fix="check the network or the mirror, then build again",
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


def _hash_prefix(path: Path) -> tuple[hashlib._Hash, int]:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as stream:
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest, size


def download(
    session: requests.Session,
    url: str,
    partial: Path,
    *,
    sha256: str,
    expected_size: int | None,
    policy: RetryPolicy,
    what: str,
    progress: ProgressFn | None = None,
) -> Downloaded:
    """Download `url` into `partial`, resuming what is there; return only verified bytes."""
    partial.parent.mkdir(parents=True, exist_ok=True)
    failure = ""
    # Hash what an earlier build left once; from then on the digest follows every write, so a
    # retry inside this call resumes without reading the partial file again.
    digest, have = _hash_prefix(partial) if partial.exists() else (hashlib.sha256(), 0)
    if expected_size is not None and have > expected_size:
        partial.unlink()
        digest, have = hashlib.sha256(), 0
    resumed_stale = have > 0  # bytes from an earlier build, never verified
    for attempt in range(policy.attempts):
        headers = {"Range": f"bytes={have}-"} if have else {}
        try:
            with session.get(url, headers=headers, stream=True, timeout=policy.timeout) as resp:
                _check_scheme(url, resp, what)
                status = resp.status_code
                if status == 416 and have:
                    # Nothing left to send: the partial is either whole or wrong; the hash says.
                    break
                if status in _RETRY_STATUS:
                    failure = f"HTTP {status}"
                    time.sleep(policy.delay(attempt, _retry_after(resp)))
                    continue
                if status >= 400:
                    raise FetchError(
                        f"{what}: HTTP {status}",
                        file=redact(url),
                        fix="the artifact is not at this URL; check the pin and the index",
                    )
                if status == 200 and have:
                    digest, have = hashlib.sha256(), 0  # the server ignored Range: start over
                    resumed_stale = False
                length = resp.headers.get("Content-Length")
                total = have + int(length) if length and length.isdigit() else None
                if expected_size is not None and total is not None and total > expected_size:
                    raise IntegrityError(
                        f"{what}: the server announces {total} bytes, the pin says {expected_size}",
                        file=redact(url),
                        fix="the mirror serves a different file; fix the mirror or the pin",
                    )
                with partial.open("ab" if have else "wb") as out:
                    for chunk in _chunks(resp):
                        have += len(chunk)
                        if expected_size is not None and have > expected_size:
                            raise IntegrityError(
                                f"{what}: more bytes than the pinned size {expected_size}",
                                file=redact(url),
                                fix="the mirror serves a different file; fix the mirror or the pin",
                            )
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
        except _TRANSIENT as exc:
            failure = f"{type(exc).__name__} after {have} bytes"
            time.sleep(policy.delay(attempt))
            continue
        except IntegrityError:
            partial.unlink(missing_ok=True)
            raise
        break
    else:
        raise FetchError(
            f"{what}: gave up after {policy.attempts} attempts ({failure}); "
            f"{partial.stat().st_size if partial.exists() else 0} bytes kept for resuming",
            file=redact(url),
            fix="build again to resume, or check the network or the mirror",
        )
    # `digest` covers the resumed prefix and every byte written since: no second read.
    actual = digest.hexdigest()
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
        )
    if actual != sha256:
        partial.unlink(missing_ok=True)
        raise IntegrityError(
            f"{what}: downloaded sha256 {actual} does not match the pin {sha256} "
            f"({have} bytes); nothing was cached",
            file=redact(url),
            fix="the upstream or mirror serves different bytes; do not re-pin unless you know why",
        )
    return Downloaded(path=partial, size=have, sha256=actual)
