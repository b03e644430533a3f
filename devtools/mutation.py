"""Mutation testing of the code whose job is to refuse (`invoke mutation`).

mutmut changes one operator, constant or call at a time in a module and runs the tests that
exercise it; a mutant the tests still pass ("survived") is behaviour no test pins. Each module
is run alone with only its own test files (the mapping is data: [tool.ortbundle.mutation] in
pyproject.toml), so one module takes minutes, not the hours the whole suite would.

Every module gets its own work directory, .mutation/<module>/, holding symlinks to the
repository and mutmut's mutants/ copy: a second run of the same module reuses the mutants and
the verdicts of functions whose source did not change. mutmut reads its settings from the
current directory's pyproject.toml, so the settings are set in the worker process instead
(`python -m devtools.mutation <module>`, started by `run_module`).
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import sys
import time
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ortbundle._core.errors import ConfigError, OrtbundleError

WORK_DIR = ".mutation"
LOG = "mutmut.log"
# Not linked into a work directory: version control, outputs, caches, and the work directories.
UNLINKED = frozenset(
    {
        ".git",
        "dist",
        WORK_DIR,
        "mutants",
        LOG,
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".venv",
    }
)
# A mutant's tests run as the suite runs them, minus what a mutant cannot use: the cache
# provider (shared state between forked runs) and the real tier (downloads).
PYTEST_ARGS = ("-p", "no:cacheprovider", "-m", "not real")

# mutmut's exit codes per mutant (mutmut.stats.status_by_exit_code), folded into what the
# score counts; anything else (a crash of the harness, an interruption) is "other".
_STATUS = {
    1: "killed",
    3: "killed",
    0: "survived",
    5: "no tests",
    33: "no tests",
    34: "skipped",
    36: "timeout",
    -24: "timeout",
    24: "timeout",
    152: "timeout",
    255: "timeout",
    None: "not checked",
}


class MutationError(OrtbundleError):
    """mutmut could not run a module (its tests fail unmutated, or mutmut itself failed)."""


@dataclass(frozen=True)
class MutationModule:
    """A module under mutation: its source files, the test files that exercise them, and
    (optionally) the only functions of those files to mutate, when a file does more than the
    job under test (fsio.py's check_member_name among its atomic writes)."""

    name: str
    sources: tuple[str, ...]
    tests: tuple[str, ...]
    functions: tuple[str, ...] = ()
    deselect: tuple[str, ...] = ()  # tests (node ids) that cannot run twice in one process

    @property
    def mutants(self) -> tuple[str, ...]:
        """mutmut's names for the mutants run (globs); none means every mutant of the sources,
        whose verdicts a later run then reuses where the function did not change."""
        dotted = [source.removesuffix(".py").replace("/", ".") for source in self.sources]
        return tuple(f"{d}.x_{function}__mutmut_*" for d in dotted for function in self.functions)


@dataclass(frozen=True)
class Score:
    """One module's verdicts. Timeouts count as killed (the mutant made a test hang, which the
    harness stops and fails); a mutant no selected test reaches counts as survived."""

    module: str
    mutants: int
    killed: int
    survived: int
    timeouts: int
    no_tests: int
    other: int
    seconds: float
    survivors: tuple[str, ...]

    @property
    def percent(self) -> float:
        """Killed (timeouts included) of all mutants."""
        return 100.0 * (self.killed + self.timeouts) / self.mutants if self.mutants else 0.0


def load_modules(root: Path) -> tuple[MutationModule, ...]:
    """The modules under mutation, in pyproject.toml's order; a file it names must exist."""
    pyproject = root / "pyproject.toml"
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    table = data.get("tool", {}).get("ortbundle", {}).get("mutation", {})
    if not table:
        raise ConfigError(
            "no module is set up for mutation testing",
            component="mutation",
            file=str(pyproject),
            fix="add [tool.ortbundle.mutation.<module>] with sources and tests",
        )
    modules = []
    for name, entry in table.items():
        module = MutationModule(
            name,
            tuple(entry["sources"]),
            tuple(entry["tests"]),
            tuple(entry.get("functions", ())),
            tuple(entry.get("deselect", ())),
        )
        for path in (*module.sources, *module.tests):
            if not (root / path).is_file():
                raise ConfigError(
                    f"mutation module {name} names {path}, which does not exist",
                    component="mutation",
                    file=str(pyproject),
                    fix=f"correct the path in [tool.ortbundle.mutation.{name}]",
                )
        modules.append(module)
    return tuple(modules)


def select(modules: tuple[MutationModule, ...], names: list[str]) -> tuple[MutationModule, ...]:
    """The modules asked for by name (all when none is named); an unknown name is refused."""
    if not names:
        return modules
    known = {module.name: module for module in modules}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ConfigError(
            f"no mutation module named {', '.join(unknown)}",
            component="mutation",
            fix=f"choose from {', '.join(known)}",
        )
    return tuple(known[name] for name in names)


def work_dir(root: Path, module: MutationModule) -> Path:
    """The module's own directory under .mutation/, linking the repository's inputs."""
    where = root / WORK_DIR / module.name
    where.mkdir(parents=True, exist_ok=True)
    for name in linked(root):
        link = where / name
        if not link.is_symlink():
            link.symlink_to(root / name)
    return where


def linked(root: Path) -> list[str]:
    """The repository's top-level entries a work directory links: the package, which mutmut
    copies and mutates, and what the tests read besides it (the helpers find the repository as
    tests/../, so mutmut copies each of these beside the mutated package)."""
    return sorted(
        entry.name
        for entry in root.iterdir()
        if entry.name not in UNLINKED and not entry.name.endswith(".egg-info")
    )


def run_module(root: Path, module: MutationModule, max_children: int) -> Score:
    """Run mutmut over one module in its work directory (a worker process) and score it;
    mutmut's own output goes to .mutation/<module>/mutmut.log, shown when it fails."""
    where = work_dir(root, module)
    log = where / LOG
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "devtools.mutation",
                "run",
                module.name,
                str(max_children),
            ],
            cwd=where,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if done.returncode:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-30:])
        raise MutationError(
            f"mutmut failed on module {module.name} (exit {done.returncode}):\n{tail}",
            component="mutation",
            file=str(log),
            fix="the tests must pass unmutated: run them with python3 -m pytest "
            + " ".join(module.tests),
        )
    return score(module, where / "mutants", time.monotonic() - started)


