"""The installer requires the package's oldest Windows (#43), run for real under Wine set to an
older and to that Windows.

The installer's choice (docs/outputs.md): it requires the highest floor of its runtimes, the
package's, and names the file and the reason; the loader then skips, on a new enough system,
nothing for age. Wine's version is set per prefix (HKCU\\Software\\Wine "Version"), as winecfg
does; NSIS's WinVer.nsh reads it as Windows would.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ortbundle.channels.nsis import NsisChannel, nsis_string
from ortbundle.stage.binaries.baseline import Minimum, SystemBaseline
from ortbundle.stage.probe.wine import Wine
from ortbundle.tools.smoke.installs import run_setup, windows_install_dir
from tests.helpers.packages import SETTINGS, make_package_input
from tests.helpers.windows import own_prefix

pytestmark = pytest.mark.windows

WHY = (
    "runtimes/webgpu/onnxruntime.dll imports the API set api-ms-win-core-heap-l2-1-0.dll "
    "(OneCore: introduced in 10.0.10240)"
)


@pytest.fixture
def wine(tmp_path: Path) -> Iterator[Wine]:
    yield from own_prefix(tmp_path)


def _set_version(wine: Wine, version: str) -> None:
    """What `winecfg -v <version>` writes: the prefix's Windows version."""
    result = wine.run(["reg", "add", "HKCU\\Software\\Wine", "/v", "Version", "/d", version, "/f"])
    assert result.returncode == 0, result.stdout + result.stderr
    wine.wait()


def _installer(root: Path) -> tuple[Path, str]:
    package = make_package_input(root / "dist" / "demo" / "1.0.0", "windows-x86_64")
    package = replace(package, system=SystemBaseline(windows=Minimum("10.0", WHY)))
    out = NsisChannel().generate(package, root / "dist" / "demo" / "1.0.0" / "packaging" / "nsis")
    (exe,) = (p for p in out.files if p.suffix == ".exe")
    (script,) = (p for p in out.files if p.suffix == ".nsi")
    return exe, script.read_text("utf-8")


def test_windows_8_1_is_refused_naming_the_file_and_the_api_set_and_10_installs(
    tmp_path: Path, wine: Wine
) -> None:
    exe, script = _installer(tmp_path)
    assert "${IfNot} ${AtLeastWin10}" in script
    assert nsis_string(f"demo 1.0.0 needs Windows 10 or newer ({WHY}).") in script
    installed = wine.host(str(windows_install_dir(SETTINGS.package_name)))

    _set_version(wine, "win81")
    refused = run_setup(wine, exe)
    assert refused.returncode == 2, refused.stdout + refused.stderr  # NSIS: aborted
    assert not installed.exists()

    _set_version(wine, "win10")
    accepted = run_setup(wine, exe)
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert (installed / "uninstall.exe").is_file()
