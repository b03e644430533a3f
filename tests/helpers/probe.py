"""Run a short Python script in a fresh interpreter, from the repository: what a separate
`invoke` process would import and print, without this test process's modules."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_python(script: str, *args: str, environ: Mapping[str, str] | None = None) -> str:
    """The script's standard output; a failure fails the test with its standard error."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        env={**os.environ, **(environ or {})},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
