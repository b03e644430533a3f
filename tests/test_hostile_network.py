"""Hostile inputs, network: a misbehaving index on 127.0.0.1 against the real fetch and build.

Every case ends with the same audit: a fault that can be survived leaves a verified signed tree
in dist/ and only verified blobs in the cache; a fault that must be refused exits with its error
class, caches nothing for the pin (a transient give-up keeps the received prefix in partial/,
by design, to resume) and leaves dist/ byte for byte as it was.
Cases already proven elsewhere (and not repeated here): tests/test_fetch.py
(test_5xx_is_retried, test_429_honours_retry_after, test_404_is_not_retried,
test_interrupted_download_resumes_with_range, test_partial_download_survives_into_the_next_build,
test_server_ignoring_range_restarts_cleanly, test_more_bytes_than_the_pinned_size_is_refused,
test_right_size_wrong_bytes_is_refused) and tests/test_build.py
(test_index_digest_disagreeing_with_pin_stops, test_hash_mismatch_caches_and_stages_nothing).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from email.utils import formatdate
from pathlib import Path

import pytest

from ortbundle._core.progress import Reporter
from ortbundle.cli.build import run_build, run_fetch
from ortbundle.cli.common import CommandFailed
from ortbundle.config.retry import RetryPolicy
from ortbundle.pipeline.build import build
from tests.helpers.faults import (
    FaultServer,
    assert_published_and_verified,
    big_payload,
    blob_and_partial,
    pin_size,
    self_signed_cert,
    snapshot,
    unverified_in_cache,
)
from tests.helpers.project import FAST_RETRY, FakeProject

LINUX = ("linux-x86_64",)
WHEEL = "onnxruntime_fake-1.0.0-cp311-cp311-manylinux_2_28_x86_64.whl"
CUT = 50_000  # where a body is cut: well inside the 256 KiB wheel
SLOW = RetryPolicy(attempts=4, base_delay=0.01, max_delay=0.05, read_timeout=0.5)


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer().running() as running:
        assert isinstance(running, FaultServer)
        yield running


@pytest.fixture
def big(fake: FakeProject) -> FakeProject:
    """The fake project with a 256 KiB incompressible member in the Linux wheel."""
    fake.linux["onnxruntime/data.bin"] = big_payload()
    return fake.write()


def file_ranges(server: FaultServer) -> list[str | None]:
    return [r for _, path, r in server.requests if path.endswith("/" + WHEEL)]


def assert_cache_clean(fake: FakeProject) -> None:
    cache = fake.root / "cache"
    assert unverified_in_cache(cache) == []
    blob = cache / "sha256" / fake.pin("linux-x86_64")[:2] / fake.pin("linux-x86_64")
    assert blob.read_bytes() == fake.wheels["linux-x86_64"].read_bytes()


# --------------------------------------------------------------------------- survived


def _rst(s: FaultServer) -> None:
    s.more.rst_after = CUT


def _fin(s: FaultServer) -> None:
    s.faults.reset_after = CUT


def _stall_once(s: FaultServer) -> None:
    s.more.stall_after, s.more.stall_times = CUT, 1


def _trickle(s: FaultServer) -> None:
    s.more.trickle = (64 << 10, 0.15)  # ~0.75 s in all, every read well inside 0.5 s


def _status(*codes: int, retry_after: str | None = None) -> Callable[[FaultServer], None]:
    def setup(s: FaultServer) -> None:
        s.faults.status_first = list(codes)
        s.faults.retry_after = retry_after

    return setup


def _no_length(s: FaultServer) -> None:
    s.more.no_length = True


def _no_length_rst(s: FaultServer) -> None:
    s.more.no_length, s.more.rst_after = True, CUT


def _fin_range_ignored(s: FaultServer) -> None:
    s.faults.reset_after, s.faults.ignore_range = CUT, True


SURVIVED: dict[str, tuple[Callable[[FaultServer], None], list[str | None] | int]] = {
    # fault: (set it up, the file requests expected: their Range headers, or just a count)
    "reset-mid-body": (_rst, 2),  # a RST may discard bytes in flight: the offset varies
    "truncated-with-correct-length": (_fin, [None, f"bytes={CUT}-"]),
    "stall-past-read-timeout": (_stall_once, [None, f"bytes={CUT}-"]),
    "slow-but-steady": (_trickle, [None]),
    "500-then-200": (_status(500), [None, None]),
    "502-503-504-then-200": (_status(502, 503, 504), [None] * 4),
    "429-retry-after-a-day": (_status(429, retry_after="86400"), [None, None]),
    "429-retry-after-http-date": (_status(429, retry_after=formatdate(usegmt=True)), 2),
    "no-content-length": (_no_length, [None]),
    "no-content-length-then-reset": (_no_length_rst, 2),
    "truncated-and-range-ignored": (_fin_range_ignored, [None, f"bytes={CUT}-"]),
}


@pytest.mark.parametrize("fault", SURVIVED)
def test_fault_is_survived_and_only_verified_bytes_remain(
    big: FakeProject, server: FaultServer, reporter: Reporter, fault: str
) -> None:
    setup, expected = SURVIVED[fault]
    setup(server)
    started = time.monotonic()
    build(big.project, big.options(targets=LINUX, retry=SLOW), reporter)
    assert time.monotonic() - started < 10  # a Retry-After of a day is capped, not obeyed
    ranges = file_ranges(server)
    if isinstance(expected, list):
        assert ranges == expected
    else:
        assert len(ranges) == expected, ranges
    assert_published_and_verified(big)
    assert_cache_clean(big)


def test_reset_resume_through_the_fetch_task(big: FakeProject, server: FaultServer) -> None:
    """`invoke fetch` (run_fetch): a RST mid-body, resumed with Range, then verified."""
    server.more.rst_after = CUT
    run_fetch(big.options(targets=LINUX, retry=SLOW), root=big.root)
    ranges = file_ranges(server)
    assert len(ranges) == 2 and ranges[1] is not None and ranges[1].startswith("bytes=")
    assert 0 < int(ranges[1][6:-1]) <= CUT
    assert_cache_clean(big)


def test_retry_after_seconds_are_waited(fake: FakeProject, server: FaultServer) -> None:
    fake.write()
    server.faults.status_first, server.faults.retry_after = [429], "1"
    patient = replace(FAST_RETRY, max_delay=0.5)  # caps a Retry-After at 2 s
    started = time.monotonic()
    run_fetch(fake.options(targets=LINUX, retry=patient), root=fake.root)
    assert time.monotonic() - started >= 0.95
    assert len(file_ranges(server)) == 2


# --------------------------------------------------------------------------- refused


def _always(code: int) -> Callable[[FakeProject, FaultServer], None]:
    def setup(fake: FakeProject, s: FaultServer) -> None:
        s.faults.status_first = [code] * 20

    return setup


def _stall_always(fake: FakeProject, s: FaultServer) -> None:
    s.more.stall_after = CUT


def _length_over_pin(fake: FakeProject, s: FaultServer) -> None:
    pin_size(fake, "linux", fake.wheels["linux-x86_64"].stat().st_size - 1)


def _stream_over_pin(fake: FakeProject, s: FaultServer) -> None:
    s.more.no_length = True
    pin_size(fake, "linux", fake.wheels["linux-x86_64"].stat().st_size - 1)


def _wrong_bytes(fake: FakeProject, s: FaultServer) -> None:
    real = fake.wheels["linux-x86_64"].read_bytes()
    s.faults.body_override = real[:-1] + bytes([real[-1] ^ 1])  # same size, one bit


def _index_digest(html: bool) -> Callable[[FakeProject, FaultServer], None]:
    def setup(fake: FakeProject, s: FaultServer) -> None:
        s.faults.publish_sha256, s.faults.html_only = "f" * 64, html

    return setup


REFUSED: dict[str, tuple[Callable[[FakeProject, FaultServer], None], int, str, int]] = {
    # fault: (set it up, exit code, message, file requests)
    "404": (_always(404), 3, "HTTP 404", 1),
    "500-forever": (_always(500), 3, "gave up after 4 attempts (HTTP 500)", 4),
    "stall-forever": (_stall_always, 3, "gave up after 4 attempts (ReadTimeoutError", 4),
    "content-length-over-pinned-size": (_length_over_pin, 4, "the server announces", 1),
    "stream-over-pinned-size": (_stream_over_pin, 4, "more bytes than the pinned size", 1),
    "right-size-wrong-hash": (_wrong_bytes, 4, "does not match the pin", 1),
    "index-digest-json": (_index_digest(False), 4, "the index publishes sha256 ffff", 0),
    "index-digest-html": (_index_digest(True), 4, "the index publishes sha256 ffff", 0),
}


@pytest.mark.slow
@pytest.mark.parametrize("fault", REFUSED)
def test_fault_is_refused_and_nothing_unverified_is_kept(
    big: FakeProject, server: FaultServer, reporter: Reporter, fault: str
) -> None:
    setup, code, message, requests = REFUSED[fault]
    # a good build first, from another cache: dist must come through the refusal untouched
    build(big.project, big.options(cache_dir=big.root / "good-cache"), reporter)
    before = snapshot(big.root / "dist")
    setup(big, server)
    server.requests.clear()
    with pytest.raises(CommandFailed) as failed:
        run_build(big.options(targets=LINUX, retry=SLOW), root=big.root)
    assert failed.value.code == code
    assert message in str(failed.value) and WHEEL in str(failed.value)
    assert len(file_ranges(server)) == requests
    cache = big.root / "cache"
    kept = blob_and_partial(cache, big.pin("linux-x86_64"))
    if fault == "stall-forever":  # a transient failure keeps the received prefix to resume
        assert kept == [f"partial/{big.pin('linux-x86_64')}.part"]
        prefix = (cache / kept[0]).read_bytes()
        assert len(prefix) >= CUT and big.wheels["linux-x86_64"].read_bytes().startswith(prefix)
    else:
        assert kept == []
    assert snapshot(big.root / "dist") == before
    assert_published_and_verified(big)


# ---------------------------------------------------------------- resumable, not refusable


def test_a_wrong_partial_left_by_an_earlier_build_is_restarted(
    big: FakeProject, reporter: Reporter
) -> None:
    partial = big.root / "cache" / "partial" / f"{big.pin('linux-x86_64')}.part"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(b"<html>captive portal</html>" * 100)  # what a bad network left
    build(big.project, big.options(targets=LINUX), reporter)
    assert_cache_clean(big)


def test_a_short_body_without_length_is_resumed_when_the_size_is_pinned(
    big: FakeProject, server: FaultServer, reporter: Reporter
) -> None:
    pin_size(big, "linux", big.wheels["linux-x86_64"].stat().st_size)
    server.more.no_length = True
    server.faults.reset_after = CUT  # a clean close (FIN) after CUT bytes, once
    build(big.project, big.options(targets=LINUX), reporter)
    assert_cache_clean(big)


# ------------------------------------------------------------------- https → http downgrade


@pytest.fixture
def tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cert = self_signed_cert(tmp_path / "tls")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))
    return cert.parent


@pytest.fixture
def https_index(tls: Path) -> Iterator[FaultServer]:
    with FaultServer(tls=tls).running() as running:
        assert isinstance(running, FaultServer)
        yield running


def _on(fake: FakeProject, index: FaultServer) -> FakeProject:
    """The fake project's wheels, served (also) by `index`."""
    for wheel in fake.wheels.values():
        index.add("onnxruntime-fake", wheel)
    return fake


