"""`invoke smoke`: install each built package with its own tool and run every runtime it ships.

For a built version directory (`dist/<product>/<version>/`), target by target:

- linux-x86_64: the probe (gcc) runs every runtime of the stage; then the Arch package is built
  with makepkg and installed by pacman into a scratch root, `pacman -Qkk` must report nothing
  altered, its files must equal the stage's, and the probe runs every runtime from there; the
  .deb and .rpm are unpacked (dpkg-deb, rpm2cpio) into scratch roots and checked the same way.
- linux-aarch64: the same, with the probe cross-compiled (aarch64-linux-gnu-gcc) and run under
  qemu-aarch64 in a sysroot of its own (qemu.py); the Arch package is built and installed for
  aarch64 (CARCH, pacman's Architecture).
- windows-x86_64: the probe (mingw) runs every runtime of the stage under Wine, in a fresh
  prefix; the installer runs silently, its files must equal the stage's, the probe runs every
  runtime from `C:\\Program Files\\<package>`, and the uninstaller must leave nothing and no
  uninstall entry behind.
- windows-arm64: its installer (an x64 program) runs under Wine, in a fresh prefix, and must
  refuse this x64 machine leaving the prefix as it was; its runtimes cannot run here.
- The product's Flatpak and every target this machine cannot execute (Windows on Arm,
  Android, other CPUs) are reported as NOT RUN, with the reason; a
  channel the product does not have is not mentioned. So is a runtime (or the part of one)
  that needs a library its `requires` names and this machine lacks (probe/checks.py).

One line per runtime (and per package step): PASS, FAIL or NOT RUN; a FAIL says what was
expected and what was found. A model's outputs must be the same wherever it ran
(probe/checks.py). Nothing is written outside the scratch directory, which is removed
afterwards unless the caller chose it.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ortbundle._core.errors import OrtbundleError, SmokeError
from ortbundle.channels import package_directory
from ortbundle.config.targets import get_target
from ortbundle.stage.probe import build_probe
from ortbundle.stage.probe.qemu import missing_qemu, qemu_sysroot
from ortbundle.stage.probe.wine import Wine, missing_wine, wine_session
from ortbundle.tools.smoke.installs import (
    install_arch,
    run_setup,
    run_uninstaller,
    tree_difference,
    tree_digests,
    unpack_deb,
    unpack_rpm,
    windows_install_dir,
)
from ortbundle.tools.smoke.macos import smoke_macos
from ortbundle.tools.smoke.probe.checks import ProbeRunner, RuntimeCheck, agree, check_tree
from ortbundle.tools.smoke.wine import idle_noise, prefix_state

__all__ = ["SmokeLine", "SmokeReport", "smoke"]

_UNINSTALL_KEY = "Software\\Microsoft\\Windows\\CurrentVersion\\Uninstall\\"
_CANNOT_RUN = {
    "windows-arm64": "Windows on Arm code: Wine here runs x86_64 programs only",
}
_LINUX = ("linux-x86_64", "linux-aarch64")  # the probe runs natively, or under qemu-aarch64


@dataclass(frozen=True)
class SmokeLine:
    verdict: str  # PASS | FAIL | NOT RUN
    target: str
    subject: str  # a runtime name, or the package step
    where: str
    detail: str

    def text(self) -> str:
        where = f" {self.where}:" if self.where else ""
        return f"{self.verdict:8} {self.target:16} {self.subject:10}{where} {self.detail}"


@dataclass(frozen=True)
class SmokeReport:
    lines: tuple[SmokeLine, ...]

    @property
    def failed(self) -> tuple[SmokeLine, ...]:
        return tuple(line for line in self.lines if line.verdict == "FAIL")

    @property
    def passed(self) -> tuple[SmokeLine, ...]:
        return tuple(line for line in self.lines if line.verdict == "PASS")

    def summary(self) -> str:
        not_run = len(self.lines) - len(self.failed) - len(self.passed)
        return f"smoke: {len(self.passed)} PASS, {len(self.failed)} FAIL, {not_run} NOT RUN"


@dataclass(frozen=True)
class _Session:
    """What every step of one smoke run shares: where things are, and where lines go."""

    version_dir: Path
    package_name: str
    channels: frozenset[str]
    work: Path
    emit: Callable[[SmokeLine], None]
    checks: list[RuntimeCheck]

    def record(self, found: list[RuntimeCheck]) -> None:
        for check in found:
            self.checks.append(check)
            self.emit(_line(check))


def _line(check: RuntimeCheck) -> SmokeLine:
    return SmokeLine(check.verdict, check.target, check.runtime, check.where, check.detail)


@contextmanager
def _scratch(chosen: Path | None) -> Iterator[Path]:
    if chosen is not None:
        chosen.mkdir(parents=True, exist_ok=True)
        yield chosen
        return
    path = Path(tempfile.mkdtemp(prefix="ortbundle-smoke-"))
    path.chmod(0o755)  # makepkg runs as nobody when we are root
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def smoke(
    version_dir: Path,
    *,
    package_name: str,
    channels: Sequence[str],
    targets: Sequence[str] = (),
    scratch: Path | None = None,
    say: Callable[[str], None] = print,
) -> SmokeReport:
    """Smoke-test the packages of one built version directory; print each line as it comes.

    `channels` are the product's packaging channels: only those get a line."""
    built = sorted(p.name for p in version_dir.iterdir() if (p / "runtimes.json").is_file())
    if not built:
        raise SmokeError(
            "no built target here (no <target>/runtimes.json)",
            file=str(version_dir),
            fix="run `invoke build` first",
        )
    wanted = list(targets) or built
    unknown = [t for t in wanted if t not in built]
    if unknown:
        raise SmokeError(
            f"target {', '.join(unknown)} was not built here (built: {', '.join(built)})",
            file=str(version_dir),
            fix="pass one of the built targets, or build it first",
        )
    lines: list[SmokeLine] = []
    checks: list[RuntimeCheck] = []

    def emit(line: SmokeLine) -> None:
        lines.append(line)
        say(line.text())

    with _scratch(scratch) as work:
        session = _Session(version_dir, package_name, frozenset(channels), work, emit, checks)
        for target in wanted:
            stage = version_dir / target
            if target in _LINUX:
                _linux(session, stage)
            elif target == "windows-x86_64":
                _windows(session, stage)
            elif target == "windows-arm64":
                emit(SmokeLine("NOT RUN", target, "runtimes", "", _CANNOT_RUN[target]))
                if "nsis" in session.channels:
                    _refusing_installer(session, target)
            elif target == "macos-arm64":
                _macos(session, stage)
            else:
                reason = _CANNOT_RUN.get(target, "")
                if target.startswith("android-"):
                    reason = "no Android device or emulator on this machine"
                emit(SmokeLine("NOT RUN", target, "runtimes", "", reason or "not x86_64 code"))
    # one model, one answer: compare every run of each model, across targets and copies
    final = list(lines)
    for before, after in zip(checks, agree(checks), strict=True):
        if before.passed and not after.passed:
            at = final.index(_line(before))
            final[at] = _line(after)
            say(final[at].text())
    report = SmokeReport(tuple(final))
    say(report.summary())
    return report


