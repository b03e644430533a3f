"""download() and check_published() driven directly by a scripted session: no socket, no build.

Each answer the session gives is written out (status, headers, body, a connection dropped part
way), so every branch of resume, retry, restart and refusal is reached on purpose, and each
refusal is asserted with the words, file and fix the user reads. The URL carries credentials
and a token: every message must name it redacted.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import pytest
import requests
from requests.structures import CaseInsensitiveDict

from ortbundle._core.errors import DiskError, FetchError, IntegrityError
from ortbundle.config.retry import RetryPolicy
from ortbundle.fetch import download as download_module
from ortbundle.fetch.download import Downloaded, NotFound, check_published, download
from ortbundle.fetch.http import CREDENTIALS_FIX

URL = "http://user:secret@mirror.test/pkg/x.whl?token=t0k3n"
SHOWN = "http://mirror.test/pkg/x.whl?…"  # what a message may say of URL
WHAT = "x.whl"
DATA = b"0123456789abcdefghij"  # 20 bytes
MIRROR_FIX = "the mirror serves a different file; fix the mirror or the pin"
RETRY_FIX = "build again to resume, or check the network or the mirror"
POLICY = RetryPolicy(attempts=3, base_delay=1.0, max_delay=1.0, read_timeout=2.0)


def sha(data: bytes, name: str = "sha256") -> str:
    return hashlib.new(name, data).hexdigest()


@dataclass
class Answer:
    """One response: `length` is the Content-Length sent ("auto": the body's; None: none);
    `drop` ends the body with that exception (a connection lost part way)."""

    status: int = 200
    body: bytes = b""
    length: int | str | None = "auto"
    headers: dict[str, str] = field(default_factory=dict)
    drop: Exception | None = None
    url: str | None = None  # where the redirects ended (default: the URL asked for)
    pieces: list[bytes] | None = None  # the reads, when not four bytes each of `body`


class _Raw:
    def __init__(self, answer: Answer) -> None:
        self.left = answer.body
        self.drop = answer.drop
        self.pieces = list(answer.pieces) if answer.pieces is not None else None

    def read1(self, size: int, decode_content: bool = True) -> bytes:
        if self.pieces is not None:
            return self.pieces.pop(0) if self.pieces else b""
        chunk, self.left = self.left[:4], self.left[4:]  # four bytes a read: several chunks
        if not chunk and self.drop is not None:
            raise self.drop
        return chunk


class _Response:
    def __init__(self, url: str, answer: Answer) -> None:
        self.url = answer.url or url
        self.history: list[_Response] = []
        self.status_code = answer.status
        self.headers: CaseInsensitiveDict[str] = CaseInsensitiveDict(answer.headers)
        if answer.length == "auto":
            self.headers["Content-Length"] = str(len(answer.body))
        elif answer.length is not None:
            self.headers["Content-Length"] = str(answer.length)
        self.raw = _Raw(answer)

    def __enter__(self) -> _Response:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None


class Script(requests.Session):
    """A session answering each GET with the next scripted answer; it records what was sent."""

    def __init__(self, *answers: Answer | Exception) -> None:
        super().__init__()
        self.answers = list(answers)
        self.sent: list[dict[str, str]] = []
        self.urls: list[str | bytes] = []

    def get(self, url: str | bytes, **kwargs: object) -> _Response:  # type: ignore[override]
        headers = kwargs.get("headers")
        assert isinstance(headers, Mapping)
        assert kwargs.get("stream") is True
        assert kwargs.get("timeout") == POLICY.timeout
        self.sent.append(dict(headers))
        self.urls.append(url)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return _Response(str(url), answer)


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits between attempts, recorded instead of slept."""
    waited: list[float] = []
    monkeypatch.setattr(time, "sleep", waited.append)
    return waited


def fetch(
    session: Script,
    partial: Path,
    *,
    sha256: str | None = sha(DATA),
    expected_size: int | None = len(DATA),
    policy: RetryPolicy = POLICY,
    digests: tuple[str, ...] = (),
    progress: list[tuple[int, int | None]] | None = None,
) -> Downloaded:
    return download(
        session,
        URL,
        partial,
        sha256=sha256,
        expected_size=expected_size,
        policy=policy,
        what=WHAT,
        progress=None if progress is None else lambda have, total: progress.append((have, total)),
        headers={"Authorization": "Bearer abc"},
        digests=digests,
    )


def assert_error(error: Exception, message: str, fix: str) -> None:
    assert isinstance(error, FetchError | IntegrityError)
    assert (error.message, error.file, error.fix) == (message, SHOWN, fix)


# --- what comes back ---------------------------------------------------------------------------


def test_a_whole_download_is_verified_and_its_extra_digests_computed(
    tmp_path: Path, sleeps: list[float]
) -> None:
    session = Script(Answer(body=DATA))
    partial = tmp_path / "cache" / "partial" / "x.part"  # its directories are made
    progress: list[tuple[int, int | None]] = []
    done = fetch(session, partial, digests=("sha512", "sha1", "sha256"), progress=progress)
    assert done == Downloaded(
        partial, len(DATA), sha(DATA), {"sha1": sha(DATA, "sha1"), "sha512": sha(DATA, "sha512")}
    )
    assert partial.read_bytes() == DATA
    assert session.sent == [{"Authorization": "Bearer abc"}]  # no Range: nothing to resume
    assert progress == [(4, 20), (8, 20), (12, 20), (16, 20), (20, 20)]
    assert sleeps == []


def test_an_unknown_digest_is_a_programming_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^unsupported digests: \['crc32', 'md4'\]$"):
        fetch(Script(Answer(body=DATA)), tmp_path / "x.part", digests=("md4", "sha1", "crc32"))


def test_the_digests_see_every_byte_in_order_however_it_is_cut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """_Hashes buffers small reads into CHUNK-sized updates and feeds a whole chunk directly."""
    monkeypatch.setattr(download_module, "CHUNK", 8)
    hashes = download_module._Hashes(("sha1",))
    pieces = [b"abc", b"0123456789", b"d", b"ABCDEFGH", b"", b"xyz" * 3, b"0123456789ab"]
    for piece in pieces:
        hashes.update(piece)
    data = b"".join(pieces)
    assert (hashes.sha256_hex(), hashes.hexdigests()) == (sha(data), {"sha1": sha(data, "sha1")})


def test_a_file_not_pinned_yet_is_fetched_whole_and_returned_with_its_digest(
    tmp_path: Path,
) -> None:
    partial = tmp_path / "x.part"
    partial.write_bytes(b"0123")  # bytes of unknown provenance: not resumed
    session = Script(Answer(body=DATA))
    done = fetch(session, partial, sha256=None, expected_size=None)
    assert (done.size, done.sha256) == (len(DATA), sha(DATA))
    assert "Range" not in session.sent[0]
    assert partial.read_bytes() == DATA


# --- resuming ------------------------------------------------------------------------------------


def test_a_partial_file_is_resumed_where_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(download_module, "CHUNK", 4)  # the partial is read back in two reads
    partial = tmp_path / "x.part"
    partial.write_bytes(DATA[:6])
    session = Script(Answer(206, DATA[6:]))
    progress: list[tuple[int, int | None]] = []
    done = fetch(session, partial, progress=progress)
    assert (done.size, done.sha256) == (20, sha(DATA))
    assert session.sent == [{"Authorization": "Bearer abc", "Range": "bytes=6-"}]
    assert progress[0] == (10, 20)  # counted from the resumed length
    assert partial.read_bytes() == DATA


def test_a_server_ignoring_range_starts_the_file_over(tmp_path: Path) -> None:
    partial = tmp_path / "x.part"
    partial.write_bytes(DATA[:6])
    done = fetch(Script(Answer(200, DATA)), partial)
    assert (done.size, partial.read_bytes()) == (20, DATA)


def test_a_complete_partial_file_meets_416_and_is_verified(tmp_path: Path) -> None:
    partial = tmp_path / "x.part"
    partial.write_bytes(DATA)
    session = Script(Answer(416, b""))
    assert fetch(session, partial).sha256 == sha(DATA)
    assert session.sent[0]["Range"] == "bytes=20-"


def test_a_partial_file_longer_than_the_pin_is_started_over(tmp_path: Path) -> None:
    partial = tmp_path / "x.part"
    partial.write_bytes(DATA + b"more")
    session = Script(Answer(body=DATA))
    assert fetch(session, partial).size == 20
    assert "Range" not in session.sent[0]


def test_a_partial_file_exactly_the_pinned_length_is_resumed(tmp_path: Path) -> None:
    partial = tmp_path / "x.part"
    partial.write_bytes(DATA)
    session = Script(Answer(416, b""))
    assert fetch(session, partial).size == 20
    assert session.sent[0]["Range"] == "bytes=20-"


def test_stale_bytes_from_an_earlier_build_are_thrown_away_once_not_blamed_on_the_server(
    tmp_path: Path,
) -> None:
    partial = tmp_path / "x.part"
    partial.write_bytes(b"<html>portal")  # a captive portal's page, never verified
    session = Script(Answer(206, DATA[12:]), Answer(body=DATA))
    progress: list[tuple[int, int | None]] = []
    done = fetch(session, partial, digests=("sha1",), progress=progress)
    assert (done.sha256, done.digests) == (sha(DATA), {"sha1": sha(DATA, "sha1")})
    assert [s.get("Range") for s in session.sent] == ["bytes=12-", None]
    assert session.urls == [URL, URL]
    assert session.sent[1]["Authorization"] == "Bearer abc"  # the same request, from byte 0
    # the second start reports its own progress, from byte 0
    assert progress == [(16, 20), (20, 20), (4, 20), (8, 20), (12, 20), (16, 20), (20, 20)]


def test_the_second_start_after_stale_bytes_is_held_to_the_pin_too(tmp_path: Path) -> None:
    partial = tmp_path / "x.part"
    partial.write_bytes(b"X")  # one stale byte is stale too
    session = Script(Answer(206, DATA[1:]), Answer(body=DATA + b"!"))
    with pytest.raises(IntegrityError) as caught:
        fetch(session, partial)
    assert caught.value.message == f"{WHAT}: the server announces 21 bytes, the pin says 20"
    wrong = b"Y" * 20
    partial.write_bytes(b"X")
    with pytest.raises(IntegrityError) as caught:
        fetch(Script(Answer(206, DATA[1:]), Answer(body=wrong)), partial)
    assert caught.value.message.startswith(f"{WHAT}: downloaded sha256 {sha(wrong)} does not")


def test_bytes_after_the_server_ignored_range_are_this_call_s(tmp_path: Path) -> None:
    """The server answered the Range with the whole file: those bytes are this call's, so
    wrong ones are refused, not blamed on the earlier build and fetched yet again."""
    partial = tmp_path / "x.part"
    partial.write_bytes(DATA[:6])
    session = Script(Answer(200, b"Z" * 20))
    with pytest.raises(IntegrityError):
        fetch(session, partial)
    assert len(session.sent) == 1


def test_bytes_after_a_restart_are_this_call_s_and_not_retried_again(tmp_path: Path) -> None:
    """Started over (the partial was longer than the pin): wrong bytes now are the server's."""
    partial = tmp_path / "x.part"
    partial.write_bytes(DATA + b"more")
    session = Script(Answer(body=b"Z" * 20))
    with pytest.raises(IntegrityError):
        fetch(session, partial)
    assert len(session.sent) == 1


def test_bytes_this_call_wrote_that_do_not_match_are_refused_and_deleted(tmp_path: Path) -> None:
    partial = tmp_path / "x.part"
    wrong = b"X" * 20
    with pytest.raises(IntegrityError) as caught:
        fetch(Script(Answer(body=wrong)), partial)
    assert_error(
        caught.value,
        f"{WHAT}: downloaded sha256 {sha(wrong)} does not match the pin {sha(DATA)} (20 bytes); "
        "nothing was cached",
        "the upstream or mirror serves different bytes; do not re-pin unless you know why",
    )
    assert not partial.exists()


# --- retrying ------------------------------------------------------------------------------------


def test_a_server_error_is_retried_after_the_wait_it_asks_for(
    tmp_path: Path, sleeps: list[float]
) -> None:
    session = Script(Answer(503, b"", headers={"Retry-After": "2"}), Answer(body=DATA))
    assert fetch(session, tmp_path / "x.part").size == 20
    assert sleeps == [2.0]


def test_a_dropped_connection_is_resumed_from_what_arrived(
    tmp_path: Path, sleeps: list[float]
) -> None:
    dropped = requests.exceptions.ChunkedEncodingError("connection broken")
    session = Script(Answer(body=DATA[:8], length=20, drop=dropped), Answer(206, DATA[8:]))
    assert fetch(session, tmp_path / "x.part").sha256 == sha(DATA)
    assert session.sent[1]["Range"] == "bytes=8-"
    assert len(sleeps) == 1
    assert 0.5 <= sleeps[0] <= 1.0  # the backoff of the first attempt, with its jitter


def test_a_short_body_is_retried_from_where_it_ended(tmp_path: Path) -> None:
    session = Script(Answer(body=DATA[:5], length=20), Answer(206, DATA[5:]))
    assert fetch(session, tmp_path / "x.part").size == 20
    assert session.sent[1]["Range"] == "bytes=5-"


def test_without_a_length_the_pin_says_the_body_is_short(tmp_path: Path) -> None:
    session = Script(Answer(body=DATA[:5], length=None), Answer(206, DATA[5:], length=None))
    assert fetch(session, tmp_path / "x.part").size == 20
    assert session.sent[1]["Range"] == "bytes=5-"


@pytest.mark.parametrize(
    ("answers", "failure", "kept"),
    [
        ([Answer(503, b"")] * 3, "HTTP 503", 0),
        ([Answer(body=DATA[:8], length=20)] * 3, "body ended at 8 of 20 bytes", 8),
        (
            [requests.ConnectionError("refused")] * 3,
            "ConnectionError after 0 bytes",
            0,
        ),
    ],
    ids=["status", "short body", "connection"],
)
def test_giving_up_says_why_and_how_much_is_kept(
    tmp_path: Path, sleeps: list[float], answers: list[Answer], failure: str, kept: int
) -> None:
    partial = tmp_path / "x.part"
    script = Script(*answers)
    if kept:  # each attempt resumes and gets nothing more: the 8 bytes stay
        script.answers = [answers[0], Answer(206, b"", length=12), Answer(206, b"", length=12)]
    with pytest.raises(FetchError) as caught:
        fetch(script, partial)
    assert_error(
        caught.value,
        f"{WHAT}: gave up after 3 attempts ({failure}); {kept} bytes kept for resuming",
        RETRY_FIX,
    )
    assert len(sleeps) == 3
    assert script.answers == []


def test_an_answer_that_can_never_succeed_is_not_retried(tmp_path: Path) -> None:
    session = Script(requests.exceptions.InvalidURL("no host"))
    with pytest.raises(FetchError) as caught:
        fetch(session, tmp_path / "x.part")
    assert_error(
        caught.value,
        f"{WHAT}: InvalidURL (no host)",
        "the server's answer cannot be followed: check the URL and the mirror",
    )


@pytest.mark.parametrize(
    ("status", "error", "fix"),
    [
        (404, NotFound, "the artifact is not at this URL; check the pin and the index"),
        (410, NotFound, "the artifact is not at this URL; check the pin and the index"),
        (400, FetchError, "the artifact is not at this URL; check the pin and the index"),
        (401, FetchError, CREDENTIALS_FIX),
        (403, FetchError, CREDENTIALS_FIX),
    ],
)
def test_a_client_error_is_refused_at_once(
    tmp_path: Path, status: int, error: type[FetchError], fix: str
) -> None:
    with pytest.raises(FetchError) as caught:
        fetch(Script(Answer(status, b"no")), tmp_path / "x.part")
    assert type(caught.value) is error
    assert_error(caught.value, f"{WHAT}: HTTP {status}", fix)


# --- limits --------------------------------------------------------------------------------------


def test_a_server_announcing_more_than_the_pin_is_refused_before_the_body(tmp_path: Path) -> None:
    partial = tmp_path / "x.part"
    with pytest.raises(IntegrityError) as caught:
        fetch(Script(Answer(body=DATA + b"!")), partial)
    assert_error(
        caught.value, f"{WHAT}: the server announces 21 bytes, the pin says 20", MIRROR_FIX
    )
    assert not partial.exists()


def test_what_a_resumed_answer_announces_counts_from_the_resumed_length(tmp_path: Path) -> None:
    partial = tmp_path / "x.part"
    partial.write_bytes(DATA[:6])
    with pytest.raises(IntegrityError) as caught:
        fetch(Script(Answer(206, DATA[6:] + b"!")), partial)
    assert caught.value.message == f"{WHAT}: the server announces 21 bytes, the pin says 20"


def test_a_whole_answer_shorter_than_the_pin_is_checked_not_retried(tmp_path: Path) -> None:
    """The server says 8 bytes and sends 8: the file is complete as far as it knows, and the
    hash, not another attempt, says it is not the pinned file."""
    session = Script(Answer(body=DATA[:8]))
    with pytest.raises(IntegrityError) as caught:
        fetch(session, tmp_path / "x.part")
    assert caught.value.message == (
        f"{WHAT}: downloaded sha256 {sha(DATA[:8])} does not match the pin {sha(DATA)} (8 bytes); "
        "nothing was cached"
    )
    assert len(session.sent) == 1


def test_a_body_longer_than_the_pin_is_refused_and_deleted(tmp_path: Path) -> None:
    partial = tmp_path / "x.part"
    with pytest.raises(IntegrityError) as caught:
        fetch(Script(Answer(body=DATA + b"!", length=None)), partial)
    assert_error(caught.value, f"{WHAT}: more bytes than the pinned size 20", MIRROR_FIX)
    assert not partial.exists()


def test_an_unpinned_body_stops_one_byte_past_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(download_module, "MAX_UNPINNED", 20)
    at = fetch(
        Script(Answer(body=DATA, length=None)), tmp_path / "a", sha256=None, expected_size=None
    )
    assert at.size == 20
    monkeypatch.setattr(download_module, "MAX_UNPINNED", 19)
    partial = tmp_path / "b"
    with pytest.raises(IntegrityError) as caught:
        fetch(Script(Answer(body=DATA, length=None)), partial, sha256=None, expected_size=None)
    assert_error(caught.value, f"{WHAT}: more than 0 GiB and still sending", MIRROR_FIX)
    assert not partial.exists()


def test_a_chunk_arriving_at_the_deadline_itself_is_in_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = itertools.chain([1000.0], itertools.repeat(1010.0))
    monkeypatch.setattr(time, "monotonic", lambda: next(clock))
    policy = RetryPolicy(attempts=3, read_timeout=2.0, deadline=10.0)
    done = download(
        Script(Answer(body=DATA)),
        URL,
        tmp_path / "x.part",
        sha256=sha(DATA),
        expected_size=20,
        policy=policy,
        what=WHAT,
    )
    assert done.size == 20


def test_a_download_past_its_deadline_stops_and_keeps_what_arrived(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the deadline is 1010: the second chunk is late (and the clock stays late after it)
    clock = itertools.chain([1000.0, 1005.0], itertools.repeat(1010.5))
    monkeypatch.setattr(time, "monotonic", lambda: next(clock))
    policy = RetryPolicy(attempts=3, read_timeout=2.0, deadline=10.0)
    partial = tmp_path / "x.part"
    with pytest.raises(FetchError) as caught:
        download(
            Script(Answer(body=DATA)),
            URL,
            partial,
            sha256=sha(DATA),
            expected_size=20,
            policy=policy,
            what=WHAT,
        )
    assert_error(
        caught.value,
        f"{WHAT}: still downloading after 10 s (8 bytes); 8 bytes kept for resuming",
        "the server is too slow: build again to resume, or use a nearer mirror",
    )
    assert partial.read_bytes() == DATA[:4]  # the late chunk was not written


# --- a repository's own digests -------------------------------------------------------------


def test_the_repository_s_digests_must_agree_with_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "x.aar"
    path.write_bytes(DATA)
    done = Downloaded(path, 20, sha(DATA), {"sha1": sha(DATA, "sha1")})
    agreeing = {"sha1": [sha(DATA, "sha1").upper()], "sha256": ["0" * 64, sha(DATA)]}
    check_published(done, agreeing, what=WHAT, url=URL, by="the repository")
    assert path.exists()
    with pytest.raises(IntegrityError) as caught:
        check_published(
            done,
            {"sha256": [sha(DATA)], "sha1": ["b" * 40, "a" * 40]},
            what=WHAT,
            url=URL,
            by="the repository",
        )
    assert_error(
        caught.value,
        f"{WHAT}: the repository publishes sha1 {'a' * 40} or {'b' * 40}, but the downloaded "
        f"bytes hash to {sha(DATA, 'sha1')}; nothing was cached",
        "the repository contradicts its own digest (a corrupt mirror, or a tampered file); fix "
        "or change the mirror — do not re-pin",
    )
    assert not path.exists()


def test_a_published_sha256_is_checked_against_the_download_s_own(tmp_path: Path) -> None:
    path = tmp_path / "x.tgz"
    path.write_bytes(DATA)
    done = Downloaded(path, 20, sha(DATA), {})
    with pytest.raises(IntegrityError) as caught:
        check_published(done, {"sha256": ["f" * 64]}, what=WHAT, url=URL, by="the registry")
    assert caught.value.message.startswith(f"{WHAT}: the registry publishes sha256 {'f' * 64}, ")


class _Huge(bytes):
    """A read that counts as 3 GiB and a byte: the cap's message without the bytes."""

    def __len__(self) -> int:
        return (3 << 30) + 1


def test_the_cap_is_said_in_gibibytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(download_module, "MAX_UNPINNED", 3 << 30)
    answer = Answer(length=None, pieces=[_Huge(b"x")])
    with pytest.raises(IntegrityError) as caught:
        fetch(Script(answer), tmp_path / "x.part", sha256=None, expected_size=None)
    assert caught.value.message == f"{WHAT}: more than 3 GiB and still sending"


# --- https, and the disk ---------------------------------------------------------------------

HTTPS = "https://user:secret@mirror.test/pkg/x.whl"


def test_an_https_download_that_stays_on_https_is_taken(tmp_path: Path) -> None:
    done = download(
        Script(Answer(body=DATA, url="https://mirror.test/pkg/x.whl")),
        HTTPS,
        tmp_path / "x.part",
        sha256=sha(DATA),
        expected_size=20,
        policy=POLICY,
        what=WHAT,
    )
    assert done.size == 20


def test_an_https_download_redirected_to_http_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FetchError) as caught:
        download(
            Script(Answer(body=DATA, url="http://mirror.test/pkg/x.whl")),
            HTTPS,
            tmp_path / "x.part",
            sha256=sha(DATA),
            expected_size=20,
            policy=POLICY,
            what=WHAT,
        )
    assert (caught.value.message, caught.value.file) == (
        f"{WHAT}: refused a redirect from https to http://mirror.test/pkg/x.whl",
        "https://mirror.test/pkg/x.whl",
    )


MIB = 1 << 20


def _resumed(tmp_path: Path) -> tuple[Path, Script]:
    """1 MiB kept of a 3 MiB pin; the server announces the other 2 MiB."""
    partial = tmp_path / "x.part"
    partial.write_bytes(bytes(MIB))
    return partial, Script(Answer(206, b"abcd", length=2 * MIB))


def _quota(error: DiskError, partial: Path, need: str) -> None:
    assert (error.message, error.file) == (
        f"could not write the download of {WHAT}: Disk quota exceeded (EDQUOT)",
        str(partial),
    )
    assert error.fix is not None
    assert error.fix.endswith(f"is used up: free {need} or ask for a larger quota")


def test_a_partial_that_cannot_be_opened_says_how_much_is_still_needed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORTBUNDLE_FAULT", "write=EDQUOT")
    partial, session = _resumed(tmp_path)
    with pytest.raises(DiskError) as caught:
        fetch(session, partial, sha256=sha(b"x"), expected_size=3 * MIB)
    _quota(caught.value, partial, "2 MiB more")


class _Failing:
    """The partial file's handle on a full quota: its writes, or only its close, fail."""

    def __init__(self, inner: IO[Any], *, write: bool, close: bool) -> None:
        self.inner, self.fail_write, self.fail_close = inner, write, close

    def write(self, data: bytes) -> int:
        if self.fail_write:
            raise OSError(errno.EDQUOT, "Disk quota exceeded")
        return self.inner.write(data)

    def close(self) -> None:
        self.inner.close()
        if self.fail_close:
            raise OSError(errno.EDQUOT, "Disk quota exceeded")


@pytest.mark.parametrize(
    ("write", "close"), [(True, False), (True, True), (False, True)], ids=["write", "both", "close"]
)
def test_a_write_or_close_the_disk_refuses_names_the_partial_and_the_need(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write: bool, close: bool
) -> None:
    """A failed write is the error reported, even when the close after it fails too."""
    partial, session = _resumed(tmp_path)
    real_open = Path.open

    def failing_open(self: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = real_open(self, mode, *args, **kwargs)
        if self == partial and "a" in mode:
            return _Failing(handle, write=write, close=close)
        return handle

    monkeypatch.setattr(Path, "open", failing_open)
    with pytest.raises(DiskError) as caught:
        fetch(session, partial, sha256=sha(b"x"), expected_size=3 * MIB)
    _quota(caught.value, partial, "2 MiB more")
