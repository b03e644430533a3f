"""The evidence of a build: the build manifest, the SBOM, and the manifest's signature.

Everything here is a pure function of the build's inputs and outputs: no clock (timestamps
come from SOURCE_DATE_EPOCH), no host paths, no user names, so two builds of the same inputs
write the same bytes — and an Ed25519 signature over the same bytes is the same signature.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from stat import S_ISDIR, S_ISGID, S_ISUID
from typing import Any, Protocol

from ortbundle._core.errors import IntegrityError
from ortbundle._core.fsio import sha256_file
from ortbundle._core.memo import Memo
from ortbundle._core.version import __version__
from ortbundle.config.model_recipes import ModelRecipe
from ortbundle.config.plan import source_date_epoch as source_date_epoch  # re-exported
from ortbundle.config.products import Product
from ortbundle.config.recipes import Recipe
from ortbundle.config.sources import (
    BuildRecipe,
    LocalCoordinates,
    Source,
    UrlCoordinates,
    origin_to_json,
)
from ortbundle.evidence.names import (
    AUDIT_NAME,
    MANIFEST_NAME,
    PROVENANCE_NAME,
    SBOM_NAME,
    SIGNATURE_NAME,
    SUMMARY_NAME,
)
from ortbundle.evidence.provenance import build_context, envelope_json
from ortbundle.evidence.report.closures import read_requirements
from ortbundle.evidence.signing import SecretKey, sign
from ortbundle.licensing.attribution import TargetLicensing, licensing_to_json
from ortbundle.licensing.audit import ChannelAudit, report_json
from ortbundle.licensing.file_findings import ShippedEvidence
from ortbundle.licensing.obligations import shipped_sources

MANIFEST_SCHEMA = "ortbundle.manifest/1"
# Files beside the manifest that it cannot list: itself, its signature, the provenance over it,
# and the build summary (written after it; it holds the build's timings).
UNLISTED = frozenset({MANIFEST_NAME, SIGNATURE_NAME, PROVENANCE_NAME, SUMMARY_NAME})


class InputInfo(Protocol):
    """What the manifest says of a fetched input (an Artifact, or a runner manifest's entry)."""

    @property
    def url(self) -> str: ...

    @property
    def size(self) -> int: ...


@dataclass(frozen=True)
class Output:
    path: str  # relative to dist/<product>/<version>/
    size: int
    sha256: str
    mode: int
    link_to: str | None
    component: str | None  # None for evidence and packaging files
    license: str | None
    # who signed a package with the platform's own mechanism: Authenticode's signing
    # certificate ("subject", "sha256"), an OpenPGP key ("kind": "openpgp", "fingerprint");
    # None for what is not signed so
    signer: Mapping[str, str] | None = None


def normalize_modes(tree: Path) -> None:
    """0755 for directories and executables, 0644 for the rest: the umask must not leak in. A
    file with the setuid or setgid bit is refused, never cleared in silence: the build sets no
    such bit, so one came with a runner's tree or a cache entry someone changed (no recipe key
    states one: nothing ortbundle ships runs with another user's rights)."""
    tree.chmod(0o755)
    for path in tree.rglob("*"):
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        if mode & (S_ISUID | S_ISGID) and not S_ISDIR(mode):
            bits = " and ".join(
                n for b, n in ((S_ISUID, "setuid"), (S_ISGID, "setgid")) if mode & b
            )
            relative = path.relative_to(tree).as_posix()
            raise IntegrityError(
                f"{relative} has the {bits} bit (mode {mode & 0o7777:04o}): a bundle never "
                "ships a file that runs with its owner's rights, and the build sets no such bit",
                file=str(path),
                fix="clear the bit where the file came from (chmod u-s,g-s: a runner's tree, "
                "the cache) and find out what set it; no recipe setting allows it",
            )
        wanted = 0o755 if path.is_dir() or mode & 0o100 else 0o644
        if mode & 0o7777 != wanted:  # untouched otherwise: a memo's shared inode keeps its ctime
            path.chmod(wanted)


def hash_file(path: Path) -> tuple[int, str]:
    return path.stat().st_size, sha256_file(path)


def list_outputs(
    version_dir: Path,
    known: Mapping[str, Output],
    digests: Mapping[str, str] | None = None,
    signers: Mapping[str, Mapping[str, str]] | None = None,
) -> list[Output]:
    """Every entry under the version directory; hashes reused where the build already knows
    them, and each signed package's signer (`signers`, by path) beside its hash."""
    outputs: list[Output] = []
    for path in sorted(version_dir.rglob("*")):
        relative = path.relative_to(version_dir).as_posix()
        if relative in UNLISTED or (path.is_dir() and not path.is_symlink()):
            continue
        if relative in known:
            outputs.append(known[relative])
            continue
        if path.is_symlink():
            size, sha256 = hash_file(path.resolve())
            outputs.append(
                Output(relative, size, sha256, 0o777, path.readlink().as_posix(), None, None)
            )
            continue
        stat = path.stat()
        if digests and relative in digests:  # hashed as it was produced (memoised packages)
            size, sha256 = stat.st_size, digests[relative]
        else:
            size, sha256 = hash_file(path)
        signer = (signers or {}).get(relative)
        outputs.append(
            Output(relative, size, sha256, stat.st_mode & 0o777, None, None, None, signer)
        )
    return outputs


def stage_outputs(
    licensing: Iterable[TargetLicensing], modes: Mapping[str, int]
) -> dict[str, Output]:
    """The stage entries, keyed by path under the version directory, with their component."""
    known: dict[str, Output] = {}
    for tl in licensing:
        for c in tl.components:
            for f in c.files:
                path = f"{tl.target}/{f.path}"
                known[path] = Output(
                    path, f.size, f.sha256, modes.get(path, 0o644), f.link_to, c.name, c.expression
                )
            for t in c.texts:
                path = f"{tl.target}/{t.path}"
                known[path] = Output(
                    path, t.size, t.sha256, modes.get(path, 0o644), None, c.name, c.expression
                )
    return known


def manifest_json(
    product: Product,
    recipes: Mapping[str, Recipe | ModelRecipe],
    artifacts: Mapping[str, InputInfo],
    outputs: Sequence[Output],
    epoch: int,
    public_key_id: str | None,
    root: Path,
    policy_sha256: str,
    templates: Sequence[tuple[str, str]] = (),
) -> str:
    """The build manifest; `templates`: the project's template files the build read (path,
    SHA-256), recorded only when there are any (a project without them keeps its bytes)."""
    inputs = []
    for name, recipe in sorted(recipes.items()):
        for sid, source in sorted(recipe.sources.items()):
            artifact = artifacts.get(source.sha256)
            if artifact is None:
                continue  # a source no built target reads
            inputs.append(
                {
                    "component": name,
                    "source": sid,
                    **origin_to_json(source.origin),
                    "nested": [{"member": n.member, "sha256": n.sha256} for n in source.nested],
                    **({"build": source.build.as_json()} if source.build else {}),
                    "url": artifact.url or None,  # None: imported without provenance
                    "size": artifact.size,
                    "sha256": source.sha256,
                }
            )
    document = {
        "schema": MANIFEST_SCHEMA,
        "tool": {"name": "ortbundle", "version": __version__},
        "product": {
            "name": product.name,
            "version": product.version,
            "manifest": _relative(product.path, root),
            "manifest_sha256": product.digest,
        },
        "recipes": [
            {"name": n, "path": _relative(r.path, root), "sha256": r.digest}
            for n, r in sorted(recipes.items())
        ],
        "source_date_epoch": epoch,
        "policy_sha256": policy_sha256,
        "signing_key_id": public_key_id,
        "inputs": inputs,
        "outputs": [_output_json(o) for o in sorted(outputs, key=lambda o: o.path)],
    }
    if templates:
        document["templates"] = [{"path": p, "sha256": s} for p, s in sorted(templates)]
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def _output_json(output: Output) -> dict[str, Any]:
    item: dict[str, Any] = {
        "path": output.path,
        "size": output.size,
        "sha256": output.sha256,
        "mode": f"{output.mode:04o}",
    }
    if output.link_to is not None:
        item["link_to"] = output.link_to
    if output.component is not None:
        item["component"] = output.component
        item["license"] = output.license
    if output.signer is not None:
        item["signer"] = dict(sorted(output.signer.items()))
    return item


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.name  # never a host path


def signature_text(manifest: bytes, key: SecretKey, product: Product) -> str:
    comment = f"ortbundle manifest {product.name} {product.version} sha256:" + (
        hashlib.sha256(manifest).hexdigest()
    )
    return sign(
        manifest, key, trusted_comment=comment, untrusted_comment="ortbundle build manifest"
    )


def cached_sbom_json(
    memo: Memo,
    product: Product,
    licensing: Sequence[TargetLicensing],
    artifacts: Mapping[str, InputInfo],
    epoch: int,
    requirements: Mapping[str, Mapping[str, Any]] | None = None,
    shipped_sources: Mapping[str, Sequence[tuple[str, str]]] | None = None,
) -> str:
    """sbom_json, kept under the build's `memo` by everything it is made from (and the tool's
    code): the CycloneDX library alone costs a warm build 60 ms to import."""
    parts = [
        product.digest,
        str(epoch),
        json.dumps(requirements or {}, sort_keys=True),
        f"{len(licensing)} targets",
        *(licensing_to_json(tl) for tl in licensing),
        *sorted(f"{sha}:{info.url}:{info.size}" for sha, info in artifacts.items()),
    ]
    if shipped_sources:  # (absent: the key of a build without them is as it was)
        parts.append(json.dumps(shipped_sources, sort_keys=True))
    return memo.remembered_text(
        "sbom",
        parts,
        lambda: sbom_json(product, licensing, artifacts, epoch, requirements, shipped_sources),
        suffix=".json",
    )


def sbom_json(
    product: Product,
    licensing: Sequence[TargetLicensing],
    artifacts: Mapping[str, InputInfo],
    epoch: int,
    requirements: Mapping[str, Mapping[str, Any]] | None = None,
    shipped_sources: Mapping[str, Sequence[tuple[str, str]]] | None = None,
) -> str:
    """CycloneDX 1.6: one component per licensed component, with the files it contributes; and
    what the user's machine must provide, rendered from each target's requirements model
    (`requirements`: target -> TargetRequirements.as_json()): per runtime component the oldest
    system it runs on and the libraries it needs, per target the same for the whole package
    on the product's component. `shipped_sources`: per component, the archives of its
    corresponding source under sources/ (path, SHA-256)."""
    import uuid  # (with cyclonedx: only when the SBOM is not the memoised one)

    from cyclonedx.model import HashAlgorithm, HashType, Property
    from cyclonedx.model.bom import Bom, BomMetaData
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.model.license import LicenseExpression
    from cyclonedx.model.tool import ToolRepository
    from cyclonedx.output.json import JsonV1Dot6
    from packageurl import PackageURL

    grouped: dict[tuple[str, str], list[tuple[str, Any]]] = {}
    for tl in licensing:
        for c in tl.components:
            grouped.setdefault((c.name, c.version), []).append((tl.target, c))
    components = []
    identity = hashlib.sha256()
    for (name, version), uses in sorted(grouped.items()):
        first = uses[0][1]
        sources = {s.sha256: s for _, c in uses for s in c.sources}
        hashes = [
            HashType(alg=HashAlgorithm.SHA_256, content=s.sha256)
            for s in sources.values()
            if s.origin.name == name and s.sha256 in artifacts
        ]
        files = []
        for target, c in uses:
            said = {e.path: e for e in c.evidence}
            for f in c.files:
                if f.link_to is not None:
                    continue
                identity.update(f"{target}/{f.path}:{f.sha256}\n".encode())
                files.append(
                    Component(
                        type=ComponentType.FILE,
                        name=f"{target}/{f.path}",
                        bom_ref=f"file:{target}/{f.path}",
                        hashes=[HashType(alg=HashAlgorithm.SHA_256, content=f.sha256)],
                        **_file_evidence(target, said.get(f.path)),
                    )
                )
        expressions = sorted({c.expression for _, c in uses})
        properties = [Property(name="ortbundle:target", value=t) for t, _ in uses]
        properties += [
            Property(name="ortbundle:found-in", value=f"{s.filename} sha256:{s.sha256}")
            for s in sorted(sources.values(), key=lambda s: s.filename)
        ]
        properties += [
            Property(name="ortbundle:license-text", value=f"{t}/{x.path}")
            for t, c in uses
            for x in c.texts
        ]
        properties += _requirement_properties(name, [t for t, _ in uses], requirements or {})
        properties += [
            Property(name="ortbundle:licensor", value=who)
            for who in sorted({w for _, c in uses for w in c.licensor})
        ]
        properties += [  # a licence a person has not checked yet: a release refuses it
            Property(name="ortbundle:guessed", value=f"{t} {key}")
            for t, c in uses
            for key in c.guessed
        ]
        builds = [s.build for s in sorted(sources.values(), key=lambda s: s.filename) if s.build]
        components.append(
            Component(
                type=ComponentType.LIBRARY,
                name=name,
                version=version,
                bom_ref=f"{name}@{version}",
                purl=PackageURL.from_string(first.purl),
                licenses=[LicenseExpression(" AND ".join(expressions))],
                copyright="\n".join(first.copyrights) or None,
                publisher=first.publisher or None,
                hashes=hashes,
                components=files,
                properties=properties,
                **_from_source(builds, (shipped_sources or {}).get(name, ())),
            )
        )
    identity.update(f"{product.name}\n{product.version}\n".encode())
    tools = ToolRepository(
        components=[
            Component(type=ComponentType.APPLICATION, name="ortbundle", version=__version__)
        ]
    )
    bom = Bom(
        serial_number=uuid.UUID(bytes=identity.digest()[:16], version=5),
        metadata=BomMetaData(
            timestamp=datetime.fromtimestamp(epoch, tz=UTC),
            tools=tools,
            component=Component(
                type=ComponentType.APPLICATION,
                name=product.name,
                version=product.version,
                bom_ref=f"product:{product.name}@{product.version}",
                description=product.description,
                properties=_package_properties(requirements or {}),
            ),
        ),
        components=components,
    )
    for component in bom.components:
        bom.register_dependency(bom.metadata.component, [component])  # type: ignore[arg-type]
    text = JsonV1Dot6(bom).output_as_string(indent=2)
    return json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"


def _from_source(
    builds: Sequence[BuildRecipe], shipped: Sequence[tuple[str, str]]
) -> dict[str, Any]:
    """A component built from source, on its SBOM entry: each source archive as an external
    reference of type source-distribution (where it was fetched, its SHA-256), the archive of
    its corresponding source shipped under sources/ as another, and a pedigree whose ancestors
    are the source archives and whose notes say how the binary was built."""
    if not builds and not shipped:
        return {}
    from cyclonedx.model import (
        ExternalReference,
        ExternalReferenceType,
        HashAlgorithm,
        HashType,
        XsUri,
    )
    from cyclonedx.model.component import Component, ComponentType, Pedigree
    from packageurl import PackageURL

    archives = {s.sha256: s for b in builds for s in b.sources}
    references = [
        ExternalReference(
            type=ExternalReferenceType.SOURCE_DISTRIBUTION,
            url=XsUri(_source_location(s)),
            comment=f"source archive {s.id} the binary was built from",
            hashes=[HashType(alg=HashAlgorithm.SHA_256, content=s.sha256)],
        )
        for s in sorted(archives.values(), key=lambda s: s.id)
    ]
    references += [
        ExternalReference(
            type=ExternalReferenceType.SOURCE_DISTRIBUTION,
            url=XsUri(path),
            comment="the corresponding source, shipped beside the packages",
            hashes=[HashType(alg=HashAlgorithm.SHA_256, content=sha256)],
        )
        for path, sha256 in sorted(shipped)
    ]
    found: dict[str, Any] = {"external_references": references}
    if builds:
        ancestors = [
            Component(
                type=ComponentType.FILE,
                name=s.filename,
                bom_ref=f"source:{s.sha256}",
                purl=PackageURL.from_string(s.origin.purl()),
                hashes=[HashType(alg=HashAlgorithm.SHA_256, content=s.sha256)],
            )
            for s in sorted(archives.values(), key=lambda s: s.id)
        ]
        notes = "\n".join(_build_notes(b) for b in builds)
        found["pedigree"] = Pedigree(ancestors=ancestors, notes=notes)
    return found


def _source_location(source: Source) -> str:
    """Where a source archive came from: its URL, or its path in the project."""
    if isinstance(source.origin, UrlCoordinates):
        return source.origin.url
    if isinstance(source.origin, LocalCoordinates):
        return source.origin.path
    return source.origin.purl()


def _build_notes(build: BuildRecipe) -> str:
    headers = f"; ONNX Runtime headers {build.ort_headers}" if build.ort_headers else ""
    archives = ", ".join(s.id for s in build.sources)
    return f"built from {archives} with {build.toolchain}{headers}: {build.command}"


def _file_evidence(target: str, evidence: ShippedEvidence | None) -> dict[str, Any]:
    """What a file says of itself, on its SBOM entry: its copyright lines as CycloneDX
    evidence, its maker, product and licence strings and the notices naming it as properties,
    and the third-party code its bytes reveal as components inside it."""
    from cyclonedx.model import Copyright, Property
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.model.component_evidence import ComponentEvidence
    from cyclonedx.model.license import LicenseExpression
    from packageurl import PackageURL

    if evidence is None or not evidence.evidence.says_anything:
        return {}
    ev = evidence.evidence
    said = [
        ("ortbundle:evidence-from", ev.where),
        ("ortbundle:company", ev.company),
        ("ortbundle:authenticode", ev.signed),
        ("ortbundle:product", " ".join(p for p in (ev.product, ev.product_version) if p)),
        *(("ortbundle:licence-string", text) for text in ev.licences),
        *(("ortbundle:named-by", f"{target}/{text}") for text in evidence.noticed_by),
    ]
    embedded = [
        Component(
            type=ComponentType.LIBRARY,
            name=code.name,
            version=code.version or None,
            purl=PackageURL.from_string(code.purl) if code.purl else None,
            licenses=[LicenseExpression(code.licence)] if code.licence else [],
            evidence=ComponentEvidence(copyright=[Copyright(text=c) for c in code.copyrights])
            if code.copyrights
            else None,
            bom_ref=f"embedded:{target}/{evidence.path}:{code.name}",
            properties=[
                Property(name="ortbundle:embedded-in", value=f"{target}/{evidence.path}"),
                Property(name="ortbundle:revealed-by", value=code.says),
                *(  # two copies (nlohmann/json 3.11.3 and 3.12.0): every version, no one
                    Property(name="ortbundle:version-found", value=v)
                    for v in (code.versions if len(code.versions) > 1 else ())
                ),
                *(
                    Property(name="ortbundle:named-by", value=f"{target}/{text}")
                    for text in evidence.named_by(*code.terms)
                ),
            ],
        )
        for code in ev.embedded
    ]
    return {
        "properties": [Property(name=k, value=v) for k, v in said if v],
        "evidence": ComponentEvidence(copyright=[Copyright(text=c) for c in ev.copyrights])
        if ev.copyrights
        else None,
        "components": embedded,
    }


def _requirement_properties(
    name: str, targets: list[str], requirements: Mapping[str, Mapping[str, Any]]
) -> list[Any]:
    """For the runtime or plugin EP called `name` on each target: ortbundle:requires-system
    ('linux-x86_64 glibc 2.34, gcc 11.1.0, …'), one ortbundle:needs-symbol-version per system
    library ('linux-x86_64 libc.so.6 GLIBC_2.34') and one ortbundle:requires-library per
    library the machine provides ('windows-x86_64 nvml.dll nvidia-driver optional')."""
    from cyclonedx.model import Property

    found = []
    for target in targets:
        model = requirements.get(target) or {}
        runtime = next((r for r in model.get("runtimes", []) if r.get("name") == name), None)
        if runtime is None:
            continue
        system = runtime.get("system", {})
        minima = ", ".join(f"{k} {v}" for k, v in sorted(system.items()) if k != "needs")
        found.append(
            Property(name="ortbundle:requires-system", value=f"{target} {minima or 'nothing'}")
        )
        found += [
            Property(
                name="ortbundle:needs-symbol-version",
                value=f"{target} {need['library']} {need['version']}",
            )
            for need in system.get("needs", [])
        ]
        found += _library_properties(target, runtime.get("externals", []))
    return found


def _package_properties(requirements: Mapping[str, Mapping[str, Any]]) -> list[Any]:
    """The product's: per target, ortbundle:runs-on (the oldest system the package runs on)
    and ortbundle:requires-library for every library the user's machine provides."""
    from cyclonedx.model import Property

    found = []
    for target, model in sorted(requirements.items()):
        runs_on = model.get("runs_on") or "no versioned system requirement"
        found.append(Property(name="ortbundle:runs-on", value=f"{target} {runs_on}"))
        found += _library_properties(target, model.get("externals", []))
    return found


def _library_properties(target: str, externals: Sequence[Mapping[str, Any]]) -> list[Any]:
    """One per library: 'windows-x86_64 nvml.dll nvidia-driver optional',
    'windows-x86_64 cudart64_13.dll cuda required >=13.0'."""
    from cyclonedx.model import Property

    return [
        Property(
            name="ortbundle:requires-library",
            value=" ".join(
                part
                for part in (
                    target,
                    e.get("name", ""),
                    e.get("group", ""),
                    "optional" if e.get("optional") else "required",
                    e.get("version", ""),
                )
                if part
            ),
        )
        for e in externals
    ]


def read_requirements_models(
    version_dir: Path, licensing: Sequence[TargetLicensing]
) -> dict[str, dict[str, Any]]:
    """target -> its requirements model, from each closure record in the version directory."""
    found = {}
    for tl in licensing:
        model = read_requirements(version_dir, tl.target)
        if model is not None:
            found[tl.target] = model
    return found


RECORDS_DIR = "records"  # records/<target>.json: each target's attribution, for release merges


def write_evidence(
    version_dir: Path,
    *,
    product: Product,
    recipes: Mapping[str, Recipe | ModelRecipe],
    licensing: Sequence[TargetLicensing],
    audits: Sequence[ChannelAudit],
    inputs: Mapping[str, InputInfo],
    epoch: int,
    key: SecretKey | None,
    root: Path,
    policy_sha256: str,
    digests: Mapping[str, str] | None = None,
    memo: Memo,
    templates: Sequence[tuple[str, str]] = (),
    signers: Mapping[str, Mapping[str, str]] | None = None,
) -> None:
    """Everything after the stages and packages exist: records, audit, SBOM, manifest, signature,
    and the SLSA provenance over all of it (signed with the same key). `memo`: the build's,
    where the SBOM is kept (off for a release); `signers`: who signed each signed package, by
    output path, recorded with it in the manifest.

    One function for a single-machine build and for a release merged from several runners, so
    both write the same bytes for the same targets.
    """
    records = version_dir / RECORDS_DIR
    records.mkdir(exist_ok=True)
    for tl in licensing:
        (records / f"{tl.target}.json").write_text(licensing_to_json(tl), "utf-8")
    (version_dir / AUDIT_NAME).write_text(
        report_json(product.name, product.version, audits, licensing), "utf-8"
    )
    (version_dir / SBOM_NAME).write_text(
        cached_sbom_json(
            memo,
            product,
            licensing,
            inputs,
            epoch,
            read_requirements_models(version_dir, licensing),
            shipped_sources(version_dir, licensing),
        ),
        "utf-8",
    )
    normalize_modes(version_dir)
    modes = {
        p.relative_to(version_dir).as_posix(): 0o777 if p.is_symlink() else p.stat().st_mode & 0o777
        for p in version_dir.rglob("*")
    }
    outputs = list_outputs(version_dir, stage_outputs(licensing, modes), digests, signers)
    public_id = key.public_key().key_id_hex if key else None
    manifest = manifest_json(
        product, recipes, inputs, outputs, epoch, public_id, root, policy_sha256, templates
    ).encode()
    (version_dir / MANIFEST_NAME).write_bytes(manifest)
    (version_dir / MANIFEST_NAME).chmod(0o644)
    if key is not None:
        (version_dir / SIGNATURE_NAME).write_text(signature_text(manifest, key, product), "utf-8")
        (version_dir / SIGNATURE_NAME).chmod(0o644)
    provenance = version_dir / PROVENANCE_NAME
    provenance.write_text(envelope_json(manifest, build_context(root), key), "utf-8")
    provenance.chmod(0o644)
    stamp = epoch * 1_000_000_000
    for path in version_dir.rglob("*"):
        # only where it differs: a memoised package hard-linked here keeps its inode's ctime,
        # which is how the memo knows it was not touched
        if path.lstat().st_mtime_ns != stamp:
            os.utime(path, (epoch, epoch), follow_symlinks=False)
    os.utime(version_dir, (epoch, epoch))