def survivor_diffs(root: Path, module: MutationModule) -> str:
    """The change each surviving mutant made, as unified diffs (mutmut show, per survivor)."""
    where = work_dir(root, module)
    done = subprocess.run(
        [sys.executable, "-m", "devtools.mutation", "show", module.name, "0"],
        cwd=where,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise MutationError(
            f"could not show the survivors of module {module.name}: {done.stderr.strip()}",
            component="mutation",
            fix=f"run invoke mutation --module {module.name} first",
        )
    return done.stdout


def score(module: MutationModule, mutants: Path, seconds: float) -> Score:
    """Count the verdicts mutmut recorded for the module's sources (mutants/<source>.meta)."""
    codes: dict[str, int | None] = {}
    for source in module.sources:
        meta = json.loads((mutants / f"{source}.meta").read_text(encoding="utf-8"))
        codes.update(meta["exit_code_by_key"])
    if module.mutants:
        codes = {
            name: code
            for name, code in codes.items()
            if any(fnmatch.fnmatch(name, pattern) for pattern in module.mutants)
        }
    statuses = {name: _STATUS.get(code, "other") for name, code in codes.items()}
    counts = Counter(statuses.values())
    return Score(
        module=module.name,
        mutants=len(codes),
        killed=counts["killed"],
        survived=counts["survived"] + counts["no tests"],
        timeouts=counts["timeout"],
        no_tests=counts["no tests"],
        other=counts["other"] + counts["not checked"] + counts["skipped"],
        seconds=seconds,
        survivors=tuple(
            sorted(name for name, status in statuses.items() if status in ("survived", "no tests"))
        ),
    )


def _configure(module: MutationModule) -> None:
    """mutmut's settings for one module, set in-process (it reads no other file than the
    work directory's pyproject.toml, which is the repository's and says nothing of mutmut)."""
    import mutmut.configuration as mutmut_configuration
    from mutmut.configuration import Config, ForkServerWarmup, ProcessIsolation

    mutmut_configuration._config = Config(
        also_copy=[Path(name) for name in linked(Path.cwd()) if name != "ortbundle"],
        only_mutate=list(module.sources),
        do_not_mutate=[],
        do_not_mutate_patterns=[],
        max_stack_depth=-1,
        debug=False,
        source_paths=[Path("ortbundle")],
        resolved_mutated_source_paths=[Path.cwd().resolve() / "mutants" / "ortbundle"],
        pytest_add_cli_args=[*PYTEST_ARGS, *(f"--deselect={test}" for test in module.deselect)],
        pytest_add_cli_args_test_selection=list(module.tests),
        mutate_only_covered_lines=False,
        timeout_multiplier=15.0,
        timeout_constant=1.0,
        type_check_command=[],
        use_setproctitle=False,
        track_dependencies=True,
        dependency_tracking_depth=-1,
        cache_invalidation_files=[],
        cache_invalidation_exclude=[],
        on_dependency_change="warn",
        use_git_change_detection=False,
        process_isolation=ProcessIsolation.FORK,
        forkserver_warmup=ForkServerWarmup.COLLECT,
        max_forkserver_restarts=3,
        preload_modules_file=None,
        log_to_file=False,
        log_file_path="mutants/mutmut-debug.log",
    )


def _worker(action: str, name: str, max_children: int) -> None:
    """In the work directory: mutate the module and run its tests against every mutant
    ("run"), or print the diff of each survivor of the last run ("show")."""
    root = (Path.cwd() / "ortbundle").resolve().parent
    module = {module.name: module for module in load_modules(root)}[name]
    _configure(module)  # before mutmut.__main__ is imported: its imports read the settings
    from mutmut.__main__ import _run
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    if action == "show":
        for survivor in score(module, Path("mutants"), 0.0).survivors:
            print(f"# {survivor}")
            print(get_diff_for_mutant(survivor, path=survivor_source(module, survivor)))
        return

    _retest_survivors(module, Path("mutants"))
    # This process imported ortbundle from the repository to get here; the tests must import
    # it from mutants/ (mutmut puts that first on sys.path), so the originals are forgotten.
    for loaded in [key for key in sys.modules if key.split(".")[0] == "ortbundle"]:
        del sys.modules[loaded]
    _run(list(module.mutants), max_children)


def _retest_survivors(module: MutationModule, mutants: Path) -> None:
    """Forget the last run's survivors, so this run tries each one against the tests as they
    are now; mutmut itself reuses every verdict of a function whose source did not change, and
    a kill stays valid while the tests only grow."""
    for source in module.sources:
        meta_path = mutants / f"{source}.meta"
        if not meta_path.is_file():
            continue
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        codes = meta["exit_code_by_key"]
        for name, code in codes.items():
            if _STATUS.get(code) in ("survived", "no tests"):
                codes[name] = None
        meta_path.write_text(json.dumps(meta, indent=4), encoding="utf-8")


def survivor_source(module: MutationModule, mutant: str) -> str:
    """The source file a mutant's name points into."""
    for source in module.sources:
        if mutant.startswith(source.removesuffix(".py").replace("/", ".") + "."):
            return source
    raise ValueError(mutant)


if __name__ == "__main__":
    _worker(sys.argv[1], sys.argv[2], int(sys.argv[3]))
