"""What the machine has: its GPUs (PCI under a root directory, SetupAPI on Windows, the Apple GPU
driver's bundles on macOS), its SoC, its system libraries' directories and its Windows, macOS or
Android version — and whether it is too old for a runtime. Read from files under a root that
tests can point at a fake machine."""

from __future__ import annotations

import contextlib
import os
import plistlib
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ortbundle.payload.loader.vendors import GPU_VENDORS

# PCI vendor id -> vendor, for a GPU on a PCI bus (vendors.py, from data/gpu-vendors.toml)
VENDORS = {i: name for name, v in GPU_VENDORS.items() if v.on_pci for i in v.pci_ids}
_APPLE = GPU_VENDORS["apple"].pci_ids[0]  # the GPU of every Apple Silicon Mac


@dataclass(frozen=True)
class Gpu:
    vendor: str  # intel | nvidia | amd | qualcomm | apple | other
    vendor_id: int
    device_id: int
    where: str


@dataclass(frozen=True)
class Accel:
    """A compute accelerator behind the kernel's DRM accel subsystem (/dev/accel/accel*)."""

    name: str  # accel0
    driver: str  # its kernel driver (/sys/class/accel/<name>/device/driver): "rocket"
    node: str  # /dev/accel/<name>, under the root read
    unopenable: str = ""  # why this process cannot open the node; "": it can


@dataclass(frozen=True)
class Hardware:
    gpus: tuple[Gpu, ...] = ()
    kfd: bool = False  # /dev/kfd: the AMD ROCm compute driver
    nvidia_driver: bool = False  # /proc/driver/nvidia: the NVIDIA kernel driver
    soc: str | None = None  # SoC manufacturer/family, lower case (Android; Windows on Arm)
    library_dirs: tuple[str, ...] = ()  # where the system's libraries are (Linux), absolute
    windows_version: str | None = None  # "10.0" (Windows)
    android_api: int | None = None  # ro.build.version.sdk (Android)
    macos_version: str | None = None  # "14.5": SystemVersion.plist's ProductVersion (macOS)
    machine: str | None = None  # the CPU this process runs as ("x86_64", "aarch64"); None: unknown
    accel: tuple[Accel, ...] = ()  # NPUs behind /dev/accel (Linux)
    compatible: tuple[str, ...] = ()  # the device tree's root `compatible` (Arm boards)

    def vendors(self) -> set[str]:
        """The GPUs' vendors, and a SoC vendor named in the SoC's description."""
        found = {g.vendor for g in self.gpus}
        soc = self.soc or ""
        found |= {name for name, v in GPU_VENDORS.items() if v.soc and name in soc}
        return found

    def usable_vendor(self, vendor: str) -> bool:
        """A vendor runtime needs its driver, not just the card."""
        known = GPU_VENDORS.get(vendor)
        drivers = {"kfd": self.kfd, "nvidia_driver": self.nvidia_driver}
        if known is not None and known.driver and not drivers[known.driver]:
            return False
        return vendor in self.vendors()


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return ""


def _pci_gpus(root: Path) -> list[Gpu]:
    gpus = []
    devices = root / "sys/bus/pci/devices"
    for device in sorted(devices.iterdir()) if devices.is_dir() else []:
        if not _read(device / "class").startswith("0x03"):  # PCI display controller
            continue
        try:
            vendor_id = int(_read(device / "vendor"), 16)
            device_id = int(_read(device / "device") or "0", 16)
        except ValueError:
            continue
        vendor = VENDORS.get(vendor_id, "other")
        gpus.append(Gpu(vendor, vendor_id, device_id, str(device.relative_to(root))))
    return gpus


def _android_soc(root: Path) -> str | None:
    soc0 = root / "sys/devices/soc0"
    parts = [_read(soc0 / name) for name in ("vendor", "family", "machine")]
    if root == Path("/") and shutil.which("getprop"):
        for prop in ("ro.soc.manufacturer", "ro.soc.model"):
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                parts.append(
                    subprocess.run(
                        ["getprop", prop], capture_output=True, text=True, timeout=5, check=False
                    ).stdout.strip()
                )
    text = " ".join(p for p in parts if p).lower()
    if not text:
        return None
    return f"qualcomm {text}" if "snapdragon" in text or "qcom" in text else text


