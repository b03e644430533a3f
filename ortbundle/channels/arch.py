"""Arch Linux channel: a PKGBUILD, its .SRCINFO and the stage tarball the PKGBUILD installs.

The package installs the stage as it was built — every file with its mode, every symlink as a
symlink, nothing stripped — under /usr/lib/<pkgname>/, and copies the licence texts and NOTICE
to /usr/share/licenses/<pkgname>/. `depends`/`optdepends` come only from the external
libraries the closure found, mapped to Arch packages by data/arch.toml. The .SRCINFO is written
here, byte for byte as `makepkg --printsrcinfo` prints it, so no makepkg is needed to ship one.
"""

from __future__ import annotations

import posixpath
import re
import shlex
import tomllib
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

from ortbundle._core.errors import ConfigError, OrtbundleError
from ortbundle._core.fsio import atomic_write, sha256_file
from ortbundle._core.templating import render
from ortbundle.channels import (
    CHANNEL_TARGETS,
    ChannelOutput,
    PackageInput,
    package_directory,
    render_dependency,
)
from ortbundle.channels.openpgp import detach_sign
from ortbundle.channels.tarball import write_stage_tarball
from ortbundle.config.externals import constraints, snippet
from ortbundle.config.products import Addon
from ortbundle.config.schema import check_document
from ortbundle.config.targets import get_target
from ortbundle.licensing.attribution import ShippedFile

_DATA_FILE = "ortbundle/data/arch.toml"
_COMPONENT = "packaging:arch"
# Arch's package name rules (lowercase, as the wiki and the AUR require; makepkg's lint is laxer).
_PKGNAME = re.compile(r"[a-z0-9@_+][a-z0-9@._+-]*")
# What pkgver may hold after mapping: makepkg forbids ':', '/', '-', whitespace and non-ASCII;
# we keep to the characters vercmp orders predictably.
_PKGVER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+]*")
# Never let makepkg rewrite or drop a staged file: no stripping, no debug split, and keep what
# its tidy steps would delete by name (libtool: *.la; staticlibs: *.a beside a .so; purge:
# *.pod, .packlist; emptydirs). The positive names mean "keep"; !purge means "do not purge".
_OPTIONS = ("!strip", "!debug", "libtool", "staticlibs", "emptydirs", "!purge")
_LICENSE_DIR = "licenses"
_NOTICE = "NOTICE"
# Unicode bidirectional controls: inert to bash, but they make a PKGBUILD read differently
# from what it does.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

# makepkg's srcinfo.sh: the pkgbase section's fields, in the order it prints them.
_SRCINFO_SCALARS = ("pkgdesc", "pkgver", "pkgrel", "epoch", "url", "install", "changelog")
_SRCINFO_ARRAYS = (
    *("arch", "groups", "license", "checkdepends", "makedepends", "depends", "optdepends"),
    *("provides", "conflicts", "replaces", "noextract", "options", "backup", "source"),
    "validpgpkeys",
    *(f"{algo}sums" for algo in ("ck", "md5", "sha1", "sha224", "sha256", "sha384", "sha512")),
    "b2sums",
)


@dataclass(frozen=True)
class _GroupPackages:
    depends: tuple[str, ...]
    optdepends: tuple[tuple[str, str], ...]  # (package, reason)


@dataclass(frozen=True)
class _Entry:
    """One line of package(): install `source` (or link to `link_to`) at `dest`."""

    source: str
    dest: str
    mode: str
    link_to: str | None


