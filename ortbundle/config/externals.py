"""A product's (and a recipe's) own system requirements: `[[externals]]`, merged over the tool's
data (data/targets.toml, data/arch.toml, data/linux-packages.toml) so a product is configured in
its own manifest, never by editing ortbundle/. Also the errors that tell a user what to add.

Precedence: product > recipe > tool data; a group of the same name replaces the lower one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ortbundle.config.targets import PACKAGE_CHANNELS, ChannelPackages, ExternalGroup, ExternalSpec
from ortbundle.config.tomlreader import TableReader
from ortbundle.config.vocabulary import EXTERNAL_KINDS

_KEYS = (
    "group",
    "kind",
    "targets",
    "names",
    "optional",
    "version",
    "note",
    "install",
    "sandbox",
    *PACKAGE_CHANNELS,
)
_GROUP = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
# one constraint or several, comma-separated: ">=13.0", ">=9,<10"
CONSTRAINT = re.compile(r"^(>=|<=|=|>|<)\s*([0-9][A-Za-z0-9._+~]*)$")


def constraints(version: str) -> list[tuple[str, str]]:
    """ ">=9,<10" -> [(">=", "9"), ("<", "10")]; "" -> []."""
    out = []
    for part in filter(None, (p.strip() for p in version.split(","))):
        found = CONSTRAINT.match(part)
        if found is None:
            raise ValueError(part)
        out.append((found[1], found[2]))
    return out


def read_externals(top: TableReader) -> tuple[ExternalSpec, ...]:
    """Every `[[externals]]` entry of a manifest or recipe, checked (unknown keys, kinds,
    targets, version syntax), each remembering its file for later errors."""
    specs = []
    seen: set[tuple[str, str]] = set()
    for entry in top.subs("externals"):
        unknown = sorted(set(entry.table) - set(_KEYS))
        if unknown:
            raise entry.fail(f"unknown key {unknown[0]!r} (known: {', '.join(_KEYS)})")
        group = entry.text("group")
        if not _GROUP.match(group):
            raise entry.fail(f"group {group!r} must be lower-case letters, digits, . _ -")
        kind = entry.text("kind")
        if kind not in EXTERNAL_KINDS:
            raise entry.fail(f"kind {kind!r} must be one of {', '.join(EXTERNAL_KINDS)}")
        targets = entry.text_list("targets", required=False)
        for target in targets:
            entry.target(target, "targets")
        for target in targets or ("*",):
            if (group, target) in seen:
                raise entry.fail(f"group {group!r} is declared twice for {target}")
            seen.add((group, target))
        version = entry.opt_text("version") or ""
        try:
            constraints(version)
        except ValueError as bad:
            raise entry.fail(
                f'version {version!r}: {bad} is not a constraint such as ">=13.0" '
                '(">=9,<10" for several)'
            ) from None
        flags = {}
        for key, default in (("optional", False), ("sandbox", True)):
            value = entry.table.get(key, default)
            if not isinstance(value, bool):
                raise entry.fail(f"{key!r} must be true or false")
            flags[key] = value
        packages = []
        for channel in PACKAGE_CHANNELS:
            if channel in entry.table:
                table = TableReader(entry.path, f"{entry.where}.{channel}", entry.table[channel])
                packages.append(ChannelPackages(channel, group, table.table, str(entry.path)))
        specs.append(
            ExternalSpec(
                group=ExternalGroup(
                    group=group,
                    kind=kind,
                    names=entry.text_list("names"),
                    note=entry.opt_text("note") or "",
                    optional=flags["optional"],
                    version=version,
                    install=entry.opt_text("install") or "",
                    sandbox=flags["sandbox"],
                ),
                targets=targets,
                packages=tuple(packages),
                origin=str(entry.path),
            )
        )
    return tuple(specs)


def snippet(
    group: str,
    kind: str,
    names: Sequence[str],
    targets: Sequence[str] = (),
    channel: str | None = None,
) -> str:
    """The `[[externals]]` entry a user adds to their product manifest, as TOML text."""
    quoted = ", ".join(f'"{n}"' for n in names)
    lines = ["[[externals]]", f'group = "{group}"', f'kind = "{kind}"']
    if targets:
        lines.append("targets = [" + ", ".join(f'"{t}"' for t in targets) + "]")
    lines.append(f"names = [{quoted}]")
    if channel == "arch":
        lines.append('arch = { depends = ["<the Arch package that provides it>"] }')
    elif channel in ("deb", "rpm"):
        lines.append(f'{channel} = {{ depends = ["<the {channel} package that provides it>"] }}')
    return "\n".join(lines)


def group_name(library: str) -> str:
    """A group name proposed for a library nobody declared: libcublasLt.so.13 -> cublaslt,
    cudnn64_9.dll -> cudnn64-9."""
    stem = library.split(".so")[0].split(".dll")[0].split(".DLL")[0]
    stem = stem.removeprefix("lib").lower()
    return re.sub(r"[^a-z0-9._-]+", "-", stem).strip("-._") or "system"
