"""`invoke pin`: move a recipe's pins to another upstream release, and show what the move changes.

The index is the authority for the new digest: pin reads the SHA-256 the index publishes, then
downloads the file through the cache (which hashes while writing and refuses a mismatch) before
anything is written. The recipe is rewritten with tomlkit, so comments and layout survive, and
only by an atomic rename once every step has succeeded.

What follows the version, for each project P that moves from old version O to new version N:
- each moved `[sources.<id>]`: `pypi.version`, `pypi.filename`, `sha256`, `size`;
- `[component] version`, only when P is the component's own project (the project of its `ort-*`
  sources, else of most sources) and all of that project's sources move, and it equals O;
- `[component] description`: O as a whole version token becomes N;
- a licence rule's `version` equal to O, when P is the component's own project or the rule's
  component is P (OpenVINO's rule follows only an OpenVINO move); "<P> O" inside a version
  ("bundled with onnxruntime-webgpu 1.27.0") follows too; so does the rule's `@O` purl;
- a licence text's `member` from a moved source: its `<name>-O.dist-info/` prefix.
Comments are never rewritten; the ones that mention O are listed as notes to review by hand.

The new file of a source keeps the old file's wheel tags (python, ABI, platform set). When those
are missing, the closest file of the same platform family is taken (the smallest step in the
manylinux/musllinux/macOS level, preferring no newer requirement) and the result says so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import tomllib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import requests
import tomlkit
from packaging.tags import Tag
from packaging.utils import (
    BuildTag,
    InvalidWheelFilename,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version
from tomlkit.items import AoT, Array, Table

from ortbundle.build import AuditFailed, BuildResult, build
from ortbundle.errors import ConfigError, FetchError, IntegrityError, OrtbundleError
from ortbundle.fetch.artifacts import Fetcher
from ortbundle.fetch.cache import Cache, default_cache_dir
from ortbundle.fetch.config import index_config
from ortbundle.fetch.download import request_with_retries
from ortbundle.fetch.index import ACCEPT, parse_project_page
from ortbundle.fetch.policy import RetryPolicy
from ortbundle.licensing import TargetLicensing
from ortbundle.plan import BuildOptions, Project
from ortbundle.progress import Reporter
from ortbundle.recipes import PypiCoordinates, Recipe, Source, load_product, load_recipe

MIB = 1 << 20


@dataclass(frozen=True)
class PinOptions:
    version: str | None = None  # None: the newest release with a file for every moved source
    sources: tuple[str, ...] = ()  # move only these source ids (any project); else the main ones
    build: bool = True  # False (--no-build): skip the old/new comparison builds
    force: bool = False  # rewrite even when the new build fails
    index_url: str | None = None  # None: pip's configuration
    cache_dir: Path | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    jobs: int = 0
    environ: Mapping[str, str] | None = None  # for the comparison builds; None: os.environ


# --- the index ---------------------------------------------------------------------------------


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


def _parse_wheel(filename: str) -> tuple[str, Version, BuildTag, frozenset[Tag]] | None:
    if not filename.endswith(".whl"):
        return None
    try:
        return parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None


class _Index:
    """The configured indexes' project pages, each read once per run."""

    def __init__(self, options: PinOptions) -> None:
        self.config = index_config(options.index_url)
        self.policy = options.retry
        self.session = requests.Session()
        self.session.headers["User-Agent"] = "ortbundle"
        if self.config.cert:
            self.session.verify = self.config.cert
        self._pages: dict[str, tuple[Listed, ...]] = {}

    def files(self, project: str) -> tuple[Listed, ...]:
        """Every wheel of `project` over all indexes; the first index listing a name wins."""
        key = canonicalize_name(project)
        if key in self._pages:
            return self._pages[key]
        seen: dict[str, Listed] = {}
        for index_url in self.config.index_urls:
            response = request_with_retries(
                self.session,
                index_url.rstrip("/") + f"/{key}/",
                self.policy,
                headers={"Accept": ACCEPT},
                what=f"index page for {project}",
                allow_404=True,
            )
            if response is None:
                continue
            ctype = response.headers.get("Content-Type", "")
            for entry in parse_project_page(response.content, ctype, response.url):
                wheel = _parse_wheel(entry.filename)
                if entry.filename in seen or wheel is None or wheel[0] != key:
                    continue
                seen[entry.filename] = Listed(
                    entry.filename,
                    entry.url,
                    wheel[1],
                    wheel[2],
                    wheel[3],
                    entry.hashes.get("sha256"),
                    entry.size,
                    entry.yanked,
                )
        self._pages[key] = tuple(seen.values())
        return self._pages[key]

    @property
    def where(self) -> str:
        return ", ".join(self.config.index_urls)


