"""Component recipes (`recipes/<component>.toml`): sources, roots, drops, payloads, renames and
licence rules per target. Sources, products and model recipes have their own modules; their
names are re-exported here for the callers that read all of them.

Parsing validates everything a later step relies on, so a mistake in a recipe is reported once,
up front, with the file it is in — not as a KeyError in the middle of a build.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ortbundle._core.errors import ConfigError
from ortbundle.config.externals import read_externals
from ortbundle.config.products import (
    signoff_date,
    signoff_sha256,
)
from ortbundle.config.sources import (
    Source,
    read_sources,
)
from ortbundle.config.targets import ExternalSpec
from ortbundle.config.tomlreader import TableReader, load_toml
from ortbundle.config.vocabulary import (
    GUESSABLE,
    KIND_DIRECTORIES,
    NAME_WORD,
    PAIRED_KINDS,
    PATH_WORD,
    PAYLOAD_PLACES,
    PURL,
    RECIPE_KINDS,
)


@dataclass(frozen=True)
class Take:
    """Which members of one source may be staged as libraries."""

    source: str
    libraries: tuple[str, ...]  # globs over member paths


@dataclass(frozen=True)
class Payload:
    """Files shipped verbatim beside a runtime, outside the library closure: Hexagon DSP
    `Skel` libraries (loaded by the DSP, not the host linker), data files a plugin reads."""

    source: str
    files: tuple[str, ...]  # globs over member paths
    machines: tuple[str, ...]  # each file must be an ELF/PE of one of these; empty: any file
    place: str  # "beside" the libraries, or under "assets/" of the runtime directory
    reason: str


@dataclass(frozen=True)
class Rename:
    """Ship a kept library under another name; its ELF SONAME (and its users' DT_NEEDED) follow."""

    old: str
    new: str


@dataclass(frozen=True)
class Drop:
    names: tuple[str, ...]  # globs over library file names
    reason: str


@dataclass(frozen=True)
class LicenseText:
    """A licence text: an archive member of a source, or a file under the repo's licenses/."""

    source: str | None
    member: str | None
    file: str | None

    def describe(self) -> str:
        return f"{self.source}:{self.member}" if self.source else f"licenses/{self.file}"


@dataclass(frozen=True)
class Confirmation:
    """A person's sign-off that a rule's claim holds for these files although their own evidence
    says otherwise (a copyright holder its texts do not name, "All rights reserved" under a
    permissive claim): the sign-off a waiver has, bound to the bytes compared."""

    reviewer: str
    reason: str  # what they compared, and why the claim holds
    sha256: tuple[str, ...] = ()  # of each file whose evidence they compared
    reviewed: date | None = None
    expires: date | None = None


@dataclass(frozen=True)
class LicenseRule:
    """Which staged files belong to which licensed component."""

    component: str
    version: str
    expression: str
    files: tuple[str, ...]  # globs over staged file names
    texts: tuple[LicenseText, ...]
    purl: str | None = None  # package URL for the SBOM; derived when absent
    # What the audit compares the files' evidence with, and what it knows of the claim: left
    # out of the repr a pruned runtime's memo key is made of, so checking a rule or signing it
    # off never prunes again.
    licensor: tuple[str, ...] = field(default=(), repr=False)  # holders besides its texts'
    guessed: tuple[str, ...] = field(default=(), repr=False)  # keys the scaffold guessed
    confirmed: Confirmation | None = field(default=None, repr=False)


@dataclass(frozen=True)
class TargetRecipe:
    target: str
    entry: str  # glob naming the entry library among the staged files
    takes: tuple[Take, ...]
    roots: tuple[str, ...]  # globs over library file names
    drops: tuple[Drop, ...]
    licenses: tuple[LicenseRule, ...]
    payloads: tuple[Payload, ...] = ()
    renames: tuple[Rename, ...] = ()
    # libraries its kept files open by name (dlopen, LoadLibrary), and names they mention but
    # need not: applied after the memoised stage, so kept out of the repr its key is made of
    loads: tuple[str, ...] = field(default=(), repr=False)
    ignore_loads: tuple[IgnoreRule, ...] = field(default=(), repr=False)
    # libraries they open by name and work without (DXCore's adapter list): declared like
    # `loads`, optional, and no floor for the oldest system
    optional_loads: tuple[OptionalLoads, ...] = field(default=(), repr=False)
    # [targets.<t>] providers: this target's own list where the targets' cores differ (empty:
    # [component] providers); judged and indexed after the memoised stage, so not in the key
    providers: tuple[str, ...] = field(default=(), repr=False)

    def shipped_name(self, name: str) -> str:
        """The name a kept library is staged under, after the recipe's renames."""
        return next((r.new for r in self.renames if r.old == name), name)


@dataclass(frozen=True)
class AccelDevice:
    """[component] device: an NPU behind /dev/accel of `driver`, on the boards `compatible`
    names (any; empty: any board)."""

    driver: str
    compatible: tuple[str, ...] = ()
    kind: str = "accel"

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "driver": self.driver, "compatible": list(self.compatible)}

    def requirement(self) -> str:
        """The system requirement it states, as every output words it."""
        return f"Linux with the {self.driver} accel driver, /dev/accel/accel*"


