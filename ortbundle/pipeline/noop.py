"""Recognise a build that would change nothing, and say so without planning it.

A whole build is keyed by everything it reads (incremental.prepare_build). The key is kept with
the stat of every file the build published (`state/builds/`); the next build with the same key
whose outputs are untouched does nothing and leaves dist/ exactly as it is.

Making the key means loading the product, every recipe and the schemas: most of a no-op's own
time. So a build also leaves a *quick record* (`state/quick/`), found by how the build was asked
for (project, dist, options): the stat of every file a plan can read, and the environment's part
of the key (the epoch, the signing key, the tool's code, makensis). While every stat and every
fact still holds, the key is the one recorded, and nothing heavier than this module is imported.
Any difference, even a file touched and put back, falls through to the full check.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISDIR, S_ISLNK
from typing import Any

from ortbundle._core.fsio import atomic_write, scan_tree, sha256_file, stat_record
from ortbundle._core.locations import default_cache_dir
from ortbundle._core.memo import code_digest
from ortbundle.config.project import (
    TOOL_LICENSE,
    BuildOptions,
    Project,
    signing_key_identity,
    source_date_epoch,
)
from ortbundle.evidence.names import MANIFEST_NAME

QUICK_FORMAT = "ortbundle-quick/1"


def stat_tree(top: Path) -> dict[str, list[int]]:
    """(size, mtime, ctime, inode, mode) of everything under `top`, by relative path. ctime
    too, as for the inputs: a file edited in place with its mtime put back (`touch -r`) moved
    only its ctime, and verify would call it modified; a no-op must not call it unchanged
    without its hash (`same_tree`)."""
    return {
        name: [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_mode]
        for name, (_, info) in scan_tree(top).items()
    }


def same_tree(now: dict[str, list[int]], then: object, intact: Callable[[str], bool]) -> bool:
    """Whether `now` is the tree recorded as `then`. A memoised package is a hard link to the
    cache's copy, so another build linking the same copy into its own dist/ (or removing that
    dist) moves this file's ctime, with its link count. Such a file (size, mtime, inode and
    mode kept, only ctime moved) is the same only if `intact(name)` says so: its
    bytes still hash to what the manifest says. An edit in place with the mtime put back moves
    the same fields, and is caught by that hash; an edit through another link too."""
    if not isinstance(then, dict) or now.keys() != then.keys():
        return False
    for name, record in now.items():
        old = then[name]
        if record == old:
            continue
        if not isinstance(old, list) or len(old) != len(record):
            return False
        kept = all(record[i] == old[i] for i in (0, 1, 3, 4))
        if not (kept and intact(name)):
            return False
    return True


def _manifest_check(version_dir: Path) -> Callable[[str], bool]:
    """`intact` for `same_tree`: a file's SHA-256 against the manifest's, read once if asked."""
    digests: dict[str, str] = {}

    def intact(name: str) -> bool:
        if not digests:
            try:
                outputs = json.loads((version_dir / MANIFEST_NAME).read_text("utf-8"))["outputs"]
                digests.update({str(o["path"]): str(o["sha256"]) for o in outputs})
            except (OSError, ValueError, KeyError, TypeError):
                return False
        wanted = digests.get(name)
        try:
            return wanted is not None and sha256_file(version_dir / name) == wanted
        except OSError:
            return False

    return intact


def _state_file(cache: Path, version_dir: Path) -> Path:
    where = hashlib.sha256(str(version_dir.resolve()).encode()).hexdigest()
    return cache / "state" / "builds" / f"{where}.json"


def record_build(cache: Path, version_dir: Path, key: str, summary: Mapping[str, Any]) -> None:
    """Remember what this build published, to recognise the next identical build."""
    state = _state_file(cache, version_dir)
    state.parent.mkdir(parents=True, exist_ok=True)
    document = {"key": key, "tree": stat_tree(version_dir), "summary": dict(summary)}
    atomic_write(state, json.dumps(document, sort_keys=True))


def unchanged_build(cache: Path, version_dir: Path, key: str) -> dict[str, Any] | None:
    """The previous build's summary if it had this key and its tree is untouched, else None."""
    state = _state_file(cache, version_dir)
    try:
        document = json.loads(state.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or document.get("key") != key:
        return None
    if not version_dir.is_dir():
        return None
    tree = stat_tree(version_dir)
    if not same_tree(tree, document.get("tree"), _manifest_check(version_dir)):
        return None
    summary = document.get("summary")
    if not isinstance(summary, dict):
        return None
    if tree != document.get("tree"):  # ctimes moved and the bytes held: the new record
        record_build(cache, version_dir, key, summary)
    return summary


# --- the quick record -----------------------------------------------------------------------


def input_stats(project: Project) -> dict[str, dict[str, int]]:
    """The stat record (size, mtime, ctime, inode) of every file and directory a plan can read:
    the project's recipes/, manifests/, licenses/ and templates/ trees, and ortbundle's LICENSE.

    A superset of what one product reads (any recipe edited sends every product through the
    full check), so that no read can be missed. Directories count: adding a file moves its
    directory's record. ctime is kept: an edit with the mtime put back still moves it. A
    symbolic link counts twice, as the link (retargeted, it is another inode) and as what it
    leads to (under "<path> ->"): the build reads through it, and an edit of the linked file
    moves only the target's record (a monorepo's manifests linked in from elsewhere).
    """
    stats: dict[str, dict[str, int]] = {}
    tops = (project.recipes, project.manifests, project.licenses, project.templates)
    seen: set[tuple[int, int]] = set()
    for top in (*tops, TOOL_LICENSE):
        _stat_into(stats, os.fspath(top), seen)
    return stats


def _stat_into(stats: dict[str, dict[str, int]], path: str, seen: set[tuple[int, int]]) -> None:
    """`path`'s record; a link's target's too, and every entry of a directory (linked or
    not), each once (`seen`: a link back up the tree is not followed round)."""
    where = Path(path)
    try:
        info = where.lstat()
    except OSError:
        return  # absent (no licenses/): absent next time too, or the record differs
    stats[path] = stat_record(info)
    if S_ISLNK(info.st_mode):
        try:
            info = where.stat()
        except OSError:
            stats[f"{path} ->"] = {}  # dangling: a target appearing is a change
            return
        stats[f"{path} ->"] = stat_record(info)
    if not S_ISDIR(info.st_mode) or (info.st_dev, info.st_ino) in seen:
        return
    seen.add((info.st_dev, info.st_ino))
    try:
        tree = scan_tree(where)
    except OSError:
        return
    for name, (_, inner) in tree.items():
        full = f"{path}/{name}"
        stats[full] = stat_record(inner)
        if S_ISLNK(inner.st_mode):
            _stat_into(stats, full, seen)


@dataclass(frozen=True)
class Environment:
    """The part of a build key that does not come from the project's files. Each is cheap to
    find again: the tool's code (kept by stat), the epoch (SOURCE_DATE_EPOCH, or one git call
    unless the repository's HEAD is where it was: `git_state`), which key signs (a digest of
    its bytes), what --compare names, and which makensis runs."""

    code: str
    epoch: int
    signing: str  # "unsigned", or the SHA-256 of the key
    compare: str
    makensis: str
    # where the epoch came from, for the quick record only (not a line of the key: a commit
    # that touches no input moves HEAD, not the epoch): `git_state`, or None
    git: str | None = None

    def lines(self) -> list[str]:
        return [
            f"code {self.code}",
            f"epoch {self.epoch}",
            f"signing {self.signing}",
            self.compare,
            f"makensis {self.makensis}",
        ]


def environment_facts(
    project: Project, product: str, options: BuildOptions, known: Mapping[str, Any] | None = None
) -> Environment:
    """The facts as they are now. `known`: a quick record, whose epoch is taken again without
    running git when it came from git with the repository in the very state it is now in."""
    environ = os.environ if options.environ is None else options.environ
    git = None if environ.get("SOURCE_DATE_EPOCH", "").strip() else git_state(project.root, environ)
    epoch = _known_epoch(known, git)
    return Environment(
        code=code_digest(),
        epoch=source_date_epoch(project.root, environ) if epoch is None else epoch,
        signing=signing_key_identity(product, options, environ),
        compare=compare_identity(options.compare),
        makensis=shutil.which("makensis") or "none",
        git=git,
    )


def _known_epoch(known: Mapping[str, Any] | None, git: str | None) -> int | None:
    if known is None or git is None or known.get("git") != git:
        return None
    facts = known.get("facts")
    for line in facts if isinstance(facts, list) else []:
        if (
            isinstance(line, str)
            and line.startswith("epoch ")
            and line[6:].isascii()
            and line[6:].isdigit()
        ):
            return int(line[6:])
    return None


# git's variables for the network, credentials, editors and identities: none changes which
# commits `git log` reads (GIT_DIR, GIT_CONFIG_*, GIT_REPLACE_REF_BASE, … do)
_GIT_HARMLESS: tuple[str, ...] = ("GIT_SSL_", "GIT_SSH", "GIT_HTTP_", "GIT_PROXY_", "GIT_CURL_")
_GIT_HARMLESS += ("GIT_ASKPASS", "GIT_TERMINAL_PROMPT", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR")
_GIT_HARMLESS += ("GIT_PAGER", "GIT_AUTHOR_", "GIT_COMMITTER_", "GIT_TRACE", "GIT_FLUSH")


def git_state(root: Path, environ: Mapping[str, str]) -> str | None:
    """What `git log -1 -- recipes manifests licenses` (the epoch) answers from, read from the
    repository's files as git finds them: HEAD's commit, the shallow boundary, and the stat of
    every config git reads. None where that is not plain: a GIT_* variable set that may bear
    on which repository or history git reads, no repository above `root`, a ref not found,
    replace refs or grafts (then git itself is asked)."""
    if any(name.startswith("GIT_") and not name.startswith(_GIT_HARMLESS) for name in environ):
        return None
    try:
        gitdir = _git_dir(root.resolve())
        if gitdir is None:
            return None
        common = gitdir
        if (gitdir / "commondir").is_file():
            common = (gitdir / (gitdir / "commondir").read_text("utf-8").strip()).resolve()
        head = (gitdir / "HEAD").read_text("utf-8").strip()
        packed = common / "packed-refs"
        packed_text = packed.read_text("utf-8") if packed.is_file() else ""
        replaced = common / "refs" / "replace"
        if (common / "info" / "grafts").exists() or " refs/replace/" in packed_text:
            return None
        if replaced.is_dir() and any(replaced.iterdir()):
            return None
        commit = _resolve(head, common, packed_text)
        if commit is None:
            return None
        shallow = common / "shallow"
        boundary = shallow.read_bytes() if shallow.is_file() else b""
    except (OSError, UnicodeDecodeError):
        return None
    home = Path(environ.get("HOME", "~")).expanduser()
    xdg = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    configs = [common / "config", gitdir / "config.worktree", home / ".gitconfig"]
    configs += [xdg / "git" / "config", Path("/etc/gitconfig")]
    stats = []
    for config in configs:
        try:
            stats.append(stat_record(config.stat()))
        except OSError:
            stats.append({})
    digest = hashlib.sha256(json.dumps([str(gitdir), boundary.hex(), stats]).encode())
    return f"{commit} {digest.hexdigest()[:32]}"


def _git_dir(top: Path) -> Path | None:
    """The repository directory git would find from `top`: `.git` in it or above (a file
    `gitdir: …` in a linked worktree)."""
    for directory in (top, *top.parents):
        dot_git = directory / ".git"
        if dot_git.is_dir():
            return dot_git
        if dot_git.is_file():
            text = dot_git.read_text("utf-8").strip()
            if not text.startswith("gitdir: "):
                return None
            return (directory / text[len("gitdir: ") :]).resolve()
    return None


def _resolve(head: str, common: Path, packed: str) -> str | None:
    """HEAD's commit id: detached, a loose ref, or a packed one; None otherwise (unborn)."""
    if not head.startswith("ref: "):
        return head if _is_object_id(head) else None
    ref = head[len("ref: ") :]
    if not ref.startswith("refs/heads/") or ".." in ref:
        return None
    loose = common / ref
    if loose.is_file():
        commit = loose.read_text("utf-8").strip()
        return commit if _is_object_id(commit) else None
    for line in packed.splitlines():
        commit, _, name = line.partition(" ")
        if name == ref and _is_object_id(commit):
            return commit
    return None


def _is_object_id(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


# BuildOptions fields that shape what a build publishes: the quick record is found by these (and
# the project and dist). The others say how to build (where to download from, how many workers),
# not what; cache_dir says where the record itself is kept. A test holds every field to one side.
ASKED: tuple[str, ...] = ("product", "targets", "channels", "release", "audit_only")
ASKED += ("audit_channels", "signing_key", "compare")
NOT_ASKED = ("offline", "index_url", "jobs", "retry", "cache_dir", "environ")


def _quick_file(cache: Path, project: Project, options: BuildOptions) -> Path:
    """Where the quick record of builds asked for this way is kept."""
    asked = [str(project.root.resolve()), str(project.dist.resolve())]
    asked += [repr(getattr(options, name)) for name in ASKED]
    where = hashlib.sha256("\0".join(asked).encode()).hexdigest()
    return cache / "state" / "quick" / f"{where}.json"


def key_file(cache: Path, project: Project, options: BuildOptions) -> Path:
    """Where the quick record is kept again without its dist/: what key a build asked for this
    way had, into whatever dist/ (a kept build is found by it: pipeline/replay.py)."""
    asked = [str(project.root.resolve()), *(repr(getattr(options, name)) for name in ASKED)]
    where = hashlib.sha256("\0".join(asked).encode()).hexdigest()
    return cache / "state" / "keys" / f"{where}.json"


def remember_quick(
    cache: Path,
    project: Project,
    options: BuildOptions,
    *,
    product: str,
    version_dir: Path,
    key: str,
    inputs: dict[str, dict[str, int]],
    facts: Environment,
) -> None:
    """Keep the quick record of a build just published or found unchanged: what its key was
    made of (`inputs` taken before the plan read them), in the form a stat or a cheap call
    checks again. A record that cannot be written costs only the next no-op its speed."""
    document = {
        "format": QUICK_FORMAT,
        "product": product,
        "version_dir": str(version_dir),
        "key": key,
        "inputs": inputs,
        "facts": facts.lines(),
        "git": facts.git,
    }
    anywhere = {**document, "version_dir": version_dir.relative_to(project.dist).as_posix()}
    try:
        for path, text in (
            (_quick_file(cache, project, options), document),
            (key_file(cache, project, options), anywhere),
        ):
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, json.dumps(text, sort_keys=True))
    except (OSError, ValueError):
        pass


def quick_previous(project: Project, options: BuildOptions) -> dict[str, Any] | None:
    """The previous build's summary when nothing it was made of moved, else None (then the
    caller plans the build and checks its key in full)."""
    if options.audit_only:
        return None  # an audit publishes nothing to compare with
    if options.release:
        return None  # a release takes no record as proof: prepare_build re-hashes dist/
    cache = options.cache_dir or default_cache_dir()
    try:
        document = json.loads(_quick_file(cache, project, options).read_text("utf-8"))
        if document["format"] != QUICK_FORMAT:
            return None
        product, key = str(document["product"]), str(document["key"])
        version_dir = Path(document["version_dir"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if document.get("inputs") != input_stats(project):
        return None
    facts = environment_facts(project, product, options, document)
    if document.get("facts") != facts.lines():
        return None
    if options.release and facts.signing == "unsigned":
        return None  # refused by the build itself, with its message
    previous = unchanged_build(cache, version_dir, key)
    return None if previous is None else {**previous, "version_dir": str(version_dir)}


def compare_identity(path: Path | None) -> str:
    """For the build key: a build compared with another earlier build is another build."""
    if path is None:
        return "no compare"
    import hashlib

    try:
        digest = hashlib.sha256((path / "manifest.json").read_bytes()).hexdigest()
    except OSError:
        digest = "unreadable"
    return f"compare {path.resolve()} {digest}"
