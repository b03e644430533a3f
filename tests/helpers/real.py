"""What the real-tier tests (test_real.py, test_real_plugins.py) check alike on a real build."""

from __future__ import annotations

import fnmatch
import os
import pickle
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

import pytest

from ortbundle._core.fsio import atomic_write, locked
from ortbundle._core.progress import plain_reporter
from ortbundle.config.targets import get_target
from ortbundle.pipeline.build import DEFAULT_PRODUCT, BuildOptions, Project, build, fetch
from ortbundle.pipeline.result import BuildResult, TargetResult
from ortbundle.stage.binaries import inspect
from ortbundle.stage.staging import StagedRuntime

ROOT = Path(__file__).resolve().parents[2]

# Every file a runtime stages, by (target, recipe), for the recipes both products ship: the
# same pinned wheels, pruned alike. SONAME links are listed as `name -> target`.
KEPT_FILES = {
    ("linux-x86_64", "openvino"): {
        "libonnxruntime.so.1.24.1",
        "libonnxruntime.so.1 -> libonnxruntime.so.1.24.1",
        "libonnxruntime_providers_openvino.so",
        "libonnxruntime_providers_shared.so",
        "libopenvino.so.2541",
        "libopenvino_auto_plugin.so",
        "libopenvino_hetero_plugin.so",
        "libopenvino_intel_gpu_plugin.so",
        "libopenvino_onnx_frontend.so.2541",
        "libtbb.so.12",
        "libtbbmalloc.so",
        "libtbbmalloc.so.2 -> libtbbmalloc.so",
    },
    ("linux-x86_64", "webgpu"): {
        "libonnxruntime.so.1.27.0",
        "libonnxruntime.so.1 -> libonnxruntime.so.1.27.0",
        "libonnxruntime_providers_shared.so",
    },
    ("windows-x86_64", "openvino"): {
        "onnxruntime.dll",
        "onnxruntime_providers_openvino.dll",
        "onnxruntime_providers_shared.dll",
        "openvino.dll",
        "openvino_auto_plugin.dll",
        "openvino_hetero_plugin.dll",
        "openvino_intel_gpu_plugin.dll",
        "openvino_onnx_frontend.dll",
        "tbb12.dll",
        "tbbmalloc.dll",
    },
    ("windows-x86_64", "webgpu"): {
        "onnxruntime.dll",
        "onnxruntime_providers_shared.dll",
        "dxcompiler.dll",
        "dxil.dll",
    },
    # Windows on Arm: the stock core, and the WebGPU plugin EP registered with it
    ("windows-arm64", "stock"): {"onnxruntime.dll", "onnxruntime_providers_shared.dll"},
    ("windows-arm64", "ep-webgpu"): {
        "onnxruntime_providers_webgpu.dll",
        "dxcompiler.dll",
        "dxil.dll",
    },
    # macOS on Apple Silicon: the stock core, linked under its id (libonnxruntime.1.dylib)
    ("macos-arm64", "stock-macos"): {
        "libonnxruntime.1.32.0.dylib",
        "libonnxruntime.1.dylib -> libonnxruntime.1.32.0.dylib",
    },
}


# The C API headers of the default product's pinned Android AAR (MIT): what the probe's and the
# shipped loader's OrtApi indices are checked against. Neither needs them to be built or run.
HEADER_TARGET = "android-arm64-v8a"
C_API_HEADERS = ("onnxruntime_c_api.h", "onnxruntime_ep_c_api.h", "onnxruntime_error_code.h")


def c_api_headers(out: Path) -> Path:
    """Extract `C_API_HEADERS` from the pinned AAR (fetched into the cache once, SHA-256
    checked like every input) into `out`."""
    project = Project.at(ROOT)
    options = BuildOptions(product=DEFAULT_PRODUCT, targets=(HEADER_TARGET,))
    plan, artifacts = fetch(project, options, plain_reporter())
    nested = [n for r in plan.recipes.values() for s in r.sources.values() for n in s.nested]
    (aar,) = [artifacts[n.sha256].path for n in nested if n.member.endswith(".aar")]
    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(aar) as archive:
        for name in C_API_HEADERS:
            (out / name).write_bytes(archive.read(f"headers/{name}"))
    return out


