"""evidence/signing.py's refusals read directly, each with the words, file and fix it gives:
a malformed .minisig, a signature by another key, changed data, an altered trusted comment,
keys that are not keys, secret keys that are corrupt or locked, comments that would forge a
line, and key files that must not be overwritten.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from ortbundle._core.errors import ConfigError, IntegrityError
from ortbundle.config.products import Product
from ortbundle.evidence import signing
from ortbundle.evidence.signing import (
    ENV_KEY,
    ENV_KEY_FILE,
    ENV_KEY_PASSWORD,
    PublicKey,
    SecretKey,
    load_public_key,
    load_secret_key,
    load_signing_key,
    sign,
    verify,
    write_public_key,
    write_secret_key,
)

SECRET = SecretKey(bytes(range(1, 9)), bytes(range(32)))
PUBLIC = SECRET.public_key()
OTHER = SecretKey(bytes(range(11, 19)), bytes(range(1, 33)))
DATA = b"the manifest"
MALFORMED_FIX = "regenerate the .minisig; it must be the 4 lines minisign writes"


def minisig(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def good_lines() -> list[str]:
    return sign(DATA, SECRET, trusted_comment="ortbundle 1.0").rstrip("\n").split("\n")


def refused(text: str, source: str | None = "m.minisig") -> IntegrityError:
    with pytest.raises(IntegrityError) as caught:
        verify(DATA, text, PUBLIC, source=source)
    assert caught.value.component == "signing"
    assert caught.value.file == source
    return caught.value


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


# --- a signature file ------------------------------------------------------------------------


def test_a_signature_verifies_and_gives_its_trusted_comment() -> None:
    text = sign(DATA, SECRET, trusted_comment="ortbundle 1.0", untrusted_comment="made here")
    lines = text.split("\n")
    assert lines[0] == "untrusted comment: made here"
    assert lines[2] == "trusted comment: ortbundle 1.0"
    assert lines[4] == "" and len(lines) == 5
    blob = base64.b64decode(lines[1])
    assert (blob[:2], blob[2:10], len(blob)) == (b"ED", SECRET.key_id, 74)
    assert verify(DATA, text, PUBLIC) == "ortbundle 1.0"
    assert verify(DATA, text.replace("\n", "\r\n"), PUBLIC) == "ortbundle 1.0"  # CRLF written
    assert verify(DATA, text + "\n\n", PUBLIC) == "ortbundle 1.0"  # trailing blank lines


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda lines: lines[:3], "expected 4 lines, found 3"),
        (lambda lines: [*lines, "x"], "expected 4 lines, found 5"),
        (
            lambda lines: ["comment: x", *lines[1:]],
            "line 1 does not start with 'untrusted comment: '",
        ),
        (
            lambda lines: [lines[0], lines[1], "comment: x", lines[3]],
            "line 3 does not start with 'trusted comment: '",
        ),
        (lambda lines: [lines[0], "not base64!", *lines[2:]], "line 2 is not base64 of 74 bytes"),
        (lambda lines: [lines[0], b64(bytes(73)), *lines[2:]], "line 2 is not base64 of 74 bytes"),
        (
            lambda lines: [lines[0], b64(b"XY" + bytes(72)), *lines[2:]],
            "unsupported signature algorithm b'XY'",
        ),
        (lambda lines: [*lines[:3], "???"], "line 4 is not base64 of 64 bytes"),
        (lambda lines: [*lines[:3], b64(bytes(65))], "line 4 is not base64 of 64 bytes"),
    ],
)
def test_a_malformed_signature_file_says_what_is_wrong(change: object, why: str) -> None:
    assert callable(change)
    error = refused(minisig(change(good_lines())))
    assert (error.message, error.fix) == (
        f"m.minisig is not a minisign signature file: {why}",
        MALFORMED_FIX,
    )


def test_a_malformed_signature_without_a_name_is_the_signature() -> None:
    error = refused("garbage", source=None)
    assert (
        error.message == "the signature is not a minisign signature file: expected 4 lines, found 1"
    )


def test_a_signature_by_another_key_names_both_keys() -> None:
    text = sign(DATA, OTHER, trusted_comment="c")
    error = refused(text)
    theirs, ours = OTHER.key_id_hex, PUBLIC.key_id_hex
    assert (error.message, error.fix) == (
        f"m.minisig was made by key {theirs}, but the public key is {ours}",
        f"verify with the public key {theirs}, or re-sign with the secret key of {ours}",
    )
    assert theirs == f"{int.from_bytes(OTHER.key_id, 'little'):X}"


def test_changed_data_is_refused() -> None:
    with pytest.raises(IntegrityError) as caught:
        verify(DATA + b"!", sign(DATA, SECRET, trusted_comment="c"), PUBLIC, source="m.minisig")
    assert (caught.value.message, caught.value.fix) == (
        "m.minisig does not match the data: the signed bytes were changed or replaced",
        "rebuild or re-download the signed file, then re-sign it if you produced it",
    )


def test_an_altered_trusted_comment_is_refused() -> None:
    lines = good_lines()
    error = refused(minisig([lines[0], lines[1], "trusted comment: ortbundle 9.9", lines[3]]))
    assert (error.message, error.fix) == (
        "the trusted comment in m.minisig was altered after signing (comment signature does "
        "not verify)",
        "discard this signature file and sign the data again",
    )


def test_a_legacy_signature_over_the_data_itself_verifies() -> None:
    """minisign's older `Ed` signatures sign the data, not its BLAKE2b-512."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Ed25519PrivateKey.from_private_bytes(SECRET.private_bytes)
    signature = private.sign(DATA)
    comment = "legacy"
    text = minisig(
        [
            "untrusted comment: x",
            b64(b"Ed" + SECRET.key_id + signature),
            f"trusted comment: {comment}",
            b64(private.sign(signature + comment.encode())),
        ]
    )
    assert verify(DATA, text, PUBLIC) == "legacy"
    with pytest.raises(IntegrityError, match="does not match the data"):
        verify(DATA + b"x", text, PUBLIC)


