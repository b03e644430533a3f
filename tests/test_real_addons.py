"""The real tier: the GPU vendors' add-ons (darkroom-cuda, darkroom-rocm) built from the real
pinned wheels; their Arch packages name the vendor stack and install beside the main package."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from ortbundle.config.products import load_product
from ortbundle.config.recipes import load_recipe
from ortbundle.config.targets import get_target, overlays
from ortbundle.pipeline.result import BuildResult
from tests.helpers.real import build_product, target_result

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[1]


def _build(tmp_path_factory: pytest.TempPathFactory, product: str) -> BuildResult:
    """The Arch channel only: it packages linux-x86_64, the target these tests look at (the
    CUDA provider is 250 MB; compressing it into an installer belongs to the Windows tier)."""
    return build_product(tmp_path_factory, product, channels=("arch",))


def _srcinfo(result: BuildResult, field: str) -> list[str]:
    text = (result.version_dir / "packaging" / "arch" / ".SRCINFO").read_text()
    prefix = f"\t{field} = "
    return [line.removeprefix(prefix) for line in text.splitlines() if line.startswith(prefix)]


def test_darkroom_cuda_arch_package_depends_on_the_cuda_stack_and_the_main_package(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    result = _build(tmp_path_factory, "darkroom-cuda")
    depends = _srcinfo(result, "depends")
    for wanted in ("cuda>=13.0", "cudnn>=9", "nvidia-utils>=580", "darkroom-onnxruntime>=0.23.0"):
        assert wanted in depends, depends
    optdepends = _srcinfo(result, "optdepends")
    assert any(o.startswith("tensorrt>=10: ") for o in optdepends), optdepends
    assert not any(d.startswith("tensorrt") for d in depends)
    pkgbuild = (result.version_dir / "packaging" / "arch" / "PKGBUILD").read_text()
    assert "local lib=\"${pkgdir}/usr/lib/\"'darkroom-onnxruntime'" in pkgbuild
    assert "'runtimes/cuda/libonnxruntime_providers_cuda.so'" in pkgbuild


def test_darkroom_cuda_closure_maps_every_cuda_library_to_a_declared_group(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    result = _build(tmp_path_factory, "darkroom-cuda")
    runtime = target_result(result, "linux-x86_64").runtimes[0]
    groups = {e.name: e.group for e in runtime.closure.externals}
    assert {
        "libcudart.so.13": "cudart",
        "libcublas.so.13": "cublas",
        "libcublasLt.so.13": "cublas",
        "libcufft.so.12": "cufft",
        "libcurand.so.10": "curand",
        "libnvrtc.so.13": "nvrtc",
        "libcudnn.so.9": "cudnn",
        "libcuda.so.1": "nvidia-driver",
        "libnvinfer.so.10": "tensorrt",
        "libnvonnxparser.so.10": "tensorrt",
    }.items() <= groups.items()
    toolkit = [e for e in runtime.closure.externals if e.kind == "toolkit"]
    assert toolkit and all(not e.sandbox and e.install for e in toolkit)


def test_every_name_the_cuda_providers_load_at_run_time_is_declared() -> None:
    """The recipe's `loads` (measured on the wheels) each resolve to a product group, so the
    run-time loads check finds them declared on both targets."""
    product = load_product(ROOT / "manifests" / "darkroom-cuda.toml")
    recipe = load_recipe(ROOT / "recipes" / "cuda.toml")
    raw = tomllib.loads((ROOT / "recipes" / "cuda.toml").read_text("utf-8"))
    for target_name in product.targets:
        loads = raw["targets"][target_name]["loads"]
        target = overlays(product.externals, recipe.externals).apply(get_target(target_name))
        assert loads
        for name in loads:
            assert target.external_group(name) is not None, (target_name, name)
    windows = overlays(product.externals).apply(get_target("windows-x86_64"))
    for name in ("nvcuda.dll", "cudnn64_9.dll", "cufft64_12.dll", "cublasLt64_13.dll"):
        assert windows.external_group(name) is not None, name


_LIBRARY_NAME = re.compile(rb"lib[A-Za-z0-9_+-]+\.so(?:\.[0-9]+)*")


def test_every_library_name_in_the_cuda_runtime_is_kept_or_declared(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """What the providers could open by name (the library names their bytes carry, found as
    `strings` would) is a staged file or a declared group: nothing is left for the user's
    machine that the package does not name."""
    result = _build(tmp_path_factory, "darkroom-cuda")
    product = load_product(ROOT / "manifests" / "darkroom-cuda.toml")
    target = overlays(product.externals).apply(get_target("linux-x86_64"))
    runtime_dir = target_result(result, "linux-x86_64").stage / "runtimes" / "cuda"
    kept = {p.name for p in runtime_dir.iterdir()}
    names = {
        m.decode()
        for path in runtime_dir.iterdir()
        if path.is_file() and not path.is_symlink()
        for m in _LIBRARY_NAME.findall(path.read_bytes())
    }
    assert {"libcudnn.so.9", "libcuda.so.1", "libnvinfer_plugin.so.10"} <= names
    # the core names every provider library ONNX Runtime has (cann, openvino, …): it opens one
    # only when the application asks for that provider, and this build ships the ones it has
    names = {n for n in names if not n.startswith("libonnxruntime_providers_")}
    undeclared = sorted(n for n in names if n not in kept and target.external_group(n) is None)
    assert undeclared == []


def test_darkroom_rocm_arch_package_depends_on_rocm_and_the_main_package(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    result = _build(tmp_path_factory, "darkroom-rocm")
    depends = _srcinfo(result, "depends")
    for wanted in ("migraphx>=7.0", "hip-runtime-amd>=7.0", "darkroom-onnxruntime>=0.23.0"):
        assert wanted in depends, depends
    runtime = target_result(result, "linux-x86_64").runtimes[0]
    groups = {e.name: e.group for e in runtime.closure.externals}
    assert groups["libmigraphx_c.so.3"] == "migraphx"
    assert groups["libamdhip64.so.7"] == "hip-runtime"
