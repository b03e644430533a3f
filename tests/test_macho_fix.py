"""Install names fixed, then signed: synthetic dylibs with the faults the real wheels have
(absolute CI install names and rpaths, an id no file has, a fat file), rewritten by the stage's
own function and checked by apple-codesign's verifier and by the dyld-like tree check."""

from __future__ import annotations

import datetime
from dataclasses import replace
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from ortbundle._core.errors import BinaryError, ConfigError
from ortbundle.config.project import CodeSigner, code_signer
from ortbundle.stage.binaries import inspect
from ortbundle.stage.binaries.install_names import (
    fix_dylib,
    resolve,
    signature_problems,
    tree_problems,
)
from tests.helpers.macho import Dylib, fat_bytes, slice_bytes, write_dylib

apple_platform = pytest.importorskip("apple_platform")

SYSTEM = "/usr/lib/libSystem.B.dylib"
CI = "/Users/runner/work/mlx/build"


def _mlx_tree(root: Path) -> Path:
    """The MLX plugin's shape: absolute CI ids and rpaths, one fat file."""
    tree = root / "runtimes" / "mlx"
    write_dylib(
        tree / "libonnxruntime_mlx_ep.dylib",
        install_id=f"{CI}/libonnxruntime_mlx_ep.dylib",
        needed=(SYSTEM, f"{CI}/libmlxc.dylib", "@rpath/libmlx.dylib"),
        rpaths=(CI, "@loader_path/../lib"),
        exports=("CreateEpFactories", "ReleaseEpFactory"),
    )
    write_dylib(
        tree / "libmlxc.dylib",
        install_id=f"{CI}/libmlxc.dylib",
        needed=(SYSTEM, "@rpath/libmlx.dylib"),
        rpaths=(CI,),
    )
    arm = slice_bytes(Dylib(install_id=f"{CI}/libmlx.dylib", rpaths=(CI,)))
    intel = slice_bytes(Dylib(install_id=f"{CI}/libmlx.dylib", arch="x86_64"))
    (tree / "libmlx.dylib").write_bytes(fat_bytes(intel, arm))
    return tree


def test_the_raw_tree_is_refused_for_every_fault(tmp_path: Path) -> None:
    problems = tree_problems(_mlx_tree(tmp_path))
    joined = "\n".join(problems)
    assert f"libmlxc.dylib: rpath {CI} is not relative to the file (@loader_path)" in problems
    assert "libmlx.dylib: architectures x86_64, arm64 (only arm64 ships)" in problems
    assert (
        f"libonnxruntime_mlx_ep.dylib: needs {CI}/libmlxc.dylib, neither @rpath nor the "
        "system's" in problems
    )
    assert "libmlxc.dylib: no code signature" in problems
    assert f"libmlxc.dylib: its id {CI}/libmlxc.dylib names no file beside it" in problems
    assert "libonnxruntime_mlx_ep.dylib: @rpath/libmlx.dylib resolves to no file" in joined


def test_fixed_and_signed_the_tree_loads_as_dyld_would(tmp_path: Path) -> None:
    tree = _mlx_tree(tmp_path)
    for path in sorted(tree.iterdir()):
        info = fix_dylib(path, install_id=path.name, label=path.name, signer=CodeSigner())
        assert info.soname == f"@rpath/{path.name}"
        assert info.runpath == ("@loader_path",)
        assert info.architectures == ("arm64",)
        assert info.signed
    ep = inspect(tree / "libonnxruntime_mlx_ep.dylib")
    assert ep.needed == (SYSTEM, "@rpath/libmlxc.dylib", "@rpath/libmlx.dylib")
    assert ep.exports == ("CreateEpFactories", "ReleaseEpFactory")
    assert tree_problems(tree) == []
    assert resolve("@rpath/libmlx.dylib", tree / "libmlxc.dylib", ep.runpath) == (
        tree / "libmlx.dylib"
    )
    # two runs sign to the same bytes: an ad-hoc signature has no time in it
    again = _mlx_tree(tmp_path / "again")
    for path in sorted(again.iterdir()):
        fix_dylib(path, install_id=path.name, label=path.name, signer=CodeSigner())
        assert path.read_bytes() == (tree / path.name).read_bytes()


def test_a_flipped_byte_breaks_the_signature(tmp_path: Path) -> None:
    path = write_dylib(tmp_path / "libx.dylib", install_id=f"{CI}/libx.dylib")
    fix_dylib(path, install_id="libx.dylib", label="libx.dylib", signer=CodeSigner())
    assert signature_problems(path) == []
    data = bytearray(path.read_bytes())
    data[0x3000] ^= 1  # inside __text, which the code directory hashes
    path.write_bytes(bytes(data))
    assert any("code digest mismatch" in p for p in signature_problems(path))
    assert any("code digest mismatch" in p for p in tree_problems(tmp_path))


