"""Reading ortbundle's TOML inputs: typed access to a table that names file and table in every
error, and the shared shapes (a SHA-256, a path word, a name)."""

from __future__ import annotations

import hashlib
import tomllib
import unicodedata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ortbundle._core.errors import ConfigError
from ortbundle.config.schema import check_document, display_name
from ortbundle.config.targets import get_target


class TableReader:
    """Typed access to a TOML table that names the file in every error."""

    def __init__(self, path: Path, where: str, table: Any) -> None:
        if not isinstance(table, dict):
            raise ConfigError(f"{where} must be a table", file=str(path))
        self.path = path
        self.where = where
        self.table: dict[str, Any] = table

    def fail(self, message: str) -> ConfigError:
        """The error for a problem in this table, naming the file and the table (`recipe.fetch:
        'url' must …`); the caller raises it, so a reader outside this class words its own checks
        the same way as the typed accessors here."""
        return ConfigError(f"{self.where}: {message}", file=str(self.path))

    def text(self, key: str, default: str | None = None) -> str:
        value = self.table.get(key, default)
        if not isinstance(value, str) or not value:
            raise self.fail(f"{key!r} must be a non-empty string")
        return value

    def opt_text(self, key: str) -> str | None:
        return self.text(key) if key in self.table else None

    def text_list(self, key: str, *, required: bool = True, one: bool = False) -> tuple[str, ...]:
        """A list of strings; one string only where the schema's key says `one`."""
        value = self.table.get(key, [] if not required else None)
        if isinstance(value, str) and one:
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(f"{key!r} must be a list of strings")
        if required and not value:
            raise self.fail(f"{key!r} must not be empty")
        return tuple(value)

    def target(self, name: str, key: str) -> None:
        """An unknown target named under `key` is refused naming this file and table."""
        try:
            get_target(name)
        except ConfigError as exc:
            error = self.fail(f"{key}: {exc.message}")
            error.target, error.fix = name, exc.fix
            raise error from None

    def http_url(self, key: str) -> str:
        """An http(s) URL with a host, one token: whitespace or a control character in it is a
        mistake (it would be refused, or mangled, by a package format much later)."""
        url = self.text(key)
        bad = sorted({c for c in url if c.isspace() or unicodedata.category(c).startswith("C")})
        if bad:
            raise self.fail(
                f"{key} {url!r} contains whitespace or control characters "
                f"({', '.join(map(ascii, bad))}): a URL is one token"
            )
        parts = urlsplit(url)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise self.fail(f"{key} {url!r} must be an http(s) URL")
        return url

    def sub(self, key: str) -> TableReader:
        if key not in self.table:
            raise self.fail(f"missing [{key}]")
        return TableReader(self.path, f"{self.where}.{key}" if self.where else key, self.table[key])

    def subs(self, key: str) -> list[TableReader]:
        value = self.table.get(key, [])
        if not isinstance(value, list):
            raise self.fail(f"{key!r} must be an array of tables")
        return [TableReader(self.path, f"{self.where}.{key}[{i}]", v) for i, v in enumerate(value)]


def load_toml(
    path: Path, schema: str = "", *, relax: frozenset[str] = frozenset()
) -> tuple[dict[str, Any], str]:
    """The file's data and SHA-256; with `schema` (recipe, product, policy, …) every problem the
    schema finds in it is raised at once (ortbundle/config/schema/), before the caller's parse. The
    data is shared by every reader of the same bytes: read it, never change it."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path.name} does not exist", file=str(path)) from None
    digest = hashlib.sha256(raw).hexdigest()
    data = _PARSED.get((path, digest))
    if data is None:
        try:
            data = _PARSED[(path, digest)] = tomllib.loads(raw.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"not valid TOML: {exc}", file=str(path)) from None
    if schema and (path, digest, relax) not in _CHECKED:
        check_document(display_name(path), data, schema, relax, str(path))
        _CHECKED.add((path, digest, relax))
    return data, digest


# a build reads a recipe more than once (the check of all its inputs, then each loader): the
# bytes are parsed once and checked once
_PARSED: dict[tuple[Path, str], dict[str, Any]] = {}
_CHECKED: set[tuple[Path, str, frozenset[str]]] = set()
