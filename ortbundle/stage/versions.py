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
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ortbundle._core.errors import LicenseError
from ortbundle._core.memo import remembered
from ortbundle.stage.binaries import read_version_info

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


def read_file_version(
    path: Path, relative: str, *, sha256: str = "", memo: Path | None = None
) -> FileVersion | None:
    """The version a library carries, or None (not PE or ELF, or it carries none).

    With `memo` (a directory under the cache) a PE file's version resource is read once per
    SHA-256: it is the same for the same bytes, and parsing a 20 MB DLL's resources was most
    of what attribution cost on a warm build. An ELF's comes from its name, never memoised."""
    with path.open("rb") as handle:
        magic = handle.read(4)
    if magic == b"\x7fELF":
        found = _ELF_NAME.search(relative.rsplit("/", 1)[-1])
        if found:
            return FileVersion(relative, found.group(1), (found.group(1),), "", "ELF file name")
        return None
    if magic[:2] != b"MZ":
        return None
    stored = memo / sha256[:2] / f"{sha256}.json" if memo is not None and sha256 else None

    def to_json(found: FileVersion | None) -> dict[str, Any]:
        if found is None:
            return {"reading": _READING, "found": None}
        kept = {"version": found.version, "raw": list(found.raw), "publisher": found.publisher}
        return {"reading": _READING, "found": kept}

    def from_json(data: Any) -> FileVersion | None:
        if data["reading"] != _READING:
            raise ValueError("kept by an older reading: read the file again")
        found = data["found"]
        if found is None:
            return None
        raw = tuple(str(v) for v in found["raw"])
        return FileVersion(relative, found["version"], raw, found["publisher"], _PE_EVIDENCE)

    return remembered(stored, lambda: _pe_version(path, relative), to_json, from_json)


_PE_EVIDENCE = "PE version resource"
# what a memo entry was read as: an entry kept by another reading (FileVersion before
# ProductVersion, before 2) is read from the file again
_READING = 2


def _pe_version(path: Path, relative: str) -> FileVersion | None:
    info = read_version_info(path, relative)
    if info is None:
        return None
    # the product's release first: a FileVersion may number the file on another scheme
    wanted = (info.product_version, info.file_version)
    numeric = [m.group(0) for v in wanted if (m := _NUMERIC.match(v))]
    if not numeric:
        return None
    return FileVersion(relative, numeric[0], info.versions, info.company, _PE_EVIDENCE)


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
    memo: Path | None = None,
) -> ResolvedVersion:
    """The component's version: the recipe's when it states one (checked against the files),
    else the one its files carry; the recipe's text when neither says more."""
    found = [
        v
        for relative, path, sha256 in files
        if (v := read_file_version(path, relative, sha256=sha256, memo=memo))
    ]
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
