"""Which wheel a PyPI source moves to: the new release's file with the old file's tags, else the
closest of the same platform family (the smallest step in the manylinux/musllinux/macOS level,
preferring no newer requirement); and the newest release with a file for every moved source."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.tags import Tag
from packaging.utils import BuildTag
from packaging.version import Version

from ortbundle._core.errors import ConfigError, FetchError, IntegrityError
from ortbundle.config.recipes import Source
from ortbundle.fetch.index import version_or_none, wheel_name
from ortbundle.tools.pin.options import Lookups, PinOptions


@dataclass(frozen=True)
class Listed:
    """One wheel a project page lists."""

    filename: str
    url: str
    version: Version
    build: BuildTag
    tags: frozenset[Tag]
    sha256: str | None
    size: int | None  # PEP 700, when the index publishes it
    yanked: bool


def listed_files(found: Lookups, project: str) -> tuple[Listed, ...]:
    """Every wheel of `project` the configured indexes list, as pin compares them."""
    published = found.registry("pypi").versions(project)
    out = []
    for entry in published.files if published else ():
        wheel = wheel_name(entry.filename)
        if wheel is not None:
            out.append(
                Listed(
                    entry.filename,
                    entry.url,
                    wheel[1],
                    wheel[2],
                    wheel[3],
                    entry.hashes.get("sha256"),
                    entry.size,
                    entry.yanked,
                )
            )
    return tuple(out)


# --- wheel tags --------------------------------------------------------------------------------

_LEVELLED = re.compile(r"^(manylinux|musllinux|macosx)_(\d+)_(\d+)_(.+)$")
_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
_LEGACY_TAG = re.compile(r"^(manylinux1|manylinux2010|manylinux2014)_(.+)$")


def _platform(tag: str) -> tuple[str, tuple[int, int]]:
    """(family, level): manylinux_2_28_x86_64 → ("manylinux x86_64", (2, 28))."""
    if m := _LEVELLED.match(tag):
        return f"{m[1]} {m[4]}", (int(m[2]), int(m[3]))
    if m := _LEGACY_TAG.match(tag):
        return f"manylinux {m[2]}", _LEGACY[m[1]]
    return tag, (0, 0)


@dataclass(frozen=True)
class _Shape:
    interpreters: frozenset[str]
    abis: frozenset[str]
    families: frozenset[str]
    level: tuple[int, int]  # the lowest platform level the wheel installs on

    @classmethod
    def of(cls, tags: frozenset[Tag]) -> _Shape:
        platforms = [_platform(t.platform) for t in tags]
        return cls(
            frozenset(t.interpreter for t in tags),
            frozenset(t.abi for t in tags),
            frozenset(f for f, _ in platforms),
            min(level for _, level in platforms),
        )

    def compatible(self, other: _Shape) -> bool:
        return (self.interpreters, self.abis, self.families) == (
            other.interpreters,
            other.abis,
            other.families,
        )


def _platforms(tags: frozenset[Tag]) -> str:
    return ".".join(sorted({t.platform for t in tags}))


def match_file(
    source: Source, files: Iterable[Listed], version: Version, *, yanked_ok: bool
) -> Listed | None:
    """The file of `version` with the old file's tags, else the closest of the same family."""
    old = wheel_name(source.filename)
    if old is None:
        raise ConfigError(
            f"source {source.id}: {source.filename} is not a wheel file name",
            file=source.filename,
            fix="pin only wheels; fix the filename in the recipe",
        )
    candidates = [f for f in files if f.version == version and (yanked_ok or not f.yanked)]
    exact = [f for f in candidates if f.tags == old[3]]
    if exact:
        return max(exact, key=lambda f: (not f.yanked, f.build))
    shape = _Shape.of(old[3])
    close = [f for f in candidates if _Shape.of(f.tags).compatible(shape)]
    if not close:
        return None

    def distance(f: Listed) -> tuple[bool, int, bool]:
        level = _Shape.of(f.tags).level
        step = abs((level[0] - shape.level[0]) * 1000 + level[1] - shape.level[1])
        return (level > shape.level, step, f.yanked)

    # min() keeps the first of equals: the highest build tag among equally close files
    return min(sorted(close, key=lambda f: f.build, reverse=True), key=distance)


