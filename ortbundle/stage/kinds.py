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
from pathlib import Path

from ortbundle._core.errors import ClosureError, ConfigError
from ortbundle._core.memo import Memo
from ortbundle.config.recipes import Recipe
from ortbundle.config.schema.problems import nearest
from ortbundle.config.vocabulary import PAIRED_KINDS
from ortbundle.stage.binaries.info import (
    CORE_EXPORT,
    CORE_NAMES,
    CUSTOM_OPS_EXPORT,
    PLUGIN_EXPORTS,
    PROVIDER_EXPORT,
    ROLE_EXPORTS,
    core_names,
    role,
)
from ortbundle.stage.binaries.providers import CPU
from ortbundle.stage.closure import KeptLibrary
from ortbundle.stage.plugins import refuse_bundled_core
from ortbundle.stage.probe.names import (
    NamesRead,
    read_custom_op_domains,
    read_plugin_names,
    read_providers,
)
from ortbundle.stage.staging import StagedRuntime

_ROLE_OF_KIND = {
    "runtime": "core",
    "plugin-ep": "plugin-ep",
    "custom-ops": "custom-ops",
    "uses-core": "uses-core",
}
_PLUGIN = " and ".join(PLUGIN_EXPORTS)
_CORE_FILES = " or ".join(CORE_NAMES)
_SAYS = {  # what makes a library each role
    "core": f"it exports {CORE_EXPORT}",
    "plugin-ep": f"it exports {_PLUGIN}",
    "custom-ops": f"it exports {CUSTOM_OPS_EXPORT}",
    "uses-core": f"it links or opens {_CORE_FILES}",
    "provider": f"it exports {PROVIDER_EXPORT}",
}
_ROLE_TEXT = {
    "core": f"an ONNX Runtime core ({_SAYS['core']})",
    "plugin-ep": f"a plugin EP library ({_SAYS['plugin-ep']})",
    "custom-ops": f"a custom-operator library ({_SAYS['custom-ops']})",
    "uses-core": f"a library that uses a core ({_SAYS['uses-core']})",
    "provider": f"a provider library a core loads ({_SAYS['provider']})",
}
# what the recipe says, for each role the bytes show
_KIND_OF_ROLE = {role: kind for kind, role in _ROLE_OF_KIND.items()}


def check_component(recipe: Recipe, staged: StagedRuntime, target: str) -> None:
    """Refuse (ConfigError) an entry of the wrong kind, then a provider or EP name its
    libraries do not carry; a component none of whose libraries is of the family is a
    ClosureError."""
    check_kind(recipe, staged, target)
    if recipe.kind in ("custom-ops", "uses-core"):  # a plugin EP's is checked before it is stored
        refuse_bundled_core(recipe, staged, target)
    check_names(recipe, staged, target)


def _entry(staged: StagedRuntime) -> KeptLibrary | None:
    return next((k for k in staged.closure.kept if k.name == staged.closure.entry), None)


def uses_core(staged: StagedRuntime, kept: KeptLibrary) -> tuple[str, ...]:
    """The core names a kept library links (DT_NEEDED, imports) or opens by name (its strings,
    when it imports dlopen or LoadLibrary): () when it uses no core."""
    opened = [n for f in staged.closure.load_scans if f.file == kept.name for n in f.scan.names]
    return core_names([*kept.info.all_needed, *opened])


def kind_of(staged: StagedRuntime, kept: KeptLibrary) -> str:
    """What one kept library is, by its exports, then by its use of a core: a role of
    binaries/info.py's role() or "uses-core"; "" when neither."""
    found = role(kept.info)
    if not found and uses_core(staged, kept):
        return "uses-core"
    return found


def _is(staged: StagedRuntime, kept: KeptLibrary) -> str:
    """What the exports say the library is, in words."""
    found = kind_of(staged, kept)
    if found:
        return _ROLE_TEXT[found]
    some = [name for name in ROLE_EXPORTS if name in kept.info.exports]
    if some:
        return f"a library exporting {', '.join(some)} but not the rest of an interface"
    return f"neither: it exports none of {', '.join(ROLE_EXPORTS)}"


