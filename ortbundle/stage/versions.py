"""Versions of bundled components, read from the files themselves.

A recipe's [[licenses]] rule states a component's version; for a component bundled inside
another's archive (DirectX's dxcompiler.dll and dxil.dll in an ONNX Runtime wheel) the recipe
may only know where it came from ("bundled with onnxruntime-webgpu 1.27.0"). The files know
better: a PE DLL carries a VS_VERSIONINFO resource (FileVersion, ProductVersion, CompanyName),
an ELF library its full version in its real file name (libonnxruntime.so.1.24.1). A PE file's
version is its ProductVersion, the release of the product it belongs to; FileVersion numbers the
file itself and may count something else entirely (NVIDIA's cudart64_13.dll is CUDA 13.4.46,
FileVersion 6.14.11.13040). So:

- a rule whose version is not a version number takes the version its files carry (all of them
  must carry the same one), and the PE CompanyName as the component's publisher;
- a rule that states a version is checked against every file that carries one: a file that
  contradicts the recipe stops the build.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ortbundle._core.errors import LicenseError
from ortbundle._core.memo import NO_MEMO, Memo
from ortbundle.stage.binaries import read_version_info
from ortbundle.stage.binaries.info import is_macho
from ortbundle.stage.file_facts import (
    FileEvidence,
    elf_evidence,
    evidence_from_json,
    evidence_to_json,
    macho_evidence,
    pe_evidence,
)

if TYPE_CHECKING:
    from ortbundle.stage.binaries.pe import VersionInfo

_NUMERIC = re.compile(r"^\d+(\.\d+)*")
_ELF_NAME = re.compile(r"\.so\.(\d+\.\d+\.\d+(?:\.\d+)?)$")
# ONNX Runtime's release pipeline writes FileVersion as major.minor.YYYYMMDD.build.commit
# (1.27.0 ships as 1.27.20260615.2.8f0278c): a date in the third place stands for the patch.
_DATE_PATCH = re.compile(r"^20\d{6}$")


@dataclass(frozen=True)
class FileVersion:
    """What one file says its version is, and where that came from."""

    path: str  # relative to the target stage
    version: str  # numeric, dotted: "1.9.0.1"
    raw: tuple[str, ...]  # the strings as the file has them ("1.9.0.1 (3e6e1485)")
    publisher: str  # PE CompanyName; "" for ELF
    evidence: str  # "PE version resource" or "ELF file name"


@dataclass(frozen=True)
class FileFacts:
    """What one file says of itself: the version it carries (None: none) and the licence
    evidence it carries (ortbundle/stage/file_facts.py)."""

    version: FileVersion | None
    evidence: FileEvidence


def read_file_facts(
    path: Path, relative: str, *, sha256: str = "", memo: Memo = NO_MEMO
) -> FileFacts:
    """The version and the evidence a file carries, read in one pass over it.

    With a build's `memo` they are read once per SHA-256: they are the same
    for the same bytes, and parsing a 20 MB DLL's resources, or scanning a 30 MB library's
    read-only data, was most of what attribution cost on a warm build. An ELF library's version
    comes from its name, so it is taken from `relative` every time."""

    def to_json(read: _Read) -> dict[str, Any]:
        pe = read.pe_version
        kept = (
            None
            if pe is None
            else {"version": pe.version, "raw": list(pe.raw), "publisher": pe.publisher}
        )
        return {
            "reading": _READING,
            "pe_version": kept,
            "evidence": evidence_to_json(read.evidence),
        }

    def from_json(data: Any) -> _Read:
        if data["reading"] != _READING:
            raise ValueError("kept by an older reading: read the file again")
        evidence = evidence_from_json(data["evidence"])
        pe = data["pe_version"]
        if pe is None:
            return _Read(None, evidence)
        raw = tuple(str(v) for v in pe["raw"])
        return _Read(FileVersion("", str(pe["version"]), raw, pe["publisher"], _PE), evidence)

    if sha256:  # the bytes were checked: kept by them alone, as the resource always was
        read = memo.remembered(
            "file-versions", [sha256], lambda: _read(path, relative), to_json, from_json, code=False
        )
    else:  # bytes not checked: nothing to key them by
        read = _read(path, relative)
    if read.evidence.format == "elf":
        found = _ELF_NAME.search(relative.rsplit("/", 1)[-1])
        version = (
            FileVersion(relative, found.group(1), (found.group(1),), "", "ELF file name")
            if found
            else None
        )
        return FileFacts(version, read.evidence)
    pe = read.pe_version
    return FileFacts(replace(pe, path=relative) if pe is not None else None, read.evidence)


def read_file_version(
    path: Path, relative: str, *, sha256: str = "", memo: Memo = NO_MEMO
) -> FileVersion | None:
    """The version a library carries, or None (not PE or ELF, or it carries none)."""
    return read_file_facts(path, relative, sha256=sha256, memo=memo).version


_PE = "PE version resource"
# what a memo entry was read as: an entry kept by another reading (FileVersion before
# ProductVersion, before 2; no licence evidence, before 3; embedded code without its version,
# licence and copyright lines, before 4; no Authenticode signature, before 5; a Mach-O
# file's evidence, before 6) is read from the
# file again
_READING = 6


@dataclass(frozen=True)
class _Read:
    """What reading a file found that its name does not decide: a PE version, the evidence."""

    pe_version: FileVersion | None  # its path is the caller's
    evidence: FileEvidence


def _read(path: Path, relative: str) -> _Read:
    with path.open("rb") as handle:
        magic = handle.read(8)
    if magic[:4] == b"\x7fELF":
        return _Read(None, elf_evidence(path, relative))
    if is_macho(magic):
        return _Read(None, macho_evidence(path, relative))
    if magic[:2] != b"MZ":
        return _Read(None, FileEvidence())
    info = read_version_info(path, relative)
    return _Read(_pe_version(info, relative), pe_evidence(path, relative, info))


def _pe_version(info: VersionInfo | None, relative: str) -> FileVersion | None:
    if info is None:
        return None
    # the product's release first: a FileVersion may number the file on another scheme
    wanted = (info.product_version, info.file_version)
    numeric = [m.group(0) for v in wanted if (m := _NUMERIC.match(v))]
    if not numeric:
        return None
    return FileVersion(relative, numeric[0], info.versions, info.company, _PE)


def is_stated(version: str) -> bool:
    """A recipe version that is a version number (not a note such as "bundled with …")."""
    return bool(_NUMERIC.match(version.strip()))


def agrees(stated: str, found: str) -> bool:
    """Whether a file's version is the recipe's: the stated parts are a prefix of the file's
    (2025.4.1 ↔ 2025.4.1.20426), or ONNX Runtime's date-for-patch form (1.27.0 ↔ 1.27.20260615)."""
    want = _numbers(stated)
    have = _numbers(found)
    if not want or not have:
        return True  # nothing to compare
    if have[: len(want)] == want:
        return True
    return (
        len(want) >= 2
        and len(have) >= 3
        and have[:2] == want[:2]
        and (len(want) < 3 or want[2] == "0")
        and bool(_DATE_PATCH.match(have[2]))
    )


