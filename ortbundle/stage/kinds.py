"""What a component's libraries say it is, held against what its recipe says.

A runtime's entry must be an ONNX Runtime core and a plugin EP's entry a plugin, by what each
exports; every provider and EP name the recipe states must be one its libraries carry; a
provider its core offers and the recipe leaves out is worth a warning. A recipe that says
otherwise would publish a "runtime" no loader can open, or a runtimes.json that ranks it for
a provider it does not have. Everything is read from the facts the pruned runtime keeps
(binaries/info.py), so a runtime restored from the cache is checked without reading a file.
"""

from __future__ import annotations

from collections.abc import Iterable

from ortbundle._core.errors import ConfigError
from ortbundle.config.recipes import Recipe
from ortbundle.config.schema.problems import nearest
from ortbundle.stage.binaries.info import (
    CORE_EXPORT,
    PLUGIN_EXPORTS,
    PROVIDER_EXPORT,
    ROLE_EXPORTS,
    BinaryInfo,
    role,
)
from ortbundle.stage.closure import KeptLibrary
from ortbundle.stage.staging import StagedRuntime

_ROLE_OF_KIND = {"runtime": "core", "plugin-ep": "plugin-ep"}
_PLUGIN = " and ".join(PLUGIN_EXPORTS)
_ROLE_TEXT = {
    "core": f"an ONNX Runtime core (it exports {CORE_EXPORT})",
    "plugin-ep": f"a plugin EP library (it exports {_PLUGIN})",
    "provider": f"a provider library a core loads (it exports {PROVIDER_EXPORT})",
}


def check_component(recipe: Recipe, staged: StagedRuntime, target: str) -> None:
    """Refuse (ConfigError) an entry of the wrong kind, then a provider or EP name its
    libraries do not carry."""
    check_kind(recipe, staged, target)
    check_names(recipe, staged, target)


def _entry(staged: StagedRuntime) -> KeptLibrary | None:
    return next((k for k in staged.closure.kept if k.name == staged.closure.entry), None)


def _is(info: BinaryInfo) -> str:
    """What the exports say the library is, in words."""
    found = role(info)
    if found:
        return _ROLE_TEXT[found]
    some = [name for name in ROLE_EXPORTS if name in info.exports]
    if some:
        return f"a library exporting {', '.join(some)} but not the rest of an interface"
    return f"neither: it exports none of {', '.join(ROLE_EXPORTS)}"


def check_kind(recipe: Recipe, staged: StagedRuntime, target: str) -> None:
    """A runtime's entry exports OrtGetApiBase; a plugin EP's exports CreateEpFactories and
    ReleaseEpFactory (what RegisterExecutionProviderLibrary looks up)."""
    wanted = _ROLE_OF_KIND.get(recipe.kind)
    entry = _entry(staged)
    if wanted is None or entry is None or role(entry.info) == wanted:
        return
    raise ConfigError(
        f"{recipe.kind} {recipe.name}: its entry {entry.name} is not {_ROLE_TEXT[wanted]}; "
        f"it is {_is(entry.info)}",
        component=recipe.name,
        target=target,
        file=str(recipe.path),
        fix=_kind_fix(recipe, staged, target, wanted),
    )


def _kind_fix(recipe: Recipe, staged: StagedRuntime, target: str, wanted: str) -> str:
    def having(found: str) -> list[str]:
        return [k.name for k in staged.closure.kept if role(k.info) == found]

    cores, plugins = having("core"), having("plugin-ep")
    if wanted == "core" and cores:
        return f'set entry = "{cores[0]}" in [targets.{target}] (it exports {CORE_EXPORT})'
    if wanted == "core" and plugins:
        return (
            f'it is a plugin EP: in [component] set kind = "plugin-ep" with ep_name and '
            f'min_core, entry = "{plugins[0]}" in [targets.{target}], and in the product list '
            f"it under [plugin.{recipe.name}] pairs_with = [<a runtime>] instead of runtimes"
        )
    if wanted == "core":
        return (
            f"no kept library exports {CORE_EXPORT}: take the archive that holds the ONNX "
            "Runtime core, keep it in roots and name it in entry"
        )
    if plugins:
        return f'set entry = "{plugins[0]}" in [targets.{target}] (it exports {_PLUGIN})'
    if cores:
        return (
            'it is an ONNX Runtime core: set kind = "runtime" in [component] (and list it in '
            "the product's runtimes), or point entry at the plugin library"
        )
    return (
        f"no kept library exports {_PLUGIN}: keep the plugin library in roots and name it in entry"
    )