def no_file(source: Source, version: str, files: Sequence[Listed], component: str) -> FetchError:
    at = sorted(f.filename for f in files if str(f.version) == version)
    versions = sorted({f.version for f in files})
    listed = (
        f"files of {version}: {', '.join(at)}"
        if at
        else f"versions listed: {', '.join(map(str, versions[-12:])) or 'none'}"
    )
    return FetchError(
        f"source {source.id}: no wheel of {source.pypi.project} {version} matches "
        f"{source.filename}'s tags ({listed})",
        component=component,
        file=source.filename,
        fix="pick a version that publishes this platform's wheel, or edit the source by hand",
    )


def newest_wheels(
    sources: Sequence[Source], files: Mapping[str, Sequence[Listed]]
) -> tuple[Version, list[str]]:
    """The newest final, non-yanked release with a file for every source; why newer ones lost."""
    every = [f for s in sources for f in files[s.id]]
    notes: list[str] = []
    for version in sorted({f.version for f in every}, reverse=True):
        at = [f for f in every if f.version == version]
        if version.is_prerelease:
            notes.append(f"{version} skipped: pre-release")
            continue
        if all(f.yanked for f in at):
            notes.append(f"{version} skipped: yanked")
            continue
        lacking = [
            s.id for s in sources if match_file(s, files[s.id], version, yanked_ok=False) is None
        ]
        if not lacking:
            return version, notes
        notes.append(f"{version} skipped: no file for source {', '.join(lacking)}")
    raise FetchError(
        "no final release has a file for every source "
        f"({', '.join(s.id for s in sources)}): {'; '.join(notes) or 'nothing is listed'}",
        fix="pass --version, or --source to move fewer sources",
    )


def tags_note(old: str, new: Listed) -> str | None:
    old_tags = wheel_name(old)
    if old_tags is None or old_tags[3] == new.tags:
        return None
    was, now = _Shape.of(old_tags[3]).level, _Shape.of(new.tags).level
    family = next(iter(_Shape.of(new.tags).families)).split(" ")[0]
    what = {"manylinux": "glibc", "musllinux": "musl", "macosx": "macOS"}.get(family, family)
    step = "" if was == now else f"; needs {what} {now[0]}.{now[1]}, was {was[0]}.{was[1]}"
    return (
        f"no file with the old tags ({_platforms(old_tags[3])}); took the closest of the same "
        f"platform family: {_platforms(new.tags)}{step}"
    )


def published_sha256(found: Listed, component: str, who: str = "pin") -> str:
    """The digest the index publishes for a wheel: nothing is pinned that it cannot check."""
    if found.sha256 is None:
        raise IntegrityError(
            f"the index publishes no sha256 for {found.filename}; {who} does not trust a "
            "download it cannot check",
            component=component,
            file=found.filename,
            fix="use an index that publishes digests (PEP 503 #sha256= or PEP 691 hashes)",
        )
    return found.sha256


@dataclass(frozen=True)
class Chosen:
    """The file a source moves to, with the digest the index publishes for it."""

    filename: str
    sha256: str
    size: int | None
    listed: Listed


def choose_wheels(
    moved: Sequence[Source], options: PinOptions, component: str, ask: Lookups
) -> tuple[str, list[tuple[Source, Chosen]], tuple[str, ...]]:
    """The version, each moved source's new file, and notes; nothing is downloaded yet."""
    notes: list[str] = []
    files = {s.id: listed_files(ask, s.pypi.project) for s in moved}
    for s in moved:
        if not files[s.id]:
            raise FetchError(
                f"source {s.id}: no index lists wheels of {s.pypi.project} "
                f"(looked in {ask.registry('pypi').where(s.pypi.project)})",
                component=component,
                fix="check the project name, or point --index-url / PIP_INDEX_URL at an "
                "index that carries it",
            )
    if options.version is not None:
        version = version_or_none(options.version)
        if version is None:
            raise ConfigError(f"--version {options.version!r} is not a version")
    else:
        version, skipped = newest_wheels(moved, files)
        notes += skipped
    chosen = []
    for s in moved:
        found = match_file(s, files[s.id], version, yanked_ok=False) or (
            match_file(s, files[s.id], version, yanked_ok=True) if options.version else None
        )
        if found is None:
            raise no_file(s, str(version), files[s.id], component)
        if found.yanked:
            notes.append(f"{found.filename} is yanked; pinned because --version names it")
        sha256 = published_sha256(found, component)
        old = version_or_none(s.pypi.version)
        if old is not None and old > version:
            notes.append(f"{s.id}: a downgrade from {s.pypi.version}")
        chosen.append((s, Chosen(found.filename, sha256, found.size, found)))
    return str(version), chosen, tuple(notes)
