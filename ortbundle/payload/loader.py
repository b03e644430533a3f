#!/usr/bin/env python3
"""Choose and open one ONNX Runtime per process: only one may be loaded, and none is unloaded
(a C++ runtime whose static constructors ran cannot be taken out again).

Shipped in every package as `runtime_loader.py`, beside `runtimes.json`. Standard library only.

  python runtime_loader.py --explain      the decision in one line, then each candidate's score
  python runtime_loader.py --json         the same for machines
  python runtime_loader.py --open         also load the winner, check its version and register
                                          its plugin EPs (RegisterExecutionProviderLibrary)

Rules: a vendor runtime on its own vendor's GPU beats OpenVINO on an Intel GPU, which beats a
generic (WebGPU) runtime on any GPU, which beats a CPU-only runtime. Equal scores keep the
index's order; a perfect fit ends the search; the override variable named in the index wins
outright. Hardware is read from files (sysfs, /dev/kfd, /proc) under a root directory that tests
can point at a fake machine; on Windows the display adapters come from SetupAPI. A runtime the
system is too old for (its index entry's `system`: a symbol version the system's libc.so.6 or
libstdc++.so.6 does not define, a newer Windows or Android API level) is skipped, and
`--explain` says why. So is a runtime whose required system libraries (its entry's `requires`)
the platform's loader would not find — searched as ld.so does (LD_LIBRARY_PATH, the runtime's
directory, /etc/ld.so.cache, the default directories) or as Windows does (the runtime's
directory, System32, the Windows directory, PATH); a missing optional one is reported. Add-on
packages put their runtimes beside these and an index fragment in runtimes.d/*.json, ranked
like the package's own. `--open` asks each runtime it opens for GetAvailableProviders() and
trusts that over the index: a GPU runtime whose GPU provider is not available falls through.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = "ortbundle.runtimes/2"
READS = (SCHEMA, "ortbundle.runtimes/1")  # /1: no `requires`, no fragments
FRAGMENTS = "runtimes.d"
VENDORS = {0x8086: "intel", 0x10DE: "nvidia", 0x1002: "amd", 0x1022: "amd", 0x5143: "qualcomm"}
VENDOR_LABEL = {"intel": "Intel", "nvidia": "NVIDIA", "amd": "AMD", "qualcomm": "Qualcomm"}
SCORE_VENDOR, SCORE_INTEL, SCORE_GENERIC, SCORE_CPU = 4, 3, 2, 1
_OPENED: list[Any] = []  # losers and winners alike stay mapped: never unload a C++ runtime


class LoaderError(Exception):
    """A decision or a load that cannot go ahead; the message says what to do."""


class _LoadFailed(LoaderError):
    """The entry library did not load here (a library it needs is missing): try the next."""


@dataclass(frozen=True)
class Gpu:
    vendor: str  # intel | nvidia | amd | qualcomm | other
    vendor_id: int
    device_id: int
    where: str


@dataclass(frozen=True)
class Hardware:
    gpus: tuple[Gpu, ...] = ()
    kfd: bool = False  # /dev/kfd: the AMD ROCm compute driver
    nvidia_driver: bool = False  # /proc/driver/nvidia: the NVIDIA kernel driver
    soc: str | None = None  # SoC manufacturer/family, lower case (Android; Windows on Arm)
    library_dirs: tuple[str, ...] = ()  # where the system's libraries are (Linux), absolute
    windows_version: str | None = None  # "10.0" (Windows)
    android_api: int | None = None  # ro.build.version.sdk (Android)

    def vendors(self) -> set[str]:
        found = {g.vendor for g in self.gpus}
        if self.soc and "qualcomm" in self.soc:
            found.add("qualcomm")
        return found

    def usable_vendor(self, vendor: str) -> bool:
        """A vendor runtime needs its driver, not just the card."""
        if vendor == "nvidia":
            return "nvidia" in self.vendors() and self.nvidia_driver
        if vendor == "amd":
            return "amd" in self.vendors() and self.kfd
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
    """Display adapters' PCI ids through SetupAPI (hardware ids like PCI\\VEN_8086&DEV_A7A0)."""
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


_LIBRARY_DIRS = ("lib/*-linux-gnu", "usr/lib/*-linux-gnu", "lib64", "usr/lib64", "lib", "usr/lib")


