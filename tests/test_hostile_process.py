"""Hostile conditions, processes: builds SIGKILLed mid-way, and builds racing on one cache.

A build runs in a child process (tests/helpers/faults.py: start_build) and is killed at a
phase: while a download stalls, right after a runtime was staged, right after a channel was
generated, and inside the memo store. Then:
- dist/ still holds the previous complete tree, byte for byte (a hidden scratch directory of
  the dead build is allowed until the next build, which must remove it);
- the next build completes, resumes what it can, and publishes one verified, signed tree;
- the cache holds only verified bytes.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ortbundle._core.progress import Reporter
from ortbundle.config.plan import Project
from ortbundle.pipeline.build import build
from tests.helpers.faults import (
    FaultServer,
    assert_published_and_verified,
    big_payload,
    kill,
    snapshot,
    start_build,
    unverified_in_cache,
    version_dir,
    wait_for,
)
from tests.helpers.project import FakeProject


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer().running() as running:
        assert isinstance(running, FaultServer)
        yield running


@pytest.fixture
def published(fake: FakeProject, reporter: Reporter) -> dict[str, tuple[str, bytes, int]]:
    """A first, good build into dist/ (from its own cache): what the killed build must spare."""
    fake.linux["onnxruntime/data.bin"] = big_payload()
    fake.write()
    build(fake.project, fake.options(cache_dir=fake.root / "first-cache"), reporter)
    return snapshot(version_dir(fake))


def _scratch_dirs(fake: FakeProject) -> list[str]:
    return sorted(p.name for p in version_dir(fake).parent.iterdir() if p.name != "1.2.3")


PHASES = ["download", "stage", "channel"]


@pytest.mark.slow
@pytest.mark.parametrize("phase", PHASES)
def test_build_killed_mid_way_leaves_dist_whole_and_the_next_build_completes(
    fake: FakeProject,
    server: FaultServer,
    published: dict[str, tuple[str, bytes, int]],
    reporter: Reporter,
    phase: str,
) -> None:
    cache = fake.root / "cache"  # a cold cache: the killed build must download and stage
    marker = fake.root / "stopped-here"
    if phase == "download":
        server.more.stall_after, server.more.stall_times = 100_000, 1
        server.more.stall_only = fake.wheels["linux-x86_64"].name  # the 256 KiB one
    child = start_build(fake, cache=cache, dist=fake.root / "dist", hook=phase, marker=marker)
    try:
        if phase == "download":
            wait_for(server.more.stalled.is_set, "the download to stall")
            time.sleep(0.2)  # let the child write what it received
        else:
            wait_for(marker.exists, f"the build to reach {phase}")
        scratch = _scratch_dirs(fake)
        # a build fetches before it opens its scratch directory
        assert scratch == ([] if phase == "download" else [f".1.2.3.partial-{child.pid}"])
        if phase == "channel":
            assert (version_dir(fake).parent / scratch[0] / "packaging" / "arch").is_dir()
    finally:
        kill(child)
    partial = {p.name.removesuffix(".part"): p.stat().st_size for p in cache.glob("partial/*")}
    if phase == "download":  # what the dead build received is on disk, to be resumed
        assert 0 < partial[fake.pin("linux-x86_64")] <= 100_000
    else:
        assert partial == {}

    assert snapshot(version_dir(fake)) == published  # the old tree, untouched
    server.requests.clear()
    build(fake.project, fake.options(), reporter)  # the next build, on the same cache
    assert_published_and_verified(fake)  # one tree, verified; the dead build's scratch is gone
    assert unverified_in_cache(cache) == []
    for target, wheel in fake.wheels.items():
        if partial.get(fake.pin(target)):  # a download the kill cut short: resumed, not redone
            ranges = [r for _, path, r in server.requests if path.endswith("/" + wheel.name)]
            assert ranges == [f"bytes={partial[fake.pin(target)]}-"]


def test_build_killed_while_memoising_leaves_no_half_entry_after_the_next_build(
    fake: FakeProject, reporter: Reporter
) -> None:
    fake.write()
    cache = fake.root / "cache"
    marker = fake.root / "stopped-here"
    child = start_build(fake, cache=cache, dist=fake.root / "dist", hook="memo", marker=marker)
    try:
        wait_for(marker.exists, "the build to reach the memo store")
    finally:
        kill(child)
    assert list(cache.glob("stages/*/.*.partial-*"))  # the dead build's half-written entry
    build(fake.project, fake.options(), reporter)
    assert_published_and_verified(fake)
    assert unverified_in_cache(cache) == []


def test_two_builds_sharing_one_cache_at_once_are_both_correct(
    fake: FakeProject, server: FaultServer, tmp_path: Path
) -> None:
    fake.linux["onnxruntime/data.bin"] = big_payload()
    fake.write()
    server.more.trickle = (16 << 10, 0.01)  # slow enough that both builds want it at once
    cache = tmp_path / "shared-cache"
    dists = [tmp_path / "dist-a", tmp_path / "dist-b"]
    children = [start_build(fake, cache=cache, dist=dist) for dist in dists]
    for child in children:
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err.decode()
    for dist in dists:
        assert_published_and_verified(fake, dist)
    a, b = (snapshot(version_dir(fake, dist)) for dist in dists)
    assert a == b  # the same inputs: the same bytes, whoever won each lock
    for wheel in fake.wheels.values():
        assert server.file_requests(wheel.name) == 1  # downloaded once, by one of them
    assert unverified_in_cache(cache) == []
    # and a third build from the shared cache is a pure cache hit that also verifies
    build(Project.at(fake.root, tmp_path / "dist-c"), fake.options(cache_dir=cache), _quiet())
    assert_published_and_verified(fake, tmp_path / "dist-c")
    assert all(server.file_requests(w.name) == 1 for w in fake.wheels.values())


def _quiet() -> Reporter:
    from ortbundle._core.progress import plain_reporter

    return plain_reporter()


@pytest.mark.slow
@pytest.mark.parametrize(("signal_number", "name"), [(2, "SIGINT"), (15, "SIGTERM"), (1, "SIGHUP")])
def test_a_build_interrupted_says_so_and_removes_its_scratch_tree(
    fake: FakeProject, published: dict[str, tuple[str, bytes, int]], signal_number: int, name: str
) -> None:
    """Ctrl-C (SIGINT), a CI runner's cancel (SIGTERM) or a closed terminal (SIGHUP) while the
    build writes its evidence: one line saying it was interrupted, exit 128 + the signal, the
    scratch tree removed at once (not left for the next build), and dist/ as it was."""
    marker = fake.root / "stopped-here"
    child = start_build(
        fake,
        cache=fake.root / "cache",
        dist=fake.root / "dist",
        hook="evidence",
        marker=marker,
        cli=True,
    )
    try:
        wait_for(marker.exists, "the build to reach its evidence")
        assert _scratch_dirs(fake) == [f".1.2.3.partial-{child.pid}"]
        os.kill(child.pid, signal_number)
        _, err = child.communicate(timeout=60)
    finally:
        if child.returncode is None:
            kill(child)
    message = err.decode()
    assert child.returncode == 128 + signal_number, message
    assert f"ortbundle: interrupted by {name}" in message, message
    assert "Traceback" not in message
    assert _scratch_dirs(fake) == []  # removed by the build itself
    assert snapshot(version_dir(fake)) == published


def test_ctrl_c_outside_a_command_s_work_is_said_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """invoke ends a task on KeyboardInterrupt with exit 1 and no word; a task says it was
    interrupted and exits 130 wherever the interrupt lands (here: before its work starts)."""
    from invoke.context import Context
    from invoke.exceptions import Exit

    import tasks

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(tasks, "run_build", interrupted)
    with pytest.raises(Exit) as stopped:
        tasks.build(Context())
    assert stopped.value.code == 130
    assert "ortbundle: interrupted by SIGINT" in str(stopped.value.message)


def _waiting_on_a_lock(pid: int) -> bool:
    """Whether process `pid` is blocked on an flock (/proc/locks marks waiters with `->`)."""
    return any(
        "->" in line and f" {pid} " in line for line in Path("/proc/locks").read_text().splitlines()
    )


@pytest.mark.slow
def test_a_build_waiting_for_another_s_lock_says_so(
    fake: FakeProject, published: dict[str, tuple[str, bytes, int]]
) -> None:
    """Two builds of one dist/ on one cache: the second waits for the first to publish, and
    says whose lock it waits for instead of looking hung."""
    product = fake.root / "manifests" / "fakeproduct.toml"
    product.write_text(product.read_text().replace("A synthetic product", "A newer product"))
    marker = fake.root / "stopped-here"
    cache, dist = fake.root / "cache", fake.root / "dist"
    first = start_build(fake, cache=cache, dist=dist, hook="evidence", marker=marker, cli=True)
    second = None
    try:
        wait_for(marker.exists, "the first build to hold the dist/ lock")
        second = start_build(fake, cache=cache, dist=dist, cli=True)
        wait_for(lambda: _waiting_on_a_lock(second.pid), "the second build to wait", 60)
        os.kill(first.pid, signal.SIGINT)  # the first stops; the second goes on
        first.communicate(timeout=60)
        out, err = second.communicate(timeout=120)
    finally:
        for child in (first, second):
            if child is not None and child.returncode is None:
                kill(child)
    assert second.returncode == 0, err.decode()
    printed = out.decode()
    assert "waiting for another build, which holds the lock on publishing" in printed, printed
    assert str(version_dir(fake)) in printed, printed
    assert_published_and_verified(fake)


def test_sighup_ends_a_command_s_work_unless_the_caller_ignores_it() -> None:
    """A closed terminal (SIGHUP) stops a command as SIGTERM does; under `nohup` (SIGHUP
    ignored) the command keeps the caller's choice and runs on."""
    from ortbundle.cli.common import CommandFailed, guard

    def hang_up() -> str:
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(0.5)  # the handler runs at the next bytecode
        return "finished"

    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        assert guard(hang_up) == "finished"  # nohup: ignored, as the caller asked
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        with pytest.raises(CommandFailed) as stopped:
            guard(hang_up)
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert stopped.value.code == 128 + signal.SIGHUP
    assert "interrupted by SIGHUP" in str(stopped.value)