@dataclass(frozen=True)
class SessionOptions:
    """[component.session_options]: what the EP's sessions need, for the application."""

    graph_optimization_level: str | None = None
    config: tuple[tuple[str, str], ...] = ()

    def as_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        if self.graph_optimization_level is not None:
            found["graph_optimization_level"] = self.graph_optimization_level
        if self.config:
            found["config"] = dict(self.config)
        return found


@dataclass(frozen=True)
class Recipe:
    name: str
    kind: str
    version: str
    description: str
    label: str  # how a person names it: "OpenVINO", "WebGPU"
    providers: tuple[str, ...]
    gpu_vendors: tuple[str, ...]
    sources: dict[str, Source]
    targets: dict[str, TargetRecipe]
    path: Path
    digest: str  # SHA-256 of the recipe file: part of every cache key built from it
    ep_name: str | None = None  # plugin-ep: the factory's EP name (OrtEpDevice.ep_name)
    min_core: str | None = None  # plugin-ep: the oldest ONNX Runtime core it registers with
    # a component paired with a core: the core versions it fits, as its wheel's Requires-Dist
    # on onnxruntime says (a PEP 440 specifier, ">=1.29,<1.31"); None: not stated
    core_versions: str | None = None
    soc_families: tuple[str, ...] = ()  # the SoC vendors it needs ("qualcomm"); empty: any
    externals: tuple[ExternalSpec, ...] = ()  # [[externals]]: what the component itself needs
    device: AccelDevice | None = None  # plugin-ep: the NPU it drives
    session_options: SessionOptions = SessionOptions()  # plugin-ep: what its sessions need

    @property
    def directory(self) -> str:
        """Where it is staged: a runtime under runtimes/, a plugin EP under plugins/, a
        custom-op library under custom_ops/, a library using a core under libraries/."""
        return f"{KIND_DIRECTORIES[self.kind]}/{self.name}"

    def providers_for(self, target: str) -> tuple[str, ...]:
        """The providers on `target`: its [targets.<t>] providers, else [component]'s."""
        section = self.targets.get(target)
        return section.providers if section is not None and section.providers else self.providers

    def providers_table(self, target: str) -> str:
        """The table whose `providers` key gives `target`'s list, as a message names it."""
        section = self.targets.get(target)
        return f"[targets.{target}]" if section is not None and section.providers else "[component]"

    def for_target(self, target: str) -> TargetRecipe:
        if target not in self.targets:
            raise ConfigError(
                f"recipe {self.name} has no section for this target",
                component=self.name,
                target=target,
                file=str(self.path),
                fix=f"add [targets.{target}] to the recipe or drop the target from the product",
            )
        return self.targets[target]


