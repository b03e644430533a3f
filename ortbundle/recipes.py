"""Recipes (`recipes/<component>.toml`) and product manifests (`manifests/<product>.toml`).

Parsing validates everything a later step relies on, so a mistake in a recipe is reported once,
up front, with the file it is in — not as a KeyError in the middle of a build.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import tomllib
import unicodedata
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

from ortbundle.archives import check_member_name
from ortbundle.errors import ConfigError
from ortbundle.targets import CHANNEL_TARGETS, get_target

if TYPE_CHECKING:
    from ortbundle.onnx_model import ModelGate

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# what may become one path component (dist/<product>/<version>, licenses/<component>/)
_PATH_WORD = re.compile(r"^[A-Za-z0-9_+][A-Za-z0-9._+-]*$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


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


@dataclass(frozen=True)
class Take:
    """Which members of one source may be staged as libraries."""

    source: str
    libraries: tuple[str, ...]  # globs over member paths


@dataclass(frozen=True)
class Payload:
    """Files shipped verbatim beside a runtime, outside the library closure: Hexagon DSP
    `Skel` libraries (loaded by the DSP, not the host linker), data files a plugin reads."""

    source: str
    files: tuple[str, ...]  # globs over member paths
    machines: tuple[str, ...]  # each file must be an ELF/PE of one of these; empty: any file
    place: str  # "beside" the libraries, or under "assets/" of the runtime directory
    reason: str


PAYLOAD_PLACES = ("beside", "assets")


@dataclass(frozen=True)
class Rename:
    """Ship a kept library under another name; its ELF SONAME (and its users' DT_NEEDED) follow."""

    old: str
    new: str


@dataclass(frozen=True)
class Drop:
    names: tuple[str, ...]  # globs over library file names
    reason: str


@dataclass(frozen=True)
class LicenseText:
    """A licence text: an archive member of a source, or a file under the repo's licenses/."""

    source: str | None
    member: str | None
    file: str | None

    def describe(self) -> str:
        return f"{self.source}:{self.member}" if self.source else f"licenses/{self.file}"


@dataclass(frozen=True)
class LicenseRule:
    """Which staged files belong to which licensed component."""

    component: str
    version: str
    expression: str
    files: tuple[str, ...]  # globs over staged file names
    texts: tuple[LicenseText, ...]
    purl: str | None = None  # package URL for the SBOM; derived when absent


@dataclass(frozen=True)
class TargetRecipe:
    target: str
    entry: str  # glob naming the entry library among the staged files
    takes: tuple[Take, ...]
    roots: tuple[str, ...]  # globs over library file names
    drops: tuple[Drop, ...]
    licenses: tuple[LicenseRule, ...]
    payloads: tuple[Payload, ...] = ()
    renames: tuple[Rename, ...] = ()

    def shipped_name(self, name: str) -> str:
        """The name a kept library is staged under, after the recipe's renames."""
        return next((r.new for r in self.renames if r.old == name), name)


@dataclass(frozen=True)
class Recipe:
    name: str
    kind: str
    version: str
    description: str
    label: str  # how a person names it: "OpenVINO", "WebGPU"
    providers: tuple[str, ...]
    gpu_vendors: tuple[str, ...]
    sources: dict[str, Source]
    targets: dict[str, TargetRecipe]
    path: Path
    digest: str  # SHA-256 of the recipe file: part of every cache key built from it
    ep_name: str | None = None  # plugin-ep: the factory's EP name (OrtEpDevice.ep_name)
    min_core: str | None = None  # plugin-ep: the oldest ONNX Runtime core it registers with
    soc_families: tuple[str, ...] = ()  # the SoC vendors it needs ("qualcomm"); empty: any

    @property
    def directory(self) -> str:
        """Where it is staged: a runtime under runtimes/, a plugin EP under plugins/."""
        return f"plugins/{self.name}" if self.kind == "plugin-ep" else f"runtimes/{self.name}"

    def for_target(self, target: str) -> TargetRecipe:
        if target not in self.targets:
            raise ConfigError(
                f"recipe {self.name} has no section for this target",
                component=self.name,
                target=target,
                file=str(self.path),
                fix=f"add [targets.{target}] to the recipe or drop the target from the product",
            )
        return self.targets[target]


@dataclass(frozen=True)
class PackagingSettings:
    """The product manifest's [packaging] table, with defaults filled in."""

    package_name: str  # Arch pkgname, NSIS install directory, Flatpak module name
    pkgrel: int
    publisher: str  # NSIS VersionInfo CompanyName and Add/Remove Programs publisher
    flatpak_app_id: str
    flatpak_runtime: str
    flatpak_runtime_version: str
    flatpak_sdk: str
    flatpak_command: str
    android_namespace: str = "org.example.app.runtime"  # Gradle namespace and Java package
    maintainer: str = ""  # "Name <address>" for .deb/.rpm; empty: publisher <packages@url host>


@dataclass(frozen=True)
class Waiver:
    """A person's signed-off exception: the audit accepts this file's gap and says so loudly."""

    file: str  # glob over target-relative staged paths
    license: str  # the attributed expression it accepts; a changed licence voids it
    reason: str
    reviewer: str
    targets: tuple[str, ...]  # empty: every target
    channels: tuple[str, ...]  # empty: every channel
    # The sign-off a --release needs (ortbundle/waivers.py): the bytes reviewed, when, until when.
    sha256: tuple[str, ...] = ()  # of each file it covers: other bytes re-open the question
    reviewed: date | None = None
    expires: date | None = None
    entry: str = ""  # where it is written: "waivers[0]"
    manifest: str = ""  # in which product manifest (file name only: no host path in outputs)


@dataclass(frozen=True)
class SystemSpec:
    """`[system]`: the oldest system the product promises to run on. A runtime whose binaries
    need newer stops the build (`on_newer = "error"`) or is reported (`"warn"`)."""

    glibc: str | None = None  # "2.28"
    windows: str | None = None  # NT version: "6.1", "10.0"
    android_api: int | None = None  # 24
    on_newer: str = "error"  # error | warn


@dataclass(frozen=True)
class Product:
    name: str
    version: str
    description: str
    url: str
    targets: tuple[str, ...]
    runtimes: tuple[str, ...]  # in the loader's search order
    models: tuple[str, ...]  # model recipes shipped on every target
    plugins: dict[str, tuple[str, ...]]  # plugin EP recipe -> the runtimes it registers with
    runtime_targets: dict[str, tuple[str, ...]]
    override_env: str  # the variable that names a runtime directory and wins outright
    channels: tuple[str, ...]  # packaging channels built for it
    packaging: PackagingSettings
    waivers: tuple[Waiver, ...]
    path: Path
    digest: str
    system: SystemSpec = SystemSpec()

    def runtimes_for(self, target: str) -> tuple[str, ...]:
        return tuple(r for r in self.runtimes if target in self.runtime_targets[r])


class _Reader:
    """Typed access to a TOML table that names the file in every error."""

    def __init__(self, path: Path, where: str, table: Any) -> None:
        if not isinstance(table, dict):
            raise ConfigError(f"{where} must be a table", file=str(path))
        self.path = path
        self.where = where
        self.table: dict[str, Any] = table

    def _fail(self, message: str) -> ConfigError:
        return ConfigError(f"{self.where}: {message}", file=str(self.path))

    def text(self, key: str, default: str | None = None) -> str:
        value = self.table.get(key, default)
        if not isinstance(value, str) or not value:
            raise self._fail(f"{key!r} must be a non-empty string")
        return value

    def opt_text(self, key: str) -> str | None:
        return self.text(key) if key in self.table else None

    def text_list(self, key: str, *, required: bool = True) -> tuple[str, ...]:
        value = self.table.get(key, [] if not required else None)
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self._fail(f"{key!r} must be a list of strings")
        if required and not value:
            raise self._fail(f"{key!r} must not be empty")
        return tuple(value)

    def target(self, name: str, key: str) -> None:
        """An unknown target named under `key` is refused naming this file and table."""
        try:
            get_target(name)
        except ConfigError as exc:
            error = self._fail(f"{key}: {exc.message}")
            error.target, error.fix = name, exc.fix
            raise error from None

    def http_url(self, key: str) -> str:
        """An http(s) URL with a host, one token: whitespace or a control character in it is a
        mistake (it would be refused, or mangled, by a package format much later)."""
        url = self.text(key)
        bad = sorted({c for c in url if c.isspace() or unicodedata.category(c).startswith("C")})
        if bad:
            raise self._fail(
                f"{key} {url!r} contains whitespace or control characters "
                f"({', '.join(map(ascii, bad))}): a URL is one token"
            )
        parts = urlsplit(url)
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise self._fail(f"{key} {url!r} must be an http(s) URL")
        return url

    def sub(self, key: str) -> _Reader:
        if key not in self.table:
            raise self._fail(f"missing [{key}]")
        return _Reader(self.path, f"{self.where}.{key}" if self.where else key, self.table[key])

    def subs(self, key: str) -> list[_Reader]:
        value = self.table.get(key, [])
        if not isinstance(value, list):
            raise self._fail(f"{key!r} must be an array of tables")
        return [_Reader(self.path, f"{self.where}.{key}[{i}]", v) for i, v in enumerate(value)]


def _load_toml(path: Path) -> tuple[dict[str, Any], str]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path.name} does not exist", file=str(path)) from None
    try:
        return tomllib.loads(raw.decode("utf-8")), hashlib.sha256(raw).hexdigest()
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"not valid TOML: {exc}", file=str(path)) from None


