"""Check a parsed TOML document against its schema, collecting every problem (never stopping at
the first): unknown keys with the nearest valid one, wrong types, values outside an enumeration
(case included), missing required keys, references to entries that do not exist."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import date, datetime
from typing import Any

from ortbundle.config.schema.definitions import Choices, Key, Pattern, Table
from ortbundle.config.schema.problems import Problem, nearest

_TYPE_WORDS = {
    "string": "a non-empty string",
    "strings": "a list of non-empty strings",
    "integer": "an integer",
    "boolean": "true or false",
    "date": "a date (YYYY-MM-DD)",
    "table": "a table",
    "tables": "an array of tables",
    "list": "a list",
}


class Checker:
    """Walks one file's data; `relax` names keys whose values are not checked (pin --check
    reads unpinned sources: a missing sha256 is its finding, not an error)."""

    def __init__(
        self,
        file: str,
        root: Mapping[str, Any],
        relax: frozenset[str] = frozenset(),
        path: str = "",
    ) -> None:
        self.file = file
        self.path = path
        self.root = root
        self.relax = relax
        self.problems: list[Problem] = []

    def add(self, table: str, key: str, message: str, suggestion: str = "", fix: str = "") -> None:
        self.problems.append(Problem(self.file, table, key, message, suggestion, fix, self.path))

    def table(self, schema: Table, data: Any, where: str) -> None:
        if not isinstance(data, Mapping):
            self.add(_parent(where), _leaf(where), f"must be a table, not {_shown(data)}")
            return
        for name, value in data.items():
            key = schema.key(name)
            if key is not None:
                self._known(key, data, value, where)
            elif schema.entries is not None:
                if self._entry_name(schema, name, where):
                    self.value(schema.entries, value, _join(where, name), where, name)
            else:
                known = [k.name for k in schema.keys]
                guess = nearest(name, known)
                self.add(where, name, "unknown key", guess, "" if guess else _known_list(known))
        for key in schema.keys:
            missing = key.required and key.name not in data and key.name not in self.relax
            if missing and _applies(key, data):
                self.add(where, key.name, f"missing ({_TYPE_WORDS.get(key.type, key.type)})")
        if schema.one_of:
            present = [k for k in schema.one_of if k in data]
            if len(present) != 1:
                listed = ", ".join(schema.one_of)
                self.add(where, " | ".join(schema.one_of), f"name exactly one of {listed}")

    def _known(self, key: Key, data: Mapping[str, Any], value: Any, where: str) -> None:
        if not _applies(key, data):
            assert key.when is not None
            sibling, values = key.when
            self.add(where, key.name, f"applies only when {sibling} is {' or '.join(values)}")
        elif key.name not in self.relax:
            self.value(key, value, _join(where, key.name), where, key.name)

    def _entry_name(self, schema: Table, name: str, where: str) -> bool:
        choices, pattern = schema.entry_choices, schema.entry_pattern
        if choices is not None and name not in choices.load():
            self.add(where, name, f"unknown {choices.what}", nearest(name, choices.load()))
            return False
        if pattern is not None and not pattern.regex.match(name):
            self.add(where, name, f"a name that is not {pattern.says}")
            return False
        return True

    def value(self, key: Key, value: Any, path: str, where: str, name: str) -> None:
        kind = key.type
        if kind == "any":
            return
        if kind == "string":
            if not isinstance(value, str) or not (value or key.blank):
                self._wrong(key, value, where, name)
            elif value:
                self._word(key, value, where, name)
        elif kind == "strings":
            # one string where a list belongs is refused: `roots = "lib*"` would read as
            # a list only by luck; the reference says list of strings
            items = [value] if isinstance(value, str) and key.one else value
            if not isinstance(items, list) or not all(isinstance(v, str) and v for v in items):
                self._wrong(key, value, where, name)
                return
            if key.nonempty and not items:
                self.add(where, name, "must not be empty")
            # a target or runtime named twice would be staged twice into one directory
            for item in sorted({i for i in items if items.count(i) > 1}):
                self.add(where, name, f"lists {item!r} twice")
            for item in items:
                self._word(key, item, where, name)
        elif kind == "integer":
            if not isinstance(value, int) or isinstance(value, bool):
                self._wrong(key, value, where, name)
            elif key.minimum is not None and value < key.minimum:
                least = "a positive integer" if key.minimum == 1 else f"at least {key.minimum}"
                self.add(where, name, f"must be {least}, not {value}")
        elif kind == "boolean":
            if not isinstance(value, bool):
                self._wrong(key, value, where, name)
        elif kind == "date":
            if not _is_date(value):
                self._wrong(key, value, where, name)
        elif kind == "list":
            if not isinstance(value, list):
                self._wrong(key, value, where, name)
        elif kind == "table":
            assert key.table is not None
            self.table(key.table, value, path)
        elif kind == "tables":
            assert key.table is not None
            if not isinstance(value, list):
                self._wrong(key, value, where, name)
                return
            if key.nonempty and not value:
                self.add(where, name, "needs at least one entry")
            for index, item in enumerate(value):
                self.table(key.table, item, f"{path}[{index}]")

    def _wrong(self, key: Key, value: Any, where: str, name: str) -> None:
        self.add(where, name, f"must be {_TYPE_WORDS[key.type]}, not {_shown(value)}")

    def _word(self, key: Key, value: str, where: str, name: str) -> None:
        if key.choices is not None:
            self._choice(key.choices, value, where, name)
        if key.pattern is not None:
            self._pattern(key.pattern, value, where, name)
        if key.ref:
            entries = self.root.get(key.ref)
            known = list(entries) if isinstance(entries, Mapping) else []
            if value not in known:
                self.add(
                    where,
                    name,
                    f"unknown {key.ref.removesuffix('s')} {value!r}: this file has no "
                    f"[{key.ref}.{value}]",
                    nearest(value, known),
                )

    def _choice(self, choices: Choices, value: str, where: str, name: str) -> None:
        allowed = list(choices.load())
        if value not in allowed:
            self.add(
                where,
                name,
                f"{value!r} is not {_article(choices.what)} {choices.what}: "
                f"use {_alternatives(allowed)}",
                nearest(value, allowed),
            )

    def _pattern(self, pattern: Pattern, value: str, where: str, name: str) -> None:
        if not pattern.regex.match(value):
            self.add(where, name, f"{value!r} is not {pattern.says}")


def walk_keys(table: Table, prefix: str = "") -> Iterator[tuple[str, Key]]:
    """Every key of a schema with its dotted place, depth first (the reference's order)."""
    for key in table.keys:
        yield prefix, key
        if key.table is not None:
            yield from walk_keys(key.table, _join(prefix, key.name))
    if table.entries is not None:
        yield prefix, table.entries
        if table.entries.table is not None:
            yield from walk_keys(table.entries.table, _join(prefix, table.entries.name))


def _applies(key: Key, data: Mapping[str, Any]) -> bool:
    return key.when is None or data.get(key.when[0]) in key.when[1]


def _is_date(value: Any) -> bool:
    if isinstance(value, date) and not isinstance(value, datetime):
        return True
    if isinstance(value, str):
        try:
            date.fromisoformat(value)
        except ValueError:
            return False
        return True
    return False


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _parent(where: str) -> str:
    return where.rsplit(".", 1)[0] if "." in where else ""


def _leaf(where: str) -> str:
    return where.rsplit(".", 1)[-1]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _alternatives(values: list[str]) -> str:
    """ "a", "b" or "c": as the user writes them in TOML."""
    quoted = [f'"{v}"' for v in values]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def _article(noun: str) -> str:
    return "an" if noun[:1] in "aeiou" else "a"


def _known_list(known: list[str]) -> str:
    return f"known keys here: {', '.join(known)}" if known else "this table takes no keys"
