"""Whether an ELF file keeps its symbol table, read from the section headers alone.

The rpm channel asks it of every shipped library on each build, memoised package or not: with
pyelftools it cost a warm build that library's import (48 modules) and a parse per file. The
section header table is a fixed layout (the ELF specification, "Sections"), so the standard
library reads it."""

from __future__ import annotations

import struct
from pathlib import Path

_SHT_SYMTAB = 2
# (e_shoff, e_shentsize, e_shnum) offsets and formats, by EI_CLASS (1: 32-bit, 2: 64-bit)
_HEADER = {1: (0x20, "I", 0x2E), 2: (0x28, "Q", 0x3A)}


def has_symbol_table(path: Path) -> bool:
    """Whether the file is an ELF object with a SHT_SYMTAB section (.symtab: not stripped),
    which Debian's and Fedora's linters flag; False for anything else, a damaged file included
    (not for the linters to judge: the closure has read every kept library)."""
    try:
        with path.open("rb") as stream:
            ident = stream.read(16)
            if len(ident) < 16 or ident[:4] != b"\x7fELF" or ident[4] not in _HEADER:
                return False
            order = {1: "<", 2: ">"}.get(ident[5])
            if order is None:
                return False
            at, offset_format, count_at = _HEADER[ident[4]]
            stream.seek(at)
            (shoff,) = struct.unpack(
                order + offset_format, stream.read(struct.calcsize(offset_format))
            )
            stream.seek(count_at)
            entry_size, count = struct.unpack(order + "HH", stream.read(4))
            if not shoff or entry_size < 8 or count == 0:
                return False
            stream.seek(shoff)
            table = stream.read(entry_size * count)
    except (OSError, struct.error):
        return False
    return any(
        struct.unpack_from(order + "I", table, n * entry_size + 4)[0] == _SHT_SYMTAB
        for n in range(len(table) // entry_size)
    )