def _coordinates(reader: _Reader) -> Coordinates:
    kinds = [k for k in ("pypi", "maven", "npm", "url", "path") if k in reader.table]
    if len(kinds) != 1:
        raise reader._fail(
            'a source names exactly one of pypi = {…}, maven = {…}, npm = {…}, url = "…", '
            'path = "…"'
        )
    if kinds[0] == "url":
        url = reader.http_url("url")
        parts = urlsplit(url)
        if "@" in parts.netloc or parts.query:
            # the URL is copied into records, the manifest and error messages
            raise reader._fail(
                "url must carry no credentials or query (tokens): a recipe is published; "
                "give credentials to the server's own configuration instead"
            )
        return UrlCoordinates(url)
    if kinds[0] == "path":
        path = reader.text("path")
        problem = check_member_name(path)
        if problem:
            raise reader._fail(f"path {path!r} {problem}: it is relative to the project root")
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
                raise table._fail(f"{value!r} is not a Maven coordinate (letters, digits, . _ -)")
        return coords
    package = table.text("package")
    if not _NPM_NAME.match(package):
        raise table._fail(f"{package!r} is not an npm package name")
    version = table.text("version")
    if not _MAVEN_WORD.match(version.replace("+", "_")):
        raise table._fail(f"version {version!r} is not an exact npm version")
    return NpmCoordinates(package=package, version=version)