def _numbers(version: str) -> list[str]:
    found = _NUMERIC.match(version.strip())
    return [str(int(p)) for p in found.group(0).split(".")] if found else []


@dataclass(frozen=True)
class ResolvedVersion:
    version: str
    publisher: str
    evidence: tuple[FileVersion, ...]


def resolve_version(
    component: str,
    stated: str,
    files: Iterable[tuple[str, Path, str]],
    *,
    target: str,
    recipe: str,
    memo: Memo = NO_MEMO,
) -> ResolvedVersion:
    """The component's version: the recipe's when it states one (checked against the files),
    else the one its files carry; the recipe's text when neither says more."""
    found = [
        v
        for relative, path, sha256 in files
        if (v := read_file_version(path, relative, sha256=sha256, memo=memo))
    ]
    return resolve_found(component, stated, found, target=target, recipe=recipe)


def resolve_found(
    component: str,
    stated: str,
    found: Sequence[FileVersion],
    *,
    target: str,
    recipe: str,
) -> ResolvedVersion:
    """resolve_version for versions already read from the files."""
    publishers = sorted({v.publisher for v in found if v.publisher})
    publisher = publishers[0] if len(publishers) == 1 else ""
    if is_stated(stated):
        for v in found:
            if not any(agrees(stated, raw) for raw in (v.version, *v.raw)):
                raise LicenseError(
                    f"the recipe says {component} is {stated}, but {v.path} says "
                    f"{' / '.join(v.raw)} ({v.evidence})",
                    component=component,
                    target=target,
                    file=recipe,
                    fix=f"correct the [[targets.{target}.licenses]] rule's version for {component} "
                    "(or its files glob, if the file belongs to another component)",
                )
        return ResolvedVersion(stated, publisher, tuple(found))
    versions = sorted({v.version for v in found})
    if len(versions) > 1:
        detail = ", ".join(f"{v.path} {v.version}" for v in found)
        raise LicenseError(
            f"the files of {component} carry different versions ({detail})",
            component=component,
            target=target,
            file=recipe,
            fix="split the component into one [[licenses]] rule per version, or state the "
            "version in the rule",
        )
    return ResolvedVersion(versions[0] if versions else stated, publisher, tuple(found))
