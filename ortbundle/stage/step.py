"""The stage step: one target's runtimes pruned, its models gated, the loader's index written.

Its entry is `stage_target`, which a worker thread runs once per target; `stage_warnings`
says, once per build, what the staged targets warn about. Attribution and NOTICE are the
licensing step's, which reads what this step laid out.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ortbundle._core.errors import ClosureError
from ortbundle._core.memo import Memo
from ortbundle._core.progress import status
from ortbundle.config.plan import Plan, Project
from ortbundle.config.project import TOOL_COMPONENT, TOOL_LICENSE, CodeSigner, code_signer
from ortbundle.config.recipes import Recipe, TargetRecipe
from ortbundle.config.schema.problems import ConfigProblems, Problem, raise_if_any
from ortbundle.config.targets import Target, get_target, overlays
from ortbundle.fetch.archives import MemberReader, open_source
from ortbundle.fetch.artifacts import Artifact
from ortbundle.fetch.member_memo import MemoizedMembers
from ortbundle.stage.binaries.loads import warning_lines as load_warnings
from ortbundle.stage.binaries.soname import patchelf_version
from ortbundle.stage.closure_report import raise_collected
from ortbundle.stage.index_json import index_files, write_index
from ortbundle.stage.kinds import (
    check_component,
    check_plugin_name,
    provider_warnings,
    read_domains,
    read_offered,
    read_plugin_ep_names,
)
from ortbundle.stage.models import StagedModel, models_index, stage_model, write_models_index
from ortbundle.stage.plugins import refuse_bundled_core
from ortbundle.stage.reachable import warning_lines as never_chosen
from ortbundle.stage.requirements import TargetRequirements, resolve
from ortbundle.stage.runtime_cache import restore_runtime, runtime_key, store_runtime
from ortbundle.stage.runtime_loads import refuse_undeclared, with_runtime_loads
from ortbundle.stage.staging import (
    StagedFile,
    StagedRuntime,
    StagedText,
    memo_reader,
    open_archives,
    stage_license_texts,
    stage_runtime,
    stage_texts,
    stage_tool_license,
    staged_file,
)

__all__ = ["StageInput", "TargetStage", "stage_target", "stage_warnings", "undeclared_loads"]


@dataclass(frozen=True)
class StageInput:
    """What one target's stage reads: the project and plan, the target, the fetched artifacts,
    the stage directory, the cache's runtime store and the build's memo."""

    project: Project
    plan: Plan
    target: str
    artifacts: Mapping[str, Artifact]
    directory: Path  # the target's stage, created by the step
    cache: Path  # where pruned runtimes are stored (a release stores but never restores)
    memo: Memo  # the build's: off for a release, which reads every memoised input again
    release: bool  # strict about undeclared run-time loads
    probe: str = "native"  # which cores are run to read what they offer (probe/names.py)


@dataclass(frozen=True)
class TargetStage:
    """One target laid out: its runtimes and models, the licence texts they brought, the
    tool's own files, what the user's machine must provide, and the runtimes no machine gets."""

    target: str
    directory: Path
    runtimes: tuple[tuple[Recipe, StagedRuntime], ...]
    texts: tuple[StagedText, ...]
    models: tuple[StagedModel, ...]
    tool_text: StagedText  # the tool's licence text
    tool_files: tuple[StagedFile, ...]  # runtimes.json, the loader, models.json
    requirements: TargetRequirements
    never_chosen: tuple[str, ...]  # a warning per runtime the loader would never pick


def stage_target(work: StageInput) -> TargetStage:
    """One target's stage in `work.directory`: its runtimes, models and the tool's own files."""
    work.directory.mkdir()
    runtimes, texts = _stage_runtimes(work)
    # what the user's machine must provide, decided once: every output renders it
    product = work.plan.product
    # a plugin EP's, custom-op library's or core user's needs are optional: see what it pairs with
    requirements = resolve(work.target, product.system, runtimes, product.paired)
    models = _stage_models(work, texts)
    tool_text, tool_files = _write_tool_files(work, runtimes, models, requirements)
    # the verdicts are kept under the build's memo (a release's is off: judged again)
    unreachable = never_chosen([work.directory], work.memo)
    return TargetStage(
        work.target,
        work.directory,
        tuple(runtimes),
        tuple(texts),
        tuple(models),
        tool_text,
        tuple(tool_files),
        requirements,
        tuple(unreachable),
    )


def stage_warnings(stages: Sequence[TargetStage]) -> tuple[str, ...]:
    """What the build warns about its stages, in the order the console prints it: undeclared
    run-time loads, providers the recipes leave out or lack, runtimes no machine gets."""
    found = [
        (s.target, staged.runtime, staged.directory, finding)
        for s in stages
        for _, staged in s.runtimes
        for finding in staged.closure.load_findings
    ]
    lines = load_warnings(found)
    lines += provider_warnings(
        (recipe, s.target, staged) for s in stages for recipe, staged in s.runtimes
    )
    lines += [line for s in stages for line in s.never_chosen]
    return tuple(lines)


def _stage_models(work: StageInput, texts: list[StagedText]) -> list[StagedModel]:
    """Every model of the product, gated, under models/<name>/, with its licence texts."""
    plan, project = work.plan, work.project
    staged = []
    # a backend may be a runtime another product ships (android-qnn): any runtime recipe
    known_runtimes = {*plan.product.runtimes, *(p.stem for p in project.recipes.glob("*.toml"))}
    for model in plan.models.values():
        ids = plan.model_sources(model)
        paths = {sid: work.artifacts[model.sources[sid].archive_sha256].path for sid in ids}
        archives: dict[str, MemberReader] = {}
        try:
            for sid in sorted(ids):
                source = model.sources[sid]
                archives[sid] = MemoizedMembers(
                    source.archive_sha256,
                    source.archive_name,
                    work.memo,
                    functools.partial(
                        open_source, paths[sid], label=source.archive_name, component=model.name
                    ),
                )
            staged.append(
                stage_model(
                    model,
                    archives,
                    work.directory,
                    runtimes=known_runtimes,
                    target_runtimes=plan.product.runtimes_for(work.target),
                    target=work.target,
                )
            )
            texts.extend(
                stage_texts(
                    [(model.name, model.texts)],
                    model.name,
                    work.target,
                    archives,
                    work.directory,
                    project.licenses,
                )
            )
        finally:
            for archive in archives.values():
                archive.close()
    return staged


def _stage_runtimes(
    work: StageInput,
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
    return _with_plugin_names(work, runtimes), texts


def _with_plugin_names(
    work: StageInput, runtimes: list[tuple[Recipe, StagedRuntime]]
) -> list[tuple[Recipe, StagedRuntime]]:
    """Each plugin EP with the EP names its factories give when registered with a core it
    pairs with on this target (run where this machine can), its ep_name held to them; each
    custom-op library with the operator domains it registers with that core."""
    cores = {r.name: s for r, s in runtimes if r.kind == "runtime"}
    product = work.plan.product
    out = []
    for recipe, staged in runtimes:
        paired = product.custom_ops if recipe.kind == "custom-ops" else product.plugins
        core = next((n for n in paired.get(recipe.name, ()) if n in cores), None)
        if recipe.kind == "plugin-ep" and core is not None:
            read = read_plugin_ep_names(
                recipe, staged, cores[core], work.directory, work.memo, work.probe
            )
            if read is not None:
                check_plugin_name(recipe, read, core)
                staged = replace(staged, offered=read)
        elif recipe.kind == "custom-ops" and core is not None:
            domains = read_domains(staged, cores[core], work.directory, work.memo, work.probe)
            staged = replace(staged, offered=domains) if domains is not None else staged
        out.append((recipe, staged))
    return out


def _stage_one_runtime(
    work: StageInput,
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
    stage = work.directory
    staged = restore_runtime(work.cache, key, stage, recipe.directory) if work.memo.on else None
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
                staged = stage_runtime(recipe, target, archives, stage, signer)
            except ClosureError as problem:
                problems.append(problem)
                return None
            if recipe.kind == "plugin-ep":
                refuse_bundled_core(recipe, staged, work.target)
            store_runtime(work.cache, key, stage, staged)
        # what the core offers, from running it where this machine can (memoised per SHA-256)
        offered = read_offered(recipe, staged, stage, work.memo, work.probe)
        staged = replace(staged, offered=offered)
        # the kind, providers and EP name against the kept libraries' facts, restored or not:
        # the component table is not part of the key, so an edit to it prunes nothing again
        check_component(recipe, staged, work.target)
        staged = _with_checked_loads(work, recipe, target, staged)
        texts.extend(stage_license_texts(recipe, target, readers, stage, work.project.licenses))
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
        # the kind too: it decides the closure (a core user leaves its core to the runtime)
        f"{recipe.name}\n{recipe.kind}\n{section!r}{tools}\n{target.externals!r}",
        target.name,  # get_target's name, which the overlays keep
        # the archive the members come from: for a nested source, the inner one's pin
        (recipe.sources[i].archive_sha256 for i in take_ids),
    )


def _with_checked_loads(
    work: StageInput, recipe: Recipe, target: Target, staged: StagedRuntime
) -> StagedRuntime:
    """The runtime with the libraries it opens by name, declared and found (a release refuses
    one that opens a library its recipe does not declare: `undeclared_loads`, after the licence
    audit, so that one build reports both)."""
    return with_runtime_loads(staged, recipe, target)


def undeclared_loads(stages: Sequence[TargetStage]) -> list[ClosureError]:
    """`--release`: each runtime that opens a library its recipe does not declare, as the
    refusal naming its recipe."""
    return [
        refuse_undeclared(
            staged.closure.load_findings,
            component=recipe.name,
            target=stage.target,
            file=str(recipe.path),
        )
        for stage in stages
        for recipe, staged in stage.runtimes
        if staged.closure.load_findings
    ]


def _write_tool_files(
    work: StageInput,
    runtimes: list[tuple[Recipe, StagedRuntime]],
    models: list[StagedModel],
    requirements: TargetRequirements,
) -> tuple[StagedText, list[StagedFile]]:
    """The tool's own files in the stage: runtimes.json and the loader, models.json when the
    product has models, and the tool's licence text."""
    product = work.plan.product
    cores = [(r, s) for r, s in runtimes if r.kind == "runtime"]
    plugins = [(r, s, product.plugins[r.name]) for r, s in runtimes if r.kind == "plugin-ep"]
    companions = [
        (r, s, product.paired[r.name]) for r, s in runtimes if r.kind in ("custom-ops", "uses-core")
    ]
    write_index(
        work.directory, product, work.target, cores, plugins, requirements, companions=companions
    )
    tool_text = stage_tool_license(work.directory, TOOL_COMPONENT, TOOL_LICENSE)
    tool_files = [staged_file(work.directory, name) for name in index_files(product)]
    if models:
        index = models_index(product.name, product.version, work.target, models)
        tool_files.append(write_models_index(work.directory, index))
    return tool_text, tool_files
