"""What `inspect` found in a library, kept by the library's SHA-256.

A channel that needs a staged library's facts (the apk channel checks every ELF's machine and
16 KB alignment) would otherwise parse each one with pyelftools on every build, and import
pyelftools to do it. The facts are a pure function of the bytes, so they are kept under the
cache per SHA-256 and per version of ortbundle's code (a new field or a fixed parser reads
again). A release passes no memo: it reads every file afresh.
"""

from __future__ import annotations

import json
from pathlib import Path

from ortbundle.binaries import BinaryInfo, info_from_json, info_to_json, inspect
from ortbundle.fsio import atomic_write
from ortbundle.incremental import code_digest, digest_of


def inspect_known(path: Path, sha256: str, *, name: str, memo: Path | None) -> BinaryInfo:
    """`inspect(path)` for a file already checked to have `sha256`; from `memo` when it has it."""
    if memo is None:
        return inspect(path, name=name)
    key = digest_of([sha256, code_digest()])
    entry = memo / key[:2] / f"{key}.json"
    try:
        return info_from_json(json.loads(entry.read_text("utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        pass  # none yet, or unreadable: read the file
    info = inspect(path, name=name)
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(entry, json.dumps(info_to_json(info), sort_keys=True))
    except OSError:
        pass  # a memo that cannot be written is only slower
    return info
