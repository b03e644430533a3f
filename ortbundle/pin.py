"""`invoke pin`: move a recipe's pins to another upstream release, and show what the move changes.

The index is the authority for the new digest: pin reads the SHA-256 the index publishes, then
downloads the file through the cache (which hashes while writing and refuses a mismatch) before
anything is written. The recipe is rewritten with tomlkit, so comments and layout survive, and
only by an atomic rename once every step has succeeded.

What follows the version, for each project P that moves from old version O to new version N:
- each moved `[sources.<id>]`: `pypi.version`, `pypi.filename`, `sha256`, `size`;
- `[component] version`, only when P is the component's own project (the project of its `ort-*`
  sources, else of most sources) and all of that project's sources move, and it equals O;
- `[component] description`: O as a whole version token becomes N;
- a licence rule's `version` equal to O, when P is the component's own project or the rule's
  component is P (OpenVINO's rule follows only an OpenVINO move); "<P> O" inside a version
  ("bundled with onnxruntime-webgpu 1.27.0") follows too; so does the rule's `@O` purl;
- a licence text's `member` from a moved source: its `<name>-O.dist-info/` prefix.
Comments are never rewritten; the ones that mention O are listed as notes to review by hand.

The new file of a source keeps the old file's wheel tags (python, ABI, platform set). When those
are missing, the closest file of the same platform family is taken (the smallest step in the
manylinux/musllinux/macOS level, preferring no newer requirement) and the result says so.

Maven and npm sources (`maven = {…}`, `npm = {…}`) move the same way, with what those registries
publish. A project is `group:artifact` (Maven) or the package name (npm); its versions come from
maven-metadata.xml or the package document, ordered as Maven and semver order them, and the newest
release is the default: SNAPSHOTs and pre-release-looking versions (alpha, beta, milestone, rc,
preview, a semver `-tag`) are passed over unless the pin already is one. Neither registry
publishes a SHA-256 as a rule, so the new file is downloaded, hashed, and accepted only when it
matches the digest the registry does publish (Maven's .sha1/.sha256 sidecar; npm's integrity and
shasum): pin does not trust a download nothing vouches for. The file is stored in the cache, so
the comparison builds read it from there. For a source with `nested` archives, each member is
re-extracted from the new file under the same path and pinned by its own SHA-256 (a member the
new release lacks is an error; nothing is written). What is rewritten: `maven.version` or
`npm.version`, `sha256`, `size` (added beside the digest when missing), `nested[i].sha256`; the
component and licence rules follow as above, a rule counting as the project's own when its
component is the project, its artifact or its package name (its purl's `@O?type=aar` too).

Which sources move without --source: those of the component's own project (main_project): the
project of the source named `ort` or `ort-*`, else that of most sources (android-qnn: `ort`, the
ONNX Runtime AAR; its QNN SDK AAR moves only with `--source qnn`). One kind moves at a time:
--source naming a PyPI and an npm source together is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tarfile
import tempfile
import time
import tomllib
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import requests
import tomlkit
from packaging.tags import Tag
from packaging.utils import (
    BuildTag,
    InvalidWheelFilename,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version
from tomlkit.items import AoT, Array, Table

from ortbundle.archives import extract_member
from ortbundle.build import AuditFailed, BuildResult, build
from ortbundle.errors import ArchiveError, ConfigError, FetchError, IntegrityError, OrtbundleError
from ortbundle.fetch.artifacts import Fetcher
from ortbundle.fetch.cache import Cache, default_cache_dir
from ortbundle.fetch.config import (
    MavenConfig,
    MavenRepository,
    NpmConfig,
    index_config,
    maven_config,
    npm_config,
    redact,
)
from ortbundle.fetch.download import (
    CHUNK,
    RETRY_STATUS,
    TRANSIENT,
    Downloaded,
    NotFound,
    ProgressFn,
    check_published,
    download,
    request_with_retries,
)
from ortbundle.fetch.index import ACCEPT, parse_project_page
from ortbundle.fetch.maven import artifact_url, maven_metadata, sidecar_digest
from ortbundle.fetch.npm import NpmDist, npm_versions, packument_url, resolve_npm, semver_key
from ortbundle.fetch.policy import RetryPolicy
from ortbundle.licensing import TargetLicensing
from ortbundle.locations import ENV_MAVEN_URL, ENV_NPM_REGISTRY
from ortbundle.plan import BuildOptions, Project
from ortbundle.progress import Reporter
from ortbundle.recipes import (
    Coordinates,
    MavenCoordinates,
    NestedMember,
    NpmCoordinates,
    PypiCoordinates,
    Recipe,
    Source,
    load_product,
    load_recipe,
    source_from_json,
)

MIB = 1 << 20


@dataclass(frozen=True)
class PinOptions:
    version: str | None = None  # None: the newest release with a file for every moved source
    sources: tuple[str, ...] = ()  # move only these source ids (any project); else the main ones
    build: bool = True  # False (--no-build): skip the old/new comparison builds
    force: bool = False  # rewrite even when the new build fails
    index_url: str | None = None  # None: pip's configuration
    cache_dir: Path | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    jobs: int = 0
    # the comparison builds' environment, and where the Maven and npm settings are read from
    # (ORTBUNDLE_MAVEN_URL, settings.xml, .npmrc, HOME, PATH); None: os.environ
    environ: Mapping[str, str] | None = None


# --- the index ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Listed:
    """One wheel a project page lists."""

    filename: str
    url: str
    version: Version
    build: BuildTag
    tags: frozenset[Tag]
    sha256: str | None
    size: int | None  # PEP 700, when the index publishes it
    yanked: bool


def _parse_wheel(filename: str) -> tuple[str, Version, BuildTag, frozenset[Tag]] | None:
    if not filename.endswith(".whl"):
        return None
    try:
        return parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None


class _Index:
    """The configured indexes' project pages, each read once per run."""

    def __init__(self, options: PinOptions) -> None:
        self.config = index_config(options.index_url)
        self.policy = options.retry
        self.session = requests.Session()
        self.session.headers["User-Agent"] = "ortbundle"
        if self.config.cert:
            self.session.verify = self.config.cert
        self._pages: dict[str, tuple[Listed, ...]] = {}

    def files(self, project: str) -> tuple[Listed, ...]:
        """Every wheel of `project` over all indexes; the first index listing a name wins."""
        key = canonicalize_name(project)
        if key in self._pages:
            return self._pages[key]
        seen: dict[str, Listed] = {}
        for index_url in self.config.index_urls:
            response = request_with_retries(
                self.session,
                index_url.rstrip("/") + f"/{key}/",
                self.policy,
                headers={"Accept": ACCEPT},
                what=f"index page for {project}",
                allow_404=True,
            )
            if response is None:
                continue
            ctype = response.headers.get("Content-Type", "")
            for entry in parse_project_page(response.content, ctype, response.url):
                wheel = _parse_wheel(entry.filename)
                if entry.filename in seen or wheel is None or wheel[0] != key:
                    continue
                seen[entry.filename] = Listed(
                    entry.filename,
                    entry.url,
                    wheel[1],
                    wheel[2],
                    wheel[3],
                    entry.hashes.get("sha256"),
                    entry.size,
                    entry.yanked,
                )
        self._pages[key] = tuple(seen.values())
        return self._pages[key]

    @property
    def where(self) -> str:
        return ", ".join(self.config.index_urls)


@contextmanager
def _index(options: PinOptions) -> Iterator[_Index]:
    index = _Index(options)
    try:
        yield index
    finally:
        index.session.close()


# --- wheel tags --------------------------------------------------------------------------------

_LEVELLED = re.compile(r"^(manylinux|musllinux|macosx)_(\d+)_(\d+)_(.+)$")
_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
_LEGACY_TAG = re.compile(r"^(manylinux1|manylinux2010|manylinux2014)_(.+)$")


def _platform(tag: str) -> tuple[str, tuple[int, int]]:
    """(family, level): manylinux_2_28_x86_64 → ("manylinux x86_64", (2, 28))."""
    if m := _LEVELLED.match(tag):
        return f"{m[1]} {m[4]}", (int(m[2]), int(m[3]))
    if m := _LEGACY_TAG.match(tag):
        return f"manylinux {m[2]}", _LEGACY[m[1]]
    return tag, (0, 0)


@dataclass(frozen=True)
class _Shape:
    interpreters: frozenset[str]
    abis: frozenset[str]
    families: frozenset[str]
    level: tuple[int, int]  # the lowest platform level the wheel installs on

    @classmethod
    def of(cls, tags: frozenset[Tag]) -> _Shape:
        platforms = [_platform(t.platform) for t in tags]
        return cls(
            frozenset(t.interpreter for t in tags),
            frozenset(t.abi for t in tags),
            frozenset(f for f, _ in platforms),
            min(level for _, level in platforms),
        )

    def compatible(self, other: _Shape) -> bool:
        return (self.interpreters, self.abis, self.families) == (
            other.interpreters,
            other.abis,
            other.families,
        )


def _platforms(tags: frozenset[Tag]) -> str:
    return ".".join(sorted({t.platform for t in tags}))


def _match(
    source: Source, files: Iterable[Listed], version: Version, *, yanked_ok: bool
) -> Listed | None:
    """The file of `version` with the old file's tags, else the closest of the same family."""
    old = _parse_wheel(source.filename)
    if old is None:
        raise ConfigError(
            f"source {source.id}: {source.filename} is not a wheel file name",
            file=source.filename,
            fix="pin only wheels; fix the filename in the recipe",
        )
    candidates = [f for f in files if f.version == version and (yanked_ok or not f.yanked)]
    exact = [f for f in candidates if f.tags == old[3]]
    if exact:
        return max(exact, key=lambda f: (not f.yanked, f.build))
    shape = _Shape.of(old[3])
    close = [f for f in candidates if _Shape.of(f.tags).compatible(shape)]
    if not close:
        return None

    def distance(f: Listed) -> tuple[bool, int, bool]:
        level = _Shape.of(f.tags).level
        step = abs((level[0] - shape.level[0]) * 1000 + level[1] - shape.level[1])
        return (level > shape.level, step, f.yanked)

    # min() keeps the first of equals: the highest build tag among equally close files
    return min(sorted(close, key=lambda f: f.build, reverse=True), key=distance)


