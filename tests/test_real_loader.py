"""The real tier: the shipped loader's checks on the default product's real Linux runtimes —
`requires` as the build writes it, and --open trusting GetAvailableProviders() of the real cores
over an index that claims a provider they lack."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ortbundle.build import DEFAULT_PRODUCT
from ortbundle.loader import system_libraries
from tests.helpers.fakeroot import nvidia_machine, run_loader
from tests.helpers.real import build_product, target_result

pytestmark = pytest.mark.real

LINUX = "linux-x86_64"


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return target_result(build_product(tmp_path_factory, DEFAULT_PRODUCT), LINUX).stage


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
