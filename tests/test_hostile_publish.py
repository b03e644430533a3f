"""Hostile conditions, publishing: a build killed at every step of putting its tree in place.

The tool's own fault points (ortbundle/_core/faults.py, set by ORTBUNDLE_FAULT) SIGKILL the build
at each step of ortbundle/_core/publish.py. After each kill, `invoke verify` on the version
directory passes — it holds the old tree or the new one, complete — and the next build
publishes one verified tree and removes what the dead one left. The fallback for systems
without renameat2(RENAME_EXCHANGE) has one step where the name is missing (between its two
renames); there the next build puts the set-aside tree back before anything else.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ortbundle._core.errors import ConfigError
from ortbundle._core.progress import Reporter, plain_reporter
from ortbundle._core.publish import STEPS, exchange
from ortbundle.cli.common import CommandFailed
from ortbundle.cli.verify import run_verify
from ortbundle.pipeline.build import build
from ortbundle.stage.staging import scratch_dir
from tests.helpers.faults import (
    assert_published_and_verified,
    public_key,
    snapshot,
    start_build,
    version_dir,
    wait_for,
)
from tests.helpers.project import FakeProject

EXCHANGE_STEPS = ["start", "exchanged", "removing", "done"]
FALLBACK_STEPS = ["start", "set-aside", "placed", "removing", "done"]
CASES = [("exchange", s) for s in EXCHANGE_STEPS] + [("fallback", s) for s in FALLBACK_STEPS]


def test_the_cases_cover_every_step() -> None:
    assert set(EXCHANGE_STEPS) | set(FALLBACK_STEPS) == set(STEPS)


def _can_exchange(directory: Path) -> bool:
    a, b = directory / "probe-a", directory / "probe-b"
    a.mkdir()
    b.mkdir()
    try:
        return exchange(a, b)
    finally:
        a.rmdir()
        b.rmdir()


def _verify(fake: FakeProject) -> None:
    """What `invoke verify --path dist/fakeproduct/1.2.3` runs: it raises unless all match."""
    run_verify(
        version_dir(fake),
        manifest=None,
        target=None,
        public_key=public_key(fake),
        allow_unsigned=False,
        product="fakeproduct",
        root=fake.root,
    )


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "step"), CASES)
def test_build_killed_at_each_publish_step_leaves_a_verified_tree(
    fake: FakeProject, reporter: Reporter, mode: str, step: str
) -> None:
    if mode == "exchange" and not _can_exchange(fake.root.parent):
        pytest.skip("this kernel or filesystem has no renameat2(RENAME_EXCHANGE)")
    fake.write()
    build(fake.project, fake.options(), reporter)
    old = snapshot(version_dir(fake))
    product = fake.root / "manifests" / "fakeproduct.toml"
    product.write_text(product.read_text().replace("A synthetic product", "A newer product"))

    fault = f"publish:{step}" + (",no-exchange" if mode == "fallback" else "")
    child = start_build(
        fake,
        cache=fake.root / "cache",
        dist=fake.root / "dist",
        env={"ORTBUNDLE_FAULT": fault},
    )
    _, err = child.communicate(timeout=120)
    assert child.returncode == -signal.SIGKILL, err.decode()

    if (mode, step) == ("fallback", "set-aside"):
        # the fallback's one window: the old tree is complete, under its set-aside name
        assert not version_dir(fake).exists()
        (aside,) = version_dir(fake).parent.glob(".1.2.3.old-*[!k]")  # not its .lock
        assert snapshot(aside) == old
    else:
        _verify(fake)  # old or new, complete and signed
        killed = snapshot(version_dir(fake))
        assert (killed == old) == (step == "start"), "published before the kill, or not at all"

    build(fake.project, fake.options(), reporter)  # the next build recovers
    assert_published_and_verified(fake)
    new = snapshot(version_dir(fake))
    assert new != old
    if step not in ("start", "set-aside"):
        assert killed == new  # what the killed build published is what a build publishes


def test_a_set_aside_tree_of_a_dead_build_is_put_back_before_anything_else(
    tmp_path: Path,
) -> None:
    final = tmp_path / "1.2.3"
    aside = tmp_path / ".1.2.3.old-999999999"  # no such process
    aside.mkdir()
    (aside / "manifest.json").write_text("{}")
    scratch = scratch_dir(final)
    assert (final / "manifest.json").read_text() == "{}" and not aside.exists()
    assert scratch.name.startswith(".1.2.3.partial-")


def test_exchange_swaps_two_directories_in_one_call(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x").write_text("a")
    (b / "x").write_text("b")
    if not exchange(a, b):
        pytest.skip("this kernel or filesystem has no renameat2(RENAME_EXCHANGE)")
    assert (a / "x").read_text() == "b" and (b / "x").read_text() == "a"


# `sh` is the namespace's init (PID 1, which may not SIGKILL itself); the build is its child,
# PID 2 in every fresh namespace: a container whose every build gets the same PID
FRESH_PID_NAMESPACE = ("unshare", "-p", "-f", "--mount-proc", "sh", "-c", '"$@"; exit $?', "sh")


def _fresh_namespaces_work() -> str | None:
    """Why builds cannot each run in a fresh PID namespace here, or None when they can."""
    if shutil.which("unshare") is None:
        return "unshare is missing (Debian package util-linux)"
    done = subprocess.run(
        [*FRESH_PID_NAMESPACE, "true"], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return f"unshare -p was refused (needs CAP_SYS_ADMIN): {done.stderr.strip()}"
    return None


def _killed_while_set_aside(fake: FakeProject, wrapper: tuple[str, ...] = ()) -> Path:
    """A published build, an input changed, then a build killed between the fallback's two
    renames; the set-aside tree it left."""
    fake.write()
    build(fake.project, fake.options(), plain_reporter())
    product = fake.root / "manifests" / "fakeproduct.toml"
    product.write_text(product.read_text().replace("A synthetic product", "A newer product"))
    child = start_build(
        fake,
        cache=fake.root / "cache",
        dist=fake.root / "dist",
        env={"ORTBUNDLE_FAULT": "publish:set-aside,no-exchange"},
        wrapper=wrapper,
    )
    _, err = child.communicate(timeout=120)
    assert child.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), err.decode()
    assert not version_dir(fake).exists()
    (aside,) = version_dir(fake).parent.glob(".1.2.3.old-*[!k]")  # not a .lock
    return aside


def test_a_set_aside_tree_is_recovered_when_every_build_gets_the_same_pid(
    fake: FakeProject,
) -> None:
    """In a fresh container every build is, say, PID 2: a dead build's PID is the next
    build's own, so a PID cannot say the build that set the tree aside is gone. Two builds
    after the kill, on a filesystem that cannot exchange: both complete, the first puts the
    set-aside tree back, and no set-aside tree is left."""
    if (why := _fresh_namespaces_work()) is not None:
        pytest.skip(why)
    _killed_while_set_aside(fake, FRESH_PID_NAMESPACE)
    for _ in range(2):
        child = start_build(
            fake,
            cache=fake.root / "cache",
            dist=fake.root / "dist",
            env={"ORTBUNDLE_FAULT": "no-exchange"},
            wrapper=FRESH_PID_NAMESPACE,
        )
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err.decode()
        assert_published_and_verified(fake)


@pytest.mark.slow
def test_verify_names_the_set_aside_tree_while_the_window_is_open(fake: FakeProject) -> None:
    aside = _killed_while_set_aside(fake)
    with pytest.raises(CommandFailed) as failed:
        _verify(fake)
    message = str(failed.value)
    assert failed.value.code == ConfigError.exit_code, message
    assert str(aside) in message and "killed while publishing" in message, message
    assert "pass --manifest" not in message and "Traceback" not in message


def _innermost(pid: int) -> int:
    """The last descendant of `pid` (the build under unshare and sh)."""
    while True:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if not children:
            return pid
        pid = int(children[-1])


@pytest.mark.slow
def test_two_containers_with_the_same_pid_never_share_a_scratch_tree(
    fake: FakeProject, tmp_path: Path
) -> None:
    """Two builds of one dist/ from two fresh containers (each build is PID 2) with caches of
    their own: the second must wait for the first, not take its live scratch tree for a dead
    one (same PID) and remove it under it, or build into it."""
    if (why := _fresh_namespaces_work()) is not None:
        pytest.skip(why)
    fake.write()
    build(fake.project, fake.options(), plain_reporter())
    product = fake.root / "manifests" / "fakeproduct.toml"
    product.write_text(product.read_text().replace("A synthetic product", "A newer product"))
    dist, marker = fake.root / "dist", tmp_path / "first-stopped"
    first = start_build(
        fake,
        cache=tmp_path / "cache-a",
        dist=dist,
        hook="evidence",
        marker=marker,
        wrapper=FRESH_PID_NAMESPACE,
        cli=True,
    )
    second = None
    try:
        wait_for(marker.exists, "the first build to reach its evidence", 60)
        (scratch,) = version_dir(fake).parent.glob(".1.2.3.partial-*")
        inside = sorted(p.relative_to(scratch) for p in scratch.rglob("*"))
        second = start_build(
            fake, cache=tmp_path / "cache-b", dist=dist, wrapper=FRESH_PID_NAMESPACE, cli=True
        )
        time.sleep(8)  # far longer than the second build takes when it does not wait
        assert second.poll() is None, "the second build did not wait for the first"
        assert sorted(p.relative_to(scratch) for p in scratch.rglob("*")) == inside
        os.kill(_innermost(first.pid), signal.SIGINT)  # the first stops; the second goes on
        first.communicate(timeout=60)
        _, err = second.communicate(timeout=120)
        assert second.returncode == 0, err.decode()
    finally:
        for child in (first, second):
            if child is not None and child.returncode is None:
                os.kill(_innermost(child.pid), signal.SIGKILL)
                child.communicate(timeout=60)
    assert_published_and_verified(fake)
