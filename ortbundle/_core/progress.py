"""What the user sees while a build runs: a live status line on a terminal, plain lines in CI.

Sizes are MiB everywhere (the download bar, the phase lines, the summary): one unit, so the
same file never reads as two sizes. A phase (`begin` … `done`) prints one line with its duration
when it finishes; while it runs, a terminal shows it live with anything a step reports through
`status()` (the file makensis is compressing, the bytes so far). CI gets only the finished lines.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, TextIO, cast

if TYPE_CHECKING:  # rich is imported only for a terminal's live bars or a table
    from rich.console import Console
    from rich.progress import Progress, TaskID

MIB = 1 << 20


def mib(size: float) -> str:
    """The one size unit of the tool's output."""
    return f"{size / MIB:.1f} MiB"


@dataclass(frozen=True)
class Phase:
    name: str
    seconds: float
    detail: str


_current: list[Reporter] = []  # the reporters in use (innermost last): where status() goes


def status(text: str) -> None:
    """Report progress of a long step (from any thread); shown live on a terminal only."""
    if _current:
        _current[-1].status(text)


def notice(text: str) -> None:
    """A line for the user from a step with no reporter of its own (any thread): a build
    waiting for another's lock says so. Nothing when no command is reporting."""
    if _current:
        _current[-1].line(text)


def notice_once(key: str, text: str) -> None:
    """`notice`, but once per `key` for the command reporting (an archive every target opens
    is spoken of once)."""
    if _current:
        _current[-1].line_once(key, text)


class Reporter:
    """One place for build output; safe to call from worker threads.

    Lines go straight to `stream` (stdout by default). rich is imported only when something
    needs it: the live bars on a terminal, or a table printed through `console` — a build whose
    output is a log (CI, a pipe) never pays for it.
    """

    def __init__(
        self,
        console: Console | None = None,
        *,
        interactive: bool | None = None,
        stream: TextIO | None = None,
    ) -> None:
        self._console = console
        self._stream = stream
        self._terminal = console.is_terminal if console is not None else self._out().isatty()
        self.interactive = self._terminal if interactive is None else interactive
        self._lock = threading.Lock()
        self._bars: Progress | None = None
        self.phases: list[Phase] = []  # every finished phase, for the summary
        self._phase: tuple[str, float, TaskID | None] | None = None
        self._said: set[str] = set()  # the keys of line_once

    def _out(self) -> TextIO:
        return self._stream or sys.stdout  # looked up late: tests capture sys.stdout

    @property
    def console(self) -> Console:
        """A rich console on the same stream, made on first use (tables, live bars)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self._out(), highlight=False, soft_wrap=True)
            if not self._console.is_terminal:
                self._console.width = max(self._console.width, 160)  # CI: table rows whole
        return self._console

    def __enter__(self) -> Reporter:
        if self.interactive:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._bars = Progress(
                TextColumn("{task.description}"),
                BarColumn(bar_width=20),
                TextColumn("{task.fields[detail]}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self._bars.start()
        _current.append(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self in _current:
            _current.remove(self)
        if self._bars is not None:
            self._bars.stop()
            self._bars = None

    def line(self, message: str) -> None:
        """Print a message, wrapped between words to the terminal's width; a log (no terminal,
        no COLUMNS) gets it on one line, whole for grep."""

        width = terminal_width(self._terminal)
        text = "\n".join(wrap(message.splitlines() or [""], width)) if width else message
        with self._lock:
            if self._console is not None:  # in use for tables or bars: keep one writer
                self._console.print(text, markup=False, emoji=False)
            else:
                out = self._out()
                out.write(text + "\n")
                out.flush()

    def line_once(self, key: str, message: str) -> None:
        """`line`, unless a line with this key was printed already."""
        with self._lock:
            if key in self._said:
                return
            self._said.add(key)
        self.line(message)

    def begin(self, name: str) -> None:
        """A phase starts: live on a terminal (with its elapsed time), silent in CI."""
        with self._lock:
            task = None
            if self._bars is not None:
                task = self._bars.add_task(name, total=None, detail="")
            self._phase = (name, time.monotonic(), task)

    def status(self, text: str) -> None:
        with self._lock:
            if self._bars is not None and self._phase is not None and self._phase[2] is not None:
                self._bars.update(self._phase[2], detail=text)

    def done(self, detail: str = "") -> None:
        """The running phase finished: one line with what it did and how long it took."""
        with self._lock:
            if self._phase is None:
                return
            name, started, task = self._phase
            self._phase = None
            if self._bars is not None and task is not None:
                self._bars.remove_task(task)
        phase = Phase(name, time.monotonic() - started, detail)
        self.phases.append(phase)
        self.line(phase_line(phase))

    def download(self, name: str) -> tuple[Callable[[int, int | None], None], Callable[[], None]]:
        """An (update, finish) pair for one download."""
        started = time.monotonic()
        state = {"bytes": 0}
        bars = self._bars
        task: TaskID | None = None
        if bars is not None:  # in CI the line comes when it is done
            task = bars.add_task(f"fetch {name}", total=None, detail="")

        def update(done: int, total: int | None) -> None:
            state["bytes"] = done
            if bars is not None and task is not None:
                seconds = max(time.monotonic() - started, 1e-6)
                of = f" of {mib(total)}" if total else ""
                detail = f"{mib(done)}{of}, {done / MIB / seconds:.0f} MiB/s"
                bars.update(task, completed=done, total=total, detail=detail)

        def finish() -> None:
            """Called in a `finally`: a download ending by an exception says it failed."""
            if bars is not None and task is not None:
                bars.remove_task(task)
            seconds = max(time.monotonic() - started, 1e-6)
            size = state["bytes"]
            failure = sys.exc_info()[1]
            if failure is not None:
                self.line(f"fetch {name}: FAILED after {mib(size)} ({type(failure).__name__})")
                return
            rate = size / MIB / seconds
            self.line(f"fetch {name}: {mib(size)} in {seconds:.1f} s ({rate:.0f} MiB/s)")

        return update, finish


def phase_line(phase: Phase) -> str:
    seconds = f"{phase.seconds:.1f} s"
    return (
        f"{phase.name:<9} {phase.detail} ({seconds})"
        if phase.detail
        else f"{phase.name:<9} {seconds}"
    )


# A command's own output that cannot be written (a full disk, an I/O error) ends it with the
# disk family's code once its work is done; a closed pipe (`| head`) as `cat` does, unsaid.
OUTPUT_EXIT = 12
PIPE_EXIT = 128 + 13  # SIGPIPE


class _Output:
    """stdout or stderr for one command. The first write that fails (EPIPE, ENOSPC, EIO) is
    kept and the stream pointed at /dev/null: every later line is dropped, so the command's
    work finishes as it would have (a build publishes whole) instead of dying mid-way in a
    traceback, and the command then ends with the output error's code (`output_failure`)."""

    def __init__(self, stream: TextIO, name: str) -> None:
        self._stream = stream
        self.name = name
        self.failure: OSError | None = None

    def write(self, text: str) -> int:
        if self.failure is None:
            try:
                return self._stream.write(text)
            except OSError as exc:
                self._failed(exc)
        return len(text)

    def flush(self) -> None:
        if self.failure is None:
            try:
                self._stream.flush()
            except OSError as exc:
                self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        self.failure = exc
        try:  # what the stream still buffers goes nowhere, now and at exit
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
            self._stream.flush()
        except (OSError, ValueError, AttributeError):
            pass

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