def _shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory every pytest-xdist worker of this session sees (their base temps' parent);
    the session's own base temp when the suite runs in one process."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def build_product(
    tmp_path_factory: pytest.TempPathFactory,
    product: str,
    channels: tuple[str, ...] | None = None,
) -> BuildResult:
    """Build `product` of this repository from the real pinned artifacts into a fresh dist,
    once per test session however many workers run it: the first to take the lock builds and
    leaves the result beside the dist, the others wait and read it. The real tier's modules
    (and the Windows tier) share it read-only."""
    name = product if channels is None else f"{product}-{'-'.join(channels)}"
    shared = _shared_root(tmp_path_factory) / f"real-{name}"
    saved = shared / "result.pickle"
    with locked(shared.with_suffix(".lock")):
        if saved.is_file():
            with saved.open("rb") as handle:
                result: BuildResult = pickle.load(handle)
            return result
        options = BuildOptions(product=product)
        if channels is not None:
            options = replace(options, channels=channels)
        result = build(Project.at(ROOT, shared / "dist"), options, plain_reporter())
        atomic_write(saved, pickle.dumps(result))
    return result


def target_result(result: BuildResult, name: str) -> TargetResult:
    return next(t for t in result.targets if t.target == name)


def listing(directory: Path) -> set[str]:
    """The names in `directory`, a symlink as `name -> target`."""
    return {
        f"{p.name} -> {os.readlink(p)}" if p.is_symlink() else p.name for p in directory.iterdir()
    }


def assert_exact_kept_file_sets(
    result: BuildResult,
    expected: Mapping[tuple[str, str], set[str]],
    expected_mib: Mapping[tuple[str, str], float],
    *,
    key: Callable[[StagedRuntime], str],
    tolerance: float,
) -> None:
    """Every staged directory, keyed (target, key(staged)), lists exactly `expected` and keeps
    libraries within `tolerance` MiB of `expected_mib`; and every expected key was staged."""
    seen = set()
    for target in result.targets:
        for staged in target.runtimes:
            name = (target.target, key(staged))
            seen.add(name)
            found = listing(target.stage / staged.directory)
            assert found == expected[name], (name, sorted(found ^ expected[name]))
            mib = sum(k.size for k in staged.closure.kept) / (1 << 20)
            assert abs(mib - expected_mib[name]) < tolerance, (name, mib)
    assert seen == set(expected), sorted(seen ^ set(expected))


def assert_every_needed_library_resolves(result: BuildResult, payloads: tuple[str, ...]) -> None:
    """Re-read every staged library from disk (not symlinks, not the `payloads` globs) and
    resolve each needed name within its own directory or the target's externals."""
    for staged_target in result.targets:
        target = get_target(staged_target.target)
        for staged in staged_target.runtimes:
            directory = staged_target.stage / staged.directory
            present = {target.key(p.name) for p in directory.iterdir()}
            for path in directory.iterdir():
                if path.is_symlink() or any(fnmatch.fnmatchcase(path.name, g) for g in payloads):
                    continue
                info = inspect(path)
                assert info.machine == target.machine, path
                for needed in info.all_needed:
                    assert target.key(needed) in present or target.external_group(needed), (
                        f"{path.name} needs {needed}"
                    )


def assert_every_staged_byte_is_attributed(result: BuildResult) -> None:
    """Every staged file has an owner (KeyError if not), the stage holds exactly the shipped
    files, and the components and their texts account for every staged byte."""
    for target in result.targets:
        on_disk = {
            p.relative_to(target.stage).as_posix(): p
            for p in target.stage.rglob("*")
            if p.is_file() or p.is_symlink()
        }
        owned = {path: target.licensing.owner(path).name for path in on_disk}
        shipped = {f.path for f in target.files}
        assert set(owned) == shipped, (target.target, sorted(set(owned) ^ shipped))
        staged_bytes = sum(p.stat().st_size for p in on_disk.values() if not p.is_symlink())
        attributed = sum(c.size for c in target.licensing.components) + sum(
            t.size for c in target.licensing.components for t in c.texts
        )
        assert attributed == staged_bytes, (target.target, attributed, staged_bytes)
