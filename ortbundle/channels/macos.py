"""macOS channel: an app-bundle fragment, `<package>-<version>-macos-arm64.zip`, unzipped into
`<App>.app/Contents/`.

codesign seals an app by location: `Contents/Frameworks/` holds code only (every file there is
signed as nested code, and data in it is refused: "code object is not signed at all"), and
`Contents/Resources/` holds data. So the stage is split:

- `Frameworks/<package>/runtimes/<name>/` and `plugins/<name>/`: the Mach-O files and their
  id links (`libonnxruntime.1.dylib` → `libonnxruntime.1.32.0.dylib`), as staged — already
  arm64-only, `@rpath`-named and signed by the stage;
- `Resources/<package>/`: everything else — NOTICE, licences, runtimes.json, models.json, the
  models and the loader — with links `runtimes` and `plugins` to the code directories, so the
  loader and runtimes.json see the stage's own layout; and any data file a runtime directory
  holds (MLX's `mlx.metallib`) under `Resources/<package>/data/<its path>`, with a link
  `Resources` in the code directory pointing at that directory.

MLX looks for its kernels at `<directory of libmlx.dylib>/mlx.metallib`, then at
`<that directory>/Resources/mlx.metallib`: the link satisfies the second lookup while the
metallib stays data (docs/macos.md). codesign records every link as a link; each points inside
the bundle.

The archive is reproducible: entries sorted, every time SOURCE_DATE_EPOCH (DOS time, so from
1980), fixed modes, links stored as links (Unix mode 0o120777, the target as content), no extra
fields. Every Mach-O file is checked on the way in (signature, arm64, install names resolvable
inside its directory): a stage edited after the build, or one whose signature a byte broke, is
refused rather than packaged for Gatekeeper to refuse. Both the check and the archive are a pure
function of the stage's bytes, so the archive is memoised under their digests: a warm build
neither parses a dylib nor compresses one again.
"""

from __future__ import annotations

import posixpath
import time
import zipfile
from pathlib import Path, PurePosixPath

from ortbundle._core.errors import IntegrityError
from ortbundle._core.fsio import atomic_output, sha256_file
from ortbundle._core.oserrors import writing
from ortbundle.channels import ChannelOutput, PackageInput, stage_changed
from ortbundle.channels.output_cache import input_key, memoized
from ortbundle.licensing.attribution import ShippedFile
from ortbundle.stage.binaries import macho_tree_problems
from ortbundle.stage.binaries.info import sniff_format

TARGET = "macos-arm64"
CODE_ROOTS = ("runtimes", "plugins")  # the stage's code directories
FRAMEWORKS = "Frameworks"
RESOURCES = "Resources"
DATA = "data"  # under Resources/<package>/: the data files of the code directories
_DOS_EPOCH = 315532800  # 1980-01-01: the earliest time a zip entry can hold
_LINK = 0o120777
_DIR = 0o40755


def archive_name(package: PackageInput) -> str:
    return f"{package.settings.package_name}-{package.version}-{TARGET}.zip"


def _is_code(package: PackageInput, shipped: ShippedFile) -> bool:
    """A Mach-O file (or a link to one) under runtimes/ or plugins/."""
    if PurePosixPath(shipped.path).parts[0] not in CODE_ROOTS:
        return False
    if shipped.link_to is not None:
        target = posixpath.join(posixpath.dirname(shipped.path), shipped.link_to)
        return sniff_format(package.stage / target) == "macho"
    return sniff_format(package.stage / shipped.path) == "macho"


