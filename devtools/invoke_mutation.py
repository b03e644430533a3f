"""invoke mutation: mutation-test the modules whose job is to refuse, one at a time."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ortbundle.cli.common import ROOT, CommandFailed, guard

if TYPE_CHECKING:
    from devtools.mutation import Score

GOAL = 90.0  # percent of mutants killed in every module (docs/testing.md)


def run_mutation(
    modules: list[str],
    *,
    max_children: int = 2,
    show: bool = False,
    root: Path = ROOT,
) -> list[Score]:
    """Run each module asked for (default: all) with its own tests; print its score and its
    survivors; fail (exit 1) when a module kills fewer than GOAL percent of its mutants."""
    from devtools.mutation import load_modules, run_module, select, survivor_diffs

    chosen = guard(lambda: select(load_modules(root), modules))
    scores = []
    for module in chosen:
        print(
            f"mutation: {module.name} ({', '.join(module.sources)}) with {len(module.tests)} "
            "test file(s)",
            flush=True,
        )
        result = guard(lambda: run_module(root, module, max_children))  # noqa: B023
        scores.append(result)
        print(line(result), flush=True)
        for survivor in result.survivors:
            print(f"  survived: {survivor}")
        if show and result.survivors:
            print(guard(lambda: survivor_diffs(root, module)))  # noqa: B023
    short = [s for s in scores if s.percent < GOAL]
    if short:
        names = ", ".join(f"{s.module} {s.percent:.1f} %" for s in short)
        raise CommandFailed(
            f"ortbundle: mutation: under {GOAL:.0f} % killed: {names} — kill each survivor with "
            "a test, or list it in docs/testing.md with why it is equivalent "
            "(invoke mutation --module M --show prints what each one changed)",
            1,
        )
    return scores


def line(score: Score) -> str:
    """One module's figures, as docs/testing.md records them."""
    return (
        f"{score.module}: {score.mutants} mutants, {score.killed} killed, {score.survived} "
        f"survived ({score.no_tests} reached by no test), {score.timeouts} timeouts, "
        f"{score.percent:.1f} % killed, {score.seconds:.0f} s"
    )
