"""The APK channel: one Android library module for every ABI, built from fake stages.

Each stage is laid out the way the build lays one out — libraries from tests/helpers/elf.py, the
index and the desktop loader from the real writer (index_json.write_index) — and both Android
targets are packaged into one directory, arm64-v8a first, as packaging.generate_all does.
The Java loader is compiled with javac against stubs of the Android classes it uses, then run on
the JVM against functional stubs: the module's assets as the APK's, real (gcc-built) libraries
standing in for the runtimes, and a fake device's Build fields.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import replace
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from ortbundle._core.errors import ConfigError, IntegrityError, PackagingError
from ortbundle._core.memo import Memo, memo_key
from ortbundle.channels import ChannelOutput, PackageInput, ShippedRuntime
from ortbundle.channels.apk import ApkChannel, override_property
from ortbundle.config.products import Product
from ortbundle.config.recipes import Recipe
from ortbundle.licensing.attribution import ShippedFile
from ortbundle.stage.closure import Closure
from ortbundle.stage.index_json import INDEX_NAME, LOADER_NAME, write_index
from ortbundle.stage.staging import StagedFile, StagedRuntime
from tests.helpers.bite import each
from tests.helpers.elf import make_elf
from tests.helpers.packages import EPOCH, SETTINGS, make_package_input

ARM, X86 = "android-arm64-v8a", "android-x86_64"
ABI = {ARM: "arm64-v8a", X86: "x86_64"}
MACHINE = {ARM: "EM_AARCH64", X86: "EM_X86_64"}
NAMESPACE = "org.example.demo.runtime"
APK_SETTINGS = replace(SETTINGS, android_namespace=NAMESPACE)
MAIN = "runtime-loader/src/main"
ASSETS = f"{MAIN}/assets/ortbundle"
JAVA = f"{MAIN}/java/org/example/demo/runtime/RuntimeLoader.java"
PAGE = 0x4000
QNN, GENERIC = "android-qnn", "android-generic"
LABELS = {QNN: "ONNX Runtime (Qualcomm QNN)", GENERIC: "ONNX Runtime (generic)"}
PROVIDERS = {
    QNN: ("QNNExecutionProvider", "CPUExecutionProvider"),
    GENERIC: ("WebGpuExecutionProvider", "CPUExecutionProvider"),
}
ENTRY = {QNN: "libonnxruntime.so", GENERIC: "libonnxruntime_generic.so"}
SKEL = make_elf(machine="EM_QDSP6", soname="libQnnHtpV73Skel.so", align=0x1000, payload=b"dsp" * 99)
LICENSE = b"MIT License\n\nCopyright (c) Microsoft Corporation\n"
QNN_LICENSE = b"%PDF-1.4 Qualcomm AI Engine Direct SDK licence\n"
MODEL = b"\x08\x07fake onnx model bytes" * 10
MODELS_JSON = b'{"models": []}\n'


def _lib(target: str, soname: str, payload: bytes = b"", align: int = PAGE) -> bytes:
    return make_elf(machine=MACHINE[target], soname=soname, align=align, payload=payload)


def runtime_files(target: str) -> dict[str, dict[str, bytes]]:
    """Each runtime's files, relative to its directory, in the index's search order."""
    cxx = _lib(target, "libc++_shared.so", b"c++ runtime" * 20)  # in both: identical bytes
    generic = {
        "libonnxruntime_generic.so": _lib(target, ENTRY[GENERIC], b"generic" * 300),
        "libc++_shared.so": cxx,
    }
    if target == X86:
        return {GENERIC: generic}
    qnn = {
        "libonnxruntime.so": _lib(target, ENTRY[QNN], b"qnn build" * 200),
        "libQnnHtp.so": _lib(target, "libQnnHtp.so", b"htp" * 500),
        "libQnnHtpV73Stub.so": _lib(target, "libQnnHtpV73Stub.so", b"stub"),
        "libc++_shared.so": cxx,
        "assets/libQnnHtpV73Skel.so": SKEL,  # Hexagon DSP code, 4 KB aligned: exempt
    }
    return {QNN: qnn, GENERIC: generic}


def make_stage(
    root: Path,
    target: str,
    runtimes: Mapping[str, Mapping[str, bytes]] | None = None,
    extra: Mapping[str, bytes] | None = None,
    links: Mapping[str, str] | None = None,
) -> PackageInput:
    """Write a target stage under root/<target> and describe it as the build would."""
    stage = root / target
    runtimes = runtime_files(target) if runtimes is None else runtimes
    pairs = []
    for name, files in runtimes.items():
        staged = []
        for relative, data in files.items():
            path = stage / "runtimes" / name / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.chmod(0o644)
            digest = hashlib.sha256(data).hexdigest()
            staged.append(StagedFile(f"runtimes/{name}/{relative}", len(data), digest))
        recipe = Recipe(
            name=name,
            kind="runtime",
            version="1.29.0",
            description=f"{name} for tests",
            label=LABELS.get(name, name),
            providers=PROVIDERS.get(name, ("CPUExecutionProvider",)),
            gpu_vendors=(),
            sources={},
            targets={},
            path=Path(f"recipes/{name}.toml"),
            digest="0" * 64,
            soc_families=("qualcomm",) if name == QNN else (),
        )
        closure = Closure((), (), (), (), ENTRY.get(name, next(iter(files))), ())
        staged_runtime = StagedRuntime(
            name, target, f"runtimes/{name}", closure, tuple(sorted(staged, key=_path)), 0
        )
        pairs.append((recipe, staged_runtime))
    write_index(stage, _product(), target, pairs)
    notice = f"demo 1.0.0 for {target}\n\nonnxruntime  MIT  licenses/onnxruntime/LICENSE\n"
    texts = {
        "licenses/onnxruntime/LICENSE": LICENSE,
        "NOTICE": notice.encode(),
        "models/sigmoid/model.onnx": MODEL,
        "models.json": MODELS_JSON,
    }
    if target == ARM:
        texts["licenses/qnn-runtime/LICENSE.pdf"] = QNN_LICENSE
    for relative, text in {**texts, **(extra or {})}.items():
        path = stage / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text)
        path.chmod(0o644)
    for relative, points_to in (links or {}).items():
        (stage / relative).symlink_to(points_to)
    shipped = []
    for path in sorted(p for p in stage.rglob("*") if p.is_file()):
        content = path.read_bytes()
        digest = hashlib.sha256(content).hexdigest()
        relative = path.relative_to(stage).as_posix()
        if path.is_symlink():
            link = os.readlink(path)
            shipped.append(ShippedFile(relative, len(content), digest, 0o777, link_to=link))
        else:
            mode = stat.S_IMODE(path.stat().st_mode)
            shipped.append(ShippedFile(relative, len(content), digest, mode))
    return PackageInput(
        product="demo",
        version="1.0.0",
        description="Demo's bundled ONNX Runtime builds",
        url="https://demo.invalid/",
        target=target,
        stage=stage,
        files=tuple(shipped),
        licenses=("LicenseRef-Qualcomm-AI-Engine-Direct", "MIT"),
        externals=(),
        runtimes=tuple(
            ShippedRuntime(n, LABELS.get(n, n), f"runtimes/{n}", n == GENERIC) for n in runtimes
        ),
        settings=APK_SETTINGS,
        source_date_epoch=EPOCH,
    )


def _path(f: StagedFile) -> str:
    return f.path


def _product() -> Product:
    return Product(
        name="demo",
        version="1.0.0",
        description="Demo's bundled ONNX Runtime builds",
        url="https://demo.invalid/",
        targets=(ARM, X86),
        runtimes=(QNN, GENERIC),
        models=(),
        plugins={},
        runtime_targets={QNN: (ARM,), GENERIC: (ARM, X86)},
        override_env="DEMO_ORT_DIR",
        channels=("apk",),
        packaging=APK_SETTINGS,
        waivers=(),
        path=Path("manifests/demo.toml"),
        digest="0" * 64,
    )


def generate_both(root: Path, order: tuple[str, ...] = (ARM, X86)) -> dict[str, ChannelOutput]:
    out = root / "packaging" / "apk"
    out.mkdir(parents=True)
    packages = {target: make_stage(root / "stages", target) for target in (ARM, X86)}
    return {target: ApkChannel().generate(packages[target], out) for target in order}


def tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def both(tmp_path: Path) -> dict[str, ChannelOutput]:
    return generate_both(tmp_path)


# --- what is written ---------------------------------------------------------------------------


def _schema() -> dict[str, object]:
    text = resources.files("ortbundle").joinpath("data/runtimes.schema.json").read_text("utf-8")
    schema: dict[str, object] = json.loads(text)
    return schema


def test_the_index_is_the_real_writers_and_schema_valid(tmp_path: Path) -> None:
    package = make_stage(tmp_path, ARM)
    index = json.loads((package.stage / INDEX_NAME).read_text("utf-8"))
    jsonschema.validate(index, _schema())
    assert [r["name"] for r in index["runtimes"]] == [QNN, GENERIC]
    assert index["runtimes"][0]["fits"]["soc_families"] == ["qualcomm"]
    assert (package.stage / LOADER_NAME).is_file()


def test_two_abis_into_one_directory(both: dict[str, ChannelOutput]) -> None:
    out = both[ARM].directory
    shared = {
        "runtime-loader/build.gradle.kts",
        f"{MAIN}/AndroidManifest.xml",
        JAVA,
        f"{ASSETS}/licenses/onnxruntime/LICENSE",
        f"{ASSETS}/models/sigmoid/model.onnx",
    }
    arm_libraries = ["libonnxruntime.so", "libQnnHtp.so", "libQnnHtpV73Stub.so"]
    arm_libraries += ["libc++_shared.so", "libonnxruntime_generic.so"]
    x86_libraries = ["libc++_shared.so", "libonnxruntime_generic.so"]
    trees = (f"{MAIN}/jniLibs", "jniLibs")
    arm = {
        *(f"{d}/arm64-v8a/{n}" for d in trees for n in arm_libraries),
        *(f"{ASSETS}/arm64-v8a/{n}" for n in (INDEX_NAME, "NOTICE", "models.json")),
        f"{ASSETS}/arm64-v8a/{QNN}/libQnnHtpV73Skel.so",
        f"{ASSETS}/licenses/qnn-runtime/LICENSE.pdf",
        "size-report.arm64-v8a.json",
    }
    x86 = {
        *(f"{d}/x86_64/{n}" for d in trees for n in x86_libraries),
        *(f"{ASSETS}/x86_64/{n}" for n in (INDEX_NAME, "NOTICE", "models.json")),
        "size-report.x86_64.json",
    }
    assert set(tree(out)) == shared | arm | x86
    # Each call returns what it is responsible for: its ABI's files and every shared one.
    assert {f.relative_to(out).as_posix() for f in both[ARM].files} == shared | arm
    assert {f.relative_to(out).as_posix() for f in both[X86].files} == shared | x86
    for output in both.values():
        assert list(output.files) == sorted(output.files)
        assert output.channel == "apk" and output.directory == out
        for relative, digest in output.digests.items():
            assert hashlib.sha256((out / relative).read_bytes()).hexdigest() == digest, relative
        assert set(output.digests) == {f.relative_to(out).as_posix() for f in output.files}
    # Nothing else: no leftovers of the atomic writes, no desktop loader anywhere.
    assert not [p for p in out.rglob("*") if p.name.startswith(".")]
    assert not [p for p in out.rglob("*") if p.name == LOADER_NAME]


def test_files_carry_the_staged_bytes(tmp_path: Path) -> None:
    out = tmp_path / "apk"
    out.mkdir()
    package = make_stage(tmp_path / "stages", ARM)
    ApkChannel().generate(package, out)
    stage = package.stage
    for name, files in runtime_files(ARM).items():
        for relative, data in files.items():
            if relative.startswith("assets/"):
                dest = out / f"{ASSETS}/arm64-v8a/{name}/{relative.removeprefix('assets/')}"
                assert dest.read_bytes() == data
                assert not (out / f"{MAIN}/jniLibs/arm64-v8a/{Path(relative).name}").exists()
            else:
                for tree_root in (f"{MAIN}/jniLibs", "jniLibs"):
                    assert (out / tree_root / "arm64-v8a" / relative).read_bytes() == data
    for name in ("NOTICE", "models.json"):
        assert (out / ASSETS / "arm64-v8a" / name).read_bytes() == (stage / name).read_bytes()
    # the index as the APK carries it: marked so, without what only a desktop loader reads
    staged = json.loads((stage / INDEX_NAME).read_text("utf-8"))
    carried = json.loads((out / ASSETS / "arm64-v8a" / INDEX_NAME).read_text("utf-8"))
    jsonschema.validate(carried, _schema())
    assert carried["layout"] == "apk" and "override_env" not in carried
    assert all("directory" not in runtime for runtime in carried["runtimes"])
    for runtime in staged["runtimes"]:
        del runtime["directory"]
    del staged["override_env"]
    assert carried == {**staged, "layout": "apk"}
    carried["override_env"] = "DEMO_ORT_DIR"  # a desktop-only field in the APK's copy: invalid
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(carried, _schema())
    del carried["layout"]  # and a stage's index needs it, and each runtime's directory
    with pytest.raises(jsonschema.ValidationError, match="'directory' is a required property"):
        jsonschema.validate(carried, _schema())
    assert (out / ASSETS / "models/sigmoid/model.onnx").read_bytes() == MODEL
    assert (out / ASSETS / "licenses/qnn-runtime/LICENSE.pdf").read_bytes() == QNN_LICENSE


def test_fixed_modes_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        out = generate_both(tmp_path)[ARM].directory
    finally:
        os.umask(old)
    for path in each(out.rglob("*"), "generated files"):
        wanted = 0o755 if path.is_dir() else 0o644
        assert stat.S_IMODE(path.stat().st_mode) == wanted, path


def test_a_stage_file_is_linked_not_copied_when_it_can_be(tmp_path: Path) -> None:
    out = tmp_path / "apk"
    out.mkdir()
    package = make_stage(tmp_path / "stages", X86)
    ApkChannel().generate(package, out)
    staged = package.stage / "runtimes" / GENERIC / "libonnxruntime_generic.so"
    module = out / MAIN / "jniLibs/x86_64/libonnxruntime_generic.so"
    flat = out / "jniLibs/x86_64/libonnxruntime_generic.so"
    assert module.samefile(staged) and flat.samefile(staged)
    # A rerun over the links leaves them (and no temporary file) in place.
    ApkChannel().generate(package, out)
    assert module.samefile(staged)
    assert not [p for p in out.rglob(".*")]


def test_reruns_give_identical_bytes_in_either_order(tmp_path: Path) -> None:
    first = generate_both(tmp_path / "one")[ARM].directory
    second = generate_both(tmp_path / "two", order=(X86, ARM))[ARM].directory
    assert tree(first) == tree(second)
    for relative, data in tree(first).items():
        if not relative.endswith(".so") and not relative.endswith(".onnx"):
            text = data.decode("utf-8", errors="replace")
            assert str(tmp_path) not in text and "/tmp" not in text, relative


def test_the_gradle_module(both: dict[str, ChannelOutput]) -> None:
    out = both[ARM].directory
    gradle = (out / "runtime-loader/build.gradle.kts").read_text("utf-8")
    assert 'id("com.android.library")' in gradle
    assert f'namespace = "{NAMESPACE}"' in gradle
    assert "compileSdk = 35" in gradle and "minSdk = 24" in gradle
    assert "useLegacyPackaging = false" in gradle
    assert 'keepDebugSymbols += "**/*.so"' in gradle
    assert "androidResources {" in gradle and 'noCompress += "onnx"' in gradle
    manifest = (out / MAIN / "AndroidManifest.xml").read_text("utf-8")
    assert "package=" not in manifest  # the namespace says it; AGP 8 refuses both
    assert '<uses-native-library android:name="libcdsprpc.so" android:required="false" />' in (
        manifest
    )
    java = (out / JAVA).read_text("utf-8")
    assert java.startswith(f"package {NAMESPACE};\n")
    assert f'OVERRIDE_PROPERTY = "{override_property("demo")}"' in java
    assert override_property("demo") == "debug.demo.ort_runtime"
    assert override_property("Dark-Room 2") == "debug.dark_room_2.ort_runtime"


def test_notes(both: dict[str, ChannelOutput]) -> None:
    arm = "\n".join(both[ARM].notes)
    assert arm.startswith("arm64-v8a: android-qnn ")
    assert "libQnnHtpV73Skel.so" in arm and "ADSP_LIBRARY_PATH" in arm
    assert "RuntimeLoader.load(context)" in arm and "useLegacyPackaging = false" in arm
    assert "adb shell setprop debug.demo.ort_runtime" in arm
    # advice that works with Debian's zipalign 10 and names the build-tools that have -P
    assert "zipalign -f 16384 unaligned.apk aligned.apk" in arm and "-P 16" in arm
    assert "build-tools 35.0.0-rc3" in arm and 'noCompress += "onnx"' in arm
    assert "models.json (and NOTICE) are relative to the bundle root: assets/ortbundle/" in arm
    x86 = "\n".join(both[X86].notes)
    assert x86.startswith("x86_64: android-generic ") and "ADSP" not in x86


# --- the size report ---------------------------------------------------------------------------


def _round(size: int) -> int:
    return -(-size // PAGE) * PAGE


def test_the_size_report_matches_the_files(both: dict[str, ChannelOutput]) -> None:
    out = both[ARM].directory
    report = json.loads((out / "size-report.arm64-v8a.json").read_text("utf-8"))
    assert report["abi"] == "arm64-v8a" and report["page_align"] == PAGE
    assert report["use_legacy_packaging"] is False
    files = runtime_files(ARM)
    assert [r["name"] for r in report["runtimes"]] == [QNN, GENERIC]
    for entry in report["runtimes"]:
        libraries = [d for r, d in files[entry["name"]].items() if not r.startswith("assets/")]
        assets = [d for r, d in files[entry["name"]].items() if r.startswith("assets/")]
        assert entry["label"] == LABELS[entry["name"]]
        assert entry["libraries"] == len(libraries)
        assert entry["library_bytes"] == sum(map(len, libraries))
        assert entry["library_apk_bytes"] == sum(_round(len(d)) for d in libraries)
        assert entry["assets"] == len(assets)
        assert entry["asset_bytes"] == sum(map(len, assets))
        assert entry["files"] == len(libraries) + len(assets)
        assert entry["bytes"] == entry["library_bytes"] + entry["asset_bytes"]
        assert entry["apk_bytes"] == entry["library_apk_bytes"] + entry["asset_bytes"]
    # The total counts what the APK's module carries for this ABI, each file once: libc++_shared
    # is in both runtimes' figures and once here.
    module = {
        relative: data
        for relative, data in tree(out).items()
        if relative.startswith(MAIN)
        and ("/arm64-v8a/" in relative or "/licenses/" in relative or "/models/" in relative)
    }
    libraries = [d for r, d in module.items() if "/jniLibs/" in r]
    assets = [d for r, d in module.items() if "/jniLibs/" not in r]
    total = report["total"]
    assert total["libraries"] == len(libraries) == 5
    assert total["library_bytes"] == sum(map(len, libraries))
    assert total["library_apk_bytes"] == sum(_round(len(d)) for d in libraries)
    assert total["assets"] == len(assets) and total["asset_bytes"] == sum(map(len, assets))
    assert total["apk_bytes"] == total["library_apk_bytes"] + total["asset_bytes"]
    assert report["models"] == {
        "files": 1, "bytes": len(MODEL), "apk_bytes": len(MODEL), "libraries": 0,
        "library_bytes": 0, "library_apk_bytes": 0, "assets": 1, "asset_bytes": len(MODEL),
    }  # fmt: skip
    assert report["licenses"]["files"] == 2
    assert report["index"]["files"] == 3
    # The build's note says the same, in MB, per runtime.
    qnn = report["runtimes"][0]
    mb = f"{qnn['apk_bytes'] / (1 << 20):.1f}"
    assert both[ARM].notes[0].startswith(f"arm64-v8a: {QNN} {mb} MiB (4 libraries + 1 asset of ")


# --- what is refused ---------------------------------------------------------------------------


def _generate(tmp_path: Path, target: str, **kwargs: object) -> ChannelOutput:
    out = tmp_path / "apk"
    out.mkdir(exist_ok=True)
    package = make_stage(tmp_path / "stages", target, **kwargs)  # type: ignore[arg-type]
    return ApkChannel().generate(package, out)


def test_one_name_with_different_bytes_is_refused(tmp_path: Path) -> None:
    files = runtime_files(ARM)
    files[GENERIC]["libQnnHtp.so"] = _lib(ARM, "libQnnHtp.so", b"another build")
    with pytest.raises(PackagingError) as caught:
        _generate(tmp_path, ARM, runtimes=files)
    message = str(caught.value)
    assert f"runtimes/{GENERIC}/libQnnHtp.so" in message
    assert f"runtimes/{QNN}/libQnnHtp.so" in message
    assert "rename" in message
    assert not (tmp_path / "apk" / "runtime-loader").exists()  # refused before writing


def test_a_4k_aligned_library_is_refused_naming_it(tmp_path: Path) -> None:
    files = runtime_files(ARM)
    files[QNN]["libQnnHtp.so"] = _lib(ARM, "libQnnHtp.so", b"htp", align=0x1000)
    with pytest.raises(PackagingError) as caught:
        _generate(tmp_path, ARM, runtimes=files)
    assert f"runtimes/{QNN}/libQnnHtp.so" in str(caught.value)
    assert "16 KB" in str(caught.value) and "max-page-size=16384" in str(caught.value)
    assert caught.value.exit_code == 11


def test_a_vaddr_not_congruent_to_its_offset_is_refused(tmp_path: Path) -> None:
    files = runtime_files(X86)
    bad = make_elf(machine="EM_X86_64", soname="libbad.so", loads=[(0, 0x100, PAGE)])
    files[GENERIC]["libbad.so"] = bad
    with pytest.raises(PackagingError, match="libbad.so"):
        _generate(tmp_path, X86, runtimes=files)


def test_dsp_code_beside_the_libraries_also_goes_to_assets(tmp_path: Path) -> None:
    files = runtime_files(ARM)
    files[QNN]["libQnnHtpV75Skel.so"] = make_elf(machine="EM_QDSP6", align=0x1000)
    files[QNN]["htp-config.json"] = b"{}\n"
    out = _generate(tmp_path, ARM, runtimes=files).directory
    payload = out / ASSETS / "arm64-v8a" / QNN
    assert sorted(p.name for p in payload.iterdir()) == [
        "htp-config.json",
        "libQnnHtpV73Skel.so",
        "libQnnHtpV75Skel.so",
    ]
    assert not (out / MAIN / "jniLibs/arm64-v8a/libQnnHtpV75Skel.so").exists()
    gradle = (out / "runtime-loader/build.gradle.kts").read_text("utf-8")
    assert "useLegacyPackaging = false" in gradle


def test_a_library_not_named_lib_so_is_refused(tmp_path: Path) -> None:
    files = runtime_files(X86)
    files[GENERIC]["libonnxruntime.so.1"] = _lib(X86, "libonnxruntime.so.1")
    with pytest.raises(PackagingError, match=r"libonnxruntime\.so\.1.*lib<name>\.so"):
        _generate(tmp_path, X86, runtimes=files)


def test_shared_files_that_differ_between_abis_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "apk"
    out.mkdir()
    ApkChannel().generate(make_stage(tmp_path / "a", ARM), out)
    other = make_stage(tmp_path / "b", X86, extra={"licenses/onnxruntime/LICENSE": b"changed\n"})
    with pytest.raises(PackagingError, match="licenses/onnxruntime/LICENSE.*different bytes"):
        ApkChannel().generate(other, out)
    assert not (out / MAIN / "jniLibs/x86_64").exists()
    assert (out / ASSETS / "licenses/onnxruntime/LICENSE").read_bytes() == LICENSE


def test_a_stage_changed_after_the_build_is_not_packaged(tmp_path: Path) -> None:
    package = make_stage(tmp_path / "stages", X86)
    (package.stage / "runtimes" / GENERIC / "libc++_shared.so").write_bytes(b"changed")
    with pytest.raises(IntegrityError, match="changed or vanished"):
        ApkChannel().generate(package, tmp_path / "apk")


def test_a_desktop_target_and_a_bad_namespace_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="packages android-arm64-v8a"):
        ApkChannel().generate(make_package_input(tmp_path / "linux"), tmp_path / "o")
    package = make_stage(tmp_path / "stages", X86)
    for namespace in ("org.example.int.runtime", "runtime", "Org.Example.app"):
        settings = replace(APK_SETTINGS, android_namespace=namespace)
        with pytest.raises(ConfigError, match="not a Java package name"):
            ApkChannel().generate(replace(package, settings=settings), tmp_path / "o")


def test_an_unknown_stage_entry_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PackagingError, match="does not know where it belongs"):
        _generate(tmp_path, X86, extra={"bin/tool": b"#!/bin/sh\n"})


def test_epoch_is_not_needed(tmp_path: Path) -> None:
    """Nothing carries a time: two epochs give the same bytes."""
    package = make_stage(tmp_path / "stages", X86)
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir()
    second.mkdir()
    ApkChannel().generate(package, first)
    ApkChannel().generate(replace(package, source_date_epoch=EPOCH + 1), second)
    assert tree(first) == tree(second)


def test_a_symlinked_alias_ships_as_a_copy_under_its_own_name(tmp_path: Path) -> None:
    out = _generate(
        tmp_path,
        X86,
        links={f"runtimes/{GENERIC}/libonnxruntime.so": "libonnxruntime_generic.so"},
    ).directory
    alias = out / MAIN / "jniLibs/x86_64/libonnxruntime.so"
    real = out / MAIN / "jniLibs/x86_64/libonnxruntime_generic.so"
    assert not alias.is_symlink() and alias.read_bytes() == real.read_bytes()


def test_plugin_libraries_go_to_jnilibs_and_say_they_are_not_registered(tmp_path: Path) -> None:
    plugin = _lib(X86, "libonnxruntime_providers_demo.so", b"ep")
    output = _generate(
        tmp_path,
        X86,
        extra={
            "plugins/demo-ep/libonnxruntime_providers_demo.so": plugin,
            "plugins/demo-ep/assets/config.json": b"{}",
        },
    )
    out = output.directory
    assert (out / MAIN / "jniLibs/x86_64/libonnxruntime_providers_demo.so").read_bytes() == plugin
    assert (out / ASSETS / "x86_64/plugins/demo-ep/config.json").read_bytes() == b"{}"
    assert any("does not register them yet" in note for note in output.notes)
    report = json.loads((out / "size-report.x86_64.json").read_text("utf-8"))
    assert [(p["name"], p["libraries"], p["assets"]) for p in report["plugins"]] == [
        ("demo-ep", 1, 1)
    ]


def test_a_rerun_with_fewer_files_leaves_none_of_the_old(tmp_path: Path) -> None:
    out = tmp_path / "apk"
    out.mkdir()
    files = runtime_files(X86)
    files[GENERIC]["libextra.so"] = _lib(X86, "libextra.so")
    ApkChannel().generate(make_stage(tmp_path / "a", X86, runtimes=files), out)
    assert (out / "jniLibs/x86_64/libextra.so").is_file()
    second = ApkChannel().generate(make_stage(tmp_path / "b", X86), out)
    assert not (out / "jniLibs/x86_64/libextra.so").exists()
    assert not (out / MAIN / "jniLibs/x86_64/libextra.so").exists()
    assert set(tree(out)) == {f.relative_to(out).as_posix() for f in second.files}


def test_deflate_estimates_are_memoised_by_content(tmp_path: Path) -> None:
    memo = Memo.for_build(tmp_path / "cache", release=False)
    package = replace(make_stage(tmp_path / "stages", X86), memo=memo)
    out = tmp_path / "apk"
    out.mkdir()
    first = ApkChannel().generate(package, out)
    report = (out / "size-report.x86_64.json").read_bytes()
    entries = sorted((tmp_path / "cache/outputs/apk-deflate").rglob("*.json"))
    library = package.stage / "runtimes" / GENERIC / "libonnxruntime_generic.so"
    digest = hashlib.sha256(library.read_bytes()).hexdigest()
    # kept by the bytes, the level and zlib's version
    key = memo_key([digest, "z6", zlib.ZLIB_RUNTIME_VERSION], code=False)
    assert memo.entry("apk-deflate", key) in entries
    # A memo is used as it is (an estimate for a note, written into no file) ...
    for entry in entries:
        entry.write_text(str(50 << 20), "ascii")
    second = ApkChannel().generate(package, out)
    assert "(2 libraries, ≈100.0 MiB deflated)" in second.notes[0]
    assert (out / "size-report.x86_64.json").read_bytes() == report
    # ... except by a release, which trusts no memo.
    release = Memo.for_build(tmp_path / "cache", release=True)
    third = ApkChannel().generate(replace(package, memo=release), out)
    assert third.notes[0] == first.notes[0]


# --- the Java loader ---------------------------------------------------------------------------

# Stubs of the Android and org.json classes RuntimeLoader uses, with the real signatures
# (checked exceptions included, so code that compiles here compiles against android.jar).
# Members marked "test only" do not exist on Android; RuntimeLoader must not use them. The
# stubs work: assets are read from a directory, Build's fields are set by the test's Main.
STUBS = {
    "android/content/Context.java": """
