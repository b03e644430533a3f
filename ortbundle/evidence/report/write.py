"""Write report.html from the evidence a build leaves: collect the views, compare with an earlier
build, render (memoised by the page's content)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from ortbundle._core.errors import ConfigError, OrtbundleError
from ortbundle._core.fsio import atomic_write
from ortbundle._core.memo import Memo
from ortbundle.config.plan import Plan
from ortbundle.evidence.names import MANIFEST_NAME, REPORT_NAME, SIGNATURE_NAME
from ortbundle.evidence.record import hash_file
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
from ortbundle.evidence.signing import PublicKey
from ortbundle.evidence.verify import check_signature, printable, verify_tree
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
    public_key: PublicKey | None = None,
    compare: Path | None = None,
    memo: Memo,
) -> Path:
    """Write report.html into the (scratch) `version_dir` that will be published as
    `published`; compare with `compare` (a version directory) or else the newest older build
    beside `published` in dist/<product>/, once it verifies (`public_key` checks a signed
    one). `memo`: the build's, where the page is kept."""

    product = plan.product
    targets = tuple(tl.target for tl in licensing)
    views, scale = packages(version_dir, product.channels, licensing)
    diff = None
    found: Path | None = None
    if compare is not None:
        found = ch.compare_dir(compare, product.name)
        try:
            old = ch.earlier(found)
        except ValueError as exc:
            raise ConfigError(
                f"--compare: the earlier build's manifest is unreadable: {exc}",
                file=str(found),
                fix="pass a version directory written by invoke build",
            ) from None
        source = f"--compare {found.name}"
    else:
        found = ch.find_earlier(published.parent, product.version)
        old, source = None, ""
        if found is not None:
            try:
                old = ch.earlier(found)
                source = f"dist/{product.name}/{found.name}"
            except ValueError:
                old = None  # a damaged earlier tree is no reason to fail this build
    if old is not None and found is not None:
        refused = earlier_refused(found, public_key)
        if refused is None and compare is None and old.version != found.name:
            # an older build moved into a newer one's place would pose as the last release
            refused = f"it holds the build of {old.version}, not of {found.name}"
        if refused is not None:  # named as such; none of its figures shown as fact
            diff = ch.unverified(found.name, source, refused)
        else:
            new = ch.current(product.name, product.version, version_dir, licensing)
            diff = ch.diff(old, new, source)
            if not _signed(found):
                unsigned = (
                    f"{old.product} {old.version} is unsigned: its files match its manifest, "
                    "which no key vouches for"
                )
                diff = replace(diff, notes=(*diff.notes, unsigned))
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


def earlier_refused(version_dir: Path, public_key: PublicKey | None) -> str | None:
    """Why an earlier build's evidence cannot be shown as fact, or None when it verifies: a
    signed one by its signature (and the closure records it lists, which the comparison reads,
    by their hashes), an unsigned one by every file its manifest lists. An edited manifest of
    a published build must not become a signed page's history."""
    manifest = version_dir / MANIFEST_NAME
    try:
        data = manifest.read_bytes()
        if not _signed(version_dir):
            report = verify_tree(version_dir, allow_unsigned=True)
            return None if report.ok else "; ".join(report.lines()[:3])
        if public_key is None:
            return "it is signed, and this build has no public key to check it with"
        check_signature(manifest, data, public_key, allow_unsigned=False)
        listed = {
            o["path"]: (o["size"], o["sha256"])
            for o in json.loads(data)["outputs"]
            if o["path"].startswith(f"{CLOSURES_DIR}/")
        }
        closures_dir = version_dir / CLOSURES_DIR
        present = sorted(closures_dir.rglob("*")) if closures_dir.is_dir() else []
        for path in present:
            relative = path.relative_to(version_dir).as_posix()
            if path.is_dir() and not path.is_symlink():
                continue
            if path.is_symlink() or relative not in listed:
                return f"unexpected  {printable(relative)}"
            if hash_file(path) != listed[relative]:
                return f"modified    {printable(relative)}"
    except (OrtbundleError, OSError, ValueError, AttributeError, KeyError, TypeError) as exc:
        return str(exc).split("\n", 1)[0]
    return None


def _signed(version_dir: Path) -> bool:
    """Whether a build is signed: its signature is there, or its manifest names a key."""
    if (version_dir / SIGNATURE_NAME).is_file():
        return True
    try:
        return bool(json.loads((version_dir / MANIFEST_NAME).read_bytes()).get("signing_key_id"))
    except (OSError, ValueError, AttributeError):
        return False


def _rendered(report: Report, memo: Memo) -> str:
    """render_html, kept by the page's content and the tool's code: compiling the template is
    most of the cost (0.1-0.3 s), and a warm build's report is usually the last one's. A kept
    page is re-hashed before it is used; a release's memo is off: it renders afresh."""
    return memo.remembered_text(
        "report", [repr(report)], lambda: render_html(report), suffix=".html"
    )
