"""Build minimal but well-formed PE32+ DLLs with chosen imports (by ordinal, or by name),
delay imports, and OS / subsystem versions in the optional header."""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

MACHINE = {"AMD64": 0x8664, "ARM64": 0xAA64, "I386": 0x14C}
SECTION_RVA = 0x1000
FILE_ALIGN = 0x200


def make_pe(
    *,
    machine: str = "AMD64",
    imports: tuple[str, ...] = (),
    delay_imports: tuple[str, ...] = (),
    payload: bytes = b"",
    functions: Mapping[str, Sequence[str]] | None = None,
    os_version: tuple[int, int] = (6, 0),
    subsystem_version: tuple[int, int] = (6, 0),
) -> bytes:
    """A DLL whose single .rdata section holds the import and delay-import directories.

    Each import takes one function by ordinal, or the ones `functions` names for that DLL by
    name (hint/name entries); the header's OS and subsystem versions are the defaults of the
    MSVC linker for x64 unless given."""
    section = bytearray()

    def put(data: bytes, align: int = 8) -> int:
        section.extend(b"\x00" * (-len(section) % align))
        offset = len(section)
        section.extend(data)
        return SECTION_RVA + offset

    def thunks(names: Sequence[str] = ()) -> int:
        # one import by ordinal, or each name's hint/name RVA, then the terminator: pefile
        # skips DLLs with no imports
        if not names:
            return put(struct.pack("<QQ", 0x8000000000000001, 0))
        hints = [put(struct.pack("<H", 0) + n.encode() + b"\x00", 2) for n in names]
        return put(struct.pack(f"<{len(hints) + 1}Q", *hints, 0))

    import_descs = []
    for dll in imports:
        name = put(dll.encode() + b"\x00", 2)
        wanted = (functions or {}).get(dll, ())
        ilt, iat = thunks(wanted), thunks(wanted)
        import_descs.append(struct.pack("<IIIII", ilt, 0, 0, name, iat))
    delay_descs = []
    for dll in delay_imports:
        name = put(dll.encode() + b"\x00", 2)
        handle = put(b"\x00" * 8)
        iat, int_ = thunks(), thunks()
        delay_descs.append(struct.pack("<IIIIIIII", 1, name, handle, iat, int_, 0, 0, 0))
    import_rva = put(b"".join(import_descs) + b"\x00" * 20, 4) if imports else 0
    import_size = 20 * (len(imports) + 1) if imports else 0
    delay_rva = put(b"".join(delay_descs) + b"\x00" * 32, 4) if delay_imports else 0
    delay_size = 32 * (len(delay_imports) + 1) if delay_imports else 0
    section.extend(payload)
    raw_size = len(section) + (-len(section) % FILE_ALIGN) or FILE_ALIGN
    section.extend(b"\x00" * (raw_size - len(section)))

    dos = bytearray(64)
    dos[0:2] = b"MZ"
    struct.pack_into("<I", dos, 0x3C, 64)
    coff = struct.pack("<HHIIIHH", MACHINE[machine], 1, 0, 0, 0, 240, 0x2022)
    directories = [(0, 0)] * 16
    directories[1] = (import_rva, import_size)
    directories[13] = (delay_rva, delay_size)
    size_of_image = SECTION_RVA + ((raw_size + 0xFFF) & ~0xFFF)
    optional = struct.pack(
        "<HBBIIIIIQIIHHHHHHIIIIHHQQQQII",
        0x20B,
        14,
        0,
        raw_size,
        0,
        0,
        0,
        SECTION_RVA,
        0x180000000,
        0x1000,
        FILE_ALIGN,
        *os_version,
        0,
        0,
        *subsystem_version,
        0,
        size_of_image,
        FILE_ALIGN,
        0,
        3,
        0x160,
        0x100000,
        0x1000,
        0x100000,
        0x1000,
        0,
        16,
    ) + b"".join(struct.pack("<II", rva, size) for rva, size in directories)
    header = bytes(dos) + b"PE\x00\x00" + coff + optional
    sec = struct.pack(
        "<8sIIIIIIHHI",
        b".rdata",
        raw_size,
        SECTION_RVA,
        raw_size,
        FILE_ALIGN,
        0,
        0,
        0,
        0,
        0x40000040,
    )
    head = header + sec
    head += b"\x00" * (FILE_ALIGN - len(head))
    return head + bytes(section)
