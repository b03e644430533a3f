"""A wheel whose DLLs were Authenticode-signed after its RECORD was written (the vendor's
onnxruntime-ep-openvino 1.8.1 for Windows: 17 of 24 members) is read, not refused: a member
that is its recorded file plus a signature ships as signed. Anything else that disagrees with
RECORD is still refused. The signatures are osslsigncode's, and `osslsigncode
remove-signature` is the independent reader of what the unsigned file was."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pefile
import pytest

from ortbundle._core.errors import IntegrityError
from ortbundle.fetch.archives import ZipArchive
from ortbundle.fetch.pe_unsigned import unsigned_sha256s
from tests.helpers.authenticode import Identities, make_identities, skip_without_signing_tools
from tests.helpers.pe import make_pe
from tests.helpers.wheels import make_wheel

pytestmark = pytest.mark.usefixtures("signing_tools")


@pytest.fixture
def signing_tools() -> None:
    skip_without_signing_tools()


@pytest.fixture(scope="module")
def ids(tmp_path_factory: pytest.TempPathFactory) -> Identities:
    skip_without_signing_tools()
    return make_identities(tmp_path_factory.mktemp("ids"))


def _signed(ids: Identities, unsigned: bytes, tmp: Path) -> bytes:
    (tmp / "u.dll").write_bytes(unsigned)
    subprocess.run(
        ["osslsigncode", "sign", "-certs", str(ids.cert), "-key", str(ids.key), "-h", "sha256",
         "-in", str(tmp / "u.dll"), "-out", str(tmp / "s.dll")],
        check=True, capture_output=True,
    )  # fmt: skip
    return (tmp / "s.dll").read_bytes()


def _wheel(tmp: Path, member: bytes, recorded: bytes) -> Path:
    return make_wheel(
        tmp / "vendor-1.0-py3-none-win_amd64.whl",
        "vendor",
        "1.0",
        {"vendor/a.dll": member},
        record_overrides={"vendor/a.dll": recorded},
    )


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_unsigned_file_is_what_osslsigncode_removes_the_signature_to(
    ids: Identities, tmp_path: Path
) -> None:
    signed = _signed(ids, make_pe(exports=("f",), payload=b"x" * 3001), tmp_path)
    (tmp_path / "s.dll").write_bytes(signed)
    subprocess.run(
        ["osslsigncode", "remove-signature", "-in", str(tmp_path / "s.dll"),
         "-out", str(tmp_path / "r.dll")],
        check=True, capture_output=True,
    )  # fmt: skip
    removed = (tmp_path / "r.dll").read_bytes()
    assert len(removed) < len(signed)
    assert _sha(removed) in unsigned_sha256s(tmp_path / "s.dll")
    # a file with no signature has no earlier form to give
    assert unsigned_sha256s(tmp_path / "r.dll") == ()


def _checksummed(data: bytes) -> bytes:
    """The image with its PE checksum filled in, as MSVC's linker writes it with /RELEASE."""
    image = pefile.PE(data=data)
    image.OPTIONAL_HEADER.CheckSum = image.generate_checksum()
    return bytes(image.write())


@pytest.mark.parametrize("linked", ["checksum written", "checksum zero"])
def test_a_member_signed_after_record_is_read_and_ships_signed(
    ids: Identities, tmp_path: Path, linked: str
) -> None:
    unsigned = make_pe(exports=("f",), payload=b"y" * 2001)
    if linked == "checksum written":
        unsigned = _checksummed(unsigned)
        assert pefile.PE(data=unsigned).OPTIONAL_HEADER.CheckSum != 0
    signed = _signed(ids, unsigned, tmp_path)
    wheel = _wheel(tmp_path, signed, unsigned)
    with ZipArchive(wheel, label="vendor wheel", component="vendor") as archive:
        got = archive.extract("vendor/a.dll", tmp_path / "out.dll")
        assert archive.signed_after_record == ["vendor/a.dll"]
    assert got.sha256 == _sha(signed)  # what ships, and what the manifest records
    assert (tmp_path / "out.dll").read_bytes() == signed


def test_a_signed_member_changed_after_signing_is_refused(ids: Identities, tmp_path: Path) -> None:
    unsigned = make_pe(exports=("f",), payload=b"z" * 2001)
    signed = bytearray(_signed(ids, unsigned, tmp_path))
    at = signed.index(b"z" * 64)
    signed[at] ^= 0x01  # one byte of the code the signature covers
    wheel = _wheel(tmp_path, bytes(signed), unsigned)
    with (
        ZipArchive(wheel, label="vendor wheel", component="vendor") as archive,
        pytest.raises(IntegrityError, match="its RECORD says"),
    ):
        archive.extract("vendor/a.dll", tmp_path / "out.dll")
    assert not (tmp_path / "out.dll").exists()


def test_bytes_appended_without_a_certificate_table_are_refused(
    ids: Identities, tmp_path: Path
) -> None:
    unsigned = make_pe(exports=("f",), payload=b"w" * 2001)
    wheel = _wheel(tmp_path, unsigned + b"\0" * 4096, unsigned)
    with (
        ZipArchive(wheel, label="vendor wheel", component="vendor") as archive,
        pytest.raises(IntegrityError, match="its RECORD says"),
    ):
        archive.extract("vendor/a.dll", tmp_path / "out.dll")
