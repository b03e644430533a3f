"""Flatpak channel: a flatpak-builder module (and a standalone app manifest) for the Linux stage.

Files written (all pure functions of the PackageInput):

- `<package_name>-<version>.tar.gz` — the stage, via the shared reproducible tarball;
- `<package_name>.module.json` — one `simple` module that installs the whole stage to
  `/app/lib/<package_name>/` from that tarball (an `archive` source pinned by `sha256`, referred
  to by a path relative to the module file, so the two travel together). An application adds
  it with `"modules": ["path/to/<package_name>.module.json"]`;
- `<app-id>.json` — a standalone app manifest (id, runtime, SDK and command from the product's
  [packaging] settings) that includes the module file the same way, and asks for `/dev/dri`
  when a GPU rung is shipped (`finish-args` belongs to the app, never to a module).

Licence texts and NOTICE are installed twice: inside `/app/lib/<package_name>/` (the stage goes
in whole, as every channel ships it) and under `/app/share/licenses/$FLATPAK_ID/<package_name>/`,
the place flatpak-builder's own `license-files` uses (`share/licenses/<app id>/<module name>`).
`$FLATPAK_ID` rather than our configured id, because the module is meant to be included in
someone else's app. The `licenses/` layout is kept there so NOTICE's relative paths still resolve.

The JSON is written with `json.dumps` from dicts built in Flatpak's conventional key order (id,
runtime, sdk, command, finish-args, modules; name, buildsystem, options, commands, sources), not
sorted: insertion order is already deterministic and reads like upstream manifests.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any

from ortbundle._core.errors import ConfigError, IntegrityError
from ortbundle._core.fsio import atomic_write, sha256_file
from ortbundle.channels import CHANNEL_TARGETS, ChannelOutput, PackageInput
from ortbundle.channels.tarball import write_stage_tarball
from ortbundle.config.targets import get_target
from ortbundle.stage.closure import ExternalLibrary
from ortbundle.stage.index_json import INDEX_NAME

__all__ = ["FlatpakChannel", "check_app_id", "check_manifest"]

_COMPONENT = "flatpak"
_PREFIX = "/app"
# Flatpak's flatpak_is_valid_name(): at most 255 bytes, at least three dot-separated elements;
# an element starts with [A-Za-z_] and continues with [A-Za-z0-9_]; only the last element may
# also use '-' (anywhere, including first).
_NAME_MAX = 255
_ELEMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LAST_ELEMENT = re.compile(r"[A-Za-z_-][A-Za-z0-9_-]*")
# flatpak_is_valid_branch(): [A-Za-z0-9_-] first, then also '.'.
_BRANCH = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")
# Used as a module name, a directory and a file name, and inside build-commands: keep it plain.
_FILE_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_COMMAND = re.compile(r"[^\s\x00-\x1f\x7f]+")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_LICENSE_TOPS = ("NOTICE", "licenses")
_MAX_INCLUDE_DEPTH = 8


def check_app_id(app_id: str, *, setting: str = "flatpak_app_id") -> None:
    """Refuse a name Flatpak itself would refuse, before it reaches a manifest or a path."""
    problem = _name_problem(app_id)
    if problem:
        raise ConfigError(
            f"{setting} {app_id!r} is not a valid Flatpak name: {problem}",
            component=_COMPONENT,
            fix="use reverse-DNS with at least three elements, e.g. org.example.App "
            "(letters, digits, '_'; '-' only in the last element; no element starts with a digit)",
        )


def _name_problem(name: str) -> str | None:
    if not name:
        return "it is empty"
    if len(name.encode("utf-8")) > _NAME_MAX:
        return f"it is longer than {_NAME_MAX} bytes"
    elements = name.split(".")
    if len(elements) < 3:
        return "it needs at least three dot-separated elements"
    for index, element in enumerate(elements):
        last = index == len(elements) - 1
        if not (_LAST_ELEMENT if last else _ELEMENT).fullmatch(element):
            if not element:
                return "it has an empty element"
            if "-" in element and not last:
                return "only the last element may contain '-'"
            return f"element {element!r} must start with a letter or '_' and hold only [A-Za-z0-9_]"
    return None


def check_manifest(
    manifest: object, base: Path | None = None, known: Mapping[Path, str] | None = None
) -> None:
    """Refuse any source not pinned by a well-formed sha256, in every module, however nested.

    `manifest` is an app manifest or a module file. Included files (a string in `modules` or
    `sources`) are followed relative to `base` — the directory of the file `manifest` came
    from — exactly as flatpak-builder resolves them; without `base` they cannot be checked and
    are refused. With `base`, a local `path` source is also hashed and compared.
    """
    if not isinstance(manifest, Mapping):
        raise _bad_manifest("a manifest must be a JSON object")
    known = known or {}
    if "name" in manifest:
        _check_module(manifest, base, "module file", 0, known)
        return
    modules = manifest.get("modules")
    if not isinstance(modules, list):
        raise _bad_manifest("the manifest has no 'modules' list")
    _check_modules(modules, base, "manifest", 0, known)


def _check_modules(
    modules: list[Any], base: Path | None, where: str, depth: int, known: Mapping[Path, str]
) -> None:
    for index, module in enumerate(modules):
        label = f"{where} → modules[{index}]"
        if isinstance(module, str):
            loaded, inner = _include(module, base, label, depth)
            _check_module(loaded, inner, f"{label} ({module})", depth + 1, known)
        elif isinstance(module, Mapping):
            _check_module(module, base, label, depth, known)
        else:
            raise _bad_manifest(f"{label} is neither a module object nor a file name")


def _check_module(
    module: object, base: Path | None, where: str, depth: int, known: Mapping[Path, str]
) -> None:
    if not isinstance(module, Mapping):
        raise _bad_manifest(f"{where} is not a module object")
    name = module.get("name")
    label = f"{where} (module {name!r})"
    sources = module.get("sources", [])
    if not isinstance(sources, list):
        raise _bad_manifest(f"{label}: 'sources' is not a list")
    for index, source in enumerate(sources):
        source_label = f"{label} → sources[{index}]"
        if isinstance(source, str):
            loaded, inner = _include(source, base, source_label, depth)
            for sub_index, sub in enumerate(loaded if isinstance(loaded, list) else [loaded]):
                _check_source(sub, inner, f"{source_label} ({source})[{sub_index}]", known)
        else:
            _check_source(source, base, source_label, known)
    nested = module.get("modules", [])
    if not isinstance(nested, list):
        raise _bad_manifest(f"{label}: 'modules' is not a list")
    _check_modules(nested, base, label, depth, known)


def _check_source(source: object, base: Path | None, where: str, known: Mapping[Path, str]) -> None:
    if not isinstance(source, Mapping):
        raise _bad_manifest(f"{where} is not a source object")
    digest = source.get("sha256")
    if not isinstance(digest, str) or not digest:
        raise IntegrityError(
            f"Flatpak source {where} (type {source.get('type')!r}) has no sha256",
            component=_COMPONENT,
            fix="pin every source with its sha256 so flatpak-builder checks the bytes",
        )
    if not _SHA256.fullmatch(digest):
        raise IntegrityError(
            f"Flatpak source {where} has a malformed sha256 {digest!r}",
            component=_COMPONENT,
            fix="write the digest as 64 lowercase hexadecimal characters",
        )
    path = source.get("path")
    if base is not None and isinstance(path, str) and "url" not in source:
        local = base / path
        try:
            # a file the channel has just written and hashed while writing is not read again
            actual = known.get(local) or sha256_file(local)
        except OSError as exc:
            raise IntegrityError(
                f"Flatpak source {where} names a file that cannot be read",
                component=_COMPONENT,
                file=path,
                fix="keep the archive beside the module file that refers to it",
            ) from exc
        if actual != digest:
            raise IntegrityError(
                f"Flatpak source {where} does not match its sha256 "
                f"(expected {digest}, found {actual})",
                component=_COMPONENT,
                file=path,
                fix="regenerate the Flatpak channel instead of editing its files",
            )


def _include(name: str, base: Path | None, where: str, depth: int) -> tuple[Any, Path]:
    if base is None:
        raise _bad_manifest(f"{where} includes {name!r}, which cannot be checked without a base")
    if depth >= _MAX_INCLUDE_DEPTH:
        raise _bad_manifest(f"{where}: includes nested deeper than {_MAX_INCLUDE_DEPTH}")
    if not name.endswith(".json"):
        raise _bad_manifest(f"{where} includes {name!r}: only JSON includes are checked")
    path = base / name
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _bad_manifest(f"{where} includes {name!r}, which is not readable JSON") from exc
    return loaded, path.parent


def _bad_manifest(message: str) -> IntegrityError:
    return IntegrityError(
        message, component=_COMPONENT, fix="regenerate the Flatpak channel instead of editing it"
    )


class FlatpakChannel:
    """Writes the tarball, the module file and the standalone app manifest for one Linux stage
    (x86_64 or aarch64: the module builds only on its own arch, `only-arches`)."""

    name = "flatpak"
    target = CHANNEL_TARGETS["flatpak"][0]  # one of several: generate() takes any of them

    def generate(self, package: PackageInput, out: Path) -> ChannelOutput:
        """Write the channel's files into `out` and check what was written."""
        settings = package.settings
        _check_settings(package)
        left_out = _left_out(package)
        out.mkdir(parents=True, exist_ok=True)
        stem = f"{settings.package_name}-{package.version}"
        tarball = out / f"{stem}.tar.gz"
        module_file = out / f"{settings.package_name}.module.json"
        app_file = out / f"{settings.flatpak_app_id}.json"
        written = [tarball, module_file, app_file]
        index: tuple[str, str] | None = None
        shipped = package
        if left_out:
            shipped, index_data = _without(package, left_out)
            atomic_write(out / INDEX_NAME, index_data)
            written.append(out / INDEX_NAME)
            index = (INDEX_NAME, sha256_file(out / INDEX_NAME))
        digest = write_stage_tarball(shipped, tarball, stem)
        module = _module(shipped, tarball.name, digest, index)
        app = _app_manifest(shipped, module_file.name)
        atomic_write(module_file, _dumps(module))
        atomic_write(app_file, _dumps(app))
        # Check what is on disk, following the include to the module and the tarball.
        # The tarball's digest was computed as it was written (or is the memo's, trusted by
        # its stat record): passed in, so the 100 MB archive is not read a second time.
        check_manifest(json.loads(app_file.read_bytes()), base=out, known={tarball: digest})
        digests = {tarball.name: digest} | (dict([index]) if index else {})
        return ChannelOutput(
            channel=self.name,
            directory=out,
            files=tuple(sorted(written)),
            notes=_notes(shipped, module_file.name, tarball.name)
            + _sandbox_notes(package, left_out),
            digests=digests,
        )


