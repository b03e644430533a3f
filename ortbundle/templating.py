"""Jinja2 templates for the text formats we generate (PKGBUILD, NSIS, NOTICE).

Strict: an undefined name is an error, not an empty string, and nothing is auto-escaped —
each format escapes with its own filter (shell quoting, NSIS strings), passed by the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jinja2

from ortbundle.locations import default_cache_dir

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("ortbundle", "templates"),
    undefined=jinja2.StrictUndefined,
    autoescape=False,  # noqa: S701 - these are not HTML; every format escapes with its own filter
    keep_trailing_newline=True,
    trim_blocks=True,
    lstrip_blocks=True,
)


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Compiled templates under the cache, keyed by each template's source checksum: jinja
    compiling NSIS, PKGBUILD and NOTICE templates again was a measurable part of a warm build.
    jinja writes each entry atomically and ignores one it cannot read."""
    directory = default_cache_dir() / "templates"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None  # a read-only cache: compile every time
    return jinja2.FileSystemBytecodeCache(str(directory))


def render(
    name: str,
    context: Mapping[str, Any],
    filters: Mapping[str, Callable[..., str]] | None = None,
) -> str:
    """Render ortbundle/templates/<name> with format-specific escaping filters."""
    if _ENV.bytecode_cache is None:
        _ENV.bytecode_cache = _bytecode_cache()
    env = _ENV.overlay()
    env.filters.update(filters or {})
    return env.get_template(name).render(**context)
