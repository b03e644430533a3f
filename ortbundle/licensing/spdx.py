"""What ortbundle needs to know about an SPDX expression, parsed once and kept under the cache.

license_expression builds its SPDX symbol table and tokenizer on first use: importing it,
building the table and the first parse took ~0.2 s of every warm build, for the same twenty
expressions each time. The facts the build uses (the normalised text, the licence ids, the
AND/OR tree the audit walks, the simplified form waivers compare) are a pure function of the
expression and of the library's version, so a build keeps them in one small JSON file per
ortbundle code version (under the memo it passes); the library is imported only for an
expression not seen before.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ortbundle._core.fsio import atomic_write
from ortbundle._core.memo import NO_MEMO, Memo, memo_key

if TYPE_CHECKING:
    from license_expression import Licensing

# An AND/OR tree: ("AND", [subtree, ...]), ("OR", [...]) or ("ID", "MIT") — a licence id (an
# "X WITH exception" is judged as X, as the audit always did).
Tree = tuple[str, Any]

_LOCK = threading.Lock()


class NotAnExpression(ValueError):
    """The text does not parse as an SPDX expression (or is empty)."""


@dataclass(frozen=True)
class ExpressionFacts:
    normalized: str  # as license_expression normalises it ("" when it says none)
    ids: tuple[str, ...]  # licence ids, sorted
    invalid: tuple[str, ...]  # ids SPDX does not list (LicenseRef-… among them)
    tree: Tree
    simplified: str  # str(parse().simplify()): equal for equivalent expressions


@cache
def _licensing() -> Licensing:
    from license_expression import get_spdx_licensing

    return get_spdx_licensing()


@contextlib.contextmanager
def licensing() -> Iterator[Licensing]:
    """The SPDX licensing object, one thread at a time: it builds its tokenizer lazily and is
    not safe to share between the per-target threads without this lock."""
    with _LOCK:
        yield _licensing()


def _tree(lic: Licensing, node: Any) -> Tree:
    if isinstance(node, lic.AND):
        return ("AND", [_tree(lic, a) for a in node.args])
    if isinstance(node, lic.OR):
        return ("OR", [_tree(lic, a) for a in node.args])
    symbol = getattr(node, "license_symbol", node)
    return ("ID", str(symbol.key))


def _parse(expression: str) -> ExpressionFacts:
    from license_expression import ExpressionError

    with licensing() as lic:
        try:
            parsed = lic.parse(expression, validate=False)
        except ExpressionError as exc:
            raise NotAnExpression(str(exc)) from None
        if parsed is None:
            raise NotAnExpression("empty licence expression")
        info = lic.validate(expression, strict=True)
        return ExpressionFacts(
            normalized=info.normalized_expression or str(parsed),
            ids=tuple(sorted({str(s.key) for s in lic.license_symbols(parsed)})),
            invalid=tuple(str(s) for s in info.invalid_symbols),
            tree=_tree(lic, parsed),
            simplified=str(parsed.simplify()),
        )


# each memo file's facts, read once per process (the targets' threads share them), by the file's
# path: which file, if any, is the caller's memo to say
_memos: dict[Path, dict[str, ExpressionFacts]] = {}


def _memo_file(memo: Memo) -> Path | None:
    """One file of every expression's facts per version of ortbundle's code; None: no memo."""
    return memo.entry("spdx", memo_key([])) if memo.on else None


def _memo(path: Path) -> dict[str, ExpressionFacts]:
    with _LOCK:
        if path not in _memos:
            _memos[path] = _read(path)
        return _memos[path]


def _read(path: Path) -> dict[str, ExpressionFacts]:
    try:
        raw = json.loads(path.read_text("utf-8"))
        return {
            text: ExpressionFacts(
                normalized=str(f["normalized"]),
                ids=tuple(f["ids"]),
                invalid=tuple(f["invalid"]),
                tree=_from_json(f["tree"]),
                simplified=str(f["simplified"]),
            )
            for text, f in raw.items()
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}  # none yet, or unreadable: parse again


def _from_json(node: Any) -> Tree:
    kind, value = node
    if kind == "ID":
        return ("ID", str(value))
    if kind not in ("AND", "OR"):
        raise ValueError(kind)
    return (kind, [_from_json(v) for v in value])


def _save(path: Path, known: dict[str, ExpressionFacts]) -> None:
    document = {
        text: {
            "normalized": f.normalized,
            "ids": list(f.ids),
            "invalid": list(f.invalid),
            "tree": f.tree,
            "simplified": f.simplified,
        }
        for text, f in known.items()
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(document, sort_keys=True))
    except OSError:
        pass  # a memo that cannot be written is only slower


def facts(expression: str, memo: Memo = NO_MEMO) -> ExpressionFacts:
    """The facts of `expression`; raises NotAnExpression when it is none. `memo`: the build's,
    where they are kept (off: parsed every time, as a release and every other command do)."""
    path = _memo_file(memo)
    if path is None:
        return _parse(expression)
    known = _memo(path)
    with _LOCK:
        found = known.get(expression)
    if found is not None:
        return found
    parsed = _parse(expression)
    with _LOCK:
        known[expression] = parsed
        snapshot = dict(known)
    _save(path, snapshot)
    return parsed
