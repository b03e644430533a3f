"""invoke smoke: install each built package and run every runtime it ships."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ortbundle._core.errors import OrtbundleError
from ortbundle.cli.common import CommandFailed, headline
from ortbundle.config.project import BuildOptions, Project

if TYPE_CHECKING:
    pass


def run_smoke(
    product: str, targets: Sequence[str], *, root: Path, dist: Path | None, scratch: Path | None
) -> None:
    """The `invoke smoke` task: the product's built version directory, every runtime; raises
    CommandFailed (exit 13) when any line FAILs."""
    from ortbundle._core.errors import SmokeError
    from ortbundle.config.plan import load_plan
    from ortbundle.tools.smoke.run import smoke

    try:
        project = Project.at(root, dist)
        plan = load_plan(project, BuildOptions(product=product), parse_models=False)
        version_dir = project.dist / plan.product.name / plan.product.version
        if not version_dir.is_dir():
            raise SmokeError(
                f"{plan.product.name} {plan.product.version} is not built",
                file=str(version_dir),
                fix=f"run `invoke build --product {product}` first",
            )
        report = smoke(
            version_dir,
            package_name=plan.product.packaging.package_name,
            channels=plan.product.channels,
            targets=targets,
            scratch=scratch,
        )
    except OrtbundleError as exc:
        raise CommandFailed(headline(exc), exc.exit_code) from None
    if report.failed:
        raise CommandFailed(
            f"ortbundle: smoke error: {len(report.failed)} FAIL", SmokeError.exit_code
        )
