"""From coordinates to pinned, cached sources: which file of a release serves which target.

A PyPI project publishes one wheel per platform; a Maven AAR (or an npm package carrying one)
serves every Android ABI from one archive. Everything goes through the fetch layer's registries
(pip's configuration, Maven settings, .npmrc) and `invoke pin`'s choices (the newest final
release, digests the registry publishes), so no host is named here.
"""

from __future__ import annotations

import re
import tarfile
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from ortbundle._core.errors import ConfigError, FetchError
from ortbundle._core.progress import Reporter
from ortbundle.config.sources import (
    MavenCoordinates,
    NestedMember,
    NpmCoordinates,
    PypiCoordinates,
    Source,
)
from ortbundle.config.targets import all_targets
from ortbundle.config.wheel_tags import interpreter_order, read_tags, wheel_targets
from ortbundle.fetch.archives import ZipArchive
from ortbundle.fetch.artifacts import Fetcher
from ortbundle.fetch.cache import Cache
from ortbundle.fetch.index import version_or_none
from ortbundle.fetch.nested import renest
from ortbundle.tools.pin.lookups import (
    Listed,
    Lookups,
    download_new,
    listed_files,
    newest_release,
    published_sha256,
)

KINDS = ("pypi", "maven", "npm")


@dataclass(frozen=True)
class Wanted:
    """What the user asked for: a kind, a name in that registry, maybe a version."""

    kind: str  # pypi | maven | npm
    name: str  # a PyPI project, a Maven group:artifact, an npm package
    version: str | None  # None: the newest final release

    def describe(self) -> str:
        sep = {"pypi": "==", "maven": ":", "npm": "@"}[self.kind]
        return f"{self.kind}:{self.name}{sep + self.version if self.version else ''}"


_PYPI_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
_MAVEN_PART = re.compile(r"^[A-Za-z0-9_.-]+$")
_NPM_NAME = re.compile(r"^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$")
_FORMS = "pypi:PROJECT[==VERSION], maven:GROUP:ARTIFACT[:VERSION] or npm:PACKAGE[@VERSION]"