def _windows_gpus() -> list[Gpu]:  # pragma: no cover - exercised on Windows only
    """Display adapters' PCI ids through SetupAPI (hardware ids like PCI\\VEN_8086&DEV_A7A0).

    ctypes is imported here, where Windows needs it: the build's own check of the ranking
    (stage/reachable.py) imports this module and the scoring, and needs no ctypes."""
    import ctypes
    from ctypes import wintypes

    setupapi = ctypes.WinDLL("setupapi", use_last_error=True)  # type: ignore[attr-defined]

    class GUID(ctypes.Structure):
        _fields_ = [
            ("Data1", wintypes.DWORD),
            ("Data2", wintypes.WORD),
            ("Data3", wintypes.WORD),
            ("Data4", ctypes.c_ubyte * 8),
        ]

    class SP_DEVINFO_DATA(ctypes.Structure):
        _fields_ = [
            ("cbSize", wintypes.DWORD),
            ("ClassGuid", GUID),
            ("DevInst", wintypes.DWORD),
            ("Reserved", ctypes.c_void_p),
        ]

    display = GUID(
        0x4D36E968,
        0xE325,
        0x11CE,
        (ctypes.c_ubyte * 8)(0xBF, 0xC1, 0x08, 0x00, 0x2B, 0xE1, 0x03, 0x18),
    )
    setupapi.SetupDiGetClassDevsW.restype = ctypes.c_void_p
    handle = setupapi.SetupDiGetClassDevsW(ctypes.byref(display), None, None, 0x2)  # PRESENT
    if handle in (None, ctypes.c_void_p(-1).value):
        return []
    gpus = []
    try:
        index = 0
        while True:
            info = SP_DEVINFO_DATA()
            info.cbSize = ctypes.sizeof(SP_DEVINFO_DATA)
            if not setupapi.SetupDiEnumDeviceInfo(
                ctypes.c_void_p(handle), index, ctypes.byref(info)
            ):
                break
            index += 1
            buffer = ctypes.create_unicode_buffer(1024)
            if not setupapi.SetupDiGetDeviceRegistryPropertyW(
                ctypes.c_void_p(handle), ctypes.byref(info), 1, None, buffer, 2048, None
            ):  # SPDRP_HARDWAREID
                continue
            hwid = buffer.value.upper()
            if "VEN_" not in hwid:
                continue
            try:
                vendor_id = int(hwid.split("VEN_")[1][:4], 16)
                device_id = int(hwid.split("DEV_")[1][:4], 16) if "DEV_" in hwid else 0
            except ValueError:
                continue
            gpus.append(Gpu(VENDORS.get(vendor_id, "other"), vendor_id, device_id, hwid))
    finally:
        setupapi.SetupDiDestroyDeviceInfoList(ctypes.c_void_p(handle))
    return gpus


def _accel(root: Path) -> tuple[Accel, ...]:
    """Each /sys/class/accel/accel* with its driver's name and whether its node opens."""
    found = []
    for device in sorted((root / "sys/class/accel").glob("accel*")):
        try:
            driver = (device / "device" / "driver").readlink().name
        except OSError:
            driver = ""
        node = root / "dev/accel" / device.name
        why = ""
        try:
            os.close(os.open(node, os.O_RDWR | getattr(os, "O_CLOEXEC", 0)))
        except OSError as exc:
            why = exc.strerror or str(exc)
        found.append(Accel(device.name, driver, str(node), why))
    return tuple(found)


_COMPATIBLE = ("proc/device-tree/compatible", "sys/firmware/devicetree/base/compatible")


def _compatible(root: Path) -> tuple[str, ...]:
    """The board's device-tree `compatible` strings (NUL-separated), most specific first."""
    for name in _COMPATIBLE:
        try:
            raw = (root / name).read_bytes()
        except OSError:
            continue
        return tuple(p.decode("ascii", errors="replace") for p in raw.split(b"\0") if p)
    return ()


