"""The Debian-family releases a .deb claims, and whether its Depends exist there.

A .deb whose binaries need glibc 2.27 claims every release shipping glibc 2.27 or newer (Ubuntu
18.04, Debian 10, …). A Depends clause none of whose alternatives a claimed release has cannot
install there (issue #43: `libgcc-s1` exists from Debian 11 and Ubuntu 20.04; Debian 10 and
Ubuntu 18.04 call it `libgcc1`). What each release calls its packages is recorded, with the
page each fact was read from, in data/deb-releases.toml; a package the data records nowhere (a
product's own vendor package) is not judged.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from ortbundle._core.errors import ConfigError
from ortbundle.config.schema import check_document

DATA_FILE = "ortbundle/data/deb-releases.toml"
LINUX_PACKAGES = "ortbundle/data/linux-packages.toml"


@dataclass(frozen=True)
class DebPackage:
    version: str  # as published in the release, epoch included ("1:8.3.0-6")
    source: str  # the package page the fact was read from


@dataclass(frozen=True)
class DebRelease:
    id: str  # "ubuntu-18.04"
    name: str  # "Ubuntu 18.04 LTS (bionic)"
    glibc: str  # "2.27"
    packages: dict[str, DebPackage]


@cache
def deb_releases() -> tuple[DebRelease, ...]:
    """data/deb-releases.toml, checked against its schema once, oldest glibc first."""
    text = resources.files("ortbundle").joinpath("data/deb-releases.toml").read_text("utf-8")
    data = tomllib.loads(text)
    check_document(DATA_FILE, data, "deb-releases-data")
    releases = [
        DebRelease(
            id=str(key),
            name=str(raw["name"]),
            glibc=str(raw["glibc"]),
            packages={
                str(n): DebPackage(str(p["version"]), str(p["source"]))
                for n, p in raw["packages"].items()
            },
        )
        for key, raw in data["releases"].items()
    ]
    return tuple(sorted(releases, key=lambda r: (_numbers(r.glibc), r.id)))


def claimed(glibc: str | None) -> tuple[DebRelease, ...]:
    """The releases a package needing `glibc` (None: no floor known) says it runs on."""
    floor = _numbers(glibc) if glibc else ()
    return tuple(r for r in deb_releases() if _numbers(r.glibc) >= floor)


def alternatives(clause: str) -> tuple[str, ...]:
    """The package names of one Depends clause: "a (>= 1) | b (>= 1)" -> ("a", "b")."""
    return tuple(part.strip().split(" ", 1)[0] for part in clause.split("|"))


def check_claimed_releases(depends: Sequence[str], glibc: str | None, target: str) -> None:
    """Refuse Depends a claimed release cannot satisfy by name, naming the clause, the release
    and what to add."""
    known = {name for r in deb_releases() for name in r.packages}
    problems = []
    for clause in depends:
        names = alternatives(clause)
        if not known & set(names):
            continue  # the data records nothing of it: not judged
        problems += [
            f"`{clause}` cannot install on {r.name}: it has no {' or '.join(names)}"
            for r in claimed(glibc)
            if not set(names) & set(r.packages)
        ]
    if problems:
        raise ConfigError(
            "; ".join(problems),
            component="packaging:deb",
            target=target,
            file=LINUX_PACKAGES,
            fix="name the release's package as an alternative (`new | old`) in the group's "
            f"[deb.<group>] depends, as {DATA_FILE} records it",
        )


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())
