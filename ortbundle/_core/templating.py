"""Jinja2 templates for the text formats we generate (PKGBUILD, NSIS, NOTICE).

Strict: an undefined name is an error, not an empty string, and nothing is auto-escaped —
each format escapes with its own filter (shell quoting, NSIS strings), passed by the caller.

A build keeps each rendering under the memo it passes to render(), keyed by the tool's code
(templates included), the template, its filters and its whole context: a warm build renders the
same NOTICE, PKGBUILD and installer script as the last one, and then jinja2 is not even
imported. A context holding anything this module cannot write down exactly (an object that is
not data, a filter that is a closure) is rendered every time, never keyed loosely. A release,
and anything that is not a build, renders afresh.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from collections.abc import Callable, Mapping
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from ortbundle._core.errors import ConfigError
from ortbundle._core.locations import default_cache_dir
from ortbundle._core.memo import NO_MEMO, Memo, memo_key, remembered_text
from ortbundle._core.overrides import NO_OVERRIDES, SPECS, Override, Overrides, undefined_variable
from ortbundle._core.overrides import environment as overrides_environment

if TYPE_CHECKING:
    import jinja2

_ENV: list[jinja2.Environment] = []  # made on the first rendering the cache does not hold


def _environment() -> jinja2.Environment:
    if not _ENV:
        import jinja2

        environment = overrides_environment()
        environment.loader = jinja2.PackageLoader("ortbundle", "templates")
        environment.bytecode_cache = _bytecode_cache()
        _ENV.append(environment)
    return _ENV[0]


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Compiled templates under the cache, keyed by each template's source checksum: jinja
    compiling NSIS, PKGBUILD and NOTICE templates again was a measurable part of a warm build.
    jinja writes each entry atomically and ignores one it cannot read."""
    import jinja2

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
    *,
    memo: Memo = NO_MEMO,
    overrides: Overrides = NO_OVERRIDES,
) -> str:
    """Render ortbundle/templates/<name> (or the project's replacement of it, from
    `overrides`) with format-specific escaping filters; kept under `memo` (a build's) by
    everything the rendering depends on."""
    spec = SPECS.get(name)
    if spec is not None and not set(context) <= set(spec.variables):
        # overrides.py tells a project what each template receives: it must stay true (a
        # test holds each renderer to passing every declared one)
        raise AssertionError(
            f"{name} is rendered with {sorted(set(context) - set(spec.variables))}, which "
            "_core/overrides.py does not declare"
        )
    override = overrides.get(name)
    key = None
    if memo.on:
        key = rendering_key(name, context, filters or {}, override.sha256 if override else "")
    entry = None if key is None else memo.entry("rendered", key, ".txt")

    def rendered() -> str:
        if override is not None:
            return _render_override(override, context, filters or {})
        environment = _environment().overlay()
        environment.filters.update(filters or {})
        return environment.get_template(name).render(**context)

    return remembered_text(entry, rendered)  # re-hashed before use: altered, rendered again


def _render_override(
    override: Override, context: Mapping[str, Any], filters: Mapping[str, Callable[..., str]]
) -> str:
    """A project's replacement, checked when the build was planned. What shows only now is the
    same configuration error, at its line: an attribute a variable lacks (`{{ addon.nme }}`),
    or a value the format's filter refuses (a welcome text longer than NSIS holds), which the
    channel checked for its own template but cannot for text the project composes."""
    import jinja2

    environment = overrides_environment()
    environment.filters.update(filters)
    filename = str(override.path)
    template = environment.from_string(override.text)  # the bytes the build key hashed
    template.filename = filename
    try:
        return template.render(**context)
    except jinja2.UndefinedError as exc:
        line = _template_line(exc, filename)
        raise undefined_variable(override, f"something undefined ({exc.message})", line) from None
    except (jinja2.TemplateError, ValueError, TypeError) as exc:
        line = _template_line(exc, filename)
        where = f"{override.shown}:{line}" if line else override.shown
        raise ConfigError(
            f"{where} cannot be rendered: {exc}",
            file=where,
            fix="change what that line writes (invoke templates --list: the variables and "
            "filters it receives)",
        ) from None


def _template_line(exc: BaseException, filename: str) -> int | None:
    """The replacement's line the error happened at (jinja maps its frames to template lines)."""
    line = None
    trace = exc.__traceback__
    while trace is not None:
        if trace.tb_frame.f_code.co_filename in (filename, "<template>"):
            line = trace.tb_lineno
        trace = trace.tb_next
    return line


class _Unkeyed(Exception):
    """A value the key cannot write down exactly."""


def rendering_key(
    name: str,
    context: Mapping[str, Any],
    filters: Mapping[str, Callable[..., str]],
    override: str = "",
) -> str | None:
    """What a rendering depends on (and the tool's code, templates included, and the SHA-256
    of the project's replacement, if any), hashed; None when part of it cannot be written
    down."""
    parts = [name, f"override {override}"]
    for filter_name, function in sorted(filters.items()):
        qualname = getattr(function, "__qualname__", "<none>")
        # a closure or a lambda is not named by where it is defined: render every time
        if getattr(function, "__closure__", None) or "<" in qualname:
            return None
        parts.append(f"{filter_name}={getattr(function, '__module__', '')}.{qualname}")
    try:
        parts.append(_canonical(context))
    except _Unkeyed:
        return None
    return memo_key(parts)


def _canonical(value: Any) -> str:
    """`value` written down exactly: its type and every field, mappings in their order (a
    template iterates in it), sets sorted. Anything else raises _Unkeyed."""
    if isinstance(value, enum.Enum):
        return f"E{type(value).__module__}.{type(value).__qualname__}.{value.name}"
    if value is None or isinstance(value, (bool, int, float, str)):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, PurePath):
        return f"{type(value).__name__}:{str(value)!r}"
    if isinstance(value, (datetime.date, datetime.time)):  # datetime is a date
        return f"{type(value).__name__}:{value.isoformat()}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = ",".join(
            f"{f.name}={_canonical(getattr(value, f.name))}" for f in dataclasses.fields(value)
        )
        return f"{type(value).__module__}.{type(value).__qualname__}({fields})"
    if isinstance(value, Mapping):
        items = ",".join(f"{_canonical(k)}:{_canonical(v)}" for k, v in value.items())
        return f"{{{items}}}"
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__}[{','.join(_canonical(v) for v in value)}]"
    if isinstance(value, (set, frozenset)):
        return f"set[{','.join(sorted(_canonical(v) for v in value))}]"
    raise _Unkeyed(type(value).__qualname__)
