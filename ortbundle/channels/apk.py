"""APK channel: a Gradle Android library module carrying every Android ABI's runtimes, and a
Java loader that picks one per process: the first runtime in the index's order (the Qualcomm NPU
build first) whose requirements the device meets and whose entry library loads.

`generate` runs once per Android target (arm64-v8a, then x86_64) into the same directory:

    runtime-loader/build.gradle.kts                          shared by every ABI
    runtime-loader/src/main/AndroidManifest.xml              shared
    runtime-loader/src/main/java/<namespace>/RuntimeLoader.java   shared
    runtime-loader/src/main/jniLibs/<abi>/lib*.so            per ABI: every library, flat
    runtime-loader/src/main/assets/ortbundle/<abi>/runtimes.json, NOTICE, models.json
    runtime-loader/src/main/assets/ortbundle/<abi>/<runtime>/...   payload (Hexagon Skels, data)
    runtime-loader/src/main/assets/ortbundle/<abi>/plugins/<name>/...   plugin EP payload
    runtime-loader/src/main/assets/ortbundle/licenses/..., models/...  shared
    jniLibs/<abi>/lib*.so                                    per ABI: the same libraries, for
                                                             scripts that assemble an APK
    size-report.<abi>.json                                   per ABI

A shared file must come out byte-identical whichever target writes it, because a release may
take each ABI from a different runner: so shared files depend only on the product (namespace,
name, schema) and on targets.toml, never on what one ABI's stage happens to carry. A shared
licence text or model that two ABIs would write with different bytes is refused.

Where a stage file goes is decided by what the Android linker does with it. A library of the
target's own machine goes to jniLibs (flat: Android has one library directory per ABI), and must
be named lib*.so and aligned for 16 KB pages. Everything else under a runtime — Hexagon DSP
Skels, whether the recipe staged them under assets/ or beside the libraries, and data files —
is never mapped by that linker, is not packaged by the Gradle plugin's jniLibs merge unless
named *.so, and is useless inside an APK the libraries are not extracted from; it ships as an
asset that RuntimeLoader copies to the app's files directory. Hence `useLegacyPackaging =
false` for every product and ABI: nothing in jniLibs needs extracting, and the libraries stay
uncompressed, 16 KB-aligned and mapped from the APK (installed once, not twice).

NOTICE and models.json are copied verbatim: the paths they name (licences, model forms) are
relative to the bundle root, which is the stage directory on a desktop and assets/ortbundle/ in
the APK, one level above the ABI's directory they sit in (RuntimeLoader.modelAsset says so in
Java). runtimes.json is the stage's index as an APK carries it (index_json.apk_index: no
desktop-only fields). Models are stored uncompressed (noCompress), so an app can map them with
AssetManager.openFd. The desktop loader (runtime_loader.py) is not shipped: RuntimeLoader.java,
rendered from templates/apk/, takes its place.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
import shutil
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from ortbundle._core.errors import ClosureError, ConfigError, PackagingError
from ortbundle._core.fsio import atomic_output, atomic_write, fsync_dirs, sha256_file
from ortbundle._core.templating import render
from ortbundle.channels import ChannelOutput, PackageInput, check_staged, stage_changed
from ortbundle.channels.apk_size import Placement, count, deflate_estimates, size_report
from ortbundle.config.targets import ExternalGroup, Target, get_target
from ortbundle.config.vocabulary import CHANNEL_TARGETS
from ortbundle.licensing.attribution import ShippedFile
from ortbundle.stage.binaries.info import alignment_problem, sniff_format
from ortbundle.stage.binaries.info_cache import inspect_known
from ortbundle.stage.index_json import INDEX_NAME, LOADER_NAME, SCHEMA, apk_index

__all__ = ["NO_COMPRESS", "ApkChannel", "aligned_apk_command"]

_COMPONENT = "packaging:apk"
_MODULE = "runtime-loader"
_MAIN = f"{_MODULE}/src/main"
_ASSETS = f"{_MAIN}/assets/ortbundle"
_FILE_MODE, _DIR_MODE = 0o644, 0o755
_COMPILE_SDK, _MIN_SDK = 35, 24
_PAGE_16K = 16384
# See the module docstring: nothing the channel puts in jniLibs needs extracting to disk.
_USE_LEGACY_PACKAGING = False
# Qualcomm FastRPC: the QNN HTP backend reaches the Hexagon through it. Apps targeting API 31+
# see a vendor library only when their manifest declares it.
_FASTRPC = "libcdsprpc.so"
# The NDK's stable libraries (the NDK's "stable APIs" list): every app may link them. Any other
# system or vendor library (FastRPC's libcdsprpc.so, a vendor libOpenCL.so) is hidden from an
# app targeting API 31+ unless its manifest declares it with <uses-native-library>.
_NDK_LIBRARIES = frozenset(
    (
        *("libc.so", "libm.so", "libdl.so", "liblog.so", "libz.so", "libandroid.so"),
        *("libjnigraphics.so", "libEGL.so", "libGLESv1_CM.so", "libGLESv2.so", "libGLESv3.so"),
        *("libvulkan.so", "libOpenSLES.so", "libOpenMAXAL.so", "libmediandk.so"),
        *("libnativewindow.so", "libsync.so", "libneuralnetworks.so", "libcamera2ndk.so"),
        *("libaaudio.so", "libamidi.so", "libbinder_ndk.so", "libicu.so", "libstdc++.so"),
    )
)
_GLOB = re.compile(r"[*?\[]")
_NATIVE_NAME = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]*")  # written bare into the XML
# Asset extensions stored uncompressed (androidResources.noCompress): models an app maps.
NO_COMPRESS = ("onnx",)
# What the Gradle plugin packages from jniLibs and System.loadLibrary can name.
_LIBRARY_NAME = re.compile(r"lib[A-Za-z0-9_+-][A-Za-z0-9._+-]*\.so")
_INDEX_FILES = (INDEX_NAME, "NOTICE", "models.json")  # per ABI, beside nothing else
_SHARED_TOPS = ("licenses", "models")
_OWNER_TOPS = ("runtimes", "plugins")
_JAVA_PACKAGE = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+")
_JAVA_KEYWORDS = frozenset(
    (
        *("abstract", "assert", "boolean", "break", "byte", "case", "catch", "char", "class"),
        *("const", "continue", "default", "do", "double", "else", "enum", "extends", "final"),
        *("finally", "float", "for", "goto", "if", "implements", "import", "instanceof", "int"),
        *("interface", "long", "native", "new", "package", "private", "protected", "public"),
        *("return", "short", "static", "strictfp", "super", "switch", "synchronized", "this"),
        *("throw", "throws", "transient", "try", "void", "volatile", "while", "true", "false"),
        *("null", "_"),
    )
)


class ApkChannel:
    """Writes the runtime-loader module, the flat jniLibs tree and a size report, per ABI."""

    name = "apk"
    target = CHANNEL_TARGETS["apk"][0]  # one of several: generate() takes any of them

    def generate(self, package: PackageInput, out: Path) -> ChannelOutput:
        """Check everything, then write this ABI's files and the shared ones into `out`."""
        target = _android_target(package)
        abi = str(target.abi)
        _check_namespace(package)
        _verify_stage(package)
        index = _read_index(package, _entry(package, INDEX_NAME))
        placements = _plan(package, target, index)
        _check_entries(package, abi, index, placements)
        _check_api_level(package)
        _check_native_libraries(package)
        generated = _generated(package)
        _check_shared(package, out, placements, generated)

        _clear_abi(out, abi)
        written: dict[str, str] = {}  # relative path -> SHA-256
        placed: set[Path] = set()  # directories to flush once each, not once per file
        for placement in placements:
            dest = out / placement.dest
            _make_dirs(out, dest.parent)
            if placement.data is not None:
                _write_bytes(dest, placement.data, placed)
            else:
                _place((package.stage / placement.source.path), dest, placed)
            written[placement.dest] = placement.source.sha256
        deflated = deflate_estimates(package, placements)
        report, notes = size_report(
            package,
            target,
            _runtimes(index),
            placements,
            deflated,
            legacy_packaging=_USE_LEGACY_PACKAGING,
            no_compress=NO_COMPRESS,
        )
        generated[f"size-report.{abi}.json"] = report
        for relative, data in generated.items():
            dest = out / relative
            _make_dirs(out, dest.parent)
            written[relative] = _write_bytes(dest, data, placed)
        fsync_dirs(placed)
        return ChannelOutput(
            channel=self.name,
            directory=out,
            files=tuple(sorted(out / relative for relative in written)),
            notes=(
                *notes,
                *_usage_notes(package, index, placements, abi),
                *_api_note(package, abi),
            ),
            digests=dict(sorted(written.items())),
        )