@contextmanager
def _index(options: PinOptions) -> Iterator[_Index]:
    index = _Index(options)
    try:
        yield index
    finally:
        index.session.close()


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


def _match(
    source: Source, files: Iterable[Listed], version: Version, *, yanked_ok: bool
) -> Listed | None:
    """The file of `version` with the old file's tags, else the closest of the same family."""
    old = _parse_wheel(source.filename)
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


def _version_or_none(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _no_file(source: Source, version: str, files: Sequence[Listed], component: str) -> FetchError:
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


# --- which sources move, to which version ------------------------------------------------------


def main_project(projects: Mapping[str, str]) -> str:
    """The component's own project (source id → project): that of `ort-*`, else of most sources."""
    ort = {canonicalize_name(p) for sid, p in projects.items() if sid.startswith("ort-")}
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


def _selection(recipe: Recipe, wanted: Sequence[str]) -> tuple[list[Source], list[Source], str]:
    """(moved, not moved, main project)."""
    main = main_project({sid: s.pypi.project for sid, s in recipe.sources.items()})
    unknown = sorted(set(wanted) - set(recipe.sources))
    if unknown:
        raise ConfigError(
            f"recipe {recipe.name} has no source {', '.join(unknown)}",
            component=recipe.name,
            file=str(recipe.path),
            fix=f"use one of: {', '.join(recipe.sources)}",
        )
    moved = [
        s
        for sid, s in recipe.sources.items()
        if (sid in wanted if wanted else canonicalize_name(s.pypi.project) == main)
    ]
    return moved, [s for s in recipe.sources.values() if s not in moved], main


def _newest(
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
            s.id for s in sources if _match(s, files[s.id], version, yanked_ok=False) is None
        ]
        if not lacking:
            return version, notes
        notes.append(f"{version} skipped: no file for source {', '.join(lacking)}")
    raise FetchError(
        "no final release has a file for every source "
        f"({', '.join(s.id for s in sources)}): {'; '.join(notes) or 'nothing is listed'}",
        fix="pass --version, or --source to move fewer sources",
    )


# --- the rewrite -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceMove:
    source: str
    project: str
    old_version: str
    old_filename: str
    new_version: str
    new_filename: str
    sha256: str
    size: int
    tags_note: str | None  # set when the new file's tags differ from the old one's


@dataclass(frozen=True)
class Edit:
    field: str  # dotted TOML path
    old: str | None
    new: str


@dataclass(frozen=True)
class _Bump:
    project: str
    old: frozenset[str]
    new: str
    sources: frozenset[str]
    main: bool  # the component's own project, all of its sources moving


def _token(version: str) -> re.Pattern[str]:
    """`version` as a whole version, not inside a longer one (1.0.0 is not in 11.0.0 or 1.0.0.1)."""
    return re.compile(rf"(?<![\w.]){re.escape(version)}(?![\w]|\.\d)")


def _table(item: Any, where: str) -> MutableMapping[str, Any]:
    if not isinstance(item, MutableMapping):
        raise ConfigError(f"{where} is not a table")
    return item


def rewrite_recipe(
    text: str, moves: Sequence[SourceMove], main: str, all_main: bool
) -> tuple[str, tuple[Edit, ...], tuple[str, ...]]:
    """The recipe text with the moves applied (module docstring: what follows), edits, notes."""
    doc = tomlkit.parse(text)
    edits: list[Edit] = []
    notes: list[str] = []

    def put(table: MutableMapping[str, Any], key: str, value: str | int, where: str) -> None:
        old = table.get(key)
        if old is not None and str(old) == str(value):
            return
        if old is None and isinstance(table, Table) and "sha256" in table:
            table.value._insert_after("sha256", key, value)  # size sits beside its digest
        else:
            table[key] = value
        edits.append(Edit(where, None if old is None else str(old), str(value)))

    sources = _table(doc["sources"], "[sources]")
    for move in moves:
        table = _table(sources[move.source], f"[sources.{move.source}]")
        where = f"sources.{move.source}"
        pypi = _table(table["pypi"], f"{where}.pypi")
        put(pypi, "version", move.new_version, f"{where}.pypi.version")
        put(pypi, "filename", move.new_filename, f"{where}.pypi.filename")
        put(table, "sha256", move.sha256, f"{where}.sha256")
        put(table, "size", move.size, f"{where}.size")

    bumps: dict[str, _Bump] = {}
    for move in moves:
        key = canonicalize_name(move.project)
        prior = bumps.get(key)
        bumps[key] = _Bump(
            move.project,
            (prior.old if prior else frozenset()) | {move.old_version},
            move.new_version,
            (prior.sources if prior else frozenset()) | {move.source},
            key == main and all_main,
        )
    component = _table(doc["component"], "[component]")
    for project, bump in bumps.items():
        if project == main and not bump.main:
            notes.append(
                f"only some of {bump.project}'s sources moved: [component] version and its "
                "licence rules are left as they are"
            )
        for old in sorted(bump.old - {bump.new}):
            token = _token(old)
            if bump.main:
                if str(component.get("version")) == old:
                    put(component, "version", bump.new, "component.version")
                else:
                    notes.append(
                        f"[component] version {component.get('version')} is not {old}: left alone"
                    )
            description = str(component.get("description", ""))
            if token.search(description):
                put(
                    component,
                    "description",
                    token.sub(bump.new, description),
                    "component.description",
                )
            _follow_licences(doc, bump, project, old, put)
    return tomlkit.dumps(doc), tuple(edits), tuple(notes + _comment_notes(text, bumps.values()))


_Put = Callable[[MutableMapping[str, Any], str, str | int, str], None]


def _follow_licences(doc: Any, bump: _Bump, key: str, old: str, put: _Put) -> None:
    token = _token(old)
    phrase = re.compile(rf"(?<![\w.-]){re.escape(bump.project)} {token.pattern}")
    dist_info = re.compile(rf"^([^/]+)-{re.escape(old)}\.dist-info/")
    for target, section in _table(doc.get("targets", {}), "[targets]").items():
        rules = _table(section, f"[targets.{target}]").get("licenses", [])
        if not isinstance(rules, AoT | list):
            continue
        for i, rule in enumerate(rules):
            where = f"targets.{target}.licenses[{i}]"
            rule = _table(rule, where)
            version = str(rule.get("version", ""))
            own = bump.main or canonicalize_name(str(rule.get("component", ""))) == key
            if version == old and own:
                put(rule, "version", bump.new, f"{where}.version")
                purl = str(rule.get("purl", ""))
                if purl.endswith(f"@{old}"):
                    put(rule, "purl", purl.removesuffix(old) + bump.new, f"{where}.purl")
            elif phrase.search(version):
                put(
                    rule,
                    "version",
                    phrase.sub(f"{bump.project} {bump.new}", version),
                    f"{where}.version",
                )
            texts = rule.get("texts", [])
            for j, text in enumerate(texts if isinstance(texts, Array | list) else []):
                text = _table(text, f"{where}.texts[{j}]")
                member = str(text.get("member", ""))
                if text.get("source") in bump.sources and dist_info.match(member):
                    new = dist_info.sub(rf"\g<1>-{bump.new}.dist-info/", member)
                    put(text, "member", new, f"{where}.texts[{j}].member")


def _comment_notes(text: str, bumps: Iterable[_Bump]) -> list[str]:
    notes = []
    olds = sorted({o for b in bumps for o in b.old - {b.new}})
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):
            hits = [o for o in olds if _token(o).search(line)]
            if hits:
                notes.append(
                    f"line {number}: a comment mentions {', '.join(hits)} (comments are never "
                    f"rewritten; review it): {line.strip()}"
                )
    return notes


