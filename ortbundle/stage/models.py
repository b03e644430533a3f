"""Models as components: recipes (`kind = "model"`), gates read from the file, staging, models.json.

A model recipe names the model's canonical form (f32) and any derived forms (QDQ A8W8, …),
each with its source, its own SHA-256, the backends that load it and a gate. The gate is
checked against what the file says (IR version, opsets, inputs and outputs, metadata), never
the recipe's word: a model that fails it stops the build. Weights carry their own licence and
go through the licence audit like every other staged file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ortbundle._core.errors import BinaryError, ConfigError, IntegrityError
from ortbundle._core.fsio import atomic_write
from ortbundle.config.model_gates import ModelInfo
from ortbundle.config.model_recipes import ModelForm, ModelRecipe
from ortbundle.config.recipes import generic_purl
from ortbundle.fetch.archives import MemberReader
from ortbundle.stage.onnx_model import read_model
from ortbundle.stage.staging import TEXT_MODE, StagedFile

MODELS_SCHEMA = "ortbundle.models/1"
MODELS_INDEX = "models.json"
MODEL_MODE = 0o644


@dataclass(frozen=True)
class StagedForm:
    form: ModelForm
    file: StagedFile
    info: ModelInfo
    sidecars: tuple[StagedFile, ...]

    @property
    def identity(self) -> str:
        """A model's identity is its name, its numeric form (f32, a8w8, …) and its bytes: each
        form is a model of its own, with its own backends."""
        return f"{self.form.name}:sha256:{self.file.sha256[:16]}"


@dataclass(frozen=True)
class StagedModel:
    recipe: ModelRecipe
    directory: str  # "models/<name>"
    forms: tuple[StagedForm, ...]
    runtimes: tuple[str, ...] = ()  # the runtimes on this target: the backends models.json names

    @property
    def files(self) -> tuple[StagedFile, ...]:
        out = [f.file for f in self.forms] + [s for f in self.forms for s in f.sidecars]
        return tuple(sorted(out, key=lambda f: f.path))

    @property
    def purl(self) -> str:
        return self.recipe.purl or generic_purl(self.recipe.name, self.recipe.version)


def stage_model(
    recipe: ModelRecipe,
    archives: Mapping[str, MemberReader],
    stage_root: Path,
    *,
    runtimes: Iterable[str],
    target_runtimes: Iterable[str],
    target: str,
) -> StagedModel:
    """Extract every form (hash-checked twice: RECORD, then the recipe's pin) and gate it.

    `runtimes` are the product's (a backend must be one of them); `target_runtimes` those built
    for this target, the only backends its models.json names."""
    shipped = set(runtimes)
    directory = f"models/{recipe.name}"
    root = stage_root / directory
    root.mkdir(parents=True, exist_ok=True)
    staged: list[StagedForm] = []
    for form in recipe.forms:
        unknown = sorted(set(form.backends) - shipped)
        if unknown:
            raise ConfigError(
                f"form {form.name} names backends that are no runtime: {', '.join(unknown)}",
                component=recipe.name,
                target=target,
                file=str(recipe.path),
                fix="list only runtime recipes (recipes/<name>.toml) in backends",
            )
        dest = root / f"{form.name}.onnx"
        extracted = archives[form.source].extract(form.member, dest)
        if extracted.sha256 != form.sha256:
            dest.unlink()
            raise IntegrityError(
                f"form {form.name} ({form.member}) has sha256 {extracted.sha256}, "
                f"the recipe pins {form.sha256}",
                component=recipe.name,
                target=target,
                file=str(recipe.path),
                fix="the model changed upstream; check it, then re-pin its sha256",
            )
        info = _read_form(recipe, form, dest, target)
        form.gate.check(info, component=recipe.name, form=form.name, file=form.member)
        dest.chmod(MODEL_MODE)
        sidecars = []
        for member, name in form.sidecars:
            side = root / f"{form.name}.{name}"
            done = archives[form.source].extract(member, side)
            side.chmod(TEXT_MODE)
            sidecars.append(StagedFile(f"{directory}/{side.name}", done.size, done.sha256))
        staged.append(
            StagedForm(
                form,
                StagedFile(f"{directory}/{dest.name}", extracted.size, extracted.sha256),
                info,
                tuple(sidecars),
            )
        )
    here = tuple(r for r in target_runtimes if any(r in f.backends for f in recipe.forms))
    return StagedModel(recipe, directory, tuple(staged), here)


def _read_form(recipe: ModelRecipe, form: ModelForm, dest: Path, target: str) -> ModelInfo:
    """What the form's file says; one that is no ONNX model is named by the recipe, the form
    and where it came from, never by the scratch copy read (gone once the build stops)."""
    try:
        return read_model(dest)
    except BinaryError as error:
        source = recipe.sources[form.source]
        origin = f"{form.source}:{form.member}" if form.member else form.source
        raise BinaryError(
            f"form {form.name} ({origin}, from {source.archive_name}): {error.message}",
            component=recipe.name,
            target=target,
            file=str(recipe.path),
            fix=f"point the form at the .onnx model itself; {error.fix}"
            if error.fix
            else "point the form at the .onnx model itself",
        ) from None


def _spec(spec: Any) -> dict[str, Any]:
    return {
        "name": spec.name,
        "type": spec.onnx_type,
        "shape": None if spec.shape is None else list(spec.shape),
    }


def models_index(product: str, version: str, target: str, models: Iterable[StagedModel]) -> str:
    """models.json: which form each backend loads, with the identity the app records."""
    document = {
        "schema": MODELS_SCHEMA,
        "product": {"name": product, "version": version},
        "target": target,
        "models": [
            {
                "name": m.recipe.name,
                "label": m.recipe.label,
                "version": m.recipe.version,
                "license": m.recipe.expression,
                "canonical": m.recipe.canonical.name,
                "forms": [
                    {
                        "name": f.form.name,
                        "canonical": f.form.canonical,
                        "derived_from": f.form.derived_from,
                        "path": f.file.path,
                        "size": f.file.size,
                        "sha256": f.file.sha256,
                        "identity": f"{m.recipe.name}@{f.identity}",
                        "backends": [b for b in f.form.backends if b in m.runtimes],
                        "ir_version": f.info.ir_version,
                        "opsets": {o.domain or "ai.onnx": o.version for o in f.info.opsets},
                        "inputs": [_spec(i) for i in f.info.inputs],
                        "outputs": [_spec(o) for o in f.info.outputs],
                        "metadata": dict(f.info.metadata),
                        "sidecars": [s.path for s in f.sidecars],
                    }
                    for f in m.forms
                ],
                "backends": {
                    backend: next(f.form.name for f in m.forms if backend in f.form.backends)
                    for backend in sorted({b for f in m.forms for b in f.form.backends})
                    if backend in m.runtimes
                },
            }
            for m in models
        ],
    }
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def write_models_index(stage: Path, text: str) -> StagedFile:
    path = stage / MODELS_INDEX
    data = text.encode("utf-8")
    atomic_write(path, data, mode=TEXT_MODE)
    return StagedFile(MODELS_INDEX, len(data), hashlib.sha256(data).hexdigest())
