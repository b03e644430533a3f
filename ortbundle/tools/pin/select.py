"""Which sources move, and to which version: the component's own project unless --source names
others, one kind at a time; for Maven and npm, the newest release every moved source has (by the
registry's own version order, pre-releases passed over unless a pin is one)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from packaging.utils import canonicalize_name

from ortbundle._core.errors import ConfigError, FetchError
from ortbundle.config.recipes import Recipe
from ortbundle.config.sources import Source
from ortbundle.fetch import Registries
from ortbundle.tools.pin.lookups import Lookups, newest_release
from ortbundle.tools.pin.options import VERSIONED, PinOptions, project_of, version_of

_ORDERS = Registries()  # reads no configuration: only each kind's version order is asked of it


def is_prerelease(kind: str, version: str) -> bool:
    """A SNAPSHOT or a pre-release-looking version, which the newest-release choice passes over."""
    return _ORDERS.registry_for(kind).is_prerelease(version)


def main_project(projects: Mapping[str, str]) -> str:
    """The component's own project (source id → project): that of the source named `ort` or
    `ort-*`, else of most sources."""
    ort = {
        canonicalize_name(p)
        for sid, p in projects.items()
        if sid == "ort" or sid.startswith("ort-")
    }
    if len(ort) == 1:
        return ort.pop()
    ranked = Counter(canonicalize_name(p) for p in projects.values()).most_common()
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        raise ConfigError(
            "cannot tell which project is the component's own among "
            f"{sorted(set(projects.values()))}",
            fix="name the sources to move with --source",
        )
    return ranked[0][0]


def selection(
    recipe: Recipe, wanted: Sequence[str]
) -> tuple[list[Source], list[Source], str | None]:
    """(moved, not moved, main project); the main project is None only when --source names
    the sources and the recipe has no clear own project."""
    unknown = sorted(set(wanted) - set(recipe.sources))
    if unknown:
        raise ConfigError(
            f"recipe {recipe.name} has no source {', '.join(unknown)}",
            component=recipe.name,
            file=str(recipe.path),
            fix=f"use one of: {', '.join(recipe.sources)}",
        )
    try:
        main: str | None = main_project({sid: project_of(s) for sid, s in recipe.sources.items()})
    except ConfigError:
        if not wanted:
            raise
        main = None
    moved = [
        s
        for sid, s in recipe.sources.items()
        if (sid in wanted if wanted else canonicalize_name(project_of(s)) == main)
    ]
    kinds = sorted({s.origin.kind for s in moved})
    unversioned = [s for s in moved if s.origin.kind not in VERSIONED]
    if unversioned:
        raise ConfigError(
            f"source {unversioned[0].id} is {unversioned[0].origin.describe()}: no registry "
            "publishes versions of it, so there is nothing to move it to",
            component=recipe.name,
            file=str(recipe.path),
            fix="edit its sha256 (and size) by hand, or name other sources with --source",
        )
    if len(kinds) > 1:
        raise ConfigError(
            f"--source names sources of different kinds ({', '.join(kinds)}); pin moves one "
            "kind at a time",
            component=recipe.name,
            file=str(recipe.path),
            fix="run pin once per kind, naming that kind's sources with --source",
        )
    return moved, [s for s in recipe.sources.values() if s not in moved], main


def choose_published(
    moved: Sequence[Source], options: PinOptions, component: str, ask: Lookups
) -> tuple[str, tuple[str, ...]]:
    """The version the moved Maven or npm sources go to, and notes; nothing downloaded yet."""
    kind = moved[0].origin.kind
    registry = ask.registry(kind)
    lists: dict[str, tuple[str, ...]] = {}
    for s in moved:
        published = ask.published(s)
        if published is None:
            raise FetchError(
                f"source {s.id}: the {kind} registry has no {project_of(s)}",
                component=component,
                file=s.origin.describe(),
                fix="check the coordinates in the recipe, or the registry configuration",
            )
        lists[s.id] = published.versions
    every = sorted({v for vs in lists.values() for v in vs}, key=registry.version_key)
    lacking = {v: [sid for sid, vs in lists.items() if v not in vs] for v in every}
    notes: list[str] = []
    if options.version is not None:
        version = options.version
        if version not in every or lacking[version]:
            where = ", ".join(lacking.get(version) or [s.id for s in moved])
            raise FetchError(
                f"source {where}: {project_of(moved[0])} {version} is not published "
                f"(versions listed: {', '.join(every[-12:]) or 'none'})",
                component=component,
                fix="pick a listed version",
            )
    else:
        newest, notes = newest_release(
            registry, every, [version_of(s.origin) for s in moved], lacking
        )
        if newest is None:
            raise FetchError(
                f"no release of {project_of(moved[0])} is published for every source "
                f"({', '.join(s.id for s in moved)}): {'; '.join(notes) or 'nothing is listed'}",
                component=component,
                fix="pass --version, or --source to move fewer sources",
            )
        version = newest
    for s in moved:
        order = registry.version_key
        if version != version_of(s.origin) and order(version) < order(version_of(s.origin)):
            notes.append(f"{s.id}: a downgrade from {version_of(s.origin)}")
    return version, tuple(notes)
