"""darkroom-rk3588 end to end, with the ort-rocket stand-in built from tests/data/rocket/ by
aarch64-linux-gnu-gcc: its sources pinned → the audit (a GPL plugin in a proprietary
product's add-on package: an aggregate; in a main package: refused) → sources/ with the written
offer → runtimes.json carrying the NPU rung's device and session options; `--release` refuses a
plugin whose source pin is gone, naming it."""

from __future__ import annotations

import hashlib
import json
import re
import tarfile
from datetime import date, timedelta
from pathlib import Path

import pytest

from ortbundle._core.progress import plain_reporter
from ortbundle.evidence.names import MANIFEST_NAME, SBOM_NAME
from ortbundle.licensing.audit import AuditFailed
from ortbundle.pipeline.build import BuildOptions, Project, build
from ortbundle.pipeline.result import BuildResult
from tests.helpers.rocket import binary_archive, source_archives
from tests.helpers.synthetic_products import synthesize

pytestmark = pytest.mark.tools
PRODUCT = "darkroom-rk3588"
RECIPE = "recipes/ep-rocket.toml"
SHIPPED = ("sources/ort-rocket-0.1.0-source.tar.gz", "sources/rocket-userspace-0.1.0-source.tar.gz")


def repin(project: Path) -> None:
    """Each `path` source of the rocket recipe pinned to the file the stand-in wrote."""
    recipe = project / RECIPE
    text = recipe.read_text()

    def pin(match: re.Match[str]) -> str:
        digest = hashlib.sha256((project / match[1]).read_bytes()).hexdigest()
        return f'path = "{match[1]}"\nsha256 = "{digest}"'

    recipe.write_text(re.sub(r'path = "([^"]+)"\nsha256 = "[0-9a-f]{64}"', pin, text))


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
    import shutil

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
        re.sub(r"\[sources\.ep-linux-aarch64\.was-built\]\n(?:[a-z_]+ = .*\n)+", "", text)
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
