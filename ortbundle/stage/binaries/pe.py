"""PE: machine, import, delay-import and export tables, OS and subsystem versions, the execution
providers its read-only data names, the version resource and the bytes of the data sections (for
the licence evidence a DLL carries), through pefile."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pefile

from ortbundle._core.errors import BinaryError
from ortbundle.stage.binaries import providers
from ortbundle.stage.binaries.baseline import windows_functions
from ortbundle.stage.binaries.info import BinaryInfo

_DIRECTORIES = [
    pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"],
    pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT"],
    pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_EXPORT"],
]


def _dll_names(entries: list[Any], label: str) -> tuple[str, ...]:
    names = []
    for entry in entries:
        raw = entry.dll
        if not isinstance(raw, bytes) or not raw:
            raise BinaryError(
                f"{label} has an import entry without a DLL name",
                file=label,
                fix="the library's import directory is corrupt; check the pin and the archive",
            )
        names.append(raw.decode("ascii", errors="replace"))
    return tuple(names)


def _unreadable(label: str, what: str, exc: Exception) -> BinaryError:
    return BinaryError(
        f"{label} {what} ({type(exc).__name__}: {exc})",
        file=label,
        fix="the library is truncated or corrupt; check the pin and the archive",
    )


_PE32_PLUS = 0x20B  # optional-header magic of 64-bit images


def inspect_pe(path: Path, label: str) -> BinaryInfo:
    try:
        pe = pefile.PE(str(path), fast_load=True)
        try:
            pe.parse_data_directories(directories=_DIRECTORIES)
            machine_name = pefile.MACHINE_TYPE.get(pe.FILE_HEADER.Machine)
            imports = list(getattr(pe, "DIRECTORY_ENTRY_IMPORT", []))
            delay = list(getattr(pe, "DIRECTORY_ENTRY_DELAY_IMPORT", []))
            import_dir = pe.OPTIONAL_HEADER.DATA_DIRECTORY[_DIRECTORIES[0]]
            bits = 64 if pe.OPTIONAL_HEADER.Magic == _PE32_PLUS else 32
            warnings = [w for w in pe.get_warnings() if "import" in w.lower()]
            head = pe.OPTIONAL_HEADER
            os_version = f"{head.MajorOperatingSystemVersion}.{head.MinorOperatingSystemVersion}"
            subsystem = f"{head.MajorSubsystemVersion}.{head.MinorSubsystemVersion}"
            versioned = _versioned_imports(imports + delay)
            exports = _exports(pe)
            ep_names, available = _providers(pe, bits)
        finally:
            pe.close()
    except BinaryError:
        raise
    except Exception as exc:  # noqa: BLE001 - pefile raises PEFormatError and raw struct errors
        raise _unreadable(label, "is not a readable PE file", exc) from None
    if import_dir.VirtualAddress and import_dir.Size and not imports:
        detail = f": {warnings[0]}" if warnings else ""
        raise BinaryError(
            f"{label} declares an import directory that cannot be read{detail}",
            file=label,
            fix="the library's import directory is corrupt; check the pin and the archive",
        )
    if machine_name is None:
        raise BinaryError(
            f"{label} has an unknown PE machine type {pe.FILE_HEADER.Machine:#x}",
            file=label,
            fix="check that the recipe takes the right wheel for this target",
        )
    return BinaryInfo(
        format="pe",
        bits=bits,
        machine=str(machine_name).removeprefix("IMAGE_FILE_MACHINE_"),
        soname=None,
        needed=_dll_names(imports, label),
        delay_needed=_dll_names(delay, label),
        os_version=os_version,
        subsystem_version=subsystem,
        versioned_imports=versioned,
        exports=exports,
        ep_names=ep_names,
        available_providers=available,
    )


def _exports(pe: Any) -> tuple[str, ...]:
    """The names in the export directory, without MSVC's C++ ones (`?…`): ONNX Runtime finds a
    library's entry points by C name, as on ELF (elf.py)."""
    directory = getattr(pe, "DIRECTORY_ENTRY_EXPORT", None)
    names = set()
    for symbol in getattr(directory, "symbols", None) or []:
        raw = symbol.name
        if isinstance(raw, bytes) and raw and not raw.startswith(b"?"):
            names.add(raw.decode("ascii", errors="replace"))
    return tuple(sorted(names))


_READ_ONLY = (b".rdata",)  # where MSVC and MinGW put string literals and constant tables
_POINTERS = (b".rdata", b".data")  # where a constant table's absolute addresses sit


