"""Throwaway OpenPGP keys for the signing tests, made by gpg in a GnuPG home of their own."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from ortbundle.channels.openpgp import gnupg_home


@dataclass(frozen=True)
class TestKey:
    fingerprint: str
    secret: Path  # the armoured secret key (what ORTBUNDLE_OPENPGP_KEY names)
    public: Path  # the armoured public key

    __test__ = False  # not a test class


def need_gpg() -> None:
    if shutil.which("gpg") is None:
        pytest.skip("gpg not installed (Debian: apt-get install gnupg)")


def make_key(out: Path, name: str = "Test Signer", passphrase: str = "") -> TestKey:
    """A new ed25519 signing key `name`, exported into `out` (its secret key protected by
    `passphrase` when one is given)."""
    need_gpg()
    out.mkdir(parents=True, exist_ok=True)
    address = name.lower().replace(" ", ".") + "@example.org"
    with gnupg_home() as home:
        unlock = ["--pinentry-mode", "loopback", "--passphrase", passphrase]
        gpg(home, *unlock, "--quick-gen-key", f"{name} <{address}>", "ed25519", "sign", "never")
        listing = gpg(home, "--with-colons", "--list-secret-keys").stdout.decode()
        fingerprint = next(
            line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:")
        )
        secret = out / f"{fingerprint}.secret.asc"
        secret.write_bytes(
            gpg(home, *unlock, "--armor", "--export-secret-keys", fingerprint).stdout
        )
        public = out / f"{fingerprint}.asc"
        public.write_bytes(gpg(home, "--armor", "--export", fingerprint).stdout)
    return TestKey(fingerprint, secret, public)


def gpg(home: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    result = subprocess.run(
        ["gpg", "--homedir", str(home), "--batch", "--no-tty", *args],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode()
    return result
