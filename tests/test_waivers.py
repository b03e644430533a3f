"""Waivers a release can honour: signed off, in date, bound to the bytes that ship; and the
pin --check decision that a newer runtime release makes a waiver unnecessary."""

from __future__ import annotations

import json
import textwrap
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from ortbundle._core.errors import ConfigError
from ortbundle._core.progress import Reporter
from ortbundle.config.products import Waiver, load_product
from ortbundle.evidence.verify import verify_tree
from ortbundle.licensing.audit import audit_channel, load_policy
from ortbundle.licensing.waivers import (
    CoveredFile,
    is_placeholder,
    signoff_problems,
    waivers_a_release_drops,
)
from ortbundle.pipeline.build import AuditFailed, build
from tests.helpers.pe import make_pe
from tests.helpers.project import FakeProject, windows_members

ROOT = Path(__file__).resolve().parent.parent
TODAY = date(2026, 12, 1)
SHA = "a" * 64
YESTERDAY = datetime.now(UTC).date() - timedelta(days=1)
FILE = CoveredFile("windows-x86_64", "runtimes/webgpu/dxil.dll", SHA)


def waiver(**fields: object) -> Waiver:
    values: dict[str, object] = {
        "file": "runtimes/webgpu/dxil.dll",
        "license": "LicenseRef-Microsoft-DXIL",
        "reason": "terms read",
        "reviewer": "Jane Reviewer",
        "targets": ("windows-x86_64",),
        "channels": (),
        "sha256": (SHA,),
        "reviewed": date(2026, 11, 30),
        "expires": date(2027, 5, 31),
    }
    values.update(fields)
    return Waiver(**values)  # type: ignore[arg-type]


def test_a_signed_off_waiver_in_date_for_these_bytes_has_no_problem() -> None:
    assert signoff_problems(waiver(), [FILE], TODAY) == ()


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"reviewer": "unassigned: a named person must read the terms"}, "placeholder"),
        ({"reviewer": "TODO"}, "placeholder"),
        ({"sha256": ()}, "names no sha256"),
        ({"sha256": ("b" * 64,)}, "the bytes changed: windows-x86_64/runtimes/webgpu/dxil.dll"),
        ({"reviewed": None}, "no review date"),
        ({"reviewed": date(2026, 12, 2)}, "in the future"),
        ({"expires": None}, "no expiry"),
        ({"expires": TODAY}, "expired on 2026-12-01"),
        ({"expires": date(2025, 1, 1)}, "expired on 2025-01-01"),
    ],
)
def test_each_missing_sign_off_is_named(fields: dict[str, object], problem: str) -> None:
    problems = signoff_problems(waiver(**fields), [FILE], TODAY)
    assert len(problems) == 1 and problem in problems[0]


def test_placeholders_are_not_people() -> None:
    assert is_placeholder("") and is_placeholder("  ") and is_placeholder("TBD: legal")
    assert not is_placeholder("Jane Reviewer <jane@example.invalid>")
    assert not is_placeholder("Nonna Rossi")  # a name that starts like a keyword is a name


def _product(extra: str, tmp_path: Path) -> Path:
    path = tmp_path / "manifests" / "p.toml"
    path.parent.mkdir(parents=True)
    path.write_text(
        textwrap.dedent(
            """\
            [product]
            name = "p"
            version = "1"
            description = "d"
            url = "https://example.invalid/"
            targets = ["windows-x86_64"]
            runtimes = ["webgpu"]
            """
        )
        + extra
    )
    return path


def test_the_manifest_format_carries_the_sign_off(tmp_path: Path) -> None:
    path = _product(
        textwrap.dedent(
            f"""\
            [[waivers]]
            file = "runtimes/webgpu/dxil.dll"
            license = "LicenseRef-Microsoft-DXIL"
            reason = "r"
            reviewer = "Jane Reviewer"
            sha256 = "{SHA}"
            reviewed = 2026-11-30
            expires = "2027-05-31"
            """
        ),
        tmp_path,
    )
    (parsed,) = load_product(path).waivers
    assert parsed.sha256 == (SHA,)
    assert (parsed.reviewed, parsed.expires) == (date(2026, 11, 30), date(2027, 5, 31))
    assert (parsed.entry, parsed.manifest) == ("waivers[0]", "p.toml")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('sha256 = "ABC"', "`sha256`: 'ABC' is not 64 lower-case hex digits"),
        ('reviewed = "last week"', "`reviewed`: must be a date"),
        ("expires = 2027-05-31T00:00:00", "`expires`: must be a date"),
    ],
)
def test_a_malformed_sign_off_is_a_configuration_error(
    tmp_path: Path, line: str, message: str
) -> None:
    path = _product(
        '[[waivers]]\nfile = "x"\nlicense = "MIT"\nreason = "r"\nreviewer = "J"\n' + line + "\n",
        tmp_path,
    )
    with pytest.raises(ConfigError, match=message) as caught:
        load_product(path)
    assert caught.value.exit_code == 2 and "waivers[0]" in str(caught.value)


