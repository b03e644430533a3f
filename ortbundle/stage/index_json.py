"""runtimes.json: the contract between a package and any loader (the Python one here, the app's).

Written into every target stage with the loader module beside it. Versioned by `schema`; the
JSON Schema lives in ortbundle/data/runtimes.schema.json. An add-on product (`addon_of`) writes
no loader and no runtimes.json but a fragment, runtimes.d/<product>.json, that the main
package's loader reads beside its own index.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from ortbundle._core.fsio import atomic_write
from ortbundle.config.recipes import Product, Recipe
from ortbundle.config.targets import get_target
from ortbundle.stage.staging import StagedRuntime
from ortbundle.stage.system import check_runtime, runtime_system

INDEX_NAME = "runtimes.json"
LOADER_NAME = "runtime_loader.py"
# The loader's own names (loader.SCHEMA, loader.FRAGMENTS), repeated so that writing the index
# does not import the 1,000-line loader on every build; a test holds them equal.
SCHEMA = "ortbundle.runtimes/2"
FRAGMENTS_DIR = "runtimes.d"  # add-ons' index fragments, read by the loader
# What `requires` leaves out: what every machine of the platform has, which the loader finds
# anyway and whose version the index's `system` already checks. On Linux that is the C library
# and the C++ runtime of the base system (glibc's libraries, libstdc++, libgcc_s; not libgomp or
# zlib, which a minimal system may lack); on Windows and Android the operating system's own
# libraries (kernel32, API sets, bionic), which are not even files a search would find. Listed:
# everything else — the VC++ redistributable, drivers (optional ones marked so), vendor toolkits.
_BASE_GROUPS = {"linux": "glibc", "windows": "windows", "android": "bionic"}
_BASE_LINUX = frozenset({"libstdc++.so.6", "libgcc_s.so.1"})


def _base_system(os: str, group: str, name: str) -> bool:
    return group == _BASE_GROUPS.get(os) or (os == "linux" and name in _BASE_LINUX)


GENERIC_GPU_PROVIDERS = frozenset({"WebGpuExecutionProvider", "DmlExecutionProvider"})
# The copy an APK carries (assets/ortbundle/<abi>/runtimes.json) says so, and leaves out what
# only a desktop loader reads: the override variable (Android's is a system property) and each
# runtime's directory (an APK's libraries are its lib/<abi>/, its payload under the index).
APK_LAYOUT = "apk"
_DESKTOP_ONLY = ("override_env",)
_DESKTOP_ONLY_RUNTIME = ("directory",)


def plugin_entry(recipe: Recipe, staged: StagedRuntime) -> dict[str, Any]:
    """What a loader needs to register a plugin EP with the core it chose."""
    return {
        "registration_name": recipe.name,
        "ep_name": recipe.ep_name,
        "library": f"{staged.directory}/{staged.closure.entry}",
        "min_core": recipe.min_core,
        "version": recipe.version,
        "providers": list(recipe.providers),
        "soc_families": list(recipe.soc_families),
    }


def requires_entries(
    target: str, staged: StagedRuntime, plugins: Sequence[StagedRuntime] = ()
) -> list[dict[str, Any]]:
    """The system libraries a runtime (and the plugin EPs paired with it) needs by name.

    A plugin EP is an optional accelerator: what only it needs is listed as optional, so its
    absence is reported and never costs the core runtime. Kinds `system`/`toolchain` of the base
    system are left out (see _base_system)."""
    system = get_target(target).os
    found: dict[str, dict[str, Any]] = {}
    for owner, optional_owner in [(staged, False), *((p, True) for p in plugins)]:
        for ext in owner.closure.externals:
            if ext.kind in ("system", "toolchain") and _base_system(system, ext.group, ext.name):
                continue
            optional = ext.optional or optional_owner
            if ext.name in found and (optional or not found[ext.name]["optional"]):
                continue  # a required entry beats an optional one of the same name
            found[ext.name] = {
                "name": ext.name,
                "group": ext.group,
                "optional": optional,
                "install": ext.install,
            }
    return [found[name] for name in sorted(found, key=str.lower)]


def runtime_entry(
    recipe: Recipe,
    staged: StagedRuntime,
    plugins: list[dict[str, Any]] | None = None,
    requires: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    prefix = staged.directory + "/"
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
        "providers": list(recipe.providers),
        "fits": {
            "gpu_vendors": list(recipe.gpu_vendors),
            # a core fits any GPU when it, or a plugin EP paired with it, drives one
            "any_gpu": bool(
                GENERIC_GPU_PROVIDERS
                & {*recipe.providers, *(p for e in plugins or [] for p in e["providers"])}
            ),
            "soc_families": list(recipe.soc_families),
        },
        "plugin_eps": plugins or [],
        "files": files,
        # the oldest system it runs on: a loader skips it on an older one
        "system": runtime_system(staged).as_json(),
        # the libraries the user's system must provide: a loader skips it when one is absent
        "requires": requires or [],
    }


def write_index(
    stage: Path,
    product: Product,
    target: str,
    runtimes: list[tuple[Recipe, StagedRuntime]],
    plugins: Sequence[tuple[Recipe, StagedRuntime, tuple[str, ...]]] = (),
) -> dict[str, Any]:
    """Write runtimes.json and the loader into a (scratch) target stage — or, for an add-on
    product, the fragment runtimes.d/<product>.json (index_files says which).

    Every runtime and plugin EP is first held against the product's `[system]`: one needing a
    newer system than the product supports stops the build here (on_newer = "error")."""
    for recipe, staged in [*runtimes, *((r, s) for r, s, _ in plugins)]:
        check_runtime(
            product.system, staged, component=recipe.name, target=target, file=str(recipe.path)
        )
    index: dict[str, Any] = {
        "schema": SCHEMA,
        "product": {"name": product.name, "version": product.version},
        "target": target,
        "runtimes": [
            runtime_entry(
                recipe,
                staged,
                [plugin_entry(p, s) for p, s, pairs in plugins if recipe.name in pairs],
                requires_entries(
                    target, staged, [s for _, s, pairs in plugins if recipe.name in pairs]
                ),
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
    loader = resources.files("ortbundle").joinpath("payload/loader.py")
    with resources.as_file(loader) as source:
        shutil.copyfile(source, stage / LOADER_NAME)
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
