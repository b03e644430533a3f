"""Maven's repositories as Maven itself picks them: ORTBUNDLE_MAVEN_URL, else a settings.xml
mirror of central (with its <server> credentials), else central from the installed super POM."""

from __future__ import annotations

import os
import re
import shutil
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ortbundle._core.errors import ConfigError
from ortbundle._core.locations import ENV_MAVEN_SETTINGS, ENV_MAVEN_URL, maven_user_settings
from ortbundle.fetch.config.urls import basic_auth, require_http, split_credentials
from ortbundle.fetch.config.xmldoc import parse_xml, xml_child, xml_children, xml_text

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
            url, auth = split_credentials(require_http(raw, ENV_MAVEN_URL))
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
        url, auth = split_credentials(require_http(mirror.url, mirror.origin))
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
        url, auth = split_credentials(require_http(central, f"the super POM of {home}"))
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
