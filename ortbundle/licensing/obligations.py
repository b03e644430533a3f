"""Source obligations: a component whose licence asks for its corresponding source with the
binary (the policy's [obligations]: GPL, LGPL, AGPL; MPL for its own files) ships it beside the
packages, under dist/<product>/<version>/sources/, as one reproducible archive per component
(its pinned source archives byte for byte, and how the binary was built from them), with a
written offer in the NOTICE. The audit (audit.py) refuses such a component without sources."""

from __future__ import annotations

import fnmatch
import gzip
import io
import re
import tarfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ortbundle._core.fsio import atomic_write, sha256_file
from ortbundle.config.recipes import Recipe
from ortbundle.config.sources import BuildRecipe, Source
from ortbundle.licensing.attribution import ComponentUse, TargetLicensing
from ortbundle.licensing.spdx import NotAnExpression, Tree, facts

SOURCES_DIR = "sources"  # under dist/<product>/<version>/
OFFER_YEARS = 3  # GPL-3.0 §6(b): an offer valid for at least three years
_MEMBER_MODE = 0o644


@dataclass(frozen=True)
class SourceObligation:
    """One component that must ship with its source, and the pinned archives that are it."""

    component: str
    version: str
    license_ids: tuple[str, ...]  # the ids that ask for it
    builds: tuple[BuildRecipe, ...]  # what it was built from; empty: no source pinned

    @property
    def archives(self) -> tuple[Source, ...]:
        seen: dict[str, Source] = {}
        for build in self.builds:
            for source in build.sources:
                seen.setdefault(source.sha256, source)
        return tuple(seen.values())

    @property
    def path(self) -> str:
        """Where its corresponding source ships, relative to the version directory."""
        return f"{SOURCES_DIR}/{self.component}-{self.version}-source.tar.gz"


_WORD = re.compile(r"[A-Za-z0-9.+:-]+")  # an SPDX id, an operator or a LicenseRef


def obliging_ids(expression: str, globs: Sequence[str]) -> tuple[str, ...]:
    """The licence ids of `expression` that oblige its shipper to give the source: every part
    of an AND that does, an OR only when each alternative does (Apache-2.0 OR GPL-2.0 can be
    taken under Apache-2.0). An expression that does not parse obliges nothing here: the audit
    reports it on its own. One none of whose words a glob matches obliges nothing, and is not
    parsed: a warm build imports no expression parser (spdx.py) for its MIT components."""
    words = _WORD.findall(expression)
    if not any(fnmatch.fnmatchcase(w, g) for w in words for g in globs):
        return ()
    try:
        tree = facts(expression).tree
    except NotAnExpression:
        return ()
    return tuple(sorted(set(_obliging(tree, globs))))


def _obliging(node: Tree, globs: Sequence[str]) -> list[str]:
    kind, value = node
    if kind == "AND":
        return [i for part in value for i in _obliging(part, globs)]
    if kind == "OR":
        found = [_obliging(part, globs) for part in value]
        return [i for ids in found for i in ids] if all(found) else []
    return [value] if any(fnmatch.fnmatchcase(value, g) for g in globs) else []


def is_model(component: ComponentUse) -> bool:
    """A model's weights ship as they were published, their own form for modification: no
    build made them, so there is no other source to give."""
    return bool(component.files) and all(f.path.startswith("models/") for f in component.files)


def source_obligations(
    licensing: Iterable[TargetLicensing], globs: Sequence[str]
) -> tuple[SourceObligation, ...]:
    """Each (component, version) under a licence `globs` names, with every build its shipped
    files came from, across all targets; in name order."""
    found: dict[tuple[str, str], tuple[set[str], dict[str, BuildRecipe]]] = {}
    for tl in licensing:
        for c in tl.components:
            ids = set(obliging_ids(c.expression, globs))
            if not ids or is_model(c):
                continue
            entry = found.setdefault((c.name, c.version), (set(), {}))
            entry[0].update(ids)
            for source in c.sources:
                if source.build is not None:
                    entry[1].setdefault(source.sha256, source.build)
    return tuple(
        SourceObligation(name, version, tuple(sorted(ids)), tuple(builds.values()))
        for (name, version), (ids, builds) in sorted(found.items())
    )


