"""Every third-party module the project imports is pinned by name in the requirements files.

A green CI once hid a missing `requirements-dev.txt` line because the machine's Python had the
package from earlier work. This reads the imports of the package, the tests, `tasks.py` and the
benchmark from their source, maps each to the distribution that provides it in the running
environment, and asks that distribution to be listed (with `==`) in `requirements.txt` or
`requirements-dev.txt`: a package that only arrives as somebody else's dependency is not pinned.
"""

from __future__ import annotations

import ast
import importlib.metadata
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import tasks

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("ortbundle", "tests", "benchmarks", "tasks.py")
OWN = frozenset({"ortbundle", "devtools", "tests", "tasks", "conftest"})


def pinned(requirements: Path) -> dict[str, Requirement]:
    """The requirements a file pins, following `-r` includes; markers are kept, not evaluated."""
    found: dict[str, Requirement] = {}
    for raw in requirements.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-r "):
            found |= pinned(requirements.parent / line[3:].strip())
            continue
        requirement = Requirement(line)
        found[canonicalize_name(requirement.name)] = requirement
    return found


def imported_modules(source: Path) -> Iterator[str]:
    """The top-level names a file imports absolutely (relative imports are the project's own)."""
    tree = ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.partition(".")[0]


def third_party_imports(root: Path) -> dict[str, set[str]]:
    """Each imported module that is neither the standard library nor the project's, with the
    files that import it."""
    users: dict[str, set[str]] = {}
    for name in SOURCES:
        top = root / name
        for source in [top] if top.is_file() else sorted(top.rglob("*.py")):
            for module in imported_modules(source):
                if module in sys.stdlib_module_names or module in OWN:
                    continue
                users.setdefault(module, set()).add(str(source.relative_to(root)))
    return users


def unpinned(
    users: dict[str, set[str]], pins: dict[str, Requirement], providers: Mapping[str, list[str]]
) -> list[str]:
    """One line per imported module no pinned requirement provides."""
    problems = []
    for module, files in sorted(users.items()):
        distributions = providers.get(module, [])
        where = ", ".join(sorted(files)[:3])
        if not distributions:
            problems.append(
                f"{module} (imported by {where}): no installed distribution provides it"
            )
        elif not any(canonicalize_name(d) in pins for d in distributions):
            problems.append(
                f"{module} (imported by {where}): add {distributions[0]}==<version> "
                "to requirements.txt (or requirements-dev.txt for tests only)"
            )
    return problems


def test_every_imported_module_is_pinned_by_name() -> None:
    pins = pinned(ROOT / "requirements-dev.txt")
    providers = importlib.metadata.packages_distributions()
    users = third_party_imports(ROOT)
    for module, _ in tasks.TEST_PLUGINS:  # loaded by the test command's options, not imported
        users.setdefault(module, set()).add("tasks.py (invoke test)")
    assert unpinned(users, pins, providers) == []


def test_every_requirement_is_pinned_exactly() -> None:
    loose = [
        str(r)
        for r in pinned(ROOT / "requirements-dev.txt").values()
        if len(r.specifier) != 1 or next(iter(r.specifier)).operator != "=="
    ]
    assert loose == []


def test_the_check_bites_on_a_transitive_only_import(tmp_path: Path) -> None:
    """urllib3 arrives with requests; imported directly, it must be pinned by name too."""
    (tmp_path / "requirements.txt").write_text("requests==2.34.2\n")
    (tmp_path / "requirements-dev.txt").write_text("-r requirements.txt\npytest==9.0.3\n")
    (tmp_path / "ortbundle").mkdir()
    (tmp_path / "ortbundle" / "http.py").write_text(
        "import json\nimport requests\nfrom urllib3.util import Retry\nfrom . import x\n"
    )
    (tmp_path / "tasks.py").write_text("import pytest\nfrom ortbundle import http\n")
    users = third_party_imports(tmp_path)
    assert set(users) == {"requests", "urllib3", "pytest"}
    providers = {"requests": ["requests"], "urllib3": ["urllib3"], "pytest": ["pytest"]}
    problems = unpinned(users, pinned(tmp_path / "requirements-dev.txt"), providers)
    assert [p.split(" ")[0] for p in problems] == ["urllib3"]
    assert "add urllib3==<version>" in problems[0]
    missing = unpinned({"xdist": {"tasks.py"}}, {}, {})
    assert missing == ["xdist (imported by tasks.py): no installed distribution provides it"]
