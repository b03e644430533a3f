"""What the cache repaired, told to whoever is listening (the build's output, cache-verify).

The cache is a library module with no reporter; a command that wants to say what it found
registers a listener for the length of its work. A cache entry whose bytes no longer hash to
its name is never used; the operator must still hear of it (a failing disk, a poisoned cache).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Repair:
    path: Path
    expected: str  # the sha256 the entry is named by
    found: str  # the sha256 its bytes have now
    size: int
    stored_size: int | None  # when it was stored
    action: str

    @classmethod
    def evicted(
        cls, path: Path, expected: str, found: str, size: int, stored_size: object
    ) -> Repair:
        """An entry the cache removed, so that it is fetched again."""
        stored = stored_size if isinstance(stored_size, int) else None
        return cls(path, expected, found, size, stored, "removed from the cache")

    def line(self, then: str) -> str:
        """What was found and done; `then` is what follows, as the command knows it (a build
        fetches the entry again, `cache-verify` leaves that to the next build)."""
        sizes = (
            f"{self.size} bytes"
            if self.stored_size in (None, self.size)
            else f"{self.size} bytes, {self.stored_size} when stored"
        )
        return (
            f"cache: {self.path} failed its hash: expected sha256 {self.expected}, found "
            f"{self.found} ({sizes}); {self.action}; {then}"
        )


_listeners: list[Callable[[Repair], None]] = []
_lock = threading.Lock()


def report_repair(repair: Repair) -> None:
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        listener(repair)


@contextlib.contextmanager
def watching(listener: Callable[[Repair], None] | None = None) -> Iterator[list[Repair]]:
    """Collect (and pass to `listener` as they happen) the repairs made inside the block."""
    seen: list[Repair] = []

    def collect(repair: Repair) -> None:
        seen.append(repair)
        if listener is not None:
            listener(repair)

    with _lock:
        _listeners.append(collect)
    try:
        yield seen
    finally:
        with _lock:
            _listeners.remove(collect)