_MAVEN_WORD = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")
_NPM_NAME = re.compile(r"^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$")


def _digest(reader: _Reader, pinned: bool) -> str:
    """The table's sha256; lenient (`pinned=False`, for `pin --check`): "" when missing, and
    whatever is written otherwise — an unpinned source is a finding there, not an error."""
    if pinned:
        return reader.text("sha256").lower()
    value = reader.table.get("sha256")
    return value.lower() if isinstance(value, str) else ""


def _source(reader: _Reader, source_id: str, *, pinned: bool = True) -> Source:
    sha256 = _digest(reader, pinned)
    if pinned and not _SHA256.match(sha256):
        raise reader._fail("'sha256' must be 64 hex digits")
    size = reader.table.get("size")
    if size is not None and (not isinstance(size, int) or size <= 0):
        if pinned:
            raise reader._fail("'size' must be a positive integer")
        size = None
    nested = []
    for inner in reader.subs("nested"):
        member = inner.text("member")
        if check_member_name(member):
            raise inner._fail(f"member {member!r} {check_member_name(member)}")
        inner_sha = _digest(inner, pinned)
        if pinned and not _SHA256.match(inner_sha):
            raise inner._fail("'sha256' must be 64 hex digits (of the nested archive itself)")
        nested.append(NestedMember(member=member, sha256=inner_sha))
    if len(nested) > MAX_NESTING:
        raise reader._fail(
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


def _sources(top: _Reader, *, pinned: bool = True) -> dict[str, Source]:
    """[sources.<id>]: an id names scratch files (pin), so it is one plain word."""
    table = top.sub("sources")
    for sid in table.table:
        if not _PATH_WORD.match(sid):
            raise table._fail(f"source id {sid!r}: use letters, digits, . _ + -")
    return {sid: _source(table.sub(sid), sid, pinned=pinned) for sid in table.table}


def load_sources(path: Path, *, pinned: bool = True) -> dict[str, Source]:
    """A recipe's [sources] alone. `pinned=False` (`pin --check`) admits a missing or malformed
    sha256 or size, which the check reports as unpinned; everything else is checked as ever."""
    data, _sha = _load_toml(path)
    return _sources(_Reader(path, "", data), pinned=pinned)


def _texts(reader: _Reader, sources: dict[str, Source]) -> tuple[LicenseText, ...]:
    """`texts = [{ source, member } | { file }]`: where a component's licence texts come from."""
    texts = []
    for text in reader.subs("texts"):
        source, member, file = (
            text.opt_text("source"),
            text.opt_text("member"),
            text.opt_text("file"),
        )
        if (source is None) != (member is None) or (source is None) == (file is None):
            raise text._fail("a text is either {source, member} or {file}")
        if source is not None and source not in sources:
            raise text._fail(f"unknown source {source!r}")
        if file is not None and (
            Path(file).is_absolute() or ".." in Path(file).parts or file.startswith(".")
        ):
            raise text._fail(f"file {file!r} must be a path inside licenses/")
        texts.append(LicenseText(source=source, member=member, file=file))
    return tuple(texts)


def _license_rule(reader: _Reader, sources: dict[str, Source]) -> LicenseRule:
    component = reader.text("component")
    if not _PATH_WORD.match(component):
        raise reader._fail(f"component {component!r} becomes licenses/<component>/: one plain name")
    return LicenseRule(
        component=component,
        version=reader.text("version"),
        expression=reader.text("expression"),
        files=reader.text_list("files"),
        texts=_texts(reader, sources),
        purl=_purl(reader),
    )


def generic_purl(name: str, version: str) -> str:
    """The package URL of a component no registry names (pkg:generic, version percent-encoded)."""
    return f"pkg:generic/{name}@{quote(version, safe='')}"


def _purl(reader: _Reader) -> str | None:
    purl = reader.opt_text("purl")
    if purl is not None and not re.match(r"^pkg:[a-z][a-z0-9.+-]*/\S+$", purl):
        raise reader._fail(f"purl {purl!r} is not a package URL (pkg:type/name@version)")
    return purl


def _target_recipe(reader: _Reader, target: str, sources: dict[str, Source]) -> TargetRecipe:
    reader.target(target, "a recipe's [targets.<name>]")  # names this recipe file
    takes = []
    for take in reader.subs("take"):
        source = take.text("source")
        if source not in sources:
            raise take._fail(f"unknown source {source!r}")
        takes.append(Take(source=source, libraries=take.text_list("libraries")))
    if not takes:
        raise reader._fail("needs at least one [[...take]] naming a source")
    drops = tuple(
        Drop(names=d.text_list("names"), reason=d.text("reason")) for d in reader.subs("drop")
    )
    payloads = []
    for payload in reader.subs("payload"):
        source = payload.text("source")
        if source not in sources:
            raise payload._fail(f"unknown source {source!r}")
        place = payload.text("place", "beside")
        if place not in PAYLOAD_PLACES:
            raise payload._fail(f"place {place!r} must be one of {', '.join(PAYLOAD_PLACES)}")
        payloads.append(
            Payload(
                source=source,
                files=payload.text_list("files"),
                machines=payload.text_list("machines", required=False),
                place=place,
                reason=payload.text("reason"),
            )
        )
    renames = []
    for rename in reader.subs("rename"):
        old, new = rename.text("from"), rename.text("to")
        for value in (old, new):
            if "/" in value or not _PATH_WORD.match(value):
                raise rename._fail(f"{value!r} must be one plain file name")
        renames.append(Rename(old=old, new=new))
    if len({r.old for r in renames}) != len(renames) or len({r.new for r in renames}) != len(
        renames
    ):
        raise reader._fail("each library is renamed at most once, each new name used once")
    return TargetRecipe(
        target=target,
        entry=reader.text("entry"),
        takes=tuple(takes),
        roots=reader.text_list("roots"),
        drops=drops,
        licenses=tuple(_license_rule(r, sources) for r in reader.subs("licenses")),
        payloads=tuple(payloads),
        renames=tuple(renames),
    )


def load_recipe(path: Path) -> Recipe:
    data, digest = _load_toml(path)
    top = _Reader(path, "", data)
    component = top.sub("component")
    name = component.text("name")
    if not _NAME.match(name):
        raise component._fail(f"name {name!r} must be lower-case letters, digits, . _ -")
    if name != path.stem:
        raise component._fail(f"name {name!r} must match the file name {path.stem!r}")
    kind = component.text("kind")
    if kind not in ("runtime", "plugin-ep"):
        raise component._fail(f"kind {kind!r} is not supported (runtime, plugin-ep; model)")
    ep_name = component.text("ep_name") if kind == "plugin-ep" else None
    min_core = component.text("min_core") if kind == "plugin-ep" else None
    sources = _sources(top)
    targets_table = top.sub("targets")
    targets = {
        t: _target_recipe(targets_table.sub(t), t, sources) for t in sorted(targets_table.table)
    }
    return Recipe(
        name=name,
        kind=kind,
        version=component.text("version"),
        description=component.text("description"),
        label=component.text("label", name),
        providers=component.text_list("providers"),
        gpu_vendors=component.text_list("gpu_vendors", required=False),
        sources=sources,
        targets=targets,
        path=path,
        digest=digest,
        ep_name=ep_name,
        min_core=min_core,
        soc_families=component.text_list("soc_families", required=False),
    )


def load_product(path: Path) -> Product:
    data, digest = _load_toml(path)
    top = _Reader(path, "", data)
    product = top.sub("product")
    name = product.text("name")
    if not _NAME.match(name):
        raise product._fail(f"name {name!r} must be lower-case letters, digits, . _ -")
    targets = product.text_list("targets")
    for t in targets:
        product.target(t, "targets")
    runtimes = product.text_list("runtimes")
    runtime_targets: dict[str, tuple[str, ...]] = {}
    overrides = top.table.get("runtime", {})
    for runtime in runtimes:
        if isinstance(overrides, dict) and runtime in overrides:
            only = _Reader(path, f"runtime.{runtime}", overrides[runtime]).text_list("targets")
            unknown = sorted(set(only) - set(targets))
            if unknown:
                raise ConfigError(
                    f"runtime {runtime} names targets the product lacks: {', '.join(unknown)}",
                    file=str(path),
                )
            runtime_targets[runtime] = only
        else:
            runtime_targets[runtime] = targets
    channels = product.text_list("channels", required=False) or tuple(
        c for c, ts in CHANNEL_TARGETS.items() if set(ts) & set(targets)
    )
    for channel in channels:
        if channel not in CHANNEL_TARGETS or not set(CHANNEL_TARGETS[channel]) & set(targets):
            known = ", ".join(f"{c} ({' or '.join(ts)})" for c, ts in CHANNEL_TARGETS.items())
            raise product._fail(
                f"channel {channel!r} is unknown or none of its targets is built (known: {known})"
            )
    version = product.text("version")
    if not _PATH_WORD.match(version):
        raise product._fail(
            f"version {version!r} names a directory under dist/: use letters, digits, . _ + -"
        )
    return Product(
        name=name,
        version=version,
        description=product.text("description"),
        url=product.http_url("url"),
        targets=targets,
        runtimes=runtimes,
        models=product.text_list("models", required=False),
        plugins=_plugins(top, runtimes),
        runtime_targets=runtime_targets,
        override_env=_Reader(path, "loader", top.table.get("loader", {})).text(
            "override_env", "ORTBUNDLE_RUNTIME_DIR"
        ),
        channels=channels,
        packaging=_packaging(_Reader(path, "packaging", top.table.get("packaging", {})), name),
        waivers=tuple(_waiver(w, targets) for w in top.subs("waivers")),
        path=path,
        digest=digest,
        system=_system(_Reader(path, "system", top.table.get("system", {}))),
    )


_DOTTED = re.compile(r"^[0-9]+(\.[0-9]+)+$")
_SYSTEM_KEYS = ("glibc", "windows", "android_api", "on_newer")


def _system(reader: _Reader) -> SystemSpec:
    """`[system] glibc = "2.28"`, `windows = "10.0"`, `android_api = 24`, `on_newer`."""
    unknown = sorted(set(reader.table) - set(_SYSTEM_KEYS))
    if unknown:
        raise reader._fail(f"unknown key {unknown[0]!r} (known: {', '.join(_SYSTEM_KEYS)})")
    versions = {key: reader.opt_text(key) for key in ("glibc", "windows")}
    for key, value in versions.items():
        if value is not None and not _DOTTED.match(value):
            raise reader._fail(f'{key} {value!r} must be a dotted version such as "2.28"')
    api = reader.table.get("android_api")
    if api is not None and (not isinstance(api, int) or isinstance(api, bool) or api < 1):
        raise reader._fail("'android_api' must be a positive integer (an API level: 24)")
    on_newer = reader.text("on_newer", "error")
    if on_newer not in ("error", "warn"):
        raise reader._fail(f'on_newer {on_newer!r} must be "error" or "warn"')
    return SystemSpec(versions["glibc"], versions["windows"], api, on_newer)


_APP_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_-]*){2,}$")


