"""The rewrite of a recipe (tomlkit: comments and layout survive) for the moves pin chose, and
what follows them: the component's version and description, licence rules and texts (see the
package docstring). The new text is loaded as a recipe before it replaces the old one, in one
rename, and only if nobody changed the file while pin ran."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Iterable, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from packaging.utils import canonicalize_name
from tomlkit.items import AoT, Array, Table

from ortbundle._core.errors import ConfigError
from ortbundle._core.fsio import atomic_write
from ortbundle.config.plan import Project
from ortbundle.config.recipes import load_recipe
from ortbundle.config.sources import NestedMember
from ortbundle.tools.pin.options import version_of


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
    kind: str = "pypi"  # pypi, maven, npm: which table holds the version
    nested: tuple[NestedMember, ...] = ()  # the archives inside, re-pinned (outermost first)
    names: tuple[str, ...] = ()  # how licence rules may name the project; () → (project,)


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
    names: tuple[str, ...] = ()  # the project's other names (a Maven artifact, an npm package)


def _token(version: str) -> re.Pattern[str]:
    """`version` as a whole version, not inside a longer one (1.0.0 is not in 11.0.0 or 1.0.0.1)."""
    return re.compile(rf"(?<![\w.]){re.escape(version)}(?![\w]|\.\d)")


def _table(item: Any, where: str) -> MutableMapping[str, Any]:
    if not isinstance(item, MutableMapping):
        raise ConfigError(f"{where} is not a table")
    return item


def rewrite_recipe(
    text: str, moves: Sequence[SourceMove], main: str | None, all_main: bool
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
        coords = _table(table[move.kind], f"{where}.{move.kind}")
        put(coords, "version", move.new_version, f"{where}.{move.kind}.version")
        if move.kind == "pypi":
            put(coords, "filename", move.new_filename, f"{where}.pypi.filename")
        put(table, "sha256", move.sha256, f"{where}.sha256")
        put(table, "size", move.size, f"{where}.size")
        if move.nested:
            nested = table.get("nested")
            if not isinstance(nested, Array | AoT | list) or len(nested) != len(move.nested):
                raise ConfigError(f"[{where}] nested does not list {len(move.nested)} archives")
            for i, level in enumerate(move.nested):
                inner = _table(nested[i], f"{where}.nested[{i}]")
                if str(inner.get("member")) != level.member:
                    raise ConfigError(f"{where}.nested[{i}] is not {level.member!r}")
                put(inner, "sha256", level.sha256, f"{where}.nested[{i}].sha256")
            notes.append(
                f"{move.source}: the archive inside ({move.nested[-1].member}) is re-pinned; "
                f"{move.project}'s version says nothing of what it carries: check [component] "
                "version, description and the licence rules against it"
            )

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
            move.names or (move.project,),
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
            _follow_licences(doc, bump, project, old, put, notes)
    return tomlkit.dumps(doc), tuple(edits), tuple(notes + _comment_notes(text, bumps.values()))


_Put = Callable[[MutableMapping[str, Any], str, str | int, str], None]


def _follow_licences(
    doc: Any, bump: _Bump, key: str, old: str, put: _Put, notes: list[str]
) -> None:
    token = _token(old)
    names = bump.names or (bump.project,)
    called = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    phrase = re.compile(rf"(?<![\w.-])({called}) {token.pattern}")
    dist_info = re.compile(rf"^([^/]+)-{re.escape(old)}\.dist-info/")
    purl_version = re.compile(rf"@{re.escape(old)}(?=$|[?#])")
    own_names = {canonicalize_name(n) for n in names} | {key}
    for target, section in _table(doc.get("targets", {}), "[targets]").items():
        rules = _table(section, f"[targets.{target}]").get("licenses", [])
        if not isinstance(rules, AoT | list):
            continue
        for i, rule in enumerate(rules):
            where = f"targets.{target}.licenses[{i}]"
            rule = _table(rule, where)
            version = str(rule.get("version", ""))
            own = bump.main or canonicalize_name(str(rule.get("component", ""))) in own_names
            moved = version == old and own
            if moved:
                put(rule, "version", bump.new, f"{where}.version")
                purl = str(rule.get("purl", ""))
                if purl_version.search(purl):
                    put(rule, "purl", purl_version.sub(f"@{bump.new}", purl), f"{where}.purl")
            elif phrase.search(version):
                put(
                    rule,
                    "version",
                    phrase.sub(lambda m: f"{m[1]} {bump.new}", version),
                    f"{where}.version",
                )
            texts = rule.get("texts", [])
            for j, text in enumerate(texts if isinstance(texts, Array | list) else []):
                text = _table(text, f"{where}.texts[{j}]")
                member = str(text.get("member", ""))
                if text.get("source") in bump.sources and dist_info.match(member):
                    new = dist_info.sub(rf"\g<1>-{bump.new}.dist-info/", member)
                    put(text, "member", new, f"{where}.texts[{j}].member")
                file = str(text.get("file", ""))
                if moved and token.search(file):
                    notes.append(
                        f"{where}.texts[{j}]: licenses/{file} is {old}'s text; add "
                        f"{bump.new}'s under licenses/ and point the rule at it"
                    )


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


def validate(project: Project, component: str, text: str, moves: Sequence[SourceMove]) -> None:
    """The rewritten text must load as a recipe carrying exactly the new pins."""
    with tempfile.TemporaryDirectory(prefix="ortbundle-pin-") as tmp:
        path = Path(tmp) / f"{component}.toml"
        path.write_text(text, "utf-8", newline="")
        recipe = load_recipe(path)
    for move in moves:
        source = recipe.sources[move.source]
        got = (source.filename, source.sha256, source.size, version_of(source.origin))
        nested = move.nested or source.nested  # a move without nested leaves them alone
        if got != (move.new_filename, move.sha256, move.size, move.new_version) or (
            source.nested != nested
        ):
            raise ConfigError(  # pragma: no cover - a bug in rewrite_recipe, not a user error
                f"the rewritten recipe does not carry the new pin of {move.source}",
                component=component,
                file=str(project.recipes / f"{component}.toml"),
            )


def write_atomically(path: Path, text: str, expected: bytes) -> None:
    """Replace the recipe in one rename, unless someone changed it while pin was running."""
    if path.read_bytes() != expected:
        raise ConfigError(
            "the recipe changed on disk while pin was running; nothing was written",
            file=str(path),
            fix="run pin again",
        )
    atomic_write(path, text, mode=path.stat().st_mode & 0o7777)
