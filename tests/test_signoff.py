"""Waivers' and confirmations' sign-off, read directly: every gap by its exact words, every
date at its boundary, and the whole sentence a release prints with what a person must do.

tests/test_waivers.py checks the same rules through the manifest format and whole builds; here
each function of licensing/waivers.py is called on its own, so a changed word or comparison
fails a test that names it.
"""

from __future__ import annotations

from datetime import date

import pytest

from ortbundle.config.products import Waiver
from ortbundle.config.recipes import Confirmation
from ortbundle.licensing.waivers import (
    ConfirmationUse,
    CoveredFile,
    ObsoleteWaiver,
    WaiverUse,
    confirmation_use,
    covered_files,
    is_placeholder,
    signoff_problems,
    use_of,
    waivers_a_release_drops,
    what_to_do,
)
from tests.helpers.audit_inputs import waiver as make_waiver

TODAY = date(2026, 12, 1)
A, B = "a" * 64, "b" * 64
WIN = "windows-x86_64"
DXIL = CoveredFile(WIN, "runtimes/webgpu/dxil.dll", A)


def waiver(**fields: object) -> Waiver:
    """The DXIL waiver for Windows, reviewed, with `fields` changed."""
    values: dict[str, object] = {
        "file": "runtimes/webgpu/dxil.dll",
        "license": "LicenseRef-Microsoft-DXIL",
        "targets": (WIN,),
    }
    return make_waiver(**{**values, **fields})


# --- the gaps, one by one, in their words ----------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "problems"),
    [
        ({}, ()),
        ({"reviewer": "TBD"}, ("the reviewer is a placeholder ('TBD'), not a person",)),
        ({"sha256": ()}, ("it names no sha256 of the file it accepts",)),
        (
            {"sha256": (B, "c" * 64)},
            (
                f"the bytes changed: {WIN}/runtimes/webgpu/dxil.dll is sha256 {A}, the review was "
                f"of {B} or {'c' * 64}",
            ),
        ),
        ({"sha256": (B, A)}, ()),  # any of the digests reviewed
        ({"reviewed": None}, ("it has no review date (reviewed = YYYY-MM-DD)",)),
        ({"reviewed": TODAY}, ()),  # reviewed today is not in the future
        ({"reviewed": date(2026, 12, 2)}, ("its review date 2026-12-02 is in the future",)),
        ({"expires": None}, ("it has no expiry (expires = YYYY-MM-DD)",)),
        ({"expires": TODAY}, ("it expired on 2026-12-01",)),  # expiring today is expired
        ({"expires": date(2026, 12, 2)}, ()),
        (
            {"reviewed": date(2026, 12, 5), "expires": date(2026, 12, 4)},
            (
                "its review date 2026-12-05 is in the future",
                "it expires before it was reviewed",
            ),
        ),
        (
            {"reviewed": date(2026, 12, 5), "expires": date(2026, 12, 5)},
            ("its review date 2026-12-05 is in the future", "it expires before it was reviewed"),
        ),
        (
            {"reviewer": "", "sha256": (), "reviewed": None, "expires": None},
            (
                "the reviewer is a placeholder (''), not a person",
                "it names no sha256 of the file it accepts",
                "it has no review date (reviewed = YYYY-MM-DD)",
                "it has no expiry (expires = YYYY-MM-DD)",
            ),
        ),
    ],
)
def test_each_gap_of_a_waiver_is_said_in_its_words(
    fields: dict[str, object], problems: tuple[str, ...]
) -> None:
    assert signoff_problems(waiver(**fields), [DXIL], TODAY) == problems


def test_every_covered_file_whose_bytes_changed_is_named() -> None:
    other = CoveredFile("windows-arm64", "runtimes/webgpu/dxil.dll", B)
    third = CoveredFile(WIN, "runtimes/webgpu/dxcompiler.dll", "c" * 64)
    assert signoff_problems(waiver(file="*"), [DXIL, other, third], TODAY) == (
        f"the bytes changed: windows-arm64/runtimes/webgpu/dxil.dll is sha256 {B}, the review "
        f"was of {A}",
        f"the bytes changed: {WIN}/runtimes/webgpu/dxcompiler.dll is sha256 {'c' * 64}, the "
        f"review was of {A}",
    )


@pytest.mark.parametrize(
    "reviewer",
    [
        "",
        "   ",
        "unassigned: someone",
        "Unknown",
        "todo",
        "TBD",
        "tbc",
        "None",
        "nobody",
        "no one",
        "placeholder",
        "n/a",
        "NA",
        "-",
        "---",
        "?",
        "??",
        "  TODO later",
    ],
)
def test_a_placeholder_is_no_person(reviewer: str) -> None:
    assert is_placeholder(reviewer)


