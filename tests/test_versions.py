"""Bundled components' versions, read from the files: PE version resources, ELF file names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ortbundle._core.errors import LicenseError
from ortbundle._core.memo import Memo, memo_key
from ortbundle._core.progress import Reporter
from ortbundle.pipeline.build import build
from ortbundle.stage.versions import agrees, read_file_version, resolve_version
from tests.helpers.elf import make_elf
from tests.helpers.pe import make_pe
from tests.helpers.project import FakeProject, windows_members

DXC = {
    "CompanyName": "Microsoft(r) Corporation",
    "FileVersion": "1.9.0.1",
    "ProductVersion": "1.9.0.1 (3e6e1485)",
    "ProductName": "Microsoft(r) DirectX for Windows(r) - Out Of Band",
}


@pytest.mark.parametrize(
    ("stated", "found", "expected"),
    [
        ("1.27.0", "1.27.20260615.2.8f0278c", True),  # ONNX Runtime's date-for-patch FileVersion
        ("2025.4.1", "2025.4.1.20426", True),  # OpenVINO adds its build number
        ("1.9.0.1", "1.9.0.1 (3e6e1485)", True),
        ("1.8.2502.8", "1.8.2502.11", False),  # the Windows SDK's dxil.dll is not DXC's release
        ("1.28.0", "1.27.20260615.2.8f0278c", False),
        ("1.27.1", "1.27.20260615.2.8f0278c", False),
        ("2021.13.1", "2021.2.6", False),
    ],
)
def test_a_stated_version_agrees_with_a_file_only_when_it_is_the_same(
    stated: str, found: str, expected: bool
) -> None:
    assert agrees(stated, found) is expected


def test_versions_read_from_pe_resources_and_elf_names(tmp_path: Path) -> None:
    dll = tmp_path / "dxcompiler.dll"
    dll.write_bytes(make_pe(imports=("KERNEL32.dll",), version=DXC))
    found = read_file_version(dll, "runtimes/x/dxcompiler.dll")
    assert found is not None
    assert (found.version, found.publisher) == ("1.9.0.1", "Microsoft(r) Corporation")
    assert found.raw == ("1.9.0.1", "1.9.0.1 (3e6e1485)")
    bare = tmp_path / "bare.dll"
    bare.write_bytes(make_pe(imports=("KERNEL32.dll",)))
    assert read_file_version(bare, "bare.dll") is None
    elf = tmp_path / "libonnxruntime.so.1.24.1"
    elf.write_bytes(make_elf(soname="libonnxruntime.so.1"))
    named = read_file_version(elf, "runtimes/x/libonnxruntime.so.1.24.1")
    assert named is not None and named.version == "1.24.1" and named.evidence == "ELF file name"
    short = tmp_path / "libtbb.so.12"
    short.write_bytes(make_elf(soname="libtbb.so.12"))
    assert read_file_version(short, "libtbb.so.12") is None  # a SONAME major is not a version


CUDART = {  # NVIDIA's cudart64_13.dll in onnxruntime-ep-nv-tensorrt-rtx-cu13 0.5.0 (FACTS.md)
    "CompanyName": "NVIDIA Corporation",
    "FileVersion": "6.14.11.13040",
    "ProductVersion": "13.4.46",
    "ProductName": "NVIDIA CUDA 13.4.46 Runtime",
}


def test_a_dll_is_the_version_of_its_product_not_of_the_file(tmp_path: Path) -> None:
    """cudart64_13.dll numbers the file 6.14.11.13040; the CUDA release it belongs to is 13.4.46."""
    dll = tmp_path / "cudart64_13.dll"
    dll.write_bytes(make_pe(imports=("KERNEL32.dll",), version=CUDART))
    found = read_file_version(dll, "plugins/trt/cudart64_13.dll")
    assert found is not None and found.version == "13.4.46"
    assert found.raw == ("6.14.11.13040", "13.4.46")  # both stay evidence, as the file has them
    resolved = resolve_version(
        "cudart",
        "bundled with onnxruntime-ep-nv-tensorrt-rtx-cu13 0.5.0",
        [("plugins/trt/cudart64_13.dll", dll, "ef" * 32)],
        target="windows-x86_64",
        recipe="recipes/trt.toml",
    )
    assert resolved.version == "13.4.46" and resolved.publisher == "NVIDIA Corporation"
    # only the FileVersion: that is the version there is
    bare = tmp_path / "old.dll"
    bare.write_bytes(make_pe(imports=("KERNEL32.dll",), version={"FileVersion": "2.1.0"}))
    older = read_file_version(bare, "old.dll")
    assert older is not None and older.version == "2.1.0"


def test_a_memo_kept_by_an_older_reading_is_read_again(tmp_path: Path) -> None:
    """An entry written when the FileVersion came first would give cudart 6.14.11.13040."""
    dll = tmp_path / "cudart64_13.dll"
    dll.write_bytes(make_pe(imports=("KERNEL32.dll",), version=CUDART))
    memo = Memo.for_build(tmp_path / "cache", release=False)
    sha = "ef" * 32
    entry = memo.entry("file-versions", memo_key([sha], code=False))
    assert entry is not None
    entry.parent.mkdir(parents=True)
    kept = {"version": "6.14.11.13040", "raw": list(CUDART_RAW), "publisher": "NVIDIA"}
    # as the first memo kept it, and as a later one would mark an older reading
    for stale in (kept, {"reading": 1, "found": kept}):
        entry.write_text(json.dumps(stale))
        found = read_file_version(dll, "cudart64_13.dll", sha256=sha, memo=memo)
        assert found is not None and found.version == "13.4.46"
        again = read_file_version(dll, "cudart64_13.dll", sha256=sha, memo=memo)
        assert again is not None and again.version == "13.4.46"


CUDART_RAW = ("6.14.11.13040", "13.4.46")


def _bundling(fake: FakeProject, version: str) -> FakeProject:
    """The fake runtime's Windows wheel also carries a DirectX compiler, as webgpu's does."""
    fake.windows = windows_members()
    fake.windows["onnxruntime/capi/xcompiler.dll"] = make_pe(imports=("KERNEL32.dll",), version=DXC)
    fake.windows_roots = ["onnxruntime.dll", "xcompiler.dll"]
    fake.windows_licenses = f"""
