"""Run Linux aarch64 programs on this x86_64 machine under qemu-user, in a sysroot of their own.

Used by `invoke smoke` and the arm test tier. Two traps, both measured: containers here have no
binfmt_misc, so `qemu-aarch64` is called explicitly rather than left to the kernel; and qemu
passes the host's /proc/cpuinfo through, on whose x86 lines ONNX Runtime's cpuinfo library
crashes (pytorch/cpuinfo#76). So the sysroot `-L` points at is made here: `lib` is the Debian
cross C library (libc6-dev-arm64-cross: the dynamic loader, libc, libstdc++, libgcc_s), and
`proc/cpuinfo` describes arm64 cores — qemu looks a path up in the sysroot first, /proc too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ortbundle.stage.probe.process import run_captured

__all__ = ["CROSS_CC", "Qemu", "missing_qemu", "qemu_sysroot"]

QEMU = "qemu-aarch64"
CROSS_CC = "aarch64-linux-gnu-gcc"
CROSS_LIB = Path("/usr/aarch64-linux-gnu/lib")
_TIMEOUT = 600
# What a Cortex-A76 core (RK3588's big cores) says of itself in /proc/cpuinfo.
_CORE = (
    "processor\t: {n}\n"
    "BogoMIPS\t: 48.00\n"
    "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid "
    "asimdrdm lrcpc dcpop asimddp\n"
    "CPU implementer\t: 0x41\n"
    "CPU architecture: 8\n"
    "CPU variant\t: 0x4\n"
    "CPU part\t: 0xd0b\n"
    "CPU revision\t: 0\n\n"
)


def missing_qemu() -> list[str]:
    """The Debian packages to install before aarch64 programs can be built and run here."""
    missing = []
    if shutil.which(QEMU) is None:
        missing.append("qemu-user")
    if shutil.which(CROSS_CC) is None:
        missing.append("gcc-aarch64-linux-gnu")
    if not (CROSS_LIB / "ld-linux-aarch64.so.1").exists():
        missing.append("libc6-dev-arm64-cross")
    return missing


@dataclass(frozen=True)
class Qemu:
    """qemu-aarch64 with its sysroot: runs one program, output captured as text."""

    sysroot: Path

    def run(
        self, args: Sequence[str], *, timeout: float = _TIMEOUT, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return run_captured([QEMU, "-L", str(self.sysroot), *args], timeout=timeout, env=env)

    @property
    def lib(self) -> Path:
        """Where the emulated loader finds the system's libraries by name."""
        return self.sysroot / "lib"


def qemu_sysroot(path: Path) -> Qemu:
    """Make the sysroot at `path` (the cross C library, an arm64 /proc/cpuinfo)."""
    path.mkdir(parents=True, exist_ok=True)
    lib = path / "lib"
    if not lib.is_symlink():
        lib.symlink_to(CROSS_LIB, target_is_directory=True)
    (path / "proc").mkdir(exist_ok=True)
    cores = os.cpu_count() or 1  # as many as the host's /sys lists, which qemu passes through
    (path / "proc" / "cpuinfo").write_text(
        "".join(_CORE.format(n=n) for n in range(cores)), encoding="ascii"
    )
    return Qemu(path)
