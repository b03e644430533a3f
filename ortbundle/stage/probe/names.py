"""The providers an ONNX Runtime core offers, read by running it where this machine can.

A core's `GetAvailableProviders()` is the truth the loader acts on; the table the stage reads
from the bytes (binaries/providers.py) is a reading of the same constant, found by pointers,
and is not found at all in a Mach-O. So the probe (ortprobe.c) loads the staged core and asks
it: natively for linux-x86_64 on a Linux x86_64 host, under Wine for windows-x86_64, under
qemu-user for linux-aarch64. Where it cannot run (a Mach-O, Windows on Arm, a missing compiler,
Wine or qemu, or a core that does not load here) the bytes' reading stands, marked as read
statically with the reason. Each answer is kept by the library's SHA-256 and how it could be
read, so a warm build runs nothing.
"""

from __future__ import annotations

import atexit
import functools
import platform
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ortbundle._core.errors import ConfigError, OrtbundleError
from ortbundle._core.memo import Memo
from ortbundle.stage.probe import ProbeResult, build_probe, parse_probe
from ortbundle.stage.probe.process import run_captured
from ortbundle.stage.probe.qemu import missing_qemu, qemu_sysroot
from ortbundle.stage.probe.wine import missing_wine, wine_session

__all__ = [
    "PROBE_ENV",
    "RAN_NATIVELY",
    "RAN_UNDER_QEMU",
    "RAN_UNDER_WINE",
    "READ_STATICALLY",
    "NamesRead",
    "how_to_run",
    "probe_mode",
    "read_custom_op_domains",
    "read_plugin_names",
    "read_providers",
]

RAN_NATIVELY = "ran natively"
RAN_UNDER_WINE = "ran under wine"
RAN_UNDER_QEMU = "ran under qemu"
READ_STATICALLY = "read statically"
_FORMAT = "offered-names/1"  # of a memo entry
_PLUGIN_FORMAT = "plugin-ep-names/2"
_CUSTOM_OPS_FORMAT = "custom-op-domains/1"
_TIMEOUT = 120  # seconds: loading a core and listing its providers takes well under one


@dataclass(frozen=True)
class NamesRead:
    """What one library offers on one target, and how that was learnt: `how` is one of
    RAN_NATIVELY, RAN_UNDER_WINE, RAN_UNDER_QEMU, READ_STATICALLY; `why` says why a static
    reading stands (empty when the probe ran)."""

    target: str
    names: tuple[str, ...]
    how: str
    why: str = ""
    # a plugin EP whose factories name the EP after the name it is registered under
    # (onnxruntime-ggml): a loader must register it under its ep_name
    registration_named: bool = False

    @property
    def ran(self) -> bool:
        """The core itself said it: a name it lacks is certainly not offered."""
        return self.how != READ_STATICALLY


# ORTBUNDLE_PROBE: which cores a build runs to read what they offer. "native" (the default):
# those this machine runs itself, a compile and a run; "all": also under Wine and qemu-user,
# which start an emulated system per read (seconds each); "none": the bytes' reading only.
PROBE_ENV = "ORTBUNDLE_PROBE"
PROBE_MODES = ("native", "all", "none")


def probe_mode(environ: Mapping[str, str]) -> str:
    """The mode the environment asks for; an unknown one is refused naming the choices."""
    mode = environ.get(PROBE_ENV, "native").strip() or "native"
    if mode not in PROBE_MODES:
        raise ConfigError(
            f"{PROBE_ENV}={mode!r} is not a probe mode",
            fix=f"set {PROBE_ENV} to one of {', '.join(PROBE_MODES)}, or unset it (native)",
        )
    return mode


