"""Debian channel: a .deb of the Linux stage, packed by nfpm, that lintian accepts.

Layout (Debian Policy): the stage as built under /usr/lib/<package>/ (a private directory, so
no shlibs or ldconfig); /usr/share/doc/<package>/ holds `copyright` in the machine-readable
DEP-5 format generated from the licence attribution, `changelog.Debian.gz`, NOTICE, every
licence text (under licenses/, as NOTICE names them) and the target's CycloneDX SBOM. What
lintian says about a bundle of upstream binaries that we must ship untouched is overridden in
/usr/share/lintian/overrides/<package>, each override with its reason.

Depends/Recommends/Suggests come only from the externals the closure found
(nfpm.render_dependencies, data/linux-packages.toml).
"""

from __future__ import annotations

import io
import re
import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from ortbundle._core.templating import render
from ortbundle._core.version import __version__
from ortbundle.channels import (
    CHANNEL_TARGETS,
    Attribution,
    ChannelOutput,
    PackageInput,
    nfpm,
    openpgp,
)

_PACKAGER = "deb"
_FORMAT = "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"

# (tag, context or "", why) — what lintian reports on a bundle of upstream ONNX Runtime
# binaries that must ship byte for byte as the signed build manifest records them.
LINTIAN_OVERRIDES: tuple[tuple[str, str, str], ...] = (
    (
        "unstripped-binary-or-object",
        "[usr/lib/{lib}/*]",
        "upstream's libraries ship byte for byte as the signed build manifest records them",
    ),
    (
        "embedded-library",
        "* [usr/lib/{lib}/*]",
        "upstream links some libraries in statically (the aarch64 ONNX Runtime: curl, Mbed "
        "TLS); they ship byte for byte, attributed in NOTICE and debian/copyright",
    ),
    (
        "extra-license-file",
        "[usr/*/{name}/licenses/*]",
        "each component's own licence text, as NOTICE and debian/copyright refer to it",
    ),
    (
        "python3-script-but-no-python3-dep",
        "* [usr/lib/{lib}/runtime_loader.py]",
        "the optional reference loader; applications load the runtimes with their own loader",
    ),
    (
        "initial-upload-closes-no-bugs",
        "[usr/share/doc/{name}/changelog.Debian.gz:1]",
        "built from pinned upstream artifacts for the product's own repository, not the archive",
    ),
)
# Only in a signed package: lintian flags every member past data.tar (Debian's archive
# software cannot cope with them), and the origin signature is one, where debsigs puts it.
SIGNED_OVERRIDE = (
    "misplaced-extra-member-in-deb",
    "_gpgorigin *",
    "the origin signature debsig-verify checks (debsigs' format), for the product's own "
    "repository, not the archive",
)


class DebChannel:
    """<package>_<version>-<release>_<arch>.deb and the nfpm.yaml it was packed from."""

    name = "deb"
    target = CHANNEL_TARGETS["deb"][0]  # one of several: generate() takes any of them

    def generate(self, package: PackageInput, out: Path) -> ChannelOutput:
        return nfpm.generate(package, out, _PACKAGER, lambda meta: _layout(package, out, meta))


def _layout(package: PackageInput, out: Path, meta: nfpm.Metadata) -> nfpm.Layout:
    """Debian's part: DEP-5 copyright, changelog and lintian overrides with the licence texts
    under /usr/share/doc/<package>/, the synopsis as the description's first line."""
    name, version, release, arch = meta.name, meta.version, meta.release, meta.arch
    doc, lib = f"/usr/share/doc/{name}", nfpm.lib_name(package, name)
    generated = {
        "copyright": copyright_text(package, lib, doc).encode("utf-8"),
        "changelog.Debian.gz": _changelog(package, name, f"{version}-{release}", meta.maintainer),
        "lintian-overrides": _overrides(
            name, lib, (SIGNED_OVERRIDE,) if package.openpgp else ()
        ).encode("utf-8"),
    }
    docs = [
        nfpm.Doc(f"{doc}/copyright", f"{nfpm.GENERATED_DIR}/copyright"),
        nfpm.Doc(f"{doc}/changelog.Debian.gz", f"{nfpm.GENERATED_DIR}/changelog.Debian.gz"),
        nfpm.Doc(f"/usr/share/lintian/overrides/{name}", f"{nfpm.GENERATED_DIR}/lintian-overrides"),
        *nfpm.licence_docs(package, out, _PACKAGER, doc),
    ]
    file_name = f"{name}_{version}-{release}_{arch}.deb"
    key = package.openpgp
    if key is None:
        signed, beside = "unsigned — sign it (debsigs) or its repository", {}
    else:  # nfpm adds the _gpgorigin member; debsig-verify checks it against this policy
        beside = openpgp.debsig_files(
            key, name, nfpm.one_line(_PACKAGER, package.product, "product")
        )
        signed = (
            f"signed (_gpgorigin) by OpenPGP key {key.fingerprint}, public key "
            f"{key.public_name}; debsig-verify's policy and keyring under {openpgp.DEBSIG_DIR}/"
        )
    return nfpm.Layout(
        file_name=file_name,
        generated=generated,
        docs=docs,
        doc_roots=(doc,),
        sbom=nfpm.Doc(f"{doc}/sbom.cdx.json", f"{nfpm.GENERATED_DIR}/sbom.cdx.json"),
        description=(
            f"{nfpm.synopsis(package, _PACKAGER)}\n{nfpm.long_description(package, _PACKAGER)}"
        ),
        head={"section": "libs", "priority": "optional"},
        tail={"deb": {"compression": "gzip"}},
        note=f"{file_name}: the stage under /usr/lib/{lib}/, licence texts, copyright (DEP-5) "
        f"and SBOM under {doc}/; {signed}",
        beside=beside,
    )


