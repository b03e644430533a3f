"""runtimes.json: the contract between a package and any loader (the Python one here, the app's).

Written into every target stage with the loader module beside it. Versioned by `schema`; the
JSON Schema lives in ortbundle/data/runtimes.schema.json. An add-on product (`addon_of`) writes
no loader and no runtimes.json but a fragment, runtimes.d/<product>.json, that the main
package's loader reads beside its own index and ranks like the package's own runtimes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ortbundle._core.errors import ConfigError
from ortbundle._core.fsio import atomic_write
from ortbundle.config.products import Product
from ortbundle.config.recipes import Recipe
from ortbundle.config.targets import Target, get_target
from ortbundle.payload.loader import loader_source
from ortbundle.stage.closure import ExternalLibrary
from ortbundle.stage.kinds import uses_core
from ortbundle.stage.probe.names import READ_STATICALLY, NamesRead
from ortbundle.stage.requirements import TargetRequirements, offered_json, resolve
from ortbundle.stage.staging import StagedRuntime

INDEX_NAME = "runtimes.json"
LOADER_NAME = "runtime_loader.py"
# The loader's own names (payload/loader/index.py SCHEMA, FRAGMENTS), repeated so that writing
# the index imports none of the loader's modules; a test holds them equal.
SCHEMA = "ortbundle.runtimes/2"
FRAGMENTS_DIR = "runtimes.d"  # add-ons' index fragments, read by the loader
# What `requires` leaves out: what every machine of the platform has, which the loader finds
# anyway and whose version the index's `system` already checks. On Linux that is the C library
# and the C++ runtime of the base system (glibc's libraries, libstdc++, libgcc_s; not libgomp or
# zlib, which a minimal system may lack); on Windows and Android the operating system's own
# libraries (kernel32, API sets, bionic; libSystem and the frameworks on macOS, which live in
# the dyld shared cache), which are not even files a search would find. Listed:
# everything else — the VC++ redistributable, drivers (optional ones marked so), vendor toolkits.
# The operating system's own group is each target's `system_group` (data/targets.toml).
_BASE_LINUX = frozenset({"libstdc++.so.6", "libgcc_s.so.1"})


def _base_system(target: Target, group: str, name: str) -> bool:
    return group == target.system_group or (target.os == "linux" and name in _BASE_LINUX)


GENERIC_GPU_PROVIDERS = frozenset({"WebGpuExecutionProvider", "DmlExecutionProvider"})
# The copy an APK carries (assets/ortbundle/<abi>/runtimes.json) says so, and leaves out what
# only a desktop loader reads: the override variable (Android's is a system property) and each
# runtime's directory (an APK's libraries are its lib/<abi>/, its payload under the index).
APK_LAYOUT = "apk"
_DESKTOP_ONLY = ("override_env",)
_DESKTOP_ONLY_RUNTIME = ("directory",)


def plugin_entry(recipe: Recipe, staged: StagedRuntime) -> dict[str, Any]:
    """What a loader needs to register a plugin EP with the core it chose. A plugin whose
    factories name the EP after its registration name (onnxruntime-ggml, read by the probe) is
    registered under its ep_name, or an application appending that name would find nothing."""
    named = staged.offered is not None and staged.offered.registration_named
    return {
        "registration_name": recipe.ep_name if named and recipe.ep_name else recipe.name,
        "ep_name": recipe.ep_name,
        "library": f"{staged.directory}/{staged.closure.entry}",
        "min_core": recipe.min_core,
        "version": recipe.version,
        "providers": list(recipe.providers_for(staged.target)),
        "soc_families": list(recipe.soc_families),
        # an NPU plugin's device and its sessions' options: only where the recipe states them
        **(
            {"device": recipe.device.as_json(), "requires_system": recipe.device.requirement()}
            if recipe.device
            else {}
        ),
        **(
            {"session_options": recipe.session_options.as_json()}
            if recipe.session_options.as_json()
            else {}
        ),
    }


def custom_op_entry(recipe: Recipe, staged: StagedRuntime) -> dict[str, Any]:
    """A custom-operator library a session of the runtime registers (RegisterCustomOpsLibrary,
    SessionOptions.register_custom_ops_library): where it is, from the stage root, and the
    operator domains it registers, as the library said when run against the core (`domains_read`
    says how, `domains_unread` why none are known)."""
    read = staged.offered or NamesRead(staged.target, (), READ_STATICALLY, "not run")
    return {
        "name": recipe.name,
        "library": f"{staged.directory}/{staged.closure.entry}",
        "version": recipe.version,
        "domains": list(read.names),
        "domains_read": read.how,
        **({"domains_unread": read.why} if read.why else {}),
    }


def uses_core_entry(recipe: Recipe, staged: StagedRuntime, core: str) -> dict[str, Any]:
    """A library that uses the runtime's core (GenAI), offered beside it: `core` is the name
    it links or opens, which the runtime's directory holds."""
    return {
        "name": recipe.name,
        "library": f"{staged.directory}/{staged.closure.entry}",
        "version": recipe.version,
        "core": core,
    }