class ArchChannel:
    """PKGBUILD + .SRCINFO + stage tarball for one Linux stage (x86_64, or aarch64 for Arch
    Linux ARM)."""

    name = "arch"
    target = CHANNEL_TARGETS["arch"][0]  # one of several: generate() takes any of them

    def generate(self, package: PackageInput, out: Path) -> ChannelOutput:
        """Write PKGBUILD, .SRCINFO and <pkgname>-<pkgver>.tar.gz into the empty `out`."""
        machine = get_target(package.target).arch_for(self.name)
        if package.target not in CHANNEL_TARGETS[self.name] or machine is None:
            raise OrtbundleError(
                f"the Arch channel packages the {' or '.join(CHANNEL_TARGETS[self.name])} "
                f"stage, not {package.target}",
                component=_COMPONENT,
                target=package.target,
            )
        pkgname = _pkgname(package.settings.package_name)
        pkgver, version_note = _pkgver(package.version)
        pkgrel = _pkgrel(package.settings.pkgrel)
        pkgdesc = _one_line(package.description, "description")
        for device in package.devices:  # a kernel driver: no package relation can say it
            pkgdesc += f" (needs {device.requirement()})"
        url = _url(package.url)
        licenses = _licenses(package.licenses)
        depends, optdepends, dep_notes = _dependencies(package)
        # the add-ons the product suggests: optional, never a dependency
        optdepends = (
            *optdepends,
            *(f"{n}: {_one_line(why, 'add-on description')}" for n, why in package.suggests),
        )
        lib_entries, share_entries = _layout(package.files)
        addon_notes: tuple[str, ...] = ()
        if package.addon_of is not None:
            lib_entries, addon_notes = _addon_entries(lib_entries, package.addon_of)

        out.mkdir(parents=True, exist_ok=True)
        # the channel's further targets write their own subdirectories (package_directory), at
        # the same time as this one: those are not in the way
        theirs = {package_directory(self.name, t) for t in CHANNEL_TARGETS[self.name]} - {""}
        if any(p.name not in theirs or not p.is_dir() for p in out.iterdir()):
            raise OrtbundleError(
                "the Arch packaging directory is not empty",
                component=_COMPONENT,
                target=package.target,
                file=str(out),
                fix="remove it; the build writes it afresh",
            )
        prefix = f"{pkgname}-{pkgver}"
        tarball = out / f"{prefix}.tar.gz"
        digest = write_stage_tarball(package, tarball, prefix)
        signed = _sign(package, tarball)

        rules = package.udev_rules()
        for name, text in rules.items():  # sources of their own, beside the tarball
            atomic_write(out / name, text)
        scalars = {"pkgver": pkgver, "pkgrel": pkgrel, "pkgdesc": pkgdesc, "url": url}
        arrays: dict[str, Sequence[str]] = {
            "arch": (machine,),
            "license": licenses,
            "depends": depends,
            "optdepends": optdepends,
            "options": _OPTIONS,
            "source": (tarball.name, *(p.name for p in signed[:1]), *rules),
            # a signature is checked by gpg against validpgpkeys, not by a digest
            "sha256sums": (
                digest,
                *("SKIP" for _ in signed[:1]),
                *(sha256_file(out / name) for name in rules),
            ),
            "validpgpkeys": (package.openpgp.fingerprint,) if package.openpgp else (),
        }
        pkgbuild = render(
            "PKGBUILD.j2",
            {
                "pkgname": pkgname,
                # an add-on installs into the main package's directory, where the main
                # package's loader reads the add-on's runtimes.d/ fragment
                "lib_name": package.addon_of.package_name if package.addon_of else "",
                **scalars,
                **arrays,
                "prefix": prefix,
                "lib_dirs": directories_of(e.dest for e in lib_entries),
                "lib_entries": lib_entries,
                "share_dirs": directories_of(e.dest for e in share_entries),
                "share_entries": share_entries,
                "udev_rules": sorted(rules),
            },
            {"bash": _bash_quote},
            memo=package.memo,
            overrides=package.templates,
        )
        atomic_write(out / "PKGBUILD", pkgbuild)
        extra = _install_script(package, pkgbuild, out)
        if extra is not None:
            scalars["install"] = extra.name
        atomic_write(out / ".SRCINFO", _srcinfo(pkgname, scalars, arrays))
        extra_files = (
            *(out / name for name in sorted(rules)),
            *(() if extra is None else (extra,)),
            *signed,
        )
        notes = (
            *version_note,
            *dep_notes,
            *addon_notes,
            f"the PKGBUILD's source is the local {tarball.name}: ship it beside the PKGBUILD "
            "(an AUR package needs it at a URL instead)",
            *_signed_note(package, tarball.name),
        )
        return ChannelOutput(
            channel=self.name,
            directory=out,
            files=tuple(sorted((out / "PKGBUILD", out / ".SRCINFO", tarball, *extra_files))),
            notes=notes,
            digests={tarball.name: digest},
            signers={tarball.name: package.openpgp.signer} if package.openpgp else {},
        )


def _sign(package: PackageInput, tarball: Path) -> tuple[Path, ...]:
    """<tarball>.sig, a detached signature by the configured OpenPGP key, and the public key
    beside it; nothing without a key."""
    key = package.openpgp
    if key is None:
        return ()
    signature = tarball.with_name(f"{tarball.name}.sig")
    detach_sign(key, tarball, signature)
    public = tarball.with_name(key.public_name)
    atomic_write(public, key.public_armored)
    return signature, public


