"""The requirements model (ortbundle/stage/requirements.py): what the user's machine must provide,
decided once per target from the closures and the binaries' baselines — required or optional,
the version, and the oldest system raised to the product's `[system]` promise."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ortbundle._core.errors import ClosureError
from ortbundle.config.products import SystemSpec
from ortbundle.config.recipes import OptionalLoads, Recipe, TargetRecipe
from ortbundle.config.targets import get_target
from ortbundle.stage.binaries import inspect
from ortbundle.stage.binaries.baseline import Minimum, SystemBaseline, apiset_floor
from ortbundle.stage.binaries.loads import FileScan, scan_binary
from ortbundle.stage.closure import Closure, ExternalLibrary, KeptLibrary
from ortbundle.stage.requirements import (
    TargetRequirements,
    requirement_groups,
    resolve,
    runs_on,
    summary_lines,
)
from ortbundle.stage.runtime_loads import with_runtime_loads
from ortbundle.stage.staging import StagedRuntime
from tests.helpers.pe import make_pe

WINDOWS, LINUX = "windows-x86_64", "linux-x86_64"
DRIVER_NOTE = "the NVIDIA display driver"


def _recipe(name: str, kind: str = "runtime") -> Recipe:
    return Recipe(
        name=name,
        kind=kind,
        version="1.24.4",
        description=name,
        label=name.upper(),
        providers=("CPUExecutionProvider",),
        gpu_vendors=(),
        sources={},
        targets={},
        path=Path(f"recipes/{name}.toml"),
        digest="0" * 64,
    )


def _ext(name: str, group: str, kind: str, user: str, **more: object) -> ExternalLibrary:
    return replace(ExternalLibrary(name, group, kind, "", (user,)), **more)  # type: ignore[arg-type]


def _staged(
    tmp_path: Path, name: str, directory: str, kept: dict[str, bytes], *externals: ExternalLibrary
) -> StagedRuntime:
    libraries = []
    for file, data in kept.items():
        path = tmp_path / name / file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        libraries.append(
            KeptLibrary(file, "w", file, path, len(data), "0" * 64, inspect(path), "root")
        )
    closure = Closure(tuple(libraries), (), (), externals, next(iter(kept)), ())
    return StagedRuntime(name, WINDOWS, directory, closure, (), 0)


def _directml_with_plugin(tmp_path: Path) -> list[tuple[Recipe, StagedRuntime]]:
    """The issue's product: onnxruntime-directml (DirectML.dll imports d3d12.dll; the core
    declares Windows 8.1) with NVIDIA's TensorRT-RTX plugin EP, which needs nvml.dll."""
    core = _staged(
        tmp_path,
        "directml",
        "runtimes/directml",
        {
            "onnxruntime.dll": make_pe(
                imports=("KERNEL32.dll", "MSVCP140.dll"),  # DirectML.dll would date it too
                os_version=(6, 3),
                subsystem_version=(6, 3),
            ),
            "DirectML.dll": make_pe(imports=("KERNEL32.dll", "d3d12.dll", "dxgi.dll")),
        },
        _ext("MSVCP140.dll", "msvc-runtime", "redist", "onnxruntime.dll"),
    )
    plugin = _staged(
        tmp_path,
        "ep-trt-rtx",
        "plugins/ep-trt-rtx",
        {"onnxruntime_providers_nv_tensorrt_rtx.dll": make_pe(imports=("nvml.dll",))},
        _ext(
            "nvml.dll",
            "nvidia-driver",
            "driver",
            "onnxruntime_providers_nv_tensorrt_rtx.dll",
            note=DRIVER_NOTE,
            version=">=580",
        ),
        _ext("MSVCP140.dll", "msvc-runtime", "redist", "onnxruntime_providers_nv_tensorrt_rtx.dll"),
    )
    return [(_recipe("directml"), core), (_recipe("ep-trt-rtx", "plugin-ep"), plugin)]


def test_a_library_only_a_plugin_ep_needs_is_optional_everywhere_in_the_model(
    tmp_path: Path,
) -> None:
    model = resolve(
        WINDOWS, SystemSpec(), _directml_with_plugin(tmp_path), {"ep-trt-rtx": ("directml",)}
    )
    nvml = next(e for e in model.externals if e.name == "nvml.dll")
    assert nvml.optional and nvml.version == ">=580" and nvml.note == DRIVER_NOTE
    assert nvml.needed_by == ("plugins/ep-trt-rtx/onnxruntime_providers_nv_tensorrt_rtx.dll",)
    # the core needs the VC++ runtime too: required, whoever else needs it
    msvc = next(e for e in model.externals if e.name == "MSVCP140.dll")
    assert not msvc.optional
    assert msvc.needed_by == (
        "plugins/ep-trt-rtx/onnxruntime_providers_nv_tensorrt_rtx.dll",
        "runtimes/directml/onnxruntime.dll",
    )
    assert [(g.group, g.optional) for g in model.groups] == [
        ("msvc-runtime", False),
        ("nvidia-driver", True),
    ]
    # what a loader checks before it picks the core: its needs and its plugin's, optional
    assert [(e.name, e.optional) for e in model.index_requires("directml")] == [
        ("MSVCP140.dll", False),
        ("nvml.dll", True),
    ]


