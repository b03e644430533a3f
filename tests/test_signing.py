"""Signing in minisign's formats: our own checks, and the real `minisign` tool in both directions."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ortbundle._core.errors import ConfigError, IntegrityError
from ortbundle.evidence import signing
from ortbundle.evidence.signing import (
    ENV_KEY,
    ENV_KEY_FILE,
    ENV_KEY_PASSWORD,
    PublicKey,
    SecretKey,
    generate_keypair,
    load_public_key,
    load_secret_key,
    load_signing_key,
    sign,
    verify,
    write_public_key,
    write_secret_key,
)

MINISIGN = shutil.which("minisign")
needs_minisign = pytest.mark.skipif(
    MINISIGN is None,
    reason="the minisign tool is not on PATH (Debian/Ubuntu: apt install minisign)",
)

DATA = b"ortbundle manifest\x00\x01\x02 with some bytes\n"
COMMENT = "timestamp:1700000000\tfile:manifest.json\tortbundle"

# Cheap scrypt limits for keys we encrypt ourselves, one per branch of libsodium's parameter
# choice: (opslimit, memlimit) -> N=1024 r=8 p=1 (opslimit-bound) and N=1024 r=8 p=32.
CHEAP_LIMITS = [(32768, 1 << 25), (1 << 20, 1 << 20)]


def minisign(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run minisign without a terminal: passwords come on stdin, never a prompt that hangs."""
    assert MINISIGN is not None
    return subprocess.run(
        [MINISIGN, *args],
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def flip(data: bytes, index: int = 3) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :]


@pytest.fixture
def keypair() -> tuple[SecretKey, PublicKey]:
    return generate_keypair()


# --- our own sign / verify -------------------------------------------------------------------


def test_sign_verify_roundtrip(keypair: tuple[SecretKey, PublicKey]) -> None:
    secret, public = keypair
    text = sign(DATA, secret, trusted_comment=COMMENT)
    lines = text.splitlines()
    assert len(lines) == 4 and text.endswith("\n")
    assert lines[0] == "untrusted comment: signature from minisign secret key"
    assert lines[2] == f"trusted comment: {COMMENT}"
    blob = base64.b64decode(lines[1])
    assert blob[:2] == b"ED" and blob[2:10] == secret.key_id and len(blob) == 74
    assert verify(DATA, text, public) == COMMENT


def test_untrusted_comment_is_not_signed(keypair: tuple[SecretKey, PublicKey]) -> None:
    secret, public = keypair
    text = sign(DATA, secret, trusted_comment=COMMENT, untrusted_comment="built by CI")
    assert text.startswith("untrusted comment: built by CI\n")
    edited = text.replace("built by CI", "anything else")
    assert verify(DATA, edited, public) == COMMENT


def test_key_id_is_shown_as_minisign_shows_it() -> None:
    # A key made by `minisign -G -W` whose public key file said "C82F30D89A592ACF".
    public = load_public_key("RWTPKlma2DAvyElPEC52iFU0cuGNUKsolQ1uyNq/QG5krze2IDnNMLlj")
    assert public.key_id == bytes.fromhex("cf2a599ad8302fc8")
    assert public.key_id_hex == "C82F30D89A592ACF"
    assert public.file_text().splitlines()[0] == (
        "untrusted comment: minisign public key C82F30D89A592ACF"
    )


def test_secret_key_repr_does_not_leak(keypair: tuple[SecretKey, PublicKey]) -> None:
    secret, _ = keypair
    shown = repr(secret) + str(secret)
    assert secret.private_bytes.hex() not in shown
    assert repr(secret.private_bytes) not in shown
    assert shown.startswith(f"SecretKey(key_id={secret.key_id_hex}, private_bytes=<redacted>)")


def test_tampered_data_fails(keypair: tuple[SecretKey, PublicKey]) -> None:
    secret, public = keypair
    text = sign(DATA, secret, trusted_comment=COMMENT)
    with pytest.raises(IntegrityError, match="does not match the data") as info:
        verify(flip(DATA), text, public, source="manifest.json.minisig")
    assert info.value.file == "manifest.json.minisig" and info.value.fix
    assert info.value.exit_code == 4


