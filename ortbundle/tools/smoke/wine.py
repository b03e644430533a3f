"""What a Wine prefix holds, and what a program changed in it: the installer's tests compare
prefixes before and after. The runner itself is ortbundle/stage/probe/wine.py (the stage runs
the probe under it)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ortbundle.stage.probe.wine import Wine

__all__ = ["PrefixState", "idle_noise", "prefix_state"]


_HIVES = ("system.reg", "user.reg", "userdef.reg")


@dataclass(frozen=True)
class PrefixState:
    """What a prefix holds: every file but the registry hives by SHA-256, and every registry
    value (`hive|[key]|name` → data) without the write times Wine stamps on keys."""

    files: Mapping[str, str]
    registry: Mapping[str, str]

    def changed(self, other: PrefixState) -> set[str]:
        """The files and registry values that differ between the two states."""
        return {
            k
            for mine, theirs in ((self.files, other.files), (self.registry, other.registry))
            for k in mine.keys() | theirs.keys()
            if mine.get(k) != theirs.get(k)
        }


def prefix_state(wine: Wine) -> PrefixState:
    """The prefix as it is now, once every process in it has ended."""
    wine.wait()
    files: dict[str, str] = {}
    for path in sorted(wine.prefix.rglob("*")):
        relative = path.relative_to(wine.prefix).as_posix()
        if relative in _HIVES:
            continue
        if path.is_symlink():
            files[relative] = f"-> {path.readlink()}"
        elif path.is_file():
            files[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
    return PrefixState(files, _registry_values(wine.prefix))


def _registry_values(prefix: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for hive in _HIVES:
        path = prefix / hive
        if not path.is_file():
            continue
        key, pending = "", ""
        for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
            line = pending + raw.strip() if pending else raw
            pending = ""
            if line.endswith("\\") and not line.startswith("["):
                pending = line[:-1]  # a value continued on the next line
                continue
            if line.startswith("["):
                key = line[: line.rindex("]") + 1] if "]" in line else line
                values[f"{hive}|{key}|"] = ""  # the key exists, even with no value
            elif line.strip() and not line.startswith(("#", ";", "WINE REGISTRY")):
                name, _, data = line.partition("=")
                values[f"{hive}|{key}|{name}"] = data
    return values


def idle_noise(wine: Wine) -> set[str]:
    """What Wine itself rewrites in a prefix on any program start (device class dates, its own
    keys): the difference one program that does nothing (`cmd /c exit 0`) makes."""
    wine.run(["cmd", "/c", "exit", "0"])
    before = prefix_state(wine)
    wine.run(["cmd", "/c", "exit", "0"])
    return before.changed(prefix_state(wine))
