"""The real tier for plugin EPs: manifests/darkroom-plugins.toml from the real pinned wheels.

The WebGPU core with the OpenVINO plugin EP on x64; Microsoft's stock core with the WebGPU and
QNN plugin EPs on Windows on Arm (docs/notes/plugin-ep-wheels.md, "Recipes").
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import zipfile
from importlib import resources
from pathlib import Path

import jsonschema
import pefile
import pytest

from ortbundle.fetch.archives import ZipArchive
from ortbundle.pipeline.result import BuildResult
from ortbundle.stage.binaries import inspect
from ortbundle.stage.binaries.info import role
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
PRODUCT = "darkroom-plugins"

# Every file of each runtime and plugin directory: libraries, SONAME links and payloads.
EXPECTED = {
    ("linux-x86_64", "runtimes/openvino"): KEPT_FILES["linux-x86_64", "openvino"],
    ("linux-x86_64", "runtimes/webgpu"): KEPT_FILES["linux-x86_64", "webgpu"],
    # the provider's .so, .so.1 and .so.1.8.1 are one file, kept once under its SONAME
    ("linux-x86_64", "plugins/ep-openvino"): {
        "libonnxruntime_providers_openvino_plugin.so.1",
        "libopenvino.so.2641",
        "libopenvino_auto_plugin.so",
        "libopenvino_hetero_plugin.so",
        "libopenvino_intel_gpu_plugin.so",
        "libopenvino_onnx_frontend.so.2641",
        "libtbb.so.12",
        "libtbbmalloc.so.2",
        "cache.json",
    },
    ("windows-x86_64", "runtimes/openvino"): KEPT_FILES["windows-x86_64", "openvino"],
    ("windows-x86_64", "runtimes/webgpu"): KEPT_FILES["windows-x86_64", "webgpu"],
    ("windows-x86_64", "plugins/ep-openvino"): {
        "onnxruntime_providers_openvino_plugin.dll",
        "openvino.dll",
        "openvino_auto_plugin.dll",
        "openvino_hetero_plugin.dll",
        "openvino_intel_gpu_plugin.dll",
        "openvino_onnx_frontend.dll",
        "tbb12.dll",
        "tbbmalloc.dll",
        "cache.json",
        "openvino_runtime.manifest",
    },
    ("macos-arm64", "runtimes/stock-macos"): KEPT_FILES["macos-arm64", "stock-macos"],
    ("macos-arm64", "plugins/ep-mlx"): {
        "libonnxruntime_mlx_ep.dylib",
        "libmlx.dylib",
        "libmlxc.dylib",
        "mlx.metallib",
    },
    ("windows-arm64", "runtimes/stock"): KEPT_FILES["windows-arm64", "stock"],
    ("windows-arm64", "plugins/ep-webgpu"): KEPT_FILES["windows-arm64", "ep-webgpu"],
    ("windows-arm64", "plugins/qnn"): {
        "onnxruntime_providers_qnn.dll",
        "QnnHtp.dll",
        "QnnHtpPrepare.dll",
        "QnnSystem.dll",
        "QnnHtpV68Stub.dll",
        "QnnHtpV73Stub.dll",
        "QnnHtpV81Stub.dll",
        "libQnnHtpV68Skel.so",
        "libQnnHtpV73Skel.so",
        "libQnnHtpV81Skel.so",
        "libqnnhtpv73.cat",
        "libqnnhtpv81.cat",
    },
}
# the pruned libraries (payloads not counted), in MiB, as measured on 2026-11-29
EXPECTED_MIB = {
    ("linux-x86_64", "runtimes/openvino"): 81.6,
    ("linux-x86_64", "runtimes/webgpu"): 30.5,
    ("linux-x86_64", "plugins/ep-openvino"): 70.5,
    ("windows-x86_64", "runtimes/openvino"): 67.4,
    ("windows-x86_64", "runtimes/webgpu"): 41.5,
    ("windows-x86_64", "plugins/ep-openvino"): 58.2,
    ("windows-arm64", "runtimes/stock"): 19.9,
    ("windows-arm64", "plugins/ep-webgpu"): 33.7,
    ("windows-arm64", "plugins/qnn"): 100.9,
    ("macos-arm64", "runtimes/stock-macos"): 33.3,
    ("macos-arm64", "plugins/ep-mlx"): 25.3,
}
# what a loader registers with which core: runtime -> plugin EPs, per target
PAIRS = {
    "linux-x86_64": {"openvino": [], "webgpu": ["ep-openvino"]},
    "windows-x86_64": {"openvino": [], "webgpu": ["ep-openvino"]},
    "windows-arm64": {"stock": ["ep-webgpu", "qnn"]},
    "macos-arm64": {"stock-macos": ["ep-mlx"]},
}
PLUGIN_FACTS = {  # registration name -> (factory EP name, oldest core, version)
    "ep-openvino": ("OpenVINOExecutionProvider", "1.23.0", "1.8.1"),
    "ep-webgpu": ("WebGpuExecutionProvider", "1.24.4", "0.4.0"),
    "qnn": ("QNNExecutionProvider", "1.24.2", "2.7.0"),
    "ep-mlx": ("MLXExecutionProvider", "1.31", "0.31.0"),
}
# payloads: data files and Hexagon DSP code, outside the host's library closure
NOT_HOST_LIBRARIES = (
    *("cache.json", "openvino_runtime.manifest", "libQnnHtpV*Skel.so", "*.cat"),
    "mlx.metallib",
)
CORE_NAMES = (
    "libonnxruntime.so*",
    "onnxruntime.dll",
    "libonnxruntime_providers_shared*",
    "onnxruntime_providers_shared.dll",
    "libonnxruntime.*.dylib",
)


@pytest.fixture(scope="module")
def plugins_build(tmp_path_factory: pytest.TempPathFactory) -> BuildResult:
    return build_product(tmp_path_factory, PRODUCT)


def test_exact_kept_file_sets(plugins_build: BuildResult) -> None:
    assert_exact_kept_file_sets(
        plugins_build, EXPECTED, EXPECTED_MIB, key=lambda staged: staged.directory, tolerance=0.5
    )


def test_no_onnxruntime_core_inside_any_plugin(plugins_build: BuildResult) -> None:
    for target in each(plugins_build.targets, "targets"):
        plugins = sorted((target.stage / "plugins").iterdir())
        assert plugins, target.target
        for directory in plugins:
            for path in directory.rglob("*"):
                name = path.name.lower()
                assert not any(fnmatch.fnmatchcase(name, g) for g in CORE_NAMES), path
        # …and every core sits under runtimes/, one per runtime directory
        for staged in target.runtimes:
            if staged.directory.startswith("plugins/"):
                entry = next(k for k in staged.closure.kept if k.name == staged.closure.entry)
                assert role(entry.info) == "plugin-ep", staged.closure.entry


def test_every_needed_library_resolves_in_its_own_directory(plugins_build: BuildResult) -> None:
    """Re-read every staged library from disk: a plugin resolves within its own directory or
    the target's externals, never from the core's."""
    assert_every_needed_library_resolves(plugins_build, payloads=NOT_HOST_LIBRARIES)


def test_hexagon_skels_are_dsp_code_shipped_beside_the_stubs(plugins_build: BuildResult) -> None:
    arm = target_result(plugins_build, "windows-arm64")
    qnn = arm.stage / "plugins/qnn"
    skels = sorted(qnn.glob("libQnnHtpV*Skel.so"))
    assert [p.name for p in skels] == [f"libQnnHtpV{v}Skel.so" for v in (68, 73, 81)]
    for skel in skels:
        info = inspect(skel)
        assert (info.format, info.machine, info.bits) == ("elf", "EM_QDSP6", 32), skel
        stub = qnn / skel.name.removeprefix("lib").replace("Skel.so", "Stub.dll")
        assert inspect(stub).machine == "ARM64"
        assert "libcdsprpc.dll" in inspect(stub).needed  # FastRPC, from the NPU driver
    assert not (qnn / "assets").exists()  # beside, where the provider looks for them
    for version in (73, 81):
        catalog = (qnn / f"libqnnhtpv{version}.cat").read_bytes()
        assert catalog[:1] == b"\x30"  # DER: the signed PKCS#7 catalog Windows checks
    kept = {k.name for s in arm.runtimes for k in s.closure.kept}
    assert not {p.name for p in skels} & kept  # payload, not part of the host closure


def test_every_staged_byte_is_attributed(plugins_build: BuildResult) -> None:
    assert_every_staged_byte_is_attributed(plugins_build)


def test_runtimes_json_lists_each_plugin_under_the_runtime_it_pairs_with(
    plugins_build: BuildResult,
) -> None:
    schema = json.loads(
        resources.files("ortbundle").joinpath("data/runtimes.schema.json").read_text()
    )
    for target in each(plugins_build.targets, "targets"):
        index = json.loads((target.stage / "runtimes.json").read_text())
        jsonschema.validate(index, schema)
        pairs = {
            r["name"]: [p["registration_name"] for p in r["plugin_eps"]] for r in index["runtimes"]
        }
        assert pairs == PAIRS[target.target]
        entries = {s.directory: s.closure.entry for s in target.runtimes}
        for runtime in index["runtimes"]:
            for plugin in runtime["plugin_eps"]:
                name = plugin["registration_name"]
                assert (plugin["ep_name"], plugin["min_core"], plugin["version"]) == PLUGIN_FACTS[
                    name
                ]
                assert plugin["library"] == f"plugins/{name}/{entries[f'plugins/{name}']}"
                assert (target.stage / plugin["library"]).is_file()


def test_qualcomm_pdf_is_the_qnn_runtime_text(plugins_build: BuildResult) -> None:
    arm = target_result(plugins_build, "windows-arm64")
    qualcomm = arm.licensing.owner("licenses/qnn-runtime/Qualcomm_LICENSE.pdf")
    assert (qualcomm.name, qualcomm.version) == ("qnn-runtime", "2.51.0")
    assert qualcomm.expression == "LicenseRef-Qualcomm-AI-Engine-Direct"
    assert [t.path for t in qualcomm.texts] == ["licenses/qnn-runtime/Qualcomm_LICENSE.pdf"]
    assert (arm.stage / qualcomm.texts[0].path).read_bytes().startswith(b"%PDF")
    # the wheel's "MIT" is the provider's licence, not the Qualcomm libraries'
    assert {f.path.removeprefix("plugins/qnn/") for f in qualcomm.files} == EXPECTED[
        ("windows-arm64", "plugins/qnn")
    ] - {"onnxruntime_providers_qnn.dll"}
    provider = arm.licensing.owner("plugins/qnn/onnxruntime_providers_qnn.dll")
    assert (provider.name, provider.expression) == ("onnxruntime-qnn", "MIT")
    notice = (arm.stage / "NOTICE").read_text()
    assert "qnn-runtime 2.51.0\nLicence: LicenseRef-Qualcomm-AI-Engine-Direct" in notice


def test_openvino_runtime_manifest_ships_verbatim_beside_the_dlls(
    plugins_build: BuildResult,
) -> None:
    """Every bundled DLL depends on the private assembly openvino_runtime 1.8.1.0; its manifest
    ships unedited and still names the DLLs the pruning left behind (none of them imported by a
    kept DLL: the closure proves it)."""
    win = target_result(plugins_build, "windows-x86_64")
    directory = win.stage / "plugins/ep-openvino"
    shipped = (directory / "openvino_runtime.manifest").read_bytes()
    source = plugins_build.plan.recipes["ep-openvino"].sources["ep-windows"]
    with zipfile.ZipFile(plugins_build.artifacts[source.sha256].path) as wheel:
        assert shipped == wheel.read("onnxruntime_ep_openvino/openvino_runtime.manifest")
    listed = set(re.findall(r'<file name="([^"]+)"', shipped.decode()))
    staged = {p.name for p in directory.glob("*.dll")} - {
        "onnxruntime_providers_openvino_plugin.dll"
    }
    assert staged <= listed
    assert listed - staged == {
        "openvino_auto_batch_plugin.dll",
        "openvino_intel_cpu_plugin.dll",
        "openvino_intel_npu_plugin.dll",
        "openvino_intel_npu_compiler.dll",
        "openvino_intel_npu_compiler_loader.dll",
        "openvino_intel_npu_vm_runtime.dll",
        "openvino_ir_frontend.dll",
        "tbbbind_2_5.dll",
        "tbbmalloc_proxy.dll",
    }
    for dll in sorted(directory.glob("*.dll")):
        image = pefile.PE(str(dll), fast_load=True)
        image.parse_data_directories(
            directories=[pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_RESOURCE"]]
        )
        manifests = [
            image.get_data(leaf.data.struct.OffsetToData, leaf.data.struct.Size)
            for kind in image.DIRECTORY_ENTRY_RESOURCE.entries
            if kind.id == pefile.RESOURCE_TYPE["RT_MANIFEST"]
            for entry in kind.directory.entries
            if entry.id == 2  # ISOLATIONAWARE_MANIFEST_RESOURCE_ID: used when the DLL loads
            for leaf in entry.directory.entries
        ]
        assert len(manifests) == 1, dll
        assert b'name="openvino_runtime" version="1.8.1.0"' in manifests[0], dll
        image.close()


def test_the_windows_plugin_wheels_dlls_signed_after_record_are_read_with_record_checked(
    plugins_build: BuildResult, tmp_path: Path
) -> None:
    """The vendor signed every DLL after writing RECORD: the check reads each as its recorded
    file with the signature appended, so the recipe declares no stale RECORD."""
    source = plugins_build.plan.recipes["ep-openvino"].sources["ep-windows"]
    assert source.stale_record is None
    path = plugins_build.artifacts[source.sha256].path
    member = "onnxruntime_ep_openvino/openvino.dll"
    with ZipArchive(path, label=source.filename, check_record=True) as wheel:
        got = wheel.extract(member, tmp_path / "openvino.dll")
        assert wheel.signed_after_record == [member]
        assert got.sha256 != wheel.members[member].record_sha256  # it is signed, as shipped


def test_plugin_openvino_and_onetbb_texts_come_from_the_openvino_wheel(
    plugins_build: BuildResult,
) -> None:
    for name, onetbb in (("linux-x86_64", "2021.13.1"), ("windows-x86_64", "2021.13.3")):
        result = target_result(plugins_build, name)
        staged = next(s for s in result.runtimes if s.runtime == "ep-openvino")
        plugin = result.licensing.owner(f"plugins/ep-openvino/{staged.closure.entry}")
        assert (plugin.name, plugin.expression) == ("onnxruntime-ep-openvino", "MIT AND Apache-2.0")
        for component, version in (("openvino-2026.4.1", "2026.4.1"), (f"onetbb-{onetbb}", onetbb)):
            use = next(c for c in result.licensing.components if c.name == component)
            assert (use.version, use.expression) == (version, "Apache-2.0")
            assert use.texts and all(
                t.origin.startswith("openvino:openvino-2026.4.1.dist-info/licenses/")
                for t in use.texts
            )
        # the runtime's own OpenVINO 2025.4.1 stays a separate component beside it
        runtime_tbb = "tbb12.dll" if name.startswith("windows") else "libtbb.so.12"
        assert result.licensing.owner(f"runtimes/openvino/{runtime_tbb}").name == "onetbb"


def test_dxil_ships_attributed_without_text_and_only_waived(plugins_build: BuildResult) -> None:
    arm = target_result(plugins_build, "windows-arm64")
    dxil = arm.licensing.owner("plugins/ep-webgpu/dxil.dll")
    assert (dxil.expression, dxil.texts) == ("LicenseRef-Microsoft-DXIL", ())
    nsis = next(a for a in plugins_build.audits if a.channel == "nsis")
    waived = {w.file for c in nsis.waived for w in c.waivers}
    # the x64 installer's WebGPU runtime and the arm64 installer's WebGPU plugin: nothing else
    assert waived == {"runtimes/webgpu/dxil.dll", "plugins/ep-webgpu/dxil.dll"}


def test_the_arm64_core_loads_the_models(plugins_build: BuildResult) -> None:
    arm = target_result(plugins_build, "windows-arm64")
    index = json.loads((arm.stage / "models.json").read_text())
    assert {m["name"]: m["backends"] for m in index["models"]} == {
        "sigmoid": {"stock": "f32"},
        "logreg-iris": {"stock": "f32"},
    }


def test_the_shipped_loader_registers_the_real_plugin_with_the_real_core(
    plugins_build: BuildResult,
) -> None:
    """runtime_loader.py --open, in a fresh process: the WebGPU core 1.27.0 loads, and
    RegisterExecutionProviderLibrary accepts the pruned OpenVINO plugin EP directory."""
    import subprocess
    import sys

    linux = target_result(plugins_build, "linux-x86_64")
    done = subprocess.run(
        [sys.executable, "runtime_loader.py", "--open", "--json"],
        cwd=linux.stage,
        env={**os.environ, "DARKROOM_ORT_DIR": "runtimes/webgpu"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    decision = json.loads(done.stdout)
    assert decision["loaded_version"] == "1.27.0"
    (plugin,) = decision["plugins"]
    assert plugin["name"] == "ep-openvino"
    assert plugin["ep_name"] == "OpenVINOExecutionProvider"
    assert plugin["library"].startswith("plugins/ep-openvino/libonnxruntime_providers_openvino")
