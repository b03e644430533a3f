"""URLs from configuration: credentials split off, and redacted for anything that is shown."""

from __future__ import annotations

import base64
from urllib.parse import unquote, urlsplit, urlunsplit

from ortbundle._core.errors import ConfigError


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


def require_http(url: str, origin: str) -> str:
    if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
        raise ConfigError(
            f"{origin} names {redact(url)!r}, which is not an http(s) URL",
            file=origin,
            fix="give the repository's http:// or https:// URL",
        )
    return url
