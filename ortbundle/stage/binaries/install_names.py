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
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import apple_platform
import lief

from ortbundle._core.errors import BinaryError
from ortbundle._core.fsio import atomic_write
from ortbundle.config.project import CodeSigner
from ortbundle.config.targets import is_macos_system
from ortbundle.stage.binaries.info import BinaryInfo, sniff_format
from ortbundle.stage.binaries.macho import ARM64, inspect_macho, thin_arm64

RPATH = "@rpath/"
LOADER_PATH = "@loader_path"
EXECUTABLE_PATH = "@executable_path"
_LOADS = {"LOAD_DYLIB", "LOAD_WEAK_DYLIB", "REEXPORT_DYLIB", "LOAD_UPWARD_DYLIB", "LAZY_LOAD_DYLIB"}
# an ad-hoc signature has no CMS blob; apple-codesign's verifier reports its absence as this
_NO_CMS = "CMS error: missing further values"


def _sign_options(signer: CodeSigner) -> dict[str, Any]:
    """apple-codesign's arguments: none for ad-hoc; the .p12 identity, without a timestamp
    server (a build does not talk to one; notarization stamps the submission)."""
    if signer.p12 is None:
        return {}
    key = apple_platform.P12Key(path=str(signer.p12), password=signer.password)
    return {"signer": apple_platform.Signer(p12=key), "timestamp_url": "none"}


def _name(command: Any) -> str:
    return str(command.command).rsplit(".", 1)[-1]


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
    except Exception as exc:  # noqa: BLE001 - lief raises its own, and the reads raw errors
        raise _cannot(label, f"cannot be rewritten ({type(exc).__name__}: {exc})") from None
    try:
        signed = apple_platform.sign_macho_bytes(
            rewritten, binary_identifier=install_id, **_sign_options(signer)
        )
    except apple_platform.ApplePlatformError as exc:
        raise BinaryError(
            f"{label} could not be signed {signer.describe}: {exc}",
            file=label,
            fix="check the identity's .p12 and password (ORTBUNDLE_CODESIGN_P12, "
            "ORTBUNDLE_CODESIGN_P12_PASSWORD), or unset them to sign ad-hoc",
        ) from None
    atomic_write(path, signed, mode=0o644)
    info = inspect_macho(path, label)
    problems = dylib_problems(info, install_id=install_id)
    problems += signature_problems(path)
    if problems:
        raise _cannot(label, f"is still not relocatable after rewriting: {'; '.join(problems)}")
    return info


def _rewritten(data: bytes, install_id: str) -> bytes:
    """The thin dylib's bytes with its id, dependencies and rpaths rewritten, unsigned."""
    fat = lief.MachO.parse(data)
    if fat is None or fat.size != 1:
        raise ValueError("not one readable Mach-O slice")
    binary: Any = fat.at(0)
    if binary.has_code_signature:
        binary.remove_signature()
    rpaths: list[int] = []
    for index, command in enumerate(binary.commands):
        kind = _name(command)
        if kind == "ID_DYLIB":
            command.name = RPATH + install_id
        elif kind in _LOADS:
            command.name = wanted_name(str(command.name))
        elif kind == "RPATH":
            rpaths.append(index)
    # the first rpath becomes @loader_path and the others go, by index: a command removed
    # while Python still holds it leaves lief's wrapper dangling (it aborts the interpreter)
    if rpaths:
        binary.commands[rpaths[0]].path = LOADER_PATH
        for index in reversed(rpaths[1:]):
            binary.remove_command(index)
    else:
        binary.add(lief.MachO.RPathCommand.create(LOADER_PATH))
    return bytes(binary.write_to_bytes())


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
