"""Build minimal but well-formed PE32+ DLLs with chosen imports (by ordinal, or by name),
delay imports, exports, strings, an ONNX Runtime core's provider table, and OS / subsystem
versions in the optional header."""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence

MACHINE = {"AMD64": 0x8664, "ARM64": 0xAA64, "I386": 0x14C}
SECTION_RVA = 0x1000
FILE_ALIGN = 0x200
IMAGE_BASE = 0x180000000


def make_pe(
    *,
    machine: str = "AMD64",
    imports: tuple[str, ...] = (),
    delay_imports: tuple[str, ...] = (),
    payload: bytes = b"",
    functions: Mapping[str, Sequence[str]] | None = None,
    os_version: tuple[int, int] = (6, 0),
    subsystem_version: tuple[int, int] = (6, 0),
    version: dict[str, str] | None = None,
    exports: Sequence[str] = (),
    rodata: Sequence[str] = (),
    provider_table: Sequence[tuple[str, bool]] = (),
    wide: Sequence[str] = (),
) -> bytes:
    """A DLL whose single .rdata section holds the import and delay-import directories, and a
    VS_VERSIONINFO resource with these strings (FileVersion, ProductVersion, CompanyName, …)
    when `version` is given.

    Each import takes one function by ordinal, or the ones `functions` names for that DLL by
    name (hint/name entries); the header's OS and subsystem versions are the defaults of the
    MSVC linker for x64 unless given. `exports` fill an export directory; `rodata` are
    NUL-terminated strings; `provider_table` the (name, available) entries of a core's provider
    table, `{std::string_view, bool}` as MSVC lays it out (the pointer, an absolute address,
    then the length, then the flag); `wide` UTF-16LE strings (`L"dxcore.dll"`), 2-aligned as a
    compiler lays them out, after the payload."""
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
    export_rva, export_size = _exports(put, exports)
    strings = {}
    for text in dict.fromkeys([*rodata, *(name for name, _ in provider_table)]):
        put(b"\x00")  # a string of its own: not the tail of the bytes before it
        strings[text] = put(text.encode() + b"\x00", 1)
    if provider_table:
        put(
            b"".join(
                struct.pack("<QQQ", IMAGE_BASE + strings[name], len(name), int(on))
                for name, on in provider_table
            )
        )
    resource_rva, resource_size = 0, 0
    if version is not None:
        section.extend(b"\x00" * (-len(section) % 8))
        resource_rva = SECTION_RVA + len(section)
        blob = _version_resource(resource_rva, version)
        put(blob)
        resource_size = len(blob)
    section.extend(payload)
    if wide:
        section.extend(b"\x00" * (2 + len(section) % 2))
        section.extend(b"".join(w.encode("utf-16-le") + b"\x00\x00" for w in wide))
    raw_size = len(section) + (-len(section) % FILE_ALIGN) or FILE_ALIGN
    section.extend(b"\x00" * (raw_size - len(section)))

    dos = bytearray(64)
    dos[0:2] = b"MZ"
    struct.pack_into("<I", dos, 0x3C, 64)
    coff = struct.pack("<HHIIIHH", MACHINE[machine], 1, 0, 0, 0, 240, 0x2022)
    directories = [(0, 0)] * 16
    directories[0] = (export_rva, export_size)
    directories[1] = (import_rva, import_size)
    directories[13] = (delay_rva, delay_size)
    directories[2] = (resource_rva, resource_size)
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
        IMAGE_BASE,
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


def _exports(put: Callable[..., int], exports: Sequence[str]) -> tuple[int, int]:
    """An export directory naming `exports` (each a function at the section's start): the
    directory's RVA and size, or (0, 0) for none."""
    if not exports:
        return 0, 0
    names = sorted(exports)
    dll = 0  # the DLL's own name is optional: a string here would read as another library
    name_rvas = [put(n.encode() + b"\x00", 2) for n in names]
    functions = put(struct.pack(f"<{len(names)}I", *[SECTION_RVA] * len(names)), 4)
    name_table = put(struct.pack(f"<{len(names)}I", *name_rvas), 4)
    ordinals = put(struct.pack(f"<{len(names)}H", *range(len(names))), 2)
    directory = struct.pack(
        "<IIHHIIIIIII", 0, 0, 0, 0, dll, 1, len(names), len(names), functions, name_table, ordinals
    )
    return put(directory, 4), len(directory)


def _wstr(text: str) -> bytes:
    return (text + "\x00").encode("utf-16-le")


def _block(key: str, value: bytes, value_length: int, kind: int, children: bytes = b"") -> bytes:
    """One VS_VERSIONINFO-style block: length, value length, type, key, value, children."""
    head = _wstr(key)
    body = bytearray(6 + len(head))
    body[6:] = head
    body.extend(b"\x00" * (-len(body) % 4))
    body.extend(value)
    body.extend(b"\x00" * (-len(body) % 4))
    body.extend(children)
    struct.pack_into("<HHH", body, 0, len(body), value_length, kind)
    return bytes(body)


def _version_numbers(text: str) -> tuple[int, int]:
    parts = [int(p) for p in (text.split(" ")[0].split(".") + ["0"] * 4)[:4] if p.isdigit()]
    parts += [0] * (4 - len(parts))
    return (parts[0] << 16) | parts[1], (parts[2] << 16) | parts[3]


def _version_resource(rva: int, strings: dict[str, str]) -> bytes:
    """A resource directory (RT_VERSION / 1 / en-US) holding one VS_VERSIONINFO."""
    file_ms, file_ls = _version_numbers(strings.get("FileVersion", "0"))
    product_ms, product_ls = _version_numbers(strings.get("ProductVersion", "0"))
    fixed = struct.pack(
        "<13I",
        0xFEEF04BD,
        0x10000,
        file_ms,
        file_ls,
        product_ms,
        product_ls,
        0x3F,
        0,
        4,
        2,
        0,
        0,
        0,
    )
    entries = b"".join(
        _block(key, _wstr(value), len(value) + 1, 1) for key, value in strings.items()
    )
    table = _block("040904B0", b"", 0, 1, entries)
    string_info = _block("StringFileInfo", b"", 0, 1, table)
    info = _block("VS_VERSION_INFO", fixed, len(fixed), 0, string_info)
    directory = bytearray()
    directory += struct.pack("<IIHHHH", 0, 0, 0, 0, 0, 1) + struct.pack("<II", 16, 0x80000018)
    directory += struct.pack("<IIHHHH", 0, 0, 0, 0, 0, 1) + struct.pack("<II", 1, 0x80000030)
    directory += struct.pack("<IIHHHH", 0, 0, 0, 0, 0, 1) + struct.pack("<II", 0x409, 0x48)
    directory += struct.pack("<IIII", rva + 0x58, len(info), 0, 0)
    directory += b"\x00" * (0x58 - len(directory))
    return bytes(directory) + info
