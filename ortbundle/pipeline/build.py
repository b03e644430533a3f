"""The build, as an ordered list of steps: plan → fetch → stage (per target, in parallel) →
licensing → channels → evidence, after the no-op decision and before the publish.

Each step is its package's entry (`fetch.step`, `stage.step`, `licensing.step`,
`channels.step`, `evidence.step`) and receives what it uses; this module only orders them,
holds the lock on dist/ and collects what each returns, warnings included, into `BuildResult`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from ortbundle._core.errors import ClosureError, OrtbundleError, PackagingError
from ortbundle._core.fsio import locked, locked_directory
from ortbundle._core.memo import digest_of
from ortbundle._core.progress import Reporter
from ortbundle._core.repairs import Repair, watching
from ortbundle._core.words import plural
from ortbundle.channels import ChannelOutput
from ortbundle.channels.authenticode import UNSIGNED_NOTE, authenticode_identity, check_signed
from ortbundle.channels.openpgp import OpenPgpKey, openpgp_key, signed_channels, unsigned_warning
from ortbundle.channels.step import generate_all, package_digests, package_input, package_signers
from ortbundle.config.plan import (
    DEFAULT_PRODUCT,
    BuildOptions,
    Plan,
    Project,
    load_plan,
    with_models,
)
from ortbundle.config.schema.problems import ConfigProblems, Problem, raise_if_any
from ortbundle.evidence.report.closures import write_closures
from ortbundle.evidence.report.write import check_compare
from ortbundle.evidence.signing import SecretKey, signing_key
from ortbundle.evidence.step import finish_version
from ortbundle.evidence.verify import verify_tree
from ortbundle.fetch.artifacts import Artifact
from ortbundle.fetch.step import FetchSettings, fetch_line, fetch_sources
from ortbundle.licensing.audit import AuditFailed, ChannelAudit
from ortbundle.licensing.audit_print import audit_summary
from ortbundle.licensing.obligations import write_sources
from ortbundle.licensing.step import Licensed, license_targets
from ortbundle.pipeline.incremental import PreparedBuild, prepare_build, record_build
from ortbundle.pipeline.preflight import preflight
from ortbundle.pipeline.replay import keep_build
from ortbundle.pipeline.result import BuildResult, TargetResult, write_summary
from ortbundle.stage.closure_report import raise_collected
from ortbundle.stage.probe.names import probe_mode
from ortbundle.stage.staging import discard, scratch_dir
from ortbundle.stage.step import (
    StageInput,
    TargetStage,
    stage_target,
    stage_warnings,
    undeclared_loads,
)

__all__ = [
    "DEFAULT_PRODUCT",
    "AuditFailed",
    "BuildOptions",
    "BuildResult",
    "Plan",
    "Project",
    "build",
    "fetch",
]


def fetch(
    project: Project, options: BuildOptions, reporter: Reporter, plan: Plan | None = None
) -> tuple[Plan, dict[str, Artifact]]:
    """The plan (loaded unless given) and every source of it, fetched and verified."""
    plan = plan or load_plan(project, options)
    settings = FetchSettings(
        project.root,  # the project's own .npmrc
        cache_dir=options.cache_dir,
        verify_all=options.release,
        offline=options.offline,
        index_url=options.index_url,
        retry=options.retry,
        environ=options.environ,
        workers=options.workers,
    )
    return plan, fetch_sources(plan.all_sources(), settings, reporter)


def build(
    project: Project,
    options: BuildOptions,
    reporter: Reporter,
    prepared: PreparedBuild | None = None,
) -> BuildResult:
    """Stage, attribute and audit every target aside; publish the version only if all succeeded.
    The whole version directory (stages, evidence, packaging) is built in a hidden sibling and
    swapped in at the end, so dist/ holds the previous build or the new one, never a mix.
    `prepared` is the no-op check the caller already made (its key is not computed again).
    """
    prepared = prepared or prepare_build(project, options)
    environ = os.environ if options.environ is None else options.environ
    if options.release and prepared.previous is not None:
        key = signing_key(
            prepared.plan.product, options.signing_key, environ, release=True, keys=project.keys
        )
        if not _verified(prepared.version_dir, key):  # the record said unchanged; dist/ does not
            prepared = replace(prepared, previous=None)
    if not options.audit_only and prepared.previous is not None:
        summary, version_dir = prepared.previous, prepared.version_dir
        signed_by = summary.get("signed_by")
        return BuildResult(prepared.plan, {}, (), (), version_dir, (), signed_by, summary)
    plan = with_models(project, prepared.plan)
    probe = probe_mode(environ)  # a bad ORTBUNDLE_PROBE is refused before any work
    key, openpgp = None, None
    if not options.audit_only:
        key = signing_key(
            plan.product, options.signing_key, environ, release=options.release, keys=project.keys
        )
        # the Linux packages' key: one named but unusable is refused before any work
        openpgp = openpgp_key(environ, plan.product.channels)
        if "nsis" in plan.product.channels:  # a configured identity that cannot work: refused
            authenticode_identity(os.environ)  # now, naming the channel and the variable
    # ortbundle/pipeline/preflight.py: free space and the policy, before any download
    preflight(project, plan, prepared.cache, prepared.version_dir)
    check_compare(options.compare, plan.product.name)  # a bad --compare fails before the work
    reporter.begin("fetch")
    with watching() as repairs:  # cache entries that failed their hash: in the summary too
        plan, artifacts = fetch(project, options, reporter, plan)  # the plan the key was made of
    reporter.done(fetch_line(artifacts))
    version_dir = prepared.version_dir
    lock = prepared.cache / "locks" / f"dist-{digest_of([str(version_dir.resolve())])}.lock"
    waiting = f"publishing {version_dir}"
    # one build at a time writes a dist/<product>/<version>: those sharing the cache, and those
    # sharing only dist/ (containers with caches of their own), by a lock on dist/<product>/
    with locked(lock, waiting=waiting), locked_directory(version_dir.parent, waiting=waiting):
        work = (project, options, prepared, plan, artifacts, key, probe)
        return _build_locked(*work, reporter, repairs, openpgp)


def _verified(version_dir: Path, key: SecretKey | None) -> bool:
    """Whether dist/'s tree is, byte for byte, what its manifest says, signed by `key`. A
    release takes no record stored in the cache as proof (whoever can write the cache can
    rewrite the record of dist/ too), so a release no-op re-hashes the tree first."""
    try:
        return key is not None and verify_tree(version_dir, public_key=key.public_key()).ok
    except OrtbundleError:
        return False


def _build_locked(
    project: Project,
    options: BuildOptions,
    prepared: PreparedBuild,
    plan: Plan,
    artifacts: dict[str, Artifact],
    key: SecretKey | None,
    probe: str,
    reporter: Reporter,
    repairs: Sequence[Repair] = (),
    openpgp: OpenPgpKey | None = None,
) -> BuildResult:
    version_dir = prepared.version_dir
    scratch = scratch_dir(version_dir)
    try:
        reporter.begin("stage")
        inputs = [
            StageInput(
                project,
                plan,
                t,
                artifacts,
                scratch / t,
                prepared.cache,
                prepared.memo,  # off for a release: it re-hashes every memoised input
                options.release,  # and is strict about undeclared loads
                probe,
            )
            for t in plan.targets
        ]
        stages = _stage_all(inputs, options.workers, plan)
        runtimes = sum(len(s.runtimes) for s in stages)
        reporter.done(
            f"{plural(len(stages), 'target')}, {plural(runtimes, 'runtime')} pruned and staged"
        )
        reporter.begin("licensing")
        licensed = license_targets(
            project,
            plan.product,
            stages,
            templates=plan.templates,
            memo=prepared.memo,
            release=options.release,
            audit_channels=options.audit_channels,
            workers=options.workers,
        )
        audits = licensed.audits
        staged = _target_results(stages, licensed)
        reporter.done(f"{plural(len(audits), 'channel')}, {_verdicts(audits)}")
        # a release's undeclared run-time loads, said with the audit's failures: one build
        # reports every problem of a new product
        if options.release and (loads := undeclared_loads(stages)):
            if not all(a.passed for a in audits):
                raise AuditFailed(plan.product, audits, licensed.licensing, also=loads)
            raise_collected(loads, str(plan.product.path))
        if options.audit_only:
            if not all(a.passed for a in audits):
                raise AuditFailed(plan.product, audits, licensed.licensing)
            discard(scratch, up_to=project.dist)
            return BuildResult(plan, artifacts, staged, audits, version_dir)
        # for report.html and the SBOM: the closures, and the requirements model they render
        write_closures(scratch, [(t.target, t.runtimes, t.requirements) for t in staged])
        # the corresponding source of each component whose licence asks for it
        write_sources(
            scratch,
            licensed.obligations,
            {sha: a.path for sha, a in artifacts.items()},
            prepared.epoch,
        )
        packages: tuple[ChannelOutput, ...] = ()
        if all(a.passed for a in audits) or not options.release:
            reporter.begin("channels")
            packages = _package(plan, staged, prepared, options, scratch, openpgp)
            reporter.done(
                f"{plural(len(packages), 'channel')}: {', '.join(p.channel for p in packages)}"
            )
            windows = [(p.files, p.signers) for p in packages if p.channel == "nsis"]
            if windows and authenticode_identity(os.environ) is not None and options.release:
                check_signed(windows)
        reporter.begin("evidence")
        finish_version(
            project,
            plan,
            scratch,
            version_dir,
            licensing=licensed.licensing,
            audits=audits,
            inputs=artifacts,
            epoch=prepared.epoch,
            key=key,
            release=options.release,
            compare=options.compare,
            digests=package_digests(packages),
            signers=package_signers(packages),
            memo=prepared.memo,
        )
        reporter.done("manifest, SBOM, provenance " + ("signed" if key else "UNSIGNED"))
    except BaseException:
        discard(scratch, up_to=project.dist)
        raise
    targets = tuple(dataclasses.replace(t, stage=version_dir / t.target) for t in staged)
    result = BuildResult(
        plan,
        artifacts,
        targets,
        audits,
        version_dir,
        packages,
        key.public_key().key_id_hex if key else None,
        repairs=tuple(repairs),
        warnings=(
            *stage_warnings(stages),
            *_unsigned(packages, os.environ, openpgp),
        ),
    )
    with contextlib.suppress(OSError):  # published all the same; the next one cannot be a no-op
        # build-summary.json, before the record
        write_summary(result, reporter.phases, release=options.release)
        record = {
            "signed_by": key.public_key().key_id_hex if key else None,
            "audit": audit_summary(audits),
        }
        record_build(prepared.cache, version_dir, prepared.key, record)
        prepared.remember(project, options)  # the next no-op need not plan
        if prepared.memo.on and options.compare is None:  # for the next such build elsewhere
            placed = {
                dest.relative_to(scratch): copy
                for dest, copy in prepared.memo.placed.items()
                if dest.is_relative_to(scratch)
            }
            downloads = [a.path for a in artifacts.values()]
            warnings = list(result.warnings)
            keep_build(
                prepared.cache, prepared.key, version_dir, placed, record, warnings, downloads
            )
    return result


def _unsigned(
    packages: Sequence[ChannelOutput], environ: Mapping[str, str], openpgp: OpenPgpKey | None
) -> tuple[str, ...]:
    """Said once for the whole build, in one line: which of its outputs are unsigned. (The
    Authenticode identity is the process's environment's, as makensis runs the signer in it.)"""
    built = any(p.channel == "nsis" and any(f.suffix == ".exe" for f in p.files) for p in packages)
    parts = [UNSIGNED_NOTE] if built and authenticode_identity(environ) is None else []
    if openpgp is None:
        parts += unsigned_warning([p.channel for p in packages])
    return ("; ".join(parts),) if parts else ()


def _stage_all(inputs: Sequence[StageInput], workers: int, plan: Plan) -> list[TargetStage]:
    """Every target's stage, a worker thread each; all targets' problems reported together."""
    with ThreadPoolExecutor(max_workers=min(workers, len(inputs))) as pool:
        futures = [pool.submit(stage_target, work) for work in inputs]
        stages: list[TargetStage] = []
        problems: list[ClosureError] = []
        globs: list[Problem] = []
        for future in futures:
            try:
                stages.append(future.result())
            except ClosureError as problem:
                problems.append(problem)
            except ConfigProblems as found:  # every target's, in one report
                globs.extend(found.problems)
        raise_if_any(globs)
        raise_collected(problems, str(plan.product.path))
    return stages


def _target_results(stages: Sequence[TargetStage], licensed: Licensed) -> tuple[TargetResult, ...]:
    """Each target as the build reports it: its stage and its licensing, side by side."""
    return tuple(
        TargetResult(
            s.target,
            s.directory,
            tuple(staged for _, staged in s.runtimes),
            s.texts,
            lt.licensing,
            lt.files,
            s.requirements,
        )
        for s, lt in zip(stages, licensed.targets, strict=True)
    )


def _package(
    plan: Plan,
    staged: Sequence[TargetResult],
    prepared: PreparedBuild,
    options: BuildOptions,
    scratch: Path,
    openpgp: OpenPgpKey | None = None,
) -> tuple[ChannelOutput, ...]:
    """Every channel's packages, written into the scratch version directory; with `openpgp`,
    every output of a channel it signs is signed, or none is published."""
    inputs = {
        t.target: package_input(
            plan.product,
            t.target,
            t.stage,
            t.files,
            t.licensing,
            [(plan.recipes[r.runtime], r) for r in t.runtimes],
            t.requirements,
            prepared.epoch,
            # off for a release: every package and SBOM is produced afresh
            dataclasses.replace(prepared.memo, own=(scratch, prepared.version_dir)),
            plan.templates,
            openpgp,
            release=options.release,
        )
        for t in staged
    }
    packaging = scratch / "packaging"
    packages = tuple(generate_all(plan.product.channels, inputs, packaging, options.workers))
    unsigned = [
        p.channel
        for p in packages
        if openpgp is not None and p.channel in signed_channels([p.channel]) and not p.signers
    ]
    if unsigned:
        raise PackagingError(
            f"the {', '.join(unsigned)} output is unsigned though an OpenPGP key is configured",
            component=f"packaging:{unsigned[0]}",
            fix="report it: a channel the key signs published nothing signed",
        )
    return packages


def _verdicts(audits: Sequence[ChannelAudit]) -> str:
    """The licensing phase's word: "passed" only when nothing awaits a person."""
    failed = sum(1 for a in audits if not a.passed)
    waiting = sum(1 for a in audits if a.passed and a.awaiting)
    if failed:
        return f"{failed} FAILED"
    if waiting:
        return f"{waiting} pass for development only (`--release` will refuse)"
    return "passed"
