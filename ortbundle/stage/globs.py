"""A runtime recipe's globs against the archives they read, before anything is pruned.

A [[take]] library glob or a root that matches nothing is a mistake: pruning would meet the
first root and stop there, one per run, and a take glob or a drop that matches nothing would
pass unseen. Every such glob of one runtime is named here at once, with its file, table and
key and the nearest member of the archive (the build gathers them over every runtime and
target into one report); a drop that drops nothing is a warning, kept with the pruned runtime
so a memoised build says it again.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import PurePosixPath

from ortbundle.config.recipes import Recipe, TargetRecipe
from ortbundle.config.schema import display_name
from ortbundle.config.schema.problems import ConfigProblems, Problem, nearest
from ortbundle.config.targets import Target


def check_globs(
    recipe: Recipe, plan: TargetRecipe, target: Target, listings: Mapping[str, Sequence[str]]
) -> tuple[str, ...]:
    """Raise every take glob and root of `plan` that matches nothing in `listings` (source id
    to member names) as one ConfigProblems; return a warning line per drop glob that drops
    nothing."""
    file, where = display_name(recipe.path), f"targets.{target.name}"
    problems: list[Problem] = []
    taken: dict[str, str] = {}  # target.key(file name) -> file name, of every member taken
    labels: list[str] = []
    for index, take in enumerate(plan.takes):
        names = listings.get(take.source, ())
        label = recipe.sources[take.source].archive_name
        labels.append(label)
        for glob in take.libraries:
            hits = [n for n in names if fnmatch.fnmatchcase(n, glob)]
            taken.update((target.key(PurePosixPath(n).name), PurePosixPath(n).name) for n in hits)
            if not hits:
                problems.append(
                    Problem(
                        file,
                        f"{where}.take[{index}]",
                        "libraries",
                        f"{glob!r} matches no member of {label}",
                        _nearest_glob(glob, names),
                        path=str(recipe.path),
                    )
                )
    archives = ", ".join(dict.fromkeys(labels)) or "no source"
    members = [n for names in listings.values() for n in names]
    for root in plan.roots:
        if not _matching(root, taken, target):
            where_root = Problem(file, where, "roots", "", path=str(recipe.path))
            problems.append(_root_problem(where_root, root, taken, members, target, archives))
    if problems:
        raise ConfigProblems(problems)
    idle = []
    for index, drop in enumerate(plan.drops):
        for glob in drop.names:
            if not _matching(glob, taken, target):
                guess = _nearest_glob(glob, taken.values())
                idle.append(
                    f"drop {glob!r} in [{where}.drop[{index}]] of {file} drops nothing: no "
                    f"library the [[take]] globs take from {archives} is named so"
                    + (f" (nearest: {guess})" if guess else "")
                    + " — remove it, or fix the glob"
                )
    return tuple(idle)


def _root_problem(
    place: Problem,
    root: str,
    taken: Mapping[str, str],
    members: Sequence[str],
    target: Target,
    archives: str,
) -> Problem:
    """A root matching no taken library (at `place`): the nearest taken name, or the member
    outside every take glob that it matches (or nearly), with the fix."""
    message = f"{root!r} matches no library the [[take]] globs take from {archives}"
    by_name = {PurePosixPath(m).name: m for m in sorted(members)}
    pattern = target.key(root)
    untaken = [m for n, m in by_name.items() if fnmatch.fnmatchcase(target.key(n), pattern)]
    if not untaken:
        guess = _nearest_glob(root, taken.values())
        if guess:
            return replace(place, message=message, suggestion=guess)
        near = _nearest_glob(root, by_name)
        if not near:
            return replace(place, message=message, fix="check it against the archive's listing")
        untaken = [by_name[near]]
    fix = f"{untaken[0]} is in the archive, but no [[take]] glob takes it: correct the take"
    return replace(place, message=message, fix=fix)


def _matching(glob: str, taken: Mapping[str, str], target: Target) -> bool:
    """Whether `glob` matches a taken file name as the target's loader compares names."""
    pattern = target.key(glob)
    return any(fnmatch.fnmatchcase(key, pattern) for key in taken)


def _nearest_glob(glob: str, names: Iterable[str]) -> str:
    """The name a glob that matched nothing most likely meant ("" when none is close)."""
    pool = sorted(set(names))
    return nearest(glob, pool) or nearest(glob.replace("*", ""), pool)
