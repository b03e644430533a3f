"""Closure mistakes of a whole build in one report: every runtime on every target is pruned even
after one fails, and the user gets one error listing them all with the `[[externals]]` entries
to add to *their* product manifest (a round trip costs 20-60 s; one per mistake was too many)."""

from __future__ import annotations

from collections.abc import Sequence

from ortbundle._core.errors import ClosureError
from ortbundle.config.externals import group_name, snippet
from ortbundle.stage.closure import Unresolved


class ClosureProblems(ClosureError):
    """Several closure errors of one build (exit code of a closure error)."""

    def __init__(self, problems: Sequence[ClosureError], manifest: str) -> None:
        self.problems = tuple(problems)
        lines = [f"{len(self.problems)} closure problem(s), every target and runtime checked:"]
        lines += [f"  - {_line(p)}" for p in self.problems]
        missing = [p for p in self.problems if isinstance(p, Unresolved)]
        fix = None
        if missing:
            fix = (
                "for what the user's system provides, declare its groups in the product manifest "
                f"({manifest}) — never in ortbundle/data/ — for example (set kind, and the "
                "channel packages):\n\n" + "\n\n".join(proposals(missing))
            )
        else:  # each distinct fix once (the same kind of problem on several targets)
            fix = "; ".join(dict.fromkeys(p.fix for p in self.problems if p.fix)) or None
        super().__init__(
            "\n".join(lines),
            file=manifest,
            fix=fix or "fix each problem listed (component and target are named)",
        )


def _line(problem: ClosureError) -> str:
    where = ", ".join(
        f"{label} {value}"
        for label, value in (("component", problem.component), ("target", problem.target))
        if value
    )
    return f"{problem.message} [{where}]" if where else problem.message


def proposals(missing: Sequence[Unresolved]) -> list[str]:
    """One `[[externals]]` entry per proposed group, naming the targets that need it."""
    groups: dict[str, tuple[dict[str, None], dict[str, None]]] = {}
    for problem in missing:
        for _who, needed in problem.missing:
            names, targets = groups.setdefault(group_name(needed), ({}, {}))
            names[needed] = None
            if problem.target:
                targets[problem.target] = None
    return [
        snippet(group, "toolkit", list(names), list(targets), channel="arch")
        for group, (names, targets) in sorted(groups.items())
    ]


def raise_collected(problems: Sequence[ClosureError], manifest: str) -> None:
    """Nothing, one problem as it was (with the manifest's snippet), or all of them at once."""
    if not problems:
        return
    flat = [q for p in problems for q in (p.problems if isinstance(p, ClosureProblems) else [p])]
    if len(flat) == 1 and not isinstance(flat[0], Unresolved):
        raise flat[0]
    raise ClosureProblems(flat, manifest)
