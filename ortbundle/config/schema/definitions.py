"""The schema's vocabulary: a key, a table, an enumeration. Plain frozen data, read by the
checker (check.py) and by the reference generator (docs.py), so the two cannot disagree."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

# What a key's value may be. "strings": a list of non-empty strings (one string is refused, as
# the reference says, unless the key is `one`); "tables": an array of tables; "list": any list.
TYPES = ("string", "strings", "integer", "boolean", "date", "table", "tables", "list", "any")


@dataclass(frozen=True)
class Choices:
    """An enumeration that lives in the code or the tool's data: loaded when needed, so the
    schema never copies it and importing the schema costs nothing."""

    what: str  # "GPU vendor": how a value is named in an error
    source: str  # where the list lives, for the reference ("ortbundle/data/gpu-vendors.toml")
    load: Callable[[], Sequence[str]]


@dataclass(frozen=True)
class Pattern:
    """A value's shape, with the sentence that says it to a person."""

    regex: re.Pattern[str]
    says: str  # "lower-case letters, digits, . _ -"


@dataclass(frozen=True)
class Key:
    name: str
    type: str  # one of TYPES
    doc: str
    required: bool = False
    default: str = ""  # as the reference shows it; "" when there is none
    nonempty: bool = False  # a list must have at least one entry
    blank: bool = False  # a string may be "" (it means "none")
    choices: Choices | None = None  # each string value must be one of these (case included)
    pattern: Pattern | None = None  # each string value must match
    minimum: int | None = None  # an integer's least value
    table: Table | None = None  # the shape of a "table" or of each of "tables"
    ref: str = ""  # each value names an entry of this top-level table of the same file
    when: tuple[str, tuple[str, ...]] | None = None  # only where sibling key has one of values
    one: bool = False  # "strings" that may also be one string (a waiver's sha256 of one file)


@dataclass(frozen=True)
class Table:
    """A TOML table: its fixed keys, and (for a map such as [sources.<id>]) what each entry whose
    name the user chooses must be."""

    title: str  # heading in the reference: "[component]", "[sources.<id>]"
    doc: str
    keys: tuple[Key, ...] = ()
    entries: Key | None = None  # every other key is a user-chosen name holding this
    entry_choices: Choices | None = None  # and that name must be one of these
    entry_pattern: Pattern | None = None
    one_of: tuple[str, ...] = ()  # exactly one of these keys must be present
    example: str = ""  # TOML shown in the reference

    def key(self, name: str) -> Key | None:
        return self._by_name.get(name)

    @cached_property
    def _by_name(self) -> dict[str, Key]:
        return {k.name: k for k in self.keys}


@dataclass(frozen=True)
class FileSchema:
    """One kind of input file: where it lives and the top-level table."""

    name: str  # "recipe", "product", …
    title: str
    where: str  # "recipes/<component>.toml"
    doc: str
    top: Table
    related: tuple[str, ...] = field(default=())
