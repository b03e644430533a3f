"""OpenPGP signing of the Linux outputs: the .deb and .rpm (by nfpm's own signing) and the Arch
source tarball (a detached signature the PKGBUILD lists, its key in `validpgpkeys`).

The key is an ASCII-armoured secret key file named by ORTBUNDLE_OPENPGP_KEY, its passphrase
ORTBUNDLE_OPENPGP_PASSPHRASE or the file ORTBUNDLE_OPENPGP_PASSPHRASE_FILE names (none for an
unprotected key): the same shape as the minisign key's variables. It is read once, before any
work, in a throwaway GnuPG home (never the user's keyring): a named key that cannot be read, or
whose passphrase does not unlock it, is refused naming the channels it would sign and the
variable to fix — a release never publishes an unsigned package its signer was meant to sign.

Beside each signed output the build writes the public key (`openpgp-<key id>.asc`), and beside
the .deb what `debsig-verify` needs: `debsig/policies/<key id>/<package>.pol` and
`debsig/keyrings/<key id>/debsig.gpg` (a binary keyring: debsig-verify reads no armour).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import quoteattr

from ortbundle._core.errors import ConfigError, PackagingError
from ortbundle._core.locations import (
    ENV_OPENPGP_KEY,
    ENV_OPENPGP_PASSPHRASE,
    ENV_OPENPGP_PASSPHRASE_FILE,
)

SIGNED_CHANNELS = ("deb", "rpm", "arch")  # the channels this key signs, in this order
NFPM_KEY_VARIABLE = "ORTBUNDLE_NFPM_OPENPGP_KEY"  # nfpm.yaml names the key by it, not by path
DEBSIG_DIR = "debsig"  # beside the .deb: policies/<key id>/ and keyrings/<key id>/
_GPG_TIMEOUT = 120.0  # seconds; a signature takes milliseconds


@dataclass(frozen=True)
class OpenPgpKey:
    """The configured signing key: where it is, how to unlock it, and who it is."""

    key_file: Path
    fingerprint: str  # of the primary key, which signs (40 hex digits, upper case)
    user_id: str  # its first user id, for the debsig policy's description
    public_binary: bytes  # the transferable public key (debsig-verify's keyring)
    public_armored: str  # the same, ASCII-armoured (published beside the packages)
    passphrase: str = field(default="", repr=False)

    @property
    def key_id(self) -> str:
        """The long key id, as debsig-verify names its policy and keyring directories."""
        return self.fingerprint[-16:]

    @property
    def public_name(self) -> str:
        """The file the public key is published as, beside the signed outputs."""
        return f"openpgp-{self.key_id}.asc"

    @property
    def signer(self) -> Mapping[str, str]:
        """How the manifest and the provenance name this signer."""
        return {"kind": "openpgp", "fingerprint": self.fingerprint}


def signed_channels(channels: Sequence[str]) -> tuple[str, ...]:
    """The product's channels an OpenPGP key signs."""
    return tuple(c for c in SIGNED_CHANNELS if c in channels)


def unsigned_warning(channels: Sequence[str]) -> tuple[str, ...]:
    """The one line a build without a key prints about its Linux outputs (none if it has none)."""
    unsigned = signed_channels(channels)
    if not unsigned:
        return ()
    what = {"deb": "the .deb", "rpm": "the .rpm", "arch": "the Arch source tarball"}
    return (
        f"{_listed([what[c] for c in unsigned])} {'is' if len(unsigned) == 1 else 'are'} "
        f"unsigned: set {ENV_OPENPGP_KEY} to an armoured OpenPGP secret key to sign "
        f"{'it' if len(unsigned) == 1 else 'them'} (docs/signing-linux.md)",
    )