package android.content;
public abstract class Context {
    public abstract android.content.res.AssetManager getAssets();
    public abstract java.io.File getFilesDir();
    public abstract android.content.pm.ApplicationInfo getApplicationInfo();
}
""",
    "android/content/pm/ApplicationInfo.java": """
package android.content.pm;
public class ApplicationInfo {
    public String nativeLibraryDir;
}
""",
    "android/content/res/AssetManager.java": """
package android.content.res;
import java.io.*;
public final class AssetManager {
    private final File root;
    public AssetManager(File root) { this.root = root; } // test only
    public InputStream open(String name) throws IOException {
        return new FileInputStream(new File(root, name));
    }
}
""",
    "android/os/Build.java": """
package android.os;
public class Build {
    public static String HARDWARE = "unknown"; // final on Android; set by the test
    public static String BOARD = "unknown";
    public static String SOC_MANUFACTURER = "unknown";
    public static String SOC_MODEL = "unknown";
    public static String[] SUPPORTED_64_BIT_ABIS = {"arm64-v8a"};
    public static String[] SUPPORTED_32_BIT_ABIS = {"armeabi-v7a"};
    public static class VERSION {
        public static int SDK_INT = 35;
    }
}
""",
    "android/os/Process.java": """
package android.os;
public class Process {
    public static final boolean is64Bit() { return true; }
    public static final int myPid() { return 4242; }
}
""",
    "android/system/ErrnoException.java": """
