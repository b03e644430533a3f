"""Install a built package into a scratch location with its own tool, and take it out again.

- The Windows installer runs silently under Wine, in the session's own prefix (`/S`; `/D=` is
  not used: the product installs per machine into Program Files). Its uninstaller is run the way
  Add/Remove Programs' quiet uninstall does, but in place (`_?=`) so the call waits for it; the
  exact command line goes through a batch file, because Wine re-quotes an argument with spaces
  and NSIS only recognises an unquoted `_?=`.
- The Arch package is built with makepkg (as `nobody` when we are root: makepkg refuses root)
  and installed with pacman into a root directory of its own (`--root`, `--dbpath`, a
  two-line pacman.conf), then checked with `pacman -Qkk`.

Each function returns what it ran and what it saw; callers decide what is a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath

from ortbundle._core.fsio import sha256_file
from ortbundle.stage.probe.process import run_captured
from ortbundle.stage.probe.wine import Wine

__all__ = [
    "ArchInstall",
    "install_arch",
    "run_setup",
    "run_uninstaller",
    "tree_difference",
    "tree_digests",
    "unpack_deb",
    "unpack_rpm",
    "windows_install_dir",
]

_NOBODY = 65534
_PACMAN_CONF = "[options]\nSigLevel = Never\n"
_TIMEOUT = 900


def windows_install_dir(package_name: str) -> PureWindowsPath:
    """Where the installer puts a product: $PROGRAMFILES64\\<package_name>."""
    return PureWindowsPath("C:\\Program Files", package_name)


def run_setup(wine: Wine, exe: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run an NSIS installer silently (it waits for its work, upgrade included)."""
    return wine.run([wine.path(exe), "/S", *args], timeout=_TIMEOUT)


def run_uninstaller(
    wine: Wine, directory: PureWindowsPath, *, in_place: bool = False, name: str = "uninstall.exe"
) -> int:
    """Run `directory\\<name> /S` (uninstall.exe; an add-on's has its own name) and return its
    exit code once it has finished.

    As a user does (`in_place=False`): the uninstaller copies itself to %TEMP%, starts the copy
    and exits 0; the copy removes everything, itself included, so this waits for the prefix to
    go idle. `in_place=True` runs it with `_?=` (as an upgrade does) and gets its real exit code;
    then it cannot remove uninstall.exe, nor the directory that holds it.
    """
    if not in_place:
        result = wine.run([str(directory / name), "/S"], timeout=_TIMEOUT)
        wine.wait()
        return result.returncode
    batch = wine.prefix / "drive_c" / "ortbundle-uninstall.bat"
    lines = [f'"{directory}\\{name}" /S _?={directory}', "exit /b %ERRORLEVEL%"]
    batch.write_text("\r\n".join(lines) + "\r\n", encoding="ascii")
    try:
        result = wine.run(["cmd", "/c", "C:\\ortbundle-uninstall.bat"], timeout=_TIMEOUT)
    finally:
        batch.unlink(missing_ok=True)
    return result.returncode


def tree_digests(root: Path) -> dict[str, str]:
    """Every regular file under `root` by relative POSIX path → SHA-256 (links as `-> target`)."""
    found: dict[str, str] = {}
    if not root.exists():
        return found
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[relative] = f"-> {path.readlink()}"
        elif path.is_file():
            found[relative] = sha256_file(path)
    return found


def tree_difference(found: dict[str, str], expected: dict[str, str], *, shown: int = 3) -> str:
    """What differs between two `tree_digests`, `found` against `expected`, naming the first few
    paths of each kind; empty when they are equal."""
    kinds = (
        ("missing", sorted(set(expected) - set(found))),
        ("unexpected", sorted(set(found) - set(expected))),
        ("changed", sorted(p for p in set(found) & set(expected) if found[p] != expected[p])),
    )
    parts = []
    for kind, paths in kinds:
        if paths:
            more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
            parts.append(f"{len(paths)} {kind} ({', '.join(paths[:shown])}{more})")
    return ", ".join(parts)


@dataclass(frozen=True)
class ArchInstall:
    """A package pacman installed into `root`; `check` is `pacman -Qkk`'s report."""

    root: Path
    package: Path
    check_ok: bool
    check: str

    def lib(self, package_name: str) -> Path:
        return self.root / "usr" / "lib" / package_name


