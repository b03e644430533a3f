"""Scoring and choosing: a vendor runtime on its own vendor's GPU beats OpenVINO on an Intel GPU,
which beats a runtime whose plugin EP's NPU is here (ort-rocket on an RK3588's /dev/accel node),
which beats a generic (WebGPU) runtime on any GPU, which beats a CPU-only runtime. Equal scores
keep the index's order, a perfect fit ends the search, the index's override variable wins
outright; a runtime the system is too old for, or whose required libraries are absent, is
skipped with the reason. When the runtime chosen has no NPU rung and another of the package
has (an add-on's), the decision says in one line why that NPU is not used."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ortbundle.payload.loader.hardware import Hardware, accel_problem, too_old, wrong_machine
from ortbundle.payload.loader.index import LoaderError
from ortbundle.payload.loader.search import Libraries, missing_libraries
from ortbundle.payload.loader.vendors import GPU_VENDORS

VENDOR_LABEL = {name: v.label for name, v in GPU_VENDORS.items()}
SCORE_VENDOR, SCORE_INTEL, SCORE_NPU, SCORE_GENERIC, SCORE_CPU = 5, 4, 3, 2, 1
_VENDOR_SCORES = {"vendor": SCORE_VENDOR, "intel": SCORE_INTEL}  # a vendor's `score`


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
class Device:
    """Where the chosen runtime's sessions run, for a runtime with a plugin EP for an NPU behind
    /dev/accel: that EP and the session options it needs (graph optimisation off, intra-op
    spinning off, the environment it reads), or the CPU and, in one line, why not the NPU."""

    ep_name: str | None  # the plugin EP to put first in a session; None: the CPU
    plugin: str  # its registration name
    why: str  # "NPU: …" or "CPU: …", one line
    session_options: dict[str, Any] = field(default_factory=dict)  # empty for the CPU


def device_rung(
    runtime: dict[str, Any], hardware: Hardware, registered: list[Any] | None = None
) -> Device | None:
    """The NPU rung of `runtime`'s first plugin EP with a `device` (None: it has none): taken
    when the device is here (its driver's /dev/accel node, the board, the node opens) and,
    once `registered` (ortapi.Registered) says so, the plugin registered and reports a device."""
    for plugin in runtime.get("plugin_eps") or []:
        device = plugin.get("device")
        if not device:
            continue
        name, ep_name = (
            plugin["registration_name"],
            plugin.get("ep_name") or plugin["registration_name"],
        )
        problem = accel_problem(device, hardware)
        if problem is None and registered is not None:
            mine = next((r for r in registered if r.name == name), None)
            if mine is None or mine.status != "registered":
                problem = f"the plugin EP was not registered ({mine.why if mine else 'not tried'})"
            elif mine.devices == 0:
                problem = f"the plugin EP registered but reports no {ep_name} device"
        if problem is not None:
            return Device(None, name, f"CPU: {ep_name} NPU not used: {problem}")
        node = next(a for a in hardware.accel if a.driver == device.get("driver"))
        board = hardware.compatible[0] if hardware.compatible else "this board"
        why = f"NPU: {ep_name} on {board} ({node.node}, driver {node.driver})"
        return Device(ep_name, name, why, dict(plugin.get("session_options") or {}))
    return None


@dataclass
class Decision:
    runtime: dict[str, Any]
    score: int
    why: str
    overridden: bool
    candidates: list[Candidate] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # bad fragments, never fatal
    device: Device | None = None  # the NPU rung of a runtime with an accel plugin EP

    def line(self) -> str:
        """The settings row: 'Intel GPU · OpenVINO 1.24.1 · runtimes/openvino'."""
        rt = self.runtime
        return f"{self.why} · {rt['label']} {rt['ort_version']} · {rt['directory']}"


def score(runtime: dict[str, Any], hardware: Hardware) -> tuple[int, str]:
    points, why = _gpu_score(runtime, hardware)
    npu = _usable_npu(runtime, hardware)
    return (SCORE_NPU, npu) if npu is not None and points < SCORE_NPU else (points, why)


def _gpu_score(runtime: dict[str, Any], hardware: Hardware) -> tuple[int, str]:
    fits = runtime.get("fits", {})
    for vendor in fits.get("gpu_vendors", []):
        if hardware.usable_vendor(vendor):
            known = GPU_VENDORS.get(vendor)
            if known is None:  # a name the loader does not know: any GPU of that vendor
                return SCORE_VENDOR, f"{vendor} GPU"
            return _VENDOR_SCORES[known.score], f"{known.label} {'SoC' if known.soc else 'GPU'}"
    if fits.get("any_gpu") and hardware.gpus:
        return SCORE_GENERIC, "GPU (generic)"
    return SCORE_CPU, "CPU"


def _usable_npu(runtime: dict[str, Any], hardware: Hardware) -> str | None:
    """'rocket NPU' when a plugin EP of `runtime` has its NPU here (its driver's node, the
    board, the node opens); None otherwise. Whether the plugin then reports a device is known
    only once it registers (--open): the rung says so."""
    for plugin in runtime.get("plugin_eps") or []:
        device = plugin.get("device")
        if device and accel_problem(device, hardware) is None:
            return f"{plugin.get('ep_name') or plugin['registration_name']} NPU"
    return None


def best_possible(hardware: Hardware) -> int:
    usable = [_VENDOR_SCORES[v.score] for n, v in GPU_VENDORS.items() if hardware.usable_vendor(n)]
    if usable:
        return max(usable)
    floor = SCORE_GENERIC if hardware.gpus else SCORE_CPU
    # an accel node: a runtime further down may have the plugin EP for it
    return max(floor, SCORE_NPU) if hardware.accel else floor


def unused_npu(
    runtimes: list[dict[str, Any]], chosen: dict[str, Any], hardware: Hardware
) -> Device | None:
    """For a chosen runtime without an NPU rung: the first other runtime's rung that is not
    taken here (its NPU absent, with why); None when there is none, or when that NPU is here
    and a GPU runtime ranked above it (the candidates say so)."""
    for runtime in runtimes:
        if runtime["name"] == chosen["name"]:
            continue
        rung = device_rung(runtime, hardware)
        if rung is not None:
            return rung if rung.ep_name is None else None
    return None


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
    problem = wrong_machine(index, hardware)
    if problem:
        raise LoaderError(problem)
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
    best.device = device_rung(best.runtime, hardware) or unused_npu(
        index["runtimes"], best.runtime, hardware
    )
    return best
