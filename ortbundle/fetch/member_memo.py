"""Members a build read out of an archive before, kept by (archive SHA-256, member name).

A warm build restores its pruned runtimes from the runtime memo, but its licence texts and
models are members of the same 10 to 100 MB wheels: reading a 4 KB text meant opening the zip and
re-checking every one of its thousands of member names. The members themselves never change
for a given archive digest, so a small copy of each is kept under the cache and the archive is
opened only for a member the memo lacks. Every restored copy is hashed as it is written and
compared with the digest recorded when it was stored: an altered memo entry is dropped and the
member is read from the archive again, never shipped.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from ortbundle._core.fsio import atomic_write
from ortbundle._core.memo import Memo, memo_key
from ortbundle.fetch.archives import Extracted, MemberReader, copy_hashing

# Members larger than this are read from the archive each time: storing a big model twice costs
# more disk than opening its archive costs time.
MAX_MEMO_MEMBER = 16 << 20


class MemoizedMembers:
    """A `MemberReader` over one archive that opens it only for a member the memo lacks."""

    def __init__(
        self,
        archive_sha256: str,
        label: str,
        memo: Memo,
        open_reader: Callable[[], MemberReader],
    ) -> None:
        self.label = label
        self._archive_sha256 = archive_sha256
        self._memo = memo
        self._open_reader = open_reader
        self._reader: MemberReader | None = None

    def _entry(self, name: str) -> Path | None:
        # by the archive's bytes and the member's name: no ortbundle code shapes a member
        key = memo_key([self._archive_sha256, name], code=False)
        return self._memo.entry("members", key, suffix="")

    def _restore(self, entry: Path, dest: Path) -> Extracted | None:
        try:
            record = json.loads(entry.with_suffix(".json").read_text("utf-8"))
            with entry.open("rb") as stream, dest.open("wb") as out:
                size, sha256 = copy_hashing(stream, out)
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict) or (size, sha256) != (
            record.get("size"),
            record.get("sha256"),
        ):
            dest.unlink(missing_ok=True)
            entry.unlink(missing_ok=True)  # altered: read the archive again
            return None
        return Extracted(path=dest, size=size, sha256=sha256)

    def _store(self, entry: Path, extracted: Extracted) -> None:
        entry.parent.mkdir(parents=True, exist_ok=True)
        partial = entry.with_name(f".{entry.name}.partial-{os.getpid()}")
        try:
            shutil.copyfile(extracted.path, partial)
            os.replace(partial, entry)
            record = {"size": extracted.size, "sha256": extracted.sha256}
            atomic_write(entry.with_suffix(".json"), json.dumps(record))
        except OSError:
            partial.unlink(missing_ok=True)  # a memo that cannot be written is only slower

    def extract(self, name: str, dest: Path) -> Extracted:
        entry = self._entry(name)
        if entry is not None:
            restored = self._restore(entry, dest)
            if restored is not None:
                return restored
        if self._reader is None:
            self._reader = self._open_reader()
        extracted = self._reader.extract(name, dest)
        if entry is not None and extracted.size <= MAX_MEMO_MEMBER:
            self._store(entry, extracted)
        return extracted

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
