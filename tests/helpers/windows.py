"""The Windows tier's shared pieces: skips that name the Debian packages, a Wine prefix per
test (its wineserver ended by that prefix), and the probe built once per session."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ortbundle.tools.smoke.installs import tree_digests
from ortbundle.tools.smoke.probe import build_probe
from ortbundle.tools.smoke.probe.checks import ProbeRunner
from ortbundle.tools.smoke.wine import Wine, missing_wine, wine_session

UNINSTALL_KEY = "Software\\Microsoft\\Windows\\CurrentVersion\\Uninstall\\"


def skip_without_wine(*, makensis: bool = False) -> None:
    """Skip, naming the Debian packages, unless Wine, mingw-w64 (and makensis) are here."""
    missing = missing_wine()
    if makensis and shutil.which("makensis") is None:
        missing.append("nsis")
    if missing:
        pytest.skip(
            f"needs {', '.join(missing)} (Debian/Ubuntu: apt-get install {' '.join(missing)})"
        )


def own_prefix(tmp_path: Path, *, makensis: bool = True) -> Iterator[Wine]:
    """A fresh Wine prefix for one test (a fixture body: `yield from own_prefix(tmp_path)`)."""
    skip_without_wine(makensis=makensis)
    try:
        with wine_session(tmp_path / "prefix") as session:
            yield session
    finally:  # ~700 MB each: do not leave them for pytest's last three sessions
        shutil.rmtree(tmp_path / "prefix", ignore_errors=True)


@pytest.fixture(scope="session")
def probes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """ortprobe.exe (mingw-w64) and ortprobe (gcc), from the one source, built once."""
    skip_without_wine()
    out = tmp_path_factory.mktemp("probe")
    return build_probe(out / "windows", windows=True), build_probe(out / "linux", windows=False)


def runner(wine: Wine, probes: tuple[Path, Path]) -> ProbeRunner:
    return ProbeRunner(probes[0], wine)


_HIVES = ("system.reg", "user.reg", "userdef.reg")


def registry_values(prefix: Path) -> dict[str, str]:
    """Every value of the prefix's registry hives, as `hive|key|name` → its data, without the
    write times Wine stamps on each key (`[key] <seconds>`, `#time=`). A value spread over
    lines (a trailing backslash) is joined."""
    values: dict[str, str] = {}
    for hive in _HIVES:
        path = prefix / hive
        if not path.is_file():
            continue
        key, pending = "", ""
        for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
            line = pending + raw.strip() if pending else raw
            pending = ""
            if line.endswith("\\") and not line.startswith("["):
                pending = line[:-1]
                continue
            if line.startswith("["):
                key = line[: line.rindex("]") + 1] if "]" in line else line
                values[f"{hive}|{key}|"] = ""  # the key exists, even with no value
            elif line.startswith(("#", ";", "WINE REGISTRY")) or not line.strip():
                continue
            else:
                name, _, data = line.partition("=")
                values[f"{hive}|{key}|{name}"] = data
    return values


def prefix_files(prefix: Path) -> dict[str, str]:
    """Every file of the prefix but its registry hives (which registry_values reads)."""
    return {k: v for k, v in tree_digests(prefix).items() if k not in _HIVES}


def idle_run(wine: Wine) -> None:
    """Start and end a program that does nothing (`cmd /c exit 0`): what Wine itself rewrites
    in a prefix on every program start (device class dates, its own keys' times)."""
    wine.run(["cmd", "/c", "exit", "0"])
    wine.wait()
