"""The user-facing commands behind tasks.py: argument shaping, output, exit codes."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ortbundle.audit import coverage_lines, print_report, report_json
from ortbundle.build import (
    AuditFailed,
    BuildOptions,
    BuildResult,
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


def _build_or_report(project: Project, options: BuildOptions, reporter: Reporter) -> BuildResult:
    try:
        return build(project, options, reporter)
    except AuditFailed as failed:
        print_report(reporter.console, failed.audits)
        raise


def run_build(options: BuildOptions, *, root: Path = ROOT, dist: Path | None = None) -> None:
    project = Project.at(root, dist)
    with Reporter() as reporter:
        result = _guard(lambda: _build_or_report(project, options, reporter))
        downloaded = sum(1 for a in result.artifacts.values() if a.downloaded)
        reporter.line(
            f"{len(result.artifacts)} artifacts verified "
            f"({downloaded} downloaded, {len(result.artifacts) - downloaded} from the cache)"
        )
        reporter.console.print(size_table(result))
        for line in externals_lines(result):
            reporter.line(line)
        print_report(reporter.console, result.audits)
        for line in coverage_lines([t.licensing for t in result.targets]):
            reporter.line(line)
        if not all(a.passed for a in result.audits):
            reporter.line("LICENCE AUDIT FAILED: this build is not fit to ship (see above)")
        reporter.line(f"staged: {result.version_dir}")


def run_audit(
    options: BuildOptions, *, json_path: Path | None, root: Path = ROOT, dist: Path | None = None
) -> None:
    """Stage aside, attribute and audit; publish nothing. The exit code is the gate."""
    project = Project.at(root, dist)
    with Reporter() as reporter:
        failure: AuditFailed | None = None
        try:
            result = _guard(lambda: build(project, options, reporter))
            audits, product = result.audits, result.plan.product
            licensing = [t.licensing for t in result.targets]
        except CommandFailed as exc:
            if not isinstance(exc.__context__, AuditFailed):
                raise
            failure = exc.__context__
            audits, product, licensing = failure.audits, failure.product, failure.licensing
        print_report(reporter.console, audits)
        for line in coverage_lines(licensing):
            reporter.line(line)
        version_dir = Project.at(root, dist).dist / product.name / product.version
        out = json_path or version_dir.with_name(f"{product.version}.audit.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report_json(product.name, product.version, audits, licensing), "utf-8")
        reporter.line(f"audit report: {out}")
        if failure is not None:
            raise CommandFailed(f"ortbundle: {failure.kind} error: {failure}", failure.exit_code)


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
