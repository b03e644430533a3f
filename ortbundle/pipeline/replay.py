"""A build replayed: the tree an identical earlier build published, put in place from the cache.

Two builds with the same build key (pipeline/incremental.py: every input file, the tool's code,
the epoch, the signing identities, the options that shape the output) publish the same tree,
byte for byte, whatever their dist/; only build-summary.json differs (its timings and paths). So
a build keeps its published tree under the cache (`outputs/build/<key>`), and the next build
with that key into another dist/ (a CI job's second build, a fresh clone, a runner that builds
the desktop pair) puts it in place instead of staging, auditing, packaging and writing the
evidence again: no step of the pipeline is imported.

Trust as for the memoised runtime stages (stage/runtime_cache.py): each kept file is copied out
only while its stat record (size, mtime, ctime, inode) holds, which an edit moves, even one with
its mtime put back; the packages are the channels' memoised outputs, linked as a build links
them (_core/linked.py). Anything not as recorded and the build runs in full. A release never
replays (its memo is off), nor does a build whose report.html compares with an earlier version
(another version directory in dist/<product>/, or --compare): its tree would differ.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from stat import S_IMODE, S_ISDIR, S_ISLNK
from typing import Any

from ortbundle._core.fsio import (
    atomic_write,
    locked,
    locked_directory,
    remove_dead_leftovers,
    scan_tree,
    stat_record,
)
from ortbundle._core.linked import place_kept
from ortbundle._core.locations import default_cache_dir
from ortbundle._core.memo import OUTPUTS, digest_of
from ortbundle._core.peaks import memory_peaks
from ortbundle._core.publish import publish, recover, sweep_set_aside
from ortbundle.config.project import BuildOptions, Project
from ortbundle.evidence.names import SUMMARY_NAME
from ortbundle.pipeline.noop import (
    QUICK_FORMAT,
    Environment,
    environment_facts,
    input_stats,
    key_file,
    record_build,
)
from ortbundle.pipeline.summary import summary_json

_FORMAT = "ortbundle-replay/1"
KIND = "build"  # under <cache>/outputs/
KEEP = 4  # kept trees: the newest builds' (each as large as its version directory)


def quick_key(project: Project, options: BuildOptions) -> QuickKey | None:
    """The key this build would have, with its version directory and environment, when no
    input and no fact moved since a build asked for the same way recorded it (into any dist/):
    found without planning, as `quick_previous` finds a no-op. None otherwise."""
    if options.audit_only or options.release or options.compare is not None:
        return None
    cache = options.cache_dir or default_cache_dir()
    try:
        document = json.loads(key_file(cache, project, options).read_text("utf-8"))
        if document["format"] != QUICK_FORMAT:
            return None
        product, key = str(document["product"]), str(document["key"])
        relative = Path(str(document["version_dir"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if relative.is_absolute() or ".." in relative.parts:
        return None
    if document.get("inputs") != input_stats(project):
        return None
    facts = environment_facts(project, product, options, document)
    if document.get("facts") != facts.lines():
        return None
    return QuickKey(key, product, project.dist / relative, facts, document["inputs"])


@dataclass(frozen=True)
class QuickKey:
    """A build's key found from the quick record, with what `remember_quick` keeps again."""

    key: str
    product: str
    version_dir: Path
    facts: Environment
    inputs: dict[str, dict[str, int]]


def _entry(cache: Path, key: str) -> Path:
    return cache / OUTPUTS / KIND / key[:2] / key


def comparable(version_dir: Path) -> bool:
    """Whether dist/<product>/ holds another version report.html would compare with."""
    try:
        names = [path.name for path in version_dir.parent.iterdir()]
    except OSError:
        return False
    return any(n != version_dir.name and not n.startswith(".") for n in names)


def keep_build(
    cache: Path,
    key: str,
    version_dir: Path,
    placed: Mapping[Path, Path],
    record: Mapping[str, Any],
    warnings: list[str],
    artifacts: list[Path],
) -> None:
    """Keep the tree just published at `version_dir` for the next build with `key`: a copy of
    each file, the packages as the memoised outputs they are linked to (`placed`: each
    output's path in the tree, relative, and its entry), and the stat of the downloads it
    was made from (`artifacts`). Not kept where report.html compared with another version. A
    tree that cannot be kept costs only the next build its speed."""
    if comparable(version_dir):
        return
    entry = _entry(cache, key)
    try:
        inputs = _stats(artifacts)
        entry.parent.mkdir(parents=True, exist_ok=True)
        with locked(entry.with_name(f"{key}.lock"), waiting=f"the kept build {key[:12]}"):
            if _recorded_inputs(entry) == inputs:
                return  # kept already (by a build into another dist/)
            shutil.rmtree(entry, ignore_errors=True)  # kept before a download was repaired
            _keep(entry, version_dir, placed, {**record, "artifacts": inputs}, warnings, cache)
        _prune(entry.parent.parent)
    except OSError:
        shutil.rmtree(entry.with_name(f".{key}.partial-{os.getpid()}"), ignore_errors=True)