def test_d3d12_raises_every_level_to_windows_10(tmp_path: Path) -> None:
    model = resolve(
        WINDOWS, SystemSpec(), _directml_with_plugin(tmp_path), {"ep-trt-rtx": ("directml",)}
    )
    assert model.system.windows is not None and model.system.windows.version == "10.0"
    assert "imports d3d12.dll" in model.system.windows.why
    assert model.runtime("directml").system.windows.version == "10.0"  # type: ignore[union-attr]
    assert model.runs_on.startswith("Windows 10 (10.0)")


def test_the_products_promise_raises_the_oldest_system_on_its_own_os_only(tmp_path: Path) -> None:
    runtimes = _directml_with_plugin(tmp_path)
    plain = [(r, s) for r, s in runtimes if r.name == "ep-trt-rtx"]  # Windows Vista by its header
    assert resolve(WINDOWS, SystemSpec(), plain).system.windows.version == "6.0"  # type: ignore[union-attr]
    model = resolve(WINDOWS, SystemSpec(windows="10.0", glibc="2.28"), plain)
    windows = model.system.windows
    assert windows is not None and windows.version == "10.0"
    assert windows.why == 'the product\'s [system] windows = "10.0"'
    assert model.runtime("ep-trt-rtx").system.windows == windows
    assert model.system.glibc is None  # a Linux promise says nothing of Windows
    assert model.warnings == ()
    linux = replace(plain[0][1], target=LINUX)
    on_linux = resolve(LINUX, SystemSpec(windows="10.0", glibc="2.28"), [(plain[0][0], linux)])
    assert on_linux.system.glibc is not None and on_linux.system.glibc.version == "2.28"


def test_a_need_above_the_promise_stops_or_warns(tmp_path: Path) -> None:
    runtimes = _directml_with_plugin(tmp_path)
    with pytest.raises(
        ClosureError, match=r"directml needs Windows 10\.0 \(DirectML.dll imports d3d12"
    ):
        resolve(WINDOWS, SystemSpec(windows="6.3"), runtimes)
    model = resolve(WINDOWS, SystemSpec(windows="6.3", on_newer="warn"), runtimes)
    assert model.system.windows.version == "10.0"  # type: ignore[union-attr]  # the need wins
    assert len(model.warnings) == 1 and model.warnings[0].startswith("directml needs Windows 10.0")
    lines = summary_lines([model])
    assert lines[0].startswith("windows-x86_64 runs on: Windows 10 (10.0)")
    assert any(line.startswith("  WARNING: directml needs Windows 10.0") for line in lines)


def test_a_group_is_required_when_one_of_its_libraries_is() -> None:
    groups = requirement_groups(
        [
            _ext("b.dll", "vendor", "toolkit", "x", optional=True, install="Install it"),
            _ext("a.dll", "vendor", "toolkit", "x", version=">=2"),
            _ext("c.dll", "gpu", "driver", "x", optional=True),
        ]
    )
    assert [(g.group, g.optional, g.names) for g in groups] == [
        ("vendor", False, ("a.dll", "b.dll")),
        ("gpu", True, ("c.dll",)),
    ]
    assert (groups[0].version, groups[0].install) == (">=2", "Install it")


def test_the_model_as_evidence_carries_it(tmp_path: Path) -> None:
    model = resolve(
        WINDOWS,
        SystemSpec(windows="10.0"),
        _directml_with_plugin(tmp_path),
        {"ep-trt-rtx": ("directml",)},
    )
    document = model.as_json()
    assert document["runs_on"] == model.runs_on and document["system"]["windows"] == "10.0"
    assert {e["name"]: e["optional"] for e in document["externals"]} == {
        "MSVCP140.dll": False,
        "nvml.dll": True,
    }
    plugin = next(r for r in document["runtimes"] if r["name"] == "ep-trt-rtx")
    assert plugin["plugin"] is True and plugin["system"]["windows"] == "10.0"


# --- every kind of evidence for the oldest Windows (#43) ---------------------------------------
# Each rule alone raises a DLL whose header says Windows Vista (6.0) or 8 (6.2) to Windows 10,
# and its near miss does not: take the rule away and its test fails.

LOADER = {"KERNEL32.dll": ["LoadLibraryExW"]}


