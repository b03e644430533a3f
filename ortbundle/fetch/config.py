"""Where packages come from: each tool's own configuration, never a host written in this repository.

A release engineer behind a mirror already told pip, Maven and npm where their repositories are
(`PIP_INDEX_URL`, a `<mirror>` in settings.xml, `registry=` in .npmrc); we read the same settings
so one change moves both. The readers run only when something must be downloaded.
"""

from __future__ import annotations

import base64
import importlib
import os
import re
import shutil
import subprocess
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit, urlunsplit

from ortbundle.errors import ConfigError, OrtbundleError
from ortbundle.locations import (
    ENV_MAVEN_SETTINGS,
    ENV_MAVEN_URL,
    ENV_NPM_REGISTRY,
    maven_user_settings,
    npm_env,
    npm_user_config,
)

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

# pip reads its configuration in this order; the later scope wins.
_SCOPES = ("global", "download", "install", ":env:")


@dataclass(frozen=True)
class IndexConfig:
    index_urls: tuple[str, ...]  # primary first, then extra indexes
    cert: str | None  # CA bundle for requests, as pip would use it


def _pip_settings() -> dict[str, str]:
    try:
        configuration = importlib.import_module("pip._internal.configuration")
    except ImportError:  # pragma: no cover - pip ships with every supported Python
        return {}
    config: Any = configuration.Configuration(isolated=False)
    try:
        config.load()
    except Exception as exc:  # noqa: BLE001 - pip raises its own ConfigurationError types
        raise ConfigError(f"pip's configuration cannot be read: {exc}") from None
    settings: dict[str, str] = {}
    items = list(config.items())
    for scope in _SCOPES:
        for key, value in items:
            section, _, name = key.partition(".")
            if section == scope:
                settings[name] = str(value)
    return settings


def _pip_default_index() -> str:
    index = importlib.import_module("pip._internal.models.index")
    return str(index.PyPI.simple_url)


def index_config(explicit_index_url: str | None = None) -> IndexConfig:
    """The index URLs to resolve wheels through, as pip itself would use them."""
    settings = _pip_settings()
    cert = os.environ.get("REQUESTS_CA_BUNDLE") or settings.get("cert")
    if explicit_index_url:
        return IndexConfig(index_urls=(explicit_index_url,), cert=cert)
    primary = settings.get("index-url") or _pip_default_index()
    extras = [
        url
        for url in settings.get("extra-index-url", "").split()
        if url.startswith(("http://", "https://"))  # pip's file:// extras are local wheelhouses
    ]
    return IndexConfig(index_urls=(primary, *extras), cert=cert)


def redact(url: str) -> str:
    """The URL without user:password@ and without its query (where signed URLs and mirrors
    carry tokens) — for messages, the cache and the signed manifest."""
    parts = urlsplit(url)
    if "@" not in parts.netloc and not parts.query:
        return url
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=netloc, query="…" if parts.query else ""))


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """The URL without user:password@, and those credentials: they travel in a header, so
    they never reach a message, the cache or the manifest."""
    parts = urlsplit(url)
    if parts.username is None:
        return url, None
    return redact(url), (unquote(parts.username), unquote(parts.password or ""))


def basic_auth(user: str, password: str) -> str:
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return f"Basic {token}"


def _require_http(url: str, origin: str) -> str:
    if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
        raise ConfigError(
            f"{origin} names {redact(url)!r}, which is not an http(s) URL",
            file=origin,
            fix="give the repository's http:// or https:// URL",
        )
    return url


# ---- XML (settings.xml, the super POM, maven-metadata.xml) ------------------------------------


class _DocumentType(Exception):
    """Raised from inside expat: the document declares a DTD."""


