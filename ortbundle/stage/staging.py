"""Lay out one target's stage: runtimes pruned to their closure, licence texts beside them.

A stage is built in a hidden sibling directory and put in place in one step only when complete
(ortbundle/_core/publish.py), so `dist/` holds either the previous stage or the new one — never half
of either, and never nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import itertools
import os
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ortbundle._core.errors import ArchiveError, BinaryError, ConfigError
from ortbundle._core.fsio import inside_project, sha256_file
from ortbundle._core.memo import Memo
from ortbundle._core.publish import (
    publish as publish,  # build.py and release.py publish through here
)
from ortbundle._core.publish import recover, sweep_set_aside
from ortbundle.config.project import CodeSigner
from ortbundle.config.recipes import LicenseText, Recipe, Rename
from ortbundle.config.targets import Target
from ortbundle.fetch.archives import MemberReader, ZipArchive
from ortbundle.fetch.member_memo import MemoizedMembers
from ortbundle.stage.binaries import fix_macho, inspect, macho_tree_problems
from ortbundle.stage.binaries.info import BinaryInfo, alignment_problem, core_names
from ortbundle.stage.binaries.loads import (
    FileScan,
    scan_binary,
)
from ortbundle.stage.binaries.soname import rename_library
from ortbundle.stage.closure import Candidate, Closure, Materialized, prune
from ortbundle.stage.globs import check_globs
from ortbundle.stage.probe.names import NamesRead

LIBRARY_MODE = 0o644
TEXT_MODE = 0o644


@dataclass(frozen=True)
class StagedFile:
    path: str  # relative to the target stage, POSIX separators
    size: int
    sha256: str
    link_to: str | None = None  # for symlinks: the file name they point to


@dataclass(frozen=True)
class StagedRuntime:
    runtime: str
    target: str
    directory: str  # relative to the target stage
    closure: Closure
    files: tuple[StagedFile, ...]
    outside_globs: int  # archive members that are not libraries at all
    # what the core offers, read by running it where this machine can (probe/names.py); set by
    # the stage step after the runtime is stored or restored, never part of the stored record
    offered: NamesRead | None = None


@dataclass(frozen=True)
class StagedText:
    component: str
    path: str  # relative to the target stage
    origin: str  # "source:member" or "licenses/<file>"
    size: int
    sha256: str


def open_archives(
    recipe: Recipe, source_ids: set[str], paths: dict[str, Path]
) -> dict[str, ZipArchive]:
    """Open each needed source once; `paths` maps source id to the cached file."""
    archives: dict[str, ZipArchive] = {}
    try:
        for sid in sorted(source_ids):
            source = recipe.sources[sid]
            archives[sid] = ZipArchive(
                paths[sid],
                label=source.archive_name,
                component=recipe.name,
                check_record=source.stale_record is None,
            )
    except BaseException:
        for archive in archives.values():
            archive.close()
        raise
    return archives


def memo_reader(
    recipe: Recipe, sid: str, path: Path, opened: ZipArchive | None, memo: Memo
) -> MemoizedMembers:
    """Source `sid` read member by member through the build's member memo (off: a release);
    `opened` is the archive when this build has it open already."""
    source = recipe.sources[sid]

    def open_one() -> MemberReader:
        return opened if opened is not None else open_archives(recipe, {sid}, {sid: path})[sid]

    return MemoizedMembers(source.archive_sha256, source.archive_name, memo, open_one)


def stage_runtime(
    recipe: Recipe,
    target: Target,
    archives: dict[str, ZipArchive],
    stage_root: Path,
    signer: CodeSigner | None = None,
) -> StagedRuntime:
    """Prune one runtime into `stage_root/runtimes/<name>/`; on macOS its dylibs are made
    relocatable and signed by `signer` (ad-hoc when None)."""
    plan = recipe.for_target(target.name)
    listings = {sid: tuple(archive.members) for sid, archive in archives.items()}
    idle_drops = check_globs(recipe, plan, target, listings)  # every glob matching nothing
    relative = recipe.directory
    runtime_dir = stage_root / relative
    incoming = runtime_dir / ".incoming"
    incoming.mkdir(parents=True)
    candidates: list[Candidate] = []
    outside = 0
    for take in plan.takes:
        archive = archives[take.source]
        for member in archive.members.values():
            if any(fnmatch.fnmatchcase(member.name, glob) for glob in take.libraries):
                identity = member.record_sha256 or f"{member.size}:{member.crc:08x}"
                candidates.append(
                    Candidate(take.source, member.name, member.basename, member.size, identity)
                )
            else:
                outside += 1
    counter = itertools.count()

    def materialize(cand: Candidate) -> Materialized:
        dest = incoming / f"{next(counter)}-{cand.name}"
        extracted = archives[cand.source].extract(cand.member, dest)
        info = inspect(extracted.path, name=f"{cand.source}:{cand.member}")
        return Materialized(extracted.path, extracted.sha256, extracted.size, info)

    closure = prune(
        component=recipe.name,
        target=target,
        recipe=plan,
        candidates=candidates,
        materialize=materialize,
        # the core a library that uses one links comes from the runtime it is paired with
        provided=(lambda name: bool(core_names([name]))) if recipe.kind == "uses-core" else None,
    )
    files: list[StagedFile] = []
    for lib in closure.kept:
        final = runtime_dir / lib.name
        lib.path.chmod(LIBRARY_MODE)
        os.replace(lib.path, final)
    if plan.renames:
        closure = _apply_renames(recipe.name, target, plan.renames, closure, runtime_dir)
    if target.format == "elf":
        closure = _flatten_runpaths(recipe.name, target, closure, runtime_dir)
    if target.format == "macho":
        closure = _fix_macho(recipe.name, target, closure, runtime_dir, signer or CodeSigner())
    if target.page_align:
        for lib in closure.kept:
            _check_alignment(recipe.name, target, lib.name, lib.info)
    for lib in closure.kept:
        files.append(StagedFile(f"{relative}/{lib.name}", lib.size, lib.sha256))
    for link, points_to in closure.links:
        (runtime_dir / link).symlink_to(points_to)
        kept = next(f for f in files if f.path == f"{relative}/{points_to}")
        files.append(StagedFile(f"{relative}/{link}", kept.size, kept.sha256, link_to=points_to))
    files.extend(_stage_payloads(recipe, target, archives, runtime_dir, relative, files))
    shutil.rmtree(incoming)
    # what the kept files can open by name: read once here, memoised with the stage
    closure = dataclasses.replace(
        closure, load_scans=scan_kept(closure, runtime_dir, recipe.name), idle_drops=idle_drops
    )
    return StagedRuntime(
        runtime=recipe.name,
        target=target.name,
        directory=relative,
        closure=closure,
        files=tuple(sorted(files, key=lambda f: f.path)),
        outside_globs=outside,
    )


def _apply_renames(
    component: str, target: Target, renames: tuple[Rename, ...], closure: Closure, runtime_dir: Path
) -> Closure:
    """Ship kept libraries under their new names: the file, its SONAME and every kept
    library's DT_NEEDED on it change together (two libraries with one SONAME collide in the
    Android linker namespace)."""

    new_names = {r.old: r.new for r in renames}
    kept_names = {k.name for k in closure.kept}
    missing = sorted(set(new_names) - kept_names)
    if missing:
        raise ConfigError(
            f"the recipe renames {', '.join(missing)}, which the closure does not keep",
            component=component,
            target=target.name,
            fix="rename a library the runtime keeps (see `invoke build -v` for the kept list)",
        )
    # a new name must be free: no kept library or link has it, renamed or not (a chain or a
    # swap would overwrite one library with another)
    taken = kept_names | {name for pair in closure.links for name in pair}
    clash = sorted(taken & set(new_names.values()))
    if clash:
        raise ConfigError(
            f"renaming would give two libraries the name {clash[0]}",
            component=component,
            target=target.name,
            fix="choose a new name no kept library or SONAME link has",
        )
    # the others know a library by its SONAME (or its file name): renaming changes both
    old_names: dict[str, str] = {}
    for k in closure.kept:
        if k.name in new_names:
            old_names[k.name] = new_names[k.name]
            if k.info.soname:
                old_names[k.info.soname] = new_names[k.name]
    kept = []
    for lib in closure.kept:
        new_name = new_names.get(lib.name, lib.name)
        replace = {n: old_names[n] for n in lib.info.needed if n in old_names}
        soname = new_name if lib.name in new_names and lib.info.format == "elf" else None
        if soname is None and not replace:
            kept.append(lib)
            continue
        if lib.info.format != "elf":
            raise ConfigError(
                f"{lib.name} is a {lib.info.format.upper()} library: only ELF names are rewritten",
                component=component,
                target=target.name,
                fix="rename only ELF libraries",
            )
        path = runtime_dir / new_name
        os.replace(runtime_dir / lib.name, path)
        with _naming(component, target):
            info = rename_library(
                path,
                soname=soname if lib.info.soname is not None else None,
                replace_needed=replace,
                page_size=target.page_align or None,
                label=f"{component}:{lib.member}",
            )
        kept.append(
            dataclasses.replace(
                lib,
                name=new_name,
                path=path,
                info=info,
                size=path.stat().st_size,
                sha256=sha256_file(path),
                why=lib.why + (f"; renamed from {lib.name}" if new_name != lib.name else ""),
            )
        )
    # the old SONAME is no name anyone asks for now: a link by that name would publish it again
    links = tuple((a, new_names.get(b, b)) for a, b in closure.links if a not in old_names)
    return dataclasses.replace(
        closure,
        kept=tuple(kept),
        links=links,
        entry=new_names.get(closure.entry, closure.entry),
    )


@contextlib.contextmanager
def _naming(component: str, target: Target) -> Iterator[None]:
    """A BinaryError from rewriting one of the runtime's libraries names the runtime and the
    target where the rewriter did not."""
    try:
        yield
    except BinaryError as exc:
        exc.component = exc.component or component
        exc.target = exc.target or target.name
        raise


def flat_runpath(runpath: tuple[str, ...]) -> tuple[str, ...] | None:
    """The RUNPATH a library needs once staged flat beside its dependencies: each entry
    relative to `$ORIGIN` (an auditwheel layout, `$ORIGIN/../../pkg.libs`) becomes `$ORIGIN`
    itself; an absolute entry (a vendor stack's install place) stays. None when nothing
    changes."""
    flat: list[str] = []
    for entry in runpath:
        relative = entry.startswith(("$ORIGIN", "${ORIGIN}"))
        entry = "$ORIGIN" if relative else entry
        if entry not in flat:
            flat.append(entry)
    return None if tuple(flat) == runpath else tuple(flat)


def _flatten_runpaths(
    component: str, target: Target, closure: Closure, runtime_dir: Path
) -> Closure:
    """A kept ELF library finds its kept dependencies where staging put them: beside it. A
    wheel's RUNPATH names the wheel's directories (`$ORIGIN/../../onnxruntime_ggml.libs`, where
    auditwheel put libgomp), which the flat runtime directory does not have: the plugin would
    not load on the user's machine. Rewritten with patchelf, read back, and said in `why`."""
    kept = []
    for lib in closure.kept:
        runpath = flat_runpath(lib.info.runpath) if lib.info.format == "elf" else None
        if runpath is None:
            kept.append(lib)
            continue
        path = runtime_dir / lib.name
        with _naming(component, target):
            info = rename_library(
                path, runpath=runpath, page_size=target.page_align or None,
                label=f"{component}:{lib.member}",
            )  # fmt: skip
        was = ":".join(lib.info.runpath)
        kept.append(
            dataclasses.replace(
                lib,
                info=info,
                size=path.stat().st_size,
                sha256=sha256_file(path),
                why=f"{lib.why}; RUNPATH {was} set to {':'.join(runpath)} (staged flat)",
            )
        )
    return dataclasses.replace(closure, kept=tuple(kept))


def _fix_macho(
    component: str, target: Target, closure: Closure, runtime_dir: Path, signer: CodeSigner
) -> Closure:
    """Every kept dylib as it ships on macOS: arm64 only, id `@rpath/<the name its
    dependents use>` (a link of that name stands beside it when it differs from the file),
    bundled dependencies by `@rpath`, found through `@loader_path`, signed after the edit. The
    tree is then checked as dyld would load it."""
    kept = []
    for lib in closure.kept:
        path = runtime_dir / lib.name
        install_id = target.key(lib.info.soname) if lib.info.soname else lib.name
        with _naming(component, target):
            info = fix_macho(
                path, install_id=install_id, label=f"{component}:{lib.member}", signer=signer
            )
        kept.append(
            dataclasses.replace(lib, info=info, size=path.stat().st_size, sha256=sha256_file(path))
        )
    for link, points_to in closure.links:
        (runtime_dir / link).symlink_to(points_to)
    try:
        problems = macho_tree_problems(runtime_dir)
    finally:
        for link, _ in closure.links:
            (runtime_dir / link).unlink()
    if problems:
        raise BinaryError(
            f"the macOS tree would not load: {'; '.join(problems)}",
            component=component,
            target=target.name,
            file=problems[0].split(":", 1)[0],
            fix="take every dylib the runtime needs as a source, so its name can be rewritten",
        )
    return dataclasses.replace(closure, kept=tuple(kept))


def _check_alignment(component: str, target: Target, name: str, info: BinaryInfo) -> None:
    """A library the device's linker maps must fit its page size; another machine's file
    (a Hexagon DSP Skel) is not mapped by it and is exempt."""
    if info.format != "elf" or info.machine != target.machine:
        return
    problem = alignment_problem(info, target.page_align)
    if problem:
        raise BinaryError(
            f"{name} is not aligned for {target.page_align // 1024} KB pages: {problem}",
            component=component,
            target=target.name,
            file=name,
            fix="use a build linked with -Wl,-z,max-page-size=16384 (the NDK's default since "
            "r28); Android 15+ devices with 16 KB pages refuse to load this library",
        )


def _stage_payloads(
    recipe: Recipe,
    target: Target,
    archives: dict[str, ZipArchive],
    runtime_dir: Path,
    relative: str,
    staged: list[StagedFile],
) -> list[StagedFile]:
    """Files shipped verbatim beside the runtime: each glob must match, each binary must be
    of a machine the recipe names."""
    files: list[StagedFile] = []
    taken = {f.path for f in staged}
    for payload in recipe.for_target(target.name).payloads:
        archive = archives[payload.source]
        members = [
            m
            for m in archive.members.values()
            if any(fnmatch.fnmatchcase(m.name, glob) for glob in payload.files)
        ]
        if not members:
            raise ConfigError(
                f"payload files {', '.join(payload.files)} match nothing in {archive.label}",
                component=recipe.name,
                target=target.name,
                file=str(recipe.path),
                fix="check the payload globs against the archive's listing",
            )
        directory = runtime_dir / "assets" if payload.place == "assets" else runtime_dir
        directory.mkdir(exist_ok=True)
        prefix = f"{relative}/assets" if payload.place == "assets" else relative
        for member in sorted(members, key=lambda m: m.name):
            path = f"{prefix}/{member.basename}"
            if path in taken:
                raise ConfigError(
                    f"payload {member.name} would be staged as {path}, which another file is",
                    component=recipe.name,
                    target=target.name,
                    file=str(recipe.path),
                    fix="narrow the payload globs, or place it under assets",
                )
            dest = directory / member.basename
            extracted = archive.extract(member.name, dest)
            dest.chmod(LIBRARY_MODE)
            if payload.machines:
                info = inspect(dest, name=f"{payload.source}:{member.name}")
                if info.machine not in payload.machines:
                    raise BinaryError(
                        f"payload {member.basename} is {info.machine}, the recipe expects "
                        f"{' or '.join(payload.machines)}",
                        component=recipe.name,
                        target=target.name,
                        file=member.name,
                        fix="check the payload's machines and globs",
                    )
                if target.page_align:
                    _check_alignment(recipe.name, target, member.basename, info)
            taken.add(path)
            files.append(StagedFile(path, extracted.size, extracted.sha256))
    return files


def stage_license_texts(
    recipe: Recipe,
    target: Target,
    archives: Mapping[str, MemberReader],
    stage_root: Path,
    repo_licenses: Path,
) -> list[StagedText]:
    """Copy each licence text the recipe names, verbatim, to licenses/<component>/."""
    return stage_texts(
        [(rule.component, rule.texts) for rule in recipe.for_target(target.name).licenses],
        recipe.name,
        target.name,
        archives,
        stage_root,
        repo_licenses,
    )


def stage_texts(
    groups: list[tuple[str, tuple[LicenseText, ...]]],
    owner: str,
    target: str,
    archives: Mapping[str, MemberReader],
    stage_root: Path,
    repo_licenses: Path,
) -> list[StagedText]:
    """Per (component, its texts): copy each text verbatim to licenses/<component>/."""
    texts: list[StagedText] = []
    for component, component_texts in groups:
        directory = stage_root / "licenses" / component
        directory.mkdir(parents=True, exist_ok=True)
        for text in component_texts:
            if text.source is not None and text.member is not None:
                name = text.member.rsplit("/", 1)[-1]
                dest = directory / name
                scratch = directory / f".{name}.incoming"
                extracted = archives[text.source].extract(text.member, scratch)
                size, sha256 = extracted.size, extracted.sha256
            else:
                assert text.file is not None
                origin = inside_project(repo_licenses / text.file, repo_licenses.parent)
                if not origin.is_file():
                    raise ConfigError(
                        "licence text file is missing",
                        component=owner,
                        target=target,
                        file=str(origin),
                        fix="add the upstream text to licenses/ verbatim, with its provenance "
                        "in licenses/README.md",
                    )
                name = Path(text.file).name
                dest = directory / name
                scratch = directory / f".{name}.incoming"
                shutil.copyfile(origin, scratch)
                size, sha256 = scratch.stat().st_size, sha256_file(scratch)
            previous = next((t for t in texts if t.path == _rel(stage_root, dest)), None)
            if dest.exists() and (previous is None or previous.sha256 != sha256):
                scratch.unlink()
                raise ArchiveError(
                    f"two different licence texts would both be {_rel(stage_root, dest)}",
                    component=owner,
                    target=target,
                    file=text.describe(),
                    fix="give the component distinct names in the recipe's [[licenses]]",
                )
            scratch.chmod(TEXT_MODE)
            os.replace(scratch, dest)
            if previous is None:
                texts.append(
                    StagedText(component, _rel(stage_root, dest), text.describe(), size, sha256)
                )
    return texts


def staged_file(stage_root: Path, relative: str) -> StagedFile:
    """Describe a file the build wrote itself (runtimes.json, the loader, NOTICE)."""
    path = stage_root / relative
    return StagedFile(relative, path.stat().st_size, sha256_file(path))


def stage_tool_license(stage_root: Path, component: str, origin: Path) -> StagedText:
    """ortbundle's own licence, for the files it writes into every stage."""
    directory = stage_root / "licenses" / component
    directory.mkdir(parents=True, exist_ok=True)
    dest = directory / origin.name
    shutil.copyfile(origin, dest)
    dest.chmod(TEXT_MODE)
    return StagedText(
        component, _rel(stage_root, dest), origin.name, dest.stat().st_size, sha256_file(dest)
    )


def _rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


def scratch_trees(final: Path) -> list[Path]:
    """The scratch trees of `final` left in its directory (a build's, running or killed)."""
    return sorted(final.parent.glob(f".{final.name}.partial-*"))


def scratch_dir(final: Path) -> Path:
    """A fresh hidden sibling of `final` to build into, made holding the lock on its directory
    (fsio.locked_directory): every other scratch tree of `final` is then a dead build's, and is
    removed, whatever its PID (in a fresh container every build has the same one)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    recover(final)  # a build killed mid-publish may have set the complete old tree aside
    sweep_set_aside(final)  # what dead builds set aside and did not finish removing
    for stale in scratch_trees(final):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = final.with_name(f".{final.name}.partial-{os.getpid()}")
    tmp.mkdir()
    return tmp


def discard(tmp: Path, *, up_to: Path | None = None) -> None:
    """Remove a scratch stage, and the parents it created if they are now empty."""
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(tmp)
    if up_to is None:
        return
    parent = tmp.parent
    while parent != up_to.parent and parent.is_relative_to(up_to):
        try:
            parent.rmdir()
        except OSError:
            return
        parent = parent.parent


def scan_kept(closure: Closure, runtime_dir: Path, component: str) -> tuple[FileScan, ...]:
    """The stage's hook: every kept file's scan, memoised with the pruned runtime."""
    return tuple(
        FileScan(
            k.name, scan_binary(runtime_dir / k.name, k.info.format, f"{component}:{k.member}")
        )
        for k in closure.kept
    )