def _providers(pe: Any, bits: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The provider names `.rdata` holds, and (a core's) the ones its table marks available.
    A PE stores a pointer as an absolute address (image base + RVA, moved by base relocations
    when loaded elsewhere), so the table's pointers are found in place."""
    sections = [(s.Name.rstrip(b"\0"), int(s.VirtualAddress), s) for s in pe.sections]
    names: dict[int, str] = {}
    for label, rva, section in sections:
        if label in _READ_ONLY:
            names.update(providers.named_providers(section.get_data(), rva))
    found = tuple(sorted(set(names.values())))
    if providers.CPU not in found:
        return found, ()
    pointer = 8 if bits == 64 else 4
    base = int(pe.OPTIONAL_HEADER.ImageBase)
    data = [(rva, section.get_data()) for label, rva, section in sections if label in _POINTERS]
    cpu = [address for address, name in names.items() if name == providers.CPU]
    slots: set[int] = set()
    for rva, chunk in data:
        slots.update(providers.in_place_pointers(chunk, rva, cpu, pointer, base))

    def word(address: int) -> int | None:
        for rva, chunk in data:
            if rva <= address and address - rva + pointer <= len(chunk):
                return int.from_bytes(chunk[address - rva : address - rva + pointer], "little")
        return None

    def target_of(slot: int) -> int | None:
        value = word(slot)
        return value - base if value is not None and value >= base else None

    return found, providers.available_providers(names, slots, target_of, word, pointer)


def _versioned_imports(entries: list[Any]) -> tuple[tuple[str, str], ...]:
    """The imported functions baselines.toml dates to a Windows version: the parse the import
    table already did, filtered, so nothing else is read."""

    known = windows_functions()
    found: set[tuple[str, str]] = set()
    for entry in entries:
        raw = entry.dll
        dll = raw.decode("ascii", errors="replace").lower() if isinstance(raw, bytes) else ""
        table = known.get(dll)
        if not table:
            continue
        for imp in getattr(entry, "imports", None) or []:
            name = imp.name.decode("ascii", errors="replace") if imp.name else ""
            if name in table:
                found.add((dll, name))
    return tuple(sorted(found))


@dataclass(frozen=True)
class VersionInfo:
    """What a PE file's VS_VERSIONINFO resource says of itself (empty strings where absent)."""

    file_version: str  # the FileVersion string, else VS_FIXEDFILEINFO's four numbers
    product_version: str
    company: str
    product: str
    copyright: str = ""  # LegalCopyright: whose the file says it is

    @property
    def versions(self) -> tuple[str, ...]:
        return tuple(v for v in (self.file_version, self.product_version) if v)


_RESOURCES = [pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_RESOURCE"]]


def _fixed(ms: int, ls: int) -> str:
    return f"{ms >> 16}.{ms & 0xFFFF}.{ls >> 16}.{ls & 0xFFFF}"


def read_version_info(path: Path, label: str) -> VersionInfo | None:
    """The version resource of a PE file; None when it has none. Only the resource directory is
    parsed, so a 20 MB DLL costs milliseconds."""
    try:
        pe = pefile.PE(str(path), fast_load=True)
        try:
            pe.parse_data_directories(directories=_RESOURCES)
            entry = _version_entry(pe) if hasattr(pe, "DIRECTORY_ENTRY_RESOURCE") else None
            if entry is None:
                return None
            pe.parse_version_information(entry)
            strings: dict[str, str] = {}
            for info in getattr(pe, "FileInfo", []) or []:
                for entry in info:
                    for table in getattr(entry, "StringTable", []) or []:
                        for key, value in table.entries.items():
                            strings.setdefault(_text(key), _text(value))
            fixed = (getattr(pe, "VS_FIXEDFILEINFO", None) or [None])[0]
        finally:
            pe.close()
    except Exception as exc:  # noqa: BLE001 - pefile raises PEFormatError and raw struct errors
        raise _unreadable(label, "has an unreadable version resource", exc) from None
    file_version = strings.get("FileVersion", "").strip()
    product_version = strings.get("ProductVersion", "").strip()
    if fixed is not None and (fixed.FileVersionMS or fixed.FileVersionLS):
        file_version = file_version or _fixed(fixed.FileVersionMS, fixed.FileVersionLS)
    if fixed is not None and (fixed.ProductVersionMS or fixed.ProductVersionLS):
        # 0.0.0.0 is no product version: the FileVersion then stands for it
        product_version = product_version or _fixed(fixed.ProductVersionMS, fixed.ProductVersionLS)
    if not (file_version or product_version):
        return None
    return VersionInfo(
        file_version=file_version,
        product_version=product_version,
        company=strings.get("CompanyName", "").strip(),
        product=strings.get("ProductName", "").strip(),
        copyright=strings.get("LegalCopyright", "").strip(),
    )


_RT_VERSION = 16


def _version_entry(pe: Any) -> Any:
    """The first RT_VERSION resource's data entry (type → name → language)."""
    for kind in pe.DIRECTORY_ENTRY_RESOURCE.entries:
        if kind.id != _RT_VERSION or not hasattr(kind, "directory"):
            continue
        for name in kind.directory.entries:
            for language in getattr(getattr(name, "directory", None), "entries", []):
                if hasattr(language, "data"):
                    return language.data.struct
    return None


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


_INITIALIZED_DATA = 0x40  # IMAGE_SCN_CNT_INITIALIZED_DATA
_EXECUTABLE = 0x20000000  # IMAGE_SCN_MEM_EXECUTE
_NOT_STRINGS = (".rsrc", ".reloc", ".pdata")  # resources, relocations, unwind tables


def data_bytes(path: Path, label: str) -> bytes:
    """The initialized, non-executable data sections (.rdata, .data): where a DLL keeps the
    strings it was built with, a fifth of a large DLL's bytes."""
    try:
        pe = pefile.PE(str(path), fast_load=True)
        try:
            parts = [
                section.get_data()
                for section in pe.sections
                if section.Characteristics & _INITIALIZED_DATA
                and not section.Characteristics & _EXECUTABLE
                and section.Name.rstrip(b"\0").decode("ascii", "replace") not in _NOT_STRINGS
            ]
        finally:
            pe.close()
    except Exception as exc:  # noqa: BLE001 - pefile raises PEFormatError and raw struct errors
        raise _unreadable(label, "has unreadable sections", exc) from None
    return b"\0".join(parts)
