"""What bionic's linker checks before it maps a library, re-read independently after a rewrite.

patchelf renaming an Android library moves `.dynstr` (and the notes beside it) into a new
PT_LOAD and grows the program header table. `soname._verify` already reads the names back;
this module checks the layout the Android linker relies on (linker_phdr.cpp: ReadProgramHeaders,
ReserveAddressSpace, LoadSegments, CheckPhdr, ReadDynamicSection), through pyelftools alone:

- every PT_LOAD lies within the file, has `p_filesz <= p_memsz`, a power-of-two `p_align` of at
  least the page size and `p_vaddr ≡ p_offset (mod p_align)`; the PT_LOADs ascend and their
  page-rounded address ranges do not overlap (each is mapped MAP_FIXED over the reservation);
- PT_PHDR, PT_DYNAMIC and every PT_NOTE lie inside a loaded segment, at the same place in the
  file and in memory;
- the section headers are well formed (`e_shentsize`, `e_shstrndx`); `.dynamic` links to a
  STRTAB that `DT_STRTAB`/`DT_STRSZ` name and a loaded segment maps; `.dynsym` and the hash,
  version and relocation sections link where they must; every allocated section sits inside a
  loaded segment at matching file and memory positions; every DT_NEEDED/DT_SONAME string lies
  within `DT_STRSZ`.

It also reads `.note.android.ident` (the NDK's record of the API level a library was built
for), which a package's minSdk must not undercut.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ortbundle._core.errors import BinaryError

if TYPE_CHECKING:  # pyelftools (48 modules) loads only when a library is checked
    from elftools.elf.elffile import ELFFile

__all__ = ["android_api_level", "check_loadable", "loadable_problems"]

_ANDROID_NOTE = ".note.android.ident"
# sections whose sh_link must name .dynsym (SHT_DYNSYM) when the file has one
_LINKS_TO_DYNSYM = ("SHT_GNU_HASH", "SHT_HASH", "SHT_GNU_versym", "SHT_RELA", "SHT_REL")


@dataclass(frozen=True)
class _Load:
    offset: int
    vaddr: int
    filesz: int
    memsz: int

    def holds(self, offset: int, vaddr: int, size: int) -> bool:
        """Bytes [offset, offset+size) of the file are mapped at vaddr by this segment."""
        return (
            self.offset <= offset
            and offset + size <= self.offset + self.filesz
            and vaddr - self.vaddr == offset - self.offset
        )


def _round_down(value: int, page: int) -> int:
    return value & ~(page - 1)


def _round_up(value: int, page: int) -> int:
    return (value + page - 1) & ~(page - 1)


def loadable_problems(path: Path, page_size: int) -> list[str]:
    """Everything the Android linker would refuse in `path`, one line each; [] when none."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        with path.open("rb") as stream:
            return _problems(ELFFile(stream), path.stat().st_size, page_size)
    except (ELFError, Exception) as exc:  # noqa: BLE001 - pyelftools also raises struct errors
        return [f"not a readable ELF file ({type(exc).__name__}: {exc})"]


def check_loadable(path: Path, *, page_size: int, label: str, fix: str) -> None:
    """Raise a BinaryError naming `label` and every problem, or return."""
    problems = loadable_problems(path, page_size)
    if problems:
        raise BinaryError(
            f"{label} would not load on Android: {'; '.join(problems)}", file=label, fix=fix
        )


def android_api_level(path: Path) -> int | None:
    """The API level `.note.android.ident` records (the NDK writes it), or None without one."""
    from elftools.elf.elffile import ELFFile

    with path.open("rb") as stream:
        elf = ELFFile(stream)
        section = elf.get_section_by_name(_ANDROID_NOTE)
        if section is None:
            return None
        data = section.data()
    namesz, descsz, _kind = struct.unpack_from("<III", data)
    start = 12 + _round_up(namesz, 4)
    if data[12 : 12 + namesz].rstrip(b"\x00") != b"Android" or descsz < 4:
        return None
    return int(struct.unpack_from("<I", data, start)[0])


