"""Ed25519 signatures in minisign's own file formats.

The build manifest is signed so that anyone can check it with the stock ``minisign`` tool, with
no ortbundle installed: keys and ``.minisig`` files here are byte-compatible with minisign in both
directions (its key files load here, our key files load there).

Formats, as minisign writes them (all integers little-endian, base64 is the standard alphabet):

- public key file: ``untrusted comment: minisign public key <KEYID>`` then
  base64(``Ed`` || key id (8) || Ed25519 public key (32));
- secret key file: an untrusted comment line then base64 of 158 bytes:
  ``Ed`` || KDF (``Sc`` scrypt, or two zero bytes: unencrypted) || ``B2`` || salt (32) ||
  opslimit (8) || memlimit (8) || [key id (8) || seed + public key (64) || checksum (32)], where
  the checksum is BLAKE2b-256(``Ed`` || key id || seed + public key) and, for ``Sc``, the
  bracketed part is XOR'ed with libsodium's scryptsalsa208sha256 output for the password;
- signature file: ``untrusted comment: ...``, base64(``ED`` || key id || signature over
  BLAKE2b-512(data)), ``trusted comment: ...``, base64(signature over signature || trusted
  comment). Legacy ``Ed`` signatures sign the data itself.

The key id is shown as minisign shows it: the 8 bytes read as a little-endian integer, printed as
16 upper-case hex digits.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# cryptography is imported where a key is used: planning a build (and a no-op build) only
# needs to know which key would sign, not to load it.
from ortbundle._core.errors import ConfigError, IntegrityError, OrtbundleError

__all__ = [
    "DEFAULT_UNTRUSTED_COMMENT",
    "ENV_KEY",
    "ENV_KEY_FILE",
    "ENV_KEY_PASSWORD",
    "PublicKey",
    "SecretKey",
    "generate_keypair",
    "load_public_key",
    "load_secret_key",
    "load_signing_key",
    "sign",
    "verify",
    "write_public_key",
    "write_secret_key",
]

# where keys come from lives in ortbundle._core.locations (no cryptography); re-exported here

from ortbundle._core.fsio import inside_project
from ortbundle._core.locations import ENV_KEY as ENV_KEY
from ortbundle._core.locations import ENV_KEY_FILE as ENV_KEY_FILE
from ortbundle._core.locations import ENV_KEY_PASSWORD as ENV_KEY_PASSWORD
from ortbundle._core.locations import default_key_path as default_key_path
from ortbundle._core.locations import signing_key_source as signing_key_source
from ortbundle._core.oserrors import disk_error
from ortbundle.config.products import Product
from ortbundle.config.project import key_path

_COMPONENT = "signing"

_SIG_ALG = b"Ed"
_SIG_ALG_HASHED = b"ED"
_KDF_SCRYPT = b"Sc"
_KDF_NONE = b"\x00\x00"
_CHK_ALG = b"B2"

_KEY_ID_LEN = 8
_SEED_LEN = 32
_PUBLIC_LEN = 32
_SIGNATURE_LEN = 64
_SALT_LEN = 32
_CHECKSUM_LEN = 32
# key id + seed||public key + checksum: the part minisign encrypts.
_KEYNUM_SK_LEN = _KEY_ID_LEN + _SEED_LEN + _PUBLIC_LEN + _CHECKSUM_LEN
_SECRET_BLOB_LEN = 2 + 2 + 2 + _SALT_LEN + 8 + 8 + _KEYNUM_SK_LEN
_PUBLIC_BLOB_LEN = 2 + _KEY_ID_LEN + _PUBLIC_LEN
_SIG_BLOB_LEN = 2 + _KEY_ID_LEN + _SIGNATURE_LEN

_UNTRUSTED_PREFIX = "untrusted comment: "
_TRUSTED_PREFIX = "trusted comment: "
# minisign reads comment lines with fgets into 1024- and 8192-byte buffers: a longer line would
# be split and the rest read as the next field, so longer comments cannot round-trip.
_UNTRUSTED_MAX = 1024 - len(_UNTRUSTED_PREFIX) - 2
_TRUSTED_MAX = 8192 - len(_TRUSTED_PREFIX) - 2
_PASSWORD_MAX = 1023

# crypto_pwhash_scryptsalsa208sha256_{OPS,MEM}LIMIT_SENSITIVE: what `minisign -G` uses.
_OPSLIMIT_SENSITIVE = 33554432
_MEMLIMIT_SENSITIVE = 1073741824
# A key file may ask for any scrypt cost; refuse ones no real minisign key uses.
_SCRYPT_MAX_MEMORY = 4 << 30
_SCRYPT_MAX_P = 64

DEFAULT_UNTRUSTED_COMMENT = "signature from minisign secret key"

_FIX_KEYGEN = "generate a key pair with `minisign -G -W` (or ortbundle's generate_keypair)"


@dataclass(frozen=True, repr=False)
class PublicKey:
    """An Ed25519 public key with minisign's 8-byte key id."""

    key_id: bytes
    public_bytes: bytes

    def __post_init__(self) -> None:
        _check_len("key id", self.key_id, _KEY_ID_LEN)
        _check_len("public key", self.public_bytes, _PUBLIC_LEN)

    def __repr__(self) -> str:
        return f"PublicKey(key_id={self.key_id_hex}, base64={self.base64})"

    @property
    def key_id_hex(self) -> str:
        """The key id as minisign prints it."""
        return _key_id_hex(self.key_id)

    @property
    def base64(self) -> str:
        """The one-line form `minisign -P` takes."""
        return _b64(_SIG_ALG + self.key_id + self.public_bytes)

    def file_text(self) -> str:
        """The public key file, exactly as `minisign -G` writes it."""
        return f"{_UNTRUSTED_PREFIX}minisign public key {self.key_id_hex}\n{self.base64}\n"


