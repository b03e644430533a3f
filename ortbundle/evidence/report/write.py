"""Write report.html from the evidence a build leaves: collect the views, compare with an earlier
build, render (memoised by the page's content)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ortbundle._core.errors import ConfigError
from ortbundle._core.fsio import atomic_write
from ortbundle._core.memo import Memo
from ortbundle.config.plan import Plan
from ortbundle.evidence.names import REPORT_NAME
from ortbundle.evidence.report import changes as ch
from ortbundle.evidence.report.changes import compare_dir
from ortbundle.evidence.report.closures import CLOSURES_DIR as CLOSURES_DIR
from ortbundle.evidence.report.closures import copy_closures as copy_closures
from ortbundle.evidence.report.closures import write_closures as write_closures
from ortbundle.evidence.report.collect import (
    audit_views,
    closures,
    models,
    packages,
    requirements,
)
from ortbundle.evidence.report.render import render_html
from ortbundle.evidence.report.views import Report
from ortbundle.licensing.attribution import TargetLicensing
from ortbundle.licensing.audit import ChannelAudit


def check_compare(path: Path | None, product: str) -> None:
    """Refuse a --compare path that holds no build, before any work is done."""
    if path is not None:
        compare_dir(path, product)


def write_report(
    version_dir: Path,
    published: Path,
    *,
    plan: Plan,
    licensing: Sequence[TargetLicensing],
    audits: Sequence[ChannelAudit],
    signed_by: str | None,
    compare: Path | None = None,
    memo: Memo,
) -> Path:
    """Write report.html into the (scratch) `version_dir` that will be published as
    `published`; compare with `compare` (a version directory) or else the newest older build
    beside `published` in dist/<product>/. `memo`: the build's, where the page is kept."""

    product = plan.product
    targets = tuple(tl.target for tl in licensing)
    views, scale = packages(version_dir, product.channels, licensing)
    diff = None
    if compare is not None:
        against = ch.compare_dir(compare, product.name)
        try:
            old = ch.earlier(against)
        except ValueError as exc:
            raise ConfigError(
                f"--compare: the earlier build's manifest is unreadable: {exc}",
                file=str(against),
                fix="pass a version directory written by invoke build",
            ) from None
        source = f"--compare {against.name}"
    else:
        found = ch.find_earlier(published.parent, product.version)
        old, source = None, ""
        if found is not None:
            try:
                old = ch.earlier(found)
                source = f"dist/{product.name}/{found.name}"
            except ValueError:
                old = None  # a damaged earlier tree is no reason to fail this build
    if old is not None:
        new = ch.current(product.name, product.version, version_dir, licensing)
        diff = ch.diff(old, new, source)
    report = Report(
        product=product.name,
        version=product.version,
        description=product.description,
        signed_by=signed_by,
        targets=targets,
        packages=views,
        audits=audit_views(audits),
        closures=closures(version_dir, targets),
        models=models(version_dir, plan.models, targets),
        changes=diff,
        scale=scale,
        requirements=requirements(version_dir, targets),
    )
    path = version_dir / REPORT_NAME
    atomic_write(path, _rendered(report, memo))
    path.chmod(0o644)
    return path


def _rendered(report: Report, memo: Memo) -> str:
    """render_html, kept by the page's content and the tool's code: compiling the template is
    most of the cost (0.1-0.3 s), and a warm build's report is usually the last one's. A kept
    page is re-hashed before it is used; a release's memo is off: it renders afresh."""
    return memo.remembered_text(
        "report", [repr(report)], lambda: render_html(report), suffix=".html"
    )