def test_tampered_trusted_comment_fails(keypair: tuple[SecretKey, PublicKey]) -> None:
    secret, public = keypair
    text = sign(DATA, secret, trusted_comment=COMMENT)
    edited = text.replace("ortbundle\n", "0rtbundle\n")
    assert edited != text
    with pytest.raises(IntegrityError, match="trusted comment .* altered"):
        verify(DATA, edited, public)


def test_signature_from_another_key_names_both_ids(keypair: tuple[SecretKey, PublicKey]) -> None:
    secret, _ = keypair
    _, other_public = generate_keypair()
    text = sign(DATA, secret, trusted_comment=COMMENT)
    with pytest.raises(IntegrityError) as info:
        verify(DATA, text, other_public, source="x.minisig")
    message = str(info.value)
    assert secret.key_id_hex in message and other_public.key_id_hex in message
    assert "x.minisig" in message


def test_same_key_id_but_different_key_fails(keypair: tuple[SecretKey, PublicKey]) -> None:
    secret, public = keypair
    impostor = SecretKey(secret.key_id, os.urandom(32))
    with pytest.raises(IntegrityError, match="does not match the data"):
        verify(DATA, sign(DATA, impostor, trusted_comment=COMMENT), public)


@pytest.mark.parametrize(
    "mangle",
    [
        pytest.param(lambda t: "", id="empty"),
        pytest.param(lambda t: "\n".join(t.splitlines()[:2]), id="truncated-lines"),
        pytest.param(lambda t: t[: len(t) // 2], id="truncated-middle"),
        pytest.param(lambda t: t.replace("untrusted comment: ", "comment: "), id="no-prefix"),
        pytest.param(lambda t: t.replace("trusted comment: ", "trusted: ", 1), id="no-trusted"),
        pytest.param(
            lambda t: t.replace(t.splitlines()[1], t.splitlines()[1][:-8]), id="short-sig"
        ),
        pytest.param(lambda t: t.replace(t.splitlines()[3], "!!notbase64!!"), id="bad-b64"),
        pytest.param(lambda t: t + "extra line\n", id="extra-line"),
        pytest.param(
            lambda t: t.replace(
                t.splitlines()[1],
                base64.b64encode(b"Xx" + base64.b64decode(t.splitlines()[1])[2:]).decode(),
            ),
            id="unknown-alg",
        ),
    ],
)
def test_malformed_signature_file(
    keypair: tuple[SecretKey, PublicKey], mangle: Callable[[str], str]
) -> None:
    secret, public = keypair
    text = sign(DATA, secret, trusted_comment=COMMENT)
    with pytest.raises(IntegrityError, match="is not a minisign signature file"):
        verify(DATA, mangle(text), public, source="m.minisig")


def test_crlf_signature_file_verifies(keypair: tuple[SecretKey, PublicKey]) -> None:
    secret, public = keypair
    text = sign(DATA, secret, trusted_comment=COMMENT)
    assert verify(DATA, text.replace("\n", "\r\n"), public) == COMMENT


def test_legacy_ed_signature_accepted(keypair: tuple[SecretKey, PublicKey]) -> None:
    """Legacy `Ed` signs the data itself, not its BLAKE2b-512."""
    secret, public = keypair
    private = Ed25519PrivateKey.from_private_bytes(secret.private_bytes)
    sig = private.sign(DATA)
    global_sig = private.sign(sig + COMMENT.encode())
    text = (
        "untrusted comment: legacy\n"
        f"{base64.b64encode(b'Ed' + secret.key_id + sig).decode()}\n"
        f"trusted comment: {COMMENT}\n"
        f"{base64.b64encode(global_sig).decode()}\n"
    )
    assert verify(DATA, text, public) == COMMENT
    # The same signature relabelled as prehashed must not pass.
    relabelled = text.replace(
        text.splitlines()[1], base64.b64encode(b"ED" + secret.key_id + sig).decode()
    )
    with pytest.raises(IntegrityError, match="does not match the data"):
        verify(DATA, relabelled, public)


@pytest.mark.parametrize("comment", ["two\nlines", "carriage\rreturn", "nul\x00byte"])
def test_comments_must_be_one_line(keypair: tuple[SecretKey, PublicKey], comment: str) -> None:
    secret, _ = keypair
    with pytest.raises(ConfigError, match="single line"):
        sign(DATA, secret, trusted_comment=comment)
    with pytest.raises(ConfigError, match="single line"):
        sign(DATA, secret, trusted_comment="ok", untrusted_comment=comment)


def test_overlong_trusted_comment_refused(keypair: tuple[SecretKey, PublicKey]) -> None:
    secret, public = keypair
    limit = 8192 - len("trusted comment: ") - 2
    assert verify(DATA, sign(DATA, secret, trusted_comment="x" * limit), public) == "x" * limit
    with pytest.raises(ConfigError, match="longer than minisign accepts"):
        sign(DATA, secret, trusted_comment="x" * (limit + 1))


# --- key files -------------------------------------------------------------------------------


def test_secret_key_file_roundtrip_mode_and_no_overwrite(
    tmp_path: Path, keypair: tuple[SecretKey, PublicKey]
) -> None:
    secret, public = keypair
    path = tmp_path / "ortbundle.key"
    write_secret_key(path, secret)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_secret_key(path) == secret
    assert secret.public_key() == public
    blob = base64.b64decode(path.read_text().splitlines()[1])
    assert len(blob) == 158 and blob[:6] == b"Ed\x00\x00B2"

    before = path.read_bytes()
    other, _ = generate_keypair()
    with pytest.raises(ConfigError, match="already exists") as info:
        write_secret_key(path, other)
    assert info.value.file == str(path) and "force" in (info.value.fix or "")
    assert path.read_bytes() == before
    write_secret_key(path, other, force=True)
    assert load_secret_key(path) == other
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ortbundle.key"]  # no temp left


def test_unwritable_key_path_is_config_error(
    tmp_path: Path, keypair: tuple[SecretKey, PublicKey]
) -> None:
    with pytest.raises(ConfigError, match="cannot write") as info:
        write_secret_key(tmp_path / "no-such-dir" / "k", keypair[0])
    assert info.value.file == str(tmp_path / "no-such-dir" / "k")


def test_secret_key_mode_ignores_permissive_umask(
    tmp_path: Path, keypair: tuple[SecretKey, PublicKey]
) -> None:
    old = os.umask(0)
    try:
        write_secret_key(tmp_path / "k", keypair[0])
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "k").stat().st_mode) == 0o600


