"""The pipeline, end to end: plan → fetch → (per target, in parallel) prune and stage → report."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from ortbundle._core.errors import ClosureError, OrtbundleError
from ortbundle._core.fsio import atomic_write, locked, locked_directory
from ortbundle._core.memo import Memo, digest_of
from ortbundle._core.progress import Reporter, status
from ortbundle._core.repairs import Repair, watching
from ortbundle._core.version import __version__
from ortbundle.channels import ChannelOutput
from ortbundle.channels.registry import generate_all, package_input
from ortbundle.config.plan import (
    DEFAULT_PRODUCT,
    TOOL_LICENSE,
    BuildOptions,
    Plan,
    Project,
    load_plan,
    policy_digest,
    with_models,
)
from ortbundle.config.project import CodeSigner, code_signer
from ortbundle.config.recipes import Recipe, TargetRecipe
from ortbundle.config.schema.problems import ConfigProblems, Problem, raise_if_any
from ortbundle.config.targets import Target, get_target, overlays
from ortbundle.evidence.record import InputInfo, write_evidence
from ortbundle.evidence.report.closures import write_closures
from ortbundle.evidence.report.write import check_compare, write_report
from ortbundle.evidence.signing import SecretKey, signing_key
from ortbundle.evidence.verify import verify_tree
from ortbundle.fetch.archives import MemberReader, open_source
from ortbundle.fetch.artifacts import Artifact, Fetcher
from ortbundle.fetch.cache import Cache, default_cache_dir
from ortbundle.fetch.member_memo import MemoizedMembers
from ortbundle.licensing.attribution import (
    NOTICE_NAME,
    TOOL_COMPONENT,
    TargetLicensing,
    attribute_target,
    list_stage,
    notice_text,
    with_tool_file,
)
from ortbundle.licensing.audit import AuditFailed, ChannelAudit, audit_summary, audit_targets
from ortbundle.pipeline.incremental import (
    PreparedBuild,
    prepare_build,
    record_build,
    restore_runtime,
    runtime_key,
    store_runtime,
)
from ortbundle.pipeline.preflight import preflight
from ortbundle.pipeline.result import BuildResult, TargetResult, write_summary
from ortbundle.stage.binaries.soname import patchelf_version
from ortbundle.stage.closure_report import raise_collected
from ortbundle.stage.index_json import index_files, write_index
from ortbundle.stage.kinds import check_component
from ortbundle.stage.models import StagedModel, models_index, stage_model, write_models_index
from ortbundle.stage.plugins import refuse_bundled_core
from ortbundle.stage.requirements import TargetRequirements, resolve
from ortbundle.stage.runtime_loads import refuse_undeclared, with_runtime_loads
from ortbundle.stage.staging import (
    TEXT_MODE,
    StagedFile,
    StagedRuntime,
    StagedText,
    discard,
    memo_reader,
    open_archives,
    publish,
    scratch_dir,
    stage_license_texts,
    stage_runtime,
    stage_texts,
    stage_tool_license,
    staged_file,
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
    "finish_version",
]


def fetch(
    project: Project, options: BuildOptions, reporter: Reporter, plan: Plan | None = None
) -> tuple[Plan, dict[str, Artifact]]:
    plan = plan or load_plan(project, options)
    cache = Cache(options.cache_dir or default_cache_dir(), verify_all=options.release)
    fetcher = Fetcher(
        cache,
        reporter,
        offline=options.offline,
        index_url=options.index_url,
        policy=options.retry,
        project_root=project.root,  # the project's own .npmrc
        environ=options.environ,
    )
    # a nested source's inner archive comes back too, under its own SHA-256
    artifacts = fetcher.fetch_all(plan.all_sources(), jobs=options.workers)
    return plan, artifacts


def fetch_line(artifacts: Mapping[str, Artifact]) -> str:
    """What the fetch verified, counted as the plan counts it: the downloads (the archives
    nested in them apart), and how many of them came over the network."""
    outer = [a for sha256, a in artifacts.items() if sha256 == a.source.sha256]
    nested = len(artifacts) - len(outer)
    inside = f" (and {nested} archives nested in them)" if nested else ""
    fetched = sum(1 for a in outer if a.downloaded)
    return f"{len(outer)} downloads verified{inside}, {fetched} downloaded"


def _stage_models(
    project: Project,
    plan: Plan,
    target: str,
    artifacts: dict[str, Artifact],
    tmp: Path,
    texts: list[StagedText],
    memo: Memo,
) -> list[StagedModel]:
    """Every model of the product, gated, under models/<name>/, with its licence texts."""
    staged = []
    # a backend may be a runtime another product ships (android-qnn): any runtime recipe
    known_runtimes = {*plan.product.runtimes, *(p.stem for p in project.recipes.glob("*.toml"))}
    for model in plan.models.values():
        ids = plan.model_sources(model)
        paths = {sid: artifacts[model.sources[sid].archive_sha256].path for sid in ids}
        archives: dict[str, MemberReader] = {}
        try:
            for sid in sorted(ids):
                source = model.sources[sid]
                archives[sid] = MemoizedMembers(
                    source.archive_sha256,
                    source.archive_name,
                    memo,
                    functools.partial(
                        open_source, paths[sid], label=source.archive_name, component=model.name
                    ),
                )
            staged.append(
                stage_model(
                    model,
                    archives,
                    tmp,
                    runtimes=known_runtimes,
                    target_runtimes=plan.product.runtimes_for(target),
                    target=target,
                )
            )
            texts.extend(
                stage_texts(
                    [(model.name, model.texts)],
                    model.name,
                    target,
                    archives,
                    tmp,
                    project.licenses,
                )
            )
        finally:
            for archive in archives.values():
                archive.close()
    return staged


def _stage_target(
    project: Project,
    plan: Plan,
    target_name: str,
    artifacts: dict[str, Artifact],
    tmp: Path,
    cache: Path,
    memo: Memo,
    release: bool,
) -> TargetResult:
    """One target's stage in `tmp`: its runtimes, models and the tool's own files, every file
    attributed to one component and NOTICE written; a worker thread runs one per target."""
    work = _TargetWork(project, plan, target_name, artifacts, tmp, cache, memo, release)
    tmp.mkdir()
    runtimes, texts = _stage_runtimes(work)
    # what the user's machine must provide, decided once: every output renders it
    requirements = resolve(target_name, plan.product.system, runtimes, plan.product.plugins)
    models = _stage_models(project, plan, target_name, artifacts, tmp, texts, memo)
    tool_text, tool_files = _write_tool_files(work, runtimes, models, requirements)
    licensing = attribute_target(
        target_name,
        tmp,
        runtimes,
        texts,
        tool_files,
        [tool_text],
        __version__,
        models,
        # each bundled DLL's version resource and each text's copyright lines, read once per
        # SHA-256, and each licence expression's facts (a release reads them again)
        memo=memo,
    )
    licensing = _write_notice(work, licensing)
    files = list_stage(tmp, licensing)
    return TargetResult(
        target_name,
        tmp,
        tuple(s for _, s in runtimes),
        tuple(texts),
        licensing,
        files,
        requirements,
    )


@dataclass(frozen=True)
class _TargetWork:
    """What every step of one target's stage reads: the project and plan, the target, the
    fetched artifacts, the stage directory, the cache's runtime store and the build's memo."""

    project: Project
    plan: Plan
    target: str
    artifacts: dict[str, Artifact]
    tmp: Path  # the target's stage
    cache: Path  # where pruned runtimes are stored (a release stores but never restores)
    memo: Memo  # the build's: off for a release, which reads every memoised input again
    release: bool  # strict about undeclared run-time loads


def _stage_runtimes(
    work: _TargetWork,
) -> tuple[list[tuple[Recipe, StagedRuntime]], list[StagedText]]:
    """Every runtime of the target with its licence texts; every runtime is pruned, and all
    their closure problems are reported at once."""
    runtimes: list[tuple[Recipe, StagedRuntime]] = []
    texts: list[StagedText] = []
    problems: list[ClosureError] = []
    globs: list[Problem] = []  # recipe globs matching nothing: reported before any closure
    for recipe, ids in work.plan.sources_for(work.target):
        try:
            staged = _stage_one_runtime(work, recipe, ids, texts, problems)
        except ConfigProblems as found:
            globs.extend(found.problems)
            continue
        if staged is not None:
            runtimes.append((recipe, staged))
    raise_if_any(globs)
    raise_collected(problems, str(work.plan.product.path))
    return runtimes, texts


def _stage_one_runtime(
    work: _TargetWork,
    recipe: Recipe,
    ids: set[str],
    texts: list[StagedText],
    problems: list[ClosureError],
) -> StagedRuntime | None:
    """One runtime, restored from the memo or pruned from its sources `ids`, its loads
    checked, its licence texts added to `texts`; None when pruning found a problem (in
    `problems`)."""
    # the tool's data under the recipe's and the product's [[externals]]
    target = overlays(work.plan.product.externals, recipe.externals).apply(get_target(work.target))
    status(f"{work.target}: {recipe.name}")  # the live line of the stage phase
    section = recipe.for_target(work.target)
    # the macOS code's signer: its identity is part of what the pruned runtime depends on
    signer = code_signer(os.environ) if target.format == "macho" else None
    key = _runtime_key(recipe, section, target, signer)
    # the pruned runtime of an earlier build; never for a release: a record stored beside
    # the memo cannot vouch for it, so a release prunes again from re-hashed wheels
    staged = restore_runtime(work.cache, key, work.tmp, recipe.directory) if work.memo.on else None
    text_ids = {t.source for rule in section.licenses for t in rule.texts if t.source}
    # a restored runtime reads only its licence texts, through the member memo: the wheels
    # are opened (and their member names checked) only for a text the memo lacks
    opened = ids if staged is None else set()
    paths = {
        sid: work.artifacts[recipe.sources[sid].archive_sha256].path for sid in opened | text_ids
    }
    archives = open_archives(recipe, opened, paths)
    readers = {
        sid: memo_reader(recipe, sid, paths[sid], archives.get(sid), work.memo) for sid in text_ids
    }
    try:
        if staged is None:
            try:
                staged = stage_runtime(recipe, target, archives, work.tmp, signer)
            except ClosureError as problem:
                problems.append(problem)
                return None
            if recipe.kind == "plugin-ep":
                refuse_bundled_core(recipe, staged, work.target)
            store_runtime(work.cache, key, work.tmp, staged)
        # the kind, providers and EP name against the kept libraries' facts, restored or not:
        # the component table is not part of the key, so an edit to it prunes nothing again
        check_component(recipe, staged, work.target)
        staged = _with_checked_loads(work, recipe, target, staged)
        texts.extend(stage_license_texts(recipe, target, readers, work.tmp, work.project.licenses))
        return staged
    finally:
        for reader in readers.values():
            reader.close()
        for archive in archives.values():
            archive.close()


def _runtime_key(
    recipe: Recipe, section: TargetRecipe, target: Target, signer: CodeSigner | None = None
) -> str:
    """What the pruned runtime depends on: its name, this target's recipe section, the bytes
    of the sources it takes — not the rest of the recipe, so a pin for another target leaves
    it alone."""
    take_ids = {take.source for take in section.takes} | {p.source for p in section.payloads}
    # a rename's bytes also depend on the patchelf that rewrote them
    tools = f"\npatchelf {patchelf_version()}" if section.renames else ""
    if signer is not None:  # and a signed Mach-O's on the identity that signed it
        tools += f"\ncodesign {signer.identity}"
    return runtime_key(
        f"{recipe.name}\n{section!r}{tools}\n{target.externals!r}",
        target.name,  # get_target's name, which the overlays keep
        # the archive the members come from: for a nested source, the inner one's pin
        (recipe.sources[i].archive_sha256 for i in take_ids),
    )


def _with_checked_loads(
    work: _TargetWork, recipe: Recipe, target: Target, staged: StagedRuntime
) -> StagedRuntime:
    """The runtime with the libraries it opens by name, declared and found; a release refuses
    one that opens a library its recipe does not declare."""
    staged = with_runtime_loads(staged, recipe, target)
    if work.release and staged.closure.load_findings:
        raise refuse_undeclared(
            staged.closure.load_findings,
            component=recipe.name,
            target=work.target,
            file=str(recipe.path),
        )
    return staged


def _write_tool_files(
    work: _TargetWork,
    runtimes: list[tuple[Recipe, StagedRuntime]],
    models: list[StagedModel],
    requirements: TargetRequirements,
) -> tuple[StagedText, list[StagedFile]]:
    """The tool's own files in the stage: runtimes.json and the loader, models.json when the
    product has models, and the tool's licence text."""
    product = work.plan.product
    cores = [(r, s) for r, s in runtimes if r.kind == "runtime"]
    plugins = [(r, s, product.plugins[r.name]) for r, s in runtimes if r.kind == "plugin-ep"]
    write_index(work.tmp, product, work.target, cores, plugins, requirements)
    tool_text = stage_tool_license(work.tmp, TOOL_COMPONENT, TOOL_LICENSE)
    tool_files = [staged_file(work.tmp, name) for name in index_files(product)]
    if models:
        index = models_index(product.name, product.version, work.target, models)
        tool_files.append(write_models_index(work.tmp, index))
    return tool_text, tool_files


