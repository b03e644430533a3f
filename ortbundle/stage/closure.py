"""Prune: keep the recipe's roots and their dependency closure, drop the rest, dedupe aliases.

The closure is computed from what the libraries say they need (ELF DT_NEEDED, PE import and
delay-import tables, Mach-O dylib load commands), never from a hand-kept list. Every needed
name must resolve to a kept file or to one of the target's allowed externals; anything else
stops the build naming both files.
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
from ortbundle.stage.binaries.loads import FileScan, LoadFinding, OfferedProvider


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
class ExternalLibrary:
    """A library the staged files need but do not carry: the closure finds it, and every
    output that says what the user's machine must provide (summary, runtimes.json, packages,
    SBOM) renders this one record."""

    name: str  # as the binaries name it: libstdc++.so.6, MSVCP140.dll
    group: str  # targets.toml group: glibc, gcc-libs, msvc-runtime, opencl, vulkan, ...
    kind: str  # system | toolchain | redist | driver | toolkit
    note: str
    needed_by: tuple[str, ...]  # the files that need it (staged paths in a package's input)
    optional: bool = False  # True: the runtime still works without it (a rung is lost)
    version: str = ""  # a constraint where it matters (">=13.0"); "" = any
    install: str = ""  # one sentence telling the user what to install
    sandbox: bool = True  # False: a Flatpak sandbox cannot provide it (host-only stack)
    # "needed" (DT_NEEDED, an import table), "delay" (only a PE delay-import table or a
    # Mach-O weak load: the library loads without it, the calls that use it fail), or "loads"
    # (opened by name at run time)
    via: str = "needed"

    @classmethod
    def of(
        cls, name: str, group: ExternalGroup, needed_by: tuple[str, ...], via: str = "needed"
    ) -> ExternalLibrary:
        """`name` as the closure reports it: provided by `group`, with its requirement facts;
        one bound only on first use is optional whatever its group."""
        return cls(
            name,
            group.group,
            group.kind,
            group.note,
            needed_by,
            optional=group.optional or via == "delay",
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
    externals: tuple[ExternalLibrary, ...]
    entry: str
    unused: tuple[Path, ...]  # extracted only to learn a SONAME; the stage deletes them
    load_scans: tuple[FileScan, ...] = ()  # what each kept file can open by name (memoised)
    load_findings: tuple[LoadFinding, ...] = ()  # kept files opening undeclared libraries
    # provider libraries the core's own table names, opened only when a session asks for the
    # provider: offered by the core, not shipped (no requirement, no finding)
    offered: tuple[OfferedProvider, ...] = ()
    idle_drops: tuple[str, ...] = ()  # a warning per drop glob that drops nothing (globs.py)
    # names left to a component shipped beside this one (the core a GenAI library imports)
    beside: tuple[str, ...] = ()


Materialize = Callable[[Candidate], Materialized]


class _Group:
    """Byte-identical candidates: one library under several names."""

    def __init__(self, first: Candidate) -> None:
        self.members: list[Candidate] = [first]
        self.ruled_out: dict[str, str] = {}  # name -> drop reason
        self.opened: Materialized | None = None  # extracted and inspected, once
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
    provided: Callable[[str], bool] | None = None,
) -> Closure:
    """Keep the recipe's roots and what they need, drop the rest: a pure function of the
    candidates and what `materialize` reads from them, refusing every ambiguity it meets.
    A name `provided` accepts is left to a component shipped beside this one (the core a
    library that uses a core links): neither kept, nor external, nor unresolved."""
    scope = _Scope(component, target, materialize, provided)
    index = _index_candidates(scope, candidates)
    _rule_out_drops(index, recipe, target)
    roots = _match_roots(scope, index, recipe.roots)
    beside: set[str] = set()
    externals = _walk_needed(scope, index, roots, beside)
    staged = _sort_out(scope, index)
    _refuse_link_collisions(scope, staged)
    entry = _entry(scope, staged, recipe.entry)
    return Closure(
        kept=staged.kept,
        links=tuple(sorted(staged.links)),
        dropped=tuple(sorted(staged.dropped, key=lambda d: (d.source, d.member))),
        externals=externals,
        entry=entry,
        unused=staged.unused,
        beside=tuple(sorted(beside, key=str.lower)),
    )


@dataclass(frozen=True)
class _Scope:
    """Whose closure it is, for which target, and how to open a candidate: what every step
    needs to name its errors the same way."""

    component: str
    target: Target
    materialize: Materialize
    provided: Callable[[str], bool] | None = None

    def config_error(self, message: str, fix: str) -> ConfigError:
        return ConfigError(message, component=self.component, target=self.target.name, fix=fix)


@dataclass(frozen=True)
class _Index:
    """The candidates grouped by identical bytes (in source, member order), and the group each
    name the target's loader compares would be staged from."""

    groups: tuple[_Group, ...]
    by_name: dict[str, _Group]

    def by_soname(self, key: str, target: Target) -> _Group | None:
        """The opened group whose SONAME the loader would compare equal to `key`."""
        for group in self.groups:
            soname = group.opened.info.soname if group.opened else None
            if soname and target.key(soname) == key:
                return group
        return None


