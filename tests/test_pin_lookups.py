"""pin's registry look-ups are one public module: the scaffold asks through it, and no tool
reaches into another module's private names."""

from __future__ import annotations

import ast
from pathlib import Path

import ortbundle.tools.pin.lookups as lookups

TOOLS = Path(__file__).resolve().parents[1] / "ortbundle" / "tools"


def _imports(path: Path) -> list[tuple[str, str]]:
    tree = ast.parse(path.read_text("utf-8"))
    return [
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ortbundle")
        for alias in node.names
    ]


def test_the_scaffold_takes_pin_s_look_ups_from_the_public_module_only() -> None:
    used = [
        (module, name)
        for path in sorted((TOOLS / "scaffold").glob("*.py"))
        for module, name in _imports(path)
        if module.startswith("ortbundle.tools.pin")
    ]
    assert used, "the scaffold asks the registries through pin's look-ups"
    for module, name in used:
        assert module in ("ortbundle.tools.pin", "ortbundle.tools.pin.lookups"), (module, name)
        if module == "ortbundle.tools.pin.lookups":
            assert name in lookups.__all__, name


def test_no_tool_imports_a_private_name_of_another_module() -> None:
    crossing = [
        (str(path.relative_to(TOOLS)), module, name)
        for path in sorted(TOOLS.rglob("*.py"))
        for module, name in _imports(path)
        if name.startswith("_") and not name.startswith("__")
    ]
    assert crossing == []


def test_the_look_ups_module_exports_what_it_defines() -> None:
    assert lookups.__all__, "the public look-ups"
    foreign = [n for n in lookups.__all__ if getattr(lookups, n).__module__ != lookups.__name__]
    assert foreign == []
