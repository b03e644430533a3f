"""The licence audit's verdicts and its gate, read directly: each component's row (problems in
order, status, waivers), and every line a gate refuses with, in a development build and in a
release, over one channel and over a build's targets.

tests/test_licensing.py and tests/test_evidence_audit.py audit whole synthetic builds; here each
function of licensing/audit.py is called on dataclasses and small files built in the test, so a
changed word, comparison or default fails a test that names it (the policy itself:
tests/test_audit_policy.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ortbundle._core.errors import AuditError, ConfigError
from ortbundle._core.memo import Memo
from ortbundle.config.policy_overlay import ChannelOverlay, PolicyOverlay
from ortbundle.config.products import Product, Waiver
from ortbundle.config.project import Project
from ortbundle.config.recipes import Confirmation
from ortbundle.licensing.attribution import ComponentUse, TargetLicensing
from ortbundle.licensing.audit import (
    STAGE_CHANNEL,
    AuditFailed,
    audit_channel,
    audit_targets,
)
from ortbundle.licensing.file_findings import ShippedEvidence
from ortbundle.stage.file_facts import FileEvidence
from tests.helpers.audit_inputs import (
    LIB,
    LIN,
    MAC,
    NSIS,
    TODAY,
    WIN,
    A,
    B,
    C,
    audit,
    staged,
    use,
    waiver,
    write_policy,
)
from tests.helpers.packages import SETTINGS


def row(*uses: ComponentUse, **kwargs: Any) -> tuple[str, tuple[str, ...]]:
    (only,) = audit(*uses, **kwargs).components
    return only.status, only.problems


# --- one component's row ---------------------------------------------------------------------


def test_an_allowed_component_with_its_text_is_ok_and_its_row_says_what_ships() -> None:
    link = staged("runtimes/x/x.so", sha=C, size=0, link="x.dll")
    second = staged("runtimes/x/b.dll", sha=B, size=3)
    result = audit(
        (WIN, use(files=(staged(), link, second))),
        (LIN, use(files=(staged(),))),
        policy=replace(NSIS, targets=("*",)),
    )
    assert result.channel == "nsis"
    (x,) = result.components
    assert x.name == "x" and x.version == "1" and x.purl == "pkg:generic/x@1"
    assert (x.expression, x.verdict, x.status, x.problems) == ("MIT", "allow", "ok", ())
    assert x.files == (
        f"{LIN}/{LIB}",
        f"{WIN}/runtimes/x/b.dll",
        f"{WIN}/{LIB}",
        f"{WIN}/runtimes/x/x.so",
    )
    assert x.size == (1 << 20) * 2 + 3  # links weigh nothing
    assert x.texts == (f"{LIN}/licenses/x/LICENSE", f"{WIN}/licenses/x/LICENSE")
    assert x.text_present and (x.waivers, x.waiver_uses) == ((), ())
    assert result.passed and result.failures == () and result.unused_waivers == ()


def test_only_the_targets_the_channel_covers_are_audited() -> None:
    result = audit((LIN, use("y")), (WIN, use("x")), (MAC, use("z")))
    assert result.targets == (WIN,)
    assert [c.name for c in result.components] == ["x"]


def test_components_are_rows_by_name_and_version_in_order() -> None:
    result = audit(
        (WIN, use("zeta")),
        (WIN, use("alpha", version="2")),
        (LIN, use("alpha", version="1")),
        (WIN, use("alpha", version="1")),
        policy=replace(NSIS, targets=("*",)),
    )
    assert [(c.name, c.version) for c in result.components] == [
        ("alpha", "1"),
        ("alpha", "2"),
        ("zeta", "1"),
    ]
    alpha = "runtimes/alpha/alpha.dll"
    assert result.components[0].files == (f"{LIN}/{alpha}", f"{WIN}/{alpha}")
    assert result.targets == (WIN, LIN)


def test_a_component_stated_differently_on_two_targets_ships_under_both() -> None:
    everywhere = replace(NSIS, targets=("*",))
    (x,) = audit((WIN, use()), (LIN, use(expression="GPL-2.0-only")), policy=everywhere).components
    assert (x.expression, x.verdict) == ("GPL-2.0-only AND MIT", "review")
    assert x.purl == "pkg:generic/x@1"
    (same,) = audit((WIN, use()), (LIN, use()), policy=everywhere).components
    assert same.expression == "MIT"


def test_a_review_licence_is_review_with_the_channels_name() -> None:
    assert row(use(expression="GPL-2.0-only")) == (
        "review",
        ("licence GPL-2.0-only needs review on the nsis channel",),
    )


def test_a_refused_licence_fails_and_says_the_channel() -> None:
    assert row(use(expression="LicenseRef-Bad")) == (
        "fail",
        ("licence LicenseRef-Bad is refused on the nsis channel",),
    )


def test_a_missing_text_fails_naming_each_target_that_lacks_it() -> None:
    everywhere = replace(NSIS, targets=("*",))
    result = audit((WIN, use(text=False)), (MAC, use(text=False)), (LIN, use()), policy=everywhere)
    (x,) = result.components
    assert (x.status, x.problems) == ("fail", (f"no licence text ({MAC}, {WIN})",))
    assert not x.text_present and x.texts == (f"{LIN}/licenses/x/LICENSE",)


def test_the_problems_come_refusal_text_review_then_evidence_then_waivers() -> None:
    refused_bare = row(use(expression="LicenseRef-Bad", text=False))
    assert refused_bare == (
        "fail",
        (
            "licence LicenseRef-Bad is refused on the nsis channel",
            f"no licence text ({WIN})",
        ),
    )
    reviewed_bare = row(use(expression="GPL-2.0-only", text=False))
    assert reviewed_bare == (
        "fail",
        (f"no licence text ({WIN})", "licence GPL-2.0-only needs review on the nsis channel"),
    )
    status, problems = row(
        use(expression="GPL-2.0-only", evidence=(NV_EVIDENCE,)),
        waivers=(waiver(license="MIT"),),
    )
    assert status == "review"
    assert problems[0] == "licence GPL-2.0-only needs review on the nsis channel"
    assert problems[1] == NV_FINDING
    assert problems[2] == (
        f"waiver for {LIB} accepts MIT, but the file is now GPL-2.0-only: the waiver no longer "
        "applies"
    )
    assert len(problems) == 3


NV_FINDING = (
    f"{WIN}/{LIB} (NVIDIA Corporation) says 'Copyright (c) 2025 NVIDIA Corporation' (PE version "
    "resource): NVIDIA Corporation is not x's licensor — neither its licence texts nor its "
    "rule's `licensor` name NVIDIA Corporation; no notice staged with it names x.dll — compare "
    "the evidence with x's terms; if the files are another's, give them a "
    f"[[targets.{WIN}.licenses]] rule of their own in recipes/x.toml (their holder's terms, "
    "e.g. LicenseRef-<Holder>-<Product>, which the policy reviews); if the claim holds, confirm "
    f"it there: [targets.{WIN}.licenses.confirmed] with reviewer, reason, sha256 of each file "
    "and reviewed"
)
NV_EVIDENCE = ShippedEvidence(
    LIB,
    A,
    FileEvidence(
        format="pe",
        company="NVIDIA Corporation",
        copyrights=("Copyright (c) 2025 NVIDIA Corporation",),
    ),
)


def test_evidence_against_an_allowed_claim_is_review_until_confirmed() -> None:
    status, problems = row(use(evidence=(NV_EVIDENCE,)))
    assert status == "review"
    assert problems == (NV_FINDING,)
    confirmed = Confirmation("Ada Lovelace", "read", (A,), TODAY)
    assert row(use(evidence=(NV_EVIDENCE,), confirmed=confirmed)) == ("ok", ())


def test_evidence_is_judged_against_what_the_channel_allows_unread() -> None:
    """The same holder under terms the channel reviews anyway is no finding of its own."""
    reserved = replace(
        NV_EVIDENCE,
        evidence=FileEvidence(
            format="pe",
            company="Microsoft Corporation",
            copyrights=("© Microsoft Corporation. All rights reserved.",),
        ),
    )
    assert row(use(evidence=(reserved,)))[0] == "review"
    permissive = replace(NSIS, allow=("MIT", "LicenseRef-*"), review=())
    assert row(use(evidence=(reserved,)), policy=permissive)[0] == "review"
    reviewed = row(use(expression="LicenseRef-MS", evidence=(reserved,)))
    assert reviewed == ("review", ("licence LicenseRef-MS needs review on the nsis channel",))


# --- waivers ----------------------------------------------------------------------------------


def test_a_waiver_covering_every_own_file_waives_a_review() -> None:
    link = staged("runtimes/x/x.so", sha=C, size=0, link="x.dll")
    w = waiver()
    result = audit(use(expression="GPL-2.0-only", files=(staged(), link)), waivers=(w,))
    (x,) = result.components
    assert x.status == "waived"
    assert x.problems == ("licence GPL-2.0-only needs review on the nsis channel",)
    assert x.waivers == (w,)
    (u,) = x.waiver_uses
    assert u.waiver == w and u.signed_off
    assert [(f.target, f.path, f.sha256) for f in u.covered] == [(WIN, LIB, A)]  # not the link
    assert result.waived == (x,) and result.unused_waivers == ()
    assert result.passed


def test_a_waiver_covering_only_some_files_leaves_the_review() -> None:
    two = (staged(), staged("runtimes/x/other.dll", sha=B))
    result = audit(use(expression="GPL-2.0-only", files=two), waivers=(waiver(),))
    (x,) = result.components
    assert (x.status, x.waivers, x.waiver_uses) == ("review", (), ())
    assert result.unused_waivers == ()  # it matched a file: used, if not enough
    both = audit(
        use(expression="GPL-2.0-only", files=two),
        waivers=(waiver(), waiver(file="runtimes/x/other.dll", sha256=(B,))),
    )
    assert both.components[0].status == "waived"
    assert len(both.components[0].waiver_uses) == 2


def test_a_waiver_glob_covers_the_files_it_matches() -> None:
    two = (staged(), staged("runtimes/x/other.dll", sha=B))
    (x,) = audit(
        use(expression="GPL-2.0-only", files=two),
        waivers=(waiver(file="runtimes/x/*.dll", sha256=(A, B)),),
    ).components
    assert x.status == "waived"
    assert [f.path for f in x.waiver_uses[0].covered] == [LIB, "runtimes/x/other.dll"]


def test_a_waiver_for_another_target_neither_covers_nor_counts_as_used() -> None:
    everywhere = replace(NSIS, targets=("*",))
    w = waiver(targets=(LIN,))
    result = audit((WIN, use(expression="GPL-2.0-only")), waivers=(w,), policy=everywhere)
    assert result.components[0].status == "review"
    assert result.unused_waivers == ()  # Linux is not this channel's: not its waiver at all
    both = audit(
        (WIN, use(expression="GPL-2.0-only")),
        (LIN, use(expression="GPL-2.0-only")),
        waivers=(w,),
        policy=everywhere,
    )
    (x,) = both.components
    assert x.status == "review"  # the Windows file is not covered
    assert both.unused_waivers == ()
    covered = audit(
        (WIN, use(expression="GPL-2.0-only")),
        (LIN, use(expression="GPL-2.0-only")),
        waivers=(w, waiver(targets=(WIN, MAC))),
        policy=everywhere,
    )
    assert covered.components[0].status == "waived"


def test_which_waivers_a_channel_considers() -> None:
    mine = waiver(channels=("nsis",))
    theirs = waiver(channels=("deb",))
    any_channel = waiver()
    other_target = waiver(targets=(LIN,))
    this_target = waiver(targets=(MAC, WIN))
    elsewhere = waiver(file="nothing/*.dll", channels=("deb", "nsis"))
    result = audit(
        use(expression="GPL-2.0-only"),
        use("y"),
        waivers=(mine, theirs, any_channel, other_target, this_target, elsewhere),
    )
    assert result.components[0].waivers == (mine, any_channel, this_target)
    assert result.unused_waivers == (elsewhere,)  # deb's and Linux's are not this channel's


def test_a_waiver_does_not_touch_an_allowed_component_but_is_used() -> None:
    result = audit(use(), waivers=(waiver(license="MIT"),))
    (x,) = result.components
    assert (x.status, x.waivers, x.waiver_uses) == ("ok", (), ())
    assert result.unused_waivers == ()


def test_a_waiver_never_overrides_a_refusal() -> None:
    result = audit(use(expression="LicenseRef-Bad"), waivers=(waiver(license="LicenseRef-Bad"),))
    (x,) = result.components
    assert (x.status, x.waivers, x.waiver_uses) == ("fail", (), ())
    assert x.problems == ("licence LicenseRef-Bad is refused on the nsis channel",)


def test_a_waiver_covers_a_missing_text() -> None:
    (x,) = audit(use(text=False), waivers=(waiver(license="MIT"),)).components
    assert (x.status, x.problems) == ("waived", (f"no licence text ({WIN})",))


def test_a_waiver_for_an_equivalent_expression_applies() -> None:
    (x,) = audit(
        use(expression="MIT AND GPL-2.0-only"),
        waivers=(waiver(license="GPL-2.0-only AND MIT"),),
    ).components
    assert x.status == "waived"


def test_a_waiver_for_another_or_unparsable_licence_no_longer_applies() -> None:
    for license in ("MIT", "GPL-2.0-only AND ("):
        (x,) = audit(use(expression="GPL-2.0-only"), waivers=(waiver(license=license),)).components
        assert (x.status, x.waivers) == ("review", ())
        assert x.problems[1] == (
            f"waiver for {LIB} accepts {license}, but the file is now GPL-2.0-only: the waiver "
            "no longer applies"
        )


def memo_expressions(outputs: Path) -> set[str]:
    """The expressions whose facts a build's memo keeps (licensing/spdx.py: one JSON file)."""
    (kept,) = [p for p in outputs.rglob("*") if p.is_file()]
    return set(json.loads(kept.read_text("utf-8")))


