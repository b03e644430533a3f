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
    entry = 3 * pointer
    sites: dict[int, int] = {}
    for target in targets:
        encoded = target.to_bytes(pointer, "little")
        hit = table.find(encoded)
        while hit >= 0:
            start = hit - 2 * pointer
            if start >= 0 and start % entry == 0:
                sites[int.from_bytes(table[start : start + pointer], "little")] = target
            hit = table.find(encoded, hit + 1)
    return sites


def available_providers(
    names: Mapping[int, str],
    sites: Mapping[int, int],
    word: Callable[[int], int | None],
    pointer: int,
) -> tuple[str, ...]:
    """The providers a core's table marks available, in its order; () when no table is found.

    `names` are the provider names by address, `sites` the pointer slots that point at them,
    `word(address)` the pointer-sized little-endian word there (None: not in the file). The
    table is the longest run of slots at one stride (two or three words: `{const char*, bool}`
    in older releases, `{std::string_view, bool}` since) naming distinct providers and ending
    with the CPU provider; its flag sits after the pointer, or after the length a string view
    keeps beside it (before the pointer in libstdc++, after it in MSVC's and libc++'s)."""
    slots = sorted(s for s, target in sites.items() if target in names)
    named = {s: names[sites[s]] for s in slots}
    best: list[int] = []
    for stride in (2 * pointer, 3 * pointer):
        run: list[int] = []
        for slot in slots:
            seen = {named[s] for s in run}
            follows = bool(run) and slot - run[-1] == stride and named[slot] not in seen
            run = [*run, slot] if follows else [slot]
            if named[slot] == CPU and len(run) > len(best):
                best = run
    if len(best) < _MIN_TABLE:
        return ()
    stride = best[1] - best[0]
    entries = [(slot, named[slot]) for slot in best]
    if stride == 3 * pointer and all(word(s + pointer) == len(n) for s, n in entries):
        flag = 2 * pointer  # {pointer, length}, then the flag
    elif stride == 3 * pointer and all(word(s - pointer) == len(n) for s, n in entries):
        flag = pointer  # {length, pointer}, then the flag
    elif stride == 2 * pointer:
        flag = pointer
    else:
        return ()
    flags = [word(s + flag) for s, _ in entries]
    bits = [f & 0xFF if f is not None else -1 for f in flags]
    if any(b not in (0, 1) for b in bits) or bits[-1] != 1:
        return ()  # not a table of flags, or the CPU provider unavailable: not what we read
    return tuple(n for (_, n), b in zip(entries, bits, strict=True) if b)
