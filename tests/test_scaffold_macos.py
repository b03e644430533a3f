"""`invoke new-recipe` on a macOS wheel: a local index serves a macosx_14_0_arm64 wheel with
the real one's shape (a versioned core whose id names no file in the wheel, a pybind module);
the scaffold proposes the recipe, and the build stages, links and signs what it proposed."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from ortbundle._core.errors import ClosureError
from ortbundle._core.progress import Reporter
from ortbundle.cli import run_build
from ortbundle.cli.common import CommandFailed
from ortbundle.cli.scaffold import run_new_recipe
from ortbundle.config.plan import Project
from ortbundle.pipeline.build import build
from ortbundle.stage.binaries import inspect
from ortbundle.tools.scaffold import new_recipe
from tests.helpers.index_server import IndexServer
from tests.helpers.macho import Dylib, slice_bytes
from tests.helpers.project import CORE_EXPORTS, CPU
from tests.test_scaffold import MIT, PROJECT, _root, build_options, options, publish

pytest.importorskip("apple_platform")

SYSTEM = "/usr/lib/libSystem.B.dylib"


def _macos_wheel() -> dict[str, bytes]:
    core = Dylib(
        install_id="@rpath/libonnxruntime.1.dylib",
        needed=(SYSTEM, "/System/Library/Frameworks/CoreML.framework/Versions/A/CoreML"),
        rpaths=("@loader_path",),
        exports=(
            *CORE_EXPORTS,
            "OrtSessionOptionsAppendExecutionProvider_CPU",
            "OrtSessionOptionsAppendExecutionProvider_CoreML",
        ),
        strings=(*CPU, "CoreMLExecutionProvider", "CUDAExecutionProvider"),
    )
    pybind = Dylib(needed=(SYSTEM, "@rpath/libonnxruntime.1.dylib"), extra=b"pybind")
    return {
        "onnxruntime/capi/libonnxruntime.1.32.0.dylib": slice_bytes(core),
        "onnxruntime/capi/onnxruntime_pybind11_state.so": slice_bytes(pybind),
        "acme_inference-2.0.0.dist-info/licenses/LICENSE": MIT,
    }


def test_a_macos_wheel_is_scaffolded_and_builds(tmp_path: Path, reporter: Reporter) -> None:
    with IndexServer().running() as index:
        publish(
            index, tmp_path / "wheels", "2.0.0", _macos_wheel(), "cp312-cp312-macosx_14_0_arm64"
        )
        root = _root(tmp_path)
        project = Project.at(root)
        scaffold = options(
            tmp_path, PROJECT, index_url=index.url, product="myapp", targets=("macos-arm64",)
        )
        result = new_recipe(project, scaffold, reporter)
        recipe = tomllib.loads(result.recipe.read_text())
        # what the core offers, read from its append functions: CoreML, then the CPU (a name
        # it merely carries, CUDA, is not offered)
        assert recipe["component"]["providers"] == [
            "CoreMLExecutionProvider",
            "CPUExecutionProvider",
        ]
        mac = recipe["targets"]["macos-arm64"]
        assert mac["entry"] == "libonnxruntime.*.*.*.dylib"
        assert mac["roots"] == ["libonnxruntime.*.dylib"]
        assert mac["take"] == [
            {
                "source": "macos-arm64",
                "libraries": ["onnxruntime/capi/*.dylib", "onnxruntime/capi/*.so"],
            }
        ]
        assert mac["drop"] == [
            {"names": ["onnxruntime_pybind11_state*"], "reason": "Python binding"}
        ]
        build(project, build_options(tmp_path, "myapp", index_url=index.url), reporter)
    staged = root / "dist/myapp/0.1.0/macos-arm64/runtimes/acme-inference"
    core = staged / "libonnxruntime.1.32.0.dylib"
    assert (staged / "libonnxruntime.1.dylib").readlink() == Path(core.name)
    info = inspect(core)
    assert (info.soname, info.runpath, info.signed) == (
        "@rpath/libonnxruntime.1.dylib",
        ("@loader_path",),
        True,
    )
    assert not list(staged.glob("*pybind*"))


def test_executable_path_is_refused_by_name_and_nothing_is_published(tmp_path: Path) -> None:
    """The scaffold leaves the choice to the user (exit 8); the build then refuses the name
    with the closure's own reason and fix, and publishes nothing."""
    members = _macos_wheel()
    core = Dylib(
        install_id="@rpath/libonnxruntime.1.dylib",
        needed=(SYSTEM, "@executable_path/../Frameworks/libhelper.dylib"),
        exports=CORE_EXPORTS,
    )
    members["onnxruntime/capi/libonnxruntime.1.32.0.dylib"] = slice_bytes(core)
    with IndexServer().running() as index:
        publish(index, tmp_path / "wheels", "2.0.0", members, "cp312-cp312-macosx_14_0_arm64")
        root = _root(tmp_path)
        scaffold = options(
            tmp_path, PROJECT, index_url=index.url, product="myapp", targets=("macos-arm64",)
        )
        with pytest.raises(CommandFailed) as chosen:
            run_new_recipe(scaffold, root=root)
        assert chosen.value.code == ClosureError.exit_code
        with pytest.raises(CommandFailed) as failed:
            run_build(build_options(tmp_path, "myapp", index_url=index.url), root=root)
    assert failed.value.code == ClosureError.exit_code
    message = str(failed.value)
    assert (
        "libonnxruntime.1.32.0.dylib needs @executable_path/../Frameworks/libhelper.dylib: "
        "@executable_path depends on the app that loads it" in message
    )
    assert "[component acme-inference, target macos-arm64" in message
    assert "found through @loader_path" in message
    assert not (root / "dist" / "myapp").exists()


def test_a_core_with_no_provider_table_offers_what_it_exports_an_append_function_for(
    tmp_path: Path, reporter: Reporter
) -> None:
    """A Mach-O core is read statically (no table to read GetAvailableProviders from); its
    OrtSessionOptionsAppendExecutionProvider_CoreML export says CoreML is built in, so the
    recipe offers CoreML then CPU, as the stock macOS wheel does (issue #42)."""
    members = _macos_wheel()
    core = Dylib(
        install_id="@rpath/libonnxruntime.1.dylib",
        needed=(SYSTEM, "/System/Library/Frameworks/CoreML.framework/Versions/A/CoreML"),
        exports=(*CORE_EXPORTS, "OrtSessionOptionsAppendExecutionProvider_CoreML"),
        strings=(*CPU, "CoreMLExecutionProvider", "CUDAExecutionProvider"),
    )
    members["onnxruntime/capi/libonnxruntime.1.32.0.dylib"] = slice_bytes(core)
    with IndexServer().running() as index:
        publish(index, tmp_path / "wheels", "2.0.0", members, "cp312-cp312-macosx_14_0_arm64")
        scaffold = options(tmp_path, PROJECT, index_url=index.url, targets=("macos-arm64",))
        result = new_recipe(Project.at(_root(tmp_path)), scaffold, reporter)
    recipe = tomllib.loads(result.recipe.read_text())
    assert recipe["component"]["providers"] == ["CoreMLExecutionProvider", "CPUExecutionProvider"]
    assert "OrtSessionOptionsAppendExecutionProvider_*" in result.recipe.read_text()
