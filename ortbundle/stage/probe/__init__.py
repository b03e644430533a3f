"""Build `ortprobe` (ortprobe.c, one file) for Windows with mingw-w64, for Linux with gcc, and
for Linux on Arm with aarch64-linux-gnu-gcc (run under qemu-user: ortbundle/stage/probe/qemu.py).

The probe declares the few ONNX Runtime C API entries it calls itself (ortprobe.c: each
OrtApi entry at its fixed index), so building it needs a C compiler and nothing downloaded: no
150 MiB archive fetched for one header. The OrtApi table is append-only, so those indices hold
for every core that offers the entry; tests/test_smoke_real.py compiles the probe against the
real `onnxruntime_c_api.h` and asserts each index there.

`run_probe` runs a built probe (under Wine for the .exe) and parses its line protocol into a
`ProbeResult`; ortbundle/tools/smoke/run.py and the Windows test tier read that, never raw text.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ortbundle._core.errors import PackagingError
from ortbundle.stage.probe.qemu import CROSS_CC

__all__ = [
    "FLAGS",
    "MINGW_CC",
    "ProbeOutput",
    "ProbeResult",
    "build_probe",
    "input_values",
    "parse_probe",
]

_COMPONENT = "ortprobe"
MINGW_CC = "x86_64-w64-mingw32-gcc"
FLAGS = ("-O2", "-std=c99", "-Wall", "-Wextra", "-Werror")
# Each target the probe is built for: its C compiler, the Debian package that installs it, and
# what it links.
_COMPILERS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "linux-x86_64": ("gcc", "gcc", ("-D_GNU_SOURCE", "-ldl")),
    "linux-aarch64": (CROSS_CC, "gcc-aarch64-linux-gnu", ("-D_GNU_SOURCE", "-ldl")),
    "windows-x86_64": (MINGW_CC, "gcc-mingw-w64-x86-64", ("-lshell32",)),
}


@dataclass(frozen=True)
class ProbeOutput:
    """One output of one model run: its element type and values (`other` has none)."""

    name: str
    kind: str  # float | int64 | other
    values: tuple[float, ...] = ()


@dataclass(frozen=True)
class ProbeResult:
    """What one probe run said, line by line (ortprobe.c documents the protocol)."""

    exit_code: int
    version: str = ""
    api: int = 0
    providers: tuple[str, ...] = ()
    plugins: Mapping[str, tuple[bool, str]] = field(default_factory=dict)  # name -> ok, detail
    eps: Mapping[str, tuple[bool, str]] = field(default_factory=dict)
    models: Mapping[str, tuple[bool, str]] = field(default_factory=dict)  # path -> ok, message
    inputs: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    outputs: Mapping[str, tuple[ProbeOutput, ...]] = field(default_factory=dict)
    loads: Mapping[str, tuple[bool, str]] = field(default_factory=dict)
    loaded: frozenset[str] = frozenset()
    error: str = ""
    stderr: str = ""
    # a custom-op library run against the core: name -> ok, its "domain:op" pairs or why not
    custom_ops: Mapping[str, tuple[bool, str]] = field(default_factory=dict)


def input_values(count: int) -> list[float]:
    """The probe's fixed input, x[i] = ((i % 11) - 5) * 0.5, as ortprobe.c fills it."""
    return [((i % 11) - 5) * 0.5 for i in range(count)]


def build_probe(out: Path, *, windows: bool = False, target: str = "") -> Path:
    """Compile ortprobe.c into `out` for `target` (ortprobe.exe with mingw-w64, ortprobe with
    gcc or the aarch64 cross compiler); `windows` alone: windows-x86_64, else linux-x86_64."""
    target = target or ("windows-x86_64" if windows else "linux-x86_64")
    compiler, package, links = _COMPILERS[target]
    windows = target.startswith("windows-")
    found = shutil.which(compiler)
    if found is None:
        raise PackagingError(
            f"{compiler} is not on PATH",
            component=_COMPONENT,
            target=target,
            fix=f"install it (Debian/Ubuntu: apt-get install {package})",
        )
    out.mkdir(parents=True, exist_ok=True)
    exe = out / ("ortprobe.exe" if windows else "ortprobe")
    with resources.as_file(resources.files(__name__) / "ortprobe.c") as source:
        command = [found, *FLAGS, "-o", str(exe), str(source), *links]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0 or not exe.is_file():
        raise PackagingError(
            f"{compiler} could not build the probe:\n{result.stderr.strip()[-2000:]}",
            component=_COMPONENT,
            target=target,
            file=str(source),
        )
    return exe