def openpgp_key(environ: Mapping[str, str], channels: Sequence[str]) -> OpenPgpKey | None:
    """The key the environment names, read and unlocked once; None when none is named. A named
    key that cannot be used is refused, naming the product's channels it would sign."""
    named = environ.get(ENV_OPENPGP_KEY, "").strip()
    if not named:
        return None
    signing = signed_channels(channels) or SIGNED_CHANNELS
    whose = f"the {_listed(signing)} package{'s' if len(signing) > 1 else ''}"
    path = Path(named).expanduser()
    if not path.is_file():
        raise ConfigError(
            f"{ENV_OPENPGP_KEY} names {named}, which is not a file: {whose} cannot be signed",
            component=f"packaging:{signing[0]}",
            file=named,
            fix=f"point {ENV_OPENPGP_KEY} at an armoured OpenPGP secret key "
            "(gpg --armor --export-secret-keys <fingerprint>), or unset it for unsigned packages",
        )
    passphrase = _passphrase(environ, whose)
    if shutil.which("gpg") is None:
        raise PackagingError(
            f"gpg is not installed: {whose} cannot be signed",
            component=f"packaging:{signing[0]}",
            fix="install GnuPG (Debian: apt-get install gnupg)",
        )
    with gnupg_home() as home:
        _gpg(home, ["--import", str(path)], whose=whose, file=named)
        fingerprint, user_id = _primary(home, whose, named)
        public = _gpg(home, ["--export", fingerprint], whose=whose, file=named).stdout
        armored = _gpg(home, ["--armor", "--export", fingerprint], whose=whose, file=named).stdout
        key = OpenPgpKey(
            path.resolve(), fingerprint, user_id, public, armored.decode("ascii"), passphrase
        )
        _sign(home, key, b"ortbundle: can this key sign?\n", whose=whose)  # the passphrase works
    return key


def detach_sign(key: OpenPgpKey, data: Path, signature: Path) -> None:
    """`signature`: a binary detached signature of `data` by `key` (what makepkg checks)."""
    with gnupg_home() as home:
        _gpg(home, ["--import", str(key.key_file)], whose=data.name, file=str(key.key_file))
        signature.write_bytes(_sign(home, key, data.read_bytes(), whose=data.name))


def nfpm_signature(packager: str) -> dict[str, str]:
    """nfpm.yaml's `signature` for `packager`: the key by variable (no host path in the file);
    the deb's an `_gpgorigin` member (debsign, origin), what debsig-verify checks."""
    fields = {"key_file": "${" + NFPM_KEY_VARIABLE + "}"}
    if packager == "deb":
        fields |= {"method": "debsign", "type": "origin"}
    return fields


def nfpm_environment(key: OpenPgpKey) -> dict[str, str]:
    """What nfpm needs in its environment to sign with `key`."""
    return {NFPM_KEY_VARIABLE: str(key.key_file), "NFPM_PASSPHRASE": key.passphrase}


def debsig_files(key: OpenPgpKey, package: str, origin: str) -> dict[str, bytes]:
    """debsig-verify's policy and keyring for packages signed by `key`, by path under the .deb's
    directory: install them under /etc/debsig/policies/ and /usr/share/debsig/keyrings/."""
    kid = key.key_id
    policy = f"""<?xml version="1.0"?>
<!DOCTYPE Policy SYSTEM "https://www.debian.org/debsig/1.0/policy.dtd">
<Policy xmlns="https://www.debian.org/debsig/1.0/">
  <Origin Name={quoteattr(origin)} id="{kid}" Description={quoteattr(key.user_id)}/>
  <Selection>
    <Required Type="origin" File="debsig.gpg" id="{kid}"/>
  </Selection>
  <Verification MinOptional="0">
    <Required Type="origin" File="debsig.gpg" id="{kid}"/>
  </Verification>
</Policy>
"""
    return {
        f"{DEBSIG_DIR}/policies/{kid}/{package}.pol": policy.encode("utf-8"),
        f"{DEBSIG_DIR}/keyrings/{kid}/debsig.gpg": key.public_binary,
    }


@contextlib.contextmanager
def gnupg_home() -> Iterator[Path]:
    """A throwaway GnuPG home, its agent ended and the directory removed afterwards."""
    home = Path(tempfile.mkdtemp(prefix="ortbundle-gpg-"))
    try:
        yield home
    finally:
        if shutil.which("gpgconf"):
            subprocess.run(
                ["gpgconf", "--homedir", str(home), "--kill", "all"],
                capture_output=True,
                timeout=_GPG_TIMEOUT,
                check=False,
            )
        shutil.rmtree(home, ignore_errors=True)


