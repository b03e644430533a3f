"""Licence evidence comes from the bytes, and a guess never ships (issue #30).

The products of the issue, as their real wheels are (FACTS.md, "Added 2026-12-02"), built
synthetically: onnxruntime-directml ships DirectML.dll, whose version resource says it is
Microsoft's DirectML Redistributable Library, all rights reserved, under the wheel's MIT; NVIDIA's
onnxruntime-ep-nv-tensorrt-rtx-cu13 ships NVIDIA's proprietary TensorRT-RTX DLLs and the CUDA
runtime under its wheel's Apache-2.0. The audit compares each file's evidence with the rule
claiming it: review, quoted, not allow; a release refuses until a person confirms the rule."""

from __future__ import annotations

import hashlib
import io
import json
import tomllib
from datetime import UTC, date, datetime, timedelta

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from rich.console import Console

from ortbundle._core.progress import Reporter
from ortbundle.config.recipes import Confirmation
from ortbundle.licensing.attribution import (
    ComponentUse,
    TargetLicensing,
    licensing_from_json,
    licensing_to_json,
)
from ortbundle.licensing.audit import audit_channel, load_policy
from ortbundle.licensing.audit_print import print_report
from ortbundle.licensing.file_findings import Mention, ShippedEvidence
from ortbundle.licensing.waivers import is_placeholder
from ortbundle.pipeline.build import AuditFailed, build
from ortbundle.stage.file_facts import Embedded, FileEvidence
from ortbundle.stage.staging import StagedFile, StagedText
from tests.helpers.elf import make_elf
from tests.helpers.pe import make_pe
from tests.helpers.project import REPO_POLICY, FakeProject, linux_members, windows_members

TODAY = datetime.now(UTC).date()
MICROSOFT_MIT = (
    b"MIT License\n\nCopyright (c) Microsoft Corporation\n\nPermission is hereby granted...\n"
)
# ThirdPartyNotices.txt of an ONNX Runtime wheel: many projects, never DirectML
NOTICES = (
    b"THIRD PARTY SOFTWARE NOTICES AND INFORMATION\n\n"
    b"_____\n\nprotobuf\n\nCopyright 2008 Google Inc.  All rights reserved.\n"
)
DIRECTML = make_pe(
    imports=("KERNEL32.dll", "d3d12.dll"),
    version={
        "CompanyName": "Microsoft Corporation",
        "FileDescription": "DirectML Redistributable Library",
        "FileVersion": "1.15.4",
        "ProductName": "DirectML Redistributable Library",
        "ProductVersion": "1.15.4",
        "LegalCopyright": "© Microsoft Corporation. All rights reserved.",
    },
)
DIRECTML_SHA = hashlib.sha256(DIRECTML).hexdigest()
DML = "windows-x86_64/runtimes/fake/DirectML.dll"


def _rule(expression: str, texts: str, extra: str = "", files: str = '["*.dll"]') -> str:
    """One rule over every DLL, named after the wheel's project as the scaffold names it (so
    the files' versions are the project's to state, not checked against its own)."""
    return f"""
[[targets.windows-x86_64.licenses]]
component = "onnxruntime-fake"
version = "1.0.0"
expression = "{expression}"
files = {files}
texts = {texts}
{extra}"""


ORT_TEXTS = """[
    { source = "windows", member = "onnxruntime/LICENSE" },
    { source = "windows", member = "onnxruntime/ThirdPartyNotices.txt" },
]"""


def _directml(fake: FakeProject, extra: str = "") -> FakeProject:
    """onnxruntime-directml as the scaffold saw it: one MIT rule over every DLL."""
    fake.windows = windows_members()
    fake.windows["onnxruntime/LICENSE"] = MICROSOFT_MIT
    fake.windows["onnxruntime/ThirdPartyNotices.txt"] = NOTICES
    fake.windows["onnxruntime/capi/DirectML.dll"] = DIRECTML
    fake.windows_roots = ["onnxruntime.dll", "DirectML.dll"]
    fake.windows_licenses = _rule("MIT", ORT_TEXTS, extra)
    return fake.write()


def _confirmed(reviewer: str = "Ada Lovelace", sha256: str = DIRECTML_SHA) -> str:
    return f"""
[targets.windows-x86_64.licenses.confirmed]
reviewer = "{reviewer}"
reason = "DirectML's redistribution terms were read and allow shipping it with the application"
sha256 = ["{sha256}"]
reviewed = {(TODAY - timedelta(days=1)).isoformat()}
"""