def source_archive(obligation: SourceObligation, files: Mapping[str, Path], epoch: int) -> bytes:
    """The component's corresponding source as one .tar.gz: each pinned archive (`files`: by
    SHA-256, where the fetch verified it) and BUILD, saying how the binary was made. Members
    sorted, one mtime (SOURCE_DATE_EPOCH), owner root, gzip without a time or a name: two
    builds of the same pins write the same bytes."""
    top = f"{obligation.component}-{obligation.version}"
    members = {f"{top}/BUILD": build_text(obligation).encode()}
    for archive in obligation.archives:
        members[f"{top}/{archive.filename}"] = files[archive.sha256].read_bytes()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in sorted(members.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), epoch, _MEMBER_MODE
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", fileobj=out, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def build_text(obligation: SourceObligation) -> str:
    """BUILD: the archives (with their SHA-256) and the command that made the binary."""
    lines = [
        f"{obligation.component} {obligation.version}: the corresponding source of the shipped "
        f"binaries ({', '.join(obligation.license_ids)})",
        "",
    ]
    for build in obligation.builds:
        lines.append("Source archives:")
        lines += [f"  {s.filename}  sha256:{s.sha256}  ({s.describe()})" for s in build.sources]
        lines.append(f"Toolchain: {build.toolchain}")
        if build.ort_headers:
            lines.append(f"ONNX Runtime headers: {build.ort_headers}")
        lines += [f"Build: {build.command}", ""]
    return "\n".join(lines)


def write_sources(
    version_dir: Path,
    obligations: Iterable[SourceObligation],
    files: Mapping[str, Path],
    epoch: int,
) -> tuple[str, ...]:
    """Each obligation with pinned sources, as sources/<component>-<version>-source.tar.gz
    under `version_dir`; the paths written."""
    written = []
    for obligation in obligations:
        if not obligation.builds:
            continue  # the audit says so (and a release refuses it)
        path = version_dir / obligation.path
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, source_archive(obligation, files, epoch))
        path.chmod(_MEMBER_MODE)
        written.append(obligation.path)
    return tuple(written)


def shipped_sources(
    version_dir: Path, licensing: Iterable[TargetLicensing]
) -> dict[str, list[tuple[str, str]]]:
    """Per component, the archive of its corresponding source under sources/ (path, SHA-256)."""
    shipped: dict[str, list[tuple[str, str]]] = {}
    seen: set[tuple[str, str]] = set()
    for tl in licensing:
        for c in tl.components:
            if (c.name, c.version) in seen:
                continue
            seen.add((c.name, c.version))
            path = SourceObligation(c.name, c.version, (), ()).path
            if (version_dir / path).is_file():
                shipped.setdefault(c.name, []).append((path, sha256_file(version_dir / path)))
    return shipped


def offer_text(obligations: Sequence[SourceObligation], publisher: str, url: str) -> str:
    """The written offer a NOTICE carries for the components that ship with their source."""
    shipped = [o for o in obligations if o.builds]
    if not shipped:
        return ""
    lines = [
        "",
        "=" * 80,
        "Corresponding source (written offer)",
        "",
        "The components below are distributed under licences that require their corresponding",
        "source to be available with the binaries. It is published beside these packages, in",
        "the files named here (their SHA-256 values are in the build manifest and the SBOM):",
        "",
    ]
    for o in shipped:
        lines.append(f"  {o.component} {o.version} ({', '.join(o.license_ids)}): {o.path}")
    lines += [
        "",
        f"For at least {OFFER_YEARS} years from the date you received these binaries, and for as",
        f"long as {publisher} offers support for this product, {publisher} will give",
        "anyone who has these binaries a copy of that corresponding source, on a durable medium",
        "customarily used for software interchange, for no more than the cost of physically",
        f"performing that distribution, or at no charge from the same place: {url}",
        "",
    ]
    return "\n".join(lines)


def system_text(recipes: Sequence[Recipe]) -> str:
    """What the NOTICE says the machine must provide that no package can depend on: the
    kernel driver of the NPU a plugin EP drives ([component] device)."""
    lines = [
        f"  {r.label} ({r.name} {r.version}): {r.device.requirement()}; the package's udev "
        "rule gives the render group access to its nodes, and without them the runtime "
        "uses the CPU"
        for r in recipes
        if r.device is not None
    ]
    if not lines:
        return ""
    return "\n".join(["", "=" * 80, "System requirements", "", *lines, ""])
