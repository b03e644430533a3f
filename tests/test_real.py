"""The real tier: the default product from the real pinned wheels (downloaded once, then cached)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from ortbundle.config.targets import get_target
from ortbundle.pipeline.build import DEFAULT_PRODUCT
from ortbundle.pipeline.result import BuildResult
from ortbundle.stage.binaries import inspect
from ortbundle.stage.system import runtime_system
from tests.helpers.bite import each
from tests.helpers.real import (
    KEPT_FILES,
    assert_every_needed_library_resolves,
    assert_every_staged_byte_is_attributed,
    assert_exact_kept_file_sets,
    build_product,
    target_result,
)

pytestmark = pytest.mark.real

EXPECTED = {
    **KEPT_FILES,
    # Microsoft's stock 1.29.0 AAR (via npm), renamed so the QNN build can ship beside it
    ("android-arm64-v8a", "android-generic"): {"libonnxruntime_generic.so"},
    ("android-x86_64", "android-generic"): {"libonnxruntime_generic.so"},
    # Linux on Arm: the stock core, and the WebGPU plugin EP registered with it
    ("linux-aarch64", "stock"): {
        "libonnxruntime.so.1.32.0",
        "libonnxruntime.so.1 -> libonnxruntime.so.1.32.0",
        "libonnxruntime_providers_shared.so",
    },
    ("linux-aarch64", "ep-webgpu"): {"libonnxruntime_providers_webgpu.so"},
}
# the seed's pruned sizes, in MiB (seeds/inference-backends.md §3.2): 81 + 31 Linux, 67 + 42 Windows
EXPECTED_MIB = {
    ("linux-x86_64", "openvino"): 81,
    ("linux-x86_64", "webgpu"): 31,
    ("windows-x86_64", "openvino"): 67,
    ("windows-x86_64", "webgpu"): 42,
    ("windows-arm64", "stock"): 19.9,
    ("windows-arm64", "ep-webgpu"): 33.7,
    ("linux-aarch64", "stock"): 26.1,
    ("linux-aarch64", "ep-webgpu"): 13.2,
    # measured: the AAR's 32,120,992 / 38,473,056-byte libraries, plus patchelf's new .dynstr
    ("android-arm64-v8a", "android-generic"): 30.6,
    ("android-x86_64", "android-generic"): 36.7,
    # measured 2026-12-03: the 35,272,344-byte dylib, re-signed after its rpath edit
    ("macos-arm64", "stock-macos"): 33.3,
}


@pytest.fixture(scope="module")
def real_build(tmp_path_factory: pytest.TempPathFactory) -> BuildResult:
    return build_product(tmp_path_factory, DEFAULT_PRODUCT)


def test_exact_kept_file_sets(real_build: BuildResult) -> None:
    assert_exact_kept_file_sets(
        real_build, EXPECTED, EXPECTED_MIB, key=lambda runtime: runtime.runtime, tolerance=1
    )


def test_no_python_binding_or_dropped_plugin_is_staged(real_build: BuildResult) -> None:
    forbidden = (
        "pybind",
        ".pyd",
        "cpu_plugin",
        "npu_plugin",
        "openvino_c",
        "tensorflow",
        "paddle",
        "pytorch",
        "jax",
        "auto_batch",
        "tbbbind",
        "tbbmalloc_proxy",
    )
    for target in each(real_build.targets, "targets"):
        for path in each(target.stage.rglob("*"), "staged files"):
            assert not any(word in path.name for word in forbidden), path


def test_every_needed_library_resolves(real_build: BuildResult) -> None:
    """Re-read every staged library from disk and resolve each needed name independently."""
    assert_every_needed_library_resolves(real_build, payloads=())


def test_linux_licence_texts_come_from_the_openvino_wheel(real_build: BuildResult) -> None:
    linux = target_result(real_build, "linux-x86_64")
    origins = {t.path: t.origin for t in linux.texts}
    assert origins["licenses/openvino/LICENSE"].startswith("openvino-windows:openvino-2025.4.1")
    assert "licenses/onetbb/onetbb_third-party-programs.txt" in origins
    text = (linux.stage / "licenses/openvino/LICENSE").read_text()
    assert "Apache License" in text


@pytest.mark.parametrize(("runtime", "version"), [("openvino", "1.24.1"), ("webgpu", "1.27.0")])
def test_loader_opens_the_real_linux_runtimes(
    real_build: BuildResult, runtime: str, version: str
) -> None:
    """Run the shipped loader from the staged tree, as the application would."""
    import subprocess
    import sys

    stage = target_result(real_build, "linux-x86_64").stage
    env = dict(os.environ, DARKROOM_ORT_DIR=f"runtimes/{runtime}")
    out = subprocess.run(
        [sys.executable, str(stage / "runtime_loader.py"), "--open", "--verify", "--json"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    assert f'"loaded_version": "{version}"' in out


def test_loader_refuses_a_version_the_index_does_not_claim(
    real_build: BuildResult, tmp_path: Path
) -> None:
    import json

    from ortbundle.payload.loader import LoaderError, open_runtime

    stage = target_result(real_build, "linux-x86_64").stage
    (tmp_path / "runtimes").symlink_to(stage / "runtimes")
    index = json.loads((stage / "runtimes.json").read_text())
    webgpu = next(r for r in index["runtimes"] if r["name"] == "webgpu")
    webgpu["ort_version"] = "9.9.9"
    with pytest.raises(LoaderError, match="reports ONNX Runtime 1.27.0, runtimes.json says 9.9.9"):
        open_runtime(tmp_path, webgpu)


def test_audit_attributes_every_staged_byte(real_build: BuildResult) -> None:
    assert_every_staged_byte_is_attributed(real_build)


def test_linux_openvino_and_onetbb_texts_come_from_the_openvino_wheel(
    real_build: BuildResult,
) -> None:
    linux = target_result(real_build, "linux-x86_64")
    for name in ("openvino", "onetbb"):
        component = next(c for c in linux.licensing.components if c.name == name)
        assert component.expression == "Apache-2.0"
        # and protobuf's, which OpenVINO's ONNX frontend links in and no OpenVINO notice names
        extra = {"ort-linux:onnxruntime/ThirdPartyNotices.txt"} if name == "openvino" else set()
        assert component.texts and all(
            t.origin.startswith("openvino-windows:openvino-2025.4.1.dist-info/licenses/")
            or t.origin in extra
            for t in component.texts
        )
        assert all(s.pypi.project == "onnxruntime-openvino" for s in component.sources)
    notice = (linux.stage / "NOTICE").read_text()
    assert "openvino 2025.4.1\nLicence: Apache-2.0" in notice
    assert "licenses/onetbb/onetbb_third-party-programs.txt" in notice


def test_dxil_is_reported_as_waived_and_a_release_refuses_it(real_build: BuildResult) -> None:
    nsis = next(a for a in real_build.audits if a.channel == "nsis")
    dxil = next(c for c in nsis.components if c.name == "dxil")
    assert (dxil.status, dxil.text_present) == ("waived", False)
    assert dxil.expression == "LicenseRef-Microsoft-DXIL"
    assert [w.file for w in dxil.waivers] == ["runtimes/webgpu/dxil.dll"]
    assert nsis.passed  # a development build may carry it…
    release = nsis.__class__(nsis.channel, nsis.targets, nsis.components, (), release=True)
    assert not release.passed  # …a release may not
    assert any(  # …until a person signs the waiver off, and it says how
        f.startswith("dxil: waiver for runtimes/webgpu/dxil.dll is not signed off for a release")
        and "a person must read the terms of windows-x86_64/runtimes/webgpu/dxil.dll" in f
        for f in release.failures
    )
    # the versions the DLLs carry (PE version resources), not "bundled with …"
    dxc = next(c for c in nsis.components if c.name == "directx-shader-compiler")
    assert (dxc.version, dxil.version) == ("1.9.0.1", "1.8.2502.11")


def test_every_file_says_what_it_is_and_the_rules_still_hold(real_build: BuildResult) -> None:
    """Each shipped file's own evidence against its rule: the default product stays allowed
    (dxil aside). The Windows DLLs saying "All rights reserved" under a permissive claim are
    answered by their rules' confirmations, which a release still wants a person to sign."""
    for audit in real_build.audits:
        for c in audit.components:
            wanted = "waived" if c.name.startswith("dxil") else "ok"
            assert c.status == wanted, (audit.channel, c.name, c.problems)
    confirmed = {
        f.file.rsplit("/", 1)[-1]
        for audit in real_build.audits
        for c in audit.components
        for f, answered in c.claims.findings
        if answered
    }
    assert confirmed == {
        "onnxruntime.dll",
        "onnxruntime_providers_shared.dll",
        "onnxruntime_providers_openvino.dll",
        "onnxruntime_providers_webgpu.dll",
        "dxcompiler.dll",
        "tbb12.dll",
        "tbbmalloc.dll",
    }
    said = {
        (t.target, e.path): e.evidence
        for t in real_build.targets
        for c in t.licensing.components
        for e in c.evidence
    }
    openvino = said[("windows-x86_64", "runtimes/openvino/openvino.dll")]
    assert openvino.copyrights == ("Copyright (C) 2018-2025, Intel Corporation",)
    assert said[("windows-x86_64", "runtimes/webgpu/dxil.dll")].holders == (
        "Microsoft Corporation",
    )
    # no Linux, Android or macOS library carries a notice of its own; the third-party code
    # they link in is named from its own strings (lintian knows linux-aarch64's curl and Mbed
    # TLS; ONNX Runtime's ThirdPartyNotices names the rest), each named by a shipped notice
    quiet = [replace(ev, embedded=()) for (t, _), ev in said.items() if not t.startswith("windows")]
    assert quiet and not any(ev.says_anything for ev in quiet)
    embedding = {k: {e.name for e in ev.embedded} for k, ev in said.items() if ev.embedded}
    core = embedding[("linux-aarch64", "runtimes/stock/libonnxruntime.so.1.32.0")]
    assert {"curl", "mbedtls", "protobuf", "onnx", "abseil", "re2", "flatbuffers"} <= core
    webgpu = embedding[("linux-aarch64", "plugins/ep-webgpu/libonnxruntime_providers_webgpu.so")]
    assert {"curl", "mbedtls", "dawn"} <= webgpu
    frontend = ("linux-x86_64", "runtimes/openvino/libopenvino_onnx_frontend.so.2541")
    assert "protobuf" in embedding[frontend]
    unnamed = [
        (file, library)
        for audit in real_build.audits
        for c in audit.components
        for file, library, _, named in c.claims.embedded
        if not named
    ]
    assert unnamed == []  # every one is named by a notice its component ships
    nsis = next(a for a in real_build.audits if a.channel == "nsis")
    release = nsis.__class__(nsis.channel, nsis.targets, nsis.components, (), release=True)
    assert any("the confirmation of onnxruntime-webgpu's claim" in f for f in release.failures)