# --- what the channel may package ------------------------------------------------------------


def _android_target(package: PackageInput) -> Target:
    target = get_target(package.target)
    if package.target not in CHANNEL_TARGETS["apk"] or target.abi is None:
        raise ConfigError(
            f"the APK channel packages {', '.join(CHANNEL_TARGETS['apk'])}, not {package.target}",
            component=_COMPONENT,
            target=package.target,
        )
    return target


def _check_namespace(package: PackageInput) -> None:
    """The namespace is a Java package and a Gradle namespace: refuse what javac would."""
    namespace = package.settings.android_namespace
    words = namespace.split(".")
    if not _JAVA_PACKAGE.fullmatch(namespace) or _JAVA_KEYWORDS & set(words):
        raise ConfigError(
            f"android_namespace {namespace!r} is not a Java package name",
            component=_COMPONENT,
            target=package.target,
            fix="use lower-case dot-separated words, none a Java keyword: org.example.app.runtime",
        )


def _entry(package: PackageInput, path: str) -> ShippedFile:
    for shipped in package.files:
        if shipped.path == path:
            return shipped
    raise PackagingError(
        f"the stage has no {path}",
        component=_COMPONENT,
        target=package.target,
        file=str(package.stage / path),
        fix="rebuild the stage (invoke build): every target stage carries its index",
    )


