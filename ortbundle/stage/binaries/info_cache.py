"""What `inspect` found in a library, kept by the library's SHA-256.

A channel that needs a staged library's facts (the apk channel checks every ELF's machine and
16 KB alignment) would otherwise parse each one with pyelftools on every build, and import
pyelftools to do it. The facts are a pure function of the bytes, so they are kept under the
cache per SHA-256, per version of ortbundle's code and per format of the entry (a new field or
a fixed parser reads again). A release passes no memo: it reads every file afresh.
"""

from __future__ import annotations

from pathlib import Path

from ortbundle._core.memo import Memo
from ortbundle.stage.binaries import inspect
from ortbundle.stage.binaries.info import BinaryInfo, info_from_json, info_to_json

# of an entry: 2 added the exports, provider names and a core's available providers; 3 the
# Mach-O architectures and signature
_FORMAT = "binary-info/3"


def inspect_known(path: Path, sha256: str, *, name: str, memo: Memo) -> BinaryInfo:
    """`inspect(path)` for a file already checked to have `sha256`; from `memo` when it has it."""
    return memo.remembered(
        "binary-info",
        [_FORMAT, sha256],  # and the tool's code
        lambda: inspect(path, name=name),
        info_to_json,
        info_from_json,
    )