def read_texts(reader: TableReader, sources: dict[str, Source]) -> tuple[LicenseText, ...]:
    """`texts = [{ source, member } | { file }]`: where a component's licence texts come from."""
    texts = []
    for text in reader.subs("texts"):
        source, member, file = (
            text.opt_text("source"),
            text.opt_text("member"),
            text.opt_text("file"),
        )
        if (source is None) != (member is None) or (source is None) == (file is None):
            raise text.fail("a text is either {source, member} or {file}")
        if source is not None and source not in sources:
            raise text.fail(f"unknown source {source!r}")
        if file is not None and (
            Path(file).is_absolute() or ".." in Path(file).parts or file.startswith(".")
        ):
            raise text.fail(f"file {file!r} must be a path inside licenses/")
        texts.append(LicenseText(source=source, member=member, file=file))
    return tuple(texts)


def _license_rule(reader: TableReader, sources: dict[str, Source]) -> LicenseRule:
    component = reader.text("component")
    if not PATH_WORD.match(component):
        raise reader.fail(f"component {component!r} becomes licenses/<component>/: one plain name")
    guessed = reader.text_list("guessed", required=False)
    unknown = sorted(set(guessed) - set(GUESSABLE))
    if unknown:
        raise reader.fail(f"guessed names {', '.join(unknown)}: one of {', '.join(GUESSABLE)}")
    return LicenseRule(
        component=component,
        version=reader.text("version"),
        expression=reader.text("expression"),
        files=reader.text_list("files"),
        texts=read_texts(reader, sources),
        purl=read_purl(reader),
        licensor=reader.text_list("licensor", required=False),
        guessed=guessed,
        confirmed=_confirmation(reader.sub("confirmed")) if "confirmed" in reader.table else None,
    )


def _confirmation(reader: TableReader) -> Confirmation:
    return Confirmation(
        reviewer=reader.text("reviewer"),
        reason=reader.text("reason"),
        sha256=signoff_sha256(reader),
        reviewed=signoff_date(reader, "reviewed"),
        expires=signoff_date(reader, "expires"),
    )


def generic_purl(name: str, version: str) -> str:
    """The package URL of a component no registry names (pkg:generic, version percent-encoded)."""
    return f"pkg:generic/{name}@{quote(version, safe='')}"


def read_purl(reader: TableReader) -> str | None:
    purl = reader.opt_text("purl")
    if purl is not None and not PURL.match(purl):
        raise reader.fail(f"purl {purl!r} is not a package URL (pkg:type/name@version)")
    return purl


def _target_recipe(reader: TableReader, target: str, sources: dict[str, Source]) -> TargetRecipe:
    reader.target(target, "a recipe's [targets.<name>]")  # names this recipe file
    takes = []
    for take in reader.subs("take"):
        source = take.text("source")
        if source not in sources:
            raise take.fail(f"unknown source {source!r}")
        takes.append(Take(source=source, libraries=take.text_list("libraries")))
    if not takes:
        raise reader.fail("needs at least one [[...take]] naming a source")
    drops = tuple(
        Drop(names=d.text_list("names"), reason=d.text("reason")) for d in reader.subs("drop")
    )
    payloads = []
    for payload in reader.subs("payload"):
        source = payload.text("source")
        if source not in sources:
            raise payload.fail(f"unknown source {source!r}")
        place = payload.text("place", "beside")
        if place not in PAYLOAD_PLACES:
            raise payload.fail(f"place {place!r} must be one of {', '.join(PAYLOAD_PLACES)}")
        payloads.append(
            Payload(
                source=source,
                files=payload.text_list("files"),
                machines=payload.text_list("machines", required=False),
                place=place,
                reason=payload.text("reason"),
            )
        )
    renames = []
    for rename in reader.subs("rename"):
        old, new = rename.text("from"), rename.text("to")
        for value in (old, new):
            if "/" in value or not PATH_WORD.match(value):
                raise rename.fail(f"{value!r} must be one plain file name")
        renames.append(Rename(old=old, new=new))
    if len({r.old for r in renames}) != len(renames) or len({r.new for r in renames}) != len(
        renames
    ):
        raise reader.fail("each library is renamed at most once, each new name used once")
    loads = reader.text_list("loads", required=False)
    for name in loads:
        if not PATH_WORD.match(name):
            raise reader.fail(f"loads: {name!r} must be one library file name, as it is opened")
    ignore_loads = tuple(
        IgnoreRule(names=r.text_list("names"), reason=r.text("reason"))
        for r in reader.subs("ignore_loads")
    )
    optional_loads = tuple(
        OptionalLoads(names=r.text_list("names"), reason=r.text("reason"))
        for r in reader.subs("optional_loads")
    )
    for name in (n for rule in optional_loads for n in rule.names):
        if not PATH_WORD.match(name):
            raise reader.fail(
                f"optional_loads: {name!r} must be one library file name, as it is opened"
            )
        if name in loads:
            raise reader.fail(f"{name!r} is in both loads and optional_loads: keep one")
    return TargetRecipe(
        target=target,
        entry=reader.text("entry"),
        takes=tuple(takes),
        roots=reader.text_list("roots"),
        drops=drops,
        licenses=tuple(_license_rule(r, sources) for r in reader.subs("licenses")),
        payloads=tuple(payloads),
        renames=tuple(renames),
        loads=loads,
        ignore_loads=ignore_loads,
        optional_loads=optional_loads,
        providers=reader.text_list("providers", required=False),
    )


