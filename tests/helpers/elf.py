"""Build minimal but well-formed ELF shared libraries with chosen SONAME, NEEDED, machine, class,
PT_LOAD layout, symbol-version needs (.gnu.version_r), Android API note, exported symbols
(.dynsym), read-only strings (.rodata), a compiler's .comment and an ONNX Runtime core's
provider table (relocated through .rela.dyn, as lld leaves it): small enough to write per test, real enough for
pyelftools, readelf, auditwheel and patchelf (which refuses a file without section headers)."""

from __future__ import annotations

import struct
from collections.abc import Sequence

EM = {"EM_X86_64": 62, "EM_AARCH64": 183, "EM_386": 3, "EM_QDSP6": 164, "EM_ARM": 40}
PT_LOAD, PT_DYNAMIC, PT_NOTE = 1, 2, 4
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RUNPATH = 0, 1, 5, 10, 14, 29
SHT_STRTAB, SHT_DYNAMIC, SHT_NOTE, SHT_GNU_VERNEED = 3, 6, 7, 0x6FFFFFFE
SHT_PROGBITS, SHT_RELA, SHT_HASH, SHT_DYNSYM = 1, 4, 5, 11
DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFFE, 0x6FFFFFFF
DT_HASH, DT_SYMTAB, DT_RELA, DT_RELASZ, DT_RELAENT, DT_SYMENT = 4, 6, 7, 8, 9, 11
RELATIVE = {"EM_X86_64": 8, "EM_AARCH64": 1027}  # R_*_RELATIVE
SHF_WRITE, SHF_ALLOC = 1, 2
PF_R, PF_W, PF_X = 4, 2, 1


