"""Durable file replacement: the one way ortbundle writes a file that someone may read.

A reader (a concurrent build, `invoke verify`, a crash recovery) sees the old file or the new
one, never a prefix of the new one: the bytes go to a temporary name in the same directory,
are flushed to disk, renamed over the destination in one step, and the directory entry itself
is flushed so the rename survives a power cut. A failure at any point removes the temporary
file and leaves the destination as it was.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import hashlib
import os
import re
import secrets
import shutil
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path, PurePosixPath
from stat import S_ISLNK
from typing import TypeVar

from ortbundle._core.errors import ConfigError
from ortbundle._core.progress import notice

T = TypeVar("T")


def stat_record(stat: os.stat_result) -> dict[str, int]:
    """What must not change for a stored file to be trusted without re-hashing: writing it, or
    putting its mtime back afterwards (which moves ctime), or replacing it (a new inode)."""
    return {
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "ctime_ns": stat.st_ctime_ns,
        "ino": stat.st_ino,
    }


def fsync_dir(directory: Path) -> None:
    """Flush a directory entry (a rename or link into it); a no-op where the OS cannot."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        with suppress(OSError):  # some file systems refuse fsync on a directory
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dirs(directories: Iterable[Path]) -> None:
    """Flush each directory an atomic_output(synced=...) left to its caller."""
    for directory in sorted(set(directories)):
        fsync_dir(directory)


def temp_name(path: Path, tag: str = "tmp") -> Path:
    """A hidden sibling of `path` no other writer will pick: same directory, same file system.
    It ends in the writer's pid, so a later run can tell a dead writer's leftover
    (fetch.cache.remove_dead_leftovers)."""
    return path.with_name(f".{path.name}.{tag}-{secrets.token_hex(4)}-{os.getpid()}")


@contextmanager
def atomic_output(
    path: Path, *, mode: int | None = None, tag: str = "tmp", synced: set[Path] | None = None
) -> Iterator[Path]:
    """Yield a temporary path to write (by any means: a copy, a link, a tool's output); on a
    clean exit it is flushed, given `mode`, and renamed over `path`. On an error it is removed.

    `synced`: a writer placing many files collects their directories there and flushes each
    once (fsync_dirs) before it returns, instead of once per file."""
    tmp = temp_name(path, tag)
    try:
        try:
            yield tmp
        except OSError as exc:
            if exc.filename is None:  # a write() error names no file: name the one being made
                exc.filename = str(path)
            raise
        if mode is not None and not tmp.is_symlink():
            tmp.chmod(mode)
        if tmp.is_file() and not tmp.is_symlink():
            fd = os.open(tmp, os.O_RDONLY)  # fsync flushes the file whatever fd mode asks it
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(tmp, path)
        if synced is None:
            fsync_dir(path.parent)
        else:
            synced.add(path.parent)
    finally:
        with suppress(FileNotFoundError):
            tmp.unlink()


def atomic_write(
    path: Path, data: bytes | str, *, mode: int | None = None, synced: set[Path] | None = None
) -> None:
    """Replace `path` with `data` (str is written as UTF-8, no newline translation)."""
    content = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_output(path, mode=mode, synced=synced) as tmp:
        # without a mode, the kernel applies the umask to 0o666, as for any new file
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)


def write_generated(path: Path, text: str) -> Path:
    """Write a file the tool generates into the repository (a reference page, a schema, the
    loader's copy of a data file), its directory made if need be."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    return path


def is_generated(path: Path, text: str) -> bool:
    """Whether a generated file is there and says exactly `text` (else it is stale)."""
    return path.is_file() and path.read_text("utf-8") == text


CHUNK = 1 << 20  # read size when hashing


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


# the lock files this process holds or waits for, with how many of its threads do: a thread
# that waits behind another thread of the same build has nobody else to name
_MINE: collections.Counter[str] = collections.Counter()
_MINE_LOCK = threading.Lock()


@contextlib.contextmanager
def locked(path: Path, *, waiting: str | None = None) -> Iterator[None]:
    """An exclusive flock on `path` (created if needed); the kernel releases it if we die.
    `waiting` names what the lock guards: when another process holds it, the build says it
    waits for it (and for how long it did), rather than looking hung."""
    path.parent.mkdir(parents=True, exist_ok=True)
    key = os.fspath(path)
    with _MINE_LOCK:
        ours = _MINE[key] > 0  # another thread of this process has it, or waits for it
        _MINE[key] += 1
    try:
        with path.open("a") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                _wait(handle.fileno(), path, None if ours else waiting)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    finally:
        with _MINE_LOCK:
            _MINE[key] -= 1
            if not _MINE[key]:
                del _MINE[key]


@contextlib.contextmanager
def locked_directory(directory: Path, *, waiting: str | None = None) -> Iterator[None]:
    """An exclusive flock on `directory` itself (made if missing), leaving no lock file in it:
    builds with caches of their own that write into one dist/<product>/ wait for each other.
    A directory removed and made again while we waited is locked anew. Where the filesystem
    cannot flock a directory (NFS), nothing is held: the caller's cache lock still is."""
    key = os.fspath(directory)
    while True:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            with _MINE_LOCK:
                ours = _MINE[key] > 0
                _MINE[key] += 1
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    _wait(fd, directory, None if ours else waiting)
                except OSError:  # no flock on a directory here
                    yield
                    return
                if _same_file(fd, directory):
                    yield
                    return
            finally:
                with _MINE_LOCK:
                    _MINE[key] -= 1
                    if not _MINE[key]:
                        del _MINE[key]
        finally:
            os.close(fd)  # closing releases the lock


