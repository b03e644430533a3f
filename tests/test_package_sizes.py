"""Sizes per package that exists (issue #43): a channel that makes one package per target (two
installers, an x86-64 and an aarch64 .deb) gives each its own size in build-summary.json, the
console and report.html's chart — never one sum across architectures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ortbundle.channels import ChannelOutput
from ortbundle.config.vocabulary import package_target
from ortbundle.evidence.names import SUMMARY_NAME
from ortbundle.evidence.report.collect import packages
from ortbundle.licensing.attribution import ComponentUse, TargetLicensing
from ortbundle.pipeline.result import _package
from ortbundle.pipeline.summary import summary_lines
from ortbundle.stage.staging import StagedFile

MIB = 1 << 20
# what each target's stage carries, and the package file its channel wrote
STAGES = {"windows-x86_64": 3 * MIB, "windows-arm64": 1 * MIB, "android-arm64-v8a": 2 * MIB}
WRITTEN = {
    "nsis/installer.exe": 3 * MIB,  # the first target's: packaging/nsis/ itself
    "nsis/installer.nsi": 100,
    "nsis/windows-arm64/installer.exe": 1 * MIB,
    "nsis/windows-arm64/installer.nsi": 50,
    "apk/jniLibs/arm64-v8a/libort.so": 2 * MIB,  # the Android module: one for every ABI
}


def _version_dir(root: Path) -> Path:
    for path, size in WRITTEN.items():
        (root / "packaging" / path).parent.mkdir(parents=True, exist_ok=True)
        (root / "packaging" / path).write_bytes(b"\0" * size)
    return root


def _licensing(target: str, size: int) -> TargetLicensing:
    files = (StagedFile("runtimes/ort/ort.dll", size, "0" * 64),)
    use = ComponentUse("ort", "1", "MIT", ("MIT",), "pkg:generic/ort@1", files, (), (), ())
    return TargetLicensing(target, (use,))


def test_each_file_belongs_to_its_targets_package() -> None:
    assert package_target("nsis", "installer.exe") == "windows-x86_64"
    assert package_target("nsis", "windows-arm64/installer.exe") == "windows-arm64"
    assert package_target("deb", "generated/copyright") == "linux-x86_64"
    assert package_target("deb", "linux-aarch64/generated/copyright") == "linux-aarch64"
    assert package_target("apk", "jniLibs/x86_64/libort.so") is None


def test_the_chart_has_one_bar_per_package_that_exists(tmp_path: Path) -> None:
    version_dir = _version_dir(tmp_path)
    licensing = [_licensing(t, n) for t, n in STAGES.items()]
    views, scale = packages(version_dir, ("nsis", "apk"), licensing)
    assert [(v.names, v.targets, v.size) for v in views] == [
        (("nsis windows-x86_64",), ("windows-x86_64",), 3 * MIB),
        (("nsis windows-arm64",), ("windows-arm64",), 1 * MIB),
        (("apk",), ("android-arm64-v8a",), 2 * MIB),
    ]
    assert scale * 3 * MIB == max(sum(s.w for s in v.segments) for v in views)
    artifacts = {v.names: [path for path, _ in v.artifacts] for v in views}
    assert artifacts[("nsis windows-x86_64",)] == [
        "packaging/nsis/installer.exe",
        "packaging/nsis/installer.nsi",
    ]
    assert artifacts[("nsis windows-arm64",)] == [
        "packaging/nsis/windows-arm64/installer.exe",
        "packaging/nsis/windows-arm64/installer.nsi",
    ]


def test_the_summary_and_the_console_give_each_installer_its_own_size(tmp_path: Path) -> None:
    version_dir = _version_dir(tmp_path)
    scratch = tmp_path / "scratch" / "nsis"  # where the channel wrote them
    written = tuple(scratch / p.removeprefix("nsis/") for p in WRITTEN if p.startswith("nsis/"))
    nsis = _package(ChannelOutput("nsis", scratch, written, ()), version_dir, release=False)
    assert [(f["path"], f["target"]) for f in nsis["files"]] == [
        ("packaging/nsis/installer.exe", "windows-x86_64"),
        ("packaging/nsis/installer.nsi", "windows-x86_64"),
        ("packaging/nsis/windows-arm64/installer.exe", "windows-arm64"),
        ("packaging/nsis/windows-arm64/installer.nsi", "windows-arm64"),
    ]
    lines = summary_lines(_document([nsis]))
    assert lines[:4] == [
        "windows-x86_64: 1 files, 3.0 MiB (ort 3.0 MiB)",
        "  needs nothing",
        "  nsis 3.0 MiB",
        "windows-arm64: 1 files, 1.0 MiB (ort 1.0 MiB)",
    ]
    assert lines[5] == "  nsis 1.0 MiB"
    assert not [line for line in lines if "nsis 4.0 MiB" in line], lines


def _document(packaged: list[dict[str, Any]]) -> dict[str, Any]:
    def target(name: str) -> dict[str, Any]:
        return {
            "target": name,
            "files": 1,
            "bytes": STAGES[name],
            "runtimes": [{"name": "ort", "bytes": STAGES[name]}],
            "requires": [],
            "runs_on": "",
            "warnings": [],
        }

    return {
        "targets": [target("windows-x86_64"), target("windows-arm64")],
        "packages": packaged,
        "audit": [],
        "signature": {"signed": False, "key_id": None, "manifest": "m", "signature": None},
        "paths": {
            "version_dir": "/x",
            "manifest": "m",
            "sbom": "s",
            "packaging": "packaging",
            "summary": SUMMARY_NAME,
        },
    }
