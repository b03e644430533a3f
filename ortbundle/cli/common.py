"""What every command shares: the repository root, the usage exit code, and turning a typed
failure or a disk error into one message and its exit code."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
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


# SIGTERM: a CI runner cancelling the job; SIGHUP: the terminal closed (an ssh session lost)
_ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(BaseException):
    """SIGTERM or SIGHUP, raised in the main thread like Ctrl-C's KeyboardInterrupt, so a
    build removes its scratch tree instead of dying around it."""

    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.number = number


@contextlib.contextmanager
def _terminable() -> Iterator[None]:
    """SIGTERM and SIGHUP raise Terminated while the block runs (only the main thread may set
    a handler)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(number: int, _frame: object) -> None:
        raise Terminated(number)

    # a signal the caller ignores stays ignored: `nohup invoke build &` must outlive its
    # terminal, as any program started under nohup does
    previous = {
        number: signal.signal(number, handler)
        for number in _ENDING_SIGNALS
        if signal.getsignal(number) is not signal.SIG_IGN
    }
    try:
        yield
    finally:
        for number, before in previous.items():
            signal.signal(number, before)


def interrupted(number: int) -> CommandFailed:
    """What an interrupted command says, with the shell's exit code for the signal."""
    name = signal.Signals(number).name
    return CommandFailed(
        f"ortbundle: interrupted by {name}: stopped before finishing, and removed what it had "
        "half-written; dist/ holds a complete tree (the previous one, unless the build had "
        "published already), and a download cut short resumes next time",
        128 + number,
    )


Places = Mapping[Path, str] | Callable[[], Mapping[Path, str]]


def guard(action: Callable[[], T], places: Places | None = None) -> T:
    """Run a command's work: a typed failure, or an OS error on a path it writes (named from
    `places`, see ortbundle/_core/oserrors.py), becomes one message and its exit code; so does
    an interruption (SIGINT, SIGTERM, SIGHUP: exit 130, 143, 129), after the work's own
    cleanup ran. `places` may be a function, asked only on such an error (finding the
    temporary directory writes a file: a no-op need not)."""
    try:
        with _terminable():
            return action()
    except KeyboardInterrupt:
        raise interrupted(signal.SIGINT) from None
    except Terminated as exc:
        raise interrupted(exc.number) from None
    except OrtbundleError as exc:
        raise CommandFailed(headline(exc), exc.exit_code) from None
    except OSError as exc:
        from ortbundle._core.oserrors import from_oserror, is_disk_error

        if not is_disk_error(exc):
            raise
        error = from_oserror(exc, (places() if callable(places) else places) or {})
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