# --- what the sandbox cannot provide ---------------------------------------------------------


def _owner(package: PackageInput, user: str) -> str:
    """The runtime (its name) a staged path belongs to, else its top two parts (a plugin)."""
    for runtime in package.runtimes:
        if user.startswith(runtime.directory.rstrip("/") + "/"):
            return runtime.name
    return "/".join(PurePosixPath(user).parts[:2])


def _label(package: PackageInput, owner: str) -> str:
    return next((r.label for r in package.runtimes if r.name == owner), owner)


def _host_only(package: PackageInput, *, optional: bool) -> dict[str, list[ExternalLibrary]]:
    """Runtime name (or plugin path) -> the host-only externals (`sandbox = false`) it needs,
    required or optional ones, the runtimes first in their order."""
    found: dict[str, list[ExternalLibrary]] = {r.name: [] for r in package.runtimes}
    for external in package.externals:
        if external.sandbox or external.optional != optional:
            continue
        for user in external.needed_by:
            needs = found.setdefault(_owner(package, user), [])
            if external not in needs:
                needs.append(external)
    return {name: externals for name, externals in found.items() if externals}


def _libraries(externals: list[ExternalLibrary]) -> str:
    return ", ".join(f"{e.name} ({e.install or e.note or e.group})" for e in externals)


