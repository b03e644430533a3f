"""The recipe (and the minimal product manifest) as TOML, written with tomlkit: every guess has
a comment saying what it was guessed from, and every open choice a commented block to fill in."""

from __future__ import annotations

import re
from collections.abc import Sequence

import tomlkit
from tomlkit.items import AoT, Array, Comment, InlineTable, Table, Trivia

from ortbundle.config.schema.jsonschema import directive
from ortbundle.config.sources import MavenCoordinates, NpmCoordinates, PypiCoordinates, Source
from ortbundle.config.vocabulary import PAIRED_KINDS
from ortbundle.tools.scaffold.propose import Proposal, ProposedRule, gpu_vendors
from ortbundle.tools.scaffold.resolve import Resolved


def _array(values: Sequence[str], *, multiline: bool = False) -> Array:
    out = tomlkit.array()
    out.extend(values)
    return out.multiline(multiline and len(values) > 2)


def _inline(**values: str) -> InlineTable:
    table = tomlkit.inline_table()
    table.update(values)
    return table


def _origin(source: Source) -> tuple[str, InlineTable]:
    origin = source.origin
    if isinstance(origin, PypiCoordinates):
        return "pypi", _inline(
            project=origin.project, version=origin.version, filename=origin.filename
        )
    if isinstance(origin, MavenCoordinates):
        return "maven", _inline(
            group=origin.group,
            artifact=origin.artifact,
            version=origin.version,
            packaging=origin.packaging,
        )
    assert isinstance(origin, NpmCoordinates)
    return "npm", _inline(package=origin.package, version=origin.version)


def _sources(resolved: Resolved) -> Table:
    sources = tomlkit.table(is_super_table=True)
    for pinned in resolved.pinned:
        s = pinned.source
        table = tomlkit.table()
        kind, coords = _origin(s)
        table.add(kind, coords)
        table.add("sha256", s.sha256)
        if s.size is not None:
            table.add("size", s.size)
        if s.nested:
            nested = tomlkit.array()
            nested.extend(_inline(member=n.member, sha256=n.sha256) for n in s.nested)
            table.add("nested", nested)
        if pinned.note:
            table.comment(pinned.note)
        sources.add(s.id, table)
    return sources


def _target(p: Proposal, providers: tuple[str, ...]) -> Table:
    """One target's table; `providers`: the component's list, which this target's own
    replaces where its core offers another (Microsoft's macOS core: CoreML, then the CPU)."""
    t = tomlkit.table()
    t.add("entry", p.entry)
    t["entry"].comment(p.entry_why)
    if p.kind == "runtime" and p.providers and p.providers != providers:
        t.add("providers", _array(p.providers))
        t["providers"].comment(f"this target's core: {p.providers_why}")
    t.add("roots", _array(p.roots, multiline=True))
    t["roots"].comment("guessed: the libraries nothing else in the archive needs")
    takes = AoT([])
    take = tomlkit.table()
    take.add("source", p.source)
    take.add("libraries", _array(p.takes))
    takes.append(take)
    t.add("take", takes)
    if p.drops:
        drops = AoT([])
        for d in p.drops:
            rule = tomlkit.table()
            rule.add("names", _array(d.names))
            rule.add("reason", d.reason)
            drops.append(rule)
        t.add("drop", drops)
    rules = AoT([])
    for proposed in p.rules:
        rules.append(_rule(proposed, p.source))
    t.add("licenses", rules)
    return t


def _rule(proposed: ProposedRule, source: str) -> Table:
    """One [[licenses]] rule: its guesses listed as data (`guessed`), each with the comment
    that says what it was guessed from."""
    rule = tomlkit.table()
    component = proposed.component
    rule.add("component", component)
    rule.add("version", proposed.version)
    rule.add("expression", proposed.expression)
    rule["expression"].comment(proposed.why)
    rule.add("files", _array(proposed.files))
    rule["files"].comment(proposed.files_why)
    texts = tomlkit.array()
    texts.extend(_inline(source=source, member=m) for m in proposed.texts)
    rule.add("texts", texts.multiline(bool(proposed.texts)))
    if not proposed.texts:
        rule["texts"].comment(
            f"none in the archive: put the terms under licenses/{component}/ and name them "
            f'with {{ file = "{component}/LICENSE" }}'
        )
    if proposed.left_out:
        rule["texts"].comment(
            f"left out (a text of that file name is taken): {', '.join(proposed.left_out)}"
        )
    rule.add("guessed", _array(proposed.guessed))
    rule["guessed"].comment(
        "the scaffold's guesses: a build warns about each, a release refuses any; check each "
        "against the files and the archive, then remove it"
    )
    return rule


