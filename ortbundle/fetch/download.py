"""Streaming downloads: hash while writing, retry with backoff, resume with Range.

Retries follow http.py's rules, plus truncated bodies. A partial file is kept for the next
attempt (and the next build) and only deleted when its bytes are proven wrong. Other digests a
repository publishes (Maven's .sha1, npm's integrity) are computed in the same pass, so no file
is read twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

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
from ortbundle.fetch.registry import ProgressFn as ProgressFn  # re-exported

MAX_UNPINNED = 16 << 30  # a download with no pinned size stops here, not when the disk fills

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


@dataclass
class _Partial:
    """The partial file as far as this call has it: its length, and the digests of every byte in
    it. What an earlier build left is hashed once; from then on the digests follow every write,
    so a retry resumes without reading the file again."""

    path: Path
    extra: Collection[str]  # the digests asked for besides the SHA-256
    hashes: _Hashes
    have: int = 0
    stale: bool = False  # bytes from an earlier build, never verified

    @classmethod
    def resume(
        cls, path: Path, extra: Collection[str], *, pinned: bool, expected_size: int | None
    ) -> _Partial:
        """What an earlier build left, hashed. Nothing for a file not pinned yet (bytes of unknown
        provenance prove nothing), nor when it is already longer than the pinned size."""
        path.parent.mkdir(parents=True, exist_ok=True)
        if not pinned:
            path.unlink(missing_ok=True)
        hashes, have = _hash_prefix(path, extra) if path.exists() else (_Hashes(extra), 0)
        state = cls(path, extra, hashes, have)
        if expected_size is not None and state.have > expected_size:
            path.unlink()
            state.restart()
        state.stale = state.have > 0
        return state

    def restart(self) -> None:
        """From byte 0: the next attempt writes the file anew."""
        self.hashes, self.have, self.stale = _Hashes(self.extra), 0, False


@dataclass(frozen=True)
class _Job:
    """What stays the same over one download's attempts."""

    session: requests.Session
    url: str
    headers: Mapping[str, str]  # with every request (credentials: never logged)
    policy: RetryPolicy
    what: str
    expected_size: int | None
    limit: int  # the most bytes taken: the pinned size, else MAX_UNPINNED
    deadline: float  # time.monotonic() by which all attempts together must be done
    progress: ProgressFn | None


@dataclass(frozen=True)
class _Retry:
    """Why an attempt did not finish, and the wait the server asked for (None: the backoff)."""

    failure: str
    wait: float | None = None


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
    state = _Partial.resume(
        partial, digests, pinned=sha256 is not None, expected_size=expected_size
    )
    job = _Job(
        session,
        url,
        headers or {},
        policy,
        what,
        expected_size,
        limit=expected_size if expected_size is not None else MAX_UNPINNED,
        deadline=time.monotonic() + policy.deadline,
        progress=progress,
    )
    _attempts(job, state)
    # `state.hashes` covers the resumed prefix and every byte written since: no second read.
    actual = state.hashes.sha256_hex()
    if actual != sha256 and state.stale:
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
    return _verified(job, state, actual, sha256)


def _attempts(job: _Job, state: _Partial) -> None:
    """Attempt until the file is complete, backing off between attempts; bytes proven wrong are
    deleted, the rest kept for the next attempt (and the next build)."""
    failure = ""
    for attempt in range(job.policy.attempts):
        try:
            retry = _attempt(job, state)
        except TRANSIENT as exc:
            retry = _Retry(f"{type(exc).__name__} after {state.have} bytes")
        except IntegrityError:
            state.path.unlink(missing_ok=True)
            raise
        except requests.RequestException as exc:
            raise unusable(exc, job.what, job.url) from None
        if retry is None:
            return
        failure = retry.failure
        time.sleep(job.policy.delay(attempt, retry.wait))
    partial = state.path
    raise FetchError(
        f"{job.what}: gave up after {job.policy.attempts} attempts ({failure}); "
        f"{partial.stat().st_size if partial.exists() else 0} bytes kept for resuming",
        file=redact(job.url),
        fix="build again to resume, or check the network or the mirror",
    )


