"""Read what a native library needs: pure functions from a file to a frozen description.

This face picks the parser by the file's magic; elf.py, pe.py and macho.py (and with them
pyelftools, pefile and lief) are imported only when a library of that format is read."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ortbundle._core.errors import BinaryError
from ortbundle.stage.binaries.info import BinaryInfo, sniff_format

if TYPE_CHECKING:
    from ortbundle.stage.binaries.pe import VersionInfo


def inspect(path: Path, *, name: str | None = None) -> BinaryInfo:
    """Describe an ELF, PE or Mach-O library; any malformation is a BinaryError naming the
    file."""
    label = name or path.name
    fmt = sniff_format(path)
    if fmt == "elf":
        from ortbundle.stage.binaries import elf

        return elf.inspect_elf(path, label)
    if fmt == "pe":
        from ortbundle.stage.binaries import pe

        return pe.inspect_pe(path, label)
    if fmt == "macho":
        from ortbundle.stage.binaries import macho

        return macho.inspect_macho(path, label)
    raise BinaryError(
        f"{label} is neither an ELF, PE nor Mach-O library",
        file=label,
        fix="only native libraries can be roots; check the recipe's roots and library globs",
    )


def read_version_info(path: Path, label: str) -> VersionInfo | None:
    """A PE file's version resource (None when it has none); pefile is imported only here, for a
    file whose version is not already kept."""
    from ortbundle.stage.binaries import pe

    return pe.read_version_info(path, label)


def elf_sections(path: Path, label: str, names: tuple[str, ...]) -> dict[str, bytes]:
    """The named sections of an ELF file that it has; pyelftools is imported only here."""
    from ortbundle.stage.binaries import elf

    return elf.section_bytes(path, label, names)


def pe_data(path: Path, label: str) -> bytes:
    """A PE file's initialized, non-executable data sections; pefile is imported only here."""
    from ortbundle.stage.binaries import pe

    return pe.data_bytes(path, label)
