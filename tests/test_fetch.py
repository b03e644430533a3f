"""Downloads against a local index with injected faults: retries, resume, refusal, cache."""

from __future__ import annotations

import pickle
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import requests

from ortbundle._core.errors import FetchError, IntegrityError
from ortbundle._core.progress import Reporter
from ortbundle.fetch.cache import Cache
from ortbundle.fetch.config.pip import index_config
from ortbundle.fetch.download import RetryPolicy, download
from ortbundle.pipeline.build import build, fetch
from tests.helpers.index_server import IndexServer
from tests.helpers.project import FAST_RETRY, FakeProject
from tests.helpers.wheels import sha256_of

REPO = Path(__file__).resolve().parents[1]

LINUX = ("linux-x86_64",)


def linux_wheel(fake: FakeProject) -> str:
    return fake.wheels["linux-x86_64"].name


def test_5xx_is_retried(fake: FakeProject, reporter: Reporter) -> None:
    fake.write()
    fake.server.faults.status_first = [500, 503]
    build(fake.project, fake.options(targets=LINUX), reporter)
    assert fake.server.file_requests(linux_wheel(fake)) == 3


class _Clock:
    """Stands in for the download module's `time`: records each sleep instead of sleeping."""

    monotonic = staticmethod(time.monotonic)
    time = staticmethod(time.time)

    def __init__(self) -> None:
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    import ortbundle.fetch.download as download

    recorder = _Clock()
    monkeypatch.setattr(download, "time", recorder)
    return recorder


def test_429_honours_retry_after(fake: FakeProject, reporter: Reporter, clock: _Clock) -> None:
    """The server asks for 7 s; the backoff alone would wait at most base_delay (0.01 s)."""
    fake.write()
    fake.server.faults.status_first = [429]
    fake.server.faults.retry_after = "7"
    build(fake.project, fake.options(targets=LINUX), reporter)  # max_delay 0.05: a cap of 0.2 s
    assert fake.server.file_requests(linux_wheel(fake)) == 2
    assert clock.slept == [min(7.0, FAST_RETRY.max_delay * 4)]  # the header, capped


def test_429_retry_after_within_the_cap_is_waited_exactly(
    fake: FakeProject, reporter: Reporter, clock: _Clock
) -> None:
    fake.write()
    fake.server.faults.status_first = [429]
    fake.server.faults.retry_after = "7"
    patient = replace(FAST_RETRY, max_delay=8.0)  # a cap of 32 s
    build(fake.project, fake.options(targets=LINUX, retry=patient), reporter)
    assert clock.slept == [7.0]


def test_404_is_not_retried(fake: FakeProject, reporter: Reporter) -> None:
    fake.write()
    fake.server.faults.status_first = [404]
    with pytest.raises(FetchError, match="HTTP 404"):
        build(fake.project, fake.options(targets=LINUX), reporter)
    assert fake.server.file_requests(linux_wheel(fake)) == 1


def test_interrupted_download_resumes_with_range(fake: FakeProject, reporter: Reporter) -> None:
    fake.write()
    fake.server.faults.reset_after = 1000
    build(fake.project, fake.options(targets=LINUX), reporter)
    ranges = [r for _, path, r in fake.server.requests if path.endswith(linux_wheel(fake))]
    assert ranges == [None, "bytes=1000-"]
    blob = Cache(fake.root / "cache").blob_path(fake.pin("linux-x86_64"))
    assert blob.read_bytes() == fake.wheels["linux-x86_64"].read_bytes()


def test_partial_download_survives_into_the_next_build(
    fake: FakeProject, reporter: Reporter
) -> None:
    fake.write()
    fake.server.faults.reset_after = 1500
    one_try = RetryPolicy(attempts=1, base_delay=0.01, read_timeout=2.0)
    with pytest.raises(FetchError, match="1500 bytes kept for resuming"):
        build(fake.project, fake.options(targets=LINUX, retry=one_try), reporter)
    build(fake.project, fake.options(targets=LINUX), reporter)
    ranges = [r for _, path, r in fake.server.requests if path.endswith(linux_wheel(fake))]
    assert ranges == [None, "bytes=1500-"]


def test_server_ignoring_range_restarts_cleanly(fake: FakeProject, reporter: Reporter) -> None:
    fake.write()
    fake.server.faults.reset_after = 700
    fake.server.faults.ignore_range = True
    build(fake.project, fake.options(targets=LINUX), reporter)
    blob = Cache(fake.root / "cache").blob_path(fake.pin("linux-x86_64"))
    assert blob.read_bytes() == fake.wheels["linux-x86_64"].read_bytes()


def test_cache_file_modified_on_disk_is_fetched_again(
    fake: FakeProject, reporter: Reporter
) -> None:
    fake.write()
    fetch(fake.project, fake.options(targets=LINUX), reporter)
    cache = Cache(fake.root / "cache")
    blob = cache.blob_path(fake.pin("linux-x86_64"))
    with blob.open("r+b") as handle:
        handle.seek(100)
        handle.write(b"X")
    _plan, artifacts = fetch(fake.project, fake.options(targets=LINUX), reporter)
    assert all(a.downloaded for a in artifacts.values())
    assert sha256_of(blob) == fake.pin("linux-x86_64")