def test_the_signer_runs_outside_the_build_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """apple-codesign holds ~3 copies of what it signs: in the build process, beside the other
    targets' staging, that took a cold build past 200 MiB. It signs in a child process, so a
    signer that refuses to run here changes nothing."""

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("signed inside the build process")

    monkeypatch.setattr(apple_platform, "sign", refused)
    path = write_dylib(tmp_path / "libx.dylib", install_id=f"{CI}/libx.dylib")
    fix_dylib(path, install_id="libx.dylib", label="libx.dylib", signer=CodeSigner())
    assert signature_problems(path) == []


def test_an_id_without_its_file_and_executable_path_are_found(tmp_path: Path) -> None:
    path = write_dylib(tmp_path / "libonnxruntime.1.32.0.dylib", install_id="@x")
    fix_dylib(path, install_id="libonnxruntime.1.dylib", label=path.name, signer=CodeSigner())
    assert tree_problems(tmp_path) == [
        f"{path.name}: its id @rpath/libonnxruntime.1.dylib names no file beside it"
    ]
    (tmp_path / "libonnxruntime.1.dylib").symlink_to(path.name)
    assert tree_problems(tmp_path) == []
    assert resolve("@executable_path/libx.dylib", path, ["@loader_path"]) is None


def _identity(tmp_path: Path) -> Path:
    """A self-signed code-signing certificate in a .p12, as a Developer ID one is exported."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Developer ID Application: Test")])
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=3650))
        .sign(key, hashes.SHA256())
    )
    # the legacy encryption Keychain Access exports, which apple-codesign reads
    legacy = (
        serialization.PrivateFormat.PKCS12.encryption_builder()
        .kdf_rounds(2048)
        .key_cert_algorithm(pkcs12.PBES.PBESv1SHA1And3KeyTripleDESCBC)
        .hmac_hash(hashes.SHA1())
        .build(b"secret")
    )
    p12 = pkcs12.serialize_key_and_certificates(b"test", key, cert, None, legacy)
    path = tmp_path / "identity.p12"
    path.write_bytes(p12)
    return path


def test_a_developer_id_identity_from_the_environment_signs_with_cms(tmp_path: Path) -> None:
    p12 = _identity(tmp_path)
    signer = code_signer(
        {"ORTBUNDLE_CODESIGN_P12": str(p12), "ORTBUNDLE_CODESIGN_P12_PASSWORD": "secret"}
    )
    assert signer.p12 == p12 and signer.identity != "ad-hoc"
    path = write_dylib(tmp_path / "libx.dylib", install_id="@rpath/libx.dylib")
    fix_dylib(path, install_id="libx.dylib", label="libx.dylib", signer=signer)
    assert apple_platform.reading.has_cms_signature(apple_platform.read_signature(path))
    bad = CodeSigner(p12, "wrong", signer.identity)
    with pytest.raises(BinaryError, match="could not be signed with the identity in identity.p12"):
        fix_dylib(path, install_id="libx.dylib", label="libx.dylib", signer=bad)


def test_an_unreadable_identity_is_refused_by_name(tmp_path: Path) -> None:
    assert code_signer({}) == CodeSigner()
    with pytest.raises(ConfigError, match="ORTBUNDLE_CODESIGN_P12 names .*missing.p12"):
        code_signer({"ORTBUNDLE_CODESIGN_P12": str(tmp_path / "missing.p12")})


def test_a_dylib_that_cannot_be_rewritten_is_refused_with_the_fix(tmp_path: Path) -> None:
    """A dependency whose install name is not text (a malformed or hostile file): one
    BinaryError naming the file, never an exception from the reading or the decoding."""
    path = tmp_path / "libx.dylib"
    data = slice_bytes(Dylib(install_id="@rpath/libx.dylib", needed=(f"{CI}/libQ.dylib",)))
    path.write_bytes(data.replace(b"libQ", b"lib\xce"))
    with pytest.raises(BinaryError, match="libx.dylib cannot be rewritten") as caught:
        fix_dylib(path, install_id="libx.dylib", label="libx.dylib", signer=CodeSigner())
    assert "@rpath install names" in (caught.value.fix or "")


def test_a_dylib_without_room_for_its_new_load_commands_is_refused(tmp_path: Path) -> None:
    """The rewrite edits the load commands in place, as install_name_tool does: an rpath added
    to a dylib linked without header padding has nowhere to go, and the fix says how to link."""
    spec = Dylib(install_id="@rpath/libx.dylib", needed=(SYSTEM, "libbare.dylib"))
    used = 32 + int.from_bytes(slice_bytes(spec)[20:24], "little")  # header + sizeofcmds
    path = tmp_path / "libx.dylib"
    path.write_bytes(slice_bytes(replace(spec, text_at=(used + 15) // 16 * 16)))
    with pytest.raises(BinaryError, match=r"need \d+ bytes, the header has room for \d+") as caught:
        fix_dylib(path, install_id="libx.dylib", label="libx.dylib", signer=CodeSigner())
    assert "-headerpad_max_install_names" in (caught.value.fix or "")
    roomy = write_dylib(tmp_path / "roomy" / "libx.dylib", spec)  # the same, with ld64's pad
    fixed = fix_dylib(roomy, install_id="libx.dylib", label="libx.dylib", signer=CodeSigner())
    assert fixed.needed == (SYSTEM, "@rpath/libbare.dylib") and fixed.runpath == ("@loader_path",)
