"""invoke ci-workflow: write the GitHub workflow that builds the product; invoke build-source:
the job of it that builds a from-source component's archive again from its pinned sources."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ortbundle._core.fsio import atomic_write
from ortbundle.cli.common import ROOT, guard
from ortbundle.config.project import BuildOptions, Project

if TYPE_CHECKING:
    pass


def run_ci_workflow(product: str, out: Path | None, *, root: Path = ROOT) -> None:
    from ortbundle.config.plan import load_plan
    from ortbundle.tools.ci_workflow import source_jobs, workflow_yaml

    plan = guard(lambda: load_plan(Project.at(root), BuildOptions(product=product)))
    target = out or root / "ci" / f"{product}-github-actions.yml"
    target.parent.mkdir(parents=True, exist_ok=True)
    built = source_jobs(plan.product, plan.recipes)
    guard(lambda: atomic_write(target, workflow_yaml(plan.product, built=built)))
    sources = f"{len(built)} from-source build job(s), " if built else ""
    print(
        f"wrote {target} ({sources}{len(plan.product.targets)} target jobs, a release and a "
        "publish job)"
    )


def run_build_source(component: str, source: str | None, *, root: Path = ROOT) -> None:
    """Build the component's binary archive from its pinned sources, hold it to the pin."""
    from ortbundle._core.progress import Reporter
    from ortbundle.tools.build_source import build_source

    project = Project.at(root)
    with Reporter() as reporter:
        built = guard(lambda: build_source(project, component, source, reporter))
    print(
        f"{component}: {built.source} rebuilt from its pinned sources: sha256 {built.sha256}, "
        f"the pin's ({built.path})"
    )
