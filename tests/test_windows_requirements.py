"""The installer's requirement checks and the add-on installer, run for real under Wine.

Each test has its own Wine prefix; the installers are compiled by the real makensis from small
synthetic stages (tests/helpers/packages.py). A silent install (/S) cannot show a message box,
so what it found missing is read from the log it writes in the installation directory; the
message boxes themselves carry the same lines (tests/test_channel_nsis.py reads the script).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ortbundle.channels import PackageInput, ShippedRuntime
from ortbundle.channels.nsis import NsisChannel
from ortbundle.config.products import Addon
from ortbundle.stage.closure import ExternalLibrary
from ortbundle.stage.probe.wine import Wine
from ortbundle.tools.smoke.installs import (
    run_setup,
    run_uninstaller,
    tree_digests,
    windows_install_dir,
)
from tests.helpers.packages import SETTINGS, make_package_input, write_stage_files
from tests.helpers.pe import make_pe
from tests.helpers.windows import UNINSTALL_KEY, own_prefix

pytestmark = pytest.mark.windows

MAIN_DIR = windows_install_dir(SETTINGS.package_name)
LOG = f"{SETTINGS.package_name}-setup.log"
REQUIRED_DLL = "ortbfaketk64_3.dll"
OPTIONAL_DLL = "ortbfakegpu.dll"
INSTALL = "Install the Fake Toolkit 3 for x64"
RUNG_NOTE = "the fake GPU driver; the fake GPU rung needs it"
ADDON_SETTINGS = replace(SETTINGS, package_name="demo-cuda-onnxruntime")
ADDON_UNINSTALLER = "uninstall-demo-cuda-onnxruntime.exe"


@pytest.fixture
def wine(tmp_path: Path) -> Iterator[Wine]:
    yield from own_prefix(tmp_path)


def _compile(package: PackageInput) -> Path:
    out = NsisChannel().generate(package, package.stage.parent / "packaging" / "nsis")
    (exe,) = (p for p in out.files if p.suffix == ".exe")
    return exe


def _with_requirements(root: Path) -> Path:
    """The demo product whose OpenVINO runtime needs a toolkit DLL (required) and a driver DLL
    (optional) no Windows has."""
    package = make_package_input(root / "dist" / "demo" / "1.0.0", "windows-x86_64")
    user = ("runtimes/openvino/onnxruntime.dll",)
    extra = (
        ExternalLibrary(REQUIRED_DLL, "faketk", "toolkit", "Fake Toolkit 3", user, install=INSTALL),
        ExternalLibrary(OPTIONAL_DLL, "fakegpu", "driver", RUNG_NOTE, user, optional=True),
    )
    return _compile(replace(package, externals=package.externals + extra))


def _log(wine: Wine) -> str | None:
    path = wine.host(str(MAIN_DIR / LOG))
    return path.read_text("utf-8", errors="replace") if path.exists() else None


def test_a_missing_library_is_named_with_what_to_install_and_none_when_present(
    tmp_path: Path, wine: Wine
) -> None:
    exe = _with_requirements(tmp_path)
    result = run_setup(wine, exe)
    assert result.returncode == 0, result.stdout + result.stderr  # silent: continues
    assert wine.host(str(MAIN_DIR / "runtimes/openvino/onnxruntime.dll")).is_file()
    log = _log(wine)
    assert log is not None, "a silent install with a missing library wrote no log"
    required, _, optional = log.partition("optional libraries are missing")
    assert REQUIRED_DLL in required and INSTALL in required and "needed by OpenVINO" in required
    assert OPTIONAL_DLL in optional and RUNG_NOTE in optional
    assert "OpenVINO loses the rung it enables" in optional
    assert OPTIONAL_DLL not in required and REQUIRED_DLL not in optional
    assert "MSVCP140" not in log  # Wine's own Visual C++ runtime is in System32: found

    # both put where Windows finds a DLL: the reinstall finds them and says nothing
    for name in (REQUIRED_DLL, OPTIONAL_DLL):
        (wine.system32 / name).write_bytes(make_pe())
    assert run_setup(wine, exe).returncode == 0
    assert _log(wine) is None  # the previous version's uninstaller took the old log away

    assert run_uninstaller(wine, MAIN_DIR) == 0
    assert not wine.host(str(MAIN_DIR)).exists()  # the log is the installer's: removed too


def test_a_missing_visual_cpp_runtime_is_named_and_setup_continues(
    tmp_path: Path, wine: Wine
) -> None:
    """The Visual C++ check is the same check: a redist DLL missing from System32 is named with
    its redistributable; the user chooses (a silent install continues and logs it)."""
    exe = _compile(make_package_input(tmp_path / "dist" / "demo" / "1.0.0", "windows-x86_64"))
    assert wine.run(["cmd", "/c", "exit"]).returncode == 0  # the prefix exists now
    (wine.system32 / "msvcp140.dll").unlink()
    assert run_setup(wine, exe).returncode == 0
    log = _log(wine)
    assert log is not None and "MSVCP140.dll" in log
    assert "Microsoft Visual C++ 2015-2022 Redistributable (x64)" in log


# --- the add-on installer (CONTRACT §5) ---------------------------------------------------------

ADDON_FILES = {
    "runtimes/cuda/onnxruntime.dll": make_pe(imports=("KERNEL32.dll",)),
    "runtimes/cuda/onnxruntime_providers_cuda.dll": make_pe(imports=("KERNEL32.dll",)),
    "runtimes.d/demo-cuda.json": b'{"schema": "ortbundle.runtimes/1", "addon_of": "demo"}\n',
    "licenses/onnxruntime/LICENSE": b"MIT License (the add-on's copy)\n",
    "NOTICE": b"demo-cuda 1.0.0\n",
}


def _addon(root: Path) -> Path:
    base = root / "dist" / "demo-cuda" / "1.0.0"
    stage = base / "windows-x86_64"
    files = write_stage_files(stage, ADDON_FILES)
    main = make_package_input(base / "unused", "windows-x86_64")
    package = replace(
        main,
        product="demo-cuda",
        stage=stage,
        files=tuple(sorted(files, key=lambda f: f.path)),
        externals=(),
        runtimes=(ShippedRuntime("cuda", "NVIDIA CUDA", "runtimes/cuda", True),),
        settings=ADDON_SETTINGS,
        addon_of=Addon(name="demo", package_name=SETTINGS.package_name, version="1.0"),
    )
    return _compile(package)


def test_the_add_on_installs_beside_the_main_product_and_uninstalls_alone(
    tmp_path: Path, wine: Wine
) -> None:
    main = _compile(make_package_input(tmp_path / "dist" / "demo" / "1.0.0", "windows-x86_64"))
    addon = _addon(tmp_path)
    assert run_setup(wine, main).returncode == 0
    main_files = tree_digests(wine.host(str(MAIN_DIR)))

    result = run_setup(wine, addon)
    assert result.returncode == 0, result.stdout + result.stderr
    installed = tree_digests(wine.host(str(MAIN_DIR)))
    added = {path: digest for path, digest in installed.items() if path not in main_files}
    assert installed.items() >= main_files.items()  # the main product's files untouched
    stage = tree_digests(tmp_path / "dist" / "demo-cuda" / "1.0.0" / "windows-x86_64")
    beside = {p: d for p, d in stage.items() if p.startswith(("runtimes/", "runtimes.d/"))}
    own = {
        f"addons/{ADDON_SETTINGS.package_name}/{p}": d for p, d in stage.items() if p not in beside
    }
    assert added.pop(ADDON_UNINSTALLER)
    assert added == beside | own  # runtimes beside the main ones; NOTICE/licences its own
    entry = wine.registry_key(UNINSTALL_KEY + ADDON_SETTINGS.package_name)
    assert entry is not None and entry["InstallLocation"] == str(MAIN_DIR)
    assert wine.registry_key(UNINSTALL_KEY + SETTINGS.package_name) is not None

    # reinstalling (upgrading) the main product runs its own uninstaller first: the add-on stays
    assert run_setup(wine, main).returncode == 0
    assert tree_digests(wine.host(str(MAIN_DIR))) == installed

    assert run_uninstaller(wine, MAIN_DIR, name=ADDON_UNINSTALLER) == 0
    assert tree_digests(wine.host(str(MAIN_DIR))) == main_files
    assert wine.registry_key(UNINSTALL_KEY + ADDON_SETTINGS.package_name) is None


def test_the_add_on_without_its_main_product_is_refused(tmp_path: Path, wine: Wine) -> None:
    addon = _addon(tmp_path)
    assert run_setup(wine, addon).returncode == 2  # NSIS: aborted by the script
    assert not wine.host(str(MAIN_DIR)).exists()
    assert not wine.host(str(windows_install_dir("demo-cuda-onnxruntime"))).exists()
    assert wine.registry_key(UNINSTALL_KEY + ADDON_SETTINGS.package_name) is None
