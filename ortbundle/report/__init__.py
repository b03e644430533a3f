"""report.html: a page a person can look at, written with every build beside the manifest.

It shows the size of every package (a treemap per package, bars on one scale), the licence audit
per channel, each runtime's dependency closure, the models and their gates, and what changed
since an earlier build. Built from the evidence the build writes anyway (ortbundle/report/
collect.py), so a release merged from runners writes the same page; deterministic (no clock, no
host path); listed in the manifest like the other evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ortbundle.report.closures import CLOSURES_DIR as CLOSURES_DIR
from ortbundle.report.closures import copy_closures as copy_closures
from ortbundle.report.closures import write_closures as write_closures

if TYPE_CHECKING:
    from ortbundle.audit import ChannelAudit
    from ortbundle.licensing import TargetLicensing
    from ortbundle.plan import Plan

REPORT_NAME = "report.html"


def check_compare(path: Path | None, product: str) -> None:
    """Refuse a --compare path that holds no build, before any work is done."""
    if path is not None:
        from ortbundle.report.changes import compare_dir

        compare_dir(path, product)


def compare_identity(path: Path | None) -> str:
    """For the build key: a build compared with another earlier build is another build."""
    if path is None:
        return "no compare"
    import hashlib

    try:
        digest = hashlib.sha256((path / "manifest.json").read_bytes()).hexdigest()
    except OSError:
        digest = "unreadable"
    return f"compare {path.resolve()} {digest}"


def write_report(
    version_dir: Path,
    published: Path,
    *,
    plan: Plan,
    licensing: Sequence[TargetLicensing],
    audits: Sequence[ChannelAudit],
    signed_by: str | None,
    compare: Path | None = None,
) -> Path:
    """Write report.html into the (scratch) `version_dir` that will be published as
    `published`; compare with `compare` (a version directory) or else the newest older build
    beside `published` in dist/<product>/."""
    from ortbundle.fsio import atomic_write
    from ortbundle.report import changes as ch
    from ortbundle.report.collect import audit_views, closures, models, packages
    from ortbundle.report.model import Report
    from ortbundle.report.render import render_html

    product = plan.product
    targets = tuple(tl.target for tl in licensing)
    views, scale = packages(version_dir, product.channels, licensing)
    diff = None
    if compare is not None:
        against = ch.compare_dir(compare, product.name)
        try:
            old = ch.earlier(against)
        except ValueError as exc:
            from ortbundle.errors import ConfigError

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
    )
    path = version_dir / REPORT_NAME
    atomic_write(path, render_html(report))
    path.chmod(0o644)
    return path
