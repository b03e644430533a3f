"""evidence/signing.py's key handling read directly, against keys built here independently:
encrypted minisign keys made with the standard library's scrypt (so a change to how the module
reads the limits, derives N, r and p, or treats the password cannot cancel out between its own
writer and reader), the scrypt limits at their edges, the messages of every refusal whole, and
where the signing key comes from. tests/test_minisign_format.py covers the signature format.
"""

from __future__ import annotations

import base64
import hashlib
import locale
import sys
from pathlib import Path
from typing import ClassVar

import pytest
from cryptography.hazmat.primitives.kdf import scrypt as scrypt_module

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
)
from tests.test_minisign_format import DATA, OTHER, PUBLIC, SECRET, secret_refused

SALT = bytes(range(100, 132))
FIX_KEYGEN = "generate a key pair with `minisign -G -W` (or ortbundle's generate_keypair)"


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _keynum(key: SecretKey = SECRET) -> bytes:
    """key id || seed || public key || BLAKE2b-256 checksum: the part minisign encrypts."""
    sk = key.private_bytes + key.public_key().public_bytes
    return key.key_id + sk + hashlib.blake2b(b"Ed" + key.key_id + sk, digest_size=32).digest()


def _stream(password: bytes, n: int, r: int, p: int, salt: bytes = SALT) -> bytes:
    return hashlib.scrypt(password, salt=salt, n=n, r=r, p=p, maxmem=64 << 20, dklen=104)


def encrypted(
    password: bytes, limits: tuple[int, int], params: tuple[int, int, int], salt: bytes = SALT
) -> str:
    """An encrypted minisign key file, as `minisign -G` writes one: the stored limits are
    `limits` (opslimit, memlimit), and `params` the (N, r, p) libsodium derives from them."""
    stream = _stream(password, *params, salt=salt)
    keynum = bytes(a ^ b for a, b in zip(_keynum(), stream, strict=True))
    ops, mem = limits
    header = b"EdScB2" + salt + ops.to_bytes(8, "little") + mem.to_bytes(8, "little")
    return f"untrusted comment: k\n{b64(header + keynum)}\n"


def scrypt_header(limits: tuple[int, int]) -> str:
    """A key marked encrypted whose key part is stored as it is: it loads where the scrypt
    stream is all zero (the fake below), so a test can reach limits too costly to run."""
    ops, mem = limits
    header = b"EdScB2" + SALT + ops.to_bytes(8, "little") + mem.to_bytes(8, "little")
    return f"untrusted comment: k\n{b64(header + _keynum())}\n"


def loads(text: str, password: str | None) -> bool:
    key = signing._parse_secret_key(text, password, "k.key")
    return (key.key_id, key.private_bytes) == (SECRET.key_id, SECRET.private_bytes)


class FakeScrypt:
    """Stands in for cryptography's Scrypt where the real one would need gibibytes: records
    what it was asked for, and returns an all-zero stream (or raises what it is told to)."""

    calls: ClassVar[list[dict[str, object]]] = []
    raises: ClassVar[BaseException | None] = None

    def __init__(self, *, salt: bytes, length: int, n: int, r: int, p: int) -> None:
        FakeScrypt.calls.append({"salt": salt, "length": length, "n": n, "r": r, "p": p})

    def derive(self, secret: bytes) -> bytes:
        if FakeScrypt.raises is not None:
            raise FakeScrypt.raises
        return bytes(104)


@pytest.fixture
def fake_scrypt(monkeypatch: pytest.MonkeyPatch) -> type[FakeScrypt]:
    monkeypatch.setattr(scrypt_module, "Scrypt", FakeScrypt)
    monkeypatch.setattr(FakeScrypt, "calls", [])
    monkeypatch.setattr(FakeScrypt, "raises", None)
    return FakeScrypt


# --- encrypted keys made elsewhere ------------------------------------------------------------

CHEAP = (1 << 15, 1 << 20)  # opslimit below memlimit/32: N from opslimit, p = 1
CHEAP_PARAMS = (1024, 8, 1)


def test_a_key_whose_limits_make_p_grow_decrypts_with_the_parameters_libsodium_picks() -> None:
    """opslimit 2^20 against memlimit 2^20 + 1: N from memlimit (1024), p from what opslimit
    leaves (2^18 / 1024 / 8 = 32). Every byte of both limits counts, read little-endian."""
    text = encrypted(b"pw", (1 << 20, (1 << 20) + 1), (1024, 8, 32))
    assert base64.b64decode(text.split("\n")[1])[54] != 0  # the byte after memlimit is not 0
    assert loads(text, "pw")
    assert secret_refused(text, "pv").message.startswith("wrong password for the encrypted key")


