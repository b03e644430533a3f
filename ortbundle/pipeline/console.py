"""What a build, an audit or a release shows beyond its summary: the plan line, the detail
tables of --verbose, the audit report. The command line prints these and computes nothing of
its own, so it imports the pipeline and never a step's internals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ortbundle._core.progress import Reporter
from ortbundle.config.plan import Project, with_models
from ortbundle.fetch.cache import Cache
from ortbundle.licensing.attribution import TargetLicensing
from ortbundle.licensing.audit import ChannelAudit, report_json
from ortbundle.licensing.audit_print import coverage_lines, print_report
from ortbundle.pipeline.incremental import PreparedBuild
from ortbundle.pipeline.result import BuildResult, audit_groups, externals_lines, size_table
from ortbundle.pipeline.summary import plan_line
from ortbundle.stage.requirements import summary_lines

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["audit_report_json", "build_plan_line", "print_audit", "print_details"]


def build_plan_line(project: Project, prepared: PreparedBuild, channels: Sequence[str]) -> str:
    """The build's first line: what it will make, and how many downloads the cache holds
    (`channels`: the ones asked for, or all)."""
    # the models' sources are downloads too (a file of the project, a URL, a release the
    # runtime moved away from): counted as the fetch will count them
    plan = with_models(project, prepared.plan)
    cache = Cache(prepared.cache)
    wanted = {source.sha256 for _, source in plan.all_sources()}
    cached = sum(1 for sha256 in wanted if cache.blob_path(sha256).is_file())
    shown = [c for c in plan.product.channels if not channels or c in channels]
    return plan_line(
        plan.product.name,
        plan.product.version,
        plan.targets,
        plan.product.runtimes,
        shown,
        cached,
        len(wanted),
    )


def print_details(reporter: Reporter, result: BuildResult) -> None:
    """--verbose: the tables an auditor or packager reads (sizes, libraries, hints, licences)."""
    reporter.console.print(size_table(result))
    details = externals_lines(result)
    details += summary_lines(t.requirements for t in result.targets)
    for package in result.packages:  # what a packager must know (sizes, tools, next steps)
        details += [f"{package.channel}: {note}" for note in package.notes]
    for line in details:
        reporter.line(line)
    print_report(reporter.console, _distinct(result.audits))
    for line in coverage_lines([t.licensing for t in result.targets]):
        reporter.line(line)


def print_audit(
    console: Console,
    audits: Sequence[ChannelAudit],
    licensing: Sequence[TargetLicensing] | None = None,
    reporter: Reporter | None = None,
) -> None:
    """The licence audit's tables; with `licensing` and `reporter`, each target's coverage."""
    print_report(console, audits)
    if licensing is not None and reporter is not None:
        for line in coverage_lines(list(licensing)):
            reporter.line(line)


def audit_report_json(
    product: str,
    version: str,
    audits: Sequence[ChannelAudit],
    licensing: Sequence[TargetLicensing],
) -> str:
    """`invoke audit`'s report file."""
    return report_json(product, version, audits, licensing)


def _distinct(audits: tuple[ChannelAudit, ...]) -> list[ChannelAudit]:
    """One table per verdict: channels that audit the same targets the same way share it."""
    by_channel = {a.channel: a for a in audits}
    return [
        replace(by_channel[g["channels"][0]], channel=", ".join(g["channels"]))
        for g in audit_groups(audits)
    ]
