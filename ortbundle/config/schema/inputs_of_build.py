"""Every configuration problem of one build, collected before anything is parsed: the product
manifest, each recipe it names (runtimes, plugin EPs, models), the licence policy, and what
they say about each other (a runtime's targets its recipe lacks, a [runtime.<name>] naming no
runtime). A build with three typos in two recipes hears of all three at once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ortbundle._core.errors import ConfigError
from ortbundle.config.schema import display_name
from ortbundle.config.schema.problems import ConfigProblems, Problem, nearest, raise_if_any
from ortbundle.config.targets import all_targets
from ortbundle.config.tomlreader import load_toml
from ortbundle.config.vocabulary import PAIRED_KINDS


def check_build_inputs(root: Path, product: str, policy: Path) -> None:
    """Raise one ConfigProblems naming every problem of the product's inputs, or return. A
    missing product file is left to the product loader (it says so in its own words)."""
    problems: list[Problem] = []
    manifest = root / "manifests" / f"{product}.toml"
    data = _load(manifest, "product", problems) if manifest.is_file() else None
    if data is None:
        raise_if_any(problems)
        return
    file = display_name(manifest)
    head = _table(data.get("product"))
    targets = [t for t in _strings(head.get("targets")) if _is_target(t)]
    runtimes = _strings(head.get("runtimes"))
    overrides = _table(data.get("runtime"))
    wanted: dict[str, tuple[str, list[str]]] = {}  # recipe -> (its role, its targets)
    for runtime in runtimes:
        only = _strings(_table(overrides.get(runtime)).get("targets")) or targets
        wanted[runtime] = ("runtime", only)
        for target in sorted(set(only) - set(targets)):
            problems.append(
                Problem(
                    file,
                    f"runtime.{runtime}",
                    "targets",
                    f"names {target!r}, which [product] targets lacks",
                    fix=f"add {target} to [product] targets",
                )
            )
    for name in overrides:
        if name not in runtimes:
            problems.append(
                Problem(
                    file,
                    "runtime",
                    name,
                    "names no runtime of [product] runtimes",
                    nearest(name, runtimes),
                )
            )
    for kind, key in PAIRED_KINDS.items():
        for plugin, table in _table(data.get(key)).items():
            earlier = wanted.setdefault(plugin, (kind, []))[0]
            if earlier != kind and earlier in PAIRED_KINDS:
                problems.append(
                    Problem(
                        file,
                        key,
                        plugin,
                        f"is also listed in [{PAIRED_KINDS[earlier]}.{plugin}]: list it once",
                        fix=f"keep the table of its recipe's kind: {_listed(earlier)}",
                    )
                )
            for pair in _strings(_table(table).get("pairs_with")):
                if pair not in runtimes:
                    problems.append(
                        Problem(
                            file,
                            f"{key}.{plugin}",
                            "pairs_with",
                            f"{pair!r} is not a runtime of [product] runtimes",
                            nearest(pair, runtimes),
                        )
                    )
    for model in _strings(head.get("models")):
        wanted.setdefault(model, ("model", []))
    for waiver_index, waiver in enumerate(_list(data.get("waivers"))):
        for target in _strings(_table(waiver).get("targets")):
            if _is_target(target) and target not in targets:
                problems.append(
                    Problem(
                        file,
                        f"waivers[{waiver_index}]",
                        "targets",
                        f"{target!r} is not a target of [product] targets",
                        nearest(target, targets),
                    )
                )
    problems += _recipes(root, file, wanted)
    if policy.is_file():
        _load(policy, "policy", problems)
    paths = {p.file: p.path for p in problems if p.path}
    paths[file] = str(manifest)
    for recipe in wanted:
        path = root / "recipes" / f"{recipe}.toml"
        paths.setdefault(display_name(path), str(path))
    raise_if_any(replace(p, path=p.path or paths.get(p.file, "")) for p in problems)


def _recipes(root: Path, manifest: str, wanted: dict[str, tuple[str, list[str]]]) -> list[Problem]:
    problems: list[Problem] = []
    for name, (role, targets) in wanted.items():
        path = root / "recipes" / f"{name}.toml"
        where = {"runtime": "product", "model": "product", **PAIRED_KINDS}[role]
        if not path.is_file():
            known = sorted(p.stem for p in (root / "recipes").glob("*.toml"))
            problems.append(
                Problem(
                    manifest,
                    where,
                    name,
                    f"names {display_name(path)}, which does not exist",
                    nearest(name, known),
                )
            )
            continue
        data = _load(path, "recipe", problems)
        if data is None:
            continue
        file = display_name(path)
        kind = _table(data.get("component")).get("kind")
        if isinstance(kind, str) and kind != role:
            problems.append(
                Problem(
                    file,
                    "component",
                    "kind",
                    f"is {kind!r}, but {manifest} uses it as a {role}",
                    fix=f"list it {_listed(kind)} in {manifest}, or use another recipe",
                )
            )
        has = _table(data.get("targets"))
        for target in targets:
            if target not in has:
                problems.append(
                    Problem(
                        file,
                        "targets",
                        target,
                        f"missing: {manifest} ships {name} on {target}",
                        fix=f"add [targets.{target}], or drop the target from "
                        f"[runtime.{name}] targets in {manifest}",
                    )
                )
    return problems


def _load(path: Path, kind: str, problems: list[Problem]) -> dict[str, Any] | None:
    """The file's data through its loader's own schema check (so the loader, reading it again,
    does not check it twice); its problems are collected, not raised."""
    try:
        return load_toml(path, kind)[0]
    except ConfigProblems as found:
        problems.extend(found.problems)
        return load_toml(path)[0]  # the data, for the checks across files
    except ConfigError as error:  # missing, or not TOML
        problems.append(Problem(display_name(path), "", "(file)", error.message, path=str(path)))
        return None


def _listed(kind: str) -> str:
    """Where a product manifest lists a recipe of this kind."""
    if kind in PAIRED_KINDS:
        return f"under [{PAIRED_KINDS[kind]}.<name>] pairs_with = [<runtimes>]"
    return "in [product] models" if kind == "model" else "in [product] runtimes"


def _is_target(name: str) -> bool:

    return name in all_targets()


def _table(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [v for v in _list(value) if isinstance(v, str)]