# --- a synthetic product through the real gate -----------------------------------------------

SECRET = make_pe(imports=("KERNEL32.dll",), payload=b"terms nobody shipped")


def _with_unlicensed_dll(fake: FakeProject, waiver_text: str) -> FakeProject:
    """The fake runtime also ships secret.dll, whose terms no archive carries."""
    fake.windows = windows_members()
    fake.windows["onnxruntime/capi/secret.dll"] = SECRET
    fake.windows_roots = ["onnxruntime.dll", "secret.dll"]
    fake.windows_licenses = """
[[targets.windows-x86_64.licenses]]
component = "fake"
version = "1.0.0"
expression = "MIT"
files = ["[!s]*.dll"]
texts = [{ source = "windows", member = "onnxruntime/LICENSE" }]

[[targets.windows-x86_64.licenses]]
component = "secret"
version = "2.0"
expression = "LicenseRef-Secret"
files = ["secret.dll"]
texts = []
"""
    fake.product_extra = waiver_text
    return fake.write()


def _waiver_toml(**fields: str) -> str:
    import hashlib

    today = datetime.now(UTC).date()
    values = {
        "reviewer": '"Jane Reviewer"',
        "sha256": f'"{hashlib.sha256(SECRET).hexdigest()}"',
        "reviewed": (today - timedelta(days=1)).isoformat(),
        "expires": (today + timedelta(days=180)).isoformat(),
    }
    values.update(fields)
    lines = "".join(f"{k} = {v}\n" for k, v in values.items() if v)
    return (
        '\n[[waivers]]\nfile = "runtimes/fake/secret.dll"\nlicense = "LicenseRef-Secret"\n'
        'targets = ["windows-x86_64"]\nreason = "the vendor sent its terms by mail"\n' + lines
    )


@pytest.mark.slow
def test_a_signed_off_waiver_lets_a_release_pass(fake: FakeProject, reporter: Reporter) -> None:
    _with_unlicensed_dll(fake, _waiver_toml())
    result = build(fake.project, fake.options(release=True), reporter)
    assert all(a.passed for a in result.audits)
    waived = [c for a in result.audits for c in a.waived]
    assert waived and all(u.signed_off for c in waived for u in c.waiver_uses)
    audit = json.loads((result.version_dir / "audit.json").read_text())
    (entry,) = {
        json.dumps(w, sort_keys=True)
        for channel in audit["channels"]
        for c in channel["components"]
        for w in c["waivers"]
    }
    recorded = json.loads(entry)
    assert recorded["signed_off"] is True and recorded["reviewer"] == "Jane Reviewer"
    assert recorded["covers"] == [
        {"path": "windows-x86_64/runtimes/fake/secret.dll", "sha256": recorded["sha256"][0]}
    ]
    assert verify_tree(result.version_dir, public_key=fake.root / "keys" / "fakeproduct.pub").ok


def _comment(path: Path) -> str:
    """A file's leading comment as one line of prose."""
    lines = path.read_text("utf-8").splitlines()
    head = [line.lstrip("#").strip() for line in lines[: lines.index("")] if line.startswith("#")]
    return " ".join(head)


def test_the_words_say_what_a_release_does_with_a_waiver() -> None:
    """The test above shows a release passing on a signed-off waiver, the one below refusing
    one that is not: licenses/policy.toml (where a reviewer reads the rule), docs/sources.md (where
    the README sends a reader for licences) and the --release help of `invoke build` and
    `invoke audit` must say that, and not that a release refuses anything waived."""
    import importlib.util

    # this repository's tasks.py by its path: a `tasks` module another test imported (a copy
    # of a project's) may sit in sys.modules under that name
    spec = importlib.util.spec_from_file_location("ortbundle_repo_tasks", ROOT / "tasks.py")
    assert spec is not None and spec.loader is not None
    tasks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tasks)

    policy = _comment(ROOT / "licenses" / "policy.toml")
    assert (
        "`--release` passes only with a waiver in the product manifest that is signed off" in policy
    )
    assert "refuses one that is not" in policy
    sources = " ".join((ROOT / "docs" / "sources.md").read_text("utf-8").split())
    assert "`--release` accepts a waiver only when it is signed off" in sources
    helps = [tasks.build.help["release"], tasks.audit.help["release"]]
    assert all("signed-off waivers" in h or "waiver not signed off" in h for h in helps), helps
    for words in (policy, sources, *helps):
        assert "anything waived" not in words and "accepts no waiver" not in words


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"reviewer": '"unassigned: a person must read the terms"'}, "is a placeholder"),
        (
            {"expires": YESTERDAY.isoformat(), "reviewed": "2025-12-01"},
            f"it expired on {YESTERDAY}",
        ),
        ({"sha256": f'"{"0" * 64}"'}, "the bytes changed: windows-x86_64/runtimes/fake/secret.dll"),
        ({"sha256": "", "reviewed": "", "expires": ""}, "it names no sha256"),
    ],
)
def test_a_release_refuses_a_waiver_that_is_not_signed_off(
    fake: FakeProject, reporter: Reporter, fields: dict[str, str], says: str
) -> None:
    _with_unlicensed_dll(fake, _waiver_toml(**fields))
    development = build(fake.project, fake.options(), reporter)  # a development build relies on it
    assert all(a.passed for a in development.audits)
    with pytest.raises(AuditFailed) as caught:
        build(fake.project, fake.options(release=True), reporter)
    failures = [f for a in caught.value.audits for f in a.failures]
    assert failures and all(says in f for f in failures), failures
    assert all(
        "a person must read the terms of windows-x86_64/runtimes/fake/secret.dll" in f
        for f in failures
    )
    assert all("edit waivers[0]" in f and "fakeproduct.toml" in f for f in failures)