@dataclass(frozen=True, repr=False)
class SecretKey:
    """An Ed25519 signing key: the 32-byte seed, kept out of repr so it never reaches a log."""

    key_id: bytes
    private_bytes: bytes

    def __post_init__(self) -> None:
        _check_len("key id", self.key_id, _KEY_ID_LEN)
        _check_len("private key", self.private_bytes, _SEED_LEN)

    def __repr__(self) -> str:
        return f"SecretKey(key_id={self.key_id_hex}, private_bytes=<redacted>)"

    @property
    def key_id_hex(self) -> str:
        """The key id as minisign prints it."""
        return _key_id_hex(self.key_id)

    def public_key(self) -> PublicKey:
        """The matching public key, with the same key id."""
        return PublicKey(self.key_id, _public_from_seed(self.private_bytes))


def generate_keypair() -> tuple[SecretKey, PublicKey]:
    """A fresh key pair with a random key id, as `minisign -G` makes one."""
    secret = SecretKey(secrets.token_bytes(_KEY_ID_LEN), secrets.token_bytes(_SEED_LEN))
    return secret, secret.public_key()


# --- signing and verifying -----------------------------------------------------------------


def sign(
    data: bytes,
    key: SecretKey,
    *,
    trusted_comment: str,
    untrusted_comment: str = DEFAULT_UNTRUSTED_COMMENT,
) -> str:
    """The `.minisig` text for data, prehashed (`ED`) as minisign signs by default."""
    _check_comment("trusted comment", trusted_comment, _TRUSTED_MAX)
    _check_comment("untrusted comment", untrusted_comment, _UNTRUSTED_MAX)
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Ed25519PrivateKey.from_private_bytes(key.private_bytes)
    signature = private.sign(_prehash(data))
    global_signature = private.sign(signature + trusted_comment.encode("utf-8"))
    return (
        f"{_UNTRUSTED_PREFIX}{untrusted_comment}\n"
        f"{_b64(_SIG_ALG_HASHED + key.key_id + signature)}\n"
        f"{_TRUSTED_PREFIX}{trusted_comment}\n"
        f"{_b64(global_signature)}\n"
    )


