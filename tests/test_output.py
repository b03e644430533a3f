"""What a build prints (#21): a plan line, a line per phase, one summary that fits an 80-column
terminal and names every package; the detail tables only with --verbose; plain lines without a
terminal; the same facts as build-summary.json under its JSON Schema."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ortbundle.cli.build import run_build
from ortbundle.evidence.names import SUMMARY_NAME
from tests.helpers.project import FakeProject

SCHEMA = Path(__file__).resolve().parents[1] / "ortbundle" / "data" / "build-summary.schema.json"
ANSI = re.compile(r"\x1b\[")


def _build(
    fake: FakeProject,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    options: dict[str, Any] | None = None,
    **flags: Any,
) -> tuple[str, str]:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.chdir(fake.root)  # where a user runs it: the output path is shown relative
    capsys.readouterr()
    run_build(fake.options(**(options or {})), root=fake.root, **flags)
    captured = capsys.readouterr()
    return captured.out, captured.err


def _validate(document: dict[str, Any]) -> None:
    schema = json.loads(SCHEMA.read_text("utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(document)


def test_the_default_output_fits_80_columns_and_names_every_package(
    written: FakeProject, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out, _ = _build(written, capsys, monkeypatch)
    lines = out.splitlines()
    assert len(lines) <= 30, out
    assert all(len(line) <= 80 for line in lines), out
    assert not ANSI.search(out)  # no terminal: plain lines, no redraw
    document = json.loads(
        (written.root / "dist" / "fakeproduct" / "1.2.3" / SUMMARY_NAME).read_text()
    )
    assert document["packages"], "the synthetic product makes packages"
    for package in document["packages"]:  # each named with its published size
        assert package["bytes"] > 0 and package["files"], package
        size = f"{package['bytes'] / (1 << 20):.1f} MiB"
        assert re.search(rf"\b{package['channel']} {re.escape(size)}", out), package["channel"]
    for target in document["targets"]:
        assert re.search(rf"^{target['target']}: \d+ files", out, re.MULTILINE)
    assert lines[0].startswith("fakeproduct 1.2.3: linux-x86_64, windows-x86_64; runtimes fake")
    for phase in ("fetch", "stage", "licensing", "channels", "evidence"):
        assert re.search(rf"^{phase} .*\(\d+\.\d s\)$", out, re.MULTILINE), phase
    # a channel sharing a target's verdict is told once: arch and flatpak audit the same rows
    audit_lines = [line for line in lines if line.startswith("  audit ")]
    assert (
        len(audit_lines)
        == len(document["audit"])
        < len([c for g in document["audit"] for c in g["channels"]])
    )
    assert "signed: manifest.json by key" in out
    assert "licence audit —" not in out and "needs from the system" not in out  # tables: -v


def test_verbose_adds_the_detail_tables(
    written: FakeProject, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out, _ = _build(written, capsys, monkeypatch, verbose=True)
    assert "licence audit —" in out and "needs from the system" in out
    assert "why dropped" in out
    assert not ANSI.search(out)
    # the coverage lines too speak MiB, the one size unit
    coverage = [line for line in out.splitlines() if "100% attributed" in line]
    assert coverage and all(" MiB, " in line and "bytes" not in line for line in coverage)
    # where the package phase's time went: every package of every channel, the longest first
    document = json.loads(
        (written.root / "dist" / "fakeproduct" / "1.2.3" / SUMMARY_NAME).read_text()
    )
    timed = re.findall(r"^  (\S+) (\S+): (\d+\.\d) s$", out, re.MULTILINE)
    wanted = {(p["channel"], t["target"]) for p in document["packages"] for t in p["times"]}
    assert {(c, t) for c, t, _ in timed} == wanted and wanted
    seconds = [float(s) for _, _, s in timed]
    assert seconds == sorted(seconds, reverse=True)
    assert re.search(
        r"^peak memory: ortbundle \d+ MiB, the largest external tool at most", out, re.M
    )


def test_an_unsigned_build_says_so(
    written: FakeProject, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    environ = {k: v for k, v in written.environ.items() if k != "ORTBUNDLE_SIGNING_KEY_FILE"}
    out, _ = _build(written, capsys, monkeypatch, {"environ": environ})
    assert "UNSIGNED development build" in out


def test_json_summary_validates_and_a_no_op_build_repeats_it(
    written: FakeProject, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out, err = _build(written, capsys, monkeypatch, as_json=True)
    document = json.loads(out)  # stdout is the document alone; progress went to stderr
    assert "fetch" in err
    _validate(document)
    stored = json.loads(
        (written.root / "dist" / "fakeproduct" / "1.2.3" / SUMMARY_NAME).read_text()
    )
    assert stored == document
    for package in document["packages"]:  # each target's packager, timed
        built = [t for t in package["targets"] if t in document["plan"]["targets"]]
        assert [t["target"] for t in package["times"]] == built, package["channel"]
    # MiB, not KiB or bytes: this process is the whole test session's, so no bound on the
    # build's own peak here (the bench measures that in a process of its own)
    peak = document["memory"]["ortbundle_peak_mib"]
    assert 0 < peak < 16384 and peak * (1 << 20) <= _max_rss_bytes() * 1.01
    requires = {r["group"]: r for t in document["targets"] for r in t["requires"]}
    assert requires["glibc"]["optional"] is False and "libc.so.6" in requires["glibc"]["names"]
    again, _ = _build(written, capsys, monkeypatch, as_json=True)
    no_op = json.loads(again)
    _validate(no_op)
    assert no_op["up_to_date"] is True and no_op["packages"] == document["packages"]
    short, _ = _build(written, capsys, monkeypatch)
    assert short.startswith("up to date") and len(short.splitlines()) <= 10


def test_the_schema_refuses_what_it_does_not_know(
    written: FakeProject, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out, _ = _build(written, capsys, monkeypatch, as_json=True)
    document = json.loads(out)
    for broken in (
        {**document, "surprise": 1},
        {**document, "schema": "ortbundle.build-summary/0"},
        {**document, "signature": {**document["signature"], "signed": "yes"}},
    ):
        with pytest.raises(jsonschema.ValidationError):
            _validate(broken)


def test_requirements_say_required_optional_and_how_to_install() -> None:
    """The summary renders each package's requirements from the CONTRACT §1 fields."""
    from ortbundle.pipeline.result import requirement_groups
    from ortbundle.pipeline.summary import summary_lines
    from ortbundle.stage.closure import ExternalLibrary

    externals = [
        ExternalLibrary(
            "libcudnn.so.9",
            "cudnn",
            "toolkit",
            "",
            ("a.so",),
            version=">=9",
            install="Install NVIDIA cuDNN 9 for CUDA 13",
            sandbox=False,
            via="loads",
        ),
        ExternalLibrary("libOpenCL.so.1", "opencl", "driver", "", ("b.so",), optional=True),
        ExternalLibrary("libc.so.6", "glibc", "system", "", ("a.so",)),
    ]
    groups = requirement_groups(externals)
    assert [(g["group"], g["optional"]) for g in groups] == [
        ("cudnn", False),
        ("glibc", False),
        ("opencl", True),
    ]
    assert groups[0]["via"] == ["loads"] and groups[0]["sandbox"] is False
    target = {
        "target": "linux-x86_64",
        "files": 1,
        "bytes": 1,
        "runtimes": [],
        "requires": groups,
        "runs_on": "",
        "warnings": [],
    }
    document = {
        "targets": [target],
        "packages": [],
        "audit": [],
        "signature": {
            "signed": False,
            "key_id": None,
            "manifest": "manifest.json",
            "signature": None,
        },
        "paths": {
            "version_dir": "/x",
            "manifest": "manifest.json",
            "sbom": "s",
            "packaging": "packaging",
            "summary": SUMMARY_NAME,
        },
    }
    text = "\n".join(summary_lines(document))
    assert "needs cudnn >=9, glibc; optional opencl" in text
    assert "required cudnn: Install NVIDIA cuDNN 9 for CUDA 13" in text


