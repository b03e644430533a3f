"""This repository's products with every pinned upstream artifact replaced by one built by code.

`synthesize(root, cache)` copies recipes/, manifests/ and licenses/ into `root` and, for every
source a recipe pins, writes a small archive of the same kind (a wheel, an AAR, an npm tarball
with the AAR nested inside) holding the members the recipes name: one ELF or PE library of the
target's machine per entry and root glob (under a take's directory, never a dropped name),
every Skel or catalog a payload names, every licence text member, every model form (built to
pass its gate). Each library needs the target's C library and one library of every external
group the product and its recipes declare for the target, so the requirements a build resolves
are the product's own. The archives go straight into the download cache and the copied
recipes are re-pinned to them: an `--offline` build of any product then runs the whole
pipeline on this machine, with no network and no upstream bytes.
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import re
import shutil
import tarfile
import tomllib
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ortbundle.config.model_gates import IOGate, ModelGate
from ortbundle.config.model_recipes import load_model_recipe
from ortbundle.config.products import load_product
from ortbundle.config.recipes import Recipe, TargetRecipe, load_recipe
from ortbundle.config.sources import PypiCoordinates, Source
from ortbundle.config.targets import Target, get_target
from ortbundle.fetch.cache import Cache
from tests.helpers import onnx_models as onnx
from tests.helpers.elf import make_elf
from tests.helpers.macho import Dylib, slice_bytes
from tests.helpers.pe import make_pe
from tests.helpers.project import CORE_EXPORTS, PLUGIN_EXPORTS
from tests.helpers.wheels import make_wheel

REPO = Path(__file__).resolve().parents[2]
# what every library of an OS needs (Linux: the C library and libstdc++; Windows: the system and the
# Visual C++ runtime, which the installer must look for)
_BASE = {
    "linux": ("libc.so.6", "libstdc++.so.6"),
    "windows": ("KERNEL32.dll", "MSVCP140.dll"),
    "android": ("libc.so",),
    "macos": ("/usr/lib/libSystem.B.dylib", "/usr/lib/libc++.1.dylib"),
}
_GLOB = re.compile(r"[*?\[]")


@dataclass
class _Archive:
    """What one pinned source must hold, by member path (the innermost archive for a nested
    source), filled by every recipe that reads it."""

    source: Source
    members: dict[str, bytes] = field(default_factory=dict)


def synthesize(root: Path, cache_dir: Path) -> None:
    """Copy the project's inputs into `root`, build every pinned archive into `cache_dir`."""
    for name in ("recipes", "manifests", "licenses"):
        shutil.copytree(REPO / name, root / name)
    archives: dict[str, _Archive] = {}
    needs = _declared_needs(root)
    pins: dict[str, str] = {}  # original SHA-256 -> the synthetic one
    for path in sorted((root / "recipes").glob("*.toml")):
        kind = tomllib.loads(path.read_text("utf-8"))["component"]["kind"]
        if kind == "model":
            pins.update(_model_members(path, archives))
        else:
            _library_members(load_recipe(path), archives, needs)
    cache = Cache(cache_dir)
    for archive in archives.values():
        pins.update(_store(archive, cache, root / "scratch"))
    for path in sorted((root / "recipes").glob("*.toml")):
        text = path.read_text("utf-8")
        for old, new in pins.items():
            text = text.replace(old, new)
        path.write_text(re.sub(r"(?m)^size = [0-9]+\n", "", text), "utf-8")


# --- what each library needs of the system: the product's and recipes' own groups ----------


def _declared_needs(root: Path) -> dict[tuple[str, str], tuple[str, ...]]:
    """(recipe, target) -> one library name of every external group a product shipping the
    recipe, or the recipe itself, declares for the target."""
    found: dict[tuple[str, str], set[str]] = {}
    recipes = {p.stem: load_recipe(p) for p in _runtime_recipes(root)}
    for manifest in sorted((root / "manifests").glob("*.toml")):
        product = load_product(manifest)
        names = [*product.runtimes, *product.plugins]
        for name in names:
            recipe = recipes[name]
            for target in recipe.targets:
                for spec in (*product.externals, *recipe.externals):
                    one = _one_name(spec.group.names, get_target(target))
                    if spec.applies_to(target) and one is not None:
                        found.setdefault((name, target), set()).add(one)
    return {key: tuple(sorted(names)) for key, names in found.items()}