def verify(
    data: bytes,
    minisig_text: str,
    public_key: PublicKey,
    *,
    source: str | None = None,
) -> str:
    """Check a `.minisig` against data and a public key; return its trusted comment.

    `source` names the signature file in error messages. Each way of failing has its own message
    so that a CI log says whether the data, the comment or the key is the problem.
    """
    where = source or "the signature"
    algorithm, key_id, signature, trusted_comment, global_signature = _parse_signature(
        minisig_text, source
    )
    if not hmac.compare_digest(key_id, public_key.key_id):
        raise IntegrityError(
            f"{where} was made by key {_key_id_hex(key_id)}, "
            f"but the public key is {public_key.key_id_hex}",
            component=_COMPONENT,
            file=source,
            fix=f"verify with the public key {_key_id_hex(key_id)}, "
            f"or re-sign with the secret key of {public_key.key_id_hex}",
        )
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    verifier = Ed25519PublicKey.from_public_bytes(public_key.public_bytes)
    message = _prehash(data) if algorithm == _SIG_ALG_HASHED else data
    try:
        verifier.verify(signature, message)
    except InvalidSignature:
        raise IntegrityError(
            f"{where} does not match the data: the signed bytes were changed or replaced",
            component=_COMPONENT,
            file=source,
            fix="rebuild or re-download the signed file, then re-sign it if you produced it",
        ) from None
    try:
        verifier.verify(global_signature, signature + trusted_comment.encode("utf-8"))
    except InvalidSignature:
        raise IntegrityError(
            f"the trusted comment in {where} was altered after signing (comment signature "
            "does not verify)",
            component=_COMPONENT,
            file=source,
            fix="discard this signature file and sign the data again",
        ) from None
    return trusted_comment


def sign_bytes(data: bytes, key: SecretKey) -> bytes:
    """A plain Ed25519 signature over data (DSSE signs its PAE this way; no minisign framing)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.from_private_bytes(key.private_bytes).sign(data)


def verify_bytes(data: bytes, signature: bytes, public_key: PublicKey) -> bool:
    """Whether signature is public_key's plain Ed25519 signature over data."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        Ed25519PublicKey.from_public_bytes(public_key.public_bytes).verify(signature, data)
    except InvalidSignature:
        return False
    return True