def layout(package: PackageInput) -> dict[str, ShippedFile | str]:
    """Archive path -> the staged file it holds, or (a str) the target of a link the channel
    adds: a code directory's `Resources` link to its data."""
    name = package.settings.package_name
    entries: dict[str, ShippedFile | str] = {}
    data_dirs: set[str] = set()
    roots: set[str] = set()
    for shipped in package.files:
        parts = PurePosixPath(shipped.path).parts
        if _is_code(package, shipped):
            entries[f"{FRAMEWORKS}/{name}/{shipped.path}"] = shipped
            roots.add(parts[0])
        elif parts[0] in CODE_ROOTS and len(parts) > 2:  # data in a runtime's own directory
            entries[f"{RESOURCES}/{name}/{DATA}/{shipped.path}"] = shipped
            data_dirs.add("/".join(parts[:2]))
        else:
            entries[f"{RESOURCES}/{name}/{shipped.path}"] = shipped
    for root in sorted(roots):  # the loader's view: runtimes.json's directories beside it
        entries[f"{RESOURCES}/{name}/{root}"] = f"../../{FRAMEWORKS}/{name}/{root}"
    for directory in sorted(data_dirs):
        link = f"{FRAMEWORKS}/{name}/{directory}/{RESOURCES}"
        up = "/".join([".."] * (len(PurePosixPath(link).parts) - 1))
        entries[link] = f"{up}/{RESOURCES}/{name}/{DATA}/{directory}"
    return entries


def _check_code(package: PackageInput) -> None:
    """Every code directory as dyld and Gatekeeper would see it."""
    directories = sorted({posixpath.dirname(f.path) for f in package.files if _is_code(package, f)})
    problems = [
        f"{directory}/{problem}"
        for directory in directories
        for problem in macho_tree_problems(package.stage / directory)
    ]
    if problems:
        raise IntegrityError(
            f"the macOS code would not load or pass Gatekeeper: {'; '.join(problems)}",
            target=package.target,
            file=problems[0].split(":", 1)[0],
            fix="rebuild the stage (invoke build): the stage signs every dylib after "
            "rewriting it, and nothing may change it afterwards",
        )


def _info(name: str, epoch: int, mode: int) -> zipfile.ZipInfo:
    stamp = time.gmtime(max(epoch, _DOS_EPOCH))
    info = zipfile.ZipInfo(name, date_time=stamp[:6])
    info.create_system = 3  # Unix: unzip and 7-Zip apply the mode, and make links links
    info.external_attr = mode << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def _directories(paths: list[str]) -> list[str]:
    found: set[str] = set()
    for path in paths:
        parent = PurePosixPath(path).parent
        while str(parent) != ".":
            found.add(f"{parent}/")
            parent = parent.parent
    return sorted(found)


def write_zip(package: PackageInput, dest: Path) -> None:
    entries = layout(package)
    epoch = package.source_date_epoch
    with (
        atomic_output(dest, tag="partial") as partial,
        writing("the macOS package", partial),
        zipfile.ZipFile(partial, "w") as archive,
    ):
        for directory in _directories(list(entries)):
            info = _info(directory, epoch, _DIR)
            info.compress_type = zipfile.ZIP_STORED
            archive.writestr(info, b"")
        for name, held in sorted(entries.items()):
            if isinstance(held, str) or held.link_to is not None:
                target = held if isinstance(held, str) else str(held.link_to)
                info = _info(name, epoch, _LINK)
                info.compress_type = zipfile.ZIP_STORED
                archive.writestr(info, target.encode())
                continue
            source = package.stage / held.path
            if not source.is_file() or sha256_file(source) != held.sha256:
                raise stage_changed(package, source, None)
            info = _info(name, epoch, 0o100000 | held.mode)
            with source.open("rb") as src, archive.open(info, "w") as out:
                while chunk := src.read(1 << 20):
                    out.write(chunk)


class MacosChannel:
    """The app-bundle fragment for the macos-arm64 stage."""

    name = "macos"
    target = TARGET

    def generate(self, package: PackageInput, out: Path) -> ChannelOutput:
        dest = out / archive_name(package)
        key = input_key(package, "macos-zip", [dest.name, package.settings.package_name])

        def produce(path: Path) -> None:
            _check_code(package)
            write_zip(package, path)

        sha256 = memoized(package, "macos-zip", key, dest, produce)
        name = package.settings.package_name
        return ChannelOutput(
            channel=self.name,
            directory=out,
            files=(dest,),
            notes=(
                f"unzip {dest.name} into <App>.app/Contents/: code under Frameworks/{name}/, "
                f"data and the loader under Resources/{name}/; sign the app afterwards "
                "(codesign --sign <Developer ID> <App>.app, no --deep) and notarize it",
            ),
            digests={dest.name: sha256},
        )
