"""How the smoke checks run a program: output captured as text, never raising on its exit."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path


def run_captured(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """`argv` run to its end; stdout and stderr as UTF-8 text with undecodable bytes replaced
    (a crashing probe or Wine's own noise must not stop the report), the exit code left for
    the caller to judge."""
    return subprocess.run(
        list(argv),
        env=None if env is None else dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        timeout=timeout,
        check=False,
    )