def _parse_signature(text: str, source: str | None) -> tuple[bytes, bytes, bytes, str, bytes]:
    """Split a `.minisig` into its fields, refusing anything minisign itself would refuse."""

    def malformed(why: str) -> IntegrityError:
        return IntegrityError(
            f"{source or 'the signature'} is not a minisign signature file: {why}",
            component=_COMPONENT,
            file=source,
            fix="regenerate the .minisig; it must be the 4 lines minisign writes",
        )

    lines = [line.removesuffix("\r") for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    if len(lines) != 4:
        raise malformed(f"expected 4 lines, found {len(lines)}")
    untrusted, sig_line, trusted, global_line = lines
    if not untrusted.startswith(_UNTRUSTED_PREFIX):
        raise malformed(f"line 1 does not start with {_UNTRUSTED_PREFIX!r}")
    if not trusted.startswith(_TRUSTED_PREFIX):
        raise malformed(f"line 3 does not start with {_TRUSTED_PREFIX!r}")
    blob = _b64decode(sig_line)
    if blob is None or len(blob) != _SIG_BLOB_LEN:
        raise malformed(f"line 2 is not base64 of {_SIG_BLOB_LEN} bytes")
    algorithm = blob[:2]
    if algorithm not in (_SIG_ALG, _SIG_ALG_HASHED):
        raise malformed(f"unsupported signature algorithm {algorithm!r}")
    global_signature = _b64decode(global_line)
    if global_signature is None or len(global_signature) != _SIGNATURE_LEN:
        raise malformed(f"line 4 is not base64 of {_SIGNATURE_LEN} bytes")
    return (
        algorithm,
        blob[2 : 2 + _KEY_ID_LEN],
        blob[2 + _KEY_ID_LEN :],
        trusted.removeprefix(_TRUSTED_PREFIX),
        global_signature,
    )


# --- loading keys --------------------------------------------------------------------------


def load_public_key(path_or_text: Path | str) -> PublicKey:
    """A public key from a file (Path), or from its text: the whole file or the base64 line.

    A str that is not a key but names an existing file is read as that file, since paths often
    arrive as strings from the command line.
    """
    if isinstance(path_or_text, Path):
        return _parse_public_key(_read_text(path_or_text, "public key"), str(path_or_text))
    try:
        return _parse_public_key(path_or_text, None)
    except ConfigError:
        candidate = Path(path_or_text.strip())
        if "\n" in path_or_text.strip() or not candidate.is_file():
            raise
    return _parse_public_key(_read_text(candidate, "public key"), str(candidate))


def _parse_public_key(text: str, source: str | None) -> PublicKey:
    line = _key_line(text)
    blob = _b64decode(line) if line is not None else None
    if blob is None or len(blob) != _PUBLIC_BLOB_LEN or blob[:2] != _SIG_ALG:
        raise ConfigError(
            f"{source or 'the public key'} is not a minisign public key "
            f"(want base64 of 'Ed' + 8-byte key id + 32-byte key, after an untrusted comment)",
            component=_COMPONENT,
            file=source,
            fix="pass the .pub file written by `minisign -G` or ortbundle, or its base64 line",
        )
    return PublicKey(blob[2 : 2 + _KEY_ID_LEN], blob[2 + _KEY_ID_LEN :])


def load_secret_key(path: Path, *, password: str | None = None) -> SecretKey:
    """A secret key from a minisign key file; `password` is needed only if it is encrypted."""
    return _parse_secret_key(_read_text(path, "secret key"), password, str(path))


def load_signing_key(path: Path | None, environ: Mapping[str, str]) -> SecretKey | None:
    """The key to sign with: an explicit path, else CI's environment, else None.

    Environment: ORTBUNDLE_SIGNING_KEY holds the key file's content (or only its base64 line),
    ORTBUNDLE_SIGNING_KEY_FILE a path to it; ORTBUNDLE_SIGNING_KEY_PASSWORD decrypts an
    encrypted key. Empty variables count as unset, as CI leaves unset secrets empty. None means
    nothing is configured: whether unsigned is acceptable is the caller's decision.
    """
    password = environ.get(ENV_KEY_PASSWORD) or None
    if path is not None:
        return _parse_secret_key(_read_text(path, "secret key"), password, str(path))
    content = environ.get(ENV_KEY, "")
    key_file = environ.get(ENV_KEY_FILE, "")
    if content.strip() and key_file.strip():
        raise ConfigError(
            f"both {ENV_KEY} and {ENV_KEY_FILE} are set; it is unclear which key to sign with",
            component=_COMPONENT,
            fix=f"set only one of {ENV_KEY} and {ENV_KEY_FILE}",
        )
    if content.strip():
        return _parse_secret_key(content, password, f"${ENV_KEY}")
    if key_file.strip():
        return _parse_secret_key(
            _read_text(Path(key_file.strip()), "secret key"), password, key_file.strip()
        )
    return None


def _parse_secret_key(text: str, password: str | None, source: str) -> SecretKey:
    """Decode (and if needed decrypt) a minisign secret key, checking it is intact."""

    def bad(why: str, fix: str) -> ConfigError:
        return ConfigError(why, component=_COMPONENT, file=source, fix=fix)

    line = _key_line(text)
    blob = _b64decode(line) if line is not None else None
    if blob is None or len(blob) != _SECRET_BLOB_LEN:
        raise bad(
            f"{source} is not a minisign secret key (want an untrusted comment line and base64 "
            f"of {_SECRET_BLOB_LEN} bytes)",
            f"pass the .key file itself, or only its second line; {_FIX_KEYGEN}",
        )
    sig_alg, kdf_alg, chk_alg = blob[0:2], blob[2:4], blob[4:6]
    salt = blob[6 : 6 + _SALT_LEN]
    opslimit = int.from_bytes(blob[38:46], "little")
    memlimit = int.from_bytes(blob[46:54], "little")
    keynum_sk = blob[54:]
    if sig_alg != _SIG_ALG:
        raise bad(f"{source} uses signature algorithm {sig_alg!r}, not Ed25519 ('Ed')", _FIX_KEYGEN)
    if chk_alg != _CHK_ALG:
        raise bad(f"{source} uses checksum algorithm {chk_alg!r}, not BLAKE2b ('B2')", _FIX_KEYGEN)
    if kdf_alg == _KDF_SCRYPT:
        if password is None:
            raise bad(
                f"{source} is encrypted with a password, and none was given",
                f"set {ENV_KEY_PASSWORD}, or remove the password with `minisign -C -W -s KEY`",
            )
        stream = _scrypt_stream(password, salt, opslimit, memlimit, source)
        keynum_sk = bytes(a ^ b for a, b in zip(keynum_sk, stream, strict=True))
    elif kdf_alg != _KDF_NONE:
        raise bad(f"{source} uses unknown key derivation {kdf_alg!r}", _FIX_KEYGEN)
    key_id = keynum_sk[:_KEY_ID_LEN]
    sk = keynum_sk[_KEY_ID_LEN : _KEY_ID_LEN + _SEED_LEN + _PUBLIC_LEN]
    stored_checksum = keynum_sk[_KEY_ID_LEN + _SEED_LEN + _PUBLIC_LEN :]
    checksum = _secret_checksum(key_id, sk)
    # `minisign -G -W` leaves the checksum of an unencrypted key all zero.
    unchecked = kdf_alg == _KDF_NONE and stored_checksum == bytes(_CHECKSUM_LEN)
    if not unchecked and not hmac.compare_digest(checksum, stored_checksum):
        if kdf_alg == _KDF_SCRYPT:
            raise bad(
                f"wrong password for the encrypted key {source} (or the key file is corrupt)",
                f"check {ENV_KEY_PASSWORD}; the key's checksum does not match after decryption",
            )
        raise bad(
            f"{source} is corrupt: its checksum does not match the key",
            "restore the key file from its backup",
        )
    seed, public = sk[:_SEED_LEN], sk[_SEED_LEN:]
    if not hmac.compare_digest(_public_from_seed(seed), public):
        raise bad(
            f"{source} is corrupt: its private and public halves do not belong together",
            "restore the key file from its backup",
        )
    return SecretKey(key_id, seed)


def _scrypt_params(opslimit: int, memlimit: int) -> tuple[int, int, int]:
    """(N, r, p) from minisign's stored limits, as libsodium's scryptsalsa208sha256 picks them."""
    opslimit = max(opslimit, 32768)
    r = 8
    if opslimit < memlimit // 32:
        n_log2 = _n_log2(opslimit // (r * 4))
        p = 1
    else:
        n_log2 = _n_log2(memlimit // (r * 128))
        max_rp = min((opslimit // 4) // (1 << n_log2), 0x3FFFFFFF)
        p = max_rp // r
    return 1 << n_log2, r, p


def _n_log2(max_n: int) -> int:
    """The smallest log2(N) >= 1 with N > max_n / 2 (libsodium's loop, capped at 63)."""
    n_log2 = 1
    while n_log2 < 63 and (1 << n_log2) <= max_n // 2:
        n_log2 += 1
    return n_log2


def _scrypt_stream(password: str, salt: bytes, opslimit: int, memlimit: int, source: str) -> bytes:
    n, r, p = _scrypt_params(opslimit, memlimit)
    if p < 1 or p > _SCRYPT_MAX_P or 128 * r * n > _SCRYPT_MAX_MEMORY:
        raise ConfigError(
            f"{source} asks for scrypt parameters no minisign key uses "
            f"(opslimit {opslimit}, memlimit {memlimit} → N={n}, r={r}, p={p})",
            component=_COMPONENT,
            file=source,
            fix="re-encrypt the key with `minisign -C -s KEY`, or export it unencrypted (-W)",
        )
    # minisign reads the password as a line and drops its line ending; so does a CI secret
    # pasted with a trailing newline.
    secret = password.rstrip("\r\n").encode("utf-8")
    if len(secret) > _PASSWORD_MAX:
        raise ConfigError(
            f"the password for {source} is longer than minisign accepts ({_PASSWORD_MAX} bytes)",
            component=_COMPONENT,
            file=source,
            fix=f"check {ENV_KEY_PASSWORD}",
        )
    from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

    try:
        return Scrypt(salt=salt, length=_KEYNUM_SK_LEN, n=n, r=r, p=p).derive(secret)
    except MemoryError:
        raise ConfigError(
            f"not enough memory to decrypt {source} (scrypt needs {128 * r * n >> 20} MiB)",
            component=_COMPONENT,
            file=source,
            fix="sign on a machine with more memory, or export the key unencrypted (-W)",
        ) from None


# --- writing keys --------------------------------------------------------------------------


def write_secret_key(
    path: Path, key: SecretKey, *, force: bool = False, password: str | None = None
) -> None:
    """Write a minisign secret key file, mode 0600, atomically.

    Unencrypted by default (as `minisign -G -W`): CI injects it from a secret store, which is the
    protection. With `password`, it is encrypted as `minisign -G` does. An existing file is left
    alone unless `force`: overwriting the only copy of a signing key cannot be undone.
    """
    text = _secret_key_text(key, password, _OPSLIMIT_SENSITIVE, _MEMLIMIT_SENSITIVE)
    _write_atomic(path, text.encode("ascii"), mode=0o600, overwrite=force)


def write_public_key(path: Path, key: PublicKey) -> None:
    """Write the public key file minisign reads (`-p`), replacing any previous one atomically."""
    _write_atomic(path, key.file_text().encode("ascii"), mode=0o644, overwrite=True)


def _secret_key_text(key: SecretKey, password: str | None, opslimit: int, memlimit: int) -> str:
    """The secret key file; the KDF limits are a parameter so tests can keep scrypt cheap."""
    sk = key.private_bytes + _public_from_seed(key.private_bytes)
    keynum_sk = key.key_id + sk + _secret_checksum(key.key_id, sk)
    if password is None:
        header = _SIG_ALG + _KDF_NONE + _CHK_ALG + bytes(_SALT_LEN + 16)
        comment = f"minisign secret key {key.key_id_hex} (unencrypted)"
    else:
        salt = secrets.token_bytes(_SALT_LEN)
        stream = _scrypt_stream(password, salt, opslimit, memlimit, "the new secret key")
        keynum_sk = bytes(a ^ b for a, b in zip(keynum_sk, stream, strict=True))
        header = (
            _SIG_ALG
            + _KDF_SCRYPT
            + _CHK_ALG
            + salt
            + opslimit.to_bytes(8, "little")
            + memlimit.to_bytes(8, "little")
        )
        comment = f"minisign encrypted secret key {key.key_id_hex}"
    return f"{_UNTRUSTED_PREFIX}{comment}\n{_b64(header + keynum_sk)}\n"


def _write_atomic(path: Path, content: bytes, *, mode: int, overwrite: bool) -> None:
    """Write via a temporary sibling so a reader never sees half a key.

    Without `overwrite`, the final step is a hard link, which fails if the name exists: no window
    in which another writer's key could be replaced.
    """
    path = Path(path)

    def exists() -> ConfigError:
        return ConfigError(
            f"{path} already exists; refusing to overwrite a key file",
            component=_COMPONENT,
            file=str(path),
            fix="move the existing key away first, or pass force=True if it is disposable",
        )

    def unwritable(exc: OSError) -> OrtbundleError:
        if isinstance(exc, FileNotFoundError):  # a directory that is not there: a setting
            return ConfigError(
                f"cannot write {path}: {exc.strerror or exc}",
                component=_COMPONENT,
                file=str(path),
                fix="check that the directory exists and is writable",
            )
        what = "the secret signing key" if mode & 0o077 == 0 else "the public key"
        return disk_error(exc, what=what, path=path, component=_COMPONENT)

    if not overwrite and path.exists():
        raise exists()
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)  # the umask may have taken bits away
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
    except FileExistsError:
        raise exists() from None
    except OSError as exc:
        raise unwritable(exc) from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


# --- small helpers -------------------------------------------------------------------------


def _prehash(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=64).digest()


def _secret_checksum(key_id: bytes, sk: bytes) -> bytes:
    return hashlib.blake2b(_SIG_ALG + key_id + sk, digest_size=_CHECKSUM_LEN).digest()


def _public_from_seed(seed: bytes) -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return (
        Ed25519PrivateKey.from_private_bytes(seed)
        .public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )


def _key_id_hex(key_id: bytes) -> str:
    return f"{int.from_bytes(key_id, 'little'):X}"


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _b64decode(text: str) -> bytes | None:
    try:
        return base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None


def _key_line(text: str) -> str | None:
    """A key's base64 line: line 2 after an untrusted comment, or the text if one line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if len(lines) == 1 and not lines[0].startswith(_UNTRUSTED_PREFIX):
        return lines[0]
    if len(lines) == 2 and lines[0].startswith(_UNTRUSTED_PREFIX):
        return lines[1]
    return None


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(
            f"cannot read the {what} file {path}: {reason}",
            component=_COMPONENT,
            file=str(path),
            fix=f"check the path to the {what} file",
        ) from None


def _check_len(what: str, value: bytes, length: int) -> None:
    if len(value) != length:
        raise ValueError(f"{what} must be {length} bytes, got {len(value)}")


def _check_comment(what: str, comment: str, max_bytes: int) -> None:
    """Comments are one line each in the file; a newline would forge the next field."""
    if any(ch in comment for ch in "\r\n\x00"):
        raise ConfigError(
            f"the {what} must be a single line (it contains a newline or NUL): {comment!r}",
            component=_COMPONENT,
            fix=f"remove line breaks from the {what}, or join its parts with tabs",
        )
    if len(comment.encode("utf-8")) > max_bytes:
        raise ConfigError(
            f"the {what} is longer than minisign accepts ({max_bytes} bytes)",
            component=_COMPONENT,
            fix=f"shorten the {what}",
        )


def signing_key(
    product: Product,
    key_file: Path | None,
    environ: Mapping[str, str],
    *,
    release: bool,
    keys: Path | None,
) -> SecretKey | None:
    """The key a build signs with: `key_file` (the --signing-key option), else as the
    environment says; a release without one is refused before anything is fetched. `keys`:
    the project's keys/ directory, whose <product>.pub the key must match (checked here,
    before anything is fetched or published)."""
    key = load_signing_key(key_path(product.name, key_file, environ), environ)
    if key is None and release:
        default = default_key_path(product.name, environ)
        raise ConfigError(
            "a release build must be signed, and no signing key is configured",
            fix=f"run invoke keygen -p {product.name} once (it writes {default}), or set "
            f"{ENV_KEY} to the secret key's text or {ENV_KEY_FILE} to its path",
        )
    if key is not None and keys is not None:
        check_key_matches(key, product.name, keys)
    return key


def check_key_matches(key: SecretKey, product: str, keys: Path) -> None:
    """A secret key other than the one keys/<product>.pub names would sign a tree that `invoke
    verify` rejects ("made by key …, but the public key is …"): refused before it signs. No
    public key in the project: nothing to hold it to (a development project)."""
    path = keys / f"{product}.pub"
    if not path.exists():
        return
    inside_project(path, keys.parent)
    public = load_public_key(path)
    mine = key.public_key()
    if (mine.key_id, mine.public_bytes) == (public.key_id, public.public_bytes):
        return
    raise ConfigError(
        f"the signing key is key {mine.key_id_hex}, but keys/{product}.pub is key "
        f"{public.key_id_hex}: what it signed would fail invoke verify",
        file=str(path),
        fix=f"sign with the secret key of keys/{product}.pub (--signing-key, "
        f"{ENV_KEY_FILE}); if the product's key was replaced on purpose, commit the new "
        f"public key as keys/{product}.pub",
    )
