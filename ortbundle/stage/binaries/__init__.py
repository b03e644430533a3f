"""Read what a native library needs: pure functions from a file to a frozen description.

This face picks the parser by the file's magic; elf.py and pe.py (and with them pyelftools and
pefile) are imported only when a library of that format is read, install_names.py (and with it
apple-codesign's native module) only for a macOS target. macho.py reads with the standard
library alone, so it is imported here."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ortbundle._core.errors import BinaryError
from ortbundle.stage.binaries.info import BinaryInfo, sniff_format
from ortbundle.stage.binaries.macho import inspect_macho

if TYPE_CHECKING:
    from ortbundle.config.project import CodeSigner
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
        return inspect_macho(path, label)
    raise BinaryError(
        f"{label} is neither an ELF, PE nor Mach-O library",
        file=label,
        fix="only native libraries can be roots; check the recipe's roots and library globs",
    )


def fix_macho(path: Path, *, install_id: str, label: str, signer: CodeSigner) -> BinaryInfo:
    """Make a staged dylib relocatable and sign it (install_names.py); apple-codesign is
    imported only here, for a macOS target."""
    try:
        from ortbundle.stage.binaries import install_names
    except ImportError as exc:  # apple-platform-py has wheels for Linux only
        raise BinaryError(
            f"{label} cannot be signed here: {exc.name} is not installed",
            file=label,
            fix="build macOS targets on Linux with requirements.txt installed "
            "(apple-platform-py signs the rewritten dylibs)",
        ) from None

    return install_names.fix_dylib(path, install_id=install_id, label=label, signer=signer)


def macho_tree_problems(directory: Path) -> list[str]:
    """What dyld and notarization would refuse in a tree of Mach-O files (install_names.py)."""
    from ortbundle.stage.binaries import install_names

    return install_names.tree_problems(directory)


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


def macho_data(path: Path, label: str) -> bytes:
    """A Mach-O file's read-only data (`__TEXT,__cstring` and `__TEXT,__const`)."""
    from ortbundle.stage.binaries import macho

    return macho.data_bytes(path, label)


def elf_defined_names(path: Path, label: str) -> bytes:
    """The names an ELF file's `.dynsym` defines, NUL-joined (elf.py)."""
    from ortbundle.stage.binaries import elf

    return elf.defined_symbol_names(path, label)