def test_p_up_to_64_is_accepted_and_65_refused() -> None:
    """opslimit 2^21, memlimit 2^20: N = 1024 and p = 2^19 / 1024 / 8 = 64, the most allowed."""
    assert loads(encrypted(b"pw", (1 << 21, 1 << 20), (1024, 8, 64)), "pw")
    ops = 4 * 520 * 1024  # p = 520 / 8 = 65
    error = secret_refused(encrypted(b"pw", (ops, 1 << 20), (1024, 8, 1)), "pw")
    assert (error.message, error.fix) == (
        f"k.key asks for scrypt parameters no minisign key uses (opslimit {ops}, memlimit "
        "1048576 → N=1024, r=8, p=65)",
        "re-encrypt the key with `minisign -C -s KEY`, or export it unencrypted (-W)",
    )


def test_scrypt_may_use_4_gib_and_no_more(fake_scrypt: type[FakeScrypt]) -> None:
    """opslimit 2^27 under memlimit/32: N = 2^22, 128·r·N = 4 GiB, the limit: derived. One
    step more (N = 2^23, 8 GiB) is refused before scrypt runs."""
    assert loads(scrypt_header((1 << 27, 1 << 33)), "pw")
    assert fake_scrypt.calls == [{"salt": SALT, "length": 104, "n": 1 << 22, "r": 8, "p": 1}]
    error = secret_refused(scrypt_header((1 << 28, 1 << 34)), "pw")
    assert error.message == (
        "k.key asks for scrypt parameters no minisign key uses (opslimit 268435456, memlimit "
        "17179869184 → N=8388608, r=8, p=1)"
    )
    assert len(fake_scrypt.calls) == 1  # the refused key never reached scrypt


def test_a_machine_without_the_memory_scrypt_needs_is_told_so(
    fake_scrypt: type[FakeScrypt],
) -> None:
    fake_scrypt.raises = MemoryError()
    error = secret_refused(scrypt_header((1 << 27, 1 << 33)), "pw")
    assert (error.message, error.fix) == (
        "not enough memory to decrypt k.key (scrypt needs 4096 MiB)",
        "sign on a machine with more memory, or export the key unencrypted (-W)",
    )
    assert error.__cause__ is None and error.__suppress_context__


@pytest.mark.parametrize("password", ["pw X\t", "pwX", "pässwörd"])
def test_the_password_is_used_as_typed_less_only_its_line_ending(password: str) -> None:
    """minisign reads the password as a line: only a final CR/LF is not part of it; a space,
    a tab or any other last character is."""
    text = encrypted(password.encode(), CHEAP, CHEAP_PARAMS)
    assert loads(text, password)
    assert loads(text, password + "\r\n")
    assert secret_refused(text, password[:-1]).message.startswith("wrong password")


def test_a_password_of_1023_bytes_is_accepted_and_one_longer_refused() -> None:
    longest = "p" * 1023
    assert loads(encrypted(longest.encode(), CHEAP, CHEAP_PARAMS), longest)
    error = secret_refused(encrypted(b"pw", CHEAP, CHEAP_PARAMS), longest + "p")
    assert (error.message, error.fix) == (
        "the password for k.key is longer than minisign accepts (1023 bytes)",
        f"check {ENV_KEY_PASSWORD}",
    )


def test_an_encrypted_key_written_here_decrypts_elsewhere() -> None:
    """The writer's header carries the limits little-endian, and the key part is XOR'ed with
    the scrypt stream for exactly those limits (decrypted here with the standard library)."""
    text = signing._secret_key_text(SECRET, "pw", 1 << 20, (1 << 20) + 1)
    blob = base64.b64decode(text.split("\n")[1])
    assert blob[:6] == b"EdScB2" and len(blob) == 158
    assert int.from_bytes(blob[38:46], "little") == 1 << 20
    assert int.from_bytes(blob[46:54], "little") == (1 << 20) + 1
    stream = _stream(b"pw", 1024, 8, 32, salt=blob[6:38])
    assert bytes(a ^ b for a, b in zip(blob[54:], stream, strict=True)) == _keynum()