def check_kind(recipe: Recipe, staged: StagedRuntime, target: str) -> None:
    """A runtime's entry exports OrtGetApiBase; a plugin EP's exports CreateEpFactories and
    ReleaseEpFactory (what RegisterExecutionProviderLibrary looks up); a custom-op library's
    RegisterCustomOps (what RegisterCustomOpsLibrary looks up); a library that uses a core
    links or opens one. A component whose libraries are none of these is a ClosureError."""
    wanted = _ROLE_OF_KIND.get(recipe.kind)
    entry = _entry(staged)
    if wanted is None or entry is None:
        return
    found = kind_of(staged, entry)
    if found == wanted:
        return
    if not any(kind_of(staged, k) in _KIND_OF_ROLE for k in staged.closure.kept):
        raise _none_of_the_family(recipe, staged, target)
    raise ConfigError(
        f"{recipe.kind} {recipe.name}: its entry {entry.name} is not {_ROLE_TEXT[wanted]}; "
        f"it is {_is(staged, entry)}",
        component=recipe.name,
        target=target,
        file=str(recipe.path),
        fix=_kind_fix(recipe, staged, target, wanted),
    )


def _none_of_the_family(recipe: Recipe, staged: StagedRuntime, target: str) -> ClosureError:
    """Exit 8: nothing kept is a core, a plugin EP, a custom-op library or a library using a
    core: say what each library does export."""
    seen = []
    for kept in staged.closure.kept:
        exports = [n for n in kept.info.exports if n.isidentifier()][:4]
        more = len(kept.info.exports) - len(exports)
        listed = ", ".join(exports) + (f" and {more} more" if more > 0 else "")
        seen.append(f"{kept.name} (exports {listed or 'nothing'})")
    return ClosureError(
        f"{recipe.kind} {recipe.name}: none of its libraries is a kind of the ONNX Runtime "
        f"family — found {'; '.join(seen) or 'no library'}",
        component=recipe.name,
        target=target,
        file=str(recipe.path),
        fix=(
            f"take, in [targets.{target}] roots, the library that is one: a core exports "
            f"{CORE_EXPORT}, a plugin EP {_PLUGIN}, a custom-op library {CUSTOM_OPS_EXPORT}, "
            f"a library that uses a core links or opens {_CORE_FILES}"
        ),
    )


def _kind_fix(recipe: Recipe, staged: StagedRuntime, target: str, wanted: str) -> str:
    def having(found: str) -> list[str]:
        return [k.name for k in staged.closure.kept if kind_of(staged, k) == found]

    if having(wanted):
        library = having(wanted)[0]
        return f'set entry = "{library}" in [targets.{target}] ({_SAYS[wanted]})'
    plugins = having("plugin-ep")
    if wanted == "core" and plugins:
        return (
            f'it is a plugin EP: in [component] set kind = "plugin-ep" with ep_name and '
            f'min_core, entry = "{plugins[0]}" in [targets.{target}], and in the product list '
            f"it under [plugin.{recipe.name}] pairs_with = [<a runtime>] instead of runtimes"
        )
    others = [(k.name, kind_of(staged, k)) for k in staged.closure.kept]
    library, found = next(((n, r) for n, r in others if r in _KIND_OF_ROLE), ("", ""))
    kind = _KIND_OF_ROLE.get(found, "")
    if kind == "runtime" and recipe.kind != "runtime":
        return (
            'it is an ONNX Runtime core: set kind = "runtime" in [component] (and list it in '
            "the product's runtimes), or point entry at the library of its kind"
        )
    if kind and kind != "runtime":
        table = PAIRED_KINDS[kind]
        listed = (
            "in the product's runtimes"
            if recipe.kind == "runtime"
            else f"under [{PAIRED_KINDS[recipe.kind]}.{recipe.name}]"
        )
        return (
            f'{library} is {_ROLE_TEXT[found]}: set kind = "{kind}" in [component] and '
            f'entry = "{library}" in [targets.{target}], and in the product list it under '
            f"[{table}.{recipe.name}] pairs_with = [<a runtime>] instead of {listed}"
        )
    return (
        f"keep the library that is {_ROLE_TEXT[wanted]} in [targets.{target}] roots and name "
        f"it in entry, or set kind in [component] to what {staged.closure.entry} is"
    )


