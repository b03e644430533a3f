"""What a component shipped beside a core (a plugin EP, a custom-op library, a library using
a core) may carry (policy, not staging)."""

from __future__ import annotations

from ortbundle._core.errors import ConfigError
from ortbundle.config.recipes import Recipe
from ortbundle.stage.binaries.info import core_names, role
from ortbundle.stage.staging import StagedRuntime

_WHAT = {"plugin-ep": "plugin EP", "custom-ops": "custom-op library", "uses-core": "library"}
_USES = {"plugin-ep": "registers with", "custom-ops": "is registered with"}


def refuse_bundled_core(recipe: Recipe, staged: StagedRuntime, target: str) -> None:
    """A plugin EP package that carries its own ONNX Runtime core is refused: two cores in one
    process is exactly what the loader prevents: only one runtime may be loaded per process, and
    one whose static constructors ran is never unloaded. A core is known by its name or by
    what it exports (OrtGetApiBase), so a renamed one is found too."""
    cores = [k.name for k in staged.closure.kept if core_names([k.name]) or role(k.info) == "core"]
    if cores:
        raise ConfigError(
            f"{_WHAT.get(recipe.kind, recipe.kind)} {recipe.name} carries an ONNX Runtime core: "
            f"{', '.join(cores)}",
            component=recipe.name,
            target=target,
            file=str(recipe.path),
            fix=f"drop the core in [targets.{target}] roots (it {_USES.get(recipe.kind, 'uses')} "
            "the product's runtime), or ship the package as a runtime",
        )