def _write_notice(work: _TargetWork, licensing: TargetLicensing) -> TargetLicensing:
    """NOTICE, written from the attribution and so attributed after it, to the tool."""
    notice = work.tmp / NOTICE_NAME
    product = work.plan.product
    text = notice_text(
        product.name, product.version, licensing, memo=work.memo, overrides=work.plan.templates
    )
    atomic_write(notice, text)
    notice.chmod(TEXT_MODE)
    return with_tool_file(licensing, staged_file(work.tmp, NOTICE_NAME))


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
    if options.release and prepared.previous is not None and not _verified(prepared, options):
        prepared = replace(prepared, previous=None)  # the record said unchanged; dist/ does not
    if not options.audit_only and prepared.previous is not None:
        summary = prepared.previous
        return BuildResult(
            prepared.plan,
            {},
            (),
            (),
            prepared.version_dir,
            signed_by=summary.get("signed_by"),
            up_to_date=summary,
        )
    environ = os.environ if options.environ is None else options.environ
    plan = with_models(project, prepared.plan)
    key = None if options.audit_only else signing_key(plan.product, options, environ)
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
        return _build_locked(project, options, prepared, plan, artifacts, key, reporter, repairs)


def _verified(prepared: PreparedBuild, options: BuildOptions) -> bool:
    """Whether dist/'s tree is, byte for byte, what its manifest says, signed by this build's
    key. A release takes no record stored in the cache as proof (whoever can write the cache
    can rewrite the record of dist/ too), so a release no-op re-hashes the tree first."""
    environ = os.environ if options.environ is None else options.environ
    try:
        key = signing_key(prepared.plan.product, options, environ)
        public = key.public_key() if key is not None else None
        return public is not None and verify_tree(prepared.version_dir, public_key=public).ok
    except OrtbundleError:
        return False