def _problems(elf: ELFFile, file_size: int, page: int) -> list[str]:
    problems: list[str] = []
    loads: list[_Load] = []
    segments: list[tuple[str, Any]] = [(str(s["p_type"]), s) for s in elf.iter_segments()]
    for index, (kind, seg) in enumerate(segments):
        if kind != "PT_LOAD":
            continue
        where = f"PT_LOAD at program header {index} (offset {seg['p_offset']:#x})"
        offset, vaddr, align = int(seg["p_offset"]), int(seg["p_vaddr"]), int(seg["p_align"])
        filesz, memsz = int(seg["p_filesz"]), int(seg["p_memsz"])
        if offset + filesz > file_size:
            problems.append(f"{where} runs past the end of the file")
        if filesz > memsz:
            problems.append(f"{where} has p_filesz {filesz:#x} above p_memsz {memsz:#x}")
        if align & (align - 1) or align < page:
            problems.append(f"{where} is aligned to {align:#x}, not a power of two >= {page:#x}")
        elif vaddr % align != offset % align:
            problems.append(f"{where}: p_vaddr {vaddr:#x} is not congruent to p_offset mod align")
        loads.append(_Load(offset, vaddr, filesz, memsz))
    if not loads:
        return [*problems, "no PT_LOAD segment"]
    for first, second in itertools.pairwise(loads):
        if second.vaddr < first.vaddr:
            problems.append(f"PT_LOAD at vaddr {second.vaddr:#x} follows a higher one")
        elif _round_up(first.vaddr + first.memsz, page) > _round_down(second.vaddr, page):
            problems.append(
                f"PT_LOADs at vaddr {first.vaddr:#x} and {second.vaddr:#x} overlap once "
                f"rounded to {page:#x}-byte pages"
            )
    for index, (kind, seg) in enumerate(segments):
        if kind in ("PT_PHDR", "PT_DYNAMIC", "PT_NOTE"):
            offset, vaddr, size = int(seg["p_offset"]), int(seg["p_vaddr"]), int(seg["p_filesz"])
            if not any(load.holds(offset, vaddr, size) for load in loads):
                problems.append(
                    f"{kind} at program header {index} (offset {offset:#x}, vaddr {vaddr:#x}) "
                    "is not inside a loaded segment"
                )
    if elf.num_sections():
        problems += _section_problems(elf, loads, segments)
    return problems


def _section_problems(
    elf: ELFFile, loads: list[_Load], segments: list[tuple[str, Any]]
) -> list[str]:
    problems: list[str] = []
    expected = 64 if elf.elfclass == 64 else 40
    if int(elf["e_shentsize"]) != expected:
        problems.append(f"e_shentsize is {elf['e_shentsize']}, not {expected}")
    if not 0 < int(elf["e_shstrndx"]) < elf.num_sections():
        problems.append(f"e_shstrndx {elf['e_shstrndx']} names no section")
    sections: list[Any] = list(elf.iter_sections())
    by_type: dict[str, list[int]] = {}
    for index, section in enumerate(sections):
        by_type.setdefault(str(section["sh_type"]), []).append(index)
        flags, kind = int(section["sh_flags"]), str(section["sh_type"])
        if flags & 2 and kind != "SHT_NOBITS" and int(section["sh_size"]):  # SHF_ALLOC
            offset, addr, size = (int(section[k]) for k in ("sh_offset", "sh_addr", "sh_size"))
            if not any(load.holds(offset, addr, size) for load in loads):
                problems.append(
                    f"section {section.name} (offset {offset:#x}, address {addr:#x}) is "
                    "allocated but not inside a loaded segment"
                )
    dynsym = by_type.get("SHT_DYNSYM", [])
    for kind in _LINKS_TO_DYNSYM:
        for index in by_type.get(kind, []) if dynsym else []:
            section = sections[index]
            if kind in ("SHT_RELA", "SHT_REL") and not int(section["sh_flags"]) & 2:
                continue  # a relocation section of a debug table, not of .dynsym
            if int(section["sh_link"]) not in dynsym:
                problems.append(
                    f"section {section.name} links to {section['sh_link']}, not .dynsym"
                )
    dynamics = by_type.get("SHT_DYNAMIC", [])
    if len(dynamics) != 1:
        problems.append(f"{len(dynamics)} SHT_DYNAMIC sections, not one")
        return problems
    dynamic = sections[dynamics[0]]
    pt_dynamic = [s for kind, s in segments if kind == "PT_DYNAMIC"]
    if len(pt_dynamic) != 1 or int(pt_dynamic[0]["p_vaddr"]) != int(dynamic["sh_addr"]):
        problems.append("PT_DYNAMIC does not match the .dynamic section")
    link = int(dynamic["sh_link"])
    strtab = sections[link] if 0 < link < len(sections) else None
    if strtab is None or str(strtab["sh_type"]) != "SHT_STRTAB":
        problems.append(f".dynamic links to section {link}, not a STRTAB")
        return problems
    for index in dynsym:
        if int(sections[index]["sh_link"]) != link:
            problems.append(f".dynsym links to {sections[index]['sh_link']}, not {strtab.name}")
    tags = {str(t.entry.d_tag): int(t.entry.d_val) for t in dynamic.iter_tags()}
    strsz = tags.get("DT_STRSZ", -1)
    if tags.get("DT_STRTAB") != int(strtab["sh_addr"]) or strsz > int(strtab["sh_size"]):
        problems.append(
            f"DT_STRTAB/DT_STRSZ ({tags.get('DT_STRTAB', 0):#x}, {strsz:#x}) do not name "
            f"{strtab.name} ({strtab['sh_addr']:#x}, {strtab['sh_size']:#x})"
        )
    if dynsym and tags.get("DT_SYMTAB") != int(sections[dynsym[0]]["sh_addr"]):
        problems.append("DT_SYMTAB does not name .dynsym")
    for tag in dynamic.iter_tags():
        kind = str(tag.entry.d_tag)
        if kind in ("DT_NEEDED", "DT_SONAME", "DT_RUNPATH", "DT_RPATH") and not (
            0 <= int(tag.entry.d_val) < strsz
        ):
            problems.append(f"{kind} points past DT_STRSZ")
    return problems
