"""Edit a recipe or product manifest as TOML (tomlkit keeps the rest of the file as it was)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.toml_document import TOMLDocument


def edit_toml(path: Path, change: Callable[[TOMLDocument], None]) -> None:
    """Parse `path`, let `change` edit the document in place, write it back."""
    document = tomlkit.parse(path.read_text("utf-8"))
    change(document)
    path.write_text(tomlkit.dumps(document), "utf-8")


def set_key(path: Path, dotted: str, value: Any) -> None:
    """Set one value by its dotted table path: `product.description`, `sources.linux.sha256`."""

    def change(document: TOMLDocument) -> None:
        *tables, key = dotted.split(".")
        table: Any = document
        for name in tables:
            table = table[name]
        table[key] = value

    edit_toml(path, change)