def external_block(p: Proposal) -> str:
    """A commented [[externals]] group (a system requirement, as a recipe or product declares
    one) for what nothing provides: the user's choice of group, kind and whether the runtime
    works without it."""
    names = sorted({needed for _, needed in p.unresolved})
    who = sorted({lib for lib, _ in p.unresolved})
    lines = [
        f"YOUR CHOICE ({p.target}): {', '.join(who)} need(s) {', '.join(names)}, which neither",
        "the archive nor the target's system libraries provide. Either drop what needs it",
        "([[targets.<t>.drop]]), add the archive that has it as a source, or declare it as",
        "a system requirement of this component and uncomment:",
        "",
        "[[externals]]",
        'group = "FILL-IN"            # e.g. "cudnn"',
        'kind = "toolkit"             # system | toolchain | redist | driver | toolkit',
        f"targets = {tomlkit.dumps({'t': [p.target]}).split('=', 1)[1].strip()}",
        f"names = {tomlkit.dumps({'n': names}).split('=', 1)[1].strip()}",
        "optional = false             # true: the runtime still works without it",
        'install = "FILL-IN"          # one sentence: what the user installs',
    ]
    return "\n".join(f"# {line}".rstrip() for line in lines)


def _schema_line(kind: str) -> Comment:
    """The first line: taplo's `#:schema` directive, so an editor checks the file as it is
    edited (a plain tomlkit comment would put a space after the #)."""
    return Comment(Trivia(comment=directive(kind)))


def recipe_text(
    name: str,
    command: str,
    resolved: Resolved,
    proposals: Sequence[Proposal],
) -> str:
    doc = tomlkit.document()
    doc.add(_schema_line("recipe"))
    project = resolved.wanted.name
    doc.add(tomlkit.comment(f"Scaffolded by `{command}`: release {resolved.version}."))
    doc.add(tomlkit.comment("Comments marked 'guessed' are the scaffold's reading of the archive,"))
    doc.add(tomlkit.comment("and each licence rule lists its guesses in `guessed`: check each"))
    doc.add(
        tomlkit.comment("against the files (a build shows their evidence in audit.json), remove")
    )
    doc.add(tomlkit.comment("it, then `invoke build -p <product>` (README: Packaging your own"))
    doc.add(tomlkit.comment("application). A release refuses a rule that still lists a guess."))
    for note in resolved.notes:
        doc.add(tomlkit.comment(note))
    doc.add(tomlkit.nl())
    providers = tuple(dict.fromkeys(ep for p in proposals for ep in p.providers))
    first = proposals[0]
    component = tomlkit.table()
    component.add("name", name)
    component.add("kind", first.kind)
    component["kind"].comment(f"read from the exports: {first.entry_why}")
    component.add("label", project)
    component.add("version", resolved.version)
    component.add("description", f"{project} {resolved.version}")
    if first.kind in ("runtime", "plugin-ep"):  # the others add operators or use a core's
        component.add("providers", _array(providers))
        component["providers"].comment(first.providers_why)
        component.add("gpu_vendors", _array(gpu_vendors(providers)))
    if first.kind == "plugin-ep":
        ep_name = next((p for p in proposals if p.ep_name), first)
        component.add("ep_name", ep_name.ep_name or "FILL-IN")
        component["ep_name"].comment(
            ep_name.ep_name_why or "YOUR CHOICE: the name the plugin's factory registers"
        )
        component.add("min_core", first.min_core)
        component["min_core"].comment(first.min_core_why)
    if first.kind in PAIRED_KINDS and first.core_requirement:
        component.add("core_versions", first.core_requirement)
        component["core_versions"].comment("its wheel's Requires-Dist on onnxruntime")
    doc.add("component", component)
    doc.add(tomlkit.nl())
    doc.add("sources", _sources(resolved))
    targets = tomlkit.table(is_super_table=True)
    for p in sorted(proposals, key=lambda p: p.target):
        targets.add(p.target, _target(p, providers))
    doc.add("targets", targets)
    text = tomlkit.dumps(doc)
    blocks = [external_block(p) for p in proposals if p.unresolved]
    if blocks:
        text += "\n" + "\n\n".join(blocks) + "\n"
    return _printable(text)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _printable(text: str) -> str:
    """The recipe with no control character: tomlkit escapes them in strings but writes a
    comment as given, and a comment quoting a binary's bytes must not make the file invalid
    TOML."""
    return _CONTROL.sub(" ", text)