@pytest.mark.parametrize(
    ("opslimit", "memlimit", "params"),
    [
        # opslimit one under memlimit/32: N from opslimit (2^10 > 2047/2), p = 1
        (65535, 2097152, (1024, 8, 1)),
        # memlimit tiny, opslimit huge: p capped where libsodium caps r·p (0x3fffffff / 8)
        (1 << 33, 130, (2, 8, 134217727)),
        # limits past 2^53: libsodium's integer division, never a rounded float
        ((1 << 54) - 1, 1 << 59, (1 << 48, 8, 1)),
        ((1 << 49) - 1, (1 << 54) - 1, (1 << 43, 8, 1)),
        ((1 << 59) - 1, (1 << 64) - 1, (1 << 53, 8, 1)),
    ],
)
def test_scrypt_parameters_at_the_edges_are_libsodium_s(
    opslimit: int, memlimit: int, params: tuple[int, int, int]
) -> None:
    assert signing._scrypt_params(opslimit, memlimit) == params


# --- refusals, whole ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("at", "value", "message"),
    [
        (0, b"XY", "k.key uses signature algorithm b'XY', not Ed25519 ('Ed')"),
        (4, b"SH", "k.key uses checksum algorithm b'SH', not BLAKE2b ('B2')"),
        (2, b"Ar", "k.key uses unknown key derivation b'Ar'"),
    ],
)
def test_a_secret_key_of_another_kind_says_how_to_make_one(
    at: int, value: bytes, message: str
) -> None:
    blob = bytearray(base64.b64decode(signing._secret_key_text(SECRET, None, *CHEAP).split()[-1]))
    blob[at : at + 2] = value
    error = secret_refused(f"untrusted comment: k\n{b64(bytes(blob))}\n")
    assert (error.message, error.fix) == (message, FIX_KEYGEN)


@pytest.mark.parametrize("text", ["", "one\ntwo\nthree", "untrusted comment: only"])
def test_text_that_is_no_key_line_is_not_a_secret_key(text: str) -> None:
    error = secret_refused(text)
    assert (error.message, error.fix) == (
        "k.key is not a minisign secret key (want an untrusted comment line and base64 of 158 "
        "bytes)",
        f"pass the .key file itself, or only its second line; {FIX_KEYGEN}",
    )


def test_halves_that_do_not_belong_together_say_to_restore_the_key() -> None:
    keynum = bytearray(_keynum())
    keynum[8 + 32] ^= 1  # a public-key byte; the checksum is left all zero (unchecked)
    keynum[-32:] = bytes(32)
    text = f"untrusted comment: k\n{b64(b'Ed' + bytes(2) + b'B2' + bytes(48) + bytes(keynum))}\n"
    error = secret_refused(text)
    assert (error.message, error.fix) == (
        "k.key is corrupt: its private and public halves do not belong together",
        "restore the key file from its backup",
    )


def test_a_stray_character_in_base64_is_refused_not_skipped() -> None:
    """Standard base64 with validation: a character outside the alphabet is an error (as in
    minisign), not silently dropped."""
    lines = sign(DATA, SECRET, trusted_comment="c").split("\n")
    lines[1] = lines[1][:10] + "*" + lines[1][10:]
    with pytest.raises(IntegrityError) as caught:
        verify(DATA, "\n".join(lines), PUBLIC, source="m.minisig")
    assert caught.value.message == (
        "m.minisig is not a minisign signature file: line 2 is not base64 of 74 bytes"
    )
    line = PUBLIC.base64
    with pytest.raises(ConfigError) as refused:
        load_public_key(line[:10] + "*" + line[10:])
    assert refused.value.message.startswith("the public key is not a minisign public key")


def test_refusals_without_a_file_name_say_the_signature() -> None:
    with pytest.raises(IntegrityError) as caught:
        verify(DATA, sign(DATA, OTHER, trusted_comment="c"), PUBLIC)
    assert caught.value.message == (
        f"the signature was made by key {OTHER.key_id_hex}, but the public key is "
        f"{PUBLIC.key_id_hex}"
    )
    with pytest.raises(IntegrityError) as caught:
        verify(DATA + b"!", sign(DATA, SECRET, trusted_comment="c"), PUBLIC)
    assert caught.value.message == (
        "the signature does not match the data: the signed bytes were changed or replaced"
    )
    assert (caught.value.component, caught.value.file) == ("signing", None)


def test_changed_data_names_the_signature_file_and_component() -> None:
    with pytest.raises(IntegrityError) as caught:
        verify(DATA + b"!", sign(DATA, SECRET, trusted_comment="c"), PUBLIC, source="m.minisig")
    assert (caught.value.component, caught.value.file) == ("signing", "m.minisig")