def _carried(staged: StagedRuntime) -> list[str]:
    return sorted({name for k in staged.closure.kept for name in k.info.ep_names})


def offered(recipe: Recipe, staged: StagedRuntime) -> tuple[str, ...]:
    """The providers the libraries offer: a core's table (in its priority order), or a plugin's
    EP name when its library carries it; () when the bytes do not say."""
    if recipe.kind == "plugin-ep":
        entry = _entry(staged)
        name = recipe.ep_name
        return (name,) if name and entry is not None and name in entry.info.ep_names else ()
    found: dict[str, None] = {}
    for kept in staged.closure.kept:
        found.update(dict.fromkeys(kept.info.available_providers))
    return tuple(found)


def check_names(recipe: Recipe, staged: StagedRuntime, target: str) -> None:
    """Every stated provider is a name some kept library carries; a plugin's ep_name is one its
    entry carries. All of a runtime's mistakes in one error, each with the nearest name."""
    carried = _carried(staged)
    # a library that names no provider at all (QNN's plugin keeps its name where the string
    # scan does not see it) leaves the recipe's word unjudged: only a name the bytes could have
    # confirmed, and did not, is refused
    unknown = [p for p in recipe.providers if p not in carried] if carried else []
    entry = _entry(staged)
    ep_names = list(entry.info.ep_names) if entry is not None else []
    wrong_ep = recipe.kind == "plugin-ep" and bool(ep_names) and recipe.ep_name not in ep_names
    if not unknown and not wrong_ep:
        return
    lines, fixes = [], []
    if unknown:
        listed = ", ".join(_with_nearest(p, carried) for p in unknown)
        lines.append(f"providers names {listed}, which none of its libraries carries")
        has = offered(recipe, staged) or tuple(carried)
        what = f"they offer {', '.join(has)}" if has else "they name no provider"
        fixes.append(f"list in [component] providers only what its libraries carry ({what})")
    if wrong_ep and entry is not None:
        name = str(recipe.ep_name)
        lines.append(
            f"ep_name {_with_nearest(name, ep_names)} is not a name its entry {entry.name} carries"
        )
        near = nearest(name, ep_names)
        names = ", ".join(ep_names) or "none"
        fixes.append(
            f'set ep_name = "{near}" in [component]'
            if near
            else f"set ep_name to the name the plugin's factory registers (it carries: {names})"
        )
    raise ConfigError(
        f"{recipe.kind} {recipe.name}: " + "; ".join(lines),
        component=recipe.name,
        target=target,
        file=str(recipe.path),
        fix="; ".join(fixes),
    )


def _with_nearest(word: str, candidates: Iterable[str]) -> str:
    near = nearest(word, candidates)
    return f"{word} (did you mean {near}?)" if near and near != word else word


def provider_warnings(runtimes: Iterable[tuple[Recipe, str, StagedRuntime]]) -> list[str]:
    """Once per build, each (component, provider) on one line naming its targets: a provider
    the libraries offer that the recipe leaves out (the loader never ranks the runtime for it,
    the application never learns it is there), and one a core's table marks unavailable."""
    recipes: dict[str, Recipe] = {}
    left_out: dict[tuple[str, str], list[str]] = {}
    unavailable: dict[tuple[str, str], list[str]] = {}
    for recipe, target, staged in runtimes:
        recipes[recipe.name] = recipe
        has = offered(recipe, staged)
        if not has:
            continue  # the bytes do not say: nothing to hold the recipe against
        for provider in has:
            if provider not in recipe.providers:
                left_out.setdefault((recipe.name, provider), []).append(target)
        if recipe.kind == "runtime":
            for provider in recipe.providers:
                if provider not in has:
                    unavailable.setdefault((recipe.name, provider), []).append(target)
    lines = [
        f"WARNING: {name} on {', '.join(sorted(targets))}: its libraries offer {provider}, "
        f"which [component] providers in {recipes[name].path} leaves out — add it, or the "
        "loader never ranks this runtime for it"
        for (name, provider), targets in left_out.items()
    ]
    lines += [
        f"WARNING: {name} on {', '.join(sorted(targets))}: [component] providers in "
        f"{recipes[name].path} names {provider}, which its core's provider table marks "
        "unavailable — remove it, or take a build of ONNX Runtime that has it"
        for (name, provider), targets in unavailable.items()
    ]
    return lines