@pytest.mark.parametrize(
    "reviewer",
    ["Jane Reviewer", "Nonna Rossi", "Tobias", "Nathan", "Natalie", "Noneen", "Q?"],
)
def test_a_name_that_starts_like_a_placeholder_is_a_person(reviewer: str) -> None:
    assert not is_placeholder(reviewer)


# --- which files a waiver covers, and what a release says --------------------------------------


def test_a_waiver_covers_the_files_its_glob_matches_on_its_targets() -> None:
    files = [
        DXIL,
        CoveredFile("windows-arm64", "runtimes/webgpu/dxil.dll", A),
        CoveredFile(WIN, "runtimes/webgpu/DXIL.dll", A),  # the glob is case-sensitive
        CoveredFile(WIN, "runtimes/cpu/dxil.dll", A),
    ]
    assert covered_files(waiver(), files) == (DXIL,)
    assert covered_files(waiver(targets=()), files) == (files[0], files[1])  # every target
    assert covered_files(waiver(file="runtimes/*/dxil.dll", targets=()), files) == (
        files[0],
        files[1],
        files[3],
    )


def test_a_waiver_in_use_says_what_a_release_lacks_and_what_to_do() -> None:
    use = use_of(waiver(reviewer="TODO", sha256=()), [DXIL], TODAY)
    assert isinstance(use, WaiverUse)
    assert use.covered == (DXIL,)
    assert not use.signed_off
    assert use.refusal() == (
        "waiver for runtimes/webgpu/dxil.dll is not signed off for a release: the reviewer is a "
        "placeholder ('TODO'), not a person; it names no sha256 of the file it accepts — a "
        f"person must read the terms of {WIN}/runtimes/webgpu/dxil.dll "
        "(LicenseRef-Microsoft-DXIL) and, if they allow shipping it, edit waivers[0] "
        "(file = 'runtimes/webgpu/dxil.dll') in default.toml: reviewer = \"<their name>\", "
        f'sha256 = "{A}", reviewed = <the review date>, expires = <when it must be looked at '
        "again>; or supply the licence text and drop the waiver"
    )
    assert use.summary() == (
        "reviewed by TODO — NOT SIGNED OFF: the reviewer is a placeholder ('TODO'), not a "
        "person; it names no sha256 of the file it accepts"
    )


def test_a_signed_off_waiver_says_who_when_and_which_bytes() -> None:
    use = use_of(waiver(sha256=(A, B)), [DXIL], TODAY)
    assert use.signed_off
    assert use.summary() == (
        f"reviewed by Jane Reviewer on 2026-11-30, expires 2027-05-31, sha256 {A}, {B}"
    )


def test_what_to_do_lists_every_digest_and_file_and_has_defaults() -> None:
    files = [
        CoveredFile("windows-arm64", "runtimes/webgpu/dxil.dll", B),
        DXIL,
        CoveredFile(WIN, "runtimes/webgpu/dxil.dll", A),  # the same digest once
    ]
    unplaced = waiver(entry="", manifest="")
    assert what_to_do(unplaced, files) == (
        "a person must read the terms of windows-arm64/runtimes/webgpu/dxil.dll, "
        f"{WIN}/runtimes/webgpu/dxil.dll, {WIN}/runtimes/webgpu/dxil.dll "
        "(LicenseRef-Microsoft-DXIL) and, if "
        "they allow shipping it, edit [[waivers]] (file = 'runtimes/webgpu/dxil.dll') in the "
        f'product manifest: reviewer = "<their name>", sha256 = ["{A}", "{B}"], reviewed = '
        "<the review date>, expires = <when it must be looked at again>; or supply the "
        "licence text and drop the waiver"
    )
    # a waiver covering no file of this build names its glob
    assert what_to_do(unplaced, []).startswith(
        "a person must read the terms of runtimes/webgpu/dxil.dll (LicenseRef-Microsoft-DXIL)"
    )


# --- a rule's confirmation -------------------------------------------------------------------


def confirmation(**fields: object) -> Confirmation:
    values: dict[str, object] = {
        "reviewer": "Jane Reviewer",
        "reason": "the holder is the project's",
        "sha256": (A,),
        "reviewed": date(2026, 11, 30),
        "expires": None,
    }
    values.update(fields)
    return Confirmation(**values)  # type: ignore[arg-type]


