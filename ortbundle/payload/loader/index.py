"""runtimes.json and the add-ons' runtimes.d/*.json fragments: the runtimes to choose from. A bad
fragment is named in the index's `problems` and left out, so an add-on never stops the main
package; a bad runtimes.json is a LoaderError, the error every later step raises."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCHEMA = "ortbundle.runtimes/2"
READS = (SCHEMA, "ortbundle.runtimes/1")  # /1: no `requires`, no fragments
FRAGMENTS = "runtimes.d"


class LoaderError(Exception):
    """A decision or a load that cannot go ahead; the message says what to do."""


def load_index(stage: Path) -> dict[str, Any]:
    """runtimes.json, then each add-on's runtimes.d/*.json appended to its runtimes.

    A fragment that is unreadable, of an unknown schema, of another product or target, or whose
    runtime is malformed, clashes with one already listed or is not installed is left out and
    named in the returned index's `problems` — an add-on never stops the main package."""
    path = stage / "runtimes.json"
    try:
        index: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LoaderError(f"cannot read {path}: {exc}") from None
    if index.get("schema") not in READS:
        raise LoaderError(f"{path} has schema {index.get('schema')!r}, this loader reads {SCHEMA}")
    problems: list[str] = []
    fragments = stage / FRAGMENTS
    for fragment in sorted(fragments.glob("*.json")) if fragments.is_dir() else []:
        try:
            problems.extend(_add_fragment(index, fragment, stage))
        except (OSError, ValueError) as exc:
            problems.append(f"{fragment}: cannot read it ({exc}); reinstall that add-on")
    index["problems"] = problems
    return index


_RUNTIME_KEYS = {
    "name": str,
    "label": str,
    "directory": str,
    "entry": str,
    "ort_version": str,
    "providers": list,
    "fits": dict,
    "files": list,
}


def _add_fragment(index: dict[str, Any], fragment: Path, stage: Path) -> list[str]:
    data = json.loads(fragment.read_text(encoding="utf-8"))
    main = (index.get("product") or {}).get("name")
    if not isinstance(data, dict) or data.get("schema") not in READS:
        schema = data.get("schema") if isinstance(data, dict) else None
        return [f"{fragment}: schema {schema!r} is not one this loader reads ({SCHEMA})"]
    if data.get("addon_of") != main:
        return [f"{fragment}: an add-on of {data.get('addon_of')!r}, not of {main!r}"]
    if data.get("target") != index.get("target"):
        return [f"{fragment}: built for {data.get('target')!r}, this is {index.get('target')!r}"]
    if not isinstance(data.get("runtimes"), list) or not data["runtimes"]:
        return [f"{fragment}: lists no runtimes"]
    problems = []
    taken = {r["name"] for r in index["runtimes"]} | {r["directory"] for r in index["runtimes"]}
    for runtime in data["runtimes"]:
        bad = [
            k
            for k, kind in _RUNTIME_KEYS.items()
            if not isinstance(runtime.get(k) if isinstance(runtime, dict) else None, kind)
        ]
        if bad:
            problems.append(f"{fragment}: a runtime lacks {', '.join(bad)}")
        elif runtime["name"] in taken or runtime["directory"] in taken:
            problems.append(f"{fragment}: runtime {runtime['name']} clashes with one listed")
        elif ".." in Path(runtime["directory"]).parts or Path(runtime["directory"]).is_absolute():
            problems.append(f"{fragment}: runtime {runtime['name']} lies outside the package")
        elif not (stage / runtime["directory"] / runtime["entry"]).is_file():
            problems.append(
                f"{fragment}: {runtime['directory']}/{runtime['entry']} is not installed"
            )
        else:
            index["runtimes"].append({**runtime, "addon": data.get("product", {}).get("name")})
            taken |= {runtime["name"], runtime["directory"]}
    return problems