def _stats(paths: list[Path]) -> dict[str, dict[str, int]]:
    """The stat record of each download: a blob that failed its hash since (its ctime moved)
    is for a full build to find, fetch again and name in its summary; a replay reads none."""
    return {str(path): stat_record(path.stat()) for path in sorted(set(paths))}


def _recorded_inputs(entry: Path) -> object:
    try:
        return json.loads((entry / "record.json").read_text("utf-8"))["record"]["artifacts"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _keep(
    entry: Path,
    version_dir: Path,
    placed: Mapping[Path, Path],
    record: Mapping[str, Any],
    warnings: list[str],
    cache: Path,
) -> None:
    remove_dead_leftovers(entry.parent.glob(f".{entry.name}.partial-*"))
    partial = entry.with_name(f".{entry.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    (partial / "tree").mkdir(parents=True)
    dirs: dict[str, int] = {}
    links: dict[str, str] = {}
    files: dict[str, dict[str, Any]] = {}
    packages: dict[str, dict[str, Any]] = {}
    for name, (_, info) in sorted(scan_tree(version_dir).items()):
        if name == SUMMARY_NAME:
            continue  # this build's own timings and paths: written anew by each
        if S_ISDIR(info.st_mode):
            dirs[name] = S_IMODE(info.st_mode)
            (partial / "tree" / name).mkdir()
        elif S_ISLNK(info.st_mode):
            links[name] = str((version_dir / name).readlink())
        elif _linked(placed.get(Path(name)), info):
            kept = placed[Path(name)]
            packages[name] = {
                "entry": kept.relative_to(cache / OUTPUTS).as_posix(),
                "mode": S_IMODE(info.st_mode),
                "mtime_ns": info.st_mtime_ns,
            }
        else:
            copy = partial / "tree" / name
            shutil.copyfile(version_dir / name, copy)
            copy.chmod(S_IMODE(info.st_mode))
            os.utime(copy, ns=(info.st_mtime_ns, info.st_mtime_ns))
            files[name] = {"mode": S_IMODE(info.st_mode), "mtime_ns": info.st_mtime_ns}
    for name in files:  # the directory is renamed into place below: a rename keeps each stat
        files[name]["stamp"] = stat_record((partial / "tree" / name).lstat())
    summary = json.loads((version_dir / SUMMARY_NAME).read_text("utf-8"))
    document = {
        "format": _FORMAT,
        "dirs": dirs,
        "links": links,
        "files": files,
        "packages": packages,
        "summary": summary,
        "record": dict(record),
        "warnings": warnings,
    }
    atomic_write(partial / "record.json", json.dumps(document, sort_keys=True))
    os.replace(partial, entry)


def _linked(kept: Path | None, info: os.stat_result) -> bool:
    """Whether a published file is still the memoised output it was placed as (not signed or
    rewritten since, which would make it a file of its own)."""
    try:
        found = kept.stat() if kept is not None else None
    except OSError:
        return False
    return found is not None and (found.st_dev, found.st_ino) == (info.st_dev, info.st_ino)


def _prune(top: Path) -> None:
    """Keep the KEEP newest trees (each as large as its dist/ tree), the last used first."""
    kept = sorted(top.glob("*/*/record.json"), key=_mtime, reverse=True)
    for record in kept[KEEP:]:
        tree = record.parent
        try:
            with locked(tree.with_name(f"{tree.name}.lock")):
                shutil.rmtree(tree, ignore_errors=True)
        except OSError:
            continue


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


class _Miss(Exception):
    """Something kept is not as recorded: the build runs in full."""


def replay_build(cache: Path, key: str, version_dir: Path) -> dict[str, Any] | None:
    """Put the kept tree of `key` in place as `version_dir` and return its build summary (this
    run's); None where none is kept, or it is not as recorded (then it is discarded)."""
    entry = _entry(cache, key)
    if not (entry / "record.json").is_file() or comparable(version_dir):
        return None
    started = time.perf_counter()
    version_dir.parent.mkdir(parents=True, exist_ok=True)
    lock = cache / "locks" / f"dist-{digest_of([str(version_dir.resolve())])}.lock"
    waiting = f"publishing {version_dir}"
    with (
        locked(entry.with_name(f"{key}.lock"), waiting=f"the kept build {key[:12]}"),
        locked(lock, waiting=waiting),
        locked_directory(version_dir.parent, waiting=waiting),
    ):
        try:
            record = json.loads((entry / "record.json").read_text("utf-8"))
            if record.get("format") != _FORMAT:
                raise _Miss
        except (OSError, ValueError):
            shutil.rmtree(entry, ignore_errors=True)
            return None
        try:
            if (
                _stats([Path(a) for a in record["record"]["artifacts"]])
                != (record["record"]["artifacts"])
            ):
                return None  # a download moved: the full build checks it (and keeps anew)
        except (OSError, KeyError, TypeError):
            return None
        recover(version_dir)
        sweep_set_aside(version_dir)
        for stale in version_dir.parent.glob(f".{version_dir.name}.partial-*"):
            shutil.rmtree(stale, ignore_errors=True)
        scratch = version_dir.with_name(f".{version_dir.name}.partial-{os.getpid()}")
        try:
            _put(entry, record, scratch, version_dir, cache)
        except (_Miss, OSError, KeyError, TypeError, ValueError):
            shutil.rmtree(scratch, ignore_errors=True)
            shutil.rmtree(entry, ignore_errors=True)  # altered: the next full build keeps anew
            return None
        document = _summary(record["summary"], version_dir, time.perf_counter() - started)
        atomic_write(scratch / SUMMARY_NAME, summary_json(document))
        publish(scratch, version_dir)
    os.utime(entry / "record.json")  # used: the last to be pruned
    record_build(cache, version_dir, key, _build_record(record["record"]))
    return {**document, "warnings": record.get("warnings", [])}


def _build_record(kept: Mapping[str, Any]) -> dict[str, Any]:
    """What noop.record_build keeps of a build: as the kept build's own (no download stats)."""
    return {k: v for k, v in kept.items() if k != "artifacts"}


def _put(
    entry: Path, record: Mapping[str, Any], scratch: Path, version_dir: Path, cache: Path
) -> None:
    scratch.mkdir()
    for name in sorted(record["dirs"]):
        (scratch / name).mkdir()
    tree = entry / "tree"
    for name, kept in record["files"].items():
        source = tree / name
        if stat_record(source.lstat()) != kept["stamp"]:
            raise _Miss(name)
        shutil.copyfile(source, scratch / name)
        (scratch / name).chmod(kept["mode"])
        os.utime(scratch / name, ns=(kept["mtime_ns"], kept["mtime_ns"]))
    for name, target in record["links"].items():
        (scratch / name).symlink_to(target)
    for name, package in record["packages"].items():
        stored = cache / OUTPUTS / package["entry"]
        family = stored.name.rsplit("-", 1)[0] if _is_spare(stored.name) else stored.name
        first = stored.with_name(family)
        epoch = package["mtime_ns"] // 1_000_000_000
        with locked(first.with_name(f"{family}.lock"), waiting=f"the memoised package {family}"):
            dest = scratch / name
            if place_kept(first, dest, (scratch, version_dir), epoch) is None:
                raise _Miss(name)
            info = dest.lstat()
            if (S_IMODE(info.st_mode), info.st_mtime_ns) != (package["mode"], package["mtime_ns"]):
                raise _Miss(name)
    for name, mode in sorted(record["dirs"].items(), reverse=True):
        (scratch / name).chmod(mode)


def _is_spare(name: str) -> bool:
    head, _, number = name.rpartition("-")
    return bool(head) and number.isascii() and number.isdigit()


def _summary(kept: Mapping[str, Any], version_dir: Path, seconds: float) -> dict[str, Any]:
    """The kept build's summary as this run's: no download, its own phase, paths and peak."""
    artifacts = dict(kept["artifacts"])
    artifacts.update(downloaded=0, cached=artifacts["total"], repaired=[])
    phase = {
        "name": "replay",
        "seconds": round(seconds, 3),
        "detail": "the tree of an identical build, put in place from the cache",
    }
    paths = {**kept["paths"], "version_dir": str(version_dir)}
    return {
        **kept,
        "artifacts": artifacts,
        "phases": [phase],
        "paths": paths,
        "memory": memory_peaks(),
    }
