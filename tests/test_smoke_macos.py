"""`invoke smoke` on macos-arm64: NOT RUN with the reason, and the static checks that need no
Mac, on the stage and on the package unpacked as an app holds it — passing on a good build,
failing on a byte changed after signing and on a minos runtimes.json misreports."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest

from ortbundle.channels.macos import MacosChannel
from ortbundle.tools.smoke.run import SmokeReport, smoke
from tests.test_channel_macos import CORE, macos_input

pytest.importorskip("apple_platform")


def _built(tmp_path: Path, minos: str = "14.0") -> Path:
    """A version directory: the macos-arm64 stage with its runtimes.json, and its package."""
    version = tmp_path / "dist" / "demo" / "1.0.0"
    package = macos_input(version)
    plugin = {"library": "plugins/ep-mlx/libonnxruntime_mlx_ep.dylib"}
    index = {
        "runtimes": [
            {
                "name": "stock",
                "directory": "runtimes/stock",
                "plugin_eps": [plugin],
                "system": {"macos": minos},
            }
        ]
    }
    text = json.dumps(index).encode()
    (package.stage / "runtimes.json").write_bytes(text)
    digest = hashlib.sha256(text).hexdigest()
    files = tuple(
        replace(f, size=len(text), sha256=digest) if f.path == "runtimes.json" else f
        for f in package.files
    )
    out = version / "packaging" / "macos"
    out.mkdir(parents=True)
    MacosChannel().generate(replace(package, files=files), out)
    return version


def _smoke(version: Path, tmp_path: Path) -> SmokeReport:
    return smoke(
        version,
        package_name="demo-onnxruntime",
        channels=["macos"],
        targets=["macos-arm64"],
        scratch=tmp_path / "work",
        say=lambda _: None,
    )


def test_nothing_runs_and_every_static_check_passes(tmp_path: Path) -> None:
    report = _smoke(_built(tmp_path), tmp_path)
    verdicts = [(line.verdict, line.subject, line.where) for line in report.lines]
    assert verdicts == [
        ("NOT RUN", "runtimes", ""),
        ("PASS", "stock", "stage"),
        ("PASS", "macos", "demo-onnxruntime-1.0.0-macos-arm64.zip"),
    ]
    assert "Apple Silicon" in report.lines[0].detail
    assert "runtimes/stock, plugins/ep-mlx" in report.lines[1].detail
    assert "minos 14.0 as runtimes.json reports" in report.lines[1].detail


def test_a_flipped_byte_and_a_wrong_minos_fail(tmp_path: Path) -> None:
    version = _built(tmp_path, minos="13.0")
    core = version / "macos-arm64" / "runtimes" / "stock" / CORE
    data = bytearray(core.read_bytes())
    data[0x3000] ^= 1
    core.write_bytes(bytes(data))
    report = _smoke(version, tmp_path)
    failed = {line.subject: line.detail for line in report.failed}
    assert "code digest mismatch" in failed["stock"]
    assert "minos 14.0, runtimes.json reports 13.0" in failed["stock"]
    assert "macos" not in failed  # the package was made before the byte changed
