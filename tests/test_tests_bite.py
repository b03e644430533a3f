"""The tests' own lint: the shapes of test code that pass whatever the code under test does.

Each rule was found in this suite (issue #32): a `git ls-files` run with `check=False` whose
output fed a loop, so that where git was missing the test asserted nothing and passed."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.probe import REPO

TESTS = REPO / "tests"

# (file, function): why a discarded `check=False` result is right there.
BEST_EFFORT = {
    ("helpers/disks.py", "_umount"): "cleanup of a test mount; a failure leaves only a tmpfs",
}


def _sources() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(TESTS.rglob("*.py")):
        yield path.relative_to(TESTS).as_posix(), ast.parse(path.read_text("utf-8"))


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            yield node


def _checks_false(call: ast.Call) -> bool:
    return any(
        k.arg == "check" and isinstance(k.value, ast.Constant) and k.value.value is False
        for k in call.keywords
    )


def _judged(name: str, function: ast.FunctionDef) -> bool:
    """Whether the result named `name` reaches an assert, a return or another call."""
    return any(
        isinstance(node, ast.Assert | ast.Return | ast.Call)
        and not (isinstance(node, ast.Call) and _checks_false(node))
        and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))
        for node in ast.walk(function)
    )


def _judged_statement(statement: ast.stmt, function: ast.FunctionDef) -> bool:
    """A `check=False` call's statement that keeps its result for a judge: returned to the
    caller, or bound to a name that an assert, a return or another call reads."""
    if isinstance(statement, ast.Return):
        return isinstance(statement.value, ast.Call)
    if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Call):
        (target,) = statement.targets
        return isinstance(target, ast.Name) and _judged(target.id, function)
    return False


def unjudged_runs(tree: ast.Module, file: str) -> list[str]:
    """Calls with `check=False` whose result nobody judges: the exit status is lost."""
    found = []
    for function in _functions(tree):
        if (file, function.name) in BEST_EFFORT:
            continue
        for statement in ast.walk(function):
            if not isinstance(statement, ast.stmt) or hasattr(statement, "body"):
                continue  # a compound statement's own calls are tests (`if run(...).returncode`)
            calls = [c for c in ast.walk(statement) if isinstance(c, ast.Call) and _checks_false(c)]
            direct = calls == [getattr(statement, "value", None)]
            if calls and not (direct and _judged_statement(statement, function)):
                found.append(f"{file}:{calls[0].lineno} {function.name}: result not judged")
    return sorted(set(found), key=lambda line: int(line.split(":")[1].split(" ")[0]))


def _constants(tree: ast.Module) -> set[str]:
    """Module-level names bound to a non-empty literal tuple, list, set or dict."""
    return {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and isinstance(node.value, ast.Tuple | ast.List | ast.Set | ast.Dict)
        and (node.value.keys if isinstance(node.value, ast.Dict) else node.value.elts)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }


def _literal(iterable: ast.expr, constants: frozenset[str] = frozenset()) -> bool:
    """A literal tuple/list/set, a module constant holding one (or its items, keys or values),
    `range(<constant>)` or `each(...)`: never silently empty."""
    if isinstance(iterable, ast.Tuple | ast.List | ast.Set):
        return bool(iterable.elts)
    if isinstance(iterable, ast.Name):
        return iterable.id in constants
    if (
        isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Attribute)
        and iterable.func.attr in {"items", "keys", "values"}
    ):
        return _literal(iterable.func.value, constants)
    if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name):
        constant = all(isinstance(a, ast.Constant) for a in iterable.args)
        if iterable.func.id in {"enumerate", "sorted", "reversed", "list"} and iterable.args:
            return _literal(iterable.args[0], constants)
        return iterable.func.id == "each" or (iterable.func.id == "range" and constant)
    return False


def assertions_only_in_open_loops(tree: ast.Module, file: str) -> list[str]:
    """Test functions whose every assert sits in a loop over something that may be empty."""
    found = []
    constants = frozenset(_constants(tree))
    for function in tree.body:
        if not isinstance(function, ast.FunctionDef) or not function.name.startswith("test"):
            continue
        guarded: set[int] = set()
        open_loops: set[int] = set()
        for loop in ast.walk(function):
            if isinstance(loop, ast.For):
                inside = {id(n) for n in ast.walk(loop) if isinstance(n, ast.Assert)}
                (guarded if _literal(loop.iter, constants) else open_loops).update(inside)
        asserts = [n for n in ast.walk(function) if isinstance(n, ast.Assert)]
        raises = [
            n
            for n in ast.walk(function)
            if isinstance(n, ast.With)
            and any("raises" in ast.unparse(item.context_expr) for item in n.items)
        ]
        outside = [a for a in asserts if id(a) not in open_loops or id(a) in guarded]
        if asserts and not outside and not raises:
            found.append(f"{file}:{function.lineno} {function.name}")
    return found


def swallowed_failures(tree: ast.Module, file: str) -> list[str]:
    """`except` clauses in tests that catch a failed assertion and do not raise again."""
    found = []
    for function in _functions(tree):
        for handler in ast.walk(function):
            if not isinstance(handler, ast.ExceptHandler):
                continue
            caught = ast.unparse(handler.type) if handler.type else "everything"
            wide = caught in {"everything", "Exception", "BaseException"}
            if "AssertionError" not in caught and not wide:
                continue
            kept = any(isinstance(n, ast.Raise) for n in ast.walk(handler)) or (
                handler.name is not None
                and any(
                    isinstance(n, ast.Name) and n.id == handler.name
                    for stmt in handler.body
                    for n in ast.walk(stmt)
                )
            )
            if not kept:
                found.append(f"{file}:{handler.lineno} {function.name}: swallows {caught}")
    return found


@pytest.mark.parametrize(
    "rule",
    [unjudged_runs, assertions_only_in_open_loops, swallowed_failures],
    ids=lambda r: r.__name__,
)
def test_no_test_can_pass_by_checking_nothing(rule: object) -> None:
    assert callable(rule)
    found = [line for file, tree in _sources() for line in rule(tree, file)]
    assert found == [], "\n".join(found)


BAD = """
import subprocess
def test_lost_status():
    subprocess.run(["false"], check=False)
