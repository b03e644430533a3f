"""Where packages come from: pip's own configuration, never a host written in this repository.

A release engineer behind a mirror already told pip where the index is (`PIP_INDEX_URL`,
`pip config set global.index-url …`); we read the same setting so one change moves both.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ortbundle.errors import ConfigError

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
    """The URL without user:password@ — for messages, the cache and the signed manifest."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
