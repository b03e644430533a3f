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

import io
import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import apple_platform

from ortbundle._core.errors import BinaryError
from ortbundle._core.fsio import atomic_output
from ortbundle.config.project import CodeSigner
from ortbundle.config.targets import is_macos_system
from ortbundle.stage.binaries.info import BinaryInfo, sniff_format
from ortbundle.stage.binaries.macho import (
    ARM64,
    DYLIBS,
    HEADER_64,
    LC_ID_DYLIB,
    LC_RPATH,
    first_section_offset,
    inspect_macho,
    read_slice,
    thin_arm64,
)

RPATH = "@rpath/"
LOADER_PATH = "@loader_path"
EXECUTABLE_PATH = "@executable_path"
# an ad-hoc signature has no CMS blob; apple-codesign's verifier reports its absence as this
_NO_CMS = "CMS error: missing further values"


def _sign_options(signer: CodeSigner) -> dict[str, Any]:
    """apple-codesign's arguments: none for ad-hoc; the .p12 identity, without a timestamp
    server (a build does not talk to one; notarization stamps the submission)."""
    if signer.p12 is None:
        return {}
    key = apple_platform.P12Key(path=str(signer.p12), password=signer.password)
    return {"signer": apple_platform.Signer(p12=key), "timestamp_url": "none"}


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
    data = path.read_bytes()
    thin = thin_arm64(data)
    if thin is not None:
        data = thin
    try:
        rewritten = _rewritten(data, install_id)
    except (ValueError, struct.error) as exc:  # a name that is not text, a count past the end
        raise _cannot(label, f"cannot be rewritten ({type(exc).__name__}: {exc})") from None
    del data, thin  # a 35 MB core is held once at a time: a build stays under 200 MiB
    with atomic_output(path, mode=0o644) as tmp:
        tmp.write_bytes(rewritten)
    del rewritten
    try:  # in place: apple-codesign reads and writes the file, Python holds no copy
        apple_platform.sign(path, binary_identifier=install_id, **_sign_options(signer))
    except apple_platform.ApplePlatformError as exc:
        raise BinaryError(
            f"{label} could not be signed {signer.describe}: {exc}",
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


def _rewritten(data: bytes, install_id: str) -> bytearray:
    """The thin dylib's bytes with its id, dependencies and rpaths rewritten in the load
    commands' area, as install_name_tool does: nothing else moves. The area may grow into the
    padding before the first section (ld64's -headerpad); a dylib without room is refused."""
    image = read_slice(io.BytesIO(data), 0, len(data))
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
    out = bytearray(data)
    struct.pack_into("<II", out, 16, len(commands), len(area))  # ncmds, sizeofcmds
    end = HEADER_64.size + max(len(area), old)
    out[HEADER_64.size : end] = area + b"\0" * (end - HEADER_64.size - len(area))
    return out


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