def test_https_index_is_used_when_it_stays_on_https(
    fake: FakeProject, https_index: FaultServer, reporter: Reporter
) -> None:
    _on(fake.write(), https_index)
    build(fake.project, fake.options(index_url=https_index.url), reporter)
    assert_published_and_verified(fake)
    assert https_index.file_requests(WHEEL) == 1


@pytest.mark.parametrize("what", ["file", "page"])
def test_redirect_from_https_to_http_is_refused(
    fake: FakeProject,
    server: FaultServer,
    https_index: FaultServer,
    reporter: Reporter,
    what: str,
) -> None:
    _on(fake.write(), https_index)
    if what == "file":
        https_index.more.redirect_files_to = server.files_url
    else:
        https_index.more.redirect_pages_to = server.url
    with pytest.raises(CommandFailed) as failed:
        run_build(fake.options(index_url=https_index.url), root=fake.root)
    assert failed.value.code == 3
    assert f"refused a redirect from https to {server.url.split('/simple/')[0]}" in str(
        failed.value
    )
    assert unverified_in_cache(fake.root / "cache") == []
    assert not (fake.root / "cache" / "sha256").exists()
    assert not (fake.root / "dist").exists()


def test_redirect_to_http_is_followed_when_the_index_is_http(
    fake: FakeProject, server: FaultServer, reporter: Reporter
) -> None:
    fake.write()
    with FaultServer().running() as mirror:
        _on(fake, mirror)
        server.more.redirect_files_to = mirror.url.replace("/simple/", "/files/")
        build(fake.project, fake.options(), reporter)
        assert mirror.file_requests(WHEEL) == 1
    assert_published_and_verified(fake)


def test_https_index_linking_a_file_over_http_is_refused(
    fake: FakeProject, server: FaultServer, https_index: FaultServer, reporter: Reporter
) -> None:
    _on(fake.write(), https_index)
    https_index.more.file_base = server.files_url
    with pytest.raises(CommandFailed) as failed:
        run_build(fake.options(index_url=https_index.url), root=fake.root)
    assert failed.value.code == 3 and "http" in str(failed.value)
    assert server.file_requests(WHEEL) == 0
