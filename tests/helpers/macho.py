"""Synthetic Mach-O dylibs written by code: the load commands the closure, the install-name
fixes and the signature read (id, dependencies, rpaths, minos), a symbol table whose external
symbols are the exports, a `__cstring` section for provider names, and fat files of several.

The layout is what ld64 writes for a small dylib: `__TEXT` from offset 0 holding the header,
the load commands, a page of padding (room for longer install names, as `-headerpad` gives)
and the sections; `__LINKEDIT` last, where a code signature is appended."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

MH_MAGIC_64 = 0xFEEDFACF
FAT_MAGIC = 0xCAFEBABE
CPU = {"arm64": 0x0100000C, "x86_64": 0x01000007}
MH_DYLIB = 6
LC_SEGMENT_64 = 0x19
LC_SYMTAB = 0x2
LC_ID_DYLIB = 0xD
LC_LOAD_DYLIB = 0xC
LC_LOAD_WEAK_DYLIB = 0x80000018
LC_REEXPORT_DYLIB = 0x8000001F
LC_RPATH = 0x8000001C
LC_BUILD_VERSION = 0x32
PLATFORM_MACOS = 1
_PAGE = 0x4000
_TEXT_AT = 0x3000  # the sections start here; the load commands end far before it


@dataclass(frozen=True)
class Dylib:
    """What one synthetic slice says about itself."""

    install_id: str | None = None
    needed: tuple[str, ...] = ("/usr/lib/libSystem.B.dylib",)
    weak: tuple[str, ...] = ()
    reexports: tuple[str, ...] = ()
    rpaths: tuple[str, ...] = ()
    minos: str = "14.0"
    arch: str = "arm64"
    exports: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()  # undefined external symbols ("dlopen"), bound at load time
    strings: tuple[str, ...] = ()  # C strings in __TEXT,__cstring ("CoreMLExecutionProvider")
    extra: bytes = field(default=b"")  # appended to __text: makes two libraries' bytes differ
    text_at: int = _TEXT_AT  # where __text starts: the load commands may grow up to here


def _version(text: str) -> int:
    parts = [int(p) for p in text.split(".")] + [0, 0]
    return parts[0] << 16 | parts[1] << 8 | parts[2]


def _padded(text: str, fixed: int) -> bytes:
    raw = text.encode() + b"\0"
    size = (fixed + len(raw) + 7) // 8 * 8
    return raw + b"\0" * (size - fixed - len(raw))


def _dylib_command(cmd: int, name: str) -> bytes:
    tail = _padded(name, 24)
    return struct.pack("<IIIIII", cmd, 24 + len(tail), 24, 2, 0x10000, 0x10000) + tail


def _section(name: str, segment: str, addr: int, size: int, offset: int, flags: int) -> bytes:
    return struct.pack(
        "<16s16sQQIIIIIIII",
        name.encode(),
        segment.encode(),
        addr,
        size,
        offset,
        4,
        0,
        0,
        flags,
        0,
        0,
        0,
    )


def slice_bytes(spec: Dylib) -> bytes:
    """One thin Mach-O dylib."""
    text_at = spec.text_at
    text = b"\xc0\x03\x5f\xd6" * 4 + spec.extra  # `ret`, and whatever makes it unique
    cstrings = b"".join(s.encode() + b"\0" for s in spec.strings) or b"\0"
    cstring_at = text_at + (len(text) + 15) // 16 * 16
    if cstring_at + len(cstrings) > _PAGE:
        raise ValueError("the synthetic __TEXT holds one page")
    names = b"\0" + b"".join(b"_" + e.encode() + b"\0" for e in (*spec.exports, *spec.imports))
    symbols = b""
    offset = 1
    for export in spec.exports:
        symbols += struct.pack("<IBBHQ", offset, 0x0F, 1, 0, text_at)  # N_SECT | N_EXT
        offset += len(export) + 2
    for imported in spec.imports:
        symbols += struct.pack("<IBBHQ", offset, 0x01, 0, 0x0100, 0)  # N_UNDF | N_EXT, ordinal 1
        offset += len(imported) + 2
    linkedit = symbols + names
    linkedit += b"\0" * (-len(linkedit) % 16)
    commands = [
        struct.pack(
            "<II16sQQQQiiII",
            LC_SEGMENT_64,
            72 + 2 * 80,
            b"__TEXT",
            0,
            _PAGE,
            0,
            _PAGE,
            5,
            5,
            2,
            0,
        )
        + _section("__text", "__TEXT", text_at, len(text), text_at, 0x80000400)
        + _section("__cstring", "__TEXT", cstring_at, len(cstrings), cstring_at, 2),
        struct.pack(
            "<II16sQQQQiiII",
            LC_SEGMENT_64,
            72,
            b"__LINKEDIT",
            _PAGE,
            _PAGE,
            _PAGE,
            len(linkedit),
            1,
            1,
            0,
            0,
        ),
    ]
    if spec.install_id is not None:
        commands.append(_dylib_command(LC_ID_DYLIB, spec.install_id))
    commands += [_dylib_command(LC_LOAD_DYLIB, n) for n in spec.needed]
    commands += [_dylib_command(LC_LOAD_WEAK_DYLIB, n) for n in spec.weak]
    commands += [_dylib_command(LC_REEXPORT_DYLIB, n) for n in spec.reexports]
    commands += [
        struct.pack("<III", LC_RPATH, 12 + len(_padded(r, 12)), 12) + _padded(r, 12)
        for r in spec.rpaths
    ]
    commands.append(
        struct.pack(
            "<IIIIII",
            LC_BUILD_VERSION,
            24,
            PLATFORM_MACOS,
            _version(spec.minos),
            _version("26.2"),
            0,
        )
    )
    commands.append(
        struct.pack(
            "<IIIIII",
            LC_SYMTAB,
            24,
            _PAGE,
            len(spec.exports) + len(spec.imports),
            _PAGE + len(symbols),
            len(names),
        )
    )
    body = b"".join(commands)
    header = struct.pack(
        "<IiiIIIII",
        MH_MAGIC_64,
        CPU[spec.arch],
        0,
        MH_DYLIB,
        len(commands),
        len(body),
        0x00100085,
        0,
    )
    image = bytearray(_PAGE)
    image[: len(header) + len(body)] = header + body
    image[text_at : text_at + len(text)] = text
    image[cstring_at : cstring_at + len(cstrings)] = cstrings
    return bytes(image) + linkedit


def fat_bytes(*slices: bytes) -> bytes:
    """A universal file of thin slices (big-endian fat header, each slice page-aligned)."""
    at = _PAGE
    arches = b""
    body = b""
    for data in slices:
        cputype, subtype = struct.unpack_from("<ii", data, 4)
        arches += struct.pack(">iiIII", cputype, subtype, at, len(data), 14)
        padded = data + b"\0" * (-len(data) % _PAGE)
        body += padded
        at += len(padded)
    head = struct.pack(">II", FAT_MAGIC, len(slices)) + arches
    return head + b"\0" * (_PAGE - len(head)) + body


def write_dylib(path: Path, spec: Dylib | None = None, **fields: object) -> Path:
    """Write one thin dylib (`spec`, or a Dylib of `fields`) at `path`."""
    dylib = spec if spec is not None else Dylib(**fields)  # type: ignore[arg-type]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(slice_bytes(dylib))
    return path
