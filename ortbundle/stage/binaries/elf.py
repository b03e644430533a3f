"""ELF: SONAME, DT_NEEDED, RUNPATH, machine, PT_LOAD alignment, symbol-version needs and the
Android API note, through pyelftools; and the bytes of named sections (read-only data, the
compiler's .comment) for the licence evidence a library carries."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, BinaryIO

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from ortbundle._core.errors import BinaryError
from ortbundle.stage.binaries.info import BinaryInfo, LoadSegment


def inspect_elf(path: Path, label: str) -> BinaryInfo:
    try:
        with path.open("rb") as stream:
            elf = ELFFile(stream)
            machine = str(elf["e_machine"])
            bits = int(elf.elfclass)
            loads: list[LoadSegment] = []
            needed: list[str] = []
            soname: str | None = None
            runpath: list[str] = []
            dyn: dict[str, int] = {}  # DT_VERNEED, DT_VERNEEDNUM, DT_STRTAB, DT_STRSZ
            android_api = 0
            segment: Any
            for segment in elf.iter_segments():
                kind = segment["p_type"]
                if kind == "PT_LOAD":
                    loads.append(
                        LoadSegment(
                            offset=int(segment["p_offset"]),
                            vaddr=int(segment["p_vaddr"]),
                            align=int(segment["p_align"]),
                        )
                    )
                elif kind == "PT_DYNAMIC":
                    for tag in segment.iter_tags():
                        dtype = tag.entry.d_tag
                        if dtype == "DT_NEEDED":
                            needed.append(str(tag.needed))
                        elif dtype == "DT_SONAME":
                            soname = str(tag.soname)
                        elif dtype in ("DT_RUNPATH", "DT_RPATH"):
                            value = getattr(tag, "runpath", None) or getattr(tag, "rpath", "")
                            runpath.extend(str(value).split(":"))
                        elif dtype in _VERSION_TAGS:
                            dyn[dtype] = int(tag.entry.d_val)
                elif kind == "PT_NOTE":
                    android_api = (
                        _android_api(segment.data(), little=elf.little_endian) or android_api
                    )
            version_needs = _version_needs(elf, stream, dyn)
    except (ELFError, Exception) as exc:  # noqa: BLE001 - pyelftools also raises raw struct errors
        raise BinaryError(
            f"{label} is not a readable ELF file ({type(exc).__name__}: {exc})",
            file=label,
            fix="the library is truncated or corrupt; check the pin and the archive",
        ) from None
    if not loads:
        raise BinaryError(
            f"{label} has no loadable segment (PT_LOAD): it is not a shared library",
            file=label,
            fix="the recipe's library glob takes a file that is not a library, or it is corrupt",
        )
    return BinaryInfo(
        format="elf",
        bits=bits,
        machine=machine,
        soname=soname,
        needed=tuple(needed),
        runpath=tuple(r for r in runpath if r),
        loads=tuple(loads),
        version_needs=version_needs,
        android_api=android_api,
    )


_VERSION_TAGS = ("DT_VERNEED", "DT_VERNEEDNUM", "DT_STRTAB", "DT_STRSZ")
_MAX_VERSION_ENTRIES = 4096  # a real library has a few dozen; a corrupt one must not spin


def _version_needs(
    elf: ELFFile, stream: BinaryIO, dyn: dict[str, int]
) -> tuple[tuple[str, str], ...]:
    """`.gnu.version_r` as (file, version node) pairs, found through DT_VERNEED.

    Read from the dynamic tags the closure already walks, not the section table: building
    pyelftools' section objects parses the GNU hash table again (5 ms per large library).
    Elf_Verneed and Elf_Vernaux are 16 bytes each in both ELF classes."""
    if "DT_VERNEED" not in dyn or "DT_STRTAB" not in dyn:
        return ()
    order = "<" if elf.little_endian else ">"
    stream.seek(_file_offset(elf, dyn["DT_STRTAB"]))
    strings = stream.read(dyn.get("DT_STRSZ", 0) or 1 << 20)

    def name(offset: int) -> str:
        end = strings.index(b"\0", offset)
        return strings[offset:end].decode("utf-8", errors="replace")

    needs: list[tuple[str, str]] = []
    entry = _file_offset(elf, dyn["DT_VERNEED"])
    for _ in range(min(dyn.get("DT_VERNEEDNUM", 1), _MAX_VERSION_ENTRIES)):
        stream.seek(entry)
        _version, count, file, aux, following = struct.unpack(f"{order}HHIII", stream.read(16))
        at = entry + aux
        for _ in range(min(count, _MAX_VERSION_ENTRIES)):
            stream.seek(at)
            _hash, _flags, _other, node, step = struct.unpack(f"{order}IHHII", stream.read(16))
            needs.append((name(file), name(node)))
            if not step:
                break
            at += step
        if not following:
            break
        entry += following
    return tuple(sorted(set(needs)))


def _file_offset(elf: ELFFile, address: int) -> int:
    """The file offset of a virtual address, through the PT_LOAD segments."""
    for offset in elf.address_offsets(address):
        return int(offset)
    raise ValueError(f"address {address:#x} is in no loadable segment")


def _android_api(data: bytes, *, little: bool) -> int:
    """The API level in a PT_NOTE segment's NDK note (.note.android.ident), else 0.

    Each note is namesz, descsz, type, the name NUL-padded to 4, the descriptor padded to 4;
    the NDK's is named "Android", type 1, and its descriptor starts with the API level (u32)."""
    order = "<" if little else ">"
    at = 0
    while at + 12 <= len(data):
        namesz, descsz, kind = struct.unpack_from(f"{order}III", data, at)
        name = data[at + 12 : at + 12 + namesz].rstrip(b"\0")
        desc = at + 12 + ((namesz + 3) & ~3)
        if kind == 1 and name == b"Android" and descsz >= 4 and desc + 4 <= len(data):
            return int(struct.unpack_from(f"{order}I", data, desc)[0])
        at = desc + ((descsz + 3) & ~3)
    return 0


def section_bytes(path: Path, label: str, names: tuple[str, ...]) -> dict[str, bytes]:
    """The contents of the named sections a file has (a stripped one may lack them): where a
    library keeps the copyright and licence strings it was built with."""
    try:
        with path.open("rb") as stream:
            elf = ELFFile(stream)
            found: dict[str, bytes] = {}
            for name in names:
                section = elf.get_section_by_name(name)
                if section is not None and section["sh_type"] != "SHT_NOBITS":
                    found[name] = bytes(section.data())
            return found
    except (ELFError, Exception) as exc:  # noqa: BLE001 - pyelftools also raises raw struct errors
        raise BinaryError(
            f"{label} has unreadable sections ({type(exc).__name__}: {exc})",
            file=label,
            fix="the library is truncated or corrupt; check the pin and the archive",
        ) from None
