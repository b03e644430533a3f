"""invoke release: merge the runners' version trees into one signed release."""

from __future__ import annotations

from pathlib import Path

from ortbundle.cli.common import ROOT, USAGE_EXIT, CommandFailed, guard, write_places_of
from ortbundle.config.project import BuildOptions, Project


def run_release(
    options: BuildOptions, sources: list[Path], *, root: Path = ROOT, dist: Path | None = None
) -> None:
    """Merge per-target runner trees into one checked, signed version directory."""
    from ortbundle._core.progress import Reporter
    from ortbundle.pipeline.build import AuditFailed
    from ortbundle.pipeline.console import print_audit
    from ortbundle.pipeline.release import release

    if not sources:
        raise CommandFailed(
            "ortbundle: usage error: pass each runner's dist/ with --from", USAGE_EXIT
        )
    project = Project.at(root, dist)
    with Reporter() as reporter:
        try:
            result = guard(
                lambda: release(project, sources, options), write_places_of(project, options)
            )
        except CommandFailed as exc:
            if isinstance(exc.__context__, AuditFailed):
                print_audit(reporter.console, exc.__context__.audits)
            raise
        for runner in result.runners:
            reporter.line(f"merged {', '.join(runner.targets)} from {runner.path} (hashes checked)")
        print_audit(reporter.console, result.audits)
        signer = f"signed with key {result.signed_by}" if result.signed_by else "UNSIGNED"
        reporter.line(f"released: {result.version_dir} ({signer})")
