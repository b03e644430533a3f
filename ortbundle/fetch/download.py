"""Streaming downloads: hash while writing, retry with backoff, resume with Range.

Retries follow http.py's rules, plus truncated bodies. A partial file is kept for the next
attempt (and the next build) and only deleted when its bytes are proven wrong. Other digests a
repository publishes (Maven's .sha1, npm's integrity) are computed in the same pass, so no file
is read twice.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

import requests

from ortbundle._core.errors import FetchError, IntegrityError
from ortbundle._core.oserrors import writing
from ortbundle.config.retry import RetryPolicy as RetryPolicy  # re-exported
from ortbundle.fetch.config.urls import redact
from ortbundle.fetch.http import CHUNK as CHUNK  # re-exported
from ortbundle.fetch.http import (
    CREDENTIALS_FIX,
    NOT_FOUND_STATUS,
    check_scheme,
    chunks,
    retry_after,
    unusable,
)
from ortbundle.fetch.http import DIGESTS as DIGESTS  # re-exported
from ortbundle.fetch.http import MAX_DOCUMENT as MAX_DOCUMENT  # re-exported
from ortbundle.fetch.http import RETRY_STATUS as RETRY_STATUS  # re-exported
from ortbundle.fetch.http import TRANSIENT as TRANSIENT  # re-exported
from ortbundle.fetch.http import NotFound as NotFound  # re-exported
from ortbundle.fetch.http import request_with_retries as request_with_retries  # re-exported
from ortbundle.fetch.registry import Downloaded as Downloaded  # re-exported

MAX_UNPINNED = 16 << 30  # a download with no pinned size stops here, not when the disk fills

ProgressFn = Callable[[int, int | None], None]  # (bytes so far, total or None)
_MIRROR_FIX = "the mirror serves a different file; fix the mirror or the pin"


class _Hashes:
    """SHA-256 and the extra digests asked for, fed the same bytes a megabyte at a time: over
    TLS each read is one 16 KiB record, and hashing each one apart cost a cold fetch more than
    its decryption. The digests are read only through sha256_hex() and hexdigests()."""

    def __init__(self, extra: Collection[str]) -> None:
        unknown = set(extra) - DIGESTS
        if unknown:
            raise ValueError(f"unsupported digests: {sorted(unknown)}")
        self._sha256 = hashlib.sha256()
        self.extra = {name: hashlib.new(name) for name in sorted(set(extra) - {"sha256"})}
        self._pending = bytearray()

    def update(self, chunk: bytes) -> None:
        if not self._pending and len(chunk) >= CHUNK:
            self._feed(chunk)  # a whole megabyte already (a file read back): no copy
            return
        self._pending += chunk
        if len(self._pending) >= CHUNK:
            self._flush()

    def _flush(self) -> None:
        self._feed(self._pending)
        self._pending.clear()

    def _feed(self, data: bytes | bytearray) -> None:
        self._sha256.update(data)
        for digest in self.extra.values():
            digest.update(data)

    def sha256_hex(self) -> str:
        self._flush()
        return self._sha256.hexdigest()

    def hexdigests(self) -> dict[str, str]:
        self._flush()
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
                check_scheme(url, resp, what)
                status = resp.status_code
                if status == 416 and have:
                    # Nothing left to send: the partial is either whole or wrong; the hash says.
                    break
                if status in RETRY_STATUS:
                    failure = f"HTTP {status}"
                    time.sleep(policy.delay(attempt, retry_after(resp)))
                    continue
                if status >= 400:
                    error = NotFound if status in NOT_FOUND_STATUS else FetchError
                    raise error(
                        f"{what}: HTTP {status}",
                        file=redact(url),
                        fix=CREDENTIALS_FIX
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
                        fix=_MIRROR_FIX,
                    )
                need = None if total is None else total - have  # for a full disk's message
                with writing(f"the download of {what}", partial, need=need):
                    out = partial.open("ab" if have else "wb")
                with out:  # each read reaches the file before the next one
                    for chunk in chunks(resp):
                        have += len(chunk)
                        if have > limit:
                            raise IntegrityError(
                                f"{what}: more bytes than the pinned size {expected_size}"
                                if expected_size is not None
                                else f"{what}: more than {limit >> 30} GiB and still sending",
                                file=redact(url),
                                fix=_MIRROR_FIX,
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
            raise unusable(exc, what, url) from None
        break
    else:
        raise FetchError(
            f"{what}: gave up after {policy.attempts} attempts ({failure}); "
            f"{partial.stat().st_size if partial.exists() else 0} bytes kept for resuming",
            file=redact(url),
            fix="build again to resume, or check the network or the mirror",
        )
    # `digest` covers the resumed prefix and every byte written since: no second read.
    actual = digest.sha256_hex()
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