def use_confirmation(found: Confirmation, covered: list[CoveredFile]) -> ConfirmationUse:
    return confirmation_use(
        found,
        component="dxil",
        target=WIN,
        rule="recipes/webgpu.toml",
        covered=covered,
        today=TODAY,
    )


def test_a_confirmation_needs_no_expiry_but_one_given_is_checked() -> None:
    use = use_confirmation(confirmation(), [DXIL])
    assert (use.component, use.target, use.rule, use.covered) == (
        "dxil",
        WIN,
        "recipes/webgpu.toml",
        (DXIL,),
    )
    assert use.problems == () and use.signed_off
    assert use.summary() == (
        f"{WIN}/runtimes/webgpu/dxil.dll: confirmed by Jane Reviewer on 2026-11-30 — the "
        "holder is the project's"
    )
    expired = use_confirmation(confirmation(expires=TODAY), [DXIL])
    assert expired.problems == ("it expired on 2026-12-01",)


def test_an_unsigned_confirmation_says_what_a_person_must_compare() -> None:
    other = CoveredFile(WIN, "runtimes/webgpu/dxcompiler.dll", B)
    use = use_confirmation(confirmation(sha256=(), reviewed=None), [DXIL, other])
    assert not use.signed_off
    assert use.problems == (
        "it names no sha256 of the files it confirms",
        "it has no review date (reviewed = YYYY-MM-DD)",
    )
    assert use.refusal() == (
        f"the confirmation of dxil's claim on {WIN} is not signed off for a release: it names "
        "no sha256 of the files it confirms; it has no review date (reviewed = YYYY-MM-DD) — a "
        "person must compare the evidence of "
        f"{WIN}/runtimes/webgpu/dxil.dll, {WIN}/runtimes/webgpu/dxcompiler.dll with its terms "
        f"and, if the claim holds, edit [targets.{WIN}.licenses.confirmed] (component = "
        f"'dxil') in recipes/webgpu.toml: reviewer = \"<their name>\", sha256 = "
        f'["{A}", "{B}"], reviewed = <the review date>'
    )
    assert use.summary() == (
        f"{WIN}/runtimes/webgpu/dxil.dll, {WIN}/runtimes/webgpu/dxcompiler.dll: confirmed by "
        "Jane Reviewer — NOT SIGNED OFF: it names no sha256 of the files it confirms; it has "
        "no review date (reviewed = YYYY-MM-DD)"
    )
    unplaced = ConfirmationUse(confirmation(), "dxil", WIN, "", (DXIL,), ("x",))
    assert "in the recipe: reviewer" in unplaced.refusal()


# --- pin --check: a waiver a newer release makes unnecessary -----------------------------------


def test_a_waiver_whose_file_the_newer_release_drops_is_reported() -> None:
    kept = waiver(file="runtimes/webgpu/dxcompiler.dll")
    other_target = waiver(targets=("linux-x86_64",))
    every_target = waiver(targets=(), license="LicenseRef-Other")
    not_shipped = waiver(file="runtimes/webgpu/absent.dll")
    found = waivers_a_release_drops(
        [waiver(), kept, other_target, not_shipped, every_target],
        component="onnxruntime-webgpu",
        version="1.25.0",
        runtime_dir="runtimes/webgpu/",
        target=WIN,
        current_files=["dxil.dll", "dxcompiler.dll"],
        newer_files=["dxcompiler.dll"],
    )
    assert found == (
        ObsoleteWaiver(waiver(), "onnxruntime-webgpu", "1.25.0"),
        ObsoleteWaiver(every_target, "onnxruntime-webgpu", "1.25.0"),
    )
    assert found[0].line() == (
        "onnxruntime-webgpu 1.25.0 no longer ships runtimes/webgpu/dxil.dll "
        "(LicenseRef-Microsoft-DXIL): after moving to it, the waiver for "
        "runtimes/webgpu/dxil.dll can be removed"
    )
    # the runtime directory without its slash is the same directory, whatever its last letter
    for runtime_dir, file in (
        ("runtimes/webgpu", "runtimes/webgpu/dxil.dll"),
        ("plugins/ep-X", "plugins/ep-X/dxil.dll"),
    ):
        again = waivers_a_release_drops(
            [waiver(file=file)],
            component="c",
            version="2",
            runtime_dir=runtime_dir,
            target=WIN,
            current_files=["dxil.dll"],
            newer_files=[],
        )
        assert again == (ObsoleteWaiver(waiver(file=file), "c", "2"),)
