"""Configuration problems collected across files, raised as one ConfigError (exit 2)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ortbundle._core.errors import ConfigError
from ortbundle._core.words import plural


@dataclass(frozen=True)
class Problem:
    """One mistake: which file, which table, which key, what is wrong and the nearest fix."""

    file: str  # as the user names it: recipes/x.toml
    table: str  # "component", "targets.linux-x86_64.take[0]"; "" for the top level
    key: str
    message: str
    suggestion: str = ""  # the nearest valid key or value
    fix: str = ""
    path: str = ""  # the file's full path, when it differs from `file`

    def line(self) -> str:
        place = f"[{self.table}]" if self.table else "the top level"
        text = f"`{self.key}`: {self.message} in {place} of {self.file}"
        if self.suggestion:
            text += f" — did you mean `{self.suggestion}`?"
        if self.fix:
            text += f" — fix: {self.fix}"
        return text


class ConfigProblems(ConfigError):
    """Every configuration problem a build found, one line each: a product with three typos in
    two recipes hears of all three at once."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        files = sorted({p.file for p in self.problems})
        paths = sorted({p.path or p.file for p in self.problems})
        count = len(self.problems)
        super().__init__(
            f"{plural(count, 'configuration problem')} in {', '.join(files)}",
            file=paths[0] if len(paths) == 1 else None,
        )

    def __str__(self) -> str:
        """One line per problem; the full path too when all are in one file (a project outside
        the working directory)."""
        where = f" [file {self.file}]" if self.file and self.file not in files_of(self) else ""
        if len(self.problems) == 1:
            return self.problems[0].line() + where
        lines = "".join(f"\n  - {p.line()}" for p in self.problems)
        return f"{self.message}{where}:{lines}"


def files_of(error: ConfigProblems) -> set[str]:
    return {p.file for p in error.problems}


def raise_if_any(problems: Iterable[Problem]) -> None:
    found = list(problems)
    if found:
        raise ConfigProblems(found)


def nearest(word: str, candidates: Iterable[str]) -> str:
    """The candidate a typo most likely meant ("" when none is close); case never hides one."""
    import difflib  # only a mistake pays for it

    pool = sorted(set(candidates))
    folded = {c.lower(): c for c in pool}
    if word.lower() in folded:
        return folded[word.lower()]
    close = difflib.get_close_matches(word.lower(), list(folded), n=1, cutoff=0.6)
    return folded[close[0]] if close else ""