def _left_out(package: PackageInput) -> tuple[str, ...]:
    """The runtimes the Flatpak leaves out (`[packaging] flatpak_skip_runtimes`); a runtime
    that needs a host-only library and is not among them is refused, all of them at once."""
    names = [r.name for r in package.runtimes]
    skip = package.settings.flatpak_skip_runtimes
    unknown = [name for name in skip if name not in names]
    if unknown:
        raise ConfigError(
            f"flatpak_skip_runtimes names {', '.join(unknown)}, which the {package.target} "
            f"stage does not ship (it ships: {', '.join(names) or 'nothing'})",
            component=_COMPONENT,
            target=package.target,
            fix="name runtimes of the product's [product] runtimes in [packaging] "
            "flatpak_skip_runtimes",
        )
    refused = {
        name: externals
        for name, externals in _host_only(package, optional=False).items()
        if name not in skip
    }
    if refused:
        lines = "; ".join(
            f"{'runtime ' if name in names else ''}{name} needs {_libraries(externals)}"
            for name, externals in refused.items()
        )
        listed = ", ".join(f'"{name}"' for name in [*skip, *refused] if name in names)
        raise ConfigError(
            f"the Flatpak sandbox cannot provide host-only libraries (sandbox = false): {lines}; "
            "the runtime could never work inside it",
            component=_COMPONENT,
            target=package.target,
            fix=f"drop the flatpak channel for this product ([product] channels), drop the "
            f"runtime from the product, or leave it out of the Flatpak only: [packaging] "
            f"flatpak_skip_runtimes = [{listed}]",
        )
    return tuple(name for name in names if name in skip)


