"""OS errors on the paths the tool writes, as one message a user can act on.

A full disk, a quota, a read-only mount, a directory the user may not write, too many open
files, a path too long: each arrives as an OSError from somewhere deep in a step. `writing`
wraps a step whose path and purpose are known; `from_oserror` is the last translation, at
the command boundary (ortbundle/cli/__init__.py), naming what lives at the path from the places the
command writes. Either way the message names the path, what was being written, the errno in
words and the fix — with the size to free where it is known — and the exit code is 12.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from ortbundle._core.errors import DiskError
from ortbundle._core.faults import fault_point

MIB = 1 << 20


def mount_point(path: Path) -> Path:
    """The mount point of the filesystem that holds (or would hold) `path`: the deepest mount
    the kernel lists above it. os.path.ismount alone misses a bind mount of a directory onto
    itself (same device, a read-only dist/), and would blame the mount beneath it."""
    current = existing_ancestor(path).resolve()
    listed = [m for m in _mounts() if current.is_relative_to(m)]
    if listed:
        return max(listed, key=lambda m: len(m.parts))
    while not os.path.ismount(current) and current != current.parent:
        current = current.parent
    return current


def _mounts() -> list[Path]:
    """Every mount point of this process's mount namespace ([] where /proc is not Linux's)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text("utf-8", "surrogateescape").splitlines()
    except OSError:
        return []
    # field 5 is the mount point, with space, tab, newline and backslash as octal escapes
    fields = (line.split(" ") for line in lines)
    return [Path(_unescape(f[4])) for f in fields if len(f) > 4]


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), field)


def existing_ancestor(path: Path) -> Path:
    current = path.absolute()
    while not _exists(current) and current != current.parent:
        current = current.parent
    return current


