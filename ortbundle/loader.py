#!/usr/bin/env python3
"""Choose and open one ONNX Runtime per process (seeds/inference-backends.md §3.2).

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
`--explain` says why.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = "ortbundle.runtimes/1"
VENDORS = {0x8086: "intel", 0x10DE: "nvidia", 0x1002: "amd", 0x1022: "amd", 0x5143: "qualcomm"}
VENDOR_LABEL = {"intel": "Intel", "nvidia": "NVIDIA", "amd": "AMD", "qualcomm": "Qualcomm"}
SCORE_VENDOR, SCORE_INTEL, SCORE_GENERIC, SCORE_CPU = 4, 3, 2, 1
_OPENED: list[Any] = []  # losers and winners alike stay mapped: never unload a C++ runtime


class LoaderError(Exception):
    """A decision or a load that cannot go ahead; the message says what to do."""


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


@dataclass
class Candidate:
    name: str
    directory: str
    score: int
    why: str


@dataclass
class Decision:
    runtime: dict[str, Any]
    score: int
    why: str
    overridden: bool
    candidates: list[Candidate] = field(default_factory=list)

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
    path = stage / "runtimes.json"
    try:
        index: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LoaderError(f"cannot read {path}: {exc}") from None
    if index.get("schema") != SCHEMA:
        raise LoaderError(f"{path} has schema {index.get('schema')!r}, this loader reads {SCHEMA}")
    return index


def choose(
    index: dict[str, Any], hardware: Hardware, *, stage: Path, env: dict[str, str] | None = None
) -> Decision:
    env = dict(os.environ) if env is None else env
    variable = index.get("override_env", "")
    override = env.get(variable) if variable else None
    if override:
        wanted = Path(override) if Path(override).is_absolute() else stage / override
        if not wanted.is_dir():
            raise LoaderError(
                f"{variable}={override} names no directory; unset it or point it at a runtime "
                f"directory such as {stage / index['runtimes'][0]['directory']}"
            )
        for runtime in index["runtimes"]:
            if (stage / runtime["directory"]).resolve() == wanted.resolve():
                return Decision(runtime, 0, f"{variable} override", True)
        raise LoaderError(
            f"{variable}={override} is not one of this package's runtimes: "
            + ", ".join(r["directory"] for r in index["runtimes"])
        )
    best: Decision | None = None
    ceiling = best_possible(hardware)
    candidates = []
    skipped = []
    for runtime in index["runtimes"]:
        old = too_old(runtime, hardware)
        if old is not None:
            skipped.append(f"{runtime['directory']}: {old}")
            why = f"skipped: {old}"
            candidates.append(Candidate(runtime["name"], runtime["directory"], 0, why))
            continue
        points, why = score(runtime, hardware)
        candidates.append(Candidate(runtime["name"], runtime["directory"], points, why))
        if best is None or points > best.score:  # equal scores keep the search order
            best = Decision(runtime, points, why, False)
        if points >= ceiling:
            break  # a perfect fit ends the search
    if best is None and skipped:
        raise LoaderError(
            "this system is too old for every runtime of the package: " + "; ".join(skipped)
        )
    if best is None:
        raise LoaderError("runtimes.json lists no runtime")
    best.candidates = candidates
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
        raise LoaderError(f"cannot load {entry}: {exc}") from None
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--stage", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument("--root", type=Path, default=Path("/"), help="machine root (tests)")
    parser.add_argument("--explain", action="store_true", help="each candidate's score and why")
    parser.add_argument("--json", action="store_true", help="machine-readable decision")
    parser.add_argument("--open", action="store_true", help="load the winner, check its version")
    parser.add_argument("--verify", action="store_true", help="hash the winner's files first")
    args = parser.parse_args(argv)
    try:
        index = load_index(args.stage)
        hardware = detect(args.root)
        decision = choose(index, hardware, stage=args.stage)
        version = None
        plugins: list[Registered] = []
        if args.open or args.verify:
            version = open_runtime(args.stage, decision.runtime, verify=args.verify)
        if args.open:
            plugins = register_plugins(args.stage, decision.runtime, hardware)
    except LoaderError as exc:
        print(f"runtime_loader: {exc}", file=sys.stderr)
        return 1
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
        }
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    print(decision.line())
    if args.explain:
        for c in decision.candidates:
            if c.score == 0:
                print(f"  {c.directory}: {c.why}")
            else:
                print(f"  {c.directory}: score {c.score} ({c.why})")
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