def _build_locked(
    project: Project,
    options: BuildOptions,
    prepared: PreparedBuild,
    plan: Plan,
    artifacts: dict[str, Artifact],
    key: SecretKey | None,
    reporter: Reporter,
    repairs: Sequence[Repair] = (),
) -> BuildResult:
    version_dir = prepared.version_dir
    scratch = scratch_dir(version_dir)
    try:
        reporter.begin("stage")
        with ThreadPoolExecutor(max_workers=min(options.workers, len(plan.targets))) as pool:
            futures = [
                pool.submit(
                    _stage_target,
                    project,
                    plan,
                    t,
                    artifacts,
                    scratch / t,
                    prepared.cache,
                    prepared.memo,  # off for a release: it re-hashes every memoised input
                    options.release,  # and is strict about undeclared loads
                )
                for t in plan.targets
            ]
            staged: list[TargetResult] = []
            problems: list[ClosureError] = []
            globs: list[Problem] = []
            for future in futures:
                try:
                    staged.append(future.result())
                except ClosureError as problem:
                    problems.append(problem)
                except ConfigProblems as found:  # every target's, in one report
                    globs.extend(found.problems)
            raise_if_any(globs)
            raise_collected(problems, str(plan.product.path))
        runtimes = sum(len(t.runtimes) for t in staged)
        reporter.done(f"{len(staged)} targets, {runtimes} runtimes pruned and staged")
        reporter.begin("audit")
        licensing = [t.licensing for t in staged]
        audits = audit_targets(project, plan.product, licensing, options, prepared.memo)
        failed = sum(1 for a in audits if not a.passed)
        reporter.done(f"{len(audits)} channels, " + (f"{failed} FAILED" if failed else "passed"))
        if options.audit_only:
            if not all(a.passed for a in audits):
                raise AuditFailed(plan.product, audits, licensing)
            discard(scratch, up_to=project.dist)
            return BuildResult(plan, artifacts, tuple(staged), audits, version_dir)
        # for report.html and the SBOM: the closures, and the requirements model they render
        write_closures(scratch, [(t.target, t.runtimes, t.requirements) for t in staged])
        packages: tuple[ChannelOutput, ...] = ()
        if all(a.passed for a in audits) or not options.release:
            reporter.begin("package")
            packages = _package(plan, staged, prepared, options, scratch)
            reporter.done(f"{len(packages)} channels: {', '.join(p.channel for p in packages)}")
        reporter.begin("evidence")
        finish_version(
            project,
            plan,
            scratch,
            version_dir,
            licensing=licensing,
            audits=audits,
            inputs=artifacts,
            epoch=prepared.epoch,
            key=key,
            options=options,
            digests=package_digests(packages),
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
    )
    with contextlib.suppress(OSError):  # published all the same; the next one cannot be a no-op
        write_summary(result, reporter.phases, options)  # build-summary.json, before the record
        record_build(
            prepared.cache,
            version_dir,
            prepared.key,
            {
                "signed_by": key.public_key().key_id_hex if key else None,
                "audit": audit_summary(audits),
            },
        )
        prepared.remember(project, options)  # the next no-op need not plan
    return result


