"""The real tier of run-time loads: the CUDA provider of the real `onnxruntime-gpu` wheels opens
libraries by name that its import table does not show, and the default product declares or
explains every name its real runtimes can open."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ortbundle._core.locations import default_cache_dir
from ortbundle._core.progress import plain_reporter
from ortbundle.config.sources import load_sources
from ortbundle.config.targets import get_target
from ortbundle.fetch.archives import ZipArchive
from ortbundle.fetch.artifacts import Fetcher
from ortbundle.fetch.cache import Cache
from ortbundle.stage.binaries import inspect
from ortbundle.stage.binaries.loads import LoadFinding, runtime_loads, scan_binary
from tests.helpers.real import build_product

pytestmark = pytest.mark.real

# The real wheels, pinned (the index is pip's configured one; the fetch layer checks the pins).
GPU_SOURCES = """\
[sources.linux]
pypi = { project = "onnxruntime-gpu", version = "1.27.0", filename = "onnxruntime_gpu-1.27.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl" }
sha256 = "404fb845dc06a04a28df5a2c6d5967bcf3f534e7df0b98507ff81686a1b49594"

[sources.windows]
pypi = { project = "onnxruntime-gpu", version = "1.27.0", filename = "onnxruntime_gpu-1.27.0-cp311-cp311-win_amd64.whl" }
sha256 = "c68799b35fc4818e6c1d50f5270681bf5ab8a652ac118e11a987b23f488e18dd"
"""


def _provider_findings(
    tmp_path: Path, source: str, target_name: str, member: str
) -> tuple[tuple[str, ...], tuple[LoadFinding, ...]]:
    """(what the provider links, what it opens by name that nothing reports)."""
    recipe = tmp_path / "gpu.toml"
    recipe.write_text(textwrap.dedent(GPU_SOURCES), "utf-8")
    wanted = load_sources(recipe)[source]
    fetcher = Fetcher(Cache(default_cache_dir()), plain_reporter())
    artifact = fetcher.fetch(wanted, component="onnxruntime-gpu")
    name = member.rsplit("/", 1)[-1]
    with ZipArchive(artifact.path, label=wanted.filename, component="onnxruntime-gpu") as wheel:
        wheel.extract(member, tmp_path / name)
    target = get_target(target_name)
    info = inspect(tmp_path / name, name=name)
    scan = scan_binary(tmp_path / name, target.format, name)
    result = runtime_loads(
        scans=[(name, scan)],
        staged=[name, "onnxruntime_providers_shared.dll", "libonnxruntime_providers_shared.so"],
        loads=(),
        ignore=(),
        externals=info.all_needed,  # what the closure reports for it: every linked name
        lookup=target.external_group,
        entry=name,
        case_insensitive=target.case_insensitive,
    )
    return info.all_needed, result.findings


def test_cuda_provider_on_windows_opens_the_driver_by_name(tmp_path: Path) -> None:
    needed, findings = _provider_findings(
        tmp_path, "windows", "windows-x86_64", "onnxruntime/capi/onnxruntime_providers_cuda.dll"
    )
    assert "cudnn64_9.dll" in needed and "cufft64_12.dll" in needed  # linked: the closure sees
    assert "nvcuda.dll" not in needed
    assert [(f.file, f.names) for f in findings] == [
        ("onnxruntime_providers_cuda.dll", ("nvcuda.dll", "nvcudart_hybrid64.dll"))
    ]


def test_tensorrt_provider_on_linux_opens_its_plugins_by_name(tmp_path: Path) -> None:
    needed, findings = _provider_findings(
        tmp_path, "linux", "linux-x86_64", "onnxruntime/capi/libonnxruntime_providers_tensorrt.so"
    )
    assert "libnvinfer.so.10" in needed
    assert [(f.file, f.names) for f in findings] == [
        ("libonnxruntime_providers_tensorrt.so", ("libnvinfer_plugin.so.10",))
    ]


def test_cuda_provider_on_linux_links_what_it_opens(tmp_path: Path) -> None:
    # 1.27.0's Linux provider names libcudnn / libcufft / libcuda in DT_NEEDED: nothing hidden
    needed, findings = _provider_findings(
        tmp_path, "linux", "linux-x86_64", "onnxruntime/capi/libonnxruntime_providers_cuda.so"
    )
    assert {"libcudnn.so.9", "libcufft.so.12", "libcuda.so.1"} <= set(needed)
    assert findings == ()


def test_the_default_product_declares_every_load(tmp_path_factory: pytest.TempPathFactory) -> None:
    result = build_product(tmp_path_factory, "darkroom")
    findings = {
        (t.target, s.runtime): s.closure.load_findings
        for t in result.targets
        for s in t.runtimes
        if s.closure.load_findings
    }
    assert findings == {}
    declared = {
        (t.target, s.runtime): sorted(e.name for e in s.closure.externals if e.via == "loads")
        for t in result.targets
        for s in t.runtimes
    }
    assert declared[("linux-x86_64", "webgpu")] == ["libvulkan.so.1"]
    assert declared[("windows-arm64", "ep-webgpu")] == [
        "d3d11.dll",
        "d3d12.dll",
        "dxgi.dll",
        "vulkan-1.dll",
    ]
    assert "libvulkan.so" in declared[("android-arm64-v8a", "android-generic")]
