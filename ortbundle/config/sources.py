"""Sources: where a pinned upstream artifact comes from (PyPI, Maven, npm, a URL, a file of the
project), the archives nested in it, how a recipe's `[sources.<id>]` is read, and their JSON
form (build records, the manifest)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from ortbundle._core.errors import ConfigError
from ortbundle._core.fsio import check_member_name
from ortbundle.config.schema import check_document, display_name
from ortbundle.config.tomlreader import TableReader, load_toml
from ortbundle.config.vocabulary import PATH_WORD, SHA256_HEX


@dataclass(frozen=True)
class PypiCoordinates:
    project: str
    version: str
    filename: str

    kind = "pypi"

    @property
    def name(self) -> str:
        return self.project

    def describe(self) -> str:
        return f"pypi:{self.project}=={self.version} ({self.filename})"

    def purl(self) -> str:
        return f"pkg:pypi/{self.project.lower().replace('_', '-')}@{quote(self.version, safe='')}"


@dataclass(frozen=True)
class MavenCoordinates:
    """group:artifact:version[:classifier]@packaging in a Maven repository layout."""

    group: str
    artifact: str
    version: str
    packaging: str = "aar"
    classifier: str | None = None

    kind = "maven"

    @property
    def name(self) -> str:
        return self.artifact

    @property
    def filename(self) -> str:
        tail = f"-{self.classifier}" if self.classifier else ""
        return f"{self.artifact}-{self.version}{tail}.{self.packaging}"

    @property
    def directory(self) -> str:
        """The artifact's version directory, relative to the repository root."""
        return f"{self.group.replace('.', '/')}/{self.artifact}/{self.version}"

    def describe(self) -> str:
        tail = f":{self.classifier}" if self.classifier else ""
        return f"maven:{self.group}:{self.artifact}:{self.version}{tail}@{self.packaging}"

    def purl(self) -> str:
        qualifiers = f"?type={self.packaging}"
        if self.classifier:
            qualifiers += f"&classifier={quote(self.classifier, safe='')}"
        return f"pkg:maven/{self.group}/{self.artifact}@{quote(self.version, safe='')}{qualifiers}"


@dataclass(frozen=True)
class NpmCoordinates:
    """A package version in an npm registry; the artifact is its published tarball."""

    package: str  # "name" or "@scope/name"
    version: str

    kind = "npm"

    @property
    def name(self) -> str:
        return self.package

    @property
    def filename(self) -> str:
        return f"{self.package.rsplit('/', 1)[-1]}-{self.version}.tgz"

    def describe(self) -> str:
        return f"npm:{self.package}@{self.version}"

    def purl(self) -> str:
        name = quote(self.package, safe="/").replace("@", "%40", 1)
        return f"pkg:npm/{name}@{quote(self.version, safe='')}"


@dataclass(frozen=True)
class UrlCoordinates:
    """A file at a plain URL (a model published on a web server); the pin is all we trust."""

    url: str

    kind = "url"

    @property
    def filename(self) -> str:
        return unquote(urlsplit(self.url).path.rsplit("/", 1)[-1]) or "download"

    @property
    def name(self) -> str:
        return self.filename

    def describe(self) -> str:
        return f"url:{self.url}"

    def purl(self) -> str:
        return (
            f"pkg:generic/{quote(self.filename, safe='')}?download_url={quote(self.url, safe='')}"
        )


