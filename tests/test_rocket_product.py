"""darkroom-rk3588 end to end, with the ort-rocket stand-in built from tests/data/rocket/ by
aarch64-linux-gnu-gcc: its sources pinned → the audit (a GPL plugin in a proprietary
product's add-on package: an aggregate; in a main package: refused) → sources/ with the written
offer → runtimes.json carrying the NPU rung's device and session options; `--release` refuses a
plugin whose source pin is gone, naming it."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
from datetime import date, timedelta
from pathlib import Path

import pytest

from ortbundle._core.errors import IntegrityError
from ortbundle._core.progress import plain_reporter
from ortbundle.evidence.names import MANIFEST_NAME, SBOM_NAME
from ortbundle.licensing.audit import AuditFailed
from ortbundle.pipeline.build import BuildOptions, Project, build
from ortbundle.pipeline.result import BuildResult
from ortbundle.tools.build_source import build_source
from tests.helpers.makepkg import Makepkg
from tests.helpers.rocket import RECIPE, binary_archive, repin, source_archives
from tests.helpers.synthetic_products import synthesize
from tests.test_channel_arch import assert_ok, makepkg  # noqa: F401 (the fixture)
from tests.test_channel_deb_rpm import lintian, need

pytestmark = pytest.mark.tools
PRODUCT = "darkroom-rk3588"
SHIPPED = ("sources/ort-rocket-0.1.0-source.tar.gz", "sources/rocket-userspace-0.1.0-source.tar.gz")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("rk3588")
    synthesize(root / "project", root / "cache")
    standin = root / "project" / "third_party" / "ort-rocket"
    try:
        binary_archive(standin)
    except FileNotFoundError as missing:
        pytest.skip(str(missing))
    source_archives(standin)
    repin(root / "project")
    return root


def built(root: Path, project: Path | None = None, **options: object) -> BuildResult:
    settings = BuildOptions(
        product=PRODUCT,
        offline=True,
        cache_dir=root / "cache",
        environ={"HOME": str(root / "home"), "SOURCE_DATE_EPOCH": "1700000000"},
        **options,  # type: ignore[arg-type]
    )
    where = project or root / "project"
    return build(Project.at(where, root / "dist" / where.name), settings, plain_reporter())


def test_the_plugin_ships_in_its_own_package_with_its_source(root: Path) -> None:
    result = built(root)
    for channel in ("arch", "deb", "rpm"):
        audit = next(a for a in result.audits if a.channel == channel)
        rows = {c.name: c for c in audit.components}
        assert rows["ort-rocket"].combination.startswith(
            "aggregate: ort-rocket (GPL-3.0-or-later) ships in darkroom-onnxruntime-ep-rocket"
        )
        assert audit.passed
    version = result.version_dir
    manifest = json.loads((version / MANIFEST_NAME).read_text())
    outputs = {o["path"]: o["sha256"] for o in manifest["outputs"]}
    sbom = json.loads((version / SBOM_NAME).read_text())
    for path in SHIPPED:
        digest = hashlib.sha256((version / path).read_bytes()).hexdigest()
        assert outputs[path] == digest
        assert digest in json.dumps(sbom)
    with tarfile.open(version / SHIPPED[0]) as tar:
        assert sorted(tar.getnames()) == [
            "ort-rocket-0.1.0/BUILD",
            "ort-rocket-0.1.0/ort-rocket-src.tar.gz",
            "ort-rocket-0.1.0/rocket-userspace-src.tar.gz",
        ]
    notice = (version / "linux-aarch64" / "NOTICE").read_text()
    assert f"ort-rocket 0.1.0 (GPL-3.0-or-later): {SHIPPED[0]}" in notice
    inputs = {i["source"]: i for i in manifest["inputs"] if i["component"] == "ep-rocket"}
    assert inputs["ep-linux-aarch64"]["build"]["sources"] == ["ort-rocket", "rocket-userspace"]


def test_the_index_carries_the_npu_device_and_session_options(root: Path) -> None:
    result = built(root)
    fragments = list((result.version_dir / "linux-aarch64").rglob("*.json"))
    plugins = [
        p
        for f in fragments
        for r in (json.loads(f.read_text()).get("runtimes") or [])
        if isinstance(r, dict)
        for p in r.get("plugin_eps", [])
    ]
    (rocket,) = plugins
    assert rocket["device"] == {
        "kind": "accel",
        "driver": "rocket",
        "compatible": ["rockchip,rk3588"],
    }
    assert rocket["session_options"] == {
        "graph_optimization_level": "ORT_DISABLE_ALL",
        "config": {"session.intra_op.allow_spinning": "0"},
    }


def variant(root: Path, name: str, change: dict[str, tuple[str, str]]) -> Path:
    """A copy of the project with `change` (file -> (old, new)) applied."""
    copy = root / name
    if not copy.exists():
        shutil.copytree(root / "project", copy, symlinks=True)
    for file, (old, new) in change.items():
        text = (copy / file).read_text()
        assert old in text, (file, old)
        (copy / file).write_text(text.replace(old, new))
    return copy


def test_in_the_main_package_a_proprietary_product_is_refused_it(root: Path) -> None:
    main = variant(root, "main", {f"manifests/{PRODUCT}.toml": ('addon_of = "darkroom"\n', "")})
    with pytest.raises(AuditFailed) as caught:
        built(root, main, audit_only=True, release=True)
    failures = [f for a in caught.value.audits for f in a.failures]
    assert any(
        f.startswith(
            "ort-rocket: ort-rocket is GPL-3.0-or-later, and darkroom-rk3588's main "
            "package darkroom-onnxruntime-ep-rocket loads it into the "
            "LicenseRef-Proprietary application's process"
        )
        for f in failures
    )


def test_without_its_source_pin_a_release_refuses_it_naming_it(root: Path) -> None:
    unpinned = variant(
        root,
        "unpinned",
        {RECIPE: ("[sources.ep-linux-aarch64.build]", "[sources.ep-linux-aarch64.was-built]")},
    )
    text = (unpinned / RECIPE).read_text()
    (unpinned / RECIPE).write_text(
        # the build table, its comments and its outputs: up to the next source
        re.sub(
            r"\[sources\.ep-linux-aarch64\.was-built\]\n.*?(?=\[sources\.ort-rocket\])",
            "",
            text,
            flags=re.S,
        )
    )
    with pytest.raises(AuditFailed) as caught:
        built(root, unpinned, audit_only=True, release=True)
    failures = [f for a in caught.value.audits for f in a.failures]
    assert any(
        f.startswith(
            "ort-rocket: ort-rocket is GPL-3.0-or-later, which requires its "
            "corresponding source with the binary, and no source is pinned for it"
        )
        for f in failures
    )


def test_a_release_passes_with_the_review_signed_off(root: Path) -> None:
    plugin = built(root).version_dir / "linux-aarch64" / "plugins" / "ep-rocket"
    files = [p for p in sorted(plugin.iterdir()) if not p.is_symlink()]
    digests = ", ".join(f'"{hashlib.sha256(f.read_bytes()).hexdigest()}"' for f in files)
    today = date.today()
    waiver = (
        '\n[[waivers]]\nfile = "plugins/ep-rocket/*"\nlicense = "GPL-3.0-or-later"\n'
        'reason = "ort-rocket and rocket-userspace: GPL-3.0-or-later, shipped with source"\n'
        f'reviewer = "A. Auditor"\nsha256 = [{digests}]\nreviewed = {today.isoformat()}\n'
        f"expires = {(today + timedelta(days=90)).isoformat()}\n"
    )
    signed = variant(root, "signed", {})
    manifest = signed / "manifests" / f"{PRODUCT}.toml"
    manifest.write_text(manifest.read_text() + waiver)
    try:
        result = built(root, signed, audit_only=True, release=True)
    except AuditFailed as failed:
        raise AssertionError([f for a in failed.audits for f in a.failures]) from None
    assert all(a.passed for a in result.audits)


# --- the EP's own package: the udev rule, the system requirement, and the packagers' checks ---

RULE = "usr/lib/udev/rules.d/60-darkroom-onnxruntime-ep-rocket-rocket.rules"
REQUIREMENT = "Linux with the rocket accel driver, /dev/accel/accel*"


@pytest.fixture(scope="module")
def packaged(root: Path) -> BuildResult:
    if shutil.which("nfpm") is None:
        pytest.skip("nfpm is not installed")
    return built(root, variant(root, "packaged", {}))


def package_file(result: BuildResult, channel: str, suffix: str) -> Path:
    """A channel's file where it was published."""
    directory = result.version_dir / "packaging" / channel / "linux-aarch64"
    return next(f for f in sorted(directory.iterdir()) if f.name.endswith(suffix))