# --- the bump report ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FileChange:
    directory: str  # the runtime directory in the stage: runtimes/<name>
    name: str
    old_size: int | None
    new_size: int | None
    old_link: str | None = None  # what a symlink pointed to
    new_link: str | None = None


@dataclass(frozen=True)
class LicenceChange:
    component: str
    old: str | None  # "version (expression)", None when added
    new: str | None  # None when removed


@dataclass(frozen=True)
class TargetBump:
    target: str
    added: tuple[FileChange, ...]
    removed: tuple[FileChange, ...]
    changed: tuple[FileChange, ...]  # same name, other bytes or link target
    old_size: int  # bytes of every runtime library on the target (links not counted)
    new_size: int
    externals_added: tuple[str, ...]  # "runtimes/x: libz.so.1 (zlib, system)"
    externals_removed: tuple[str, ...]
    licences: tuple[LicenceChange, ...]

    @property
    def size_delta(self) -> int:
        return self.new_size - self.old_size

    @property
    def unchanged(self) -> bool:
        return not (
            self.added
            or self.removed
            or self.changed
            or self.externals_added
            or self.externals_removed
            or self.licences
        )


@dataclass(frozen=True)
class ProductBump:
    product: str
    targets: tuple[TargetBump, ...]
    old_error: str | None  # the previous pin did not build (no comparison for the files)
    new_error: str | None  # the new pin does not build
    new_exit_code: int  # 0 when the new build succeeded