def test_the_default_products_dxil_waivers_stay_unsigned_and_say_what_to_do() -> None:
    product = load_product(ROOT / "manifests" / "darkroom.toml")
    dxil = [w for w in product.waivers if w.file.endswith("dxil.dll")]
    assert len(dxil) == 2 and all(is_placeholder(w.reviewer) for w in dxil)
    policy = load_policy(ROOT / "licenses" / "policy.toml")
    # The audit of a stage that ships dxil.dll under the default product's waiver, at release.
    from ortbundle.licensing.attribution import ComponentUse, TargetLicensing
    from ortbundle.stage.staging import StagedFile

    shipped = StagedFile(
        "runtimes/webgpu/dxil.dll", 1, dxil[0].sha256[0] if dxil[0].sha256 else SHA
    )
    use = ComponentUse(
        name="dxil",
        version="1.8.2502.11",
        expression="LicenseRef-Microsoft-DXIL",
        license_ids=("LicenseRef-Microsoft-DXIL",),
        purl="pkg:generic/dxil@1.8.2502.11",
        files=(shipped,),
        texts=(),
        copyrights=(),
        sources=(),
    )
    audit = audit_channel(
        policy.channel("nsis"),
        [TargetLicensing("windows-x86_64", (use,))],
        product.waivers,
        release=True,
        today=TODAY,
    )
    (failure,) = audit.failures
    assert "reviewer is a placeholder" in failure
    assert "a person must read the terms of windows-x86_64/runtimes/webgpu/dxil.dll" in failure
    assert "edit waivers[0] (file = 'runtimes/webgpu/dxil.dll') in darkroom.toml" in failure


# --- pin --check: the way out ---------------------------------------------------------------


X64 = ["onnxruntime.dll", "onnxruntime_providers_shared.dll", "dxcompiler.dll", "dxil.dll"]
X64_WITHOUT_DXIL = X64[:3]
ARM = ["onnxruntime_providers_webgpu.dll", "dxil.dll"]


@pytest.mark.parametrize(
    ("runtime_dir", "target", "current", "newer", "obsolete"),
    [
        ("runtimes/webgpu", "windows-x86_64", X64, X64_WITHOUT_DXIL, ["runtimes/webgpu/dxil.dll"]),
        ("runtimes/webgpu", "windows-x86_64", X64, X64, []),  # still shipped: the waiver stays
        # the plugin's waiver is for windows-arm64: not this target's to drop
        ("plugins/ep-webgpu", "windows-x86_64", X64, X64_WITHOUT_DXIL, []),
        ("plugins/ep-webgpu", "windows-arm64", ARM, ARM[:1], ["plugins/ep-webgpu/dxil.dll"]),
        ("runtimes/openvino", "windows-x86_64", X64, [], []),  # no waived file there today
    ],
)
def test_a_newer_release_without_the_waived_file_makes_its_waiver_obsolete(
    runtime_dir: str, target: str, current: list[str], newer: list[str], obsolete: list[str]
) -> None:
    product = load_product(ROOT / "manifests" / "darkroom.toml")
    found = waivers_a_release_drops(
        product.waivers,
        component="webgpu",
        version="1.28.0",
        runtime_dir=runtime_dir,
        target=target,
        current_files=[] if "openvino" in runtime_dir else current,
        newer_files=newer,
    )
    assert [o.waiver.file for o in found] == obsolete
    for o in found:
        assert o.line() == (
            f"webgpu 1.28.0 no longer ships {o.waiver.file} (LicenseRef-Microsoft-DXIL): after "
            f"moving to it, the waiver for {o.waiver.file} can be removed"
        )
