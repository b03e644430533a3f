"""The ONNX Runtime C API through ctypes: open a runtime's core and check its version, ask it
GetAvailableProviders() (trusted over the index: a GPU runtime without its GPU provider falls
through), register its plugin EPs, and offer the custom-op libraries and libraries using a core
beside it. Only these calls load native code."""

from __future__ import annotations

import ctypes
import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ortbundle.payload.loader.hardware import Hardware, accel_problem
from ortbundle.payload.loader.index import LoaderError
from ortbundle.payload.loader.scoring import SCORE_CPU, Candidate, Decision, choose
from ortbundle.payload.loader.search import Libraries

_OPENED: list[Any] = []  # losers and winners alike stay mapped: never unload a C++ runtime


class _LoadFailed(LoaderError):
    """The entry library did not load here (a library it needs is missing): try the next."""


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
        device = plugin.get("device") or {}
        absent = accel_problem(device, hardware) if device and hardware is not None else None
        if absent is not None:  # an NPU this machine lacks: the plugin is not loaded
            registered.append(Registered(name, ep_name, plugin["library"], 0, "skipped", absent))
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


@dataclass(frozen=True)
class Companion:
    """A custom-op library or a library using a core, offered with the chosen runtime: a
    custom-op library is `ready` for the application to register with each session
    (RegisterCustomOpsLibrary_V2(options, library), or in Python
    SessionOptions.register_custom_ops_library(library)); a library using a core is `loaded`
    beside the core it fits (it then finds that core already in the process)."""

    name: str
    kind: str  # custom-ops | uses-core
    library: str  # absolute path
    status: str  # ready | loaded | skipped | failed
    why: str = ""


def companions(stage: Path, runtime: dict[str, Any], *, load: bool = False) -> list[Companion]:
    """The runtime's custom-op libraries and libraries using its core, each checked against
    this installation: its file is there, and a library using a core is offered only when the
    runtime's own files hold the core it links or opens. With `load` (the runtime opened first),
    a custom-op library is opened to check it exports RegisterCustomOps, and a library using a
    core is loaded after it."""
    listed = runtime.get("custom_ops") or runtime.get("uses_core")
    if load and listed and runtime["name"] not in _CORES:
        raise LoaderError(f"open {runtime['name']} before loading the libraries beside it")
    held = {Path(f["path"]).name for f in runtime.get("files", [])}
    found = []
    for kind, key in (("custom-ops", "custom_ops"), ("uses-core", "uses_core")):
        for item in runtime.get(key) or []:
            library = (stage / item["library"]).resolve()
            core = item.get("core", "")
            if not library.is_file():
                why = f"{library} is not installed; reinstall the package"
                found.append(Companion(item["name"], kind, str(library), "failed", why))
            elif kind == "uses-core" and core not in held:
                why = f"needs the core {core or '(unnamed)'}, which {runtime['name']} does not hold"
                found.append(Companion(item["name"], kind, str(library), "skipped", why))
            elif load:
                found.append(_load_companion(item["name"], kind, library))
            else:
                status = "ready" if kind == "custom-ops" else "offered"
                found.append(Companion(item["name"], kind, str(library), status))
    return found


def _load_companion(name: str, kind: str, library: Path) -> Companion:
    mode = getattr(os, "RTLD_NOW", 0) | (ctypes.RTLD_GLOBAL if kind == "uses-core" else 0)
    try:
        handle = ctypes.CDLL(str(library), mode=mode)
    except OSError as exc:
        return Companion(name, kind, str(library), "failed", f"cannot load it: {exc}")
    _OPENED.append(handle)
    if kind == "custom-ops" and not hasattr(handle, "RegisterCustomOps"):
        why = "it does not export RegisterCustomOps: not a custom-operator library"
        return Companion(name, kind, str(library), "failed", why)
    return Companion(name, kind, str(library), "ready" if kind == "custom-ops" else "loaded")


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