def copyright_text(package: PackageInput, lib: str, doc: str) -> str:
    """debian/copyright in DEP-5, one Files paragraph per attributed component (its files
    under /usr/lib/<lib>/, the directory the stage installs into)."""
    files = [_files_paragraph(a, lib) for a in package.attribution]
    licenses = []
    for spdx in sorted({i for a in package.attribution for i in _ids(a.expression)}):
        texts = sorted(
            f"{doc}/{t} ({a.component})"
            for a in package.attribution
            if spdx in _ids(a.expression)
            for t in a.texts
        )
        where = "\n".join(texts) if texts else f"{doc}/NOTICE names where it comes from."
        licenses.append({"name": spdx, "text": f"The full text is in:\n{where}"})
    return render(
        "debian-copyright.j2",
        {
            "upstream_name": package.product,
            "source": package.url,
            "comment": f"Generated by ortbundle {__version__} from the build's licence "
            f"attribution of {package.product} {package.version} ({package.target}). Every "
            f"component's licence texts are under {doc}/licenses/; {doc}/NOTICE lists them "
            f"and {doc}/sbom.cdx.json records every file.",
            "files": files,
            "licenses": licenses,
        },
        {"dep5": _dep5_value, "dep5_body": _dep5_body},
        memo=package.memo,
        overrides=package.templates,
    )


def _files_paragraph(attribution: Attribution, lib: str) -> dict[str, str]:
    files = " ".join(f"usr/lib/{lib}/{_dep5_pattern(f)}" for f in attribution.files)
    return {
        "files": files or f"usr/lib/{lib}/NOTICE",
        "copyright": "\n".join(attribution.copyrights) or "unknown (see the licence texts)",
        "license": _dep5_expression(attribution.expression),
        "comment": f"{attribution.component} {attribution.version}",
    }


def _ids(expression: str) -> list[str]:
    """The licence ids of an SPDX expression (operators and exceptions' keyword left out)."""
    words = re.split(r"[\s()]+", expression)
    return [w for w in words if w and w.upper() not in ("AND", "OR", "WITH")]


def _dep5_expression(expression: str) -> str:
    """DEP-5 spells the SPDX operators in lower case."""
    return re.sub(r"\b(AND|OR|WITH)\b", lambda m: m.group(1).lower(), expression)


def _dep5_pattern(path: str) -> str:
    """A path as a DEP-5 Files pattern: `*`, `?` and `\\` escaped, whitespace matched by `?`."""
    escaped = re.sub(r"([*?\\])", r"\\\1", path)
    return re.sub(r"\s", "?", escaped)


def _clean_lines(text: str) -> list[str]:
    """Lines without control characters (a copyright line comes from an upstream text)."""
    return [
        "".join(c for c in line if unicodedata.category(c) not in ("Cc", "Cs")).rstrip()
        for line in text.splitlines()
    ]


def _dep5_body(text: str) -> str:
    """Continuation lines: each starts with a space, an empty one is ' .' (RFC 822 folding)."""
    return "\n".join(f" {line}" if line.strip() else " ." for line in _clean_lines(text))


def _dep5_value(text: str) -> str:
    """A field value: the first line after the colon, the rest folded as continuation lines."""
    lines = _clean_lines(text) or [""]
    rest = "\n".join(lines[1:])
    return lines[0].strip() + (f"\n{_dep5_body(rest)}" if rest else "")


def _changelog(package: PackageInput, name: str, version: str, maintainer: str) -> bytes:
    """changelog.Debian.gz (Debian Policy 12.7): one entry, gzip -9n, stamped with the epoch."""
    import gzip

    when = datetime.fromtimestamp(package.source_date_epoch, tz=UTC)
    text = (
        f"{name} ({version}) unstable; urgency=medium\n\n"
        f"  * Packaged by ortbundle {__version__} from the pinned upstream artifacts of\n"
        f"    {_words(package.product)} {_words(package.version)}.\n\n"
        f" -- {maintainer}  {when.strftime('%a, %d %b %Y %H:%M:%S +0000')}\n"
    )
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as gz:
        gz.write(text.encode("utf-8"))
    return buffer.getvalue()


def _words(text: str) -> str:
    """Whitespace runs as one space: a changelog entry's text stays on its lines."""
    return " ".join(text.split())


def _overrides(name: str, lib: str, extra: Sequence[tuple[str, str, str]] = ()) -> str:
    lines = []
    for tag, context, why in (*LINTIAN_OVERRIDES, *extra):
        lines += [f"# {why}", f"{name}: {tag} {context.format(name=name, lib=lib)}".rstrip()]
    return "\n".join(lines) + "\n"
