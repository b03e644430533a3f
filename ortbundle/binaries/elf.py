"""ELF: SONAME, DT_NEEDED, RUNPATH, machine and PT_LOAD alignment, through pyelftools."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from ortbundle.binaries import BinaryInfo, LoadSegment
from ortbundle.errors import BinaryError


def inspect_elf(path: Path, label: str) -> BinaryInfo:
    try:
        with path.open("rb") as stream:
            elf = ELFFile(stream)
            machine = str(elf["e_machine"])
            bits = int(elf.elfclass)
            loads: list[LoadSegment] = []
            needed: list[str] = []
            soname: str | None = None
            runpath: list[str] = []
            segment: Any
            for segment in elf.iter_segments():
                kind = segment["p_type"]
                if kind == "PT_LOAD":
                    loads.append(
                        LoadSegment(
                            offset=int(segment["p_offset"]),
                            vaddr=int(segment["p_vaddr"]),
                            align=int(segment["p_align"]),
                        )
                    )
                elif kind == "PT_DYNAMIC":
                    for tag in segment.iter_tags():
                        dtype = tag.entry.d_tag
                        if dtype == "DT_NEEDED":
                            needed.append(str(tag.needed))
                        elif dtype == "DT_SONAME":
                            soname = str(tag.soname)
                        elif dtype in ("DT_RUNPATH", "DT_RPATH"):
                            value = getattr(tag, "runpath", None) or getattr(tag, "rpath", "")
                            runpath.extend(str(value).split(":"))
    except (ELFError, Exception) as exc:  # noqa: BLE001 - pyelftools also raises raw struct errors
        raise BinaryError(
            f"{label} is not a readable ELF file ({type(exc).__name__}: {exc})",
            file=label,
            fix="the library is truncated or corrupt; check the pin and the archive",
        ) from None
    if not loads:
        raise BinaryError(
            f"{label} has no loadable segment (PT_LOAD): it is not a shared library",
            file=label,
            fix="the recipe's library glob takes a file that is not a library, or it is corrupt",
        )
    return BinaryInfo(
        format="elf",
        bits=bits,
        machine=machine,
        soname=soname,
        needed=tuple(needed),
        runpath=tuple(r for r in runpath if r),
        loads=tuple(loads),
    )