def test_every_expression_is_judged_through_the_builds_memo(tmp_path: Path) -> None:
    """The combined licence, each target's own (for the evidence), and a waiver's."""
    everywhere = replace(NSIS, targets=("*",))
    licensing = [
        TargetLicensing(WIN, (use(expression="GPL-2.0-only"),)),
        TargetLicensing(LIN, (use(),)),
    ]
    memo = Memo(tmp_path / "outputs")
    audit_channel(everywhere, licensing, (), release=False, today=TODAY, memo=memo)
    assert memo_expressions(tmp_path / "outputs") == {"GPL-2.0-only AND MIT", "GPL-2.0-only", "MIT"}
    accepts = waiver(license="MIT AND GPL-2.0-only")
    memo = Memo(tmp_path / "waived")
    result = audit_channel(everywhere, licensing, (accepts,), release=False, today=TODAY, memo=memo)
    assert result.components[0].status == "waived"
    assert "MIT AND GPL-2.0-only" in memo_expressions(tmp_path / "waived")


@pytest.fixture
def far_from_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A local time zone whose date is not UTC's right now: UTC+14 in UTC's afternoon (already
    tomorrow there), UTC-12 in its morning (still yesterday)."""
    zone = "<+14>-14" if datetime.now(UTC).hour >= 12 else "<-12>+12"  # POSIX: no tzdata needed
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    assert datetime.now().date() != datetime.now(UTC).date()
    yield
    monkeypatch.undo()
    time.tzset()


def test_without_a_date_the_audit_judges_waivers_as_of_today_utc(far_from_utc: None) -> None:
    today = datetime.now(UTC).date()
    licensing = [TargetLicensing(WIN, (use(expression="GPL-2.0-only"),))]
    tomorrow = waiver(reviewed=today, expires=today + timedelta(days=1))
    result = audit_channel(NSIS, licensing, (tomorrow,), release=True)
    assert result.passed, result.failures
    expired = waiver(reviewed=today - timedelta(days=9), expires=today)
    result = audit_channel(NSIS, licensing, (expired,), release=True)
    assert result.failures[0].startswith(
        f"x: waiver for {LIB} is not signed off for a release: it expired on {today}"
    )


# --- the gate: what a development build and a release refuse --------------------------------


def test_a_development_build_fails_only_on_refusals_and_missing_texts() -> None:
    result = audit(
        use("bad", expression="LicenseRef-Bad", text=False),
        use("bare", text=False),
        use("copyleft", expression="GPL-2.0-only"),
        use("guess", guessed=("expression",)),
        use("waived", expression="GPL-2.0-only"),
        waivers=(waiver(file="nothing"), waiver(reviewer="TBD")),
    )
    assert [c.status for c in result.components] == ["fail", "fail", "review", "ok", "review"]
    assert result.failures == (
        "bad: licence LicenseRef-Bad is refused on the nsis channel",
        f"bad: no licence text ({WIN})",
        f"bare: no licence text ({WIN})",
    )
    assert not result.passed
    clean = audit(use("copyleft", expression="GPL-2.0-only"), waivers=(waiver(file="nothing"),))
    assert clean.failures == () and clean.passed


def test_a_release_also_refuses_reviews_unsigned_waivers_unused_waivers_and_guesses() -> None:
    files = (staged("runtimes/w/w.dll"),)
    result = audit(
        use("bad", expression="LicenseRef-Bad"),
        use("copyleft", expression="GPL-2.0-only"),
        use("guess", guessed=("expression",)),
        use("signed", expression="GPL-2.0-only", files=(staged("runtimes/s/s.dll"),)),
        use("waived", expression="GPL-2.0-only", files=files),
        waivers=(
            waiver(file="nothing"),
            waiver(file="runtimes/w/w.dll", reviewer="TBD"),
            waiver(file="runtimes/s/s.dll"),
        ),
        release=True,
    )
    assert result.release
    assert [c.status for c in result.components] == ["fail", "review", "ok", "waived", "waived"]
    assert result.failures == (
        "bad: licence LicenseRef-Bad is refused on the nsis channel",
        "copyleft: licence GPL-2.0-only needs review on the nsis channel (review — a release "
        "needs none)",
        "waived: waiver for runtimes/w/w.dll is not signed off for a release: the reviewer is a "
        f"placeholder ('TBD'), not a person — a person must read the terms of {WIN}/runtimes/w/"
        "w.dll (GPL-2.0-only) and, if they allow shipping it, edit waivers[0] (file = "
        f'\'runtimes/w/w.dll\') in default.toml: reviewer = "<their name>", sha256 = "{A}", '
        "reviewed = <the review date>, expires = <when it must be looked at again>; or supply "
        "the licence text and drop the waiver",
        "waiver for nothing matches no shipped file",
        f"guess: guess on {WIN}: `expression` of its [[targets.{WIN}.licenses]] rule in "
        "recipes/guess.toml is the scaffold's guess — check it against the files' evidence "
        "and the archive's notices, then remove 'expression' from `guessed` (a release "
        "refuses a guess)",
    )
    assert not result.passed


def test_a_release_refuses_every_problem_of_a_row_under_review() -> None:
    result = audit(use(expression="GPL-2.0-only", evidence=(NV_EVIDENCE,)), release=True)
    failures = result.failures
    assert len(failures) == 2
    assert failures[0] == (
        "x: licence GPL-2.0-only needs review on the nsis channel (review — a release needs none)"
    )
    assert failures[1] == f"x: {NV_FINDING} (review — a release needs none)"


def test_a_release_refuses_a_confirmation_not_signed_off() -> None:
    placeholder = Confirmation("TBD", "not yet", (A,), TODAY)
    result = audit(use(evidence=(NV_EVIDENCE,), confirmed=placeholder), release=True)
    assert result.components[0].status == "ok"
    (refused,) = result.failures
    assert refused.startswith(
        f"x: the confirmation of x's claim on {WIN} is not signed off for a release: the "
        "reviewer is a placeholder ('TBD'), not a person — "
    )
    signed = Confirmation("Ada Lovelace", "read", (A,), TODAY)
    assert audit(use(evidence=(NV_EVIDENCE,), confirmed=signed), release=True).passed


def test_a_release_passes_a_clean_channel() -> None:
    signed = waiver(file="runtimes/w/w.dll")
    result = audit(use(), use("w", expression="GPL-2.0-only"), waivers=(signed,), release=True)
    assert result.failures == () and result.passed
    assert [c.status for c in result.components] == ["waived", "ok"]


# --- the gate over a build's targets ---------------------------------------------------------


POLICY_DOCUMENT: dict[str, Any] = {
    "sets": {"permissive": ["MIT"]},
    "channels": {
        "nsis": {"targets": ["windows-*"], "allow": ["@permissive"], "review": ["GPL-*"]},
        "deb": {"targets": ["linux-*"], "allow": ["@permissive"], "review": ["GPL-*"]},
        "stage": {"targets": ["*"], "allow": ["@permissive"]},
    },
}


def project(tmp_path: Path, document: dict[str, Any] = POLICY_DOCUMENT) -> Project:
    write_policy(tmp_path / "licenses" / "policy.toml", document)
    return Project.at(tmp_path)


def product(
    channels: tuple[str, ...] = ("nsis", "deb"),
    waivers: tuple[Waiver, ...] = (),
    policy: PolicyOverlay | None = None,
) -> Product:
    return Product(
        name="demo",
        version="1.0.0",
        description="Demo's bundled ONNX Runtime builds",
        url="https://demo.invalid/",
        targets=(WIN, LIN),
        runtimes=(),
        models=(),
        plugins={},
        runtime_targets={},
        override_env="DEMO_ORT_DIR",
        channels=channels,
        packaging=SETTINGS,
        waivers=waivers,
        path=Path("manifests/demo.toml"),
        digest="0" * 64,
        policy=policy or PolicyOverlay(),
    )


def licensing(*targets: str, expression: str = "MIT") -> list[TargetLicensing]:
    return [TargetLicensing(t, (use(expression=expression),)) for t in targets]


def gate(
    tmp_path: Path,
    built: list[TargetLicensing],
    made: Product | None = None,
    release: bool = False,
    audit_channels: tuple[str, ...] = (),
) -> dict[str, tuple[tuple[str, ...], bool, tuple[str, ...]]]:
    audits = audit_targets(
        project(tmp_path),
        made or product(),
        built,
        channels=audit_channels,
        release=release,
        memo=Memo.off(),
    )
    return {a.channel: (a.targets, a.release, a.failures) for a in audits}


def test_the_gate_audits_each_channel_whose_targets_were_built(tmp_path: Path) -> None:
    assert gate(tmp_path, licensing(WIN, LIN)) == {
        "nsis": ((WIN,), False, ()),
        "deb": ((LIN,), False, ()),
    }
    assert gate(tmp_path, licensing(WIN)) == {"nsis": ((WIN,), False, ())}


def test_the_gate_audits_the_product_policy_overlay_and_its_waivers(tmp_path: Path) -> None:
    built = licensing(WIN, expression="GPL-2.0-only")
    (review,) = gate(tmp_path, built, release=True)["nsis"][2]
    assert review == (
        "x: licence GPL-2.0-only needs review on the nsis channel (review — a release needs none)"
    )
    overlay = PolicyOverlay(channels=(ChannelOverlay("nsis", (("allow", ("GPL-*",)),)),))
    assert gate(tmp_path, built, product(policy=overlay), release=True) == {
        "nsis": ((WIN,), True, ())
    }
    waived = product(waivers=(waiver(reviewed=None),))
    (unsigned,) = gate(tmp_path, built, waived, release=True)["nsis"][2]
    assert unsigned.startswith(
        f"x: waiver for {LIB} is not signed off for a release: it has no review date"
    )


def test_the_gate_passes_the_builds_memo(tmp_path: Path) -> None:
    built = licensing(WIN, expression="GPL-2.0-only")
    nsis = Memo(tmp_path / "nsis")
    audit_targets(project(tmp_path), product(channels=("nsis",)), built, release=False, memo=nsis)
    assert memo_expressions(tmp_path / "nsis") == {"GPL-2.0-only"}
    stage = Memo(tmp_path / "stage")  # no package carries Windows: its stage is audited
    audit_targets(project(tmp_path), product(channels=("deb",)), built, release=False, memo=stage)
    assert memo_expressions(tmp_path / "stage") == {"GPL-2.0-only"}


def test_the_gate_judges_waivers_as_of_today(tmp_path: Path) -> None:
    today = datetime.now(UTC).date()
    built = licensing(WIN, expression="GPL-2.0-only")
    fresh = product(waivers=(waiver(reviewed=today, expires=today + timedelta(days=1)),))
    assert gate(tmp_path, built, fresh, release=True)["nsis"][2] == ()


def test_asked_channels_are_audited_whatever_was_built(tmp_path: Path) -> None:
    assert gate(tmp_path, licensing(WIN), audit_channels=("deb", "stage")) == {
        "deb": ((), False, ()),
        "stage": ((WIN,), False, ()),
    }
    # asked for one channel: the targets it does not cover are not audited as a stage
    assert gate(tmp_path, licensing(WIN, LIN), audit_channels=("deb",)) == {
        "deb": ((LIN,), False, ())
    }


def test_a_channel_the_policy_lacks_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="the licence policy has no channel 'apk'"):
        gate(tmp_path, licensing(WIN), product(channels=("apk",)))


def test_a_target_no_channel_carries_is_audited_as_the_stage(tmp_path: Path) -> None:
    built = licensing(WIN, LIN, MAC, expression="GPL-2.0-only")
    audited = gate(tmp_path, built, product(channels=("nsis",)), release=True)
    assert list(audited) == ["nsis", STAGE_CHANNEL]
    assert audited[STAGE_CHANNEL][:2] == ((LIN, MAC), True)
    assert audited[STAGE_CHANNEL][2] == (
        "x: licence GPL-2.0-only needs review on the stage channel (review — a release needs none)",
    )
    # only the stage: every built target
    assert gate(tmp_path, licensing(MAC), product(channels=("nsis",))) == {
        STAGE_CHANNEL: ((MAC,), False, ())
    }


def test_a_bare_target_without_a_stage_channel_stops_the_build(tmp_path: Path) -> None:
    document = {"channels": {"nsis": {"targets": ["windows-*"], "allow": ["MIT"]}}}
    with pytest.raises(ConfigError) as caught:
        audit_targets(
            project(tmp_path, document),
            product(channels=("nsis",)),
            licensing(WIN, LIN, MAC),
            release=False,
            memo=Memo.off(),
        )
    assert caught.value.exit_code == 2
    policy = tmp_path / "licenses" / "policy.toml"
    assert str(caught.value) == (
        f"no package carries {LIN}, {MAC}, and the licence policy has no [channels.stage] to "
        f"audit such a stage [file {policy}] — fix: add [channels.stage] with targets = "
        '["*"] (see the repository\'s licenses/policy.toml)'
    )


def test_audit_failed_names_the_failed_channels_and_what_to_do(tmp_path: Path) -> None:
    passed = audit(use())
    failed = audit(use(text=False))
    deb = replace(failed, channel="deb")
    built = licensing(WIN)
    made = product()
    error = AuditFailed(made, (failed, passed, deb), built)
    assert isinstance(error, AuditError) and error.exit_code == 10
    assert str(error) == (
        "the licence audit failed for: nsis, deb — fix: add the missing texts or policy "
        "entries; a release accepts a waiver only when a person has signed it off (reviewer, "
        "sha256, reviewed, expires: see each FAIL line)"
    )
    assert error.product is made and error.audits == (failed, passed, deb)
    assert error.licensing is built
