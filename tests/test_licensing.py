"""Per-file licence attribution, the policy per channel, waivers and the audit gate."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from ortbundle._core.errors import ConfigError, LicenseError
from ortbundle._core.progress import Reporter
from ortbundle.cli.build import run_audit
from ortbundle.cli.common import CommandFailed
from ortbundle.licensing.attribution import copyright_lines, normalize_expression
from ortbundle.licensing.audit import ChannelPolicy, load_policy
from ortbundle.licensing.audit_print import print_report
from ortbundle.pipeline.build import AuditFailed, build
from tests.helpers.project import REPO_POLICY, FakeProject
from tests.helpers.toml_edit import edit_toml


def windows_rule(
    expression: str = "MIT", files: str = '["*.dll"]', texts: str | None = None
) -> str:
    texts = (
        texts if texts is not None else '[{ source = "windows", member = "onnxruntime/LICENSE" }]'
    )
    return f"""
[[targets.windows-x86_64.licenses]]
component = "fake"
version = "1.0.0"
expression = "{expression}"
files = {files}
texts = {texts}
"""


def dist_snapshot(fake: FakeProject) -> dict[str, bytes]:
    dist = fake.root / "dist"
    if not dist.exists():
        return {}
    return {
        p.relative_to(dist).as_posix(): p.read_bytes()
        for p in sorted(dist.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def report_text(audits: tuple[object, ...]) -> str:
    out = io.StringIO()
    print_report(Console(file=out, width=200, color_system=None), audits)  # type: ignore[arg-type]
    return out.getvalue()


def test_every_staged_file_is_attributed_and_noticed(
    written: FakeProject, reporter: Reporter
) -> None:
    result = build(written.project, written.options(), reporter)
    for target in result.targets:
        on_disk = {
            p.relative_to(target.stage).as_posix()
            for p in target.stage.rglob("*")
            if p.is_file() or p.is_symlink()
        }
        assert {f.path for f in target.files} == on_disk
        for path in on_disk:
            target.licensing.owner(path)  # raises KeyError for an unattributed file
    linux = next(t for t in result.targets if t.target == "linux-x86_64")
    notice = (linux.stage / "NOTICE").read_text()
    assert "fake 1.0.0\nLicence: MIT" in notice
    assert "licenses/fake/LICENSE" in notice
    assert "Copyright (c) Fake Corp" in notice
    assert "ortbundle" in notice
    audit = json.loads((result.version_dir / "audit.json").read_text())
    assert audit["passed"] is True
    assert {c["channel"] for c in audit["channels"]} == {"arch", "deb", "flatpak", "nsis", "rpm"}


@pytest.mark.slow
def test_unattributed_file_stops_the_build_and_keeps_dist(
    written: FakeProject, reporter: Reporter
) -> None:
    build(written.project, written.options(), reporter)
    before = dist_snapshot(written)
    written.windows_licenses = windows_rule(files='["onnxruntime.dll", "dep.dll"]')
    written.write()
    with pytest.raises(LicenseError) as caught:
        build(written.project, written.options(), reporter)
    message = str(caught.value)
    assert "runtimes/fake/Delayed.dll has no licence attribution" in message
    assert "windows-x86_64" in message and "fake.toml" in message and "fix:" in message
    assert dist_snapshot(written) == before


def test_a_file_claimed_by_two_components_is_refused(fake: FakeProject, reporter: Reporter) -> None:
    fake.windows_licenses = windows_rule() + windows_rule(files='["dep.dll"]').replace(
        '"fake"', '"other"'
    )
    fake.write()
    with pytest.raises(LicenseError, match="claimed by components fake, other"):
        build(fake.project, fake.options(), reporter)


def test_missing_text_fails_the_audit(fake: FakeProject, reporter: Reporter) -> None:
    fake.windows_licenses = windows_rule(texts="[]")
    fake.write()
    result = build(fake.project, fake.options(), reporter)  # a development build publishes…
    nsis = next(a for a in result.audits if a.channel == "nsis")
    assert not nsis.passed  # …but says loudly it is not fit to ship
    assert nsis.failures == ("fake: no licence text (windows-x86_64)",)
    assert "MISSING" in report_text(result.audits)
    with pytest.raises(AuditFailed):
        build(fake.project, fake.options(audit_only=True), reporter)


@pytest.mark.slow
def test_release_build_stops_on_a_failed_audit_and_keeps_dist(
    written: FakeProject, reporter: Reporter
) -> None:
    build(written.project, written.options(), reporter)
    before = dist_snapshot(written)
    written.windows_licenses = windows_rule(texts="[]")
    written.write()
    with pytest.raises(AuditFailed, match="nsis"):
        build(written.project, written.options(release=True), reporter)
    assert dist_snapshot(written) == before


def test_text_from_a_second_archive(fake: FakeProject, reporter: Reporter) -> None:
    fake.windows["onnxruntime/ThirdParty.txt"] = b"Copyright 2024 Second Archive Inc.\n"
    fake.write()
    recipe = fake.root / "recipes" / "fake.toml"
    edit_toml(
        recipe,
        lambda doc: doc["targets"]["linux-x86_64"]["licenses"][0]["texts"].append(
            {"source": "windows", "member": "onnxruntime/ThirdParty.txt"}
        ),
    )
    result = build(fake.project, fake.options(), reporter)
    linux = next(t for t in result.targets if t.target == "linux-x86_64")
    staged = linux.stage / "licenses" / "fake" / "ThirdParty.txt"
    assert staged.read_bytes() == b"Copyright 2024 Second Archive Inc.\n"
    fake_component = next(c for c in linux.licensing.components if c.name == "fake")
    assert "Copyright 2024 Second Archive Inc." in fake_component.copyrights
    assert any(t.origin == "windows:onnxruntime/ThirdParty.txt" for t in fake_component.texts)


@pytest.mark.slow
def test_vendor_licence_is_reviewed_on_binary_channels_and_refused_in_source(
    fake: FakeProject, reporter: Reporter
) -> None:
    fake.windows_licenses = windows_rule(expression="LicenseRef-Qualcomm-AI-Engine-Direct")
    fake.write()
    result = build(fake.project, fake.options(audit_channels=("nsis", "source")), reporter)
    by_channel = {a.channel: a for a in result.audits}
    nsis = next(c for c in by_channel["nsis"].components if c.name == "fake")
    assert (nsis.verdict, nsis.status) == ("review", "review")
    assert by_channel["nsis"].passed  # review passes a development build…
    source = by_channel["source"]
    assert not source.passed
    # one component, two targets, two licences: the source channel judges them together
    assert source.failures == (
        "fake: licence LicenseRef-Qualcomm-AI-Engine-Direct AND MIT is refused on the source channel",
    )
    with pytest.raises(AuditFailed):  # …and not a release
        build(fake.project, fake.options(release=True, audit_channels=("nsis",)), reporter)


@pytest.mark.slow
def test_copyleft_needs_review_and_a_release_refuses_it(
    fake: FakeProject, reporter: Reporter
) -> None:
    fake.windows_licenses = windows_rule(expression="GPL-3.0-or-later")
    fake.write()
    result = build(fake.project, fake.options(), reporter)
    nsis = next(a for a in result.audits if a.channel == "nsis")
    assert nsis.passed
    assert "REVIEW nsis: fake: licence GPL-3.0-or-later needs review" in report_text(result.audits)
    release = fake.options(release=True, audit_only=True)
    with pytest.raises(AuditFailed) as caught:
        build(fake.project, release, reporter)
    failed = next(a for a in caught.value.audits if a.channel == "nsis")
    assert failed.failures == (
        "fake: licence GPL-3.0-or-later needs review on the nsis channel "
        "(review — a release needs none)",
        # and the GPL asks for the source with the binary, which the recipe does not pin
        "fake: fake is GPL-3.0-or-later, which requires its corresponding source with the "
        "binary, and no source is pinned for it (windows-x86_64): add [sources.<id>.build] "
        "naming its source archives to recipes/fake.toml (review — a release needs none)",
    )


WAIVER = """
[[waivers]]
file = "runtimes/fake/*.dll"
license = "{license}"
targets = ["windows-x86_64"]
reason = "terms requested from the vendor"
reviewer = "A. Auditor"
"""


def test_waiver_is_printed_and_a_release_refuses_it(fake: FakeProject, reporter: Reporter) -> None:
    fake.windows_licenses = windows_rule(texts="[]")
    fake.product_extra = WAIVER.format(license="MIT")
    fake.write()
    result = build(fake.project, fake.options(), reporter)
    nsis = next(a for a in result.audits if a.channel == "nsis")
    assert nsis.passed
    assert [c.name for c in nsis.waived] == ["fake"]
    text = report_text(result.audits)
    assert (
        "WAIVED nsis: fake runtimes/fake/*.dll — MIT — terms requested from the vendor — "
        "reviewed by A. Auditor" in text
    )
    with pytest.raises(AuditFailed) as caught:
        build(fake.project, fake.options(release=True), reporter)
    failed = next(a for a in caught.value.audits if a.channel == "nsis")
    (failure,) = failed.failures  # not signed off (tests/test_waivers.py has the rest)
    assert failure.startswith(
        "fake: waiver for runtimes/fake/*.dll is not signed off for a release: it names no sha256"
    )


def test_waiver_for_another_licence_no_longer_applies(
    fake: FakeProject, reporter: Reporter
) -> None:
    fake.windows_licenses = windows_rule(texts="[]")
    fake.product_extra = WAIVER.format(license="BSD-3-Clause")
    fake.write()
    result = build(fake.project, fake.options(), reporter)
    nsis = next(a for a in result.audits if a.channel == "nsis")
    component = next(c for c in nsis.components if c.name == "fake")
    assert component.status == "fail"
    assert any("the waiver no longer applies" in p for p in component.problems)


def test_invoke_audit_writes_json_even_when_it_fails(fake: FakeProject) -> None:
    fake.windows_licenses = windows_rule(texts="[]")
    fake.write()
    out = fake.root / "audit.json"
    options = fake.options(audit_only=True)
    with pytest.raises(CommandFailed) as caught:
        run_audit(options, json_path=out, root=fake.root)
    assert caught.value.code == 10
    report = json.loads(out.read_text())
    assert report["schema"] == "ortbundle.audit/1"
    assert report["passed"] is False
    nsis = next(c for c in report["channels"] if c["channel"] == "nsis")
    assert nsis["failures"] == ["fake: no licence text (windows-x86_64)"]
    assert not (fake.root / "dist" / "fakeproduct" / "1.2.3").exists()  # audit publishes nothing


@pytest.mark.parametrize(
    ("expression", "verdict"),
    [
        ("MIT", "allow"),
        ("MIT AND GPL-3.0-or-later", "review"),
        ("MIT OR GPL-3.0-or-later", "allow"),
        ("GPL-2.0-only WITH Classpath-exception-2.0", "review"),
        ("LicenseRef-NVIDIA-CUDA", "refuse"),
        ("LicenseRef-NVIDIA-CUDA OR Apache-2.0", "allow"),
        ("LicenseRef-Unheard-Of", "refuse"),  # the source channel refuses unknown terms
    ],
)
def test_policy_evaluates_expressions(expression: str, verdict: str) -> None:
    source = load_policy(REPO_POLICY).channel("source")
    assert source.evaluate(expression) == verdict


def test_refuse_beats_allow() -> None:
    policy = ChannelPolicy("x", ("*",), ("*",), (), ("GPL-*",), "review")
    assert policy.evaluate("GPL-3.0-only") == "refuse"


def test_expressions_are_validated() -> None:
    assert normalize_expression("mit and bsd-3-clause", where="t") == (
        "MIT AND BSD-3-Clause",
        ("BSD-3-Clause", "MIT"),
    )
    assert normalize_expression("LicenseRef-Microsoft-DXIL", where="t")[1] == (
        "LicenseRef-Microsoft-DXIL",
    )
    with pytest.raises(LicenseError, match="unknown licence id"):
        normalize_expression("MIT AND Foo", where="t")
    with pytest.raises(LicenseError, match="not a licence expression"):
        normalize_expression("MIT AND (", where="t")


def test_copyright_lines() -> None:
    text = (
        "MIT License\n\n  Copyright (c) 2020 Somebody\nThe above copyright notice and this\n"
        "Copyright [yyyy] [name of copyright owner]\n© 2019 Other\n  Copyright (c) 2020 Somebody\n"
        "Copyright 2008 Caf\xe9 Corp\n"
    ).encode("cp1252")
    assert copyright_lines(text) == (
        "Copyright (c) 2020 Somebody",
        "© 2019 Other",
        "Copyright 2008 Café Corp",
    )
    assert copyright_lines(b"%PDF-1.7\nCopyright (c) 2020 X\n") == ()


def test_policy_file_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "policy.toml"
    bad.write_text('[channels.arch]\nallow = ["@nope"]\n')
    with pytest.raises(Exception, match="unknown set @nope") as caught:
        load_policy(bad)
    assert str(bad) in str(caught.value)


def test_a_target_no_package_carries_is_audited_as_its_stage(
    fake: FakeProject, reporter: Reporter
) -> None:
    """Only the Arch package is made: the Windows stage is still published, so it is audited
    against the policy's 'stage' channel; a policy without that channel stops the build."""
    fake.product_extra = 'channels = ["arch"]\n'  # still inside [product]
    fake.write()
    result = build(fake.project, fake.options(), reporter)
    audited = {a.channel: a.targets for a in result.audits}
    assert audited == {"arch": ("linux-x86_64",), "stage": ("windows-x86_64",)}
    policy = fake.root / "licenses/policy.toml"
    text = policy.read_text()
    start = text.index("[channels.stage]")
    end = text.index("[channels.source]")
    policy.write_text(text[:start] + text[end:])
    with pytest.raises(ConfigError, match=r"no package carries windows-x86_64.*\[channels.stage\]"):
        build(fake.project, fake.options(), reporter)
