"""Authenticode: the identity the Windows installers are signed with, and the signing itself.

The identity comes from the environment, as the manifest's minisign key does (CI passes it as
secrets; empty variables count as unset):

- `ORTBUNDLE_AUTHENTICODE_PFX` — a PKCS#12 (.pfx/.p12) file holding the certificate and key,
  with `ORTBUNDLE_AUTHENTICODE_PASSWORD` or `ORTBUNDLE_AUTHENTICODE_PASSWORD_FILE`;
- or `ORTBUNDLE_AUTHENTICODE_PKCS11_MODULE` — a PKCS#11 module (a hardware token, a cloud
  HSM's client library) with `ORTBUNDLE_AUTHENTICODE_PKCS11_CERT` (the certificate, a PEM or
  DER file or a pkcs11: URI), `ORTBUNDLE_AUTHENTICODE_PKCS11_KEY` (the key's pkcs11: URI)
  and the PIN in the password variables;
- or `ORTBUNDLE_SIGN_COMMAND` — a command template for a signing service (Azure Trusted
  Signing's `sign` tool, a company signing server): `{file}` is replaced by the file to sign,
  which the command signs in place.

`ORTBUNDLE_TIMESTAMP_URL` names the RFC 3161 timestamp authority (a signature with a
timestamp stays valid after its certificate expires); without it signatures are not
timestamped, and the build says so.

osslsigncode signs (SHA-256 digests). makensis calls this module for each file it writes —
the uninstaller inside the build (`!uninstfinalize`), the installer after it (`!finalize`) —
so the installer carries a signed uninstaller: `python -m ortbundle.channels.authenticode
FILE`. The password never appears on a command line: osslsigncode reads it from a file.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ortbundle._core.errors import ConfigError, OrtbundleError, PackagingError
from ortbundle._core.fsio import sha256_file
from ortbundle.stage.binaries.authenticode import UNSIGNED, PeSignature, read_signature

__all__ = [
    "ENV_COMMAND",
    "ENV_PASSWORD",
    "ENV_PASSWORD_FILE",
    "ENV_PFX",
    "ENV_PKCS11_CERT",
    "ENV_PKCS11_KEY",
    "ENV_PKCS11_MODULE",
    "ENV_TIMESTAMP",
    "UNSIGNED_NOTE",
    "AuthenticodeIdentity",
    "authenticode_identity",
    "check_signed",
    "sign_file",
    "signed_by",
]

ENV_PFX = "ORTBUNDLE_AUTHENTICODE_PFX"
ENV_PASSWORD = "ORTBUNDLE_AUTHENTICODE_PASSWORD"  # noqa: S105 - a variable name
ENV_PASSWORD_FILE = "ORTBUNDLE_AUTHENTICODE_PASSWORD_FILE"  # noqa: S105 - a variable name
ENV_PKCS11_MODULE = "ORTBUNDLE_AUTHENTICODE_PKCS11_MODULE"
ENV_PKCS11_CERT = "ORTBUNDLE_AUTHENTICODE_PKCS11_CERT"
ENV_PKCS11_KEY = "ORTBUNDLE_AUTHENTICODE_PKCS11_KEY"
ENV_COMMAND = "ORTBUNDLE_SIGN_COMMAND"
ENV_TIMESTAMP = "ORTBUNDLE_TIMESTAMP_URL"
_KINDS = (ENV_PFX, ENV_PKCS11_MODULE, ENV_COMMAND)
_CHANNEL = "nsis"
_FIX_UNSET = (
    f"set {ENV_PFX} to a PKCS#12 file (and {ENV_PASSWORD} or {ENV_PASSWORD_FILE}), "
    f"{ENV_PKCS11_MODULE} for a hardware key, or {ENV_COMMAND} for a signing service; "
    "docs/signing.md says how"
)


@dataclass(frozen=True)
class AuthenticodeIdentity:
    """How the installers are signed: one of a PKCS#12 file, a PKCS#11 key, a command."""

    kind: str  # "pkcs12", "pkcs11" or "command"
    source: str  # the variable it came from, for messages
    pfx: Path | None = None
    password: str | None = None
    password_file: Path | None = None
    pkcs11_module: Path | None = None
    pkcs11_cert: str = ""
    pkcs11_key: str = ""
    command: str = ""
    timestamp_url: str = ""

    @property
    def description(self) -> str:
        """What it is, without secrets: part of the installer's memo key, and of messages."""
        where = {
            "pkcs12": str(self.pfx),
            "pkcs11": f"{self.pkcs11_module} {self.pkcs11_cert} {self.pkcs11_key}",
            "command": self.command,
        }[self.kind]
        stamped = f", timestamped by {self.timestamp_url}" if self.timestamp_url else ""
        return f"{self.kind} ({self.source}: {where}){stamped}"

    @property
    def memo_key(self) -> str:
        """What a memoised installer was signed with: the description, and the PKCS#12 file's
        SHA-256 (a renewed certificate at the same path signs afresh)."""
        held = sha256_file(self.pfx) if self.pfx is not None else ""
        return f"{self.description} {held}"