def test_public_key_loading_forms(tmp_path: Path, keypair: tuple[SecretKey, PublicKey]) -> None:
    _, public = keypair
    path = tmp_path / "ortbundle.pub"
    write_public_key(path, public)
    text = path.read_text()
    assert text == (
        f"untrusted comment: minisign public key {public.key_id_hex}\n{public.base64}\n"
    )
    assert load_public_key(path) == public
    assert load_public_key(str(path)) == public
    assert load_public_key(text) == public
    assert load_public_key(public.base64) == public
    assert load_public_key(f"  {public.base64}\n") == public


@pytest.mark.parametrize(
    "text", ["", "not a key", "untrusted comment: x\nAAAA\n", "RWQ=", "/no/such/file.pub"]
)
def test_bad_public_key_is_config_error(text: str) -> None:
    with pytest.raises(ConfigError, match="not a minisign public key") as info:
        load_public_key(text)
    assert info.value.exit_code == 2 and info.value.fix


def test_missing_key_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the secret key file") as info:
        load_secret_key(tmp_path / "absent.key")
    assert info.value.file == str(tmp_path / "absent.key")


def test_corrupt_secret_key_detected(tmp_path: Path, keypair: tuple[SecretKey, PublicKey]) -> None:
    secret, _ = keypair
    write_secret_key(tmp_path / "k", secret)
    comment, line = (tmp_path / "k").read_text().splitlines()
    blob = base64.b64decode(line)
    for index, match in [(60, "checksum does not match"), (150, "checksum does not match")]:
        bad = base64.b64encode(flip(blob, index)).decode()
        (tmp_path / "bad").write_text(f"{comment}\n{bad}\n")
        with pytest.raises(ConfigError, match=match) as info:
            load_secret_key(tmp_path / "bad")
        assert info.value.file == str(tmp_path / "bad")
    # minisign -W keys carry an all-zero checksum: then the key halves must still agree.
    zero_chk = flip(blob, 100)[:126] + bytes(32)
    (tmp_path / "bad").write_text(f"{comment}\n{base64.b64encode(zero_chk).decode()}\n")
    with pytest.raises(ConfigError, match="do not belong together"):
        load_secret_key(tmp_path / "bad")
    (tmp_path / "bad").write_text(f"{comment}\n{line[:-10]}\n")
    with pytest.raises(ConfigError, match="not a minisign secret key"):
        load_secret_key(tmp_path / "bad")