def _component(audit: dict[str, object], channel: str, name: str) -> dict[str, object]:
    (found,) = [
        c
        for ch in audit["channels"]  # type: ignore[attr-defined]
        if ch["channel"] == channel
        for c in ch["components"]
        if c["name"] == name
    ]
    return found  # type: ignore[no-any-return]


@pytest.mark.slow
def test_directml_under_the_wheels_mit_is_review_not_allow(
    fake: FakeProject, reporter: Reporter
) -> None:
    _directml(fake)
    result = build(fake.project, fake.options(), reporter)  # a development build publishes…
    nsis = next(a for a in result.audits if a.channel == "nsis")
    (fake_row,) = [c for c in nsis.components if c.name == "onnxruntime-fake"]
    assert (fake_row.verdict, fake_row.status) == ("allow", "review")  # …but not as allowed
    # the synthetic DirectML.dll names Microsoft and is unsigned: that is review of its own
    (unsigned,) = [p for p in fake_row.problems if "Authenticode" in p]
    assert unsigned.startswith(
        f"{DML} (Microsoft Corporation, DirectML Redistributable Library 1.15.4) says "
        "CompanyName 'Microsoft Corporation' (PE version resource) but carries no "
        "Authenticode signature — "
    )
    (problem,) = [p for p in fake_row.problems if "Authenticode" not in p]
    assert problem.startswith(
        f"{DML} (Microsoft Corporation, DirectML Redistributable Library 1.15.4) says "
        "'© Microsoft Corporation. All rights reserved.' (PE version resource) under the "
        "permissive claim MIT; no notice staged with it names DirectML.dll or DirectML or "
        "DirectML Redistributable Library — "
    )
    assert "[targets.windows-x86_64.licenses.confirmed]" in problem and "fake.toml" in problem
    printed = io.StringIO()  # the console says it verbatim: brackets are not markup
    print_report(Console(file=printed, width=4000, color_system=None), result.audits)
    # the console says it verbatim, both findings of the file on one line and their shared
    # fix once (#43: a fix repeated for many files is said once)
    (line,) = [
        row
        for row in printed.getvalue().splitlines()
        if row.startswith("REVIEW nsis: onnxruntime-fake: ")
    ]
    assert problem.split(" — ")[0] in line and unsigned.split(" — ")[0] in line
    # two findings of one file: the fix is for "this file", as the table holds one sha256
    assert "— for this file: compare the evidence" in line and "these 2 files" not in line
    assert line.count("confirm it there") == 1
    # and the table that confirms it, each file's SHA-256 in it, ready to paste once reviewed
    (snippet,) = fake_row.claims.tables
    assert snippet in printed.getvalue()
    assert f'"{DIRECTML_SHA}", # {DML.split("/", 1)[1]}' in snippet
    pasted = tomllib.loads(snippet)["targets"]["windows-x86_64"]["licenses"]["confirmed"]
    assert pasted["sha256"] == [DIRECTML_SHA]
    assert is_placeholder(pasted["reviewer"])  # pasted unread, a release still refuses it
    audit = json.loads((result.version_dir / "audit.json").read_text())
    row = _component(audit, "nsis", "onnxruntime-fake")
    (dml,) = [e for e in row["evidence"] if e["path"] == DML]  # type: ignore[attr-defined]
    assert dml["company"] == "Microsoft Corporation" and dml["where"] == "PE version resource"
    assert dml["product"] == "DirectML Redistributable Library"
    assert dml["product_version"] == "1.15.4" and dml["sha256"] == DIRECTML_SHA
    assert dml["copyrights"] == ["© Microsoft Corporation. All rights reserved."]
    assert dml["named_by"] == []  # ThirdPartyNotices never mentions it
    assert [f["kind"] for f in dml["findings"]] == ["reserved", "signature"]
    assert dml["findings"][0]["confirmed"] is False
    assert dml["signature"]["status"] == "unsigned"  # its Authenticode signature, recorded
    report = (result.version_dir / "report.html").read_text()  # and shown beside what it says
    (row_html,) = [line for line in report.splitlines() if f'data-file="{DML}"' in line]
    assert "Authenticode: unsigned" in row_html and "signature" in row_html
    assert row["status"] == "review"
    # the SBOM says it too, on the file: the copyright as CycloneDX evidence, the rest as
    # properties, and it stays valid CycloneDX 1.6
    sbom_text = (result.version_dir / "sbom.cdx.json").read_text()
    assert not JsonStrictValidator(SchemaVersion.V1_6).validate_str(sbom_text)
    (component,) = [
        c for c in json.loads(sbom_text)["components"] if c["name"] == "onnxruntime-fake"
    ]
    (entry,) = [f for f in component["components"] if f["name"] == DML]
    assert entry["evidence"]["copyright"] == [
        {"text": "© Microsoft Corporation. All rights reserved."}
    ]
    properties = {(p["name"], p["value"]) for p in entry["properties"]}
    assert ("ortbundle:company", "Microsoft Corporation") in properties
    assert ("ortbundle:product", "DirectML Redistributable Library 1.15.4") in properties
    assert ("ortbundle:evidence-from", "PE version resource") in properties
    assert ("ortbundle:authenticode", "Authenticode: unsigned") in properties
    # and report.html, in the audit of every channel that ships it
    page = (result.version_dir / "report.html").read_text()
    shown = page[page.index(f'<tr class="review" data-file="{DML}">') :].split("</tr>", 1)[0]
    assert "Microsoft Corporation; DirectML Redistributable Library 1.15.4; © Microsoft" in shown
    assert "(PE version resource)" in shown and "REVIEW</span> reserved" in shown
    # Microsoft is the licensor the LICENSE names: no second finding about the holder
    with pytest.raises(AuditFailed) as caught:  # a release refuses it
        build(fake.project, fake.options(release=True), reporter)
    failures = [f for a in caught.value.audits for f in a.failures]
    assert any("DirectML.dll" in f and "(review — a release needs none)" in f for f in failures)


