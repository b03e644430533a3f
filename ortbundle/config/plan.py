"""Planning a build, with nothing heavy imported: which product, recipes and targets, which key
signs it, and which epoch stamps it.

`invoke build` with nothing changed reads only this and `incremental.py`, so this module imports
no HTTP, archive, binary, SBOM or licence library.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ortbundle._core.errors import ConfigError, OrtbundleError
from ortbundle._core.fsio import refuse_links_out
from ortbundle._core.overrides import NO_OVERRIDES, Overrides, find_overrides, template_directories
from ortbundle.config.model_recipes import ModelRecipe, load_model_recipe
from ortbundle.config.products import Product, load_product
from ortbundle.config.project import DEFAULT_PRODUCT as DEFAULT_PRODUCT
from ortbundle.config.project import TOOL_LICENSE as TOOL_LICENSE
from ortbundle.config.project import BuildOptions as BuildOptions
from ortbundle.config.project import Project as Project
from ortbundle.config.project import signing_key_identity as signing_key_identity
from ortbundle.config.project import source_date_epoch as source_date_epoch
from ortbundle.config.recipes import Recipe, load_recipe
from ortbundle.config.schema.inputs_of_build import check_build_inputs
from ortbundle.config.sources import Source
from ortbundle.config.targets import get_target
from ortbundle.config.vocabulary import CHANNEL_TARGETS, PAIRED_KINDS

if TYPE_CHECKING:
    pass

POLICY_NAME = "policy.toml"  # under the project's licenses/


@dataclass(frozen=True)
class Plan:
    product: Product
    recipes: dict[str, Recipe]
    targets: tuple[str, ...]
    models: dict[str, ModelRecipe] = field(default_factory=dict)
    model_digests: dict[str, str] = field(default_factory=dict)  # known even when not parsed
    templates: Overrides = NO_OVERRIDES  # the project's replacements of built-in templates

    def model_sources(self, model: ModelRecipe) -> set[str]:
        ids = {f.source for f in model.forms}
        return ids | {t.source for t in model.texts if t.source}

    @property
    def all_recipes(self) -> dict[str, Recipe | ModelRecipe]:
        """Runtime and model recipes: what the manifest records and the build key covers."""
        return {**self.recipes, **self.models}

    def plugins_for(self, target: str) -> list[str]:
        """Components shipped beside a core on `target` (plugin EPs, custom-op libraries,
        libraries using a core): those paired with a runtime shipped there."""
        shipped = set(self.product.runtimes_for(target))
        return [p for p, pairs in self.product.paired.items() if shipped & set(pairs)]

    def sources_for(self, target: str) -> list[tuple[Recipe, set[str]]]:
        """Per runtime (then plugin EP) on `target`: the source ids it reads."""
        result = []
        for runtime in [*self.product.runtimes_for(target), *self.plugins_for(target)]:
            recipe = self.recipes[runtime]
            plan = recipe.for_target(target)
            ids = {take.source for take in plan.takes} | {p.source for p in plan.payloads}
            ids |= {t.source for rule in plan.licenses for t in rule.texts if t.source}
            result.append((recipe, ids))
        return result

    def all_sources(self) -> list[tuple[str, Source]]:
        wanted: list[tuple[str, Source]] = []
        for target in self.targets:
            for recipe, ids in self.sources_for(target):
                wanted.extend((recipe.name, recipe.sources[sid]) for sid in sorted(ids))
                wanted.extend(  # a built binary's source archives: fetched and checked too
                    (recipe.name, archive)
                    for sid in sorted(ids)
                    if (build := recipe.sources[sid].build) is not None
                    for archive in build.sources
                )
        for model in self.models.values():
            ids = self.model_sources(model)
            wanted.extend((model.name, model.sources[sid]) for sid in sorted(ids))
        return wanted


def load_plan(project: Project, options: BuildOptions, *, parse_models: bool = True) -> Plan:
    """The product, its recipes and targets. `parse_models=False` only hashes the model recipes
    (enough for the build key): a no-op build does not load the ONNX reader."""

    # every file of licenses/ is read (the build key hashes them all; a text may be shipped)
    refuse_links_out(project.licenses, project.root)
    check_build_inputs(project.root, options.product, project.licenses / POLICY_NAME)
    product = load_product(project.manifests / f"{options.product}.toml")
    for channel in options.channels:
        if channel not in product.channels:
            raise ConfigError(
                f"product {product.name} has no {channel} channel",
                file=str(product.path),
                fix=f"use one of: {', '.join(product.channels)}",
            )
    # `-t x -t x` asks for x once: staged twice, it would collide with itself in dist/
    asked_targets = tuple(dict.fromkeys(options.targets))
    asked_channels = tuple(dict.fromkeys(options.channels))
    if asked_channels:
        product = replace(product, channels=asked_channels)
    targets = asked_targets or tuple(
        t for t in product.targets if not options.channels or t in _channel_targets(product)
    )
    if options.channels:
        orphans = [t for t in targets if t not in _channel_targets(product)]
        if orphans:
            raise ConfigError(
                f"no selected channel packages {', '.join(orphans)}: its stage would be "
                "published without a licence audit",
                file=str(product.path),
                fix="drop --target, or add a channel that packages that target",
            )
    for target in targets:
        get_target(target)
        if target not in product.targets:
            raise OrtbundleError(
                f"product {product.name} does not ship target {target}",
                target=target,
                file=str(product.path),
                fix=f"use one of: {', '.join(product.targets)}",
            )
    names = [*product.runtimes, *product.paired]
    recipes = {name: load_recipe(project.recipes / f"{name}.toml") for name in names}
    for name in product.runtimes:
        if recipes[name].kind != "runtime":
            raise ConfigError(
                f"{name} is a {recipes[name].kind}, not a runtime",
                file=str(product.path),
                fix=f"list it under [{PAIRED_KINDS.get(recipes[name].kind, 'plugin')}.{name}] "
                "pairs_with = [<runtimes>], runtimes in runtimes = [...]",
            )
    for name, pairs in product.plugins.items():
        _check_plugin(recipes[name], [recipes[r] for r in pairs], product)
    for kind in ("custom-ops", "uses-core"):
        for name in product.pairing(kind):
            _check_paired_kind(recipes[name], kind)
    for name, pairs in product.paired.items():
        _check_core_versions(recipes[name], [recipes[r] for r in pairs], product)
    for target in targets:
        for runtime in product.runtimes_for(target):
            recipes[runtime].for_target(target)
    model_paths = {name: project.recipes / f"{name}.toml" for name in product.models}
    digests = {}
    for name, path in model_paths.items():
        try:
            digests[name] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            raise ConfigError(f"{path.name} does not exist", file=str(path)) from None
    models = {n: load_model_recipe(p) for n, p in model_paths.items()} if parse_models else {}
    check_models_serve(models.values(), product, targets)
    own = product.packaging.templates
    templates = find_overrides(
        project.root,
        template_directories(own),
        named_by=str(product.path) if own != project.templates.name else "",
    )
    return Plan(
        product=product,
        recipes=recipes,
        targets=tuple(targets),
        models=models,
        model_digests=digests,
        templates=templates,
    )


def with_models(project: Project, plan: Plan) -> Plan:
    """The plan with its model recipes parsed (a plan made with `parse_models=False`)."""
    if plan.models or not plan.model_digests:
        return plan
    parsed = {n: load_model_recipe(project.recipes / f"{n}.toml") for n in plan.model_digests}
    check_models_serve(parsed.values(), plan.product, plan.targets)
    return replace(plan, models=parsed)


def check_models_serve(
    models: Iterable[ModelRecipe], product: Product, targets: Iterable[str]
) -> None:
    """Every model ships on every target of the product, so some runtime of each target must
    load one of its forms: a models.json whose model names no backend (issue #43: macOS got
    `"backends": {}`) is a model no application can run there. Said before any download."""
    for model in models:
        named = {b for form in model.forms for b in form.backends}
        for target in targets:
            here = product.runtimes_for(target)
            if here and not named & set(here):
                raise ConfigError(
                    f"model {model.name} cannot be served on {target}: no form names a runtime "
                    f"of that target ({', '.join(here)}); its forms name "
                    f"{', '.join(sorted(named)) or 'no backend'}",
                    component=model.name,
                    target=target,
                    file=str(model.path),
                    fix=f"add {' or '.join(here)} to the backends of a form that runtime loads "
                    f"in {model.path.name}, or leave {model.name} out of the product's models",
                )


def _check_plugin(plugin: Recipe, cores: list[Recipe], product: Product) -> None:
    """A plugin EP registers only with a core at least as new as the one it was built for."""
    from packaging.version import InvalidVersion, Version

    if plugin.kind != "plugin-ep" or plugin.min_core is None:
        raise ConfigError(
            f"{plugin.name} is not a plugin-ep recipe",
            file=str(plugin.path),
            fix='give it kind = "plugin-ep", ep_name and min_core',
        )
    for core in cores:
        try:
            too_old = Version(core.version) < Version(plugin.min_core)
        except InvalidVersion:
            raise ConfigError(
                f"cannot compare {core.name} {core.version} with {plugin.name}'s minimum core "
                f"{plugin.min_core}",
                file=str(plugin.path),
                fix="write versions as PEP 440 versions (1.24.4)",
            ) from None
        if too_old:
            raise ConfigError(
                f"plugin EP {plugin.name} needs ONNX Runtime {plugin.min_core} or newer; "
                f"runtime {core.name} is {core.version}",
                component=plugin.name,
                file=str(product.path),
                fix=f"pair {plugin.name} with a newer runtime, or pin an older plugin",
            )


def _check_core_versions(component: Recipe, cores: list[Recipe], product: Product) -> None:
    """A component states the core versions it fits (its wheel's Requires-Dist): a paired
    runtime outside them is refused, naming both."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    if component.core_versions is None:
        return
    fits = SpecifierSet(component.core_versions)
    for core in cores:
        try:
            fitting = fits.contains(Version(core.version), prereleases=True)
        except InvalidVersion:
            fitting = False
        if not fitting:
            raise ConfigError(
                f"{component.name} {component.version} fits ONNX Runtime "
                f"{component.core_versions}; runtime {core.name} is {core.version}",
                component=component.name,
                file=str(product.path),
                fix=f"pair {component.name} with a runtime whose version is "
                f"{component.core_versions} (pin one: invoke pin -c {core.name} --version "
                f"VERSION), or pin a release of {component.name} made for {core.version}",
            )


def _check_paired_kind(recipe: Recipe, kind: str) -> None:
    """A component listed under [custom_ops] or [uses_core] is a recipe of that kind."""
    if recipe.kind != kind:
        raise ConfigError(
            f"{recipe.name} is listed under [{PAIRED_KINDS[kind]}.{recipe.name}] but its recipe "
            f"says kind = {recipe.kind!r}",
            file=str(recipe.path),
            fix=f'give it kind = "{kind}" in [component], or list it where a {recipe.kind} goes',
        )


def _channel_targets(product: Product) -> set[str]:
    return {t for c in product.channels for t in CHANNEL_TARGETS[c] if t in product.targets}


def policy_digest(project: Project) -> str:
    path = project.licenses / POLICY_NAME
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "none"
