"""Jinja2 templates for the text formats we generate (PKGBUILD, NSIS, NOTICE).

Strict: an undefined name is an error, not an empty string, and nothing is auto-escaped —
each format escapes with its own filter (shell quoting, NSIS strings), passed by the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jinja2

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("ortbundle", "templates"),
    undefined=jinja2.StrictUndefined,
    autoescape=False,  # noqa: S701 - these are not HTML; every format escapes with its own filter
    keep_trailing_newline=True,
    trim_blocks=True,
    lstrip_blocks=True,
)


def render(
    name: str,
    context: Mapping[str, Any],
    filters: Mapping[str, Callable[..., str]] | None = None,
) -> str:
    """Render ortbundle/templates/<name> with format-specific escaping filters."""
    env = _ENV.overlay()
    env.filters.update(filters or {})
    return env.get_template(name).render(**context)
