"""A no-op build is answered from the quick record (ortbundle/pipeline/noop.py) without planning, and
only while every input it stands for is unchanged: each kind of input, edited, is seen."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path

import pytest

from ortbundle._core.locations import default_cache_dir
from ortbundle._core.memo import _tree_digest
from ortbundle._core.progress import Reporter
from ortbundle.cli.build import run_build
from ortbundle.config.project import BuildOptions, Project
from ortbundle.pipeline.build import build
from ortbundle.pipeline.noop import ASKED, NOT_ASKED, git_state, input_stats, same_tree
from tests.helpers.probe import REPO, run_python
from tests.helpers.project import FakeProject
from tests.helpers.toml_edit import set_key

# run_build in a fresh process: what it printed, and whether it planned (loaded the recipes)
_PROBE = """
import json, sys
from pathlib import Path
from ortbundle.cli import run_build
from ortbundle.config.project import BuildOptions, Project
root, dist, cache, index, environ = sys.argv[1:6]
options = BuildOptions(
    product="fakeproduct", index_url=index, cache_dir=Path(cache), environ=json.loads(environ)
)
run_build(options, root=Path(root), dist=Path(dist))
print(json.dumps(sorted(sys.modules)))
"""

_PLANNING = (
    "ortbundle.config.plan",
    "ortbundle.config.recipes",
    "ortbundle.config.schema",
    "tomllib",
)


def _probe(written: FakeProject) -> tuple[str, bool]:
    """(what a fresh `invoke build` printed, whether it loaded the plan)."""
    out = run_python(
        _PROBE,
        str(written.root),
        str(written.root / "dist"),
        str(written.root / "cache"),
        written.server.url,
        json.dumps(written.environ),
    )
    lines = out.strip().splitlines()
    modules = set(json.loads(lines[-1]))
    return "\n".join(lines[:-1]), any(m in modules for m in _PLANNING)


def test_a_no_op_is_answered_without_planning(written: FakeProject, reporter: Reporter) -> None:
    # another jobs count and retry policy than the build's: they say how, not what, to build
    build(written.project, written.options(), reporter)
    printed, planned = _probe(written)
    assert "up to date" in printed
    assert not planned, "the quick record should have answered: nothing was edited"


def test_an_input_touched_and_put_back_is_checked_in_full(
    written: FakeProject, reporter: Reporter
) -> None:
    """Its bytes and mtime are as they were, its ctime moved: the quick record no longer
    vouches for it, the full check finds the same key, and records the file anew."""
    build(written.project, written.options(), reporter)
    recipe = written.root / "recipes" / "fake.toml"
    info = recipe.stat()
    recipe.write_bytes(recipe.read_bytes())
    os.utime(recipe, ns=(info.st_atime_ns, info.st_mtime_ns))
    printed, planned = _probe(written)
    assert "up to date" in printed and planned
    printed, planned = _probe(written)
    assert "up to date" in printed and not planned  # remembered by the full check


def test_another_dist_built_and_removed_leaves_this_ones_packages_untouched(
    written: FakeProject, reporter: Reporter
) -> None:
    """A memoised package is a hard link to the cache's copy. Were another dist/ to link the
    same inode, building it (or deleting it) would move this dist's file's ctime, and the no-op
    would have to hash it: so the other build links a spare copy, and this package's stat
    does not move at all. An edit in place with the mtime put back still moves it, and is
    caught."""
    build(written.project, written.options(), reporter)
    packages = sorted((written.root / "dist").rglob("packaging/**/*.deb"))
    assert packages and packages[0].stat().st_nlink > 1  # linked from the memo
    before = packages[0].stat()
    other = Project.at(written.root, written.root / "other-dist")
    build(other, written.options(), reporter)
    (theirs,) = other.dist.rglob(f"packaging/**/{packages[0].name}")
    assert theirs.read_bytes() == packages[0].read_bytes()
    spare = theirs.stat().st_ino
    assert spare != before.st_ino  # a spare of the memo's, not this inode
    shutil.rmtree(other.dist)
    after = packages[0].stat()
    assert (after.st_nlink, after.st_ctime_ns) == (before.st_nlink, before.st_ctime_ns)
    build(other, written.options(), reporter)  # the spare is free again: linked, not copied
    (again,) = other.dist.rglob(f"packaging/**/{packages[0].name}")
    assert again.stat().st_ino == spare
    printed, planned = _probe(written)
    assert "up to date" in printed and not planned
    info = packages[0].stat()
    with packages[0].open("r+b") as handle:  # the same inode, one byte changed and put back
        first = handle.read(1)
        handle.seek(0)
        handle.write(bytes([first[0] ^ 1]))
    os.utime(packages[0], ns=(info.st_atime_ns, info.st_mtime_ns))
    printed, _ = _probe(written)
    assert "up to date" not in printed


def test_same_tree_trusts_a_moved_ctime_only_over_bytes_that_still_hash_right() -> None:
    then = {"a": [10, 1, 100, 7, 0o100644]}
    asked: list[str] = []

    def intact(name: str) -> bool:
        asked.append(name)
        return True

    assert same_tree({"a": [10, 1, 101, 7, 0o100644]}, then, intact)  # linked once more
    assert same_tree({"a": [10, 1, 102, 7, 0o100644]}, then, intact)  # and unlinked again
    assert asked == ["a", "a"]
    assert not same_tree({"a": [10, 1, 101, 7, 0o100644]}, then, lambda name: False)
    assert not same_tree({"a": [11, 1, 101, 7, 0o100644]}, then, intact)  # grown
    assert not same_tree({"a": [10, 2, 101, 7, 0o100644]}, then, intact)  # a new mtime
    assert not same_tree({"a": [10, 1, 101, 8, 0o100644]}, then, intact)  # another inode
    extra = {"a": [10, 1, 100, 7, 0o100644], "b": [1, 1, 1, 1, 1]}
    assert not same_tree(extra, then, intact)
    assert not same_tree({"a": [10, 1, 100, 7, 0o100644, 2]}, then, intact)  # another shape
    assert asked == ["a", "a"]  # hashed only where nothing but ctime moved


def _edit_recipe(fake: FakeProject) -> None:
    set_key(fake.root / "recipes" / "fake.toml", "component.description", "Edited")


def _edit_product(fake: FakeProject) -> None:
    set_key(fake.root / "manifests" / "fakeproduct.toml", "product.description", "Edited")


def _add_licence_file(fake: FakeProject) -> None:
    (fake.root / "licenses" / "extra.txt").write_text("a new text under licenses/\n")


def _edit_policy(fake: FakeProject) -> None:
    policy = fake.root / "licenses" / "policy.toml"
    policy.write_text(policy.read_text("utf-8") + "\n# reviewed\n")


EDITS: dict[str, Callable[[FakeProject], None]] = {
    "recipe": _edit_recipe,
    "product": _edit_product,
    "licence file added": _add_licence_file,
    "policy": _edit_policy,
}


@pytest.mark.slow
@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edited_input_is_rebuilt(
    written: FakeProject, reporter: Reporter, capsys: pytest.CaptureFixture[str], edit: str
) -> None:
    options = written.options()
    run_build(options, root=written.root)
    run_build(options, root=written.root)
    assert "up to date" in capsys.readouterr().out  # the quick record stands for the inputs
    EDITS[edit](written)
    run_build(options, root=written.root)
    assert "up to date" not in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("fact", ["epoch", "signing key"])
def test_a_changed_environment_is_rebuilt(
    written: FakeProject, capsys: pytest.CaptureFixture[str], fact: str
) -> None:
    """The epoch and the signing key are not files of the project: the quick record keeps
    them as facts, found again on every build."""
    options = written.options()
    run_build(options, root=written.root)
    run_build(options, root=written.root)
    assert "up to date" in capsys.readouterr().out
    environ = dict(written.environ)
    if fact == "epoch":
        environ["SOURCE_DATE_EPOCH"] = "1700000001"
    else:
        del environ["ORTBUNDLE_SIGNING_KEY_FILE"]  # now unsigned
    run_build(replace(options, environ=environ), root=written.root)
    assert "up to date" not in capsys.readouterr().out


def test_every_build_option_is_either_asked_or_not() -> None:
    """A new BuildOptions field must say whether it changes what is built (then the quick record
    is found by it) or only how: a field on neither side could make a stale no-op."""
    names = {f.name for f in fields(BuildOptions)}
    assert set(ASKED) | set(NOT_ASKED) == names
    assert not set(ASKED) & set(NOT_ASKED)


# Every file the full check opens while it plans: the quick record must stand for each.
_OPENED = """
import json, sys
from pathlib import Path
from ortbundle.pipeline.incremental import prepare_build
from ortbundle.config.plan import BuildOptions, Project
root, cache, environ = sys.argv[1:4]
opened = set()
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes)) and args[0]:
        opened.add(str(Path(args[0] if isinstance(args[0], str) else args[0].decode())))