def accel_problem(device: dict[str, Any], hardware: Hardware) -> str | None:
    """Why the NPU a plugin EP's `device` describes (kind accel: its kernel driver, the boards
    it runs on) cannot be used here, in one clause; None when it can: a node of that driver,
    on such a board, that this process can open."""
    driver = str(device.get("driver", ""))
    nodes = [a for a in hardware.accel if a.driver == driver]
    if not nodes:
        others = ", ".join(f"{a.name} ({a.driver or 'no driver'})" for a in hardware.accel)
        seen = f"; /dev/accel has {others}" if others else ""
        return (
            f"no /dev/accel device of the {driver} driver (/sys/class/accel/accel*/device/driver)"
            f"{seen}: it needs Linux with the {driver} accel driver loaded"
        )
    boards = [str(b) for b in device.get("compatible") or []]
    if boards and not any(b in hardware.compatible for b in boards):
        said = hardware.compatible[0] if hardware.compatible else "no device-tree compatible"
        return f"the board is not {' or '.join(boards)} ({said})"
    usable = [a for a in nodes if not a.unopenable]
    if not usable:
        node = nodes[0]
        return (
            f"{node.node} cannot be opened ({node.unopenable}): the package's udev rule gives "
            f"the render group access; add this user to it"
        )
    return None


_LIBRARY_DIRS = ("lib/*-linux-gnu", "usr/lib/*-linux-gnu", "lib64", "usr/lib64", "lib", "usr/lib")


def _library_dirs(root: Path) -> tuple[str, ...]:
    found: list[str] = []
    for pattern in _LIBRARY_DIRS:
        for path in sorted(root.glob(pattern)):
            if path.is_dir() and str(path) not in found:
                found.append(str(path))
    return tuple(found)


# every spelling of a CPU (uname, PROCESSOR_ARCHITECTURE, runtimes.json) -> the one name
_MACHINES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}
_ELF_MACHINES = {62: "x86_64", 183: "aarch64", 3: "i386", 40: "arm"}  # e_machine


def machine_name(spelling: str) -> str:
    """One name per CPU, so that `arm64` and `aarch64` compare equal; others lower-cased."""
    return _MACHINES.get(spelling.lower(), spelling.lower())


def _process_machine(root: Path, library_dirs: tuple[str, ...]) -> str | None:
    """The CPU code must be built for: this process's (uname; under Rosetta or an emulator the
    emulated one, which is what it can load), or for another root its C library's ELF header."""
    if root == Path("/"):
        return machine_name(os.uname().machine) if hasattr(os, "uname") else None
    for directory in library_dirs:
        try:
            with (Path(directory) / "libc.so.6").open("rb") as elf:
                header = elf.read(20)
        except OSError:
            continue
        if len(header) == 20 and header[:4] == b"\x7fELF" and header[5] in (1, 2):
            number = int.from_bytes(header[18:20], "little" if header[5] == 1 else "big")
            return _ELF_MACHINES.get(number, f"e_machine {number}")
    return None


_MACOS_VERSION = "System/Library/CoreServices/SystemVersion.plist"
_APPLE_GPU = "System/Library/Extensions/AGXMetal*.bundle"  # the Apple GPU's Metal driver


def _macos(root: Path) -> tuple[str | None, list[Gpu]]:
    """macOS's version and its Apple GPU: an Apple Silicon Mac carries the AGX Metal driver
    (AGXMetalG13X.bundle …), which is also what CoreML's GPU and MLX run on."""
    try:
        version = str(plistlib.loads((root / _MACOS_VERSION).read_bytes())["ProductVersion"])
    except (OSError, KeyError, ValueError, plistlib.InvalidFileException):
        return None, []
    gpus = [
        Gpu("apple", _APPLE, 0, str(path.relative_to(root)))
        for path in sorted(root.glob(_APPLE_GPU))[:1]
    ]
    return version, gpus


def _android_api(root: Path) -> int | None:
    for line in _read(root / "system/build.prop").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "ro.build.version.sdk" and value.strip().isdigit():
            return int(value.strip())
    return None