def _listed(names: Sequence[str]) -> str:
    """a, b and c"""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _passphrase(environ: Mapping[str, str], whose: str) -> str:
    named = environ.get(ENV_OPENPGP_PASSPHRASE_FILE, "").strip()
    if not named:
        return environ.get(ENV_OPENPGP_PASSPHRASE, "")
    try:
        return Path(named).expanduser().read_text("utf-8").rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{ENV_OPENPGP_PASSPHRASE_FILE} names {named}, which cannot be read ({exc}): "
            f"{whose} cannot be signed",
            file=named,
            fix=f"point {ENV_OPENPGP_PASSPHRASE_FILE} at the file holding the key's passphrase",
        ) from None


def _primary(home: Path, whose: str, named: str) -> tuple[str, str]:
    """The secret key's primary fingerprint and first user id; one primary key that can sign,
    and no subkey that can (nfpm and gpg would then sign with the subkey, and debsig-verify's
    policy would name the wrong key)."""
    listing = _gpg(home, ["--with-colons", "--list-secret-keys"], whose=whose, file=named)
    records = [line.split(":") for line in listing.stdout.decode("utf-8", "replace").splitlines()]
    primaries = [r for r in records if r[0] == "sec"]
    subkeys = [r for r in records if r[0] == "ssb" and "s" in r[11]]
    fingerprints = [r[9] for r in records if r[0] == "fpr"]
    user_ids = [r[9] for r in records if r[0] == "uid"]
    if len(primaries) != 1 or subkeys or "s" not in primaries[0][11] or not fingerprints:
        raise ConfigError(
            f"{ENV_OPENPGP_KEY} names {named}, which holds {len(primaries)} secret primary "
            f"keys and {len(subkeys)} signing subkeys: {whose} need one primary key that signs",
            file=named,
            fix="export one key whose primary key signs and that has no signing subkey "
            "(gpg --quick-gen-key '<name> <address>' ed25519 sign)",
        )
    return fingerprints[0].upper(), (user_ids[0] if user_ids else fingerprints[0])


def _sign(home: Path, key: OpenPgpKey, data: bytes, *, whose: str) -> bytes:
    with tempfile.TemporaryDirectory(dir=home) as scratch:
        phrase = Path(scratch) / "passphrase"
        phrase.write_text(key.passphrase, "utf-8")
        result = _gpg(
            home,
            [
                "--pinentry-mode",
                "loopback",
                "--passphrase-file",
                str(phrase),
                "--local-user",
                f"{key.fingerprint}!",
                "--detach-sign",
                "--output",
                "-",
            ],
            whose=whose,
            file=str(key.key_file),
            data=data,
            fix=f"set {ENV_OPENPGP_PASSPHRASE} or {ENV_OPENPGP_PASSPHRASE_FILE} to the key's "
            "passphrase",
        )
    return result.stdout


def _gpg(
    home: Path,
    args: Sequence[str],
    *,
    whose: str,
    file: str,
    data: bytes = b"",
    fix: str | None = None,
) -> subprocess.CompletedProcess[bytes]:
    command = ["gpg", "--homedir", str(home), "--batch", "--no-tty", "--quiet", *args]
    try:
        result = subprocess.run(
            command,
            input=data,
            capture_output=True,
            timeout=_GPG_TIMEOUT,
            check=False,
            env={"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PackagingError(f"could not run gpg: {exc}: {whose} cannot be signed") from None
    if result.returncode != 0:
        tail = "\n".join(result.stderr.decode("utf-8", "replace").strip().splitlines()[-5:])
        raise ConfigError(
            f"gpg {args[0]} failed with the key {ENV_OPENPGP_KEY} names (exit "
            f"{result.returncode}): {whose} cannot be signed\n{tail}",
            file=file,
            fix=fix or f"point {ENV_OPENPGP_KEY} at an armoured OpenPGP secret key",
        )
    return result
