"""A wheel's tags read in one place: which targets it installs on, at which platform level, for
which interpreter. `invoke pin` (which file a pin moves to) and `invoke new-recipe` (which file
serves a target) both read tags here, so they cannot disagree about a wheel; which platform
serves which target is data (data/targets.toml, each target's `wheel_platforms`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache

from packaging.tags import Tag

from ortbundle.config.targets import all_targets

__all__ = [
    "Platform",
    "WheelTags",
    "interpreter_order",
    "level_text",
    "platform",
    "read_tags",
    "requirement",
    "wheel_targets",
]

# PEP 600 manylinux_X_Y, PEP 656 musllinux_X_Y, macOS X_Y; PEP 738 android_<api level>
_LEVELLED = re.compile(r"^(manylinux|musllinux|macosx)_(\d+)_(\d+)_(.+)$")
_ANDROID = re.compile(r"^(android)_(\d+)_(.+)$")
# the legacy manylinux names and the glibc they stand for (PEP 600)
_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
_LEGACY_TAG = re.compile(r"^(manylinux1|manylinux2010|manylinux2014)_(.+)$")
# what a family's level is a version of, for a note
_REQUIRES = {"manylinux": "glibc", "musllinux": "musl", "macosx": "macOS", "android": "Android API"}


@dataclass(frozen=True)
class Platform:
    """One platform tag: manylinux_2_28_x86_64 is family "manylinux x86_64" at level (2, 28); a
    tag that names no level (win_amd64, linux_x86_64) is its own family at (0, 0)."""

    tag: str
    family: str
    level: tuple[int, int]

    @property
    def system(self) -> str:
        """The family without its machine: manylinux, musllinux, macosx, android, or the tag."""
        return self.family.split(" ")[0]


def platform(tag: str) -> Platform:
    """Read one platform tag (manylinux2014 is glibc 2.17, as PEP 600 says)."""
    if m := _LEVELLED.match(tag):
        return Platform(tag, f"{m[1]} {m[4]}", (int(m[2]), int(m[3])))
    if m := _LEGACY_TAG.match(tag):
        return Platform(tag, f"manylinux {m[2]}", _LEGACY[m[1]])
    if m := _ANDROID.match(tag):
        return Platform(tag, f"{m[1]} {m[3]}", (int(m[2]), 0))
    return Platform(tag, tag, (0, 0))


def level_text(system: str, level: tuple[int, int]) -> str:
    """A level as its family writes it: `2.28`, `14.0`; an Android API level is one number."""
    return f"{level[0]}" if system == "android" else f"{level[0]}.{level[1]}"


def requirement(system: str, level: tuple[int, int]) -> str:
    """What a level asks of the user's machine: `glibc 2.28`, `macOS 14.0`, `Android API 24`."""
    return f"{_REQUIRES.get(system, system)} {level_text(system, level)}"


@cache
def wheel_targets() -> Mapping[str, frozenset[str]]:
    """target → the platform families that install on it (data/targets.toml), in data order;
    a target with none is not served by wheels."""
    return {
        name: frozenset(t.wheel_platforms) for name, t in all_targets().items() if t.wheel_platforms
    }


@dataclass(frozen=True)
class WheelTags:
    """Everything a wheel's tag set says that pin and the scaffold decide by."""

    tags: frozenset[Tag]
    platforms: tuple[Platform, ...]  # sorted by tag

    @property
    def interpreters(self) -> frozenset[str]:
        return frozenset(t.interpreter for t in self.tags)

    @property
    def abis(self) -> frozenset[str]:
        return frozenset(t.abi for t in self.tags)

    @property
    def families(self) -> frozenset[str]:
        return frozenset(p.family for p in self.platforms)

    @property
    def interpreter(self) -> str:
        """The interpreter tags as one word: `cp311`, `py3`, `cp310.cp311`."""
        return ".".join(sorted(self.interpreters))

    @property
    def platform_names(self) -> str:
        """The platform tags as one word, as the file name spells them."""
        return ".".join(p.tag for p in self.platforms)

    @property
    def level(self) -> tuple[int, int]:
        """The lowest platform level of any of its tags (the widest install base)."""
        return min(p.level for p in self.platforms)

    @property
    def targets(self) -> tuple[str, ...]:
        """The targets it installs on, in data order."""
        return tuple(t for t, fams in wheel_targets().items() if fams & self.families)

    def serves(self, target: str) -> bool:
        return bool(wheel_targets().get(target, frozenset()) & self.families)

    def level_for(self, target: str) -> tuple[int, int]:
        """The lowest level among the tags that install on `target`."""
        fams = wheel_targets().get(target, frozenset())
        return min((p.level for p in self.platforms if p.family in fams), default=(0, 0))

    def same_shape(self, other: WheelTags) -> bool:
        """The same interpreters, ABIs and platform families: a file pin may move to."""
        return (self.interpreters, self.abis, self.families) == (
            other.interpreters,
            other.abis,
            other.families,
        )


def read_tags(tags: Iterable[Tag]) -> WheelTags:
    tags = frozenset(tags)
    return WheelTags(tags, tuple(sorted({platform(t.platform) for t in tags}, key=lambda p: p.tag)))


def interpreter_order(interpreter: str) -> tuple[int, int]:
    """How the scaffold ranks interpreter words, highest first: abi-neutral (`py3`), then the
    newest CPython (`cp312` over `cp311`)."""
    numbers = [int(n) for n in re.findall(r"cp3(\d+)", interpreter)]
    return (0 if numbers else 1, max(numbers, default=0))
