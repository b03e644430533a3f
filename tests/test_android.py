"""The Android targets end to end, from synthetic AARs: rename with SONAME, 16 KB alignment,
Hexagon payload, the Android allow-list, and the apk module built from the stages."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ortbundle._core.locations import ENV_MAVEN_URL, ENV_NPM_REGISTRY
from ortbundle._core.progress import plain_reporter
from ortbundle.cli.build import run_build
from ortbundle.cli.common import CommandFailed
from ortbundle.fetch.cache import Cache
from ortbundle.pipeline.build import build
from ortbundle.stage.binaries import inspect
from ortbundle.stage.binaries.info import alignment_problem
from tests.helpers.android import (
    AAR_MEMBER,
    AndroidProject,
    qnn_members,
    sha256_of,
    stock_members,
)
from tests.helpers.bite import each
from tests.helpers.elf import make_elf
from tests.helpers.maven_server import MavenServer
from tests.helpers.npm_server import NpmServer
from tests.helpers.project import CORE_EXPORTS, CPU
from tests.helpers.tarballs import make_aar, make_tarball


@dataclass
class Registries:
    maven: MavenServer
    npm: NpmServer


@pytest.fixture
def registries(monkeypatch: pytest.MonkeyPatch) -> Iterator[Registries]:
    """A Maven repository and an npm registry on 127.0.0.1, configured as a user would."""
    with MavenServer().running() as maven, NpmServer().running() as npm:
        monkeypatch.setenv(ENV_MAVEN_URL, maven.url)
        monkeypatch.setenv(ENV_NPM_REGISTRY, npm.url)
        yield Registries(maven, npm)


@pytest.fixture
def android(tmp_path: Path, registries: Registries) -> AndroidProject:
    """Builds read the registries from the options' environment, as a user's shell gives it."""
    environ = {ENV_MAVEN_URL: registries.maven.url, ENV_NPM_REGISTRY: registries.npm.url}
    return AndroidProject(tmp_path / "project", environ_extra=environ)


def seeded(android: AndroidProject, registries: Registries | None = None) -> AndroidProject:
    """Write the project and publish its artifacts: the AARs on Maven, the tarball on npm."""
    android.write()
    if registries is not None:
        artifacts = android.artifacts
        registries.npm.add("fake-onnxruntime", "1.0.0", artifacts["stock.tgz"])
        registries.maven.add(
            "com.example.ort",
            "onnxruntime-android-qnn",
            "1.0.0",
            artifacts["onnxruntime-android-qnn-1.0.0.aar"],
        )
        registries.maven.add(
            "com.example.qti", "qnn-runtime", "2.0.0", artifacts["qnn-runtime-2.0.0.aar"]
        )
    return android


def test_the_stock_runtime_is_renamed_and_its_soname_follows(
    android: AndroidProject, registries: Registries
) -> None:
    seeded(android, registries)
    result = build(android.project, android.options(), plain_reporter())
    for target in each(result.targets, "targets"):
        directory = target.stage / "runtimes/generic"
        assert sorted(p.name for p in directory.iterdir()) == ["libonnxruntime_generic.so"]
        info = inspect(directory / "libonnxruntime_generic.so")
        assert info.soname == "libonnxruntime_generic.so"
        assert alignment_problem(info, 0x4000) is None
        index = json.loads((target.stage / "runtimes.json").read_text())
        assert index["runtimes"][0]["entry"] == "libonnxruntime_generic.so"
        (staged,) = target.runtimes
        assert {e.group for e in staged.closure.externals} == {"bionic"}
        assert "renamed from libonnxruntime.so" in staged.closure.kept[0].why


def test_a_library_that_needs_the_renamed_one_follows_it(
    android: AndroidProject, registries: Registries
) -> None:
    seeded(android, registries)
    text = (android.root / "recipes/generic.toml").read_text()
    text = text.replace('roots = ["libonnxruntime.so"]', 'roots = ["libonnxruntime*.so"]')
    text = text.replace('names = ["libonnxruntime4j_jni.so"]', 'names = ["nothing"]')
    (android.root / "recipes/generic.toml").write_text(text)
    result = build(android.project, android.options(), plain_reporter())
    for target in each(result.targets, "targets"):
        jni = inspect(target.stage / "runtimes/generic/libonnxruntime4j_jni.so")
        assert "libonnxruntime_generic.so" in jni.needed
        assert "libonnxruntime.so" not in jni.needed


def test_a_4k_aligned_library_stops_the_build_naming_it(
    android: AndroidProject, registries: Registries
) -> None:
    android.stock = stock_members(align=0x1000)
    seeded(android, registries)
    with pytest.raises(CommandFailed) as failed:
        run_build(android.options(), root=android.root)
    message = str(failed.value)
    assert failed.value.code == 7, message
    assert "libonnxruntime.so" in message and "16 KB" in message and "generic" in message
    assert not (android.root / "dist/phone/1.0").exists()


def test_a_misaligned_segment_is_refused(android: AndroidProject, registries: Registries) -> None:
    android.stock = stock_members()
    android.stock["jni/x86_64/libonnxruntime.so"] = make_elf(
        machine="EM_X86_64",
        soname="libonnxruntime.so",
        needed=("libc.so",),
        loads=[(0, 0, 0x4000), (0x4100, 0x8000, 0x4000)],
    )
    seeded(android, registries)
    with pytest.raises(CommandFailed) as failed:
        run_build(android.options(targets=("android-x86_64",)), root=android.root)
    assert failed.value.code == 7
    assert "not congruent" in str(failed.value)


def test_a_library_outside_the_android_allow_list_is_refused(
    android: AndroidProject, registries: Registries
) -> None:
    android.stock = stock_members()
    android.stock["jni/arm64-v8a/libonnxruntime.so"] = make_elf(
        machine="EM_AARCH64",
        soname="libonnxruntime.so",
        needed=("libc.so", "libstdc++.so.6"),
        align=0x4000,
    )
    seeded(android, registries)
    with pytest.raises(CommandFailed) as failed:
        run_build(android.options(targets=("android-arm64-v8a",)), root=android.root)
    assert failed.value.code == 8
    assert "libstdc++.so.6" in str(failed.value)


def test_qnn_ships_its_hexagon_skels_as_assets_exempt_from_16k(
    android: AndroidProject, registries: Registries
) -> None:
    android.with_qnn = True
    seeded(android, registries)
    result = build(android.project, android.options(), plain_reporter())
    arm = next(t for t in result.targets if t.target == "android-arm64-v8a")
    qnn = arm.stage / "runtimes/qnn"
    assert sorted(p.name for p in qnn.iterdir() if p.is_file()) == [
        "libQnnHtp.so",
        "libQnnHtpV73Stub.so",
        "libQnnHtpV75Stub.so",
        "libQnnSystem.so",
        "libonnxruntime.so",
    ]
    skels = sorted(p.name for p in (qnn / "assets").iterdir())
    assert skels == ["libQnnHtpV73Skel.so", "libQnnHtpV75Skel.so"]
    skel = inspect(qnn / "assets/libQnnHtpV73Skel.so")
    assert (skel.machine, skel.bits) == ("EM_QDSP6", 32)
    assert alignment_problem(skel, 0x4000) is not None  # 4 KB: fine, the DSP loads it
    assert arm.licensing.owner("runtimes/qnn/assets/libQnnHtpV73Skel.so").name == "qnn-runtime"
    assert arm.licensing.owner("runtimes/generic/libonnxruntime_generic.so").name == (
        "onnxruntime-android"
    )
    index = json.loads((arm.stage / "runtimes.json").read_text())
    assert [r["name"] for r in index["runtimes"]] == ["qnn", "generic"]
    assert index["runtimes"][0]["fits"]["soc_families"] == ["qualcomm"]
    x86 = next(t for t in result.targets if t.target == "android-x86_64")
    assert not (x86.stage / "runtimes/qnn").exists()
    apk = next(a for a in result.audits if a.channel == "apk")
    qualcomm = next(c for c in apk.components if c.name == "qnn-runtime")
    assert qualcomm.status == "review"  # a vendor's terms: a person reads them before a release


def test_a_payload_of_the_wrong_machine_is_refused(
    android: AndroidProject, registries: Registries
) -> None:
    android.with_qnn = True
    android.qnn = qnn_members(skel_machine="EM_AARCH64")
    seeded(android, registries)
    with pytest.raises(CommandFailed) as failed:
        run_build(android.options(targets=("android-arm64-v8a",)), root=android.root)
    message = str(failed.value)
    assert failed.value.code == 7
    assert "libQnnHtpV73Skel.so" in message and "EM_QDSP6" in message


def test_every_artifact_comes_through_the_configured_registries(
    android: AndroidProject, registries: Registries
) -> None:
    android.with_qnn = True
    seeded(android, registries)
    result = build(android.project, android.options(), plain_reporter())
    assert registries.maven.requested("qnn-runtime-2.0.0.aar.sha1") == 1
    assert registries.npm.requests, "the tarball came from the npm registry"
    urls = {a.url for a in result.artifacts.values()}
    assert any(u.startswith(registries.maven.url) for u in urls)
    assert any(u.startswith(registries.npm.url) and u.endswith("#" + AAR_MEMBER) for u in urls)
    manifest = json.loads((result.version_dir / "manifest.json").read_text())
    kinds = {i["kind"] for i in manifest["inputs"]}
    assert kinds == {"maven", "npm"}
    npm_input = next(i for i in manifest["inputs"] if i["kind"] == "npm")
    assert npm_input["nested"][0]["member"] == AAR_MEMBER


def test_a_wrong_sha1_sidecar_stops_the_build_and_caches_nothing(
    android: AndroidProject, registries: Registries
) -> None:
    android.with_qnn = True
    seeded(android, registries)
    registries.maven.faults.wrong_sha1 = True
    with pytest.raises(CommandFailed) as failed:
        run_build(android.options(targets=("android-arm64-v8a",)), root=android.root)
    assert failed.value.code == 4, str(failed.value)
    assert ".sha1" in str(failed.value) or "sha1" in str(failed.value)
    cache = Cache(android.root / "cache")
    for name in ("onnxruntime-android-qnn-1.0.0.aar", "qnn-runtime-2.0.0.aar"):
        assert cache.get(sha256_of(android.artifacts[name])) is None
    assert not (android.root / "dist/phone/1.0").exists()


def test_a_new_nested_pin_is_never_served_from_the_runtime_memo(
    android: AndroidProject, registries: Registries
) -> None:
    """Two AARs in one tarball: pointing the recipe at the other one must restage, even though
    the tarball (the fetched file) is the same."""
    other = stock_members()
    other["jni/x86_64/libonnxruntime.so"] = make_elf(
        machine="EM_X86_64",
        soname="libonnxruntime.so",
        needed=("libc.so",),
        align=0x4000,
        exports=CORE_EXPORTS,
        rodata=CPU,
    )
    first, second = make_aar(stock_members()), make_aar(other)
    tarball = make_tarball({AAR_MEMBER: first, "package/other.aar": second})
    android.write()
    recipe = android.root / "recipes/generic.toml"
    text = recipe.read_text().replace(sha256_of(android.artifacts["stock.tgz"]), sha256_of(tarball))
    recipe.write_text(text)
    registries.npm.add("fake-onnxruntime", "1.0.0", tarball)
    options = android.options(targets=("android-x86_64",))
    build(android.project, options, plain_reporter())
    text = text.replace(AAR_MEMBER, "package/other.aar").replace(
        sha256_of(first), sha256_of(second)
    )
    recipe.write_text(text)
    result = build(android.project, options, plain_reporter())
    staged = result.targets[0].stage / "runtimes/generic/libonnxruntime_generic.so"
    assert inspect(staged).needed == ("libc.so",)  # the other AAR's library, not the memo's


def test_a_renamed_library_leaves_no_link_by_its_old_soname(
    android: AndroidProject, registries: Registries
) -> None:
    android.stock = stock_members()
    for abi, machine in (("arm64-v8a", "EM_AARCH64"), ("x86_64", "EM_X86_64")):
        android.stock[f"jni/{abi}/libonnxruntime.so"] = make_elf(
            machine=machine,
            soname="libort_core.so",
            needed=("libc.so",),
            align=0x4000,
            exports=CORE_EXPORTS,
            rodata=CPU,
        )
    seeded(android, registries)
    result = build(android.project, android.options(), plain_reporter())
    for target in each(result.targets, "targets"):
        directory = target.stage / "runtimes/generic"
        assert sorted(p.name for p in directory.iterdir()) == ["libonnxruntime_generic.so"]
        assert inspect(directory / "libonnxruntime_generic.so").soname == (
            "libonnxruntime_generic.so"
        )


def test_a_rename_chain_is_refused_before_anything_is_overwritten(
    android: AndroidProject, registries: Registries
) -> None:
    seeded(android, registries)
    recipe = android.root / "recipes/generic.toml"
    text = recipe.read_text()
    text = text.replace('roots = ["libonnxruntime.so"]', 'roots = ["libonnxruntime*.so"]')
    text = text.replace('names = ["libonnxruntime4j_jni.so"]', 'names = ["nothing"]')
    text = text.replace(
        'to = "libonnxruntime_generic.so"',
        'to = "libonnxruntime4j_jni.so"\n\n[[targets.android-x86_64.rename]]\n'
        'from = "libonnxruntime4j_jni.so"\nto = "libjni.so"',
        1,
    )
    recipe.write_text(text)
    with pytest.raises(CommandFailed) as failed:
        run_build(android.options(targets=("android-arm64-v8a",)), root=android.root)
    assert failed.value.code == 2
    assert "two libraries the name libonnxruntime4j_jni.so" in str(failed.value)
