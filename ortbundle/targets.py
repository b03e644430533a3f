"""Targets: platform facts (binary format, machine, allowed externals), read from data."""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from ortbundle.errors import ConfigError

# Which targets' stages each packaging channel packages: the desktop channels one each, the
# Android module every Android ABI the product builds.
CHANNEL_TARGETS: dict[str, tuple[str, ...]] = {
    "arch": ("linux-x86_64",),
    "flatpak": ("linux-x86_64",),
    "nsis": ("windows-x86_64",),
    "apk": ("android-arm64-v8a", "android-x86_64"),
    "deb": ("linux-x86_64",),
    "rpm": ("linux-x86_64",),
}


@dataclass(frozen=True)
class ExternalGroup:
    """Libraries a kept file may need that the user's system provides."""

    group: str
    kind: str  # system | toolchain | redist | driver | toolkit
    names: tuple[str, ...]
    note: str = ""
    optional: bool = False  # True: the runtime works without it (a rung/feature is lost)
    version: str = ""  # a constraint where it matters, e.g. ">=13.0" ("" = any)
    install: str = ""  # one sentence telling the user what to install
    sandbox: bool = True  # False: a Flatpak sandbox cannot provide it


@dataclass(frozen=True)
class Target:
    name: str
    os: str  # linux | windows | android
    format: str  # elf | pe
    machine: str  # pyelftools e_machine name, or PE machine name
    externals: tuple[ExternalGroup, ...]
    bits: int = 64  # ELF class / PE32 vs PE32+: EM_X86_64 also exists as 32-bit x32
    abi: str | None = None  # Android: the jniLibs/<abi>/ directory
    page_align: int = 0  # Android: the PT_LOAD alignment the device's linker needs (0: none)

    @property
    def case_insensitive(self) -> bool:
        """Windows resolves DLL names without regard to case."""
        return self.os == "windows"

    def key(self, name: str) -> str:
        """The form of a library name that the target's loader compares."""
        return name.lower() if self.case_insensitive else name

    def external_group(self, needed: str) -> ExternalGroup | None:
        """The group that provides `needed` on the user's machine, or None."""
        wanted = self.key(needed)
        for group in self.externals:
            for pattern in group.names:
                if fnmatch.fnmatchcase(wanted, self.key(pattern)):
                    return group
        return None


def _parse_target(name: str, raw: dict[str, Any]) -> Target:
    try:
        externals = tuple(
            ExternalGroup(
                group=str(entry["group"]),
                kind=str(entry["kind"]),
                names=tuple(str(n) for n in entry["names"]),
                note=str(entry.get("note", "")),
                optional=bool(entry.get("optional", False)),
                version=str(entry.get("version", "")),
                install=str(entry.get("install", "")),
                sandbox=bool(entry.get("sandbox", True)),
            )
            for entry in raw.get("externals", [])
        )
        fmt = str(raw["format"])
        if fmt not in ("elf", "pe"):
            raise ConfigError(f"target {name}: format must be elf or pe, not {fmt!r}")
        return Target(
            name=name,
            os=str(raw["os"]),
            format=fmt,
            machine=str(raw["machine"]),
            externals=externals,
            bits=int(raw.get("bits", 64)),
            abi=str(raw["abi"]) if "abi" in raw else None,
            page_align=int(raw.get("page_align", 0)),
        )
    except KeyError as missing:
        raise ConfigError(
            f"target {name} lacks {missing}", file="ortbundle/data/targets.toml"
        ) from None


@cache
def all_targets() -> dict[str, Target]:
    text = resources.files("ortbundle").joinpath("data/targets.toml").read_text("utf-8")
    data = tomllib.loads(text)
    return {name: _parse_target(name, raw) for name, raw in data.items()}


def get_target(name: str) -> Target:
    targets = all_targets()
    if name not in targets:
        raise ConfigError(
            f"unknown target {name!r}",
            target=name,
            fix=f"use one of: {', '.join(sorted(targets))}",
        )
    return targets[name]