@dataclass(frozen=True)
class BumpReport:
    component: str
    products: tuple[ProductBump, ...]

    @property
    def ok(self) -> bool:
        return all(p.new_error is None for p in self.products)

    @property
    def exit_code(self) -> int:
        return next((p.new_exit_code for p in self.products if p.new_error), 0)

    def lines(self) -> list[str]:
        if not self.products:
            return [f"no product uses {self.component}: nothing to compare"]
        out: list[str] = []
        for product in self.products:
            if product.old_error:
                out.append(
                    f"{product.product}: the previous pin did not build: {product.old_error}"
                )
            if product.new_error:
                out.append(f"{product.product}: THE NEW PIN DOES NOT BUILD: {product.new_error}")
            for t in product.targets:
                out.append(
                    f"{product.product} {t.target}: {t.old_size:,} → {t.new_size:,} bytes "
                    f"({t.size_delta:+,} B, {t.size_delta / MIB:+.2f} MiB)"
                )
                out += [f"  + {c.directory}/{c.name} ({_new(c)})" for c in t.added]
                out += [f"  - {c.directory}/{c.name} ({_old(c)})" for c in t.removed]
                out += [f"  ~ {c.directory}/{c.name} ({_old(c)} → {_new(c)})" for c in t.changed]
                out += [f"  external + {e}" for e in t.externals_added]
                out += [f"  external - {e}" for e in t.externals_removed]
                out += [f"  licence {_licence(c)}" for c in t.licences]
                if t.unchanged:
                    out.append("  no file, external or licence changed")
        return out

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


def _old(change: FileChange) -> str:
    return f"-> {change.old_link}" if change.old_link else f"{change.old_size or 0:,} B"


def _new(change: FileChange) -> str:
    return f"-> {change.new_link}" if change.new_link else f"{change.new_size or 0:,} B"


def _licence(change: LicenceChange) -> str:
    if change.old is None:
        return f"+ {change.component} {change.new}"
    if change.new is None:
        return f"- {change.component} {change.old}"
    return f"~ {change.component} {change.old} → {change.new}"


_Files = dict[tuple[str, str], tuple[int, str, str | None]]  # (dir, name) → size, sha256, link


@dataclass(frozen=True)
class _TargetState:
    files: _Files | None  # None: the build failed its audit, so only licences are known
    externals: dict[str, str] | None
    licences: dict[str, str]  # component → "version (expression)"


@dataclass(frozen=True)
class _Side:
    targets: dict[str, _TargetState]
    error: OrtbundleError | None


def _licences(licensing: TargetLicensing) -> dict[str, str]:
    return {c.name: f"{c.version} ({c.expression})" for c in licensing.components}


def _state(result: BuildResult) -> dict[str, _TargetState]:
    states = {}
    for target in result.targets:
        files: _Files = {}
        externals: dict[str, str] = {}
        for runtime in target.runtimes:
            for f in runtime.files:
                name = f.path.removeprefix(runtime.directory + "/")
                files[(runtime.directory, name)] = (f.size, f.sha256, f.link_to)
            for e in runtime.closure.externals:
                externals[f"{runtime.directory}: {e.name}"] = f"({e.group}, {e.kind})"
        states[target.target] = _TargetState(files, externals, _licences(target.licensing))
    return states


def _build_side(project: Project, options: BuildOptions, reporter: Reporter) -> _Side:
    try:
        return _Side(_state(build(project, options, reporter)), None)
    except AuditFailed as failed:
        licences = {t.target: _TargetState(None, None, _licences(t)) for t in failed.licensing}
        return _Side(licences, failed)
    except OrtbundleError as exc:
        return _Side({}, exc)