@pytest.mark.slow
def test_a_confirmed_rule_with_a_valid_sign_off_passes_a_release(
    fake: FakeProject, reporter: Reporter
) -> None:
    _directml(fake, _confirmed())
    result = build(fake.project, fake.options(release=True), reporter)
    assert all(a.passed for a in result.audits)
    nsis = next(a for a in result.audits if a.channel == "nsis")
    (fake_row,) = [c for c in nsis.components if c.name == "onnxruntime-fake"]
    assert fake_row.status == "ok" and fake_row.problems == ()
    (use,) = fake_row.claims.confirmations
    assert use.signed_off and [f.path for f in use.covered] == ["runtimes/fake/DirectML.dll"]
    row = _component(
        json.loads((result.version_dir / "audit.json").read_text()), "nsis", "onnxruntime-fake"
    )
    recorded: dict[str, object] = row["confirmations"][0]  # type: ignore[index]
    assert recorded["reviewer"] == "Ada Lovelace" and recorded["signed_off"] is True
    assert recorded["covers"] == [{"path": DML, "sha256": DIRECTML_SHA}]
    (dml,) = [e for e in row["evidence"] if e["path"] == DML]  # type: ignore[attr-defined]
    assert dml["findings"][0]["confirmed"] is True  # the evidence stays, answered
    page = (result.version_dir / "report.html").read_text()
    assert f'<tr class="confirmed" data-file="{DML}">' in page
    assert (
        "CONFIRMED</span> onnxruntime-fake: windows-x86_64/runtimes/fake/DirectML.dll: confirmed by Ada Lovelace"
        in page
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("confirmation", "says"),
    [
        (_confirmed(reviewer="unassigned: someone must read DirectML's terms"), "placeholder"),
        (_confirmed(sha256="0" * 64), f"the bytes changed: {DML} is sha256 {DIRECTML_SHA}"),
    ],
    ids=["placeholder-reviewer", "other-bytes"],
)
def test_a_release_refuses_a_confirmation_not_signed_off(
    fake: FakeProject, reporter: Reporter, confirmation: str, says: str
) -> None:
    _directml(fake, confirmation)
    development = build(fake.project, fake.options(), reporter)  # relied on, and said so
    assert all(a.passed for a in development.audits)
    with pytest.raises(AuditFailed) as caught:
        build(fake.project, fake.options(release=True), reporter)
    failures = [f for a in caught.value.audits for f in a.failures]
    assert failures and all(says in f for f in failures), failures
    assert all(
        "[targets.windows-x86_64.licenses.confirmed] (component = 'onnxruntime-fake')" in f
        for f in failures
    )


# --- NVIDIA's TensorRT-RTX plugin under its wheel's Apache-2.0 -------------------------------

