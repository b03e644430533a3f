"""_core/publish.py read directly, on small trees in tmp_path: each step of putting a tree in
place (watched at every fault point), a build that dies at each step (an OSError raised at
that fault point stands for the kill: the flock is released either way), the recovery the
next build runs, and the exchange call's own failures. No build runs here; the hostile tier
(tests/test_hostile_publish.py) kills real builds at the same steps.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ortbundle._core import publish as published
from ortbundle._core.faults import ENV
from ortbundle._core.fsio import lock_if_free, locked
from ortbundle._core.publish import (
    STEPS,
    exchange,
    publish,
    recover,
    set_aside_name,
    set_aside_trees,
    sweep_set_aside,
)

OLD = {"a/one.txt": "old one", "a/two/three.txt": "old three", "b.txt": "old b", "c.txt": "c"}
NEW = {"a/one.txt": "new one", "n.txt": "new n"}
TOKEN = re.compile(r"old-[0-9a-f]{12}")


def make(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def read(root: Path) -> dict[str, str]:
    """Every file under `root` by its relative path, with its text."""
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def names(parent: Path) -> list[str]:
    """What `parent` holds, each set-aside token written `old-*`."""
    return sorted(TOKEN.sub("old-*", p.name) for p in parent.iterdir())


def asides(final: Path) -> list[Path]:
    return sorted(
        p for p in final.parent.glob(f".{final.name}.old-*") if not p.name.endswith(".lock")
    )


def held(lock: Path) -> bool:
    """Whether a live holder (here: this process's other open file) has the lock."""
    with lock_if_free(lock) as free:
        return not free


@dataclass(frozen=True)
class Seen:
    """The directory at one fault point."""

    step: str
    names: list[str]
    final: dict[str, str] | None
    aside: list[dict[str, str]]
    held: list[bool]


def watch(monkeypatch: pytest.MonkeyPatch, final: Path) -> list[Seen]:
    seen: list[Seen] = []

    def fault_point(step: str, path: Path | None = None) -> None:
        locks = sorted(final.parent.glob(f".{final.name}.old-*.lock"))
        seen.append(
            Seen(
                step,
                names(final.parent),
                read(final) if final.is_dir() else None,
                [read(p) for p in asides(final)],
                [held(lock) for lock in locks],
            )
        )

    monkeypatch.setattr(published, "fault_point", fault_point)
    return seen


@pytest.fixture
def dist(tmp_path: Path) -> Path:
    return tmp_path / "dist"


@pytest.fixture
def can_exchange(tmp_path: Path) -> None:
    a, b = make(tmp_path / "probe-a", {"x": "a"}), make(tmp_path / "probe-b", {"x": "b"})
    if not exchange(a, b):
        pytest.skip("this kernel or filesystem has no renameat2(RENAME_EXCHANGE)")
    assert (read(a), read(b)) == ({"x": "b"}, {"x": "a"})
    for probe in (a, b):
        (probe / "x").unlink()
        probe.rmdir()


def built(dist: Path, old: dict[str, str] | None = OLD) -> tuple[Path, Path]:
    """A version directory holding `old` (none if None) and a finished scratch tree beside it."""
    final = dist / "1.2.3"
    if old is not None:
        make(final, old)
    return make(dist / ".1.2.3.partial-1", NEW), final


# --- each step, watched --------------------------------------------------------------------------


def test_a_first_publish_is_one_rename(dist: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tmp, final = built(dist, old=None)
    seen = watch(monkeypatch, final)
    publish(tmp, final)
    assert [s.step for s in seen] == ["publish:start", "publish:placed"]
    assert (seen[0].names, seen[0].final) == ([".1.2.3.partial-1"], None)
    assert (seen[1].names, seen[1].final) == (["1.2.3"], NEW)
    assert names(dist) == ["1.2.3"] and read(final) == NEW


def test_an_exchange_swaps_the_trees_then_removes_the_old(
    dist: Path, monkeypatch: pytest.MonkeyPatch, can_exchange: None
) -> None:
    tmp, final = built(dist)
    seen = watch(monkeypatch, final)
    publish(tmp, final)
    assert [s.step for s in seen] == [
        "publish:start",
        "publish:exchanged",
        "publish:removing",
        "publish:done",
    ]
    start, exchanged, removing, done = seen
    assert (start.names, start.final) == ([".1.2.3.partial-1", "1.2.3"], OLD)
    assert (exchanged.names, exchanged.final) == ([".1.2.3.partial-1", "1.2.3"], NEW)
    assert read(tmp) == {} and not tmp.exists()
    assert (removing.names, removing.final) == ([".1.2.3.partial-1", "1.2.3"], NEW)
    assert (done.names, done.final) == (["1.2.3"], NEW)
    assert [s.aside for s in seen] == [[], [], [], []] and [s.held for s in seen] == [[]] * 4


def test_the_old_tree_leaves_by_its_first_entry_then_the_rest(
    dist: Path, monkeypatch: pytest.MonkeyPatch, can_exchange: None
) -> None:
    """A kill while the old tree is being removed leaves a remnant: the tree less its first
    entry by name (here a directory, removed whole)."""
    old = {f"{name}/f.txt": name for name in "adgjmpsvy"} | {"b.txt": "b"}
    tmp, final = built(dist, old)
    monkeypatch.setenv(ENV, "publish:removing=EIO")
    with pytest.raises(OSError):
        publish(tmp, final)
    assert read(tmp) == {k: v for k, v in old.items() if not k.startswith("a/")}
    assert sorted(p.name for p in tmp.iterdir()) == ["b.txt", *"dgjmpsvy"]


def test_the_fallback_sets_the_old_tree_aside_under_its_lock(
    dist: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "no-exchange")
    tmp, final = built(dist)
    seen = watch(monkeypatch, final)
    publish(tmp, final)
    assert [s.step for s in seen] == [
        "publish:start",
        "publish:set-aside",
        "publish:placed",
        "publish:removing",
        "publish:done",
    ]
    start, aside, placed, removing, done = seen
    assert (start.names, start.final, start.aside) == ([".1.2.3.partial-1", "1.2.3"], OLD, [])
    lock, tree = ".1.2.3.old-*.lock", ".1.2.3.old-*"
    assert (aside.names, aside.final) == ([tree, lock, ".1.2.3.partial-1"], None)
    assert (aside.aside, aside.held) == ([OLD], [True])
    assert (placed.names, placed.final, placed.aside, placed.held) == (
        [tree, lock, "1.2.3"],
        NEW,
        [OLD],
        [True],
    )
    assert (removing.names, removing.final, removing.held) == ([tree, lock, "1.2.3"], NEW, [True])
    assert removing.aside == [{k: v for k, v in OLD.items() if not k.startswith("a/")}]
    assert (done.names, done.final, done.aside, done.held) == (["1.2.3"], NEW, [], [])


@pytest.mark.parametrize("fallback", [False, True])
def test_an_empty_old_tree_is_removed_with_no_removing_step(
    dist: Path, monkeypatch: pytest.MonkeyPatch, fallback: bool
) -> None:
    if fallback:
        monkeypatch.setenv(ENV, "no-exchange")
    tmp, final = built(dist, old={})
    seen = watch(monkeypatch, final)
    publish(tmp, final)
    assert "publish:removing" not in [s.step for s in seen]
    assert seen[-1].step == "publish:done"
    assert names(dist) == ["1.2.3"] and read(final) == NEW


def test_a_first_entry_that_is_a_link_to_a_directory_is_unlinked_not_followed(
    dist: Path, tmp_path: Path, can_exchange: None
) -> None:
    outside = make(tmp_path / "outside", {"keep.txt": "keep", "z/keep.txt": "keep"})
    tmp, final = built(dist, old={"b.txt": "b"})
    (final / "a").symlink_to(outside, target_is_directory=True)
    publish(tmp, final)
    assert read(outside) == {"keep.txt": "keep", "z/keep.txt": "keep"}
    assert names(dist) == ["1.2.3"] and read(final) == NEW


@pytest.mark.parametrize("kind", ["file", "dangling link", "link to a directory"])
@pytest.mark.parametrize("fallback", [False, True])
def test_a_version_path_that_is_no_directory_is_replaced_and_nothing_outside_is_touched(
    dist: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, fallback: bool
) -> None:
    if fallback:
        monkeypatch.setenv(ENV, "no-exchange")
    elif not exchange(make(tmp_path / "p", {}), make(tmp_path / "q", {})):
        pytest.skip("this kernel or filesystem has no renameat2(RENAME_EXCHANGE)")
    outside = make(tmp_path / "outside", {"a/keep.txt": "keep", "b.txt": "keep"})
    tmp, final = built(dist, old=None)
    if kind == "file":
        final.write_text("a file")
    elif kind == "dangling link":
        final.symlink_to(tmp_path / "nowhere")
    else:
        final.symlink_to(outside, target_is_directory=True)
    publish(tmp, final)
    assert names(dist) == ["1.2.3"]
    assert not final.is_symlink() and read(final) == NEW
    assert read(outside) == {"a/keep.txt": "keep", "b.txt": "keep"}


# --- a build that dies at each step, and the next one ---------------------------------------------

EXCHANGE = ["start", "exchanged", "removing", "done"]
FALLBACK = ["start", "set-aside", "placed", "removing", "done"]


def test_the_cases_cover_every_step() -> None:
    assert set(EXCHANGE) | set(FALLBACK) == set(STEPS)


def next_build(final: Path) -> None:
    """What the next build does first (stage.staging.scratch_dir)."""
    recover(final)
    sweep_set_aside(final)


@pytest.mark.parametrize(
    ("fallback", "step"), [(False, s) for s in EXCHANGE] + [(True, s) for s in FALLBACK]
)
def test_a_build_that_dies_at_any_step_loses_nothing(
    dist: Path,
    monkeypatch: pytest.MonkeyPatch,
    fallback: bool,
    step: str,
    request: pytest.FixtureRequest,
) -> None:
    if not fallback:
        request.getfixturevalue("can_exchange")
    tmp, final = built(dist)
    monkeypatch.setenv(ENV, f"publish:{step}=EIO" + (",no-exchange" if fallback else ""))
    with pytest.raises(OSError) as died:
        publish(tmp, final)
    assert died.value.errno == errno.EIO
    if step == "start":
        assert (names(dist), read(final), read(tmp)) == ([".1.2.3.partial-1", "1.2.3"], OLD, NEW)
    elif step == "set-aside":  # the fallback's one window: the old tree only aside, complete
        assert not final.exists() and [read(p) for p in asides(final)] == [OLD]
        assert names(dist) == [".1.2.3.old-*", ".1.2.3.old-*.lock", ".1.2.3.partial-1"]
    else:
        assert read(final) == NEW
    if step == "exchanged":  # the scratch name holds the old tree, complete
        assert read(tmp) == OLD
    if step == "placed":
        assert [read(p) for p in asides(final)] == [OLD]
    monkeypatch.delenv(ENV)
    next_build(final)
    after = {"start": OLD, "set-aside": OLD}.get(step, NEW)
    assert read(final) == after
    left = names(dist)
    assert asides(final) == [] and not any(name.endswith(".lock") for name in left), left
    if step in ("start", "set-aside"):
        assert read(tmp) == NEW  # the finished tree is still there, for staging to discard
    if tmp.exists():  # staging removes a dead build's scratch tree
        shutil.rmtree(tmp)
    make(tmp, {"newer.txt": "newer"})
    publish(tmp, final)
    assert names(dist) == ["1.2.3"] and read(final) == {"newer.txt": "newer"}


# --- recover and sweep, on their own ------------------------------------------------------------


def aside_of(final: Path, token: str, files: dict[str, str], lock: bool = True) -> Path:
    tree = make(final.with_name(f".{final.name}.old-{token}"), files)
    if lock:
        final.with_name(f"{tree.name}.lock").touch()
    return tree


def test_recover_puts_a_dead_build_s_tree_back_and_drops_its_lock(dist: Path) -> None:
    final = dist / "1.2.3"
    aside_of(final, "000000000001", OLD)
    aside_of(final, "000000000002", {"x": "later"})
    recover(final)
    assert read(final) == OLD  # the first by name; the second waits for the sweep
    assert names(dist) == [".1.2.3.old-*", ".1.2.3.old-*.lock", "1.2.3"]
    assert read(dist / ".1.2.3.old-000000000002") == {"x": "later"}
    sweep_set_aside(final)
    assert names(dist) == ["1.2.3"] and read(final) == OLD


def test_recover_takes_a_tree_without_a_lock_and_leaves_no_lock(dist: Path) -> None:
    final = dist / "1.2.3"
    aside_of(final, "000000000001", OLD, lock=False)
    recover(final)
    assert names(dist) == ["1.2.3"] and read(final) == OLD


def test_recover_leaves_a_live_build_s_tree_alone(dist: Path) -> None:
    final = dist / "1.2.3"
    tree = aside_of(final, "000000000001", OLD)
    lock = tree.with_name(f"{tree.name}.lock")
    with locked(lock):  # the build that set it aside is alive
        recover(final)
        sweep_set_aside(final)
        assert names(dist) == [".1.2.3.old-*", ".1.2.3.old-*.lock"] and not final.exists()
    assert read(tree) == OLD


@pytest.mark.parametrize("kind", ["directory", "dangling link"])
def test_recover_does_nothing_while_the_version_path_exists(
    dist: Path, tmp_path: Path, kind: str
) -> None:
    final = dist / "1.2.3"
    aside_of(final, "000000000001", OLD)
    if kind == "directory":
        make(final, NEW)
    else:
        final.symlink_to(tmp_path / "nowhere")
    recover(final)
    assert names(dist) == [".1.2.3.old-*", ".1.2.3.old-*.lock", "1.2.3"]
    assert [read(p) for p in asides(final)] == [OLD]


def test_recover_never_puts_back_a_file(dist: Path) -> None:
    final = dist / "1.2.3"
    dist.mkdir()
    final.with_name(".1.2.3.old-000000000001").write_text("not a tree")
    final.with_name(".1.2.3.old-000000000001.lock").touch()
    recover(final)
    assert names(dist) == [".1.2.3.old-*"] and not final.exists()


def test_recover_looks_again_under_the_lock(dist: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The build that set the tree aside may finish between the first look and the lock: its
    new tree is then in place, and the old one is not put over it."""
    final = dist / "1.2.3"
    aside_of(final, "000000000001", OLD)

    def finishing_first(path: Path) -> Iterator[bool]:
        make(final, NEW)  # placed by the other build just before we take the lock
        with lock_if_free(path) as free:
            yield free

    monkeypatch.setattr(published, "lock_if_free", contextlib.contextmanager(finishing_first))
    recover(final)
    assert read(final) == NEW
    assert [read(p) for p in asides(final)] == [OLD]
    assert names(dist) == [".1.2.3.old-*", "1.2.3"]  # the lock went with the dead build


def finishing_while_we_wait(monkeypatch: pytest.MonkeyPatch, final: Path, old: Path) -> list[bool]:
    """Another build that finishes while this one waits for its lock: this one had opened the
    lock file, the other then placed its tree, removed the old one and the lock file, and let
    go, so this one gets a lock on a file that no longer has a name."""
    got: list[bool] = []

    @contextlib.contextmanager
    def opened_before_it_finished(path: Path) -> Iterator[bool]:
        with lock_if_free(path) as free:
            if not final.exists():
                make(final, NEW)
            shutil.rmtree(old)
            path.unlink()
            got.append(free)
            yield free

    monkeypatch.setattr(published, "lock_if_free", opened_before_it_finished)
    return got


def test_recover_meets_a_build_that_finished_while_it_waited(
    dist: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    final = dist / "1.2.3"
    got = finishing_while_we_wait(monkeypatch, final, aside_of(final, "000000000001", OLD))
    recover(final)
    assert got == [True]
    assert names(dist) == ["1.2.3"] and read(final) == NEW


def test_sweep_meets_a_build_that_finished_while_it_waited(
    dist: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    final = make(dist / "1.2.3", NEW)
    got = finishing_while_we_wait(monkeypatch, final, aside_of(final, "000000000001", OLD))
    sweep_set_aside(final)
    assert got == [True]
    assert names(dist) == ["1.2.3"] and read(final) == NEW


def test_sweep_removes_only_dead_builds_leftovers_beside_a_placed_tree(dist: Path) -> None:
    final = make(dist / "1.2.3", NEW)
    aside_of(final, "000000000001", OLD)  # a dead build's remnant and its lock
    aside_of(final, "000000000002", OLD, lock=False)  # a remnant without its lock
    final.with_name(".1.2.3.old-000000000003.lock").touch()  # a lock whose tree is gone
    live = aside_of(final, "000000000004", {"x": "live"})
    others = [".1.2.3.partial-7", ".1.2.4.old-000000000005", "1.2.4"]
    for other in others:
        make(dist / other, {"x": other})
    with locked(live.with_name(f"{live.name}.lock")):
        sweep_set_aside(final)
    assert names(dist) == sorted(
        [".1.2.3.old-*", ".1.2.3.old-*.lock", "1.2.3", ".1.2.3.partial-7", ".1.2.4.old-*", "1.2.4"]
    )
    assert read(live) == {"x": "live"} and read(final) == NEW
    assert read(dist / ".1.2.4.old-000000000005") == {"x": ".1.2.4.old-000000000005"}


def test_sweep_never_removes_the_only_copy(dist: Path) -> None:
    """With no version directory in place, a set-aside tree is the only copy: recover's."""
    final = dist / "1.2.3"
    aside_of(final, "000000000001", OLD)
    sweep_set_aside(final)
    assert names(dist) == [".1.2.3.old-*", ".1.2.3.old-*.lock"]


# --- names, and the exchange call -----------------------------------------------------------------


def test_a_set_aside_name_is_hidden_and_unique(dist: Path) -> None:
    final = dist / "1.2.3"
    first, second = set_aside_name(final), set_aside_name(final)
    assert first.parent == dist and first != second
    assert re.fullmatch(r"\.1\.2\.3\.old-[0-9a-f]{12}", first.name), first.name


def test_set_aside_trees_are_the_version_s_only_oldest_name_first(dist: Path) -> None:
    final = dist / "1.2.3"
    second = aside_of(final, "b00000000000", {})
    first = aside_of(final, "a00000000000", {})
    make(dist / ".1.2.3.partial-1", {})
    make(dist / ".1.2.30.old-c00000000000", {})
    make(dist / "1.2.3", {})
    assert set_aside_trees(final) == [first, second]


def test_exchange_is_refused_when_switched_off(dist: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = make(dist / "a", {"x": "a"}), make(dist / "b", {"x": "b"})
    monkeypatch.setenv(ENV, "no-exchange")
    assert exchange(a, b) is False
    assert (read(a), read(b)) == ({"x": "a"}, {"x": "b"})


def test_exchange_of_relative_names_swaps_them(
    dist: Path, monkeypatch: pytest.MonkeyPatch, can_exchange: None
) -> None:
    make(dist / "a", {"x": "a"})
    make(dist / "b", {"x": "b", "y": "b"})
    monkeypatch.chdir(dist)
    assert exchange(Path("a"), Path("b")) is True
    assert (read(dist / "a"), read(dist / "b")) == ({"x": "b", "y": "b"}, {"x": "a"})


def test_exchange_of_a_missing_name_is_the_os_error(dist: Path, can_exchange: None) -> None:
    b = make(dist / "b", {})
    with pytest.raises(OSError) as caught:
        exchange(dist / "a", b)
    error = caught.value
    assert (error.errno, error.strerror) == (errno.ENOENT, os.strerror(errno.ENOENT))
    assert (error.filename, error.filename2) == (str(dist / "a"), str(b))


def _failing(number: int) -> Callable[..., int]:
    def renameat2(*args: object) -> int:
        ctypes.set_errno(number)
        return -1

    return renameat2


@pytest.mark.parametrize("number", [errno.ENOSYS, errno.EINVAL, errno.ENOTSUP])
def test_a_system_that_cannot_exchange_says_so_and_nothing_moves(
    dist: Path, monkeypatch: pytest.MonkeyPatch, number: int
) -> None:
    a, b = make(dist / "a", {"x": "a"}), make(dist / "b", {"x": "b"})
    monkeypatch.setattr(published, "_libc_renameat2", lambda: _failing(number))
    assert exchange(a, b) is False
    assert (read(a), read(b)) == ({"x": "a"}, {"x": "b"})


def test_any_other_failure_of_the_exchange_is_raised(
    dist: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = make(dist / "a", {}), make(dist / "b", {})
    monkeypatch.setattr(published, "_libc_renameat2", lambda: _failing(errno.EXDEV))
    with pytest.raises(OSError) as caught:
        exchange(a, b)
    assert (caught.value.errno, caught.value.filename, caught.value.filename2) == (
        errno.EXDEV,
        str(a),
        str(b),
    )


def test_without_renameat2_there_is_no_exchange(
    dist: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = make(dist / "a", {"x": "a"}), make(dist / "b", {"x": "b"})
    monkeypatch.setattr(published, "_libc_renameat2", lambda: None)
    assert exchange(a, b) is False
    assert (read(a), read(b)) == ({"x": "a"}, {"x": "b"})
