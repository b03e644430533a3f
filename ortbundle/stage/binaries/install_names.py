"""Make a staged Mach-O relocatable and loadable, then check a tree the way dyld would.

A runtime tree is flat (`runtimes/<name>/`), so every bundled dylib is found through one rpath,
`@loader_path`: each shipped dylib's id becomes `@rpath/<file>`, every name it needs that is not
the system's (`/usr/lib`, `/System`) becomes `@rpath/<file>` too, and its rpaths become exactly
`@loader_path`. A fat file is cut to its arm64 slice first. Any edit invalidates the code
signature and Apple Silicon kills code whose signature is invalid, so every file is signed
again after the edit — ad-hoc, or with a Developer ID identity (`CodeSigner`) — and the result
is read back and refused unless it is what was asked for.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

import apple_platform

from ortbundle._core.errors import BinaryError
from ortbundle._core.fsio import atomic_output
from ortbundle.config.project import CodeSigner
from ortbundle.config.targets import is_macos_system
from ortbundle.stage.binaries.info import BinaryInfo, sniff_format
from ortbundle.stage.binaries.macho import (
    ARM64,
    DYLIBS,
    FAT_HEADER_BYTES,
    HEADER_64,
    LC_ID_DYLIB,
    LC_RPATH,
    Slice,
    arm64_range,
    first_section_offset,
    inspect_macho,
    read_slice,
)

RPATH = "@rpath/"
LOADER_PATH = "@loader_path"
EXECUTABLE_PATH = "@executable_path"
# an ad-hoc signature has no CMS blob; apple-codesign's verifier reports its absence as this
_NO_CMS = "CMS error: missing further values"
_CHUNK = 1 << 20


# The signer runs in a child process: apple-codesign holds about three copies of the file it
# signs (a 35 MB core: ~105 MiB), which beside the other targets' staging threads took the build
# past 200 MiB. The child is ours too, and stays far below that on its own.
_SIGN_CHILD = r"""
import os, sys
import apple_platform
path, identifier = sys.argv[1:3]
options = {}
p12 = os.environ.get("ORTBUNDLE_SIGN_CHILD_P12")
if p12:  # no timestamp server: a build does not talk to one; notarization stamps it
    key = apple_platform.P12Key(
        path=p12, password=os.environ.get("ORTBUNDLE_SIGN_CHILD_PASSWORD", "")
    )
    options = {"signer": apple_platform.Signer(p12=key), "timestamp_url": "none"}
try:
    apple_platform.sign(path, binary_identifier=identifier, **options)
except apple_platform.ApplePlatformError as exc:
    print(exc, file=sys.stderr)
    sys.exit(3)
