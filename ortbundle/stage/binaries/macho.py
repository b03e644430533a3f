"""Mach-O: the install names a dylib needs (LC_LOAD_DYLIB, LC_LOAD_WEAK_DYLIB,
LC_REEXPORT_DYLIB), its own (LC_ID_DYLIB), its rpaths (LC_RPATH), the oldest macOS it runs on
(LC_BUILD_VERSION or LC_VERSION_MIN_MACOSX), the architectures a fat file holds, whether it
carries a code signature, its exported C names and the execution providers its `__cstring`
names, through lief.

A fat file is described by its arm64 slice: that is the one an Apple Silicon Mac loads and the
one the stage keeps (`thin_arm64`). A fat file without one is described by its first slice, so
the closure's machine check refuses it by name instead of shipping another architecture."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lief

from ortbundle._core.errors import BinaryError
from ortbundle.stage.binaries import providers
from ortbundle.stage.binaries.info import BinaryInfo

lief.logging.disable()  # lief reports to stderr; every problem here becomes one BinaryError

ARM64 = "arm64"
_ARCH_NAMES = {"ARM64": ARM64, "X86_64": "x86_64", "X86": "i386", "ARM": "arm"}
_NEEDED = {"LOAD_DYLIB", "REEXPORT_DYLIB", "LOAD_UPWARD_DYLIB"}
_WEAK = {"LOAD_WEAK_DYLIB", "LAZY_LOAD_DYLIB"}
_N_EXT = 0x01
_N_SECT = 0x0E
_N_TYPE = 0x0E
_FAT_MAGIC = 0xCAFEBABE
_FAT_ARCH = struct.Struct(">iiIII")
_CPU_ARM64 = 0x0100000C


@dataclass(frozen=True)
class LoadCommands:
    """A dylib's linkage, in load-command order: what the install-name fixes rewrite."""

    install_id: str | None
    needed: tuple[str, ...]  # every dependency, weak ones too
    rpaths: tuple[str, ...]


def _unreadable(label: str, what: str) -> BinaryError:
    return BinaryError(
        f"{label} {what}",
        file=label,
        fix="the library is truncated or corrupt; check the pin and the archive",
    )


def _arch(binary: Any) -> str:
    name = str(binary.header.cpu_type).rsplit(".", 1)[-1]
    return _ARCH_NAMES.get(name, name.lower())


def _parse(path: Path, label: str) -> Any:
    """The fat (or thin, as a fat of one) binary lief reads; refused when the load commands
    the header announces are not all there."""
    config = lief.MachO.ParserConfig()
    config.parse_dyld_bindings = False
    config.parse_dyld_rebases = False
    config.parse_dyld_exports = True
    try:
        fat = lief.MachO.parse(str(path), config)
    except Exception as exc:  # noqa: BLE001 - lief raises its own and raw errors
        raise _unreadable(label, f"is not a readable Mach-O file ({exc})") from None
    if fat is None or fat.size == 0:
        raise _unreadable(label, "is not a readable Mach-O file")
    size = path.stat().st_size
    for binary in fat:
        header = binary.header
        if len(binary.commands) != header.nb_cmds or header.sizeof_cmds + 32 > size:
            raise _unreadable(
                label,
                f"announces {header.nb_cmds} load commands but {len(binary.commands)} can be read",
            )
    return fat


def _choose(fat: Any) -> Any:
    """The arm64 slice, else the first: the closure refuses a foreign one by its machine."""
    for binary in fat:
        if _arch(binary) == ARM64:
            return binary
    return fat.at(0)


def _version(numbers: Any) -> str:
    parts = [int(n) for n in numbers][:3]
    while len(parts) > 2 and parts[-1] == 0:
        parts.pop()
    return ".".join(str(p) for p in parts)


def _minos(binary: Any) -> str:
    """LC_BUILD_VERSION's minos, else LC_VERSION_MIN_MACOSX's version; "" when neither."""
    if binary.has_build_version:
        return _version(binary.build_version.minos)
    if binary.has_version_min:
        return _version(binary.version_min.version)
    return ""


def linkage(binary: Any) -> tuple[LoadCommands, tuple[str, ...]]:
    """The slice's id, strong and weak dependencies and rpaths: (strong+id+rpaths, weak)."""
    install_id: str | None = None
    needed: list[str] = []
    weak: list[str] = []
    rpaths: list[str] = []
    for command in binary.commands:
        kind = str(command.command).rsplit(".", 1)[-1]
        if kind == "ID_DYLIB":
            install_id = str(command.name)
        elif kind in _NEEDED:
            needed.append(str(command.name))
        elif kind in _WEAK:
            weak.append(str(command.name))
        elif kind == "RPATH":
            rpaths.append(str(command.path))
    return LoadCommands(install_id, tuple(needed), tuple(rpaths)), tuple(weak)


def _exports(binary: Any) -> tuple[str, ...]:
    """External defined symbols of the symbol table and the export trie, without the leading
    underscore the C compiler adds: the names dlsym finds."""
    names: set[str] = set()
    for symbol in binary.symbols:
        raw = int(symbol.raw_type)
        defined = raw & _N_EXT and raw & _N_TYPE == _N_SECT
        if defined or symbol.has_export_info:
            name = str(symbol.name)
            if name.startswith("_"):
                names.add(name[1:])
    return tuple(sorted(names))


def _ep_names(binary: Any) -> tuple[str, ...]:
    section = binary.get_section("__TEXT", "__cstring")
    if section is None:
        return ()
    found = providers.named_providers(bytes(section.content), int(section.virtual_address))
    return tuple(sorted(set(found.values())))


def inspect_macho(path: Path, label: str) -> BinaryInfo:
    """The facts of `path`; whatever a malformed file makes lief or the decoding raise (a name
    that is not UTF-8, a section beyond the file) is one BinaryError naming the file."""
    fat = _parse(path, label)
    try:
        return _facts(fat)
    except Exception as exc:  # noqa: BLE001 - lief raises its own, and the reads raw errors
        raise _unreadable(label, f"is not a readable Mach-O file ({type(exc).__name__})") from None


def _facts(fat: Any) -> BinaryInfo:
    binary = _choose(fat)
    commands, weak = linkage(binary)
    return BinaryInfo(
        format="macho",
        bits=64 if binary.header.magic == lief.MachO.MACHO_TYPES.MAGIC_64 else 32,
        machine=_arch(binary),
        soname=commands.install_id,
        needed=commands.needed,
        delay_needed=weak,
        runpath=commands.rpaths,
        os_version=_minos(binary),
        exports=_exports(binary),
        ep_names=_ep_names(binary),
        architectures=tuple(_arch(b) for b in fat),
        signed=bool(binary.has_code_signature),
    )


def thin_arm64(data: bytes) -> bytes | None:
    """The arm64 slice of a fat file's bytes; None when `data` is not a fat file or has no
    arm64 slice. A slice is a complete Mach-O file: cutting it out is what `lipo -thin` does."""
    if len(data) < 8 or struct.unpack_from(">I", data)[0] != _FAT_MAGIC:
        return None
    (count,) = struct.unpack_from(">I", data, 4)
    for index in range(min(count, 64)):
        at = 8 + index * _FAT_ARCH.size
        if at + _FAT_ARCH.size > len(data):
            return None
        cputype, _sub, offset, size, _align = _FAT_ARCH.unpack_from(data, at)
        if cputype == _CPU_ARM64 and offset + size <= len(data):
            return data[offset : offset + size]
    return None
