"""The licensing step: every staged file attributed to one component, NOTICE written from that
attribution, and each channel's targets audited against the policy and the waivers.

Its entry is `license_targets`; the stage step laid out what it reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ortbundle._core.fsio import atomic_write
from ortbundle._core.memo import Memo
from ortbundle._core.overrides import Overrides
from ortbundle._core.version import __version__
from ortbundle.config.plan import POLICY_NAME, Project
from ortbundle.config.products import Product
from ortbundle.licensing.attribution import (
    NOTICE_NAME,
    ShippedFile,
    TargetLicensing,
    attribute_target,
    list_stage,
    notice_text,
    with_tool_file,
)
from ortbundle.licensing.audit import ChannelAudit, audit_targets, load_policy
from ortbundle.licensing.compatibility import clashes, with_clashes
from ortbundle.licensing.obligations import (
    SourceObligation,
    offer_text,
    source_obligations,
    system_text,
)
from ortbundle.stage.staging import TEXT_MODE, staged_file
from ortbundle.stage.step import TargetStage

__all__ = ["Licensed", "TargetLicensed", "license_targets"]


@dataclass(frozen=True)
class TargetLicensed:
    """One target's attribution (NOTICE included) and every entry its packages must carry."""

    target: str
    licensing: TargetLicensing
    files: tuple[ShippedFile, ...]


@dataclass(frozen=True)
class Licensed:
    targets: tuple[TargetLicensed, ...]  # in the order of the stages
    audits: tuple[ChannelAudit, ...]
    # the components whose licence asks for their source with the binary (the policy's
    # [obligations]), across the targets
    obligations: tuple[SourceObligation, ...] = ()

    @property
    def licensing(self) -> list[TargetLicensing]:
        return [t.licensing for t in self.targets]


def license_targets(
    project: Project,
    product: Product,
    stages: Sequence[TargetStage],
    *,
    templates: Overrides,
    memo: Memo,
    release: bool,
    audit_channels: tuple[str, ...] = (),
    workers: int = 1,
) -> Licensed:
    """Attribute every target (one worker thread each) and audit the channels that carry them.

    `memo`: the build's, where each DLL's version resource, each text's copyright lines and
    each expression's facts are kept (off for a release, which reads them again);
    `audit_channels`: audit these channels rather than the product's packaging channels."""

    policy = load_policy(project.licenses / POLICY_NAME)
    obliging = (*policy.source, *policy.source_files)

    def attribute(stage: TargetStage) -> TargetLicensed:
        return _attribute(product, stage, templates, memo, obliging)

    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(stages)))) as pool:
        targets = tuple(pool.map(attribute, stages))
    licensing = [t.licensing for t in targets]
    audits = audit_targets(
        project, product, licensing, channels=audit_channels, release=release, memo=memo
    )
    audits = with_clashes(audits, clashes(policy.incompatible, product, licensing))
    return Licensed(targets, audits, source_obligations(licensing, obliging))


def _attribute(
    product: Product,
    stage: TargetStage,
    templates: Overrides,
    memo: Memo,
    obliging: tuple[str, ...],
) -> TargetLicensed:
    """One target's attribution, then NOTICE, written from it and so attributed after it, to
    the tool; with the written offer for the components whose licence (`obliging`: the
    policy's [obligations] globs) asks for their source with the binary."""
    licensing = attribute_target(
        stage.target,
        stage.directory,
        stage.runtimes,
        stage.texts,
        stage.tool_files,
        [stage.tool_text],
        __version__,
        stage.models,
        memo=memo,
    )
    notice = stage.directory / NOTICE_NAME
    text = notice_text(product.name, product.version, licensing, memo=memo, overrides=templates)
    obligations = source_obligations([licensing], obliging)
    text += offer_text(obligations, product.packaging.publisher, product.url)
    text += system_text([r for r, _ in stage.runtimes])
    atomic_write(notice, text)
    notice.chmod(TEXT_MODE)
    licensing = with_tool_file(licensing, staged_file(stage.directory, NOTICE_NAME))
    return TargetLicensed(stage.target, licensing, list_stage(stage.directory, licensing))