def probe_command(
    exe: Path,
    core: str,
    *,
    plugins: Sequence[tuple[str, str]] = (),
    custom_ops: Sequence[tuple[str, str]] = (),
    eps: Sequence[str] = (),
    models: Sequence[str] = (),
    loads: Sequence[str] = (),
    hold: int = 0,
) -> list[str]:
    """The probe's arguments; paths are already in the form the probe's OS reads."""
    command = [str(exe), "--lib", core]
    for name, path in plugins:
        command += ["--plugin", f"{name}={path}"]
    for name, path in custom_ops:
        command += ["--custom-ops", f"{name}={path}"]
    for spec in eps:
        command += ["--ep", spec]
    for model in models:
        command += ["--model", model]
    for path in loads:
        command += ["--load", path]
    if hold:
        command += ["--hold", str(hold)]
    return command


def parse_probe(exit_code: int, stdout: str, stderr: str = "") -> ProbeResult:
    """Turn the probe's lines into a ProbeResult (unknown lines are ignored)."""
    version, api, error = "", 0, ""
    providers: tuple[str, ...] = ()
    plugins: dict[str, tuple[bool, str]] = {}
    custom_ops: dict[str, tuple[bool, str]] = {}
    eps: dict[str, tuple[bool, str]] = {}
    models: dict[str, tuple[bool, str]] = {}
    inputs: dict[str, list[tuple[str, str]]] = {}
    outputs: dict[str, list[ProbeOutput]] = {}
    loads: dict[str, tuple[bool, str]] = {}
    loaded: set[str] = set()
    current, failed_load = "", ""
    for line in stdout.splitlines():
        word, _, rest = line.rstrip("\r").partition(" ")
        if word == "api":
            api = int(rest or 0)
        elif word == "version":
            version = rest
        elif word == "providers":
            providers = tuple(rest.split())
        elif word in ("plugin", "ep", "customops"):  # a name, then ok/failed and details
            name, _, tail = rest.partition(" ")
            status, _, detail = tail.partition(" ")
            table = {"plugin": plugins, "ep": eps, "customops": custom_ops}[word]
            table[name] = (status == "ok", detail)
        elif word in ("model", "load"):  # a path (spaces and all), then ok or failed …
            table = models if word == "model" else loads
            if rest.endswith(" ok"):
                path = rest.removesuffix(" ok")
                table[path] = (True, "")
                current = path if word == "model" else current
            else:
                path, _, detail = rest.rpartition(" failed ")
                table[path] = (False, detail)
                failed_load = path if word == "load" else ""
        elif word == "why" and failed_load in loads:  # the loader's words for that failure
            code = loads[failed_load][1]
            loads[failed_load] = (False, f"{code}: {rest.strip()}" if rest.strip() else code)
        elif word == "input":
            name, _, shape = rest.partition(" float ")
            inputs.setdefault(current, []).append((name, shape))
        elif word == "output":
            parts = rest.split(" ")
            kind = parts[1] if len(parts) > 1 else "other"
            values = tuple(float(v) for v in parts[3:]) if kind in ("float", "int64") else ()
            outputs.setdefault(current, []).append(ProbeOutput(parts[0], kind, values))
        elif word == "loaded":
            loaded.add(rest)
        elif word == "error":
            error = rest
    return ProbeResult(
        exit_code,
        version,
        api,
        providers,
        plugins,
        eps,
        models,
        {k: tuple(v) for k, v in inputs.items()},
        {k: tuple(v) for k, v in outputs.items()},
        loads,
        frozenset(loaded),
        error,
        stderr,
        custom_ops,
    )