def test_public_key_file_is_not_a_secret_key(
    tmp_path: Path, keypair: tuple[SecretKey, PublicKey]
) -> None:
    write_public_key(tmp_path / "k.pub", keypair[1])
    with pytest.raises(ConfigError, match="not a minisign secret key"):
        load_secret_key(tmp_path / "k.pub")


@pytest.mark.parametrize(("opslimit", "memlimit"), CHEAP_LIMITS)
def test_encrypted_key_password(
    tmp_path: Path, keypair: tuple[SecretKey, PublicKey], opslimit: int, memlimit: int
) -> None:
    secret, _ = keypair
    path = tmp_path / "enc.key"
    path.write_text(signing._secret_key_text(secret, "hunter2", opslimit, memlimit))
    assert base64.b64decode(path.read_text().splitlines()[1])[2:4] == b"Sc"
    assert load_secret_key(path, password="hunter2") == secret
    with pytest.raises(ConfigError, match="wrong password") as info:
        load_secret_key(path, password="hunter3")
    assert info.value.file == str(path)
    with pytest.raises(ConfigError, match="none was given") as info:
        load_secret_key(path)
    assert ENV_KEY_PASSWORD in (info.value.fix or "")
    assert load_signing_key(path, {ENV_KEY_PASSWORD: "hunter2"}) == secret
    # A CI secret pasted with a line ending: minisign drops it from a typed password too.
    assert (
        load_signing_key(None, {ENV_KEY_FILE: str(path), ENV_KEY_PASSWORD: "hunter2\n"}) == secret
    )


def test_scrypt_parameters_follow_libsodium() -> None:
    params = signing._scrypt_params
    assert params(33554432, 1073741824) == (1 << 20, 8, 1)  # minisign -G (SENSITIVE)
    assert params(524288, 16777216) == (1 << 14, 8, 1)  # libsodium INTERACTIVE
    assert params(32768, 1 << 25) == (1024, 8, 1)
    assert params(1 << 20, 1 << 20) == (1024, 8, 32)
    assert params(0, 0) == params(32768, 0)  # opslimit is raised to 32768


def test_absurd_scrypt_parameters_refused(
    tmp_path: Path, keypair: tuple[SecretKey, PublicKey]
) -> None:
    text = signing._secret_key_text(keypair[0], "pw", 32768, 1 << 25)
    comment, line = text.splitlines()
    blob = bytearray(base64.b64decode(line))
    blob[46:54] = (1 << 40).to_bytes(8, "little")  # memlimit: 1 TiB
    blob[38:46] = (1 << 40).to_bytes(8, "little")
    (tmp_path / "k").write_text(f"{comment}\n{base64.b64encode(bytes(blob)).decode()}\n")
    with pytest.raises(ConfigError, match="scrypt parameters"):
        load_secret_key(tmp_path / "k", password="pw")


