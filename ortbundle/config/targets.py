"""Targets: platform facts (binary format, machine, allowed externals), read from data."""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Any

from ortbundle._core.errors import ConfigError
from ortbundle.config.schema import check_document
from ortbundle.config.vocabulary import BINARY_FORMATS


@dataclass(frozen=True)
class ExternalGroup:
    """Libraries a kept file may need that the user's system provides."""

    group: str
    kind: str  # system | toolchain | redist | driver | toolkit
    names: tuple[str, ...]
    note: str = ""
    optional: bool = False  # True: the runtime still works without it (a rung is lost)
    version: str = ""  # a constraint where it matters (">=13.0"); "" = any
    install: str = ""  # one sentence telling the user what to install
    sandbox: bool = True  # False: a Flatpak sandbox cannot provide it (host-only stack)


# channels whose package names an [[externals]] entry may give (data/arch.toml,
# data/linux-packages.toml give the tool's own)
PACKAGE_CHANNELS = ("arch", "deb", "rpm")


@dataclass(frozen=True)
class ChannelPackages:
    """How one channel names an external group's packages: an `[[externals]]` entry's
    `arch = {...}` (the shape of a data/arch.toml group) or `deb`/`rpm` (linux-packages.toml)."""

    channel: str  # arch | deb | rpm
    group: str
    table: Mapping[str, object]
    origin: str  # the file that says so, for errors


@dataclass(frozen=True)
class ExternalSpec:
    """One `[[externals]]` entry of a product manifest or a recipe."""

    group: ExternalGroup
    targets: tuple[str, ...]  # empty: every target
    packages: tuple[ChannelPackages, ...] = ()
    origin: str = ""  # the file it is declared in

    def applies_to(self, target: str) -> bool:
        return not self.targets or target in self.targets


@dataclass(frozen=True)
class Overlays:
    """The `[[externals]]` layers over the tool's data, highest precedence first: the product,
    then the recipe(s). A group of the same name replaces a lower one; a new group is added."""

    layers: tuple[tuple[ExternalSpec, ...], ...] = field(default_factory=tuple)

    def specs(self, target: str) -> list[ExternalSpec]:
        """The winning entry per group for `target`, highest layer first."""
        seen: dict[str, ExternalSpec] = {}
        for layer in self.layers:
            for spec in layer:
                if spec.applies_to(target):
                    seen.setdefault(spec.group.group, spec)
        return list(seen.values())

    def apply(self, target: Target) -> Target:
        """The target with the overlay's groups first (they win a name both match), then the
        tool's groups it does not replace."""
        specs = self.specs(target.name)
        replaced = {s.group.group for s in specs}
        kept = tuple(g for g in target.externals if g.group not in replaced)
        return replace(target, externals=(*(s.group for s in specs), *kept))

    def packages(self, target: str, channel: str) -> dict[str, ChannelPackages]:
        """group -> this channel's package table, from the overlay entries that give one (an
        entry that gives none keeps the lower layers' table for its group)."""
        found: dict[str, ChannelPackages] = {}
        for layer in reversed(self.layers):  # lowest first, overwritten by higher
            for spec in layer:
                if spec.applies_to(target):
                    for packages in spec.packages:
                        if packages.channel == channel:
                            found[spec.group.group] = packages
        return found


def overlays(*layers: Iterable[ExternalSpec]) -> Overlays:
    """Overlays from layers given highest precedence first (product, recipe …)."""
    return Overlays(tuple(tuple(layer) for layer in layers))


@dataclass(frozen=True)
class Target:
    name: str
    os: str  # linux | windows | android | macos
    format: str  # elf | pe | macho
    machine: str  # pyelftools e_machine name, PE machine name, or Mach-O arch (arm64)
    externals: tuple[ExternalGroup, ...]
    bits: int = 64  # ELF class / PE32 vs PE32+: EM_X86_64 also exists as 32-bit x32
    abi: str | None = None  # Android: the jniLibs/<abi>/ directory
    page_align: int = 0  # Android: the PT_LOAD alignment the device's linker needs (0: none)
    # the machine's name per packaging format (("deb", "arm64"), ("nsis", "arm64"), …)
    package_arch: tuple[tuple[str, str], ...] = ()
    # the wheel platform families that install on it (config/wheel_tags.py reads the tags)
    wheel_platforms: tuple[str, ...] = ()
    # the external group that is the operating system itself (glibc, windows, bionic, macos):
    # what it provides is there on every machine of the target, whoever opens it
    system_group: str = ""

    def arch_for(self, channel: str) -> str | None:
        """What `channel`'s packages call this target's machine; None: it packages no such."""
        return dict(self.package_arch).get(channel)

    @property
    def cpu(self) -> str | None:
        """The machine as the shipped loader names it (runtimes.json's `machine`): one name
        however ELF, PE or Mach-O spell it; None for a machine it has no name for."""
        return _LOADER_CPU.get(self.machine)

    @property
    def case_insensitive(self) -> bool:
        """Windows resolves DLL names without regard to case."""
        return self.os == "windows"

    def key(self, name: str) -> str:
        """The form of a library name that the target's loader compares. On macOS a bundled
        dylib is named by an install name (`@rpath/libx.dylib`, `@loader_path/libx.dylib`, an
        absolute build path): its last component, since the stage lays each runtime out flat
        and rewrites every such name to `@rpath/<file>` found through `@loader_path`; the
        system's own (`/usr/lib/…`, `/System/…`) keep their path, which the externals list."""
        if self.format == "macho":
            return name if is_macos_system(name) else name.rsplit("/", 1)[-1]
        return name.lower() if self.case_insensitive else name

    def os_provides(self, name: str) -> bool:
        """Whether the operating system itself provides `name` (its `system_group`): a library
        every machine of the target has, so opening it by name under-reports nothing."""
        group = self.external_group(name)
        return group is not None and group.kind == "system" and group.group == self.system_group

    def external_group(self, needed: str) -> ExternalGroup | None:
        """The group that provides `needed` on the user's machine, or None."""
        wanted = self.key(needed)
        for group in self.externals:
            for pattern in group.names:
                if fnmatch.fnmatchcase(wanted, self.key(pattern)):
                    return group
        return None


