"""What every command shares: the repository root, the usage exit code, and turning a typed
failure or a disk error into one message and its exit code."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ortbundle._core.errors import OrtbundleError
from ortbundle._core.locations import default_key_path
from ortbundle.config.project import BuildOptions, Project

if TYPE_CHECKING:
    pass


T = TypeVar("T")


ROOT = Path(__file__).resolve().parents[2]


USAGE_EXIT = 2  # a command called the wrong way (a missing or contradictory option)


class CommandFailed(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def guard(action: Callable[[], T], places: Mapping[Path, str] | None = None) -> T:
    """Run a command's work: a typed failure, or an OS error on a path it writes (named from
    `places`, see ortbundle/_core/oserrors.py), becomes one message and its exit code."""
    try:
        return action()
    except OrtbundleError as exc:
        raise CommandFailed(headline(exc), exc.exit_code) from None
    except OSError as exc:
        from ortbundle._core.oserrors import from_oserror, is_disk_error

        if not is_disk_error(exc):
            raise
        error = from_oserror(exc, places or {})
        raise CommandFailed(headline(error), error.exit_code) from None


def write_places_of(project: Project, options: BuildOptions) -> dict[Path, str]:
    from ortbundle._core.locations import default_cache_dir
    from ortbundle._core.oserrors import write_places

    environ = os.environ if options.environ is None else options.environ
    key_dir = default_key_path(options.product, environ).parent
    return write_places(options.cache_dir or default_cache_dir(), project.dist, key_dir)


def headline(exc: OrtbundleError) -> str:
    kind = "error" if exc.kind == "error" else f"{exc.kind} error"
    return f"ortbundle: {kind}: {exc}"
