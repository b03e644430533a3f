"""The licence policy read directly: each licence id and expression a channel judges, the policy
file (its sets, defaults and every refusal, whole), and a product's `[policy]` overlay.

tests/test_audit_verdicts.py holds the audit's rows and gate; both call licensing/audit.py on
small inputs built in the test.
"""

from __future__ import annotations

import locale
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ortbundle._core.errors import ConfigError
from ortbundle._core.memo import Memo
from ortbundle.config.policy_overlay import ChannelOverlay, PolicyOverlay
from ortbundle.config.schema import display_name
from ortbundle.licensing.audit import (
    ChannelPolicy,
    Policy,
    load_policy,
    with_overlay,
)
from tests.helpers.audit_inputs import (
    LIN,
    MAC,
    NSIS,
    WIN,
    write_policy,
)

# --- the policy: ids, expressions, channels ---------------------------------------------------


def test_a_channel_covers_the_targets_any_of_its_globs_names() -> None:
    two = replace(NSIS, targets=("windows-*", "macos-*"))
    assert two.covers(WIN) and two.covers(MAC) and not two.covers(LIN)
    assert not NSIS.covers("Windows-x86_64")  # globs are case-sensitive


@pytest.mark.parametrize(
    ("license_id", "verdict"),
    [
        ("MIT", "allow"),
        ("Apache-2.0", "allow"),
        ("GPL-3.0-only", "review"),
        ("LicenseRef-Foo", "review"),
        ("LicenseRef-Bad", "refuse"),  # the refusal beats the review glob that also matches
        ("BSD-3-Clause", "review"),  # no list names it: the channel's unknown
        ("mit", "review"),  # case-sensitive
    ],
)
def test_each_licence_id_gets_its_list_verdict(license_id: str, verdict: str) -> None:
    assert NSIS.verdict_for_id(license_id) == verdict


def test_refuse_beats_review_beats_allow_and_unknown_is_the_channels() -> None:
    everything = ChannelPolicy("c", ("*",), ("*",), ("GPL-*",), ("AGPL-*",), "refuse")
    assert [everything.verdict_for_id(i) for i in ("AGPL-3.0", "GPL-3.0", "MIT")] == [
        "refuse",
        "review",
        "allow",
    ]
    assert replace(NSIS, unknown="allow").verdict_for_id("Zlib") == "allow"
    assert replace(NSIS, unknown="refuse").verdict_for_id("Zlib") == "refuse"
    reviewed = ChannelPolicy("c", ("*",), (), ("GPL-*",), (), "allow")
    assert reviewed.verdict_for_id("GPL-2.0") == "review"


def test_an_overlay_is_consulted_before_the_lists_but_after_the_policys_refusals() -> None:
    first = replace(
        NSIS,
        first=(
            ("allow", ("GPL-2.0-only", "Zlib")),
            ("refuse", ("MIT", "GPL-2.0-only")),
            ("allow", ("LicenseRef-Bad",)),
        ),
    )
    assert first.verdict_for_id("GPL-2.0-only") == "allow"  # the first rule that matches wins
    assert first.verdict_for_id("Zlib") == "allow"  # over the channel's unknown
    assert first.verdict_for_id("MIT") == "refuse"  # over the channel's allow
    assert first.verdict_for_id("LicenseRef-Bad") == "refuse"  # the policy's own refusal first
    assert first.verdict_for_id("GPL-3.0-only") == "review"  # no overlay rule: the lists


@pytest.mark.parametrize(
    ("expression", "verdict"),
    [
        ("MIT", "allow"),
        ("MIT AND Apache-2.0", "allow"),
        ("MIT AND GPL-2.0-only", "review"),
        ("MIT AND LicenseRef-Bad", "refuse"),
        ("GPL-2.0-only AND LicenseRef-Bad", "refuse"),
        ("MIT OR GPL-2.0-only", "allow"),
        ("LicenseRef-Bad OR GPL-2.0-only", "review"),
        ("LicenseRef-Bad OR LicenseRef-Bad2", "refuse"),
        ("GPL-2.0-only WITH Classpath-exception-2.0", "review"),
        ("MIT WITH Classpath-exception-2.0", "allow"),
        ("(MIT OR LicenseRef-Bad) AND (GPL-2.0-only OR LicenseRef-Bad)", "review"),
    ],
)
def test_an_expression_needs_every_and_part_and_takes_the_best_or(
    expression: str, verdict: str
) -> None:
    refusing = replace(NSIS, refuse=("LicenseRef-Bad*",))
    assert refusing.evaluate(expression) == verdict


