"""The stand-in for ort-rocket that the tests build (the real sources cannot be fetched here):
its two source archives, made reproducibly from tests/data/rocket/, and the binary archive a
release engineer's CI would build from them, compiled with aarch64-linux-gnu-gcc; the recipe
re-pinned to them; a machine root that presents an RK3588 with a rocket accel node; and what
the probe's registration of the plugin says, as the loader's records.

`python3 -m tests.helpers.rocket <dir>` writes the three archives where recipes/ep-rocket.toml
looks for them (third_party/ort-rocket/) and prints their SHA-256 values for `invoke pin`."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from ortbundle.config.recipes import load_recipe
from ortbundle.payload.loader.ortapi import Registered
from ortbundle.stage.probe import ProbeResult
from ortbundle.tools.build_source import build_archive
from tests.helpers.source_archives import write_source_tarball
from tests.helpers.wheels import sha256_of

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "tests" / "data" / "rocket"
EPOCH = 315532800  # what `invoke build-source` packs with when SOURCE_DATE_EPOCH is unset
COMPILER = "aarch64-linux-gnu-gcc"
# the licence both projects carry (a stand-in header: the tests need its words, not all of it)
COPYING = (
    b"GNU GENERAL PUBLIC LICENSE\nVersion 3, 29 June 2007\n\n"
    b"Copyright (C) 2007 Free Software Foundation, Inc. <https://fsf.org/>\n"
)
ORT_ROCKET = ("ep_rocket.c", "rocketnpu.h", "CMakeLists.txt")
USERSPACE = ("rocketnpu.c", "rocketnpu.h")
ARCHIVES = {
    "ort-rocket": "ort-rocket-src.tar.gz",
    "rocket-userspace": "rocket-userspace-src.tar.gz",
    "binary": "ort-rocket-linux-aarch64.zip",
}
RECIPE = "recipes/ep-rocket.toml"
RK3588 = b"radxa,rock-5b\0rockchip,rk3588\0"  # a Rock 5B's device-tree compatible


def source_archives(directory: Path) -> dict[str, Path]:
    """ort-rocket's and rocket-userspace's source archives, the same bytes on every machine."""
    made = {}
    for sid, files in (("ort-rocket", ORT_ROCKET), ("rocket-userspace", USERSPACE)):
        members = {name: (SOURCES / name).read_bytes() for name in files} | {"COPYING": COPYING}
        path = directory / ARCHIVES[sid]
        write_source_tarball(path, sid, members)
        made[sid] = path
    return made


def compile_standin(out: Path, sources: Path = SOURCES) -> Path:
    """Build librocketnpu.so.1 and libonnxruntime_rocket.so (linked to it, RUNPATH $ORIGIN)
    from `sources` into `out`, for aarch64; the plugin's path. FileNotFoundError without the
    cross compiler."""
    compiler = shutil.which(COMPILER)
    if compiler is None:
        raise FileNotFoundError(f"{COMPILER} is not installed (Debian: gcc-aarch64-linux-gnu)")
    out.mkdir(parents=True, exist_ok=True)
    flags = ["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror"]
    flags += [f"-ffile-prefix-map={sources}=.", "-Wl,--build-id=none"]
    library = out / "librocketnpu.so.1"
    soname = "-Wl,-soname,librocketnpu.so.1"
    command = [compiler, *flags, soname, "-o", str(library), str(sources / "rocketnpu.c")]
    subprocess.run(command, check=True)
    plugin = out / "libonnxruntime_rocket.so"
    command = [compiler, *flags, f"-I{sources}", "-o", str(plugin), str(sources / "ep_rocket.c")]
    subprocess.run([*command, str(library), "-Wl,-rpath,$ORIGIN"], check=True)
    return plugin


def binary_archive(directory: Path) -> Path:
    """The archive a CI job builds from the two source archives (written beside it first),
    made as `invoke build-source` makes it: the recipe's own build table (command, outputs)
    run by ortbundle/tools/build_source.py; FileNotFoundError without the cross compiler."""
    if shutil.which(COMPILER) is None:
        raise FileNotFoundError(f"{COMPILER} is not installed (Debian: gcc-aarch64-linux-gnu)")
    sources = source_archives(directory)
    recipe = load_recipe(ROOT / RECIPE)
    build = recipe.sources["ep-linux-aarch64"].build
    assert build is not None  # the recipe says how it is built
    data = build_archive(build, sources, recipe.name, RECIPE, EPOCH, os.environ)
    path = directory / ARCHIVES["binary"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def repin(project: Path) -> None:
    """Each `path` source of the project's rocket recipe pinned to the file the stand-in wrote
    (the committed pins are of this machine's compiler's bytes)."""
    recipe = project / RECIPE
    text = recipe.read_text()

    def pin(match: re.Match[str]) -> str:
        digest = hashlib.sha256((project / match[1]).read_bytes()).hexdigest()
        return f'path = "{match[1]}"\nsha256 = "{digest}"'

    recipe.write_text(re.sub(r'path = "([^"]+)"\nsha256 = "[0-9a-f]{64}"', pin, text))


def board(
    root: Path,
    *,
    driver: str | None = "rocket",
    compatible: bytes | None = RK3588,
    node: bool = True,
) -> Path:
    """A machine root: /sys/class/accel/accel0 bound to `driver`, its /dev node, the device tree.
    A qemu sysroot made so is the same machine to the emulated plugin: qemu-user looks every
    path up under its sysroot first, /dev/accel/accel0 too."""
    if driver is not None:
        drivers = root / "sys/bus/platform/drivers" / driver
        drivers.mkdir(parents=True)
        device = root / "sys/devices/platform/fdab0000.npu"
        device.mkdir(parents=True)
        (device / "driver").symlink_to(drivers)
        accel = root / "sys/class/accel/accel0"
        accel.mkdir(parents=True)
        (accel / "device").symlink_to(device)
        if node:
            (root / "dev/accel").mkdir(parents=True)
            (root / "dev/accel/accel0").write_bytes(b"")
    if compatible is not None:
        (root / "proc/device-tree").mkdir(parents=True)
        (root / "proc/device-tree/compatible").write_bytes(compatible)
    return root


def registrations(runtime: dict[str, Any], result: ProbeResult) -> list[Registered]:
    """The records the loader's --open keeps for each plugin EP of `runtime`, read from the
    probe's `plugin` lines instead: the probe registers them with the core as --open does,
    where this machine's Python cannot load the core (aarch64 under qemu)."""
    records = []
    for plugin in runtime.get("plugin_eps") or []:
        name, ep_name, library = plugin["registration_name"], plugin["ep_name"], plugin["library"]
        ok, detail = result.plugins.get(name, (False, "the probe did not report it"))
        if ok:  # the EP names of every device after registering: the core's own, then its
            records.append(Registered(name, ep_name, library, detail.split().count(ep_name)))
        else:
            records.append(Registered(name, ep_name, library, 0, "failed", detail))
    return records


def main(directory: str) -> None:
    target = Path(directory)
    made = {**source_archives(target), "binary": binary_archive(target)}
    for sid, path in made.items():
        print(f"{sid}: {path} sha256 {sha256_of(path)}")


if __name__ == "__main__":
    main(sys.argv[1])