def _plugins(top: _Reader, runtimes: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """`[plugin.<name>] pairs_with = [...]`: each plugin EP and the runtimes that load it."""
    table = top.table.get("plugin", {})
    if not isinstance(table, dict):
        raise top._fail("[plugin.<name>] must be tables")
    plugins: dict[str, tuple[str, ...]] = {}
    for name in table:
        reader = _Reader(top.path, f"plugin.{name}", table[name])
        pairs = reader.text_list("pairs_with")
        unknown = sorted(set(pairs) - set(runtimes))
        if unknown:
            raise reader._fail(f"pairs_with names runtimes the product lacks: {', '.join(unknown)}")
        plugins[name] = pairs
    return plugins


def _packaging(reader: _Reader, product: str) -> PackagingSettings:
    package_name = reader.text("package_name", f"{product}-onnxruntime")
    if not re.match(r"^[a-z0-9@_+][a-z0-9@._+-]*$", package_name):
        raise reader._fail(f"package_name {package_name!r}: use lower-case letters, digits, @._+-")
    app_id = reader.text("flatpak_app_id", f"org.example.{product.replace('-', '_')}")
    if not _APP_ID.match(app_id) or len(app_id) > 255:
        raise reader._fail(f"flatpak_app_id {app_id!r} is not a reverse-DNS application id")
    pkgrel = reader.table.get("pkgrel", 1)
    if not isinstance(pkgrel, int) or isinstance(pkgrel, bool) or pkgrel < 1:
        raise reader._fail("'pkgrel' must be a positive integer")
    return PackagingSettings(
        package_name=package_name,
        pkgrel=pkgrel,
        publisher=reader.text("publisher", product),
        flatpak_app_id=app_id,
        flatpak_runtime=reader.text("flatpak_runtime", "org.freedesktop.Platform"),
        flatpak_runtime_version=reader.text("flatpak_runtime_version", "24.08"),
        flatpak_sdk=reader.text("flatpak_sdk", "org.freedesktop.Sdk"),
        flatpak_command=reader.text("flatpak_command", product),
        android_namespace=_android_namespace(reader, product),
        maintainer=reader.opt_text("maintainer") or "",
    )


_JAVA_PACKAGE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")


def _android_namespace(reader: _Reader, product: str) -> str:
    """The runtime-loader module's Gradle namespace, also its Java package."""
    default = "org.example." + re.sub(r"[^a-z0-9_]", "_", product) + ".runtime"
    namespace = reader.text("android_namespace", default)
    if not _JAVA_PACKAGE.match(namespace):
        raise reader._fail(f"android_namespace {namespace!r} is not a Java package name")
    return namespace


def _waiver(reader: _Reader, targets: tuple[str, ...]) -> Waiver:
    waiver = Waiver(
        file=reader.text("file"),
        license=reader.text("license"),
        reason=reader.text("reason"),
        reviewer=reader.text("reviewer"),
        targets=reader.text_list("targets", required=False),
        channels=reader.text_list("channels", required=False),
        sha256=_waiver_sha256(reader),
        reviewed=_waiver_date(reader, "reviewed"),
        expires=_waiver_date(reader, "expires"),
        entry=reader.where.lstrip("."),
        manifest=reader.path.name,
    )
    unknown = sorted(set(waiver.targets) - set(targets))
    if unknown:
        raise reader._fail(f"names targets the product lacks: {', '.join(unknown)}")
    return waiver


def _waiver_sha256(reader: _Reader) -> tuple[str, ...]:
    """One digest, or a list when the waiver's glob covers several files."""
    values = reader.text_list("sha256", required=False)
    if not all(re.fullmatch(r"[0-9a-f]{64}", v) for v in values):
        raise reader._fail("'sha256' must be 64 lower-case hex digits (the reviewed file's)")
    return values


def _waiver_date(reader: _Reader, key: str) -> date | None:
    """A TOML date (reviewed = 2026-12-01) or the same as a string."""
    value = reader.table.get(key)
    if value is None or (isinstance(value, date) and not isinstance(value, datetime)):
        return value
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return date.fromisoformat(value)
    raise reader._fail(f"{key!r} must be a date, written YYYY-MM-DD")


# --- model recipes ------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelForm:
    name: str  # "f32", "a8w8", …
    canonical: bool
    derived_from: str | None
    source: str  # source id
    member: str  # archive member of that source; "" when the source is the model file itself
    sha256: str  # of the model file itself
    backends: tuple[str, ...]  # runtimes that load this form
    gate: ModelGate
    sidecars: tuple[tuple[str, str], ...]  # (member, staged file name)


@dataclass(frozen=True)
class ModelRecipe:
    name: str
    version: str
    label: str
    description: str
    sources: dict[str, Source]
    forms: tuple[ModelForm, ...]
    expression: str  # the weights' licence
    texts: tuple[LicenseText, ...]
    purl: str | None
    path: Path
    digest: str

    @property
    def canonical(self) -> ModelForm:
        return next(f for f in self.forms if f.canonical)


def load_model_recipe(path: Path) -> ModelRecipe:
    from ortbundle.onnx_model import gate_from_table  # only products that ship models pay for it

    data, digest = _load_toml(path)
    top = _Reader(path, "", data)
    component = top.sub("component")
    name = component.text("name")
    if not _NAME.match(name) or name != path.stem:
        raise component._fail(f"name {name!r} must be lower-case and match the file name")
    if component.text("kind") != "model":
        raise component._fail("kind must be 'model' for a model recipe")
    sources = _sources(top)
    forms: list[ModelForm] = []
    for form in top.subs("forms"):
        source = form.text("source")
        if source not in sources:
            raise form._fail(f"unknown source {source!r}")
        sha256 = form.text("sha256").lower()
        if not _SHA256.match(sha256):
            raise form._fail("'sha256' must be 64 hex digits (of the model file itself)")
        gate_table = form.table.get("gate", {})
        sidecars = []
        for sidecar in form.subs("sidecars"):
            member = sidecar.text("member")
            side_name = sidecar.text("name", member.rsplit("/", 1)[-1])
            if not _PATH_WORD.match(side_name):
                raise sidecar._fail(f"name {side_name!r} must be one plain file name")
            sidecars.append((member, side_name))
        if not _PATH_WORD.match(form.text("name")):
            raise form._fail("a form's name becomes a file name: letters, digits, . _ + -")
        forms.append(
            ModelForm(
                name=form.text("name"),
                canonical=bool(form.table.get("canonical", False)),
                derived_from=form.opt_text("derived_from"),
                source=source,
                member=form.table.get("member", "") and form.text("member"),
                sha256=sha256,
                backends=form.text_list("backends"),
                gate=gate_from_table(gate_table, where=f"{path} ({form.where}.gate)"),
                sidecars=tuple(sidecars),
            )
        )
    _check_forms(top, forms)
    license_table = top.sub("license")
    return ModelRecipe(
        name=name,
        version=component.text("version"),
        label=component.text("label", name),
        description=component.text("description"),
        sources=sources,
        forms=tuple(forms),
        expression=license_table.text("expression"),
        texts=_texts(license_table, sources),
        purl=_purl(license_table),
        path=path,
        digest=digest,
    )


def _check_forms(top: _Reader, forms: list[ModelForm]) -> None:
    names = [f.name for f in forms]
    if not forms:
        raise top._fail("a model recipe needs at least one [[forms]]")
    if len(set(names)) != len(names):
        raise top._fail("form names must be unique")
    canonical = [f for f in forms if f.canonical]
    if len(canonical) != 1:
        raise top._fail("exactly one form must be canonical = true (the f32 ONNX)")
    for form in forms:
        if form.canonical and form.derived_from:
            raise top._fail(f"the canonical form {form.name} cannot be derived from another")
        if not form.canonical and form.derived_from not in names:
            raise top._fail(f"form {form.name}: derived_from must name another form")


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
    }


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
    )
