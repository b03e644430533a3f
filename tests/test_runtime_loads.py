"""Run-time loads: libraries a kept file opens by name (dlopen, LoadLibrary), declared by the
recipe's `loads`, found by the detection when they are not, refused by a release."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import tomlkit

import ortbundle
from ortbundle._core.errors import ClosureError, ConfigError
from ortbundle._core.memo import Memo
from ortbundle._core.progress import Reporter
from ortbundle.channels.step import package_input
from ortbundle.cli.build import run_build
from ortbundle.config.recipes import IgnoreRule
from ortbundle.config.targets import get_target
from ortbundle.pipeline.build import AuditFailed, build
from ortbundle.pipeline.summary import read_summary, summary_lines
from ortbundle.stage import staging
from ortbundle.stage.binaries import loads
from ortbundle.stage.binaries.loads import LoadScan, UnresolvedLoad, scan_binary, warning_lines
from tests.helpers.elf import make_elf
from tests.helpers.native import compile_opener, compile_pe_opener
from tests.helpers.pe import make_pe
from tests.helpers.project import CORE_EXPORTS, CPU, FakeProject
from tests.helpers.toml_edit import edit_toml

CUDA_LINUX = ("libcudnn.so.9", "libvulkan.so.1")
CUDA_WINDOWS = ("nvcuda.dll", "vulkan-1.dll")


def _utf16(*names: str) -> bytes:
    return b"".join(n.encode("utf-16-le") + b"\0\0" for n in names)


# --- the scan ---------------------------------------------------------------------------


def test_elf_that_imports_dlopen_names_what_it_opens(tmp_path: Path) -> None:
    library = compile_opener(tmp_path, "libopener.so", ("libcudnn.so.9", "libcufft.so.12"))
    scan = scan_binary(library, "elf", "libopener.so")
    assert scan == LoadScan(("dlopen",), ("libcudnn.so.9", "libcufft.so.12"))


def test_a_library_without_a_loader_call_is_not_read(tmp_path: Path) -> None:
    # strings alone are not loads: a library that cannot open anything names nothing
    plain = make_pe(imports=("KERNEL32.dll",), payload=b"\0nvcuda.dll\0")
    (tmp_path / "plain.dll").write_bytes(plain)
    assert scan_binary(tmp_path / "plain.dll", "pe", "plain.dll") == LoadScan((), ())


def test_pe_loadlibrary_ascii_and_utf16(tmp_path: Path) -> None:
    opener = make_pe(
        imports=("KERNEL32.dll",),
        functions={"KERNEL32.dll": ["LoadLibraryExW", "GetProcAddress"]},
        # an ASCII name right before a wide one: the wide run must not swallow its tail
        payload=b"\0cufft64_12.dll\0" + _utf16("nvcuda.dll", "cudart64_13.dll"),
    )
    (tmp_path / "opener.dll").write_bytes(opener)
    scan = scan_binary(tmp_path / "opener.dll", "pe", "opener.dll")
    assert scan.calls == ("LoadLibraryExW",)
    # the import table's own names sit in .rdata too: the decision drops them as externals
    assert scan.names == ("cudart64_13.dll", "cufft64_12.dll", "KERNEL32.dll", "nvcuda.dll")


def test_pe_compiled_by_mingw(tmp_path: Path) -> None:
    library = compile_pe_opener(tmp_path, "opener.dll", ("nvcuda.dll",), ("cudnn64_9.dll",))
    scan = scan_binary(library, "pe", "opener.dll")
    assert scan.calls == ("LoadLibraryA", "LoadLibraryExW")
    assert {"cudnn64_9.dll", "nvcuda.dll"} <= set(scan.names)
    assert not any(n.lower().endswith("nvcuda.dll") and n != "nvcuda.dll" for n in scan.names)


def test_api_set_loader_import_counts(tmp_path: Path) -> None:
    dll = "api-ms-win-core-libraryloader-l1-2-0.dll"
    opener = make_pe(
        imports=(dll,), functions={dll: ["LoadLibraryExW"]}, payload=_utf16("nvcuda.dll")
    )
    (tmp_path / "opener.dll").write_bytes(opener)
    assert "nvcuda.dll" in scan_binary(tmp_path / "opener.dll", "pe", "o").names


# --- the pure decision -------------------------------------------------------------------


def _decide(**overrides: Any) -> loads.RuntimeLoads:
    target = get_target("linux-x86_64")
    values: dict[str, Any] = {
        "scans": [("libopener.so", LoadScan(("dlopen",), ("libcudnn.so.9", "libkept.so.1")))],
        "staged": ["libopener.so", "libkept.so.1"],
        "loads": (),
        "ignore": (),
        "externals": ["libc.so.6"],
        "lookup": target.external_group,
        "entry": "libopener.so",
        "case_insensitive": False,
    }
    values.update(overrides)
    return loads.runtime_loads(**values)


def test_kept_files_are_never_findings() -> None:
    result = _decide()
    assert [(f.file, f.names) for f in result.findings] == [("libopener.so", ("libcudnn.so.9",))]


def test_a_declared_load_resolves_to_its_external_group() -> None:
    result = _decide(
        scans=[("libopener.so", LoadScan(("dlopen",), ("libvulkan.so.1",)))],
        loads=("libvulkan.so.1",),
    )
    assert result.findings == ()
    assert [(d.name, d.group, d.kind, d.needed_by) for d in result.declared] == [
        ("libvulkan.so.1", "vulkan", "driver", ("libopener.so",))
    ]


def test_an_ignored_name_needs_no_declaration() -> None:
    rule = IgnoreRule(("libcudnn.so.*",), "a profiler hook")
    assert _decide(ignore=(rule,)).findings == ()


def test_an_unknown_load_is_unresolved() -> None:
    with pytest.raises(UnresolvedLoad) as raised:
        _decide(loads=("libcudnn.so.9",))
    assert raised.value.names == ("libcudnn.so.9",)


def test_windows_names_compare_without_case() -> None:
    target = get_target("windows-x86_64")
    result = _decide(
        scans=[("onnxruntime.dll", LoadScan(("LoadLibraryExW",), ("Vulkan-1.DLL", "DEP.dll")))],
        staged=["onnxruntime.dll", "dep.dll"],
        loads=("vulkan-1.dll",),
        lookup=target.external_group,
        case_insensitive=True,
    )
    assert result.findings == ()
    assert [d.name for d in result.declared] == ["vulkan-1.dll"]


def test_what_windows_itself_provides_is_no_finding() -> None:
    """The stock Windows core opens kernelbase.dll, ntdll.dll and dxcore.dll by name: Windows'
    own (windows-system-dlls.toml), so nothing the recipe must declare; nvcuda.dll (a driver's)
    still is a finding."""
    target = get_target("windows-x86_64")
    opened = ("dxcore.dll", "KernelBase.dll", "ntdll.dll", "nvcuda.dll")
    case: dict[str, Any] = {
        "scans": [("onnxruntime.dll", LoadScan(("LoadLibraryExW",), opened))],
        "staged": ["onnxruntime.dll"],
        "externals": [],
        "lookup": target.external_group,
        "entry": "onnxruntime.dll",
        "case_insensitive": True,
    }
    assert [f.names for f in _decide(**case).findings] == [opened]  # nobody said they are Windows'
    result = _decide(**case, os_provides=target.os_provides)
    assert [f.names for f in result.findings] == [("nvcuda.dll",)]
    assert target.os_provides("WINHTTP.dll") and target.os_provides("IPHLPAPI.DLL")
    assert not target.os_provides("vulkan-1.dll")  # a driver's group, not the system's


TABLE = ("TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider")


def test_a_cores_provider_table_is_offered_not_shipped() -> None:
    """A core names the provider libraries it opens only when a session asks for that provider
    beside the providers' names: offered, not shipped, no finding, and so is the bridge they
    load through. A provider the core does not name is none of its table, and libfoo.so stays
    a finding; a file that is no core has no table."""
    opened = (
        "libfoo.so",
        "libonnxruntime_providers_cann.so",
        "libonnxruntime_providers_cuda.so",
        "libonnxruntime_providers_shared.so",
        "libonnxruntime_providers_tensorrt.so",
    )
    case: dict[str, Any] = {
        "scans": [("libonnxruntime.so.1", LoadScan(("dlopen",), opened))],
        "staged": ["libonnxruntime.so.1"],
        "entry": "libonnxruntime.so.1",
    }
    result = _decide(**case, cores={"libonnxruntime.so.1": TABLE})
    assert [(o.name, o.provider) for o in result.offered] == [
        ("libonnxruntime_providers_cuda.so", "CUDAExecutionProvider"),
        ("libonnxruntime_providers_shared.so", "the provider bridge"),
        ("libonnxruntime_providers_tensorrt.so", "TensorrtExecutionProvider"),
    ]
    assert {o.file for o in result.offered} == {"libonnxruntime.so.1"}
    assert [f.names for f in result.findings] == [("libfoo.so", "libonnxruntime_providers_cann.so")]
    assert _decide(**case).offered == ()
    assert [f.names for f in _decide(**case).findings] == [opened]


def test_provider_library_names_on_each_platform() -> None:
    providers = ("NvTensorRTRTXExecutionProvider", "VitisAIExecutionProvider", *TABLE)
    assert loads.offered_provider("onnxruntime_providers_cuda.dll", providers) == TABLE[1]
    assert (
        loads.offered_provider("libonnxruntime_providers_nv_tensorrt_rtx.so", providers)
        == "NvTensorRTRTXExecutionProvider"
    )
    assert loads.offered_provider("ONNXRUNTIME_PROVIDERS_VITISAI.DLL", providers) == providers[1]
    assert loads.offered_provider("libonnxruntime_providers_cuda.dylib", providers) == TABLE[1]
    assert (
        loads.offered_provider("libonnxruntime_providers_cuda.so", ("CPUExecutionProvider",))
        is None
    )
    assert loads.offered_provider("libcuda_providers_cuda.so", providers) is None
    # a variant of a provider's library (CUDA's unit-test one, which stock cores name too)
    assert loads.offered_provider("libonnxruntime_providers_cuda_ut.so", providers) == TABLE[1]
    assert loads.offered_provider("libonnxruntime_providers_ut.so", providers) is None
    assert loads.offered_provider("onnxruntime_providers_shared.dll", ()) is None  # no table


# --- through a build ---------------------------------------------------------------------


@pytest.fixture
def opening(fake: FakeProject, tmp_path: Path) -> FakeProject:
    """The synthetic project whose Linux root and Windows core open libraries by name."""
    built = tmp_path / "opener"
    built.mkdir()
    fake.linux["onnxruntime/capi/libopener.so"] = compile_opener(
        built, "libopener.so", CUDA_LINUX
    ).read_bytes()
    fake.linux_roots = [*fake.linux_roots, "libopener.so"]
    fake.windows["onnxruntime/capi/onnxruntime.dll"] = make_pe(
        imports=("KERNEL32.dll", "dep.dll", "MSVCP140.dll"),
        delay_imports=("delayed.dll",),
        functions={"KERNEL32.dll": ["LoadLibraryExW"]},
        payload=_utf16(*CUDA_WINDOWS, "dep.dll"),
        exports=CORE_EXPORTS,
        rodata=CPU,
    )
    return fake.write()


def _set_target(project: FakeProject, target: str, key: str, value: Any) -> None:
    def change(document: Any) -> None:
        document["targets"][target][key] = value

    edit_toml(project.root / "recipes" / "fake.toml", change)


def _findings(result: Any) -> dict[str, dict[str, tuple[str, ...]]]:
    return {
        t.target: {f.file: f.names for s in t.runtimes for f in s.closure.load_findings}
        for t in result.targets
    }


def test_undeclared_loads_are_warnings(opening: FakeProject, reporter: Reporter) -> None:
    result = build(opening.project, opening.options(), reporter)
    assert _findings(result) == {
        "linux-x86_64": {"libopener.so": CUDA_LINUX},
        "windows-x86_64": {"onnxruntime.dll": CUDA_WINDOWS},  # dep.dll is kept
    }
    lines = warning_lines(
        (t.target, s.runtime, s.directory, f)
        for t in result.targets
        for s in t.runtimes
        for f in s.closure.load_findings
    )
    assert lines[0].startswith(
        "WARNING: fake on linux-x86_64: runtimes/fake/libopener.so can open libraries by name "
        "(dlopen) that the recipe does not declare: libcudnn.so.9, libvulkan.so.1"
    )
    assert not any(
        e.via == "loads" for t in result.targets for e in t.runtimes[0].closure.externals
    )


def test_the_python_api_returns_the_warnings_the_cli_prints(
    opening: FakeProject, reporter: Reporter, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A caller of ortbundle.build() gets in the result every warning `invoke build` prints,
    in the same words and order: the CLI computes none of its own."""
    result = ortbundle.build(opening.project, opening.options(), reporter)
    undeclared = [w for w in result.warnings if "can open libraries by name" in w]
    assert [w.split(":")[1] for w in undeclared] == [
        " fake on linux-x86_64",
        " fake on windows-x86_64",
    ]
    assert undeclared[0].startswith(
        "WARNING: fake on linux-x86_64: runtimes/fake/libopener.so can open libraries by name "
        "(dlopen) that the recipe does not declare: libcudnn.so.9, libvulkan.so.1"
    )
    capsys.readouterr()
    run_build(opening.options(), root=opening.root, dist=tmp_path / "by-the-cli")
    printed = capsys.readouterr().out.splitlines()
    shown = [line for line in printed if line in result.warnings]
    assert shown == list(result.warnings)
    assert not [line for line in printed if line.startswith("WARNING:") and line not in shown]


def test_declared_loads_become_externals(opening: FakeProject, reporter: Reporter) -> None:
    _set_target(opening, "linux-x86_64", "loads", ["libvulkan.so.1"])
    _set_target(opening, "windows-x86_64", "loads", ["vulkan-1.dll", "nvcuda.dll"])
    with pytest.raises(ConfigError) as raised:  # nvcuda.dll is no external of the tool's data
        build(opening.project, opening.options(), reporter)
    error = raised.value
    assert (error.component, error.target) == ("fake", "windows-x86_64")
    assert error.file is not None and error.file.endswith("fake.toml")
    assert "nvcuda.dll" in error.message and "[[externals]]" in (error.fix or "")
    assert error.exit_code == 2

    _set_target(opening, "windows-x86_64", "loads", ["vulkan-1.dll"])
    result = build(opening.project, opening.options(), reporter)
    assert _findings(result) == {
        "linux-x86_64": {"libopener.so": ("libcudnn.so.9",)},
        "windows-x86_64": {"onnxruntime.dll": ("nvcuda.dll",)},
    }
    linux = next(t for t in result.targets if t.target == "linux-x86_64")
    loaded = [e for e in linux.runtimes[0].closure.externals if e.via == "loads"]
    assert [(e.name, e.group, e.kind, e.needed_by) for e in loaded] == [
        ("libvulkan.so.1", "vulkan", "driver", ("libopener.so",))
    ]
    # and the channels see it as an external with via = "loads"
    package = package_input(
        result.plan.product,
        "linux-x86_64",
        linux.stage,
        (),
        linux.licensing,
        [(result.plan.recipes["fake"], s) for s in linux.runtimes],
        linux.requirements,
        0,
        Memo.off(),
    )
    by_name = {e.name: e for e in package.externals}
    assert by_name["libvulkan.so.1"].via == "loads"
    assert by_name["libvulkan.so.1"].needed_by == ("runtimes/fake/libopener.so",)
    assert by_name["libc.so.6"].via == "needed"


def test_ignored_loads_with_a_reason(opening: FakeProject, reporter: Reporter) -> None:
    for target, names in (("linux-x86_64", CUDA_LINUX), ("windows-x86_64", CUDA_WINDOWS)):
        rules = tomlkit.aot()
        rules.append(tomlkit.item({"names": list(names), "reason": "the test's reason"}))
        _set_target(opening, target, "ignore_loads", rules)
    result = build(opening.project, opening.options(), reporter)
    assert _findings(result) == {"linux-x86_64": {}, "windows-x86_64": {}}
    assert not any(
        e.via == "loads" for t in result.targets for e in t.runtimes[0].closure.externals
    )


def test_release_refuses_undeclared_loads(opening: FakeProject, reporter: Reporter) -> None:
    with pytest.raises(ClosureError) as raised:
        build(opening.project, opening.options(release=True), reporter)
    error = raised.value
    assert error.exit_code == 8
    assert "undeclared run-time loads" in error.message
    # every target's refusal, collected into one error (closure_report.py)
    problems = getattr(error, "problems", (error,))
    assert problems and all(p.component == "fake" and p.file is not None for p in problems)
    assert "loads" in (error.fix or "") and "ignore_loads" in (error.fix or "")
    assert not (opening.root / "dist" / "fakeproduct" / "1.2.3").exists()


def test_a_release_says_the_undeclared_loads_with_the_audit_s_failures(
    opening: FakeProject, reporter: Reporter
) -> None:
    """One build reports every problem of a new product: a licence the audit fails does not
    hide the loads to declare until the next build, nor the loads the audit."""
    recipe = opening.root / "recipes" / "fake.toml"
    recipe.write_text(
        recipe.read_text().replace('expression = "MIT"', 'expression = "GPL-3.0-only"')
    )
    with pytest.raises(AuditFailed) as raised:
        build(opening.project, opening.options(release=True), reporter)
    error = raised.value
    assert error.exit_code == 10
    assert not all(a.passed for a in error.audits)
    assert "\nand: undeclared run-time loads: libopener.so opens" in error.message
    assert "ignore_loads" in error.message  # each load's own fix, where it goes
    assert not (opening.root / "dist" / "fakeproduct" / "1.2.3").exists()


def test_a_warm_build_does_not_scan_again(
    opening: FakeProject, reporter: Reporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = build(opening.project, opening.options(), reporter)
    assert _findings(first)["linux-x86_64"] == {"libopener.so": CUDA_LINUX}

    def refuse(*_args: object) -> LoadScan:
        raise AssertionError("a memoised runtime was scanned again")

    monkeypatch.setattr(staging, "scan_binary", refuse)
    # declaring a load changes the build, not the pruned runtime: it comes from the memo, and
    # the declaration is applied to it
    _set_target(opening, "linux-x86_64", "loads", ["libvulkan.so.1"])
    second = build(opening.project, opening.options(), reporter)
    assert second.up_to_date is None
    assert _findings(second)["linux-x86_64"] == {"libopener.so": ("libcudnn.so.9",)}
    linux = next(t for t in second.targets if t.target == "linux-x86_64").runtimes[0]
    assert [e.name for e in linux.closure.externals if e.via == "loads"] == ["libvulkan.so.1"]


def test_a_load_must_be_a_plain_file_name(opening: FakeProject, reporter: Reporter) -> None:
    _set_target(opening, "linux-x86_64", "loads", ["/usr/lib/libcuda.so.1"])
    with pytest.raises(ConfigError, match="loads: '/usr/lib/libcuda.so.1' must be one library"):
        build(opening.project, opening.options(), reporter)


def test_an_optional_load_is_declared_optional_once(
    opening: FakeProject, reporter: Reporter
) -> None:
    """`optional_loads`: a name the runtime opens and works without is declared (no finding),
    optional, and never in `loads` too."""
    spare = [{"names": ["nvcuda.dll"], "reason": "works without it"}]
    _set_target(opening, "windows-x86_64", "loads", ["vulkan-1.dll", "nvcuda.dll"])
    _set_target(opening, "windows-x86_64", "optional_loads", spare)
    with pytest.raises(ConfigError, match="'nvcuda.dll' is in both loads and optional_loads"):
        build(opening.project, opening.options(), reporter)
    _set_target(opening, "windows-x86_64", "loads", ["vulkan-1.dll"])
    _set_target(
        opening, "windows-x86_64", "optional_loads", [{"names": ["ntdll.dll"], "reason": "r"}]
    )
    result = build(opening.project, opening.options(), reporter)
    windows = next(t for t in result.targets if t.target == "windows-x86_64")
    loaded = {e.name: e.optional for e in windows.runtimes[0].closure.externals if e.via == "loads"}
    assert loaded == {"ntdll.dll": True, "vulkan-1.dll": True}  # vulkan's group is optional
    assert _findings(result)["windows-x86_64"] == {"onnxruntime.dll": ("nvcuda.dll",)}


# a stock core: its provider table (libstdc++'s layout) with CUDA and TensorRT unavailable, and
# the provider libraries it opens by name only when a session asks for them
STOCK_TABLE = (
    ("TensorrtExecutionProvider", False),
    ("CUDAExecutionProvider", False),
    ("CANNExecutionProvider", False),
    ("CPUExecutionProvider", True),
)
PROVIDER_LIBRARIES = ("libonnxruntime_providers_cuda.so", "libonnxruntime_providers_tensorrt.so")


@pytest.fixture
def stock(fake: FakeProject) -> FakeProject:
    """The synthetic project with cores as stock ONNX Runtime builds them: the Linux core opens
    its provider libraries by name, the Windows core imports DLLs of Windows the old hand-kept
    list lacked and opens others by name."""
    fake.linux["onnxruntime/capi/libonnxruntime.so.1.0.0"] = make_elf(
        soname="libonnxruntime.so.1",
        needed=("libdep.so.2", "libc.so.6", "libstdc++.so.6"),
        runpath="$ORIGIN",
        exports=CORE_EXPORTS,
        imports=("dlopen",),
        rodata=PROVIDER_LIBRARIES,
        provider_table=STOCK_TABLE,
    )
    fake.windows["onnxruntime/capi/onnxruntime.dll"] = make_pe(
        imports=("KERNEL32.dll", "dep.dll", "MSVCP140.dll", "WINHTTP.dll", "IPHLPAPI.DLL"),
        delay_imports=("delayed.dll",),
        functions={"KERNEL32.dll": ["LoadLibraryExW"]},
        wide=("kernelbase.dll", "ntdll.dll", "dxcore.dll", "onnxruntime_providers_cuda.dll"),
        exports=CORE_EXPORTS,
        rodata=(*CPU, "CUDAExecutionProvider"),
    )
    return fake


def test_a_stock_core_passes_a_release_on_its_provider_table(
    stock: FakeProject, reporter: Reporter
) -> None:
    result = build(stock.write().project, stock.options(release=True), reporter)
    assert _findings(result) == {"linux-x86_64": {}, "windows-x86_64": {}}
    offered = {
        t.target: [(o.file, o.name, o.provider) for s in t.runtimes for o in s.closure.offered]
        for t in result.targets
    }
    assert offered == {
        "linux-x86_64": [
            ("libonnxruntime.so.1.0.0", PROVIDER_LIBRARIES[0], "CUDAExecutionProvider"),
            ("libonnxruntime.so.1.0.0", PROVIDER_LIBRARIES[1], "TensorrtExecutionProvider"),
        ],
        "windows-x86_64": [
            ("onnxruntime.dll", "onnxruntime_providers_cuda.dll", "CUDAExecutionProvider")
        ],
    }
    windows = next(t for t in result.targets if t.target == "windows-x86_64")
    by_name = {e.name: e for e in windows.requirements.externals}
    assert (by_name["WINHTTP.dll"].group, by_name["IPHLPAPI.DLL"].kind) == ("windows", "system")
    # no requirement either: an offered provider is not something the machine must have
    assert not {n.lower() for n in by_name} & {"onnxruntime_providers_cuda.dll", "ntdll.dll"}
    # the index and the summary tell them as offered by the core, not shipped
    stage = stock.root / "dist/fakeproduct/1.2.3/linux-x86_64"
    index = json.loads((stage / "runtimes.json").read_text())
    schema = resources.files("ortbundle").joinpath("data/runtimes.schema.json").read_text()
    jsonschema.validate(index, json.loads(schema))
    assert index["runtimes"][0]["offered_not_shipped"] == [
        {
            "library": PROVIDER_LIBRARIES[0],
            "provider": "CUDAExecutionProvider",
            "named_by": "libonnxruntime.so.1.0.0",
        },
        {
            "library": PROVIDER_LIBRARIES[1],
            "provider": "TensorrtExecutionProvider",
            "named_by": "libonnxruntime.so.1.0.0",
        },
    ]
    assert not any("providers_cuda" in r["name"] for r in index["runtimes"][0]["requires"])
    document = read_summary(stage.parent)
    assert document is not None
    summary_schema = resources.files("ortbundle").joinpath("data/build-summary.schema.json")
    jsonschema.validate(document, json.loads(summary_schema.read_text()))
    lines = summary_lines(document)
    assert [line for line in lines if "offered by the core" in line] == [
        "  fake: offered by the core, not shipped: CUDAExecutionProvider "
        "(libonnxruntime_providers_cuda.so), TensorrtExecutionProvider "
        "(libonnxruntime_providers_tensorrt.so)",
        "  fake: offered by the core, not shipped: CUDAExecutionProvider "
        "(onnxruntime_providers_cuda.dll)",
    ]


def test_a_core_opening_an_unknown_library_still_fails_a_release(
    stock: FakeProject, reporter: Reporter
) -> None:
    core = stock.linux["onnxruntime/capi/libonnxruntime.so.1.0.0"]
    stock.linux["onnxruntime/capi/libonnxruntime.so.1.0.0"] = core.replace(
        PROVIDER_LIBRARIES[1].encode(), b"libfoo.so\0".ljust(len(PROVIDER_LIBRARIES[1]), b"\0")
    )
    with pytest.raises(ClosureError) as raised:
        build(stock.write().project, stock.options(release=True), reporter)
    assert raised.value.exit_code == 8
    assert "libfoo.so" in raised.value.message
    assert "providers_cuda" not in raised.value.message
