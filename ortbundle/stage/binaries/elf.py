"""ELF: SONAME, DT_NEEDED, RUNPATH, machine, PT_LOAD alignment, symbol-version needs, the
Android API note, the exported symbols and the execution providers its read-only data names,
through pyelftools' header and dynamic-segment parse and plain reads of what the tags point at;
and the bytes of named sections (read-only data, the compiler's .comment) for the licence
evidence a library carries."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from ortbundle._core.errors import BinaryError
from ortbundle.stage.binaries import providers
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
            dyn: dict[str, int] = {}  # the _TAGS: version needs, symbols, relocations
            segments: list[_Segment] = []
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
                    segments.append(
                        _Segment(
                            int(segment["p_offset"]),
                            int(segment["p_vaddr"]),
                            int(segment["p_filesz"]),
                            writable=bool(int(segment["p_flags"]) & _PF_W),
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
                        elif dtype in _TAGS:
                            dyn[dtype] = int(tag.entry.d_val)
                elif kind == "PT_NOTE":
                    android_api = (
                        _android_api(segment.data(), little=elf.little_endian) or android_api
                    )
            image = _Image(elf, stream, segments)
            version_needs = _version_needs(elf, stream, dyn)
            exports = _exports(image, dyn)
            ep_names, available = _providers(image, dyn)
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
        exports=exports,
        ep_names=ep_names,
        available_providers=available,
    )


_VERSION_TAGS = ("DT_VERNEED", "DT_VERNEEDNUM", "DT_STRTAB", "DT_STRSZ")
_SYMBOL_TAGS = ("DT_SYMTAB", "DT_SYMENT", "DT_HASH", "DT_GNU_HASH")
_RELOCATION_TAGS = ("DT_RELA", "DT_RELASZ", "DT_RELAENT")
_TAGS = frozenset(_VERSION_TAGS + _SYMBOL_TAGS + _RELOCATION_TAGS)
_PF_W = 2
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


@dataclass(frozen=True)
class _Segment:
    """A PT_LOAD segment's file bytes and where they are mapped."""

    offset: int
    vaddr: int
    size: int  # p_filesz: what the file holds of it
    writable: bool


class _Image:
    """Reads of an ELF file by offset or virtual address, never past its end: a corrupt count
    must not ask for gigabytes."""

    def __init__(self, elf: ELFFile, stream: BinaryIO, segments: list[_Segment]) -> None:
        self.elf, self.stream, self.segments = elf, stream, segments
        self.size = stream.seek(0, os.SEEK_END)
        self.pointer = 8 if elf.elfclass == 64 else 4
        self.order = "<" if elf.little_endian else ">"

    def read(self, offset: int, length: int) -> bytes:
        if offset < 0 or length <= 0 or offset >= self.size:
            return b""
        self.stream.seek(offset)
        return self.stream.read(min(length, self.size - offset))

    def at(self, vaddr: int, length: int) -> bytes:
        for seg in self.segments:
            if seg.vaddr <= vaddr < seg.vaddr + seg.size:
                return self.read(seg.offset + vaddr - seg.vaddr, length)
        return b""

    def word(self, vaddr: int) -> int | None:
        data = self.at(vaddr, self.pointer)
        return int.from_bytes(data, "little") if len(data) == self.pointer else None


_MAX_SYMBOLS = 1 << 22  # a real library has at most some hundred thousand
_EXPORTED_BINDINGS = (1, 2, 10)  # STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE
_NOT_EXPORTS = (3, 4)  # STT_SECTION, STT_FILE
_VISIBLE = (0, 3)  # STV_DEFAULT, STV_PROTECTED


def _exports(image: _Image, dyn: dict[str, int]) -> tuple[str, ...]:
    """The C names the library defines for others to look up: DT_SYMTAB's global and weak
    symbols that have a section and default or protected visibility.

    C++ names (`_Z…`) are left out: ONNX Runtime finds a library's entry points by C name
    (`OrtGetApiBase`, `CreateEpFactories`, `GetProvider`), and OpenVINO alone exports tens of
    thousands of C++ symbols that would only weigh down every memo."""
    if "DT_SYMTAB" not in dyn or "DT_STRTAB" not in dyn:
        return ()
    wide = image.pointer == 8
    least = 24 if wide else 16
    entsize = dyn.get("DT_SYMENT") or least
    count = min(_symbol_count(image, dyn), _MAX_SYMBOLS)
    if entsize < least or count <= 0:
        return ()
    table = image.at(dyn["DT_SYMTAB"], count * entsize)
    strings = image.at(dyn["DT_STRTAB"], dyn.get("DT_STRSZ", 0) or 1 << 20)
    # Elf64_Sym: name, info, other, shndx, value, size; Elf32_Sym: name, value, size, info, …
    layout = f"{image.order}IBBH" if wide else f"{image.order}I8xBBH"
    names: set[str] = set()
    for at in range(0, len(table) - entsize + 1, entsize):
        name, info, other, shndx = struct.unpack_from(layout, table, at)
        if (
            not name
            or not shndx
            or info >> 4 not in _EXPORTED_BINDINGS
            or info & 0xF in _NOT_EXPORTS
            or other & 3 not in _VISIBLE
        ):
            continue
        end = strings.find(b"\0", name)
        text = strings[name:end] if end > name else b""
        if text and not text.startswith(b"_Z"):
            names.add(text.decode("utf-8", errors="replace"))
    return tuple(sorted(names))


