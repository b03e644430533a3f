"""Fault points for tests: a build can be made to die, or to meet an OS error, at a named step.

Only tests set `ORTBUNDLE_FAULT`; without it every fault point is a dictionary lookup that
does nothing. The value is a comma-separated list of `step[=action]` entries, where the
action is `kill` (SIGKILL this process: a power cut at that instant, the default) or an errno
name (`EDQUOT`: raise that OSError, for the errors a test cannot ask the kernel for). A bare
word without a step (`no-exchange`) is a switch a module reads with `switched_on`.
"""

from __future__ import annotations

import errno
import os
import signal
from pathlib import Path

ENV = "ORTBUNDLE_FAULT"


def _entries() -> dict[str, str]:
    spec = os.environ.get(ENV, "")
    entries: dict[str, str] = {}
    for entry in filter(None, (e.strip() for e in spec.split(","))):
        step, _, action = entry.partition("=")
        entries[step] = action or "kill"
    return entries


def fault_point(step: str, path: Path | None = None) -> None:
    """Die, or raise the configured OSError about `path`, if a test asked for it at `step`."""
    if ENV not in os.environ:
        return
    action = _entries().get(step)
    if action is None:
        return
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    number = getattr(errno, action)
    raise OSError(number, os.strerror(number), None if path is None else str(path))


def switched_on(name: str) -> bool:
    """Whether a test switched a behaviour (`no-exchange`) on."""
    return ENV in os.environ and name in _entries()
