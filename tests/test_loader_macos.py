"""The shipped loader on macOS, over fake Mac trees: the Apple GPU and the macOS version read
from the files a Mac has, the stock runtime ranked for the Apple GPU, minos held against the
system, and a required library searched for as dyld would."""

from __future__ import annotations

import plistlib
from pathlib import Path

from ortbundle.payload.loader import Hardware, choose, detect, too_old
from ortbundle.payload.loader.search import system_libraries
from tests.test_loader import runtime


def mac(tmp_path: Path, version: str = "14.5", *, apple_gpu: bool = True) -> Path:
    root = tmp_path / "mac"
    plist = root / "System/Library/CoreServices/SystemVersion.plist"
    plist.parent.mkdir(parents=True)
    plist.write_bytes(plistlib.dumps({"ProductName": "macOS", "ProductVersion": version}))
    if apple_gpu:
        (root / "System/Library/Extensions/AGXMetalG14X.bundle").mkdir(parents=True)
    return root


def test_an_apple_silicon_mac_has_an_apple_gpu_and_a_version(tmp_path: Path) -> None:
    hardware = detect(mac(tmp_path))
    assert hardware.macos_version == "14.5"
    assert [(g.vendor, g.where) for g in hardware.gpus] == [
        ("apple", "System/Library/Extensions/AGXMetalG14X.bundle")
    ]
    assert detect(mac(tmp_path / "intel", apple_gpu=False)).gpus == ()
    assert detect(tmp_path / "not-a-mac").macos_version is None


def test_the_stock_runtime_is_ranked_for_the_apple_gpu(tmp_path: Path) -> None:
    index = {"runtimes": [runtime("cpu-only", []), runtime("stock-macos", ["apple"])]}
    decision = choose(index, detect(mac(tmp_path)), stage=tmp_path)
    assert (decision.runtime["name"], decision.why) == ("stock-macos", "Apple GPU")
    without = choose(index, detect(mac(tmp_path / "vm", apple_gpu=False)), stage=tmp_path)
    assert (without.runtime["name"], without.why) == ("cpu-only", "CPU")


def test_minos_is_held_against_the_system(tmp_path: Path) -> None:
    needs = {"system": {"needs": [], "macos": "14.0"}}
    assert too_old(needs, Hardware(macos_version="13.6.1")) == "needs macOS 14.0, this is 13.6.1"
    assert too_old(needs, Hardware(macos_version="14.0")) is None
    assert too_old(needs, detect(mac(tmp_path, "15.1"))) is None


def test_a_required_library_is_found_as_dyld_would(tmp_path: Path) -> None:
    root = mac(tmp_path)
    own = tmp_path / "stage" / "runtimes" / "stock-macos"
    own.mkdir(parents=True)
    (own / "libmlx.dylib").write_bytes(b"")
    (root / "opt/lib").mkdir(parents=True)
    (root / "opt/lib/libextra.dylib").write_bytes(b"")
    (root / "usr/local/lib").mkdir(parents=True)
    (root / "usr/local/lib/libfallback.dylib").write_bytes(b"")
    libraries = system_libraries(
        "macos-arm64", root, {"DYLD_LIBRARY_PATH": "/opt/lib"}, windows=False
    )
    assert libraries.find("/usr/lib/libSystem.B.dylib", own) == "/usr/lib/libSystem.B.dylib"
    assert libraries.find("@rpath/libmlx.dylib", own) == str(own / "libmlx.dylib")
    assert libraries.find("libextra.dylib", own) == str(root / "opt/lib/libextra.dylib")
    assert libraries.find("@rpath/libfallback.dylib", own) == str(
        root / "usr/local/lib/libfallback.dylib"
    )
    assert libraries.find("@rpath/libabsent.dylib", own) is None