def _opener(
    tmp_path: Path, *, loads: tuple[str, ...] = (), optional: tuple[str, ...] = ()
) -> TargetRequirements:
    """A DLL that opens d3d12.dll only by name (LoadLibraryExW, L"d3d12.dll"), no import of it,
    staged through the build's own run-time load step with the recipe's declaration."""
    data = make_pe(imports=("KERNEL32.dll",), functions=LOADER, wide=("d3d12.dll",))
    staged = _staged(tmp_path, "webgpu", "runtimes/webgpu", {"opener.dll": data})
    scan = scan_binary(tmp_path / "webgpu" / "opener.dll", "pe", "opener.dll")
    assert scan.names == ("d3d12.dll", "KERNEL32.dll")  # the evidence: the name, opened by call
    section = TargetRecipe(
        WINDOWS,
        "opener.dll",
        (),
        ("opener.dll",),
        (),
        (),
        loads=loads,
        optional_loads=(OptionalLoads(optional, "works without it"),) if optional else (),
    )
    recipe = replace(_recipe("webgpu"), targets={WINDOWS: section})
    closure = replace(staged.closure, load_scans=(FileScan("opener.dll", scan),))
    staged = with_runtime_loads(replace(staged, closure=closure), recipe, get_target(WINDOWS))
    return resolve(WINDOWS, SystemSpec(), [(recipe, staged)])


def test_a_dll_opening_d3d12_only_by_name_needs_windows_10(tmp_path: Path) -> None:
    model = _opener(tmp_path / "needed", loads=("d3d12.dll",))
    windows = model.runtime("webgpu").system.windows
    assert windows is not None and windows.version == "10.0"
    assert windows.why == "opener.dll opens d3d12.dll by name"
    assert model.system.windows == Minimum(
        "10.0", "runtimes/webgpu/opener.dll opens d3d12.dll by name"
    )
    assert model.runs_on.startswith("Windows 10 (10.0)")
    # judged optional (optional_loads): declared, no requirement, and no floor
    spare = _opener(tmp_path / "optional", optional=("d3d12.dll",))
    assert spare.runtime("webgpu").system.windows == Minimum(
        "6.0", "opener.dll declares OS version 6.0"
    )
    (d3d12,) = (e for e in spare.externals if e.name == "d3d12.dll")
    assert d3d12.optional and d3d12.via == "loads"


def _windows_of(tmp_path: Path, data: bytes) -> Minimum | None:
    staged = _staged(tmp_path, "core", "runtimes/core", {"core.dll": data})
    return (
        resolve(WINDOWS, SystemSpec(), [(_recipe("core"), staged)]).runtime("core").system.windows
    )


def test_a_windows_10_api_set_import_needs_windows_10(tmp_path: Path) -> None:
    heap = "api-ms-win-core-heap-l2-1-0.dll"
    found = _windows_of(tmp_path / "heap", make_pe(imports=(heap,)))
    assert found is not None and found.version == "10.0"
    assert found.why.startswith(f"core.dll imports the API set {heap} (")
    # its Windows 7 sibling dates nothing past the header
    older = _windows_of(tmp_path / "old", make_pe(imports=("api-ms-win-core-heap-l1-1-0.dll",)))
    assert older == Minimum(
        "6.1", "core.dll imports the API set api-ms-win-core-heap-l1-1-0.dll (Windows 7 schema)"
    )
    # a later revision of a contract the table knows needs at least what the known one needs
    newer = _windows_of(tmp_path / "rev", make_pe(imports=("api-ms-win-core-synch-l1-2-7.dll",)))
    assert newer is not None and newer.version == "10.0" and "at least as new as" in newer.why


def test_every_api_set_the_default_product_imports_is_dated() -> None:
    """The sets pefile read from the default product's DLLs (windows-apisets.toml's header): a
    table that lost one would let its DLL claim an older Windows."""
    expected = {
        "api-ms-win-core-file-l1-2-2": "10.0",
        "api-ms-win-core-heap-l2-1-0": "10.0",
        "api-ms-win-core-kernel32-legacy-l1-1-6": "10.0",
        "api-ms-win-core-libraryloader-l1-2-1": "10.0",
        "api-ms-win-core-synch-l1-2-1": "10.0",
        "api-ms-win-service-core-l1-1-1": "10.0",
        "api-ms-win-core-path-l1-1-0": "6.2",
        "api-ms-win-crt-runtime-l1-1-0": "6.0",
    }
    assert {name: (apiset_floor(name + ".dll") or ("",))[0] for name in expected} == expected


def test_an_arm64_dll_needs_windows_10_whatever_its_header_says(tmp_path: Path) -> None:
    def dll(machine: str) -> bytes:
        return make_pe(
            machine=machine, imports=("KERNEL32.dll",), os_version=(6, 2), subsystem_version=(6, 2)
        )

    assert _windows_of(tmp_path / "arm", dll("ARM64")) == Minimum(
        "10.0", "core.dll is built for ARM64: Windows runs there from Windows 10"
    )
    assert _windows_of(tmp_path / "x64", dll("AMD64")) == Minimum(
        "6.2", "core.dll declares OS version 6.2"
    )


def test_macos_minos_is_what_the_model_says_it_runs_on() -> None:

    system = SystemBaseline(macos=Minimum("14.0", "libonnxruntime.dylib declares minos 14.0"))
    assert runs_on(system) == "macOS ≥ 14.0"
