"""What the user sees while a build runs: rich bars on a terminal, plain lines in CI."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TransferSpeedColumn,
)


class Reporter:
    """One place for build output; safe to call from worker threads."""

    def __init__(self, console: Console | None = None, *, interactive: bool | None = None) -> None:
        self.console = console or Console(highlight=False, soft_wrap=True)
        if not self.console.is_terminal:
            self.console.width = max(self.console.width, 160)  # CI logs: keep table rows whole
        self.interactive = self.console.is_terminal if interactive is None else interactive
        self._lock = threading.Lock()
        self._bars: Progress | None = None

    def __enter__(self) -> Reporter:
        if self.interactive:
            self._bars = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                console=self.console,
                transient=True,
            )
            self._bars.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bars is not None:
            self._bars.stop()
            self._bars = None

    def line(self, message: str) -> None:
        with self._lock:
            self.console.print(message, markup=False)

    def download(self, name: str) -> tuple[Callable[[int, int | None], None], Callable[[], None]]:
        """An (update, finish) pair for one download."""
        started = time.monotonic()
        state = {"bytes": 0}
        bars = self._bars
        task: TaskID | None = None
        if bars is not None:
            task = bars.add_task(f"fetch {name}", total=None)
        else:
            self.line(f"fetch {name}: downloading")

        def update(done: int, total: int | None) -> None:
            state["bytes"] = done
            if bars is not None and task is not None:
                bars.update(task, completed=done, total=total)

        def finish() -> None:
            """Called in a `finally`: a download ending by an exception says it failed."""
            if bars is not None and task is not None:
                bars.remove_task(task)
            seconds = max(time.monotonic() - started, 1e-6)
            mib = state["bytes"] / (1 << 20)
            failure = sys.exc_info()[1]
            if failure is not None:
                self.line(f"fetch {name}: FAILED after {mib:.1f} MiB ({type(failure).__name__})")
                return
            self.line(f"fetch {name}: {mib:.1f} MiB in {seconds:.1f} s ({mib / seconds:.0f} MiB/s)")

        return update, finish


def plain_reporter() -> Reporter:
    """A reporter that never draws bars (tests, piped output)."""
    return Reporter(Console(file=sys.stdout, highlight=False, soft_wrap=True), interactive=False)