package android.system;
public final class ErrnoException extends Exception {
    public ErrnoException(String functionName, int errno) { super(functionName); }
}
""",
    "android/system/Os.java": """
package android.system;
import java.util.*;
public final class Os {
    public static final Map<String, String> ENV = new TreeMap<String, String>(); // test only
    public static String getenv(String name) { return ENV.get(name); }
    public static void setenv(String name, String value, boolean overwrite) throws ErrnoException {
        if (overwrite || !ENV.containsKey(name)) ENV.put(name, value);
    }
}
""",
    "org/json/JSONException.java": """
package org.json;
public class JSONException extends Exception {
    public JSONException(String message) { super(message); }
}
""",
    "org/json/JSONArray.java": """
package org.json;
import java.util.*;
public class JSONArray {
    final List<Object> values = new ArrayList<Object>();
    public int length() { return values.size(); }
    public String optString(int i) { Object v = i < values.size() ? values.get(i) : null; return v == null ? "" : String.valueOf(v); }
    public JSONObject getJSONObject(int i) throws JSONException {
        Object v = values.get(i);
        if (!(v instanceof JSONObject)) throw new JSONException("not an object at " + i);
        return (JSONObject) v;
    }
}
""",
    "org/json/JSONObject.java": r"""
package org.json;
import java.util.*;
public class JSONObject {
    final Map<String, Object> values = new LinkedHashMap<String, Object>();
    JSONObject() {}
    public JSONObject(String json) throws JSONException {
        int[] at = {0};
        Object v = parse(json, at);
        if (!(v instanceof JSONObject)) throw new JSONException("not an object");
        values.putAll(((JSONObject) v).values);
    }
    public boolean has(String k) { return values.containsKey(k); }
    public String optString(String k) { Object v = values.get(k); return v == null ? "" : String.valueOf(v); }
    public boolean optBoolean(String k) { return Boolean.TRUE.equals(values.get(k)); }
    public String getString(String k) throws JSONException { return (String) get(k, String.class); }
    public long getLong(String k) throws JSONException { return ((Number) get(k, Number.class)).longValue(); }
    public JSONArray getJSONArray(String k) throws JSONException { return (JSONArray) get(k, JSONArray.class); }
    public JSONArray optJSONArray(String k) { Object v = values.get(k); return v instanceof JSONArray ? (JSONArray) v : null; }
    public JSONObject optJSONObject(String k) { Object v = values.get(k); return v instanceof JSONObject ? (JSONObject) v : null; }
    private Object get(String k, Class<?> type) throws JSONException {
        Object v = values.get(k);
        if (!type.isInstance(v)) throw new JSONException(k + " is not a " + type.getSimpleName());
        return v;
    }
    private static void space(String s, int[] at) { while (at[0] < s.length() && s.charAt(at[0]) <= ' ') at[0]++; }
    static Object parse(String s, int[] at) throws JSONException {
        space(s, at);
        char c = s.charAt(at[0]);
        if (c == '{') {
            JSONObject o = new JSONObject(); at[0]++; space(s, at);
            if (s.charAt(at[0]) == '}') { at[0]++; return o; }
            while (true) {
                space(s, at); String k = (String) parse(s, at); space(s, at); at[0]++;
                o.values.put(k, parse(s, at)); space(s, at);
                if (s.charAt(at[0]++) == '}') return o;
            }
        }
        if (c == '[') {
            JSONArray a = new JSONArray(); at[0]++; space(s, at);
            if (s.charAt(at[0]) == ']') { at[0]++; return a; }
            while (true) {
                a.values.add(parse(s, at)); space(s, at);
                if (s.charAt(at[0]++) == ']') return a;
            }
        }
        if (c == '"') {
            StringBuilder b = new StringBuilder(); at[0]++;
            while ((c = s.charAt(at[0]++)) != '"') {
                if (c == '\\') {
                    c = s.charAt(at[0]++);
                    if (c == 'u') { c = (char) Integer.parseInt(s.substring(at[0], at[0] + 4), 16); at[0] += 4; }
                    else if (c == 'n') c = '\n'; else if (c == 't') c = '\t';
                }
                b.append(c);
            }
            return b.toString();
        }
        int start = at[0];
        while (at[0] < s.length() && "{}[],: \n\r\t".indexOf(s.charAt(at[0])) < 0) at[0]++;
        String word = s.substring(start, at[0]);
        if (word.equals("true") || word.equals("false")) return Boolean.valueOf(word);
        if (word.equals("null")) return null;
        try { return Long.valueOf(word); } catch (NumberFormatException e) { return Double.valueOf(word); }
    }
}
""",
}

# Runs RuntimeLoader on a fake device: args are the module's assets directory, the files
# directory, the native library directory, then Build's SDK_INT, SOC_MANUFACTURER, SOC_MODEL,
# HARDWARE, and the runtime the app names ("" for none). Prints the result, one field a line.
MAIN_JAVA = """
import android.content.Context;
import android.content.pm.ApplicationInfo;
import android.content.res.AssetManager;
import android.os.Build;
import java.io.File;
import %(package)s.RuntimeLoader;