# --- environment -----------------------------------------------------------------------------


def test_signing_key_from_environment(tmp_path: Path, keypair: tuple[SecretKey, PublicKey]) -> None:
    secret, _ = keypair
    path = tmp_path / "ci.key"
    write_secret_key(path, secret)
    content = path.read_text()
    b64_line = content.splitlines()[1]

    assert load_signing_key(None, {}) is None
    assert load_signing_key(None, {ENV_KEY: "", ENV_KEY_FILE: "  "}) is None
    assert load_signing_key(None, {ENV_KEY: content}) == secret
    assert load_signing_key(None, {ENV_KEY: b64_line}) == secret
    assert load_signing_key(None, {ENV_KEY: f"\n{b64_line}\n"}) == secret
    assert load_signing_key(None, {ENV_KEY_FILE: str(path)}) == secret
    assert load_signing_key(path, {}) == secret
    other, _ = generate_keypair()
    assert load_signing_key(path, {ENV_KEY: signing._secret_key_text(other, None, 0, 0)}) == secret

    with pytest.raises(ConfigError, match="both") as info:
        load_signing_key(None, {ENV_KEY: content, ENV_KEY_FILE: str(path)})
    assert info.value.fix
    with pytest.raises(ConfigError, match=r"\$ORTBUNDLE_SIGNING_KEY is not a minisign secret"):
        load_signing_key(None, {ENV_KEY: "garbage"})
    with pytest.raises(ConfigError, match="cannot read the secret key file"):
        load_signing_key(None, {ENV_KEY_FILE: str(tmp_path / "missing.key")})


# --- the real minisign tool ------------------------------------------------------------------


@pytest.mark.tools
@needs_minisign
def test_minisign_verifies_our_signature(
    tmp_path: Path, keypair: tuple[SecretKey, PublicKey]
) -> None:
    secret, public = keypair
    write_public_key(tmp_path / "our.pub", public)
    (tmp_path / "file").write_bytes(DATA)
    (tmp_path / "file.minisig").write_text(sign(DATA, secret, trusted_comment=COMMENT))

    ok = minisign("-V", "-p", str(tmp_path / "our.pub"), "-m", str(tmp_path / "file"))
    assert ok.returncode == 0, ok.stderr
    assert f"Trusted comment: {COMMENT}" in ok.stdout
    # -H: refuse legacy signatures, so this also shows ours are prehashed.
    quiet = minisign("-V", "-H", "-Q", "-P", public.base64, "-m", str(tmp_path / "file"))
    assert quiet.returncode == 0 and quiet.stdout == f"{COMMENT}\n"

    (tmp_path / "file").write_bytes(flip(DATA))
    bad = minisign("-V", "-p", str(tmp_path / "our.pub"), "-m", str(tmp_path / "file"))
    assert bad.returncode != 0
    assert "Signature verification failed" in bad.stderr