def test_a_public_key_string_that_is_neither_key_nor_file_is_refused_as_a_key(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_public_key(str(tmp_path / "absent.pub"))
    assert (caught.value.message, caught.value.file) == (
        "the public key is not a minisign public key (want base64 of 'Ed' + 8-byte key id + "
        "32-byte key, after an untrusted comment)",
        None,
    )


def test_an_unreadable_key_file_names_the_file_and_component(tmp_path: Path) -> None:
    missing = tmp_path / "missing.key"
    with pytest.raises(ConfigError) as caught:
        load_secret_key(missing)
    assert (caught.value.message, caught.value.file, caught.value.component) == (
        f"cannot read the secret key file {missing}: No such file or directory",
        str(missing),
        "signing",
    )


def test_a_key_file_is_read_as_utf8_whatever_the_locale(tmp_path: Path) -> None:
    """A key file whose comment is not ASCII loads under an ASCII locale too (the C locale
    without Python's UTF-8 mode, as some minimal containers run)."""
    if sys.flags.utf8_mode:
        pytest.skip("Python runs in UTF-8 mode here: the locale's encoding is never used")
    path = tmp_path / "k.pub"
    path.write_text(PUBLIC.file_text().replace("minisign public key", "clé publique"), "utf-8")
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        assert locale.getencoding() == "ANSI_X3.4-1968"  # ASCII: the test can fail
        assert load_public_key(path).key_id == PUBLIC.key_id
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


# --- where keys come from, and writing them ----------------------------------------------------


def test_a_key_file_loads_with_its_password_and_names_itself(tmp_path: Path) -> None:
    locked = tmp_path / "locked.key"
    locked.write_text(encrypted(b"pw", CHEAP, CHEAP_PARAMS))
    assert load_secret_key(locked, password="pw").key_id == SECRET.key_id
    garbage = tmp_path / "garbage.key"
    garbage.write_text("garbage")
    with pytest.raises(ConfigError) as caught:
        load_secret_key(garbage)
    assert caught.value.file == str(garbage)
    assert caught.value.message.startswith(f"{garbage} is not a minisign secret key (")


def test_every_source_of_the_signing_key_passes_the_password(tmp_path: Path) -> None:
    text = encrypted(b"pw", CHEAP, CHEAP_PARAMS)
    locked = tmp_path / "locked.key"
    locked.write_text(text)
    password = {ENV_KEY_PASSWORD: "pw"}
    for found in (
        load_signing_key(locked, password),
        load_signing_key(None, {ENV_KEY: text, **password}),
        load_signing_key(None, {ENV_KEY_FILE: str(locked), **password}),
    ):
        assert found is not None and found.key_id == SECRET.key_id


def test_a_key_file_named_by_the_environment_is_named_in_its_refusals(tmp_path: Path) -> None:
    missing = tmp_path / "missing.key"
    with pytest.raises(ConfigError) as caught:
        load_signing_key(None, {ENV_KEY_FILE: f" {missing} "})
    assert (caught.value.message, caught.value.file) == (
        f"cannot read the secret key file {missing}: No such file or directory",
        str(missing),
    )
    garbage = tmp_path / "garbage.key"
    garbage.write_text("garbage")
    with pytest.raises(ConfigError) as caught:
        load_signing_key(None, {ENV_KEY_FILE: str(garbage)})
    assert caught.value.file == str(garbage)
    assert caught.value.message.startswith(f"{garbage} is not a minisign secret key (")


def test_a_public_key_file_is_replaced_when_written_again(tmp_path: Path) -> None:
    path = tmp_path / "k.pub"
    write_public_key(path, PUBLIC)
    write_public_key(path, OTHER.public_key())
    assert load_public_key(path).key_id == OTHER.key_id
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.pub"]


def test_a_new_key_pair_is_random_and_belongs_together() -> None:
    secret, public = generate_keypair()
    again, _ = generate_keypair()
    assert (len(secret.key_id), len(secret.private_bytes)) == (8, 32)
    assert (public.key_id, public.public_bytes) == (secret.key_id, secret.public_key().public_bytes)
    assert (again.key_id, again.private_bytes) != (secret.key_id, secret.private_bytes)
    assert verify(DATA, sign(DATA, secret, trusted_comment="c"), public) == "c"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: SecretKey(bytes(7), bytes(32)), "key id must be 8 bytes, got 7"),
        (lambda: SecretKey(bytes(8), bytes(31)), "private key must be 32 bytes, got 31"),
        (lambda: PublicKey(bytes(9), bytes(32)), "key id must be 8 bytes, got 9"),
        (lambda: PublicKey(bytes(8), bytes(33)), "public key must be 32 bytes, got 33"),
    ],
)
def test_a_key_of_the_wrong_length_is_a_programming_error_that_says_which(
    make: object, message: str
) -> None:
    assert callable(make)
    with pytest.raises(ValueError) as caught:
        make()
    assert str(caught.value) == message
