"""Real shared libraries for this machine, compiled by gcc from a few lines of C, and the byte
edits that make one of them unloadable: what the ELF layout checks are tested on."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

# The note the NDK's crtbegin_so.o carries: owner "Android", type 1, the API level, then the
# NDK's version strings (left empty here).
_SOURCE = r"""
__asm__(".pushsection .note.android.ident,\"a\",%%note\n"
        ".balign 4\n.long 8\n.long 8\n.long 1\n.asciz \"Android\"\n.balign 4\n"
        ".long %(api)d\n.long 0\n.popsection\n");
int ortbundle_answer(void) { return 42; }
"""


def compile_library(directory: Path, name: str, *, api: int = 24, page: int = 0x4000) -> Path:
    """`directory/name`: a shared library for this machine, linked for `page`-byte pages, with
    SONAME `name` and a `.note.android.ident` for `api`. Skips when gcc is missing."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed (Debian/Ubuntu: apt install gcc)")
    source = directory / f"{name}.c"
    source.write_text(_SOURCE % {"api": api}, "utf-8")
    library = directory / name
    subprocess.run(
        [gcc, "-shared", "-fPIC", f"-Wl,-z,max-page-size={page}", f"-Wl,-soname,{name}",
         "-o", str(library), str(source)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    source.unlink()
    return library


def move_segment(path: Path, kind: str, offset: int, vaddr: int) -> None:
    """Point the first program header of `kind` (PT_NOTE, …) at `offset`/`vaddr` (ELF64)."""
    with path.open("rb") as stream:
        elf = ELFFile(stream)
        phoff = int(elf["e_phoff"])
        index = next(i for i, s in enumerate(elf.iter_segments()) if s["p_type"] == kind)
    data = bytearray(path.read_bytes())
    struct.pack_into("<QQQ", data, phoff + index * 56 + 8, offset, vaddr, vaddr)
    path.write_bytes(bytes(data))


def relink_section(path: Path, name: str, link: int) -> None:
    """Set section `name`'s sh_link to `link` (ELF64)."""
    with path.open("rb") as stream:
        elf = ELFFile(stream)
        shoff = int(elf["e_shoff"])
        index = elf.get_section_index(name)
    assert index is not None, name
    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, shoff + index * 64 + 40, link)
    path.write_bytes(bytes(data))


# A library that opens others by name at run time, as an execution provider opens its vendor
# stack: each name is a string literal in read-only data, passed to the platform's loader.
_OPENER_ELF = r"""
#include <dlfcn.h>
static const char *const names[] = { %(names)s };
void *ortbundle_open(int i) { return dlopen(names[i], RTLD_NOW | RTLD_LOCAL); }
"""
_OPENER_PE = r"""
#include <windows.h>
static const wchar_t *const wide[] = { %(wide)s };
static const char *const narrow[] = { %(narrow)s };
__declspec(dllexport) void *ortbundle_open(int i) {
    return i < 0 ? (void *)LoadLibraryA(narrow[-i - 1]) : (void *)LoadLibraryExW(wide[i], 0, 0);
}
"""


def _c_strings(names: tuple[str, ...], prefix: str = "") -> str:
    return ", ".join(f'{prefix}"{n}"' for n in names) or "0"


def compile_opener(directory: Path, name: str, opens: tuple[str, ...]) -> Path:
    """`directory/name`: an ELF shared library for this machine (SONAME `name`) that imports
    `dlopen` and names `opens` in .rodata. Skips when gcc is missing."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed (Debian/Ubuntu: apt install gcc)")
    source = directory / f"{name}.c"
    source.write_text(_OPENER_ELF % {"names": _c_strings(opens)}, "utf-8")
    library = directory / name
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-O1", f"-Wl,-soname,{name}", "-o", str(library), str(source),
         "-ldl"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    source.unlink()
    return library


def compile_pe_opener(
    directory: Path, name: str, wide: tuple[str, ...], narrow: tuple[str, ...] = ()
) -> Path:
    """`directory/name`: a PE32+ DLL (MinGW-w64) importing LoadLibraryExW and LoadLibraryA from
    KERNEL32.dll, with `wide` as UTF-16LE and `narrow` as ASCII strings in .rdata. Skips when
    the cross compiler is missing."""
    mingw = shutil.which("x86_64-w64-mingw32-gcc")
    if mingw is None:
        pytest.skip(
            "x86_64-w64-mingw32-gcc is not installed (Debian/Ubuntu: apt install gcc-mingw-w64-x86-64)"
        )
    source = directory / f"{name}.c"
    text = _OPENER_PE % {"wide": _c_strings(wide, "L"), "narrow": _c_strings(narrow)}
    source.write_text(text, "utf-8")
    library = directory / name
    subprocess.run(
        [mingw, "-shared", "-O1", "-s", "-o", str(library), str(source)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    source.unlink()
    return library
