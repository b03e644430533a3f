"""A hostile or broken server cannot hang a fetch, fill the disk or escape as a traceback."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from ortbundle._core.errors import FetchError, IntegrityError
from ortbundle.config.retry import RetryPolicy
from ortbundle.fetch import download as download_module
from ortbundle.fetch import http as http_module
from ortbundle.fetch.download import download, request_with_retries
from tests.helpers.loopback import LoopbackServer, QuietHandler

FAST = RetryPolicy(attempts=2, base_delay=0.01, max_delay=0.02, read_timeout=2.0)
ZERO = "0" * 64


class Hostile(QuietHandler):
    def do_GET(self) -> None:
        if self.path == "/loop":
            self.send_response(302)
            self.send_header("Location", "/loop")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/ftp":
            self.send_response(302)
            self.send_header("Location", "ftp://127.0.0.1/file")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/huge":
            self.send(200, b"x" * 4096)
        elif self.path == "/drip":
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            try:
                for _ in range(100):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.05)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up on us: that is the point
        else:
            self.send(404, b"")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    loopback = LoopbackServer()
    with loopback.serving(Hostile):
        yield loopback.origin


@pytest.fixture
def session() -> Iterator[requests.Session]:
    with requests.Session() as session:
        yield session


@pytest.mark.parametrize(("path", "kind"), [("/loop", "TooManyRedirects"), ("/ftp", "Schema")])
def test_an_unfollowable_answer_is_a_fetch_error_naming_the_url(
    server: str, session: requests.Session, path: str, kind: str
) -> None:
    with pytest.raises(FetchError, match=kind) as failed:
        request_with_retries(session, server + path, FAST, what="index page for x")
    assert failed.value.file == server + path
    with pytest.raises(FetchError, match=kind):
        download(
            session,
            server + path,
            Path("/nonexistent/never-written"),
            sha256=ZERO,
            expected_size=None,
            policy=FAST,
            what="x.whl",
        )


def test_a_document_larger_than_any_index_page_is_refused(
    server: str, session: requests.Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_module, "MAX_DOCUMENT", 1024)
    with pytest.raises(FetchError, match="more than 0 MiB for a document"):
        request_with_retries(session, server + "/huge", FAST, what="index page for x")


def test_an_unpinned_download_stops_at_its_cap_and_keeps_nothing(
    server: str, session: requests.Session, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(download_module, "MAX_UNPINNED", 1024)
    partial = tmp_path / "x.part"
    with pytest.raises(IntegrityError, match="still sending"):
        download(
            session,
            server + "/huge",
            partial,
            sha256=None,
            expected_size=None,
            policy=FAST,
            what="x.aar",
        )
    assert not partial.exists()


def test_a_server_that_drips_meets_the_deadline(
    server: str, session: requests.Session, tmp_path: Path
) -> None:
    policy = RetryPolicy(attempts=1, base_delay=0.01, read_timeout=2.0, deadline=0.5)
    started = time.monotonic()
    with pytest.raises(FetchError, match=r"still downloading after 0 s .*kept for resuming"):
        download(
            session,
            server + "/drip",
            tmp_path / "x.part",
            sha256=ZERO,
            expected_size=100,
            policy=policy,
            what="x.whl",
        )
    assert time.monotonic() - started < 5  # not the 5 s the server wanted
