"""Probe every runtime of an installed (or staged) tree and judge what the probe says.

A tree is anything laid out like a stage: `runtimes.json` and `models.json` at its root, the
runtime directories, models and plugins below (a stage, `C:\\Program Files\\<package>` after the
installer, `R/usr/lib/<package>` after pacman). For each runtime the probe loads the core as
the shipped loader does and this module checks, against the tree's own index:

- the version equals `ort_version` and the providers equal `providers`, in order;
- each provider library (`*providers_<name>*`, not `providers_shared`) is loaded *through the
  core*, by appending that provider to a session (the session itself may fail: no GPU here);
- every library of the runtime's directory, and of each plugin EP's, loads (directly, after
  the core has loaded what it loads itself);
- each plugin EP registers with this core (`RegisterExecutionProviderLibrary`; 0 devices is fine);
- every model the index gives this runtime runs on the probe's fixed input, its float outputs
  are finite, and a model with a known function (`sigmoid`) gives that function's values.

What the runtime's `requires` names and this machine lacks is not a failure of the package:
a missing required library makes the whole runtime NOT RUN (the shipped loader skips it here
too), a missing optional one makes NOT RUN only the libraries that need it (the TensorRT
provider without TensorRT), each with the group and the install sentence. Every FAIL says what
was expected and what was found.

`agree` then compares the outputs of one model across every run (runtimes, targets, staged and
installed copies): one model must give one answer everywhere.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from ortbundle._core.errors import OrtbundleError
from ortbundle.payload.loader.index import load_index
from ortbundle.payload.loader.search import Libraries, missing_libraries, system_libraries
from ortbundle.stage.binaries import inspect
from ortbundle.stage.probe import (
    ProbeOutput,
    ProbeResult,
    input_values,
    parse_probe,
    probe_command,
)
from ortbundle.stage.probe.process import run_captured
from ortbundle.stage.probe.qemu import Qemu
from ortbundle.stage.probe.wine import Wine

__all__ = ["ProbeRunner", "RuntimeCheck", "agree", "check_tree"]

_TOLERANCE = 1e-5  # float32 elementwise results of the same graph on the CPU provider
_REFERENCES: dict[str, Callable[[float], float]] = {
    "sigmoid": lambda x: 1.0 / (1.0 + math.exp(-x)),
}
# The name SessionOptionsAppendExecutionProvider knows a provider library by, and the options
# that make it load (a GPU device: this is what the application ships OpenVINO for).
_PROVIDER_SESSIONS = {"openvino": "OpenVINO:device_type=GPU"}
_TIMEOUT = 600


@dataclass(frozen=True)
class ProbeRunner:
    """One built probe and how to run it: natively, under Wine for the .exe, or under qemu for
    the aarch64 build."""

    exe: Path
    wine: Wine | None = None
    qemu: Qemu | None = None

    def path(self, host: Path) -> str:
        """The path as the probe's program reads it: Wine's Z: drive, else absolute (a plugin
        path is resolved by the core, not against our working directory)."""
        return self.wine.path(host) if self.wine else str(host.absolute())

    def libraries(self, target: str) -> Libraries:
        """Where the probe's platform looks for a library by name: this machine's ld.so, or
        the Wine prefix's System32 and Windows directories."""
        if self.qemu is not None:  # the sysroot's, as the emulated ld.so searches it
            return Libraries(False, "aarch64", after=(str(self.qemu.lib),))
        if self.wine is None:
            return system_libraries(target, windows=False)
        windows = self.wine.prefix / "drive_c" / "windows"
        return Libraries(True, "x86_64", after=(str(windows / "system32"), str(windows)))

    def run(self, command: Sequence[str]) -> ProbeResult:
        if self.wine is not None:
            result = self.wine.run(command, timeout=_TIMEOUT)
            return parse_probe(result.returncode, result.stdout, result.stderr)
        if self.qemu is not None:
            result = self.qemu.run(command, timeout=_TIMEOUT)
            return parse_probe(result.returncode, result.stdout, result.stderr)
        done = run_captured(command, timeout=_TIMEOUT)
        return parse_probe(done.returncode, done.stdout, done.stderr)


@dataclass(frozen=True)
class RuntimeCheck:
    """One runtime of one tree (or the part of it this machine cannot load), probed: PASS,
    FAIL or NOT RUN, and why, in one line."""

    target: str
    where: str  # stage | installed (…)
    runtime: str
    verdict: str  # PASS | FAIL | NOT RUN
    detail: str
    outputs: tuple[tuple[str, tuple[ProbeOutput, ...]], ...] = ()  # (model sha256, outputs)
    result: ProbeResult | None = None

    @property
    def passed(self) -> bool:
        return self.verdict == "PASS"

    def line(self) -> str:
        return f"{self.verdict:8} {self.target:16} {self.runtime:10} {self.where}: {self.detail}"