def _get(environ: Mapping[str, str], name: str) -> str:
    return environ.get(name, "").strip()


def authenticode_identity(environ: Mapping[str, str]) -> AuthenticodeIdentity | None:
    """The identity the environment configures; None when none is.

    A configured identity that cannot work — its file missing, two kinds at once, a command
    without `{file}` — is refused here, naming the channel and the variable, before anything
    is built: a release must never quietly fall back to an unsigned installer.
    """
    kinds = [name for name in _KINDS if _get(environ, name)]
    if len(kinds) > 1:
        raise _refused(
            f"{' and '.join(kinds)} are all set; it is unclear how to sign",
            f"set only one of {', '.join(_KINDS)}",
            kinds[0],
        )
    timestamp = _get(environ, ENV_TIMESTAMP)
    if timestamp and not timestamp.startswith(("http://", "https://")):
        raise _refused(
            f"{ENV_TIMESTAMP} is {timestamp!r}, not an http(s) URL",
            "name the RFC 3161 timestamp authority's URL",
            ENV_TIMESTAMP,
        )
    if not kinds:
        return None
    kind = kinds[0]
    password, password_file = _password(environ)
    if kind == ENV_COMMAND:
        command = _get(environ, ENV_COMMAND)
        if "{file}" not in command:
            raise _refused(
                f"{ENV_COMMAND} has no {{file}}: the command would not know what to sign",
                f"write {{file}} where the signing command takes the file, e.g. "
                f'{ENV_COMMAND}="sign code trusted-signing ... {{file}}"',
                ENV_COMMAND,
            )
        return AuthenticodeIdentity("command", ENV_COMMAND, command=command)
    if kind == ENV_PFX:
        pfx = _existing(environ, ENV_PFX, "PKCS#12 file")
        return AuthenticodeIdentity(
            "pkcs12",
            ENV_PFX,
            pfx=pfx,
            password=password,
            password_file=password_file,
            timestamp_url=timestamp,
        )
    module = _existing(environ, ENV_PKCS11_MODULE, "PKCS#11 module")
    cert, key = _get(environ, ENV_PKCS11_CERT), _get(environ, ENV_PKCS11_KEY)
    for name, value in ((ENV_PKCS11_CERT, cert), (ENV_PKCS11_KEY, key)):
        if not value:
            raise _refused(
                f"{ENV_PKCS11_MODULE} is set but {name} is not",
                f"set {name} (a pkcs11: URI, or for the certificate a PEM/DER file)",
                name,
            )
    if not cert.startswith("pkcs11:"):
        _existing(environ, ENV_PKCS11_CERT, "certificate")
    return AuthenticodeIdentity(
        "pkcs11",
        ENV_PKCS11_MODULE,
        password=password,
        password_file=password_file,
        pkcs11_module=module,
        pkcs11_cert=cert,
        pkcs11_key=key,
        timestamp_url=timestamp,
    )


def _password(environ: Mapping[str, str]) -> tuple[str | None, Path | None]:
    text, file = environ.get(ENV_PASSWORD, ""), _get(environ, ENV_PASSWORD_FILE)
    if text and file:
        raise _refused(
            f"both {ENV_PASSWORD} and {ENV_PASSWORD_FILE} are set",
            f"set only one of {ENV_PASSWORD} and {ENV_PASSWORD_FILE}",
            ENV_PASSWORD,
        )
    if file:
        return None, _existing(environ, ENV_PASSWORD_FILE, "password file")
    return (text or None), None


def _existing(environ: Mapping[str, str], name: str, what: str) -> Path:
    path = Path(_get(environ, name)).expanduser()
    if not path.is_file():
        raise _refused(
            f"{name} names the {what} {str(path)!r}, which does not exist (or is not a file)",
            f"point {name} at the {what}, or unset it to build unsigned installers",
            name,
        )
    return path


def _refused(why: str, fix: str, variable: str) -> ConfigError:
    return ConfigError(
        f"the {_CHANNEL} channel's Authenticode identity: {why}",
        component=_CHANNEL,
        file=f"${variable}",
        fix=fix,
    )


# --- signing ------------------------------------------------------------------------------------


def sign_file(path: Path, identity: AuthenticodeIdentity) -> None:
    """Sign the PE file at `path` in place (SHA-256, timestamped if a TSA is configured)."""
    if identity.kind == "command":
        _run_template(path, identity)
        return
    tool = shutil.which("osslsigncode")
    if tool is None:
        raise PackagingError(
            f"{path.name} must be signed ({identity.source} is set) and osslsigncode is not on "
            "PATH",
            component=_CHANNEL,
            file=str(path),
            fix="install osslsigncode (Debian/Ubuntu: apt-get install osslsigncode)",
        )
    signed = path.with_name(path.name + ".signed")
    with tempfile.TemporaryDirectory(prefix="ortbundle-authenticode-") as scratch:
        command = [tool, "sign", *_key_options(identity, Path(scratch)), "-h", "sha256"]
        if identity.timestamp_url:
            command += ["-ts", identity.timestamp_url]
        command += ["-in", str(path), "-out", str(signed)]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0 or not signed.is_file():
        signed.unlink(missing_ok=True)
        said = (result.stderr or result.stdout).strip().splitlines()[-6:]
        raise PackagingError(
            f"osslsigncode could not sign {path.name} (exit {result.returncode}): "
            + " / ".join(said),
            component=_CHANNEL,
            file=str(path),
            fix=f"check {identity.source}, the password and {ENV_TIMESTAMP} (is the timestamp "
            "authority reachable?)",
        )
    os.replace(signed, path)