def test_an_expression_is_evaluated_through_the_builds_memo(tmp_path: Path) -> None:
    memo = Memo(tmp_path / "outputs")
    assert NSIS.evaluate("MIT AND GPL-2.0-only", memo) == "review"
    assert NSIS.evaluate("MIT AND GPL-2.0-only", memo) == "review"  # now from the memo
    assert list((tmp_path / "outputs").rglob("*")), "the memo kept nothing"


def test_asking_for_a_channel_the_policy_lacks_names_those_it_has(tmp_path: Path) -> None:
    policy = Policy(tmp_path / "policy.toml", {"nsis": NSIS, "deb": replace(NSIS, name="deb")})
    assert policy.channel("nsis") is NSIS
    with pytest.raises(ConfigError) as caught:
        policy.channel("apk")
    assert caught.value.exit_code == 2
    assert str(caught.value) == (
        f"the licence policy has no channel 'apk' [file {tmp_path / 'policy.toml'}] — fix: use "
        "one of: deb, nsis, or add [channels.apk]"
    )


# --- the policy file ------------------------------------------------------------------------


def test_a_policy_file_expands_its_sets_and_defaults_each_channel(tmp_path: Path) -> None:
    path = write_policy(
        tmp_path / "policy.toml",
        {
            "sets": {
                "permissive": ["MIT", "@bsd"],
                "bsd": ["BSD-2-Clause", "BSD-3-Clause"],
                "copyleft": ["GPL-*"],
            },
            "channels": {
                "deb": {
                    "targets": ["linux-*"],
                    "allow": ["@permissive", "Zlib"],
                    "review": ["@copyleft"],
                    "refuse": ["AGPL-*"],
                    "unknown": "refuse",
                },
                "stage": {},
            },
        },
    )
    policy = load_policy(path)
    assert policy.path == path
    assert policy.channels == {
        "deb": ChannelPolicy(
            name="deb",
            targets=("linux-*",),
            allow=("MIT", "BSD-2-Clause", "BSD-3-Clause", "Zlib"),
            review=("GPL-*",),
            refuse=("AGPL-*",),
            unknown="refuse",
        ),
        "stage": ChannelPolicy("stage", ("*",), (), (), (), "review"),
    }
    assert policy.sets == {
        "permissive": ("MIT", "BSD-2-Clause", "BSD-3-Clause"),
        "bsd": ("BSD-2-Clause", "BSD-3-Clause"),
        "copyleft": ("GPL-*",),
    }


def test_a_policy_file_without_sets_or_channels_is_empty(tmp_path: Path) -> None:
    policy = load_policy(write_policy(tmp_path / "policy.toml", {}))
    assert (policy.channels, policy.sets) == ({}, {})


def test_a_missing_policy_file_says_to_restore_it(tmp_path: Path) -> None:
    path = tmp_path / "licenses" / "policy.toml"
    with pytest.raises(ConfigError) as caught:
        load_policy(path)
    assert caught.value.exit_code == 2
    assert str(caught.value) == (
        f"the licence policy is missing [file {path}] — fix: restore licenses/policy.toml"
    )
    assert caught.value.__suppress_context__  # no chained traceback


