"""Which execution providers a library names, and which an ONNX Runtime core offers: pure
functions over the bytes elf.py and pe.py hand them.

A provider's name is a C string in read-only data ("DmlExecutionProvider"; a plugin EP's factory
registers one too). A core names every provider ONNX Runtime knows, built in or not: its
`GetAvailableProviders()` reads a constant table of (name, available) entries, one per known
provider, in priority order, ending with the CPU provider. That table is found here by the
pointers to the names it holds, so what a core offers comes from its bytes, not from the name
of the wheel.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Iterable, Mapping

SUFFIX = "ExecutionProvider"
CPU = "CPUExecutionProvider"  # every core offers it, and its table ends with it
_SUFFIX_BYTES = SUFFIX.encode() + b"\x00"
_NAME_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_MAX_HEAD = 64  # the longest name before the suffix a provider has is 13 characters
_MIN_TABLE = 4  # entries: a real table holds every provider ONNX Runtime knows (20-odd)


def named_providers(data: bytes, at: int = 0) -> dict[int, str]:
    """Each standalone `[A-Za-z][A-Za-z0-9]*ExecutionProvider` C string in `data`, by its
    address (`at` is the address of `data[0]`).

    Standalone: NUL-terminated and not the tail of a longer text (an error message, a type
    name), so the byte before it is not printable ASCII."""
    found: dict[int, str] = {}
    end = data.find(_SUFFIX_BYTES)
    while end >= 0:
        start = end
        while start > 0 and end - start < _MAX_HEAD and data[start - 1] in _NAME_BYTES:
            start -= 1
        before = data[start - 1] if start else 0
        head = data[start:end]
        if head[:1].isalpha() and not 0x20 <= before <= 0x7E:
            found[at + start] = head.decode("ascii") + SUFFIX
        end = data.find(_SUFFIX_BYTES, end + len(_SUFFIX_BYTES))
    return found


def in_place_pointers(
    data: bytes, at: int, targets: Iterable[int], pointer: int, base: int = 0
) -> dict[int, int]:
    """The aligned words of `data` (mapped at address `at`) whose value is one of `targets`'
    addresses plus `base` (a PE's image base; 0 for an ELF whose loader writes the address in
    place): {address of the word: address pointed to}."""
    sites: dict[int, int] = {}
    for target in targets:
        encoded = (target + base).to_bytes(pointer, "little")
        hit = data.find(encoded)
        while hit >= 0:
            if (at + hit) % pointer == 0:
                sites[at + hit] = target
            hit = data.find(encoded, hit + 1)
    return sites


def rela_pointers(table: bytes, targets: Iterable[int], pointer: int) -> dict[int, int]:
    """The ELF RELA entries (r_offset, r_info, r_addend) whose addend is one of `targets`:
    {r_offset: addend}. A relative relocation's slot holds zero until the loader writes it."""
    code = "Q" if pointer == 8 else "I"
    words = array(code, table[: len(table) // (3 * pointer) * 3 * pointer])
    if sys.byteorder != "little":
        words.byteswap()
    wanted = set(targets)
    return {o: a for o, a in zip(words[0::3], words[2::3], strict=True) if a in wanted}


def available_providers(
    names: Mapping[int, str],
    cpu_slots: Iterable[int],
    target_of: Callable[[int], int | None],
    word: Callable[[int], int | None],
    pointer: int,
) -> tuple[str, ...]:
    """The providers a core's table marks available, in its order; () when no table is found.

    `names` are the provider names by address; `cpu_slots` the pointer slots that point at
    the CPU provider's name (the table's last entry); `target_of(slot)` the address a slot
    points at (None: none); `word(address)` the pointer-sized little-endian word there. From
    each CPU slot the table is walked backwards at one stride (two or three words:
    `{const char*, bool}` in older releases, `{std::string_view, bool}` since) while each slot
    names another provider; the longest run is the table. Its flag sits after the pointer, or
    after the length a string view keeps beside it (before the pointer in libstdc++, after it
    in MSVC's and libc++'s). Walking from the CPU slots costs a few reads where searching for
    every name's pointers cost a pass over the data each."""
    best: list[tuple[int, str]] = []
    for cpu in cpu_slots:
        for stride in (2 * pointer, 3 * pointer):
            run = [(cpu, CPU)]
            while True:
                slot = run[0][0] - stride
                target = target_of(slot)
                name = names.get(target) if target is not None else None
                if name is None or any(name == n for _, n in run):
                    break
                run.insert(0, (slot, name))
            if len(run) > len(best):
                best = run
    if len(best) < _MIN_TABLE:
        return ()
    stride = best[1][0] - best[0][0]
    if stride == 3 * pointer and all(word(s + pointer) == len(n) for s, n in best):
        flag = 2 * pointer  # {pointer, length}, then the flag
    elif stride == 3 * pointer and all(word(s - pointer) == len(n) for s, n in best):
        flag = pointer  # {length, pointer}, then the flag
    elif stride == 2 * pointer:
        flag = pointer
    else:
        return ()
    flags = [word(s + flag) for s, _ in best]
    bits = [f & 0xFF if f is not None else -1 for f in flags]
    if any(b not in (0, 1) for b in bits) or bits[-1] != 1:
        return ()  # not a table of flags, or the CPU provider unavailable: not what we read
    return tuple(n for (_, n), b in zip(best, bits, strict=True) if b)
