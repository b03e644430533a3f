"""A small finished target stage and its PackageInput, for the channel tests."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

from ortbundle.channels import PackageInput, PackagingSettings, ShippedRuntime
from ortbundle.config.targets import get_target
from ortbundle.licensing.attribution import ShippedFile
from ortbundle.stage.closure import ExternalLibrary
from tests.helpers.elf import make_elf
from tests.helpers.pe import make_pe

EPOCH = 1_700_000_000

SETTINGS = PackagingSettings(
    package_name="demo-onnxruntime",
    pkgrel=1,
    publisher="Demo Org",
    flatpak_app_id="org.example.Demo",
    flatpak_runtime="org.freedesktop.Platform",
    flatpak_runtime_version="24.08",
    flatpak_sdk="org.freedesktop.Sdk",
    flatpak_command="demo",
)

_TEXTS = {
    "licenses/onnxruntime/LICENSE": b"MIT License\n\nCopyright (c) Microsoft Corporation\n",
    "licenses/openvino/LICENSE": b"Apache License\nVersion 2.0, January 2004\n",
    "NOTICE": b"demo 1.0.0\n\nonnxruntime 1.0.0  MIT  licenses/onnxruntime/LICENSE\n",
    "runtimes.json": b'{"schema": "ortbundle.runtimes/1"}\n',
}


def _linux_files(machine: str) -> dict[str, bytes]:
    return {
        "runtimes/openvino/libonnxruntime.so.1.0.0": make_elf(
            machine=machine,
            soname="libonnxruntime.so.1",
            needed=("libstdc++.so.6", "libc.so.6"),
            payload=b"x" * 999,
        ),
        "runtimes/openvino/libopenvino.so.2025": make_elf(
            machine=machine, soname="libopenvino.so.2025", needed=("libOpenCL.so.1",)
        ),
        "runtimes/webgpu/libonnxruntime.so.1.0.0": make_elf(
            machine=machine, soname="libonnxruntime.so.1", needed=("libm.so.6",), payload=b"y" * 777
        ),
    }


def _windows_files(machine: str) -> dict[str, bytes]:
    return {
        "runtimes/openvino/onnxruntime.dll": make_pe(
            machine=machine, imports=("KERNEL32.dll", "MSVCP140.dll")
        ),
        "runtimes/openvino/openvino.dll": make_pe(machine=machine, imports=("VCRUNTIME140.dll",)),
        "runtimes/webgpu/onnxruntime.dll": make_pe(machine=machine, imports=("KERNEL32.dll",)),
        "runtimes/webgpu/dxil.dll": make_pe(machine=machine, imports=()),
    }


def write_stage_files(stage: Path, contents: dict[str, bytes]) -> list[ShippedFile]:
    """Write regular files into a stage as the build does (the loader executable), described."""
    files = []
    for path, data in contents.items():
        dest = stage / path
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        mode = 0o755 if path == "runtime_loader.py" else 0o644
        dest.chmod(mode)
        files.append(ShippedFile(path, len(data), hashlib.sha256(data).hexdigest(), mode))
    return files


def make_package_input(
    root: Path, target: str = "linux-x86_64", **overrides: object
) -> PackageInput:
    """Write a stage under `root` the way the build lays one out and describe it."""
    stage = root / target
    linux = target.startswith("linux-")  # linux-x86_64, linux-aarch64: ELF of its machine
    machine = get_target(target).machine
    if not linux and not target.startswith("windows-"):
        machine = "AMD64"  # Android, macOS: the channel tests only need some library files
    contents = dict(_linux_files(machine) if linux else _windows_files(machine))
    contents.update(_TEXTS)
    contents["runtime_loader.py"] = b"#!/usr/bin/env python3\nprint('loader')\n"
    files = write_stage_files(stage, contents)
    externals: tuple[ExternalLibrary, ...]
    if linux:
        for runtime in ("openvino", "webgpu"):
            link = stage / f"runtimes/{runtime}/libonnxruntime.so.1"
            link.symlink_to("libonnxruntime.so.1.0.0")
            real = next(f for f in files if f.path == f"runtimes/{runtime}/libonnxruntime.so.1.0.0")
            files.append(
                ShippedFile(
                    f"runtimes/{runtime}/libonnxruntime.so.1",
                    real.size,
                    real.sha256,
                    0o777,
                    link_to="libonnxruntime.so.1.0.0",
                )
            )
        externals = (
            ExternalLibrary(
                "libc.so.6", "glibc", "system", "", ("runtimes/openvino/libonnxruntime.so.1.0.0",)
            ),
            ExternalLibrary(
                "libm.so.6", "glibc", "system", "", ("runtimes/webgpu/libonnxruntime.so.1.0.0",)
            ),
            ExternalLibrary(
                "libstdc++.so.6",
                "gcc-libs",
                "toolchain",
                "",
                ("runtimes/openvino/libonnxruntime.so.1.0.0",),
            ),
            ExternalLibrary(
                "libOpenCL.so.1",
                "opencl",
                "driver",
                "OpenCL ICD loader",
                ("runtimes/openvino/libopenvino.so.2025",),
            ),
        )
    else:
        externals = (
            ExternalLibrary(
                "KERNEL32.dll", "windows", "system", "", ("runtimes/openvino/onnxruntime.dll",)
            ),
            ExternalLibrary(
                "MSVCP140.dll",
                "msvc-runtime",
                "redist",
                "Microsoft Visual C++ 2015-2022 Redistributable (x64)",
                ("runtimes/openvino/onnxruntime.dll",),
            ),
            ExternalLibrary(
                "VCRUNTIME140.dll",
                "msvc-runtime",
                "redist",
                "Microsoft Visual C++ 2015-2022 Redistributable (x64)",
                ("runtimes/openvino/openvino.dll",),
            ),
        )
    package = PackageInput(
        product="demo",
        version="1.0.0",
        description="Demo's bundled ONNX Runtime builds",
        url="https://demo.invalid/",
        target=target,
        stage=stage,
        files=tuple(sorted(files, key=lambda f: f.path)),
        licenses=("Apache-2.0", "MIT"),
        externals=externals,
        runtimes=(
            ShippedRuntime("openvino", "OpenVINO", "runtimes/openvino", True),
            ShippedRuntime("webgpu", "WebGPU", "runtimes/webgpu", True),
        ),
        settings=SETTINGS,
        source_date_epoch=EPOCH,
    )
    return replace(package, **overrides)  # type: ignore[arg-type]
