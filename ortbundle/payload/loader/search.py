"""Where the platform's loader finds a library by name: as ld.so does (LD_LIBRARY_PATH, the
runtime's directory, /etc/ld.so.cache, the default directories) or as Windows does (the
runtime's directory, System32, the Windows directory, PATH). A runtime's `requires` is searched
so, to skip a runtime that could not load here before anything tries to load it."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_CACHE_OLD, _CACHE_NEW = b"ld.so-1.7.0", b"glibc-ld.so.cache1.1"
_OLD_HEADER, _OLD_ENTRY = 16, struct.Struct("=iII")  # magic[11] + pad, nlibs; flags, key, value
_NEW_HEADER, _NEW_ENTRY = 48, struct.Struct("=iIIIQ")  # flags, key, value, osversion, hwcap
_CACHE_ARCH = {"x86_64": 0x0300, "aarch64": 0x0A00, "arm64": 0x0A00}  # FLAG_*_LIB64
_ELF_MACHINE = {"x86_64": 62, "aarch64": 183, "arm64": 183}
_TRIPLET = {
    "x86_64": "x86_64-linux-gnu",
    "aarch64": "aarch64-linux-gnu",
    "arm64": "aarch64-linux-gnu",
}


def _cstring(data: bytes, offset: int) -> str:
    end = data.find(b"\0", offset)
    return data[offset : end if end >= 0 else len(data)].decode("utf-8", errors="replace")


def read_ld_cache(data: bytes) -> list[tuple[str, int, str]]:
    """(name, flags, path) of every entry of an ld.so.cache, in the file's order.

    Reads glibc's `glibc-ld.so.cache1.1` format, alone or behind the old `ld.so-1.7.0` table
    (the "compat" layout: the new table starts at the next 8-byte boundary after the old
    entries, its string offsets counted from its own start), and the old format alone (string
    offsets counted from the end of its entries). A cache whose table does not fit in the file
    is ignored, as ld.so ignores it.
    """
    start, header, entry, base = -1, _NEW_HEADER, _NEW_ENTRY, 0
    if data.startswith(_CACHE_NEW) and len(data) >= _NEW_HEADER:
        start = 0
    elif data.startswith(_CACHE_OLD) and len(data) >= _OLD_HEADER:
        (count,) = struct.unpack_from("=I", data, 12)
        strings = _OLD_HEADER + count * _OLD_ENTRY.size
        aligned = (strings + 7) & ~7
        new = data[aligned : aligned + len(_CACHE_NEW)] == _CACHE_NEW
        if new and len(data) >= aligned + _NEW_HEADER:
            start = base = aligned
        elif not new:
            start, header, entry, base = 0, _OLD_HEADER, _OLD_ENTRY, strings
    if start < 0:
        return []
    (count,) = struct.unpack_from("=I", data, start + (20 if entry is _NEW_ENTRY else 12))
    if start + header + count * entry.size > len(data):
        return []
    entries = []
    for i in range(count):
        flags, key, value = entry.unpack_from(data, start + header + i * entry.size)[:3]
        name, path = _cstring(data, base + key), _cstring(data, base + value)
        if name and path:
            entries.append((name, flags, path))
    return entries


def _machine(target: str) -> str:
    """linux-x86_64 -> x86_64; windows-arm64 -> arm64."""
    return target.split("-", 1)[1] if "-" in target else ""


def _elf_of(path: Path, machine: str) -> bool:
    """Is it an ELF file of the machine (64-bit)? ld.so skips one that is not and looks on."""
    wanted = _ELF_MACHINE.get(machine)
    try:
        with path.open("rb") as stream:
            head = stream.read(20)
    except OSError:
        return False
    if head[:4] != b"\x7fELF":
        return False
    if wanted is None or len(head) < 20:
        return True
    order = "<" if head[5] == 1 else ">"
    return head[4] == 2 and struct.unpack_from(order + "H", head, 18)[0] == wanted


@dataclass(frozen=True)
class Libraries:
    """Where this machine's loader looks for a library by name, in its order."""

    windows: bool
    machine: str = ""  # x86_64 | aarch64 | arm64: a Linux library of another machine is skipped
    before: tuple[str, ...] = ()  # Linux: LD_LIBRARY_PATH (searched before the runtime's own)
    cache: tuple[tuple[str, str], ...] = ()  # Linux: ld.so.cache (name, path) of this machine
    after: tuple[str, ...] = ()  # Linux: the default dirs; Windows: System32, Windows, PATH
    macos: bool = False  # dyld: install names, the shared cache; after: the fallback path

    def find(self, name: str, own: Path) -> str | None:
        """The path the platform's loader would open for `name`, or None."""
        if self.windows:
            return _find_in([str(own), *self.after], name, windows=True)
        if self.macos:
            return _dyld_find(name, own, self.before, self.after)
        found = _find_in([*self.before, str(own)], name, machine=self.machine)
        for entry, path in () if found else self.cache:
            if entry == name and _elf_of(Path(path), self.machine):
                return path
        return found or _find_in(self.after, name, machine=self.machine)


