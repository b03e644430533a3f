"""Put a finished version directory in place in one step.

On Linux the new tree and the old one swap names in one `renameat2(RENAME_EXCHANGE)` call, so
the final name holds a complete tree at every instant: the old one, then the new one. Where
the kernel or the filesystem cannot exchange (ENOSYS, EINVAL), the old tree is set aside under
`.<name>.old-<token>` and the new one renamed in: two renames, with a window in which the final
name is missing; a later build that finds it missing puts the set-aside tree back before
anything else (`recover`). The build holds an flock on `.<name>.old-<token>.lock` for as long
as its tree is set aside: a lock a dead build no longer holds says it is gone, where a PID
cannot (in a fresh container every build gets the same one). Each step is a fault point
(_core/faults.py) the kill tests use.
"""

from __future__ import annotations

import errno
import functools
import os
import secrets
import shutil
from collections.abc import Callable
from pathlib import Path

from ortbundle._core.faults import fault_point, switched_on
from ortbundle._core.fsio import lock_if_free, locked

AT_FDCWD = -100
RENAME_EXCHANGE = 1 << 1
STEPS = ("start", "exchanged", "set-aside", "placed", "removing", "done")


@functools.cache
def _libc_renameat2() -> Callable[..., int] | None:
    """glibc's renameat2, looked up on the first exchange: ctypes is not imported by a build
    that publishes into a dist/ with no earlier version to swap."""
    import ctypes

    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # not glibc ≥ 2.28, or not Linux
        return None
    function.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    function.restype = ctypes.c_int
    return function


def exchange(a: Path, b: Path) -> bool:
    """Swap the names of `a` and `b` atomically; False where this system cannot (then nothing
    happened). Any other failure is the OSError it is."""
    renameat2 = _libc_renameat2()
    if renameat2 is None or switched_on("no-exchange"):
        return False
    if renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    import ctypes

    number = ctypes.get_errno()
    if number in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(number, os.strerror(number), str(a), None, str(b))


def set_aside_name(final: Path) -> Path:
    """A name no other build picks, even one with this process's PID in another container."""
    return final.with_name(f".{final.name}.old-{secrets.token_hex(6)}")


def _lock_of(tree: Path) -> Path:
    return tree.with_name(f"{tree.name}.lock")


def set_aside_trees(final: Path) -> list[Path]:
    """The trees builds set aside while replacing `final` (alive or dead), oldest name first."""
    return sorted(
        p for p in final.parent.glob(f".{final.name}.old-*") if not p.name.endswith(".lock")
    )


def publish(tmp: Path, final: Path) -> None:
    """Replace `final` by the finished tree `tmp`; the old tree is removed only afterwards."""
    fault_point("publish:start")
    if not (final.exists() or final.is_symlink()):
        tmp.rename(final)  # nothing to replace: one rename
        fault_point("publish:placed")
        return
    if exchange(tmp, final):
        old = tmp  # the scratch name now holds the old tree
        fault_point("publish:exchanged")
        _remove(old)
    else:
        old = set_aside_name(final)
        with locked(_lock_of(old)):  # held until the old tree is gone; a kill releases it
            os.replace(final, old)
            fault_point("publish:set-aside")
            os.replace(tmp, final)
            fault_point("publish:placed")
            _remove(old)
            _lock_of(old).unlink()
    fault_point("publish:done")


def _remove(tree: Path) -> None:
    """Remove the old tree; a kill half-way leaves a hidden remnant the next build removes."""
    if tree.is_dir() and not tree.is_symlink():
        first = next(iter(sorted(tree.iterdir())), None)
        if first is not None:
            if first.is_dir() and not first.is_symlink():
                shutil.rmtree(first)
            else:
                first.unlink()
            fault_point("publish:removing")
        shutil.rmtree(tree)
    elif tree.exists() or tree.is_symlink():
        tree.unlink()


def recover(final: Path) -> None:
    """A build killed between the two renames of the fallback left no `final`: put back the
    complete tree it had set aside (never a scratch tree, which may be half-built). A set-aside
    tree whose build is alive (it holds the tree's lock) is that build's to place."""
    for old in set_aside_trees(final):
        if final.exists() or final.is_symlink():
            return
        lock = _lock_of(old)
        with lock_if_free(lock) as free:
            # checked again under the lock: its build may have finished since
            if free and old.is_dir() and not (final.exists() or final.is_symlink()):
                old.rename(final)
            if free:
                lock.unlink(missing_ok=True)


def sweep_set_aside(final: Path) -> None:
    """Remove what dead builds set aside beside a `final` that is in place (a kill while the
    old tree was being removed), and their locks; a live build's are left alone."""
    if not (final.exists() or final.is_symlink()):
        return
    names = {p.name.removesuffix(".lock") for p in final.parent.glob(f".{final.name}.old-*")}
    for name in sorted(names):
        old = final.with_name(name)
        with lock_if_free(_lock_of(old)) as free:
            if free:
                shutil.rmtree(old, ignore_errors=True)
                _lock_of(old).unlink(missing_ok=True)