def parse_xml(
    body: bytes, *, what: str, file: str, error: type[OrtbundleError] = ConfigError
) -> Element:
    """Parse XML that declares no document type: a DTD is where entity-expansion attacks live,
    and no settings.xml, POM or maven-metadata.xml needs one. Imported lazily: a warm build
    reads no XML."""
    from xml.etree import ElementTree
    from xml.parsers import expat

    def refuse(*_args: object) -> None:
        raise _DocumentType

    screen = expat.ParserCreate()  # a first pass that sees the DTD, whatever the encoding
    screen.StartDoctypeDeclHandler = refuse
    screen.EntityDeclHandler = refuse
    try:
        screen.Parse(body, True)
        return ElementTree.fromstring(body)  # noqa: S314 - no DTD got past the screen above
    except _DocumentType:
        raise error(f"{what} declares a document type; refused", file=file) from None
    except (expat.ExpatError, ElementTree.ParseError) as exc:
        raise error(f"{what} is not well-formed XML ({exc})", file=file) from None


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]  # settings.xml and POMs may or may not carry a namespace


def xml_children(element: Element | None, name: str) -> Iterator[Element]:
    """Direct children by local name, namespace or not."""
    if element is None:
        return
    for child in element:
        if isinstance(child.tag, str) and _local(child.tag) == name:
            yield child


def xml_child(element: Element | None, *path: str) -> Element | None:
    for name in path:
        element = next(xml_children(element, name), None)
    return element


def xml_text(element: Element | None, *path: str) -> str:
    found = xml_child(element, *path)
    return (found.text or "").strip() if found is not None else ""


# ---- Maven ------------------------------------------------------------------------------------

SUPER_POM = "org/apache/maven/model/pom-4.0.0.xml"  # inside maven-model-builder-*.jar
CENTRAL = "central"  # the id of Maven's default repository, which mirrors are matched against


@dataclass(frozen=True)
class MavenRepository:
    """One Maven repository to fetch from, with the credentials its settings give it."""

    url: str  # never with user:password@
    id: str
    origin: str  # where the setting came from, for messages
    auth: tuple[str, str] | None = field(default=None, repr=False)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": basic_auth(*self.auth)} if self.auth else {}

    def describe(self) -> str:
        return f"{self.url} ({self.origin})"


@dataclass(frozen=True)
class MavenConfig:
    repositories: tuple[MavenRepository, ...]  # tried in order


@dataclass(frozen=True)
class _Entry:
    """A <mirror> or <server>: checked only when used, so a broken entry Maven would never
    consult for central (an unset ${env.X} in another server) does not stop the build."""

    id: str
    origin: str  # the settings.xml it came from
    problem: str | None  # why it cannot be used, if it cannot


@dataclass(frozen=True)
class _Mirror(_Entry):
    mirror_of: str = ""
    url: str = ""
    blocked: bool = False


@dataclass(frozen=True)
class _Server(_Entry):
    credentials: tuple[str, str] = field(default=("", ""), repr=False)


@dataclass
class _Settings:
    mirrors: list[_Mirror] = field(default_factory=list)
    servers: dict[str, _Server] = field(default_factory=dict)


_MAVEN_EXPR = re.compile(r"\$\{([^}]*)\}")
_ENCRYPTED = re.compile(r"^\{[A-Za-z0-9+/=]+\}$")


def _interpolate(text: str, env: Mapping[str, str], unresolved: list[str]) -> str:
    """Maven's `${env.NAME}` and `${user.home}` in settings.xml; any other expression is
    collected in `unresolved`, never sent to a server as a literal."""

    def value(match: re.Match[str]) -> str:
        expression = match.group(1)
        if expression == "user.home":
            return str(Path(env.get("HOME", "~")).expanduser())
        if expression.startswith("env.") and expression[4:] in env:
            return env[expression[4:]]
        unresolved.append(f"${{{expression}}}")
        return match.group(0)

    return _MAVEN_EXPR.sub(value, text)


def _unresolved(names: list[str]) -> str | None:
    return f"it uses {', '.join(names)}, which is not set or not supported" if names else None


