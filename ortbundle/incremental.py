"""Skip work whose inputs have not changed: a pruned runtime, or a whole build.

Two levels, both keyed by a hash of everything the step reads:
- a **runtime stage** (extract + inspect + closure, the expensive part) is kept under the cache
  in `stages/<key>/` with its closure as JSON, and copied into the next stage instead of
  extracting the wheel again; a changed pin changes only its own runtime's key;
- a **whole build** records the key and the stat of every output it published under
  `state/`; the next build with the same key whose outputs are untouched does nothing and
  leaves dist/ exactly as it is (no file is rewritten, no mtime changes).
Cache entries are checked against the size and mtime recorded when they were stored; a changed
entry is discarded and rebuilt, never used.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ortbundle.binaries import BinaryInfo, LoadSegment
from ortbundle.closure import Closure, Dropped, ExternalNeed, KeptLibrary
from ortbundle.fetch.cache import locked, remove_dead_leftovers, stat_record
from ortbundle.plan import code_digest as code_digest  # re-exported
from ortbundle.plan import digest_of
from ortbundle.stage import LIBRARY_MODE, StagedFile, StagedRuntime

_FORMAT = "ortbundle-incremental/2"  # 2: payload files, renamed libraries


def runtime_key(recipe_part: str, target: str, source_hashes: Iterable[str], code: str) -> str:
    return digest_of(["runtime", recipe_part, target, *sorted(source_hashes), code])


# --- runtime stages -------------------------------------------------------------------------


def _runtime_to_json(staged: StagedRuntime) -> dict[str, Any]:
    closure = staged.closure
    return {
        "runtime": staged.runtime,
        "target": staged.target,
        "directory": staged.directory,
        "outside_globs": staged.outside_globs,
        "files": [asdict(f) for f in staged.files],
        "closure": {
            "entry": closure.entry,
            "links": [list(link) for link in closure.links],
            "dropped": [asdict(d) for d in closure.dropped],
            "externals": [asdict(e) for e in closure.externals],
            "kept": [
                {
                    "name": k.name,
                    "source": k.source,
                    "member": k.member,
                    "size": k.size,
                    "sha256": k.sha256,
                    "why": k.why,
                    "info": asdict(k.info),
                }
                for k in closure.kept
            ],
        },
    }


def _runtime_from_json(data: dict[str, Any], runtime_dir: Path) -> StagedRuntime:
    c = data["closure"]
    kept = []
    for k in c["kept"]:
        info = dict(k["info"])
        for key in ("needed", "delay_needed", "runpath"):
            info[key] = tuple(info[key])
        info["loads"] = tuple(LoadSegment(**seg) for seg in info["loads"])
        kept.append(
            KeptLibrary(
                name=k["name"],
                source=k["source"],
                member=k["member"],
                path=runtime_dir / k["name"],
                size=k["size"],
                sha256=k["sha256"],
                info=BinaryInfo(**info),
                why=k["why"],
            )
        )
    closure = Closure(
        kept=tuple(kept),
        links=tuple((a, b) for a, b in c["links"]),
        dropped=tuple(Dropped(**d) for d in c["dropped"]),
        externals=tuple(
            ExternalNeed(**{**e, "needed_by": tuple(e["needed_by"])}) for e in c["externals"]
        ),
        entry=c["entry"],
        unused=(),
    )
    return StagedRuntime(
        runtime=data["runtime"],
        target=data["target"],
        directory=data["directory"],
        closure=closure,
        files=tuple(StagedFile(**f) for f in data["files"]),
        outside_globs=data["outside_globs"],
    )


def _memo_names(staged: StagedRuntime) -> list[str]:
    """The memo's file names: each staged file's path inside its runtime's directory."""
    prefix = staged.directory + "/"
    return [f.path.removeprefix(prefix) for f in staged.files if f.link_to is None]


def _check_names(staged: StagedRuntime, directory: str) -> None:
    """A memo names the files it will create: each must be a plain name inside its runtime's
    directory (or its assets/), or the entry is treated as corrupt (a writable cache must not
    write elsewhere)."""
    if staged.directory != directory:
        raise ValueError(staged.directory)
    for f in staged.files:
        if not f.path.startswith(directory + "/"):
            raise ValueError(f.path)
    names = [k.name for k in staged.closure.kept]
    names += [name for pair in staged.closure.links for name in pair]
    for relative in _memo_names(staged):
        parts = relative.split("/")
        if len(parts) == 2 and parts[0] == "assets":
            parts = parts[1:]
        if len(parts) != 1:
            raise ValueError(relative)
        names.append(parts[0])
    for name in names:
        if not name or name in (".", "..") or any(c in name for c in "/\\\0"):
            raise ValueError(name)


def restore_runtime(
    cache: Path, key: str, stage_root: Path, expected_directory: str
) -> StagedRuntime | None:
    """Copy a memoised runtime into `stage_root`, or None if there is none (or it was altered).

    Each file is trusted while its stat record holds (size, mtime, ctime, inode). A release
    does not call this: a record stored beside what it describes cannot vouch for it.
    """
    entry = cache / "stages" / key[:2] / key
    with locked(entry.with_name(f"{key}.lock")):
        meta = entry / "closure.json"
        if not meta.is_file():
            return None
        try:
            record = json.loads(meta.read_text("utf-8"))
            if record.get("format") != _FORMAT:
                raise ValueError(record.get("format"))  # an older layout: prune again
            stamps: dict[str, dict[str, int]] = record["stamps"]
            for name, stamp in stamps.items():
                if stat_record((entry / name).lstat()) != stamp:
                    raise ValueError(name)
            staged = _runtime_from_json(
                record["staged"], stage_root / record["staged"]["directory"]
            )
            _check_names(staged, expected_directory)
        except (OSError, ValueError, KeyError, TypeError):
            shutil.rmtree(entry, ignore_errors=True)  # altered or half-written: rebuild
            return None
        runtime_dir = stage_root / staged.directory
        runtime_dir.mkdir(parents=True)
        for relative in _memo_names(staged):
            dest = runtime_dir / relative
            dest.parent.mkdir(exist_ok=True)
            shutil.copyfile(entry / relative, dest)
            dest.chmod(LIBRARY_MODE)
        for link, points_to in staged.closure.links:
            (runtime_dir / link).symlink_to(points_to)
        return staged


def store_runtime(cache: Path, key: str, stage_root: Path, staged: StagedRuntime) -> None:
    entry = cache / "stages" / key[:2] / key
    with locked(entry.with_name(f"{key}.lock")):
        remove_dead_leftovers(entry.parent.glob(f".{key}.partial-*"))
        partial = entry.with_name(f".{key}.partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        stamps = {}
        names = _memo_names(staged)
        for relative in names:
            (partial / relative).parent.mkdir(exist_ok=True)
            shutil.copyfile(stage_root / staged.directory / relative, partial / relative)
        # the directory is renamed into place below: a rename keeps each file's stat
        for relative in names:
            stamps[relative] = stat_record((partial / relative).lstat())
        record = {"format": _FORMAT, "stamps": stamps, "staged": _runtime_to_json(staged)}
        (partial / "closure.json").write_text(json.dumps(record, sort_keys=True), "utf-8")
        shutil.rmtree(entry, ignore_errors=True)
        os.replace(partial, entry)
