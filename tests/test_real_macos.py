"""The real tier on macOS: darkroom-plugins' macos-arm64 target built from the real pinned
wheels (onnxruntime 1.32.0 macosx_14_0_arm64, onnxruntime-ep-mlx 0.31.0), then read by tools
that are not ortbundle's: LLVM's otool and lipo for the load commands, apple-codesign (through
apple-platform-py) for the signatures, unzip (and 7-Zip when present) for the package."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ortbundle._core.progress import plain_reporter
from ortbundle.pipeline.build import BuildOptions, Project, build
from ortbundle.pipeline.result import BuildResult
from tests.helpers.bite import each
from tests.helpers.real import ROOT

pytestmark = pytest.mark.real
apple_platform = pytest.importorskip("apple_platform")

TARGET = "macos-arm64"
PACKAGE = "darkroom-onnxruntime"
SYSTEM = ("/usr/lib/", "/System/Library/Frameworks/")
DYLIBS = {
    "runtimes/stock-macos": ("libonnxruntime.1.32.0.dylib",),
    "plugins/ep-mlx": ("libonnxruntime_mlx_ep.dylib", "libmlx.dylib", "libmlxc.dylib"),
}
IDS = {  # the name each dylib answers to: ORT's id is its compatibility name, a link
    "libonnxruntime.1.32.0.dylib": "@rpath/libonnxruntime.1.dylib",
    "libonnxruntime_mlx_ep.dylib": "@rpath/libonnxruntime_mlx_ep.dylib",
    "libmlx.dylib": "@rpath/libmlx.dylib",
    "libmlxc.dylib": "@rpath/libmlxc.dylib",
}


def _llvm(tool: str) -> str:
    """An LLVM tool under its plain name or Debian's versioned one (package llvm)."""
    found = shutil.which(tool) or next(iter(sorted(glob.glob(f"/usr/lib/llvm-*/bin/{tool}"))), "")
    if not found:
        pytest.skip(f"needs {tool} (Debian package llvm)")
    return found


def _run(*command: str) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


@pytest.fixture(scope="module")
def mac_build(tmp_path_factory: pytest.TempPathFactory) -> BuildResult:
    dist = tmp_path_factory.mktemp("dist")
    options = BuildOptions(product="darkroom-plugins", targets=(TARGET,))
    return build(Project.at(ROOT, dist), options, plain_reporter())


@pytest.fixture(scope="module")
def stage(mac_build: BuildResult) -> Path:
    return mac_build.version_dir / TARGET


def _dylibs(stage: Path) -> list[Path]:
    paths = [stage / d / name for d, names in DYLIBS.items() for name in names]
    assert len(paths) == 4
    return paths


def test_otool_sees_only_rpath_and_system_names_and_loader_path_rpaths(stage: Path) -> None:
    otool = _llvm("llvm-otool")
    for path in each(_dylibs(stage), "dylibs"):
        names = [
            line.split(" (compatibility")[0].strip()
            for line in _run(otool, "-L", str(path)).splitlines()[1:]
        ]
        assert names[0] == IDS[path.name], path  # -L lists the id first
        for name in names[1:]:
            assert name.startswith(("@rpath/", *SYSTEM)), (path.name, name)
        assert _run(otool, "-D", str(path)).splitlines()[1:] == [IDS[path.name]], path
        commands = _run(otool, "-l", str(path))
        assert re.findall(r"cmd LC_RPATH\n\s+cmdsize \d+\n\s+path (\S+)", commands) == [
            "@loader_path"
        ], path
        assert re.findall(r"minos (\S+)", commands) == ["14.0"], path
        assert "/Users/" not in commands, path  # the MLX wheel's CI paths are gone


def test_lipo_sees_arm64_only(stage: Path) -> None:
    lipo = _llvm("llvm-lipo")
    for path in each(_dylibs(stage), "dylibs"):
        assert _run(lipo, "-archs", str(path)).split() == ["arm64"], path


def test_apple_codesign_verifies_every_signature_and_catches_a_flipped_byte(
    stage: Path, tmp_path: Path
) -> None:
    for path in each(_dylibs(stage), "dylibs"):
        problems = apple_platform.verify_macho(path)
        # an ad-hoc signature has no CMS blob: apple-codesign reports only that
        assert [p["description"] for p in problems if "CMS" not in p["description"]] == [], path
        identifier = apple_platform.code_directory_identifier(apple_platform.read_signature(path))
        assert identifier == IDS[path.name].removeprefix("@rpath/"), path
    broken = tmp_path / "libmlxc.dylib"
    data = bytearray((stage / "plugins/ep-mlx/libmlxc.dylib").read_bytes())
    data[len(data) // 3] ^= 0x01
    broken.write_bytes(bytes(data))
    described = [p["description"] for p in apple_platform.verify_macho(broken)]
    assert any("code digest mismatch" in d for d in described), described


def _unpacked_by(command: list[str], into: Path) -> Path:
    into.mkdir(parents=True)
    subprocess.run(command, check=True, capture_output=True, timeout=600, cwd=into)
    return into


@pytest.mark.parametrize("reader", ["unzip", "7zz"])
def test_the_package_unpacks_into_contents_with_links_intact(
    mac_build: BuildResult, stage: Path, tmp_path: Path, reader: str
) -> None:
    if shutil.which(reader) is None:
        pytest.skip(f"needs {reader} (Debian package {'unzip' if reader == 'unzip' else '7zip'})")
    (zipped,) = (mac_build.version_dir / "packaging" / "macos").glob("*.zip")
    assert zipped.name == f"{PACKAGE}-0.23.0-macos-arm64.zip"
    # 7-Zip keeps links only when asked (-snl), and one with `..` only with -snld, whether or
    # not it stays inside the archive (docs/macos.md)
    command = (
        ["unzip", "-q", str(zipped)]
        if reader == "unzip"
        else ["7zz", "x", "-snl", "-snld", str(zipped)]
    )
    contents = _unpacked_by(command, tmp_path / "App.app" / "Contents")
    code = contents / "Frameworks" / PACKAGE
    link = code / "runtimes/stock-macos/libonnxruntime.1.dylib"
    assert link.is_symlink() and os.readlink(link) == "libonnxruntime.1.32.0.dylib"
    for directory, names in DYLIBS.items():
        for name in names:
            unpacked = code / directory / name
            assert unpacked.read_bytes() == (stage / directory / name).read_bytes(), name
    metallib = code / "plugins/ep-mlx/Resources/mlx.metallib"  # MLX's second lookup
    assert metallib.stat().st_size == (stage / "plugins/ep-mlx/mlx.metallib").stat().st_size
    resources = contents / "Resources" / PACKAGE
    assert (resources / "runtimes.json").is_file() and (resources / "NOTICE").is_file()
    assert (resources / "runtimes").is_symlink() and (resources / "plugins").is_symlink()
    assert (resources / "licenses/mlx/LICENSE").read_text().startswith("MIT License")
    # nothing but Mach-O code and links under Frameworks/: codesign's rule for nested code
    for path in code.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert path.read_bytes()[:4] == b"\xcf\xfa\xed\xfe", path