def _carried(staged: StagedRuntime) -> list[str]:
    return sorted({name for k in staged.closure.kept for name in k.info.ep_names})


def offered(recipe: Recipe, staged: StagedRuntime) -> tuple[str, ...]:
    """The providers the libraries offer: what the core said when the probe ran it, else its
    table read from the bytes (in its priority order), or a plugin's EP name when its library
    carries it; () when neither says."""
    if recipe.kind == "plugin-ep":
        entry = _entry(staged)
        name = recipe.ep_name
        return (name,) if name and entry is not None and name in entry.info.ep_names else ()
    if staged.offered is not None and staged.offered.names:
        return staged.offered.names
    return _static_table(staged)


def _static_table(staged: StagedRuntime) -> tuple[str, ...]:
    found: dict[str, None] = {}
    for kept in staged.closure.kept:
        found.update(dict.fromkeys(kept.info.available_providers))
    return tuple(found)


def read_offered(
    recipe: Recipe, staged: StagedRuntime, stage: Path, memo: Memo, mode: str = "native"
) -> NamesRead | None:
    """What a runtime's core offers on its target, by running the staged core where this
    machine can (probe/names.py), else from its bytes; None for any other kind."""
    entry = _entry(staged)
    if recipe.kind != "runtime" or entry is None or kind_of(staged, entry) != "core":
        return None
    library = stage / staged.directory / entry.name
    static = _static_table(staged)
    return read_providers(library, entry.sha256, staged.target, static, memo, mode=mode)


def read_plugin_ep_names(
    recipe: Recipe,
    staged: StagedRuntime,
    core: StagedRuntime,
    stage: Path,
    memo: Memo,
    mode: str = "native",
) -> NamesRead | None:
    """The EP names a plugin EP's factories give, read by registering its entry with the
    staged `core` it pairs with where this machine can run them (probe/names.py), else what
    its bytes and package state; None when either has no entry library."""
    pair = _paired_entries(staged, core, stage)
    if pair is None:
        return None
    entry = _entry(staged)
    static = (recipe.ep_name,) if recipe.ep_name else tuple(entry.info.ep_names if entry else ())
    return read_plugin_names(*pair, staged.target, static, memo, mode=mode)


def read_domains(
    staged: StagedRuntime, core: StagedRuntime, stage: Path, memo: Memo, mode: str = "native"
) -> NamesRead | None:
    """The operator domains a custom-op library registers, read by running it against the
    staged `core` it pairs with where this machine can (probe/names.py); None when either has
    no entry library."""
    pair = _paired_entries(staged, core, stage)
    if pair is None:
        return None
    return read_custom_op_domains(*pair, staged.target, memo, mode=mode)


def _paired_entries(
    staged: StagedRuntime, core: StagedRuntime, stage: Path
) -> tuple[Path, str, Path, str] | None:
    """A component's entry library and its core's, each with its SHA-256, as the probe runs
    them; None when either has no entry."""
    entry, core_entry = _entry(staged), _entry(core)
    if entry is None or core_entry is None:
        return None
    return (
        stage / staged.directory / entry.name,
        entry.sha256,
        stage / core.directory / core_entry.name,
        core_entry.sha256,
    )


def check_plugin_name(recipe: Recipe, read: NamesRead, core: str) -> None:
    """A plugin EP whose factories, run, named their devices' EP: its ep_name is one of
    them, or the recipe is refused with the nearest (ONNX Runtime appends a plugin's EP by
    that name; another finds nothing)."""
    if not read.ran or recipe.ep_name in read.names:
        return
    names = ", ".join(read.names)
    near = nearest(str(recipe.ep_name), read.names) or read.names[0]
    raise ConfigError(
        f"ep_name {_with_nearest(str(recipe.ep_name), read.names)} is not what the plugin's "
        f"factories name: registered with the {core} core it gave its devices {names} "
        f"({read.how})",
        component=recipe.name,
        target=read.target,
        file=str(recipe.path),
        fix=f'set ep_name = "{near}" in [component]',
    )