# the loader's vocabulary (payload/loader/hardware.py machine_name), by each format's spelling
_LOADER_CPU = {
    "EM_X86_64": "x86_64",
    "AMD64": "x86_64",
    "x86_64": "x86_64",
    "EM_AARCH64": "aarch64",
    "ARM64": "aarch64",
    "arm64": "aarch64",
}

MACOS_SYSTEM_PREFIXES = ("/usr/lib/", "/System/Library/")  # the OS's own; never rewritten


def is_macos_system(install_name: str) -> bool:
    """An install name macOS itself provides (libSystem, libc++, the frameworks)."""
    return install_name.startswith(MACOS_SYSTEM_PREFIXES)


@dataclass(frozen=True)
class WindowsDll:
    """A DLL that is part of Windows (data/windows-system-dlls.toml) and where it is documented."""

    name: str  # lower case
    doc: str  # the Microsoft Learn page (a function's Requirements table) that names it
    since: str | None  # the NT version it first ships in, where newer than Windows 7


@dataclass(frozen=True)
class WindowsSystemDlls:
    group: str  # the targets.toml group of each Windows target they join
    source: str  # the documented list they come from
    dlls: tuple[WindowsDll, ...]


@cache
def windows_system_dlls() -> WindowsSystemDlls:
    """The DLLs Microsoft documents as Windows' own: a Windows target's system group holds
    them, and a kept file needing or opening one needs nothing the archive must carry."""
    path = "ortbundle/data/windows-system-dlls.toml"
    data = tomllib.loads(resources.files("ortbundle").joinpath(path[10:]).read_text("utf-8"))
    check_document(path, data, "windows-system-dlls-data")
    return WindowsSystemDlls(
        group=str(data["group"]),
        source=str(data["source"]),
        dlls=tuple(
            WindowsDll(str(name), str(entry["doc"]), entry.get("since"))
            for name, entry in sorted(data["dlls"].items())
        ),
    )


def _group_names(target_os: str, group: str, names: Iterable[Any]) -> tuple[str, ...]:
    """A group's names as targets.toml gives them, and, for the Windows group
    windows-system-dlls.toml names, every DLL it documents."""
    own = tuple(str(n) for n in names)
    if target_os != "windows" or group != windows_system_dlls().group:
        return own
    return (*(d.name for d in windows_system_dlls().dlls), *own)


def _parse_target(name: str, raw: dict[str, Any]) -> Target:
    try:
        externals = tuple(
            ExternalGroup(
                group=str(entry["group"]),
                kind=str(entry["kind"]),
                names=_group_names(str(raw["os"]), str(entry["group"]), entry["names"]),
                note=str(entry.get("note", "")),
                optional=bool(entry.get("optional", False)),
                version=str(entry.get("version", "")),
                install=str(entry.get("install", "")),
                sandbox=bool(entry.get("sandbox", True)),
            )
            for entry in raw.get("externals", [])
        )
        fmt = str(raw["format"])
        if fmt not in BINARY_FORMATS:
            formats = ", ".join(BINARY_FORMATS)
            raise ConfigError(f"target {name}: format must be one of {formats}, not {fmt!r}")
        return Target(
            name=name,
            os=str(raw["os"]),
            format=fmt,
            machine=str(raw["machine"]),
            externals=externals,
            bits=int(raw.get("bits", 64)),
            abi=str(raw["abi"]) if "abi" in raw else None,
            page_align=int(raw.get("page_align", 0)),
            package_arch=tuple(
                sorted((str(k), str(v)) for k, v in raw.get("package_arch", {}).items())
            ),
            wheel_platforms=tuple(str(p) for p in raw.get("wheel_platforms", [])),
            system_group=str(raw.get("system_group", "")),
        )
    except KeyError as missing:
        raise ConfigError(
            f"target {name} lacks {missing}", file="ortbundle/data/targets.toml"
        ) from None


@cache
def all_targets() -> dict[str, Target]:
    text = resources.files("ortbundle").joinpath("data/targets.toml").read_text("utf-8")
    data = tomllib.loads(text)

    check_document("ortbundle/data/targets.toml", data, "targets-data")
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