def test_a_policy_file_that_is_not_toml_says_where(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text("[channels.deb\n", "utf-8")
    with pytest.raises(tomllib.TOMLDecodeError) as parser:  # tomllib's words, whatever they are
        tomllib.loads(path.read_text("utf-8"))
    with pytest.raises(ConfigError) as caught:
        load_policy(path)
    assert str(caught.value) == f"not valid TOML: {parser.value} [file {path}]"
    assert caught.value.__suppress_context__


def test_a_policy_file_not_in_utf8_is_refused_as_not_toml(tmp_path: Path) -> None:
    """Not a traceback: the same message config/tomlreader.py gives any other TOML input."""
    path = tmp_path / "policy.toml"
    path.write_bytes(b"# caf\xe9\n")
    with pytest.raises(ConfigError) as caught:
        load_policy(path)
    assert str(caught.value) == (
        "not valid TOML: 'utf-8' codec can't decode byte 0xe9 in position 5: invalid "
        f"continuation byte [file {path}]"
    )


def test_a_policy_file_is_held_to_its_schema_and_named(tmp_path: Path) -> None:
    path = write_policy(tmp_path / "policy.toml", {"channels": {"deb": {"unknown": "maybe"}}})
    with pytest.raises(ConfigError, match="'maybe' is not a verdict") as caught:
        load_policy(path)
    assert str(caught.value).endswith(f"in [channels.deb] of {display_name(path)} [file {path}]")


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ({"sets": 3}, "`sets`: must be a table, not 3 in the top level"),
        ({"sets": {"a": "MIT"}}, "`a`: must be a list of non-empty strings, not 'MIT' in [sets]"),
        ({"sets": {"a": ["MIT", 1]}}, "`a`: must be a list of non-empty strings, not"),
        ({"channels": []}, "`channels`: must be a table, not [] in the top level"),
        ({"channels": {"deb": "MIT"}}, "`deb`: must be a table, not 'MIT' in [channels]"),
        ({"channels": {"deb": {"allow": "MIT"}}}, "`allow`: must be a list of non-empty strings"),
        ({"channels": {"deb": {"refuse": [1]}}}, "`refuse`: must be a list of non-empty strings"),
        ({"channels": {"deb": {"unknown": "maybe"}}}, "`unknown`: 'maybe' is not a verdict"),
    ],
)
def test_the_schema_refuses_every_shape_load_policy_relies_on(
    tmp_path: Path, document: dict[str, Any], problem: str
) -> None:
    """load_policy checks only the sets' names: each shape it reads is the schema's to refuse."""
    path = write_policy(tmp_path / "policy.toml", document)
    with pytest.raises(ConfigError) as caught:
        load_policy(path)
    assert caught.value.exit_code == 2
    assert problem in str(caught.value)


def test_a_policy_file_is_read_as_utf8_whatever_the_locale(tmp_path: Path) -> None:
    path = write_policy(
        tmp_path / "policy.toml", {"sets": {"café": ["MIT"]}, "channels": {"deb": {}}}
    )
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")  # an ASCII locale: its default codec is ASCII
    try:
        policy = load_policy(path)
    finally:
        locale.setlocale(locale.LC_CTYPE, before)
    assert policy.sets == {"café": ("MIT",)}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            {"channels": {"deb": {"allow": ["@nope"]}}},
            "channels.deb.allow: unknown set @nope",
        ),
        (
            {"channels": {"deb": {"targets": ["@nope"]}}},
            "channels.deb.targets: unknown set @nope",
        ),
        (
            {"channels": {"deb": {"review": ["@nope"]}}},
            "channels.deb.review: unknown set @nope",
        ),
        (
            {"channels": {"deb": {"refuse": ["@nope"]}}},
            "channels.deb.refuse: unknown set @nope",
        ),
        ({"sets": {"a": ["@b"]}}, "sets.a: unknown set @b"),
        ({"sets": {"a": ["@a"]}}, "sets.a: set @a includes itself"),
        (
            {"sets": {"a": ["MIT", "@b"], "b": ["@a"]}, "channels": {"deb": {"allow": ["@a"]}}},
            "sets.b: set @a includes itself",
        ),
        (
            {"sets": {"b": ["@a"], "a": ["MIT", "@b"]}},
            "sets.a: set @b includes itself",
        ),
    ],
)
def test_a_policy_set_unknown_or_including_itself_names_the_list(
    tmp_path: Path, document: dict[str, Any], message: str
) -> None:
    path = write_policy(tmp_path / "policy.toml", document)
    with pytest.raises(ConfigError) as caught:
        load_policy(path)
    assert caught.value.exit_code == 2
    assert str(caught.value) == f"{message} [file {path}]"


