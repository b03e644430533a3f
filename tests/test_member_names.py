"""check_member_name: the one rule every archive member's name passes before it becomes a path.

Each refusal is asserted with the reason the user reads (the archive checks put it into their
message), and each boundary with a name just on the safe side of it.
"""

from __future__ import annotations

import pytest

from ortbundle._core.fsio import check_member_name


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("lib/a\x00.so", "contains a NUL byte"),
        ("lib/a\n.so", "contains a control character"),
        ("lib/a\x1f.so", "contains a control character"),  # the last C0 control
        ("lib/a\x7f.so", "contains a control character"),  # DEL
        ("lib\\a.so", "contains a backslash"),
        ("/usr/lib/a.so", "is an absolute path"),
        ("C:", "starts with a drive letter"),  # the shortest one
        ("c:/Windows/a.dll", "starts with a drive letter"),
        ("../a.so", "climbs out with '..'"),
        ("lib/../../a.so", "climbs out with '..'"),
        ("", "is empty"),
        (".", "is empty"),  # a name, but no path part once normalised
        ("./", "is empty"),
    ],
)
def test_an_unsafe_member_name_is_refused_with_its_reason(name: str, reason: str) -> None:
    assert check_member_name(name) == reason


@pytest.mark.parametrize(
    "name",
    [
        "lib/libonnxruntime.so.1",
        "licenses/THIRD PARTY NOTICES.txt",  # a space (0x20) is not a control character
        "lib/a!b~.so",
        "a",  # one character: no room for a drive letter
        "lib/..a/b..",  # dots inside a part do not climb
        "./lib/a.so",
    ],
)
def test_a_safe_member_name_passes(name: str) -> None:
    assert check_member_name(name) is None