def _core_used(recipe: Recipe, staged: StagedRuntime) -> tuple[str, ...]:
    entry = next(k for k in staged.closure.kept if k.name == staged.closure.entry)
    return uses_core(staged, entry)


def _fitting_core(
    product: Product,
    target: str,
    user: tuple[Recipe, StagedRuntime],
    runtime: tuple[Recipe, StagedRuntime],
) -> str:
    """The name the library links or opens that the runtime's directory holds; a pairing with a
    runtime that holds none of them is refused: the library would find no core, or another."""
    recipe, staged = user
    wanted = _core_used(recipe, staged)
    case = get_target(target).case_insensitive
    held = {f.path.rsplit("/", 1)[-1] for f in runtime[1].files}
    held = {h.lower() for h in held} if case else held
    for name in wanted:
        base = name.rsplit("/", 1)[-1]
        if (base.lower() if case else base) in held:
            return base
    raise ConfigError(
        f"{recipe.name} uses the core {' or '.join(wanted) or '(none found)'}, which runtime "
        f"{runtime[0].name} does not ship on {target}",
        component=recipe.name,
        target=target,
        file=str(product.path),
        fix=f"pair it in [uses_core.{recipe.name}] pairs_with only with runtimes whose core it "
        "links or opens, or take a build of it made for that core",
    )


def requires_entries(target: str, needs: Iterable[ExternalLibrary]) -> list[dict[str, Any]]:
    """The system libraries a runtime (with its plugin EPs) needs by name, as the model resolved
    them (TargetRequirements.index_requires); what the base system always has is left out
    (see _base_system)."""
    system = get_target(target)
    found = []
    for ext in needs:
        if ext.kind in ("system", "toolchain") and _base_system(system, ext.group, ext.name):
            continue
        item = {"name": ext.name, "group": ext.group, "optional": ext.optional}
        item["install"] = ext.install
        if ext.version:  # the constraint the model holds (">=13.0"); absent: any version
            item["version"] = ext.version
        found.append(item)
    return found


