"""The conformance corpus's truth tables keep their shape, so the data cannot rot.

The tables (tests/data/corpus/*.toml) are written by make_truth.py from independent readers;
this checks each against its schema (every field present, every sha256 64 hex digits, every
fact beside the command that produced it), that every pinned package has its table, and that
docs/corpus.md is what the tables say. It does not compare them with ortbundle's readers."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.helpers.bite import each

CORPUS = Path(__file__).parent / "data" / "corpus"
PINS = tomllib.loads((CORPUS / "pins.toml").read_text("utf-8"))

TOP = ("package", "version", "note", "generator", "target")
TARGET_FACTS = (
    "sha256",
    "size",
    "licence",
    "licence_files",
    "licence_holder",
    "notices_name",
    "requires_onnxruntime",
    "ep_names_in_python",
)
LIBRARY_FACTS = (
    "sha256",
    "kind",
    "entry",
    "exports_count",
    "providers",
    "holder",
    "licence",
    "required",
    "optional",
    "oldest_os",
)
KINDS = {"core", "plugin-ep", "custom-ops", "uses-core", "other"}
FORMATS = {"ELF", "PE", "Mach-O"}
# The export that makes each kind what it is.
KIND_ENTRY = {
    "core": "OrtGetApiBase",
    "plugin-ep": "CreateEpFactories",
    "custom-ops": "RegisterCustomOps",
}
HEX64 = re.compile(r"[0-9a-f]{64}")


def _value(node: Any) -> Any:
    return node.get("value") if isinstance(node, dict) else None


def _problems_fact(where: str, node: Any) -> list[str]:
    if not isinstance(node, dict) or "value" not in node:
        return [f"{where}: not a fact (a table with value and how)"]
    how = node.get("how")
    if not isinstance(how, str) or not how.strip():
        return [f"{where}: no `how`"]
    return []


def _unexplained(where: str, node: Any) -> list[str]:
    """Every table holding a `value` anywhere in the document must say how it was read."""
    found: list[str] = []
    if isinstance(node, dict):
        if "value" in node:
            found += _problems_fact(where, node)
        for key, sub in node.items():
            if key != "value":
                found += _unexplained(f"{where}.{key}", sub)
    elif isinstance(node, list):
        for n, sub in enumerate(node):
            found += _unexplained(f"{where}[{n}]", sub)
    return found


def problems(table: dict[str, Any]) -> list[str]:
    """Every way `table` departs from the truth-table schema (README.md says what each field is)."""
    found = [f"missing `{k}`" for k in TOP if k not in table]
    if found:
        return found
    if not table["target"]:
        found.append("no target")
    for t, target in enumerate(table["target"]):
        at = f"target[{t}]"
        found += [
            f"{at}: missing `{k}`" for k in ("platform", "wheel", "library") if k not in target
        ]
        found += [p for k in TARGET_FACTS for p in _problems_fact(f"{at}.{k}", target.get(k))]
        if not HEX64.fullmatch(str(_value(target.get("sha256")))):
            found.append(f"{at}.sha256: not 64 hex digits")
        if f"-{table['version']}-" not in str(target.get("wheel", "")):
            found.append(f"{at}.wheel: not version {table['version']}")
        if not target.get("library"):
            found.append(f"{at}: no native library")
        for n, lib in enumerate(target.get("library", [])):
            la = f"{at}.library[{n}]"
            found += [
                f"{la}: missing `{k}`" for k in ("path", "format", "embedded") if k not in lib
            ]
            found += [p for k in LIBRARY_FACTS for p in _problems_fact(f"{la}.{k}", lib.get(k))]
            if lib.get("format") not in FORMATS:
                found.append(f"{la}.format: {lib.get('format')!r} is not one of {sorted(FORMATS)}")
            if not HEX64.fullmatch(str(_value(lib.get("sha256")))):
                found.append(f"{la}.sha256: not 64 hex digits")
            kind = _value(lib.get("kind"))
            if kind not in KINDS:
                found.append(f"{la}.kind: {kind!r} is not one of {sorted(KINDS)}")
            entry = _value(lib.get("entry")) or []
            if kind in KIND_ENTRY and KIND_ENTRY[kind] not in entry:
                found.append(f"{la}: kind {kind} without {KIND_ENTRY[kind]} in its entry")
            for e, comp in enumerate(lib.get("embedded", [])):
                missing = [k for k in ("name", "version", "evidence", "how") if k not in comp]
                found += [f"{la}.embedded[{e}]: missing `{k}`" for k in missing]
    found += _unexplained("table", table)
    return found


def _make_truth() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_truth", CORPUS / "make_truth.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_pinned_package_has_its_table_and_no_table_is_unpinned() -> None:
    tables = {p.stem for p in CORPUS.glob("*.toml")} - {"pins"}
    assert tables == set(PINS)


@pytest.mark.parametrize("package", sorted(PINS))
def test_truth_table_keeps_its_schema(package: str) -> None:
    table = tomllib.loads((CORPUS / f"{package}.toml").read_text("utf-8"))
    assert problems(table) == []
    assert table["package"] == package
    assert table["version"] == PINS[package]["version"]
    assert [t["platform"] for t in table["target"]] == PINS[package]["platforms"]


def test_the_schema_check_bites() -> None:
    """A fact without its command, a short digest or an unknown kind is each named."""
    table = tomllib.loads((CORPUS / "onnxruntime-ggml.toml").read_text("utf-8"))
    lib = each(table["target"][0]["library"], "libraries")[-1]
    del lib["providers"]["how"]
    lib["sha256"]["value"] = "abc"
    lib["kind"]["value"] = "runtime"
    table["target"][0]["sha256"] = "0" * 64
    found = problems(table)
    assert any("providers: no `how`" in p for p in found), found
    assert any("library[" in p and "sha256: not 64 hex digits" in p for p in found), found
    assert any("'runtime' is not one of" in p for p in found), found
    assert any("target[0].sha256: not a fact" in p for p in found), found


def test_docs_page_is_what_the_tables_say() -> None:
    truth = _make_truth()
    docs = CORPUS.parents[2] / "docs" / "corpus.md"
    assert docs.read_text("utf-8") == truth.render_docs(truth.load_tables())
