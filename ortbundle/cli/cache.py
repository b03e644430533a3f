"""invoke cache-export, cache-import and cache-verify: the download cache by hand."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ortbundle._core.errors import IntegrityError
from ortbundle._core.words import plural
from ortbundle.cli.common import USAGE_EXIT, CommandFailed, guard

if TYPE_CHECKING:
    pass


def run_cache_transfer(direction: str, where: str | Path | None) -> None:
    """Export the download cache to a plain directory, or import (re-hashing) from one."""
    from ortbundle.fetch.cache import Cache, default_cache_dir, export_cache, import_cache

    if not where:
        raise CommandFailed(f"ortbundle: usage error: pass --path DIR to {direction}", USAGE_EXIT)
    path = Path(where)
    cache = Cache(default_cache_dir())
    if not path.is_dir() and direction == "import":
        raise CommandFailed(f"ortbundle: configuration error: {path} is not a directory", 2)
    if direction == "export":
        try:
            report = export_cache(cache, path)
        except OSError as exc:
            raise CommandFailed(f"ortbundle: cannot export the cache to {path}: {exc}", 1) from None
        print(f"exported {len(report.copied)} new, {len(report.already)} present: {path}")
        return
    try:
        report = import_cache(cache, path)
    except OSError as exc:
        raise CommandFailed(f"ortbundle: cannot import the cache from {path}: {exc}", 1) from None
    print(
        f"imported {len(report.copied)}, {len(report.already)} already cached, "
        f"{len(report.rejected)} rejected (bytes do not match their hash)"
    )
    for sha256 in report.rejected:
        print(f"rejected {sha256}")
    if report.rejected:
        raise CommandFailed(
            f"ortbundle: integrity error: {plural(len(report.rejected), 'entry', 'entries')} of "
            f"{path} {'was' if len(report.rejected) == 1 else 'were'} corrupt and not imported",
            IntegrityError.exit_code,
        )


def run_cache_verify() -> None:
    """Re-hash every cached download; exit 4 if any was corrupt (it is removed either way)."""
    from ortbundle._core.locations import default_cache_dir
    from ortbundle._core.oserrors import write_places
    from ortbundle.fetch.cache_verify import verify_cache

    root = default_cache_dir()
    report = guard(lambda: verify_cache(root), write_places(root))
    then = "the next build downloads it again"  # this command downloads nothing
    for repair in report.repaired:
        print(repair.line(then))
    for sha256 in report.unrecorded:
        print(f"cache: {sha256} had no record of when it was stored; removed; {then}")
    bad = len(report.repaired) + len(report.unrecorded)
    entries = plural(len(report.good) + bad, "entry", "entries")
    print(f"{root}: {entries} re-hashed, {len(report.good)} good, {bad} bad")
    if report.repaired:
        entries = plural(len(report.repaired), "cache entry", "cache entries")
        removed = (
            "it was removed and the next build downloads it again"
            if len(report.repaired) == 1
            else "they were removed and the next build downloads them again"
        )
        raise CommandFailed(
            f"ortbundle: integrity error: {entries} held bytes that do not match their hash "
            f"(a failing disk, or a tampered cache); {removed}",
            IntegrityError.exit_code,
        )