APACHE = (
    b"Apache License\nVersion 2.0, January 2004\n...\nCopyright [yyyy] [name of copyright owner]\n"
)
# The five NVIDIA files of onnxruntime-ep-nv-tensorrt-rtx-cu13 0.5.0 (FACTS.md): the versions
# are the real ones; FACTS.md records no LegalCopyright, so these carry only their maker.
NVIDIA_DLLS = {
    "onnxruntime_providers_nv_tensorrt_rtx.dll": (
        "NVIDIA TensorRT-RTX Execution Provider",
        "0.5.0",
        "0.5.0",
    ),
    "tensorrt_rtx_1_7.dll": ("TensorRT-RTX", "1.7.0.0", "1.7.0.0"),
    "tensorrt_onnxparser_rtx_1_7.dll": ("TensorRT-RTX", "1.7.0.0", "1.7.0.0"),
    "tensorrt_plugins.dll": ("TensorRT-RTX", "1.7.0.0", "1.7.0.0"),
    "cudart64_13.dll": ("NVIDIA CUDA 13.4.46 Runtime", "13.4.46", "6.14.11.13040"),
}


def _nvidia(fake: FakeProject) -> FakeProject:
    fake.windows = windows_members()
    fake.windows["onnxruntime_ep_nv-0.5.0.dist-info/licenses/LICENSE"] = APACHE
    fake.windows["onnxruntime/TRTRTX_Acknowledgements.txt"] = (
        b"SPDX-License-Identifier: LicenseRef-NvidiaProprietary\n"
    )
    for name, (product, version, file_version) in NVIDIA_DLLS.items():
        fake.windows[f"onnxruntime/capi/{name}"] = make_pe(
            imports=("KERNEL32.dll",),
            payload=name.encode(),  # each its own bytes (alike bytes ship once)
            version={
                "CompanyName": "NVIDIA Corporation",
                "ProductName": product,
                "ProductVersion": version,
                "FileVersion": file_version,
            },
        )
    fake.windows_roots = ["onnxruntime.dll", *NVIDIA_DLLS]
    texts = (
        '[{ source = "windows", member = "onnxruntime_ep_nv-0.5.0.dist-info/licenses/LICENSE" }]'
    )
    fake.windows_licenses = _rule("Apache-2.0", texts)
    return fake.write()


@pytest.mark.slow
def test_every_nvidia_file_under_the_wheels_apache_is_review(
    fake: FakeProject, reporter: Reporter
) -> None:
    _nvidia(fake)
    result = build(fake.project, fake.options(audit_only=True), reporter)
    nsis = next(a for a in result.audits if a.channel == "nsis")
    (row,) = [c for c in nsis.components if c.name == "onnxruntime-fake"]
    assert (row.verdict, row.status) == ("allow", "review")
    reviewed = sorted({f.path.rsplit("/", 1)[-1] for f, _ in row.claims.findings})
    assert reviewed == sorted(NVIDIA_DLLS)  # every NVIDIA file; the fake core says nothing
    # each says NVIDIA and is unsigned (synthetic): a holder finding and a signature one
    assert sorted({f.kind for f, _ in row.claims.findings}) == ["holder", "signature"]
    cudart = next(p for p in row.problems if "cudart64_13.dll" in p)
    assert cudart.startswith(
        "windows-x86_64/runtimes/fake/cudart64_13.dll (NVIDIA Corporation, NVIDIA CUDA 13.4.46 "
        "Runtime 13.4.46) says 'CompanyName NVIDIA Corporation' (PE version resource): NVIDIA "
        "Corporation is not onnxruntime-fake's licensor — neither its licence texts nor its rule's "
        "`licensor` name NVIDIA Corporation"
    )
    with pytest.raises(AuditFailed):
        build(fake.project, fake.options(audit_only=True, release=True), reporter)


# --- the audit alone, from evidence: each check on its own ----------------------------------


def _use(
    evidence: FileEvidence,
    *,
    expression: str = "MIT",
    copyrights: tuple[str, ...] = ("Copyright (c) Microsoft Corporation",),
    licensor: tuple[str, ...] = (),
    confirmed: Confirmation | None = None,
    mentions: tuple[Mention, ...] = (),
    guessed: tuple[str, ...] = (),
) -> ComponentUse:
    path, sha = "runtimes/x/lib.dll", "ab" * 32
    return ComponentUse(
        name="x",
        version="1",
        expression=expression,
        license_ids=tuple(expression.split(" AND ")),
        purl="pkg:generic/x@1",
        files=(StagedFile(path, 10, sha),),
        texts=(StagedText("x", "licenses/x/LICENSE", "LICENSE", 10, "cd" * 32),),
        copyrights=copyrights,
        sources=(),
        evidence=(ShippedEvidence(path, sha, evidence, mentions),),
        licensor=licensor,
        guessed=guessed,
        confirmed=confirmed,
        rule="recipes/x.toml",
    )


