"""A strict, declarative schema for every input file ortbundle reads (recipes, products, the
licence policy, the tool's data): unknown keys and bad values are errors naming file, table, key
and the nearest valid one, all problems of a build are reported together, and
docs/configuration.md is generated from the same definitions (docs.py)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ortbundle.config.schema import data as tool_data
from ortbundle.config.schema import inputs, product_inputs
from ortbundle.config.schema.check import Checker
from ortbundle.config.schema.definitions import FileSchema
from ortbundle.config.schema.problems import ConfigProblems, Problem, raise_if_any

__all__ = ["ConfigProblems", "Problem", "check_document", "display_name", "problems_in"]


def display_name(path: Path) -> str:
    """A file as the user names it: recipes/x.toml, manifests/p.toml, ortbundle/data/t.toml."""
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


def schema_for(kind: str, data: Mapping[str, Any]) -> FileSchema:
    """The schema of a file kind; a recipe whose [component] says kind = "model" is a model."""

    if kind == "recipe":
        component = data.get("component")
        is_model = isinstance(component, Mapping) and component.get("kind") == "model"
        return inputs.MODEL_RECIPE if is_model else inputs.RECIPE
    if kind in ("product", "policy", "recipe-sources"):
        return {"product": product_inputs.PRODUCT, "policy": product_inputs.POLICY}.get(
            kind, inputs.RECIPE_SOURCES
        )

    return {s.name: s for s in tool_data.DATA}[kind]


def problems_in(
    file: str,
    data: Mapping[str, Any],
    kind: str,
    relax: frozenset[str] = frozenset(),
    path: str = "",
) -> list[Problem]:
    """Every schema problem of one parsed file (`kind`: recipe, product, policy, targets-data…);
    `file` is how the user names it, `path` its full path where that differs."""
    schema = schema_for(kind, data)
    checker = Checker(file, data, relax, path)
    checker.table(schema.top, data, "")
    return checker.problems


def check_document(
    file: str,
    data: Mapping[str, Any],
    kind: str,
    relax: frozenset[str] = frozenset(),
    path: str = "",
) -> None:
    """Raise one ConfigProblems listing every schema problem of the file, or return."""
    raise_if_any(problems_in(file, data, kind, relax, path))
