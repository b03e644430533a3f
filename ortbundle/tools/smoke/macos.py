"""`invoke smoke` on macos-arm64: no Mac here, so no runtime is run (NOT RUN, with the reason);
instead every check that needs no Mac runs, on the stage and on the package unpacked as an app
would hold it: each Mach-O's signature verified (apple-codesign), each install name resolvable
inside its directory as dyld would resolve it, arm64 only, and the oldest macOS runtimes.json
reports equal to the highest minos of the runtime's files."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ortbundle._core.errors import BinaryError
from ortbundle.stage.binaries import inspect, macho_tree_problems
from ortbundle.stage.binaries.baseline import version_key
from ortbundle.stage.binaries.info import sniff_format

TARGET = "macos-arm64"
NOT_RUN = "macOS code: loading it needs a Mac with Apple Silicon, and there is none here"
_LINK = 0o120000


def _runtimes(stage: Path) -> list[dict[str, Any]]:
    index = json.loads((stage / "runtimes.json").read_text("utf-8"))
    return list(index.get("runtimes", []))


def _code_directories(runtime: dict[str, Any]) -> list[str]:
    """A runtime's directory and those of the plugin EPs it registers."""
    plugins = [str(Path(p["library"]).parent.as_posix()) for p in runtime.get("plugin_eps", [])]
    return list(dict.fromkeys([str(runtime["directory"]), *plugins]))


def _minos_problem(directories: list[Path], reported: str) -> str | None:
    """The highest minos of the directories' Mach-O files against what runtimes.json says."""
    found = []
    paths = sorted(p for d in directories if d.is_dir() for p in d.iterdir())
    for path in paths:
        if path.is_file() and not path.is_symlink() and sniff_format(path) == "macho":
            try:
                version = inspect(path).os_version
            except BinaryError as exc:
                return exc.message
            found.append(version)
    highest = max(found, key=version_key, default="")
    if highest != reported:
        return f"minos {highest or 'none'}, runtimes.json reports {reported or 'none'}"
    return None


def check_tree(root: Path, directories: list[str]) -> list[str]:
    """Every problem of the code directories under `root`, each naming its file."""
    problems: list[str] = []
    for directory in directories:
        if not (root / directory).is_dir():
            problems.append(f"{directory}: missing")
            continue
        problems += [f"{directory}/{p}" for p in macho_tree_problems(root / directory)]
    return problems


def _unzip(archive: Path, into: Path) -> None:
    """Unpack as unzip does, links made links: the package's own reader, for the check."""
    with zipfile.ZipFile(archive) as package:
        for info in package.infolist():
            dest = into / info.filename
            if info.is_dir():
                dest.mkdir(parents=True, exist_ok=True)
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            if (info.external_attr >> 16) & 0o170000 == _LINK:
                dest.symlink_to(package.read(info).decode())
            else:
                dest.write_bytes(package.read(info))


def smoke_macos(
    stage: Path,
    package: Path | None,
    work: Path,
    emit: Callable[[str, str, str, str], None],
) -> None:
    """Lines (verdict, subject, where, detail) for the macos-arm64 stage and its package."""
    emit("NOT RUN", "runtimes", "", NOT_RUN)
    for runtime in _runtimes(stage):
        directories = _code_directories(runtime)
        problems = check_tree(stage, directories)
        reported = str((runtime.get("system") or {}).get("macos", ""))
        minos = _minos_problem([stage / d for d in directories], reported)
        problems += [f"{directories[0]}: {minos}"] if minos else []
        detail = "; ".join(problems) or (
            f"static ({', '.join(directories)}): signatures verify, install names resolve "
            f"inside the tree, arm64 only, minos {reported} as runtimes.json reports"
        )
        emit("FAIL" if problems else "PASS", str(runtime["name"]), "stage", detail)
    if package is None:
        return
    contents = work / "macos" / "Contents"
    contents.mkdir(parents=True)
    _unzip(package, contents)
    resources = sorted(p for p in (contents / "Resources").iterdir() if p.is_dir())
    if len(resources) != 1:
        emit("FAIL", "macos", package.name, "Resources/ holds no single package directory")
        return
    seen = resources[0]  # the loader's view: runtimes/ and plugins/ are links to Frameworks/
    directories = [d for r in _runtimes(seen) for d in _code_directories(r)]
    problems = check_tree(seen, directories)
    detail = "; ".join(problems) or (
        f"unpacked into Contents/: {len(directories)} code directories reached through "
        "Resources' links, signatures verify, install names resolve"
    )
    emit("FAIL" if problems else "PASS", "macos", package.name, detail)