def _attempt(job: _Job, state: _Partial) -> _Retry | None:
    """One request, resuming at `state.have`: None when there is nothing more to fetch, a _Retry
    when the server or a short body says to try again; an answer no retry can fix raises."""
    sent = dict(job.headers)
    if state.have:
        sent["Range"] = f"bytes={state.have}-"
    with job.session.get(job.url, headers=sent, stream=True, timeout=job.policy.timeout) as resp:
        check_scheme(job.url, resp, job.what)
        status = resp.status_code
        if status == 416 and state.have:
            # Nothing left to send: the partial is either whole or wrong; the hash says.
            return None
        if status in RETRY_STATUS:
            return _Retry(f"HTTP {status}", retry_after(resp))
        if status >= 400:
            error = NotFound if status in NOT_FOUND_STATUS else FetchError
            raise error(
                f"{job.what}: HTTP {status}",
                file=redact(job.url),
                fix=CREDENTIALS_FIX
                if status in (401, 403)
                else "the artifact is not at this URL; check the pin and the index",
            )
        if status == 200 and state.have:
            state.restart()  # the server ignored Range: start over
        total = _announced(job, resp, state.have)
        _stream(job, resp, state, total)
        if total is None and job.expected_size is not None:
            total = job.expected_size  # no Content-Length: the pin still says how long
        if total is not None and state.have < total:
            return _Retry(f"body ended at {state.have} of {total} bytes")
    return None


def _announced(job: _Job, resp: requests.Response, have: int) -> int | None:
    """The whole file's length by the response's Content-Length; refused if over the pin."""
    length = resp.headers.get("Content-Length")
    total = have + int(length) if length and length.isdigit() else None
    if job.expected_size is not None and total is not None and total > job.expected_size:
        raise IntegrityError(
            f"{job.what}: the server announces {total} bytes, the pin says {job.expected_size}",
            file=redact(job.url),
            fix=_MIRROR_FIX,
        )
    return total


def _stream(job: _Job, resp: requests.Response, state: _Partial, total: int | None) -> None:
    """The body into the partial file and its digests. Each read reaches the file before the
    next one, so a killed build keeps every byte that arrived; past the size limit or the
    deadline it stops."""
    need = None if total is None else total - state.have  # for a full disk's message
    what = f"the download of {job.what}"
    with writing(what, state.path, need=need):
        out = state.path.open("ab" if state.have else "wb")
    try:
        _copy(job, resp, state, total, out, need)
    except BaseException:
        with contextlib.suppress(OSError):  # the error in flight is the one to report
            out.close()
        raise
    # closed inside `writing`: a file smaller than the write buffer reaches the disk only
    # when it is closed, and a full disk met there must name it too
    with writing(what, state.path, need=need):
        out.close()


def _copy(
    job: _Job,
    resp: requests.Response,
    state: _Partial,
    total: int | None,
    out: BinaryIO,
    need: int | None,
) -> None:
    """Each chunk of the body into `out` and the digests, within the size limit and the
    deadline; a write the disk refuses is the DiskError naming the download."""
    for chunk in chunks(resp):
        state.have += len(chunk)
        if state.have > job.limit:
            raise IntegrityError(
                f"{job.what}: more bytes than the pinned size {job.expected_size}"
                if job.expected_size is not None
                else f"{job.what}: more than {job.limit >> 30} GiB and still sending",
                file=redact(job.url),
                fix=_MIRROR_FIX,
            )
        if time.monotonic() > job.deadline:
            raise FetchError(
                f"{job.what}: still downloading after {job.policy.deadline:.0f} s "
                f"({state.have} bytes); {state.have} bytes kept for resuming",
                file=redact(job.url),
                fix="the server is too slow: build again to resume, or use a nearer mirror",
            )
        with writing(f"the download of {job.what}", state.path, need=need):
            out.write(chunk)
        state.hashes.update(chunk)
        if job.progress is not None:
            job.progress(state.have, total)


def _verified(job: _Job, state: _Partial, actual: str, sha256: str | None) -> Downloaded:
    """The downloaded file, if its SHA-256 is the pin's (any, when not pinned yet); else it is
    deleted and refused."""
    if sha256 is not None and actual != sha256:
        state.path.unlink(missing_ok=True)
        raise IntegrityError(
            f"{job.what}: downloaded sha256 {actual} does not match the pin {sha256} "
            f"({state.have} bytes); nothing was cached",
            file=redact(job.url),
            fix="the upstream or mirror serves different bytes; do not re-pin unless you know why",
        )
    return Downloaded(
        path=state.path, size=state.have, sha256=actual, digests=state.hashes.hexdigests()
    )


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
