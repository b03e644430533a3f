"""Build wheels (with a correct RECORD unless told otherwise) and plain zips in tests."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def make_wheel(
    path: Path,
    project: str,
    version: str,
    files: dict[str, bytes],
    *,
    record_overrides: dict[str, bytes] | None = None,
    metadata: str = "",
) -> Path:
    """Write a wheel; `record_overrides` records other bytes' hashes for chosen members;
    `metadata` adds header lines to METADATA ("Requires-Dist: onnxruntime>=1.23\\n",
    "License-Expression: MIT\\n")."""
    dist_info = f"{project.replace('-', '_')}-{version}.dist-info"
    members = dict(files)
    members[f"{dist_info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n{metadata}".encode()
    )
    members[f"{dist_info}/WHEEL"] = b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"
    lines = []
    for name, data in members.items():
        recorded = (record_overrides or {}).get(name, data)
        lines.append(f"{name},{_record_hash(recorded)},{len(data)}")
    lines.append(f"{dist_info}/RECORD,,")
    members[f"{dist_info}/RECORD"] = ("\n".join(lines) + "\n").encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