def make_elf(
    *,
    machine: str = "EM_X86_64",
    soname: str | None = None,
    needed: tuple[str, ...] = (),
    runpath: str | None = None,
    align: int = 0x1000,
    payload: bytes = b"",
    bits: int = 64,
    sections: bool = True,
    loads: Sequence[tuple[int, int, int]] | None = None,
    version_needs: Sequence[tuple[str, Sequence[str]]] = (),
    android_api: int | None = None,
    exports: Sequence[str] = (),
    imports: Sequence[str] = (),
    rodata: Sequence[str] | bytes = (),
    comment: bytes = b"",
    provider_table: Sequence[tuple[str, bool]] = (),
) -> bytes:
    """A little-endian ET_DYN: ELF header, program headers, .dynstr, .dynamic, payload.

    `loads` lists the PT_LOAD segments as (offset, vaddr, align); the first must start at offset
    0, since it maps the headers and the dynamic data (its vaddr may be anything, so
    `[(0, 0x100, 0x4000)]` gives a vaddr not congruent to the offset). Each later segment starts
    at its offset (the file is padded to reach it) and runs to the next one. The default is one
    segment `(0, 0, align)` covering the file. With `sections`, a section header table
    (.dynstr, .dynamic, .shstrtab) follows everything loaded; without, the bytes are the ones
    this helper has always produced.

    `version_needs` lists (file, version nodes) as `.gnu.version_r` and DT_VERNEED record them
    (`[("libc.so.6", ["GLIBC_2.2.5", "GLIBC_2.34"])]`); `android_api` adds the NDK's
    `.note.android.ident` (and the PT_NOTE segment that maps it) with that API level. Both need
    `sections`.

    `exports` are global functions defined in the file (.dynsym, with DT_HASH to count them);
    `imports` global functions it takes from others (undefined .dynsym entries: `dlopen`);
    `rodata` NUL-terminated strings in a `.rodata` section (or its raw bytes: the strings a
    library was built with, copyright notices, a bundled library's messages); `comment` the
    unloaded `.comment` a compiler writes; `provider_table` the (name, available)
    entries of a core's provider table, `{std::string_view, bool}` as libstdc++ lays it out (the
    length, then the pointer, then the flag), its names in `.rodata` and each pointer a RELA
    relative relocation with the slot left zero. These need `sections`; the table a 64-bit file.
    """
    if bits not in (32, 64):
        raise ValueError(f"bits must be 32 or 64, not {bits}")
    layout = list(loads) if loads is not None else [(0, 0, align)]
    if not layout or layout[0][0] != 0:
        raise ValueError("the first PT_LOAD must start at offset 0: it maps the dynamic data")
    wide = bits == 64
    word = 8 if wide else 4
    ehsize, phentsize, shentsize = (64, 56, 64) if wide else (52, 32, 40)
    phnum = len(layout) + 1 + (android_api is not None)  # PT_NOTE maps the Android note
    base = layout[0][1]  # vaddr of offset 0: the first segment maps the headers and .dynamic

    if (exports or imports or rodata or provider_table or comment) and not sections:
        raise ValueError("exports, strings and the provider table live in sections: keep sections")
    if provider_table and not wide:
        raise ValueError("the provider table is written for 64-bit files only")
    strtab = bytearray(b"\x00")
    offsets: dict[str, int] = {}
    version_names = [n for file, nodes in version_needs for n in (file, *nodes)]
    symbols = (*exports, *imports)
    names_in_strtab = (*needed, *(n for n in (soname, runpath) if n), *version_names, *symbols)
    for name in names_in_strtab:
        if name not in offsets:
            offsets[name] = len(strtab)
            strtab += name.encode() + b"\x00"
    strtab_off = ehsize + phentsize * phnum
    dyn_off = strtab_off + len(strtab)
    dyn_off += -dyn_off % 8
    entries = [(DT_NEEDED, offsets[n]) for n in needed]
    if soname:
        entries.append((DT_SONAME, offsets[soname]))
    if runpath:
        entries.append((DT_RUNPATH, offsets[runpath]))
    entries += [(DT_STRTAB, base + strtab_off), (DT_STRSZ, len(strtab))]
    dyn_format = "<qQ" if wide else "<iI"
    more_tags = (2 if version_needs else 0) + (3 if symbols else 0) + (3 if provider_table else 0)
    dyn_size = struct.calcsize(dyn_format) * (len(entries) + 1 + more_tags)
    verneed_off = dyn_off + dyn_size  # .gnu.version_r, then the note, right after .dynamic
    verneed = _verneed(version_needs, offsets)
    note_off = verneed_off + len(verneed)
    note = _android_note(android_api) if android_api is not None else b""
    if version_needs:
        entries += [(DT_VERNEED, base + verneed_off), (DT_VERNEEDNUM, len(version_needs))]
    extra = _Extra(note_off + len(note), base, wide, machine)
    extra.add_exports(exports, offsets, imports)
    extra.add_rodata(rodata, provider_table)
    extra.add_table(provider_table)
    entries += extra.tags
    entries.append((DT_NULL, 0))
    dynamic = b"".join(struct.pack(dyn_format, tag, value) for tag, value in entries)

    body = bytearray(b"\x00" * strtab_off + strtab)
    body += b"\x00" * (dyn_off - len(body))
    body += dynamic + verneed + note + extra.data + payload
    for offset, _vaddr, _align in layout[1:]:
        body += b"\x00" * (offset - len(body))
        if offset >= len(body):
            body += b"\x00" * 16  # something for a later segment to map
    loaded_end = len(body)

    starts = sorted({offset for offset, _vaddr, _align in layout})
    phdrs = bytearray()
    for index, (offset, vaddr, seg_align) in enumerate(layout):
        end = next((s for s in starts if s > offset), loaded_end)
        size = end - offset
        flags = PF_R | PF_X if index == 0 else PF_R | PF_W
        phdrs += _phdr(wide, PT_LOAD, flags, offset, vaddr, size, seg_align)
    phdrs += _phdr(wide, PT_DYNAMIC, PF_R | PF_W, dyn_off, base + dyn_off, len(dynamic), word)
    if note:
        phdrs += _phdr(wide, PT_NOTE, PF_R, note_off, base + note_off, len(note), 4)

    shoff = shnum = shstrndx = 0
    tail = bytearray()
    if sections:
        names = b"\x00.dynstr\x00.dynamic\x00.shstrtab\x00"
        if version_needs or note or extra.sections:  # the optional sections' names, after
            names += b".gnu.version_r\x00.note.android.ident\x00"
        extra_names = {}
        for label in dict.fromkeys(name for name, *_ in extra.sections):
            extra_names[label] = len(names)
            names += label.encode() + b"\x00"
        comment_name = len(names)
        if comment:
            names += b".comment\x00"
        comment_off = loaded_end
        tail += comment  # not loaded: after the segments, before the section names
        shstr_off = loaded_end + len(comment)
        shstr_off += -shstr_off % word
        shoff = shstr_off + len(names)
        shoff += -shoff % word
        tail += b"\x00" * (shstr_off - loaded_end - len(comment)) + names
        tail += b"\x00" * (shoff - shstr_off - len(names))
        dynstr_name, dynamic_name, shstrtab_name, verneed_name, note_name = 1, 9, 18, 28, 43
        tail += _shdr(wide, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        tail += _shdr(
            wide, dynstr_name, SHT_STRTAB, SHF_ALLOC, base + strtab_off, strtab_off,
            len(strtab), 0, 1, 0,
        )  # fmt: skip
        tail += _shdr(
            wide, dynamic_name, SHT_DYNAMIC, SHF_WRITE | SHF_ALLOC, base + dyn_off, dyn_off,
            len(dynamic), 1, word, 2 * word,
        )  # fmt: skip
        shnum = 3
        if version_needs:  # sh_link: .dynstr; sh_info: the number of Elf_Verneed entries
            tail += _shdr(
                wide, verneed_name, SHT_GNU_VERNEED, SHF_ALLOC, base + verneed_off, verneed_off,
                len(verneed), 1, 4, 0, info=len(version_needs),
            )  # fmt: skip
            shnum += 1
        if note:
            tail += _shdr(
                wide, note_name, SHT_NOTE, SHF_ALLOC, base + note_off, note_off, len(note), 0, 4, 0
            )
            shnum += 1
        dynsym_index = shnum if symbols else 0  # .dynsym comes first of these
        for label, kind, flags, offset, size, entsize in extra.sections:
            link = {SHT_DYNSYM: 1, SHT_HASH: dynsym_index, SHT_RELA: dynsym_index}.get(kind, 0)
            tail += _shdr(
                wide, extra_names[label], kind, flags, base + offset, offset, size, link, 8,
                entsize, info=1 if kind == SHT_DYNSYM else 0,
            )  # fmt: skip
            shnum += 1
        if comment:  # SHF_MERGE | SHF_STRINGS, as compilers write it; not loaded
            tail += _shdr(
                wide, comment_name, SHT_PROGBITS, 0x30, 0, comment_off, len(comment), 0, 1, 1
            )
            shnum += 1
        tail += _shdr(wide, shstrtab_name, SHT_STRTAB, 0, 0, shstr_off, len(names), 0, 1, 0)
        shstrndx = shnum
        shnum += 1
    elif version_needs or note:
        raise ValueError("version needs and the Android note live in sections: keep sections")

    ident = b"\x7fELF" + bytes([2 if wide else 1, 1, 1, 0]) + b"\x00" * 8
    fields = (EM[machine], 1, 0, ehsize, shoff, 0, ehsize, phentsize, phnum, shentsize)
    header_format = "<HHIQQQIHHHHHH" if wide else "<HHIIIIIHHHHHH"
    header = ident + struct.pack(header_format, 3, *fields, shnum, shstrndx)
    body[: len(header) + len(phdrs)] = header + phdrs
    return bytes(body + tail)


class _Extra:
    """The optional data after the note: .dynsym and .hash (exports), .rodata (strings and the
    provider names), .data.rel.ro (the provider table) and .rela.dyn (its relocations), laid
    out from `start`, with the dynamic tags and section headers that describe them."""

    def __init__(self, start: int, base: int, wide: bool, machine: str) -> None:
        self.start, self.base, self.wide, self.machine = start, base, wide, machine
        self.data = bytearray()
        self.tags: list[tuple[int, int]] = []
        # (name, type, flags, offset, size, entsize); .dynsym first: the others link to it
        self.sections: list[tuple[str, int, int, int, int, int]] = []
        self.strings: dict[str, int] = {}  # .rodata string → address

    def _put(self, data: bytes) -> int:
        self.data += b"\x00" * (-(self.start + len(self.data)) % 8)
        offset = self.start + len(self.data)
        self.data += data
        return offset

    def add_exports(
        self, exports: Sequence[str], offsets: dict[str, int], imports: Sequence[str] = ()
    ) -> None:
        if not exports and not imports:
            return
        symbols = bytearray(b"\x00" * (24 if self.wide else 16))  # index 0: the null symbol
        # STB_GLOBAL, STT_FUNC: an export defined in section 1, an import undefined (SHN_UNDEF)
        for name, shndx, value in (
            *((n, 1, 0x1000) for n in exports),
            *((n, 0, 0) for n in imports),
        ):
            if self.wide:
                symbols += struct.pack("<IBBHQQ", offsets[name], 0x12, 0, shndx, value, 16)
            else:
                symbols += struct.pack("<IIIBBH", offsets[name], value, 16, 0x12, 0, shndx)
        count = len(exports) + len(imports) + 1
        chain = [0, *range(2, count), 0] if count > 1 else [0]
        table = struct.pack(f"<{2 + 1 + len(chain)}I", 1, count, 1, *chain[:count])
        symtab = self._put(bytes(symbols))
        hashes = self._put(table)
        entsize = 24 if self.wide else 16
        self.tags += [(DT_SYMTAB, self.base + symtab), (DT_SYMENT, entsize)]
        self.tags.append((DT_HASH, self.base + hashes))
        self.sections.append((".dynsym", SHT_DYNSYM, SHF_ALLOC, symtab, len(symbols), entsize))
        self.sections.append((".hash", SHT_HASH, SHF_ALLOC, hashes, len(table), 4))

    def add_rodata(self, rodata: Sequence[str] | bytes, table: Sequence[tuple[str, bool]]) -> None:
        raw = rodata if isinstance(rodata, bytes) else b""
        strings = () if isinstance(rodata, bytes) else rodata
        texts = list(dict.fromkeys([*strings, *(name for name, _ in table)]))
        if not texts and not raw:
            return
        blob = bytearray(raw or b"\x00")
        at = {}
        for text in texts:
            at[text] = len(blob)
            blob += text.encode() + b"\x00"
        offset = self._put(bytes(blob))
        self.strings = {text: self.base + offset + where for text, where in at.items()}
        self.sections.append((".rodata", SHT_PROGBITS, SHF_ALLOC, offset, len(blob), 0))

    def add_table(self, table: Sequence[tuple[str, bool]]) -> None:
        if not table:
            return
        entries = b"".join(struct.pack("<QQQ", len(name), 0, int(on)) for name, on in table)
        slots = self._put(entries)
        relocations = b"".join(
            struct.pack(
                "<QQq", self.base + slots + 24 * i + 8, RELATIVE[self.machine], self.strings[name]
            )
            for i, (name, _) in enumerate(table)
        )
        rela = self._put(relocations)
        self.tags += [(DT_RELA, self.base + rela), (DT_RELASZ, len(relocations))]
        self.tags.append((DT_RELAENT, 24))
        flags = SHF_ALLOC | SHF_WRITE
        self.sections.append((".data.rel.ro", SHT_PROGBITS, flags, slots, len(entries), 0))
        self.sections.append((".rela.dyn", SHT_RELA, SHF_ALLOC, rela, len(relocations), 24))


def elf_hash(name: str) -> int:
    """The SysV ELF hash (vna_hash of a version need)."""
    h = 0
    for byte in name.encode():
        h = ((h << 4) + byte) & 0xFFFFFFFF
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


def _verneed(needs: Sequence[tuple[str, Sequence[str]]], offsets: dict[str, int]) -> bytes:
    """Elf_Verneed entries, each followed by its Elf_Vernaux entries (16 bytes each)."""
    out = bytearray()
    index = 2  # vna_other: 0 and 1 are reserved (local, global)
    for position, (file, nodes) in enumerate(needs):
        last = position == len(needs) - 1
        size = 16 * (1 + len(nodes))
        out += struct.pack("<HHIII", 1, len(nodes), offsets[file], 16, 0 if last else size)
        for k, node in enumerate(nodes):
            following = 0 if k == len(nodes) - 1 else 16
            out += struct.pack("<IHHII", elf_hash(node), 0, index, offsets[node], following)
            index += 1
    return bytes(out)


def _android_note(api: int) -> bytes:
    """The NDK's ABI note: name "Android", type 1, the API level, then NDK version strings."""
    desc = struct.pack("<I", api) + b"\x00" * 128
    return struct.pack("<III", 8, len(desc), 1) + b"Android\x00" + desc


def _phdr(
    wide: bool, kind: int, flags: int, offset: int, vaddr: int, size: int, align: int
) -> bytes:
    if wide:
        return struct.pack("<IIQQQQQQ", kind, flags, offset, vaddr, vaddr, size, size, align)
    return struct.pack("<IIIIIIII", kind, offset, vaddr, vaddr, size, size, flags, align)


def _shdr(
    wide: bool,
    name: int,
    kind: int,
    flags: int,
    addr: int,
    offset: int,
    size: int,
    link: int,
    addralign: int,
    entsize: int,
    *,
    info: int = 0,
) -> bytes:
    if wide:
        return struct.pack(
            "<IIQQQQIIQQ", name, kind, flags, addr, offset, size, link, info, addralign, entsize
        )
    return struct.pack(
        "<IIIIIIIIII", name, kind, flags, addr, offset, size, link, info, addralign, entsize
    )