def _read_index(package: PackageInput, shipped: ShippedFile) -> dict[str, Any]:
    try:
        index = json.loads((package.stage / shipped.path).read_bytes())
    except ValueError:
        index = None
    if not isinstance(index, dict) or index.get("schema") != SCHEMA:
        raise PackagingError(
            f"{INDEX_NAME} is not a {SCHEMA} index, which the Java loader reads",
            component=_COMPONENT,
            target=package.target,
            file=str(package.stage / INDEX_NAME),
            fix="rebuild the stage with this version of ortbundle",
        )
    return index


def _runtimes(index: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [r for r in index.get("runtimes", []) if isinstance(r, dict)]


def _plan(package: PackageInput, target: Target, index: Mapping[str, Any]) -> list[Placement]:
    """Where each stage file goes; two different files for one place are refused."""
    abi = str(target.abi)
    by_path = {f.path: f for f in package.files}
    known = {f"runtimes/{r.get('name')}" for r in _runtimes(index)}
    chosen: dict[str, Placement] = {}
    origin: dict[str, str] = {}  # dest -> the stage path that first claimed it
    for shipped in package.files:
        source = _resolve(package, shipped, by_path)
        for placement in _places(package, target, abi, shipped, source, known):
            first = chosen.get(placement.dest)
            if first is None:
                chosen[placement.dest] = placement
                origin[placement.dest] = shipped.path
            elif first.source.sha256 != source.sha256:
                raise _collision(package, placement.dest, origin[placement.dest], shipped.path)
            else:  # identical bytes: shipped once, carried by both
                owners = tuple(dict.fromkeys((*first.owners, *placement.owners)))
                chosen[placement.dest] = Placement(first.dest, first.source, first.kind, owners)
    dest = f"{_ASSETS}/{abi}/{INDEX_NAME}"
    data = (json.dumps(apk_index(dict(index)), indent=2, sort_keys=True) + "\n").encode("utf-8")
    source = ShippedFile(INDEX_NAME, len(data), _sha256(data), _FILE_MODE)
    chosen[dest] = Placement(dest, source, "index", data=data)
    return [chosen[dest] for dest in sorted(chosen)]


def _resolve(
    package: PackageInput, shipped: ShippedFile, by_path: Mapping[str, ShippedFile]
) -> ShippedFile:
    """The regular stage file an entry carries: itself, or the file its symlink names (an APK
    holds no links, so an alias ships as a copy under its own name)."""
    if shipped.link_to is None:
        return shipped
    parent = posixpath.dirname(shipped.path)
    named = posixpath.normpath(posixpath.join(parent, shipped.link_to))
    target = by_path.get(named)
    if target is None or target.link_to is not None:
        raise PackagingError(
            f"{shipped.path} links to {shipped.link_to}, which is not a file of the stage",
            component=_COMPONENT,
            target=package.target,
            file=str(package.stage / shipped.path),
            fix="rebuild the stage (invoke build) instead of editing it",
        )
    return target


def _places(
    package: PackageInput,
    target: Target,
    abi: str,
    shipped: ShippedFile,
    source: ShippedFile,
    known_runtimes: set[str],
) -> list[Placement]:
    parts = PurePosixPath(shipped.path).parts
    top = parts[0]
    if shipped.path == LOADER_NAME:
        return []  # the desktop loader: RuntimeLoader.java takes its place
    if shipped.path == INDEX_NAME:
        return []  # written from the index: _plan
    if shipped.path in _INDEX_FILES:
        return [Placement(f"{_ASSETS}/{abi}/{shipped.path}", source, "index")]
    if top in _SHARED_TOPS and len(parts) > 1:
        kind = "license" if top == "licenses" else "model"
        return [Placement(f"{_ASSETS}/{shipped.path}", source, kind)]
    if top in _OWNER_TOPS and len(parts) > 2:
        owner = f"{top}/{parts[1]}"
        if top == "runtimes" and owner not in known_runtimes:
            raise _unplaceable(package, shipped, f"{INDEX_NAME} lists no runtime {parts[1]!r}")
        where = parts[1] if top == "runtimes" else owner  # assets/ortbundle/<abi>/<runtime>/
        rest = parts[2:]
        host = _is_host_library(package, target, shipped, source)  # checked wherever it is
        if rest[0] == "assets" and len(rest) > 1:
            rest = rest[1:]  # staged under assets/ by the recipe: an asset, whatever it is
        elif host:
            return _library(package, abi, shipped, source, owner)
        return [Placement(f"{_ASSETS}/{abi}/{where}/{'/'.join(rest)}", source, "asset", (owner,))]
    raise _unplaceable(package, shipped, "the APK channel does not know where it belongs")


def _library(
    package: PackageInput, abi: str, shipped: ShippedFile, source: ShippedFile, owner: str
) -> list[Placement]:
    """A library of the ABI: in the module's jniLibs and in the flat tree, under its name."""
    name = PurePosixPath(shipped.path).name
    if not _LIBRARY_NAME.fullmatch(name):
        raise _unplaceable(
            package,
            shipped,
            "an Android app library must be named lib<name>.so: the Gradle plugin packages "
            "only *.so from jniLibs, and System.loadLibrary finds only lib<name>.so",
            fix="rename it in the recipe ([[targets.<t>.rename]]); its SONAME follows",
        )
    return [
        Placement(f"{_MAIN}/jniLibs/{abi}/{name}", source, "library", (owner,)),
        Placement(f"jniLibs/{abi}/{name}", source, "library", (owner,)),
    ]


def _is_host_library(
    package: PackageInput, target: Target, shipped: ShippedFile, source: ShippedFile
) -> bool:
    """An ELF of the target's machine: the Android linker maps it, so it must fit 16 KB pages.
    Another machine's file (a Hexagon Skel) is never mapped by it and is exempt."""
    path = package.stage / source.path
    try:
        if sniff_format(path) != "elf":
            return False
    except OSError:
        raise stage_changed(package, path, _COMPONENT) from None
    # a release reads every library afresh; a build reuses what it read of these bytes before
    info = inspect_known(path, source.sha256, name=shipped.path, memo=package.memo)
    if info.machine != target.machine:
        return False
    problem = alignment_problem(info, target.page_align) if target.page_align else None
    if problem:
        raise PackagingError(
            f"{shipped.path} is not aligned for {target.page_align // 1024} KB pages: {problem}",
            component=_COMPONENT,
            target=package.target,
            file=shipped.path,
            fix="use a build linked with -Wl,-z,max-page-size=16384 (the NDK's default since "
            "r28), or drop the library from the recipe; Android 15+ devices with 16 KB pages "
            "refuse to load it",
        )
    return True


def _check_entries(
    package: PackageInput, abi: str, index: Mapping[str, Any], placements: Sequence[Placement]
) -> None:
    """Each runtime's entry must be a library RuntimeLoader can System.loadLibrary."""
    libraries = {p.dest for p in placements if p.kind == "library"}
    for runtime in _runtimes(index):
        entry = str(runtime.get("entry", ""))
        if f"{_MAIN}/jniLibs/{abi}/{entry}" not in libraries:
            raise PackagingError(
                f"runtime {runtime.get('name')!r}: its entry {entry!r} is not an {abi} library "
                "of the stage, so RuntimeLoader could not load it",
                component=_COMPONENT,
                target=package.target,
                file=str(package.stage / INDEX_NAME),
                fix="check the recipe's entry for this target, then rebuild the stage",
            )


def _collision(package: PackageInput, dest: str, first: str, second: str) -> PackagingError:
    return PackagingError(
        f"{first} and {second} would both be packaged as {dest}, with different bytes "
        "(Android has one library directory per ABI)",
        component=_COMPONENT,
        target=package.target,
        file=second,
        fix="rename one of them in its recipe ([[targets.<t>.rename]]; the SONAME follows)",
    )


def _unplaceable(
    package: PackageInput, shipped: ShippedFile, why: str, fix: str | None = None
) -> PackagingError:
    return PackagingError(
        f"{shipped.path} cannot go into the APK: {why}",
        component=_COMPONENT,
        target=package.target,
        file=shipped.path,
        fix=fix or "rebuild the stage (invoke build) instead of editing it",
    )


# --- integrity ---------------------------------------------------------------------------------


def _verify_stage(package: PackageInput) -> None:
    """Every file is what the build staged, before anything is read or written."""
    for shipped in package.files:
        if shipped.link_to is None and shipped.path != LOADER_NAME:
            check_staged(package, shipped, _COMPONENT)


def _check_shared(
    package: PackageInput,
    out: Path,
    placements: Iterable[Placement],
    generated: Mapping[str, bytes],
) -> None:
    """A shared file another ABI already wrote must be the same bytes this one would write."""
    wanted: dict[str, tuple[int, str]] = {
        p.dest: (p.source.size, p.source.sha256) for p in placements if p.shared
    }
    for relative, data in generated.items():
        wanted[relative] = (len(data), _sha256(data))
    for relative, (size, sha256) in sorted(wanted.items()):
        path = out / relative
        if not path.is_file():
            continue
        if path.stat().st_size == size and sha256_file(path) == sha256:
            continue
        raise PackagingError(
            f"{relative} is shared by every ABI, and {package.target} would write it with "
            "different bytes from another ABI's",
            component=_COMPONENT,
            target=package.target,
            file=str(path),
            fix="ship the same licence texts and models on every Android target (the same "
            "recipes and versions), and package every ABI with the same ortbundle and product "
            "manifest; then rebuild",
        )


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- writing -----------------------------------------------------------------------------------


def _clear_abi(out: Path, abi: str) -> None:
    """This ABI's own files go: a rerun with fewer libraries leaves none of the old behind.
    (Links are unlinked; the staged files they share an inode with stay.)"""
    for relative in (f"{_MAIN}/jniLibs/{abi}", f"jniLibs/{abi}", f"{_ASSETS}/{abi}"):
        if (out / relative).is_dir():
            shutil.rmtree(out / relative)
    (out / f"size-report.{abi}.json").unlink(missing_ok=True)


def _make_dirs(out: Path, directory: Path) -> None:
    """Create the missing directories under `out` with a fixed mode, whatever the umask."""
    missing = []
    while directory != out and not directory.is_dir():
        missing.append(directory)
        directory = directory.parent
    for path in reversed(missing):
        path.mkdir(exist_ok=True)
        path.chmod(_DIR_MODE)


def _place(source: Path, dest: Path, placed: set[Path]) -> None:
    """A hard link to the staged file (its mode is already ours), else a copy; renamed into
    place so a reader never sees half a file."""
    if dest.is_file() and dest.samefile(source):
        return
    # no mode: a link shares the stage's inode; the directory is flushed by the caller
    with atomic_output(dest, tag="apk", synced=placed) as tmp:
        linked = False
        if stat.S_IMODE(source.stat().st_mode) == _FILE_MODE:
            try:
                os.link(source, tmp)
                linked = True
            except OSError:
                pass
        if not linked:
            shutil.copyfile(source, tmp)
            tmp.chmod(_FILE_MODE)


def _write_bytes(dest: Path, data: bytes, placed: set[Path] | None = None) -> str:
    atomic_write(dest, data, mode=_FILE_MODE, synced=placed)
    return _sha256(data)


# --- the oldest Android the libraries run on ---------------------------------------------------


def _min_sdk(package: PackageInput) -> int:
    """The module's minSdk: the tool's floor, or the product's `[system] android_api` if higher.
    A function of the product alone, so every ABI writes the same build.gradle.kts."""
    return max(_MIN_SDK, package.supports.android_api or 0)


def _check_api_level(package: PackageInput) -> None:
    """A library built for (or importing bionic symbols of) a newer API level than the
    module's minSdk would fail to load on the devices in between: refuse it, unless the
    product says on_newer = "warn" (then _api_note says so)."""
    needed = package.system.android_api
    if needed is None or int(needed.version) <= _min_sdk(package):
        return
    if package.supports.on_newer == "warn":
        return
    raise ClosureError(
        f"the libraries need Android API {needed.version} ({needed.why}), above the module's "
        f"minSdk {_min_sdk(package)}",
        component=_COMPONENT,
        target=package.target,
        fix=f"set [system] android_api = {needed.version} in the product manifest (the "
        "module's minSdk follows it), or pin a runtime built for an older API level",
    )


def _api_note(package: PackageInput, abi: str) -> tuple[str, ...]:
    if package.system.empty:
        return ()
    needed = package.system.android_api
    line = f"{abi}: runs on {package.system.describe()}; module minSdk {_min_sdk(package)}"
    if needed is not None and int(needed.version) > _min_sdk(package):
        line += f" — WARNING: below the API level the libraries need ({needed.why})"
    return (line,)


# --- the generated module files ----------------------------------------------------------------


def _generated(package: PackageInput) -> dict[str, bytes]:
    """The shared module files: a function of the product and targets.toml alone, so every
    ABI (and every runner of a release) writes the same bytes."""
    namespace = package.settings.android_namespace
    context = {
        "namespace": namespace,
        "compile_sdk": _COMPILE_SDK,
        "min_sdk": _min_sdk(package),
        "use_legacy_packaging": "true" if _USE_LEGACY_PACKAGING else "false",
        "no_compress": NO_COMPRESS,
        "fastrpc": _FASTRPC,
        "native_libraries": _native_libraries(package),
        "schema": SCHEMA,
        "override_property": override_property(package.product),
    }
    filters = {"kotlin_string": _kotlin_string, "java_string": _java_string}
    java = f"{_MAIN}/java/{namespace.replace('.', '/')}/RuntimeLoader.java"
    templates = {
        f"{_MODULE}/build.gradle.kts": "apk/build.gradle.kts.j2",
        f"{_MAIN}/AndroidManifest.xml": "apk/AndroidManifest.xml.j2",
        java: "apk/RuntimeLoader.java.j2",
    }
    return {
        relative: render(
            template, context, filters, memo=package.memo, overrides=package.templates
        ).encode("utf-8")
        for relative, template in templates.items()
    }


def _android_groups(package: PackageInput) -> tuple[ExternalGroup, ...]:
    """The external groups of every Android target the module packages: the build's (tool
    data with the recipe and product overlays), else targets.toml's."""
    if package.android_groups:
        return package.android_groups
    return tuple(g for t in CHANNEL_TARGETS["apk"] for g in get_target(t).externals)


def _native_libraries(package: PackageInput) -> list[dict[str, str]]:
    """Every library beyond the NDK's that an Android target lets a runtime need, for
    <uses-native-library>. From the targets' groups, not from what this ABI's stage happens to
    need: the manifest is shared by every ABI (and every runner of a release).

    android:required is "false" for all of them: "true" makes the app uninstallable on a device
    without the library, while RuntimeLoader skips the runtime that needs it and picks the next
    one. An app that cannot work without it sets "true" in its own manifest (the merger keeps
    the app's attribute with tools:replace="android:required")."""
    found: dict[str, dict[str, str]] = {}
    for group in _android_groups(package):
        if group.kind == "system":
            continue
        for name in group.names:
            if name in _NDK_LIBRARIES or _GLOB.search(name) or name in found:
                continue
            if not _NATIVE_NAME.fullmatch(name):
                raise ConfigError(
                    f"external library name {name!r} (group {group.group}) is not a file name",
                    component=_COMPONENT,
                    target=package.target,
                    fix="name one library file per entry: letters, digits and ._+-",
                )
            found[name] = {"name": name, "required": "false", "group": group.group}
    return [found[name] for name in sorted(found)]


def _check_native_libraries(package: PackageInput) -> None:
    """Every library beyond the NDK this ABI's runtimes need is declared in the manifest; one
    matched by a glob cannot be (the element names one file), so it is an error."""
    declared = {entry["name"] for entry in _native_libraries(package)}
    for external in package.externals:
        if external.kind == "system" or external.name in _NDK_LIBRARIES:
            continue
        if external.name not in declared:
            raise ConfigError(
                f"{external.name} (external group {external.group}) is needed by "
                f"{', '.join(external.needed_by)} but cannot be declared in the module's "
                "AndroidManifest.xml: Android 12+ hides a non-NDK library from an app that does "
                "not declare it by its exact name",
                component=_COMPONENT,
                target=package.target,
                fix=f"name {external.name} exactly (no glob) in the {external.group!r} "
                "[[externals]] group",
            )


def aligned_apk_command(unaligned: str, aligned: str) -> str:
    """The zipalign command that 16 KB-aligns an APK's uncompressed libraries with the
    zipalign every build-tools version has (-P needs 35.0.0-rc3 or later)."""
    return f"zipalign -f {_PAGE_16K} {unaligned} {aligned}"


def _kotlin_list(values: Sequence[str]) -> str:
    return ", ".join(_kotlin_string(v) for v in values)


def override_property(product: str) -> str:
    """The Android system property naming a runtime to force: `adb shell setprop <it> <name>`."""
    return f"debug.{re.sub(r'[^a-z0-9_]', '_', product.lower())}.ort_runtime"


def _kotlin_string(value: str) -> str:
    return '"' + "".join(_KOTLIN_ESCAPES.get(c, c) for c in _java_escaped(value)) + '"'


_KOTLIN_ESCAPES = {"$": "\\$"}


def _java_string(value: str) -> str:
    return '"' + _java_escaped(value) + '"'


def _java_escaped(value: str) -> str:
    out = []
    for char in value:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif " " <= char <= "~":
            out.append(char)
        else:
            out.extend(f"\\u{unit:04x}" for unit in _utf16(char))
    return "".join(out)


def _utf16(char: str) -> list[int]:
    data = char.encode("utf-16-be")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


# --- notes -------------------------------------------------------------------------------------


def _usage_notes(
    package: PackageInput, index: Mapping[str, Any], placements: Sequence[Placement], abi: str
) -> list[str]:
    notes = []
    for runtime in _runtimes(index):
        owner = f"runtimes/{runtime['name']}"
        payload = sorted(
            PurePosixPath(p.dest).name
            for p in placements
            if p.kind == "asset" and owner in p.owners
        )
        if payload:
            dsp = "QNNExecutionProvider" in runtime.get("providers", [])
            notes.append(
                f"{abi}: {runtime['name']} ships "
                f"{count(len(payload), 'payload file', 'payload files')} "
                f"({', '.join(payload)}) as assets under {_ASSETS}/{abi}/{runtime['name']}/; "
                "RuntimeLoader copies them to the app's files directory before loading it"
                + (" and puts that directory first on ADSP_LIBRARY_PATH" if dsp else "")
            )
    if any(p.owners and p.owners[0].startswith("plugins/") for p in placements):
        notes.append(
            f"{abi}: plugin EP libraries ship in jniLibs, but RuntimeLoader does not "
            "register them yet"
        )
    namespace = package.settings.android_namespace
    notes += [
        f'add {_MODULE}/ to the Gradle build (include(":{_MODULE}") in settings.gradle.kts, '
        f'implementation(project(":{_MODULE}")) in the app; the root build names the Android '
        f"Gradle plugin's version) and call {namespace}.RuntimeLoader.load(context) once at "
        "start-up, before anything opens ONNX Runtime; jniLibs/<abi>/ holds the same "
        "libraries for scripts that assemble an APK directly",
        "the app module decides how the APK stores libraries and assets: keep "
        'useLegacyPackaging = false, keepDebugSymbols += "**/*.so" and '
        f"androidResources {{ noCompress += {_kotlin_list(NO_COMPRESS)} }} there too, so the "
        "libraries stay uncompressed, 16 KB-aligned and byte for byte as verified, and the "
        "models can be mapped (AssetManager.openFd); the Android Gradle plugin aligns "
        "uncompressed libraries to 16 KB inside the APK from version 8.5.1 on (older versions "
        "align them to 4 KB, which Android 15+ devices with 16 KB pages refuse): use 8.5.1 or "
        f"newer; for an APK assembled directly, align it before apksigner signs it: "
        f"{aligned_apk_command('unaligned.apk', 'aligned.apk')} (any build-tools' zipalign; "
        "it aligns every uncompressed entry to 16 KB), or with build-tools 35.0.0-rc3 and "
        "later, which added -P, zipalign -P 16 -f 4 unaligned.apk aligned.apk",
        f"paths in models.json (and NOTICE) are relative to the bundle root: "
        f"{_ASSETS.removeprefix(_MAIN + '/')}/ in the APK, one level above models.json "
        f"(RuntimeLoader.modelAsset(path) gives the asset path)",
        f"to force a runtime on a test device: adb shell setprop "
        f"{override_property(package.product)} <runtime name>",
    ]
    return notes
