"""Verify: re-hash a version directory, a target stage or an unpacked package against the
signed build manifest, and report every modified, missing and unexpected file by path.

A manifest that names a signing key (every release: `--release` refuses to build unsigned)
never verifies without its signature, whatever the caller allows: removing
manifest.json.minisig must not turn a release into an "unsigned" tree that passes. A
development build made without a key names none; its hashes can be checked (`allow_unsigned`),
which proves the tree matches its own manifest and nothing about who built it."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ortbundle._core.errors import ConfigError, IntegrityError
from ortbundle._core.publish import set_aside_trees
from ortbundle.evidence.manifest_shape import manifest_problems
from ortbundle.evidence.names import MANIFEST_NAME, PROVENANCE_NAME, SIGNATURE_NAME
from ortbundle.evidence.provenance import ProvenanceCheck, check_provenance
from ortbundle.evidence.record import MANIFEST_SCHEMA, UNLISTED, hash_file
from ortbundle.evidence.signing import PublicKey, load_public_key, verify
from ortbundle.stage.staging import scratch_trees


@dataclass(frozen=True)
class VerifyReport:
    tree: Path
    manifest: Path
    product: str
    version: str
    signed_by: str | None  # key id; None when unsigned and that was allowed
    trusted_comment: str | None
    checked: int
    modified: tuple[str, ...]
    missing: tuple[str, ...]
    unexpected: tuple[str, ...]
    provenance: ProvenanceCheck | None = None  # checked whenever the signature is
    # (path, its mode, the manifest's): the bytes match, the permissions do not (a setuid bit)
    modes: tuple[tuple[str, str, str], ...] = ()

    @property
    def ok(self) -> bool:
        return not (self.modified or self.missing or self.unexpected or self.modes)

    def lines(self) -> list[str]:
        """One line per path, its control characters escaped: a file someone added to the tree
        must not print a line of its own ("44 files match the manifest") or move the cursor."""
        out = [f"modified    {printable(p)}" for p in self.modified]
        out += [
            f"mode        {printable(p)}: mode {m}, manifest says {w}" for p, m, w in self.modes
        ]
        out += [f"missing     {printable(p)}" for p in self.missing]
        out += [f"unexpected  {printable(p)}" for p in self.unexpected]
        return out


def printable(path: str) -> str:
    """`path` (or any text a tree or manifest supplies) with its control characters escaped."""
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in path
    )


def locate_manifest(tree: Path, manifest: Path | None, target: str | None) -> tuple[Path, str]:
    """The manifest and the prefix of `tree` inside the version directory it describes."""
    if manifest is not None:
        if not manifest.is_file():
            raise ConfigError(
                "no such manifest", file=str(manifest), fix="pass the manifest.json of the build"
            )
        return manifest, f"{target}/" if target else ""
    if (tree / MANIFEST_NAME).is_file():
        return tree / MANIFEST_NAME, f"{target}/" if target else ""
    if (tree.parent / MANIFEST_NAME).is_file():
        return tree.parent / MANIFEST_NAME, f"{tree.name}/"
    aside = set_aside_trees(tree) if not (tree.exists() or tree.is_symlink()) else []
    if aside:
        raise ConfigError(
            f"{tree.name} is missing: a build was killed while publishing it, between setting "
            f"the previous tree aside and renaming the new one in; that tree is complete, "
            f"at {aside[-1]}",
            file=str(tree),
            fix=f"run the build again (it puts the set-aside tree back first), or check it "
            f"where it is: invoke verify --path {aside[-1]}",
        )
    if not (tree.exists() or tree.is_symlink()):
        # a first build killed before it published leaves no tree, perhaps its scratch one
        left = scratch_trees(tree) if tree.parent.is_dir() else []
        unfinished = (
            f"; an unfinished build's scratch tree is left beside it, at {left[-1]} (a build "
            "stopped before it published; the next build removes it)"
            if left
            else ""
        )
        raise ConfigError(
            f"{tree} does not exist: no build was published there{unfinished}",
            file=str(tree),
            fix="build it (invoke build), or pass the version directory a build published "
            "(dist/<product>/<version>)",
        )
    raise ConfigError(
        f"no {MANIFEST_NAME} in or beside this tree",
        file=str(tree),
        fix="pass --manifest (and --target for an unpacked package of one target)",
    )


def check_signature(
    manifest: Path, data: bytes, public_key: PublicKey | None, *, allow_unsigned: bool
) -> tuple[str | None, str | None]:
    signature = manifest.with_name(SIGNATURE_NAME)
    if not signature.is_file():
        claimed = _signing_key_id(data)
        if claimed:
            raise IntegrityError(
                f"the manifest says key {claimed} signed it, and {SIGNATURE_NAME} is missing",
                file=str(signature),
                fix="verify the tree as it was published, with its signature: a signed build "
                "never verifies without it",
            )
        if allow_unsigned:
            return None, None
        raise IntegrityError(
            "the build manifest is not signed (a development build made without a key)",
            file=str(manifest),
            fix="for a signed tree build with a signing key (invoke keygen); to check an "
            "unsigned tree's hashes run invoke verify without --signed and --public-key",
        )
    if public_key is None:
        raise ConfigError(
            "the manifest is signed but no public key was given to check it with",
            file=str(signature),
            fix="pass --public-key, or keep the product's key at keys/<product>.pub",
        )
    comment = verify(data, signature.read_text("utf-8"), public_key, source=str(signature))
    return public_key.key_id_hex, comment


def _signing_key_id(data: bytes) -> str | None:
    """The key the manifest says signed it (`signing_key_id`), None when it names none; an
    unreadable manifest names none here and is refused by _parse."""
    try:
        claimed = json.loads(data).get("signing_key_id")
    except (UnicodeDecodeError, ValueError, AttributeError):
        return None
    return str(claimed) if claimed else None


def verify_tree(
    tree: Path,
    *,
    manifest: Path | None = None,
    target: str | None = None,
    public_key: PublicKey | Path | str | None = None,
    allow_unsigned: bool = False,
    ignore_signature: bool = False,  # hashes only: a runner's tree, checked before a merge
    workers: int = 2,
) -> VerifyReport:
    manifest_path, prefix = locate_manifest(tree, manifest, target)
    data = manifest_path.read_bytes()
    key = (
        public_key
        if isinstance(public_key, PublicKey) or public_key is None
        else load_public_key(public_key)
    )
    # its shape first: nothing below (the signature's claimed key included) reads a field the
    # manifest may lack or hold in another form
    document = _parse(manifest_path, data)
    signed_by, comment = (
        (None, None)
        if ignore_signature
        else check_signature(manifest_path, data, key, allow_unsigned=allow_unsigned)
    )
    _refuse_another_version(tree, manifest_path, document)
    provenance = None
    beside = manifest_path.with_name(PROVENANCE_NAME)
    if not ignore_signature and (signed_by is not None or beside.is_file()):
        # a signed manifest needs its signed provenance; an unsigned one's must still agree
        provenance = check_provenance(beside, data, key if signed_by is not None else None)
    expected: dict[str, dict[str, Any]] = {
        o["path"][len(prefix) :]: o for o in document["outputs"] if o["path"].startswith(prefix)
    }
    if not expected:
        raise ConfigError(
            f"the manifest lists no file under {prefix or 'the version directory'}",
            file=str(manifest_path),
            fix="pass --target naming the target this tree was built for",
        )
    present: list[Path] = []
    unexpected: list[str] = []
    for path in sorted(tree.rglob("*")):
        if path.is_dir() and not path.is_symlink():
            continue
        relative = path.relative_to(tree).as_posix()
        if not prefix and relative in UNLISTED:
            continue
        if relative in expected:
            present.append(path)
        else:
            unexpected.append(relative)

    def differs(path: Path) -> str | None:
        relative = path.relative_to(tree).as_posix()
        want = expected[relative]
        if "link_to" in want:
            return (
                None
                if path.is_symlink() and path.readlink().as_posix() == want["link_to"]
                else relative
            )
        if path.is_symlink() or not path.is_file():
            return relative
        size, sha256 = hash_file(path)
        return None if (size, sha256) == (want["size"], want["sha256"]) else relative

    def mode_differs(path: Path) -> tuple[str, str, str] | None:
        """A file (not a link: its type is checked above) whose permission bits, setuid,
        setgid and sticky included, are not the manifest's."""
        relative = path.relative_to(tree).as_posix()
        want = expected[relative]
        if os.name != "posix" or "link_to" in want or path.is_symlink() or not path.is_file():
            return None  # Windows has no POSIX modes to compare
        found = f"{path.stat().st_mode & 0o7777:04o}"
        recorded = str(want.get("mode", ""))
        return None if found == recorded else (relative, found, recorded)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:  # hashlib releases the GIL
        modified = [r for r in pool.map(differs, present) if r is not None]
    modes = [m for m in map(mode_differs, present) if m is not None and m[0] not in modified]
    seen = {p.relative_to(tree).as_posix() for p in present}
    return VerifyReport(
        tree=tree,
        manifest=manifest_path,
        product=document["product"]["name"],
        version=document["product"]["version"],
        signed_by=signed_by,
        trusted_comment=comment,
        checked=len(present),
        modified=tuple(sorted(modified)),
        missing=tuple(sorted(set(expected) - seen)),
        unexpected=tuple(unexpected),
        provenance=provenance,
        modes=tuple(modes),
    )


