"""invoke keygen: make a product's signing key pair."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ortbundle._core.locations import ENV_KEY, default_key_path
from ortbundle.cli.common import ROOT, guard
from ortbundle.config.project import Project

if TYPE_CHECKING:
    pass


def run_keygen(
    product: str, *, secret: Path | None, public: Path | None, force: bool, root: Path = ROOT
) -> None:
    """A new Ed25519 key pair: the secret one outside the repository, the public one in keys/."""
    from ortbundle.evidence.signing import generate_keypair, write_public_key, write_secret_key

    secret_path = secret or default_key_path(product, os.environ)
    public_path = public or Project.at(root).keys / f"{product}.pub"
    key, pub = generate_keypair()
    places = {secret_path.parent: "the secret signing key", public_path.parent: "the public key"}

    def write() -> None:
        secret_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        public_path.parent.mkdir(parents=True, exist_ok=True)
        write_secret_key(secret_path, key, force=force)
        write_public_key(public_path, pub)

    guard(write, places)
    print(f"key id {pub.key_id_hex}")
    print(f"secret key: {secret_path} (mode 0600; keep it out of the repository)")
    print(f"public key: {public_path} (commit it: packagers verify with it)")
    print(f"CI: store the secret key file's content in a secret named {ENV_KEY}")
    print(f"anyone: minisign -V -p {public_path} -m manifest.json")
