"""Facts kept under the cache by key, so a warm build does no work whose result cannot change.

Every memo of a build goes through one `Memo`, made by the build and passed down to each step
that keeps something: `<cache>/outputs/<kind>/<key[:2]>/<key><suffix>`, keyed by `memo_key`.
A release's memo is off: it keeps and consults nothing, and computes everything again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

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
        # surrogatepass: a rendering's context may hold a lone surrogate, still a distinct key
        digest.update(hashlib.sha256(part.encode("utf-8", "surrogatepass")).digest())
    return digest.hexdigest()


def memo_key(parts: Iterable[str], *, code: bool = True) -> str:
    """The key of a memo entry: every part, in order, with the tool version and memo format
    and, with `code`, the tool's own code (a fixed parser or template must not read an entry
    the old one wrote). `code=False` only for facts of bytes no ortbundle code shapes (an
    archive member, a zlib size, a version resource as it was always read)."""
    return digest_of([f"code {code_digest()}" if code else "code -", *parts])


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


def remembered_text(entry: Path | None, compute: Callable[[], str]) -> str:
    """`compute()`, kept at `entry` with its SHA-256 beside it (`.sha256`): a text that is
    shipped (a page, an SBOM, a rendering) is re-hashed before it is used, so an entry altered
    or cut short is computed again, never shipped. None: no memo."""
    if entry is not None:
        with suppress(OSError, ValueError):
            data = entry.read_bytes()
            recorded = entry.with_suffix(".sha256").read_text("utf-8").strip()
            if hashlib.sha256(data).hexdigest() == recorded:
                return data.decode("utf-8")
    text = compute()
    if entry is not None:
        with suppress(OSError):
            entry.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(entry, text)
            atomic_write(entry.with_suffix(".sha256"), hashlib.sha256(text.encode()).hexdigest())
    return text


OUTPUTS = "outputs"  # the cache's directory of memos, one directory per kind under it


@dataclass(frozen=True)
class Memo:
    """Where a build keeps what it computed: `outputs` is `<cache>/outputs`, or None when
    nothing is kept or consulted (a release, or anything that is not a build). Made once by
    the build and passed down, so no module holds a memo directory of its own."""

    outputs: Path | None
    # the trees this build writes and replaces (its scratch version directory, the published
    # one): a memoised output linked there is its own, one linked anywhere else another
    # dist's, which the build leaves untouched (channels/output_cache.py)
    own: tuple[Path, ...] = ()
    # each memoised output this build placed, by its path, with the cache's copy it is linked
    # to: what a kept build (pipeline/replay.py) links again instead of copying
    placed: dict[Path, Path] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def off(cls) -> Memo:
        """Keeps and consults nothing: every fact is computed again."""
        return cls(None)

    @classmethod
    def for_build(cls, cache: Path, *, release: bool) -> Memo:
        """A build's memo under `cache`; a release's is off: a record kept beside an entry
        cannot vouch for it, so a release computes everything from the verified inputs."""
        return cls(None if release else cache / OUTPUTS)

    @property
    def on(self) -> bool:
        return self.outputs is not None

    def entry(self, kind: str, key: str, suffix: str = ".json") -> Path | None:
        """Where the entry `key` of `kind` is kept (sharded by the key's first two hex
        digits: thousands of entries of one kind stay quick to list); None when off."""
        if self.outputs is None:
            return None
        return self.outputs / kind / key[:2] / f"{key}{suffix}"

    def remembered(
        self,
        kind: str,
        parts: Iterable[str],
        compute: Callable[[], T],
        to_json: Callable[[T], Any],
        from_json: Callable[[Any], T],
        *,
        code: bool = True,
    ) -> T:
        """`compute()`, kept as JSON by `memo_key(parts, code=code)` under `kind`."""
        entry = self.entry(kind, memo_key(parts, code=code)) if self.on else None
        return remembered(entry, compute, to_json, from_json)

    def remembered_text(
        self,
        kind: str,
        parts: Iterable[str],
        compute: Callable[[], str],
        *,
        suffix: str,
        code: bool = True,
    ) -> str:
        """`compute()`, kept by `memo_key(parts, code=code)` under `kind` and re-hashed before
        use (`remembered_text`)."""
        entry = self.entry(kind, memo_key(parts, code=code), suffix) if self.on else None
        return remembered_text(entry, compute)


NO_MEMO: Final = Memo.off()  # the default of a step that a build may pass its memo to