def test_packages_carry_exactly_the_staged_files(real_build: BuildResult) -> None:
    linux = target_result(real_build, "linux-x86_64")
    tarballs = sorted((real_build.version_dir / "packaging").glob("*/*.tar.gz"))
    assert {p.parent.name for p in tarballs} == {"arch", "flatpak"}
    with tarfile.open(tarballs[0]) as tar:
        members = {
            m.name.split("/", 1)[1]: m for m in tar.getmembers() if "/" in m.name and not m.isdir()
        }
    assert set(members) == {f.path for f in linux.files}
    assert tarballs[0].read_bytes() == tarballs[1].read_bytes()


def test_the_default_product_ships_real_models_gated_and_indexed(real_build: BuildResult) -> None:
    for target in each(real_build.targets, "targets"):
        index = json.loads((target.stage / "models.json").read_text())
        forms = {m["name"]: m["forms"][0] for m in index["models"]}
        assert set(forms) == {"sigmoid", "logreg-iris"}
        assert forms["sigmoid"]["opsets"] == {"ai.onnx": 9}
        assert forms["sigmoid"]["inputs"] == [
            {"name": "x", "type": "tensor(float)", "shape": [3, 4, 5]}
        ]
        assert forms["logreg-iris"]["outputs"][1]["type"] == "seq(map(int64,tensor(float)))"
        assert target.licensing.owner("models/sigmoid/f32.onnx").name == "sigmoid"


