"""Prune: keep the recipe's roots and their dependency closure, drop the rest, dedupe aliases.

The closure is computed from what the libraries say they need (ELF DT_NEEDED, PE import and
delay-import tables), never from a hand-kept list. Every needed name must resolve to a kept file
or to one of the target's allowed externals; anything else stops the build naming both files.
"""

from __future__ import annotations

import fnmatch
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ortbundle._core.errors import BinaryError, ClosureError, ConfigError
from ortbundle.config.recipes import TargetRecipe
from ortbundle.config.targets import ExternalGroup, Target
from ortbundle.stage.binaries.info import BinaryInfo
from ortbundle.stage.binaries.loads import FileScan, LoadFinding


@dataclass(frozen=True)
class Candidate:
    """An archive member that may be staged as a library."""

    source: str
    member: str
    name: str  # the file name it would be staged under
    size: int
    identity: str  # equal for byte-identical members (RECORD sha256, or size+CRC)


@dataclass(frozen=True)
class Materialized:
    """A candidate extracted to disk and inspected."""

    path: Path
    sha256: str
    size: int
    info: BinaryInfo


@dataclass(frozen=True)
class KeptLibrary:
    name: str  # staged file name
    source: str
    member: str
    path: Path  # where it was extracted (renamed to `name` by the stage)
    size: int
    sha256: str
    info: BinaryInfo
    why: str  # "root" or "needed by X"


@dataclass(frozen=True)
class Dropped:
    source: str
    member: str
    size: int
    reason: str


@dataclass(frozen=True)
class ExternalNeed:
    name: str
    group: str
    kind: str
    note: str
    needed_by: tuple[str, ...]
    # the group's requirement facts (CONTRACT §1), carried to every PackageInput
    optional: bool = False
    version: str = ""
    install: str = ""
    sandbox: bool = True
    via: str = "needed"  # or "loads": opened by name at run time, declared by the recipe

    @classmethod
    def of(
        cls, name: str, group: ExternalGroup, needed_by: tuple[str, ...], via: str = "needed"
    ) -> ExternalNeed:
        """`name` as the closure reports it: provided by `group`, with its requirement facts."""
        return cls(
            name,
            group.group,
            group.kind,
            group.note,
            needed_by,
            optional=group.optional,
            version=group.version,
            install=group.install,
            sandbox=group.sandbox,
            via=via,
        )


class Unresolved(ClosureError):
    """Needed names that are neither kept nor an allowed external: the build collects these
    across every runtime and target and reports them together (closure_report.py)."""

    def __init__(self, missing: tuple[tuple[str, str], ...], **context: str) -> None:
        listing = "; ".join(f"{who} needs {what}" for who, what in missing)
        target = context.get("target", "")
        super().__init__(
            f"unresolved libraries: {listing} — neither in the sources nor an allowed external "
            f"of {target}",
            file=missing[0][0],
            fix="add the library's archive as a source, or, if the user's system provides it, "
            "declare it in the product manifest as an [[externals]] group",
            **context,
        )
        self.missing = missing


@dataclass(frozen=True)
class Closure:
    kept: tuple[KeptLibrary, ...]
    links: tuple[tuple[str, str], ...]  # (link name, staged file it points to)
    dropped: tuple[Dropped, ...]
    externals: tuple[ExternalNeed, ...]
    entry: str
    unused: tuple[Path, ...]  # extracted only to learn a SONAME; the stage deletes them
    load_scans: tuple[FileScan, ...] = ()  # what each kept file can open by name (memoised)
    load_findings: tuple[LoadFinding, ...] = ()  # kept files opening undeclared libraries


Materialize = Callable[[Candidate], Materialized]


class _Group:
    """Byte-identical candidates: one library under several names."""

    def __init__(self, first: Candidate) -> None:
        self.members: list[Candidate] = [first]
        self.ruled_out: dict[str, str] = {}  # name -> drop reason
        self.done: Materialized | None = None
        self.why = ""

    @property
    def canonical(self) -> Candidate:
        return sorted(self.members, key=lambda c: (-len(c.name), c.name))[0]

    def live_names(self) -> list[str]:
        return [c.name for c in self.members if c.name not in self.ruled_out]


def _matches(name: str, patterns: tuple[str, ...], target: Target) -> str | None:
    for pattern in patterns:
        if fnmatch.fnmatchcase(target.key(name), target.key(pattern)):
            return pattern
    return None


