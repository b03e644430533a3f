"""RPM channel: an .rpm of the Linux stage, packed by nfpm, that rpmlint accepts.

Layout (Fedora packaging guidelines): the stage as built under /usr/lib/<package>/ (private,
so no ldconfig scriptlets); NOTICE and every licence text are `%license` files under
/usr/share/licenses/<package>/ (licenses/ kept, as NOTICE names them); the target's CycloneDX
SBOM is a `%doc` file under /usr/share/doc/<package>/. Requires/Recommends/Suggests come only
from the externals the closure found (nfpm.render_dependencies, data/linux-packages.toml).

rpmlint's findings on upstream binaries that must ship untouched are filtered in
<package>.rpmlintrc, written beside the package (openSUSE's convention), each with its reason.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ortbundle._core.version import __version__
from ortbundle.channels import CHANNEL_TARGETS, ChannelOutput, PackageInput, nfpm
from ortbundle.stage.binaries.symtab import has_symbol_table

_PACKAGER = "rpm"
_BUILDHOST = "reproducible"  # nfpm writes the machine's host name otherwise

# (rpmlint check, why) — filters for a bundle of upstream ONNX Runtime binaries that must ship
# byte for byte as the signed build manifest records them.
RPMLINT_FILTERS: tuple[tuple[str, str], ...] = (
    ("env-script-interpreter", "runtime_loader.py runs under whichever python3 the user has"),
    ("no-signature", "packages are signed when published (rpmsign), not when built"),
)
_LOADER = "runtime_loader.py"  # an add-on's stage has none (the main package's loader reads it)
# Only when a shipped library keeps its symbol table (rpmlint errs on an unused filter: the
# aarch64 wheels' libraries are stripped, the x86-64 ones are not).
_UNSTRIPPED = ("unstripped-binary-or-object", "upstream's libraries ship byte for byte as built")
# Only when two components carry the same licence text.
_DUPLICATES = (
    "files-duplicate",
    "components that carry the same licence text each keep their own copy, as NOTICE names it",
)


class RpmChannel:
    """<package>-<version>-<release>.<arch>.rpm, its nfpm.yaml and <package>.rpmlintrc."""

    name = "rpm"
    target = CHANNEL_TARGETS["rpm"][0]  # one of several: generate() takes any of them

    def generate(self, package: PackageInput, out: Path) -> ChannelOutput:
        return nfpm.generate(package, out, _PACKAGER, lambda meta: _layout(package, out, meta))


def _layout(package: PackageInput, out: Path, meta: nfpm.Metadata) -> nfpm.Layout:
    """RPM's part: the licence texts as %license files under /usr/share/licenses/<package>/,
    the SBOM a %doc file, nfpm's changelog, the rpm fields, and <package>.rpmlintrc beside."""
    name, version, release, arch = meta.name, meta.version, meta.release, meta.arch
    licenses, doc = f"/usr/share/licenses/{name}", f"/usr/share/doc/{name}"
    generated = {"changelog.yaml": _changelog(package, f"{version}-{release}", meta.maintainer)}
    docs = nfpm.licence_docs(package, out, _PACKAGER, licenses, "license")
    description = nfpm.long_description(package, _PACKAGER)
    rpm = {
        "summary": nfpm.synopsis(package, _PACKAGER),
        "group": "System/Libraries",
        "packager": nfpm.inert(meta.maintainer),
        "buildhost": _BUILDHOST,
        "compression": "zstd",
    }
    file_name = f"{name}-{version}-{release}.{arch}.rpm"
    rpmlintrc = f"{name}.rpmlintrc"
    key = package.openpgp
    signed = (
        "unsigned — sign it (rpmsign) before publishing"
        if key is None
        else f"signed by OpenPGP key {key.fingerprint}: rpmkeys --import {key.public_name} "
        "before rpm -K or rpmlint"
    )
    return nfpm.Layout(
        file_name=file_name,
        generated=generated,
        docs=docs,
        doc_roots=(licenses,),
        sbom=nfpm.Doc(f"{doc}/sbom.cdx.json", f"{nfpm.GENERATED_DIR}/sbom.cdx.json", "doc"),
        description=description,
        head={"changelog": f"{nfpm.GENERATED_DIR}/changelog.yaml"},
        tail={"rpm": rpm},
        note=f"{file_name}: the stage under /usr/lib/{nfpm.lib_name(package, name)}/, licence "
        "texts (%license) under "
        f"{licenses}/, the SBOM under {doc}/; {signed}; run rpmlint with -r {rpmlintrc}",
        beside={
            rpmlintrc: rpmlint_config(
                _duplicated_texts(package, docs),
                _unstripped(package),
                signed=key is not None,
                loader=any(f.path == _LOADER for f in package.files),
            )
        },
    )


def _changelog(package: PackageInput, version: str, maintainer: str) -> bytes:
    """nfpm's changelog (chglog format, JSON is YAML): one entry, stamped with the epoch."""
    entry = {
        "semver": version,
        "date": nfpm.mtime(package),
        "packager": maintainer,
        "changes": [
            {"note": f"Packaged by ortbundle {__version__} from the pinned upstream artifacts"}
        ],
    }
    return (json.dumps([entry], indent=2) + "\n").encode("utf-8")


def _duplicated_texts(package: PackageInput, docs: Sequence[nfpm.Doc]) -> bool:
    """Whether two licence files in one directory tree hold the same bytes (rpmlint compares
    files below the same two top directories: /usr/share, /usr/lib)."""
    by_path = {f.path: f for f in package.files}
    seen: dict[tuple[str, str], int] = {}
    for f in package.files:
        if f.link_to is None and f.size:
            seen[("lib", f.sha256)] = seen.get(("lib", f.sha256), 0) + 1
    for doc in docs:
        if doc.kind == "license":
            staged = by_path[doc.dest.split("/", 5)[5]]
            if staged.size:
                seen[("share", staged.sha256)] = seen.get(("share", staged.sha256), 0) + 1
    return any(count > 1 for count in seen.values())


def _unstripped(package: PackageInput) -> bool:
    """Whether a shipped library keeps its symbol table (rpmlint's unstripped-binary-or-object)."""
    return any(
        f.link_to is None and has_symbol_table(package.stage / f.path) for f in package.files
    )


def rpmlint_config(
    duplicated: bool, unstripped: bool, *, signed: bool = False, loader: bool = True
) -> str:
    """rpmlint's filters for this package, each with its reason (rpmlint -r <file>); a signed
    package has no `no-signature` finding to filter, and the loader's filter is only where the
    package ships it (rpmlint errs on an unused filter)."""
    lines = ["# rpmlint filters for a bundle of upstream ONNX Runtime builds (ortbundle)."]
    wanted = (
        *((_UNSTRIPPED,) if unstripped else ()),
        *(
            f
            for f in RPMLINT_FILTERS
            if not (signed and f[0] == "no-signature")
            and (loader or f[0] != "env-script-interpreter")
        ),
        *((_DUPLICATES,) if duplicated else ()),
    )
    for check, why in wanted:
        lines += [f"# {why}", f'addFilter(r"{check}")']
    return "\n".join(lines) + "\n"