def _macos(session: _Session, stage: Path) -> None:
    """Nothing macOS runs here: NOT RUN, and every static check (tools/smoke/macos.py)."""
    target = stage.name
    packages = sorted((session.version_dir / "packaging" / "macos").glob("*.zip"))
    package = packages[0] if "macos" in session.channels and packages else None

    def emit(verdict: str, subject: str, where: str, detail: str) -> None:
        session.emit(SmokeLine(verdict, target, subject, where, detail))

    smoke_macos(stage, package, session.work, emit)
    if "macos" in session.channels and package is None:
        emit("NOT RUN", "macos", "", "no macOS package was built here")


def _linux(session: _Session, stage: Path) -> None:
    target, emit = stage.name, session.emit
    native = target == "linux-x86_64"
    missing = [] if native else missing_qemu()
    if missing:
        reason = (
            "qemu-user and the aarch64 cross toolchain are needed (Debian/Ubuntu: apt-get "
            f"install {' '.join(missing)})"
        )
        emit(SmokeLine("NOT RUN", target, "runtimes", "", reason))
        return
    try:
        exe = build_probe(session.work / f"probe-{target}", target=target)
    except OrtbundleError as exc:
        emit(SmokeLine("NOT RUN", target, "runtimes", "", f"no probe: {exc}"))
        return
    qemu = None if native else qemu_sysroot(session.work / f"sysroot-{target}")
    runner = ProbeRunner(exe, qemu=qemu)
    session.record(check_tree(stage, runner, target=target, where="stage"))
    if "arch" in session.channels:
        _arch(session, stage, runner)
    for channel in ("deb", "rpm"):
        if channel in session.channels:
            _unpacked(session, stage, runner, channel)
    if "flatpak" in session.channels:
        emit(SmokeLine("NOT RUN", target, "flatpak", "", _not_installed(session, "flatpak")))