def test_makensis_output_feeds_the_live_status(monkeypatch: pytest.MonkeyPatch) -> None:
    """makensis -V4 names each file as it compresses it (`File: "x" N bytes`, as NSIS 3.08
    prints it): the status says which and how much of the stage is done; the tail is kept."""
    from ortbundle.channels import nsis

    seen: list[str] = []
    monkeypatch.setattr(nsis, "status", seen.append)
    output = io.BytesIO(
        b'SetOutPath: "$INSTDIR"\n'
        b'File: "onnxruntime.dll" 1048576 bytes\n'
        b'File: "openvino.dll" 2097152 bytes\n'
        b"Error: boom\n"
    )
    tail = nsis._watch(output, 4 << 20)
    assert seen == [
        "makensis onnxruntime.dll: 1.0 MiB of 4.0 MiB",
        "makensis openvino.dll: 3.0 MiB of 4.0 MiB",
    ]
    assert tail[-1] == "Error: boom"


def test_a_terminal_shows_the_running_phase_live_and_keeps_its_line() -> None:
    """On a terminal the phase and its status are drawn live (and cleared); the finished
    phase's line stays; status() reaches the reporter in use from anywhere."""
    from rich.console import Console

    from ortbundle._core.progress import Reporter, status

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120, highlight=False)
    with Reporter(console, interactive=True) as reporter:
        reporter.begin("package")
        status("makensis openvino.dll: 3.0 MiB of 4.0 MiB")
        console.file.flush()
        reporter._bars.refresh()  # type: ignore[union-attr]  # draw now, not in 0.1 s
        reporter.done("1 channel")
    drawn = screen.getvalue()
    assert "makensis openvino.dll: 3.0 MiB of 4.0 MiB" in drawn  # the live line
    assert re.search(r"package\s+1 channel \(\d+\.\d s\)", drawn)
    assert [p.name for p in reporter.phases] == ["package"]
    status("after the reporter closed: goes nowhere")  # no reporter in use: no error


def _max_rss_bytes() -> int:
    """This process's peak resident set in bytes (Linux reports KiB, macOS bytes)."""
    import resource
    import sys

    unit = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * unit