def test_two_builds_sharing_a_cache_download_once(
    fake: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    fake.write()
    errors: list[BaseException] = []

    def one() -> None:
        try:
            fetch(fake.project, fake.options(targets=LINUX), reporter)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert fake.server.file_requests(linux_wheel(fake)) == 1


def serve_and_download(
    server: IndexServer, tmp_path: Path, *, expected_size: int, body: bytes | None = None
) -> Path:
    """Serve a 5000-byte file (or `body` in its place) and download it against its real pin."""
    wheel = tmp_path / "x.whl"
    wheel.write_bytes(b"y" * 5000)
    server.add("x", wheel)
    server.faults.body_override = body
    partial = tmp_path / "x.part"
    download(
        requests.Session(),
        server.url.replace("/simple/", "/files/x.whl"),
        partial,
        sha256=sha256_of(wheel),
        expected_size=expected_size,
        policy=FAST_RETRY,
        what="x.whl",
    )
    return partial


def test_more_bytes_than_the_pinned_size_is_refused(server: IndexServer, tmp_path: Path) -> None:
    with pytest.raises(IntegrityError, match="announces 5000 bytes, the pin says 4000"):
        serve_and_download(server, tmp_path, expected_size=4000)
    assert not (tmp_path / "x.part").exists()


def test_right_size_wrong_bytes_is_refused(server: IndexServer, tmp_path: Path) -> None:
    with pytest.raises(IntegrityError, match="does not match the pin"):
        serve_and_download(server, tmp_path, expected_size=5000, body=b"z" * 5000)
    assert not (tmp_path / "x.part").exists()


def test_index_url_comes_from_pip_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:1/mirror/simple")
    assert index_config().index_urls[0] == "http://127.0.0.1:1/mirror/simple"
    explicit = index_config("http://127.0.0.1:2/other/simple")
    assert explicit.index_urls == ("http://127.0.0.1:2/other/simple",)


def test_pip_is_asked_for_its_settings_and_its_default_side_by_side(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each question is a Python start and a pip import: both are started before either is
    waited for, so a cold fetch pays for one, not two in a row."""
    import ortbundle.fetch.config.pip as pip_config

    events: list[str] = []
    start, finish = pip_config._start_pip, pip_config._finish_pip

    def started(args: tuple[str, ...]) -> subprocess.Popen[str]:
        events.append(f"start {args[0]}")
        return start(args)

    def finished(args: tuple[str, ...], process: subprocess.Popen[str]) -> str:
        events.append(f"finish {args[0]}")
        return finish(args, process)

    monkeypatch.setattr(pip_config, "_start_pip", started)
    monkeypatch.setattr(pip_config, "_finish_pip", finished)
    monkeypatch.setenv("PIP_NO_INPUT", "1")  # another environment: asked afresh, not memoised
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    assert index_config().index_urls  # pip's configured index, else its default
    assert events == ["start config", "start download", "finish config", "finish download"]


def test_project_missing_from_index_says_where_it_looked(
    fake: FakeProject, reporter: Reporter
) -> None:
    fake.write()
    fake.server.files.clear()
    with pytest.raises(FetchError, match="not in the configured index.*no such project"):
        build(fake.project, fake.options(targets=LINUX), reporter)


def test_a_warm_build_imports_no_http_stack(fake: FakeProject, reporter: Reporter) -> None:
    """Registries make a registry (and import requests) only when something must be
    downloaded: a build whose sources are all cached never imports the HTTP stack."""
    fake.write()
    build(fake.project, fake.options(targets=LINUX), reporter)  # fills the cache
    state = fake.root / "warm.pickle"
    state.write_bytes(pickle.dumps((fake.project, fake.options(targets=LINUX))))
    script = (
        "import pickle, sys\n"
        "from ortbundle.pipeline.build import build\n"
        "from ortbundle._core.progress import Reporter\n"
        "from rich.console import Console\n"
        f"project, options = pickle.loads(open({str(state)!r}, 'rb').read())\n"
        "build(project, options, Reporter(Console(quiet=True)))\n"
        "print(sorted(m for m in ('requests', 'urllib3') if m in sys.modules))\n"
    )
    shutil.rmtree(fake.project.dist)  # built again, from the cached downloads
    before = len(fake.server.requests)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert len(fake.server.requests) == before


def test_429_retry_after_as_an_http_date_is_waited(
    fake: FakeProject, reporter: Reporter, clock: _Clock
) -> None:
    """The SURVIVED case in test_hostile_network sends the current time (a wait of 0, which
    any backoff satisfies); a date 20 s ahead must be waited for (to the second)."""
    from email.utils import formatdate

    fake.write()
    fake.server.faults.status_first = [429]
    fake.server.faults.retry_after = formatdate(time.time() + 20, usegmt=True)
    patient = replace(FAST_RETRY, max_delay=8.0)
    build(fake.project, fake.options(targets=LINUX, retry=patient), reporter)
    assert len(clock.slept) == 1 and 17.0 < clock.slept[0] <= 20.0, clock.slept