def _compare(product: str, targets: Sequence[str], old: _Side, new: _Side) -> ProductBump:
    bumps = []
    for name in targets:
        before, after = old.targets.get(name), new.targets.get(name)
        if before is None or after is None:
            continue
        added: list[FileChange] = []
        removed: list[FileChange] = []
        changed: list[FileChange] = []
        old_size = new_size = 0
        if before.files is not None and after.files is not None:
            for key in sorted(before.files.keys() | after.files.keys()):
                was, now = before.files.get(key), after.files.get(key)
                change = FileChange(
                    key[0],
                    key[1],
                    was[0] if was else None,
                    now[0] if now else None,
                    was[2] if was else None,
                    now[2] if now else None,
                )
                if was is None:
                    added.append(change)
                elif now is None:
                    removed.append(change)
                elif was != now:
                    changed.append(change)
            old_size = sum(v[0] for v in before.files.values() if v[2] is None)
            new_size = sum(v[0] for v in after.files.values() if v[2] is None)
        licences = [
            LicenceChange(c, before.licences.get(c), after.licences.get(c))
            for c in sorted(before.licences.keys() | after.licences.keys())
            if before.licences.get(c) != after.licences.get(c)
        ]
        bumps.append(
            TargetBump(
                name,
                tuple(added),
                tuple(removed),
                tuple(changed),
                old_size,
                new_size,
                _gained(after.externals, before.externals),
                _gained(before.externals, after.externals),
                tuple(licences),
            )
        )
    return ProductBump(
        product,
        tuple(bumps),
        _describe(old.error),
        _describe(new.error),
        new.error.exit_code if new.error else 0,
    )


def _gained(side: dict[str, str] | None, other: dict[str, str] | None) -> tuple[str, ...]:
    """Externals `side` needs and `other` does not (nothing when either is unknown)."""
    if side is None or other is None:
        return ()
    return tuple(f"{k} {side[k]}" for k in sorted(side.keys() - other.keys()))


def _describe(error: OrtbundleError | None) -> str | None:
    return f"{error.kind} error: {error}" if error else None


def _overlay(project: Project, component: str, text: str, root: Path) -> Project:
    """A project that differs from `project` only in one recipe's text (and in where dist is)."""
    recipes = root / "recipes"
    recipes.mkdir(parents=True)
    for recipe in project.recipes.glob("*.toml"):
        shutil.copyfile(recipe, recipes / recipe.name)
    (recipes / f"{component}.toml").write_text(text, "utf-8", newline="")
    for shared in (project.manifests, project.licenses, project.keys):
        if shared.exists():
            (root / shared.name).symlink_to(shared.resolve(), target_is_directory=True)
    return Project(root=root, dist=root / "dist")


def bump_report(
    project: Project,
    component: str,
    old_text: str,
    new_text: str,
    options: PinOptions,
    reporter: Reporter,
) -> BumpReport:
    """Build every product using `component` with the old and the new recipe (audit only), aside."""
    environ = dict(os.environ if options.environ is None else options.environ)
    environ["SOURCE_DATE_EPOCH"] = environ.get("SOURCE_DATE_EPOCH") or "0"  # no git in the overlay
    products = []
    with tempfile.TemporaryDirectory(prefix="ortbundle-pin-") as tmp:
        old_project = _overlay(project, component, old_text, Path(tmp) / "old")
        new_project = _overlay(project, component, new_text, Path(tmp) / "new")
        for manifest in sorted(project.manifests.glob("*.toml")):
            product = load_product(manifest)
            if component in product.runtimes:
                targets = product.runtime_targets[component]
            elif component in product.plugins or component in product.models:
                targets = product.targets  # shipped wherever the product is
            else:
                continue
            build_options = BuildOptions(
                product=product.name,
                targets=targets,
                index_url=options.index_url,
                jobs=options.jobs,
                cache_dir=options.cache_dir,
                retry=options.retry,
                audit_only=True,
                environ=environ,
            )
            old = _build_side(old_project, build_options, reporter)
            new = _build_side(new_project, build_options, reporter)
            products.append(_compare(product.name, targets, old, new))
    return BumpReport(component, tuple(products))


# --- pin ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NotMoved:
    source: str
    project: str
    version: str
    reason: str