@pytest.mark.parametrize(
    ("target_name", "abi"), [("android-arm64-v8a", "arm64-v8a"), ("android-x86_64", "x86_64")]
)
def test_android_stock_runtime_is_renamed_with_its_soname_and_stays_16k_aligned(
    real_build: BuildResult, target_name: str, abi: str
) -> None:
    from ortbundle.stage.binaries.info import alignment_problem

    result = target_result(real_build, target_name)
    target = get_target(target_name)
    staged = result.stage / "runtimes/android-generic/libonnxruntime_generic.so"
    info = inspect(staged)
    assert info.soname == "libonnxruntime_generic.so"
    assert info.machine == target.machine and info.bits == 64
    assert alignment_problem(info, 0x4000) is None
    assert all(load.align >= 0x4000 for load in info.loads)
    assert set(info.needed) <= {"libc.so", "libm.so", "libdl.so", "liblog.so", "libandroid.so"}
    index = json.loads((result.stage / "runtimes.json").read_text())
    assert [r["name"] for r in index["runtimes"]] == ["android-generic"]
    module = real_build.version_dir / "packaging/apk/runtime-loader/src/main"
    shipped = module / "jniLibs" / abi / "libonnxruntime_generic.so"
    assert shipped.read_bytes() == staged.read_bytes()
    assert (module / "assets/ortbundle" / abi / "runtimes.json").is_file()
    owner = result.licensing.owner("runtimes/android-generic/libonnxruntime_generic.so")
    assert (owner.name, owner.expression) == ("onnxruntime-android", "MIT")


