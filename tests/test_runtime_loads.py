"""Run-time loads: libraries a kept file opens by name (dlopen, LoadLibrary), declared by the
recipe's `loads`, found by the detection when they are not, refused by a release."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
from ortbundle.pipeline.build import build
from ortbundle.stage import staging
from ortbundle.stage.binaries import loads
from ortbundle.stage.binaries.loads import LoadScan, UnresolvedLoad, scan_binary, warning_lines
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