@dataclass(frozen=True)
class PinResult:
    component: str
    recipe: Path
    version: str  # the release the moved sources are pinned to now (or would be)
    moves: tuple[SourceMove, ...]  # empty: already pinned there
    not_moved: tuple[NotMoved, ...]
    edits: tuple[Edit, ...]
    notes: tuple[str, ...]
    report: BumpReport | None  # None with --no-build, or when nothing moved
    written: bool

    @property
    def refused(self) -> bool:
        """The new pin does not build, so the recipe was left as it was."""
        return bool(self.moves) and not self.written

    @property
    def exit_code(self) -> int:
        return (self.report.exit_code if self.report else 1) if self.refused else 0

    def lines(self) -> list[str]:
        out = [f"{self.component}: pinned to {self.version} ({self.recipe})"]
        if not self.moves:
            out[0] = f"{self.component}: already pinned to {self.version}; nothing to do"
        for m in self.moves:
            out.append(
                f"  {m.source}: {m.old_filename} → {m.new_filename} "
                f"(sha256 {m.sha256[:16]}…, {m.size:,} B)"
            )
            if m.tags_note:
                out.append(f"    {m.tags_note}")
        for n in self.not_moved:
            out.append(f"  not moved: {n.source} ({n.project} {n.version}): {n.reason}")
        # the sources' own edits are the moves above; to_json() lists every edit
        out += [
            f"  edit {e.field}: {e.old} → {e.new}"
            for e in self.edits
            if not e.field.startswith("sources.")
        ]
        out += [f"  note: {n}" for n in self.notes]
        if self.report is not None:
            out += self.report.lines()
        if self.refused:
            out.append(
                f"{self.recipe.name} NOT rewritten: the new pin does not build "
                "(--force pins it anyway)"
            )
        elif self.written:
            out.append(f"{self.recipe.name} rewritten")
        return out

    def to_json(self) -> str:
        data = asdict(replace(self, report=None))
        data["recipe"] = str(self.recipe)
        data["report"] = asdict(self.report) if self.report else None
        data["refused"] = self.refused
        return json.dumps(data, indent=2)


def _tags_note(old: str, new: Listed) -> str | None:
    old_tags = _parse_wheel(old)
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


def pin(project: Project, component: str, options: PinOptions, reporter: Reporter) -> PinResult:
    """Resolve, confirm, compare and rewrite; the recipe changes only if every step succeeded."""
    path = project.recipes / f"{component}.toml"
    recipe = load_recipe(path)
    original = path.read_bytes()
    moved, others, main = _selection(recipe, options.sources)
    main_ids = {s.id for s in recipe.sources.values() if canonicalize_name(s.pypi.project) == main}
    not_moved = tuple(
        NotMoved(
            s.id,
            s.pypi.project,
            s.pypi.version,
            f"another project; move it with `invoke pin {component} --source {s.id}`"
            if canonicalize_name(s.pypi.project) != main
            else "not named by --source",
        )
        for s in others
    )
    version, chosen, notes = _choose(moved, options, component)
    if all(c.filename == s.filename and c.sha256 == s.sha256 and s.size for s, c in chosen):
        return PinResult(component, path, version, (), not_moved, (), notes, None, False)
    moves = _confirm(chosen, version, options, component, reporter)
    old_text = original.decode("utf-8")
    all_main = main_ids <= {m.source for m in moves}
    new_text, edits, rewrite_notes = rewrite_recipe(old_text, moves, main, all_main)
    _validate(project, component, new_text, moves)
    report = (
        bump_report(project, component, old_text, new_text, options, reporter)
        if options.build
        else None
    )
    write = report is None or report.ok or options.force
    if write:
        _write_atomically(path, new_text, original)
    return PinResult(
        component, path, version, moves, not_moved, edits, notes + rewrite_notes, report, write
    )


@dataclass(frozen=True)
class _Chosen:
    """The file a source moves to, with the digest the index publishes for it."""

    filename: str
    sha256: str
    size: int | None
    listed: Listed


def _choose(
    moved: Sequence[Source], options: PinOptions, component: str
) -> tuple[str, list[tuple[Source, _Chosen]], tuple[str, ...]]:
    """The version, each moved source's new file, and notes; nothing is downloaded yet."""
    notes: list[str] = []
    with _index(options) as index:
        files = {s.id: index.files(s.pypi.project) for s in moved}
        for s in moved:
            if not files[s.id]:
                raise FetchError(
                    f"source {s.id}: no index lists wheels of {s.pypi.project} "
                    f"(looked in {index.where})",
                    component=component,
                    fix="check the project name, or point --index-url / PIP_INDEX_URL at an "
                    "index that carries it",
                )
    if options.version is not None:
        version = _version_or_none(options.version)
        if version is None:
            raise ConfigError(f"--version {options.version!r} is not a version")
    else:
        version, skipped = _newest(moved, files)
        notes += skipped
    chosen = []
    for s in moved:
        found = _match(s, files[s.id], version, yanked_ok=False) or (
            _match(s, files[s.id], version, yanked_ok=True) if options.version else None
        )
        if found is None:
            raise _no_file(s, str(version), files[s.id], component)
        if found.yanked:
            notes.append(f"{found.filename} is yanked; pinned because --version names it")
        if found.sha256 is None:
            raise IntegrityError(
                f"the index publishes no sha256 for {found.filename}; pin does not trust a "
                "download it cannot check",
                component=component,
                file=found.filename,
                fix="use an index that publishes digests (PEP 503 #sha256= or PEP 691 hashes)",
            )
        old = _version_or_none(s.pypi.version)
        if old is not None and old > version:
            notes.append(f"{s.id}: a downgrade from {s.pypi.version}")
        chosen.append((s, _Chosen(found.filename, found.sha256, found.size, found)))
    return str(version), chosen, tuple(notes)


