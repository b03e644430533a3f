"""The NSIS installer, run for real under Wine: install, reinstall, upgrade, uninstall, refusal.

Small synthetic stages (tests/helpers/packages.py) compiled by the real makensis; each test
has its own Wine prefix. Wine's exit code is never the only evidence: every step is checked on
the files under C:\\Program Files and on the uninstall entry in the 64-bit registry view.
"""

from __future__ import annotations

import hashlib
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ortbundle.channels import PackageInput
from ortbundle.channels.nsis import NsisChannel
from ortbundle.licensing.attribution import ShippedFile
from ortbundle.stage.probe import MINGW_CC
from ortbundle.stage.probe.wine import Wine
from ortbundle.tools.smoke.installs import (
    run_setup,
    run_uninstaller,
    tree_digests,
    windows_install_dir,
)
from ortbundle.tools.smoke.wine import idle_noise, prefix_state
from tests.helpers.packages import SETTINGS, make_package_input
from tests.helpers.windows import UNINSTALL_KEY, own_prefix

pytestmark = pytest.mark.windows

DROPPED = "runtimes/webgpu/dxil.dll"
HOLD_DLL = "runtimes/openvino/hold.dll"
HOLD_SOURCE = r"""
#include <windows.h>
__declspec(dllexport) void CALLBACK Hold(HWND window, HINSTANCE self, LPSTR args, int show) {
    HANDLE mark = CreateFileA("C:\\holding", GENERIC_WRITE, 0, NULL, CREATE_ALWAYS, 0, NULL);
    CloseHandle(mark);
    Sleep(120000);
}
"""
CHANGED = "NOTICE"
DIRECTORY = windows_install_dir(SETTINGS.package_name)


@pytest.fixture
def wine(tmp_path: Path) -> Iterator[Wine]:
    yield from own_prefix(tmp_path)


def _installer(
    root: Path, version: str, *, drop: str = "", notice: bytes = b"", extra: bytes = b""
) -> Path:
    """Stage `version` of the demo product the way the build lays it out and compile it."""
    base = root / "dist" / "demo" / version
    package = make_package_input(base, "windows-x86_64", version=version)
    if drop:
        (package.stage / drop).unlink()
        package = replace(package, files=tuple(f for f in package.files if f.path != drop))
    if notice:
        package = _rewrite(package, CHANGED, notice)
    if extra:
        package = _rewrite(package, HOLD_DLL, extra)
    out = NsisChannel().generate(package, base / "packaging" / "nsis")
    (exe,) = (p for p in out.files if p.suffix == ".exe")
    return exe


def _rewrite(package: PackageInput, path: str, data: bytes) -> PackageInput:
    """Write (or add) one staged file and list it as the build would."""
    (package.stage / path).write_bytes(data)
    entry = ShippedFile(path, len(data), hashlib.sha256(data).hexdigest(), 0o644)
    files = [f for f in package.files if f.path != path] + [entry]
    return replace(package, files=tuple(sorted(files, key=lambda f: f.path)))


def _holding_dll(tmp_path: Path) -> bytes:
    """A real DLL (mingw-w64) whose `Hold` export marks C:\\holding and sleeps: run through
    rundll32, it is an application with a DLL of the install loaded."""
    source = tmp_path / "hold.c"
    source.write_text(HOLD_SOURCE)
    out = tmp_path / "hold.dll"
    subprocess.run(
        [MINGW_CC, "-shared", "-O2", "-o", str(out), str(source)], check=True, capture_output=True
    )
    return out.read_bytes()


def _stage(exe: Path) -> Path:
    return exe.parents[2] / "windows-x86_64"


def _installed(wine: Wine) -> dict[str, str]:
    return tree_digests(wine.host(str(DIRECTORY)))


def _entries(wine: Wine) -> list[str]:
    return [k for k in wine.subkeys(UNINSTALL_KEY.rstrip("\\")) if k == SETTINGS.package_name]


def _install(wine: Wine, exe: Path) -> None:
    result = run_setup(wine, exe)
    assert result.returncode == 0, result.stdout + result.stderr


def test_install_reinstall_and_uninstall_are_exact(tmp_path: Path, wine: Wine) -> None:
    exe = _installer(tmp_path, "1.0.0")
    _install(wine, exe)
    stage = tree_digests(_stage(exe))
    installed = _installed(wine)
    assert installed.pop("uninstall.exe")
    assert installed == stage  # every file, byte for byte, and nothing else
    entry = wine.registry_key(UNINSTALL_KEY + SETTINGS.package_name)
    assert entry is not None, "no uninstall entry in the 64-bit registry view"
    assert entry["DisplayVersion"] == "1.0.0"
    assert entry["InstallLocation"] == str(DIRECTORY)

    # a damaged install and a file of the user's own; a reinstall of the same version repairs
    # the one and leaves the other alone
    top = wine.host(str(DIRECTORY))
    (top / CHANGED).write_bytes(b"damaged\n")
    (top / "runtimes" / "openvino" / "onnxruntime.dll").unlink()
    (top / "runtimes" / "my-notes.txt").write_text("mine\n")
    _install(wine, exe)
    installed = _installed(wine)
    assert installed.pop("runtimes/my-notes.txt")
    assert installed.pop("uninstall.exe")
    assert installed == stage
    assert _entries(wine) == [SETTINGS.package_name]

    assert run_uninstaller(wine, DIRECTORY) == 0
    assert list(_installed(wine)) == ["runtimes/my-notes.txt"]  # only what it did not install
    assert wine.registry_key(UNINSTALL_KEY + SETTINGS.package_name) is None


