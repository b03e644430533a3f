"""`invoke build-source`: build a from-source component's binary archive again from its pinned
source archives, and hold the result to its pin.

A recipe pins the archive a release engineer's CI built (`[sources.<id>]`) and, in
`[sources.<id>.build]`, the source archives it was built from, the command and what the archive
holds (`outputs`). This fetches each source archive through the cache (SHA-256-checked like any
source), unpacks it into a fresh build directory (its own paths: `ort-rocket/…`; no member
that climbs out, no link that leads out), runs the command there with SOURCE_DATE_EPOCH set,
and packs `outputs` into a zip that depends on nothing but those files: members sorted, one
timestamp, modes from the files. Where the archive is a project file (`path`), it is written
there; else beside the project under `build-source/`. The result's SHA-256 is compared with the
pin: equal, the pinned binary is reproduced from its corresponding source; otherwise exit 4,
both digests said. The generated CI workflow runs it on a runner of the target's machine.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
import subprocess
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ortbundle._core.errors import ArchiveError, ConfigError, IntegrityError, PackagingError
from ortbundle._core.fsio import atomic_output, check_member_name
from ortbundle._core.locations import default_cache_dir
from ortbundle._core.progress import Reporter
from ortbundle.config.project import Project
from ortbundle.config.recipes import Recipe, load_recipe
from ortbundle.config.sources import BuildRecipe, LocalCoordinates, Source
from ortbundle.fetch.archives import tar_refusal, walk_tar
from ortbundle.fetch.artifacts import Fetcher
from ortbundle.fetch.cache import Cache

__all__ = ["BuiltSource", "build_archive", "build_source", "built_sources"]

BUILD_TIMEOUT = 4 * 3600  # seconds: a CMake build of a plugin EP takes minutes
_ZIP_EPOCH = 315532800  # 1980-01-01, zip's first representable moment


@dataclass(frozen=True)
class BuiltSource:
    """One binary archive built again: where it went, its digest, and the pin's."""

    component: str
    source: str
    path: Path
    sha256: str
    pinned: str

    @property
    def reproduced(self) -> bool:
        return self.sha256 == self.pinned


def built_sources(recipe: Recipe) -> list[str]:
    """The ids of the recipe's sources that are built from source (a `[sources.<id>.build]`)."""
    return [sid for sid, source in recipe.sources.items() if source.build is not None]


def build_source(
    project: Project,
    component: str,
    source_id: str | None,
    reporter: Reporter,
    *,
    epoch: int | None = None,
    environ: Mapping[str, str] | None = None,
    cache_dir: Path | None = None,
) -> BuiltSource:
    """Build `component`'s binary archive `source_id` (its only built one when None) from its
    pinned source archives; never replaces a project file with other bytes than its pin."""
    recipe = load_recipe(project.recipes / f"{component}.toml")
    built = built_sources(recipe)
    if source_id is None:
        if len(built) != 1:
            raise ConfigError(
                f"{component} has {len(built)} sources built from source "
                f"({', '.join(built) or 'none'}): name one",
                component=component,
                file=str(recipe.path),
                fix="pass --source ID (a [sources.<id>] with a build table)",
            )
        source_id = built[0]
    source = recipe.sources.get(source_id)
    if source is None or source.build is None:
        raise ConfigError(
            f"{component} has no source {source_id!r} built from source "
            f"(those built from source: {', '.join(built) or 'none'})",
            component=component,
            file=str(recipe.path),
            fix="name a [sources.<id>] that has a [sources.<id>.build] table",
        )
    build = source.build
    if not build.outputs:
        raise ConfigError(
            f"[sources.{source_id}.build] says no outputs, so the archive cannot be packed",
            component=component,
            file=str(recipe.path),
            fix=f'add outputs = {{ "<member>" = "<file of the build>" }} to '
            f"[sources.{source_id}.build]",
        )
    env = dict(os.environ if environ is None else environ)
    epoch = epoch if epoch is not None else int(env.get("SOURCE_DATE_EPOCH", _ZIP_EPOCH))
    fetcher = Fetcher(Cache(cache_dir or default_cache_dir()), reporter, project_root=project.root)
    archives = {a.id: fetcher.fetch(a, component=component).path for a in build.sources}
    reporter.line(f"{component}: {build.command}")
    data = build_archive(build, archives, component, str(recipe.path), epoch, env)
    digest = hashlib.sha256(data).hexdigest()
    dest = _destination(project, source)
    if isinstance(source.origin, LocalCoordinates) and digest != source.sha256:
        dest = dest.with_name(f"{dest.name}.rebuilt")  # the pinned file stays as it is
    dest.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(dest, tag="build-source") as partial:
        partial.write_bytes(data)
    result = BuiltSource(component, source_id, dest, digest, source.sha256)
    if not result.reproduced:
        raise IntegrityError(
            f"the build of {source_id} from its pinned sources made sha256 {digest}; the recipe "
            f"pins {source.sha256} (written to {dest})",
            component=component,
            file=str(recipe.path),
            fix=f"build with the recorded toolchain ({build.toolchain}) so the bytes are the "
            "same; if this build is the one to ship, review it and pin its SHA-256",
        )
    return result


