"""invoke pin: move a recipe's pins, or check them all."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ortbundle._core.fsio import atomic_write
from ortbundle.cli.common import ROOT, USAGE_EXIT, CommandFailed, guard
from ortbundle.config.project import Project

if TYPE_CHECKING:
    pass


def run_pin(
    component: str | None,
    *,
    version: str | None,
    sources: list[str],
    index_url: str | None,
    no_build: bool,
    force: bool,
    check: bool,
    json_path: Path | None,
    root: Path = ROOT,
) -> None:
    """Move a recipe's pins (or check them all) and print the bump report."""
    from ortbundle._core.progress import Reporter
    from ortbundle.tools.pin import PinOptions, check_pins, pin

    project = Project.at(root)
    options = PinOptions(
        version=version,
        sources=tuple(sources),
        build=not no_build,
        force=force,
        index_url=index_url,
    )
    with Reporter() as reporter:
        if check:
            report = guard(lambda: check_pins(project, (component,) if component else (), options))
            for line in report.lines():
                reporter.line(line)
            if json_path:
                guard(lambda: atomic_write(json_path, report.to_json()))
            if not report.ok:
                attention = any(
                    s.state not in ("current", "held", "unreachable") for s in report.statuses
                )
                headline = (
                    "ortbundle: some pins need attention"
                    if attention
                    else "ortbundle: some pins could not be checked (registry unreachable)"
                )
                raise CommandFailed(headline, report.exit_code)
            return
        if not component:
            raise CommandFailed(
                "ortbundle: usage error: name the component to pin (-c COMPONENT), or pass --check",
                USAGE_EXIT,
            )
        result = guard(lambda: pin(project, component, options, reporter))
        for line in result.lines():
            reporter.line(line)
        if json_path:
            guard(lambda: atomic_write(json_path, result.to_json()))
        if result.refused:
            raise CommandFailed(
                f"ortbundle: the new pin does not build; recipes/{component}.toml is unchanged "
                "(--force writes it anyway)",
                result.exit_code,
            )