def assert_beside_the_main_package(root: Path) -> None:
    """The add-on's runtimes and index fragment land in darkroom's own directory, where its
    loader reads runtimes.d/; nothing in a directory of the add-on's name, which no loader reads."""
    main = root / "usr/lib/darkroom-onnxruntime"
    assert (main / "runtimes.d/darkroom-rk3588.json").is_file()
    assert any((main / "plugins").rglob("libonnxruntime_rocket.so*"))
    assert not (root / "usr/lib/darkroom-onnxruntime-ep-rocket").exists()
    assert not (main / "runtimes.json").exists()  # the main package's, not the add-on's


def test_the_deb_carries_the_rule_lintian_accepts_it(packaged: BuildResult, tmp_path: Path) -> None:
    need("lintian", "dpkg-deb", packages="lintian dpkg")
    deb = package_file(packaged, "deb", ".deb")
    result = lintian(deb)
    # the core here is tests/helpers' synthetic ELF (no stack section, no RELRO), not the
    # wheel's: lintian's findings on it are the fixture's; everything else must pass
    findings = [
        line
        for line in result.stdout.splitlines()
        if re.match(r"[EW]: ", line) and "runtimes/stock-rk3588/" not in line
    ]
    assert findings == [], result.stdout
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path)], check=True)
    assert_beside_the_main_package(tmp_path)
    rule = (tmp_path / RULE).read_text()
    assert 'SUBSYSTEM=="accel", KERNEL=="accel*", DRIVERS=="rocket", GROUP="render"' in rule
    info = subprocess.run(
        ["dpkg-deb", "-f", str(deb), "Description"], capture_output=True, text=True, check=True
    )
    assert REQUIREMENT in " ".join(info.stdout.split())


