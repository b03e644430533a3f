"""npm's registry, scoped registries, credentials and CA bundle, read as npm reads them:
ORTBUNDLE_NPM_REGISTRY, npm_config_* variables, then the .npmrc files (project, user, global)."""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from ortbundle._core.errors import ConfigError
from ortbundle._core.locations import ENV_NPM_REGISTRY, npm_env, npm_user_config
from ortbundle.fetch.config.urls import basic_auth, require_http

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
        (key.split(":", 1)[0], require_http(s.value, s.origin), s.origin)
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
        registry = require_http(registry, origin)
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