def _signed_note(package: PackageInput, tarball: str) -> tuple[str, ...]:
    """Who signed the source (a build without a key says so once, for every Linux output)."""
    key = package.openpgp
    if key is None:
        return ()
    return (
        f"{tarball}.sig: signed by OpenPGP key {key.fingerprint} (validpgpkeys); users import "
        f"{key.public_name} (gpg --import) before makepkg --verifysource",
    )


_INSTALL = re.compile(r"^install=(.*)$", re.MULTILINE)


def _install_script(package: PackageInput, pkgbuild: str, out: Path) -> Path | None:
    """The install script a project's PKGBUILD.j2 names (`install=name.install`), copied from
    beside that template into `out`, where makepkg looks for it; .SRCINFO then names it too.
    The built-in PKGBUILD names none."""
    override = package.templates.get("PKGBUILD.j2")
    found = _INSTALL.findall(pkgbuild)
    if override is None or not found:
        return None
    words = shlex.split(found[-1])
    name = words[0] if len(words) == 1 else ""
    if not re.fullmatch(r"[A-Za-z0-9_+][A-Za-z0-9._+-]*", name):
        raise _error(
            f"{override.shown} sets install={found[-1]}: makepkg wants one file name there",
            file=override.shown,
            fix="write install=<name>.install and put that file beside the template",
        )
    source = override.path.parent / name
    if not source.is_file():
        raise _error(
            f"{override.shown} sets install={name}, and there is no {name} beside it",
            file=str(source),
            fix=f"put the install script {name} beside {override.shown}",
        )
    atomic_write(out / name, source.read_bytes())
    return out / name


def _error(message: str, *, file: str | None = None, fix: str | None = None) -> ConfigError:
    return ConfigError(message, component=_COMPONENT, file=file, fix=fix)


def _pkgname(name: str) -> str:
    """Arch's pkgname rules, refused rather than rewritten: the name is the user's choice."""
    if not _PKGNAME.fullmatch(name):
        raise _error(
            f"{name!r} is not a valid Arch package name",
            fix="set [packaging] package_name to lowercase letters, digits and @._+- "
            "(not starting with - or .)",
        )
    return name


def _pkgver(version: str) -> tuple[str, tuple[str, ...]]:
    """Map the product version to a pkgver, or refuse it.

    Arch forbids '-' in pkgver. A '-' before a pre-release tag is dropped (1.2.0-rc1 →
    1.2.0rc1), which vercmp sorts before 1.2.0 as it should; '_' or '.' would sort after it.
    Any other '-' has no faithful spelling, so it is refused.
    """
    mapped = re.sub(r"-(?=[A-Za-z])", "", version)
    if not _PKGVER.fullmatch(mapped):
        raise _error(
            f"version {version!r} cannot be an Arch pkgver",
            fix="use ASCII letters, digits and . _ + (no ':', '/', '~' or whitespace), starting "
            "with a letter or digit; a '-' only before a pre-release tag (1.2.0-rc1)",
        )
    if mapped == version:
        return mapped, ()
    return mapped, (
        f"pkgver {mapped} stands for version {version} (Arch forbids '-' in pkgver; "
        f"vercmp sorts {mapped} before the release)",
    )


def _pkgrel(pkgrel: int) -> str:
    if isinstance(pkgrel, bool) or not isinstance(pkgrel, int) or pkgrel < 1:
        raise _error(f"pkgrel must be a positive integer, not {pkgrel!r}")
    return str(pkgrel)


def _one_line(text: str, what: str) -> str:
    """Collapse every whitespace run (newlines too) to one space, as .SRCINFO would anyway.

    With no whitespace but single inner spaces left, makepkg's [[:space:]] normalisation is the
    identity in every locale, so PKGBUILD and .SRCINFO hold the same value.
    """
    single = " ".join(text.split())
    bad = [c for c in single if unicodedata.category(c) in ("Cc", "Cs") or c in _BIDI]
    if bad:
        raise _error(
            f"the {what} contains control characters ({', '.join(sorted(map(ascii, set(bad))))})",
            fix=f"remove them from the product's {what}",
        )
    return single