def test_the_rpm_carries_the_rule_rpmlint_finds_no_error(
    packaged: BuildResult, tmp_path: Path
) -> None:
    need("rpm", "rpmlint", packages="rpm rpmlint")
    rpm = package_file(packaged, "rpm", ".rpm")
    (rpmlintrc,) = rpm.parent.glob("*.rpmlintrc")
    result = subprocess.run(
        ["rpmlint", "-r", str(rpmlintrc), str(rpm)], capture_output=True, text=True, check=False
    )
    assert " 0 errors," in result.stdout, result.stdout + result.stderr
    if os.geteuid() != 0:
        pytest.skip("rpm --root chroots, which needs root")
    scratch = tmp_path / "root"
    subprocess.run(["rpm", "--root", str(scratch), "--initdb"], check=True)
    install = ["rpm", "--root", str(scratch), "-i", "--nodeps", "--ignorearch", str(rpm)]
    subprocess.run(install, check=True, capture_output=True)
    assert (scratch / RULE).is_file()
    assert_beside_the_main_package(scratch)


def test_makepkg_builds_the_arch_package_with_the_rule(
    packaged: BuildResult,
    makepkg: Makepkg,  # noqa: F811 (tests/test_channel_arch.py's fixture, imported)
) -> None:
    pkgbuild = package_file(packaged, "arch", "PKGBUILD")
    assert REQUIREMENT in pkgbuild.read_text()
    startdir = makepkg.copy(pkgbuild.parent, "rk3588")
    assert_ok(makepkg.run(startdir, "-f", "--nodeps", carch="aarch64"))
    (package,) = (makepkg.root / "pkgdest").glob("darkroom-onnxruntime-ep-rocket-*.pkg.tar.*")
    with tarfile.open(package) as tar:
        member = tar.getmember(RULE)
        assert (member.mode & 0o777, member.uid) == (0o644, 0)