def _without(package: PackageInput, left_out: tuple[str, ...]) -> tuple[PackageInput, bytes]:
    """The package without the runtimes left out, and its runtimes.json without them (the
    module installs that one over the stage's, which the tarball then does not carry)."""
    gone = [r.directory.rstrip("/") + "/" for r in package.runtimes if r.name in left_out]
    files = tuple(
        f for f in package.files if f.path != INDEX_NAME and not f.path.startswith(tuple(gone))
    )
    runtimes = tuple(r for r in package.runtimes if r.name not in left_out)
    externals = tuple(
        replace(e, needed_by=users)
        for e in package.externals
        if (users := tuple(u for u in e.needed_by if not u.startswith(tuple(gone))))
    )
    try:
        index = json.loads((package.stage / INDEX_NAME).read_bytes())
    except (OSError, ValueError) as exc:
        raise IntegrityError(
            f"the stage's {INDEX_NAME} cannot be read to leave runtimes out of the Flatpak",
            component=_COMPONENT,
            target=package.target,
            file=str(package.stage / INDEX_NAME),
            fix="rebuild the stage (invoke build) instead of editing it",
        ) from exc
    if isinstance(index, dict) and isinstance(index.get("runtimes"), list):
        index["runtimes"] = [
            r for r in index["runtimes"] if not (isinstance(r, dict) and r.get("name") in left_out)
        ]
    data = (json.dumps(index, indent=2, sort_keys=True) + "\n").encode("utf-8")
    return replace(package, files=files, runtimes=runtimes, externals=externals), data


def _sandbox_notes(package: PackageInput, left_out: tuple[str, ...]) -> tuple[str, ...]:
    notes = []
    required = _host_only(package, optional=False)
    for name in left_out:
        why = (
            f": it needs {_libraries(required[name])}, which the sandbox cannot provide, so it "
            "is useless there"
            if name in required
            else ""
        )
        notes.append(
            f"runtime {name} is left out of the Flatpak ([packaging] flatpak_skip_runtimes){why}"
        )
    for name, externals in _host_only(package, optional=True).items():
        if name in left_out:
            continue
        notes.append(
            f"the {_label(package, name)} rung that uses {_libraries(externals)} will not work "
            "in the Flatpak sandbox (a host-only library); the runtime works there without it"
        )
    return tuple(notes)


def _check_settings(package: PackageInput) -> None:
    if package.target not in CHANNEL_TARGETS["flatpak"] or _arch(package) is None:
        raise ConfigError(
            f"the Flatpak channel packages {' or '.join(CHANNEL_TARGETS['flatpak'])}, "
            f"not {package.target}",
            component=_COMPONENT,
            target=package.target,
        )
    settings = package.settings
    check_app_id(settings.flatpak_app_id)
    check_app_id(settings.flatpak_runtime, setting="flatpak_runtime")
    check_app_id(settings.flatpak_sdk, setting="flatpak_sdk")
    plain = (
        ("package_name", settings.package_name, _FILE_WORD, "letters, digits and ._+- only"),
        ("version", package.version, _FILE_WORD, "letters, digits and ._+- only"),
        (
            "flatpak_runtime_version",
            settings.flatpak_runtime_version,
            _BRANCH,
            "a Flatpak branch: letters, digits and ._- not starting with '.'",
        ),
        (
            "flatpak_command",
            settings.flatpak_command,
            _COMMAND,
            "one program name or path, no spaces or arguments (wrap those in a script)",
        ),
    )
    for setting, value, pattern, rule in plain:
        if not pattern.fullmatch(value):
            raise ConfigError(
                f"{setting} {value!r} cannot be used in a Flatpak manifest",
                component=_COMPONENT,
                target=package.target,
                fix=rule,
            )


