"""Release: merge per-target builds made on separate runners into one signed version directory.

Each runner runs `invoke build --target T` from the same pins. A runner's manifest is evidence
only once something other than the runner's tree vouches for it: its signature by a runner key
the release job was given (or the product's own key), or its SHA-256 passed to the release job
through CI's own channel (a job output, not the artifact). The release job then re-hashes every
file of each runner's tree against that manifest, checks each recorded input against the pins of
this project's recipes, refuses trees built from different recipes,
product manifest, policy, tool or SOURCE_DATE_EPOCH (naming the difference), copies the target
stages and their channels' packages, and writes the evidence for the union with the same
function a single-machine build uses — so the result has the same bytes a full build gives.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ortbundle._core.errors import ConfigError, IntegrityError
from ortbundle._core.fsio import locked_directory, sha256_file
from ortbundle._core.memo import Memo
from ortbundle._core.version import __version__
from ortbundle.channels import CHANNEL_TARGETS, package_directory
from ortbundle.config.plan import (
    BuildOptions,
    Plan,
    Project,
    load_plan,
    policy_digest,
    source_date_epoch,
)
from ortbundle.evidence.names import MANIFEST_NAME, SIGNATURE_NAME
from ortbundle.evidence.record import RECORDS_DIR
from ortbundle.evidence.report.closures import copy_closures
from ortbundle.evidence.signing import PublicKey, SecretKey, load_public_key, signing_key, verify
from ortbundle.evidence.step import finish_version
from ortbundle.evidence.verify import verify_tree
from ortbundle.licensing.attribution import TargetLicensing, licensing_from_json
from ortbundle.licensing.audit import ChannelAudit, audit_targets
from ortbundle.stage.staging import discard, scratch_dir


@dataclass(frozen=True)
class _Input:
    url: str
    size: int


# The SHA-256 of each runner's manifest.json, as CI's own channel gave it to the release job
# (whitespace- or comma-separated): the generated workflow passes its build jobs' outputs here.
ENV_RUNNER_MANIFESTS = "ORTBUNDLE_RUNNER_MANIFESTS"


@dataclass(frozen=True)
class RunnerTrust:
    """What may vouch for a runner's manifest: a runner key that signed it, or its digest."""

    keys: tuple[PublicKey, ...] = ()  # besides keys/<product>.pub, always accepted
    manifest_digests: frozenset[str] = frozenset()  # besides $ORTBUNDLE_RUNNER_MANIFESTS
    key_files: tuple[Path, ...] = ()  # public key files (--runner-key), read when it starts


@dataclass(frozen=True)
class RunnerTree:
    path: Path  # the runner's dist/<product>/<version>
    manifest: dict[str, Any]
    targets: tuple[str, ...]
    vouched_by: str = ""  # "signed by key …", "its SHA-256 was given"


@dataclass(frozen=True)
class ReleaseResult:
    version_dir: Path
    runners: tuple[RunnerTree, ...]
    audits: tuple[ChannelAudit, ...]
    signed_by: str | None


def _version_dir(path: Path, product: str, version: str) -> Path:
    if (path / MANIFEST_NAME).is_file():
        return path
    nested = path / product / version
    if (nested / MANIFEST_NAME).is_file():
        return nested
    raise ConfigError(
        f"no {product} {version} build in this directory",
        file=str(path),
        fix="pass a runner's dist/ directory or its dist/<product>/<version>/",
    )