def parse_coordinates(text: str, version: str | None = None) -> Wanted:
    """`pypi:onnxruntime==1.24.1`, `maven:com.example:ort-android:1.0.0`, `npm:@scope/pkg@1.2`;
    a bare name is a PyPI project. `version` (--version) is the same as naming one."""
    kind, _, rest = text.partition(":") if text.split(":", 1)[0] in KINDS else ("pypi", "", text)

    def bad(why: str) -> ConfigError:
        return ConfigError(f"coordinates {text!r}: {why}", fix=f"write {_FORMS}")

    named: str | None
    if kind == "pypi":
        name, _, named = rest.partition("==")
        ok = bool(_PYPI_NAME.match(name))
    elif kind == "maven":
        parts = rest.split(":")
        if len(parts) not in (2, 3) or not all(_MAVEN_PART.match(p) for p in parts):
            raise bad("a Maven artifact is GROUP:ARTIFACT[:VERSION]")
        name, named, ok = ":".join(parts[:2]), parts[2] if len(parts) == 3 else "", True
    else:
        at = rest.rfind("@")
        name, named = (rest[:at], rest[at + 1 :]) if at > 0 else (rest, "")
        ok = bool(_NPM_NAME.match(name))
    if not ok:
        raise bad(f"{name!r} is not a {kind} name")
    if named and version and named != version:
        raise bad(f"names version {named} and --version {version}")
    chosen = named or version or None
    if chosen is not None and not re.match(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$", chosen):
        raise bad(f"{chosen!r} is not a version")
    return Wanted(kind, name, chosen)


@dataclass(frozen=True)
class Pinned:
    """One pinned source, the targets it serves, and the (innermost) archive in the cache."""

    source: Source
    targets: tuple[str, ...]
    archive: Path
    note: str = ""  # what was chosen among alternatives


@dataclass(frozen=True)
class Resolved:
    wanted: Wanted
    version: str
    pinned: tuple[Pinned, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Asking:
    """Where one scaffold run asks and downloads, and for which recipe."""

    ask: Lookups
    cache: Cache
    reporter: Reporter
    component: str
    jobs: int


def resolve(wanted: Wanted, targets: Sequence[str], via: Asking) -> Resolved:
    """Pin every target the release publishes (of `targets`, or all) and download it."""
    targets = tuple(targets) or tuple(all_targets())
    if wanted.kind == "pypi":
        return _pypi(wanted, targets, via)
    return _registry(wanted, targets, via)


# --- PyPI ---------------------------------------------------------------------------------------


def wheels_for_targets(
    files: Sequence[Listed], targets: Sequence[str]
) -> tuple[dict[str, Listed], str]:
    """Each target's wheel among one release's files (config/wheel_tags.py reads the tags), and
    a note on the interpreter chosen: the interpreter tag most targets have (its native
    libraries do not depend on it); then the lowest platform level (the widest install base)."""
    read = {f.filename: read_tags(f.tags) for f in files}
    served = wheel_targets()
    per_target = {
        t: [f for f in files if read[f.filename].serves(t)] for t in targets if t in served
    }
    per_target = {t: fs for t, fs in per_target.items() if fs}
    coverage = Counter(
        i for fs in per_target.values() for i in {read[f.filename].interpreter for f in fs}
    )
    if not coverage:
        return {}, ""
    best = max(coverage, key=lambda i: (coverage[i], interpreter_order(i)))
    chosen = {}
    for target, fs in per_target.items():
        same = [f for f in fs if read[f.filename].interpreter == best] or sorted(
            fs, key=lambda f: interpreter_order(read[f.filename].interpreter)
        )[-1:]
        chosen[target] = min(
            same,
            key=lambda f: (
                read[f.filename].level_for(target),
                -f.build[0] if f.build else 0,
            ),
        )
    others = sorted(set(coverage) - {best})
    note = (
        f"took the {best} wheels; {', '.join(others)} carry the same native libraries"
        if others
        else ""
    )
    return chosen, note


def _unpublished(wanted: Wanted, versions: Sequence[str], via: Asking) -> FetchError:
    return FetchError(
        f"{wanted.name} {wanted.version} is not published "
        f"(versions listed: {', '.join(versions[-12:])})",
        component=via.component,
        fix="pick a listed version, or leave the version out for the newest",
    )


def _pypi(wanted: Wanted, targets: Sequence[str], via: Asking) -> Resolved:
    ask, component = via.ask, via.component
    files = listed_files(ask, wanted.name)
    if not files:
        raise FetchError(
            f"no index lists wheels of {wanted.name} "
            f"(looked in {ask.registry('pypi').where(wanted.name)})",
            component=component,
            fix="check the project name, or point --index-url / PIP_INDEX_URL at an index "
            "that carries it",
        )
    notes: list[str] = []
    if wanted.version is not None:
        version = version_or_none(wanted.version)
        if version is None:
            raise ConfigError(f"{wanted.version!r} is not a version", component=component)
        at = [f for f in files if f.version == version and not f.yanked] or [
            f for f in files if f.version == version
        ]
        if not at:
            raise _unpublished(wanted, [str(v) for v in sorted({f.version for f in files})], via)
        chosen, note = wheels_for_targets(at, targets)
    else:
        chosen, note = {}, ""
        for candidate in sorted({f.version for f in files}, reverse=True):
            at = [f for f in files if f.version == candidate and not f.yanked]
            if candidate.is_prerelease or not at:
                notes.append(f"{candidate} skipped: {'pre-release' if at else 'yanked'}")
                continue
            chosen, note = wheels_for_targets(at, targets)
            if chosen:
                version = candidate
                break
            notes.append(f"{candidate} skipped: no wheel for a target ortbundle builds")
    if not chosen:
        # the files of the version asked for (of every version when none was): never another
        # version's, which would name a wheel for the very target said to have none
        asked = at if wanted.version is not None else files
        listed = sorted({f.filename for f in asked})
        names = listed[:6] + ([f"and {len(listed) - 6} more"] if len(listed) > 6 else [])
        depends = _meta_package_depends(wanted, files, via)
        if depends:
            raise FetchError(
                f"{wanted.name} is a meta-package: its wheel carries no native library and "
                f"depends on {', '.join(depends)} (files: {', '.join(names)})",
                component=component,
                fix=f"scaffold the package it depends on: invoke new-recipe -s pypi:{depends[0]}",
            )
        which = f"{wanted.name} {wanted.version}" if wanted.version is not None else wanted.name
        raise FetchError(
            f"{which} publishes no wheel for {', '.join(targets)} (files: {', '.join(names)})",
            component=component,
            fix="ortbundle packages native libraries: pick a project with platform wheels "
            f"({', '.join(wheel_targets())})",
        )
    if note:
        notes.append(note)
    sources = []
    for target, wheel in sorted(chosen.items()):
        sha256 = published_sha256(wheel, component, "the scaffold")
        origin = PypiCoordinates(wanted.name, str(version), wheel.filename)
        sources.append((target, Source(target, origin, sha256, wheel.size)))
    fetcher = Fetcher(via.cache, via.reporter, registries=ask.registries)
    got = fetcher.fetch_all(((component, s) for _, s in sources), jobs=max(1, via.jobs))
    pinned = tuple(
        Pinned(
            Source(s.id, s.origin, s.sha256, got[s.sha256].size),
            (target,),
            got[s.sha256].path,
        )
        for target, s in sources
    )
    return Resolved(wanted, str(version), pinned, tuple(notes))


_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _meta_package_depends(wanted: Wanted, files: Sequence[Listed], via: Asking) -> list[str]:
    """What a pure wheel (py3-none-any, no library of any platform) installs instead: the
    projects its METADATA requires outside any extra; [] when it is not such a wheel."""
    pure = [
        f
        for f in files
        if f.filename.endswith("-none-any.whl")
        and not f.yanked
        and (wanted.version is None or str(f.version) == wanted.version)
    ]
    if not pure:
        return []
    wheel = max(pure, key=lambda f: f.version)
    origin = PypiCoordinates(wanted.name, str(wheel.version), wheel.filename)
    sha256 = published_sha256(wheel, via.component, "the scaffold")
    source = Source("meta", origin, sha256, wheel.size)
    fetcher = Fetcher(via.cache, via.reporter, registries=via.ask.registries)
    got = fetcher.fetch_all([(via.component, source)], jobs=1)[source.sha256]
    with (
        ZipArchive(got.path, label=wheel.filename, component=via.component) as archive,
        tempfile.TemporaryDirectory() as scratch,
    ):
        names = [n for n in archive.members if n.endswith(".dist-info/METADATA")]
        if not names:
            return []
        text = archive.extract(names[0], Path(scratch) / "METADATA").path.read_text(
            "utf-8", errors="replace"
        )
    requires = HeaderParser().parsestr(text).get_all("Requires-Dist") or []
    found = []
    for requirement in requires:
        marker = str(requirement).partition(";")[2]
        name = _REQUIREMENT_NAME.match(str(requirement))
        if name and "extra" not in marker:
            found.append(name.group(1))
    return found


# --- Maven and npm ------------------------------------------------------------------------------


def _registry(wanted: Wanted, targets: Sequence[str], via: Asking) -> Resolved:
    ask, cache, component = via.ask, via.cache, via.component
    registry = ask.registry(wanted.kind)
    published = registry.versions(wanted.name)
    if published is None or not published.versions:
        raise FetchError(
            f"the {wanted.kind} registry has no {wanted.name} "
            f"(looked in {ask.where(wanted.kind, wanted.name)})",
            component=component,
            fix="check the coordinates, or the registry configuration (README: Where things "
            "come from)",
        )
    notes: list[str] = []
    if wanted.version is not None:
        if wanted.version not in published.versions:
            raise _unpublished(wanted, published.versions, via)
        version = wanted.version
    else:
        newest, skipped = newest_release(registry, published.versions, [], {})
        notes += skipped
        if newest is None:
            raise FetchError(
                f"{wanted.name} has no final release ({'; '.join(skipped)})",
                component=component,
                fix="name a version",
            )
        version = newest
    origin: MavenCoordinates | NpmCoordinates
    if wanted.kind == "maven":
        group, artifact = wanted.name.split(":")
        origin = MavenCoordinates(group, artifact, version, "aar")
    else:
        origin = NpmCoordinates(wanted.name, version)
    placeholder = Source("aar", origin, "")
    sha256 = download_new(placeholder, origin, cache, via.reporter, ask)
    entry = cache.get(sha256)
    assert entry is not None  # download_new just adopted it
    nested: tuple[NestedMember, ...] = ()
    archive = entry.path
    if wanted.kind == "npm":
        member = _inner_aar(entry.path, origin.filename, component)
        level = Source("aar", origin, sha256, nested=(NestedMember(member, ""),))
        nested = renest(cache, entry.path, level, origin.filename, component)
        inner = cache.get(nested[-1].sha256)
        assert inner is not None
        archive = inner.path
        notes.append(f"reads the AAR {member} inside the npm tarball")
    abis = _abis(archive)
    served = tuple(
        t for t in sorted(all_targets()) if all_targets()[t].abi in abis and t in targets
    )
    if not served:
        raise FetchError(
            f"{origin.describe()} carries no native library for "
            f"{', '.join(targets)} (jni/ holds: {', '.join(abis) or 'nothing'})",
            component=component,
            fix="ortbundle reads Android runtimes from an AAR's jni/<abi>/ libraries",
        )
    source = Source("aar", origin, sha256, entry.size, nested=nested)
    return Resolved(wanted, version, (Pinned(source, served, archive),), tuple(notes))


def _inner_aar(tarball: Path, label: str, component: str) -> str:
    """The AAR inside an npm tarball (the first, by name, when there are several)."""
    try:
        with tarfile.open(tarball, mode="r:*") as tar:
            names = sorted(m.name.removeprefix("./") for m in tar.getmembers() if m.isfile())
    except (OSError, tarfile.TarError) as exc:
        raise FetchError(
            f"{label} is not a readable tarball ({exc})",
            component=component,
            file=label,
            fix="check the package: an npm package is a gzipped tarball",
        ) from None
    aars = [n for n in names if n.endswith(".aar")]
    if not aars:
        raise ConfigError(
            f"{label} carries no .aar: ortbundle reads an npm package's runtime from an Android "
            "archive inside it",
            component=component,
            file=label,
            fix="pick a package that ships an AAR, or the AAR's own Maven coordinates",
        )
    return aars[0]


def _abis(archive: Path) -> set[str]:
    """The Android ABIs an AAR carries libraries for (jni/<abi>/…)."""
    with ZipArchive(archive, label=archive.name) as aar:
        return {n.split("/")[1] for n in aar.members if n.startswith("jni/") and n.count("/") == 2}
