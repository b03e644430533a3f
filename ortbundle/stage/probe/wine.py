"""Run Windows programs under Wine, each session in its own prefix, ended by that prefix.

Used by the stage (the probe reads a Windows core's providers), `invoke smoke` and the
Windows test tier. Wine's exit code is not evidence on its own
(plain 64-bit Wine "runs" a 32-bit program it cannot start and still exits 0), so callers check
output and files; this module only makes the runs quiet and contained: WINEDEBUG=-all, Mono
and Gecko disabled (no install prompts), no DISPLAY (nothing can pop a window), and
`wineserver -k` for exactly this prefix when the session ends.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath

from ortbundle.stage.probe.process import run_captured

__all__ = ["Wine", "missing_wine", "wine_session"]

_TIMEOUT = 600


def missing_wine() -> list[str]:
    """The Debian packages to install before Windows programs can be built and run here."""
    missing = []
    if shutil.which("wine") is None:
        missing.append("wine")
    if shutil.which("wine64") is None and not Path("/usr/lib/wine/wine64").is_file():
        missing.append("wine64")
    if shutil.which("x86_64-w64-mingw32-gcc") is None:
        missing.append("gcc-mingw-w64-x86-64")
    return missing


_WINDOWS = "win10"  # the Windows version every prefix reports


@dataclass(frozen=True)
class Wine:
    """One Wine prefix (a fresh Windows installation in a directory)."""

    prefix: Path

    def environment(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
        env.update(
            WINEPREFIX=str(self.prefix),
            WINEARCH="win64",
            WINEDEBUG="-all",
            WINEDLLOVERRIDES="mscoree,mshtml=",
        )
        env.update(extra or {})
        return env

    def run(
        self, args: Sequence[str], *, timeout: float = _TIMEOUT, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`wine args…`, output captured as text (UTF-8, errors replaced)."""
        return run_captured(["wine", *args], timeout=timeout, env=self.environment(), cwd=cwd)

    def path(self, host: Path) -> str:
        """A host path as Wine's Z: drive sees it."""
        return str(PureWindowsPath("Z:\\", *host.resolve().parts[1:]))

    def host(self, windows: str) -> Path:
        """A C: path (C:\\Program Files\\…) as a host path inside the prefix."""
        pure = PureWindowsPath(windows)
        if pure.drive.upper() != "C:":
            raise ValueError(f"{windows} is not on drive C:")
        return self.prefix / "drive_c" / Path(*pure.parts[1:])

    @property
    def system32(self) -> Path:
        return self.prefix / "drive_c" / "windows" / "system32"

    @property
    def program_files(self) -> Path:
        return self.prefix / "drive_c" / "Program Files"

    def registry_key(self, key: str) -> dict[str, str] | None:
        """The string values of an HKLM key in the 64-bit view, or None if the key is absent.

        Read with Wine's `reg query` (the registry file format is Wine's own)."""
        result = self.run(["reg", "query", f"HKLM\\{key}", "/reg:64"], timeout=120)
        if result.returncode != 0 or "HKEY_LOCAL_MACHINE" not in result.stdout:
            return None
        values = {}
        for line in result.stdout.splitlines():
            parts = line.strip().split(None, 2)
            if len(parts) >= 2 and parts[1].startswith("REG_"):
                values[parts[0]] = parts[2] if len(parts) == 3 else ""
        return values

    def subkeys(self, key: str) -> list[str]:
        """The names of the subkeys of an HKLM key in the 64-bit view."""
        result = self.run(["reg", "query", f"HKLM\\{key}", "/reg:64"], timeout=120)
        prefix = f"HKEY_LOCAL_MACHINE\\{key}\\".casefold()
        return [
            line.strip()[len(prefix) :]
            for line in result.stdout.splitlines()
            if line.strip().casefold().startswith(prefix)
        ]

    def wait(self) -> None:
        """Wait until every process of this prefix has ended (and its wineserver with them)."""
        subprocess.run(
            ["wineserver", "-w"],
            env=self.environment(),
            capture_output=True,
            timeout=_TIMEOUT,
            check=False,
        )

    def stop(self) -> None:
        """End this prefix's wineserver (and every process in it), and only this prefix's."""
        subprocess.run(
            ["wineserver", "-k"],
            env=self.environment(),
            capture_output=True,
            timeout=120,
            check=False,
        )
        self.wait()


@contextmanager
def wine_session(prefix: Path) -> Iterator[Wine]:
    """A Wine prefix for the duration of a block; its wineserver is ended on the way out."""
    prefix.mkdir(parents=True, exist_ok=True)
    wine = Wine(prefix)
    try:
        # a new prefix says it is Windows 7; the packages are for Windows 10 and 11 (and the
        # installer refuses a Windows older than its DLLs need, as it should)
        wine.run(
            ["reg", "add", "HKCU\\Software\\Wine", "/v", "Version", "/d", _WINDOWS, "/f"],
            timeout=_TIMEOUT,
        )
        yield wine
    finally:
        wine.stop()