def _trust_of(
    project: Project, product: str, trust: RunnerTrust, environ: Mapping[str, str]
) -> RunnerTrust:
    """The keys and digests this release accepts: the given ones, the product's public key, and
    the digests in $ORTBUNDLE_RUNNER_MANIFESTS."""
    keys = [*trust.keys, *(load_public_key(k) for k in trust.key_files)]
    own = project.keys / f"{product}.pub"
    if own.is_file():
        keys.append(load_public_key(own))
    digests = set(trust.manifest_digests)
    for word in environ.get(ENV_RUNNER_MANIFESTS, "").replace(",", " ").split():
        if not re.fullmatch(r"[0-9a-fA-F]{64}", word):
            raise ConfigError(
                f"${ENV_RUNNER_MANIFESTS} holds {word[:80]!r}, not a manifest's SHA-256",
                fix="pass each runner's `sha256sum manifest.json` (64 hex digits), separated "
                "by spaces or commas",
            )
        digests.add(word.lower())
    return RunnerTrust(tuple(keys), frozenset(digests))


def _vouched(path: Path, trust: RunnerTrust) -> tuple[str, bytes]:
    """How the runner's manifest is vouched for, or IntegrityError: its signature by one of the
    accepted keys, else its SHA-256 among the digests CI gave. The tree vouches for nothing.
    Returns how, and the bytes vouched for: the only manifest the release then reads."""
    manifest = path / MANIFEST_NAME
    data = manifest.read_bytes()
    signature = path / SIGNATURE_NAME
    refused: list[str] = []
    if signature.is_file():
        text = signature.read_text("utf-8", errors="replace")
        for key in trust.keys:
            try:
                verify(data, text, key, source=str(signature))
            except IntegrityError as exc:
                refused.append(str(exc).split("\n", 1)[0])
                continue
            return f"signed by key {key.key_id_hex}", data
    digest = hashlib.sha256(data).hexdigest()
    if digest in trust.manifest_digests:
        return "its SHA-256 was given by CI", data
    why = (
        f"its signature is by none of the accepted keys ({'; '.join(refused)})"
        if refused
        else "it is not signed"
        if not signature.is_file()
        else "it is signed but no runner key was given"
    )
    given = (
        f"its SHA-256 {digest} is not among the {len(trust.manifest_digests)} given"
        if trust.manifest_digests
        else f"no manifest digest was given (its SHA-256 is {digest})"
    )
    raise IntegrityError(
        f"runner {path}: {MANIFEST_NAME} is vouched for by nothing outside the tree: {why}, "
        f"and {given}; a tree's word about itself is not evidence",
        file=str(manifest),
        fix=f"pass each runner manifest's SHA-256 through CI's own channel (--runner-manifest, "
        f"or ${ENV_RUNNER_MANIFESTS}: the generated workflow passes its build jobs' outputs), "
        "or sign each runner's build with a runner key and pass its public key (--runner-key)",
    )


def _load_runner(path: Path, trust: RunnerTrust) -> RunnerTree:
    vouched_by, vouched = _vouched(path, trust)
    report = verify_tree(path, ignore_signature=True)
    if not report.ok:
        problems = "; ".join(_what_differs(report.lines()[:10]))
        raise IntegrityError(
            f"runner {path}: the tree does not match its manifest ({vouched_by}): {problems}",
            file=str(path),
            fix="re-run that runner's build; never edit a dist/ tree by hand",
        )
    if (path / MANIFEST_NAME).read_bytes() != vouched:  # replaced while it was checked
        raise IntegrityError(
            f"runner {path}: {MANIFEST_NAME} changed while the release read it",
            file=str(path / MANIFEST_NAME),
            fix="nothing may write a runner's tree while the release merges it",
        )
    manifest = json.loads(vouched)
    try:
        _identity(manifest)
        for output in manifest["outputs"]:
            output["path"], output["sha256"]
        for item in manifest["inputs"]:
            item["sha256"], item["url"], item["size"]
    except (KeyError, TypeError) as exc:
        raise IntegrityError(
            f"the runner's manifest lacks {exc}",
            file=str(path / MANIFEST_NAME),
            fix="use a dist/ tree written by invoke build of this ortbundle version",
        ) from None
    records = sorted((path / RECORDS_DIR).glob("*.json"))
    if not records:
        raise ConfigError(
            "the runner's tree holds no target records",
            file=str(path),
            fix="build it with this ortbundle version (records/<target>.json)",
        )
    return RunnerTree(path, manifest, tuple(r.stem for r in records), vouched_by)


