"""The house rules of the package's layout, read from the code's own imports (import-linter in CI
checks the layers; these check what it cannot): a short top level, modules of one job, no import
of our own modules hidden inside a function, and no import loop even counting those."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.helpers.probe import REPO

PACKAGE = REPO / "ortbundle"
MAX_TOP_LEVEL = 12  # modules and subpackages directly under ortbundle/, its __init__ included
MAX_LINES = 800  # past this a module does two jobs


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int, bool]]:
    """(imported module of ortbundle, line, inside a function) for every import in `path`."""
    tree = ast.parse(path.read_text("utf-8"))
    package = _module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    nested = {
        id(node)
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(function)
    }
    for node in ast.walk(tree):
        names: list[str] = []
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        else:
            names = [a.name for a in node.names]
        for name in names:
            while name not in known and "." in name:
                name = name.rpartition(".")[0]
            if name.startswith("ortbundle") and name in known:
                yield name, node.lineno, id(node) in nested


def test_the_top_level_is_short() -> None:
    entries = [
        p.name for p in PACKAGE.iterdir() if (p.suffix == ".py") or (p / "__init__.py").is_file()
    ]
    assert len(entries) <= MAX_TOP_LEVEL, sorted(entries)


def test_no_module_does_two_jobs_by_length() -> None:
    long = {
        name: lines
        for name, path in _modules().items()
        if (lines := len(path.read_text("utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_no_import_of_our_own_modules_hides_inside_a_function() -> None:
    """Only cli/ (which keeps a no-op cheap) and a package face (__init__.py, which defers a
    third-party parser or HTTP stack behind a choice) may import ortbundle modules late."""
    known = _modules()
    hidden = [
        f"{_module_name(path)}:{line} imports {target}"
        for name, path in known.items()
        if not name.startswith("ortbundle.cli") and path.name != "__init__.py"
        for target, line, inside in _imports(path, known)
        if inside
    ]
    assert not hidden, "\n".join(hidden)


def test_no_import_loop_even_counting_late_imports() -> None:
    known = _modules()
    graph = {
        name: {target for target, _, _ in _imports(path, known) if target != name}
        for name, path in known.items()
    }
    loops: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                loops.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not loops, "\n".join(" -> ".join(loop) for loop in loops)