@dataclass(frozen=True)
class LocalCoordinates:
    """A file in the project itself (a model the team trained), relative to the project root."""

    path: str

    kind = "path"

    @property
    def filename(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def name(self) -> str:
        return self.filename

    def describe(self) -> str:
        return f"path:{self.path}"

    def purl(self) -> str:
        return f"pkg:generic/{quote(self.filename, safe='')}"


Coordinates = (
    PypiCoordinates | MavenCoordinates | NpmCoordinates | UrlCoordinates | LocalCoordinates
)


@dataclass(frozen=True)
class NestedMember:
    """An archive inside the fetched one (an AAR in an npm tarball), pinned by its own SHA-256."""

    member: str
    sha256: str


MAX_NESTING = 2  # tarball → zip → AAR at most; deeper nesting is refused as hostile


@dataclass(frozen=True)
class BuildRecipe:
    """How a binary the release engineer's CI built from source was made: the pinned source
    archives (its corresponding source) and the build, so the manifest, the SBOM and the
    provenance can say which sources made which bytes."""

    sources: tuple[Source, ...]  # the recipe's sources it was built from, in the recipe's order
    command: str  # the build command, as run
    toolchain: str  # the compiler and target
    ort_headers: str | None = None  # the ONNX Runtime header version compiled against
    # what `invoke build-source` packs: archive member -> file of the build directory
    outputs: tuple[tuple[str, str], ...] = ()
    packages: tuple[str, ...] = ()  # Debian packages a fresh runner needs for the build

    def as_json(self) -> dict[str, Any]:
        """What the manifest and the build records say of the build (the sources by id)."""
        document: dict[str, Any] = {
            "sources": [s.id for s in self.sources],
            "command": self.command,
            "toolchain": self.toolchain,
        }
        if self.ort_headers is not None:
            document["ort_headers"] = self.ort_headers
        if self.outputs:
            document["outputs"] = dict(self.outputs)
        if self.packages:
            document["packages"] = list(self.packages)
        return document


@dataclass(frozen=True)
class Source:
    """One pinned upstream artifact, and the archive inside it that the recipe reads."""

    id: str
    origin: Coordinates
    sha256: str  # of the fetched file
    size: int | None = None
    hold: str | None = None  # why this pin must not follow newer releases (pin --check says so)
    nested: tuple[NestedMember, ...] = ()  # outermost first
    # why the wheel's RECORD digests are not checked (files signed after RECORD was written)
    stale_record: str | None = None
    build: BuildRecipe | None = None  # built from source: the source archives and the build

    @property
    def pypi(self) -> PypiCoordinates:
        if not isinstance(self.origin, PypiCoordinates):
            raise ConfigError(f"source {self.id} is {self.origin.describe()}, not a PyPI wheel")
        return self.origin

    @property
    def filename(self) -> str:
        return self.origin.filename

    @property
    def archive_sha256(self) -> str:
        """The SHA-256 of the archive the recipe's members are read from."""
        return self.nested[-1].sha256 if self.nested else self.sha256

    @property
    def archive_name(self) -> str:
        return self.nested[-1].member.rsplit("/", 1)[-1] if self.nested else self.filename

    def describe(self) -> str:
        inner = "".join(f" → {n.member}" for n in self.nested)
        return f"{self.origin.describe()}{inner}"


def _coordinates(reader: TableReader) -> Coordinates:
    kinds = [k for k in ("pypi", "maven", "npm", "url", "path") if k in reader.table]
    if len(kinds) != 1:
        raise reader.fail(
            'a source names exactly one of pypi = {…}, maven = {…}, npm = {…}, url = "…", '
            'path = "…"'
        )
    if kinds[0] == "url":
        url = reader.http_url("url")
        parts = urlsplit(url)
        if "@" in parts.netloc or parts.query:
            # the URL is copied into records, the manifest and error messages
            raise reader.fail(
                "url must carry no credentials or query (tokens): a recipe is published; "
                "give credentials to the server's own configuration instead"
            )
        return UrlCoordinates(url)
    if kinds[0] == "path":
        path = reader.text("path")
        problem = check_member_name(path)
        if problem:
            raise reader.fail(f"path {path!r} {problem}: it is relative to the project root")
        return LocalCoordinates(path)
    table = reader.sub(kinds[0])
    if kinds[0] == "pypi":
        return PypiCoordinates(
            project=table.text("project"),
            version=table.text("version"),
            filename=table.text("filename"),
        )
    if kinds[0] == "maven":
        coords = MavenCoordinates(
            group=table.text("group"),
            artifact=table.text("artifact"),
            version=table.text("version"),
            packaging=table.text("packaging", "aar"),
            classifier=table.opt_text("classifier"),
        )
        words = (coords.group, coords.artifact, coords.version, coords.packaging)
        for value in (*words, *([coords.classifier] if coords.classifier else [])):
            if not _MAVEN_WORD.match(value):
                raise table.fail(f"{value!r} is not a Maven coordinate (letters, digits, . _ -)")
        return coords
    package = table.text("package")
    if not _NPM_NAME.match(package):
        raise table.fail(f"{package!r} is not an npm package name")
    version = table.text("version")
    if not _MAVEN_WORD.match(version.replace("+", "_")):
        raise table.fail(f"version {version!r} is not an exact npm version")
    return NpmCoordinates(package=package, version=version)


_MAVEN_WORD = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")
_NPM_NAME = re.compile(r"^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$")


def _digest(reader: TableReader, pinned: bool) -> str:
    """The table's sha256; lenient (`pinned=False`, for `pin --check`): "" when missing, and
    whatever is written otherwise — an unpinned source is a finding there, not an error."""
    if pinned:
        return reader.text("sha256").lower()
    value = reader.table.get("sha256")
    return value.lower() if isinstance(value, str) else ""


def _source(reader: TableReader, source_id: str, *, pinned: bool = True) -> Source:
    sha256 = _digest(reader, pinned)
    if pinned and not SHA256_HEX.match(sha256):
        raise reader.fail("'sha256' must be 64 hex digits")
    size = reader.table.get("size")
    if size is not None and (not isinstance(size, int) or size <= 0):
        if pinned:
            raise reader.fail("'size' must be a positive integer")
        size = None
    nested = []
    for inner in reader.subs("nested"):
        member = inner.text("member")
        if check_member_name(member):
            raise inner.fail(f"member {member!r} {check_member_name(member)}")
        inner_sha = _digest(inner, pinned)
        if pinned and not SHA256_HEX.match(inner_sha):
            raise inner.fail("'sha256' must be 64 hex digits (of the nested archive itself)")
        nested.append(NestedMember(member=member, sha256=inner_sha))
    if len(nested) > MAX_NESTING:
        raise reader.fail(
            f"archives nested {len(nested)} deep; at most {MAX_NESTING} levels are read"
        )
    return Source(
        id=source_id,
        origin=_coordinates(reader),
        sha256=sha256,
        size=size,
        hold=reader.opt_text("hold"),
        nested=tuple(nested),
        stale_record=reader.opt_text("stale_record"),
    )


def read_sources(top: TableReader, *, pinned: bool = True) -> dict[str, Source]:
    """[sources.<id>]: an id names scratch files (pin), so it is one plain word. A source's
    `build` names other sources of the recipe, read first: its source archives."""
    table = top.sub("sources")
    for sid in table.table:
        if not PATH_WORD.match(sid):
            raise table.fail(f"source id {sid!r}: use letters, digits, . _ + -")
    sources = {sid: _source(table.sub(sid), sid, pinned=pinned) for sid in table.table}
    for sid in table.table:
        if "build" in table.sub(sid).table:
            build = _build(table.sub(sid).sub("build"), sid, sources, table.table)
            sources[sid] = replace(sources[sid], build=build)
    return sources


def _build(
    reader: TableReader, built: str, sources: dict[str, Source], raw: dict[str, Any]
) -> BuildRecipe:
    """`[sources.<id>.build]`: the ids it names are source archives, not built ones."""
    ids = reader.text_list("sources")
    for sid in ids:
        if sid not in sources:
            raise reader.fail(f"unknown source {sid!r}: name a [sources.<id>] of this recipe")
        if sid == built:
            raise reader.fail(f"source {sid!r} cannot be built from itself")
        if isinstance(raw[sid], dict) and "build" in raw[sid]:
            raise reader.fail(f"source {sid!r} is itself built: name its source archives")
    if len(set(ids)) != len(ids):
        raise reader.fail("each source archive is named once")
    outputs = tuple(
        sorted((str(k), str(v)) for k, v in raw[built]["build"].get("outputs", {}).items())
    )
    for member, file in outputs:
        for name in (member, file):
            if problem := check_member_name(name):
                raise reader.fail(f"outputs: {name!r} {problem}: a path inside the build")
    return BuildRecipe(
        sources=tuple(sources[sid] for sid in ids),
        command=reader.text("command"),
        toolchain=reader.text("toolchain"),
        ort_headers=reader.opt_text("ort_headers"),
        outputs=tuple(
            sorted((str(k), str(v)) for k, v in raw[built]["build"].get("outputs", {}).items())
        ),
        packages=tuple(raw[built]["build"].get("packages", [])),
    )


_UNPINNED = frozenset({"sha256", "size"})  # pin --check reports these itself


def load_sources(path: Path, *, pinned: bool = True) -> dict[str, Source]:
    """A recipe's [sources] alone. `pinned=False` (`pin --check`) admits a missing or malformed
    sha256 or size, which the check reports as unpinned; everything else is checked as ever."""
    data, _sha = load_toml(path)

    relax = frozenset() if pinned else _UNPINNED
    sources = {"sources": data.get("sources")}
    check_document(display_name(path), sources, "recipe-sources", relax, str(path))
    return read_sources(TableReader(path, "", data), pinned=pinned)


# --- sources as JSON (build records, the manifest) -------------------------------------------


def origin_to_json(origin: Coordinates) -> dict[str, str]:
    fields = {k: v for k, v in vars(origin).items() if v is not None}
    return {"kind": origin.kind, **fields, "filename": origin.filename}


def source_to_json(source: Source) -> dict[str, Any]:
    return {
        "id": source.id,
        "origin": origin_to_json(source.origin),
        "sha256": source.sha256,
        "size": source.size,
        "nested": [{"member": n.member, "sha256": n.sha256} for n in source.nested],
        **({"build": _build_to_json(source.build)} if source.build else {}),
    }


def _build_to_json(build: BuildRecipe) -> dict[str, Any]:
    """The build with its source archives whole (a record is read back without the recipe)."""
    return {**build.as_json(), "sources": [source_to_json(s) for s in build.sources]}


def source_from_json(data: dict[str, Any]) -> Source:
    """The inverse of source_to_json; raises KeyError/TypeError on a malformed record."""
    origin = dict(data["origin"])
    kind = origin.pop("kind")
    coords: Coordinates
    if kind == "pypi":
        coords = PypiCoordinates(origin["project"], origin["version"], origin["filename"])
    elif kind == "maven":
        coords = MavenCoordinates(
            origin["group"],
            origin["artifact"],
            origin["version"],
            origin.get("packaging", "aar"),
            origin.get("classifier"),
        )
    elif kind == "npm":
        coords = NpmCoordinates(origin["package"], origin["version"])
    elif kind == "url":
        coords = UrlCoordinates(origin["url"])
    elif kind == "path":
        coords = LocalCoordinates(origin["path"])
    else:
        raise KeyError(f"origin kind {kind!r}")
    return Source(
        id=data["id"],
        origin=coords,
        sha256=data["sha256"],
        size=data["size"],
        nested=tuple(NestedMember(n["member"], n["sha256"]) for n in data.get("nested", [])),
        build=_build_from_json(data["build"]) if "build" in data else None,
    )


def _build_from_json(data: dict[str, Any]) -> BuildRecipe:
    return BuildRecipe(
        sources=tuple(source_from_json(s) for s in data["sources"]),
        command=data["command"],
        toolchain=data["toolchain"],
        ort_headers=data.get("ort_headers"),
        outputs=tuple(sorted(data.get("outputs", {}).items())),
        packages=tuple(data.get("packages", [])),
    )