def _what_differs(lines: list[str]) -> list[str]:
    """A verify report's lines with the field each kind of difference is about."""
    fields = {"modified": "size or sha256", "missing": "present", "unexpected": "listed"}
    out = []
    for line in lines:
        kind = line.split(" ", 1)[0]
        out.append(f"{line} ({fields[kind]})" if kind in fields else line)
    return out


def _identity(manifest: dict[str, Any]) -> dict[str, Any]:
    """What must be equal for trees to be merged: the same tool, inputs and rules."""
    return {
        "tool version": manifest["tool"]["version"],
        "product manifest": manifest["product"]["manifest_sha256"],
        "recipes": {r["name"]: r["sha256"] for r in manifest["recipes"]},
        "SOURCE_DATE_EPOCH": manifest["source_date_epoch"],
        "licence policy": manifest.get("policy_sha256"),
        "templates": {t["path"]: t["sha256"] for t in manifest.get("templates", [])},
    }


def _differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    out = []
    for key in a:
        if a[key] != b.get(key):
            if isinstance(a[key], dict):
                names = sorted(set(a[key]) | set(b[key]))
                for name in names:
                    if a[key].get(name) != b[key].get(name):
                        out.append(f"{key} {name}: {a[key].get(name)} vs {b[key].get(name)}")
            else:
                out.append(f"{key}: {a[key]} vs {b.get(key)}")
    return out


def _outputs_under(manifest: dict[str, Any], prefix: str) -> dict[str, str]:
    return {o["path"]: o["sha256"] for o in manifest["outputs"] if o["path"].startswith(prefix)}


def _signers_under(manifest: dict[str, Any], prefix: str) -> dict[str, dict[str, str]]:
    """Who signed each package under `prefix`, as the runner's manifest records it."""
    return {
        o["path"]: {str(k): str(v) for k, v in o["signer"].items()}
        for o in manifest["outputs"]
        if o["path"].startswith(prefix) and isinstance(o.get("signer"), dict)
    }


def release(
    project: Project,
    runner_dirs: Sequence[Path],
    options: BuildOptions,
    trust: RunnerTrust | None = None,
) -> ReleaseResult:
    """Merge, check, record and sign; publish dist/<product>/<version>/ only if all of it holds."""
    environ = os.environ if options.environ is None else options.environ
    plan = load_plan(project, BuildOptions(product=options.product))
    product = plan.product
    key = signing_key(
        product, options.signing_key, environ, release=options.release, keys=project.keys
    )
    epoch = source_date_epoch(project.root, environ)
    accepted = _trust_of(project, product.name, trust or RunnerTrust(), environ)
    runners = tuple(
        _load_runner(_version_dir(d, product.name, product.version), accepted) for d in runner_dirs
    )
    _refuse_other_inputs(runners, _expected_identity(project, plan, epoch))
    for runner in runners:
        _refuse_other_pins(runner, plan)
    owner = _owners(runners, plan)
    version_dir = project.dist / product.name / product.version
    with locked_directory(version_dir.parent, waiting=f"publishing {version_dir}"):
        return _release_locked(project, options, plan, runners, owner, version_dir, key, epoch)


def _release_locked(
    project: Project,
    options: BuildOptions,
    plan: Plan,
    runners: tuple[RunnerTree, ...],
    owner: dict[str, RunnerTree],
    version_dir: Path,
    key: SecretKey | None,
    epoch: int,
) -> ReleaseResult:
    """The merge into a scratch tree and its publication, holding dist/<product>/'s lock."""
    scratch = scratch_dir(version_dir)
    try:
        merged = _merge_runners(plan, owner, scratch)
        # a release keeps and consults no memo: it parses every licence expression again,
        # renders every page and writes the SBOM afresh
        memo = Memo.off()
        audits = audit_targets(
            project,
            plan.product,
            merged.licensing,
            channels=options.audit_channels,
            release=options.release,
            memo=memo,
        )
        finish_version(
            project,
            plan,
            scratch,
            version_dir,
            licensing=merged.licensing,
            audits=audits,
            inputs=merged.inputs,
            epoch=epoch,
            key=key,
            release=options.release,
            compare=options.compare,
            # each runner's tree was re-hashed against its manifest when it was loaded
            digests=merged.packaging_digests,
            signers=merged.packaging_signers,
            memo=memo,
        )
    except BaseException:
        discard(scratch, up_to=project.dist)
        raise
    return ReleaseResult(version_dir, runners, audits, key.public_key().key_id_hex if key else None)


