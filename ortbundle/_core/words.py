"""Counted nouns in what the tool says: "1 download", "2 downloads", never "1 downloads"."""

from __future__ import annotations


def plural(count: int, noun: str, many: str | None = None) -> str:
    """`count` and `noun`, the noun in the plural unless the count is one (`many` for a plural
    not made with an s: "entry", "entries")."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"
