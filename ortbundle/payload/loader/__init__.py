"""The runtime loader: seven standard-library modules, one per job, that a package ships joined
into one standalone file, runtime_loader.py (loader_source).

Importing this package imports none of the seven: a build that ships the loader reads their text
and needs neither ctypes nor argparse. Each name offered here is imported from its module when
it is first asked for, so `from ortbundle.payload.loader import choose` still works.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ortbundle.payload.loader.command import main as main
    from ortbundle.payload.loader.command import wrong_system as wrong_system
    from ortbundle.payload.loader.hardware import VENDORS as VENDORS
    from ortbundle.payload.loader.hardware import Accel as Accel
    from ortbundle.payload.loader.hardware import Gpu as Gpu
    from ortbundle.payload.loader.hardware import Hardware as Hardware
    from ortbundle.payload.loader.hardware import accel_problem as accel_problem
    from ortbundle.payload.loader.hardware import detect as detect
    from ortbundle.payload.loader.hardware import machine_name as machine_name
    from ortbundle.payload.loader.hardware import too_old as too_old
    from ortbundle.payload.loader.hardware import wrong_machine as wrong_machine
    from ortbundle.payload.loader.index import FRAGMENTS as FRAGMENTS
    from ortbundle.payload.loader.index import READS as READS
    from ortbundle.payload.loader.index import SCHEMA as SCHEMA
    from ortbundle.payload.loader.index import LoaderError as LoaderError
    from ortbundle.payload.loader.index import load_index as load_index
    from ortbundle.payload.loader.ortapi import _CORES as _CORES
    from ortbundle.payload.loader.ortapi import _CREATE_ENV as _CREATE_ENV
    from ortbundle.payload.loader.ortapi import _EP_DEVICE_EP_NAME as _EP_DEVICE_EP_NAME
    from ortbundle.payload.loader.ortapi import _GET_EP_DEVICES as _GET_EP_DEVICES
    from ortbundle.payload.loader.ortapi import _GET_ERROR_MESSAGE as _GET_ERROR_MESSAGE
    from ortbundle.payload.loader.ortapi import _REGISTER_EP_LIBRARY as _REGISTER_EP_LIBRARY
    from ortbundle.payload.loader.ortapi import _RELEASE_STATUS as _RELEASE_STATUS
    from ortbundle.payload.loader.ortapi import Companion as Companion
    from ortbundle.payload.loader.ortapi import Registered as Registered
    from ortbundle.payload.loader.ortapi import available_providers as available_providers
    from ortbundle.payload.loader.ortapi import companions as companions
    from ortbundle.payload.loader.ortapi import open_best as open_best
    from ortbundle.payload.loader.ortapi import open_runtime as open_runtime
    from ortbundle.payload.loader.ortapi import register_plugins as register_plugins
    from ortbundle.payload.loader.ortapi import verify_files as verify_files
    from ortbundle.payload.loader.scoring import SCORE_CPU as SCORE_CPU
    from ortbundle.payload.loader.scoring import SCORE_GENERIC as SCORE_GENERIC
    from ortbundle.payload.loader.scoring import SCORE_INTEL as SCORE_INTEL
    from ortbundle.payload.loader.scoring import SCORE_NPU as SCORE_NPU
    from ortbundle.payload.loader.scoring import SCORE_VENDOR as SCORE_VENDOR
    from ortbundle.payload.loader.scoring import VENDOR_LABEL as VENDOR_LABEL
    from ortbundle.payload.loader.scoring import Candidate as Candidate
    from ortbundle.payload.loader.scoring import Decision as Decision
    from ortbundle.payload.loader.scoring import Device as Device
    from ortbundle.payload.loader.scoring import best_possible as best_possible
    from ortbundle.payload.loader.scoring import choose as choose
    from ortbundle.payload.loader.scoring import device_rung as device_rung
    from ortbundle.payload.loader.scoring import score as score
    from ortbundle.payload.loader.scoring import unused_npu as unused_npu
    from ortbundle.payload.loader.search import Libraries as Libraries
    from ortbundle.payload.loader.search import missing_libraries as missing_libraries
    from ortbundle.payload.loader.search import read_ld_cache as read_ld_cache
    from ortbundle.payload.loader.search import system_libraries as system_libraries
    from ortbundle.payload.loader.vendors import GPU_VENDORS as GPU_VENDORS
    from ortbundle.payload.loader.vendors import Vendor as Vendor

# The seven in dependency order: each imports only standard modules and the ones before it, and
# the joined file defines them in this order. vendors is generated (invoke docs) from
# ortbundle/data/gpu-vendors.toml.
MODULES = ("vendors", "hardware", "search", "index", "scoring", "ortapi", "command")

# Each name offered here and the module that defines it (the private ones are the OrtApi
# indices and the opened cores, which tests check against the C header and reset).
EXPORTS: dict[str, tuple[str, ...]] = {
    "vendors": ("GPU_VENDORS", "Vendor"),
    "hardware": (
        "VENDORS",
        "Accel",
        "Gpu",
        "Hardware",
        "accel_problem",
        "detect",
        "machine_name",
        "too_old",
        "wrong_machine",
    ),
    "search": ("Libraries", "missing_libraries", "read_ld_cache", "system_libraries"),
    "index": ("FRAGMENTS", "READS", "SCHEMA", "LoaderError", "load_index"),
    "scoring": (
        "SCORE_CPU",
        "SCORE_GENERIC",
        "SCORE_INTEL",
        "SCORE_NPU",
        "SCORE_VENDOR",
        "VENDOR_LABEL",
        "Candidate",
        "Decision",
        "Device",
        "best_possible",
        "choose",
        "device_rung",
        "score",
        "unused_npu",
    ),
    "ortapi": (
        "_CORES",
        "_CREATE_ENV",
        "_EP_DEVICE_EP_NAME",
        "_GET_EP_DEVICES",
        "_GET_ERROR_MESSAGE",
        "_REGISTER_EP_LIBRARY",
        "_RELEASE_STATUS",
        "Companion",
        "Registered",
        "available_providers",
        "companions",
        "open_best",
        "open_runtime",
        "register_plugins",
        "verify_files",
    ),
    "command": ("main", "wrong_system"),
}
_HOME = {name: module for module, names in EXPORTS.items() for name in names}

if not TYPE_CHECKING:  # mypy sees the imports above; at run time a name is fetched when asked

    def __getattr__(name: str) -> Any:
        module = _HOME.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{__name__}.{module}"), name)


_SHEBANG = "#!/usr/bin/env python3\n"
_DOCUMENTED_BY = "command"  # its docstring is the file's: the --help description, the usage


@cache
def loader_source() -> str:
    """The seven modules as the one file a package ships (join), read as text, never imported."""
    package = resources.files(__name__)
    return join({module: package.joinpath(f"{module}.py").read_text("utf-8") for module in MODULES})


def join(texts: Mapping[str, str]) -> str:
    """Modules' texts, given in dependency order, as one standalone file: a shebang, the command
    line's docstring, `from __future__ import annotations` once, the standard imports gathered
    at the top, then each module's body in order, the imports of its siblings dropped (in one
    file their names are simply defined above).

    Raises ValueError when a module breaks what the join relies on: an import below the top,
    a non-standard one, a sibling imported out of order or under another name, or a name two
    modules bind."""
    plain: set[str] = set()
    froms: dict[str, set[str]] = {}
    bodies: list[str] = []
    docstring = ""
    defined: dict[str, str] = {}  # name -> the module that binds it in the joined file
    for position, (module, text) in enumerate(texts.items()):
        doc, head, body = _split(module, text)
        if module == _DOCUMENTED_BY:
            docstring = doc
        for node in head:
            _gather(module, node, plain, froms, defined, tuple(texts)[:position])
        for name in _bound(ast.parse(body)):
            if defined.setdefault(name, module) != module:
                raise ValueError(f"{module}.py and {defined[name]}.py both define {name}")
        bodies.append(body)
    imported = {name.split(" as ")[-1].split(".")[0] for name in plain}
    imported |= {name.split(" as ")[-1] for names in froms.values() for name in names}
    if clash := sorted(imported & defined.keys()):
        raise ValueError(f"{', '.join(clash)}: imported by one module, defined by another")
    imports = sorted(f"import {name}" for name in plain)
    imports += [
        f"from {source} import {', '.join(sorted(names, key=_import_order))}"
        for source, names in sorted(froms.items())
    ]
    top = f"{_SHEBANG}{docstring}\n\nfrom __future__ import annotations\n\n" + "\n".join(imports)
    return f"{top}\n\n" + "\n\n\n".join(bodies) + "\n"  # spaced as ruff would space them


def _split(module: str, text: str) -> tuple[str, list[ast.Import | ast.ImportFrom], str]:
    """(the docstring's source, the imports at the top, the rest) of one module's text."""
    tree = ast.parse(text, filename=f"{module}.py")
    lines = text.splitlines(keepends=True)
    statements = list(tree.body)
    docstring, end = "", 0
    first = statements[0] if statements else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        docstring = "".join(lines[first.lineno - 1 : first.end_lineno]).strip()
        end = first.end_lineno or 0
        statements.pop(0)
    head: list[ast.Import | ast.ImportFrom] = []
    for node in statements:
        if not isinstance(node, ast.Import | ast.ImportFrom):
            break
        head.append(node)
        end = node.end_lineno or end
    del statements[: len(head)]
    for inner in ast.walk(tree):
        if isinstance(inner, ast.Import | ast.ImportFrom) and inner not in head:
            names = [inner.module or ""] if isinstance(inner, ast.ImportFrom) else []
            names += [alias.name for alias in inner.names] if isinstance(inner, ast.Import) else []
            if inner in statements or any(n.split(".")[0] == "ortbundle" for n in names):
                raise ValueError(
                    f"{module}.py line {inner.lineno}: imports belong at the top of the module "
                    "(and the loader's own modules only there), where the join gathers them"
                )
    return docstring, head, "".join(lines[end:]).strip("\n")


def _gather(
    module: str,
    node: ast.Import | ast.ImportFrom,
    plain: set[str],
    froms: dict[str, set[str]],
    defined: dict[str, str],
    earlier: tuple[str, ...],
) -> None:
    """Keep one top import of a module for the joined file's header, or drop a sibling's."""
    where = f"{module}.py line {node.lineno}"
    if isinstance(node, ast.Import):
        for alias in node.names:
            _standard(alias.name, where)
            plain.add(alias.name if alias.asname is None else f"{alias.name} as {alias.asname}")
        return
    source = node.module or ""
    if node.level or source.startswith("ortbundle"):
        sibling = source.removeprefix(f"{__name__}.")
        if node.level or sibling not in earlier:
            before = ", ".join(earlier) or "none"
            raise ValueError(f"{where}: {source} is not one of the modules before it ({before})")
        for alias in node.names:
            if alias.asname is not None:  # in one file the name is only ever its own
                raise ValueError(f"{where}: {alias.name} is imported as {alias.asname}")
            if defined.get(alias.name) != sibling:
                raise ValueError(f"{where}: {alias.name} is not a name {sibling}.py defines")
        return
    if source == "__future__":
        if [alias.name for alias in node.names] != ["annotations"]:
            raise ValueError(f"{where}: the joined file has only `annotations` from __future__")
        return
    _standard(source, where)
    for alias in node.names:
        name = alias.name if alias.asname is None else f"{alias.name} as {alias.asname}"
        froms.setdefault(source, set()).add(name)


def _standard(name: str, where: str) -> None:
    if name.split(".")[0] not in sys.stdlib_module_names:
        raise ValueError(f"{where}: {name} is not in the standard library; the loader ships alone")


def _bound(tree: ast.Module) -> set[str]:
    """The names a module body binds at its top level (what another module must not bind)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign | ast.AugAssign)
            else []
        )
        for target in targets:
            names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def _import_order(name: str) -> tuple[int, str]:
    """isort's order within one `from` import: constants, then classes, then the rest."""
    if name.isupper():
        return 0, name
    return (1, name) if name[:1].isupper() else (2, name)