def _expected_identity(project: Project, plan: Plan, epoch: int) -> dict[str, Any]:
    """What this release is made of, in the shape `_identity` reads from a runner's manifest."""
    return {
        "tool version": __version__,
        "product manifest": plan.product.digest,
        "recipes": {name: r.digest for name, r in plan.all_recipes.items()},
        "SOURCE_DATE_EPOCH": epoch,
        "licence policy": policy_digest(project),
        "templates": dict(plan.templates.files),
    }


def _refuse_other_inputs(runners: tuple[RunnerTree, ...], expected: dict[str, Any]) -> None:
    """Every runner must have built from this release's tool, manifests, recipes, policy and
    SOURCE_DATE_EPOCH; the first that did not is named with every difference."""
    for runner in runners:
        found = _identity(runner.manifest)
        # a runner records only the recipes its targets use; compare those
        found_recipes = found["recipes"]
        wanted = {**expected, "recipes": {n: expected["recipes"].get(n) for n in found_recipes}}
        different = _differences(wanted, found)
        if different:
            raise ConfigError(
                "this runner built from different inputs than this release: "
                + "; ".join(different),
                file=str(runner.path),
                fix="build every target from the same commit (recipes, manifests, licences, "
                "templates) and the same SOURCE_DATE_EPOCH",
            )


def _refuse_other_pins(runner: RunnerTree, plan: Plan) -> None:
    """Recompute what the runner fetched from this project's recipes: every input its manifest
    records must be a pin of the recipe it names, with that digest (and size, when pinned)."""
    where = str(runner.path / MANIFEST_NAME)
    for item in runner.manifest["inputs"]:
        component, source_id = item.get("component"), item.get("source")
        recipe = plan.all_recipes.get(str(component))
        source = recipe.sources.get(str(source_id)) if recipe is not None else None
        name = f"inputs {component}/{source_id}"
        if source is None:
            problem = f"{name}: no such source in this project's recipes"
        elif item["sha256"] != source.sha256:
            problem = f"{name} sha256: {item['sha256']} vs pinned {source.sha256}"
        elif source.size is not None and item["size"] != source.size:
            problem = f"{name} size: {item['size']} vs pinned {source.size}"
        else:
            continue
        raise ConfigError(
            f"runner {runner.path}: its manifest records an input this release's recipes do "
            f"not pin: {problem}",
            file=where,
            fix="build every target from the same commit (recipes, manifests, licences, "
            "templates) and the same SOURCE_DATE_EPOCH",
        )


def _owners(runners: tuple[RunnerTree, ...], plan: Plan) -> dict[str, RunnerTree]:
    """The runner each target of the product is taken from: the first that built it. Another
    that built it too must have the same bytes; a target no runner built is refused."""
    owner: dict[str, RunnerTree] = {}
    for runner in runners:
        for target in runner.targets:
            if target in owner:
                _refuse_different_bytes(owner[target], runner, target)
                continue
            owner[target] = runner
    missing = [t for t in plan.targets if t not in owner]
    if missing:
        raise ConfigError(
            f"no runner built {', '.join(missing)}",
            file=str(plan.product.path),
            fix="add a runner job per target of the product, or pass its dist/ directory",
        )
    return owner


