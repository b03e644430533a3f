"""Build minimal but well-formed ELF shared libraries with chosen SONAME, NEEDED, machine, class
and PT_LOAD layout: small enough to write per test, real enough for pyelftools, readelf and
patchelf (which refuses a file without section headers)."""

from __future__ import annotations

import struct
from collections.abc import Sequence

EM = {"EM_X86_64": 62, "EM_AARCH64": 183, "EM_386": 3, "EM_QDSP6": 164, "EM_ARM": 40}
PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RUNPATH = 0, 1, 5, 10, 14, 29
SHT_STRTAB, SHT_DYNAMIC = 3, 6
SHF_WRITE, SHF_ALLOC = 1, 2
PF_R, PF_W, PF_X = 4, 2, 1


def make_elf(
    *,
    machine: str = "EM_X86_64",
    soname: str | None = None,
    needed: tuple[str, ...] = (),
    runpath: str | None = None,
    align: int = 0x1000,
    payload: bytes = b"",
    bits: int = 64,
    sections: bool = True,
    loads: Sequence[tuple[int, int, int]] | None = None,
) -> bytes:
    """A little-endian ET_DYN: ELF header, program headers, .dynstr, .dynamic, payload.

    `loads` lists the PT_LOAD segments as (offset, vaddr, align); the first must start at offset
    0, since it maps the headers and the dynamic data (its vaddr may be anything, so
    `[(0, 0x100, 0x4000)]` gives a vaddr not congruent to the offset). Each later segment starts
    at its offset (the file is padded to reach it) and runs to the next one. The default is one
    segment `(0, 0, align)` covering the file. With `sections`, a section header table
    (.dynstr, .dynamic, .shstrtab) follows everything loaded; without, the bytes are the ones
    this helper has always produced.
    """
    if bits not in (32, 64):
        raise ValueError(f"bits must be 32 or 64, not {bits}")
    layout = list(loads) if loads is not None else [(0, 0, align)]
    if not layout or layout[0][0] != 0:
        raise ValueError("the first PT_LOAD must start at offset 0: it maps the dynamic data")
    wide = bits == 64
    word = 8 if wide else 4
    ehsize, phentsize, shentsize = (64, 56, 64) if wide else (52, 32, 40)
    phnum = len(layout) + 1
    base = layout[0][1]  # vaddr of offset 0: the first segment maps the headers and .dynamic

    strtab = bytearray(b"\x00")
    offsets: dict[str, int] = {}
    for name in (*needed, *(n for n in (soname, runpath) if n)):
        if name not in offsets:
            offsets[name] = len(strtab)
            strtab += name.encode() + b"\x00"
    strtab_off = ehsize + phentsize * phnum
    dyn_off = strtab_off + len(strtab)
    dyn_off += -dyn_off % 8
    entries = [(DT_NEEDED, offsets[n]) for n in needed]
    if soname:
        entries.append((DT_SONAME, offsets[soname]))
    if runpath:
        entries.append((DT_RUNPATH, offsets[runpath]))
    entries += [(DT_STRTAB, base + strtab_off), (DT_STRSZ, len(strtab)), (DT_NULL, 0)]
    dyn_format = "<qQ" if wide else "<iI"
    dynamic = b"".join(struct.pack(dyn_format, tag, value) for tag, value in entries)

    body = bytearray(b"\x00" * strtab_off + strtab)
    body += b"\x00" * (dyn_off - len(body))
    body += dynamic + payload
    for offset, _vaddr, _align in layout[1:]:
        body += b"\x00" * (offset - len(body))
        if offset >= len(body):
            body += b"\x00" * 16  # something for a later segment to map
    loaded_end = len(body)

    starts = sorted({offset for offset, _vaddr, _align in layout})
    phdrs = bytearray()
    for index, (offset, vaddr, seg_align) in enumerate(layout):
        end = next((s for s in starts if s > offset), loaded_end)
        size = end - offset
        flags = PF_R | PF_X if index == 0 else PF_R | PF_W
        phdrs += _phdr(wide, PT_LOAD, flags, offset, vaddr, size, seg_align)
    phdrs += _phdr(wide, PT_DYNAMIC, PF_R | PF_W, dyn_off, base + dyn_off, len(dynamic), word)

    shoff = shnum = shstrndx = 0
    tail = bytearray()
    if sections:
        names = b"\x00.dynstr\x00.dynamic\x00.shstrtab\x00"
        shstr_off = loaded_end + (-loaded_end % word)
        shoff = shstr_off + len(names)
        shoff += -shoff % word
        tail += b"\x00" * (shstr_off - loaded_end) + names
        tail += b"\x00" * (shoff - shstr_off - len(names))
        dynstr_name, dynamic_name, shstrtab_name = 1, 9, 18
        tail += _shdr(wide, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        tail += _shdr(
            wide, dynstr_name, SHT_STRTAB, SHF_ALLOC, base + strtab_off, strtab_off,
            len(strtab), 0, 1, 0,
        )  # fmt: skip
        tail += _shdr(
            wide, dynamic_name, SHT_DYNAMIC, SHF_WRITE | SHF_ALLOC, base + dyn_off, dyn_off,
            len(dynamic), 1, word, 2 * word,
        )  # fmt: skip
        tail += _shdr(wide, shstrtab_name, SHT_STRTAB, 0, 0, shstr_off, len(names), 0, 1, 0)
        shnum, shstrndx = 4, 3

    ident = b"\x7fELF" + bytes([2 if wide else 1, 1, 1, 0]) + b"\x00" * 8
    fields = (EM[machine], 1, 0, ehsize, shoff, 0, ehsize, phentsize, phnum, shentsize)
    header_format = "<HHIQQQIHHHHHH" if wide else "<HHIIIIIHHHHHH"
    header = ident + struct.pack(header_format, 3, *fields, shnum, shstrndx)
    body[: len(header) + len(phdrs)] = header + phdrs
    return bytes(body + tail)


def _phdr(
    wide: bool, kind: int, flags: int, offset: int, vaddr: int, size: int, align: int
) -> bytes:
    if wide:
        return struct.pack("<IIQQQQQQ", kind, flags, offset, vaddr, vaddr, size, size, align)
    return struct.pack("<IIIIIIII", kind, offset, vaddr, vaddr, size, size, flags, align)


def _shdr(
    wide: bool,
    name: int,
    kind: int,
    flags: int,
    addr: int,
    offset: int,
    size: int,
    link: int,
    addralign: int,
    entsize: int,
) -> bytes:
    if wide:
        return struct.pack(
            "<IIQQQQIIQQ", name, kind, flags, addr, offset, size, link, 0, addralign, entsize
        )
    return struct.pack(
        "<IIIIIIIIII", name, kind, flags, addr, offset, size, link, 0, addralign, entsize
    )
