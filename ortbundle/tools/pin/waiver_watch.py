"""`invoke pin --check` watches for the way out of a waiver: a newer release of a pinned runtime
that no longer ships the waived file (the default product's `dxil.dll`, which an upcoming ONNX
Runtime drops with its move to a newer Dawn).

For each stale PyPI source a waiver could concern, the member names of today's wheel (from the
cache when it holds it) and of the newer one (its central directory, read with Range requests:
nothing is downloaded) are compared under the recipe's take globs; the decision itself is
`waivers.waivers_a_release_drops`. Informational: it changes no state and no exit code.
"""

from __future__ import annotations

import fnmatch
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import Version

from ortbundle._core.errors import ConfigError, OrtbundleError
from ortbundle.config.plan import Project
from ortbundle.config.products import Waiver, load_product
from ortbundle.config.recipes import load_recipe
from ortbundle.config.sources import Source
from ortbundle.fetch.cache import Cache
from ortbundle.fetch.remote_zip import remote_member_names
from ortbundle.licensing.waivers import ObsoleteWaiver, waivers_a_release_drops
from ortbundle.tools.pin.lookups import Listed, Lookups, listed_files
from ortbundle.tools.pin.wheels import match_file

if TYPE_CHECKING:
    from ortbundle.tools.pin.options import PinStatus


def product_waivers(project: Project) -> tuple[Waiver, ...]:
    """Every waiver of every product of the project (a manifest that does not load has none
    to watch; the build says what is wrong with it)."""
    found: list[Waiver] = []
    for manifest in sorted(project.manifests.glob("*.toml")):
        try:
            found += load_product(manifest).waivers
        except ConfigError:
            continue
    return tuple(found)


def obsolete_waivers(
    project: Project,
    component: str,
    statuses: Mapping[str, PinStatus],
    waivers: Sequence[Waiver],
    ask: Lookups,
    cache: Cache,
) -> tuple[ObsoleteWaiver, ...]:
    """The waivers a newer release of `component` would make unnecessary."""
    if not waivers:
        return ()
    try:
        recipe = load_recipe(project.recipes / f"{component}.toml")
    except ConfigError:
        return ()  # unpinned or broken: the pin check already says so
    found: dict[tuple[str, str], ObsoleteWaiver] = {}
    for target in recipe.targets:
        for take in recipe.for_target(target).takes:
            source = recipe.sources[take.source]
            status = statuses.get(source.id)
            if status is None or not status.newest:  # no newer release: nothing to watch
                continue
            if source.origin.kind != "pypi" or source.nested:
                continue  # only wheels' directories are read without a download
            relevant = [w for w in waivers if not w.targets or target in w.targets]
            if not relevant:
                continue
            try:
                current, newer = _member_names(source, Version(status.newest), ask, cache)
            except OrtbundleError:
                continue  # could not look: the check says nothing rather than guess
            for obsolete in waivers_a_release_drops(
                relevant,
                component=component,
                version=status.newest,
                runtime_dir=recipe.directory,
                target=target,
                current_files=_taken(current, take.libraries),
                newer_files=_taken(newer, take.libraries),
            ):
                found.setdefault((obsolete.waiver.file, obsolete.waiver.manifest), obsolete)
    return tuple(found.values())


def _taken(members: Iterable[str], globs: Sequence[str]) -> list[str]:
    """The file names a take would stage: members under its globs, flat."""
    return [m.rsplit("/", 1)[-1] for m in members if any(fnmatch.fnmatchcase(m, g) for g in globs)]


def _member_names(
    source: Source, newest: Version, ask: Lookups, cache: Cache
) -> tuple[list[str], list[str]]:
    files = listed_files(ask, source.pypi.project)
    newer = match_file(source, files, newest, yanked_ok=False)
    if newer is None:
        raise ConfigError(f"no {newest} file matches {source.filename}")
    cached = cache.get(source.sha256)
    if cached is not None:
        current = _local_names(cached.path)
    else:
        today = next((f for f in files if f.filename == source.filename), None)
        if today is None:
            raise ConfigError(f"{source.filename} is not listed")
        current = _remote_names(today, ask)
    return current, _remote_names(newer, ask)


def _local_names(path: Path) -> list[str]:
    with zipfile.ZipFile(path) as archive:
        return archive.namelist()


def _remote_names(listed: Listed, ask: Lookups) -> list[str]:

    _config, session = ask.registries.pip()
    names = remote_member_names(session, listed.url, ask.registries.policy, what=listed.filename)
    return list(names)