def test_every_output_states_the_system_requirement(packaged: BuildResult) -> None:
    version = packaged.version_dir
    assert REQUIREMENT in (version / "linux-aarch64" / "NOTICE").read_text()
    fragment = next((version / "linux-aarch64").rglob("runtimes.d/*.json"))
    (plugin,) = json.loads(fragment.read_text())["runtimes"][0]["plugin_eps"]
    assert plugin["requires_system"] == REQUIREMENT
    summary = json.loads((version / "build-summary.json").read_text())
    assert REQUIREMENT in json.dumps(summary)


def test_the_main_package_suggests_the_ep_package_and_never_depends_on_it(root: Path) -> None:
    need("dpkg-deb", packages="dpkg")
    settings = BuildOptions(
        product="darkroom",
        targets=("linux-aarch64", "linux-x86_64"),
        channels=("arch", "deb"),
        offline=True,
        cache_dir=root / "cache",
        environ={"HOME": str(root / "home"), "SOURCE_DATE_EPOCH": "1700000000"},
    )
    project = Project.at(root / "project", root / "dist" / "darkroom")
    main = build(project, settings, plain_reporter()).version_dir / "packaging"
    ep = "darkroom-onnxruntime-ep-rocket"
    (deb,) = (main / "deb" / "linux-aarch64").glob("*.deb")
    fields = subprocess.run(
        ["dpkg-deb", "-f", str(deb), "Suggests", "Depends", "Recommends"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"Suggests: {ep}" in fields
    assert fields.count(ep) == 1  # suggested, not depended on nor recommended
    pkgbuild = (main / "arch" / "linux-aarch64" / "PKGBUILD").read_text()
    depends = pkgbuild.split("depends=(", 1)[1].split(")", 1)[0]
    optdepends = pkgbuild.split("optdepends=(", 1)[1].split(")", 1)[0]
    assert ep not in depends and f"'{ep}: DarkRoom" in optdepends
    # the add-on is linux-aarch64 only: the x86_64 packages do not name it
    (deb64,) = (main / "deb").glob("*.deb")  # the first target's, at the top
    control = subprocess.run(
        ["dpkg-deb", "-f", str(deb64)], capture_output=True, text=True, check=True
    ).stdout
    assert ep not in control


def test_build_source_makes_the_pinned_archive_again_from_its_sources(root: Path) -> None:
    """`invoke build-source -c ep-rocket`, the CI job's command: the two pinned source archives
    unpacked, the recipe's command run, its outputs packed: the pinned bytes again."""
    archive = root / "project" / "third_party" / "ort-rocket" / "ort-rocket-linux-aarch64.zip"
    pinned = archive.read_bytes()
    done = build_source(
        Project.at(root / "project"), "ep-rocket", None, plain_reporter(), cache_dir=root / "cache"
    )
    assert (done.reproduced, done.path) == (True, archive)
    assert archive.read_bytes() == pinned
    assert done.sha256 == hashlib.sha256(pinned).hexdigest()


def test_a_build_that_makes_other_bytes_is_refused_and_the_pinned_file_kept(
    root: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    shutil.copytree(root / "project", project, symlinks=True)
    recipe = project / RECIPE
    archive = project / "third_party" / "ort-rocket" / "ort-rocket-linux-aarch64.zip"
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    recipe.write_text(recipe.read_text().replace("-O2 ", "-O1 ", 1))  # another build command
    with pytest.raises(IntegrityError) as refused:
        build_source(
            Project.at(project), "ep-rocket", None, plain_reporter(), cache_dir=root / "cache"
        )
    assert f"the recipe pins {digest}" in refused.value.message
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == digest  # left as it was
    assert archive.with_name(archive.name + ".rebuilt").is_file()  # what it made, to compare
