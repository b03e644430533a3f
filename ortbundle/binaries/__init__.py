"""Read what a native library needs: pure functions from a file to a frozen description."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ortbundle.errors import BinaryError


@dataclass(frozen=True)
class LoadSegment:
    offset: int
    vaddr: int
    align: int


@dataclass(frozen=True)
class BinaryInfo:
    """The facts the closure and the channels need about one library."""

    format: str  # elf | pe
    machine: str  # pyelftools e_machine name (EM_X86_64) or PE machine (AMD64)
    soname: str | None  # ELF DT_SONAME; None for PE
    needed: tuple[str, ...]  # DT_NEEDED, or the PE import table
    delay_needed: tuple[str, ...] = ()  # PE delay-import table
    runpath: tuple[str, ...] = ()
    loads: tuple[LoadSegment, ...] = ()  # ELF PT_LOAD segments (page-size checks)
    bits: int = 0  # 32 or 64 (ELF class, PE optional-header magic); 0 when unknown

    @property
    def all_needed(self) -> tuple[str, ...]:
        return self.needed + self.delay_needed


def sniff_format(path: Path) -> str | None:
    with path.open("rb") as stream:
        magic = stream.read(4)
    if magic == b"\x7fELF":
        return "elf"
    if magic[:2] == b"MZ":
        return "pe"
    return None


def inspect(path: Path, *, name: str | None = None) -> BinaryInfo:
    """Describe an ELF or PE library; any malformation is a BinaryError naming the file."""
    from ortbundle.binaries import elf, pe

    label = name or path.name
    fmt = sniff_format(path)
    if fmt == "elf":
        return elf.inspect_elf(path, label)
    if fmt == "pe":
        return pe.inspect_pe(path, label)
    raise BinaryError(
        f"{label} is neither an ELF nor a PE library",
        file=label,
        fix="only native libraries can be roots; check the recipe's roots and library globs",
    )