def test_a_set_may_be_used_twice_without_including_itself(tmp_path: Path) -> None:
    path = write_policy(
        tmp_path / "policy.toml",
        {
            "sets": {"base": ["MIT"], "a": ["@base"], "b": ["@base", "@a"]},
            "channels": {"deb": {"allow": ["@a", "@b"]}},
        },
    )
    policy = load_policy(path)
    assert policy.channels["deb"].allow == ("MIT", "MIT", "MIT")
    assert policy.sets["b"] == ("MIT", "MIT")


# --- a product's [policy] overlay ------------------------------------------------------------


def base_policy(tmp_path: Path) -> Policy:
    return Policy(
        tmp_path / "policy.toml",
        {"nsis": NSIS, "deb": replace(NSIS, name="deb", targets=("linux-*",))},
        {"copyleft": ("GPL-*", "LGPL-*")},
    )


def test_no_overlay_leaves_the_policy_as_it_is(tmp_path: Path) -> None:
    policy = base_policy(tmp_path)
    assert with_overlay(policy, PolicyOverlay(sets=(("x", ("MIT",)),))) is policy


def test_an_overlay_puts_its_rules_first_on_the_channels_it_names(tmp_path: Path) -> None:
    policy = base_policy(tmp_path)
    overlay = PolicyOverlay(
        sets=(("mine", ("Zlib", "@copyleft")),),
        channels=(
            ChannelOverlay("nsis", (("refuse", ("@copyleft",)), ("allow", ("@mine", "ISC")))),
            ChannelOverlay("deb", (), unknown="refuse"),
        ),
        origin="manifests/default.toml",
    )
    over = with_overlay(policy, overlay)
    assert over.channels["nsis"] == replace(
        NSIS,
        first=(("refuse", ("GPL-*", "LGPL-*")), ("allow", ("Zlib", "GPL-*", "LGPL-*", "ISC"))),
    )
    assert over.channels["deb"] == replace(
        policy.channels["deb"], first=(), unknown="refuse"
    )  # unknown taken from the overlay
    assert (over.path, over.sets) == (policy.path, policy.sets)
    assert over.channels["nsis"].unknown == "review"  # no unknown of its own: the policy's
    assert policy.channels["nsis"] is NSIS  # the project's policy is not changed


def test_an_overlay_for_a_channel_the_policy_lacks_is_refused(tmp_path: Path) -> None:
    overlay = PolicyOverlay(
        channels=(ChannelOverlay("apk", (("allow", ("MIT",)),)),), origin="manifests/a.toml"
    )
    with pytest.raises(ConfigError) as caught:
        with_overlay(base_policy(tmp_path), overlay)
    assert caught.value.exit_code == 2
    assert str(caught.value) == (
        "policy.channels.apk: the licence policy has no channel 'apk' [file manifests/a.toml] "
        "— fix: use one of: deb, nsis"
    )


def test_an_overlay_naming_an_unknown_set_lists_those_it_may_use(tmp_path: Path) -> None:
    policy = replace(base_policy(tmp_path), sets={"copyleft": ("GPL-*",), "bsd": ("BSD-*",)})
    overlay = PolicyOverlay(
        channels=(ChannelOverlay("deb", (("allow", ("MIT",)), ("review", ("@nope",)))),),
        origin="manifests/a.toml",
    )
    with pytest.raises(ConfigError) as caught:
        with_overlay(policy, overlay)
    assert str(caught.value) == (
        "policy.channels.deb.review: unknown set @nope [file manifests/a.toml] — fix: define it "
        "under [policy.sets] or use one of licenses/policy.toml's: @bsd, @copyleft"
    )
