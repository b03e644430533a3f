"""Mach-O: the install names a dylib needs (LC_LOAD_DYLIB, LC_LOAD_WEAK_DYLIB,
LC_REEXPORT_DYLIB), its own (LC_ID_DYLIB), its rpaths (LC_RPATH), the oldest macOS it runs on
(LC_BUILD_VERSION or LC_VERSION_MIN_MACOSX), the architectures a fat file holds, whether it
carries a code signature, its exported C names (the symbol table's external definitions) and
the execution providers its `__cstring` names.

Read with `struct` from the few places that hold them — the header, the load commands, the
symbol table and one section — never the whole file: a general Mach-O library (lief) held
~130 MiB to describe the 35 MB ONNX Runtime core, which a build of every target cannot afford.
The same reading serves the rewrite (install_names.py), which edits the load commands in place.

A fat file is described by its arm64 slice: that is the one an Apple Silicon Mac loads and the
one the stage keeps (`thin_arm64`). A fat file without one is described by its first slice, so
the closure's machine check refuses it by name instead of shipping another architecture."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ortbundle._core.errors import BinaryError
from ortbundle.stage.binaries import providers
from ortbundle.stage.binaries.info import BinaryInfo

ARM64 = "arm64"
_CPU = {0x0100000C: ARM64, 0x01000007: "x86_64", 7: "i386", 12: "arm", 0x0200000C: "arm64_32"}
_CPU_ARM64 = 0x0100000C
MH_MAGIC_64 = 0xFEEDFACF
_MH_MAGIC = 0xFEEDFACE
_FAT_MAGIC = 0xCAFEBABE
_FAT_ARCH = struct.Struct(">iiIII")
HEADER_64 = struct.Struct("<IiiIIIII")  # magic cputype cpusubtype filetype ncmds sizeofcmds …
_HEADER_32 = struct.Struct("<IiiIIII")
_COMMAND = struct.Struct("<II")
_NLIST_64 = struct.Struct("<IBBHQ")
_SECTION_64 = struct.Struct("<16s16sQQII")  # sectname segname addr size offset align

LC_SEGMENT_64 = 0x19
LC_SYMTAB = 0x2
LC_ID_DYLIB = 0xD
LC_LOAD_DYLIB = 0xC
LC_LOAD_WEAK_DYLIB = 0x80000018
LC_REEXPORT_DYLIB = 0x8000001F
LC_LAZY_LOAD_DYLIB = 0x20
LC_LOAD_UPWARD_DYLIB = 0x80000023
LC_RPATH = 0x8000001C
LC_CODE_SIGNATURE = 0x1D
LC_BUILD_VERSION = 0x32
LC_VERSION_MIN_MACOSX = 0x24
NEEDED = (LC_LOAD_DYLIB, LC_REEXPORT_DYLIB, LC_LOAD_UPWARD_DYLIB)
WEAK = (LC_LOAD_WEAK_DYLIB, LC_LAZY_LOAD_DYLIB)
DYLIBS = (LC_ID_DYLIB, *NEEDED, *WEAK)
_N_STAB = 0xE0
_N_TYPE = 0x0E
_N_EXT = 0x01
_N_SECT = 0x0E
_N_UNDF = 0x00
_MAX_SLICES = 64
FAT_HEADER_BYTES = 8 + _MAX_SLICES * _FAT_ARCH.size  # every slice entry a fat header may list
_MAX_SYMBOLS = 1 << 22  # a real library has tens of thousands; a corrupt count must not spin


@dataclass(frozen=True)
class Command:
    """One load command: its type and its bytes (cmd and cmdsize included)."""

    cmd: int
    raw: bytes

    def string(self, at: int) -> str:
        """The NUL-terminated string the lc_str at `at` points to, inside this command."""
        (offset,) = struct.unpack_from("<I", self.raw, at)
        if not _COMMAND.size <= offset < len(self.raw):
            raise ValueError(f"load command {self.cmd:#x} names a string outside itself")
        end = self.raw.find(b"\0", offset)
        return self.raw[offset : end if end >= 0 else len(self.raw)].decode("utf-8")

    @property
    def name(self) -> str:
        """A dylib command's install name, an rpath command's path."""
        return self.string(8)


@dataclass(frozen=True)
class Slice:
    """One architecture's Mach-O image inside a file: where it is, what its header and load
    commands say."""

    offset: int  # in the file
    size: int
    cputype: int
    bits: int
    filetype: int
    commands: tuple[Command, ...]

    @property
    def arch(self) -> str:
        return _CPU.get(self.cputype, f"cpu {self.cputype:#x}")

    def of(self, *cmds: int) -> list[Command]:
        return [c for c in self.commands if c.cmd in cmds]


def _unreadable(label: str, what: str) -> BinaryError:
    return BinaryError(
        f"{label} {what}",
        file=label,
        fix="the library is truncated or corrupt; check the pin and the archive",
    )


def _read(stream: BinaryIO, at: int, size: int) -> bytes:
    """Exactly `size` bytes at `at`; a count a corrupt header makes huge is refused before
    anything is allocated for it."""
    end = stream.seek(0, 2)
    if at < 0 or size < 0 or at + size > end:
        raise ValueError(f"{size} bytes at {at:#x} run past the end of the file")
    stream.seek(at)
    return stream.read(size)


def read_slice(stream: BinaryIO, offset: int, size: int) -> Slice:
    """The header and load commands of the image at `offset`; refused (ValueError) unless every
    command the header announces lies inside the commands' area."""
    (magic,) = struct.unpack("<I", _read(stream, offset, 4))
    if magic == MH_MAGIC_64:
        header, bits = HEADER_64, 64
    elif magic == _MH_MAGIC:
        header, bits = _HEADER_32, 32
    else:
        raise ValueError(f"no Mach-O header at {offset:#x}")
    fields = header.unpack(_read(stream, offset, header.size))
    cputype, filetype, ncmds, sizeofcmds = fields[1], fields[3], fields[4], fields[5]
    if header.size + sizeofcmds > size:
        raise ValueError(f"its load commands ({sizeofcmds} bytes) run past the image")
    area = _read(stream, offset + header.size, sizeofcmds)
    commands: list[Command] = []
    at = 0
    for _ in range(ncmds):
        if at + _COMMAND.size > len(area):
            raise ValueError(f"announces {ncmds} load commands but {len(commands)} can be read")
        cmd, cmdsize = _COMMAND.unpack_from(area, at)
        if cmdsize < _COMMAND.size or cmdsize % 4 or at + cmdsize > len(area):
            raise ValueError(f"load command {len(commands)} has a bad size {cmdsize}")
        commands.append(Command(cmd, area[at : at + cmdsize]))
        at += cmdsize
    return Slice(offset, size, cputype, bits, filetype, tuple(commands))