def how_to_run(target: str, mode: str = "native") -> tuple[str, str]:
    """(how the probe can run a `target` core here, "") or (READ_STATICALLY, why not), as
    `mode` allows (PROBE_MODES)."""
    if mode == "none":
        return READ_STATICALLY, f"{PROBE_ENV}=none: no core is run"
    if mode == "native" and target in ("windows-x86_64", "linux-aarch64"):
        return READ_STATICALLY, f"an emulated run is not asked for ({PROBE_ENV}=all asks for it)"
    if target == "linux-x86_64":
        host = (platform.system(), platform.machine())
        if host != ("Linux", "x86_64"):
            return READ_STATICALLY, f"this machine is {host[0]} {host[1]}"
        if shutil.which("gcc") is None:
            return READ_STATICALLY, "gcc is not on PATH (Debian/Ubuntu: apt-get install gcc)"
        return RAN_NATIVELY, ""
    if target == "windows-x86_64":
        missing = missing_wine()
        return (RAN_UNDER_WINE, "") if not missing else (READ_STATICALLY, _needs(missing))
    if target == "linux-aarch64":
        missing = missing_qemu()
        return (RAN_UNDER_QEMU, "") if not missing else (READ_STATICALLY, _needs(missing))
    return READ_STATICALLY, f"no {target} program runs on this machine"


def _needs(packages: list[str]) -> str:
    return f"needs {', '.join(packages)} (Debian/Ubuntu: apt-get install {' '.join(packages)})"


def read_providers(
    library: Path,
    sha256: str,
    target: str,
    static: tuple[str, ...],
    memo: Memo,
    *,
    mode: str = "native",
    runner: Callable[[str, str], tuple[str, str]] = how_to_run,
) -> NamesRead:
    """The providers the core at `library` (with its staged neighbours beside it) offers on
    `target`: run where `runner` says `mode` can, else `static` (the bytes' reading). Kept by
    `sha256` and how: a machine that gains Wine asks again, a warm build runs nothing."""
    how, why = runner(target, mode)

    def compute() -> NamesRead:
        if how == READ_STATICALLY:
            return NamesRead(target, static, how, why)
        ran, problem = _run(library, target, how)
        if ran:
            return NamesRead(target, ran, how)
        return NamesRead(target, static, READ_STATICALLY, problem)

    return _remembered(memo, [_FORMAT, sha256, target, how], compute)


def _run(library: Path, target: str, how: str) -> tuple[tuple[str, ...], str]:
    """The providers the probe printed, or () and why it printed none."""
    result, problem = _execute(library, target, how)
    if result is None:
        return (), problem
    if result.providers:
        return result.providers, ""
    return (), f"the probe did not list its providers ({how}): {problem}"


_REGISTERED = "probe"  # the registration name the probe gives a plugin EP library


def _execute(
    core: Path, target: str, how: str, plugin: Path | None = None, *, custom_ops: bool = False
) -> tuple[ProbeResult | None, str]:
    """Run the probe on `core` (registering `plugin` as an EP library when given, or running
    its RegisterCustomOps with `custom_ops`): its result and what it said last, or None and
    why it did not run."""
    with tempfile.TemporaryDirectory(prefix="ortbundle-probe-") as scratch:
        work = Path(scratch)
        try:
            exe = _built_probe(target)
        except OrtbundleError as problem:
            return None, f"the probe could not be built: {problem}"

        def command(path: Callable[[Path], str]) -> list[str]:
            flag = "--custom-ops" if custom_ops else "--plugin"
            extra = [flag, f"{_REGISTERED}={path(plugin)}"] if plugin is not None else []
            return [str(exe), "--lib", path(core), *extra]

        if how == RAN_UNDER_WINE:
            with wine_session(work / "prefix") as wine:
                done = wine.run(command(wine.path), timeout=_TIMEOUT)
        elif how == RAN_UNDER_QEMU:
            qemu = qemu_sysroot(work / "sysroot")
            done = qemu.run(command(str), timeout=_TIMEOUT)
        else:
            done = run_captured(command(str), timeout=_TIMEOUT)
    result = parse_probe(done.returncode, done.stdout, done.stderr)
    said = result.error or done.stderr.strip()[-300:] or f"exit {done.returncode}"
    return result, said