def _row(use: ComponentUse, release: bool = False) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    policy = load_policy(REPO_POLICY).channel("nsis")
    audit = audit_channel(
        policy, [TargetLicensing("windows-x86_64", (use,))], (), release=release, today=TODAY
    )
    (row,) = audit.components
    return row.status, row.problems, audit.failures


MS_RESERVED = FileEvidence(
    format="pe",
    company="Microsoft Corporation",
    copyrights=("© Microsoft Corporation. All rights reserved.",),
)
NV = FileEvidence(
    format="pe", company="NVIDIA Corporation", copyrights=("Copyright (c) 2025 NVIDIA Corporation",)
)


def test_all_rights_reserved_under_a_permissive_claim_is_review() -> None:
    status, problems, _ = _row(_use(MS_RESERVED))
    assert status == "review" and "under the permissive claim MIT" in problems[0]
    # under terms a person reads anyway (the policy reviews a vendor's LicenseRef), no finding
    assert _row(_use(MS_RESERVED, expression="LicenseRef-Microsoft-DirectML"))[1] == (
        "licence LicenseRef-Microsoft-DirectML needs review on the nsis channel",
    )


def test_a_holder_the_claim_does_not_name_is_review() -> None:
    status, problems, _ = _row(_use(NV))
    assert status == "review" and "NVIDIA Corporation is not x's licensor" in problems[0]
    # named by the rule's licensor, by a LicenseRef of the holder, or by a text's copyright line
    assert _row(_use(NV, licensor=("NVIDIA Corporation",)))[0] == "ok"
    assert _row(_use(NV, copyrights=("Copyright (c) 2025 NVIDIA CORPORATION",)))[0] == "ok"
    named = _row(_use(NV, expression="LicenseRef-NVIDIA-TensorRT-RTX"))[1]
    assert not any("licensor" in p for p in named)


def test_embedded_code_no_text_names_is_listed_and_review() -> None:
    libpng = Embedded(
        "libpng",
        "libpng version 1.6.37",
        versions=("1.6.37",),
        licence="libpng-2.0",
        text="libpng-2.0",
        copyrights=("libpng version 1.6.37 Copyright (c) 2018-2019 Cosmin Truta",),
    )
    carries = FileEvidence(format="elf", embedded=(libpng,))
    status, problems, _ = _row(_use(carries))
    assert status == "review"
    (problem,) = problems
    # the file, the target, the component and its recipe, the code, and the fix
    assert problem.startswith(
        "windows-x86_64/runtimes/x/lib.dll carries libpng 1.6.37 (its bytes say 'libpng version "
        "1.6.37'; libpng-2.0), which no licence text of x names (libpng: in no notice of its "
        "[[targets.windows-x86_64.licenses]] rule in recipes/x.toml) — add a text that names "
        "libpng to the `texts` of x's [[targets.windows-x86_64.licenses]] rule in recipes/x.toml"
    )
    assert "the standard libpng-2.0 text with the copyright line" in problem
    assert "Cosmin Truta" in problem
    named = (Mention("libpng", ("licenses/x/LICENSE",)),)
    assert _row(_use(carries, mentions=named))[0] == "ok"  # its notice ships: listed, allowed


def test_a_confirmation_answers_the_evidence_and_a_release_checks_its_sign_off() -> None:
    yesterday = TODAY - timedelta(days=1)
    good = Confirmation("Ada Lovelace", "read the terms", ("ab" * 32,), yesterday)
    assert _row(_use(MS_RESERVED, confirmed=good), release=True)[::2] == ("ok", ())
    placeholder = Confirmation("TBD", "not yet", ("ab" * 32,), yesterday)
    status, _, failures = _row(_use(MS_RESERVED, confirmed=placeholder), release=True)
    assert status == "ok" and len(failures) == 1 and "not signed off" in failures[0]
    later = Confirmation("Ada Lovelace", "read", ("ab" * 32,), yesterday, date(2020, 1, 1))
    assert "expired on 2020-01-01" in _row(_use(MS_RESERVED, confirmed=later), release=True)[2][0]


