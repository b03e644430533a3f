"""The Android module's <uses-native-library> declarations: every library beyond the NDK's that
an Android target lets a runtime need (FastRPC, a vendor OpenCL), the same for every ABI, and
an undeclarable one refused. The `apk` test reads them back from an APK with aapt2."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from ortbundle._core.errors import ConfigError
from ortbundle.channels import ChannelOutput, PackageInput
from ortbundle.channels.apk import ApkChannel
from ortbundle.config.targets import ExternalGroup, get_target
from ortbundle.stage.closure import ExternalLibrary
from tests.helpers.apk import assemble, find_tools
from tests.test_channel_apk import ARM, MAIN, QNN, X86, make_stage

GROUPS = (
    *get_target(ARM).externals,  # bionic (system), graphics (NDK libraries), cdsp (FastRPC)
    ExternalGroup("vendor-opencl", "driver", ("libOpenCL.so",), "a vendor OpenCL", optional=True),
    ExternalGroup("vendor-npu", "toolkit", ("libvendornpu.so", "libvendornpu_*.so"), "an NPU"),
)
DECLARED = {"libOpenCL.so", "libadsprpc.so", "libcdsprpc.so", "libvendornpu.so"}
DECLARATION = re.compile(
    r'<uses-native-library android:name="([^"]+)" android:required="(true|false)" />'
)


def _with_groups(package: PackageInput, *externals: ExternalLibrary) -> PackageInput:
    return replace(package, android_groups=GROUPS, externals=package.externals + externals)


def _generate_both(root: Path, *externals: ExternalLibrary) -> dict[str, ChannelOutput]:
    out = root / "packaging" / "apk"
    out.mkdir(parents=True)
    return {
        target: ApkChannel().generate(
            _with_groups(make_stage(root / "stages", target), *externals), out
        )
        for target in (ARM, X86)
    }


def _declared(module: Path) -> dict[str, str]:
    manifest = (module / "src/main/AndroidManifest.xml").read_text("utf-8")
    return dict(DECLARATION.findall(manifest))


def test_every_library_beyond_the_ndk_is_declared_not_required(tmp_path: Path) -> None:
    opencl = ExternalLibrary(
        "libOpenCL.so", "vendor-opencl", "driver", "", (f"runtimes/{QNN}/libonnxruntime.so",)
    )
    outputs = _generate_both(tmp_path, opencl)
    module = outputs[ARM].directory / "runtime-loader"
    declared = _declared(module)
    # FastRPC and the vendor libraries; not the NDK's (libEGL, libvulkan…), not a glob
    assert set(declared) == DECLARED
    # not required: the app installs everywhere, RuntimeLoader skips the runtime instead
    assert set(declared.values()) == {"false"}


def test_the_declarations_come_from_the_groups_not_from_one_abis_stage(tmp_path: Path) -> None:
    """x86_64 needs none of them, arm64 one: the shared manifest is the same for both (the
    second ABI written would otherwise be refused, or a release's runners disagree)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    arm = make_stage(tmp_path / "a", ARM)
    opencl = ExternalLibrary("libOpenCL.so", "vendor-opencl", "driver", "", ("runtimes/x/y.so",))
    out_a, out_b = tmp_path / "a" / "apk", tmp_path / "b" / "apk"
    out_a.mkdir()
    out_b.mkdir()
    ApkChannel().generate(_with_groups(arm, opencl), out_a)
    ApkChannel().generate(_with_groups(make_stage(tmp_path / "b", X86)), out_b)
    manifest = f"{MAIN}/AndroidManifest.xml"
    assert (out_a / manifest).read_bytes() == (out_b / manifest).read_bytes()


def test_without_the_build_groups_the_tool_data_declares_fastrpc(tmp_path: Path) -> None:
    out = tmp_path / "apk"
    out.mkdir()
    ApkChannel().generate(make_stage(tmp_path / "stages", ARM), out)
    assert _declared(out / "runtime-loader") == {"libcdsprpc.so": "false", "libadsprpc.so": "false"}


def test_a_library_only_a_glob_names_is_refused(tmp_path: Path) -> None:
    user = f"runtimes/{QNN}/libonnxruntime.so"
    npu = ExternalLibrary("libvendornpu_v2.so", "vendor-npu", "toolkit", "", (user,))
    with pytest.raises(ConfigError) as raised:
        _generate_both(tmp_path, npu)
    message = str(raised.value)
    assert "libvendornpu_v2.so (external group vendor-npu)" in message and user in message
    assert "name libvendornpu_v2.so exactly" in message


@pytest.mark.apk
def test_aapt2_reads_the_declarations_in_the_apk(tmp_path: Path) -> None:
    tools = find_tools()
    outputs = _generate_both(tmp_path)
    module = outputs[ARM].directory / "runtime-loader"
    apk = assemble(module, tmp_path / "host", tools)
    dump = tools.run(
        "aapt2", "dump", "xmltree", "--file", "AndroidManifest.xml", str(apk.signed)
    ).stdout
    found: dict[str, str] = {}
    for block in dump.split("E: uses-native-library")[1:]:
        name = re.search(
            r'A: http://schemas.android.com/apk/res/android:name\(0x[0-9a-f]+\)="([^"]+)"', block
        )
        required = re.search(
            r"A: http://schemas.android.com/apk/res/android:required\(0x[0-9a-f]+\)=(\S+)", block
        )
        assert name and required, block
        found[name.group(1)] = required.group(1)
    assert set(found) == DECLARED
    assert set(found.values()) == {"false"}, found