sys.addaudithook(hook)
options = BuildOptions(product="fakeproduct", cache_dir=Path(cache), environ=json.loads(environ))
prepare_build(Project.at(Path(root)), options)
print(json.dumps(sorted(opened)))
"""


def test_every_file_the_plan_reads_is_in_the_quick_record(
    written: FakeProject, reporter: Reporter
) -> None:
    build(written.project, written.options(), reporter)
    out = run_python(
        _OPENED, str(written.root), str(written.root / "cache"), json.dumps(written.environ)
    )
    opened = [Path(p) for p in json.loads(out)]
    recorded = set(input_stats(written.project))
    package = REPO / "ortbundle"  # the tool's code: covered by code_digest
    tool_state = default_cache_dir() / "state"  # the code digest's own record
    others = (package, tool_state, written.root / "cache", Path(sys.prefix), Path(sys.base_prefix))
    project_reads = [
        p
        for p in opened
        if p.is_file() and not any(p.is_relative_to(o) for o in others) and p != written.secret_key
    ]
    assert project_reads, "the hook should have seen the recipe and product being read"
    assert sorted(str(p) for p in project_reads if str(p) not in recorded) == []


def test_the_code_digest_is_kept_by_stat_and_sees_an_edit_put_back(tmp_path: Path) -> None:
    tree = tmp_path / "package"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.py").write_text("A = 1\n")
    (tree / "sub" / "b.toml").write_text("b = 2\n")
    (tree / "notes.txt").write_text("not code\n")
    memo = tmp_path / "memo"
    first = _tree_digest(tree, memo)
    assert _tree_digest(tree, memo) == first
    # kept: answered again without reading a file (an unreadable one proves it)
    (tree / "a.py").chmod(0)
    if os.geteuid() != 0:  # root reads it anyway
        assert _tree_digest(tree, memo) == first
    (tree / "a.py").chmod(0o644)
    info = (tree / "a.py").stat()
    (tree / "a.py").write_text("A = 2\n")  # the same size
    os.utime(tree / "a.py", ns=(info.st_atime_ns, info.st_mtime_ns))  # and the mtime put back
    edited = _tree_digest(tree, memo)
    assert edited != first
    (tree / "notes.txt").write_text("still not code\n")
    assert _tree_digest(tree, memo) == edited
    (tree / "sub" / "c.j2").write_text("{{ x }}\n")
    assert _tree_digest(tree, memo) != edited


def _git(root: Path, *args: str, date: str = "2024-01-02T03:04:05Z") -> str:
    environ = {
        "HOME": str(root),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_DATE": date,
        "PATH": os.environ["PATH"],
    }
    done = subprocess.run(
        ["git", *args], cwd=root, env=environ, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_git_state_follows_head_and_gives_up_on_what_it_cannot_read(tmp_path: Path) -> None:
    """The quick record's stand-in for `git log`: HEAD's commit as git resolves it (a loose
    ref, a packed one, a linked worktree's), None wherever git would have to be asked."""
    repo = tmp_path / "repo"
    (repo / "recipes").mkdir(parents=True)
    (repo / "recipes" / "a.toml").write_text("a = 1\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")
    environ = {"HOME": str(tmp_path)}
    first = git_state(repo / "recipes", environ)
    assert first is not None and first.split()[0] == _git(repo, "rev-parse", "HEAD")
    assert git_state(repo, environ) == first
    _git(repo, "pack-refs", "--all")  # the ref now in packed-refs only
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert git_state(repo, environ) == first
    _git(repo, "commit", "-q", "--allow-empty", "-m", "two")
    second = git_state(repo, environ)
    assert second is not None and second != first
    _git(repo, "commit", "-q", "--amend", "--allow-empty", "-m", "two", date="2025-01-01T00:00:00Z")
    assert git_state(repo, environ) not in (None, second)  # the same tree, another commit
    _git(repo, "worktree", "add", "-q", str(tmp_path / "linked"), "HEAD~1")
    linked = git_state(tmp_path / "linked", environ)  # HEAD in the worktree's own git dir
    assert linked is not None and linked.split()[0] == first.split()[0]
    _git(repo, "config", "log.showSignature", "false")  # a config git reads, changed
    assert git_state(repo, environ) not in (None, second)
    assert git_state(repo, {**environ, "GIT_DIR": str(repo / ".git")}) is None
    assert git_state(repo, {**environ, "GIT_SSL_CAINFO": "/x"}) is not None
    _git(repo, "replace", _git(repo, "rev-parse", "HEAD"), _git(repo, "rev-parse", "HEAD~1"))
    assert git_state(repo, environ) is None
    assert git_state(tmp_path / "elsewhere", environ) is None


# run_build in a fresh process, as _PROBE, and whether it ran git
_GIT_PROBE = """
import json, sys
from pathlib import Path
ran = []
sys.addaudithook(lambda event, args: ran.append(str(args[0])) if event == "subprocess.Popen" else None)
from ortbundle.cli import run_build
from ortbundle.config.project import BuildOptions
root, cache, index, environ = sys.argv[1:5]
options = BuildOptions(
    product="fakeproduct", index_url=index, cache_dir=Path(cache), environ=json.loads(environ)
)
run_build(options, root=Path(root))
print(json.dumps(ran))
"""


def test_the_epoch_from_git_is_taken_again_without_git_while_head_stays(
    written: FakeProject,
) -> None:
    """Without SOURCE_DATE_EPOCH the epoch is the last commit's time of the inputs: a no-op
    does not run git while HEAD is where it was; a commit rewritten with another date (the
    same files, the same stat) is seen, and rebuilt with the new epoch."""
    _git(written.root, "init", "-q", "-b", "main")
    _git(written.root, "add", "recipes", "manifests", "licenses")
    _git(written.root, "commit", "-q", "-m", "inputs")
    environ = {k: v for k, v in written.environ.items() if k != "SOURCE_DATE_EPOCH"}

    def probe() -> tuple[str, list[str]]:
        out = run_python(
            _GIT_PROBE,
            str(written.root),
            str(written.root / "cache"),
            written.server.url,
            json.dumps(environ),
        )
        *printed, ran = out.strip().splitlines()
        return "\n".join(printed), [Path(c).name for c in json.loads(ran)]

    printed, ran = probe()
    assert "up to date" not in printed and "git" in ran
    manifest = written.root / "dist" / "fakeproduct" / "1.2.3" / "manifest.json"
    first = manifest.read_bytes()
    printed, ran = probe()
    assert "up to date" in printed and ran == []
    _git(written.root, "commit", "-q", "--amend", "-m", "inputs", date="2025-01-01T00:00:00Z")
    printed, ran = probe()
    assert "up to date" not in printed and "git" in ran
    assert manifest.read_bytes() != first  # the new epoch is recorded
    printed, ran = probe()
    assert "up to date" in printed and ran == []