def _read_settings(path: Path, env: Mapping[str, str]) -> _Settings:
    file = str(path)
    try:
        body = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read Maven settings: {exc.strerror}", file=file) from None
    root = parse_xml(body, what="Maven settings", file=file)
    settings = _Settings()
    for mirror in xml_children(xml_child(root, "mirrors"), "mirror"):
        unresolved: list[str] = []
        url = _interpolate(xml_text(mirror, "url"), env, unresolved)
        mirror_of = _interpolate(xml_text(mirror, "mirrorOf"), env, unresolved)
        if not url or not mirror_of:
            continue  # Maven ignores an incomplete mirror too
        settings.mirrors.append(
            _Mirror(
                id=_interpolate(xml_text(mirror, "id"), env, unresolved) or "default",
                origin=file,
                problem=_unresolved(unresolved),
                mirror_of=mirror_of,
                url=url,
                blocked=xml_text(mirror, "blocked").lower() == "true",
            )
        )
    for server in xml_children(xml_child(root, "servers"), "server"):
        unresolved = []
        server_id = _interpolate(xml_text(server, "id"), env, unresolved)
        user = _interpolate(xml_text(server, "username"), env, unresolved)
        password = _interpolate(xml_text(server, "password"), env, unresolved)
        if not server_id or not user:
            continue
        problem = _unresolved(unresolved)
        if _ENCRYPTED.match(password):
            problem = (
                "its password is encrypted (settings-security.xml), which ortbundle cannot decrypt"
            )
        settings.servers.setdefault(
            server_id, _Server(server_id, file, problem, credentials=(user, password))
        )
    return settings


def _usable(entry: _Entry, what: str) -> None:
    if entry.problem:
        raise ConfigError(
            f"{what} {entry.id!r} would be used for central, but {entry.problem}",
            file=entry.origin,
            fix="set the environment variable (write ${env.NAME} for a secret), or fix the entry",
        )


def _credentials(
    servers: Mapping[str, _Server], repository_id: str, fallback: tuple[str, str] | None
) -> tuple[str, str] | None:
    """The <server> credentials Maven would send to this repository id."""
    server = servers.get(repository_id)
    if server is None:
        return fallback
    _usable(server, "the server")
    return server.credentials


def mirror_of_covers(pattern: str, repo_id: str = CENTRAL, *, external_https: bool = True) -> bool:
    """Maven's `<mirrorOf>` matching: `*`, an id, `external:*`, `external:http:*`, comma lists,
    and `!id` exclusions (which stop the search). Central is an external https repository."""
    pattern = pattern.strip()
    if pattern in ("*", repo_id):
        return True
    result = False
    for entry in (t.strip() for t in pattern.split(",")):
        if len(entry) > 1 and entry.startswith("!"):
            if entry[1:] == repo_id:
                return False
        elif entry == repo_id:
            return True
        elif entry in ("*", "external:*"):
            result = True  # a later !id may still exclude it
        elif entry == "external:http:*" and not external_https:
            result = True
    return result


def _select_mirror(mirrors: list[_Mirror]) -> _Mirror | None:
    """As Maven does: a mirror naming the id exactly wins, else the first pattern that covers it."""
    exact = next((m for m in mirrors if m.mirror_of.strip() == CENTRAL), None)
    return exact or next((m for m in mirrors if mirror_of_covers(m.mirror_of)), None)


def maven_home(env: Mapping[str, str]) -> Path | None:
    """The installation of the `mvn` on PATH (its script is often a symlink into it)."""
    mvn = shutil.which("mvn", path=env.get("PATH", os.defpath))
    return Path(mvn).resolve().parent.parent if mvn else None


def super_pom_central(home: Path) -> str | None:
    """Maven's own default repository: central's URL in the super POM of this installation."""
    lib = home / "lib"
    builders = sorted(lib.glob("maven-model-builder-*.jar"))
    others = sorted(p for p in lib.glob("maven-*.jar") if p not in builders)  # Maven 4 moved it
    for jar in [*builders, *others]:
        try:
            with zipfile.ZipFile(jar) as archive:
                body = archive.read(SUPER_POM)
        except KeyError:
            continue
        except (OSError, zipfile.BadZipFile) as exc:
            raise ConfigError(
                f"cannot read Maven's super POM from {jar}: {exc}",
                file=str(jar),
                fix=f"repair the Maven installation, or set {ENV_MAVEN_URL}",
            ) from None
        root = parse_xml(body, what="Maven's super POM", file=f"{jar}!{SUPER_POM}")
        for repository in xml_children(xml_child(root, "repositories"), "repository"):
            if xml_text(repository, "id") == CENTRAL and (url := xml_text(repository, "url")):
                return url
        return None
    return None