_LISTINGS: dict[str, dict[str, str]] = {}  # directory -> {lower-case name: name}


def _find_in(
    directories: list[str] | tuple[str, ...], name: str, *, windows: bool = False, machine: str = ""
) -> str | None:
    for directory in directories:
        if not directory:
            continue
        if windows:  # Windows compares names without regard to case
            if directory not in _LISTINGS:
                try:
                    listing = Path(directory).iterdir()
                    _LISTINGS[directory] = {p.name.lower(): p.name for p in listing}
                except OSError:
                    _LISTINGS[directory] = {}
            actual = _LISTINGS[directory].get(name.lower())
            if actual and (Path(directory) / actual).is_file():
                return str(Path(directory) / actual)
        elif _elf_of(Path(directory) / name, machine):
            return str(Path(directory) / name)
    return None


_MACOS_SYSTEM = ("/usr/lib/", "/System/Library/")


def _dyld_find(name: str, own: Path, before: tuple[str, ...], after: tuple[str, ...]) -> str | None:
    """What dyld opens for an install name: the system's own are in the dyld shared cache
    (present, though no file has their path); `@rpath/`, `@loader_path/` and a bare name are
    looked for beside the runtime (its rpath is @loader_path), then in DYLD_LIBRARY_PATH
    before and the fallback path after; another absolute path is itself."""
    if name.startswith(_MACOS_SYSTEM):
        return name
    if name.startswith("/"):
        return name if Path(name).is_file() else None
    leaf = name.rsplit("/", 1)[-1]
    for directory in (*before, str(own), *after):
        if directory and (Path(directory) / leaf).is_file():
            return str(Path(directory) / leaf)
    return None


def _rooted(root: Path, path: str) -> str:
    return str(root / path.lstrip("/")) if path else ""


def system_libraries(
    target: str, root: Path = Path("/"), env: dict[str, str] | None = None, *, windows: bool
) -> Libraries:
    """The search a runtime of `target` meets on this machine (paths under `root` for tests)."""
    env = dict(os.environ) if env is None else env
    machine = _machine(target)
    if target.startswith("macos-"):
        fallback = env.get("DYLD_FALLBACK_LIBRARY_PATH", "/usr/local/lib:/usr/lib")
        return Libraries(
            False,
            macos=True,
            machine=machine,
            before=tuple(
                _rooted(root, p) for p in env.get("DYLD_LIBRARY_PATH", "").split(":") if p
            ),
            after=tuple(_rooted(root, p) for p in fallback.split(":") if p),
        )
    if windows:
        system_root = env.get("SystemRoot") or env.get("windir") or r"C:\Windows"
        search = [p for p in env.get("PATH", "").split(";") if p]
        return Libraries(
            True, machine, after=(str(Path(system_root) / "System32"), system_root, *search)
        )
    cache: list[tuple[str, str]] = []
    for name in ("etc/ld.so.cache",):
        try:
            data = (root / name).read_bytes()
        except OSError:
            continue
        arch = _CACHE_ARCH.get(machine)
        for entry, flags, where in read_ld_cache(data):
            if arch is None or flags & 0xFF00 == arch:
                cache.append((entry, _rooted(root, where)))
    triplet = _TRIPLET.get(machine, "")
    defaults = [f"lib/{triplet}", f"usr/lib/{triplet}"] if triplet else []
    defaults += ["lib64", "usr/lib64", "lib", "usr/lib"]
    return Libraries(
        False,
        machine,
        before=tuple(_rooted(root, p) for p in env.get("LD_LIBRARY_PATH", "").split(":") if p),
        cache=tuple(cache),
        after=tuple(str(root / d) for d in defaults),
    )


def missing_libraries(
    runtime: dict[str, Any], libraries: Libraries, stage: Path
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The runtime's required and optional `requires` entries this machine lacks."""
    own = stage / runtime.get("directory", "")
    required: list[dict[str, Any]] = []
    optional: list[dict[str, Any]] = []
    for need in runtime.get("requires") or []:
        if libraries.find(str(need["name"]), own) is None:
            (optional if need.get("optional") else required).append(need)
    return required, optional