def _key_options(identity: AuthenticodeIdentity, scratch: Path) -> list[str]:
    """osslsigncode's key options; the password goes through a private file (-readpass)."""
    password_file = identity.password_file
    if identity.password is not None:
        password_file = scratch / "password"
        password_file.touch(mode=0o600)
        password_file.write_text(identity.password, encoding="utf-8")
    options = ["-readpass", str(password_file)] if password_file else []
    if identity.kind == "pkcs12":
        return ["-pkcs12", str(identity.pfx), *options]
    return [
        "-pkcs11module",
        str(identity.pkcs11_module),
        "-pkcs11cert",
        identity.pkcs11_cert,
        "-key",
        identity.pkcs11_key,
        *options,
    ]


def _run_template(path: Path, identity: AuthenticodeIdentity) -> None:
    """The signing service's command, `{file}` replaced by the (quoted) path."""
    command = [part.replace("{file}", str(path)) for part in shlex.split(identity.command)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        said = (result.stderr or result.stdout).strip().splitlines()[-6:]
        raise PackagingError(
            f"{ENV_COMMAND} failed on {path.name} (exit {result.returncode}): " + " / ".join(said),
            component=_CHANNEL,
            file=str(path),
            fix=f"run the command by hand on a copy of the file; check {ENV_COMMAND}",
        )


def signed_by(path: Path, identity: AuthenticodeIdentity) -> PeSignature:
    """The signature `path` carries after signing with `identity`: refused if there is none."""
    signature = read_signature(path, roots=())
    if signature.status == UNSIGNED or not signature.sha256:
        raise PackagingError(
            f"{path.name} carries no Authenticode signature after signing with "
            f"{identity.description}",
            component=_CHANNEL,
            file=str(path),
            fix="check the signing command: it must sign the file in place",
        )
    return signature


# one part of the build's one line about its unsigned outputs (pipeline/build.py)
UNSIGNED_NOTE = (
    f"the Windows installers are unsigned (SmartScreen warns): set {ENV_PFX}, "
    f"{ENV_PKCS11_MODULE} or {ENV_COMMAND} (docs/signing.md)"
)


def check_signed(outputs: Sequence[tuple[Sequence[Path], Mapping[str, object]]]) -> None:
    """A release with an identity publishes no unsigned installer: each NSIS output's
    (files, signers) must hold an installer, and a signer for every one."""
    for files, signers in outputs:
        exes = [f for f in files if f.suffix == ".exe"]
        if not exes:
            raise PackagingError(
                "the nsis channel has an Authenticode identity but produced no installer to "
                "sign (is makensis on PATH?), and a release publishes no unsigned output",
                component=_CHANNEL,
                fix="install NSIS 3.08 or newer (Debian/Ubuntu: apt-get install nsis)",
            )
        for exe in exes:
            if not any(str(name).endswith(exe.name) for name in signers):
                raise PackagingError(
                    f"{exe.name} is not signed, and a release with an Authenticode identity "
                    "publishes no unsigned installer",
                    component=_CHANNEL,
                    file=str(exe),
                    fix="rebuild; if it persists, report it",
                )


def finalize_command() -> str:
    """What makensis runs for each file it writes (%1 is the file): this module, with the
    interpreter and the package makensis's environment may not know, quoted for its shell."""
    if any(ch in sys.executable for ch in '"`$%\n'):
        raise PackagingError(
            f"the Python interpreter's path {sys.executable!r} cannot be quoted for makensis",
            component=_CHANNEL,
            fix="run ortbundle from an interpreter whose path has no quote, $, % or backtick",
        )
    return f'"{sys.executable}" -m ortbundle.channels.authenticode'


def package_root() -> str:
    """The directory holding the ortbundle package: PYTHONPATH for the finalize command."""
    return str(Path(__file__).resolve().parents[2])


def main(argv: Sequence[str] | None = None) -> int:
    """Sign each file named on the command line with the identity the environment holds."""
    files = list(sys.argv[1:] if argv is None else argv)
    try:
        identity = authenticode_identity(os.environ)
        if identity is None:
            raise ConfigError("no Authenticode identity is configured", fix=_FIX_UNSET)
        for name in files:
            sign_file(Path(name), identity)
    except OrtbundleError as exc:
        print(f"ortbundle: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