def _library(name: str) -> bool:
    lower = name.casefold()
    return lower.endswith(".dll") or lower.endswith(".so") or ".so." in lower


def _provider_name(name: str) -> str | None:
    """`onnxruntime_providers_openvino.dll` / `libonnxruntime_providers_openvino.so` → openvino."""
    stem = PurePosixPath(name).name.casefold()
    marker = "onnxruntime_providers_"
    if marker not in stem:
        return None
    provider = stem.split(marker, 1)[1].split(".", 1)[0]
    return None if provider == "shared" else provider


def check_tree(root: Path, runner: ProbeRunner, *, target: str, where: str) -> list[RuntimeCheck]:
    """Probe every runtime the shipped loader sees in `root`: those of runtimes.json and of each
    add-on installed beside them (runtimes.d/*.json); one RuntimeCheck each, and a FAIL for an
    add-on's fragment the loader would leave out."""
    index = load_index(root)
    models_path = root / "models.json"
    models: list[dict[str, Any]] = []
    if models_path.is_file():
        models = json.loads(models_path.read_text(encoding="utf-8")).get("models", [])
    libraries = runner.libraries(target)
    checks: list[RuntimeCheck] = []
    for runtime in index["runtimes"]:
        required, optional = missing_libraries(runtime, libraries, root)
        name = str(runtime["name"])
        if required:  # the shipped loader skips it here: nothing a user could run to probe
            detail = f"{_missing(required)}; the loader skips this runtime on this machine"
            checks.append(RuntimeCheck(target, where, name, "NOT RUN", detail))
            continue
        blocked = _blocked(root, runtime, {str(n["name"]) for n in optional})
        check = _check_runtime(
            root, runtime, models, runner, target=target, where=where, skip=blocked
        )
        parts: list[RuntimeCheck] = []
        for need in optional:
            cannot = sorted(f for f, names in blocked.items() if str(need["name"]) in names)
            if cannot:  # what this machine cannot load is not run, not failed
                detail = f"{', '.join(cannot)} not probed: {_missing([need])}"
                parts.append(RuntimeCheck(target, where, name, "NOT RUN", detail))
            else:  # opened at run time only: everything loads, the rung it serves is idle
                check = replace(check, detail=f"{check.detail}; {_missing([need])}")
        checks += [check, *parts]
    for problem in index["problems"]:
        checks.append(RuntimeCheck(target, where, "add-on", "FAIL", f"left out: {problem}"))
    return checks


def _missing(needs: Sequence[dict[str, Any]]) -> str:
    """`libcuda.so.1 (nvidia-driver) not on this machine — Install the NVIDIA driver …`."""
    parts = []
    for need in needs:
        optional = ", optional" if need.get("optional") else ""
        install = f" — {need['install']}" if need.get("install") else ""
        parts.append(f"{need['name']} ({need['group']}{optional}) not on this machine{install}")
    return "; ".join(parts)


def _blocked(root: Path, runtime: dict[str, Any], missing: set[str]) -> dict[str, set[str]]:
    """Each library of the runtime and its plugin EPs (by file name) that cannot load without
    one of `missing`: it imports one (DT_NEEDED, PE import table), or imports such a library
    of the bundle. A delay-import or a run-time load of a missing name blocks nothing."""
    if not missing:
        return {}
    directory = root / runtime["directory"]
    files = {
        PurePosixPath(str(f["path"])).name: directory / f["path"]
        for f in runtime.get("files", [])
        if not f.get("link_to") and _library(str(f["path"]))
    }
    for plugin in runtime.get("plugin_eps") or []:
        for path in (root / plugin["library"]).parent.iterdir():
            if _library(path.name) and not path.is_symlink():
                files[path.name] = path
    # names compared as Windows compares them (case-insensitive): no bundle ships two
    # libraries whose names differ only in case
    aliases = {
        PurePosixPath(str(f["path"])).name.casefold(): PurePosixPath(str(f["link_to"])).name
        for f in runtime.get("files", [])
        if f.get("link_to")
    }
    aliases |= {name.casefold(): name for name in files}
    absent = {name.casefold(): name for name in missing}
    needs: dict[str, set[str]] = {}
    for name, path in files.items():
        try:
            needs[name] = {n.casefold() for n in inspect(path).needed}
        except OrtbundleError:
            needs[name] = set()  # unreadable: the probe's own load says what is wrong
    blocked: dict[str, set[str]] = {}
    changed = True
    while changed:  # to a fixed point: a library needing a blocked library is blocked too
        changed = False
        for name, needed in needs.items():
            why = {absent[n] for n in needed if n in absent}
            for n in needed:
                why |= blocked.get(aliases.get(n, ""), set())
            if why and why != blocked.get(name):
                blocked[name] = why
                changed = True
    return blocked


