"""The Windows tier's shared pieces: skips that name the Debian packages, a Wine prefix per
test (its wineserver ended by that prefix), and the probe built once per session."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ortbundle.stage.probe import build_probe
from ortbundle.stage.probe.wine import Wine, missing_wine, wine_session
from ortbundle.tools.smoke.probe.checks import ProbeRunner

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