def maven_config(environ: Mapping[str, str] | None = None) -> MavenConfig:
    """The repositories to fetch Maven artifacts from, as Maven itself would pick them:
    ORTBUNDLE_MAVEN_URL, else a settings.xml mirror of central, else central from the super POM."""
    env = os.environ if environ is None else environ
    listed = env.get(ENV_MAVEN_URL, "").split()
    if listed:
        repositories = []
        for number, raw in enumerate(listed, 1):
            url, auth = split_credentials(_require_http(raw, ENV_MAVEN_URL))
            repositories.append(
                MavenRepository(
                    url, id=f"{ENV_MAVEN_URL}#{number}", origin=ENV_MAVEN_URL, auth=auth
                )
            )
        return MavenConfig(tuple(repositories))
    home = maven_home(env)
    user_settings = maven_user_settings(env)
    if env.get(ENV_MAVEN_SETTINGS, "").strip() and not user_settings.is_file():
        raise ConfigError(
            f"{ENV_MAVEN_SETTINGS} names a file that does not exist",
            file=str(user_settings),
            fix=f"point {ENV_MAVEN_SETTINGS} at a settings.xml, or unset it",
        )
    # Maven merges the user's settings over the installation's: the user's mirrors come first.
    settings = _Settings()
    for path in [user_settings, *([home / "conf" / "settings.xml"] if home else [])]:
        if path.is_file():
            read = _read_settings(path, env)
            known = {m.id for m in settings.mirrors}
            settings.mirrors += [m for m in read.mirrors if m.id not in known]
            for server_id, server in read.servers.items():
                settings.servers.setdefault(server_id, server)
    mirror = _select_mirror(settings.mirrors)
    if mirror is not None:
        _usable(mirror, "the mirror")
        if mirror.blocked:
            raise ConfigError(
                f"the mirror {mirror.id!r} that covers central is blocked",
                file=mirror.origin,
                fix=f"unblock it or add a mirror of central, or set {ENV_MAVEN_URL}",
            )
        url, auth = split_credentials(_require_http(mirror.url, mirror.origin))
        return MavenConfig(
            (
                MavenRepository(
                    url,
                    id=mirror.id,
                    origin=f"mirror {mirror.id} in {mirror.origin}",
                    auth=_credentials(settings.servers, mirror.id, auth),
                ),
            )
        )
    central = super_pom_central(home) if home else None
    if central:
        url, auth = split_credentials(_require_http(central, f"the super POM of {home}"))
        return MavenConfig(
            (
                MavenRepository(
                    url,
                    id=CENTRAL,
                    origin=f"central in the super POM of the Maven at {home}",
                    auth=_credentials(settings.servers, CENTRAL, auth),
                ),
            )
        )
    raise ConfigError(
        "no Maven repository is configured: "
        f"{ENV_MAVEN_URL} is unset, no settings.xml mirror covers central, and "
        + (
            "no Maven is installed (mvn is not on PATH)"
            if home is None
            else f"{home} has no super POM"
        ),
        file=str(user_settings),
        fix=f"set {ENV_MAVEN_URL} to a repository URL (several: space-separated), or add a "
        "<mirror> with <mirrorOf>central</mirrorOf> to ~/.m2/settings.xml",
    )


# ---- npm --------------------------------------------------------------------------------------

_NPM_EXPR = re.compile(r"\$\{([^${}?]+)(\?)?\}")
_AUTH_FIELDS = ("_authToken", "_auth", "username", "_password")


@dataclass(frozen=True)
class _Setting:
    value: str
    origin: str  # the file (or variable) it came from
    missing: tuple[str, ...] = ()  # environment variables it names that are not set


@dataclass(frozen=True)
class NpmAuth:
    """Credentials npm would send to every URL under `prefix` ("//host[:port]/path/")."""

    prefix: str
    header: str = field(repr=False)
    origin: str = ""
    missing: tuple[str, ...] = ()  # ${VARIABLES} the setting needs and the environment lacks