def runtime_entry(
    recipe: Recipe,
    staged: StagedRuntime,
    requirements: TargetRequirements,
    plugins: list[dict[str, Any]] | None = None,
    companions: dict[str, list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """One runtime's entry; `companions` adds its `custom_ops` and `uses_core` lists (left out
    when empty, so an index without them reads as before)."""
    prefix = staged.directory + "/"
    offered = requirements.runtime(recipe.name).offered
    files = []
    for f in staged.files:
        item: dict[str, Any] = {
            "path": f.path.removeprefix(prefix),
            "size": f.size,
            "sha256": f.sha256,
        }
        if f.link_to:
            item["link_to"] = f.link_to
        files.append(item)
    return {
        "name": recipe.name,
        "label": recipe.label,
        "directory": staged.directory,
        "entry": staged.closure.entry,
        "ort_version": recipe.version,
        "providers": list(recipe.providers_for(staged.target)),
        "fits": {
            "gpu_vendors": list(recipe.gpu_vendors),
            # a core fits any GPU when it, or a plugin EP paired with it, drives one
            "any_gpu": bool(
                GENERIC_GPU_PROVIDERS
                & {
                    *recipe.providers_for(staged.target),
                    *(p for e in plugins or [] for p in e["providers"]),
                }
            ),
            "soc_families": list(recipe.soc_families),
        },
        "plugin_eps": plugins or [],
        "files": files,
        # the oldest system it runs on (the product's promise included): a loader skips it on
        # an older one
        "system": requirements.runtime(recipe.name).system.as_json(),
        # the libraries the user's system must provide: a loader skips it when one is absent
        "requires": requires_entries(requirements.target, requirements.index_requires(recipe.name)),
        **{key: value for key, value in (companions or {}).items() if value},
        # provider libraries the core may load that the package does not carry: never checked
        **({"offered_not_shipped": offered_json(offered)} if offered else {}),
    }


def write_index(
    stage: Path,
    product: Product,
    target: str,
    runtimes: list[tuple[Recipe, StagedRuntime]],
    plugins: Sequence[tuple[Recipe, StagedRuntime, tuple[str, ...]]] = (),
    requirements: TargetRequirements | None = None,
    companions: Sequence[tuple[Recipe, StagedRuntime, tuple[str, ...]]] = (),
) -> dict[str, Any]:
    """Write runtimes.json and the loader into a (scratch) target stage — or, for an add-on
    product, the fragment runtimes.d/<product>.json (index_files says which).

    Each runtime's `system` and `requires` render `requirements`, the target's model; None:
    resolved here from the same runtimes (which holds each against the product's `[system]`).
    `companions` are the custom-op libraries and libraries using a core, each with the runtimes
    it pairs with: listed under each of those runtimes (a library using a core only beside a
    core it fits: refused otherwise)."""
    if requirements is None:
        requirements = resolve(
            target,
            product.system,
            [*runtimes, *((r, s) for r, s, _ in (*plugins, *companions))],
            {r.name: pairs for r, _, pairs in (*plugins, *companions)},
        )
    beside: dict[str, dict[str, list[dict[str, Any]]]] = {
        r.name: {"custom_ops": [], "uses_core": []} for r, _ in runtimes
    }
    for recipe, staged, pairs in companions:
        for runtime in runtimes:
            if runtime[0].name not in pairs:
                continue
            if recipe.kind == "custom-ops":
                beside[runtime[0].name]["custom_ops"].append(custom_op_entry(recipe, staged))
            else:
                core = _fitting_core(product, target, (recipe, staged), runtime)
                beside[runtime[0].name]["uses_core"].append(uses_core_entry(recipe, staged, core))
    index: dict[str, Any] = {
        "schema": SCHEMA,
        "product": {"name": product.name, "version": product.version},
        "target": target,
        # the CPU the libraries are built for: a loader on another machine refuses the package
        # by saying so, not by calling the system too old or a library missing
        **({"machine": cpu} if (cpu := get_target(target).cpu) else {}),
        "runtimes": [
            runtime_entry(
                recipe,
                staged,
                requirements,
                [plugin_entry(p, s) for p, s, pairs in plugins if recipe.name in pairs],
                beside[recipe.name],
            )
            for recipe, staged in runtimes
        ],
    }
    if product.addon_of:
        # the main package's loader ranks these beside its own; its override variable rules
        index["addon_of"] = product.addon_of.name
        fragment = stage / index_files(product)[0]
        fragment.parent.mkdir(exist_ok=True)
        atomic_write(fragment, json.dumps(index, indent=2, sort_keys=True) + "\n")
        fragment.chmod(0o644)
        return index
    index["override_env"] = product.override_env
    atomic_write(stage / INDEX_NAME, json.dumps(index, indent=2, sort_keys=True) + "\n")
    atomic_write(stage / LOADER_NAME, loader_source())  # the loader's modules, as one file
    (stage / LOADER_NAME).chmod(0o755)
    (stage / INDEX_NAME).chmod(0o644)
    return index


def index_files(product: Product) -> tuple[str, ...]:
    """The stage paths write_index writes for this product (the tool's own files)."""
    if product.addon_of:
        return (f"{FRAGMENTS_DIR}/{product.name}.json",)
    return (INDEX_NAME, LOADER_NAME)


def apk_index(index: dict[str, Any]) -> dict[str, Any]:
    """The index as an APK carries it: `layout` "apk", without the desktop-only fields."""
    trimmed = {k: v for k, v in index.items() if k not in _DESKTOP_ONLY}
    trimmed["layout"] = APK_LAYOUT
    trimmed["runtimes"] = [
        {k: v for k, v in runtime.items() if k not in _DESKTOP_ONLY_RUNTIME}
        for runtime in index.get("runtimes", [])
    ]
    return trimmed