def _refuse_another_version(tree: Path, manifest: Path, document: dict[str, Any]) -> None:
    """A version directory, dist/<product>/<version>/, must hold that version's build: an older
    signed tree moved into a newer version's place matches its own manifest file for file (a
    rollback to a release with known flaws), so the names are compared too."""
    product, version = document["product"]["name"], document["product"]["version"]
    if manifest.parent != tree or tree.name.startswith("."):  # a stage, a set-aside tree
        return
    if tree.parent.name == product and tree.name != version:
        raise IntegrityError(
            f"{tree.name} holds the signed build of {product} {version}, not {tree.name}: an "
            "older (or other) build was moved into this version's place",
            file=str(tree),
            fix=f"rebuild {product} {tree.name} into it, or put the tree back under "
            f"dist/{product}/{version}/",
        )


def _parse(path: Path, data: bytes) -> dict[str, Any]:
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IntegrityError(f"the manifest is not JSON: {exc}", file=str(path)) from None
    if not isinstance(document, dict) or document.get("schema") != MANIFEST_SCHEMA:
        raise IntegrityError(
            f"not an {MANIFEST_SCHEMA} manifest",
            file=str(path),
            fix="pass the manifest.json written by invoke build",
        )
    problems = manifest_problems(document)  # before the provenance or the hashes read it
    if problems:
        raise IntegrityError(
            f"the manifest does not have the {MANIFEST_SCHEMA} shape: {'; '.join(problems)}",
            file=str(path),
            fix="it was altered or damaged after the build: take manifest.json from the build "
            "again, or rebuild; never edit it",
        )
    return document
