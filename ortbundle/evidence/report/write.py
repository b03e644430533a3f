"""Write report.html from the evidence a build leaves: collect the views, compare with an earlier
build, render (memoised by the page's content)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ortbundle._core.errors import ConfigError
from ortbundle._core.fsio import atomic_write
from ortbundle._core.memo import code_digest
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
    cache: Path | None = None,
) -> Path:
    """Write report.html into the (scratch) `version_dir` that will be published as
    `published`; compare with `compare` (a version directory) or else the newest older build
    beside `published` in dist/<product>/. `cache`: where the rendered page is memoised."""

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
    atomic_write(path, _rendered(report, cache))
    path.chmod(0o644)
    return path


def _rendered(report: Report, cache: Path | None) -> str:
    """render_html, memoised by the page's content: compiling the template is most of the cost
    (0.1-0.3 s), and a warm build's report is usually the last one's. A stored page is
    re-hashed before it is used; `cache` None (a release) renders afresh."""
    import hashlib

    key = hashlib.sha256(f"{code_digest()}\n{report!r}".encode()).hexdigest()
    entry = cache / "outputs" / "report" / key[:2] / f"{key}.html" if cache else None
    if entry is not None:
        try:
            data = entry.read_bytes()
            recorded = entry.with_suffix(".sha256").read_text("utf-8").strip()
        except OSError:
            pass
        else:
            if hashlib.sha256(data).hexdigest() == recorded:
                return data.decode("utf-8")
    text = render_html(report)
    if entry is not None:
        entry.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(entry, text)
        atomic_write(entry.with_suffix(".sha256"), hashlib.sha256(text.encode()).hexdigest())
    return text