def _exists(path: Path) -> bool:
    """Whether `path` exists; a name the filesystem refuses (ENAMETOOLONG) does not."""
    try:
        path.lstat()
    except OSError:
        return False
    return True


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer may still use on the filesystem of `path`."""
    stats = os.statvfs(existing_ancestor(path))
    return stats.f_bavail * stats.f_frsize


def mib(size: int) -> str:
    """A size to free, rounded up to whole MiB."""
    return f"{(size + MIB - 1) // MIB} MiB"


def amount(size: int) -> str:
    """A size as it is (free space), in KiB below 1 MiB."""
    return f"{size // 1024} KiB" if size < MIB else f"{size // MIB} MiB"


def _fix(number: int, path: Path, need: int | None) -> str:
    mount = mount_point(path)
    if number == errno.ENOSPC:
        free = free_bytes(path)
        if need is not None and need > free:
            have = f"it has {amount(free)} free, needs {mib(need)}"
            return f"free {mib(need - free)} on {mount} ({have})"
        return f"free space on {mount} (it has {amount(free)} free now), then build again"
    if number == errno.EDQUOT:
        size = f"{mib(need)} more" if need is not None else "more"
        return f"your disk quota on {mount} is used up: free {size} or ask for a larger quota"
    if number == errno.EROFS:
        return (
            f"{mount} is mounted read-only: point the cache (ORTBUNDLE_CACHE_DIR) or the output "
            "(--dist) at a writable directory"
        )
    if number in (errno.EACCES, errno.EPERM):
        return (
            f"this user may not write {existing_ancestor(path)}: fix its owner or permissions, "
            "or choose another directory (ORTBUNDLE_CACHE_DIR, --dist)"
        )
    if number in (errno.EMFILE, errno.ENFILE):
        return "too many open files: raise the limit (ulimit -n 4096) or build with fewer --jobs"
    if number == errno.ENAMETOOLONG:
        return (
            f"the path is too long for {mount}: use a shorter directory for the cache "
            "(ORTBUNDLE_CACHE_DIR) or the output (--dist)"
        )
    return "check the directory and its filesystem, then build again"


def disk_error(
    exc: OSError,
    *,
    what: str | None,
    path: Path | None = None,
    need: int | None = None,
    component: str | None = None,
) -> DiskError:
    """The DiskError for an OSError met while writing `what` at `path`."""
    where = path if path is not None else Path(os.fsdecode(exc.filename or "."))
    number = exc.errno or 0
    name = errno.errorcode.get(number, str(number))
    reason = os.strerror(number) if number else str(exc)
    doing = f"could not write {what}" if what else "the operating system refused"
    return DiskError(
        f"{doing}: {reason} ({name})",
        component=component,
        file=str(where),
        fix=_fix(number, where, need),
    )


@contextlib.contextmanager
def writing(what: str, path: Path, *, need: int | None = None) -> Iterator[None]:
    """Turn an OSError inside the block into the DiskError about writing `what` at `path`."""
    try:
        fault_point("write", path)  # tests inject the errors no kernel gives on demand (EDQUOT)
        yield
    except OSError as exc:
        failed = Path(os.fsdecode(exc.filename)) if exc.filename else path
        raise disk_error(exc, what=what, path=failed, need=need) from None


def write_places(
    cache: Path, dist: Path | None = None, keys: Path | None = None
) -> dict[Path, str]:
    """What lives where under the roots a command writes: the labels `from_oserror` names."""
    import tempfile

    places = {
        Path(tempfile.gettempdir()): "a temporary file",
        cache: "the download cache",
        cache / "partial": "a partial download",
        cache / "sha256": "a download cache entry",
        cache / "stages": "a memoised stage (the build memo)",
        cache / "outputs": "a memoised package (the build memo)",
        cache / "state": "the build memo",
        cache / "locks": "a lock file",
    }
    if dist is not None:
        places[dist] = "the output directory (dist/)"
    if keys is not None:
        places[keys] = "the signing key"
    return places


TOOL_ROOM = 1 << 20  # a packaging tool that failed with less free than this most likely ran out


def tool_ran_out(tool: str, output: Path, what: str) -> DiskError | None:
    """A packaging tool (makensis) reports a full disk in its own words ("fwrite failed"): if
    it failed and the filesystem of its output is all but full, the disk is the cause."""
    free = free_bytes(output)
    if free >= TOOL_ROOM:
        return None
    error = disk_error(
        OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(output)), what=what, path=output
    )
    error.message = f"{tool} could not write {what}: {os.strerror(errno.ENOSPC)} (ENOSPC)"
    return error


# What a write can meet on a filesystem, also from a file object that names no path (a gzip
# stream flushed on close); a network error (ECONNRESET, requests' errno-less errors) is not.
FILESYSTEM_ERRNOS = frozenset(
    {
        errno.ENOSPC,
        errno.EDQUOT,
        errno.EROFS,
        errno.EACCES,
        errno.EPERM,
        errno.EMFILE,
        errno.ENFILE,
        errno.ENAMETOOLONG,
        errno.EFBIG,
        errno.EIO,
    }
)


def is_disk_error(exc: BaseException) -> bool:
    """An OSError from the filesystem, not from the network (which requests also makes an
    OSError, with no path)."""
    if not isinstance(exc, OSError) or exc.errno is None:
        return False
    return bool(exc.filename) or exc.errno in FILESYSTEM_ERRNOS


def from_oserror(exc: OSError, places: Mapping[Path, str]) -> DiskError:
    """The command boundary's translation: name what lives at the failing path from the
    places the command writes (the cache, dist/, the key directory …), the deepest first."""
    named = exc.filename2 or exc.filename  # a rename or link fails writing its destination
    path = Path(os.fsdecode(named)) if named else None
    if path is None:
        return _unnamed(exc, places)
    what = None
    if path is not None:
        absolute = path.absolute()
        for root, label in sorted(places.items(), key=lambda kv: -len(kv[0].parts)):
            if absolute.is_relative_to(root.absolute()):
                what = label
                break
    return disk_error(exc, what=what, path=path)


def _unnamed(exc: OSError, places: Mapping[Path, str]) -> DiskError:
    """An error that names no file (a buffered stream flushed late): never `.` and its mount,
    which are where the command runs, not what it wrote; the places it writes, with their
    filesystems, instead."""
    number = exc.errno or 0
    name = errno.errorcode.get(number, str(number))
    reason = os.strerror(number) if number else str(exc)
    mounts: dict[Path, list[str]] = {}
    for root, label in sorted(places.items(), key=lambda kv: len(kv[0].parts)):
        if root.parent not in places:  # the cache, not each of its directories
            mounts.setdefault(mount_point(root), []).append(f"{label} {root}")
    where = "; ".join(
        f"{', '.join(labels)} on {mount} ({amount(free_bytes(mount))} free)"
        for mount, labels in mounts.items()
    )
    if number in (errno.ENOSPC, errno.EDQUOT):
        fix = f"free space (or quota) where this command writes — {where}"
    elif number == errno.EROFS:
        fix = f"one of the filesystems this command writes is read-only — {where}"
    elif number in (errno.EACCES, errno.EPERM):
        fix = f"this user may not write one of the places this command writes — {where}"
    elif number in (errno.EMFILE, errno.ENFILE):
        fix = _fix(number, Path.cwd(), None)  # a limit of the process, not of a place
    else:
        fix = f"check the filesystems this command writes — {where}"
    return DiskError(f"a write was refused, naming no file: {reason} ({name})", fix=fix)