def _arch(package: PackageInput) -> str | None:
    """Flatpak's name for the target's machine (data/targets.toml's package_arch)."""
    return get_target(package.target).arch_for("flatpak")


def _top_level(package: PackageInput) -> list[str]:
    return sorted({PurePosixPath(f.path).parts[0] for f in package.files})


def _module(
    package: PackageInput, tarball: str, digest: str, index: tuple[str, str] | None = None
) -> dict[str, Any]:
    name = package.settings.package_name  # checked: [A-Za-z0-9._+-] only, safe unquoted
    lib_dir = f"{_PREFIX}/lib/{name}/"
    # The id of the app the module is built into; `:?` fails the build rather than install
    # into share/licenses// should a builder not set it.
    license_dir = f'"{_PREFIX}/share/licenses/${{FLATPAK_ID:?}}/{name}/"'
    tops = sorted({*_top_level(package), *([index[0]] if index else [])})
    license_tops = [top for top in _LICENSE_TOPS if top in tops]
    commands = [
        f"install -d {lib_dir}",
        f"cp -a {' '.join(shlex.quote(top) for top in tops)} {lib_dir}",
    ]
    if license_tops:
        commands += [
            f"install -d {license_dir}",
            f"cp -a {' '.join(license_tops)} {license_dir}",
        ]
    return {
        "name": name,
        # the stage's binaries are of one machine: a build for another arch skips the module
        "only-arches": [_arch(package)],
        "buildsystem": "simple",
        "build-options": {"no-debuginfo": True, "strip": False},
        "build-commands": commands,
        "sources": [{"type": "archive", "path": tarball, "sha256": digest}]
        + ([{"type": "file", "path": index[0], "sha256": index[1]}] if index else []),
        "x-ortbundle": {
            "product": package.product,
            "version": package.version,
            "description": package.description,
            "url": package.url,
            "licenses": list(package.licenses),
            "app-finish-args": _finish_args(package),
        },
    }


def _finish_args(package: PackageInput) -> list[str]:
    return ["--device=dri"] if any(r.needs_gpu for r in package.runtimes) else []


def _app_manifest(package: PackageInput, module_file: str) -> dict[str, Any]:
    settings = package.settings
    app: dict[str, Any] = {
        "id": settings.flatpak_app_id,
        "runtime": settings.flatpak_runtime,
        "runtime-version": settings.flatpak_runtime_version,
        "sdk": settings.flatpak_sdk,
        "command": settings.flatpak_command,
    }
    finish_args = _finish_args(package)
    if finish_args:
        app["finish-args"] = finish_args
    app["modules"] = [module_file]
    return app


def _dumps(obj: Mapping[str, Any]) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=True) + "\n").encode("ascii")


def _notes(package: PackageInput, module_file: str, tarball: str) -> tuple[str, ...]:
    name = package.settings.package_name
    notes = [
        f'add "{module_file}" to your app\'s manifest ("modules": ["path/to/{module_file}"]) '
        f"and keep {tarball} beside it; it installs the stage to {_PREFIX}/lib/{name}/ and the "
        f"licence texts and NOTICE to {_PREFIX}/share/licenses/$FLATPAK_ID/{name}/",
        "the module sets strip: false and no-debuginfo: true so the libraries ship byte for "
        "byte as staged; keep them set if you copy the module into your own manifest",
    ]
    notes.append(
        f"{package.settings.flatpak_app_id}.json is a starting point for an app: its command "
        f"{package.settings.flatpak_command!r} must be installed by the app's own module "
        "(flatpak build-finish refuses a missing command)"
    )
    gpu = [r.label for r in package.runtimes if r.needs_gpu]
    if gpu:
        notes.append(
            f"add --device=dri to your app's finish-args: the GPU rungs ({', '.join(gpu)}) "
            "need /dev/dri inside the sandbox"
        )
    if any(external.group == "opencl" for external in package.externals):
        notes.append(
            "the Flatpak sandbox has no Intel OpenCL driver: the Intel GPU rung falls back to "
            "the CPU there unless the app adds an OpenCL / Intel compute-runtime extension"
        )
    return tuple(notes)