def check_names(recipe: Recipe, staged: StagedRuntime, target: str) -> None:
    """Every stated provider is a name some kept library carries and, when the probe ran the
    core, one it offers; a plugin's ep_name is one its entry carries. All of a runtime's
    mistakes in one error, each with the nearest name."""
    providers = recipe.providers_for(target)
    table = recipe.providers_table(target)
    carried = _carried(staged)
    ran = staged.offered if staged.offered is not None and staged.offered.ran else None
    # a library that names no provider at all (QNN's plugin keeps its name where the string
    # scan does not see it) leaves the recipe's word unjudged: only a name the bytes could have
    # confirmed, and did not, is refused
    # a plugin naming only the CPU provider (every ONNX Runtime library mentions it) has not
    # named its own: its EP name, which the plugin's package states, stays unjudged too
    # (onnxruntime-ep-webgpu's x86_64 library keeps its name only in C++ type names)
    if recipe.kind == "plugin-ep" and set(carried) <= {CPU}:
        carried = []
    unknown = [p for p in providers if p not in carried] if carried else []
    # the core, run, said what it offers: a name it lacks is refused, carried or not
    lacking = [p for p in providers if p not in unknown and p not in ran.names] if ran else []
    entry = _entry(staged)
    ep_names = list(entry.info.ep_names) if entry is not None else []
    judged_ep = [] if recipe.kind == "plugin-ep" and set(ep_names) <= {CPU} else ep_names
    wrong_ep = recipe.kind == "plugin-ep" and bool(judged_ep) and recipe.ep_name not in judged_ep
    if not unknown and not lacking and not wrong_ep:
        return
    lines, fixes = [], []
    if unknown:
        listed = ", ".join(
            _with_nearest(p, [*(ran.names if ran else ()), *carried]) for p in unknown
        )
        lines.append(f"{table} providers names {listed}, which none of its libraries carries")
    if lacking and ran is not None:
        listed = ", ".join(lacking)  # a provider's right name, only not built in: no guess
        lines.append(
            f"{table} providers names {listed}, which its core does not offer on {target} "
            f"(its GetAvailableProviders, {ran.how}: {', '.join(ran.names)})"
        )
    if unknown or lacking:
        has = offered(recipe, staged) or tuple(carried)
        what = f"they offer {', '.join(has)}" if has else "they name no provider"
        fixes.append(f"list in {table} providers only what its libraries carry ({what})")
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
    left_out: dict[tuple[str, str, str], list[str]] = {}
    unavailable: dict[tuple[str, str, str], list[str]] = {}
    for recipe, target, staged in runtimes:
        recipes[recipe.name] = recipe
        has = offered(recipe, staged)
        if not has:
            continue  # the bytes do not say: nothing to hold the recipe against
        providers, table = recipe.providers_for(target), recipe.providers_table(target)
        for provider in has:
            if provider not in providers:
                left_out.setdefault((recipe.name, provider, table), []).append(target)
        if recipe.kind == "runtime":
            for provider in providers:
                if provider not in has:
                    unavailable.setdefault((recipe.name, provider, table), []).append(target)
    lines = [
        f"WARNING: {name} on {', '.join(sorted(targets))}: its libraries offer {provider}, "
        f"which {_table(table, targets)} providers in {recipes[name].path} leaves out — add "
        "it, or the loader never ranks this runtime for it"
        for (name, provider, table), targets in left_out.items()
    ]
    lines += [
        f"WARNING: {name} on {', '.join(sorted(targets))}: {_table(table, targets)} providers "
        f"in {recipes[name].path} names {provider}, which its core's provider table marks "
        "unavailable — remove it, or take a build of ONNX Runtime that has it"
        for (name, provider, table), targets in unavailable.items()
    ]
    return lines


def _table(table: str, targets: list[str]) -> str:
    """[component], or each target's own table when the list is per target."""
    if table == "[component]":
        return table
    return " and ".join(f"[targets.{t}]" for t in sorted(targets))
