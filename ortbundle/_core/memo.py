"""Facts kept under the cache by key, so a warm build does no work whose result cannot change."""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable, Iterable
from contextlib import suppress
from pathlib import Path
from typing import Any, TypeVar

from ortbundle._core.fsio import atomic_write, scan_tree, stat_record
from ortbundle._core.locations import default_cache_dir
from ortbundle._core.version import __version__

T = TypeVar("T")

_CODE_SUFFIXES = (".py", ".toml", ".json", ".j2")  # what code_digest covers
_PACKAGE = Path(__file__).resolve().parents[1]  # the ortbundle package


@functools.cache
def code_digest() -> str:
    """The tool's own code and data: a change to ortbundle itself invalidates every memo.

    Read once per process (the manifest, the memo keys and each package's key ask for it), and
    hashed only when a file's stat record (size, mtime, ctime, inode) moved since the digest
    was kept under the cache: the package is 200-odd files, which a no-op should not read.
    """
    return _tree_digest(_PACKAGE, default_cache_dir() / "state")


def _tree_digest(root: Path, memo_dir: Path) -> str:
    files = {
        name: stat_record(info)
        for name, (entry, info) in scan_tree(root, skip="__pycache__").items()
        if entry.name.endswith(_CODE_SUFFIXES) and not entry.is_dir(follow_symlinks=False)
    }
    memo = memo_dir / f"code-{hashlib.sha256(os.fsencode(root)).hexdigest()[:16]}.json"
    try:
        kept = json.loads(memo.read_text("utf-8"))
        if kept["files"] == files and isinstance(kept["digest"], str):
            return str(kept["digest"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0")
        digest.update((root / name).read_bytes())
    value = digest.hexdigest()
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(memo, json.dumps({"digest": value, "files": files}))
    except OSError:
        pass  # not kept: the next build hashes again
    return value


_DIGEST_FORMAT = "ortbundle-incremental/1"  # of every key: a new one invalidates every memo


def digest_of(parts: Iterable[str]) -> str:
    """A key over strings, bound to the tool version and the memo format."""
    digest = hashlib.sha256(f"{_DIGEST_FORMAT}\n{__version__}\n".encode())
    for part in parts:
        digest.update(hashlib.sha256(part.encode()).digest())
    return digest.hexdigest()


def remembered(
    entry: Path | None,
    compute: Callable[[], T],
    to_json: Callable[[T], Any],
    from_json: Callable[[Any], T],
) -> T:
    """`compute()`, kept as JSON at `entry` (None: no memo). An entry that cannot be read or
    does not parse is computed again; one that cannot be written only costs the next build."""
    if entry is not None:
        with suppress(OSError, ValueError, KeyError, TypeError):
            return from_json(json.loads(entry.read_text("utf-8")))
    value = compute()
    if entry is not None:
        with suppress(OSError):
            entry.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(entry, json.dumps(to_json(value), sort_keys=True))
    return value
