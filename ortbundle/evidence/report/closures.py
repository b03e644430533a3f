"""closures/<target>.json: each runtime's dependency closure as evidence beside the manifest.

The stage keeps only what was kept; what was dropped and why, and what the user's system must
provide (the target's requirements model, stage/requirements.py, which the report and the SBOM
render), would otherwise live only in the build's memory. Written by the build, copied by a
release from the runner that built the target, read by the report (of this build and of a later
one comparing with it). Listed in the manifest like every other evidence file.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ortbundle._core.fsio import atomic_write
from ortbundle.config.targets import get_target

if TYPE_CHECKING:
    from ortbundle.stage.requirements import TargetRequirements
    from ortbundle.stage.staging import StagedRuntime

CLOSURES_DIR = "closures"
CLOSURES_SCHEMA = "ortbundle.closures/1"
# what an external group says of its libraries (optional, version, install, sandbox) and how
# a kept file reaches them (via: needed, or opened by name), when the build's data has it
_REQUIREMENT_FIELDS = ("optional", "version", "install", "sandbox", "via")


def _external(target: str, need: Any) -> dict[str, Any]:
    item = asdict(need)
    item["needed_by"] = list(item["needed_by"])
    missing = [f for f in _REQUIREMENT_FIELDS if f not in item]
    if (
        missing
    ):  # the need does not carry them: the target's group may (ortbundle/config/targets.py)
        group = get_target(target).external_group(need.name)
        for name in missing:
            if group is not None and hasattr(group, name):
                item[name] = getattr(group, name)
    return item


def closure_json(
    target: str, runtimes: Iterable[StagedRuntime], requirements: TargetRequirements
) -> str:
    """The record: each runtime's closure, its externals as the requirements model resolved
    them (a plugin EP's are optional), and the model itself under `requirements`, which the
    report and the SBOM render."""
    document = {
        "schema": CLOSURES_SCHEMA,
        "target": target,
        "runtimes": [
            {
                "runtime": s.runtime,
                "directory": s.directory,
                "entry": s.closure.entry,
                "outside_globs": s.outside_globs,
                "kept": [{"name": k.name, "size": k.size, "why": k.why} for k in s.closure.kept],
                "links": [list(link) for link in s.closure.links],
                "dropped": [asdict(d) for d in s.closure.dropped],
                "externals": [
                    _external(target, e) for e in requirements.runtime(s.runtime).externals
                ],
            }
            for s in runtimes
        ],
        "requirements": requirements.as_json(),
    }
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def write_closures(
    version_dir: Path,
    targets: Iterable[tuple[str, Iterable[StagedRuntime], TargetRequirements]],
) -> None:
    """closures/<target>.json for every target staged into the (scratch) version directory."""
    directory = version_dir / CLOSURES_DIR
    directory.mkdir(exist_ok=True)
    for target, runtimes, requirements in targets:
        atomic_write(directory / f"{target}.json", closure_json(target, runtimes, requirements))


def read_requirements(version_dir: Path, target: str) -> dict[str, Any] | None:
    """A target's requirements model as its closure record carries it (TargetRequirements
    .as_json), or None when the build recorded none."""
    record = read_closures(version_dir, target)
    found = record.get("requirements") if record else None
    return found if isinstance(found, dict) else None


def read_closures(version_dir: Path, target: str) -> dict[str, Any] | None:
    """A target's closure record, or None when the build wrote none (or it is unreadable)."""
    try:
        document = json.loads((version_dir / CLOSURES_DIR / f"{target}.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or document.get("schema") != CLOSURES_SCHEMA:
        return None
    return document


def copy_closures(runner: Path, version_dir: Path, target: str) -> None:
    """A release: the target's record from the runner that built it (checked against that
    runner's manifest already), so the merged report is the one a single build writes."""
    record = runner / CLOSURES_DIR / f"{target}.json"
    if record.is_file():
        (version_dir / CLOSURES_DIR).mkdir(exist_ok=True)
        shutil.copyfile(record, version_dir / CLOSURES_DIR / f"{target}.json")
