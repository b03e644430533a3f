"""The user-facing commands behind tasks.py: argument shaping, output, exit codes."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ortbundle.build import (
    BuildOptions,
    Project,
    build,
    externals_lines,
    fetch,
    size_table,
)
from ortbundle.errors import OrtbundleError
from ortbundle.progress import Reporter

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent


class CommandFailed(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _guard(action: Callable[[], T]) -> T:
    try:
        return action()
    except OrtbundleError as exc:
        raise CommandFailed(f"ortbundle: {exc.kind} error: {exc}", exc.exit_code) from None


def run_build(options: BuildOptions, *, root: Path = ROOT, dist: Path | None = None) -> None:
    project = Project.at(root, dist)
    with Reporter() as reporter:
        result = _guard(lambda: build(project, options, reporter))
        downloaded = sum(1 for a in result.artifacts.values() if a.downloaded)
        reporter.line(
            f"{len(result.artifacts)} artifacts verified "
            f"({downloaded} downloaded, {len(result.artifacts) - downloaded} from the cache)"
        )
        reporter.console.print(size_table(result))
        for line in externals_lines(result):
            reporter.line(line)
        reporter.line(f"staged: {result.version_dir}")


def run_fetch(options: BuildOptions, *, root: Path = ROOT) -> None:
    project = Project.at(root)
    with Reporter() as reporter:
        _plan, artifacts = _guard(lambda: fetch(project, options, reporter))
        for artifact in sorted(artifacts.values(), key=lambda a: a.source.filename):
            state = "downloaded" if artifact.downloaded else "cached"
            reporter.line(f"{state:10} {artifact.source.sha256[:12]}  {artifact.source.filename}")


def run_clean(*, root: Path = ROOT, dist: Path | None = None) -> None:
    target = Project.at(root, dist).dist
    if target.exists():
        shutil.rmtree(target)
    print(f"removed {target}", file=sys.stdout)
