"""invoke verify: check a version tree against its signed manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from ortbundle._core.errors import IntegrityError, OrtbundleError
from ortbundle._core.words import plural
from ortbundle.cli.common import ROOT, USAGE_EXIT, CommandFailed, guard
from ortbundle.config.project import BuildOptions, Project

if TYPE_CHECKING:
    pass


def run_verify(
    tree: Path | None,
    *,
    manifest: Path | None,
    target: str | None,
    public_key: Path | None,
    allow_unsigned: bool,
    product: str,
    root: Path = ROOT,
    signed: bool = False,
) -> None:
    """Re-hash a tree against the signed manifest; the exit code says whether it matched.

    Whether a signature is required: always for a tree whose manifest names a signing key (a
    release); for an unsigned development tree only when asked (`signed`, or a `public_key`
    given to check with), else its hashes are checked and it is said to be unsigned."""
    from ortbundle.config.plan import load_plan
    from ortbundle.evidence.verify import printable, verify_tree

    require = signed or public_key is not None
    if require and allow_unsigned:
        asked = "--signed" if signed else "--public-key"
        raise CommandFailed(
            f"ortbundle: usage error: {asked} asks for a signed check and --allow-unsigned "
            "allows none; pass one of them",
            USAGE_EXIT,
        )
    if tree is None:
        plan = guard(lambda: load_plan(Project.at(root), BuildOptions(product=product)))
        tree = Project.at(root).dist / plan.product.name / plan.product.version
    key_path = public_key
    if key_path is None:
        # The key is chosen by the caller (--product), never by the tree being checked: a
        # tampered manifest must not be able to name the key that "verifies" it.
        default = Project.at(root).keys / f"{product}.pub"
        key_path = default if default.is_file() else None
        claimed = _manifest_product(tree, manifest, target)
        if claimed is not None and claimed != product:
            # a usage error (exit 2), not a failed check: no file was hashed yet. Only a product
            # of this project is suggested: a tampered tree may name anything ("../../evil").
            known = claimed.isidentifier() or claimed.replace("-", "_").isidentifier()
            mine = known and (Project.at(root).manifests / f"{claimed}.toml").is_file()
            hint = f"pass --product {claimed}" if mine else "pass the right --product"
            raise CommandFailed(
                f"ortbundle: usage error: the manifest says product {claimed!r}, not "
                f"{product!r}; {hint} (its key verifies its trees), or --public-key explicitly",
                USAGE_EXIT,
            )
    report = guard(
        lambda: verify_tree(
            tree,
            manifest=manifest,
            target=target,
            public_key=key_path,
            allow_unsigned=not require,
        )
    )
    signer = (
        f"signature OK (key {report.signed_by})"
        if report.signed_by
        else "UNSIGNED development build: its files are checked against its own manifest, "
        "which no key vouches for (--signed requires a signature)"
    )
    named = printable(f"{report.product} {report.version}")  # an unsigned manifest's words
    print(f"{report.tree}: {named}, {signer}")
    if report.provenance is not None:
        print(report.provenance.line())
    for line in report.lines():
        print(line)
    if not report.ok:
        modes = f", {len(report.modes)} with another mode" if report.modes else ""
        raise CommandFailed(
            f"ortbundle: integrity error: {len(report.modified)} modified, "
            f"{len(report.missing)} missing, {len(report.unexpected)} unexpected{modes} "
            f"(of {plural(report.checked + len(report.missing), 'file')} in the manifest)",
            IntegrityError.exit_code,
        )
    matches = "matches" if report.checked == 1 else "match"
    print(f"{plural(report.checked, 'file')} {matches} the manifest")


def _manifest_product(tree: Path, manifest: Path | None, target: str | None) -> str | None:
    from ortbundle.evidence.verify import locate_manifest

    try:
        path, _ = locate_manifest(tree, manifest, target)
        return str(json.loads(path.read_text("utf-8"))["product"]["name"])
    except (OrtbundleError, OSError, ValueError, KeyError, TypeError):
        return None