def test_an_upgrade_leaves_exactly_the_new_versions_files(tmp_path: Path, wine: Wine) -> None:
    old = _installer(tmp_path, "1.0.0")
    new = _installer(tmp_path, "2.0.0", drop=DROPPED, notice=b"demo 2.0.0\n")
    _install(wine, old)
    assert DROPPED in _installed(wine)

    _install(wine, new)
    installed = _installed(wine)
    assert installed.pop("uninstall.exe")
    assert DROPPED not in installed  # the previous version's uninstaller took it away
    assert installed == tree_digests(_stage(new))
    assert _entries(wine) == [SETTINGS.package_name]
    entry = wine.registry_key(UNINSTALL_KEY + SETTINGS.package_name)
    assert entry is not None and entry["DisplayVersion"] == "2.0.0"

    assert run_uninstaller(wine, DIRECTORY) == 0
    assert not wine.host(str(DIRECTORY)).exists()
    assert _entries(wine) == []


def test_a_dll_in_use_stops_uninstall_and_upgrade_with_nothing_removed(
    tmp_path: Path, wine: Wine
) -> None:
    """Decided behaviour: Windows cannot delete a loaded DLL, so the uninstaller checks them all
    first and, with one in use, removes nothing and exits 3; an upgrade then stops too."""
    dll = _holding_dll(tmp_path)
    old = _installer(tmp_path, "1.0.0", extra=dll)
    new = _installer(tmp_path, "2.0.0", extra=dll, drop=DROPPED)
    _install(wine, old)
    before = _installed(wine)
    mark = wine.prefix / "drive_c" / "holding"
    app = subprocess.Popen(
        ["wine", "rundll32", f"{DIRECTORY}\\{HOLD_DLL.replace('/', chr(92))},Hold"],
        env=wine.environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not mark.exists():
            assert time.monotonic() < deadline and app.poll() is None, "rundll32 never held it"
            time.sleep(0.5)
        assert run_uninstaller(wine, DIRECTORY, in_place=True) == 3
        assert _installed(wine) == before
        assert run_setup(wine, new).returncode == 3
        assert _installed(wine) == before
        entry = wine.registry_key(UNINSTALL_KEY + SETTINGS.package_name)
        assert entry is not None and entry["DisplayVersion"] == "1.0.0"
    finally:
        wine.stop()  # the application ends with its prefix's processes
        app.wait(timeout=60)
    _install(wine, new)  # closed: the upgrade goes through
    installed = _installed(wine)
    assert installed.pop("uninstall.exe")
    assert installed == tree_digests(_stage(new))


def test_the_arm64_installer_refuses_an_x64_machine_and_writes_nothing(
    tmp_path: Path, wine: Wine
) -> None:
    """Windows on Arm's installer is an x64 program (NSIS has no Arm stub); on this x64 Wine
    IsNativeARM64 is false: it must exit non-zero and leave the prefix exactly as it was."""
    base = tmp_path / "dist" / "demo" / "1.0.0"
    package = make_package_input(base, "windows-arm64")
    out = NsisChannel().generate(package, base / "packaging" / "nsis" / "windows-arm64")
    (exe,) = (p for p in out.files if p.suffix == ".exe")
    assert exe.name == "demo-1.0.0-arm64-setup.exe"
    noise = idle_noise(wine)  # what Wine rewrites on any program start: not the installer's
    before = prefix_state(wine)
    result = run_setup(wine, exe)
    assert result.returncode == 2, result.stdout + result.stderr  # NSIS: aborted by the script
    after = prefix_state(wine)
    assert after.files == before.files  # not a file written, Program Files included
    assert before.changed(after) <= noise  # nor a registry value
    assert not wine.host(str(DIRECTORY)).exists()
    assert _entries(wine) == []

    # control: the same comparison sees an x64 installer's install on this machine
    x64 = make_package_input(tmp_path / "x64", "windows-x86_64")
    built = NsisChannel().generate(x64, tmp_path / "x64" / "packaging" / "nsis")
    (setup,) = (p for p in built.files if p.suffix == ".exe")
    _install(wine, setup)
    written = before.changed(prefix_state(wine)) - noise
    key = (UNINSTALL_KEY + SETTINGS.package_name).replace("\\", "\\\\")  # as a .reg spells it
    assert any(f"|[{key}]|" in k for k in written), sorted(written)
    assert "drive_c/Program Files/demo-onnxruntime/uninstall.exe" in written