def prune(
    *,
    component: str,
    target: Target,
    recipe: TargetRecipe,
    candidates: list[Candidate],
    materialize: Materialize,
) -> Closure:
    def fail_config(message: str, fix: str) -> ConfigError:
        return ConfigError(message, component=component, target=target.name, fix=fix)

    groups: dict[tuple[str, str], _Group] = {}
    by_name: dict[str, _Group] = {}
    for cand in sorted(candidates, key=lambda c: (c.source, c.member)):
        group = groups.get((cand.source, cand.identity))
        if group is None:
            group = groups[(cand.source, cand.identity)] = _Group(cand)
        else:
            group.members.append(cand)
        key = target.key(cand.name)
        other = by_name.get(key)
        if other is not None and other is not group:
            raise fail_config(
                f"two different libraries would both be staged as {cand.name} "
                f"({other.canonical.source}:{other.canonical.member} and "
                f"{cand.source}:{cand.member})",
                "narrow the [[take]] library globs so each file name comes from one source",
            )
        by_name[key] = group

    for group in groups.values():
        for cand in group.members:
            for drop in recipe.drops:
                if _matches(cand.name, drop.names, target):
                    group.ruled_out[cand.name] = drop.reason
                    break

    queue: deque[_Group] = deque()
    for root in recipe.roots:
        hits = [g for k, g in sorted(by_name.items()) if fnmatch.fnmatchcase(k, target.key(root))]
        live_groups = [g for g in hits if g.live_names()]
        if not hits:
            raise fail_config(
                f"root {root!r} matches no library in the sources",
                "check the root against the archive listing, or the [[take]] globs",
            )
        if not live_groups:
            raise fail_config(
                f"root {root!r} matches only libraries the recipe drops",
                "remove the root or the drop rule",
            )
        for group in live_groups:
            if not group.why:
                group.why = "root"
                queue.append(group)

    def open_group(group: _Group) -> Materialized:
        if group.done is None:
            cand = group.canonical
            try:
                group.done = materialize(cand)
            except BinaryError as exc:
                exc.component, exc.target = component, target.name
                raise
            info = group.done.info
            wrong_bits = bool(info.bits and target.bits and info.bits != target.bits)
            if info.format != target.format or info.machine != target.machine or wrong_bits:
                raise ClosureError(
                    f"{cand.name} is {info.format.upper()} {info.machine}"
                    f"{f' {info.bits}-bit' if wrong_bits else ''}, not the target's "
                    f"{target.format.upper()} {target.machine}"
                    f"{f' {target.bits}-bit' if wrong_bits else ''}",
                    component=component,
                    target=target.name,
                    file=f"{cand.source}:{cand.member}",
                    fix="the recipe takes the wrong wheel for this target, or the library "
                    "glob is too wide",
                )
        return group.done

    def lookup_soname(key: str) -> _Group | None:
        for group in groups.values():
            soname = group.done.info.soname if group.done else None
            if soname and target.key(soname) == key:
                return group
        return None

    externals: dict[str, tuple[str, ExternalGroup, list[str]]] = {}
    unresolved: list[tuple[str, str]] = []
    learned_sonames = False
    while queue:
        group = queue.popleft()
        name = group.canonical.name
        for needed in open_group(group).info.all_needed:
            key = target.key(needed)
            dep = by_name.get(key) or lookup_soname(key)
            hit = [r for n, r in dep.ruled_out.items() if target.key(n) == key] if dep else []
            if dep is not None and (hit or not dep.live_names()):
                reason = hit[0] if hit else next(iter(dep.ruled_out.values()))
                raise ClosureError(
                    f"{name} needs {needed}, which the recipe drops ({reason})",
                    component=component,
                    target=target.name,
                    file=name,
                    fix="keep the library (remove the drop rule) or remove what needs it",
                )
            if dep is not None:
                if not dep.why:
                    dep.why = f"needed by {name}"
                    queue.append(dep)
                continue
            ext = target.external_group(needed)
            if ext is not None:
                entry = externals.setdefault(key, (needed, ext, []))
                entry[2].append(name)
                continue
            unresolved.append((name, needed))
        if not queue and unresolved and not learned_sonames:
            # A needed SONAME may belong to a member named otherwise: inspect the rest once.
            learned_sonames = True
            for other in groups.values():
                if other.live_names():
                    open_group(other)
            retry, unresolved = unresolved, []
            for name_, needed in retry:
                dep = lookup_soname(target.key(needed))
                if dep is None:
                    unresolved.append((name_, needed))
                elif not dep.why:
                    dep.why = f"needed by {name_}"
                    queue.append(dep)
    if unresolved:
        raise Unresolved(tuple(unresolved), component=component, target=target.name)

    kept: list[KeptLibrary] = []
    links: list[tuple[str, str]] = []
    dropped: list[Dropped] = []
    unused: list[Path] = []
    for group in sorted(groups.values(), key=lambda g: g.canonical.name):
        live = group.live_names()
        if not group.why:
            for cand in group.members:
                reason = group.ruled_out.get(cand.name, "not needed by any root")
                dropped.append(Dropped(cand.source, cand.member, cand.size, reason))
            if group.done is not None:
                unused.append(group.done.path)
            continue
        done = open_group(group)
        soname = done.info.soname
        staged = soname if soname in live else sorted(live, key=lambda n: (-len(n), n))[0]
        canonical = group.canonical
        kept.append(
            KeptLibrary(
                name=staged,
                source=canonical.source,
                member=canonical.member,
                path=done.path,
                size=done.size,
                sha256=done.sha256,
                info=done.info,
                why=group.why,
            )
        )
        if soname and soname != staged and target.format == "elf":
            links.append((soname, staged))
        for cand in group.members:
            if cand.name == staged:
                continue
            reason = group.ruled_out.get(cand.name, f"alias of {staged} (same bytes)")
            dropped.append(Dropped(cand.source, cand.member, cand.size, reason))

    staged_names = {k.name for k in kept}
    link_names = {name for name, _ in links}
    collisions = staged_names & link_names
    if collisions:
        raise fail_config(
            f"a SONAME link would replace a staged file: {', '.join(sorted(collisions))}",
            "two kept libraries claim the same SONAME; keep only one",
        )
    entries = sorted(n for n in staged_names if fnmatch.fnmatchcase(n, recipe.entry))
    if len(entries) != 1:
        raise fail_config(
            f"entry {recipe.entry!r} must match exactly one kept library, matched "
            f"{entries or 'none'}",
            "make the entry glob name the ONNX Runtime core library",
        )
    return Closure(
        kept=tuple(kept),
        links=tuple(sorted(links)),
        dropped=tuple(sorted(dropped, key=lambda d: (d.source, d.member))),
        externals=tuple(
            ExternalNeed.of(name, g, tuple(sorted(set(by))))
            for name, g, by in sorted(externals.values(), key=lambda e: (e[0], e[1].group))
        ),
        entry=entries[0],
        unused=tuple(unused),
    )
