"""The evidence step, the tail of a build and of a release: the strict gate, report.html, the
manifest, SBOM, provenance and signature over the scratch version directory, then its
publication in one step. Its entry is `finish_version`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ortbundle._core.memo import Memo
from ortbundle.config.plan import Plan, Project, policy_digest
from ortbundle.evidence.record import InputInfo, write_evidence
from ortbundle.evidence.report.write import write_report
from ortbundle.evidence.signing import PublicKey, SecretKey, load_public_key
from ortbundle.licensing.attribution import TargetLicensing
from ortbundle.licensing.audit import AuditFailed, ChannelAudit
from ortbundle.stage.staging import publish

__all__ = ["finish_version"]


def finish_version(
    project: Project,
    plan: Plan,
    scratch: Path,
    version_dir: Path,
    *,
    licensing: Sequence[TargetLicensing],
    audits: tuple[ChannelAudit, ...],
    inputs: Mapping[str, InputInfo],
    epoch: int,
    key: SecretKey | None,
    release: bool,
    compare: Path | None,
    digests: Mapping[str, str],
    memo: Memo,
    signers: Mapping[str, Mapping[str, str]] | None = None,
) -> None:
    """Gate, write the evidence into `scratch` and publish it as `version_dir`. `release`:
    a failed audit stops here; `compare`: report.html compares with that earlier version
    directory; `digests`: the SHA-256 the channels already computed, by output path
    (`signers`: who signed each signed package, by output path); `memo`:
    the build's, where the report and the SBOM are kept (off for a release)."""
    if release and not all(a.passed for a in audits):
        raise AuditFailed(plan.product, audits, list(licensing))
    write_report(  # evidence/report/: report.html, listed in the manifest like all evidence
        scratch,
        version_dir,
        plan=plan,
        licensing=licensing,
        audits=audits,
        signed_by=key.public_key().key_id_hex if key else None,
        public_key=_public_key(project, plan, key),
        compare=compare,
        memo=memo,
    )
    write_evidence(
        scratch,
        product=plan.product,
        recipes=plan.all_recipes,
        licensing=list(licensing),
        audits=audits,
        inputs=inputs,
        epoch=epoch,
        key=key,
        root=project.root,
        policy_sha256=policy_digest(project),
        digests=dict(digests),
        signers=signers,
        memo=memo,
        templates=plan.templates.files,  # a release's are its own: checked against each runner's
    )
    publish(scratch, version_dir)


def _public_key(project: Project, plan: Plan, key: SecretKey | None) -> PublicKey | None:
    """The key an earlier signed build is checked with: the product's keys/<product>.pub,
    else this build's own key's public half."""
    path = project.keys / f"{plan.product.name}.pub"
    if path.is_file():
        return load_public_key(path)
    return key.public_key() if key is not None else None
