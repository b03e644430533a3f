"""Where things live by default: the download cache, a product's signing key, and the settings
files Maven and npm keep their repository configuration in.

Kept free of heavy imports: deciding that a build has nothing to do reads these.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

ENV_CACHE_DIR = "ORTBUNDLE_CACHE_DIR"
ENV_KEY = "ORTBUNDLE_SIGNING_KEY"
ENV_KEY_FILE = "ORTBUNDLE_SIGNING_KEY_FILE"
ENV_KEY_PASSWORD = "ORTBUNDLE_SIGNING_KEY_PASSWORD"  # noqa: S105 (a variable name)
# a Developer ID identity for the macOS code (a .p12 file and its password); unset: ad-hoc
ENV_CODESIGN_P12 = "ORTBUNDLE_CODESIGN_P12"
ENV_CODESIGN_P12_PASSWORD = "ORTBUNDLE_CODESIGN_P12_PASSWORD"  # noqa: S105 (a variable name)
# an OpenPGP secret key (an armoured file) that signs the .deb, the .rpm and the Arch source,
# and its passphrase (the value, or a file holding it); unset: those outputs are unsigned
ENV_OPENPGP_KEY = "ORTBUNDLE_OPENPGP_KEY"
ENV_OPENPGP_PASSPHRASE = "ORTBUNDLE_OPENPGP_PASSPHRASE"  # noqa: S105 (a variable name)
ENV_OPENPGP_PASSPHRASE_FILE = "ORTBUNDLE_OPENPGP_PASSPHRASE_FILE"  # noqa: S105 (a variable name)
ENV_MAVEN_URL = "ORTBUNDLE_MAVEN_URL"  # space-separated repository URLs, tried in order
ENV_MAVEN_SETTINGS = "ORTBUNDLE_MAVEN_SETTINGS"  # a settings.xml in place of ~/.m2/settings.xml
ENV_NPM_REGISTRY = "ORTBUNDLE_NPM_REGISTRY"  # the npm registry, over every .npmrc
ENV_NO_BYTECODE = "ORTBUNDLE_NO_BYTECODE"  # 1: no compiled modules under the cache


def default_cache_dir() -> Path:
    if explicit := os.environ.get(ENV_CACHE_DIR):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ortbundle"


def keep_bytecode_in_cache(environ: Mapping[str, str] = os.environ) -> None:
    """Let Python keep the compiled form of the modules a task imports, under the cache.

    With PYTHONDONTWRITEBYTECODE set (common in CI images and containers) every `invoke` run
    compiled ortbundle's hundred-odd modules again: about 0.12 s of each warm build. The
    bytecode goes under the cache directory (`bytecode/`), never beside the sources, which is
    what that setting protects; ORTBUNDLE_NO_BYTECODE=1 keeps Python's default.
    """
    if not sys.dont_write_bytecode or sys.pycache_prefix is not None:
        return  # Python writes bytecode already, or the user chose where
    if environ.get(ENV_NO_BYTECODE, "").strip() not in ("", "0"):
        return
    sys.pycache_prefix = str(default_cache_dir() / "bytecode")
    sys.dont_write_bytecode = False


def default_key_path(product: str, environ: Mapping[str, str]) -> Path:
    """Where `invoke keygen` keeps a product's secret key: the user's config, never the repo."""
    config = environ.get("XDG_CONFIG_HOME") or str(Path(environ.get("HOME", "~")) / ".config")
    return Path(config).expanduser() / "ortbundle" / "keys" / f"{product}.key"


def signing_key_source(path: Path | None, environ: Mapping[str, str]) -> bytes | None:
    """The raw bytes the signing key would be read from (the same precedence as loading it),
    without parsing them: enough to tell whether the key changed, at no cryptographic cost."""
    if path is not None:
        return path.read_bytes() if path.is_file() else str(path).encode()
    content = environ.get(ENV_KEY, "")
    if content.strip():
        return content.encode()
    key_file = environ.get(ENV_KEY_FILE, "").strip()
    if key_file:
        file = Path(key_file)
        return file.read_bytes() if file.is_file() else key_file.encode()
    return None


def _home(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("HOME", "~")).expanduser()


def maven_user_settings(environ: Mapping[str, str]) -> Path:
    """The settings.xml Maven itself reads for this user (mirrors, server credentials)."""
    if explicit := environ.get(ENV_MAVEN_SETTINGS, "").strip():
        return Path(explicit).expanduser()
    return _home(environ) / ".m2" / "settings.xml"


def npm_user_config(environ: Mapping[str, str]) -> Path:
    """The user's .npmrc, where npm reads it: `npm_config_userconfig` (any case), else ~/.npmrc."""
    if explicit := npm_env(environ).get("userconfig", "").strip():
        return Path(explicit).expanduser()
    return _home(environ) / ".npmrc"


def npm_env(environ: Mapping[str, str]) -> dict[str, str]:
    """npm's settings from the environment: `npm_config_<key>` in any case, `_` meaning `-`
    past the first character, as npm maps them; the lower-case spelling wins a tie."""
    found: dict[str, str] = {}
    for name in sorted(environ, key=lambda n: n != n.upper()):  # upper case first, lower last
        if name.lower().startswith("npm_config_") and len(name) > len("npm_config_"):
            tail = name[len("npm_config_") :].lower()
            found[tail[0] + tail[1:].replace("_", "-")] = environ[name]
    return found
