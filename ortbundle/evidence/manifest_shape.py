"""The shape of ortbundle.manifest/1, checked before anything reads a manifest.

`invoke verify`, the provenance check and `invoke release` index into a manifest as record.py
writes it. One that is valid JSON but another shape (outputs an object, a `sha256` missing, a
size as text) would reach them as a KeyError or "string indices must be integers", blamed on
whichever reader met it first. Without a signature to say the manifest was altered (an unsigned
build, `--allow-unsigned`), this check says which field of the manifest is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# A field is a kind ("string", "integer", "sha256", "string?" for a string or null), an object
# (a dict of fields; a name ending in "?" may be absent), or a list of one such shape.
_SHA256 = re.compile(r"[0-9a-f]{64}")
_NESTED = {"member": "string", "sha256": "sha256"}
SHAPE: dict[str, Any] = {
    "schema": "string",
    "tool": {"name": "string", "version": "string"},
    "product": {
        "name": "string",
        "version": "string",
        "manifest": "string",
        "manifest_sha256": "sha256",
    },
    "recipes": [{"name": "string", "path": "string", "sha256": "sha256"}],
    "source_date_epoch": "integer",
    "policy_sha256": "sha256",
    "templates?": [{"path": "string", "sha256": "sha256"}],
    "signing_key_id": "string?",
    "inputs": [
        {
            "component": "string",
            "source": "string",
            "url?": "string?",
            "size": "integer",
            "sha256": "sha256",
            "nested?": [_NESTED],
            # built from source: the ids of its source archives (inputs too) and the build
            "build?": {
                "sources": ["string"],
                "command": "string",
                "toolchain": "string",
                "ort_headers?": "string",
            },
        }
    ],
    "outputs": [
        {
            "path": "string",
            "size": "integer",
            "sha256": "sha256",
            "mode": "string",
            "link_to?": "string",
            "component?": "string",
            "license?": "string?",
        }
    ],
}

_WORDS = {
    "string": "a string",
    "string?": "a string or null",
    "integer": "an integer",
    "sha256": "64 lower-case hex digits",
}


def manifest_problems(document: Any, *, most: int = 10) -> list[str]:
    """What in `document` is not the manifest a build writes, one phrase per field (at most
    `most`, the last saying how many more); [] when its shape is right."""
    found: list[str] = []
    _check(SHAPE, document, "", found)
    if len(found) > most:
        found[most - 1 :] = [f"and {len(found) - most + 1} more"]
    return found


def _check(shape: Any, value: Any, where: str, found: list[str]) -> None:
    if isinstance(shape, dict):
        if not isinstance(value, Mapping):
            found.append(f"`{where or 'the manifest'}` must be an object, not {_kind(value)}")
            return
        for name, inner in shape.items():
            key = name.removesuffix("?")
            place = f"{where}.{key}" if where else key
            if key in value:
                _check(inner, value[key], place, found)
            elif not name.endswith("?"):
                found.append(f"`{place}` is missing{_naming(value)}")
    elif isinstance(shape, list):
        if not isinstance(value, list):
            item = "objects" if isinstance(shape[0], dict) else "values"
            found.append(f"`{where}` must be a list of {item}, not {_kind(value)}")
            return
        for index, item in enumerate(value):
            _check(shape[0], item, f"{where}[{index}]", found)
    elif not _fits(shape, value):
        found.append(f"`{where}` must be {_WORDS[shape]}, not {_kind(value)}")


def _fits(kind: str, value: Any) -> bool:
    if kind == "string?" and value is None:
        return True
    if kind in ("string", "string?"):
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, str) and _SHA256.fullmatch(value) is not None


def _naming(item: Mapping[str, Any]) -> str:
    """The entry's path, when it has one: which output lacks the field."""
    path = item.get("path")
    return f" ({path})" if isinstance(path, str) else ""


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