"""


def _sign(path: Path, install_id: str, signer: CodeSigner) -> str | None:
    """Sign `path` in place (ad-hoc, or with the .p12 identity) in a child process; what the
    signer said when it refused, else None. The password goes by the environment, not argv."""
    env = dict(os.environ)
    if signer.p12 is not None:
        env["ORTBUNDLE_SIGN_CHILD_P12"] = str(signer.p12)
        env["ORTBUNDLE_SIGN_CHILD_PASSWORD"] = signer.password
    done = subprocess.run(
        [sys.executable, "-c", _SIGN_CHILD, str(path), install_id],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode == 0:
        return None
    return (
        done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
    )


def wanted_name(install_name: str) -> str:
    """What a needed install name becomes: the system's unchanged, a bundled one
    `@rpath/<its file>`."""
    if is_macos_system(install_name):
        return install_name
    return RPATH + install_name.rsplit("/", 1)[-1]


def fix_dylib(path: Path, *, install_id: str, label: str, signer: CodeSigner) -> BinaryInfo:
    """Rewrite the dylib at `path` in place (arm64 slice; id `@rpath/<install_id>`; bundled
    dependencies `@rpath/<file>`; rpath `@loader_path`), sign it, and return what it now says
    of itself — refused unless that is exactly the layout asked for."""
    try:
        with path.open("rb") as source:
            offset, size = _arm64_slice(source, path.stat().st_size)
            image = read_slice(source, offset, size)
            ncmds, sizeofcmds, header = _rewritten_header(image, install_id)
            # streamed: the slice is copied in chunks and only its header is patched, so a
            # 35 MB core is never held in memory (a build stays under 200 MiB)
            with atomic_output(path, mode=0o644) as tmp, tmp.open("wb") as out:
                source.seek(offset)
                left = size
                while left and (chunk := source.read(min(_CHUNK, left))):
                    out.write(chunk)
                    left -= len(chunk)
                if left:
                    raise ValueError("the slice runs past the end of the file")
                out.seek(16)
                out.write(struct.pack("<II", ncmds, sizeofcmds))
                out.seek(HEADER_64.size)
                out.write(header)
    except (ValueError, struct.error) as exc:  # a name that is not text, a count past the end
        raise _cannot(label, f"cannot be rewritten ({type(exc).__name__}: {exc})") from None
    refused = _sign(path, install_id, signer)  # in place, in a child (see _SIGN_CHILD)
    if refused is not None:
        raise BinaryError(
            f"{label} could not be signed {signer.describe}: {refused}",
            file=label,
            fix="check the identity's .p12 and password (ORTBUNDLE_CODESIGN_P12, "
            "ORTBUNDLE_CODESIGN_P12_PASSWORD), or unset them to sign ad-hoc",
        ) from None
    info = inspect_macho(path, label)
    problems = dylib_problems(info, install_id=install_id)
    problems += signature_problems(path)
    if problems:
        raise _cannot(label, f"is still not relocatable after rewriting: {'; '.join(problems)}")
    return info


def _lc_str(cmd: int, fixed: bytes, text: str) -> bytes:
    """A load command of `fixed` bytes after cmd/cmdsize, then `text`, padded to 8 bytes."""
    head = 8 + len(fixed)
    raw = text.encode() + b"\0"
    size = (head + len(raw) + 7) // 8 * 8
    return struct.pack("<II", cmd, size) + fixed + raw + b"\0" * (size - head - len(raw))


def _arm64_slice(stream: BinaryIO, size: int) -> tuple[int, int]:
    """(offset, size) of the arm64 slice a fat file holds, else of the whole file (what
    thin_arm64 cuts out, found from the fat header alone)."""
    head = stream.read(FAT_HEADER_BYTES)
    thin = arm64_range(head, size)
    return thin if thin is not None else (0, size)


def _rewritten_header(image: Slice, install_id: str) -> tuple[int, int, bytes]:
    """The thin dylib's new load-command count and size, and the bytes from the end of its
    header on:
    its id, dependencies and rpaths rewritten in the load commands' area, as install_name_tool
    does: nothing else moves. The area may grow into the padding before the first section
    (ld64's -headerpad); a dylib without room is refused. A shorter area is padded with zeros
    over the old one's end."""
    if image.bits != 64:
        raise ValueError("not a 64-bit Mach-O image")
    commands: list[bytes] = []
    rpath_done = False
    for command in image.commands:
        if command.cmd == LC_ID_DYLIB:
            commands.append(_lc_str(command.cmd, command.raw[8:24], RPATH + install_id))
        elif command.cmd in DYLIBS:
            name = wanted_name(command.name)
            commands.append(_lc_str(command.cmd, command.raw[8:24], name))
        elif command.cmd == LC_RPATH:
            if not rpath_done:  # the first rpath becomes @loader_path, the others go
                commands.append(_lc_str(LC_RPATH, struct.pack("<I", 12), LOADER_PATH))
                rpath_done = True
        else:
            commands.append(command.raw)
    if not rpath_done:
        commands.append(_lc_str(LC_RPATH, struct.pack("<I", 12), LOADER_PATH))
    area = b"".join(commands)
    old = sum(len(c.raw) for c in image.commands)
    room = first_section_offset(image) - HEADER_64.size
    if len(area) > room:
        raise ValueError(
            f"the rewritten load commands need {len(area)} bytes, the header has room for {room}"
        )
    return len(commands), len(area), area + b"\0" * (max(len(area), old) - len(area))


def _cannot(label: str, what: str) -> BinaryError:
    return BinaryError(
        f"{label} {what}",
        file=label,
        fix="the dylib cannot be made relocatable here; ask upstream to link it with "
        "-headerpad_max_install_names and @rpath install names, or pin another build",
    )


def dylib_problems(info: BinaryInfo, *, install_id: str | None = None) -> list[str]:
    """What notarization or dyld would refuse in one shipped dylib, one sentence each: a
    foreign or second architecture, an absolute install name outside the system's, an
    `@executable_path` name, an rpath that is not relative to the file, no signature."""
    problems: list[str] = []
    if info.architectures != (ARM64,):
        problems.append(f"architectures {', '.join(info.architectures)} (only arm64 ships)")
    if install_id is not None and info.soname != RPATH + install_id:
        problems.append(f"id {info.soname} is not {RPATH}{install_id}")
    for name in info.all_needed:
        if not (is_macos_system(name) or name.startswith(RPATH)):
            problems.append(f"needs {name}, neither @rpath nor the system's")
    for rpath in info.runpath:
        if not rpath.startswith(LOADER_PATH):
            problems.append(f"rpath {rpath} is not relative to the file (@loader_path)")
    if not info.signed:
        problems.append("no code signature")
    return problems


def signature_problems(path: Path) -> list[str]:
    """What apple-codesign's verifier finds wrong with the file's signature (an ad-hoc
    signature's missing CMS blob is no problem: it has none by design)."""
    try:
        found = apple_platform.verify_macho(path)
    except apple_platform.ApplePlatformError as exc:
        return [f"signature unreadable ({exc})"]
    return [
        str(p.get("description", p))
        for p in found
        if not str(p.get("description", "")).startswith(_NO_CMS)
    ]


def resolve(install_name: str, loader: Path, rpaths: Iterable[str]) -> Path | None:
    """Where dyld finds `install_name` needed by the file `loader`: `@loader_path/` relative
    to the loader's directory, `@rpath/` through each of the loader's rpaths in order (each
    expanded the same way); an absolute name is itself. `@executable_path` depends on the app
    and resolves to None, as does a name no candidate path exists for."""
    here = loader.parent

    def expand(text: str) -> Path | None:
        if text.startswith(LOADER_PATH):
            return Path(os.path.normpath(here / text[len(LOADER_PATH) :].lstrip("/")))
        if text.startswith(EXECUTABLE_PATH) or text.startswith("@"):
            return None
        return Path(text)

    if install_name.startswith(RPATH):
        tail = install_name[len(RPATH) :]
        for rpath in rpaths:
            base = expand(rpath)
            if base is not None and (base / tail).exists():
                return base / tail
        return None
    found = expand(install_name)
    return found if found is not None and found.exists() else None


def tree_problems(directory: Path) -> list[str]:
    """Every Mach-O file of the flat runtime `directory` checked as dyld and notarization
    would: each needed name resolves inside the tree (or is the system's), each id names a
    file of the tree, arm64 only, a valid signature. One sentence per problem, naming the
    file."""
    problems: list[str] = []
    for path in sorted(p for p in directory.iterdir() if p.is_file() and not p.is_symlink()):
        if sniff_format(path) != "macho":
            continue
        where = path.relative_to(directory).as_posix()
        try:
            info = inspect_macho(path, where)
        except BinaryError as exc:
            problems.append(exc.message)
            continue
        problems += [f"{where}: {p}" for p in dylib_problems(info)]
        problems += [f"{where}: {p}" for p in signature_problems(path)]
        if info.soname and resolve(info.soname, path, info.runpath or (LOADER_PATH,)) is None:
            problems.append(f"{where}: its id {info.soname} names no file beside it")
        for name in info.needed:
            if is_macos_system(name):
                continue
            if resolve(name, path, info.runpath) is None:
                problems.append(f"{where}: {name} resolves to no file in the tree")
    return problems