def _url(url: str) -> str:
    """A URL is one token: whitespace in it is a mistake, so refuse rather than repair."""
    if url != _one_line(url, "url") or " " in url:
        raise _error(f"the url {url!r} contains whitespace", fix="fix the product's url")
    return url


def _licenses(licenses: Iterable[str]) -> tuple[str, ...]:
    normalised = sorted({_one_line(spdx, "licence identifier") for spdx in licenses})
    if not normalised or "" in normalised:
        raise _error(
            "the stage has no licence identifiers (or an empty one)",
            fix="name each component's SPDX licence in the recipe",
        )
    return tuple(normalised)


@cache
def _mapping() -> dict[str, _GroupPackages]:
    """data/arch.toml: external group → Arch packages, checked once."""
    text = resources.files("ortbundle").joinpath("data/arch.toml").read_text("utf-8")
    try:
        data = tomllib.loads(text)
        check_document(_DATA_FILE, data, "arch-data")
        groups = data["groups"]
        return {str(group): _parse_group(str(group), raw) for group, raw in groups.items()}
    except (tomllib.TOMLDecodeError, KeyError, TypeError, AttributeError) as broken:
        raise _error(
            f"cannot read the Arch dependency mapping: {broken}", file=_DATA_FILE
        ) from None


def _parse_group(group: str, raw: Mapping[str, Any], file: str = _DATA_FILE) -> _GroupPackages:
    unknown = set(raw) - {"depends", "optdepends"}
    if unknown:
        raise _error(f"group {group}: unknown keys {sorted(unknown)}", file=file)
    try:
        depends = tuple(str(p) for p in raw.get("depends", ()))
        optdepends = tuple((str(o["package"]), str(o["reason"])) for o in raw.get("optdepends", ()))
    except (KeyError, TypeError) as broken:
        raise _error(
            f'group {group}: optdepends entries are {{ package = "…", reason = "…" }} ({broken!r})',
            file=file,
        ) from None
    for package in (*depends, *(p for p, _ in optdepends)):
        if not _PKGNAME.fullmatch(_split_constraint(package)[0]):
            raise _error(f"group {group}: {package!r} is not an Arch package name", file=file)
    for _, reason in optdepends:
        if not reason or reason != _one_line(reason, "reason"):
            raise _error(f"group {group}: a reason must be one non-empty line", file=file)
    return _GroupPackages(depends, optdepends)


_CONSTRAINED = re.compile(r"^([^<>=]+)((?:>=|<=|=|>|<).+)?$")


def _split_constraint(entry: str) -> tuple[str, str]:
    """ "cuda>=13.0" -> ("cuda", ">=13.0"); a bare name has no constraint."""
    found = _CONSTRAINED.match(entry)
    return (found[1], found[2] or "") if found else (entry, "")


def _constrained(package: str, version: str) -> list[str]:
    """A package with the group's version constraint, Arch's way: one entry per bound
    (cudnn>=9, cudnn<10); a constraint the mapping writes itself wins."""
    name, own = _split_constraint(package)
    if own or not version:
        return [package]
    return [f"{name}{op}{bound}" for op, bound in constraints(version)]


def _group_mapping(package: PackageInput) -> dict[str, tuple[_GroupPackages, str]]:
    """The tool's data/arch.toml under the recipes' and product's [[externals]] `arch` tables."""
    found = {group: (packages, _DATA_FILE) for group, packages in _mapping().items()}
    for entry in package.packages:
        if entry.channel == "arch":
            parsed = _parse_group(entry.group, entry.table, entry.origin)
            found[entry.group] = (parsed, entry.origin)
    return found