def _runtime_recipes(root: Path) -> Iterator[Path]:
    for path in sorted((root / "recipes").glob("*.toml")):
        if tomllib.loads(path.read_text("utf-8"))["component"]["kind"] != "model":
            yield path


def _one_name(globs: Iterable[str], target: Target) -> str | None:
    """A library name of the group for the target's format (a group may list Linux and
    Windows names alike): a literal one if it has one."""
    own = [g for g in globs if g.lower().endswith(".dll") == (target.format == "pe")]
    if target.format == "macho":  # install names: the system's paths, or a bundled dylib
        own = [g for g in globs if g.startswith("/") or g.endswith(".dylib")]
    literal = [g for g in own if not _GLOB.search(g)]
    return literal[0] if literal else (_instance(own[0]) if own else None)


# --- runtimes and plugin EPs -----------------------------------------------------------------


def _library_members(
    recipe: Recipe, archives: dict[str, _Archive], needs: dict[tuple[str, str], tuple[str, ...]]
) -> None:
    for target_name, section in recipe.targets.items():
        target = get_target(target_name)
        extra = needs.get((recipe.name, target_name), ())
        linked = _linked(section, target)
        for index, (member, source_id, name) in enumerate(_libraries(recipe, section, target)):
            needed = (*_BASE[target.os], *extra, *(linked if index == 0 else ()))
            # the entry is what its kind says it is, and carries the names the recipe states
            facts = _entry_facts(recipe) if index == 0 else ((), ())
            _archive(archives, recipe.sources[source_id]).members[member] = _library(
                target, name, needed, *facts
            )
        # the build refuses a take glob that takes nothing and warns of a drop that drops
        # nothing: each gets a member of its own, which nothing needs
        for member, source_id, name in _unmatched(recipe, section, target, archives):
            _archive(archives, recipe.sources[source_id]).members[member] = _library(
                target, name, _BASE[target.os]
            )
        for payload in section.payloads:
            for files in payload.files:
                member = _instance(files)
                data = (
                    make_elf(machine=payload.machines[0], payload=member.encode())
                    if payload.machines
                    else b"synthetic " + member.encode()
                )
                _archive(archives, recipe.sources[payload.source]).members[member] = data
        for source_id in {t.source for t in section.takes}:
            build = recipe.sources[source_id].build
            for archive in build.sources if build is not None else ():
                # a from-source binary's source archives: each stands for itself
                _archive(archives, archive).members[f"{archive.id}/README"] = (
                    f"Synthetic source of {archive.id}\n".encode()
                )
        for rule in section.licenses:
            for text in rule.texts:
                if text.source and text.member:
                    _archive(archives, recipe.sources[text.source]).members[text.member] = (
                        f"Synthetic licence text of {rule.component}\n"
                        f"Copyright (c) {rule.component} authors\n"
                    ).encode()


def _unmatched(
    recipe: Recipe, section: TargetRecipe, target: Target, archives: dict[str, _Archive]
) -> list[tuple[str, str, str]]:
    """(member, source id, file name) for each take glob no member matches yet, and for each
    drop glob no taken member matches: a name that glob (and its take's) matches."""
    added: list[tuple[str, str, str]] = []

    def members(source_id: str) -> list[str]:
        have = list(_archive(archives, recipe.sources[source_id]).members)
        return have + [m for m, s, _ in added if s == source_id]

    for take in section.takes:
        for library in take.libraries:
            if not any(fnmatch.fnmatchcase(m, library) for m in members(take.source)):
                directory, _, pattern = library.rpartition("/")
                name = _instance(pattern)
                added.append((f"{directory}/{name}" if directory else name, take.source, name))
    for drop in section.drops:
        for glob in drop.names:
            taken = [
                m.rpartition("/")[2]
                for take in section.takes
                for m in members(take.source)
                if any(fnmatch.fnmatchcase(m, lib) for lib in take.libraries)
            ]
            if any(_match(target, n, glob) for n in taken):
                continue
            for take in section.takes:
                for library in take.libraries:
                    directory, _, pattern = library.rpartition("/")
                    for fill in ("", "x", ".so", ".dll", ".pyd", ".so.1"):
                        name = glob.replace("*", fill).replace("?", "1")
                        if _match(target, name, pattern) and _match(target, name, glob):
                            added.append(
                                (f"{directory}/{name}" if directory else name, take.source, name)
                            )
                            break
                    else:
                        continue
                    break
                else:
                    continue
                break
    return added