def _index_candidates(scope: _Scope, candidates: list[Candidate]) -> _Index:
    """Group byte-identical candidates; two different libraries under one name are refused."""
    groups: dict[tuple[str, str], _Group] = {}
    by_name: dict[str, _Group] = {}
    for cand in sorted(candidates, key=lambda c: (c.source, c.member)):
        group = groups.get((cand.source, cand.identity))
        if group is None:
            group = groups[(cand.source, cand.identity)] = _Group(cand)
        else:
            group.members.append(cand)
        key = scope.target.key(cand.name)
        other = by_name.get(key)
        if other is not None and other is not group:
            raise scope.config_error(
                f"two different libraries would both be staged as {cand.name} "
                f"({other.canonical.source}:{other.canonical.member} and "
                f"{cand.source}:{cand.member})",
                "narrow the [[take]] library globs so each file name comes from one source",
            )
        by_name[key] = group
    return _Index(tuple(groups.values()), by_name)


def _rule_out_drops(index: _Index, recipe: TargetRecipe, target: Target) -> None:
    """Mark every name the recipe drops with the first drop rule's reason."""
    for group in index.groups:
        for cand in group.members:
            for drop in recipe.drops:
                if _matches(cand.name, drop.names, target):
                    group.ruled_out[cand.name] = drop.reason
                    break


def _match_roots(scope: _Scope, index: _Index, roots: tuple[str, ...]) -> list[_Group]:
    """The groups the root globs keep, in root order; a root that keeps nothing is refused."""
    matched: list[_Group] = []
    for root in roots:
        pattern = scope.target.key(root)
        hits = [g for k, g in sorted(index.by_name.items()) if fnmatch.fnmatchcase(k, pattern)]
        live_groups = [g for g in hits if g.live_names()]
        if not hits:
            raise scope.config_error(
                f"root {root!r} matches no library in the sources",
                "check the root against the archive listing, or the [[take]] globs",
            )
        if not live_groups:
            raise scope.config_error(
                f"root {root!r} matches only libraries the recipe drops",
                "remove the root or the drop rule",
            )
        for group in live_groups:
            _keep_for(group, "root", matched)
    return matched


def _keep_for(group: _Group, why: str, queue: list[_Group] | deque[_Group]) -> None:
    """Keep `group` for the first reason found, and queue it to have its needs followed."""
    if not group.why:
        group.why = why
        queue.append(group)


def _open(scope: _Scope, group: _Group) -> Materialized:
    """The group's library, extracted and inspected once; one built for another machine, word
    size or format than the target's is refused."""
    if group.opened is None:
        cand = group.canonical
        try:
            group.opened = scope.materialize(cand)
        except BinaryError as exc:
            exc.component, exc.target = scope.component, scope.target.name
            raise
        info, target = group.opened.info, scope.target
        wrong_bits = bool(info.bits and target.bits and info.bits != target.bits)
        if info.format != target.format or info.machine != target.machine or wrong_bits:
            raise ClosureError(
                f"{cand.name} is {info.format.upper()} {info.machine}"
                f"{f' {info.bits}-bit' if wrong_bits else ''}, not the target's "
                f"{target.format.upper()} {target.machine}"
                f"{f' {target.bits}-bit' if wrong_bits else ''}",
                component=scope.component,
                target=target.name,
                file=f"{cand.source}:{cand.member}",
                fix="the recipe takes the wrong wheel for this target, or the library "
                "glob is too wide",
            )
    return group.opened


