"""PE: machine, import and delay-import tables, OS and subsystem versions, through pefile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pefile

from ortbundle.binaries import BinaryInfo
from ortbundle.errors import BinaryError

_DIRECTORIES = [
    pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"],
    pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT"],
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
        finally:
            pe.close()
    except BinaryError:
        raise
    except Exception as exc:  # noqa: BLE001 - pefile raises PEFormatError and raw struct errors
        raise BinaryError(
            f"{label} is not a readable PE file ({type(exc).__name__}: {exc})",
            file=label,
            fix="the library is truncated or corrupt; check the pin and the archive",
        ) from None
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
    )


def _versioned_imports(entries: list[Any]) -> tuple[tuple[str, str], ...]:
    """The imported functions baselines.toml dates to a Windows version: the parse the import
    table already did, filtered, so nothing else is read."""
    from ortbundle.binaries.baseline import windows_functions

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