@dataclass(frozen=True)
class NpmConfig:
    registry: str | None  # None: nothing configured and npm's own default unavailable
    origin: str  # where `registry` came from
    scopes: tuple[tuple[str, str, str], ...] = ()  # (@scope, registry, origin)
    auth: tuple[NpmAuth, ...] = field(default=(), repr=False)
    cert: str | None = None  # CA bundle: REQUESTS_CA_BUNDLE, else npm's cafile
    override: bool = False  # ORTBUNDLE_NPM_REGISTRY: one registry for every package

    def registry_for(self, package: str) -> tuple[str, str]:
        """The registry (and where it was configured) a package is fetched from: its scope's
        `@scope:registry` if one is set, else `registry`."""
        if package.startswith("@") and not self.override:
            scope = package.split("/", 1)[0]
            for name, url, origin in self.scopes:
                if name == scope:
                    return url, origin
        if self.registry is None:
            raise ConfigError(
                f"no npm registry is configured for {package}, and npm itself is not "
                "available to say its default",
                file=package,
                fix=f"set {ENV_NPM_REGISTRY} (or registry= in ~/.npmrc) to the registry's URL",
            )
        return self.registry, self.origin

    def headers_for(self, url: str) -> dict[str, str]:
        """The Authorization header npm would send to `url`: the longest configured
        //host/path/ prefix it falls under, if any."""
        nerf = _nerf_dart(url)
        best: NpmAuth | None = None
        for auth in self.auth:
            if nerf.startswith(auth.prefix) and (
                best is None or len(auth.prefix) > len(best.prefix)
            ):
                best = auth
        if best is None:
            return {}
        if best.missing:
            variable = best.missing[0]
            raise ConfigError(
                f"the npm credentials for {best.prefix} use ${{{variable}}}, which is not set",
                file=best.origin,
                fix=f"export {variable} before building",
            )
        return {"Authorization": best.header}


def _nerf_dart(url: str) -> str:
    """npm's key for per-registry settings: the URL without scheme and credentials."""
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    path = parts.path if parts.path.endswith("/") else parts.path.rsplit("/", 1)[0] + "/"
    return f"//{host}{path}"