def slices(stream: BinaryIO, size: int) -> list[Slice]:
    """Every image of a thin or fat file."""
    (magic,) = struct.unpack(">I", _read(stream, 0, 4))
    if magic != _FAT_MAGIC:
        return [read_slice(stream, 0, size)]
    (count,) = struct.unpack(">I", _read(stream, 4, 4))
    if not 0 < count <= _MAX_SLICES:
        raise ValueError(f"a fat header with {count} architectures")
    found = []
    for index in range(count):
        _cpu, _sub, offset, length, _align = _FAT_ARCH.unpack(
            _read(stream, 8 + index * _FAT_ARCH.size, _FAT_ARCH.size)
        )
        if offset + length > size:
            raise ValueError(f"fat slice {index} runs past the end of the file")
        found.append(read_slice(stream, offset, length))
    return found


def _choose(images: list[Slice]) -> Slice:
    """The arm64 slice, else the first: the closure refuses a foreign one by its machine."""
    return next((s for s in images if s.cputype == _CPU_ARM64), images[0])


def _version(packed: int) -> str:
    """xxxx.yy.zz nibbles as "14.0" or "14.2.1"."""
    major, minor, patch = packed >> 16, (packed >> 8) & 0xFF, packed & 0xFF
    return f"{major}.{minor}.{patch}" if patch else f"{major}.{minor}"


def _minos(image: Slice) -> str:
    for command in image.of(LC_BUILD_VERSION):
        return _version(struct.unpack_from("<I", command.raw, 12)[0])
    for command in image.of(LC_VERSION_MIN_MACOSX):
        return _version(struct.unpack_from("<I", command.raw, 8)[0])
    return ""