def _package(
    plan: Plan,
    staged: list[TargetResult],
    prepared: PreparedBuild,
    options: BuildOptions,
    scratch: Path,
) -> tuple[ChannelOutput, ...]:
    """Every channel's packages, written into the scratch version directory."""
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
            prepared.memo,  # off for a release: every package and SBOM is produced afresh
            plan.templates,
        )
        for t in staged
    }
    packages = generate_all(plan.product.channels, inputs, scratch / "packaging", options.workers)
    return tuple(packages)


def package_digests(packages: Sequence[ChannelOutput]) -> dict[str, str]:
    """The SHA-256 each channel already computed, by output path: not hashed twice."""
    return {
        f"packaging/{p.channel}/{name}": sha256
        for p in packages
        for name, sha256 in p.digests.items()
    }


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
    options: BuildOptions,
    digests: Mapping[str, str],
    memo: Memo,
) -> None:
    """The evidence tail of a build and of a release: the strict gate, the manifest, SBOM and
    signature over the scratch version directory, then its publication in one step. `memo`:
    the build's, where the report and the SBOM are kept (off for a release)."""
    if options.release and not all(a.passed for a in audits):
        raise AuditFailed(plan.product, audits, list(licensing))
    write_report(  # ortbundle/report/: report.html, listed in the manifest like all evidence
        scratch,
        version_dir,
        plan=plan,
        licensing=licensing,
        audits=audits,
        signed_by=key.public_key().key_id_hex if key else None,
        compare=options.compare,
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
        memo=memo,
        templates=plan.templates.files,  # a release's are its own: checked against each runner's
    )
    publish(scratch, version_dir)