def load_recipe(path: Path) -> Recipe:
    data, digest = load_toml(path, "recipe")
    top = TableReader(path, "", data)
    component = top.sub("component")
    name = component.text("name")
    if not NAME_WORD.match(name):
        raise component.fail(f"name {name!r} must be lower-case letters, digits, . _ -")
    if name != path.stem:
        raise component.fail(f"name {name!r} must match the file name {path.stem!r}")
    kind = component.text("kind")
    if kind not in RECIPE_KINDS:
        raise component.fail(f"kind {kind!r} is not supported ({', '.join(RECIPE_KINDS)}; model)")
    ep_name = component.text("ep_name") if kind == "plugin-ep" else None
    min_core = component.text("min_core") if kind == "plugin-ep" else None
    core_versions = component.opt_text("core_versions") if kind in PAIRED_KINDS else None
    if core_versions is not None:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            SpecifierSet(core_versions)
        except InvalidSpecifier:
            raise component.fail(
                f"core_versions {core_versions!r} is not a version specifier (>=1.29,<1.31)"
            ) from None
    sources = read_sources(top)
    targets_table = top.sub("targets")
    targets = {
        t: _target_recipe(targets_table.sub(t), t, sources) for t in sorted(targets_table.table)
    }
    return Recipe(
        name=name,
        kind=kind,
        version=component.text("version"),
        description=component.text("description"),
        label=component.text("label", name),
        providers=component.text_list("providers", required=kind in ("runtime", "plugin-ep")),
        gpu_vendors=component.text_list("gpu_vendors", required=False),
        sources=sources,
        targets=targets,
        path=path,
        digest=digest,
        ep_name=ep_name,
        min_core=min_core,
        core_versions=core_versions,
        soc_families=component.text_list("soc_families", required=False),
        externals=read_externals(top),
        device=_device(component.sub("device")) if "device" in component.table else None,
        session_options=_session_options(component.sub("session_options"))
        if "session_options" in component.table
        else SessionOptions(),
    )


def _device(reader: TableReader) -> AccelDevice:
    return AccelDevice(
        driver=reader.text("driver"),
        compatible=reader.text_list("compatible", required=False),
        kind=reader.text("kind"),
    )


def _session_options(reader: TableReader) -> SessionOptions:
    config = reader.table.get("config", {})
    return SessionOptions(
        graph_optimization_level=reader.opt_text("graph_optimization_level"),
        config=tuple(sorted((str(k), str(v)) for k, v in config.items())),
    )


@dataclass(frozen=True)
class OptionalLoads:
    """`[[targets.<t>.optional_loads]]`: libraries a kept file opens by name and goes on without
    (the reason says what it does then): declared, optional, and no floor for the oldest
    system."""

    names: tuple[str, ...]  # library file names, as they are opened
    reason: str


@dataclass(frozen=True)
class IgnoreRule:
    """`[[targets.<t>.ignore_loads]]`: names a kept file mentions but the runtime does not need."""

    names: tuple[str, ...]  # globs over library names
    reason: str