def install_arch(arch_dir: Path, scratch: Path, machine: str = "x86_64") -> ArchInstall:
    """makepkg the generated PKGBUILD, pacman -U it into scratch/root. Raises RuntimeError.

    `machine`: the package's arch; another than this host's is built and installed as Arch
    Linux ARM's makepkg.conf and pacman.conf say (CARCH, Architecture)."""
    work = scratch / "makepkg"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(arch_dir, work / "build", symlinks=True)
    dirs = {key: work / key.lower() for key in ("HOME", "BUILDDIR", "SRCDEST", "PKGDEST")}
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    prefix: list[str] = []
    if os.geteuid() == 0:  # makepkg refuses to run as root
        if shutil.which("setpriv") is None:
            raise RuntimeError("running as root, and setpriv (util-linux) is missing to drop it")
        prefix = ["setpriv", f"--reuid={_NOBODY}", f"--regid={_NOBODY}", "--clear-groups"]
        for path in [work, *work.rglob("*")]:
            os.chown(path, _NOBODY, _NOBODY, follow_symlinks=False)
        for parent in work.parents:  # nobody must be able to reach the build directory
            if parent.stat().st_mode & 0o001 == 0:
                raise RuntimeError(f"{parent} is not searchable by nobody; use another --scratch")
    env = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "LC_ALL": "C.UTF-8",
        "PKGEXT": ".pkg.tar.gz",
        "CARCH": machine,
        **{key: str(path) for key, path in dirs.items()},
    }
    made = run_captured(
        [*prefix, "makepkg", "-f", "--nodeps"], timeout=_TIMEOUT, env=env, cwd=work / "build"
    )
    packages = sorted(dirs["PKGDEST"].glob("*.pkg.tar.*"))
    if made.returncode != 0 or len(packages) != 1:
        raise RuntimeError(f"makepkg failed: {(made.stdout + made.stderr).strip()[-800:]}")
    root = scratch / "root"
    shutil.rmtree(root, ignore_errors=True)
    (root / "var" / "lib" / "pacman").mkdir(parents=True)
    config = scratch / "pacman.conf"
    config.write_text(f"{_PACMAN_CONF}Architecture = {machine}\n", encoding="utf-8")
    where = ["--root", str(root), "--dbpath", str(root / "var/lib/pacman"), "--config", str(config)]
    # -dd: the package's depends (glibc, …) are the host's business, not this scratch root's
    installed = run_captured(
        ["pacman", "-U", *where, "--noconfirm", "-dd", "--noscriptlet", str(packages[0])],
        timeout=_TIMEOUT,
    )
    if installed.returncode != 0:
        raise RuntimeError(f"pacman -U failed: {(installed.stdout + installed.stderr).strip()}")
    checked = run_captured(["pacman", "-Qkk", *where], timeout=_TIMEOUT)
    report = (checked.stdout + checked.stderr).strip()
    ok = checked.returncode == 0 and " 0 altered files" in report
    return ArchInstall(root, packages[0], ok, report)


def unpack_deb(deb: Path, root: Path) -> Path:
    """`dpkg-deb -x` the package into `root` (what dpkg would install, without its database)."""
    root.mkdir(parents=True, exist_ok=True)
    done = run_captured(["dpkg-deb", "-x", str(deb), str(root)], timeout=_TIMEOUT)
    if done.returncode != 0:
        raise RuntimeError(f"dpkg-deb -x failed: {done.stderr.strip()[-800:]}")
    return root


def unpack_rpm(rpm: Path, root: Path) -> Path:
    """`rpm2cpio | cpio -idm` the package into `root` (its files as rpm would lay them out)."""
    root.mkdir(parents=True, exist_ok=True)
    with subprocess.Popen(["rpm2cpio", str(rpm)], stdout=subprocess.PIPE) as archive:
        done = subprocess.run(
            ["cpio", "-idm", "--quiet", "--no-absolute-filenames"],
            stdin=archive.stdout,
            cwd=root,
            capture_output=True,
            text=True,
            timeout=_TIMEOUT,
            check=False,
        )
    if archive.returncode != 0 or done.returncode != 0:
        raise RuntimeError(f"rpm2cpio | cpio failed: {done.stderr.strip()[-800:]}")
    return root