def _linked(section: TargetRecipe, target: Target) -> tuple[str, ...]:
    """Libraries a licence rule names by file that no root is: the entry links them (the MLX
    plugin's libmlx.dylib and libmlxc.dylib), so the closure keeps what the rule covers."""
    if target.format != "macho":
        return ()
    payloads = {PurePosixPath(f).name for p in section.payloads for f in p.files}
    rooted = (section.entry, *section.roots)
    return tuple(
        name
        for rule in section.licenses
        for name in rule.files
        if name.endswith(".dylib")
        and not _GLOB.search(name)
        and name not in payloads
        and not any(_match(target, name, glob) for glob in rooted)
    )


def _libraries(recipe: Recipe, section: TargetRecipe, target: Target) -> list[tuple[str, str, str]]:
    """(member, source id, file name) of one library per entry and root glob that no library
    already matches (and each library the entry links, `_linked`): the glob instantiated so a
    take takes it and no drop drops it."""
    chosen: list[tuple[str, str, str]] = []
    for glob in (
        section.entry,
        *section.roots,
        *(r.old for r in section.renames),
        *_linked(section, target),
    ):
        if any(_match(target, name, glob) for _, _, name in chosen):
            continue
        chosen.append(_place(recipe, section, target, glob))
    return chosen


def _place(
    recipe: Recipe, section: TargetRecipe, target: Target, glob: str
) -> tuple[str, str, str]:
    dropped = [n for drop in section.drops for n in drop.names]
    for fill in ("", "1", ".1", "x"):
        name = glob.replace("*", fill).replace("?", "1")
        if any(_match(target, name, d) for d in dropped):
            continue
        for take in section.takes:
            for library in take.libraries:
                directory, _, pattern = library.rpartition("/")
                if _match(target, name, pattern):
                    return f"{directory}/{name}" if directory else name, take.source, name
    raise AssertionError(f"{recipe.name} {target.name}: no take takes a name for {glob!r}")


def _match(target: Target, name: str, glob: str) -> bool:
    return fnmatch.fnmatchcase(target.key(name), target.key(glob))


def _entry_facts(recipe: Recipe) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(exports, read-only strings) of a recipe's entry: a core exports OrtGetApiBase and names
    its providers, a plugin EP exports its factory functions and names its EP."""
    if recipe.kind == "plugin-ep":
        return PLUGIN_EXPORTS, (recipe.ep_name,) if recipe.ep_name else ()
    return CORE_EXPORTS, recipe.providers


def _library(
    target: Target,
    name: str,
    needed: tuple[str, ...],
    exports: tuple[str, ...] = (),
    rodata: tuple[str, ...] = (),
) -> bytes:
    """A library of the target's machine, its bytes its own (byte-identical ones are aliases)."""
    if target.format == "macho":
        return slice_bytes(
            Dylib(
                install_id=f"@rpath/{name}",
                needed=needed,
                rpaths=("@loader_path",),
                exports=exports,
                strings=rodata,
                extra=name.encode(),
            )
        )
    if target.format == "pe":
        return make_pe(
            machine=target.machine,
            imports=needed,
            payload=name.encode(),
            exports=exports,
            rodata=rodata,
        )
    return make_elf(
        machine=target.machine,
        soname=name,
        needed=needed,
        align=max(target.page_align, 0x1000),
        payload=name.encode(),
        exports=exports,
        rodata=rodata,
    )


def _instance(glob: str) -> str:
    return glob.replace("*", "").replace("?", "1")


# --- models ----------------------------------------------------------------------------------


