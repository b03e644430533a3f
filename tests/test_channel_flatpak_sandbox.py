"""The Flatpak channel and host-only requirements (`sandbox = false`): a runtime that needs one
is refused, or left out when the product says so (and the build says it is useless there); an
optional host-only library is a note naming the rung that will not work in the sandbox."""

from __future__ import annotations

import hashlib
import json
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from ortbundle._core.errors import ConfigError
from ortbundle.channels import ChannelOutput, PackageInput
from ortbundle.channels.flatpak import FlatpakChannel, check_manifest
from ortbundle.licensing.attribution import ShippedFile
from ortbundle.stage.closure import ExternalLibrary
from tests.helpers.packages import SETTINGS, make_package_input
from tests.test_channel_flatpak import (
    APP,
    LOCAL_SETTINGS,
    MODULE,
    _entries,
    _schema_errors,
    build_app,
    local_runtime,
)

__all__ = ["local_runtime"]  # the module-scoped fixture, shared with tests/test_channel_flatpak.py

WEBGPU = "runtimes/webgpu/libonnxruntime.so.1.0.0"
CUDNN = ExternalLibrary(
    "libcudnn.so.9",
    "cudnn",
    "toolkit",
    "NVIDIA cuDNN 9",
    (WEBGPU,),
    install="Install NVIDIA cuDNN 9 for CUDA 13",
    sandbox=False,
)
HOST_GPU = ExternalLibrary(
    "libhostgpu.so.1",
    "hostgpu",
    "driver",
    "the host's GPU stack",
    ("runtimes/openvino/libopenvino.so.2025",),
    optional=True,
    sandbox=False,
)
INDEX = {
    "schema": "ortbundle.runtimes/1",
    "runtimes": [{"name": "openvino", "entry": "x"}, {"name": "webgpu", "entry": "y"}],
}


def _package(root: Path, *extra: ExternalLibrary, skip: tuple[str, ...] = ()) -> PackageInput:
    package = make_package_input(root / "stage", "linux-x86_64")
    data = (json.dumps(INDEX, indent=2) + "\n").encode()
    (package.stage / "runtimes.json").write_bytes(data)
    index = ShippedFile("runtimes.json", len(data), hashlib.sha256(data).hexdigest(), 0o644)
    files = tuple(index if f.path == "runtimes.json" else f for f in package.files)
    settings = replace(SETTINGS, flatpak_skip_runtimes=skip)
    return replace(package, files=files, externals=package.externals + extra, settings=settings)


def _generate(package: PackageInput, root: Path) -> ChannelOutput:
    return FlatpakChannel().generate(package, root / "flatpak")


def test_a_runtime_needing_a_host_only_library_is_refused_naming_it_and_the_fixes(
    tmp_path: Path,
) -> None:
    package = _package(tmp_path, CUDNN)
    with pytest.raises(ConfigError) as raised:
        _generate(package, tmp_path)
    message = str(raised.value)
    assert "runtime webgpu needs libcudnn.so.9 (Install NVIDIA cuDNN 9 for CUDA 13)" in message
    assert "openvino" not in message.split("fix")[0]
    assert 'flatpak_skip_runtimes = ["webgpu"]' in message
    assert "drop the flatpak channel" in message and "drop the runtime" in message
    assert not (tmp_path / "flatpak").exists()  # nothing written


def test_without_host_only_libraries_nothing_is_refused_or_said(tmp_path: Path) -> None:
    output = _generate(_package(tmp_path, replace(CUDNN, sandbox=True)), tmp_path)
    assert not any("host-only" in note or "left out" in note for note in output.notes)
    assert "runtimes/webgpu" in _load_tarball_names(output)


def test_a_skipped_runtime_is_left_out_with_its_index_entry_and_the_build_says_why(
    tmp_path: Path,
) -> None:
    package = _package(tmp_path, CUDNN, skip=("webgpu",))
    output = _generate(package, tmp_path)
    (note,) = (n for n in output.notes if "left out" in n)
    assert note.startswith("runtime webgpu is left out of the Flatpak")
    assert "libcudnn.so.9" in note and "useless there" in note
    names = _load_tarball_names(output)
    assert "runtimes/webgpu" not in names and "runtimes/openvino" in names
    assert "runtimes.json" not in names  # the module installs its own, without webgpu
    index = json.loads((output.directory / "runtimes.json").read_bytes())
    assert [r["name"] for r in index["runtimes"]] == ["openvino"]
    module = json.loads((output.directory / MODULE).read_bytes())
    assert module["sources"][1]["path"] == "runtimes.json"
    app = json.loads((output.directory / APP).read_bytes())
    assert _schema_errors({**app, "modules": [module]}) == []
    check_manifest(app, base=output.directory)  # both sources pinned and matching


def test_an_unknown_skipped_runtime_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="flatpak_skip_runtimes names cuda"):
        _generate(_package(tmp_path, skip=("cuda",)), tmp_path)


def test_an_optional_host_only_library_is_a_note_naming_the_rung(tmp_path: Path) -> None:
    output = _generate(_package(tmp_path, HOST_GPU), tmp_path)
    (note,) = (n for n in output.notes if "sandbox (a host-only" in n)
    assert note.startswith("the OpenVINO rung that uses libhostgpu.so.1 (the host's GPU stack)")
    assert "runtimes/openvino" in _load_tarball_names(output)


def _load_tarball_names(output: ChannelOutput) -> set[str]:
    """The stage paths in the module's tarball, and each of their parent directories."""
    (tarball,) = (f for f in output.files if f.name.endswith(".tar.gz"))
    with tarfile.open(tarball) as archive:
        return {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}


@pytest.mark.tools
def test_flatpak_builder_installs_the_stage_without_the_skipped_runtime(
    tmp_path: Path, local_runtime: Path
) -> None:
    settings = replace(LOCAL_SETTINGS, flatpak_skip_runtimes=("webgpu",))
    package = replace(_package(tmp_path, CUDNN), settings=settings)
    output = _generate(package, tmp_path)
    build = build_app(output, local_runtime, tmp_path)
    installed = build / "files" / "lib" / "demo-onnxruntime"
    expected = {f.path for f in package.files if not f.path.startswith("runtimes/webgpu/")}
    assert _entries(installed) == expected
    index = json.loads((installed / "runtimes.json").read_bytes())
    assert [r["name"] for r in index["runtimes"]] == ["openvino"]


def test_a_plugin_needing_a_host_only_library_is_refused_too(tmp_path: Path) -> None:
    plugin = replace(CUDNN, needed_by=("plugins/cuda-ep/libcuda_ep.so",))
    with pytest.raises(ConfigError, match=r"plugins/cuda-ep needs libcudnn\.so\.9"):
        _generate(_package(tmp_path, plugin), tmp_path)