@pytest.mark.parametrize(
    ("comment", "field", "message"),
    [
        (
            "a\nb",
            "trusted",
            "the trusted comment must be a single line (it contains a newline or NUL): 'a\\nb'",
        ),
        (
            "a\rb",
            "untrusted",
            "the untrusted comment must be a single line (it contains a newline or NUL): 'a\\rb'",
        ),
        (
            "a\x00b",
            "trusted",
            "the trusted comment must be a single line (it contains a newline or NUL): 'a\\x00b'",
        ),
    ],
)
def test_a_comment_that_would_forge_a_line_is_refused(
    comment: str, field: str, message: str
) -> None:
    kwargs = {"trusted_comment": "ok", "untrusted_comment": "ok"}
    kwargs[f"{field}_comment"] = comment
    with pytest.raises(ConfigError) as caught:
        sign(DATA, SECRET, **kwargs)
    assert (caught.value.message, caught.value.fix, caught.value.component) == (
        message,
        f"remove line breaks from the {field} comment, or join its parts with tabs",
        "signing",
    )


def test_a_comment_longer_than_minisign_reads_is_refused_and_one_at_the_limit_is_not() -> None:
    trusted_max, untrusted_max = 8192 - 17 - 2, 1024 - 19 - 2
    sign(DATA, SECRET, trusted_comment="t" * trusted_max, untrusted_comment="u" * untrusted_max)
    sign(DATA, SECRET, trusted_comment="é" * (trusted_max // 2))  # counted in UTF-8 bytes
    with pytest.raises(ConfigError) as caught:
        sign(DATA, SECRET, trusted_comment="t" * (trusted_max + 1))
    assert (caught.value.message, caught.value.fix) == (
        f"the trusted comment is longer than minisign accepts ({trusted_max} bytes)",
        "shorten the trusted comment",
    )
    with pytest.raises(ConfigError) as caught:
        sign(DATA, SECRET, trusted_comment="t", untrusted_comment="é" * (untrusted_max // 2 + 1))
    assert caught.value.message == (
        f"the untrusted comment is longer than minisign accepts ({untrusted_max} bytes)"
    )


# --- public keys -----------------------------------------------------------------------------


def test_a_public_key_loads_from_its_file_its_text_its_line_or_a_path_string(
    tmp_path: Path,
) -> None:
    path = tmp_path / "p.pub"
    write_public_key(path, PUBLIC)
    text = path.read_text()
    assert text == PUBLIC.file_text()
    assert text.startswith(f"untrusted comment: minisign public key {PUBLIC.key_id_hex}\n")
    for given in (path, text, text.split("\n")[1], f"  {path}  "):
        key = load_public_key(given)
        assert (key.key_id, key.public_bytes) == (PUBLIC.key_id, PUBLIC.public_bytes)
    assert path.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize(
    "text",
    [
        "",
        "untrusted comment: x",
        "untrusted comment: x\n" + b64(b"Ed" + bytes(39)),  # one byte short
        "untrusted comment: x\n" + b64(b"XY" + bytes(40)),  # not Ed25519
        "comment: x\n" + b64(b"Ed" + bytes(40)),  # two lines, the first no comment
        "untrusted comment: x\n" + b64(b"Ed" + bytes(40)) + "\nmore",
    ],
)
def test_a_public_key_that_is_not_one_is_refused(text: str, tmp_path: Path) -> None:
    path = tmp_path / "p.pub"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_public_key(path)
    assert (caught.value.message, caught.value.file, caught.value.fix) == (
        f"{path} is not a minisign public key (want base64 of 'Ed' + 8-byte key id + 32-byte "
        "key, after an untrusted comment)",
        str(path),
        "pass the .pub file written by `minisign -G` or ortbundle, or its base64 line",
    )
    with pytest.raises(ConfigError) as caught:
        load_public_key("not a key\nnor a path")
    assert caught.value.message.startswith("the public key is not a minisign public key")
    assert caught.value.file is None


def test_an_unreadable_key_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_public_key(tmp_path / "missing.pub")
    assert (caught.value.message, caught.value.fix) == (
        f"cannot read the public key file {tmp_path / 'missing.pub'}: No such file or directory",
        "check the path to the public key file",
    )
    binary = tmp_path / "k.key"
    binary.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError) as caught:
        load_secret_key(binary)
    assert caught.value.message == f"cannot read the secret key file {binary}: not UTF-8 text"


# --- secret keys -------------------------------------------------------------------------------

CHEAP = (1 << 15, 1 << 20)  # scrypt limits small enough for a test


def key_text(password: str | None = None) -> str:
    return signing._secret_key_text(SECRET, password, *CHEAP)


def blob_of(text: str) -> bytearray:
    return bytearray(base64.b64decode(text.split("\n")[1]))


def text_of(blob: bytes | bytearray) -> str:
    return f"untrusted comment: k\n{b64(bytes(blob))}\n"


def secret_refused(text: str, password: str | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        signing._parse_secret_key(text, password, "k.key")
    assert (caught.value.component, caught.value.file) == ("signing", "k.key")
    return caught.value


def test_an_unencrypted_and_an_encrypted_key_load(tmp_path: Path) -> None:
    plain = key_text()
    assert plain.startswith(
        f"untrusted comment: minisign secret key {SECRET.key_id_hex} (unencrypted)\n"
    )
    loaded = signing._parse_secret_key(plain, None, "k.key")
    assert (loaded.key_id, loaded.private_bytes) == (SECRET.key_id, SECRET.private_bytes)
    locked = key_text("pass word")
    assert locked.startswith(
        f"untrusted comment: minisign encrypted secret key {SECRET.key_id_hex}\n"
    )
    for password in ("pass word", "pass word\n", "pass word\r\n"):  # a pasted line ending
        assert (
            signing._parse_secret_key(locked, password, "k.key").private_bytes
            == SECRET.private_bytes
        )
    # minisign -G -W leaves an unencrypted key's checksum all zero
    blob = blob_of(plain)
    blob[-32:] = bytes(32)
    assert signing._parse_secret_key(text_of(blob), None, "k.key").key_id == SECRET.key_id


def test_a_secret_key_that_is_not_one_is_refused() -> None:
    error = secret_refused("untrusted comment: x\n" + b64(bytes(10)))
    assert error.message == (
        "k.key is not a minisign secret key (want an untrusted comment line and base64 of 158 "
        "bytes)"
    )
    assert error.fix is not None and error.fix.startswith(
        "pass the .key file itself, or only its second line; "
    )


@pytest.mark.parametrize(
    ("at", "value", "message"),
    [
        (0, b"XY", "k.key uses signature algorithm b'XY', not Ed25519 ('Ed')"),
        (4, b"SH", "k.key uses checksum algorithm b'SH', not BLAKE2b ('B2')"),
        (2, b"Ar", "k.key uses unknown key derivation b'Ar'"),
    ],
)
def test_a_secret_key_of_another_kind_is_refused(at: int, value: bytes, message: str) -> None:
    blob = blob_of(key_text())
    blob[at : at + 2] = value
    assert secret_refused(text_of(blob)).message == message


def test_a_corrupt_secret_key_is_refused() -> None:
    blob = blob_of(key_text())
    blob[60] ^= 1  # a seed byte: the checksum no longer matches
    error = secret_refused(text_of(blob))
    assert (error.message, error.fix) == (
        "k.key is corrupt: its checksum does not match the key",
        "restore the key file from its backup",
    )
    # halves that do not belong together, with a checksum computed over them (and an unchecked
    # all-zero checksum): still refused
    blob = blob_of(key_text())
    blob[54 + 8 + 32] ^= 1  # a public-key byte
    sk = bytes(blob[54 + 8 : 54 + 8 + 64])
    blob[-32:] = signing._secret_checksum(SECRET.key_id, sk)
    error = secret_refused(text_of(blob))
    assert error.message == "k.key is corrupt: its private and public halves do not belong together"
    blob[-32:] = bytes(32)
    assert "do not belong together" in secret_refused(text_of(blob)).message


def test_an_encrypted_key_needs_the_right_password() -> None:
    locked = key_text("right")
    error = secret_refused(locked)
    assert (error.message, error.fix) == (
        "k.key is encrypted with a password, and none was given",
        f"set {ENV_KEY_PASSWORD}, or remove the password with `minisign -C -W -s KEY`",
    )
    error = secret_refused(locked, "wrong")
    assert (error.message, error.fix) == (
        "wrong password for the encrypted key k.key (or the key file is corrupt)",
        f"check {ENV_KEY_PASSWORD}; the key's checksum does not match after decryption",
    )
    blob = blob_of(locked)
    blob[-32:] = bytes(32)  # an all-zero checksum is accepted only unencrypted
    assert secret_refused(text_of(blob), "right").message.startswith("wrong password")


def test_a_password_longer_than_minisign_reads_is_refused() -> None:
    error = secret_refused(key_text("right"), "p" * 1025)
    assert error.message.startswith("the password for k.key is longer than minisign accepts (")


def test_scrypt_parameters_no_minisign_key_uses_are_refused() -> None:
    blob = blob_of(key_text("right"))
    blob[38:54] = (1 << 62).to_bytes(8, "little") * 2  # opslimit and memlimit: an absurd N
    error = secret_refused(text_of(blob), "right")
    assert error.message.startswith("k.key asks for scrypt parameters no minisign key uses (")
    assert (
        error.fix == "re-encrypt the key with `minisign -C -s KEY`, or export it unencrypted (-W)"
    )


@pytest.mark.parametrize(
    ("opslimit", "memlimit", "params"),
    [
        (33554432, 1073741824, (1 << 20, 8, 1)),  # minisign's "sensitive" limits
        (524288, 16777216, (1 << 14, 8, 1)),  # libsodium's interactive limits
        (0, 0, (2, 8, 512)),  # opslimit raised to its floor; memlimit tiny: p grows
        (32768, 1 << 30, (1 << 10, 8, 1)),
    ],
)
def test_scrypt_parameters_are_derived_as_libsodium_derives_them(
    opslimit: int, memlimit: int, params: tuple[int, int, int]
) -> None:
    assert signing._scrypt_params(opslimit, memlimit) == params


# --- where the signing key comes from ------------------------------------------------------------


def test_the_signing_key_comes_from_a_path_or_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "k.key"
    path.write_text(key_text())
    assert load_signing_key(None, {}) is None
    assert load_signing_key(None, {ENV_KEY: "  ", ENV_KEY_FILE: ""}) is None  # empty = unset
    assert load_signing_key(path, {ENV_KEY: "ignored"}) is not None  # a path wins
    from_text = load_signing_key(None, {ENV_KEY: key_text()})
    from_file = load_signing_key(None, {ENV_KEY_FILE: f" {path} "})
    assert from_text is not None and from_file is not None
    assert from_text.key_id == from_file.key_id == SECRET.key_id
    locked = tmp_path / "locked.key"
    locked.write_text(key_text("pw"))
    found = load_signing_key(None, {ENV_KEY_FILE: str(locked), ENV_KEY_PASSWORD: "pw"})
    assert found is not None and found.key_id == SECRET.key_id
    with pytest.raises(ConfigError) as caught:
        load_signing_key(None, {ENV_KEY: "x", ENV_KEY_FILE: "y"})
    assert (caught.value.message, caught.value.fix) == (
        f"both {ENV_KEY} and {ENV_KEY_FILE} are set; it is unclear which key to sign with",
        f"set only one of {ENV_KEY} and {ENV_KEY_FILE}",
    )
    with pytest.raises(ConfigError) as caught:
        load_signing_key(None, {ENV_KEY: "garbage"})
    assert caught.value.file == f"${ENV_KEY}"
    with pytest.raises(ConfigError) as caught:
        load_signing_key(None, {ENV_KEY_FILE: str(locked), ENV_KEY_PASSWORD: ""})
    assert caught.value.message.endswith("is encrypted with a password, and none was given")


# --- writing key files -------------------------------------------------------------------------


def test_a_secret_key_file_is_private_and_never_overwritten_unasked(tmp_path: Path) -> None:
    path = tmp_path / "k.key"
    write_secret_key(path, SECRET)
    assert path.stat().st_mode & 0o777 == 0o600
    assert load_secret_key(path).key_id == SECRET.key_id
    with pytest.raises(ConfigError) as caught:
        write_secret_key(path, OTHER)
    assert (caught.value.message, caught.value.file, caught.value.fix) == (
        f"{path} already exists; refusing to overwrite a key file",
        str(path),
        "move the existing key away first, or pass force=True if it is disposable",
    )
    assert load_secret_key(path).key_id == SECRET.key_id
    write_secret_key(path, OTHER, force=True)
    assert load_secret_key(path).key_id == OTHER.key_id
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.key"]  # no temporary left


def test_a_key_file_in_a_missing_directory_is_a_setting_to_fix(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "k.pub"
    with pytest.raises(ConfigError) as caught:
        write_public_key(path, PUBLIC)
    assert (caught.value.message, caught.value.fix) == (
        f"cannot write {path}: No such file or directory",
        "check that the directory exists and is writable",
    )


def test_a_key_the_disk_refuses_is_a_disk_error_naming_which_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ortbundle._core.errors import DiskError

    def full(*args: object, **kwargs: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "open", full)
    writers: tuple[tuple[Callable[[Path], None], str], ...] = (
        (lambda p: write_secret_key(p, SECRET), "the secret signing key"),
        (lambda p: write_public_key(p, PUBLIC), "the public key"),
    )
    for write, what in writers:
        path = tmp_path / "k"
        with pytest.raises(DiskError) as caught:
            write(path)
        assert caught.value.message == f"could not write {what}: No space left on device (ENOSPC)"
        assert (caught.value.file, caught.value.component) == (str(path), "signing")


def test_keys_print_no_secret() -> None:
    assert SECRET.key_id_hex == f"{int.from_bytes(SECRET.key_id, 'little'):X}"
    assert SECRET.private_bytes.hex() not in repr(SECRET)
    assert isinstance(PUBLIC, PublicKey)


# --- DSSE's plain signatures, and the key a build signs with -----------------------------------


def test_a_plain_signature_verifies_only_for_its_bytes_and_key() -> None:
    signature = signing.sign_bytes(DATA, SECRET)
    assert len(signature) == 64
    assert signing.verify_bytes(DATA, signature, PUBLIC) is True
    assert signing.verify_bytes(DATA + b"!", signature, PUBLIC) is False
    assert signing.verify_bytes(DATA, signature, OTHER.public_key()) is False


def _product(name: str) -> Product:
    return cast(Product, SimpleNamespace(name=name))


def test_a_build_signs_with_the_key_its_options_and_environment_name(tmp_path: Path) -> None:
    environ = {"XDG_CONFIG_HOME": str(tmp_path)}
    assert signing.signing_key(_product("p"), None, environ, release=False, keys=None) is None
    default = tmp_path / "ortbundle" / "keys" / "p.key"
    default.parent.mkdir(parents=True)
    default.write_text(key_text())
    found = signing.signing_key(_product("p"), None, environ, release=True, keys=None)
    assert found is not None and found.key_id == SECRET.key_id
    other = tmp_path / "other.key"
    write_secret_key(other, OTHER)
    chosen = signing.signing_key(_product("p"), other, environ, release=False, keys=None)
    assert chosen is not None and chosen.key_id == OTHER.key_id


def test_a_release_without_a_key_is_refused_saying_how_to_make_one(tmp_path: Path) -> None:
    environ = {"XDG_CONFIG_HOME": str(tmp_path)}
    with pytest.raises(ConfigError) as caught:
        signing.signing_key(_product("p"), None, environ, release=True, keys=None)
    default = tmp_path / "ortbundle" / "keys" / "p.key"
    assert (caught.value.message, caught.value.fix) == (
        "a release build must be signed, and no signing key is configured",
        f"run invoke keygen -p p once (it writes {default}), or set {ENV_KEY} to the secret "
        f"key's text or {ENV_KEY_FILE} to its path",
    )


def test_each_refusal_names_the_signing_component_and_its_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        sign(DATA, SECRET, trusted_comment="t" * 9000)
    assert caught.value.component == "signing"
    assert verify(DATA, sign(DATA, SECRET, trusted_comment="X marks it"), PUBLIC) == "X marks it"
    bad = tmp_path / "bad.pub"
    bad.write_text("not a key")
    with pytest.raises(ConfigError) as caught:
        load_public_key(str(bad))  # a path as a string: read as that file
    assert (caught.value.component, caught.value.file) == ("signing", str(bad))
    assert caught.value.message.startswith(f"{bad} is not a minisign public key")
    binary = tmp_path / "binary.pub"
    binary.write_bytes(b"\xff")
    with pytest.raises(ConfigError) as caught:
        load_public_key(str(binary))
    assert caught.value.message == f"cannot read the public key file {binary}: not UTF-8 text"
    with pytest.raises(ConfigError) as caught:
        load_signing_key(tmp_path / "missing.key", {})
    assert caught.value.message == (
        f"cannot read the secret key file {tmp_path / 'missing.key'}: No such file or directory"
    )
    garbage = tmp_path / "garbage.key"
    garbage.write_text("garbage")
    with pytest.raises(ConfigError) as caught:
        load_signing_key(garbage, {})
    assert (caught.value.component, caught.value.file) == ("signing", str(garbage))
    assert caught.value.message.startswith(f"{garbage} is not a minisign secret key")
    with pytest.raises(ConfigError) as caught:
        load_signing_key(None, {ENV_KEY: "x", ENV_KEY_FILE: "y"})
    assert caught.value.component == "signing"
    key = tmp_path / "k.key"
    write_secret_key(key, SECRET)
    with pytest.raises(ConfigError) as caught:
        write_secret_key(key, SECRET)
    assert caught.value.component == "signing"
    with pytest.raises(ConfigError) as caught:
        write_public_key(tmp_path / "nowhere" / "k.pub", PUBLIC)
    assert (caught.value.component, caught.value.file) == (
        "signing",
        str(tmp_path / "nowhere" / "k.pub"),
    )


def test_a_new_key_s_password_longer_than_minisign_reads_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        write_secret_key(tmp_path / "k.key", SECRET, password="p" * 1025)
    assert caught.value.message.startswith(
        "the password for the new secret key is longer than minisign accepts ("
    )
    assert not (tmp_path / "k.key").exists()
