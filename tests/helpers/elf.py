"""Build minimal but well-formed ELF64 shared libraries with chosen SONAME, NEEDED and machine."""

from __future__ import annotations

import struct

EM = {"EM_X86_64": 62, "EM_AARCH64": 183, "EM_386": 3, "EM_QDSP6": 164, "EM_ARM": 40}
PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RUNPATH = 0, 1, 5, 10, 14, 29


def make_elf(
    *,
    machine: str = "EM_X86_64",
    soname: str | None = None,
    needed: tuple[str, ...] = (),
    runpath: str | None = None,
    align: int = 0x1000,
    payload: bytes = b"",
) -> bytes:
    """A little-endian ELF64 ET_DYN with one PT_LOAD covering the file and a PT_DYNAMIC."""
    ehsize, phentsize, phnum = 64, 56, 2
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
    entries += [(DT_STRTAB, strtab_off), (DT_STRSZ, len(strtab)), (DT_NULL, 0)]
    dynamic = b"".join(struct.pack("<qQ", tag, value) for tag, value in entries)
    body_end = dyn_off + len(dynamic)
    total = body_end + len(payload)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\x00" * 8
    header = ident + struct.pack(
        "<HHIQQQIHHHHHH", 3, EM[machine], 1, 0, ehsize, 0, 0, ehsize, phentsize, phnum, 64, 0, 0
    )
    load = struct.pack("<IIQQQQQQ", PT_LOAD, 5, 0, 0, 0, total, total, align)
    dyn = struct.pack(
        "<IIQQQQQQ", PT_DYNAMIC, 6, dyn_off, dyn_off, dyn_off, len(dynamic), len(dynamic), 8
    )
    out = bytearray(header + load + dyn + strtab)
    out += b"\x00" * (dyn_off - len(out))
    out += dynamic + payload
    return bytes(out)