public class Main {
    public static void main(String[] args) {
        final AssetManager assets = new AssetManager(new File(args[0]));
        final File files = new File(args[1]);
        final ApplicationInfo info = new ApplicationInfo();
        info.nativeLibraryDir = args[2];
        Build.VERSION.SDK_INT = Integer.parseInt(args[3]);
        Build.SOC_MANUFACTURER = args[4];
        Build.SOC_MODEL = args[5];
        Build.HARDWARE = args[6];
        Context context = new Context() {
            public AssetManager getAssets() { return assets; }
            public File getFilesDir() { return files; }
            public ApplicationInfo getApplicationInfo() { return info; }
        };
        RuntimeLoader.Result result;
        try {
            result = RuntimeLoader.load(context, args[7].isEmpty() ? null : args[7]);
        } catch (RuntimeException | UnsatisfiedLinkError e) {
            System.out.println("thrown=" + e);
            return;
        }
        System.out.println("runtime=" + result.runtime);
        System.out.println("library=" + result.library);
        System.out.println("abi=" + result.abi);
        System.out.println("why=" + result.why);
        for (String skipped : result.skipped) System.out.println("skipped=" + skipped);
        System.out.println("adsp=" + android.system.Os.getenv("ADSP_LIBRARY_PATH"));
        System.out.println("same=" + (RuntimeLoader.load(context) == result));
    }
}
"""


def _need(tool: str, package: str) -> str:
    found = shutil.which(tool)
    if found is None:
        pytest.skip(f"{tool} is not installed (Debian/Ubuntu: apt install {package})")
    return found


def _javac(sources: Path, classes: Path, extra: list[Path]) -> subprocess.CompletedProcess[str]:
    """Compile the stubs, then `extra` against them with every warning an error."""
    javac = _need("javac", "openjdk-17-jdk-headless")
    stubs = []
    for relative, text in STUBS.items():
        path = sources / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
        stubs.append(str(path))
    # Java 8, as Android compiles it (-options: the warning --release 8 itself gives).
    common = [javac, "--release", "8", "-encoding", "UTF-8", "-d", str(classes)]
    done = subprocess.run(
        [*common, *stubs], capture_output=True, text=True, timeout=300, check=False
    )
    if done.returncode != 0:
        return done
    return subprocess.run(
        [*common, "-Xlint:all,-options", "-Werror", "-cp", str(classes), *map(str, extra)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


@pytest.mark.tools
def test_the_java_loader_compiles_against_the_android_api(
    tmp_path: Path, both: dict[str, ChannelOutput]
) -> None:
    java = both[ARM].directory / JAVA
    done = _javac(tmp_path / "stubs", tmp_path / "classes", [java])
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "classes/org/example/demo/runtime/RuntimeLoader.class").is_file()
    assert (tmp_path / "classes/org/example/demo/runtime/RuntimeLoader$Result.class").is_file()


@pytest.fixture(scope="module")
def jvm_loader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path]]:
    """The generated module, RuntimeLoader compiled with the stubs and a Main, and real shared
    libraries (built by gcc for this machine) under the runtimes' entry names."""
    _need("java", "openjdk-17-jre-headless")
    gcc = _need("gcc", "gcc")
    root = tmp_path_factory.mktemp("jvm")
    out = generate_both(root)[ARM].directory
    main = root / "src" / "Main.java"
    main.parent.mkdir(parents=True)
    main.write_text(MAIN_JAVA % {"package": NAMESPACE}, "utf-8")
    done = _javac(root / "stubs", root / "classes", [out / JAVA, main])
    assert done.returncode == 0, done.stderr
    libraries = root / "libs"
    libraries.mkdir()
    source = root / "empty.c"
    source.write_text("int ortbundle_test_symbol(void) { return 0; }\n", "utf-8")
    for name in ("libonnxruntime.so", "libonnxruntime_generic.so", "libcdsprpc.so"):
        subprocess.run(
            [gcc, "-shared", "-fPIC", "-o", str(libraries / name), str(source)], check=True
        )
    yield out, root / "classes", libraries


