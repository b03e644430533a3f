"""invoke ci-workflow: write the GitHub workflow that builds the product."""

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
    from ortbundle.tools.ci_workflow import workflow_yaml

    plan = guard(lambda: load_plan(Project.at(root), BuildOptions(product=product)))
    target = out or root / "ci" / f"{product}-github-actions.yml"
    target.parent.mkdir(parents=True, exist_ok=True)
    guard(lambda: atomic_write(target, workflow_yaml(plan.product)))
    print(f"wrote {target} ({len(plan.product.targets)} target jobs, a release and a publish job)")