def _channel_dir(session: _Session, channel: str, target: str) -> Path:
    return session.version_dir / "packaging" / channel / package_directory(channel, target)


# What unpacks each Linux package (and the Debian packages that install the tools).
_UNPACKERS = {
    "deb": (unpack_deb, ("dpkg-deb",), "dpkg"),
    "rpm": (unpack_rpm, ("rpm2cpio", "cpio"), "rpm2cpio cpio"),
}


def _unpacked(session: _Session, stage: Path, runner: ProbeRunner, channel: str) -> None:
    """The .deb or .rpm unpacked into a scratch root: its files under /usr/lib/<package>/ must
    equal the stage, and every runtime runs from there."""
    target, emit = stage.name, session.emit
    unpack, tools, packages = _UNPACKERS[channel]
    built = sorted(_channel_dir(session, channel, target).glob(f"*.{channel}"))
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if len(built) != 1 or missing:
        reason = (
            f"{', '.join(missing)} missing (Debian/Ubuntu: apt-get install {packages})"
            if missing
            else _not_installed(session, channel, f"no .{channel} was built")
        )
        emit(SmokeLine("NOT RUN", target, channel, "", reason))
        return
    root = session.work / f"{channel}-{target}"
    shutil.rmtree(root, ignore_errors=True)
    try:
        unpack(built[0], root)
    except RuntimeError as exc:
        emit(SmokeLine("FAIL", target, channel, built[0].name, str(exc)))
        return
    lib = root / "usr" / "lib" / session.package_name
    where = f"unpacked ({built[0].name} into {root})"
    files = tree_digests(lib)
    difference = tree_difference(files, tree_digests(stage))
    detail = (
        f"{lib} should equal the stage: {difference}"
        if difference
        else f"{len(files)} files under /usr/lib/{session.package_name} equal to the stage"
    )
    emit(SmokeLine("FAIL" if difference else "PASS", target, channel, where, detail))
    if not difference:
        session.record(check_tree(lib, runner, target=target, where=where))


def _arch(session: _Session, stage: Path, runner: ProbeRunner) -> None:
    target, emit = stage.name, session.emit
    arch = _channel_dir(session, "arch", target)
    missing = [tool for tool in ("makepkg", "pacman", "fakeroot") if shutil.which(tool) is None]
    if not (arch / "PKGBUILD").is_file():
        emit(SmokeLine("NOT RUN", target, "arch", "", f"no PKGBUILD was built in {arch}"))
        return
    if missing:
        emit(
            SmokeLine(
                "NOT RUN",
                target,
                "arch",
                "",
                f"{', '.join(missing)} missing (Debian/Ubuntu: apt-get install makepkg "
                "pacman-package-manager fakeroot libarchive-tools)",
            )
        )
        return
    try:
        machine = get_target(target).arch_for("arch") or "x86_64"
        installed = install_arch(arch, session.work / f"arch-{target}", machine)
    except RuntimeError as exc:
        emit(SmokeLine("FAIL", target, "arch", "makepkg + pacman", str(exc)))
        return
    lib = installed.lib(session.package_name)
    where = f"installed (pacman --root {installed.root})"
    difference = tree_difference(tree_digests(lib), tree_digests(stage))
    verdict = "PASS" if installed.check_ok and not difference else "FAIL"
    detail = installed.check.splitlines()[-1] if installed.check else "(no report)"
    if not installed.check_ok:
        detail = f"pacman -Qkk should report 0 altered files, it says: {detail}"
    if difference:
        detail += f"; {lib} should equal the stage: {difference}"
    emit(SmokeLine(verdict, target, "arch", where, detail))
    session.record(check_tree(lib, runner, target=target, where=where))


def _not_installed(session: _Session, channel: str, otherwise: str = "") -> str:
    """Why a channel of the product gets no install here."""
    if not (session.version_dir / "packaging" / channel).is_dir():
        return f"no {channel} package was built in {session.version_dir / 'packaging'}"
    if channel == "flatpak":
        return (
            "building the Flatpak needs its SDK and runtime installed (flatpak install "
            "org.freedesktop.Sdk); the smoke does not run flatpak-builder"
        )
    return otherwise


