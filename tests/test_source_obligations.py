"""Copyleft obligations as data: a component under a licence the policy's [obligations] names
ships with its corresponding source under sources/ (a reproducible archive whose SHA-256 the
manifest and the SBOM carry), and a written offer in the NOTICE; a release refuses it when its
recipe pins no source, naming it, and no waiver stands in for the source."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from ortbundle._core.progress import Reporter
from ortbundle.evidence.names import MANIFEST_NAME, SBOM_NAME
from ortbundle.licensing.attribution import NOTICE_NAME
from ortbundle.licensing.audit import AuditFailed, load_policy
from ortbundle.licensing.obligations import obliging_ids
from ortbundle.pipeline.build import build
from ortbundle.pipeline.result import BuildResult
from tests.helpers.project import REPO_POLICY, FakeProject
from tests.helpers.source_archives import ARCHIVES, pin_sources

SHIPPED = "sources/fake-1.0.0-source.tar.gz"
LINUX = ("linux-x86_64",)


def gpl(fake: FakeProject, *, pinned: bool = True) -> FakeProject:
    """The fake runtime's Linux files under GPL-3.0-or-later (with the GPL's text)."""
    fake.linux["onnxruntime/LICENSE"] = (
        b"GNU GENERAL PUBLIC LICENSE\nVersion 3, 29 June 2007\n\nCopyright (C) Fake Corp\n"
    )
    fake.write()
    recipe = fake.root / "recipes" / "fake.toml"
    text = recipe.read_text()
    recipe.write_text(
        text.replace(
            'expression = "MIT"\nfiles = ["lib*"]',
            'expression = "GPL-3.0-or-later"\nfiles = ["lib*"]',
        )
    )
    if pinned:
        pin_sources(fake)
    return fake


def built(fake: FakeProject, reporter: Reporter) -> BuildResult:
    return build(fake.project, fake.options(targets=LINUX), reporter)


def test_the_corresponding_source_ships_as_a_reproducible_archive(
    fake: FakeProject, reporter: Reporter
) -> None:
    gpl(fake)
    result = built(fake, reporter)
    archive = result.version_dir / SHIPPED
    first = archive.read_bytes()
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        members = tar.getmembers()
        names = [m.name for m in members]
        assert names == sorted(names)
        assert names == [
            "fake-1.0.0/BUILD",
            "fake-1.0.0/ort-rocket.tar.gz",
            "fake-1.0.0/us.tar.gz",
        ]
        assert {(m.mtime, m.uid, m.gid, m.uname, m.mode) for m in members} == {
            (1700000000, 0, 0, "root", 0o644)
        }
        for sid, path in ARCHIVES.items():
            inside = tar.extractfile(f"fake-1.0.0/{Path(path).name}")
            assert inside is not None and inside.read() == (fake.root / path).read_bytes(), sid
        build_file = tar.extractfile("fake-1.0.0/BUILD")
        assert build_file is not None
        said = build_file.read().decode()
        assert "Toolchain: aarch64-linux-gnu-gcc 14.2" in said
        assert "Build: cmake -S ort-rocket" in said
    # another build, elsewhere and with a cold cache: the same bytes
    shutil.rmtree(fake.root / "cache")
    shutil.rmtree(fake.root / "dist")
    again = built(fake, reporter)
    assert (again.version_dir / SHIPPED).read_bytes() == first


def test_manifest_sbom_and_notice_name_the_shipped_source(
    fake: FakeProject, reporter: Reporter
) -> None:
    gpl(fake)
    result = built(fake, reporter)
    digest = hashlib.sha256((result.version_dir / SHIPPED).read_bytes()).hexdigest()
    manifest = json.loads((result.version_dir / MANIFEST_NAME).read_text())
    assert {"path": SHIPPED, "sha256": digest} in [
        {"path": o["path"], "sha256": o["sha256"]} for o in manifest["outputs"]
    ]
    sbom = json.loads((result.version_dir / SBOM_NAME).read_text())
    fake_row = next(c for c in sbom["components"] if c["name"] == "fake")
    shipped = [r for r in fake_row["externalReferences"] if r["url"] == SHIPPED]
    assert shipped == [
        {
            "type": "source-distribution",
            "url": SHIPPED,
            "comment": "the corresponding source, shipped beside the packages",
            "hashes": [{"alg": "SHA-256", "content": digest}],
        }
    ]
    notice = (result.version_dir / "linux-x86_64" / NOTICE_NAME).read_text()
    assert "Corresponding source (written offer)" in notice
    assert f"fake 1.0.0 (GPL-3.0-or-later): {SHIPPED}" in notice
    assert "For at least 3 years" in notice


def test_a_permissive_component_ships_no_source_and_no_offer(
    fake: FakeProject, reporter: Reporter
) -> None:
    fake.write()
    pin_sources(fake)  # built from source, but MIT asks for none
    result = built(fake, reporter)
    assert not (result.version_dir / "sources").exists()
    assert "written offer" not in (result.version_dir / "linux-x86_64" / NOTICE_NAME).read_text()


def test_without_pinned_source_the_audit_says_so_and_a_release_refuses(
    fake: FakeProject, reporter: Reporter
) -> None:
    gpl(fake, pinned=False)
    result = build(fake.project, fake.options(targets=LINUX, audit_only=True), reporter)
    arch = next(a for a in result.audits if a.channel == "arch")
    row = next(c for c in arch.components if c.name == "fake")
    said = next(p for p in row.problems if "corresponding source" in p)
    assert said.startswith("fake is GPL-3.0-or-later, which requires its corresponding source")
    assert "[sources.<id>.build]" in said
    with pytest.raises(AuditFailed) as caught:
        build(fake.project, fake.options(targets=LINUX, audit_only=True, release=True), reporter)
    failures = [f for a in caught.value.audits for f in a.failures]
    assert any(f.startswith("fake: fake is GPL-3.0-or-later") for f in failures)


def test_a_waiver_does_not_stand_in_for_the_source(fake: FakeProject, reporter: Reporter) -> None:
    fake.product_extra = (
        '\n[[waivers]]\nfile = "runtimes/fake/*"\nlicense = "GPL-3.0-or-later"\n'
        'reason = "reviewed"\nreviewer = "A Person"\n'
    )
    gpl(fake, pinned=False)
    result = build(fake.project, fake.options(targets=LINUX, audit_only=True), reporter)
    arch = next(a for a in result.audits if a.channel == "arch")
    row = next(c for c in arch.components if c.name == "fake")
    assert row.status == "review"
    # with the source pinned, the same waiver is what the review needed
    pin_sources(fake)
    result = build(fake.project, fake.options(targets=LINUX, audit_only=True), reporter)
    arch = next(a for a in result.audits if a.channel == "arch")
    row = next(c for c in arch.components if c.name == "fake")
    assert row.status == "waived"


@pytest.mark.parametrize(
    ("expression", "obliged"),
    [
        ("GPL-3.0-or-later", ("GPL-3.0-or-later",)),
        ("MIT AND LGPL-2.1-only", ("LGPL-2.1-only",)),
        ("Apache-2.0 OR GPL-2.0-or-later", ()),  # taken under Apache-2.0
        ("GPL-2.0-only OR AGPL-3.0-only", ("AGPL-3.0-only", "GPL-2.0-only")),
        ("MPL-2.0", ("MPL-2.0",)),  # file-level: the covered files' source
        ("GPL-2.0-only WITH Classpath-exception-2.0", ("GPL-2.0-only",)),
        ("MIT", ()),
    ],
)
def test_which_licences_oblige_is_the_policys_data(
    expression: str, obliged: tuple[str, ...]
) -> None:
    policy = load_policy(REPO_POLICY)
    assert obliging_ids(expression, (*policy.source, *policy.source_files)) == obliged
    assert obliging_ids(expression, ()) == ()
