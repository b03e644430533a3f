"""The policy's `[[incompatible]]` entries: licence pairs no one program may carry together
(licensing/compatibility.py finds them in a build)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Incompatible", "incompatible_pairs"]


@dataclass(frozen=True)
class Incompatible:
    """One `[[incompatible]]` entry: licence id globs on each side, why, and who says so."""

    first: tuple[str, ...]
    second: tuple[str, ...]
    why: str
    source: str


def incompatible_pairs(
    entries: Sequence[Mapping[str, Any]], expand: Callable[[list[str], str], tuple[str, ...]]
) -> tuple[Incompatible, ...]:
    """The policy's `[[incompatible]]` entries, their `@set`s expanded by `expand`."""
    return tuple(
        Incompatible(
            expand(list(entry["first"]), f"incompatible[{i}].first"),
            expand(list(entry["second"]), f"incompatible[{i}].second"),
            str(entry["why"]),
            str(entry["source"]),
        )
        for i, entry in enumerate(entries)
    )
