"""The stand-in for ort-rocket that the tests build (the real sources cannot be fetched here):
its two source archives, made reproducibly from tests/data/rocket/, and the binary archive a
release engineer's CI would build from them, compiled with aarch64-linux-gnu-gcc.

`python3 -m tests.helpers.rocket <dir>` writes the three archives where recipes/ep-rocket.toml
looks for them (third_party/ort-rocket/) and prints their SHA-256 values for `invoke pin`."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from tests.helpers.source_archives import write_source_tarball
from tests.helpers.wheels import sha256_of

SOURCES = Path(__file__).resolve().parents[1] / "data" / "rocket"
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


def source_archives(directory: Path) -> dict[str, Path]:
    """ort-rocket's and rocket-userspace's source archives, the same bytes on every machine."""
    made = {}
    for sid, files in (("ort-rocket", ORT_ROCKET), ("rocket-userspace", USERSPACE)):
        members = {name: (SOURCES / name).read_bytes() for name in files} | {"COPYING": COPYING}
        path = directory / ARCHIVES[sid]
        write_source_tarball(path, sid, members)
        made[sid] = path
    return made


def binary_archive(directory: Path) -> Path:
    """libonnxruntime_rocket.so linked to librocketnpu.so.1, both for aarch64, in a zip (as a
    CI job's artifact) beside COPYING; FileNotFoundError without the cross compiler."""
    compiler = shutil.which(COMPILER)
    if compiler is None:
        raise FileNotFoundError(f"{COMPILER} is not installed (Debian: gcc-aarch64-linux-gnu)")
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch)
        flags = ["-shared", "-fPIC", "-O2", f"-ffile-prefix-map={SOURCES}=.", "-Wl,--build-id=none"]
        subprocess.run(
            [
                compiler,
                *flags,
                "-Wl,-soname,librocketnpu.so.1",
                "-o",
                str(out / "librocketnpu.so.1"),
                str(SOURCES / "rocketnpu.c"),
            ],
            check=True,
        )
        subprocess.run(
            [
                compiler,
                *flags,
                f"-I{SOURCES}",
                "-o",
                str(out / "libonnxruntime_rocket.so"),
                str(SOURCES / "ep_rocket.c"),
                str(out / "librocketnpu.so.1"),
                "-Wl,-rpath,$ORIGIN",
            ],
            check=True,
        )
        members = {
            "libonnxruntime_rocket.so": (out / "libonnxruntime_rocket.so").read_bytes(),
            "librocketnpu.so.1": (out / "librocketnpu.so.1").read_bytes(),
            "COPYING": COPYING,
            # the CI job packs the driver library's licence from its sources beside it
            "rocket-userspace/COPYING": COPYING,
        }
    path = directory / ARCHIVES["binary"]
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in sorted(members.items()):
            info = zipfile.ZipInfo(f"ep-rocket/{name}", (2023, 11, 14, 0, 0, 0))
            info.external_attr = 0o755 << 16
            archive.writestr(info, data, zipfile.ZIP_DEFLATED)
    return path


def main(directory: str) -> None:
    target = Path(directory)
    made = {**source_archives(target), "binary": binary_archive(target)}
    for sid, path in made.items():
        print(f"{sid}: {path} sha256 {sha256_of(path)}")


if __name__ == "__main__":
    main(sys.argv[1])
