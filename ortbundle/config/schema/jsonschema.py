"""JSON Schemas of the input files (schemas/recipe.json, product.json, policy.json), written
from the one schema (`invoke docs`) so that editors which read JSON Schema (taplo, Even Better
TOML) complete and check a recipe or manifest as it is typed; each shipped file names its schema
in a `#:schema ../schemas/<kind>.json` first line. A test fails when a committed schema differs
from what this writes. What a JSON Schema cannot say (a reference to another table's entry, a
key that applies only beside another value) is left to the build's own check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ortbundle._core.fsio import is_generated, write_generated
from ortbundle.config.schema.definitions import FileSchema, Key, Table
from ortbundle.config.schema.inputs import MODEL_RECIPE, RECIPE
from ortbundle.config.schema.product_inputs import POLICY, PRODUCT

SCHEMAS = Path("schemas")  # relative to the repository root
DRAFT = "http://json-schema.org/draft-07/schema#"
# the file kinds, each with the schema file a `#:schema` line names
KINDS = ("recipe", "product", "policy")


def directive(kind: str) -> str:
    """The first line of a recipe, manifest or policy file: taplo's schema directive, relative
    to the file (recipes/, manifests/ and licenses/ sit beside schemas/)."""
    return f"#:schema ../{SCHEMAS.as_posix()}/{kind}.json"


def _described(key: Key) -> str:
    default = f" (default: {key.default})" if key.default else ""
    return key.doc + default


def _value(key: Key) -> dict[str, Any]:
    """What a key's value may be, as JSON Schema says it."""
    kind = key.type
    if kind == "string":
        return _string(key)
    if kind == "strings":
        many: dict[str, Any] = {"type": "array", "items": _string(key), "uniqueItems": True}
        if key.nonempty:
            many["minItems"] = 1
        return {"anyOf": [_string(key), many]} if key.one else many
    if kind == "integer":
        number: dict[str, Any] = {"type": "integer"}
        if key.minimum is not None:
            number["minimum"] = key.minimum
        return number
    if kind == "boolean":
        return {"type": "boolean"}
    if kind == "date":  # a TOML date reaches the editor's check as its text
        return {"type": "string", "pattern": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}
    if kind == "table":
        assert key.table is not None
        return table_schema(key.table)
    if kind == "tables":
        assert key.table is not None
        tables: dict[str, Any] = {"type": "array", "items": table_schema(key.table)}
        if key.nonempty:
            tables["minItems"] = 1
        return tables
    if kind == "list":
        return {"type": "array"}
    return {}


def _string(key: Key) -> dict[str, Any]:
    text: dict[str, Any] = {"type": "string"}
    if not key.blank:
        text["minLength"] = 1
    if key.choices is not None:
        text["enum"] = list(key.choices.load())
    if key.pattern is not None:
        text["pattern"] = key.pattern.regex.pattern
    return text


def table_schema(table: Table) -> dict[str, Any]:
    """A table: its keys (each described), the required ones, and either no other key or the
    shape of the entries whose names the user chooses."""
    out: dict[str, Any] = {"type": "object"}
    if table.doc:
        out["description"] = table.doc
    if table.keys:
        out["properties"] = {
            k.name: {"description": _described(k), **_value(k)} for k in table.keys
        }
    required = [k.name for k in table.keys if k.required and k.when is None]
    if required:
        out["required"] = required
    if table.entries is None:
        # an unknown key is refused by naming the known ones, so an editor's message holds the
        # key the build's own check suggests (taplo: "pkgrell" is not one of ["pkgrel", …])
        out["propertyNames"] = {"enum": [k.name for k in table.keys]}
    else:
        out["additionalProperties"] = {
            "description": _described(table.entries),
            **_value(table.entries),
        }
        if table.entry_choices is not None:
            names = [k.name for k in table.keys] + list(table.entry_choices.load())
            out["propertyNames"] = {"enum": names}
        elif table.entry_pattern is not None and not table.keys:
            out["propertyNames"] = {"pattern": table.entry_pattern.regex.pattern}
    if table.one_of:
        out["oneOf"] = [{"required": [name]} for name in table.one_of]
    return out


def _file(schema: FileSchema) -> dict[str, Any]:
    return {
        "$schema": DRAFT,
        "title": f"ortbundle: {schema.title} ({schema.where})",
        "description": schema.doc,
        **table_schema(schema.top),
    }


def render_all() -> dict[str, str]:
    """Each schema file's text, by kind. A recipe is a model recipe when its [component] says
    kind = "model", as the build decides."""
    recipe = _file(RECIPE)
    model = table_schema(MODEL_RECIPE.top)
    is_model = {
        "properties": {"component": {"properties": {"kind": {"const": "model"}}}},
        "required": ["component"],
    }
    heading = ("$schema", "title", "description")
    body = {k: v for k, v in recipe.items() if k not in heading}
    head = {k: recipe[k] for k in heading}
    documents = {
        "recipe": {**head, "if": is_model, "then": model, "else": body},
        "product": _file(PRODUCT),
        "policy": _file(POLICY),
    }
    return {
        kind: json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
        for kind, doc in documents.items()
    }


def write(root: Path) -> list[Path]:
    return [
        write_generated(root / SCHEMAS / f"{kind}.json", text)
        for kind, text in render_all().items()
    ]


def stale(root: Path) -> list[str]:
    """The schema files that differ from what the schema says now (or are missing)."""
    return [
        f"{SCHEMAS.as_posix()}/{kind}.json"
        for kind, text in render_all().items()
        if not is_generated(root / SCHEMAS / f"{kind}.json", text)
    ]