def _version_or_none(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _no_file(source: Source, version: str, files: Sequence[Listed], component: str) -> FetchError:
    at = sorted(f.filename for f in files if str(f.version) == version)
    versions = sorted({f.version for f in files})
    listed = (
        f"files of {version}: {', '.join(at)}"
        if at
        else f"versions listed: {', '.join(map(str, versions[-12:])) or 'none'}"
    )
    return FetchError(
        f"source {source.id}: no wheel of {source.pypi.project} {version} matches "
        f"{source.filename}'s tags ({listed})",
        component=component,
        file=source.filename,
        fix="pick a version that publishes this platform's wheel, or edit the source by hand",
    )


# --- which sources move, to which version ------------------------------------------------------


_VERSIONED = ("pypi", "maven", "npm")  # the kinds a registry publishes versions of


def project_of(source: Source) -> str:
    """What moves together: a PyPI project, a Maven `group:artifact`, an npm package; a source
    of another kind (a plain URL, a file in the project) is its own."""
    origin = source.origin
    if isinstance(origin, MavenCoordinates):
        return f"{origin.group}:{origin.artifact}"
    if isinstance(origin, NpmCoordinates):
        return origin.package
    if isinstance(origin, PypiCoordinates):
        return origin.project
    return origin.describe()


def version_of(origin: Coordinates) -> str:
    """The pinned version; "" for a kind without versions."""
    if isinstance(origin, PypiCoordinates | MavenCoordinates | NpmCoordinates):
        return origin.version
    return ""


def _names(origin: Coordinates) -> tuple[str, ...]:
    """How a licence rule or a version phrase may name the project: Maven's artifact alone too,
    an npm package without its scope too."""
    if isinstance(origin, MavenCoordinates):
        return (f"{origin.group}:{origin.artifact}", origin.artifact)
    if isinstance(origin, NpmCoordinates):
        bare = origin.package.rsplit("/", 1)[-1]
        return (origin.package, bare) if bare != origin.package else (origin.package,)
    if isinstance(origin, PypiCoordinates):
        return (origin.project,)
    return ()


def main_project(projects: Mapping[str, str]) -> str:
    """The component's own project (source id → project): that of the source named `ort` or
    `ort-*`, else of most sources."""
    ort = {
        canonicalize_name(p)
        for sid, p in projects.items()
        if sid == "ort" or sid.startswith("ort-")
    }
    if len(ort) == 1:
        return ort.pop()
    ranked = Counter(canonicalize_name(p) for p in projects.values()).most_common()
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        raise ConfigError(
            "cannot tell which project is the component's own among "
            f"{sorted(set(projects.values()))}",
            fix="name the sources to move with --source",
        )
    return ranked[0][0]


def _selection(
    recipe: Recipe, wanted: Sequence[str]
) -> tuple[list[Source], list[Source], str | None]:
    """(moved, not moved, main project); the main project is None only when --source names
    the sources and the recipe has no clear own project."""
    unknown = sorted(set(wanted) - set(recipe.sources))
    if unknown:
        raise ConfigError(
            f"recipe {recipe.name} has no source {', '.join(unknown)}",
            component=recipe.name,
            file=str(recipe.path),
            fix=f"use one of: {', '.join(recipe.sources)}",
        )
    try:
        main: str | None = main_project({sid: project_of(s) for sid, s in recipe.sources.items()})
    except ConfigError:
        if not wanted:
            raise
        main = None
    moved = [
        s
        for sid, s in recipe.sources.items()
        if (sid in wanted if wanted else canonicalize_name(project_of(s)) == main)
    ]
    kinds = sorted({s.origin.kind for s in moved})
    unversioned = [s for s in moved if s.origin.kind not in _VERSIONED]
    if unversioned:
        raise ConfigError(
            f"source {unversioned[0].id} is {unversioned[0].origin.describe()}: no registry "
            "publishes versions of it, so there is nothing to move it to",
            component=recipe.name,
            file=str(recipe.path),
            fix="edit its sha256 (and size) by hand, or name other sources with --source",
        )
    if len(kinds) > 1:
        raise ConfigError(
            f"--source names sources of different kinds ({', '.join(kinds)}); pin moves one "
            "kind at a time",
            component=recipe.name,
            file=str(recipe.path),
            fix="run pin once per kind, naming that kind's sources with --source",
        )
    return moved, [s for s in recipe.sources.values() if s not in moved], main


def _newest(
    sources: Sequence[Source], files: Mapping[str, Sequence[Listed]]
) -> tuple[Version, list[str]]:
    """The newest final, non-yanked release with a file for every source; why newer ones lost."""
    every = [f for s in sources for f in files[s.id]]
    notes: list[str] = []
    for version in sorted({f.version for f in every}, reverse=True):
        at = [f for f in every if f.version == version]
        if version.is_prerelease:
            notes.append(f"{version} skipped: pre-release")
            continue
        if all(f.yanked for f in at):
            notes.append(f"{version} skipped: yanked")
            continue
        lacking = [
            s.id for s in sources if _match(s, files[s.id], version, yanked_ok=False) is None
        ]
        if not lacking:
            return version, notes
        notes.append(f"{version} skipped: no file for source {', '.join(lacking)}")
    raise FetchError(
        "no final release has a file for every source "
        f"({', '.join(s.id for s in sources)}): {'; '.join(notes) or 'nothing is listed'}",
        fix="pass --version, or --source to move fewer sources",
    )


# --- Maven and npm -----------------------------------------------------------------------------

# Maven orders qualifiers alpha < beta < milestone < rc < snapshot < (release) < sp; an unknown
# qualifier sorts after the release, as Maven's ComparableVersion has it.
_MAVEN_QUALIFIERS = {
    "alpha": 1,
    "a": 1,
    "beta": 2,
    "b": 2,
    "milestone": 3,
    "m": 3,
    "rc": 4,
    "cr": 4,
    "snapshot": 5,
    "": 6,
    "ga": 6,
    "final": 6,
    "release": 6,
    "sp": 7,
}
_PRE_WORDS = frozenset(
    {"alpha", "a", "beta", "b", "milestone", "m", "rc", "cr", "snapshot", "preview", "pre"}
    | {"dev", "ea", "eap", "nightly", "canary", "next"}
)
_MAVEN_HEAD = re.compile(r"^(\d+(?:\.\d+)*)[.-]?(.*)$")
_QUALIFIER = re.compile(r"^([a-z]*)[.-]?(\d*)")

MavenKey = tuple[int, tuple[int, ...], float, int, str]


def maven_key(version: str) -> MavenKey:
    """Order Maven versions the way Maven does for the usual shapes (1.2.3, 1.2.3-rc1,
    1.2.3.20250101, 1.2-SNAPSHOT); anything else sorts first, by text."""
    head = _MAVEN_HEAD.match(version)
    if head is None:
        return (0, (), 0.0, 0, version)
    numbers = [int(p) for p in head[1].split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()  # 1.0 == 1.0.0
    rest = head[2].lower()
    qualifier = _QUALIFIER.match(rest)
    word, number = (qualifier[1], qualifier[2]) if qualifier else ("", "")
    rank = float(_MAVEN_QUALIFIERS.get(word, 6.5))
    return (1, tuple(numbers), rank, int(number or 0), rest)


def is_prerelease(kind: str, version: str) -> bool:
    """A SNAPSHOT or a pre-release-looking version, which the newest-release choice passes over."""
    if kind == "npm":
        key = semver_key(version)
        return key[0] == 0 or key[2] == 0  # unparsable, or a semver pre-release (-tag)
    if kind == "maven":
        rest = version.lower()
        head = _MAVEN_HEAD.match(rest)
        words = re.findall(r"[a-z]+", head[2] if head else rest)
        return "snapshot" in rest or any(w in _PRE_WORDS for w in words)
    parsed = _version_or_none(version)
    return parsed is None or parsed.is_prerelease


def _version_order(kind: str) -> Callable[[str], Any]:
    return semver_key if kind == "npm" else maven_key


@dataclass(frozen=True)
class _Published:
    """What a registry says about one project."""

    versions: tuple[str, ...]  # oldest first, in the kind's order
    latest: str | None  # npm's dist-tags.latest; Maven's <release>


def _absent(exc: FetchError) -> bool:
    """The registry answered, and has no such package/artifact (as opposed to not answering)."""
    return isinstance(exc, NotFound)


class _Registries:
    """The Maven repositories and npm registries, configured as Maven and npm configure them;
    each project read once per run, and a registry that did not answer not asked again."""

    def __init__(self, options: PinOptions, root: Path | None) -> None:
        self.policy = options.retry
        self.environ: Mapping[str, str] = os.environ if options.environ is None else options.environ
        self.root = root  # where a project .npmrc is looked for
        self._maven: MavenConfig | OrtbundleError | None = None
        self._npm: NpmConfig | OrtbundleError | None = None
        self._sessions: dict[str, requests.Session] = {}
        self._down: dict[str, OrtbundleError] = {}  # registry → why it is not asked again
        self._published: dict[str, _Published | None] = {}

    def close(self) -> None:
        for session in self._sessions.values():
            session.close()

    def session(self, kind: str, cert: str | None = None) -> requests.Session:
        if kind not in self._sessions:
            session = requests.Session()
            session.headers["User-Agent"] = "ortbundle"
            if cert:
                session.verify = cert
            self._sessions[kind] = session
        return self._sessions[kind]

    def maven(self) -> tuple[MavenConfig, requests.Session]:
        if self._maven is None:
            try:
                self._maven = maven_config(self.environ)
            except ConfigError as exc:
                self._maven = exc
        if isinstance(self._maven, OrtbundleError):
            raise self._maven
        return self._maven, self.session("maven")

    def npm(self, package: str) -> tuple[NpmConfig, str, requests.Session]:
        """The configuration, the registry `package` comes from, and the session."""
        if self._npm is None:
            try:
                self._npm = npm_config(self.root, self.environ)
            except ConfigError as exc:
                self._npm = exc
        if isinstance(self._npm, OrtbundleError):
            raise self._npm
        registry, _origin = self._npm.registry_for(package)
        return self._npm, registry, self.session("npm", self._npm.cert)

    def where(self, kind: str, name: str) -> str:
        """Where a kind's settings say to look, without a URL (for a report line)."""
        try:
            if kind == "maven":
                return "; ".join(r.origin for r in self.maven()[0].repositories)
            return self.npm(name)[0].registry_for(name)[1]
        except OrtbundleError:
            return "not configured"

    def _guarded(self, registry: str, read: Callable[[], _Published | None]) -> _Published | None:
        if registry in self._down:
            raise self._down[registry]
        try:
            return read()
        except FetchError as exc:
            self._down[registry] = exc
            raise

    def published(self, source: Source) -> _Published | None:
        """The project's versions; None when the registry has no such project. Raises
        ConfigError (not configured) or FetchError (did not answer) otherwise."""
        origin = source.origin
        key = f"{origin.kind}:{project_of(source)}"
        if key in self._published:
            return self._published[key]
        found: _Published | None
        if isinstance(origin, MavenCoordinates):
            config, session = self.maven()
            found = self._guarded(
                "maven " + " ".join(r.url for r in config.repositories),
                lambda: self._maven_published(config, session, origin),
            )
        elif isinstance(origin, NpmCoordinates):
            npm, registry, session = self.npm(origin.package)
            found = self._guarded(
                f"npm {registry}", lambda: self._npm_published(npm, registry, session, origin)
            )
        else:
            raise ConfigError(f"source {source.id} ({origin.kind}) has no registry versions here")
        self._published[key] = found
        return found

    def _maven_published(
        self, config: MavenConfig, session: requests.Session, coords: MavenCoordinates
    ) -> _Published | None:
        try:
            metadata = maven_metadata(
                session, config.repositories, coords.group, coords.artifact, self.policy
            )
        except FetchError as exc:
            if _absent(exc):
                return None
            raise
        versions = tuple(sorted(metadata.versions, key=maven_key))
        return _Published(versions, metadata.release)

    def _npm_published(
        self, npm: NpmConfig, registry: str, session: requests.Session, coords: NpmCoordinates
    ) -> _Published | None:
        try:
            versions, tags = npm_versions(
                session,
                registry,
                coords.package,
                self.policy,
                headers=npm.headers_for(packument_url(registry, coords.package)),
            )
        except FetchError as exc:
            if _absent(exc):
                return None
            raise
        return _Published(tuple(versions), tags.get("latest"))

    def npm_dist(self, coords: NpmCoordinates) -> NpmDist:
        """The registry's `dist` record (tarball URL, integrity, shasum) of one version."""
        npm, registry, session = self.npm(coords.package)
        if f"npm {registry}" in self._down:
            raise self._down[f"npm {registry}"]
        return resolve_npm(session, npm, coords, self.policy)[1]

    def maven_sidecar(
        self, coords: MavenCoordinates
    ) -> tuple[MavenRepository, tuple[str, str] | None] | None:
        """The first repository that has the file by its sidecar, with the digest it publishes;
        when none has a sidecar, the first that answers a HEAD for the file (digest None);
        None when no repository has it."""
        config, session = self.maven()
        down = "maven " + " ".join(r.url for r in config.repositories)
        if down in self._down:
            raise self._down[down]
        for repository in config.repositories:
            url = artifact_url(repository.url, coords)
            found = sidecar_digest(session, url, repository, self.policy, coords.filename)
            if found is not None:
                return repository, found
        for repository in config.repositories:
            url = artifact_url(repository.url, coords)
            if _head(session, url, repository.headers, self.policy, coords.filename):
                return repository, None
        return None

    def download_new(
        self,
        source: Source,
        origin: MavenCoordinates | NpmCoordinates,
        cache: Cache,
        reporter: Reporter,
    ) -> tuple[str, str]:
        """Download `origin` (a version not pinned yet) into the cache, checked against the
        digests its registry publishes: (its SHA-256, the URL that served it)."""
        partial = cache.root / "partial" / f"pin-{os.getpid()}-{source.id}.part"
        update, finish = reporter.download(origin.filename)
        try:
            if isinstance(origin, MavenCoordinates):
                url, done = self._download_maven(origin, partial, update)
            else:
                url, done = self._download_npm(origin, partial, update)
        except OrtbundleError:
            partial.unlink(missing_ok=True)
            raise
        finally:
            finish()
        with cache.lock(done.sha256):
            if cache.get(done.sha256) is None:
                cache.store(done.path, done.sha256, url=redact(url))
            else:
                done.path.unlink(missing_ok=True)
        return done.sha256, url

    def _download_maven(
        self, coords: MavenCoordinates, partial: Path, progress: ProgressFn
    ) -> tuple[str, Downloaded]:
        config, session = self.maven()
        looked = []
        for repository in config.repositories:
            url = artifact_url(repository.url, coords)
            sidecar = sidecar_digest(session, url, repository, self.policy, coords.filename)
            if sidecar is None:
                looked.append(f"{repository.origin}: no .sha1 or .sha256 for it")
                continue
            try:
                done = download(
                    session,
                    url,
                    partial,
                    sha256=None,
                    expected_size=None,
                    policy=self.policy,
                    headers=repository.headers,
                    digests=(sidecar[0],),
                    what=coords.filename,
                    progress=progress,
                )
            except NotFound:
                looked.append(f"{repository.origin}: a sidecar but no file")
                continue
            check_published(
                done,
                {sidecar[0]: (sidecar[1],)},
                what=coords.filename,
                url=url,
                by=f"the repository's .{sidecar[0]} sidecar",
            )
            return url, done
        raise FetchError(
            f"{coords.describe()}: no configured repository publishes it with a digest "
            f"({'; '.join(looked)}); pin does not trust a download nothing vouches for",
            file=coords.filename,
            fix="check the version (is it in maven-metadata.xml?) or the repository",
        )

    def _download_npm(
        self, coords: NpmCoordinates, partial: Path, progress: ProgressFn
    ) -> tuple[str, Downloaded]:
        npm, _registry, session = self.npm(coords.package)
        dist = self.npm_dist(coords)
        published: dict[str, set[str]] = {k: set(v) for k, v in dist.integrity.items()}
        if dist.shasum:
            published.setdefault("sha1", set()).add(dist.shasum)
        if not published:
            raise IntegrityError(
                f"{coords.describe()}: the registry publishes no integrity or shasum for it; "
                "pin does not trust a download nothing vouches for",
                file=coords.filename,
                fix="use a registry that publishes dist.integrity, or pin by hand",
            )
        done = download(
            session,
            dist.tarball,
            partial,
            sha256=None,
            expected_size=None,
            policy=self.policy,
            headers=npm.headers_for(dist.tarball),
            digests=tuple(sorted(published.keys() - {"sha256"})),
            what=coords.filename,
            progress=progress,
        )
        check_published(
            done, published, what=coords.filename, url=dist.tarball, by="the registry's digests"
        )
        return dist.tarball, done


@contextmanager
def _registries(options: PinOptions, root: Path | None) -> Iterator[_Registries]:
    registries = _Registries(options, root)
    try:
        yield registries
    finally:
        registries.close()


def _head(
    session: requests.Session,
    url: str,
    headers: Mapping[str, str],
    policy: RetryPolicy,
    what: str,
) -> bool:
    """Whether the server has the file at `url` (HEAD: 2xx yes, 404/410 no). A server that
    does not do HEAD is asked with a GET whose body is never read."""
    failure = ""
    method = "HEAD"
    for attempt in range(policy.attempts):
        try:
            if method == "HEAD":
                response = session.head(
                    url, headers=dict(headers), timeout=policy.timeout, allow_redirects=True
                )
            else:
                with session.get(
                    url, headers=dict(headers), timeout=policy.timeout, stream=True
                ) as response:
                    pass  # the status is all we want; closing drops the body unread
        except TRANSIENT as exc:
            failure = type(exc).__name__
            time.sleep(policy.delay(attempt))
            continue
        if response.status_code in RETRY_STATUS:
            failure = f"HTTP {response.status_code}"
            time.sleep(policy.delay(attempt))
            continue
        if response.status_code in (405, 501) and method == "HEAD":
            method = "GET"
            continue
        if response.status_code in (404, 410):
            return False
        if response.status_code >= 400:
            raise FetchError(f"{what}: HTTP {response.status_code}", file=redact(url))
        return True
    raise FetchError(f"{what}: gave up after {policy.attempts} attempts ({failure})")


def _member_names(path: Path) -> list[str] | None:
    """The member names of a zip or tarball, for an error message; None if unreadable."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                return archive.namelist()
        with tarfile.open(path, mode="r:*") as tar:
            return [n.removeprefix("./") for n in tar.getnames()]
    except (OSError, tarfile.TarError, zipfile.BadZipFile):
        return None


def repin_nested(
    cache: Cache, outer: Path, source: Source, label: str, component: str
) -> tuple[NestedMember, ...]:
    """Each nested archive of `source`, re-extracted under the same member path from `outer`
    (the new download), stored in the cache and pinned by its own SHA-256."""
    pinned = []
    path = outer
    for depth, level in enumerate(source.nested):
        partial = cache.root / "partial" / f"pin-{os.getpid()}-{source.id}-{depth}.part"
        partial.parent.mkdir(parents=True, exist_ok=True)
        try:
            got = extract_member(path, level.member, partial, label=label, component=component)
        except ArchiveError:
            partial.unlink(missing_ok=True)
            names = _member_names(path)
            if names is None or level.member in names:
                raise
            suffix = Path(level.member).suffix
            alike = sorted(n for n in names if suffix and n.endswith(suffix))
            raise FetchError(
                f"source {source.id}: {label} has no member {level.member!r}, which the recipe "
                "reads" + (f" (its {suffix} members: {', '.join(alike[:8])})" if alike else ""),
                component=component,
                file=label,
                fix="the new release lays its files out differently: edit the source's nested "
                "member by hand, or pin another version with --version",
            ) from None
        with cache.lock(got.sha256):
            if cache.get(got.sha256) is None:
                cache.store(partial, got.sha256, url=f"{label}#{level.member}")
            else:
                partial.unlink(missing_ok=True)
        entry = cache.get(got.sha256)
        if entry is None:  # pragma: no cover - stored just above
            raise FetchError(f"{label}: the cache lost {level.member} while pin ran")
        pinned.append(NestedMember(level.member, got.sha256))
        path, label = entry.path, level.member.rsplit("/", 1)[-1]
    return tuple(pinned)


def _newest_release(
    kind: str, versions: Sequence[str], pinned: Sequence[str], lacking: Mapping[str, Sequence[str]]
) -> tuple[str | None, list[str]]:
    """The newest version to move to and why newer ones lost. Pre-releases count only when a
    pin already is one; `lacking` maps a version to the sources it is not published for."""
    pre_ok = any(is_prerelease(kind, v) for v in pinned)
    snapshot_ok = any(v.upper().endswith("SNAPSHOT") for v in pinned)
    notes: list[str] = []
    for version in sorted(versions, key=_version_order(kind), reverse=True):
        snapshot = version.upper().endswith("SNAPSHOT")
        if (snapshot and not snapshot_ok) or (is_prerelease(kind, version) and not pre_ok):
            notes.append(f"{version} skipped: {'SNAPSHOT' if snapshot else 'pre-release'}")
            continue
        if lacking.get(version):
            notes.append(
                f"{version} skipped: not published for source {', '.join(lacking[version])}"
            )
            continue
        return version, notes
    return None, notes


def _choose_published(
    moved: Sequence[Source], options: PinOptions, component: str, registries: _Registries
) -> tuple[str, tuple[str, ...]]:
    """The version the moved Maven or npm sources go to, and notes; nothing downloaded yet."""
    kind = moved[0].origin.kind
    lists: dict[str, tuple[str, ...]] = {}
    for s in moved:
        published = registries.published(s)
        if published is None:
            raise FetchError(
                f"source {s.id}: the {kind} registry has no {project_of(s)}",
                component=component,
                file=s.origin.describe(),
                fix="check the coordinates in the recipe, or the registry configuration",
            )
        lists[s.id] = published.versions
    every = sorted({v for vs in lists.values() for v in vs}, key=_version_order(kind))
    lacking = {v: [sid for sid, vs in lists.items() if v not in vs] for v in every}
    notes: list[str] = []
    if options.version is not None:
        version = options.version
        if version not in every or lacking[version]:
            where = ", ".join(lacking.get(version) or [s.id for s in moved])
            raise FetchError(
                f"source {where}: {project_of(moved[0])} {version} is not published "
                f"(versions listed: {', '.join(every[-12:]) or 'none'})",
                component=component,
                fix="pick a listed version",
            )
    else:
        newest, notes = _newest_release(kind, every, [version_of(s.origin) for s in moved], lacking)
        if newest is None:
            raise FetchError(
                f"no release of {project_of(moved[0])} is published for every source "
                f"({', '.join(s.id for s in moved)}): {'; '.join(notes) or 'nothing is listed'}",
                component=component,
                fix="pass --version, or --source to move fewer sources",
            )
        version = newest
    for s in moved:
        order = _version_order(kind)
        if version != version_of(s.origin) and order(version) < order(version_of(s.origin)):
            notes.append(f"{s.id}: a downgrade from {version_of(s.origin)}")
    return version, tuple(notes)


def _with_version(origin: Coordinates, version: str) -> MavenCoordinates | NpmCoordinates:
    if isinstance(origin, MavenCoordinates):
        return replace(origin, version=version)
    if isinstance(origin, NpmCoordinates):
        return replace(origin, version=version)
    raise ConfigError(f"{origin.describe()} is a PyPI wheel, moved through the index")


def _confirm_published(
    project: Project,
    moved: Sequence[Source],
    version: str,
    options: PinOptions,
    component: str,
    registries: _Registries,
    reporter: Reporter,
) -> tuple[SourceMove, ...]:
    """Download each new file through the cache, then re-pin the archives inside it."""
    cache = Cache(options.cache_dir or default_cache_dir())
    fetcher = Fetcher(
        cache, reporter, policy=options.retry, project_root=project.root, environ=options.environ
    )
    moves = []
    for s in moved:
        origin = _with_version(s.origin, version)
        sha256, _url = registries.download_new(s, origin, cache, reporter)
        if version == version_of(s.origin) and sha256 != s.sha256:
            raise IntegrityError(
                f"source {s.id}: the registry serves {origin.describe()} with sha256 {sha256}, "
                f"but the recipe pins {s.sha256} for that same version",
                component=component,
                file=origin.filename,
                fix="find out which is right; pin does not re-pin a release that changed",
            )
        # from the cache, where download_new put it: the fetcher's own check of the bytes
        artifact = fetcher.fetch(Source(s.id, origin, sha256, None, s.hold), component=component)
        nested = repin_nested(cache, artifact.path, s, origin.filename, component)
        moves.append(
            SourceMove(
                s.id,
                project_of(s),
                version_of(s.origin),
                s.filename,
                version,
                origin.filename,
                sha256,
                artifact.size,
                None,
                origin.kind,
                nested,
                _names(s.origin),
            )
        )
    return tuple(moves)


# --- the rewrite -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceMove:
    source: str
    project: str
    old_version: str
    old_filename: str
    new_version: str
    new_filename: str
    sha256: str
    size: int
    tags_note: str | None  # set when the new file's tags differ from the old one's
    kind: str = "pypi"  # pypi, maven, npm: which table holds the version
    nested: tuple[NestedMember, ...] = ()  # the archives inside, re-pinned (outermost first)
    names: tuple[str, ...] = ()  # how licence rules may name the project; () → (project,)


@dataclass(frozen=True)
class Edit:
    field: str  # dotted TOML path
    old: str | None
    new: str


@dataclass(frozen=True)
class _Bump:
    project: str
    old: frozenset[str]
    new: str
    sources: frozenset[str]
    main: bool  # the component's own project, all of its sources moving
    names: tuple[str, ...] = ()  # the project's other names (a Maven artifact, an npm package)


def _token(version: str) -> re.Pattern[str]:
    """`version` as a whole version, not inside a longer one (1.0.0 is not in 11.0.0 or 1.0.0.1)."""
    return re.compile(rf"(?<![\w.]){re.escape(version)}(?![\w]|\.\d)")


def _table(item: Any, where: str) -> MutableMapping[str, Any]:
    if not isinstance(item, MutableMapping):
        raise ConfigError(f"{where} is not a table")
    return item


def rewrite_recipe(
    text: str, moves: Sequence[SourceMove], main: str | None, all_main: bool
) -> tuple[str, tuple[Edit, ...], tuple[str, ...]]:
    """The recipe text with the moves applied (module docstring: what follows), edits, notes."""
    doc = tomlkit.parse(text)
    edits: list[Edit] = []
    notes: list[str] = []

    def put(table: MutableMapping[str, Any], key: str, value: str | int, where: str) -> None:
        old = table.get(key)
        if old is not None and str(old) == str(value):
            return
        if old is None and isinstance(table, Table) and "sha256" in table:
            table.value._insert_after("sha256", key, value)  # size sits beside its digest
        else:
            table[key] = value
        edits.append(Edit(where, None if old is None else str(old), str(value)))

    sources = _table(doc["sources"], "[sources]")
    for move in moves:
        table = _table(sources[move.source], f"[sources.{move.source}]")
        where = f"sources.{move.source}"
        coords = _table(table[move.kind], f"{where}.{move.kind}")
        put(coords, "version", move.new_version, f"{where}.{move.kind}.version")
        if move.kind == "pypi":
            put(coords, "filename", move.new_filename, f"{where}.pypi.filename")
        put(table, "sha256", move.sha256, f"{where}.sha256")
        put(table, "size", move.size, f"{where}.size")
        if move.nested:
            nested = table.get("nested")
            if not isinstance(nested, Array | AoT | list) or len(nested) != len(move.nested):
                raise ConfigError(f"[{where}] nested does not list {len(move.nested)} archives")
            for i, level in enumerate(move.nested):
                inner = _table(nested[i], f"{where}.nested[{i}]")
                if str(inner.get("member")) != level.member:
                    raise ConfigError(f"{where}.nested[{i}] is not {level.member!r}")
                put(inner, "sha256", level.sha256, f"{where}.nested[{i}].sha256")
            notes.append(
                f"{move.source}: the archive inside ({move.nested[-1].member}) is re-pinned; "
                f"{move.project}'s version says nothing of what it carries: check [component] "
                "version, description and the licence rules against it"
            )

    bumps: dict[str, _Bump] = {}
    for move in moves:
        key = canonicalize_name(move.project)
        prior = bumps.get(key)
        bumps[key] = _Bump(
            move.project,
            (prior.old if prior else frozenset()) | {move.old_version},
            move.new_version,
            (prior.sources if prior else frozenset()) | {move.source},
            key == main and all_main,
            move.names or (move.project,),
        )
    component = _table(doc["component"], "[component]")
    for project, bump in bumps.items():
        if project == main and not bump.main:
            notes.append(
                f"only some of {bump.project}'s sources moved: [component] version and its "
                "licence rules are left as they are"
            )
        for old in sorted(bump.old - {bump.new}):
            token = _token(old)
            if bump.main:
                if str(component.get("version")) == old:
                    put(component, "version", bump.new, "component.version")
                else:
                    notes.append(
                        f"[component] version {component.get('version')} is not {old}: left alone"
                    )
            description = str(component.get("description", ""))
            if token.search(description):
                put(
                    component,
                    "description",
                    token.sub(bump.new, description),
                    "component.description",
                )
            _follow_licences(doc, bump, project, old, put, notes)
    return tomlkit.dumps(doc), tuple(edits), tuple(notes + _comment_notes(text, bumps.values()))


_Put = Callable[[MutableMapping[str, Any], str, str | int, str], None]


def _follow_licences(
    doc: Any, bump: _Bump, key: str, old: str, put: _Put, notes: list[str]
) -> None:
    token = _token(old)
    names = bump.names or (bump.project,)
    called = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    phrase = re.compile(rf"(?<![\w.-])({called}) {token.pattern}")
    dist_info = re.compile(rf"^([^/]+)-{re.escape(old)}\.dist-info/")
    purl_version = re.compile(rf"@{re.escape(old)}(?=$|[?#])")
    own_names = {canonicalize_name(n) for n in names} | {key}
    for target, section in _table(doc.get("targets", {}), "[targets]").items():
        rules = _table(section, f"[targets.{target}]").get("licenses", [])
        if not isinstance(rules, AoT | list):
            continue
        for i, rule in enumerate(rules):
            where = f"targets.{target}.licenses[{i}]"
            rule = _table(rule, where)
            version = str(rule.get("version", ""))
            own = bump.main or canonicalize_name(str(rule.get("component", ""))) in own_names
            moved = version == old and own
            if moved:
                put(rule, "version", bump.new, f"{where}.version")
                purl = str(rule.get("purl", ""))
                if purl_version.search(purl):
                    put(rule, "purl", purl_version.sub(f"@{bump.new}", purl), f"{where}.purl")
            elif phrase.search(version):
                put(
                    rule,
                    "version",
                    phrase.sub(lambda m: f"{m[1]} {bump.new}", version),
                    f"{where}.version",
                )
            texts = rule.get("texts", [])
            for j, text in enumerate(texts if isinstance(texts, Array | list) else []):
                text = _table(text, f"{where}.texts[{j}]")
                member = str(text.get("member", ""))
                if text.get("source") in bump.sources and dist_info.match(member):
                    new = dist_info.sub(rf"\g<1>-{bump.new}.dist-info/", member)
                    put(text, "member", new, f"{where}.texts[{j}].member")
                file = str(text.get("file", ""))
                if moved and token.search(file):
                    notes.append(
                        f"{where}.texts[{j}]: licenses/{file} is {old}'s text; add "
                        f"{bump.new}'s under licenses/ and point the rule at it"
                    )


def _comment_notes(text: str, bumps: Iterable[_Bump]) -> list[str]:
    notes = []
    olds = sorted({o for b in bumps for o in b.old - {b.new}})
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):
            hits = [o for o in olds if _token(o).search(line)]
            if hits:
                notes.append(
                    f"line {number}: a comment mentions {', '.join(hits)} (comments are never "
                    f"rewritten; review it): {line.strip()}"
                )
    return notes


# --- the bump report ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FileChange:
    directory: str  # the runtime directory in the stage: runtimes/<name>
    name: str
    old_size: int | None
    new_size: int | None
    old_link: str | None = None  # what a symlink pointed to
    new_link: str | None = None


@dataclass(frozen=True)
class LicenceChange:
    component: str
    old: str | None  # "version (expression)", None when added
    new: str | None  # None when removed


@dataclass(frozen=True)
class TargetBump:
    target: str
    added: tuple[FileChange, ...]
    removed: tuple[FileChange, ...]
    changed: tuple[FileChange, ...]  # same name, other bytes or link target
    old_size: int  # bytes of every runtime library on the target (links not counted)
    new_size: int
    externals_added: tuple[str, ...]  # "runtimes/x: libz.so.1 (zlib, system)"
    externals_removed: tuple[str, ...]
    licences: tuple[LicenceChange, ...]

    @property
    def size_delta(self) -> int:
        return self.new_size - self.old_size

    @property
    def unchanged(self) -> bool:
        return not (
            self.added
            or self.removed
            or self.changed
            or self.externals_added
            or self.externals_removed
            or self.licences
        )


@dataclass(frozen=True)
class ProductBump:
    product: str
    targets: tuple[TargetBump, ...]
    old_error: str | None  # the previous pin did not build (no comparison for the files)
    new_error: str | None  # the new pin does not build
    new_exit_code: int  # 0 when the new build succeeded


@dataclass(frozen=True)
class BumpReport:
    component: str
    products: tuple[ProductBump, ...]

    @property
    def ok(self) -> bool:
        return all(p.new_error is None for p in self.products)

    @property
    def exit_code(self) -> int:
        return next((p.new_exit_code for p in self.products if p.new_error), 0)

    def lines(self) -> list[str]:
        if not self.products:
            return [f"no product uses {self.component}: nothing to compare"]
        out: list[str] = []
        for product in self.products:
            if product.old_error:
                out.append(
                    f"{product.product}: the previous pin did not build: {product.old_error}"
                )
            if product.new_error:
                out.append(f"{product.product}: THE NEW PIN DOES NOT BUILD: {product.new_error}")
            for t in product.targets:
                out.append(
                    f"{product.product} {t.target}: {t.old_size:,} → {t.new_size:,} bytes "
                    f"({t.size_delta:+,} B, {t.size_delta / MIB:+.2f} MiB)"
                )
                out += [f"  + {c.directory}/{c.name} ({_new(c)})" for c in t.added]
                out += [f"  - {c.directory}/{c.name} ({_old(c)})" for c in t.removed]
                out += [f"  ~ {c.directory}/{c.name} ({_old(c)} → {_new(c)})" for c in t.changed]
                out += [f"  external + {e}" for e in t.externals_added]
                out += [f"  external - {e}" for e in t.externals_removed]
                out += [f"  licence {_licence(c)}" for c in t.licences]
                if t.unchanged:
                    out.append("  no file, external or licence changed")
        return out

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


def _old(change: FileChange) -> str:
    return f"-> {change.old_link}" if change.old_link else f"{change.old_size or 0:,} B"


def _new(change: FileChange) -> str:
    return f"-> {change.new_link}" if change.new_link else f"{change.new_size or 0:,} B"


def _licence(change: LicenceChange) -> str:
    if change.old is None:
        return f"+ {change.component} {change.new}"
    if change.new is None:
        return f"- {change.component} {change.old}"
    return f"~ {change.component} {change.old} → {change.new}"


_Files = dict[tuple[str, str], tuple[int, str, str | None]]  # (dir, name) → size, sha256, link


@dataclass(frozen=True)
class _TargetState:
    files: _Files | None  # None: the build failed its audit, so only licences are known
    externals: dict[str, str] | None
    licences: dict[str, str]  # component → "version (expression)"


@dataclass(frozen=True)
class _Side:
    targets: dict[str, _TargetState]
    error: OrtbundleError | None


def _licences(licensing: TargetLicensing) -> dict[str, str]:
    return {c.name: f"{c.version} ({c.expression})" for c in licensing.components}


def _state(result: BuildResult) -> dict[str, _TargetState]:
    states = {}
    for target in result.targets:
        files: _Files = {}
        externals: dict[str, str] = {}
        for runtime in target.runtimes:
            for f in runtime.files:
                name = f.path.removeprefix(runtime.directory + "/")
                files[(runtime.directory, name)] = (f.size, f.sha256, f.link_to)
            for e in runtime.closure.externals:
                externals[f"{runtime.directory}: {e.name}"] = f"({e.group}, {e.kind})"
        states[target.target] = _TargetState(files, externals, _licences(target.licensing))
    return states


def _build_side(project: Project, options: BuildOptions, reporter: Reporter) -> _Side:
    try:
        return _Side(_state(build(project, options, reporter)), None)
    except AuditFailed as failed:
        licences = {t.target: _TargetState(None, None, _licences(t)) for t in failed.licensing}
        return _Side(licences, failed)
    except OrtbundleError as exc:
        return _Side({}, exc)


def _compare(product: str, targets: Sequence[str], old: _Side, new: _Side) -> ProductBump:
    bumps = []
    for name in targets:
        before, after = old.targets.get(name), new.targets.get(name)
        if before is None or after is None:
            continue
        added: list[FileChange] = []
        removed: list[FileChange] = []
        changed: list[FileChange] = []
        old_size = new_size = 0
        if before.files is not None and after.files is not None:
            for key in sorted(before.files.keys() | after.files.keys()):
                was, now = before.files.get(key), after.files.get(key)
                change = FileChange(
                    key[0],
                    key[1],
                    was[0] if was else None,
                    now[0] if now else None,
                    was[2] if was else None,
                    now[2] if now else None,
                )
                if was is None:
                    added.append(change)
                elif now is None:
                    removed.append(change)
                elif was != now:
                    changed.append(change)
            old_size = sum(v[0] for v in before.files.values() if v[2] is None)
            new_size = sum(v[0] for v in after.files.values() if v[2] is None)
        licences = [
            LicenceChange(c, before.licences.get(c), after.licences.get(c))
            for c in sorted(before.licences.keys() | after.licences.keys())
            if before.licences.get(c) != after.licences.get(c)
        ]
        bumps.append(
            TargetBump(
                name,
                tuple(added),
                tuple(removed),
                tuple(changed),
                old_size,
                new_size,
                _gained(after.externals, before.externals),
                _gained(before.externals, after.externals),
                tuple(licences),
            )
        )
    return ProductBump(
        product,
        tuple(bumps),
        _describe(old.error),
        _describe(new.error),
        new.error.exit_code if new.error else 0,
    )


def _gained(side: dict[str, str] | None, other: dict[str, str] | None) -> tuple[str, ...]:
    """Externals `side` needs and `other` does not (nothing when either is unknown)."""
    if side is None or other is None:
        return ()
    return tuple(f"{k} {side[k]}" for k in sorted(side.keys() - other.keys()))


def _describe(error: OrtbundleError | None) -> str | None:
    return f"{error.kind} error: {error}" if error else None


def _overlay(project: Project, component: str, text: str, root: Path) -> Project:
    """A project that differs from `project` only in one recipe's text (and in where dist is)."""
    recipes = root / "recipes"
    recipes.mkdir(parents=True)
    for recipe in project.recipes.glob("*.toml"):
        shutil.copyfile(recipe, recipes / recipe.name)
    (recipes / f"{component}.toml").write_text(text, "utf-8", newline="")
    for shared in (project.manifests, project.licenses, project.keys):
        if shared.exists():
            (root / shared.name).symlink_to(shared.resolve(), target_is_directory=True)
    return Project(root=root, dist=root / "dist")


def bump_report(
    project: Project,
    component: str,
    old_text: str,
    new_text: str,
    options: PinOptions,
    reporter: Reporter,
) -> BumpReport:
    """Build every product using `component` with the old and the new recipe (audit only), aside."""
    environ = dict(os.environ if options.environ is None else options.environ)
    environ["SOURCE_DATE_EPOCH"] = environ.get("SOURCE_DATE_EPOCH") or "0"  # no git in the overlay
    products = []
    with tempfile.TemporaryDirectory(prefix="ortbundle-pin-") as tmp:
        old_project = _overlay(project, component, old_text, Path(tmp) / "old")
        new_project = _overlay(project, component, new_text, Path(tmp) / "new")
        for manifest in sorted(project.manifests.glob("*.toml")):
            product = load_product(manifest)
            if component in product.runtimes:
                targets = product.runtime_targets[component]
            elif component in product.plugins or component in product.models:
                targets = product.targets  # shipped wherever the product is
            else:
                continue
            build_options = BuildOptions(
                product=product.name,
                targets=targets,
                index_url=options.index_url,
                jobs=options.jobs,
                cache_dir=options.cache_dir,
                retry=options.retry,
                audit_only=True,
                environ=environ,
            )
            old = _build_side(old_project, build_options, reporter)
            new = _build_side(new_project, build_options, reporter)
            products.append(_compare(product.name, targets, old, new))
    return BumpReport(component, tuple(products))


# --- pin ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NotMoved:
    source: str
    project: str
    version: str
    reason: str


@dataclass(frozen=True)
class PinResult:
    component: str
    recipe: Path
    version: str  # the release the moved sources are pinned to now (or would be)
    moves: tuple[SourceMove, ...]  # empty: already pinned there
    not_moved: tuple[NotMoved, ...]
    edits: tuple[Edit, ...]
    notes: tuple[str, ...]
    report: BumpReport | None  # None with --no-build, or when nothing moved
    written: bool

    @property
    def refused(self) -> bool:
        """The new pin does not build, so the recipe was left as it was."""
        return bool(self.moves) and not self.written

    @property
    def exit_code(self) -> int:
        return (self.report.exit_code if self.report else 1) if self.refused else 0

    def lines(self) -> list[str]:
        out = [f"{self.component}: pinned to {self.version} ({self.recipe})"]
        if not self.moves:
            out[0] = f"{self.component}: already pinned to {self.version}; nothing to do"
        for m in self.moves:
            out.append(
                f"  {m.source}: {m.old_filename} → {m.new_filename} "
                f"(sha256 {m.sha256[:16]}…, {m.size:,} B)"
            )
            if m.tags_note:
                out.append(f"    {m.tags_note}")
            out += [f"    nested {n.member}: sha256 {n.sha256[:16]}…" for n in m.nested]
        for n in self.not_moved:
            out.append(f"  not moved: {n.source} ({n.project} {n.version}): {n.reason}")
        # the sources' own edits are the moves above; to_json() lists every edit
        out += [
            f"  edit {e.field}: {e.old} → {e.new}"
            for e in self.edits
            if not e.field.startswith("sources.")
        ]
        out += [f"  note: {n}" for n in self.notes]
        if self.report is not None:
            out += self.report.lines()
        if self.refused:
            out.append(
                f"{self.recipe.name} NOT rewritten: the new pin does not build "
                "(--force pins it anyway)"
            )
        elif self.written:
            out.append(f"{self.recipe.name} rewritten")
        return out

    def to_json(self) -> str:
        data = asdict(replace(self, report=None))
        data["recipe"] = str(self.recipe)
        data["report"] = asdict(self.report) if self.report else None
        data["refused"] = self.refused
        return json.dumps(data, indent=2)


def _tags_note(old: str, new: Listed) -> str | None:
    old_tags = _parse_wheel(old)
    if old_tags is None or old_tags[3] == new.tags:
        return None
    was, now = _Shape.of(old_tags[3]).level, _Shape.of(new.tags).level
    family = next(iter(_Shape.of(new.tags).families)).split(" ")[0]
    what = {"manylinux": "glibc", "musllinux": "musl", "macosx": "macOS"}.get(family, family)
    step = "" if was == now else f"; needs {what} {now[0]}.{now[1]}, was {was[0]}.{was[1]}"
    return (
        f"no file with the old tags ({_platforms(old_tags[3])}); took the closest of the same "
        f"platform family: {_platforms(new.tags)}{step}"
    )


def pin(project: Project, component: str, options: PinOptions, reporter: Reporter) -> PinResult:
    """Resolve, confirm, compare and rewrite; the recipe changes only if every step succeeded."""
    path = project.recipes / f"{component}.toml"
    recipe = load_recipe(path)
    original = path.read_bytes()
    moved, others, main = _selection(recipe, options.sources)
    main_ids = {s.id for s in recipe.sources.values() if canonicalize_name(project_of(s)) == main}
    not_moved = tuple(
        NotMoved(
            s.id,
            project_of(s),
            version_of(s.origin),
            f"another project; move it with `invoke pin {component} --source {s.id}`"
            if canonicalize_name(project_of(s)) != main
            else "not named by --source",
        )
        for s in others
    )
    moves: tuple[SourceMove, ...]
    if moved[0].origin.kind == "pypi":
        version, chosen, notes = _choose(moved, options, component)
        if all(c.filename == s.filename and c.sha256 == s.sha256 and s.size for s, c in chosen):
            return PinResult(component, path, version, (), not_moved, (), notes, None, False)
        moves = _confirm(chosen, version, options, component, reporter)
    else:
        with _registries(options, project.root) as registries:
            version, notes = _choose_published(moved, options, component, registries)
            if all(version_of(s.origin) == version and s.size for s in moved):
                return PinResult(component, path, version, (), not_moved, (), notes, None, False)
            moves = _confirm_published(
                project, moved, version, options, component, registries, reporter
            )
    old_text = original.decode("utf-8")
    all_main = main_ids <= {m.source for m in moves}
    new_text, edits, rewrite_notes = rewrite_recipe(old_text, moves, main, all_main)
    _validate(project, component, new_text, moves)
    report = (
        bump_report(project, component, old_text, new_text, options, reporter)
        if options.build
        else None
    )
    write = report is None or report.ok or options.force
    if write:
        _write_atomically(path, new_text, original)
    return PinResult(
        component, path, version, moves, not_moved, edits, notes + rewrite_notes, report, write
    )


@dataclass(frozen=True)
class _Chosen:
    """The file a source moves to, with the digest the index publishes for it."""

    filename: str
    sha256: str
    size: int | None
    listed: Listed


def _choose(
    moved: Sequence[Source], options: PinOptions, component: str
) -> tuple[str, list[tuple[Source, _Chosen]], tuple[str, ...]]:
    """The version, each moved source's new file, and notes; nothing is downloaded yet."""
    notes: list[str] = []
    with _index(options) as index:
        files = {s.id: index.files(s.pypi.project) for s in moved}
        for s in moved:
            if not files[s.id]:
                raise FetchError(
                    f"source {s.id}: no index lists wheels of {s.pypi.project} "
                    f"(looked in {index.where})",
                    component=component,
                    fix="check the project name, or point --index-url / PIP_INDEX_URL at an "
                    "index that carries it",
                )
    if options.version is not None:
        version = _version_or_none(options.version)
        if version is None:
            raise ConfigError(f"--version {options.version!r} is not a version")
    else:
        version, skipped = _newest(moved, files)
        notes += skipped
    chosen = []
    for s in moved:
        found = _match(s, files[s.id], version, yanked_ok=False) or (
            _match(s, files[s.id], version, yanked_ok=True) if options.version else None
        )
        if found is None:
            raise _no_file(s, str(version), files[s.id], component)
        if found.yanked:
            notes.append(f"{found.filename} is yanked; pinned because --version names it")
        if found.sha256 is None:
            raise IntegrityError(
                f"the index publishes no sha256 for {found.filename}; pin does not trust a "
                "download it cannot check",
                component=component,
                file=found.filename,
                fix="use an index that publishes digests (PEP 503 #sha256= or PEP 691 hashes)",
            )
        old = _version_or_none(s.pypi.version)
        if old is not None and old > version:
            notes.append(f"{s.id}: a downgrade from {s.pypi.version}")
        chosen.append((s, _Chosen(found.filename, found.sha256, found.size, found)))
    return str(version), chosen, tuple(notes)


def _confirm(
    chosen: Sequence[tuple[Source, _Chosen]],
    version: str,
    options: PinOptions,
    component: str,
    reporter: Reporter,
) -> tuple[SourceMove, ...]:
    """Download each new file through the cache, which refuses bytes that miss the digest."""
    fetcher = Fetcher(
        Cache(options.cache_dir or default_cache_dir()),
        reporter,
        index_url=options.index_url,
        policy=options.retry,
        environ=options.environ,
    )
    pinned = [
        Source(s.id, PypiCoordinates(s.pypi.project, version, c.filename), c.sha256, c.size)
        for s, c in chosen
    ]
    artifacts = fetcher.fetch_all(
        ((component, p) for p in pinned), jobs=options.jobs or os.cpu_count() or 1
    )
    return tuple(
        SourceMove(
            s.id,
            s.pypi.project,
            s.pypi.version,
            s.filename,
            version,
            c.filename,
            c.sha256,
            artifacts[c.sha256].size,
            _tags_note(s.filename, c.listed),
        )
        for s, c in chosen
    )


def _validate(project: Project, component: str, text: str, moves: Sequence[SourceMove]) -> None:
    """The rewritten text must load as a recipe carrying exactly the new pins."""
    with tempfile.TemporaryDirectory(prefix="ortbundle-pin-") as tmp:
        path = Path(tmp) / f"{component}.toml"
        path.write_text(text, "utf-8", newline="")
        recipe = load_recipe(path)
    for move in moves:
        source = recipe.sources[move.source]
        got = (source.filename, source.sha256, source.size, version_of(source.origin))
        nested = move.nested or source.nested  # a move without nested leaves them alone
        if got != (move.new_filename, move.sha256, move.size, move.new_version) or (
            source.nested != nested
        ):
            raise ConfigError(  # pragma: no cover - a bug in rewrite_recipe, not a user error
                f"the rewritten recipe does not carry the new pin of {move.source}",
                component=component,
                file=str(project.recipes / f"{component}.toml"),
            )


def _write_atomically(path: Path, text: str, expected: bytes) -> None:
    """Replace the recipe in one rename, unless someone changed it while pin was running."""
    if path.read_bytes() != expected:
        raise ConfigError(
            "the recipe changed on disk while pin was running; nothing was written",
            file=str(path),
            fix="run pin again",
        )
    tmp = path.with_name(f".{path.name}.pin-{os.getpid()}")
    try:
        with tmp.open("w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        tmp.chmod(path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# --- check -------------------------------------------------------------------------------------

_SEVERITY = {
    "current": 0,
    "held": 0,
    "stale": 1,
    "unpinned": 2,
    "unreachable": 3,
    "gone": 4,
    "mismatch": 5,
}
_EXIT = {
    "current": 0,
    "held": 0,
    "stale": ConfigError.exit_code,
    "unpinned": ConfigError.exit_code,
    "unreachable": FetchError.exit_code,
    "gone": FetchError.exit_code,
    "mismatch": IntegrityError.exit_code,
}
_REACH = {
    "pypi": "reach a package index: PIP_INDEX_URL, pip's index-url or --index-url",
    "maven": f"reach a Maven repository: {ENV_MAVEN_URL}, or a <mirror> of central in settings.xml",
    "npm": f"reach an npm registry: {ENV_NPM_REGISTRY}, npm_config_registry or registry= in .npmrc",
}


@dataclass(frozen=True)
class PinStatus:
    component: str
    source: str
    project: str  # a PyPI project, a Maven group:artifact, an npm package
    version: str
    filename: str
    # current, held, stale (newer release), unpinned (no sha256/size), gone, mismatch,
    # unreachable (not checked: the registry is not configured or did not answer)
    state: str
    details: tuple[str, ...]
    newest: str | None  # the newest release with a file for this source, when newer
    command: str  # what moves it (for unreachable: what to configure)
    kind: str = "pypi"  # pypi, maven, npm


@dataclass(frozen=True)
class CheckReport:
    statuses: tuple[PinStatus, ...]

    @property
    def ok(self) -> bool:
        return all(s.state in ("current", "held") for s in self.statuses)

    @property
    def unchecked(self) -> int:
        return sum(1 for s in self.statuses if s.state == "unreachable")

    @property
    def exit_code(self) -> int:
        """The worst state's: 4 digest mismatch, 3 file gone or registry unreachable, 2 stale
        or unpinned, 0 clean. A pin that could not be checked is not reported clean."""
        return max((_EXIT[s.state] for s in self.statuses), default=0)

    def lines(self) -> list[str]:
        out = []
        for s in self.statuses:
            kind = "" if s.kind == "pypi" else f"{s.kind} "
            version = f" {s.version}" if s.version else ""
            head = f"{s.component}/{s.source}: {kind}{s.project}{version} {s.state}"
            tail = f" — {'; '.join(s.details)}" if s.details else ""
            fix = f" ({s.command})" if s.state not in ("current", "held") else ""
            out.append(head + tail + fix)
        stale = sum(1 for s in self.statuses if s.state not in ("current", "held", "unreachable"))
        total, unchecked = len(self.statuses), self.unchecked
        if unchecked:
            out.append(
                f"{total - unchecked} of {total} pins checked, {stale} need attention; "
                f"{unchecked} could not be checked (registry not configured or not answering: "
                f"exit {FetchError.exit_code} unless a worse finding)"
            )
        else:
            out.append(f"{total} pins checked, {stale} need attention")
        return out

    def to_json(self) -> str:
        return json.dumps(
            {
                "ok": self.ok,
                "exit_code": self.exit_code,
                "unchecked": self.unchecked,
                "statuses": [asdict(s) for s in self.statuses],
            },
            indent=2,
        )


_COORDINATES = {  # the fields each kind's table needs; url and path are plain strings
    "pypi": ("project", "version", "filename"),
    "maven": ("group", "artifact", "version"),
    "npm": ("package", "version"),
    "url": (),
    "path": (),
}


def _lenient_origin(sid: str, table: object, path: Path) -> Coordinates:
    kinds = [k for k in _COORDINATES if isinstance(table, dict) and k in table]
    value = table.get(kinds[0]) if isinstance(table, dict) and len(kinds) == 1 else None
    fields = _COORDINATES[kinds[0]] if len(kinds) == 1 else ()
    origin: dict[str, Any] = {}
    if isinstance(value, dict) and fields:
        usable = all(isinstance(value.get(k), str) and value.get(k) for k in fields)
        origin = {k: v for k, v in value.items() if isinstance(v, str)}
    else:
        usable = isinstance(value, str) and bool(value) and not fields
        origin = {kinds[0]: value} if usable else {}
    if usable:
        try:
            record = {"id": sid, "origin": {"kind": kinds[0], **origin}, "sha256": "", "size": 0}
            return source_from_json(record).origin
        except (KeyError, TypeError):
            pass
    raise ConfigError(
        f"[sources.{sid}] needs one of pypi = {{ project, version, filename }}, "
        'maven = { group, artifact, version }, npm = { package, version }, url = "…", '
        'path = "…"',
        file=str(path),
    )


def _lenient_sources(path: Path) -> dict[str, Source]:
    """The sources, read without load_recipe's checks: an unpinned source is a finding here."""
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the recipe: {exc}", file=str(path)) from None
    tables = data.get("sources")
    sources = {}
    for sid, table in (tables if isinstance(tables, dict) else {}).items():
        origin = _lenient_origin(sid, table, path)
        sha256, size = table.get("sha256"), table.get("size")
        hold = table.get("hold")
        nested = table.get("nested")
        sources[sid] = Source(
            sid,
            origin,
            sha256.lower() if isinstance(sha256, str) else "",
            size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None,
            hold if isinstance(hold, str) and hold else None,
            tuple(
                NestedMember(
                    str(level.get("member", "")),
                    str(level.get("sha256", "")).lower(),
                )
                for level in (nested if isinstance(nested, list) else [])
                if isinstance(level, dict)
            ),
        )
    if not sources:
        raise ConfigError("the recipe has no [sources.<id>]", file=str(path))
    return sources


def check_pins(project: Project, components: Sequence[str], options: PinOptions) -> CheckReport:
    """Every source of the components (all recipes if none): stale, unpinned, gone, mismatched,
    or unreachable.

    Staleness follows pin's own rule, so a clean pin always checks clean: the component's own
    sources are judged together (the newest release with a file for each of them), the sources
    of any other project together per project (what `--source` would move).

    What each registry is asked, and what it can tell:
    - PyPI: the project page; gone when the pinned file is no longer listed, mismatch when the
      index publishes another sha256, stale when the file is yanked or a release is newer.
    - npm: the package document; gone when the pinned version is absent, mismatch when its
      integrity carries a sha256 other than the pin — or, when the cache holds the pinned
      file, when its sha512/sha1 disagree with the integrity and shasum (the registry's usual
      digests, which say nothing about a SHA-256 otherwise); `dist-tags.latest` is named when
      it is not the newest release.
    - Maven: maven-metadata.xml for the versions, and the pinned file's `.sha1`/`.sha256`
      sidecar (one small GET; a HEAD of the file when neither exists): gone when no repository
      has the file, mismatch when a `.sha256` sidecar differs from the pin or the `.sha1` differs
      from the cached pinned file's. The file itself is never downloaded.
    - a plain URL or a file in the project (no versions, never stale): the URL is asked with a
      HEAD whether the file is still there; the file is hashed against its pin.
    Newer versions: the newest release by the registry's ordering, SNAPSHOTs and pre-releases
    passed over unless the pin is one; `hold = "…"` turns stale into held, as for PyPI.

    A registry that is not configured or does not answer (after the usual retries) is not a
    crash: its sources are reported "unreachable" with the reason, every other source is still
    checked, and a registry that failed once is not asked again in the same run. Exit code:
    the worst state's — 4 mismatch, 3 gone or unreachable, 2 stale or unpinned, 0 clean. An
    unreachable source fails the check (3) because a check that could not look is not a clean
    one: CI must not read "all pins current" from a run that never saw some of them. A CI
    without access to a registry checks the components it can reach (`--check` with a
    component), or reads `unchecked` and the states in the JSON report.
    """
    names = list(components) or sorted(p.stem for p in project.recipes.glob("*.toml"))
    cache = Cache(options.cache_dir or default_cache_dir())
    statuses = []
    with _index(options) as index, _registries(options, project.root) as registries:
        for name in names:
            sources = _lenient_sources(project.recipes / f"{name}.toml")
            try:
                main: str | None = main_project({sid: project_of(s) for sid, s in sources.items()})
            except ConfigError:
                main = None  # no own project: every group moves with --source
            found: dict[str, PinStatus] = {}
            groups: dict[tuple[str, str], list[Source]] = {}
            for source in sources.values():
                group_key = (source.origin.kind, canonicalize_name(project_of(source)))
                groups.setdefault(group_key, []).append(source)
            for (kind, key), group in groups.items():
                moves = "" if key == main else "".join(f" --source {s.id}" for s in group)
                command = f"invoke pin {name}{moves}"
                if kind == "pypi":
                    found.update(_check_wheels(name, group, index, command))
                elif kind in _VERSIONED:
                    found.update(_check_published(name, group, registries, cache, command))
                else:
                    for source in group:
                        found[source.id] = _check_unversioned(name, source, project, registries)
            statuses += [found[sid] for sid in sources]  # in the recipe's order
    return CheckReport(tuple(statuses))


def _pinning(source: Source) -> tuple[list[str], list[str]]:
    """(states, details) of what the recipe itself lacks."""
    states: list[str] = []
    details: list[str] = []
    if not re.fullmatch(r"[0-9a-f]{64}", source.sha256):
        states.append("unpinned")
        details.append("no sha256")
    if source.size is None:
        states.append("unpinned")
        details.append("no size")
    for level in source.nested:
        if not re.fullmatch(r"[0-9a-f]{64}", level.sha256):
            states.append("unpinned")
            details.append(f"no sha256 for nested {level.member}")
    return states, details


def _status(
    component: str,
    source: Source,
    states: Sequence[str],
    details: Sequence[str],
    newest: str | None,
    command: str,
) -> PinStatus:
    return PinStatus(
        component,
        source.id,
        project_of(source),
        version_of(source.origin),
        source.filename,
        max(states, key=_SEVERITY.__getitem__, default="current"),
        tuple(details),
        newest,
        command,
        source.origin.kind,
    )


def _unreachable(component: str, source: Source, exc: OrtbundleError, where: str) -> PinStatus:
    states, details = _pinning(source)
    reason = exc.message
    if isinstance(exc, FetchError):  # configured, and did not answer
        if project_of(source) not in reason and source.filename not in reason:
            reason += " (so the registry was not asked again)"
        reason += f" [from {where}]" if where else ""
    details.insert(0, f"not checked: {reason}")
    return _status(
        component, source, ["unreachable", *states], details, None, _REACH[source.origin.kind]
    )


def _check_wheels(
    component: str, group: Sequence[Source], index: _Index, command: str
) -> dict[str, PinStatus]:
    try:
        files = {s.id: index.files(s.pypi.project) for s in group}
    except (FetchError, ConfigError) as exc:
        return {s.id: _unreachable(component, s, exc, "") for s in group}
    try:
        newest, skipped = _newest(group, files)
    except FetchError:
        newest, skipped = None, []
    blocked = tuple(n for n in skipped if "no file" in n)
    return {s.id: _check_source(component, s, files[s.id], newest, blocked, command) for s in group}


def _check_source(
    component: str,
    source: Source,
    files: Sequence[Listed],
    newest: Version | None,
    blocked: Sequence[str],
    command: str,
) -> PinStatus:
    states, details = _pinning(source)
    listed = next((f for f in files if f.filename == source.filename), None)
    if listed is None:
        states.append("gone")
        details.append(f"the index no longer lists {source.filename}")
    elif listed.sha256 and source.sha256 and listed.sha256 != source.sha256:
        states.append("mismatch")
        details.append(f"the index publishes sha256 {listed.sha256}")
    elif listed.yanked:
        states.append("stale")
        details.append("the pinned file is yanked")
    pinned = _version_or_none(source.pypi.version)
    newer = newest is not None and (pinned is None or newest > pinned)
    if newer and source.hold:
        states.append("held")
        details.append(f"{newest} is out; held: {source.hold}")
    elif newer:
        states.append("stale")
        details.append(f"{newest} is out")
    details += blocked
    return _status(component, source, states, details, str(newest) if newer else None, command)


def _check_published(
    component: str,
    group: Sequence[Source],
    registries: _Registries,
    cache: Cache,
    command: str,
) -> dict[str, PinStatus]:
    """The Maven or npm sources of one project: one registry read, then each pin."""
    kind = group[0].origin.kind
    try:
        published = registries.published(group[0])
    except (FetchError, ConfigError) as exc:
        where = registries.where(kind, project_of(group[0]))
        return {s.id: _unreachable(component, s, exc, where) for s in group}
    newest, _skipped = (
        _newest_release(kind, published.versions, [version_of(s.origin) for s in group], {})
        if published is not None
        else (None, [])
    )
    out = {}
    for source in group:
        try:
            out[source.id] = _check_one_published(
                component, source, published, newest, registries, cache, command
            )
        except (FetchError, ConfigError) as exc:
            where = registries.where(kind, project_of(source))
            out[source.id] = _unreachable(component, source, exc, where)
    return out


def _check_one_published(
    component: str,
    source: Source,
    published: _Published | None,
    newest: str | None,
    registries: _Registries,
    cache: Cache,
    command: str,
) -> PinStatus:
    states, details = _pinning(source)
    origin = source.origin
    if isinstance(origin, NpmCoordinates):
        if published is None:
            states.append("gone")
            details.append(f"the registry has no package {origin.package}")
        elif origin.version not in published.versions:
            states.append("gone")
            details.append(f"the registry no longer lists {origin.version}")
        else:
            dist = registries.npm_dist(origin)
            problem = _npm_mismatch(source, dist, cache)
            if problem:
                states.append("mismatch")
                details.append(problem)
    elif isinstance(origin, MavenCoordinates):
        found = registries.maven_sidecar(origin)
        if found is None:
            states.append("gone")
            details.append(f"no configured repository has {origin.filename}")
        else:
            _repository, sidecar = found
            problem = _maven_mismatch(source, sidecar, cache)
            if problem:
                states.append("mismatch")
                details.append(problem)
            elif sidecar is None:
                details.append("published without a .sha1 or .sha256 sidecar")
            if published is not None and origin.version not in published.versions:
                details.append(f"maven-metadata.xml does not list {origin.version}")
        if published is None:
            details.append("no maven-metadata.xml: newer versions are not known")
    order = _version_order(origin.kind)
    pinned = version_of(origin)
    newer = newest is not None and order(newest) > order(pinned)
    if newer and source.hold:
        states.append("held")
        details.append(f"{newest} is out; held: {source.hold}")
    elif newer:
        states.append("stale")
        details.append(f"{newest} is out")
    latest = published.latest if published is not None else None
    if origin.kind == "npm" and latest and latest != (newest if newer else pinned):
        details.append(f"dist-tags.latest is {latest}")
    return _status(component, source, states, details, newest if newer else None, command)


def _check_unversioned(
    component: str, source: Source, project: Project, registries: _Registries
) -> PinStatus:
    """A source no registry versions: a plain URL is asked whether the file is still there (a
    HEAD), a file in the project is hashed against its pin. Neither can be stale."""
    states, details = _pinning(source)
    origin = source.origin
    url, local = getattr(origin, "url", None), getattr(origin, "path", None)
    if origin.kind == "url" and isinstance(url, str):
        session = registries.session("url")
        try:
            there = _head(session, url, {}, registries.policy, source.filename)
        except FetchError as exc:
            return _unreachable(component, source, exc, "")
        if not there:
            states.append("gone")
            details.append(f"the server no longer has {source.filename}")
    elif origin.kind == "path" and isinstance(local, str):
        file = project.root / local
        if not file.is_file():
            states.append("gone")
            details.append(f"{local} does not exist")
        elif re.fullmatch(r"[0-9a-f]{64}", source.sha256):
            digest = hashlib.sha256()
            with file.open("rb") as stream:
                while chunk := stream.read(CHUNK):
                    digest.update(chunk)
            if digest.hexdigest() != source.sha256:
                states.append("mismatch")
                details.append(f"{local} has sha256 {digest.hexdigest()}")
    return _status(
        component, source, states, details, None, "edit the pin by hand (no versions to move to)"
    )


def _cached_digests(source: Source, cache: Cache, algorithms: Iterable[str]) -> dict[str, str]:
    """The pinned file's digests, when the cache holds it; else nothing (never downloaded)."""
    wanted = sorted(set(algorithms))
    if not wanted or not re.fullmatch(r"[0-9a-f]{64}", source.sha256):
        return {}
    entry = cache.get(source.sha256)
    if entry is None:
        return {}
    hashes = {name: hashlib.new(name) for name in wanted}
    with entry.path.open("rb") as stream:
        while chunk := stream.read(CHUNK):
            for digest in hashes.values():
                digest.update(chunk)
    return {name: digest.hexdigest() for name, digest in hashes.items()}


def _npm_mismatch(source: Source, dist: NpmDist, cache: Cache) -> str | None:
    published: dict[str, set[str]] = {k: set(v) for k, v in dist.integrity.items()}
    if dist.shasum:
        published.setdefault("sha1", set()).add(dist.shasum)
    sha256 = published.pop("sha256", None)
    if sha256 and source.sha256 and source.sha256 not in sha256:
        return f"the registry's integrity gives sha256 {' or '.join(sorted(sha256))}"
    actual = _cached_digests(source, cache, published)
    for name in sorted(actual):
        if actual[name] not in published[name]:
            return (
                f"the registry publishes {name} {' or '.join(sorted(published[name]))}, the "
                f"cached pinned file's is {actual[name]}"
            )
    return None


def _maven_mismatch(source: Source, sidecar: tuple[str, str] | None, cache: Cache) -> str | None:
    if sidecar is None:
        return None
    algorithm, published = sidecar
    if algorithm == "sha256":
        actual: str | None = source.sha256 or None
    else:
        actual = _cached_digests(source, cache, (algorithm,)).get(algorithm)
    if actual is not None and actual != published:
        return f"the repository's .{algorithm} is {published}, the pinned file's is {actual}"
    return None