def _same_file(fd: int, path: Path) -> bool:
    """Whether `fd` is still the file at `path` (not one removed and made again)."""
    try:
        here, there = os.fstat(fd), path.stat()
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


_QUIET_WAIT = 1.0  # seconds: a lock freed sooner is a neighbour's moment, not worth a line


def _wait(fd: int, path: Path, waiting: str | None) -> None:
    """Block for the lock, saying so when another build holds it (`waiting`: what it guards)
    for longer than a moment: a worker of the same build in another process, or one whose
    count in _MINE raced ours, frees it within that moment and goes unmentioned."""
    started = time.monotonic()
    while time.monotonic() - started < _QUIET_WAIT:
        time.sleep(0.02)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue
        return
    if waiting is not None:
        notice(f"waiting for another build, which holds the lock on {waiting} ({path})")
    fcntl.flock(fd, fcntl.LOCK_EX)
    if waiting is not None:
        notice(f"got the lock on {waiting} after {time.monotonic() - started:.1f} s")


@contextlib.contextmanager
def lock_if_free(path: Path) -> Iterator[bool]:
    """Try an exclusive flock on `path` (created if needed) without waiting: True while this
    process holds it, False when a live process does. A process that died holds nothing (the
    kernel released its lock), whatever PID a container gives the next one."""
    with path.open("a") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


_FSIO_TEMP = re.compile(r"-(\d+)-[0-9a-f]{8}$")


_WRITER_PID = re.compile(r"[.-](\d+)(?:\.tmp)?$")


def pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_dead_leftovers(paths: Iterable[Path]) -> None:
    """Delete temporary files and directories whose name ends in the pid of a dead writer
    (`.x.partial-<pid>`, `.x.<pid>.tmp`); a live writer's are left alone."""
    for path in paths:
        fsio = _FSIO_TEMP.search(path.name)  # fsio.temp_name: .x.<tag>-<pid>-<token>
        digits = (
            fsio[1]
            if fsio
            else "".join(
                ch
                for ch in path.name.removesuffix(".tmp").rsplit("-", 1)[-1].rsplit(".", 1)[-1]
                if ch.isdigit()
            )
        )
        if digits and not pid_alive(int(digits)):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


ScannedTree = dict[str, tuple[os.DirEntry[str], os.stat_result]]


def scan_tree(top: Path, *, skip: str | None = None) -> ScannedTree:
    """Everything under `top` by relative path, with its lstat: os.scandir, whose entries carry
    their type, not pathlib's rglob (which cost a third of a no-op). `skip`: a directory name
    not entered (__pycache__)."""
    found: ScannedTree = {}
    pending = [("", os.fspath(top))]
    while pending:
        prefix, directory = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                name = prefix + entry.name
                is_dir = entry.is_dir(follow_symlinks=False)
                if is_dir and entry.name == skip:
                    continue
                found[name] = (entry, entry.stat(follow_symlinks=False))
                if is_dir:
                    pending.append((name + "/", entry.path))
    return found


def check_member_name(name: str) -> str | None:
    """Why a member name is unsafe to treat as a relative path, or None if it is fine."""
    if "\x00" in name:
        return "contains a NUL byte"
    if any(ord(c) < 0x20 or c == "\x7f" for c in name):
        # a newline or escape in a file name: no real release has one, and every package
        # format downstream would have to quote it
        return "contains a control character"
    if "\\" in name:
        return "contains a backslash"
    if name.startswith("/"):
        return "is an absolute path"
    if len(name) >= 2 and name[1] == ":":
        return "starts with a drive letter"
    parts = PurePosixPath(name).parts
    if ".." in parts:
        return "climbs out with '..'"
    if not name or not parts:
        return "is empty"
    return None


def inside_project(path: Path, root: Path) -> Path:
    """`path` resolved, or a ConfigError when it leads out of `root` through a symbolic link:
    whatever the build reads from the project (a licence text, a template, a key) is shipped
    or trusted as the project's own, and a link to /etc/passwd or to the signing key would be
    read and published like any other file. The message names the link, where it leads and
    the fix."""
    resolved, top = path.resolve(), root.resolve()
    if resolved.is_relative_to(top):
        return resolved
    link = next((p for p in (path, *path.parents) if p.is_symlink()), path)
    name = link.relative_to(root).as_posix() if link.is_relative_to(root) else str(link)
    raise ConfigError(
        f"{name} is a link to {link.resolve()}, outside the project {top}: the build reads "
        "only files of the project",
        file=str(path),
        fix=f"copy the file into the project in place of the link (or link to a file inside "
        f"{top}); remove the link if the build need not read it",
    )


def refuse_links_out(top: Path, root: Path, seen: set[Path] | None = None) -> None:
    """Every link under `top` (and `top` itself) leads to somewhere inside `root`: for a
    directory whose every file the build reads (licenses/). A link to a directory inside the
    project is followed: a text may be named through it (`file = "shared/LICENSE"`)."""
    if not top.exists():
        return
    resolved = inside_project(top, root)
    seen = set() if seen is None else seen
    if resolved in seen:
        return  # a link back up the tree
    seen.add(resolved)
    for name, (_, info) in scan_tree(top).items():
        if S_ISLNK(info.st_mode):
            if (top / name).is_dir():
                refuse_links_out(top / name, root, seen)
            else:
                inside_project(top / name, root)