_WHAT = {
    "plugin-ep": "plugin EP",
    "custom-ops": "custom-operator library",
    "uses-core": "library",
}

# how each component shipped beside a core relates to it, in the pairing's words
PAIRED_VERB = {"plugin-ep": "register with", "custom-ops": "be registered with", "uses-core": "use"}


def product_text(
    product: str,
    recipe: str,
    targets: Sequence[str],
    *,
    kind: str = "runtime",
    pairs: Sequence[str] = (),
) -> str:
    """A product shipping the runtime `recipe`; for a component shipped beside a core (a plugin
    EP, a custom-operator library, a library that uses a core), the runtimes `pairs` (the
    project's cores it fits) and the component paired with them under its kind's table."""
    table_key = PAIRED_KINDS.get(kind)
    paired = table_key is not None
    doc = tomlkit.document()
    doc.add(_schema_line("product"))
    doc.add(tomlkit.comment(f"A minimal product around recipes/{recipe}.toml, scaffolded by"))
    doc.add(tomlkit.comment("`invoke new-recipe --product`: set the version, description and url."))
    table = tomlkit.table()
    table.add("name", product)
    table.add("version", "0.1.0")
    what = f"the {recipe} {_WHAT.get(kind, 'runtime')}"
    table.add("description", f"{product}: {what}")
    table.add("url", "https://example.invalid/")
    table.add("targets", _array(list(targets)))
    table.add("runtimes", _array(list(pairs) if paired else [recipe]))
    if paired:
        table["runtimes"].comment(
            f"the project's runtimes it can {PAIRED_VERB[kind]}"
            if pairs
            else f"YOUR CHOICE: a {_WHAT[kind]} needs a runtime (an ONNX Runtime core) to "
            f"{PAIRED_VERB[kind]}"
        )
    doc.add("product", table)
    if table_key is not None:
        pairing = tomlkit.table()
        pairing.add("pairs_with", _array(list(pairs)))
        section = tomlkit.table(is_super_table=True)
        section.add(recipe, pairing)
        doc.add(table_key, section)
    return tomlkit.dumps(doc)


def add_to_product(
    text: str,
    recipe: str,
    targets: Sequence[str],
    *,
    kind: str = "runtime",
    pairs: Sequence[str] = (),
) -> tuple[str, tuple[str, ...]]:
    """An existing product manifest with the runtime `recipe` (or the component `recipe` shipped
    beside a core, paired with `pairs` under its kind's table) added, every other line kept as
    the user wrote it; with what was added."""
    table_key = PAIRED_KINDS.get(kind)
    paired = table_key is not None
    doc = tomlkit.parse(text)
    table = doc["product"]
    added: list[str] = []
    listed = table.setdefault("targets", _array([]))
    new_targets = [t for t in targets if t not in listed]
    listed.extend(new_targets)
    if new_targets:
        added.append(f"targets += {', '.join(new_targets)}")
    runtimes = table.setdefault("runtimes", _array([]))
    wanted = list(pairs) if paired else [recipe]
    new_runtimes = [r for r in wanted if r not in runtimes]
    runtimes.extend(new_runtimes)
    if new_runtimes:
        added.append(f"runtimes += {', '.join(new_runtimes)}")
    if table_key is not None:
        section = doc.setdefault(table_key, tomlkit.table(is_super_table=True))
        if recipe not in section:
            pairing = tomlkit.table()
            pairing.add("pairs_with", _array(list(pairs)))
            section.add(recipe, pairing)
            added.append(f"[{table_key}.{recipe}] pairs_with = {list(pairs)}")
    return tomlkit.dumps(doc), tuple(added)