_outputs: list[_Output] = []


@contextlib.contextmanager
def command_output() -> Iterator[None]:
    """Run a command with its stdout and stderr kept from failing it (see `_Output`)."""
    saved = sys.stdout, sys.stderr
    out, err = _Output(saved[0], "stdout"), _Output(saved[1], "stderr")
    _outputs[:] = [out, err]
    sys.stdout, sys.stderr = cast(TextIO, out), cast(TextIO, err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
        _outputs.clear()


def output_failure() -> tuple[str, OSError] | None:
    """The stream the running command could not write and why; None when all went out."""
    for output in _outputs:
        if output.failure is not None:
            return output.name, output.failure
    return None


def output_failed_message(stream: str, failure: OSError, done: str) -> str:
    """One line for an output that could not be written, saying what was done regardless."""
    name = errno.errorcode.get(failure.errno or 0, "an OS error")
    return (
        f"ortbundle: output error: could not write to {stream} ({name}: "
        f"{failure.strerror or failure}); {done}"
    )


def plain_reporter() -> Reporter:
    """A reporter that never draws bars (tests, piped output)."""
    return Reporter(interactive=False)


def terminal_width(is_terminal: bool) -> int | None:
    """The width to wrap at: COLUMNS if set, else the terminal's; None for a log, which gets
    each message on one line (whole for grep)."""
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    return shutil.get_terminal_size().columns if is_terminal else None


def wrap(lines: Iterable[str], width: int) -> list[str]:
    """Break long lines between words (never inside a name or path); continuations indented."""
    out: list[str] = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip(" ")) + 2)
        out += textwrap.wrap(
            line,
            width=max(width, 40),
            subsequent_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        ) or [""]
    return out