def _check_runtime(
    root: Path,
    runtime: dict[str, Any],
    models: list[dict[str, Any]],
    runner: ProbeRunner,
    *,
    target: str,
    where: str,
    skip: Mapping[str, set[str]],
) -> RuntimeCheck:
    name = str(runtime["name"])
    directory = root / runtime["directory"]
    libraries = sorted(
        str(f["path"])
        for f in runtime.get("files", [])
        if not f.get("link_to")
        and _library(str(f["path"]))
        and PurePosixPath(str(f["path"])).name not in skip
    )
    providers = {p: lib for lib in libraries if (p := _provider_name(lib))}
    forms = [
        (str(model["name"]), form)
        for model in models
        for form in model.get("forms", [])
        if name in form.get("backends", [])
    ]
    registrations = [
        p
        for p in runtime.get("plugin_eps") or []
        if PurePosixPath(str(p["library"])).name not in skip
    ]
    plugin_eps = {str(p["registration_name"]): str(p["ep_name"]) for p in registrations}
    plugins = [
        (str(p["registration_name"]), runner.path(root / p["library"])) for p in registrations
    ]
    # a plugin's directory: its entry library and everything it opens at run time
    plugin_libraries = sorted(
        path
        for p in runtime.get("plugin_eps") or []
        for path in (root / p["library"]).parent.iterdir()
        if _library(path.name) and not path.is_symlink() and path.name not in skip
    )
    sessions = {p: _PROVIDER_SESSIONS.get(p, p) for p in sorted(providers)}
    command = probe_command(
        runner.exe,
        runner.path(directory / runtime["entry"]),
        plugins=plugins,
        eps=list(sessions.values()),
        models=[runner.path(root / form["path"]) for _, form in forms],
        loads=[runner.path(directory / lib) for lib in libraries]
        + [runner.path(path) for path in plugin_libraries],
    )
    result = runner.run(command)
    problems: list[str] = []
    if result.error or result.exit_code not in (0, 1):
        stderr = result.stderr.strip().splitlines()
        said = f": {stderr[-1][:300]}" if stderr else ""
        problems.append(result.error or f"the probe crashed (exit {result.exit_code}{said})")
    if result.version != runtime["ort_version"]:
        problems.append(f"version {result.version!r}, the index says {runtime['ort_version']}")
    if list(result.providers) != list(runtime["providers"]):
        problems.append(
            f"providers {' '.join(result.providers) or '(none)'}, the index says "
            f"{' '.join(runtime['providers']) or '(none)'}"
        )
    loaded = {n.casefold() for n in result.loaded}
    for provider, lib in sorted(providers.items()):
        if PurePosixPath(lib).name.casefold() not in loaded:
            session = sessions[provider].split(":")[0]
            _, said = result.eps.get(session, (False, "no answer"))
            problems.append(
                f"the core did not load {lib} for {provider} (appending {session} said: "
                f"{said or 'ok'})"
            )
    failed_loads = [
        f"{PurePosixPath(path.replace(chr(92), '/')).name} ({detail or 'no reason given'})"
        for path, (ok, detail) in result.loads.items()
        if not ok
    ]
    if failed_loads:
        problems.append(f"cannot load {', '.join(failed_loads)}")
    tried = len(libraries) + len(plugin_libraries)
    if len(result.loads) != tried and not result.error:
        problems.append(f"the probe tried {len(result.loads)} of the {tried} libraries")
    for plugin, _ in plugins:
        ok, detail = result.plugins.get(plugin, (False, "not reported"))
        if not ok:
            problems.append(f"plugin EP {plugin} did not register: {detail}")
    outputs: list[tuple[str, tuple[ProbeOutput, ...]]] = []
    for model_name, form in forms:
        path = runner.path(root / form["path"])
        ok, message = result.models.get(path, (False, "not run"))
        if not ok:
            problems.append(f"model {model_name} did not run: {message}")
            continue
        got = result.outputs.get(path, ())
        problems += _judge_outputs(model_name, result, path, got)
        outputs.append((str(form["sha256"]), got))
    ep_notes = [
        f"{spec.split(':')[0]} EP {'session ok' if ok else 'loaded, no device'}"
        for spec, (ok, _) in sorted(result.eps.items())
    ]
    if problems:
        detail = "; ".join(problems)
    else:
        bits = [
            f"ONNX Runtime {result.version}",
            ", ".join(p.removesuffix("ExecutionProvider") for p in result.providers),
            f"{tried} libraries loaded",
        ]
        if forms:  # a product without models (or none for this runtime) says nothing of them
            bits.append(f"{len(forms)} models right")
        if plugins:
            counts = [
                f"{p} ({result.plugins[p][1].split().count(plugin_eps[p])} devices)"
                for p, _ in plugins
                if p in result.plugins
            ]
            bits.append("plugin EP " + ", ".join(counts) + " registered")
        detail = "; ".join(bits + ep_notes)
    verdict = "FAIL" if problems else "PASS"
    return RuntimeCheck(target, where, name, verdict, detail, tuple(outputs), result)