def _dependencies(package: PackageInput) -> tuple[tuple[str, ...], tuple[str, ...], list[str]]:
    """depends and optdepends for the externals present, sorted, with where each came from.

    A required group's packages are `depends` (with its version constraint); an optional
    group's are `optdepends`, with its note (or install sentence) as the reason pacman shows."""
    mapping = _group_mapping(package)
    depends: dict[str, set[tuple[str, str]]] = {}
    optional: dict[str, set[tuple[str, str]]] = {}
    reasons: dict[str, set[str]] = {}
    missing: dict[str, list[str]] = {}
    for lib in package.externals:
        if lib.group not in mapping:
            missing.setdefault(lib.group, []).append(lib.name)
            continue
        packages = mapping[lib.group][0]
        for name in packages.depends:
            for entry in _constrained(name, lib.version):
                if lib.optional:
                    optional.setdefault(entry, set()).add((lib.name, lib.group))
                    reason = _one_line(lib.note or lib.install or f"for {lib.group}", "reason")
                    reasons.setdefault(entry, set()).add(reason)
                else:
                    depends.setdefault(entry, set()).add((lib.name, lib.group))
        for name, reason in packages.optdepends:
            for entry in _constrained(name, lib.version):
                optional.setdefault(entry, set()).add((lib.name, lib.group))
                reasons.setdefault(entry, set()).add(reason)
    if missing:
        raise _unmapped(package, missing)
    if package.addon_of is not None:  # an add-on installs into the main package's directory
        main = package.addon_of
        main_version = _pkgver(main.version)[0]
        depends.setdefault(f"{main.package_name}>={main_version}", set()).add(
            (f"the main package ({main.name})", "addon_of")
        )
    plain = {_split_constraint(name)[0] for name in depends}
    for name in list(optional):  # a hard dependency needs no optional entry
        if _split_constraint(name)[0] in plain:
            optional.pop(name)
    optdepends = tuple(f"{name}: {'; '.join(sorted(reasons[name]))}" for name in sorted(optional))
    notes = [
        f"{field} {name}: for {', '.join(sorted({lib for lib, _ in libs}))} "
        f"(group {', '.join(sorted({group for _, group in libs}))})"
        for field, table in (("depends", depends), ("optdepends", optional))
        for name, libs in sorted(table.items())
    ]
    # the version the binaries need of each package's group (glibc>=2.34): the oldest system
    versioned = tuple(
        next(
            (
                constrained
                for group in sorted({group for _, group in libs})
                if (constrained := render_dependency(name, group, package.system, "arch")) != name
            ),
            name,
        )
        for name, libs in sorted(depends.items())
    )
    if not package.system.empty:
        notes.append(f"runs on {package.system.describe()}")
    return versioned, optdepends, notes


def _unmapped(package: PackageInput, missing: Mapping[str, Sequence[str]]) -> ConfigError:
    """Every group without Arch packages, at once, with the entry to add to the product."""
    listing = "; ".join(f"{', '.join(libs)} (group {g})" for g, libs in sorted(missing.items()))
    kinds = {lib.group: lib.kind for lib in package.externals}
    snippets = "\n\n".join(
        snippet(g, kinds[g], libs, (package.target,), channel="arch")
        for g, libs in sorted(missing.items())
    )
    return ConfigError(
        f"no Arch package is known for {listing}",
        component=_COMPONENT,
        target=package.target,
        file=package.manifest or _DATA_FILE,
        fix="name the Arch package(s) in the product manifest (an [[externals]] entry of the "
        f"group, with arch = {{ depends = [...] }} or optdepends), e.g.:\n\n{snippets}",
    )


def _layout(files: Sequence[ShippedFile]) -> tuple[list[_Entry], list[_Entry]]:
    """package()'s lines: the stage under /usr/lib, licence texts + NOTICE under /usr/share."""
    by_path = {f.path: f for f in files}
    lib: list[_Entry] = []
    share: list[_Entry] = []
    for f in sorted(files, key=lambda f: f.path):
        check_path(f.path)
        if f.link_to is None:
            if f.mode & ~0o777:
                raise _stage_error(f"has mode {f.mode:o}; only permission bits are shipped", f.path)
            lib.append(_Entry(f.path, f.path, f"{f.mode:03o}", None))
        else:
            resolve_link(f.path, by_path)
            lib.append(_Entry(f.path, f.path, "", f.link_to))
        if f.path == _NOTICE or f.path.startswith(f"{_LICENSE_DIR}/"):
            dest = f.path if f.path == _NOTICE else f.path.removeprefix(f"{_LICENSE_DIR}/")
            share.append(_Entry(resolve_link(f.path, by_path), dest, "644", None))
    if not any(e.dest != _NOTICE for e in share):
        raise _stage_error("has no licence texts", _LICENSE_DIR)
    dests = {e.dest for e in share}
    if len(dests) != len(share):
        raise _stage_error(f"would put two licence files at one path in {_LICENSE_DIR}", _NOTICE)
    for entry in share:
        if any(parent in dests for parent in directories_of([entry.dest])):
            raise _stage_error(f"would put a file and a directory at {entry.dest}", entry.source)
    return lib, share


