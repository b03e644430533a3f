"""Which wheel a PyPI source moves to: the new release's file with the old file's tags, else the
closest of the same platform family (the smallest step in the manylinux/musllinux/macOS/Android
level, preferring no newer requirement); and the newest release with a file for every moved
source. The tags are read by config/wheel_tags.py, as the scaffold reads them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.version import Version

from ortbundle._core.errors import ConfigError, FetchError
from ortbundle.config.sources import Source
from ortbundle.config.wheel_tags import level_text, read_tags, requirement
from ortbundle.fetch.index import version_or_none, wheel_name
from ortbundle.tools.pin.lookups import Listed, Lookups, listed_files, published_sha256
from ortbundle.tools.pin.options import PinOptions


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
    shape = read_tags(old[3])
    close = [f for f in candidates if read_tags(f.tags).same_shape(shape)]
    if not close:
        return None

    def distance(f: Listed) -> tuple[bool, int, bool]:
        level = read_tags(f.tags).level
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
    before, after = read_tags(old_tags[3]), read_tags(new.tags)
    was, now = before.level, after.level
    system = after.platforms[0].system
    step = (
        "" if was == now else f"; needs {requirement(system, now)}, was {level_text(system, was)}"
    )
    return (
        f"no file with the old tags ({before.platform_names}); took the closest of the same "
        f"platform family: {after.platform_names}{step}"
    )


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
