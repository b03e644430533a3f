"""invoke release: merge the runners' version trees into one signed release."""

from __future__ import annotations

import re
from pathlib import Path

from ortbundle.cli.common import ROOT, USAGE_EXIT, CommandFailed, guard, write_places_of
from ortbundle.config.project import BuildOptions, Project

_SHA256 = re.compile(r"[0-9a-f]{64}")


def run_release(
    options: BuildOptions,
    sources: list[Path],
    *,
    runner_keys: list[Path] | None = None,
    runner_manifests: list[str] | None = None,
    root: Path = ROOT,
    dist: Path | None = None,
) -> None:
    """Merge per-target runner trees into one checked, signed version directory; a runner's
    manifest counts once a runner key (`runner_keys`) or a digest (`runner_manifests`) vouches
    for it."""
    from ortbundle._core.progress import Reporter
    from ortbundle.pipeline.build import AuditFailed
    from ortbundle.pipeline.console import print_audit
    from ortbundle.pipeline.release import RunnerTrust, release

    if not sources:
        raise CommandFailed(
            "ortbundle: usage error: pass each runner's dist/ with --from", USAGE_EXIT
        )
    digests = [d.strip().lower() for d in runner_manifests or []]
    if bad := [d for d in digests if not _SHA256.fullmatch(d)]:
        raise CommandFailed(
            f"ortbundle: usage error: --runner-manifest takes a manifest's SHA-256 (64 hex "
            f"digits), not {bad[0]!r}",
            USAGE_EXIT,
        )
    project = Project.at(root, dist)
    with Reporter() as reporter:
        try:
            result = guard(
                lambda: release(
                    project,
                    sources,
                    options,
                    RunnerTrust(
                        manifest_digests=frozenset(digests), key_files=tuple(runner_keys or ())
                    ),
                ),
                write_places_of(project, options),
            )
        except CommandFailed as exc:
            if isinstance(exc.__context__, AuditFailed):
                print_audit(reporter.console, exc.__context__.audits)
            raise
        for runner in result.runners:
            reporter.line(
                f"merged {', '.join(runner.targets)} from {runner.path} "
                f"(manifest {runner.vouched_by}; hashes checked)"
            )
        print_audit(reporter.console, result.audits)
        signer = f"signed with key {result.signed_by}" if result.signed_by else "UNSIGNED"
        reporter.line(f"released: {result.version_dir} ({signer})")