def _nlist(stream: BinaryIO, image: Slice) -> Iterator[tuple[int, int, bytes]]:
    """(n_type, string index, name bytes) of each symbol of a 64-bit image's symbol tables that
    is no debugging (stab) entry and whose name lies inside its string table."""
    if image.bits != 64:  # another nlist layout; such a file is refused by its machine anyway
        return
    for command in image.of(LC_SYMTAB):
        symoff, nsyms, stroff, strsize = struct.unpack_from("<IIII", command.raw, 8)
        if nsyms > _MAX_SYMBOLS:
            raise ValueError(f"a symbol table of {nsyms} entries")
        table = _read(stream, image.offset + symoff, nsyms * _NLIST_64.size)
        strings = _read(stream, image.offset + stroff, strsize)
        for strx, kind, _sect, _desc, _value in _NLIST_64.iter_unpack(table):
            if kind & _N_STAB or strx >= len(strings):
                continue
            end = strings.find(b"\0", strx)
            yield kind, strx, strings[strx : end if end >= 0 else len(strings)]


def _symbols(stream: BinaryIO, image: Slice) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(exported, imported) C names: the symbol table's external definitions and undefined
    externals, without the underscore the C compiler adds."""
    exported: set[str] = set()
    imported: set[str] = set()
    for kind, _strx, raw in _nlist(stream, image):
        if not kind & _N_EXT or not raw.startswith(b"_"):
            continue
        name = raw[1:].decode("utf-8", errors="replace")
        if kind & _N_TYPE == _N_SECT:
            exported.add(name)
        elif kind & _N_TYPE == _N_UNDF:
            imported.add(name)
    return tuple(sorted(exported)), tuple(sorted(imported))


def _sections(image: Slice) -> Iterator[tuple[bytes, bytes, int, int, int]]:
    """(segment, section, address, size, file offset) of every section of a 64-bit image."""
    for command in image.of(LC_SEGMENT_64):
        (nsects,) = struct.unpack_from("<I", command.raw, 64)
        for index in range(nsects):
            at = 72 + index * 80
            if at + _SECTION_64.size > len(command.raw):
                raise ValueError("a segment lists more sections than it holds")
            sect, seg, addr, size, offset, _align = _SECTION_64.unpack_from(command.raw, at)
            yield seg.rstrip(b"\0"), sect.rstrip(b"\0"), addr, size, offset


def cstrings(stream: BinaryIO, image: Slice) -> tuple[bytes, int]:
    """The bytes of `__TEXT,__cstring` and the address they are mapped at (b"", 0: none)."""
    for seg, sect, addr, size, offset in _sections(image):
        if sect == b"__cstring" and seg == b"__TEXT":
            return _read(stream, image.offset + offset, size), addr
    return b"", 0


# where a Mach-O image keeps its read-only data: C strings, and the constants the C++ type
# names (the Itanium ABI's _ZTS strings, as "N5Eigen…") live in
_DATA_SECTIONS = frozenset({(b"__TEXT", b"__cstring"), (b"__TEXT", b"__const")})


def _defined_names(stream: BinaryIO, image: Slice) -> bytes:
    """The names of the symbols the image defines, local ones included (a dylib keeps them
    unless stripped), NUL-joined: a header-only library compiled in (Eigen) may leave only its
    namespace in the mangled names of the code it became."""
    return b"\0".join(
        raw for kind, strx, raw in _nlist(stream, image) if kind & _N_TYPE == _N_SECT and strx
    )


def data_bytes(path: Path, label: str) -> bytes:
    """The read-only data of the arm64 slice (else the first) and the names of the symbols it
    defines: what the scan for embedded third-party code and notices reads, as `.rodata` and
    `.dynsym` on ELF; NUL-joined."""
    try:
        with path.open("rb") as stream:
            image = _choose(slices(stream, path.stat().st_size))
            wanted = [
                (size, offset)
                for seg, sect, _addr, size, offset in _sections(image)
                if (seg, sect) in _DATA_SECTIONS and size
            ]
            parts = [_read(stream, image.offset + off, size) for size, off in wanted]
            parts.append(_defined_names(stream, image))
            return b"\0".join(parts)
    except (ValueError, struct.error, OSError) as exc:
        raise _unreadable(label, f"is not a readable Mach-O file: {exc}") from None


def first_section_offset(image: Slice) -> int:
    """Where the first section's bytes begin: the load commands may grow up to here."""
    found = [image.size]
    for command in image.of(LC_SEGMENT_64):
        (nsects,) = struct.unpack_from("<I", command.raw, 64)
        for index in range(nsects):
            _s, _g, _a, size, offset, _al = _SECTION_64.unpack_from(command.raw, 72 + index * 80)
            if offset and size:
                found.append(offset)
    return min(found)


