"""The oldest system a package runs on: read from synthetic ELF and PE files with chosen version
needs, mapped to glibc / GCC / Windows / Android minimums, held against a product's `[system]`,
and carried into runtimes.json, the loader, the Arch package, the installer, the apk and the SBOM.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tomllib
from collections.abc import Mapping
from pathlib import Path

import jsonschema
import pytest

from ortbundle._core.errors import ClosureError, ConfigError
from ortbundle._core.progress import Reporter
from ortbundle.channels import PackageInput
from ortbundle.channels.apk import ApkChannel
from ortbundle.channels.nsis import NsisChannel
from ortbundle.config.products import SystemSpec, load_product
from ortbundle.payload.loader import Hardware, choose, detect, main, too_old
from ortbundle.payload.loader.hardware import Gpu
from ortbundle.pipeline.build import build
from ortbundle.stage.binaries import inspect
from ortbundle.stage.binaries.baseline import (
    SystemBaseline,
    baseline,
    render_dependency,
    version_maxima,
)
from ortbundle.stage.binaries.info import BinaryInfo
from tests.helpers.elf import make_elf
from tests.helpers.packages import make_package_input
from tests.helpers.pe import make_pe
from tests.helpers.project import CORE_EXPORTS, CPU, FakeProject, linux_members, windows_members

SCHEMA = Path(__file__).resolve().parents[1] / "ortbundle" / "data" / "runtimes.schema.json"

CORE_NEEDS = [
    ("libc.so.6", ["GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.34", "GLIBC_PRIVATE"]),
    ("libstdc++.so.6", ["GLIBCXX_3.4", "GLIBCXX_3.4.30", "CXXABI_1.3.13"]),
    ("libgcc_s.so.1", ["GCC_3.0", "GCC_4.2.0"]),
]
DEP_NEEDS = [("libc.so.6", ["GLIBC_2.2.5", "GLIBC_2.33"]), ("libm.so.6", ["GLIBC_2.29"])]


def _elf(tmp_path: Path, name: str, **kwargs: object) -> BinaryInfo:
    path = tmp_path / name
    path.write_bytes(make_elf(soname=name, **kwargs))  # type: ignore[arg-type]
    return inspect(path)


def _pe(tmp_path: Path, name: str, **kwargs: object) -> BinaryInfo:
    path = tmp_path / name
    path.write_bytes(make_pe(**kwargs))  # type: ignore[arg-type]
    return inspect(path)


# --- ELF: symbol versions -------------------------------------------------------------------


def test_version_maxima_per_library_and_family(tmp_path: Path) -> None:
    core = _elf(tmp_path, "libcore.so", needed=("libc.so.6",), version_needs=CORE_NEEDS)
    dep = _elf(tmp_path, "libdep.so", needed=("libc.so.6",), version_needs=DEP_NEEDS)
    needs = {(n.library, n.version): n.needed_by for n in version_maxima([("a", core), ("b", dep)])}
    assert needs == {
        ("libc.so.6", "GLIBC_2.34"): ("a",),  # 2.34 > 2.33 > 2.17 > 2.2.5 (not as strings)
        ("libm.so.6", "GLIBC_2.29"): ("b",),
        ("libstdc++.so.6", "GLIBCXX_3.4.30"): ("a",),
        ("libstdc++.so.6", "CXXABI_1.3.13"): ("a",),
        ("libgcc_s.so.1", "GCC_4.2.0"): ("a",),
    }  # GLIBC_PRIVATE says nothing about a release


def test_glibc_gcc_and_manylinux_from_the_needs(tmp_path: Path) -> None:
    core = _elf(tmp_path, "libcore.so", needed=("libc.so.6",), version_needs=CORE_NEEDS)
    system = baseline([("libcore.so", core)])
    assert system.glibc is not None and system.glibc.version == "2.34"
    assert "libc.so.6 GLIBC_2.34" in system.glibc.why and "libcore.so" in system.glibc.why
    assert system.manylinux == "manylinux_2_34"
    assert system.gcc is not None and system.gcc.version == "12.1.0"  # GLIBCXX_3.4.30
    assert system.describe().startswith("glibc ≥ 2.34 (manylinux_2_34), libstdc++ from GCC ≥ 12")


@pytest.mark.parametrize(
    ("nodes", "gcc"),
    [
        (["GLIBCXX_3.4.29", "CXXABI_1.3.13"], "11.1.0"),
        (["GLIBCXX_3.4.22", "CXXABI_1.3.15"], "14.1.0"),  # the CXXABI need decides
        (["GLIBCXX_3.4.31"], "13.1.0"),
        (["GLIBCXX_3.4.99"], "14.1.0+"),  # newer than the table: said, not guessed
    ],
)
def test_libstdcxx_versions_map_to_gcc_releases(tmp_path: Path, nodes: list[str], gcc: str) -> None:
    lib = _elf(tmp_path, "libx.so", version_needs=[("libstdc++.so.6", nodes)])
    system = baseline([("libx.so", lib)])
    assert system.gcc is not None and system.gcc.version == gcc
    if gcc.endswith("+"):
        assert "newer than baselines.toml knows" in system.gcc.why
        assert render_dependency("gcc-libs", "gcc-libs", system, "arch") == "gcc-libs"


def test_opencl_need(tmp_path: Path) -> None:
    lib = _elf(
        tmp_path, "libgpu.so", version_needs=[("libOpenCL.so.1", ["OPENCL_1.2", "OPENCL_2.0"])]
    )
    system = baseline([("libgpu.so", lib)])
    assert system.opencl is not None and system.opencl.version == "2.0"


def test_android_api_from_the_note_and_from_bionic_version_nodes(tmp_path: Path) -> None:
    noted = _elf(tmp_path, "libn.so", machine="EM_AARCH64", android_api=24)
    assert noted.android_api == 24
    bionic = _elf(
        tmp_path, "libb.so", machine="EM_AARCH64", version_needs=[("libc.so", ["LIBC", "LIBC_P"])]
    )
    system = baseline([("libn.so", noted), ("libb.so", bionic)])
    assert system.android_api is not None and system.android_api.version == "28"
    assert "LIBC_P" in system.android_api.why
    assert baseline([("libn.so", noted)]).as_json()["android_api"] == 24
    assert _elf(tmp_path, "libplain.so").android_api == 0


def test_binary_info_survives_the_memo_json(tmp_path: Path) -> None:
    """The runtime memo stores BinaryInfo as JSON: the new pairs come back as tuples."""
    info = _elf(tmp_path, "libcore.so", version_needs=CORE_NEEDS, android_api=26)
    pe = _pe(
        tmp_path, "a.dll", imports=("KERNEL32.dll",), functions={"KERNEL32.dll": ["CreateFile2"]}
    )
    for original in (info, pe):
        # what incremental.py does: asdict, JSON, then the fields it knows back to tuples
        data = json.loads(json.dumps(dataclasses.asdict(original)))
        for key in ("needed", "delay_needed", "runpath"):
            data[key] = tuple(data[key])
        data["loads"] = original.loads
        assert BinaryInfo(**data) == original
    assert pe.versioned_imports == (("kernel32.dll", "CreateFile2"),)


# --- PE: Windows and the Visual C++ runtime ------------------------------------------------


def test_windows_version_from_the_subsystem_version(tmp_path: Path) -> None:
    info = _pe(tmp_path, "a.dll", imports=("KERNEL32.dll",), subsystem_version=(10, 0))
    assert (info.os_version, info.subsystem_version) == ("6.0", "10.0")
    system = baseline([("a.dll", info)])
    assert system.windows is not None and system.windows.version == "10.0"
    assert "subsystem version 10.0" in system.windows.why
    assert "Windows 10" in system.describe()


def test_windows_version_from_imports_and_api_sets(tmp_path: Path) -> None:
    info = _pe(
        tmp_path,
        "a.dll",
        imports=("KERNEL32.dll", "api-ms-win-core-synch-l1-2-0.dll"),
        functions={"KERNEL32.dll": ["CreateFileW", "GetSystemTimePreciseAsFileTime"]},
        os_version=(6, 1),
        subsystem_version=(6, 1),
    )
    assert info.versioned_imports == (("kernel32.dll", "GetSystemTimePreciseAsFileTime"),)
    system = baseline([("a.dll", info)])
    assert system.windows is not None and system.windows.version == "6.2"
    plain = _pe(
        tmp_path, "b.dll", imports=("KERNEL32.dll",), os_version=(6, 1), subsystem_version=(6, 1)
    )
    assert baseline([("b.dll", plain)]).windows.version == "6.1"  # type: ignore[union-attr]


def test_a_dll_only_newer_windows_has_raises_the_oldest_windows(tmp_path: Path) -> None:
    """DirectML.dll imports d3d12.dll by ordinal, no dated function: the DLL alone says
    Windows 10, where its loader would refuse it on 8.1 (baselines.toml [windows.dlls])."""
    directml = _pe(
        tmp_path,
        "DirectML.dll",
        imports=("KERNEL32.dll", "D3D12.dll", "dxgi.dll"),
        os_version=(6, 3),
        subsystem_version=(6, 3),
    )
    system = baseline([("DirectML.dll", directml)])
    assert system.windows is not None and system.windows.version == "10.0"
    assert system.windows.why == "DirectML.dll imports D3D12.dll"
    delayed = _pe(tmp_path, "b.dll", imports=("KERNEL32.dll",), delay_imports=("dxcore.dll",))
    assert baseline([("b.dll", delayed)]).windows.version == "10.0"  # type: ignore[union-attr]


def test_the_dll_table_is_checked_by_the_schema() -> None:
    from ortbundle.config.schema import problems_in

    source = Path(__file__).resolve().parents[1] / "ortbundle" / "data" / "baselines.toml"
    data = tomllib.loads(source.read_text("utf-8"))
    assert data["windows"]["dlls"]["directml.dll"] == "10.0"
    data["windows"]["dlls"] = {"D3D12.dll": "10.0", "dxcore.dll": "ten"}
    found = {(p.key, p.message) for p in problems_in("baselines.toml", data, "baselines-data")}
    assert len(found) == 2, found
    assert any("D3D12.dll" in key for key, _ in found)
    assert any("NT version" in message for _, message in found)


def test_the_windows_dll_list_is_checked_by_the_schema() -> None:
    """windows-system-dlls.toml names its documented source and each DLL's page; a DLL in
    another case, a `since` that is no NT version or a DLL without its page is refused."""
    from ortbundle.config.schema import problems_in

    source = Path(__file__).resolve().parents[1] / "ortbundle/data/windows-system-dlls.toml"
    data = tomllib.loads(source.read_text("utf-8"))
    assert "Microsoft Learn" in data["source"]
    assert data["dlls"]["dxcore.dll"]["since"] == data["dlls"]["d3d12.dll"]["since"] == "10.0"
    assert problems_in("w.toml", data, "windows-system-dlls-data") == []
    data["dlls"] = {"WINHTTP.dll": {"doc": "WinHttpOpen"}, "x.dll": {"since": "ten"}}
    del data["source"]
    found = {(p.key, p.message) for p in problems_in("w.toml", data, "windows-system-dlls-data")}
    assert any("WINHTTP.dll" in key for key, _ in found), found
    assert any("NT version" in message for _, message in found), found
    assert any("doc" in key or "doc" in message for key, message in found), found
    assert any("source" in key or "source" in message for key, message in found), found


def test_msvc_runtime_from_the_import_names(tmp_path: Path) -> None:
    info = _pe(tmp_path, "a.dll", imports=("MSVCP140.dll", "MSVCP140_ATOMIC_WAIT.dll"))
    system = baseline([("a.dll", info)])
    assert system.msvc is not None and system.msvc.version == "14.28"
    assert "MSVCP140_ATOMIC_WAIT.dll" in system.msvc.why


# --- rendering ------------------------------------------------------------------------------


def test_render_dependency_in_each_channel_syntax(tmp_path: Path) -> None:
    core = _elf(tmp_path, "libcore.so", version_needs=CORE_NEEDS)
    system = baseline([("libcore.so", core)])
    assert render_dependency("glibc", "glibc", system, "arch") == "glibc>=2.34"
    assert render_dependency("libc6", "glibc", system, "deb") == "libc6 (>= 2.34)"
    assert render_dependency("glibc", "glibc", system, "rpm") == "glibc >= 2.34"
    assert render_dependency("gcc-libs", "gcc-libs", system, "arch") == "gcc-libs>=12.1.0"
    assert render_dependency("zlib", "zlib", system, "arch") == "zlib"
    assert render_dependency("glibc", "glibc", SystemBaseline(), "arch") == "glibc"
    with pytest.raises(ValueError, match="unknown dependency style"):
        render_dependency("glibc", "glibc", system, "nix")


# --- the product's promise -------------------------------------------------------------------


def _manifest(tmp_path: Path, system: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(
        '[product]\nname = "p"\nversion = "1"\ndescription = "d"\nurl = "https://e.invalid/"\n'
        'targets = ["linux-x86_64"]\nruntimes = ["r"]\n' + system
    )
    return path


def test_product_system_table(tmp_path: Path) -> None:
    spec = load_product(
        _manifest(tmp_path, '[system]\nglibc = "2.28"\nwindows = "10.0"\nandroid_api = 26\n')
    ).system
    assert (spec.glibc, spec.windows, spec.android_api, spec.on_newer) == (
        "2.28",
        "10.0",
        26,
        "error",
    )
    assert load_product(_manifest(tmp_path, "")).system.glibc is None


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('glibc = "new"', "dotted version"),
        ("android_api = 0", "positive integer"),
        ('on_newer = "ignore"', '"error" or "warn"'),
        ('glbc = "2.28"', "`glbc`: unknown key in \\[system\\] .* did you mean `glibc`"),
    ],
)
def test_product_system_table_refuses_bad_values(tmp_path: Path, table: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        load_product(_manifest(tmp_path, f"[system]\n{table}\n"))
    assert caught.value.exit_code == 2


# --- the build, end to end on synthetic wheels ----------------------------------------------


def _versioned_linux() -> dict[str, bytes]:
    members = linux_members()
    members["onnxruntime/capi/libonnxruntime.so.1.0.0"] = make_elf(
        soname="libonnxruntime.so.1",
        needed=("libdep.so.2", "libc.so.6", "libstdc++.so.6"),
        runpath="$ORIGIN",
        payload=b"core" * 2000,
        version_needs=CORE_NEEDS,
        exports=CORE_EXPORTS,
        rodata=CPU,
    )
    return members


def _versioned_windows() -> dict[str, bytes]:
    members = windows_members()
    members["onnxruntime/capi/onnxruntime.dll"] = make_pe(
        imports=("KERNEL32.dll", "dep.dll", "MSVCP140.dll"),
        delay_imports=("delayed.dll",),
        subsystem_version=(10, 0),
        exports=CORE_EXPORTS,
        rodata=CPU,
    )
    return members


def test_a_runtime_needing_a_newer_glibc_than_the_product_supports_stops_the_build(
    fake: FakeProject, reporter: Reporter
) -> None:
    fake.linux = _versioned_linux()
    fake.product_extra = '[system]\nglibc = "2.28"\n'
    fake.write()
    with pytest.raises(ClosureError) as caught:
        build(fake.project, fake.options(), reporter)
    assert caught.value.exit_code == 8
    text = str(caught.value)
    assert "glibc 2.34" in text and "libc.so.6 GLIBC_2.34" in text
    assert "libonnxruntime.so.1.0.0" in text and "2.28" in text
    assert caught.value.component == "fake" and caught.value.target == "linux-x86_64"
    assert not (fake.root / "dist" / "fakeproduct").exists()  # nothing published


def test_a_windows_need_above_the_promise_stops_the_build(
    fake: FakeProject, reporter: Reporter
) -> None:
    fake.windows = _versioned_windows()
    fake.product_extra = '[system]\nwindows = "6.1"\n'
    fake.write()
    with pytest.raises(ClosureError, match=r"Windows 10\.0 \(onnxruntime.dll declares subsystem"):
        build(fake.project, fake.options(), reporter)


def test_the_baseline_reaches_every_output(fake: FakeProject, reporter: Reporter) -> None:
    fake.linux = _versioned_linux()
    fake.windows = _versioned_windows()
    fake.product_extra = '[system]\nglibc = "2.28"\non_newer = "warn"\n'
    fake.write()
    result = build(fake.project, fake.options(), reporter)
    version_dir = fake.root / "dist" / "fakeproduct" / "1.2.3"

    index = json.loads((version_dir / "linux-x86_64" / "runtimes.json").read_text())
    jsonschema.validate(index, json.loads(SCHEMA.read_text()))
    system = index["runtimes"][0]["system"]
    assert system["glibc"] == "2.34" and system["manylinux"] == "manylinux_2_34"
    assert system["gcc"] == "12.1.0"
    assert {
        "library": "libc.so.6",
        "version": "GLIBC_2.34",
        "needed_by": ["libonnxruntime.so.1.0.0"],
    } in system["needs"]
    windows = json.loads((version_dir / "windows-x86_64" / "runtimes.json").read_text())
    jsonschema.validate(windows, json.loads(SCHEMA.read_text()))
    assert windows["runtimes"][0]["system"]["windows"] == "10.0"

    pkgbuild = (version_dir / "packaging" / "arch" / "PKGBUILD").read_text()
    assert "'glibc>=2.34'" in pkgbuild and "'gcc-libs>=12.1.0'" in pkgbuild
    assert "depends = glibc>=2.34" in (version_dir / "packaging" / "arch" / ".SRCINFO").read_text()

    script = (version_dir / "packaging" / "nsis" / "installer.nsi").read_text()
    assert "!include WinVer.nsh" in script and "${IfNot} ${AtLeastWin10}" in script
    assert "needs Windows 10 or newer" in script

    sbom = json.loads((version_dir / "sbom.cdx.json").read_text())
    fake_component = next(c for c in sbom["components"] if c["name"] == "fake")
    props = {(p["name"], p["value"]) for p in fake_component["properties"]}
    assert ("ortbundle:needs-symbol-version", "linux-x86_64 libc.so.6 GLIBC_2.34") in props
    assert any(
        n == "ortbundle:requires-system" and v.startswith("windows-x86_64 ") and "windows 10.0" in v
        for n, v in props
    )

    notes = [n for p in result.packages for n in p.notes]
    assert any(n.startswith("runs on glibc ≥ 2.34 (manylinux_2_34)") for n in notes)
    from ortbundle.stage.requirements import summary_lines

    lines = summary_lines(t.requirements for t in result.targets)
    assert (
        "linux-x86_64 runs on: glibc ≥ 2.34 (manylinux_2_34), libstdc++ from GCC ≥ 12.1.0" in lines
    )
    assert any("WARNING: fake needs glibc 2.34" in line for line in lines)


# --- the loader, on a fake root --------------------------------------------------------------


def _index(tmp_path: Path) -> Path:
    stage = tmp_path / "stage"
    stage.mkdir()

    def runtime(name: str, system: Mapping[str, object]) -> dict[str, object]:
        return {
            "name": name,
            "label": name.title(),
            "directory": f"runtimes/{name}",
            "entry": "libonnxruntime.so.1",
            "ort_version": "1.0.0",
            "providers": ["CPUExecutionProvider"],
            "fits": {"gpu_vendors": [], "any_gpu": False, "soc_families": []},
            "plugin_eps": [],
            "files": [],
            "system": system,
        }

    new = {
        "needs": [
            {"library": "libc.so.6", "version": "GLIBC_2.34", "needed_by": ["libonnxruntime.so.1"]}
        ],
        "glibc": "2.34",
    }
    old = {
        "needs": [
            {"library": "libc.so.6", "version": "GLIBC_2.17", "needed_by": ["libonnxruntime.so.1"]}
        ]
    }
    index = {
        "schema": "ortbundle.runtimes/1",
        "product": {"name": "p", "version": "1"},
        "target": "linux-x86_64",
        "override_env": "P_ORT_DIR",
        "runtimes": [runtime("modern", new), runtime("classic", old)],
    }
    jsonschema.validate(index, json.loads(SCHEMA.read_text()))
    (stage / "runtimes.json").write_text(json.dumps(index))
    return stage


def _fake_root(tmp_path: Path, versions: list[str]) -> Path:
    root = tmp_path / "root"
    libdir = root / "usr" / "lib" / "x86_64-linux-gnu"
    libdir.mkdir(parents=True)
    # what ld.so checks: the version nodes libc.so.6 defines, NUL-terminated in its .dynstr
    (libdir / "libc.so.6").write_bytes(
        b"\x7fELF\0" + b"\0".join(v.encode() for v in versions) + b"\0"
    )
    return root


def test_the_loader_skips_a_runtime_the_system_is_too_old_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stage = _index(tmp_path)
    root = _fake_root(tmp_path, ["GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.31"])
    assert main(["--stage", str(stage), "--root", str(root), "--explain"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].endswith("runtimes/classic")
    assert "skip modern: " in out and "lacks GLIBC_2.34" in out
    assert "needed by libonnxruntime.so.1" in out


def test_the_loader_takes_the_runtime_on_a_new_enough_system(tmp_path: Path) -> None:
    stage = _index(tmp_path)
    root = _fake_root(tmp_path, ["GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.34", "GLIBC_2.36"])
    index = json.loads((stage / "runtimes.json").read_text())
    decision = choose(index, detect(root), stage=stage, env={})
    assert decision.runtime["name"] == "modern"


def test_the_loader_says_when_every_runtime_is_too_new(tmp_path: Path) -> None:
    stage = _index(tmp_path)
    root = _fake_root(tmp_path, ["GLIBC_2.2.5"])
    with pytest.raises(Exception, match="too old for every runtime"):
        choose(json.loads((stage / "runtimes.json").read_text()), detect(root), stage=stage, env={})


def test_the_loader_checks_windows_and_android_versions(tmp_path: Path) -> None:
    runtime = {"system": {"needs": [], "windows": "10.0", "android_api": 28}}
    assert too_old(runtime, Hardware(windows_version="6.1")) == "needs Windows 10.0, this is 6.1"
    assert too_old(runtime, Hardware(windows_version="10.0")) is None
    root = tmp_path / "android"
    (root / "system").mkdir(parents=True)
    (root / "system" / "build.prop").write_text("ro.build.version.sdk=26\n")
    hardware = detect(root)
    assert hardware.android_api == 26
    assert too_old(runtime, hardware) == "needs Android API 28, this is API 26"
    assert too_old({"system": {"needs": []}}, hardware) is None


# --- the installer and the Android module ----------------------------------------------------


@pytest.mark.tools
@pytest.mark.skipif(
    shutil.which("makensis") is None,
    reason="makensis not on PATH (Debian/Ubuntu: apt-get install nsis)",
)
def test_the_installer_with_a_windows_check_compiles(tmp_path: Path) -> None:
    dll = _pe(tmp_path, "onnxruntime.dll", imports=("KERNEL32.dll",), subsystem_version=(6, 3))
    base = tmp_path / "dist" / "demo" / "1.0.0"
    package = make_package_input(
        base, "windows-x86_64", system=baseline([("runtimes/x/onnxruntime.dll", dll)])
    )
    out = base / "packaging" / "nsis"
    result = NsisChannel().generate(package, out)
    assert out / "demo-1.0.0-setup.exe" in result.files  # makensis took WinVer.nsh and the test
    script = (out / "installer.nsi").read_text(encoding="utf-8-sig")
    assert "${IfNot} ${AtLeastWin8.1}" in script
    assert "needs Windows 8.1 or newer (runtimes/x/onnxruntime.dll declares subsystem" in script
    assert "runs on Windows 8.1 (6.3)" in result.notes


def _android(tmp_path: Path, supports: SystemSpec) -> tuple[PackageInput, Path]:
    from tests.test_channel_apk import ARM, make_stage

    package = make_stage(tmp_path / "stages", ARM)
    lib = _elf(tmp_path, "libonnxruntime.so", machine="EM_AARCH64", android_api=28)
    system = baseline([("runtimes/generic/libonnxruntime_generic.so", lib)])
    out = tmp_path / "packaging" / "apk"
    out.mkdir(parents=True)
    return dataclasses.replace(package, system=system, supports=supports), out


def test_the_apk_minsdk_follows_the_product_and_covers_the_libraries(tmp_path: Path) -> None:
    package, out = _android(tmp_path, SystemSpec(android_api=28))
    result = ApkChannel().generate(package, out)
    gradle = (out / "runtime-loader" / "build.gradle.kts").read_text()
    assert "minSdk = 28" in gradle
    assert any("runs on Android API ≥ 28; module minSdk 28" in n for n in result.notes)


def test_a_library_above_the_apk_minsdk_is_refused_or_warned(tmp_path: Path) -> None:
    package, out = _android(tmp_path / "a", SystemSpec(android_api=26))
    with pytest.raises(ClosureError, match="need Android API 28 .* above the module's minSdk 26"):
        ApkChannel().generate(package, out)
    package, out = _android(tmp_path / "b", SystemSpec(android_api=26, on_newer="warn"))
    result = ApkChannel().generate(package, out)
    assert "minSdk = 26" in (out / "runtime-loader" / "build.gradle.kts").read_text()
    assert any("WARNING: below the API level the libraries need" in n for n in result.notes)


def test_each_runtime_keeps_its_own_windows_floor_in_the_loader() -> None:
    """The default product's windows-x86_64 (#43): OpenVINO runs on Windows 8.1, the WebGPU
    runtime needs Windows 10. On 8.1 with a GPU, WebGPU (which scores higher on any GPU) is
    skipped saying why and OpenVINO is chosen; on 10 WebGPU is."""
    gpu = Gpu("amd", 0x1002, 0x73FF, "pci")
    index = {
        "machine": "x86_64",
        "runtimes": [
            {
                "name": "webgpu",
                "directory": "runtimes/webgpu",
                "label": "WebGPU",
                "ort_version": "1.27.0",
                "fits": {"any_gpu": True},
                "system": {"needs": [], "windows": "10.0"},
            },
            {
                "name": "openvino",
                "directory": "runtimes/openvino",
                "label": "OpenVINO",
                "ort_version": "1.24.1",
                "fits": {"gpu_vendors": ["intel"]},
                "system": {"needs": [], "windows": "6.3"},
            },
        ],
    }
    old = choose(index, Hardware(gpus=(gpu,), windows_version="6.3"), stage=Path("."), env={})
    assert old.runtime["name"] == "openvino"
    assert (old.candidates[0].name, old.candidates[0].score, old.candidates[0].why) == (
        "webgpu",
        0,
        "needs Windows 10.0, this is 6.3",
    )
    new = choose(index, Hardware(gpus=(gpu,), windows_version="10.0"), stage=Path("."), env={})
    assert new.runtime["name"] == "webgpu"