def _refuse_different_bytes(first: RunnerTree, other: RunnerTree, target: str) -> None:
    """Builds of one target from the same pins are identical, output by output."""
    mine = _outputs_under(first.manifest, f"{target}/")
    theirs = _outputs_under(other.manifest, f"{target}/")
    if mine != theirs:
        raise IntegrityError(
            f"two runners built {target} with different bytes",
            target=target,
            file=f"{first.path} and {other.path}",
            fix="builds of one target from the same pins must be identical; rebuild one of them",
        )


@dataclass(frozen=True)
class _Merged:
    """What the runners' trees bring to the release's evidence: each target's attribution,
    every input artifact, and the digest of every package file (already checked)."""

    licensing: list[TargetLicensing]
    inputs: dict[str, _Input]  # by SHA-256
    packaging_digests: dict[str, str]  # by output path
    # who signed each signed package, as its runner's manifest records it (by output path)
    packaging_signers: dict[str, dict[str, str]]


def _merge_runners(plan: Plan, owner: dict[str, RunnerTree], scratch: Path) -> _Merged:
    """Each target's stage, closures, packages and record, from its runner into `scratch`."""
    licensing: list[TargetLicensing] = []
    inputs: dict[str, _Input] = {}
    packaging_digests: dict[str, str] = {}
    packaging_signers: dict[str, dict[str, str]] = {}
    for target in plan.targets:
        runner = owner[target]
        shutil.copytree(runner.path / target, scratch / target, symlinks=True)
        copy_closures(runner.path, scratch, target)  # report.html reads it
        packaging_digests |= _merge_packages(plan.product.channels, target, runner, scratch)
        packaging_signers |= _signers_under(runner.manifest, "packaging/")
        record = runner.path / RECORDS_DIR / f"{target}.json"
        licensing.append(licensing_from_json(record.read_text("utf-8"), where=str(record)))
        for item in runner.manifest["inputs"]:
            inputs[item["sha256"]] = _Input(item["url"], item["size"])
    # only the packages the release takes: another runner's copy of a package is not merged
    signers = {p: who for p, who in packaging_signers.items() if p in packaging_digests}
    return _Merged(licensing, inputs, packaging_digests, signers)


def _merge_packages(
    channels: tuple[str, ...], target: str, runner: RunnerTree, scratch: Path
) -> dict[str, str]:
    """The packages of every channel that carries `target`, from its runner into `scratch`;
    their digests, as the runner's manifest records them."""
    digests: dict[str, str] = {}
    for channel in channels:
        if target not in CHANNEL_TARGETS[channel]:
            continue
        built = runner.path / "packaging" / channel
        own = built / package_directory(channel, target)
        if not own.is_dir() or not any(own.iterdir()):
            raise ConfigError(
                f"the runner that built {target} made no {channel} package",
                target=target,
                file=str(runner.path),
                fix="build every target with all of its channels (no --channel), "
                "with the packaging tools installed",
            )
        _merge_tree(built, scratch / "packaging" / channel, channel=channel)
        digests |= _outputs_under(runner.manifest, f"packaging/{channel}/")
    return digests


def _merge_tree(built: Path, into: Path, *, channel: str) -> None:
    """Copy one runner's package into the release. A channel of several targets (the Android
    module) arrives from several runners: their shared files must be byte-identical."""
    if not into.exists():
        shutil.copytree(built, into, symlinks=True)
        return
    for path in sorted(built.rglob("*")):
        dest = into / path.relative_to(built)
        if path.is_dir() and not path.is_symlink():
            dest.mkdir(exist_ok=True)
        elif dest.exists() or dest.is_symlink():
            if path.is_symlink() or dest.is_symlink() or sha256_file(path) != sha256_file(dest):
                raise ConfigError(
                    f"two runners built different {channel} files at {dest.relative_to(into)}",
                    file=str(path),
                    fix="build every target of the channel from the same commit and inputs",
                )
        else:
            shutil.copy2(path, dest, follow_symlinks=False)
