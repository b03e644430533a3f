"""Model recipes (`kind = "model"`): each form of an ONNX model, pinned and gated."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ortbundle.config.model_gates import ModelGate, gate_from_table
from ortbundle.config.recipes import LicenseText, read_purl, read_texts
from ortbundle.config.sources import Source, read_sources
from ortbundle.config.tomlreader import TableReader, load_toml
from ortbundle.config.vocabulary import MODEL_KIND, NAME_WORD, PATH_WORD, SHA256_HEX

# --- model recipes ------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelForm:
    name: str  # "f32", "a8w8", …
    canonical: bool
    derived_from: str | None
    source: str  # source id
    member: str  # archive member of that source; "" when the source is the model file itself
    sha256: str  # of the model file itself
    backends: tuple[str, ...]  # runtimes that load this form
    gate: ModelGate
    sidecars: tuple[tuple[str, str], ...]  # (member, staged file name)


@dataclass(frozen=True)
class ModelRecipe:
    name: str
    version: str
    label: str
    description: str
    sources: dict[str, Source]
    forms: tuple[ModelForm, ...]
    expression: str  # the weights' licence
    texts: tuple[LicenseText, ...]
    purl: str | None
    path: Path
    digest: str

    @property
    def canonical(self) -> ModelForm:
        return next(f for f in self.forms if f.canonical)


def load_model_recipe(path: Path) -> ModelRecipe:
    data, digest = load_toml(path, "recipe")
    top = TableReader(path, "", data)
    component = top.sub("component")
    name = component.text("name")
    if not NAME_WORD.match(name) or name != path.stem:
        raise component.fail(f"name {name!r} must be lower-case and match the file name")
    if component.text("kind") != MODEL_KIND:
        raise component.fail("kind must be 'model' for a model recipe")
    sources = read_sources(top)
    forms: list[ModelForm] = []
    for form in top.subs("forms"):
        source = form.text("source")
        if source not in sources:
            raise form.fail(f"unknown source {source!r}")
        sha256 = form.text("sha256").lower()
        if not SHA256_HEX.match(sha256):
            raise form.fail("'sha256' must be 64 hex digits (of the model file itself)")
        gate_table = form.table.get("gate", {})
        sidecars = []
        for sidecar in form.subs("sidecars"):
            member = sidecar.text("member")
            side_name = sidecar.text("name", member.rsplit("/", 1)[-1])
            if not PATH_WORD.match(side_name):
                raise sidecar.fail(f"name {side_name!r} must be one plain file name")
            sidecars.append((member, side_name))
        if not PATH_WORD.match(form.text("name")):
            raise form.fail("a form's name becomes a file name: letters, digits, . _ + -")
        forms.append(
            ModelForm(
                name=form.text("name"),
                canonical=bool(form.table.get("canonical", False)),
                derived_from=form.opt_text("derived_from"),
                source=source,
                member=form.table.get("member", "") and form.text("member"),
                sha256=sha256,
                backends=form.text_list("backends"),
                gate=gate_from_table(gate_table, where=f"{path} ({form.where}.gate)"),
                sidecars=tuple(sidecars),
            )
        )
    _check_forms(top, forms)
    license_table = top.sub("license")
    return ModelRecipe(
        name=name,
        version=component.text("version"),
        label=component.text("label", name),
        description=component.text("description"),
        sources=sources,
        forms=tuple(forms),
        expression=license_table.text("expression"),
        texts=read_texts(license_table, sources),
        purl=read_purl(license_table),
        path=path,
        digest=digest,
    )


def _check_forms(top: TableReader, forms: list[ModelForm]) -> None:
    names = [f.name for f in forms]
    if not forms:
        raise top.fail("a model recipe needs at least one [[forms]]")
    if len(set(names)) != len(names):
        raise top.fail("form names must be unique")
    canonical = [f for f in forms if f.canonical]
    if len(canonical) != 1:
        raise top.fail("exactly one form must be canonical = true (the f32 ONNX)")
    for form in forms:
        if form.canonical and form.derived_from:
            raise top.fail(f"the canonical form {form.name} cannot be derived from another")
        if not form.canonical and form.derived_from not in names:
            raise top.fail(f"form {form.name}: derived_from must name another form")