def test_a_guess_warns_in_development_and_a_release_refuses_it() -> None:
    quiet = FileEvidence(format="pe")
    status, problems, failures = _row(_use(quiet, guessed=("expression",)))
    assert (status, problems, failures) == ("ok", (), ())
    (refused,) = _row(_use(quiet, guessed=("expression",)), release=True)[2]
    assert refused.startswith(
        "x: x on windows-x86_64: `expression` of its [[targets.windows-x86_64.licenses]] rule "
        "in recipes/x.toml is the scaffold's guess"
    )


@pytest.mark.slow
def test_a_build_warns_once_per_guess(fake: FakeProject, reporter: Reporter) -> None:
    fake.windows_licenses = _rule(
        "MIT",
        '[{ source = "windows", member = "onnxruntime/LICENSE" }]',
        'guessed = ["expression", "files"]',
    )
    fake.write()
    result = build(fake.project, fake.options(), reporter)
    summary = json.loads((result.version_dir / "build-summary.json").read_text())
    (windows,) = [t for t in summary["targets"] if t["target"] == "windows-x86_64"]
    guesses = [w for w in windows["warnings"] if "the scaffold's guess" in w]
    assert len(guesses) == 2  # one per guess, not one per channel auditing it
    assert "`expression`" in guesses[0] and "`files`" in guesses[1]
    with pytest.raises(AuditFailed):
        build(fake.project, fake.options(audit_only=True, release=True), reporter)


# --- Linux: what lintian calls embedded-library ------------------------------------------------


@pytest.mark.slow
def test_curl_and_mbedtls_in_a_plain_mit_library_are_listed_as_embedded(
    fake: FakeProject, reporter: Reporter
) -> None:
    members = linux_members()
    members["onnxruntime/capi/libdep.so.2"] = make_elf(
        soname="libdep.so.2",
        needed=("libm.so.6",),
        rodata=b"\0A libcurl function was given a bad argument\0SSL - The connection indicated an EOF\0",
    )
    members["onnxruntime/capi/libdep.so"] = members["onnxruntime/capi/libdep.so.2"]
    fake.linux = members
    fake.write()
    result = build(fake.project, fake.options(), reporter)
    deb = next(a for a in result.audits if a.channel == "deb")
    (row,) = [c for c in deb.components if c.name == "fake"]  # the Linux rule's component
    assert [(f.rsplit("/", 1)[-1], n) for f, n, _, _ in row.claims.embedded] == [
        ("libdep.so.2", "curl"),
        ("libdep.so.2", "mbedtls"),
    ]
    assert row.status == "review" and all(
        "which no licence text of fake names" in p for p in row.problems
    )
    # and the SBOM lists them inside the file that carries them
    sbom = json.loads((result.version_dir / "sbom.cdx.json").read_text())
    (component,) = [c for c in sbom["components"] if c["name"] == "fake"]
    (dep,) = [f for f in component["components"] if f["name"].endswith("/libdep.so.2")]
    inside = {
        c["name"]: {p["name"]: p["value"] for p in c["properties"]} for c in dep["components"]
    }
    assert set(inside) == {"curl", "mbedtls"}
    assert inside["curl"]["ortbundle:revealed-by"] == "A libcurl function was given a bad argument"
    assert inside["curl"]["ortbundle:embedded-in"] == "linux-x86_64/runtimes/fake/libdep.so.2"


def test_a_target_record_keeps_the_evidence_and_the_claim() -> None:
    """A release merged from runners audits what each runner's build read."""
    confirmed = Confirmation("Ada Lovelace", "read", ("ab" * 32,), TODAY, TODAY + timedelta(days=9))
    evidence = FileEvidence(
        format="pe",
        company="Microsoft Corporation",
        product="DirectML Redistributable Library",
        product_version="1.15.4",
        copyrights=("© Microsoft Corporation. All rights reserved.",),
        embedded=(
            Embedded("zlib", "deflate 1.3.1 Copyright 1995-2024 Jean-loup Gailly and Mark Adler"),
        ),
    )
    use = _use(
        evidence,
        licensor=("Microsoft",),
        confirmed=confirmed,
        guessed=("files",),
        mentions=(Mention("zlib", ("licenses/x/LICENSE",)),),
    )
    licensing = TargetLicensing("windows-x86_64", (use,))
    assert licensing_from_json(licensing_to_json(licensing), where="x.json") == licensing