def _library_dirs(root: Path) -> tuple[str, ...]:
    found: list[str] = []
    for pattern in _LIBRARY_DIRS:
        for path in sorted(root.glob(pattern)):
            if path.is_dir() and str(path) not in found:
                found.append(str(path))
    return tuple(found)


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
        )
    return Hardware(
        gpus=tuple(_pci_gpus(root)),
        kfd=(root / "dev/kfd").exists(),
        nvidia_driver=(root / "proc/driver/nvidia").exists(),
        soc=_android_soc(root),
        library_dirs=_library_dirs(root),
        android_api=_android_api(root),
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
    api = system.get("android_api")
    if api and hardware.android_api and api > hardware.android_api:
        return f"needs Android API {api}, this is API {hardware.android_api}"
    return None


# --- where the platform's loader finds a library by name -------------------------------------

_CACHE_OLD, _CACHE_NEW = b"ld.so-1.7.0", b"glibc-ld.so.cache1.1"
_OLD_HEADER, _OLD_ENTRY = 16, struct.Struct("=iII")  # magic[11] + pad, nlibs; flags, key, value
_NEW_HEADER, _NEW_ENTRY = 48, struct.Struct("=iIIIQ")  # flags, key, value, osversion, hwcap
_CACHE_ARCH = {"x86_64": 0x0300, "aarch64": 0x0A00, "arm64": 0x0A00}  # FLAG_*_LIB64
_ELF_MACHINE = {"x86_64": 62, "aarch64": 183, "arm64": 183}
_TRIPLET = {
    "x86_64": "x86_64-linux-gnu",
    "aarch64": "aarch64-linux-gnu",
    "arm64": "aarch64-linux-gnu",
}


def _cstring(data: bytes, offset: int) -> str:
    end = data.find(b"\0", offset)
    return data[offset : end if end >= 0 else len(data)].decode("utf-8", errors="replace")


def read_ld_cache(data: bytes) -> list[tuple[str, int, str]]:
    """(name, flags, path) of every entry of an ld.so.cache, in the file's order.

    Reads glibc's `glibc-ld.so.cache1.1` format, alone or behind the old `ld.so-1.7.0` table
    (the "compat" layout: the new table starts at the next 8-byte boundary after the old
    entries, its string offsets counted from its own start), and the old format alone (string
    offsets counted from the end of its entries). A cache whose table does not fit in the file
    is ignored, as ld.so ignores it.
    """
    start, header, entry, base = -1, _NEW_HEADER, _NEW_ENTRY, 0
    if data.startswith(_CACHE_NEW) and len(data) >= _NEW_HEADER:
        start = 0
    elif data.startswith(_CACHE_OLD) and len(data) >= _OLD_HEADER:
        (count,) = struct.unpack_from("=I", data, 12)
        strings = _OLD_HEADER + count * _OLD_ENTRY.size
        aligned = (strings + 7) & ~7
        new = data[aligned : aligned + len(_CACHE_NEW)] == _CACHE_NEW
        if new and len(data) >= aligned + _NEW_HEADER:
            start = base = aligned
        elif not new:
            start, header, entry, base = 0, _OLD_HEADER, _OLD_ENTRY, strings
    if start < 0:
        return []
    (count,) = struct.unpack_from("=I", data, start + (20 if entry is _NEW_ENTRY else 12))
    if start + header + count * entry.size > len(data):
        return []
    entries = []
    for i in range(count):
        flags, key, value = entry.unpack_from(data, start + header + i * entry.size)[:3]
        name, path = _cstring(data, base + key), _cstring(data, base + value)
        if name and path:
            entries.append((name, flags, path))
    return entries


def _machine(target: str) -> str:
    """linux-x86_64 -> x86_64; windows-arm64 -> arm64."""
    return target.split("-", 1)[1] if "-" in target else ""


def _elf_of(path: Path, machine: str) -> bool:
    """Is it an ELF file of the machine (64-bit)? ld.so skips one that is not and looks on."""
    wanted = _ELF_MACHINE.get(machine)
    try:
        with path.open("rb") as stream:
            head = stream.read(20)
    except OSError:
        return False
    if head[:4] != b"\x7fELF":
        return False
    if wanted is None or len(head) < 20:
        return True
    order = "<" if head[5] == 1 else ">"
    return head[4] == 2 and struct.unpack_from(order + "H", head, 18)[0] == wanted


@dataclass(frozen=True)
class Libraries:
    """Where this machine's loader looks for a library by name, in its order."""

    windows: bool
    machine: str = ""  # x86_64 | aarch64 | arm64: a Linux library of another machine is skipped
    before: tuple[str, ...] = ()  # Linux: LD_LIBRARY_PATH (searched before the runtime's own)
    cache: tuple[tuple[str, str], ...] = ()  # Linux: ld.so.cache (name, path) of this machine
    after: tuple[str, ...] = ()  # Linux: the default dirs; Windows: System32, Windows, PATH

    def find(self, name: str, own: Path) -> str | None:
        """The path the platform's loader would open for `name`, or None."""
        if self.windows:
            return _find_in([str(own), *self.after], name, windows=True)
        found = _find_in([*self.before, str(own)], name, machine=self.machine)
        for entry, path in () if found else self.cache:
            if entry == name and _elf_of(Path(path), self.machine):
                return path
        return found or _find_in(self.after, name, machine=self.machine)


_LISTINGS: dict[str, dict[str, str]] = {}  # directory -> {lower-case name: name}


def _find_in(
    directories: list[str] | tuple[str, ...], name: str, *, windows: bool = False, machine: str = ""
) -> str | None:
    for directory in directories:
        if not directory:
            continue
        if windows:  # Windows compares names without regard to case
            if directory not in _LISTINGS:
                try:
                    listing = Path(directory).iterdir()
                    _LISTINGS[directory] = {p.name.lower(): p.name for p in listing}
                except OSError:
                    _LISTINGS[directory] = {}
            actual = _LISTINGS[directory].get(name.lower())
            if actual and (Path(directory) / actual).is_file():
                return str(Path(directory) / actual)
        elif _elf_of(Path(directory) / name, machine):
            return str(Path(directory) / name)
    return None


def _rooted(root: Path, path: str) -> str:
    return str(root / path.lstrip("/")) if path else ""


def system_libraries(
    target: str, root: Path = Path("/"), env: dict[str, str] | None = None, *, windows: bool
) -> Libraries:
    """The search a runtime of `target` meets on this machine (paths under `root` for tests)."""
    env = dict(os.environ) if env is None else env
    machine = _machine(target)
    if windows:
        system_root = env.get("SystemRoot") or env.get("windir") or r"C:\Windows"
        search = [p for p in env.get("PATH", "").split(";") if p]
        return Libraries(
            True, machine, after=(str(Path(system_root) / "System32"), system_root, *search)
        )
    cache: list[tuple[str, str]] = []
    for name in ("etc/ld.so.cache",):
        try:
            data = (root / name).read_bytes()
        except OSError:
            continue
        arch = _CACHE_ARCH.get(machine)
        for entry, flags, where in read_ld_cache(data):
            if arch is None or flags & 0xFF00 == arch:
                cache.append((entry, _rooted(root, where)))
    triplet = _TRIPLET.get(machine, "")
    defaults = [f"lib/{triplet}", f"usr/lib/{triplet}"] if triplet else []
    defaults += ["lib64", "usr/lib64", "lib", "usr/lib"]
    return Libraries(
        False,
        machine,
        before=tuple(_rooted(root, p) for p in env.get("LD_LIBRARY_PATH", "").split(":") if p),
        cache=tuple(cache),
        after=tuple(str(root / d) for d in defaults),
    )


def missing_libraries(
    runtime: dict[str, Any], libraries: Libraries, stage: Path
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The runtime's required and optional `requires` entries this machine lacks."""
    own = stage / runtime.get("directory", "")
    required: list[dict[str, Any]] = []
    optional: list[dict[str, Any]] = []
    for need in runtime.get("requires") or []:
        if libraries.find(str(need["name"]), own) is None:
            (optional if need.get("optional") else required).append(need)
    return required, optional


def _absent(need: dict[str, Any]) -> str:
    """'libcudnn.so.9 not found — Install NVIDIA cuDNN 9 for CUDA 13'"""
    why = f"{need['name']} not found"
    return f"{why} — {need['install']}" if need.get("install") else f"{why} ({need['group']})"


@dataclass
class Candidate:
    name: str
    directory: str
    score: int  # 0: skipped (why says so)
    why: str
    notes: list[str] = field(default_factory=list)  # optional libraries absent, providers


@dataclass
class Decision:
    runtime: dict[str, Any]
    score: int
    why: str
    overridden: bool
    candidates: list[Candidate] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # bad fragments, never fatal

    def line(self) -> str:
        """The settings row: 'Intel GPU · OpenVINO 1.24.1 · runtimes/openvino'."""
        rt = self.runtime
        return f"{self.why} · {rt['label']} {rt['ort_version']} · {rt['directory']}"


def score(runtime: dict[str, Any], hardware: Hardware) -> tuple[int, str]:
    fits = runtime.get("fits", {})
    for vendor in fits.get("gpu_vendors", []):
        if hardware.usable_vendor(vendor):
            label = VENDOR_LABEL.get(vendor, vendor)
            if vendor == "intel":
                return SCORE_INTEL, f"{label} GPU"
            return SCORE_VENDOR, f"{label} GPU" if vendor != "qualcomm" else "Qualcomm SoC"
    if fits.get("any_gpu") and hardware.gpus:
        return SCORE_GENERIC, "GPU (generic)"
    return SCORE_CPU, "CPU"


def best_possible(hardware: Hardware) -> int:
    if any(hardware.usable_vendor(v) for v in ("nvidia", "amd", "qualcomm")):
        return SCORE_VENDOR
    if hardware.usable_vendor("intel"):
        return SCORE_INTEL
    return SCORE_GENERIC if hardware.gpus else SCORE_CPU


def load_index(stage: Path) -> dict[str, Any]:
    """runtimes.json, then each add-on's runtimes.d/*.json appended to its runtimes.

    A fragment that is unreadable, of an unknown schema, of another product or target, or whose
    runtime is malformed, clashes with one already listed or is not installed is left out and
    named in the returned index's `problems` — an add-on never stops the main package."""
    path = stage / "runtimes.json"
    try:
        index: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LoaderError(f"cannot read {path}: {exc}") from None
    if index.get("schema") not in READS:
        raise LoaderError(f"{path} has schema {index.get('schema')!r}, this loader reads {SCHEMA}")
    problems: list[str] = []
    fragments = stage / FRAGMENTS
    for fragment in sorted(fragments.glob("*.json")) if fragments.is_dir() else []:
        try:
            problems.extend(_add_fragment(index, fragment, stage))
        except (OSError, ValueError) as exc:
            problems.append(f"{fragment}: cannot read it ({exc}); reinstall that add-on")
    index["problems"] = problems
    return index


_RUNTIME_KEYS = {
    "name": str,
    "label": str,
    "directory": str,
    "entry": str,
    "ort_version": str,
    "providers": list,
    "fits": dict,
    "files": list,
}


def _add_fragment(index: dict[str, Any], fragment: Path, stage: Path) -> list[str]:
    data = json.loads(fragment.read_text(encoding="utf-8"))
    main = (index.get("product") or {}).get("name")
    if not isinstance(data, dict) or data.get("schema") not in READS:
        schema = data.get("schema") if isinstance(data, dict) else None
        return [f"{fragment}: schema {schema!r} is not one this loader reads ({SCHEMA})"]
    if data.get("addon_of") != main:
        return [f"{fragment}: an add-on of {data.get('addon_of')!r}, not of {main!r}"]
    if data.get("target") != index.get("target"):
        return [f"{fragment}: built for {data.get('target')!r}, this is {index.get('target')!r}"]
    if not isinstance(data.get("runtimes"), list) or not data["runtimes"]:
        return [f"{fragment}: lists no runtimes"]
    problems = []
    taken = {r["name"] for r in index["runtimes"]} | {r["directory"] for r in index["runtimes"]}
    for runtime in data["runtimes"]:
        bad = [
            k
            for k, kind in _RUNTIME_KEYS.items()
            if not isinstance(runtime.get(k) if isinstance(runtime, dict) else None, kind)
        ]
        if bad:
            problems.append(f"{fragment}: a runtime lacks {', '.join(bad)}")
        elif runtime["name"] in taken or runtime["directory"] in taken:
            problems.append(f"{fragment}: runtime {runtime['name']} clashes with one listed")
        elif ".." in Path(runtime["directory"]).parts or Path(runtime["directory"]).is_absolute():
            problems.append(f"{fragment}: runtime {runtime['name']} lies outside the package")
        elif not (stage / runtime["directory"] / runtime["entry"]).is_file():
            problems.append(
                f"{fragment}: {runtime['directory']}/{runtime['entry']} is not installed"
            )
        else:
            index["runtimes"].append({**runtime, "addon": data.get("product", {}).get("name")})
            taken |= {runtime["name"], runtime["directory"]}
    return problems


def choose(
    index: dict[str, Any],
    hardware: Hardware,
    *,
    stage: Path,
    env: dict[str, str] | None = None,
    libraries: Libraries | None = None,
    skip: dict[str, str] | None = None,
) -> Decision:
    """The best runtime for this machine. `libraries`: check each runtime's `requires` (None:
    do not); `skip`: runtimes already ruled out (name -> why), e.g. by --open."""
    env = dict(os.environ) if env is None else env
    skip = skip or {}
    variable = index.get("override_env", "")
    override = env.get(variable) if variable else None
    problems = list(index.get("problems") or [])
    if override:
        wanted = Path(override) if Path(override).is_absolute() else stage / override
        if not wanted.is_dir():
            raise LoaderError(
                f"{variable}={override} names no directory; unset it or point it at a runtime "
                f"directory such as {stage / index['runtimes'][0]['directory']}"
            )
        for runtime in index["runtimes"]:
            if (stage / runtime["directory"]).resolve() == wanted.resolve():
                return Decision(runtime, 0, f"{variable} override", True, problems=problems)
        raise LoaderError(
            f"{variable}={override} is not one of this package's runtimes: "
            + ", ".join(r["directory"] for r in index["runtimes"])
        )
    best: Decision | None = None
    ceiling = best_possible(hardware)
    candidates = []
    skipped = []
    all_old = True
    for runtime in index["runtimes"]:
        old = too_old(runtime, hardware)
        reason = skip.get(runtime["name"]) or old
        all_old = all_old and reason is not None and reason == old
        required, optional = missing_libraries(runtime, libraries, stage) if libraries else ([], [])
        if reason is None and required:
            reason = "; ".join(_absent(need) for need in required)
        if reason is not None:
            skipped.append(f"{runtime['name']}: {reason}")
            candidates.append(Candidate(runtime["name"], runtime["directory"], 0, reason))
            continue
        points, why = score(runtime, hardware)
        notes = [f"optional {_absent(need)}" for need in optional]
        candidates.append(Candidate(runtime["name"], runtime["directory"], points, why, notes))
        if best is None or points > best.score:  # equal scores keep the search order
            best = Decision(runtime, points, why, False)
        if points >= ceiling:
            break  # a perfect fit ends the search
    if best is None and skipped:
        what = (
            "this system is too old for every runtime of the package"
            if all_old
            else "no runtime of the package can run here"
        )
        raise LoaderError(f"{what}: " + "; ".join(skipped))
    if best is None:
        raise LoaderError("runtimes.json lists no runtime")
    best.candidates = candidates
    best.problems = problems
    return best


def verify_files(stage: Path, runtime: dict[str, Any]) -> None:
    directory = stage / runtime["directory"]
    for entry in runtime["files"]:
        path = directory / entry["path"]
        if entry.get("link_to"):
            continue
        digest = hashlib.sha256()
        try:
            with path.open("rb") as stream:
                while chunk := stream.read(1 << 20):
                    digest.update(chunk)
        except OSError as exc:
            raise LoaderError(f"{path}: {exc}; reinstall the package") from None
        if digest.hexdigest() != entry["sha256"]:
            raise LoaderError(f"{path} does not match runtimes.json; reinstall the package")


class _OrtApiBase(ctypes.Structure):
    _fields_ = [
        ("GetApi", ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_uint32)),
        ("GetVersionString", ctypes.CFUNCTYPE(ctypes.c_char_p)),
    ]


def open_runtime(stage: Path, runtime: dict[str, Any], *, verify: bool = False) -> str:
    """Load the entry library and return its GetVersionString(); refuse a version mismatch."""
    directory = (stage / runtime["directory"]).resolve()
    if verify:
        verify_files(stage, runtime)
    if sys.platform == "win32":  # pragma: no cover - Windows only
        # Intel's build leaves OpenVINO's DLLs for the loader to find beside it.
        _OPENED.append(os.add_dll_directory(str(directory)))
        os.environ["PATH"] = f"{directory}{os.pathsep}{os.environ.get('PATH', '')}"
    entry = directory / runtime["entry"]
    try:
        library = ctypes.CDLL(str(entry), mode=getattr(os, "RTLD_NOW", 0) | ctypes.RTLD_GLOBAL)
    except OSError as exc:
        raise _LoadFailed(f"cannot load {entry}: {exc}") from None
    _OPENED.append(library)
    try:
        get_api_base = library.OrtGetApiBase
    except AttributeError:
        raise LoaderError(f"{entry} has no OrtGetApiBase: not an ONNX Runtime") from None
    get_api_base.restype = ctypes.POINTER(_OrtApiBase)
    base = get_api_base()
    if not base:
        raise LoaderError(f"{entry}: OrtGetApiBase returned NULL")
    raw = base.contents.GetVersionString()
    version = raw.decode("ascii", errors="replace") if raw else ""
    if version != runtime["ort_version"]:
        raise LoaderError(
            f"{entry} reports ONNX Runtime {version}, runtimes.json says "
            f"{runtime['ort_version']}; the package is inconsistent — reinstall it"
        )
    _CORES[runtime["name"]] = base
    return version


_CORES: dict[str, Any] = {}  # runtime name -> its OrtApiBase, once opened

# Indices into the OrtApi function table (`struct OrtApi` in onnxruntime_c_api.h). The table is
# append-only by ORT's ABI contract, so an index never moves once a release has shipped it.
_PLUGIN_API_VERSION = 22  # ORT 1.22: the first with RegisterExecutionProviderLibrary
_GET_ERROR_MESSAGE, _CREATE_ENV, _RELEASE_STATUS = 2, 3, 93
_REGISTER_EP_LIBRARY, _GET_EP_DEVICES, _EP_DEVICE_EP_NAME = 301, 303, 312
_LOGGING_LEVEL_WARNING = 2


@dataclass(frozen=True)
class Registered:
    """A plugin EP and what became of it: registered (with the devices it offers here), not
    tried (this machine lacks what it needs), or refused by the core (why)."""

    name: str  # the registration name (sessions select devices, not this name)
    ep_name: str  # OrtEpDevice.ep_name
    library: str
    devices: int  # OrtEpDevice entries with this ep_name on this machine
    status: str = "registered"  # registered | skipped | failed
    why: str = ""


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for part in version.split("."):
        digits = "".join(c for c in part if c.isdigit()) or "0"
        parts.append(int(digits))
    return tuple(parts)


def register_plugins(
    stage: Path, runtime: dict[str, Any], hardware: Hardware | None = None
) -> list[Registered]:
    """Register the runtime's plugin EPs with its (already opened) core, in one OrtEnv.

    ORT keeps one environment per process: the env made here is the one the application's
    sessions get from CreateEnv later, so the plugins stay registered for them. A plugin is an
    optional accelerator: one this machine's SoC cannot use is not loaded at all, and one the
    core refuses is reported and leaves the core (and the other plugins) working.
    """
    plugins = runtime.get("plugin_eps") or []
    if not plugins:
        return []
    base = _CORES.get(runtime["name"])
    if base is None:
        raise LoaderError(f"open {runtime['name']} before registering its plugin EPs")
    version = runtime["ort_version"]
    for plugin in plugins:
        if _version_tuple(version) < _version_tuple(plugin["min_core"]):
            raise LoaderError(
                f"plugin EP {plugin['registration_name']} needs ONNX Runtime "
                f"{plugin['min_core']}, {runtime['name']} is {version}"
            )
    table = base.contents.GetApi(_PLUGIN_API_VERSION)
    if not table:
        raise LoaderError(f"ONNX Runtime {version} has no plugin EP API (needs 1.22 or newer)")
    api = ctypes.cast(table, ctypes.POINTER(ctypes.c_void_p))
    pointer = ctypes.c_void_p
    path_type = ctypes.c_wchar_p if sys.platform == "win32" else ctypes.c_char_p  # ORTCHAR_T

    def function(index: int, restype: Any, *argtypes: Any) -> Any:
        return ctypes.CFUNCTYPE(restype, *argtypes)(api[index])

    error_message = function(_GET_ERROR_MESSAGE, ctypes.c_char_p, pointer)
    release_status = function(_RELEASE_STATUS, None, pointer)
    create_env = function(
        _CREATE_ENV, pointer, ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(pointer)
    )
    register = function(_REGISTER_EP_LIBRARY, pointer, pointer, ctypes.c_char_p, path_type)
    get_devices = function(
        _GET_EP_DEVICES,
        pointer,
        pointer,
        ctypes.POINTER(ctypes.POINTER(pointer)),
        ctypes.POINTER(ctypes.c_size_t),
    )
    ep_name_of = function(_EP_DEVICE_EP_NAME, ctypes.c_char_p, pointer)

    def check(status: Any, what: str) -> None:
        if status:
            raw = error_message(status)
            message = raw.decode("utf-8", errors="replace") if raw else "unknown error"
            release_status(status)
            raise LoaderError(f"{what}: {message}")

    env = pointer()
    check(create_env(_LOGGING_LEVEL_WARNING, b"runtime_loader", ctypes.byref(env)), "CreateEnv")
    _OPENED.append(env)
    registered = []
    for plugin in plugins:
        name, ep_name = plugin["registration_name"], plugin["ep_name"]
        families = plugin.get("soc_families") or []
        soc = hardware.soc if hardware is not None else None
        if families and hardware is not None and not any(f in (soc or "") for f in families):
            why = f"needs a {' or '.join(families)} SoC; this machine has {soc or 'none known'}"
            registered.append(Registered(name, ep_name, plugin["library"], 0, "skipped", why))
            continue
        library = (stage / plugin["library"]).resolve()
        if sys.platform == "win32":  # pragma: no cover - Windows only
            _OPENED.append(os.add_dll_directory(str(library.parent)))
        argument: Any = str(library) if sys.platform == "win32" else os.fsencode(library)
        try:
            check(register(env, name.encode("utf-8"), argument), f"plugin EP {name} ({library})")
        except LoaderError as exc:
            registered.append(Registered(name, ep_name, plugin["library"], 0, "failed", str(exc)))
            continue
        devices = ctypes.POINTER(pointer)()
        count = ctypes.c_size_t()
        check(get_devices(env, ctypes.byref(devices), ctypes.byref(count)), "GetEpDevices")
        names = [ep_name_of(devices[i]) for i in range(count.value)]
        wanted = str(plugin["ep_name"]).encode("utf-8")
        registered.append(
            Registered(name, plugin["ep_name"], plugin["library"], names.count(wanted))
        )
    return registered


_GET_AVAILABLE_PROVIDERS, _RELEASE_AVAILABLE_PROVIDERS = 125, 126  # in every ORT since 1.4
_CPU_PROVIDERS = {"CPUExecutionProvider", "XnnpackExecutionProvider"}


def available_providers(runtime: dict[str, Any]) -> list[str]:
    """GetAvailableProviders() of the (already opened) runtime: what it can really offer."""
    base = _CORES.get(runtime["name"])
    if base is None:
        raise LoaderError(f"open {runtime['name']} before asking for its providers")
    minor = _version_tuple(runtime["ort_version"])[1:2] or (4,)
    table = base.contents.GetApi(max(4, minor[0]))
    if not table:
        raise LoaderError(f"{runtime['name']} offers no OrtApi for its own version")
    api = ctypes.cast(table, ctypes.POINTER(ctypes.c_void_p))
    names = ctypes.POINTER(ctypes.c_char_p)()
    count = ctypes.c_int()
    get = ctypes.CFUNCTYPE(
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.POINTER(ctypes.c_char_p)),
        ctypes.POINTER(ctypes.c_int),
    )(api[_GET_AVAILABLE_PROVIDERS])
    release = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int)(
        api[_RELEASE_AVAILABLE_PROVIDERS]
    )
    if get(ctypes.byref(names), ctypes.byref(count)):
        raise LoaderError(f"{runtime['name']}: GetAvailableProviders failed")
    found = [(names[i] or b"").decode("utf-8", errors="replace") for i in range(count.value)]
    release(names, count)
    return found


