"""Plugin execution providers: what a plugin EP package may carry (policy, not staging)."""

from __future__ import annotations

import fnmatch

from ortbundle._core.errors import ConfigError
from ortbundle.config.recipes import Recipe
from ortbundle.stage.binaries.info import role
from ortbundle.stage.staging import StagedRuntime

_CORE_NAMES = ("libonnxruntime.so*", "libonnxruntime.*.dylib", "onnxruntime.dll")


def refuse_bundled_core(recipe: Recipe, staged: StagedRuntime, target: str) -> None:
    """A plugin EP package that carries its own ONNX Runtime core is refused: two cores in one
    process is exactly what the loader prevents: only one runtime may be loaded per process, and
    one whose static constructors ran is never unloaded. A core is known by its name or by
    what it exports (OrtGetApiBase), so a renamed one is found too."""
    cores = [
        k.name
        for k in staged.closure.kept
        if any(fnmatch.fnmatchcase(k.name.lower(), g) for g in _CORE_NAMES)
        or role(k.info) == "core"
    ]
    if cores:
        raise ConfigError(
            f"plugin EP {recipe.name} carries an ONNX Runtime core: {', '.join(cores)}",
            component=recipe.name,
            target=target,
            file=str(recipe.path),
            fix="drop the core in the recipe (a plugin registers with the product's runtime), "
            "or ship the package as a runtime",
        )