def _windows(session: _Session, stage: Path) -> None:
    target, emit, work = stage.name, session.emit, session.work
    missing = missing_wine()
    if missing:
        reason = (
            f"Wine and mingw-w64 are needed (Debian/Ubuntu: apt-get install {' '.join(missing)})"
        )
        emit(SmokeLine("NOT RUN", target, "runtimes", "", reason))
        return
    runner_exe = build_probe(work / "probe-windows", windows=True)
    prefix = work / "wine-prefix"
    shutil.rmtree(prefix, ignore_errors=True)
    with wine_session(prefix) as wine:
        runner = ProbeRunner(runner_exe, wine)
        session.record(check_tree(stage, runner, target=target, where="stage"))
        if "nsis" not in session.channels:
            return
        nsis = session.version_dir / "packaging" / "nsis"
        setups = sorted(nsis.glob("*-setup.exe"))
        if not setups:
            reason = f"no installer was compiled in {nsis} (makensis was missing at build time)"
            emit(SmokeLine("NOT RUN", target, "installer", "", reason))
            return
        _install_windows(session, wine, setups[0], stage, runner)


def _refusing_installer(session: _Session, target: str) -> None:
    """Windows on Arm's installer on this x64 machine: it must refuse (a non-zero exit) and
    leave its fresh Wine prefix as it was, but for what Wine rewrites on any program start."""
    emit = session.emit
    setups = sorted(_channel_dir(session, "nsis", target).glob("*-setup.exe"))
    missing = missing_wine()
    if not setups or missing:
        reason = (
            f"Wine is needed (Debian/Ubuntu: apt-get install {' '.join(missing)})"
            if missing
            else "no installer was compiled (makensis was missing at build time)"
        )
        emit(SmokeLine("NOT RUN", target, "installer", "", reason))
        return
    prefix = session.work / f"wine-prefix-{target}"
    shutil.rmtree(prefix, ignore_errors=True)
    with wine_session(prefix) as wine:
        noise = idle_noise(wine)
        before = prefix_state(wine)
        code = run_setup(wine, setups[0]).returncode
        changed = sorted(before.changed(prefix_state(wine)) - noise)
    problems = [f"{setups[0].name} /S exited 0, expected a refusal"] if code == 0 else []
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        problems.append(f"it wrote {len(changed)} things ({', '.join(changed[:3])}{more})")
    detail = "; ".join(problems) or (
        f"{setups[0].name} refused this x64 machine (exit {code}), nothing written "
        f"({len(before.files)} files and {len(before.registry)} registry values as they were)"
    )
    emit(SmokeLine("FAIL" if problems else "PASS", target, "installer", "Wine x64", detail))


def _install_windows(
    session: _Session, wine: Wine, setup: Path, stage: Path, runner: ProbeRunner
) -> None:
    target, emit, package_name = stage.name, session.emit, session.package_name
    directory = windows_install_dir(package_name)
    installed = wine.host(str(directory))
    result = run_setup(wine, setup)
    files = tree_digests(installed)
    has_uninstaller = files.pop("uninstall.exe", None) is not None
    # what the installer's requirement check found missing (channels/nsis.py): not a stage file
    missing = files.pop(f"{package_name}-setup.log", None) is not None
    expected = tree_digests(stage)
    key = wine.registry_key(_UNINSTALL_KEY + package_name)
    problems = []
    if result.returncode != 0:
        problems.append(f"{setup.name} /S exited {result.returncode}, expected 0")
    if difference := tree_difference(files, expected):
        problems.append(f"the installed files should equal the stage: {difference}")
    if not has_uninstaller or key is None:
        found = ", ".join(
            what
            for what, there in (("uninstall.exe", has_uninstaller), ("the entry", key is not None))
            if there
        )
        problems.append(f"expected uninstall.exe and an uninstall entry, found {found or 'none'}")
    detail = "; ".join(problems) or f"{len(files)} files equal to the stage, uninstall entry"
    if missing:
        detail += f"; setup found required or optional libraries missing ({package_name}-setup.log)"
    emit(SmokeLine("FAIL" if problems else "PASS", target, "installer", str(directory), detail))
    if problems:
        return
    where = f"installed ({directory})"
    session.record(check_tree(installed, runner, target=target, where=where))
    code = run_uninstaller(wine, directory)
    left = tree_digests(installed)
    gone = wine.registry_key(_UNINSTALL_KEY + package_name) is None
    ok = code == 0 and not left and not installed.exists() and gone
    leftover = [f"exit {code}"] if code else []
    if left:
        leftover.append(tree_difference(left, {}).replace("unexpected", "files left"))
    elif installed.exists():
        leftover.append("the directory left")
    if not gone:
        leftover.append("the uninstall entry left")
    detail = (
        "removed every file, the directory and the uninstall entry"
        if ok
        else "expected exit 0 with no file, directory or uninstall entry left; found "
        + ", ".join(leftover)
    )
    emit(SmokeLine("PASS" if ok else "FAIL", target, "uninstall", str(directory), detail))