def open_best(
    stage: Path,
    index: dict[str, Any],
    hardware: Hardware,
    decision: Decision,
    *,
    libraries: Libraries | None,
    env: dict[str, str] | None = None,
    verify: bool = False,
    providers: bool = True,
) -> tuple[Decision, str]:
    """Open the chosen runtime and trust what it reports over the index: one that cannot be
    loaded is skipped, and one whose GPU providers GetAvailableProviders() does not list is
    ranked again, as the CPU runtime it really is and after all the others — either way the
    next best is opened (the one demoted only when nothing else runs here)."""
    skip: dict[str, str] = {}
    demoted: dict[str, dict[str, Any]] = {}
    while True:
        runtime = decision.runtime
        try:
            version = open_runtime(stage, runtime, verify=verify)
        except _LoadFailed as exc:
            if decision.overridden:
                raise
            skip[runtime["name"]] = str(exc)
        else:
            if not providers or decision.overridden or runtime["name"] in demoted:
                break
            offered = available_providers(runtime)
            claimed = [p for p in runtime.get("providers", []) if p not in _CPU_PROVIDERS]
            if decision.score <= SCORE_CPU or not claimed or set(claimed) & set(offered):
                break
            lacking = ", ".join(claimed)
            demoted[runtime["name"]] = {
                **runtime,
                "fits": {"gpu_vendors": [], "any_gpu": False, "soc_families": []},
                "providers": offered,
                "demoted": f"{lacking} not available (GetAvailableProviders: "
                f"{', '.join(offered) or 'none'}): ranked last, as CPU",
            }
        # a demoted runtime is the last resort: the next runtime gets the machine first
        kept = [r for r in index["runtimes"] if r["name"] not in demoted]
        ranked = {**index, "runtimes": [*kept, *demoted.values()]}
        decision = choose(ranked, hardware, stage=stage, env=env, libraries=libraries, skip=skip)
    decision.candidates = _noted(decision.candidates, demoted)
    return decision, version