def build_archive(
    build: BuildRecipe,
    archives: Mapping[str, Path],
    component: str,
    recipe: str,
    epoch: int,
    env: Mapping[str, str],
) -> bytes:
    """The archive's bytes: each source archive (`archives`, by id) unpacked into a fresh
    build directory, the command run there, `outputs` packed."""
    with tempfile.TemporaryDirectory(prefix="ortbundle-build-source-") as scratch:
        work = Path(scratch) / "build"
        work.mkdir()
        for archive in build.sources:
            unpack_tarball(archives[archive.id], work, label=archive.filename, component=component)
        _run(build.command, work, {**env, "SOURCE_DATE_EPOCH": str(epoch)}, component, recipe)
        return pack_outputs(work, build.outputs, epoch, component, recipe)


def _destination(project: Project, source: Source) -> Path:
    """A project file's own place; for a URL, build-source/<its file name> in the project."""
    if isinstance(source.origin, LocalCoordinates):
        return project.root / source.origin.path
    return project.root / "build-source" / source.filename


def _run(command: str, work: Path, env: dict[str, str], component: str, recipe: str) -> None:
    """The recipe's command, by the shell, in the build directory; its output is the user's."""
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", command], cwd=work, env=env, timeout=BUILD_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        raise PackagingError(
            f"the build did not finish within {BUILD_TIMEOUT // 3600} h: {command}",
            component=component,
            file=recipe,
        ) from None
    except OSError as exc:
        raise PackagingError(
            f"the build could not start ({exc}): {command}", component=component, file=recipe
        ) from None
    if done.returncode != 0:
        raise PackagingError(
            f"the build failed (exit {done.returncode}): {command}",
            component=component,
            file=recipe,
            fix="read its output above; install what [sources.<id>.build] packages names",
        )


def unpack_tarball(path: Path, dest: Path, *, label: str, component: str) -> None:
    """Every member of a source tarball under `dest`, at its own path (walk_tar judges each
    name and bounds the total); a hard link, a device, a name given twice or a symbolic link
    that leads out of `dest` stops it."""

    def refuse(name: str, why: str) -> ArchiveError:
        return tar_refusal(path, name, why, label=label, component=component)

    def visit(name: str, info: tarfile.TarInfo, tar: tarfile.TarFile) -> None:
        target = dest / name
        if info.isdir():
            target.mkdir(parents=True, exist_ok=True)
        elif info.issym():
            landing = PurePosixPath(name).parent / info.linkname
            if info.linkname.startswith("/") or check_member_name(str(landing)):
                raise refuse(name, f"symbolic link leads out ({info.linkname})")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(info.linkname)
        elif info.isreg():
            target.parent.mkdir(parents=True, exist_ok=True)
            stream = tar.extractfile(info)
            assert stream is not None  # a regular file always has data
            try:
                out = target.open("xb")
            except FileExistsError:
                raise refuse(name, "member name appears twice") from None
            with stream, out:
                shutil.copyfileobj(stream, out)
            target.chmod(0o755 if info.mode & 0o111 else 0o644)
        else:
            raise refuse(name, "member is a link or a device, not a file")

    walk_tar(path, visit, label=label, component=component)


def pack_outputs(
    work: Path, outputs: tuple[tuple[str, str], ...], epoch: int, component: str, recipe: str
) -> bytes:
    """The archive's bytes: each member from its file of the build, sorted, one timestamp
    (SOURCE_DATE_EPOCH, not before 1980), mode 0755 or 0644 from the file's."""
    moment = time.gmtime(max(epoch, _ZIP_EPOCH))[:6]
    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, file in sorted(outputs):
            path = work / file
            if not path.is_file():
                raise PackagingError(
                    f"the build made no {file} (for the archive's {member})",
                    component=component,
                    file=recipe,
                    fix="check outputs in [sources.<id>.build] against what the command builds",
                )
            info = zipfile.ZipInfo(member, moment)
            mode = 0o755 if path.stat().st_mode & stat.S_IXUSR else 0o644
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    return raw.getvalue()
