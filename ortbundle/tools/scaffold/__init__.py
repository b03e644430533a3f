"""`invoke new-recipe`: a first recipe (and, asked, a product) for someone packaging their own
application, from a PyPI project, a Maven AAR or an npm package.

resolve.py pins every target's file through the fetch layer and downloads it into the cache;
propose.py reads each archive (libraries, their needs, roots, drops, licence texts); render.py
writes the TOML. Before anything is written, the proposal is checked the way a build checks it:
the recipe is parsed by the recipe reader and each target pruned by the build's closure.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from ortbundle._core.errors import ClosureError, ConfigError, OrtbundleError
from ortbundle._core.fsio import atomic_write
from ortbundle._core.progress import Reporter
from ortbundle.config.plan import Project
from ortbundle.config.recipes import Recipe, load_recipe
from ortbundle.config.retry import RetryPolicy
from ortbundle.config.targets import all_targets, get_target
from ortbundle.config.vocabulary import NAME_WORD, PAIRED_KINDS
from ortbundle.fetch.archives import ZipArchive
from ortbundle.fetch.cache import Cache, default_cache_dir
from ortbundle.stage.closure import prune
from ortbundle.stage.versions import read_file_facts
from ortbundle.tools.pin import PinOptions
from ortbundle.tools.pin.lookups import Lookups
from ortbundle.tools.scaffold.licences import licence_component, notice_members, propose_rules
from ortbundle.tools.scaffold.propose import (
    Proposal,
    materializer,
    propose,
    read_text,
    version_glob,
)
from ortbundle.tools.scaffold.render import (
    PAIRED_VERB,
    add_to_product,
    product_text,
    recipe_text,
)
from ortbundle.tools.scaffold.resolve import Asking, Resolved, Wanted, resolve
from ortbundle.tools.scaffold.resolve import parse_coordinates as parse_coordinates

# the recipe is written, but a library nothing provides is the user's choice: the closure's code
EXIT_NEEDS_CHOICE = ClosureError.exit_code


@dataclass(frozen=True)
class ScaffoldOptions:
    coordinates: str
    version: str | None = None
    name: str | None = None  # the recipe's name; default: from the coordinates
    product: str | None = None  # also write manifests/<product>.toml
    targets: tuple[str, ...] = ()  # empty: every target the release publishes
    force: bool = False
    index_url: str | None = None
    cache_dir: Path | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    jobs: int = 0
    environ: Mapping[str, str] | None = None  # Maven and npm settings; None: os.environ


@dataclass(frozen=True)
class ScaffoldResult:
    recipe: Path
    product: Path | None
    resolved: Resolved
    proposals: tuple[Proposal, ...]
    kept: dict[str, tuple[str, ...]]  # target → staged files the closure keeps
    choices: tuple[str, ...]  # what only the user can decide; empty: the recipe builds
    notes: tuple[str, ...]

    def lines(self) -> list[str]:
        r = self.resolved
        out = [f"{r.wanted.describe()}: release {r.version}"]
        for pinned in r.pinned:
            s = pinned.source
            out.append(
                f"  source {s.id}: {s.filename} (sha256 {s.sha256[:16]}…, {s.size or 0:,} B) "
                f"→ {', '.join(pinned.targets)}"
            )
        for p in self.proposals:
            out.append(f"  {p.target}: entry {p.entry}; roots {', '.join(p.roots)}")
            for lib in p.libraries:
                needs = p.needs.get(lib.staged)
                state = (
                    f"drop ({p.dropped[lib.staged]})"
                    if lib.staged in p.dropped
                    else f"keep, needs {', '.join(needs)}"
                    if needs
                    else "keep"
                )
                out.append(f"    {lib.staged}: {state}")
            if p.externals:
                groups = sorted({g for _, g in p.externals})
                out.append(f"    system: {', '.join(groups)}")
            out += [
                f"    licence {r.component} {r.version}: {r.expression} ({r.why}) for "
                f"{', '.join(r.files)}; {len(r.texts)} text(s); guessed: {', '.join(r.guessed)}"
                for r in p.rules
            ]
        out += [f"  note: {n}" for n in self.notes]
        out.append(f"wrote {self.recipe}" + (f" and {self.product}" if self.product else ""))
        if self.choices:
            out += [f"YOUR CHOICE: {c}" for c in self.choices]
        else:
            built = self.product.stem if self.product else "<your product>"
            out.append(f"the closure of every target resolves: next, `invoke build -p {built}`")
        return out


def default_name(wanted: Wanted) -> str:
    """A recipe name from the coordinates: the project, the artifact, the bare npm package."""
    base = wanted.name.rsplit(":", 1)[-1].rsplit("/", 1)[-1].lower()
    return re.sub(r"[^a-z0-9._-]+", "-", base).strip("-._") or "runtime"


def new_recipe(project: Project, options: ScaffoldOptions, reporter: Reporter) -> ScaffoldResult:
    """Resolve, download, read, check, and write; nothing is written on an error."""
    wanted = parse_coordinates(options.coordinates, options.version)
    name = options.name or default_name(wanted)
    if not NAME_WORD.match(name):
        raise ConfigError(
            f"recipe name {name!r} must be lower-case letters, digits, . _ -",
            fix="pass --name with such a name",
        )
    for target in options.targets:
        get_target(target)
    desktop = [t for t in options.targets if get_target(t).abi is None]
    if wanted.kind != "pypi" and desktop:
        raise ConfigError(
            f"{wanted.describe()} is an Android archive: an AAR serves Android targets only, "
            f"not {', '.join(desktop)}",
            fix="leave out --target, or name Android targets "
            f"({', '.join(t for t, v in all_targets().items() if v.abi)})",
        )
    recipe_path = project.recipes / f"{name}.toml"
    product_path = project.manifests / f"{options.product}.toml" if options.product else None
    if options.product is not None and not NAME_WORD.match(options.product):
        raise ConfigError(
            f"product name {options.product!r} must be lower-case letters, digits, . _ -",
            fix="pass --product with such a name",
        )
    # an existing product is added to (below); only an existing recipe needs --force
    if recipe_path.exists() and not options.force:
        raise ConfigError(
            f"{recipe_path.relative_to(project.root)} exists; the scaffold does not overwrite it",
            file=str(recipe_path),
            fix="pass --force to replace it, or --name to write another",
        )
    pin_options = PinOptions(
        index_url=options.index_url, retry=options.retry, environ=options.environ
    )
    cache = Cache(options.cache_dir or default_cache_dir())
    ask = Lookups(pin_options, project.root)
    try:
        via = Asking(ask, cache, reporter, name, options.jobs or os.cpu_count() or 1)
        resolved = resolve(wanted, options.targets, via)
    finally:
        ask.close()
    scratch = Path(tempfile.mkdtemp(prefix="ortbundle-scaffold-"))
    try:
        return _read_check_write(
            project, options, name, resolved, recipe_path, product_path, scratch
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _read_check_write(
    project: Project,
    options: ScaffoldOptions,
    name: str,
    resolved: Resolved,
    recipe_path: Path,
    product_path: Path | None,
    scratch: Path,
) -> ScaffoldResult:
    proposals: list[Proposal] = []
    notes: list[str] = []
    for pinned in resolved.pinned:
        label = pinned.source.archive_name
        with ZipArchive(pinned.archive, label=label, component=name) as archive:
            for target in pinned.targets:
                where = scratch / target
                where.mkdir()
                proposal, more = propose(
                    all_targets()[target], pinned.source.id, archive, where, component=name
                )
                notes += more
                if proposal is None:
                    notes.append(f"{target}: {label} holds no library for it; left out")
                else:
                    proposals.append(_with_rules(proposal, resolved, archive, where))
    served = {p.target for p in proposals}
    notes += [
        f"{t}: {resolved.wanted.name} {resolved.version} publishes nothing for it"
        for t in options.targets
        if t not in served
    ]
    if not proposals:
        raise ConfigError(
            f"{resolved.wanted.describe()} {resolved.version}: no archive holds a native library "
            "of any target",
            component=name,
            fix="pick the coordinates of a native build (platform wheels, an AAR with jni/)",
        )
    command = f"invoke new-recipe {options.coordinates}"
    text = recipe_text(name, command, _only_used(resolved, proposals), proposals)
    recipe = _check_draft(text, scratch, recipe_path)
    choices: list[str] = []
    kept: dict[str, tuple[str, ...]] = {}
    for p in proposals:
        if p.unresolved:
            listing = "; ".join(f"{who} needs {what}" for who, what in p.unresolved)
            choices.append(
                f"{p.target}: {listing}. Declare an [[externals]] group for it (the commented "
                f"block at the end of {recipe_path.name}), drop what needs it, or add its archive"
            )
            continue
        try:
            closure = prune(
                component=name,
                target=all_targets()[p.target],
                recipe=recipe.for_target(p.target),
                candidates=list(p.candidates),
                materialize=materializer(p),
            )
        except OrtbundleError as exc:
            choices.append(f"{p.target}: the proposal does not prune: {exc}")
            continue
        kept[p.target] = tuple(k.name for k in closure.kept)
    choices += _kind_choices(proposals)
    notes += [
        f"{p.target}: {', '.join(r.files)} say they are another's: proposed as {r.expression} "
        f"({r.component}), for a person to read their terms"
        for p in proposals
        for r in p.rules
        if r.expression != p.licence.expression
    ]
    if any(p.licence.expression.endswith("-unknown") for p in proposals):
        choices.append(
            f"the licence: {resolved.wanted.name} declares none; set `expression` to the SPDX "
            "id of its terms (the audit reviews an unknown one)"
        )
    kind = proposals[0].kind
    paired = kind in PAIRED_KINDS
    targets = [t for t in all_targets() if any(p.target == t for p in proposals)]
    pairs: tuple[str, ...] = ()
    if product_path is not None and paired:
        pairs = _cores_for(project, recipe, name, proposals[0].core_requirement)
        if not pairs:
            choices.append(
                f"the pairing: {product_path.name} needs a runtime for {name} to "
                f"{PAIRED_VERB[kind]} ({_wanted_core(recipe, proposals[0].core_requirement)}, on "
                f"{', '.join(targets)}); scaffold one (invoke new-recipe -s "
                "pypi:onnxruntime==VERSION) and list it in runtimes and "
                f"[{PAIRED_KINDS[kind]}.{name}] pairs_with"
            )
    recipe_path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(recipe_path, text)
    if product_path is not None:
        product_path.parent.mkdir(parents=True, exist_ok=True)
        if product_path.exists() and not options.force:
            text, added = add_to_product(
                product_path.read_text("utf-8"), name, targets, kind=kind, pairs=pairs
            )
            notes.append(
                f"added to {product_path.relative_to(project.root)}: "
                + ("; ".join(added) if added else f"nothing, it already lists {name}")
            )
        else:
            text = product_text(product_path.stem, name, targets, kind=kind, pairs=pairs)
        atomic_write(product_path, text)
    return ScaffoldResult(
        recipe_path, product_path, resolved, tuple(proposals), kept, tuple(choices), tuple(notes)
    )


def _kind_choices(proposals: Sequence[Proposal]) -> list[str]:
    """What the exports left open: targets that disagree, no EP name."""
    out = []
    kinds = sorted({p.kind for p in proposals})
    if len(kinds) > 1:
        out.append(
            f"the kind: the targets' entries disagree ({', '.join(kinds)}); a recipe is one or "
            "the other: scaffold each with --target"
        )
    if proposals[0].kind == "plugin-ep" and not any(p.ep_name for p in proposals):
        out.append(
            "the EP name: the plugin library names no execution provider; set ep_name to the "
            "name its factory registers"
        )
    return out


def _check_draft(text: str, scratch: Path, recipe_path: Path) -> Recipe:
    """The draft read by the reader a build uses, from a scratch copy named as the user's file
    (recipes/<name>.toml), so a refusal names the recipe the user will edit, never the copy."""
    draft = scratch / "recipes" / recipe_path.name
    draft.parent.mkdir()
    draft.write_text(text, "utf-8")
    try:
        recipe = load_recipe(draft)
    except OrtbundleError as exc:
        exc.message = exc.message.replace(str(draft), str(recipe_path))
        exc.file = str(recipe_path) if exc.file else None
        exc.args = (exc.message,)
        raise
    return replace(recipe, path=recipe_path)


def _wanted_core(component: Recipe, requirement: str) -> str:
    if requirement:
        return f"ONNX Runtime {requirement}"
    if component.min_core:
        return f"ONNX Runtime {component.min_core} or newer"
    return "an ONNX Runtime core"


def _cores_for(project: Project, component: Recipe, name: str, requirement: str) -> tuple[str, ...]:
    """The project's runtime recipes a component shipped beside a core fits: on a target it
    ships on, of a version its wheel's requirement on onnxruntime admits (a plugin EP's: at
    least its minimum core). Runtimes on its targets that all miss it are exit 8, naming both."""
    wanted = SpecifierSet(requirement)
    if component.min_core:
        wanted &= SpecifierSet(f">={component.min_core}")
    found, missed = [], []
    for path in sorted(project.recipes.glob("*.toml")):
        if path.stem == name:
            continue
        try:
            other = load_recipe(path)
            version = Version(other.version)
        except (OrtbundleError, InvalidVersion):
            continue  # a model, or a recipe the build would refuse anyway
        if other.kind != "runtime" or not set(other.targets) & set(component.targets):
            continue
        if wanted.contains(version, prereleases=True):
            found.append(other.name)
        else:
            missed.append(f"{other.name} {other.version}")
    if not found and missed:
        raise ClosureError(
            f"{name} requires {_wanted_core(component, requirement)}; the project's cores are "
            f"{', '.join(missed)}, and none fits",
            component=name,
            file=str(component.path),
            fix=f"pin a core in that range (invoke new-recipe -s pypi:onnxruntime==VERSION with "
            f"VERSION {wanted}) and pair {name} with it, or pin a release of {name} that "
            "fits the cores you have",
        )
    return tuple(found)


def _with_rules(
    proposal: Proposal, resolved: Resolved, archive: ZipArchive, scratch: Path
) -> Proposal:
    """The proposal with its licence rules, split by what each kept library says of itself."""
    kept = [lib for lib in proposal.libraries if lib.staged not in proposal.dropped]
    # the entry library anchors the archive's own group; a proposal whose entry is a glob no
    # kept name gives has none, and each group then stands on its evidence alone
    entry = next((lib for lib in kept if version_glob(lib.staged) == proposal.entry), None)
    rules = propose_rules(
        licence_component(resolved.wanted.name),
        resolved.version,
        resolved.wanted.name,
        proposal.licence,
        kept,
        entry,
        lambda lib: read_file_facts(lib.path, lib.staged).evidence,
        lambda member: read_text(archive, member, scratch),
        notice_members(list(archive.members)),
    )
    return replace(proposal, rules=rules)


def _only_used(resolved: Resolved, proposals: Sequence[Proposal]) -> Resolved:
    """The sources a proposal reads (a wheel with no library for its target is left out)."""
    used = {p.source for p in proposals}
    return Resolved(
        resolved.wanted,
        resolved.version,
        tuple(p for p in resolved.pinned if p.source.id in used),
        resolved.notes,
    )
