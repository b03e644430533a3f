"""The real tier: the shipped loader's checks on the default product's real runtimes —
`requires` as the build writes it, and --open trusting GetAvailableProviders() of the real cores
over an index that claims a provider they lack."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ortbundle._core.progress import plain_reporter
from ortbundle.payload.loader import Hardware, choose, system_libraries
from ortbundle.pipeline.build import DEFAULT_PRODUCT, BuildOptions, Project, build
from ortbundle.stage.probe.wine import Wine
from tests.helpers.fakeroot import nvidia_machine, run_loader
from tests.helpers.real import ROOT, build_product, target_result
from tests.helpers.windows import own_prefix

pytestmark = pytest.mark.real

LINUX, WINDOWS = "linux-x86_64", "windows-x86_64"


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default product's Linux stage (its Arch package only: no installer to compile)."""
    dist = tmp_path_factory.mktemp("dist")
    options = BuildOptions(product=DEFAULT_PRODUCT, targets=(LINUX,), channels=("arch",))
    return target_result(build(Project.at(ROOT, dist), options, plain_reporter()), LINUX).stage


def test_the_real_index_lists_what_the_base_system_may_lack(stage: Path) -> None:
    index = json.loads((stage / "runtimes.json").read_text())
    requires = {r["name"]: r["requires"] for r in index["runtimes"]}
    openvino = {n["name"]: n["optional"] for n in requires["openvino"]}
    # the OpenCL ICD loader only costs the Intel GPU rung; zlib is not in every base system
    assert openvino["libOpenCL.so.1"] is True
    assert openvino["libz.so.1"] is False
    names = {n["name"] for needs in requires.values() for n in needs}
    assert not names & {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1"}
    # this machine has what they require: nothing is skipped here
    decision = run_loader(stage, "--explain")
    assert all(c["score"] > 0 for c in decision["candidates"]), decision["candidates"]


def test_open_trusts_the_real_cores_over_the_index(stage: Path, tmp_path: Path) -> None:
    """An index claiming OpenVINO's core drives CUDA on an NVIDIA machine: the choice without
    --open believes it; --open asks the core, which offers no CUDA, and moves on to WebGPU."""
    copy = tmp_path / "stage"
    copy.mkdir()
    (copy / "runtimes").symlink_to(stage / "runtimes")
    shutil.copy(stage / "runtime_loader.py", copy)
    index = json.loads((stage / "runtimes.json").read_text())
    openvino = next(r for r in index["runtimes"] if r["name"] == "openvino")
    openvino["fits"]["gpu_vendors"] = ["nvidia"]
    openvino["providers"] = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    (copy / "runtimes.json").write_text(json.dumps(index))
    root = nvidia_machine(tmp_path / "machine")
    # the fake machine has this one's libraries, so only the providers decide
    here = system_libraries(LINUX, Path("/"), {}, windows=False)
    for need in (n for r in index["runtimes"] for n in r["requires"] if not n["optional"]):
        found = here.find(need["name"], stage)
        assert found, f"this machine lacks {need['name']}"
        link = root / "usr/lib/x86_64-linux-gnu" / need["name"]
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(found)
    believed = run_loader(copy, "--root", str(root))
    assert (believed["runtime"], believed["why"]) == ("openvino", "NVIDIA GPU")
    opened = run_loader(copy, "--root", str(root), "--open")
    assert (opened["runtime"], opened["loaded_version"]) == ("webgpu", "1.27.0")
    (demoted,) = [c for c in opened["candidates"] if c["name"] == "openvino"]
    assert demoted["score"] == 1
    assert (
        "CUDAExecutionProvider not available (GetAvailableProviders: "
        "OpenVINOExecutionProvider, CPUExecutionProvider): ranked last, as CPU"
    ) in demoted["notes"]


@pytest.fixture
def prefix(tmp_path: Path) -> Iterator[Wine]:
    yield from own_prefix(tmp_path, makensis=False)


@pytest.mark.windows
def test_a_wine_prefix_has_what_the_windows_runtimes_require(
    tmp_path_factory: pytest.TempPathFactory, prefix: Wine
) -> None:
    """The Windows search (System32, the Windows directory, PATH) over a fresh Wine prefix —
    Wine's builtin VC++ runtime DLLs sit in its System32 — finds every required DLL of the real
    Windows runtimes, and nothing a runtime does not require stops it. (The loader itself does
    not run under Wine: the windows tier has no Windows Python, only the mingw probe.)"""
    stage = target_result(build_product(tmp_path_factory, DEFAULT_PRODUCT), WINDOWS).stage
    windows = prefix.prefix / "drive_c/windows"
    env = {"SystemRoot": str(windows), "PATH": f"{windows / 'system32'};{windows}"}
    libraries = system_libraries(WINDOWS, Path("/"), env, windows=True)
    index = json.loads((stage / "runtimes.json").read_text())
    found = {}
    for runtime in index["runtimes"]:
        for need in runtime["requires"]:
            found[need["name"]] = libraries.find(need["name"], stage / runtime["directory"])
    assert "MSVCP140.dll" in found
    assert all(found[n] for n in found if n.lower().startswith(("msvcp", "vcruntime"))), found
    hardware = Hardware(windows_version="10.0")
    decision = choose(index, hardware, stage=stage, env={}, libraries=libraries)
    assert all(c.score > 0 for c in decision.candidates), decision.candidates
