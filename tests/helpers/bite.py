"""Guards that keep a test able to fail: a loop of assertions over nothing asserts nothing."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")


def each(items: Iterable[T], what: str = "items") -> list[T]:
    """`items` as a list, asserted non-empty, for a loop whose body is the test's assertions.

    The tests' own lint (tests/test_tests_bite.py) accepts a loop of assertions only over a
    literal or over this: an empty build result or an empty file listing must fail the test,
    not pass it silently."""
    listed = list(items)
    assert listed, f"no {what}: the assertions in the loop would check nothing"
    return listed
