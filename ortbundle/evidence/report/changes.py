"""What changed since an earlier build: both sides read from written evidence (the manifest's
outputs and the closure records), never rebuilt — in the style of the `pin` bump report."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ortbundle._core.errors import ConfigError
from ortbundle.config.vocabulary import CHANNEL_TARGETS
from ortbundle.evidence.report.closures import CLOSURES_DIR, read_closures
from ortbundle.evidence.report.views import (
    Changes,
    ExternalChange,
    FileChange,
    LicenceChange,
    SizeChange,
)
from ortbundle.licensing.attribution import TargetLicensing

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Entry:
    size: int
    sha256: str | None  # None: compared by size only (a package file the build did not hash)
    component: str | None
    license: str | None


@dataclass(frozen=True)
class Snapshot:
    """One build as the comparison sees it."""

    product: str
    version: str
    files: dict[str, Entry]  # stage and packaging paths; the version in a name is {version}
    targets: tuple[str, ...]
    channels: tuple[str, ...]
    externals: dict[str, frozenset[str]] | None  # per target; None: no closure records


def _normal(path: str, version: str) -> str:
    return path.replace(version, "{version}") if version else path


def _externals(version_dir: Path, targets: Sequence[str]) -> dict[str, frozenset[str]] | None:
    if not (version_dir / CLOSURES_DIR).is_dir():
        return None
    found: dict[str, frozenset[str]] = {}
    for target in targets:
        record = read_closures(version_dir, target)
        if record is None:
            continue
        try:
            names = {
                f"{e['name']} ({e['group']})"
                for runtime in record["runtimes"]
                for e in runtime["externals"]
            }
        except (KeyError, TypeError):
            continue  # a record this version cannot read: that target's externals not compared
        found[target] = frozenset(names)
    return found


def current(
    product: str,
    version: str,
    version_dir: Path,
    licensing: Sequence[TargetLicensing],
) -> Snapshot:
    """This build, from its attribution and its scratch version directory."""
    files: dict[str, Entry] = {}
    for tl in licensing:
        for c in tl.components:
            for f in c.files:
                if f.link_to is None:
                    entry = Entry(f.size, f.sha256, c.name, c.expression)
                    files[f"{tl.target}/{f.path}"] = entry
            for t in c.texts:
                files[f"{tl.target}/{t.path}"] = Entry(t.size, t.sha256, c.name, c.expression)
    packaging = version_dir / "packaging"
    channels = sorted(p.name for p in packaging.iterdir()) if packaging.is_dir() else []
    for p in sorted(packaging.rglob("*")) if packaging.is_dir() else []:
        if p.is_file() and not p.is_symlink():
            path = _normal(p.relative_to(version_dir).as_posix(), version)
            files[path] = Entry(p.stat().st_size, None, None, None)
    targets = tuple(tl.target for tl in licensing)
    return Snapshot(
        product, version, files, targets, tuple(channels), _externals(version_dir, targets)
    )


def earlier(version_dir: Path) -> Snapshot:
    """An earlier build, from its manifest.json and closure records; ValueError if unreadable."""
    try:
        document = json.loads((version_dir / MANIFEST).read_text("utf-8"))
        product = str(document["product"]["name"])
        version = str(document["product"]["version"])
        files: dict[str, Entry] = {}
        targets: set[str] = set()
        channels: set[str] = set()
        for o in document["outputs"]:
            path = str(o["path"])
            top, _, rest = path.partition("/")
            if o.get("link_to") is not None or not rest:
                continue  # links, and the evidence files beside the manifest
            if top == "packaging":
                channels.add(rest.split("/", 1)[0])
                entry = Entry(int(o["size"]), None, None, None)
                files[_normal(path, version)] = entry
            elif o.get("component") is not None:
                targets.add(top)
                files[path] = Entry(
                    int(o["size"]), str(o["sha256"]), str(o["component"]), str(o.get("license"))
                )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{version_dir / MANIFEST}: {exc}") from None
    ordered = tuple(sorted(targets))
    return Snapshot(
        product, version, files, ordered, tuple(sorted(channels)), _externals(version_dir, ordered)
    )


def unverified(name: str, source: str, why: str) -> Changes:
    """The comparison with an earlier build that failed verification: named, nothing of it
    shown (its sizes, files and licences are what someone may have edited)."""
    return Changes(
        against=name,
        source=source,
        sizes=(),
        added=(),
        removed=(),
        changed=(),
        licences=(),
        externals=(),
        notes=(),
        unverified=why,
    )


def _version_key(version: str) -> tuple[int, Any]:
    from packaging.version import InvalidVersion, Version

    try:
        return (1, Version(version))
    except InvalidVersion:
        return (0, version)


def find_earlier(product_dir: Path, version: str) -> Path | None:
    """The newest build in dist/<product>/ older than `version` (another version directory)."""
    mine = _version_key(version)
    found = []
    for path in product_dir.iterdir() if product_dir.is_dir() else []:
        if path.name.startswith(".") or path.name == version or not (path / MANIFEST).is_file():
            continue
        key = _version_key(path.name)
        if key[0] == mine[0] and key[1] < mine[1]:
            found.append((key, path))
    return max(found, key=lambda kv: kv[0])[1] if found else None


def compare_dir(path: Path, product: str) -> Path:
    """The version directory `--compare` names: it, or dist/<product>/<version> under it."""
    if (path / MANIFEST).is_file():
        return path
    candidates = sorted(p.parent for p in (path / product).glob(f"*/{MANIFEST}"))
    if len(candidates) == 1:
        return candidates[0]
    raise ConfigError(
        f"--compare: no single build of {product} here"
        + (f" ({len(candidates)} versions)" if candidates else ""),
        file=str(path),
        fix=f"pass a version directory written by invoke build (dist/{product}/<version>/, "
        "the one holding manifest.json)",
    )


def _size(files: Mapping[str, Entry], prefixes: Sequence[str]) -> int:
    return sum(e.size for p, e in files.items() if p.startswith(tuple(prefixes)))


def diff(old: Snapshot, new: Snapshot, source: str) -> Changes:
    notes = []
    sizes = []
    for target in sorted({*old.targets, *new.targets}):
        sizes.append(
            SizeChange(
                target,
                _size(old.files, [f"{target}/"]) if target in old.targets else None,
                _size(new.files, [f"{target}/"]) if target in new.targets else None,
            )
        )
    for channel in sorted({*old.channels, *new.channels}):

        def carried(side: Snapshot, ch: str = channel) -> int | None:
            if ch not in side.channels:
                return None
            targets = [f"{t}/" for t in CHANNEL_TARGETS.get(ch, ()) if t in side.targets]
            return _size(side.files, targets)

        sizes.append(SizeChange(f"{channel} (carried)", carried(old), carried(new)))
        sizes.append(
            SizeChange(
                f"{channel} (package files)",
                _size(old.files, [f"packaging/{channel}/"]) if channel in old.channels else None,
                _size(new.files, [f"packaging/{channel}/"]) if channel in new.channels else None,
            )
        )
    added = tuple(
        FileChange(p, None, new.files[p].size) for p in sorted(new.files - old.files.keys())
    )
    removed = tuple(
        FileChange(p, old.files[p].size, None) for p in sorted(old.files.keys() - new.files.keys())
    )
    changed = []
    for path in sorted(old.files.keys() & new.files.keys()):
        a, b = old.files[path], new.files[path]
        differs = a.size != b.size or (a.sha256 and b.sha256 and a.sha256 != b.sha256)
        if differs:
            changed.append(FileChange(path, a.size, b.size))

    def licences(side: Snapshot) -> dict[str, str]:
        out: dict[str, set[str]] = {}
        for e in side.files.values():
            if e.component is not None:
                out.setdefault(e.component, set()).add(e.license or "")
        return {c: " AND ".join(sorted(x)) for c, x in out.items()}

    old_l, new_l = licences(old), licences(new)
    licence_changes = tuple(
        LicenceChange(c, old_l.get(c), new_l.get(c))
        for c in sorted({*old_l, *new_l})
        if old_l.get(c) != new_l.get(c)
    )
    externals = []
    if old.externals is None:
        notes.append(
            f"{old.product} {old.version} recorded no dependency closures: externals not compared"
        )
    elif new.externals is not None:
        for target in sorted({*old.externals, *new.externals}):
            before = old.externals.get(target, frozenset())
            after = new.externals.get(target, frozenset())
            if before != after:
                externals.append(
                    ExternalChange(
                        target, tuple(sorted(after - before)), tuple(sorted(before - after))
                    )
                )
    if old.product != new.product:
        notes.append(f"the earlier build is of another product: {old.product}")
    return Changes(
        against=f"{old.product} {old.version}",
        source=source,
        sizes=tuple(sizes),
        added=added,
        removed=removed,
        changed=tuple(changed),
        licences=licence_changes,
        externals=tuple(externals),
        notes=tuple(notes),
    )
