"""What a finished build prints: the size table and the system libraries each target needs.

Presentation only: it reads a `BuildResult` and returns text or rich renderables; the pipeline
never imports it.
"""

from __future__ import annotations

from collections import Counter

from rich.table import Table

from ortbundle.build import BuildResult


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