def _confirm(
    chosen: Sequence[tuple[Source, _Chosen]],
    version: str,
    options: PinOptions,
    component: str,
    reporter: Reporter,
) -> tuple[SourceMove, ...]:
    """Download each new file through the cache, which refuses bytes that miss the digest."""
    fetcher = Fetcher(
        Cache(options.cache_dir or default_cache_dir()),
        reporter,
        index_url=options.index_url,
        policy=options.retry,
    )
    pinned = [
        Source(s.id, PypiCoordinates(s.pypi.project, version, c.filename), c.sha256, c.size)
        for s, c in chosen
    ]
    artifacts = fetcher.fetch_all(
        ((component, p) for p in pinned), jobs=options.jobs or os.cpu_count() or 1
    )
    return tuple(
        SourceMove(
            s.id,
            s.pypi.project,
            s.pypi.version,
            s.filename,
            version,
            c.filename,
            c.sha256,
            artifacts[c.sha256].size,
            _tags_note(s.filename, c.listed),
        )
        for s, c in chosen
    )


def _validate(project: Project, component: str, text: str, moves: Sequence[SourceMove]) -> None:
    """The rewritten text must load as a recipe carrying exactly the new pins."""
    with tempfile.TemporaryDirectory(prefix="ortbundle-pin-") as tmp:
        path = Path(tmp) / f"{component}.toml"
        path.write_text(text, "utf-8", newline="")
        recipe = load_recipe(path)
    for move in moves:
        source = recipe.sources[move.source]
        got = (source.filename, source.sha256, source.size, source.pypi.version)
        if got != (move.new_filename, move.sha256, move.size, move.new_version):
            raise ConfigError(  # pragma: no cover - a bug in rewrite_recipe, not a user error
                f"the rewritten recipe does not carry the new pin of {move.source}",
                component=component,
                file=str(project.recipes / f"{component}.toml"),
            )


