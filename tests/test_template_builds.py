"""A built project whose templates/ replaces the installer's welcome text and the PKGBUILD's
install= script: makensis and makepkg accept the result, an edit rebuilds exactly the channel
that renders it, and an undefined variable stops the build (exit 2) naming it."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from ortbundle._core.errors import ConfigError
from ortbundle._core.overrides import BUILTIN_DIR
from ortbundle._core.progress import Reporter
from ortbundle.cli.build import run_build
from ortbundle.cli.common import CommandFailed
from ortbundle.config.project import Project
from ortbundle.evidence.names import MANIFEST_NAME, PROVENANCE_NAME
from ortbundle.evidence.verify import verify_tree
from ortbundle.pipeline.build import build
from ortbundle.pipeline.release import release
from ortbundle.pipeline.summary import summary_lines
from tests.helpers.makepkg import Makepkg
from tests.helpers.project import FakeProject
from tests.test_channel_arch import assert_ok
from tests.test_channel_arch import makepkg as makepkg  # the fixture
from tests.test_channel_nsis import requires_makensis
from tests.test_release import runner_build, vouched
from tests.test_template_overrides import WELCOME, _nsis_override

INSTALL = "post_install() {\n  echo 'fakeproduct runtimes installed'\n}\n"


def _pkgbuild_override() -> str:
    text = (BUILTIN_DIR / "PKGBUILD.j2").read_text("utf-8")
    return text.replace("options=(", "install=fakeproduct.install\noptions=(", 1)


@pytest.fixture
def templated(fake: FakeProject) -> FakeProject:
    fake.product_extra = 'channels = ["arch", "nsis"]\n'
    fake.write()
    templates = fake.root / "templates"
    templates.mkdir()
    (templates / "installer.nsi.j2").write_text(_nsis_override(), "utf-8")
    (templates / "PKGBUILD.j2").write_text(_pkgbuild_override(), "utf-8")
    (templates / "fakeproduct.install").write_text(INSTALL, "utf-8")
    return fake


def _memo_entries(fake: FakeProject, kind: str) -> set[str]:
    top = fake.root / "cache" / "outputs" / kind
    return {p.name for p in top.rglob("*") if p.is_file()} if top.is_dir() else set()


@pytest.mark.tools
@requires_makensis
def test_overridden_templates_build_and_the_validators_accept_them(
    templated: FakeProject, reporter: Reporter, makepkg: Makepkg
) -> None:
    result = build(templated.project, templated.options(), reporter)
    nsis = result.version_dir / "packaging" / "nsis"
    script = (nsis / "installer.nsi").read_text("utf-8-sig")
    assert 'DirText "Welcome! This installs the runtimes for fakeproduct 1.2.3. ' in script
    assert WELCOME.split('"')[1] in script
    # makensis compiled it during the build, warnings as errors (-WX)
    assert (nsis / "fakeproduct-1.2.3-setup.exe").stat().st_size > 0
    arch = result.version_dir / "packaging" / "arch"
    assert "\ninstall=fakeproduct.install\n" in (arch / "PKGBUILD").read_text()
    assert (arch / "fakeproduct.install").read_text() == INSTALL
    startdir = makepkg.copy(arch, "pkg")
    printed = makepkg.run(startdir, "--printsrcinfo")
    assert_ok(printed)
    assert printed.stdout == (arch / ".SRCINFO").read_text("utf-8")
    built = makepkg.run(startdir, "--nodeps", "--noconfirm")
    assert_ok(built)
    packages = list((makepkg.root / "pkgdest").glob("*.pkg.tar.gz"))
    assert len(packages) == 1
    import tarfile

    with tarfile.open(packages[0]) as package:
        assert ".INSTALL" in package.getnames()
    summary = json.loads((result.version_dir / "build-summary.json").read_text())
    assert [t["file"] for t in summary["plan"]["templates"]] == [
        "templates/PKGBUILD.j2",
        "templates/installer.nsi.j2",
    ]
    said = summary_lines(summary)  # the build says which replacements it used
    assert "template templates/PKGBUILD.j2 replaced the built-in PKGBUILD.j2" in said
    assert "template templates/installer.nsi.j2 replaced the built-in installer.nsi.j2" in said


def test_editing_one_override_rebuilds_exactly_its_channel(
    templated: FakeProject, reporter: Reporter
) -> None:
    first = build(templated.project, templated.options(), reporter)
    pkgbuild = (first.version_dir / "packaging/arch/PKGBUILD").read_bytes()
    installers = _memo_entries(templated, "nsis-installer")
    rendered = _memo_entries(templated, "rendered")
    assert build(templated.project, templated.options(), reporter).up_to_date is not None
    override = templated.root / "templates" / "installer.nsi.j2"
    override.write_text(override.read_text().replace("Welcome!", "Hello!"), "utf-8")
    again = build(templated.project, templated.options(), reporter)
    assert again.up_to_date is None  # the override is part of the build key
    script = (again.version_dir / "packaging/nsis/installer.nsi").read_text("utf-8-sig")
    assert "Hello! This installs" in script
    assert (again.version_dir / "packaging/arch/PKGBUILD").read_bytes() == pkgbuild
    # one new rendering (the script), kept with its digest; nothing else rendered anew
    assert len(_memo_entries(templated, "rendered") - rendered) == 2
    if installers:  # makensis on PATH: the installer was compiled again, and only it
        assert len(_memo_entries(templated, "nsis-installer") - installers) >= 1
    # the install script beside PKGBUILD.j2 is read by the build: it is in the key too
    (templated.root / "templates" / "fakeproduct.install").write_text(INSTALL + "# v2\n")
    third = build(templated.project, templated.options(), reporter)
    assert third.up_to_date is None
    assert (third.version_dir / "packaging/arch/fakeproduct.install").read_text().endswith("v2\n")


def test_an_undefined_variable_in_an_override_exits_2_naming_it(
    templated: FakeProject, capsys: pytest.CaptureFixture[str]
) -> None:
    override = templated.root / "templates" / "PKGBUILD.j2"
    override.write_text(override.read_text() + "# {{ pkg_name }}\n", "utf-8")
    line = len(override.read_text().splitlines())
    with pytest.raises(CommandFailed) as caught:
        run_build(templated.options(), root=templated.root)
    assert caught.value.code == 2
    said = str(caught.value) + capsys.readouterr().err
    assert f"templates/PKGBUILD.j2:{line} uses the variable 'pkg_name'" in said
    assert "pkgname" in said  # the variables it could have used
    assert not (templated.root / "dist").exists()  # nothing published


def test_the_signed_evidence_names_the_templates_and_a_release_holds_runners_to_them(
    templated: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    """The manifest and the provenance record the template files a build read; a release
    refuses a runner whose packages came from other templates."""
    version_dir = build(templated.project, templated.options(), reporter).version_dir
    manifest = json.loads((version_dir / MANIFEST_NAME).read_text())
    recorded = {t["path"] for t in manifest["templates"]}
    assert recorded == {
        "templates/PKGBUILD.j2",
        "templates/installer.nsi.j2",
        "templates/fakeproduct.install",
    }
    # the manifest's shape admits them, and its signature covers them
    assert verify_tree(version_dir, public_key=templated.root / "keys" / "fakeproduct.pub").ok
    envelope = json.loads((version_dir / PROVENANCE_NAME).read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    read = statement["predicate"]["buildDefinition"]["resolvedDependencies"]
    assert recorded <= {d["name"] for d in read}
    linux = runner_build(templated, reporter, tmp_path / "a", "linux-x86_64")
    windows = runner_build(templated, reporter, tmp_path / "b", "windows-x86_64")
    override = templated.root / "templates" / "PKGBUILD.j2"
    override.write_text(override.read_text() + "# edited after the runners built\n")
    with pytest.raises(ConfigError) as caught:
        release(
            Project.at(templated.root, tmp_path / "release"),
            [linux, windows],
            templated.options(),
            vouched(linux, windows),
        )
    assert "different inputs" in str(caught.value)
    assert "templates templates/PKGBUILD.j2" in str(caught.value)
    assert not (tmp_path / "release" / "fakeproduct").exists()


def test_the_no_op_check_of_invoke_build_sees_an_edited_override(
    templated: FakeProject, capsys: pytest.CaptureFixture[str]
) -> None:
    """`invoke build` says "up to date" from a quick record of its inputs' stat, without
    planning: templates/ is among them."""
    run_build(templated.options(), root=templated.root)
    run_build(templated.options(), root=templated.root)
    assert "up to date" in capsys.readouterr().out
    override = templated.root / "templates" / "installer.nsi.j2"
    override.write_text(override.read_text().replace("Welcome!", "Hello!"), "utf-8")
    run_build(templated.options(), root=templated.root)
    assert "up to date" not in capsys.readouterr().out
    script = templated.root / "dist/fakeproduct/1.2.3/packaging/nsis/installer.nsi"
    assert "Hello! This installs" in script.read_text("utf-8-sig")