def detect(root: Path = Path("/"), *, windows: bool | None = None) -> Hardware:
    """What the machine has, read from files under `root` (or SetupAPI on Windows)."""
    if windows if windows is not None else sys.platform == "win32":
        gpus = _windows_gpus()
        # Windows on Arm names the SoC's maker in the processor identifier
        # ("ARMv8 (64-bit) Family 8 Model 1 Revision 201, Qualcomm Technologies Inc")
        cpu = os.environ.get("PROCESSOR_IDENTIFIER", "").lower()
        soc = f"qualcomm {cpu}" if "qualcomm" in cpu else (cpu or None)
        version = getattr(sys, "getwindowsversion", None)
        return Hardware(
            gpus=tuple(gpus),
            nvidia_driver=any(g.vendor == "nvidia" for g in gpus),
            soc=soc,
            windows_version=f"{version().major}.{version().minor}" if version else None,
            # this process's CPU: AMD64 for an x64 program emulated on Windows on Arm
            machine=machine_name(os.environ.get("PROCESSOR_ARCHITECTURE", "")) or None,
        )
    macos_version, apple = _macos(root)
    library_dirs = _library_dirs(root)
    return Hardware(
        gpus=tuple(_pci_gpus(root) + apple),
        macos_version=macos_version,
        kfd=(root / "dev/kfd").exists(),
        nvidia_driver=(root / "proc/driver/nvidia").exists(),
        soc=_android_soc(root),
        library_dirs=library_dirs,
        android_api=_android_api(root),
        machine=_process_machine(root, library_dirs),
        accel=_accel(root),
        compatible=_compatible(root),
    )


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in text.rstrip("+").split("."))


_DEFINED: dict[str, bytes] = {}  # library path -> its bytes (read once per process)


def _defines(path: str, node: str) -> bool:
    """Does the library define the version node? Its name sits NUL-terminated in .dynstr."""
    if path not in _DEFINED:
        try:
            _DEFINED[path] = Path(path).read_bytes()
        except OSError:
            _DEFINED[path] = b""
    return b"\0" + node.encode() + b"\0" in _DEFINED[path]


def wrong_machine(index: dict[str, Any], hardware: Hardware) -> str | None:
    """Why no runtime of the package can load in this process: built for another CPU. Said
    first, as the loader's own refusal: the libraries' symbol versions or names would otherwise
    make an aarch64 package on x86-64 look like a system too old for it."""
    wanted = index.get("machine")
    if not isinstance(wanted, str) or not hardware.machine:
        return None
    if machine_name(wanted) == hardware.machine:
        return None
    target = f" (target {index['target']})" if index.get("target") else ""
    return (
        f"this package is built for {wanted}{target} and this machine runs {hardware.machine} "
        f"code: install the product's {hardware.machine} package, or run this one on an "
        f"{wanted} machine"
    )


def too_old(runtime: dict[str, Any], hardware: Hardware) -> str | None:
    """Why this system is too old for the runtime, or None (also when it cannot tell)."""
    system = runtime.get("system") or {}
    if hardware.library_dirs and hardware.android_api is None:
        for need in system.get("needs", []):
            path = next(
                (
                    str(Path(d) / need["library"])
                    for d in hardware.library_dirs
                    if (Path(d) / need["library"]).is_file()
                ),
                None,
            )
            if path is not None and not _defines(path, need["version"]):
                return f"{path} lacks {need['version']} (needed by {', '.join(need['needed_by'])})"
    windows = system.get("windows")
    if (
        windows
        and hardware.windows_version
        and _version(windows) > _version(hardware.windows_version)
    ):
        return f"needs Windows {windows}, this is {hardware.windows_version}"
    macos = system.get("macos")
    if macos and hardware.macos_version and _version(macos) > _version(hardware.macos_version):
        return f"needs macOS {macos}, this is {hardware.macos_version}"
    api = system.get("android_api")
    if api and hardware.android_api and api > hardware.android_api:
        return f"needs Android API {api}, this is API {hardware.android_api}"
    return None