def read_plugin_names(
    plugin: Path,
    plugin_sha256: str,
    core: Path,
    core_sha256: str,
    target: str,
    static: tuple[str, ...],
    memo: Memo,
    *,
    mode: str = "native",
    runner: Callable[[str, str], tuple[str, str]] = how_to_run,
) -> NamesRead:
    """The EP names a plugin EP library's factories give its devices, read by registering it
    with the staged `core` it pairs with (the probe's `--plugin`) where `runner` says `mode`
    can; `static` (the names its bytes and package state) where it cannot, or where it
    registered but reported no device on this machine (a GPU plugin on a machine without
    one): then nothing was learnt and the static reading stands, with the reason."""
    how, why = runner(target, mode)

    def compute() -> NamesRead:
        if how == READ_STATICALLY:
            return NamesRead(target, static, how, why)
        result, said = _execute(core, target, how, plugin)
        if result is None:
            return NamesRead(target, static, READ_STATICALLY, said)
        ok, detail = result.plugins.get(_REGISTERED, (False, said))
        if not ok:
            return NamesRead(
                target, static, READ_STATICALLY, f"the core did not register it ({how}): {detail}"
            )
        core_names = set(result.providers)
        names = tuple(dict.fromkeys(n for n in detail.split() if n not in core_names))
        if names == (_REGISTERED,):  # onnxruntime-ggml's factory takes the name it is given
            return NamesRead(target, static, how, registration_named=True)
        if not names:
            return NamesRead(
                target,
                static,
                READ_STATICALLY,
                f"it registered and reported no device of its own on this machine ({how})",
            )
        return NamesRead(target, names, how)

    return _remembered(memo, [_PLUGIN_FORMAT, plugin_sha256, core_sha256, target, how], compute)


def read_custom_op_domains(
    library: Path,
    library_sha256: str,
    core: Path,
    core_sha256: str,
    target: str,
    memo: Memo,
    *,
    mode: str = "native",
    runner: Callable[[str, str], tuple[str, str]] = how_to_run,
) -> NamesRead:
    """The operator domains a custom-op library registers, read by running its
    RegisterCustomOps against the staged `core` it pairs with (the probe's `--custom-ops`)
    where `runner` says `mode` can. Its bytes give no reliable reading, so where it cannot run,
    or does not load or register (a Python extension module needs the interpreter's symbols),
    no domain is known and `why` says so. `names` are the domains, each once, in the order
    created; a domain the library created and added no operator to is not one."""
    how, why = runner(target, mode)

    def compute() -> NamesRead:
        if how == READ_STATICALLY:
            return NamesRead(target, (), how, why)
        result, said = _execute(core, target, how, library, custom_ops=True)
        if result is None:
            return NamesRead(target, (), READ_STATICALLY, said)
        ok, detail = result.custom_ops.get(_REGISTERED, (False, said))
        if not ok:
            return NamesRead(target, (), READ_STATICALLY, f"it did not register ({how}): {detail}")
        domains = tuple(dict.fromkeys(pair.rpartition(":")[0] for pair in detail.split()))
        return NamesRead(target, domains, how)

    return _remembered(
        memo, [_CUSTOM_OPS_FORMAT, library_sha256, core_sha256, target, how], compute
    )


def _remembered(memo: Memo, keys: list[str], compute: Callable[[], NamesRead]) -> NamesRead:
    """A reading kept by what it depends on (the libraries' SHA-256, target, how): a warm
    build runs nothing."""
    return memo.remembered("offered-names", keys, compute, _to, _from)


@functools.cache
def _built_probe(target: str) -> Path:
    """The probe for `target`, compiled once per process (a build reads many cores), into a
    directory removed when the process ends."""
    out = Path(tempfile.mkdtemp(prefix="ortbundle-ortprobe-"))
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    return build_probe(out, target=target)


def _to(read: NamesRead) -> dict[str, Any]:
    return {
        "target": read.target,
        "names": list(read.names),
        "how": read.how,
        "why": read.why,
        "registration_named": read.registration_named,
    }


def _from(data: Any) -> NamesRead:
    names = data["names"]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError("names")
    return NamesRead(
        str(data["target"]),
        tuple(names),
        str(data["how"]),
        str(data["why"]),
        data.get("registration_named") is True,
    )