def _expand_npm(text: str, env: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """npm's ${NAME} (and ${NAME?}, empty when unset) in .npmrc; names left unset are returned."""
    missing: list[str] = []

    def value(match: re.Match[str]) -> str:
        name, optional = match.group(1), match.group(2)
        if name in env:
            return env[name]
        if not optional:
            missing.append(name)
            return match.group(0)
        return ""

    return _NPM_EXPR.sub(value, text), tuple(missing)


def _read_npmrc(path: Path, env: Mapping[str, str]) -> dict[str, _Setting]:
    """An .npmrc in npm's ini dialect: key = value, `;`/`#` comments, quoted values."""
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read npm configuration: {exc}", file=str(path)) from None
    settings: dict[str, _Setting] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;[":
            continue
        key, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        key, key_missing = _expand_npm(key.strip(), env)
        value, value_missing = _expand_npm(value, env)
        settings[key] = _Setting(value, str(path), key_missing + value_missing)
    return settings


def _npm_prefix(settings: Mapping[str, str], env: Mapping[str, str]) -> Path | None:
    """npm's global prefix: `prefix` from the environment, else the directory above the bin/
    holding the `npm` on PATH (/usr/bin/npm → /usr)."""
    if settings.get("prefix"):
        return Path(settings["prefix"]).expanduser()
    npm = shutil.which("npm", path=env.get("PATH", os.defpath))
    return Path(npm).parent.parent if npm else None


def npm_default_registry(env: Mapping[str, str], cwd: Path | None = None) -> str | None:
    """npm's own default, by asking npm; None when npm is not installed or does not answer."""
    npm = shutil.which("npm", path=env.get("PATH", os.defpath))
    if npm is None:
        return None
    try:
        answer = subprocess.run(
            [npm, "config", "get", "registry"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            cwd=cwd,
            env=dict(env),
        )
    except (OSError, subprocess.SubprocessError):
        return None
    url = answer.stdout.strip()
    return url if urlsplit(url).scheme in ("http", "https") else None


def npm_config(
    project_root: Path | None = None, environ: Mapping[str, str] | None = None
) -> NpmConfig:
    """The registry, scoped registries, credentials and CA bundle npm itself would use, read
    from ORTBUNDLE_NPM_REGISTRY, npm_config_* variables and the .npmrc files in npm's order
    (project, user, global); npm is asked for its default only when none of them says."""
    env = os.environ if environ is None else environ
    from_env = npm_env(env)
    layers: list[Path] = []  # lowest precedence first
    prefix = _npm_prefix(from_env, env)
    global_rc = from_env.get("globalconfig") or (str(prefix / "etc" / "npmrc") if prefix else "")
    if global_rc:
        layers.append(Path(global_rc).expanduser())
    layers.append(npm_user_config(env))
    if project_root is not None:
        layers.append(project_root / ".npmrc")
    merged: dict[str, _Setting] = {}
    for path in layers:
        if path.is_file():
            merged.update(_read_npmrc(path, env))
    for key, value in from_env.items():
        expanded, missing = _expand_npm(value, env)
        merged[key] = _Setting(expanded, f"npm_config_{key.replace('-', '_')}", missing)

    scopes = tuple(
        (key.split(":", 1)[0], _require_http(s.value, s.origin), s.origin)
        for key, s in sorted(merged.items())
        if key.startswith("@") and key.endswith(":registry") and s.value
    )
    auth = _npm_auth(merged)
    cafile = merged["cafile"].value if merged.get("cafile") else None
    if cafile and not Path(cafile).expanduser().is_file():
        raise ConfigError(
            "npm's cafile names a file that does not exist",
            file=merged["cafile"].origin,
            fix="point cafile= at a PEM bundle, or remove it",
        )
    cert = env.get("REQUESTS_CA_BUNDLE") or (str(Path(cafile).expanduser()) if cafile else None)

    explicit = env.get(ENV_NPM_REGISTRY, "").strip()
    registry: str | None
    if explicit:
        registry, origin = explicit, ENV_NPM_REGISTRY
    elif merged.get("registry") and merged["registry"].value:
        registry, origin = merged["registry"].value, merged["registry"].origin
    else:
        default = npm_default_registry(env, project_root)
        registry, origin = default, "`npm config get registry`"
    if registry is not None:
        registry = _require_http(registry, origin)
    return NpmConfig(
        registry=registry,
        origin=origin,
        scopes=scopes,
        auth=auth,
        cert=cert,
        override=bool(explicit),
    )


def _npm_auth(merged: Mapping[str, _Setting]) -> tuple[NpmAuth, ...]:
    """Per-registry credentials (`//host/path/:_authToken`, `:_auth`, `:username` with
    `:_password`), strongest first for each prefix, as npm prefers them."""
    fields: dict[str, dict[str, _Setting]] = {}
    for key, setting in merged.items():
        if key.startswith("//") and ":" in key:
            prefix, _, name = key.rpartition(":")
            if name in _AUTH_FIELDS and setting.value:
                prefix = prefix if prefix.endswith("/") else prefix + "/"
                fields.setdefault(prefix, {})[name] = setting
    result = []
    for prefix, found in sorted(fields.items()):
        if token := found.get("_authToken"):
            result.append(NpmAuth(prefix, f"Bearer {token.value}", token.origin, token.missing))
        elif basic := found.get("_auth"):
            result.append(NpmAuth(prefix, f"Basic {basic.value}", basic.origin, basic.missing))
        elif (user := found.get("username")) and (secret := found.get("_password")):
            try:
                password = base64.b64decode(secret.value, validate=True).decode()
            except ValueError:
                raise ConfigError(
                    f"the npm _password for {prefix} is not base64",
                    file=secret.origin,
                    fix="npm stores _password base64-encoded; encode it, or use _authToken",
                ) from None
            result.append(
                NpmAuth(
                    prefix,
                    basic_auth(user.value, password),
                    user.origin,
                    user.missing + secret.missing,
                )
            )
    return tuple(result)