def _model_members(path: Path, archives: dict[str, _Archive]) -> dict[str, str]:
    """Each form built to pass its gate, in its source; the forms' new pins."""
    recipe = load_model_recipe(path)
    pins = {}
    for form in recipe.forms:
        data = _model(form.gate)
        pins[form.sha256] = hashlib.sha256(data).hexdigest()
        member = form.member or recipe.sources[form.source].filename
        _archive(archives, recipe.sources[form.source]).members[member] = data
        for sidecar, _staged in form.sidecars:
            _archive(archives, recipe.sources[form.source]).members[sidecar] = b"sidecar"
    for text in recipe.texts:
        if text.source and text.member:
            _archive(archives, recipe.sources[text.source]).members[text.member] = (
                f"Synthetic licence text of {recipe.name}\n".encode()
            )
    return pins


def _model(gate: ModelGate) -> bytes:
    """The smallest ModelProto the gate passes: its IR version and opset, its inputs and
    outputs with their types and shapes, its metadata."""
    graph = onnx.graph(
        [_value(g) for g in gate.inputs or ()], [_value(g) for g in gate.outputs or ()]
    )
    return onnx.model(
        graph,
        ir_version=gate.min_ir_version or 8,
        opsets=(("", gate.min_opset or 13),),
        metadata=tuple((k, v if v is not None else "synthetic") for k, v in gate.metadata),
    )


def _value(gate: IOGate) -> bytes:
    dims = [1 if d == "*" else d for d in gate.shape] if gate.shape is not None else None
    return onnx.value_info(gate.name, _type(gate.type or "FLOAT", dims))


def _type(text: str, dims: list[int | str] | None = None) -> bytes:
    """A DataType name (FLOAT) or ONNX's notation: tensor(float), seq(…), map(int64,…)."""
    if text.isupper():
        return onnx.tensor_type(text, dims)
    kind, _, inner = text.partition("(")
    inner = inner[:-1]
    if kind == "tensor":
        return onnx.tensor_type(inner.upper(), dims)
    if kind == "seq":
        return onnx.sequence_type(_type(inner))
    if kind == "map":
        key, _, value = inner.partition(",")
        return onnx.map_type(key.upper(), _type(value))
    if kind == "optional":
        return onnx.optional_type(_type(inner))
    raise AssertionError(f"no synthetic model for the type {text!r}")


# --- archives --------------------------------------------------------------------------------


def _archive(archives: dict[str, _Archive], source: Source) -> _Archive:
    return archives.setdefault(source.sha256, _Archive(source))


def _store(archive: _Archive, cache: Cache, scratch: Path) -> dict[str, str]:
    """Write the archive (and the outer ones of a nested source) into the cache; the pins
    that change, original -> synthetic."""
    source = archive.source
    pins: dict[str, str] = {}
    data = _zip(archive.members) if archive.members else b""
    if source.nested:
        (inner,) = source.nested  # one level: the AAR inside an npm tarball
        if not archive.members:
            raise AssertionError(f"{source.describe()}: nothing read from the nested archive")
        pins[inner.sha256] = _put(cache, scratch, data, inner.member)
        outer = {inner.member: data}
        data = _tarball(outer) if source.origin.kind == "npm" else _zip(outer)
    elif source.origin.kind == "pypi":
        data = _wheel(source, archive.members, scratch)
    elif source.origin.kind == "npm":
        data = _tarball(archive.members)
    elif len(archive.members) == 1 and source.filename in archive.members:
        data = archive.members[source.filename]  # the model file itself
    pins[source.sha256] = _put(cache, scratch, data, source.filename)
    return pins


def _put(cache: Cache, scratch: Path, data: bytes, name: str) -> str:
    digest = hashlib.sha256(data).hexdigest()
    scratch.mkdir(parents=True, exist_ok=True)
    path = scratch / digest
    path.write_bytes(data)
    cache.store(path, digest, url=f"https://synthetic.invalid/{name.rsplit('/', 1)[-1]}")
    return digest


def _wheel(source: Source, members: dict[str, bytes], scratch: Path) -> bytes:
    origin = source.origin
    assert isinstance(origin, PypiCoordinates)
    path = make_wheel(scratch / "wheels" / origin.filename, origin.project, origin.version, members)
    return path.read_bytes()


def _zip(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in sorted(members.items()):
            archive.writestr(zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0)), data)
    return out.getvalue()


def _tarball(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for name, data in sorted(members.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 1_577_836_800, 0o644
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()