def _write_atomically(path: Path, text: str, expected: bytes) -> None:
    """Replace the recipe in one rename, unless someone changed it while pin was running."""
    if path.read_bytes() != expected:
        raise ConfigError(
            "the recipe changed on disk while pin was running; nothing was written",
            file=str(path),
            fix="run pin again",
        )
    tmp = path.with_name(f".{path.name}.pin-{os.getpid()}")
    try:
        with tmp.open("w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        tmp.chmod(path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# --- check -------------------------------------------------------------------------------------

_SEVERITY = {"current": 0, "held": 0, "stale": 1, "unpinned": 2, "gone": 3, "mismatch": 4}
_EXIT = {
    "current": 0,
    "held": 0,
    "stale": ConfigError.exit_code,
    "unpinned": ConfigError.exit_code,
    "gone": FetchError.exit_code,
    "mismatch": IntegrityError.exit_code,
}


@dataclass(frozen=True)
class PinStatus:
    component: str
    source: str
    project: str
    version: str
    filename: str
    state: str  # current, held, stale (newer release), unpinned (no sha256/size), gone, mismatch
    details: tuple[str, ...]
    newest: str | None  # the newest release with a file for this source, when newer
    command: str  # what moves it


@dataclass(frozen=True)
class CheckReport:
    statuses: tuple[PinStatus, ...]

    @property
    def ok(self) -> bool:
        return all(s.state in ("current", "held") for s in self.statuses)

    @property
    def exit_code(self) -> int:
        """The worst state's: 4 digest mismatch, 3 file gone, 2 stale or unpinned, 0 clean."""
        return max((_EXIT[s.state] for s in self.statuses), default=0)

    def lines(self) -> list[str]:
        out = []
        for s in self.statuses:
            head = f"{s.component}/{s.source}: {s.project} {s.version} {s.state}"
            tail = f" — {'; '.join(s.details)}" if s.details else ""
            fix = f" ({s.command})" if s.state not in ("current", "held") else ""
            out.append(head + tail + fix)
        stale = sum(1 for s in self.statuses if s.state not in ("current", "held"))
        out.append(f"{len(self.statuses)} pins checked, {stale} need attention")
        return out

    def to_json(self) -> str:
        return json.dumps({"ok": self.ok, "statuses": [asdict(s) for s in self.statuses]}, indent=2)


def _lenient_sources(path: Path) -> dict[str, Source]:
    """The sources, read without load_recipe's checks: an unpinned source is a finding here."""
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the recipe: {exc}", file=str(path)) from None
    tables = data.get("sources")
    sources = {}
    for sid, table in (tables if isinstance(tables, dict) else {}).items():
        pypi = table.get("pypi") if isinstance(table, dict) else None
        if not isinstance(pypi, dict) or not all(
            isinstance(pypi.get(k), str) for k in ("project", "version", "filename")
        ):
            raise ConfigError(
                f"[sources.{sid}] needs pypi = {{ project, version, filename }}", file=str(path)
            )
        sha256, size = table.get("sha256"), table.get("size")
        hold = table.get("hold")
        sources[sid] = Source(
            sid,
            PypiCoordinates(pypi["project"], pypi["version"], pypi["filename"]),
            sha256.lower() if isinstance(sha256, str) else "",
            size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None,
            hold if isinstance(hold, str) and hold else None,
        )
    if not sources:
        raise ConfigError("the recipe has no [sources.<id>]", file=str(path))
    return sources


def check_pins(project: Project, components: Sequence[str], options: PinOptions) -> CheckReport:
    """Every source of the components (all recipes if none): stale, unpinned, gone or mismatched.

    Staleness follows pin's own rule, so a clean pin always checks clean: the component's own
    sources are judged together (the newest release with a file for each of them), the sources
    of any other project together per project (what `--source` would move).
    """
    names = list(components) or sorted(p.stem for p in project.recipes.glob("*.toml"))
    statuses = []
    with _index(options) as index:
        for name in names:
            sources = _lenient_sources(project.recipes / f"{name}.toml")
            main = main_project({sid: s.pypi.project for sid, s in sources.items()})
            found: dict[str, PinStatus] = {}
            groups: dict[str, list[Source]] = {}
            for source in sources.values():
                groups.setdefault(canonicalize_name(source.pypi.project), []).append(source)
            for key, group in groups.items():
                files = {s.id: index.files(s.pypi.project) for s in group}
                try:
                    newest, skipped = _newest(group, files)
                except FetchError:
                    newest, skipped = None, []
                moves = "" if key == main else "".join(f" --source {s.id}" for s in group)
                blocked = tuple(n for n in skipped if "no file" in n)
                for source in group:
                    found[source.id] = _check_source(
                        name, source, files[source.id], newest, blocked, f"{name}{moves}"
                    )
            statuses += [found[sid] for sid in sources]  # in the recipe's order
    return CheckReport(tuple(statuses))


def _check_source(
    component: str,
    source: Source,
    files: Sequence[Listed],
    newest: Version | None,
    blocked: Sequence[str],
    command: str,
) -> PinStatus:
    states: list[str] = []
    details: list[str] = []
    if not re.fullmatch(r"[0-9a-f]{64}", source.sha256):
        states.append("unpinned")
        details.append("no sha256")
    if source.size is None:
        states.append("unpinned")
        details.append("no size")
    listed = next((f for f in files if f.filename == source.filename), None)
    if listed is None:
        states.append("gone")
        details.append(f"the index no longer lists {source.filename}")
    elif listed.sha256 and source.sha256 and listed.sha256 != source.sha256:
        states.append("mismatch")
        details.append(f"the index publishes sha256 {listed.sha256}")
    elif listed.yanked:
        states.append("stale")
        details.append("the pinned file is yanked")
    pinned = _version_or_none(source.pypi.version)
    newer = newest is not None and (pinned is None or newest > pinned)
    if newer and source.hold:
        states.append("held")
        details.append(f"{newest} is out; held: {source.hold}")
    elif newer:
        states.append("stale")
        details.append(f"{newest} is out")
    details += blocked
    return PinStatus(
        component,
        source.id,
        source.pypi.project,
        source.pypi.version,
        source.filename,
        max(states, key=_SEVERITY.__getitem__, default="current"),
        tuple(details),
        str(newest) if newer else None,
        f"invoke pin {command}",
    )