# --- the .deb and .rpm of the default product --------------------------------------------

LINUX_PREFIX = "/usr/lib/darkroom-onnxruntime"
LINUX_RUNTIMES = {"openvino": "1.24.1", "webgpu": "1.27.0"}


def _linux_package(real_build: BuildResult, channel: str) -> Path:
    (built,) = (real_build.version_dir / "packaging" / channel).glob(f"*.{channel}")
    return built


@pytest.mark.tools
def test_lintian_and_rpmlint_accept_the_real_packages(real_build: BuildResult) -> None:
    import re
    import shutil
    import subprocess

    if not all(shutil.which(t) for t in ("lintian", "rpmlint")):
        pytest.skip("lintian or rpmlint is not installed (Debian: apt-get install lintian rpmlint)")
    deb, rpm = _linux_package(real_build, "deb"), _linux_package(real_build, "rpm")
    lintian = subprocess.run(
        ["lintian", "--no-cfg", "--display-level", ">=warning", str(deb)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert not re.search(r"^[EW]: ", lintian.stdout, flags=re.MULTILINE), lintian.stdout
    assert lintian.returncode == 0, lintian.stdout + lintian.stderr
    (rpmlintrc,) = rpm.parent.glob("*.rpmlintrc")
    rpmlint = subprocess.run(
        ["rpmlint", "-r", str(rpmlintrc), str(rpm)], capture_output=True, text=True, check=False
    )
    assert " 0 errors," in rpmlint.stdout, rpmlint.stdout + rpmlint.stderr


@pytest.mark.tools
def test_the_real_packages_list_exactly_the_stage(real_build: BuildResult) -> None:
    import shutil

    from tests.helpers.linux_packages import deb_listing, rpm_listing, stage_listing

    if not all(shutil.which(t) for t in ("dpkg-deb", "rpm")):
        pytest.skip("dpkg-deb or rpm is not installed (Debian: apt-get install dpkg rpm)")
    expected = stage_listing(target_result(real_build, "linux-x86_64").files, LINUX_PREFIX)
    deb = deb_listing(_linux_package(real_build, "deb"))
    assert {e for e in deb if e[0].startswith(LINUX_PREFIX)} == expected
    rpm, _ = rpm_listing(_linux_package(real_build, "rpm"))
    assert {e for e in rpm if e[0].startswith(LINUX_PREFIX)} == expected


@pytest.mark.tools
def test_the_real_packages_install_and_the_loader_opens_each_runtime(
    real_build: BuildResult, tmp_path: Path
) -> None:
    import shutil
    import subprocess

    from tests.helpers.linux_packages import open_each_runtime

    if shutil.which("dpkg-deb") is None:
        pytest.skip("dpkg-deb is not installed (Debian: apt-get install dpkg)")
    subprocess.run(
        ["dpkg-deb", "-x", str(_linux_package(real_build, "deb")), str(tmp_path / "deb")],
        check=True,
    )
    open_each_runtime(
        tmp_path / "deb" / LINUX_PREFIX.lstrip("/"), "DARKROOM_ORT_DIR", LINUX_RUNTIMES
    )
    if shutil.which("rpm") is None or os.geteuid() != 0:
        pytest.skip("rpm --root needs rpm (Debian: apt-get install rpm) and root")
    root = tmp_path / "rpm"
    subprocess.run(["rpm", "--root", str(root), "--initdb"], check=True)
    subprocess.run(
        ["rpm", "--root", str(root), "-i", "--nodeps", str(_linux_package(real_build, "rpm"))],
        check=True,
    )
    open_each_runtime(root / LINUX_PREFIX.lstrip("/"), "DARKROOM_ORT_DIR", LINUX_RUNTIMES)


def _kept_only_wheel(wheel: Path, members: set[str], dest: Path, name: str) -> Path:
    """The pinned wheel cut down to the kept libraries (and its metadata), RECORD to match:
    what auditwheel reports is then exactly what the package ships."""
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / name
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(out, "w") as cut:
        names = [
            i.filename
            for i in source.infolist()
            if not i.is_dir()
            and (i.filename in members or ".dist-info/" in i.filename)
            and not i.filename.endswith(".dist-info/RECORD")
        ]
        for name in names:
            cut.writestr(name, source.read(name))
        record = next(n for n in source.namelist() if n.endswith(".dist-info/RECORD"))
        cut.writestr(record, "".join(f"{n},,\n" for n in [*names, record]))
    return out


def _family_maxima(versions: dict[str, list[str]]) -> set[tuple[str, str]]:
    """auditwheel's sets of version nodes per library, reduced to the highest per family."""
    best: dict[tuple[str, str], tuple[tuple[int, ...], str]] = {}
    for library, nodes in versions.items():
        for node in nodes:
            match = re.fullmatch(r"([A-Z]+)_([0-9][0-9.]*)", node)
            if match is None:
                continue
            key = tuple(int(p) for p in match.group(2).split("."))
            if (library, match.group(1)) not in best or key > best[(library, match.group(1))][0]:
                best[(library, match.group(1))] = (key, node)
    return {(library, node) for (library, _), (_, node) in best.items()}


@pytest.mark.parametrize("runtime", ["openvino", "webgpu"])
def test_symbol_version_maxima_match_auditwheel(
    real_build: BuildResult, runtime: str, tmp_path: Path
) -> None:
    """The peer tool, on the kept libraries of each pinned Linux wheel, finds the same highest
    version per system library, and the same manylinux tag, as the closure's own parse.

    `--ldpaths` names an empty directory: otherwise auditwheel resolves libOpenCL.so.1 on this
    host and folds that file's own needs in (Debian 12's needs GLIBC_2.34), which says how to
    graft the host's copy, not what the shipped libraries need. auditwheel also leaves the
    dynamic linker's versions (ld-linux-*) out by design; we keep them, so they are set aside
    here."""
    linux = target_result(real_build, "linux-x86_64")
    staged = next(s for s in linux.runtimes if s.runtime == runtime)
    recipe = real_build.plan.recipes[runtime]
    (source,) = {k.source for k in staged.closure.kept}  # each runtime comes from one wheel
    wheel = real_build.artifacts[recipe.sources[source].archive_sha256].path
    members = {k.member for k in staged.closure.kept}
    cut = _kept_only_wheel(wheel, members, tmp_path, recipe.sources[source].archive_name)
    nowhere = tmp_path / "no-system-libraries"
    nowhere.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "auditwheel", "show", "--json", "--ldpaths", str(nowhere), str(cut)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    report = json.loads(done.stdout)
    system = runtime_system(staged)
    ours = {(n.library, n.version) for n in system.needs if not n.library.startswith("ld-linux")}
    assert ours == _family_maxima(report["versioned_symbols"])
    assert f"{system.manylinux}_x86_64" == report["sym_tag"]
    # measured: both wheels' kept libraries need glibc 2.27 (libm.so.6 GLIBC_2.27), not the
    # manylinux_2_28 their file names claim
    assert system.glibc is not None and system.glibc.version == "2.27"