[[targets.windows-x86_64.licenses]]
component = "fake"
version = "1.0.0"
expression = "MIT"
files = ["[!x]*.dll"]
texts = [{{ source = "windows", member = "onnxruntime/LICENSE" }}]

[[targets.windows-x86_64.licenses]]
component = "xcompiler"
version = "{version}"
expression = "MIT"
files = ["xcompiler.dll"]
texts = [{{ source = "windows", member = "onnxruntime/LICENSE" }}]
"""
    return fake.write()


def test_notice_sbom_and_audit_show_the_version_the_file_carries(
    fake: FakeProject, reporter: Reporter
) -> None:
    _bundling(fake, "bundled with onnxruntime-fake 1.0.0")
    result = build(fake.project, fake.options(), reporter)
    version_dir = result.version_dir
    notice = (version_dir / "windows-x86_64" / "NOTICE").read_text()
    assert (
        "xcompiler 1.9.0.1\nLicence: MIT\nPackage URL: pkg:generic/xcompiler@1.9.0.1\n"
        "Publisher (from its files): Microsoft(r) Corporation\n"
    ) in notice
    assert "bundled with" not in notice
    sbom = json.loads((version_dir / "sbom.cdx.json").read_text())
    component = next(c for c in sbom["components"] if c["name"] == "xcompiler")
    assert component["version"] == "1.9.0.1"
    assert component["publisher"] == "Microsoft(r) Corporation"
    assert component["purl"] == "pkg:generic/xcompiler@1.9.0.1"
    audit = json.loads((version_dir / "audit.json").read_text())
    versions = {
        c["name"]: c["version"] for channel in audit["channels"] for c in channel["components"]
    }
    assert versions["xcompiler"] == "1.9.0.1" and versions["fake"] == "1.0.0"


@pytest.mark.slow
def test_a_stated_version_the_file_contradicts_stops_the_build(
    fake: FakeProject, reporter: Reporter
) -> None:
    _bundling(fake, "1.8.2502.8")
    with pytest.raises(LicenseError) as caught:
        build(fake.project, fake.options(), reporter)
    message = str(caught.value)
    assert "the recipe says xcompiler is 1.8.2502.8" in message
    assert "runtimes/fake/xcompiler.dll says 1.9.0.1 / 1.9.0.1 (3e6e1485)" in message
    assert "target windows-x86_64" in message and "fake.toml" in message
    assert caught.value.exit_code == 9
    assert not (fake.root / "dist").exists()


@pytest.mark.slow
def test_a_stated_version_the_file_confirms_builds(fake: FakeProject, reporter: Reporter) -> None:
    _bundling(fake, "1.9.0.1")
    result = build(fake.project, fake.options(), reporter)
    notice = (result.version_dir / "windows-x86_64" / "NOTICE").read_text()
    assert "xcompiler 1.9.0.1\n" in notice


def test_a_pe_version_is_read_once_per_sha256_with_a_memo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ortbundle.stage.binaries.pe
    import ortbundle.stage.versions

    dll = tmp_path / "dxcompiler.dll"
    dll.write_bytes(make_pe(imports=("KERNEL32.dll",), version=DXC))
    bare = tmp_path / "bare.dll"
    bare.write_bytes(make_pe(imports=("KERNEL32.dll",)))
    reads: list[str] = []
    real = ortbundle.stage.binaries.pe.read_version_info

    def counting(path: Path, label: str) -> object:
        reads.append(label)
        return real(path, label)

    monkeypatch.setattr(
        ortbundle.stage.binaries.pe, "read_version_info", counting
    )  # imported lazily
    memo = Memo.for_build(tmp_path / "cache", release=False)
    first = read_file_version(dll, "runtimes/x/dxcompiler.dll", sha256="ab" * 32, memo=memo)
    again = read_file_version(dll, "runtimes/y/dxcompiler.dll", sha256="ab" * 32, memo=memo)
    assert first is not None and again is not None
    assert (again.path, again.version, again.raw, again.publisher) == (
        "runtimes/y/dxcompiler.dll",
        first.version,
        first.raw,
        first.publisher,
    )
    assert read_file_version(bare, "bare.dll", sha256="cd" * 32, memo=memo) is None
    assert read_file_version(bare, "bare.dll", sha256="cd" * 32, memo=memo) is None
    assert reads == ["runtimes/x/dxcompiler.dll", "bare.dll"]  # each bytes read once
    # a release's memo is off: the file is read every time
    release = Memo.for_build(tmp_path / "cache", release=True)
    read_file_version(dll, "runtimes/x/dxcompiler.dll", sha256="ab" * 32, memo=release)
    assert len(reads) == 3