# a needed name the target's system provides: (the name as first needed, its group, who needs
# it, whether each needs it only on first use)
_ExternalUse = tuple[str, ExternalGroup, list[str], list[bool]]


def _walk_needed(
    scope: _Scope, index: _Index, roots: list[_Group], beside: set[str]
) -> tuple[ExternalLibrary, ...]:
    """Follow every needed name from the roots, breadth first, keeping what resolves to a
    candidate; the externals it reaches, or every unresolved name at once, is the answer
    (`beside` collects the names left to a component shipped beside this one)."""
    queue = deque(roots)
    externals: dict[str, _ExternalUse] = {}
    unresolved: list[tuple[str, str]] = []
    learned_sonames = False
    while queue:
        unresolved += _follow_needs(scope, index, queue.popleft(), queue, externals, beside)
        if not queue and unresolved and not learned_sonames:
            learned_sonames = True
            unresolved = _retry_by_soname(scope, index, unresolved, queue)
    if unresolved:
        raise Unresolved(tuple(unresolved), component=scope.component, target=scope.target.name)
    return tuple(
        ExternalLibrary.of(
            name, group, tuple(sorted(set(needers))), via="delay" if all(lazy) else "needed"
        )
        for name, group, needers, lazy in sorted(
            externals.values(), key=lambda e: (e[0], e[1].group)
        )
    )


def _follow_needs(
    scope: _Scope,
    index: _Index,
    group: _Group,
    queue: deque[_Group],
    externals: dict[str, _ExternalUse],
    beside: set[str],
) -> list[tuple[str, str]]:
    """Resolve each name `group`'s library needs, in the order it lists them: a candidate is
    queued (one the recipe drops is refused), a system library is recorded as an external;
    what is neither comes back as (needer, needed)."""
    target = scope.target
    needer = group.canonical.name
    unresolved: list[tuple[str, str]] = []
    info = _open(scope, group).info
    for needed in info.all_needed:
        _refuse_executable_path(scope, needer, needed)
        key = target.key(needed)
        dep = index.by_name.get(key) or index.by_soname(key, target)
        if dep is not None:
            _refuse_dropped_need(scope, needer, needed, dep)
            _keep_for(dep, f"needed by {needer}", queue)
            continue
        if scope.provided is not None and scope.provided(needed):
            beside.add(needed)
            continue
        provider = target.external_group(needed)
        if provider is not None:
            use = externals.setdefault(key, (needed, provider, [], []))
            use[2].append(needer)
            use[3].append(needed not in info.needed)
            continue
        unresolved.append((needer, needed))
    return unresolved


_EXECUTABLE_PATH = "@executable_path/"


def _refuse_executable_path(scope: _Scope, needer: str, needed: str) -> None:
    """dyld expands `@executable_path` to the directory of the app's main executable, which a
    runtime packaged for any app cannot know: such a name resolves in one app and not another."""
    if scope.target.format == "macho" and _EXECUTABLE_PATH in needed:
        raise ClosureError(
            f"{needer} needs {needed}: @executable_path depends on the app that loads it, "
            "so no runtime tree can promise it",
            component=scope.component,
            target=scope.target.name,
            file=needer,
            fix="take the library as a source so the stage rewrites the name to @rpath/<file> "
            "(found through @loader_path), or ask upstream to link it by @rpath",
        )


def _refuse_dropped_need(scope: _Scope, needer: str, needed: str, dep: _Group) -> None:
    """A kept library may not need one the recipe drops: the name itself, or every name of
    the library it resolves to."""
    key = scope.target.key(needed)
    reasons = [r for n, r in dep.ruled_out.items() if scope.target.key(n) == key]
    if reasons or not dep.live_names():
        reason = reasons[0] if reasons else next(iter(dep.ruled_out.values()))
        raise ClosureError(
            f"{needer} needs {needed}, which the recipe drops ({reason})",
            component=scope.component,
            target=scope.target.name,
            file=needer,
            fix="keep the library (remove the drop rule) or remove what needs it",
        )


def _retry_by_soname(
    scope: _Scope, index: _Index, unresolved: list[tuple[str, str]], queue: deque[_Group]
) -> list[tuple[str, str]]:
    """A needed SONAME may belong to a member named otherwise: inspect every live candidate
    once, queue what now resolves, and return what still does not."""
    for group in index.groups:
        if group.live_names():
            _open(scope, group)
    still: list[tuple[str, str]] = []
    for needer, needed in unresolved:
        dep = index.by_soname(scope.target.key(needed), scope.target)
        if dep is None:
            still.append((needer, needed))
        else:
            _keep_for(dep, f"needed by {needer}", queue)
    return still