def _run_loader(
    jvm: tuple[Path, Path, Path],
    tmp_path: Path,
    *,
    libraries: tuple[str, ...] = ("libonnxruntime.so", "libonnxruntime_generic.so"),
    fastrpc: bool = True,
    isa: str = "arm64",
    sdk: int = 35,
    soc: tuple[str, str] = ("QTI", "SM8650"),
    hardware: str = "qcom",
    override: str = "",
) -> dict[str, list[str]]:
    out, classes, built = jvm
    library_path = tmp_path / "library-path"
    library_path.mkdir(parents=True, exist_ok=True)
    for name in (*libraries, *(("libcdsprpc.so",) if fastrpc else ())):
        shutil.copyfile(built / name, library_path / name)
    java = _need("java", "openjdk-17-jre-headless")
    files = tmp_path / "files"
    done = subprocess.run(
        [java, f"-Djava.library.path={library_path}", "-cp", str(classes), "Main",
         str(out / MAIN / "assets"), str(files), f"/data/app/demo/lib/{isa}", str(sdk),
         soc[0], soc[1], hardware, override],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    fields: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        fields.setdefault(key, []).append(value)
    return fields


@pytest.mark.tools
def test_java_loader_on_a_snapdragon_loads_qnn_with_its_dsp_payload(
    jvm_loader: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    result = _run_loader(jvm_loader, tmp_path)
    assert result["runtime"] == [QNN] and result["library"] == ["libonnxruntime.so"]
    assert result["abi"] == ["arm64-v8a"] and result["same"] == ["true"]
    assert result["why"][0].startswith("Qualcomm NPU (QTI SM8650) - ONNX Runtime (Qualcomm QNN)")
    assert "skipped" not in result
    skels = list((tmp_path / "files" / "ortbundle").glob(f"*/{QNN}/libQnnHtpV73Skel.so"))
    assert len(skels) == 1 and skels[0].read_bytes() == SKEL
    adsp = result["adsp"][0].split(";")
    assert adsp[0] == str(skels[0].parent) and "/vendor/dsp/cdsp" in adsp


@pytest.mark.tools
def test_java_loader_falls_through_to_the_generic_runtime(
    jvm_loader: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    no_fastrpc = _run_loader(jvm_loader, tmp_path / "a", fastrpc=False)
    assert no_fastrpc["runtime"] == [GENERIC]
    assert no_fastrpc["skipped"][0].startswith(f"{QNN}: needs Qualcomm FastRPC (libcdsprpc.so)")
    assert no_fastrpc["adsp"] == ["null"]  # nothing of the QNN runtime was touched
    assert not (tmp_path / "a" / "files").exists()
    assert no_fastrpc["why"][0].startswith("any GPU through WebGPU, else the CPU - ")

    mediatek = _run_loader(jvm_loader, tmp_path / "b", soc=("Mediatek", "MT6989"), hardware="mt")
    assert mediatek["runtime"] == [GENERIC]
    assert mediatek["skipped"] == [f"{QNN}: needs a qualcomm SoC, and this is Mediatek MT6989"]

    # Before API 31 the SoC is known by the board's names.
    old = _run_loader(jvm_loader, tmp_path / "c", sdk=30, soc=("", ""), hardware="qcom")
    assert old["runtime"] == [QNN]

    # A runtime whose library does not load is passed over; none at all is a result, not a crash.
    broken = _run_loader(jvm_loader, tmp_path / "d", libraries=("libonnxruntime_generic.so",))
    assert broken["runtime"] == [GENERIC]
    assert broken["skipped"][0].startswith(f"{QNN}: its library did not load")
    nothing = _run_loader(jvm_loader, tmp_path / "e", libraries=())
    assert nothing["runtime"] == ["null"] and nothing["why"] == ["no runtime could be loaded"]
    assert len(nothing["skipped"]) == 2


@pytest.mark.tools
def test_java_loader_reads_the_installed_abi_and_honours_an_override(
    jvm_loader: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    x86 = _run_loader(jvm_loader, tmp_path / "a", isa="x86_64")
    assert x86["abi"] == ["x86_64"] and x86["runtime"] == [GENERIC]

    named = _run_loader(jvm_loader, tmp_path / "b", override=GENERIC)
    assert named["runtime"] == [GENERIC] and named["why"][0].startswith("named by the app - ")

    unknown = _run_loader(jvm_loader, tmp_path / "c", override="cuda")
    assert unknown["thrown"][0].startswith("java.lang.IllegalArgumentException: the app names")
    failing = _run_loader(jvm_loader, tmp_path / "d", override=QNN, libraries=())
    assert failing["thrown"][0].startswith("java.lang.UnsatisfiedLinkError: the app names")


def test_each_library_is_parsed_once_per_content_not_once_per_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The alignment and machine checks read what pyelftools found in these bytes before;
    a release (whose memo is off) reads every library again."""
    import ortbundle.stage.binaries
    import ortbundle.stage.binaries.info_cache

    parsed: list[Path] = []
    real = ortbundle.stage.binaries.inspect

    def counting(path: Path, *, name: str | None = None) -> object:
        parsed.append(path)
        return real(path, name=name)

    monkeypatch.setattr(ortbundle.stage.binaries.info_cache, "inspect", counting)
    memo = Memo.for_build(tmp_path / "cache", release=False)
    package = replace(make_stage(tmp_path / "stages", X86), memo=memo)
    for n in (1, 2, 3):
        (tmp_path / f"apk{n}").mkdir()
    ApkChannel().generate(package, tmp_path / "apk1")
    assert parsed
    first = len(parsed)
    ApkChannel().generate(package, tmp_path / "apk2")
    assert len(parsed) == first  # from the memo
    release = Memo.for_build(tmp_path / "cache", release=True)
    ApkChannel().generate(replace(package, memo=release), tmp_path / "apk3")
    assert len(parsed) == 2 * first


def test_every_directory_written_into_is_flushed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The module's files are renamed into place without a directory flush each; every
    directory that received one is flushed once before generate returns."""
    import ortbundle._core.fsio as fsio
    import ortbundle.channels.apk as apk

    package = make_stage(tmp_path / "stages", ARM)  # made first: only generate is counted
    flushed: list[Path] = []
    real = fsio.fsync_dir

    def recording(directory: Path) -> None:
        flushed.append(directory)
        real(directory)

    monkeypatch.setattr(fsio, "fsync_dir", recording)
    out = tmp_path / "apk"
    out.mkdir()
    output = apk.ApkChannel().generate(package, out)
    parents = {path.parent for path in output.files}
    assert parents <= set(flushed)  # durable: each directory holding a new file was flushed
    assert len(flushed) == len(set(flushed)), flushed  # and once, not once per file