def _noted(candidates: list[Candidate], demoted: dict[str, dict[str, Any]]) -> list[Candidate]:
    """The ranking, with what opening taught us noted on each runtime it demoted."""
    for candidate in candidates:
        if candidate.name in demoted:
            candidate.notes.append(demoted[candidate.name]["demoted"])
    return candidates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--stage", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument("--root", type=Path, default=Path("/"), help="machine root (tests)")
    parser.add_argument("--explain", action="store_true", help="each candidate's score and why")
    parser.add_argument("--json", action="store_true", help="machine-readable decision")
    parser.add_argument(
        "--open", action="store_true", help="load the winner, check its version and providers"
    )
    parser.add_argument("--verify", action="store_true", help="hash the winner's files first")
    args = parser.parse_args(argv)
    try:
        index = load_index(args.stage)
        hardware = detect(args.root)
        libraries = system_libraries(
            str(index.get("target", "")), args.root, windows=sys.platform == "win32"
        )
        decision = choose(index, hardware, stage=args.stage, libraries=libraries)
        version = None
        plugins: list[Registered] = []
        if args.open or args.verify:
            decision, version = open_best(
                args.stage,
                index,
                hardware,
                decision,
                libraries=libraries,
                verify=args.verify,
                providers=args.open,
            )
        if args.open:
            plugins = register_plugins(args.stage, decision.runtime, hardware)
    except LoaderError as exc:
        print(f"runtime_loader: {exc}", file=sys.stderr)
        return 1
    for problem in decision.problems:
        print(f"runtime_loader: add-on skipped: {problem}", file=sys.stderr)
    if args.json:
        out = {
            "runtime": decision.runtime["name"],
            "directory": decision.runtime["directory"],
            "score": decision.score,
            "why": decision.why,
            "overridden": decision.overridden,
            "line": decision.line(),
            "loaded_version": version,
            "plugins": [asdict(p) for p in plugins],
            "hardware": asdict(hardware),
            "candidates": [asdict(c) for c in decision.candidates],
            "problems": decision.problems,
        }
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    print(decision.line())
    if args.explain:
        for c in decision.candidates:
            if c.score == 0:
                print(f"  skip {c.name}: {c.why}")
            else:
                print(f"  {c.directory}: score {c.score} ({c.why})")
            for note in c.notes:
                print(f"    {note}")
    if version:
        print(f"  loaded ONNX Runtime {version}")
    for plugin in plugins:
        if plugin.status == "registered":
            print(
                f"  registered plugin EP {plugin.name} ({plugin.ep_name}, "
                f"{plugin.devices} device{'s' if plugin.devices != 1 else ''} here)"
            )
        else:
            print(f"  plugin EP {plugin.name} {plugin.status}: {plugin.why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
