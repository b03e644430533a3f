"""ELF: SONAME, DT_NEEDED, RUNPATH, machine, PT_LOAD alignment, symbol-version needs and the
Android API note, through pyelftools."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection

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
            version_needs, android_api = _version_facts(elf)
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
        version_needs=version_needs,
        android_api=android_api,
    )


_ANDROID_IDENT = ".note.android.ident"


def _version_facts(elf: ELFFile) -> tuple[tuple[tuple[str, str], ...], int]:
    """(.gnu.version_r as (file, version node) pairs, the API level of .note.android.ident).

    Both are small sections found from the section headers; a library without them (or
    without section headers) needs no versioned symbol and declares no API level.
    """
    needs: list[tuple[str, str]] = []
    api = 0
    section: Any
    for section in elf.iter_sections():
        if isinstance(section, GNUVerNeedSection):
            for verneed, auxiliaries in section.iter_versions():
                for aux in auxiliaries:
                    needs.append((str(verneed.name), str(aux.name)))
        elif section.name == _ANDROID_IDENT:
            api = _android_api(section.data(), little=elf.little_endian)
    return tuple(sorted(set(needs))), api


def _android_api(data: bytes, *, little: bool) -> int:
    """The note is namesz, descsz, type 1, "Android" NUL-padded to 4, then the API level (u32)."""
    order = "<" if little else ">"
    if len(data) < 12:
        return 0
    namesz, descsz, kind = struct.unpack_from(f"{order}III", data)
    name_end = 12 + namesz
    desc = 12 + ((namesz + 3) & ~3)
    if kind != 1 or data[12:name_end].rstrip(b"\0") != b"Android" or descsz < 4:
        return 0
    if len(data) < desc + 4:
        return 0
    return int(struct.unpack_from(f"{order}I", data, desc)[0])
