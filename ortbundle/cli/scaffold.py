"""invoke new-recipe: scaffold a recipe (and product) from coordinates."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ortbundle.cli.common import ROOT, CommandFailed, guard
from ortbundle.config.project import Project

if TYPE_CHECKING:
    from ortbundle.tools.scaffold import ScaffoldOptions


def run_new_recipe(options: ScaffoldOptions, *, root: Path | None = None) -> None:
    """The task: print what was found and written; exit codes as ortbundle/_core/errors.py, and
    EXIT_NEEDS_CHOICE (8, as an unresolved library in a build) when the recipe is written but a
    choice is left to the user."""
    from ortbundle._core.progress import Reporter
    from ortbundle.tools.scaffold import EXIT_NEEDS_CHOICE, new_recipe

    project = Project.at(root or ROOT)
    with Reporter() as reporter:
        result = guard(lambda: new_recipe(project, options, reporter))
        for line in result.lines():
            reporter.line(line)
    if result.choices:
        raise CommandFailed(
            f"ortbundle: {result.recipe.name} written; {len(result.choices)} choice(s) left to "
            "you (above) before it builds",
            EXIT_NEEDS_CHOICE,
        )