def test_lost_in_a_chain():
    out = subprocess.run(["git", "ls-files"], capture_output=True, check=False).stdout.split()
    assert out is not None
def test_loop_over_a_listing(tmp_path):
    for path in tmp_path.iterdir():
        assert path.exists()
EMPTY = ()
def test_loop_over_an_empty_constant():
    for word in EMPTY:
        assert word
def test_swallowed():
    try:
        assert 1 == 2
    except AssertionError:
        pass
"""

GOOD = """
import subprocess
def test_judged():
    done = subprocess.run(["true"], check=False)
    assert done.returncode == 0
def test_loop_over_a_guarded_listing(tmp_path):
    for path in each(tmp_path.iterdir()):
        assert path.exists()
WORDS = ("a", "b")
def test_loop_over_a_constant():
    for word in WORDS:
        assert word
def test_loop_over_a_literal():
    for word in ("a", "b"):
        assert word
def test_reraised():
    try:
        assert 1 == 1
    except AssertionError as failure:
        raise RuntimeError("context") from failure
"""


def test_each_rule_finds_its_shape_and_passes_the_sound_one() -> None:
    bad, good = ast.parse(BAD), ast.parse(GOOD)
    assert [line.split(" ")[1] for line in unjudged_runs(bad, "x")] == [
        "test_lost_status:",
        "test_lost_in_a_chain:",
    ]
    assert [line.split(" ", 1)[1] for line in assertions_only_in_open_loops(bad, "x")] == [
        "test_loop_over_a_listing",
        "test_loop_over_an_empty_constant",
    ]
    assert [line.split(" ", 1)[1] for line in swallowed_failures(bad, "x")] == [
        "test_swallowed: swallows AssertionError"
    ]
    for rule in (unjudged_runs, assertions_only_in_open_loops, swallowed_failures):
        assert rule(good, "x") == [], rule.__name__


def test_each_refuses_an_empty_listing(tmp_path: Path) -> None:
    from tests.helpers.bite import each

    with pytest.raises(AssertionError, match="no files"):
        each(tmp_path.iterdir(), "files")
    assert each([1], "numbers") == [1]