@pytest.mark.tools
@needs_minisign
def test_minisign_signs_with_our_unencrypted_key(
    tmp_path: Path, keypair: tuple[SecretKey, PublicKey]
) -> None:
    secret, public = keypair
    write_secret_key(tmp_path / "our.key", secret)
    write_public_key(tmp_path / "our.pub", public)
    (tmp_path / "file").write_bytes(DATA)
    # -p makes minisign check its own signature against our public key before writing it.
    done = minisign(
        "-S", "-s", str(tmp_path / "our.key"), "-p", str(tmp_path / "our.pub"),
        "-m", str(tmp_path / "file"), "-t", COMMENT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    sig = (tmp_path / "file.minisig").read_text()
    assert verify(DATA, sig, public) == COMMENT


@pytest.mark.tools
@needs_minisign
def test_minisign_generated_unencrypted_key_works_here(tmp_path: Path) -> None:
    made = minisign("-G", "-W", "-p", str(tmp_path / "m.pub"), "-s", str(tmp_path / "m.key"))
    assert made.returncode == 0, made.stderr
    secret = load_secret_key(tmp_path / "m.key")
    public = load_public_key(tmp_path / "m.pub")
    assert secret.public_key() == public
    assert public.key_id_hex in (tmp_path / "m.pub").read_text().splitlines()[0]

    (tmp_path / "file").write_bytes(DATA)
    (tmp_path / "file.minisig").write_text(sign(DATA, secret, trusted_comment=COMMENT))
    ok = minisign("-V", "-p", str(tmp_path / "m.pub"), "-m", str(tmp_path / "file"))
    assert ok.returncode == 0, ok.stderr

    # Both signature forms minisign writes with it: prehashed (default) and legacy (-l).
    for flags, alg in ((("-x", str(tmp_path / "h.minisig")), b"ED"),
                       (("-l", "-x", str(tmp_path / "l.minisig")), b"Ed")):  # fmt: skip
        done = minisign("-S", *flags, "-s", str(tmp_path / "m.key"), "-m", str(tmp_path / "file"))
        assert done.returncode == 0, done.stderr
        text = (tmp_path / flags[-1]).read_text()
        assert base64.b64decode(text.splitlines()[1])[:2] == alg
        assert verify(DATA, text, public).startswith("timestamp:")
        with pytest.raises(IntegrityError, match="does not match the data"):
            verify(flip(DATA), text, public)


@pytest.mark.tools
@needs_minisign
def test_minisign_encrypted_key_loads_with_password(tmp_path: Path) -> None:
    """The slow one: minisign's default scrypt cost (N=2^20, 1 GiB), three derivations."""
    made = minisign(
        "-G", "-p", str(tmp_path / "e.pub"), "-s", str(tmp_path / "e.key"), stdin="s3cret\ns3cret\n"
    )
    assert made.returncode == 0, made.stderr
    secret = load_signing_key(None, {ENV_KEY_FILE: str(tmp_path / "e.key"),
                                     ENV_KEY_PASSWORD: "s3cret"})  # fmt: skip
    assert secret is not None
    assert secret.public_key() == load_public_key(tmp_path / "e.pub")
    with pytest.raises(ConfigError, match="wrong password") as info:
        load_secret_key(tmp_path / "e.key", password="s3cret!")
    assert info.value.file == str(tmp_path / "e.key")

    (tmp_path / "file").write_bytes(DATA)
    (tmp_path / "file.minisig").write_text(sign(DATA, secret, trusted_comment=COMMENT))
    ok = minisign("-V", "-p", str(tmp_path / "e.pub"), "-m", str(tmp_path / "file"))
    assert ok.returncode == 0, ok.stderr


@pytest.mark.tools
@needs_minisign
@pytest.mark.parametrize(("opslimit", "memlimit"), CHEAP_LIMITS)
def test_minisign_decrypts_our_encrypted_key(
    tmp_path: Path, keypair: tuple[SecretKey, PublicKey], opslimit: int, memlimit: int
) -> None:
    """Our scrypt parameters and XOR layout agree with libsodium's, on both branches."""
    secret, public = keypair
    (tmp_path / "enc.key").write_text(
        signing._secret_key_text(secret, "pässword", opslimit, memlimit)
    )
    (tmp_path / "file").write_bytes(DATA)
    done = minisign(
        "-S", "-s", str(tmp_path / "enc.key"), "-m", str(tmp_path / "file"), "-t", COMMENT,
        stdin="pässword\n",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert verify(DATA, (tmp_path / "file.minisig").read_text(), public) == COMMENT
    wrong = minisign(
        "-S", "-s", str(tmp_path / "enc.key"), "-m", str(tmp_path / "file"),
        "-x", str(tmp_path / "w.minisig"), stdin="password\n",
    )  # fmt: skip
    assert wrong.returncode != 0 and "Wrong password" in wrong.stderr


def test_prehash_is_blake2b_512() -> None:
    assert signing._prehash(DATA) == hashlib.blake2b(DATA).digest()
