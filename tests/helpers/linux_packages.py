"""A Linux stage the shipped loader can really open, for the deb and rpm channel tests.

Each runtime is a small C library compiled here (gcc) that exports OrtGetApiBase and reports
its version, linked as a distribution would link it (RELRO, BIND_NOW, libc), beside the real
runtime_loader.py, a runtimes.json it reads and the licence texts a build stages.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from ortbundle.channels import Attribution, PackageInput, ShippedRuntime
from ortbundle.licensing.attribution import ShippedFile
from ortbundle.payload.loader import SCHEMA, loader_source
from ortbundle.stage.closure import ExternalLibrary
from tests.helpers.packages import EPOCH, SETTINGS, write_stage_files

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


# The C compiler for each Linux target's machine, and the Debian package that installs it.
COMPILERS = {
    "linux-x86_64": ("gcc", "gcc"),
    "linux-aarch64": ("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu"),
}


def compile_core(directory: Path, version: str, target: str = "linux-x86_64") -> Path:
    """libonnxruntime.so.<version>, SONAME libonnxruntime.so.1, linked with the usual hardening,
    for the target's machine."""
    cc, package = COMPILERS[target]
    if shutil.which(cc) is None:
        pytest.skip(f"{cc} is not installed (Debian: apt-get install {package})")
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / f"core-{version}.c"
    source.write_text(_CORE % version)
    library = directory / f"libonnxruntime.so.{version}"
    subprocess.run(
        [
            *(cc, "-shared", "-fPIC", "-O2", "-g0", "-fstack-protector-strong"),
            *("-Wl,-z,relro,-z,now,-z,noexecstack", "-Wl,-soname,libonnxruntime.so.1"),
            *("-o", str(library), str(source)),
        ],
        check=True,
    )
    source.unlink()
    return library


def make_loadable_package(
    root: Path, target: str = "linux-x86_64", **description: str
) -> PackageInput:
    """A Linux stage under `root` with two runtimes openable on the target's machine, and its
    PackageInput."""
    stage = root / target
    contents: dict[str, bytes] = {
        "NOTICE": b"demo 1.0.0\n\nonnxruntime  MIT  licenses/onnxruntime/LICENSE\n",
        "licenses/onnxruntime/LICENSE": LICENSE,
    }
    entries = []
    for name, version in RUNTIMES.items():
        built = compile_core(root / "build" / name, version, target)
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
        "target": target,
        "override_env": OVERRIDE_ENV,
        "runtimes": entries,
    }
    contents["runtimes.json"] = (json.dumps(index, indent=2, sort_keys=True) + "\n").encode()
    contents["runtime_loader.py"] = loader_source().encode("utf-8")
    files = write_stage_files(stage, contents)
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
        target=target,
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


def stage_listing(files: Iterable[ShippedFile], prefix: str) -> set[tuple[str, str, str]]:
    """(path, type and mode, link target) of every stage entry and directory, under `prefix`."""
    listing = {(prefix, "d755", "")}
    for shipped in files:
        parts = shipped.path.split("/")
        for i in range(1, len(parts)):
            listing.add((f"{prefix}/{'/'.join(parts[:i])}", "d755", ""))
        if shipped.link_to:
            listing.add((f"{prefix}/{shipped.path}", "l", shipped.link_to))
        else:
            listing.add((f"{prefix}/{shipped.path}", f"f{shipped.mode:o}", ""))
    return listing


def _kind(mode: str) -> str:
    """ls-style mode (drwxr-xr-x) → d755 / f644 / l."""
    if mode[0] == "l":
        return "l"
    bits = "".join("0" if c == "-" else "1" for c in mode[1:10])
    return ("d" if mode[0] == "d" else "f") + f"{int(bits, 2):o}"


def deb_listing(deb: Path) -> set[tuple[str, str, str]]:
    """`dpkg-deb --contents`, each entry root-owned, as stage_listing spells entries."""
    listed = subprocess.run(
        ["dpkg-deb", "--contents", str(deb)], capture_output=True, text=True, check=True
    ).stdout
    entries = set()
    for line in listed.splitlines():
        mode, owner, _size, _date, _time, rest = line.split(None, 5)
        assert owner == "root/root", line
        path, _, link = rest.partition(" -> ")
        entries.add((path.removeprefix(".").rstrip("/"), _kind(mode), link))
    return entries


def rpm_listing(rpm: Path) -> tuple[set[tuple[str, str, str]], dict[str, str]]:
    """`rpm -qp` of every file, root-owned, as stage_listing spells entries; and each file's
    flags (l: %license, d: %doc)."""
    query = (
        "[%{FILEMODES:perms} %{FILEUSERNAME}:%{FILEGROUPNAME} %{FILEFLAGS:fflags}\t"
        "%{FILENAMES}\t%{FILELINKTOS}\n]"
    )
    listed = subprocess.run(
        ["rpm", "-qp", "--qf", query, str(rpm)], capture_output=True, text=True, check=True
    ).stdout
    entries, flags = set(), {}
    for line in listed.splitlines():
        head, path, link = line.split("\t")
        mode, owner, *flag = head.split(" ")
        assert owner == "root:root", line
        entries.add((path, _kind(mode), link))
        flags[path] = "".join(flag)
    return entries, flags


def open_each_runtime(installed: Path, override_env: str, runtimes: dict[str, str]) -> None:
    """Run the installed runtime_loader.py from `installed`, each runtime forced by the
    override, and check it opens the runtime and reads the version runtimes.json claims."""
    loader = installed / "runtime_loader.py"
    assert os.access(loader, os.X_OK)
    for name, version in runtimes.items():
        result = subprocess.run(
            [sys.executable, str(loader), "--open", "--verify", "--json"],
            capture_output=True,
            text=True,
            check=False,
            env={"PATH": os.defpath, override_env: f"runtimes/{name}"},
        )
        assert result.returncode == 0, result.stderr
        decision = json.loads(result.stdout)
        assert decision["runtime"] == name
        assert decision["loaded_version"] == version