def inspect_macho(path: Path, label: str) -> BinaryInfo:
    """The facts of `path`; a malformed file (a count past the end, a name that is not UTF-8)
    is one BinaryError naming it."""
    try:
        with path.open("rb") as stream:
            images = slices(stream, path.stat().st_size)
            image = _choose(images)
            exports, _imports = _symbols(stream, image)
            data, address = cstrings(stream, image)
            needed = tuple(c.name for c in image.of(*NEEDED))
            weak = tuple(c.name for c in image.of(*WEAK))
            rpaths = tuple(c.name for c in image.of(LC_RPATH))
            ids = [c.name for c in image.of(LC_ID_DYLIB)]
    except (ValueError, struct.error, OSError) as exc:
        raise _unreadable(label, f"is not a readable Mach-O file: {exc}") from None
    found = providers.named_providers(data, address)
    named = tuple(sorted(set(found.values())))
    return BinaryInfo(
        format="macho",
        bits=image.bits,
        machine=image.arch,
        soname=ids[0] if ids else None,
        needed=needed,
        delay_needed=weak,
        runpath=rpaths,
        os_version=_minos(image),
        exports=exports,
        ep_names=named,
        available_providers=appended_providers(exports, named),
        architectures=tuple(s.arch for s in images),
        signed=bool(image.of(LC_CODE_SIGNATURE)),
    )


_APPEND = "OrtSessionOptionsAppendExecutionProvider_"


def appended_providers(exports: Iterable[str], named: Iterable[str]) -> tuple[str, ...]:
    """What a Mach-O core offers, read from its exports: a core built with an execution
    provider exports that provider's `OrtSessionOptionsAppendExecutionProvider_<Name>` (the
    macOS core: CoreML and CPU). Its provider table is reached only through chained fixups,
    which this reader does not follow; this is the bytes' other word for the same thing. In
    the core's order of preference: every other provider first, the CPU last."""
    by_lower = {n.lower(): n for n in named}
    found = []
    for name in sorted(e.lstrip("_") for e in exports):
        if name.startswith(_APPEND):
            suffix = name[len(_APPEND) :]
            provider = f"{suffix}ExecutionProvider"
            found.append(by_lower.get(provider.lower(), provider))
    if not found:
        return ()
    # every core carries the CPU provider, whether or not it exports the CPU's append function
    cpu = by_lower.get("cpuexecutionprovider", "CPUExecutionProvider")
    return (*sorted(p for p in set(found) if p != cpu), cpu)


def imported_symbols(path: Path) -> tuple[tuple[str, ...], bytes]:
    """The arm64 slice's undefined external C names and its `__cstring` bytes: what the scan
    for libraries opened by name reads (loads.py)."""
    with path.open("rb") as stream:
        image = _choose(slices(stream, path.stat().st_size))
        _exports, imports = _symbols(stream, image)
        data, _address = cstrings(stream, image)
    return imports, data


def thin_arm64(data: bytes) -> bytes | None:
    """The arm64 slice of a fat file's bytes; None when `data` is not a fat file or has no
    arm64 slice. A slice is a complete Mach-O file: cutting it out is what `lipo -thin` does."""
    found = arm64_range(data, len(data))
    return None if found is None else data[found[0] : found[0] + found[1]]


def arm64_range(head: bytes, total: int) -> tuple[int, int] | None:
    """(offset, size) of the arm64 slice of a fat file of `total` bytes, from its first bytes
    (`head`: FAT_HEADER_BYTES are enough); None when it is not a fat file or has no arm64 slice
    inside the file."""
    if len(head) < 8 or struct.unpack_from(">I", head)[0] != _FAT_MAGIC:
        return None
    (count,) = struct.unpack_from(">I", head, 4)
    for index in range(min(count, _MAX_SLICES)):
        at = 8 + index * _FAT_ARCH.size
        if at + _FAT_ARCH.size > len(head):
            return None
        cputype, _sub, offset, size, _align = _FAT_ARCH.unpack_from(head, at)
        if cputype == _CPU_ARM64 and offset + size <= total:
            return offset, size
    return None
