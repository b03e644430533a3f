"""Skip a whole build whose inputs have not changed.

A build records its key (a hash of everything it reads) and the stat of every output it
published under `state/`; the next build with the same key whose outputs are untouched does
nothing and leaves dist/ exactly as it is (no file is rewritten, no mtime changes). The pruned
runtimes' own cache, one level down, is the stage step's (ortbundle/stage/runtime_cache.py).

A no-op `invoke build` ends in `prepare_build`, so this module imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ortbundle._core.locations import default_cache_dir
from ortbundle._core.memo import Memo, digest_of
from ortbundle.config.plan import TOOL_LICENSE, BuildOptions, Plan, Project, load_plan
from ortbundle.pipeline.noop import (
    Environment,
    environment_facts,
    input_stats,
    remember_quick,
    unchanged_build,
)
from ortbundle.pipeline.noop import record_build as record_build

# --- whole builds ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PreparedBuild:
    """What is known before any work: the plan, where it publishes, and the build key — made
    once, by the no-op check, and handed to the build that follows it."""

    plan: Plan  # models hashed, not parsed (build() parses them when it runs)
    version_dir: Path
    cache: Path
    key: str
    facts: Environment  # the environment's part of the key: the code, the epoch, …
    inputs: dict[str, dict[str, int]]  # the stat of the project's inputs, before planning
    memo: Memo  # where the build keeps what it computes (off for a release)
    previous: dict[str, Any] | None = None  # an identical earlier build's summary: nothing to do

    @property
    def epoch(self) -> int:
        return self.facts.epoch

    @property
    def code(self) -> str:
        return self.facts.code

    def remember(self, project: Project, options: BuildOptions) -> None:
        """Keep the quick record of this build, once it is published (or found unchanged)."""
        remember_quick(
            self.cache,
            project,
            options,
            product=self.plan.product.name,
            version_dir=self.version_dir,
            key=self.key,
            inputs=self.inputs,
            facts=self.facts,
        )


def build_inputs(
    project: Project, plan: Plan, options: BuildOptions, facts: Environment
) -> list[str]:
    """Everything a build's output depends on, as strings for the build key: the environment's
    part (noop.Environment), then what the project's files say."""
    parts = [*facts.lines(), plan.product.digest, repr(plan.targets), repr(plan.product.channels)]
    parts.append(repr(plan.product.addon_of))  # what an add-on reads of the main manifest
    parts += plan.templates.key_lines()  # the project's replacements of built-in templates
    digests = {n: r.digest for n, r in plan.recipes.items()} | plan.model_digests
    parts += [f"{n}:{d}" for n, d in sorted(digests.items())]
    parts += [repr((options.release, options.audit_channels))]
    for path in sorted(project.licenses.rglob("*")):
        if path.is_file():
            parts.append(f"{path.relative_to(project.licenses)}:{path.read_bytes().hex()}")
    parts.append(TOOL_LICENSE.read_text("utf-8"))
    return parts


def prepare_build(project: Project, options: BuildOptions) -> PreparedBuild:
    """Plan the build and compute its key; `previous` is set when it would change nothing.

    Cheap on purpose: no pipeline module is imported and no model is parsed. The stat of the
    inputs is taken before the plan reads them, so an edit made meanwhile is seen next time.
    """
    inputs = input_stats(project)
    plan = load_plan(project, options, parse_models=False)
    facts = environment_facts(project, plan.product.name, options)
    version_dir = project.dist / plan.product.name / plan.product.version
    cache = options.cache_dir or default_cache_dir()
    key = digest_of(["build", *build_inputs(project, plan, options, facts)])
    previous = None
    # an audit publishes nothing to compare with; an unsigned release is refused by the build
    if not options.audit_only and not (options.release and facts.signing == "unsigned"):
        previous = unchanged_build(cache, version_dir, key)
    memo = Memo.for_build(cache, release=options.release)
    prepared = PreparedBuild(plan, version_dir, cache, key, facts, inputs, memo)
    if previous is not None:
        prepared.remember(project, options)  # the next no-op need not plan
        return replace(prepared, previous={**previous, "version_dir": str(version_dir)})
    return prepared
