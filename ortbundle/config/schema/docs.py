"""docs/configuration.md, written from the schema itself (`invoke docs`); a test fails when the
committed file differs from what this renders, so the reference cannot drift from the checker."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ortbundle._core.fsio import is_generated, write_generated
from ortbundle._core.templating import render as render_template
from ortbundle.config.schema.data import DATA
from ortbundle.config.schema.definitions import FileSchema, Key, Table
from ortbundle.config.schema.inputs import INPUTS

REFERENCE = Path("docs/configuration.md")  # relative to the repository root


@dataclass(frozen=True)
class Row:
    key: str
    type: str
    default: str
    allowed: str
    doc: str


@dataclass(frozen=True)
class Section:
    title: str
    doc: str
    rows: tuple[Row, ...]
    example: str


def _cell(text: str) -> str:
    """Markdown table text: a bar would split the cell, <name> would vanish as an HTML tag."""
    return text.replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")


def _type(key: Key) -> str:
    if key.one:
        return "string or list of strings"
    return {
        "strings": "list of strings",
        "tables": "array of tables",
        "list": "list",
        "any": "list or table",
    }.get(key.type, key.type)


def _allowed(key: Key) -> str:
    parts = []
    if key.choices is not None:
        values = ", ".join(f"`{v}`" for v in key.choices.load())
        parts.append(f"{values} (from {key.choices.source})")
    if key.pattern is not None:
        parts.append(key.pattern.says)
    if key.minimum is not None:
        parts.append(f"≥ {key.minimum}")
    if key.ref:
        parts.append(f"an id of this file's [{key.ref}]")
    if key.when is not None:
        parts.append(f"only when {key.when[0]} is {' or '.join(key.when[1])}")
    if key.table is not None and key.type in ("table", "tables"):
        parts.append(f"see {key.table.title}")
    return "; ".join(parts)


def _default(key: Key) -> str:
    if key.required:
        return "**required**" + (" (where it applies)" if key.when else "")
    return key.default or "—"


def _sections(table: Table, seen: set[int], out: list[Section]) -> None:
    """Each table once, then the tables its keys (or entries) hold, in the order written."""
    if id(table) in seen:
        return
    seen.add(id(table))
    keys = [*table.keys, *([table.entries] if table.entries else [])]
    rows = []
    for key in keys:
        name = f"`{key.name}`" if not key.name.startswith("<") else f"any `{key.name}`"
        if key is table.entries and table.entry_choices is not None:
            choices = ", ".join(f"`{v}`" for v in table.entry_choices.load())
            allowed = f"name: {choices}; " + _allowed(key)
        elif key is table.entries and table.entry_pattern is not None:
            allowed = f"name: {table.entry_pattern.says}; " + _allowed(key)
        else:
            allowed = _allowed(key)
        default = _cell(_default(key))
        rows.append(Row(name, _type(key), default, _cell(allowed), _cell(key.doc)))
    doc = table.doc
    if table.one_of:
        doc += f" Exactly one of {', '.join(f'`{k}`' for k in table.one_of)}."
    if rows:
        out.append(Section(table.title, _cell(doc), tuple(rows), table.example))
    for key in keys:
        if key.table is not None:
            _sections(key.table, seen, out)


def file_sections(schema: FileSchema) -> list[Section]:
    out: list[Section] = []
    _sections(schema.top, set(), out)
    return out


def render() -> str:

    files = [(s, file_sections(s)) for s in (*INPUTS, *DATA)]
    return render_template("configuration.md.j2", {"files": files})


def write(root: Path) -> Path:
    return write_generated(root / REFERENCE, render())


def is_current(root: Path) -> bool:
    return is_generated(root / REFERENCE, render())