# What an add-on installs into the main package's directory: its runtimes and its index
# fragment. Its NOTICE and licence texts go to /usr/share/licenses/<add-on>/ only; anything
# else at the top of the stage (runtimes.json, the loader) is the main package's.
ADDON_DIRS = ("runtimes/", "plugins/", "custom_ops/", "libraries/", "runtimes.d/")


def _addon_entries(entries: list[_Entry], main: Addon) -> tuple[list[_Entry], tuple[str, ...]]:
    kept = [e for e in entries if e.dest.startswith(ADDON_DIRS)]
    left = sorted(e.dest for e in entries if not e.dest.startswith(ADDON_DIRS))
    notes = [
        f"add-on of {main.name}: installs into /usr/lib/{main.package_name}/ beside the main "
        f"package, which it depends on"
    ]
    outside = [d for d in left if d != _NOTICE and not d.startswith(f"{_LICENSE_DIR}/")]
    if outside:
        notes.append("not installed (the main package owns them): " + ", ".join(outside))
    if not kept:
        raise _stage_error("of an add-on holds no runtimes/ to install", "runtimes")
    return kept, tuple(notes)


def check_path(path: str) -> None:
    pure = PurePosixPath(path)
    if (
        pure.is_absolute()
        or str(pure) != path
        or any(part in (".", "..") for part in pure.parts)
        or any(unicodedata.category(c) in ("Cc", "Cs") for c in path)
    ):
        raise _stage_error("is not a plain relative path", path)


def resolve_link(path: str, by_path: Mapping[str, ShippedFile]) -> str:
    """Follow symlinks inside the stage to a regular file; anything else is refused."""
    seen: set[str] = set()
    while (shipped := by_path.get(path)) is not None and shipped.link_to is not None:
        seen.add(path)
        target = posixpath.normpath(posixpath.join(posixpath.dirname(path), shipped.link_to))
        if shipped.link_to.startswith("/") or target.startswith("../") or target in seen:
            raise _stage_error(f"links outside the stage or in a loop ({shipped.link_to})", path)
        path = target
    if path not in by_path:
        raise _stage_error("is a symlink to a file the stage lacks", path)
    return path


def _stage_error(problem: str, path: str) -> OrtbundleError:
    return OrtbundleError(
        f"a stage entry {problem}",
        component=_COMPONENT,
        file=path,
        fix="rebuild the stage (invoke build) instead of editing it",
    )


def directories_of(paths: Iterable[str]) -> list[str]:
    """Every proper parent directory of `paths`, sorted so parents come first."""
    found: set[str] = set()
    for path in paths:
        parent = posixpath.dirname(path)
        while parent:
            found.add(parent)
            parent = posixpath.dirname(parent)
    return sorted(found)


def _bash_quote(value: object) -> str:
    """One bash word holding `value` literally: single quotes, each ' written as '\\''.

    Nothing inside single quotes is expanded, so $(…), `…`, ${…} and " stay text. Control
    characters are refused: every value was made one line before it got here.
    """
    text = str(value)
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in text):
        raise OrtbundleError(
            f"{text!r} cannot be written into a PKGBUILD (control characters)",
            component=_COMPONENT,
        )
    return "'" + text.replace("'", "'\\''") + "'"


def _srcinfo_value(value: str) -> str:
    """srcinfo.sh's normalisation: whitespace runs → one space, one leading/trailing dropped."""
    collapsed = re.sub(r"\s+", " ", value)
    return collapsed.removeprefix(" ").removesuffix(" ")


def _srcinfo(pkgname: str, scalars: Mapping[str, str], arrays: Mapping[str, Sequence[str]]) -> str:
    """What `makepkg --printsrcinfo` prints for our single-package PKGBUILD."""
    unknown = (set(scalars) - set(_SRCINFO_SCALARS)) | (set(arrays) - set(_SRCINFO_ARRAYS))
    if unknown:
        raise AssertionError(f"fields .SRCINFO does not know: {sorted(unknown)}")
    lines = [f"pkgbase = {pkgname}"]
    lines += [
        f"\t{name} = {_srcinfo_value(scalars[name])}"
        for name in _SRCINFO_SCALARS
        if scalars.get(name)  # makepkg: [[ ${!attr} ]] — unset or empty is left out
    ]
    lines += [
        f"\t{name} = {_srcinfo_value(value)}"
        for name in _SRCINFO_ARRAYS
        for value in arrays.get(name, ())
    ]
    lines += ["", f"pkgname = {pkgname}"]
    return "\n".join(lines) + "\n"