def _judge_outputs(
    model: str, result: ProbeResult, path: str, outputs: tuple[ProbeOutput, ...]
) -> list[str]:
    problems = []
    if not outputs:
        return [f"model {model} gave no outputs"]
    for output in outputs:
        bad = [i for i, v in enumerate(output.values) if not math.isfinite(v)]
        if output.kind == "float" and bad:
            problems.append(
                f"model {model}: output {output.name} is not finite "
                f"({output.name}[{bad[0]}] = {output.values[bad[0]]}, {len(bad)} such)"
            )
    reference = _REFERENCES.get(model)
    if reference is not None:
        shapes = result.inputs.get(path, ())
        count = math.prod(int(d) for d in shapes[0][1].split("x")) if shapes else 0
        expected = [reference(x) for x in input_values(count)]
        got = outputs[0].values
        name = outputs[0].name
        if len(got) != len(expected):
            problems.append(
                f"model {model}: {name} has {len(got)} values, expected {len(expected)} "
                f"({model} of each input value)"
            )
        else:
            off = [(abs(a - b), i) for i, (a, b) in enumerate(zip(got, expected, strict=True))]
            worst, at = max(off, default=(0.0, 0))
            if worst > _TOLERANCE:
                problems.append(
                    f"model {model}: {name}[{at}] = {got[at]:.7g}, expected {model}"
                    f"({input_values(count)[at]:g}) = {expected[at]:.7g} (off by {worst:.3g}, "
                    f"tolerance {_TOLERANCE:g})"
                )
    return problems


def agree(checks: list[RuntimeCheck]) -> list[RuntimeCheck]:
    """Fail every check whose outputs for a model differ from the first run of that model."""
    first: dict[str, tuple[RuntimeCheck, tuple[ProbeOutput, ...]]] = {}
    judged = []
    for check in checks:
        problems = []
        for sha, outputs in check.outputs:
            seen = first.setdefault(sha, (check, outputs))
            difference = _difference(seen[1], outputs)
            if seen[0] is not check and difference:
                problems.append(
                    f"model {sha[:12]} disagrees with {seen[0].target} {seen[0].runtime} "
                    f"({seen[0].where}): {difference}"
                )
        if problems:
            detail = "; ".join(problems) if check.passed else f"{check.detail}; {problems[0]}"
            check = replace(check, verdict="FAIL", detail=detail)
        judged.append(check)
    return judged


def _difference(a: tuple[ProbeOutput, ...], b: tuple[ProbeOutput, ...]) -> str:
    """The first difference between two runs' outputs, `b` as found and `a` as expected; empty
    when they agree within the tolerance."""
    shape_a = [(o.name, o.kind, len(o.values)) for o in a]
    shape_b = [(o.name, o.kind, len(o.values)) for o in b]
    if shape_a != shape_b:
        return f"outputs {_shapes(shape_b)} here, {_shapes(shape_a)} there"
    for oa, ob in zip(a, b, strict=True):
        for i, (x, y) in enumerate(zip(oa.values, ob.values, strict=True)):
            if not abs(x - y) <= _TOLERANCE:
                return f"{ob.name}[{i}] = {y:.7g} here, {x:.7g} there"
    return ""


def _shapes(outputs: list[tuple[str, str, int]]) -> str:
    return ", ".join(f"{name} ({kind} x{count})" for name, kind, count in outputs) or "(none)"
