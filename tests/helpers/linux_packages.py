"""A Linux stage the shipped loader can really open, for the deb and rpm channel tests.

Each runtime is a small C library compiled here (gcc) that exports OrtGetApiBase and reports
its version, linked as a distribution would link it (RELRO, BIND_NOW, libc), beside the real
runtime_loader.py, a runtimes.json it reads and the licence texts a build stages.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from importlib import resources
from pathlib import Path

import pytest

from ortbundle.channels import (
    Attribution,
    ExternalLibrary,
    PackageInput,
    ShippedFile,
    ShippedRuntime,
)
from ortbundle.loader import SCHEMA
from tests.helpers.packages import EPOCH, SETTINGS

OVERRIDE_ENV = "DEMO_ORT_DIR"
RUNTIMES = {"openvino": "1.24.1", "webgpu": "1.27.0"}
LICENSE = b"MIT License\n\nCopyright (c) 2018 Microsoft Corporation\n\nPermission is granted.\n"

_CORE = r"""
#include <stdlib.h>
static const void *GetApi(unsigned version) { return getenv(version ? "A" : "B"); }
static const char *GetVersionString(void) { return "%s"; }
static struct { const void *(*GetApi)(unsigned); const char *(*GetVersionString)(void); } base =
  { GetApi, GetVersionString };
const void *OrtGetApiBase(void) { return &base; }
"""


def compile_core(directory: Path, version: str) -> Path:
    """libonnxruntime.so.<version>, SONAME libonnxruntime.so.1, linked with the usual hardening."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed (Debian: apt-get install gcc)")
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / f"core-{version}.c"
    source.write_text(_CORE % version)
    library = directory / f"libonnxruntime.so.{version}"
    subprocess.run(
        [
            *("gcc", "-shared", "-fPIC", "-O2", "-g0", "-fstack-protector-strong"),
            *("-Wl,-z,relro,-z,now,-z,noexecstack", "-Wl,-soname,libonnxruntime.so.1"),
            *("-o", str(library), str(source)),
        ],
        check=True,
    )
    source.unlink()
    return library


def make_loadable_package(root: Path, **description: str) -> PackageInput:
    """A linux-x86_64 stage under `root` with two openable runtimes, and its PackageInput."""
    stage = root / "linux-x86_64"
    contents: dict[str, bytes] = {
        "NOTICE": b"demo 1.0.0\n\nonnxruntime  MIT  licenses/onnxruntime/LICENSE\n",
        "licenses/onnxruntime/LICENSE": LICENSE,
    }
    entries = []
    for name, version in RUNTIMES.items():
        built = compile_core(root / "build" / name, version)
        data = built.read_bytes()
        contents[f"runtimes/{name}/{built.name}"] = data
        digest = hashlib.sha256(data).hexdigest()
        entries.append(
            {
                "name": name,
                "label": name,
                "directory": f"runtimes/{name}",
                "entry": built.name,
                "ort_version": version,
                "providers": ["CPUExecutionProvider"],
                "fits": {"gpu_vendors": [], "any_gpu": False, "soc_families": []},
                "plugin_eps": [],
                "files": [
                    {"path": built.name, "size": len(data), "sha256": digest},
                    {
                        "path": "libonnxruntime.so.1",
                        "size": len(data),
                        "sha256": digest,
                        "link_to": built.name,
                    },
                ],
            }
        )
    index = {
        "schema": SCHEMA,
        "product": {"name": "demo", "version": "1.0.0"},
        "target": "linux-x86_64",
        "override_env": OVERRIDE_ENV,
        "runtimes": entries,
    }
    contents["runtimes.json"] = (json.dumps(index, indent=2, sort_keys=True) + "\n").encode()
    contents["runtime_loader.py"] = resources.files("ortbundle").joinpath("loader.py").read_bytes()
    files: list[ShippedFile] = []
    for path, data in contents.items():
        dest = stage / path
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        mode = 0o755 if path == "runtime_loader.py" else 0o644
        dest.chmod(mode)
        files.append(ShippedFile(path, len(data), hashlib.sha256(data).hexdigest(), mode))
    for name, version in RUNTIMES.items():
        (stage / f"runtimes/{name}/libonnxruntime.so.1").symlink_to(f"libonnxruntime.so.{version}")
        real = next(f for f in files if f.path == f"runtimes/{name}/libonnxruntime.so.{version}")
        files.append(
            ShippedFile(
                f"runtimes/{name}/libonnxruntime.so.1",
                real.size,
                real.sha256,
                0o777,
                link_to=f"libonnxruntime.so.{version}",
            )
        )
    libraries = tuple(sorted(f.path for f in files if f.path.startswith("runtimes/")))
    return PackageInput(
        product="demo",
        version="1.0.0",
        description=description.get("description", "Demo's bundled ONNX Runtime builds."),
        url="https://demo.invalid/",
        target="linux-x86_64",
        stage=stage,
        files=tuple(sorted(files, key=lambda f: f.path)),
        licenses=("MIT",),
        externals=(
            ExternalLibrary("libc.so.6", "glibc", "system", "", libraries[:1]),
            ExternalLibrary("libOpenCL.so.1", "opencl", "driver", "", libraries[:1]),
        ),
        runtimes=tuple(ShippedRuntime(name, name, f"runtimes/{name}", False) for name in RUNTIMES),
        settings=SETTINGS,
        source_date_epoch=EPOCH,
        attribution=(
            Attribution(
                "onnxruntime",
                "1.0.0",
                "MIT",
                ("Copyright (c) 2018 Microsoft Corporation",),
                tuple(f.path for f in files if f.path != "NOTICE"),
                ("licenses/onnxruntime/LICENSE",),
            ),
        ),
        sbom='{"bomFormat": "CycloneDX", "specVersion": "1.6"}\n',
    )