def _symbol_count(image: _Image, dyn: dict[str, int]) -> int:
    """How many entries DT_SYMTAB has: DT_HASH says so (nchain); DT_GNU_HASH says it through
    the chain of its highest bucket, whose last entry has the low bit set."""
    order = image.order
    if "DT_HASH" in dyn:
        head = image.at(dyn["DT_HASH"], 8)
        return int(struct.unpack(f"{order}II", head)[1]) if len(head) == 8 else 0
    if "DT_GNU_HASH" not in dyn:
        return 0
    at = dyn["DT_GNU_HASH"]
    head = image.at(at, 16)
    if len(head) < 16:
        return 0
    nbuckets, symoffset, bloom, _shift = struct.unpack(f"{order}IIII", head)
    buckets_at = at + 16 + bloom * image.pointer
    buckets = image.at(buckets_at, 4 * nbuckets)
    if len(buckets) < 4 * nbuckets:
        return 0
    last = max(struct.unpack(f"{order}{nbuckets}I", buckets), default=0)
    if last < symoffset:
        return int(symoffset)
    chains_at = buckets_at + 4 * nbuckets
    index = last
    while index - last < _MAX_SYMBOLS:
        block = image.at(chains_at + 4 * (index - symoffset), 1 << 14)
        if len(block) < 4:
            return 0
        for (value,) in struct.iter_unpack(f"{order}I", block[: len(block) // 4 * 4]):
            index += 1
            if value & 1:
                return int(index)
    return 0


_SHT_NOBITS = 8


def _read_only_data(image: _Image) -> list[tuple[int, bytes]]:
    """(address, bytes) of the read-only data: the `.rodata*` sections, read through the raw
    section header table (pyelftools' section objects would parse the hash tables again); a
    file without one (sstripped) gives its segments that are not writable."""
    header = image.elf.header
    wide = image.pointer == 8
    shoff, shnum, shentsize = header["e_shoff"], header["e_shnum"], header["e_shentsize"]
    if not shoff or not shnum or shentsize < (64 if wide else 40):
        return [(s.vaddr, image.read(s.offset, s.size)) for s in image.segments if not s.writable]
    table = image.read(shoff, shnum * shentsize)
    layout = f"{image.order}IIQQQQ" if wide else f"{image.order}IIIIII"
    rows = [
        struct.unpack_from(layout, table, i * shentsize) for i in range(len(table) // shentsize)
    ]
    index = header["e_shstrndx"]
    if index >= len(rows):
        return []
    labels = image.read(rows[index][4], rows[index][5])
    out = []
    for name, kind, _flags, addr, offset, size in rows:
        end = labels.find(b"\0", name)
        if kind != _SHT_NOBITS and end > name and labels[name:end].startswith(b".rodata"):
            out.append((int(addr), image.read(offset, size)))
    return out


def _providers(image: _Image, dyn: dict[str, int]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The provider names the read-only data holds, and (a core's) the ones its table marks
    available: the pointers to the names are RELA addends, or written in place (REL, RELR,
    and GNU ld, which also writes a RELA addend into its slot)."""
    names: dict[int, str] = {}
    for vaddr, data in _read_only_data(image):
        names.update(providers.named_providers(data, vaddr))
    found = tuple(sorted(set(names.values())))
    if providers.CPU not in found or not image.elf.little_endian:
        return found, ()
    relocated: dict[int, int] = {}
    if "DT_RELA" in dyn and dyn.get("DT_RELAENT", 3 * image.pointer) == 3 * image.pointer:
        table = image.at(dyn["DT_RELA"], dyn.get("DT_RELASZ", 0))
        relocated = providers.rela_pointers(table, names, image.pointer)
    cpu = [address for address, name in names.items() if name == providers.CPU]
    slots = {slot for slot, target in relocated.items() if target in cpu}
    for seg in image.segments:
        if seg.writable:
            data = image.read(seg.offset, seg.size)
            slots.update(providers.in_place_pointers(data, seg.vaddr, cpu, image.pointer))

    def target_of(slot: int) -> int | None:
        return relocated[slot] if slot in relocated else image.word(slot)

    available = providers.available_providers(names, slots, target_of, image.word, image.pointer)
    return found, available


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


def defined_symbol_names(path: Path, label: str) -> bytes:
    """The names of the symbols `.dynsym` defines (C++ names included), NUL-joined: a
    header-only library compiled in (Eigen, a copy of abseil's string_view) may leave no
    string in `.rodata`, only its namespace in the mangled names of the code it became. Names
    the library only imports are left out: they are another library's code."""
    sections = section_bytes(path, label, (".dynsym", ".dynstr"))
    table, strings = sections.get(".dynsym", b""), sections.get(".dynstr", b"")
    with path.open("rb") as stream:
        ident = stream.read(6)
    if len(ident) < 6 or not table or not strings:
        return b""
    wide = ident[4] == 2
    order = ">" if ident[5] == 2 else "<"
    entsize = 24 if wide else 16
    layout = f"{order}IBBH" if wide else f"{order}I8xBBH"
    found: list[bytes] = []
    for at in range(0, len(table) - entsize + 1, entsize):
        name, _info, _other, shndx = struct.unpack_from(layout, table, at)
        if not name or not shndx:
            continue
        end = strings.find(b"\0", name)
        if end > name:
            found.append(strings[name:end])
    return b"\0".join(found)