@dataclass(frozen=True)
class _Staged:
    """What the walk decided, file by file: the kept libraries (by canonical name), their
    SONAME links, every candidate not staged and why, and files opened only to learn a SONAME."""

    kept: tuple[KeptLibrary, ...]
    links: tuple[tuple[str, str], ...]
    dropped: tuple[Dropped, ...]
    unused: tuple[Path, ...]


def _sort_out(scope: _Scope, index: _Index) -> _Staged:
    """Stage each kept group once, under its SONAME if it has that name, else its longest
    name; every other member is an alias or a drop."""
    kept: list[KeptLibrary] = []
    links: list[tuple[str, str]] = []
    dropped: list[Dropped] = []
    unused: list[Path] = []
    for group in sorted(index.groups, key=lambda g: g.canonical.name):
        if not group.why:
            dropped += _not_needed(group)
            if group.opened is not None:
                unused.append(group.opened.path)
            continue
        library = _kept_library(scope, group)
        kept.append(library)
        link = _id_link(scope.target, library)
        if link:
            links.append((link, library.name))
        dropped += _aliases(group, library.name)
    return _Staged(tuple(kept), tuple(links), tuple(dropped), tuple(unused))


def _id_link(target: Target, library: KeptLibrary) -> str | None:
    """The name the loader will look for that the staged file does not have: an ELF SONAME,
    or the file a Mach-O id names (`@rpath/libonnxruntime.1.dylib` for
    libonnxruntime.1.32.0.dylib): dependents are linked against the id, so a file of that
    name must exist beside it."""
    soname = library.info.soname
    if not soname or target.format not in ("elf", "macho"):
        return None
    name = target.key(soname) if target.format == "macho" else soname
    return name if name != library.name else None


def _not_needed(group: _Group) -> list[Dropped]:
    """Every member of a group nothing keeps, with its drop reason or "not needed"."""
    return [
        Dropped(c.source, c.member, c.size, group.ruled_out.get(c.name, "not needed by any root"))
        for c in group.members
    ]


def _kept_library(scope: _Scope, group: _Group) -> KeptLibrary:
    """The one file a kept group is staged as."""
    opened = _open(scope, group)
    live = group.live_names()
    soname = opened.info.soname
    if soname and scope.target.format == "macho":
        soname = scope.target.key(soname)  # the file an install id names
    name = soname if soname in live else sorted(live, key=lambda n: (-len(n), n))[0]
    canonical = group.canonical
    return KeptLibrary(
        name=name,
        source=canonical.source,
        member=canonical.member,
        path=opened.path,
        size=opened.size,
        sha256=opened.sha256,
        info=opened.info,
        why=group.why,
    )


def _aliases(group: _Group, staged: str) -> list[Dropped]:
    """The kept group's other members: the same bytes under another name, or dropped."""
    return [
        Dropped(
            c.source,
            c.member,
            c.size,
            group.ruled_out.get(c.name, f"alias of {staged} (same bytes)"),
        )
        for c in group.members
        if c.name != staged
    ]


def _refuse_link_collisions(scope: _Scope, staged: _Staged) -> None:
    """A SONAME link may not take the name of a staged file (two kept libraries, one SONAME)."""
    collisions = {k.name for k in staged.kept} & {name for name, _ in staged.links}
    if collisions:
        raise scope.config_error(
            f"a SONAME link would replace a staged file: {', '.join(sorted(collisions))}",
            "two kept libraries claim the same SONAME; keep only one",
        )


def _entry(scope: _Scope, staged: _Staged, entry_glob: str) -> str:
    """The one kept library the entry glob names; none or several is refused."""
    staged_names = {k.name for k in staged.kept}
    entries = sorted(n for n in staged_names if fnmatch.fnmatchcase(n, entry_glob))
    if len(entries) != 1:
        raise scope.config_error(
            f"entry {entry_glob!r} must match exactly one kept library, matched "
            f"{entries or 'none'}",
            "make the entry glob name the ONNX Runtime core library",
        )
    return entries[0]
