"""Authenticode-signed installers, checked by verifiers we did not write.

A test CA, a code-signing certificate, an expired one, an unrelated CA and a timestamp
authority are made with openssl (tests/helpers/authenticode.py); the TSA answers on loopback.
The demo product's installer is built by the real makensis with the identity in the
environment; `osslsigncode verify` and signify must both accept it, and both refuse it after
a flipped byte, against the wrong CA, and when signed by an expired certificate with no
timestamp. The uninstaller inside the installer (7z unpacks it) is signed too; the staged DLLs
inside it are the staged bytes, a vendor's signature intact.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ortbundle._core.errors import ConfigError, PackagingError
from ortbundle._core.progress import Reporter
from ortbundle.channels import PackageInput
from ortbundle.channels.authenticode import UNSIGNED_NOTE, authenticode_identity, check_signed
from ortbundle.channels.nsis import NsisChannel
from ortbundle.channels.step import generate_all, package_signers
from ortbundle.licensing.attribution import ShippedFile
from ortbundle.licensing.file_findings import SIGNATURE, ShippedEvidence, findings
from ortbundle.pipeline.build import build
from ortbundle.stage.binaries.authenticode import BROKEN, UNSIGNED, VALID, read_signature
from ortbundle.stage.binaries.pe import read_version_info
from ortbundle.stage.file_facts import (
    FileEvidence,
    evidence_from_json,
    evidence_to_json,
    pe_evidence,
)
from ortbundle.tools.smoke.installs import (
    run_setup,
    run_uninstaller,
    tree_digests,
    windows_install_dir,
)
from tests.helpers.authenticode import (
    PASSWORD,
    Identities,
    make_identities,
    running_tsa,
    skip_without_signing_tools,
)
from tests.helpers.packages import SETTINGS, make_package_input
from tests.helpers.pe import make_pe
from tests.helpers.project import FakeProject
from tests.helpers.windows import own_prefix

pytestmark = pytest.mark.tools

VENDOR_DLL = "runtimes/openvino/openvino.dll"


@pytest.fixture(scope="module")
def ids(tmp_path_factory: pytest.TempPathFactory) -> Identities:
    skip_without_signing_tools()
    if shutil.which("makensis") is None or shutil.which("7z") is None:
        pytest.skip("needs nsis and 7zip (Debian/Ubuntu: apt-get install nsis 7zip)")
    return make_identities(tmp_path_factory.mktemp("identities"))


@pytest.fixture(scope="module")
def tsa(ids: Identities) -> Iterator[str]:
    with running_tsa(ids) as url:
        yield url


def _environ(ids: Identities, tsa: str) -> dict[str, str]:
    return {
        "ORTBUNDLE_AUTHENTICODE_PFX": str(ids.pfx),
        "ORTBUNDLE_AUTHENTICODE_PASSWORD": PASSWORD,
        "ORTBUNDLE_TIMESTAMP_URL": tsa,
    }


def _sign(ids: Identities, path: Path, out: Path, *, cert: Path, key: Path, tsa: str = "") -> Path:
    """osslsigncode by hand: a vendor's signature, or one made with the expired certificate."""
    command = ["osslsigncode", "sign", "-certs", str(cert), "-key", str(key), "-h", "sha256"]
    command += ["-ts", tsa] if tsa else []
    subprocess.run([*command, "-in", str(path), "-out", str(out)], check=True, capture_output=True)
    return out


def _vendor_signed(package: PackageInput, ids: Identities, tsa: str) -> PackageInput:
    """The stage with one DLL signed by its "vendor" (the test signer), listed as staged."""
    dll = package.stage / VENDOR_DLL
    signed = _sign(ids, dll, dll.with_suffix(".signed"), cert=ids.cert, key=ids.key, tsa=tsa)
    signed.replace(dll)
    data = dll.read_bytes()
    entry = ShippedFile(VENDOR_DLL, len(data), hashlib.sha256(data).hexdigest(), 0o644)
    files = sorted(
        [*(f for f in package.files if f.path != VENDOR_DLL), entry], key=lambda f: f.path
    )
    return replace(package, files=tuple(files))


@pytest.fixture(scope="module")
def built(
    ids: Identities, tsa: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[PackageInput, Path]]:
    """The demo product's installer, built with the test identity in the environment."""
    base = tmp_path_factory.mktemp("signed") / "dist" / "demo" / "1.0.0"
    package = _vendor_signed(make_package_input(base, "windows-x86_64"), ids, tsa)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in _environ(ids, tsa).items():
            patch.setenv(name, value)
        out = NsisChannel().generate(package, base / "packaging" / "nsis")
    (exe,) = (p for p in out.files if p.suffix == ".exe")
    assert out.signers[exe.name]["subject"] == "CN=Demo Org Code Signing, O=Demo Org, C=DE"
    yield package, exe


def _osslsigncode(exe: Path, ca: Path, tsa_ca: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["osslsigncode", "verify", "-CAfile", str(ca), "-TSA-CAfile", str(tsa_ca), "-in", str(exe)],
        capture_output=True,
        text=True,
        check=False,
    )


def _both(exe: Path, ids: Identities, *, ca: Path | None = None) -> tuple[bool, str]:
    """(osslsigncode's verdict, signify's status), which the tests want to agree."""
    ca = ca or ids.ca
    ossl = _osslsigncode(exe, ca, ids.tsa_ca)
    ok = ossl.returncode == 0 and "Signature verification: ok" in ossl.stdout
    return ok, read_signature(exe, roots=[ca, ids.tsa_ca]).status


def test_the_signed_installer_passes_osslsigncode_and_signify(
    built: tuple[PackageInput, Path], ids: Identities
) -> None:
    _, exe = built
    assert _both(exe, ids) == (True, VALID)
    signature = read_signature(exe, roots=[ids.ca, ids.tsa_ca])
    assert signature.timestamped
    assert signature.sha256 == _fingerprint(ids.cert)


def _fingerprint(pem: Path) -> str:
    der = subprocess.run(
        ["openssl", "x509", "-in", str(pem), "-outform", "DER"], capture_output=True, check=True
    ).stdout
    return hashlib.sha256(der).hexdigest()


def test_a_flipped_byte_fails_both(
    built: tuple[PackageInput, Path], ids: Identities, tmp_path: Path
) -> None:
    _, exe = built
    data = bytearray(exe.read_bytes())
    data[len(data) // 3] ^= 0x01  # in the compressed payload, which the signature covers
    flipped = tmp_path / "flipped.exe"
    flipped.write_bytes(bytes(data))
    assert _both(flipped, ids) == (False, BROKEN)


def test_the_wrong_ca_fails_both(built: tuple[PackageInput, Path], ids: Identities) -> None:
    _, exe = built
    assert _both(exe, ids, ca=ids.wrong_ca) == (False, BROKEN)


def test_an_expired_certificate_without_timestamp_fails_both(
    built: tuple[PackageInput, Path], ids: Identities, tsa: str, tmp_path: Path
) -> None:
    package, _ = built
    unsigned = package.stage / "runtimes/webgpu/onnxruntime.dll"
    expired = _sign(
        ids, unsigned, tmp_path / "expired.dll", cert=ids.expired_cert, key=ids.expired_key
    )
    assert _both(expired, ids) == (False, BROKEN)
    # the same certificate, the signature timestamped at signing: still expired today, and
    # the timestamp is after the certificate's end, so both refuse it too
    stamped = _sign(
        ids, unsigned, tmp_path / "stamped.dll", cert=ids.expired_cert, key=ids.expired_key, tsa=tsa
    )
    assert _both(stamped, ids) == (False, BROKEN)


def test_the_uninstaller_inside_is_signed_and_the_staged_dlls_are_packed_as_staged(
    built: tuple[PackageInput, Path], ids: Identities, tmp_path: Path
) -> None:
    package, exe = built
    subprocess.run(
        ["7z", "x", "-y", f"-o{tmp_path}", str(exe)], check=True, capture_output=True, text=True
    )
    uninstaller = tmp_path / "uninstall.exe"
    assert uninstaller.is_file(), "no whole uninstaller inside the installer"
    assert _both(uninstaller, ids) == (True, VALID)
    for shipped in package.files:
        packed = (tmp_path / shipped.path).read_bytes()
        assert hashlib.sha256(packed).hexdigest() == shipped.sha256, shipped.path
        assert (package.stage / shipped.path).read_bytes() == packed, shipped.path
    vendor = read_signature(tmp_path / VENDOR_DLL, roots=[ids.ca, ids.tsa_ca])
    assert vendor.status == VALID  # the vendor's own signature, untouched
    assert read_signature(tmp_path / "runtimes/webgpu/dxil.dll").status == UNSIGNED


def test_without_an_identity_the_installer_is_unsigned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ids: Identities
) -> None:
    for name in _environ(ids, "http://127.0.0.1/"):
        monkeypatch.delenv(name, raising=False)
    base = tmp_path / "dist" / "demo" / "1.0.0"
    out = NsisChannel().generate(make_package_input(base, "windows-x86_64"), base / "nsis")
    (exe,) = (p for p in out.files if p.suffix == ".exe")
    assert read_signature(exe).status == UNSIGNED
    assert out.signers == {}
    assert "unsigned" in out.notes[0]


def test_an_identity_whose_file_is_missing_is_refused_naming_the_channel_and_variable(
    tmp_path: Path,
) -> None:
    environ = {"ORTBUNDLE_AUTHENTICODE_PFX": str(tmp_path / "gone.p12")}
    with pytest.raises(ConfigError) as refused:
        authenticode_identity(environ)
    text = str(refused.value)
    assert "nsis" in text
    assert "ORTBUNDLE_AUTHENTICODE_PFX" in text
    assert "gone.p12" in text


def test_a_sign_command_template_is_run_with_the_file(
    ids: Identities, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signing service's command: here osslsigncode by hand, through a tiny script."""
    script = tmp_path / "sign.sh"
    script.write_text(
        "#!/bin/sh\nset -e\n"
        f'osslsigncode sign -certs "{ids.cert}" -key "{ids.key}" -h sha256 -in "$1" -out "$1.s"\n'
        'mv "$1.s" "$1"\n'
    )
    script.chmod(0o755)
    for name in _environ(ids, ""):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ORTBUNDLE_SIGN_COMMAND", f"{script} {{file}}")
    base = tmp_path / "dist" / "demo" / "1.0.0"
    out = NsisChannel().generate(make_package_input(base, "windows-x86_64"), base / "nsis")
    (exe,) = (p for p in out.files if p.suffix == ".exe")
    assert read_signature(exe, roots=[ids.ca]).status == VALID
    assert "not timestamped" in out.notes[0]


# --- vendor signatures as evidence ------------------------------------------------------------

INTEL = {"CompanyName": "Intel Corporation", "FileVersion": "2025.2.0", "ProductName": "OpenVINO"}


def _evidence(path: Path, ids: Identities) -> FileEvidence:
    """The file's evidence as the build reads it, its signature judged against the test roots
    (the build judges against Microsoft's root program, where the test CA is not)."""
    evidence = pe_evidence(path, path.name, read_version_info(path, path.name))
    return replace(evidence, signature=read_signature(path, roots=[ids.ca, ids.tsa_ca]))


def _against(path: Path, evidence: FileEvidence) -> tuple[str, ...]:
    shipped = ShippedEvidence(f"runtimes/openvino/{path.name}", "0" * 64, evidence)
    found = findings(
        "windows-x86_64",
        "openvino",
        "Apache-2.0",
        [shipped],
        licensor_lines=["Copyright (C) 2018-2025 Intel Corporation"],
        text_paths=[],
        unread_claim=True,
    )
    return tuple(f.says for f in found if f.kind == SIGNATURE)


def test_a_dll_naming_one_company_and_signed_by_another_is_review(
    ids: Identities, tsa: str, tmp_path: Path
) -> None:
    dll = tmp_path / "openvino.dll"
    dll.write_bytes(make_pe(imports=("KERNEL32.dll",), version=INTEL))
    signed = _sign(ids, dll, tmp_path / "signed.dll", cert=ids.cert, key=ids.key, tsa=tsa)
    evidence = _evidence(signed, ids)
    assert evidence.signature is not None and evidence.signature.status == VALID
    (says,) = _against(signed, evidence)
    assert "CompanyName 'Intel Corporation'" in says
    assert "signed by CN=Demo Org Code Signing, O=Demo Org, C=DE" in says
    assert "not by Intel Corporation" in says
    # the same DLL naming the signer as its maker agrees with its signature
    own = tmp_path / "own.dll"
    own.write_bytes(
        make_pe(imports=("KERNEL32.dll",), version={**INTEL, "CompanyName": "Demo Org"})
    )
    own_signed = _sign(ids, own, tmp_path / "own-signed.dll", cert=ids.cert, key=ids.key, tsa=tsa)
    assert _against(own_signed, _evidence(own_signed, ids)) == ()


def test_an_unsigned_or_broken_vendor_dll_is_review(
    ids: Identities, tsa: str, tmp_path: Path
) -> None:
    dll = tmp_path / "openvino.dll"
    dll.write_bytes(make_pe(imports=("KERNEL32.dll",), version=INTEL))
    (says,) = _against(dll, _evidence(dll, ids))
    assert says.endswith(
        "says CompanyName 'Intel Corporation' (PE version resource) but carries no Authenticode signature"
    )
    signed = _sign(ids, dll, tmp_path / "signed.dll", cert=ids.cert, key=ids.key, tsa=tsa)
    data = bytearray(signed.read_bytes())
    data[0x100] ^= 0x01  # in the headers the digest covers
    broken = tmp_path / "broken.dll"
    broken.write_bytes(bytes(data))
    (says,) = _against(broken, _evidence(broken, ids))
    assert "its Authenticode signature is broken: invalid_digest" in says
    # a DLL that names no maker is not judged by its signature
    anonymous = tmp_path / "anonymous.dll"
    anonymous.write_bytes(make_pe(imports=("KERNEL32.dll",)))
    assert _against(anonymous, _evidence(anonymous, ids)) == ()


def test_the_signature_is_kept_with_the_evidence_and_read_as_the_build_reads_it(
    ids: Identities, tsa: str, tmp_path: Path
) -> None:
    dll = tmp_path / "openvino.dll"
    dll.write_bytes(make_pe(imports=("KERNEL32.dll",), version=INTEL))
    signed = _sign(ids, dll, tmp_path / "signed.dll", cert=ids.cert, key=ids.key, tsa=tsa)
    # the build's own reading: Microsoft's root program, which does not hold the test CA
    read = pe_evidence(signed, "signed.dll", read_version_info(signed, "signed.dll"))
    assert read.signature is not None and read.signature.status == BROKEN
    assert read.signature.subject == "CN=Demo Org Code Signing, O=Demo Org, C=DE"
    assert read.signature.sha256 == _fingerprint(ids.cert)
    assert read.signed.startswith("Authenticode: broken: ")
    assert evidence_from_json(json.loads(json.dumps(evidence_to_json(read)))) == read
    assert pe_evidence(dll, "openvino.dll", None).signed == "Authenticode: unsigned"


# --- the build: the signer recorded, the note said once, a broken identity refused ----------


def test_the_build_records_the_installers_signer_in_the_manifest_and_provenance(
    fake: FakeProject,
    reporter: Reporter,
    ids: Identities,
    tsa: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake.write()
    for name, value in _environ(ids, tsa).items():
        monkeypatch.setenv(name, value)
    result = build(fake.project, fake.options(), reporter)
    manifest = json.loads((result.version_dir / "manifest.json").read_text())
    (installer,) = [o for o in manifest["outputs"] if o["path"].endswith("-setup.exe")]
    assert installer["signer"] == {
        "subject": "CN=Demo Org Code Signing, O=Demo Org, C=DE",
        "sha256": _fingerprint(ids.cert),
    }
    assert all("signer" not in o for o in manifest["outputs"] if o is not installer)
    statement = json.loads(
        base64.b64decode(
            json.loads((result.version_dir / "provenance.intoto.json").read_text())["payload"]
        )
    )
    (subject,) = [s for s in statement["subject"] if s["name"] == installer["path"]]
    assert subject["annotations"]["signer"] == installer["signer"]
    assert not any(UNSIGNED_NOTE in w for w in result.warnings)
    exe = result.version_dir / installer["path"]
    assert _both(exe, ids) == (True, VALID)


def test_a_development_build_without_identity_says_once_that_the_installers_are_unsigned(
    fake: FakeProject, reporter: Reporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (
        "ORTBUNDLE_AUTHENTICODE_PFX",
        "ORTBUNDLE_SIGN_COMMAND",
        "ORTBUNDLE_AUTHENTICODE_PKCS11_MODULE",
    ):
        monkeypatch.delenv(name, raising=False)
    fake.write()
    result = build(fake.project, fake.options(), reporter)
    assert sum(UNSIGNED_NOTE in w for w in result.warnings) == 1  # one line says it, once
    manifest = json.loads((result.version_dir / "manifest.json").read_text())
    assert all("signer" not in o for o in manifest["outputs"])


def test_a_release_whose_identity_file_is_missing_refuses_naming_the_channel_and_variable(
    fake: FakeProject, reporter: Reporter, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake.write()
    monkeypatch.setenv("ORTBUNDLE_AUTHENTICODE_PFX", str(tmp_path / "missing.p12"))
    with pytest.raises(ConfigError) as refused:
        build(fake.project, fake.options(release=True), reporter)
    text = str(refused.value)
    assert "the nsis channel's Authenticode identity" in text
    assert "ORTBUNDLE_AUTHENTICODE_PFX" in text and "missing.p12" in text
    assert not (fake.root / "dist").exists() or not any((fake.root / "dist").rglob("*.exe"))


def test_a_release_with_an_identity_refuses_an_installer_left_unsigned(
    ids: Identities, tmp_path: Path
) -> None:
    exe = tmp_path / "demo-1.0.0-setup.exe"
    exe.write_bytes(b"MZ")
    check_signed([((exe,), {exe.name: {"subject": "x", "sha256": "y"}})])  # signed: passes
    with pytest.raises(PackagingError, match="is not signed"):
        check_signed([((exe,), {})])
    with pytest.raises(PackagingError, match="produced no installer"):
        check_signed([((tmp_path / "installer.nsi",), {})])


# --- under Wine: the signed installer installs, upgrades and uninstalls ---------------------


@pytest.mark.windows
def test_the_signed_installer_installs_upgrades_and_uninstalls_under_wine(
    ids: Identities, tsa: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in _environ(ids, tsa).items():
        monkeypatch.setenv(name, value)
    exes = []
    for version in ("1.0.0", "1.1.0"):
        base = tmp_path / "dist" / "demo" / version
        package = make_package_input(base, "windows-x86_64", version=version)
        out = NsisChannel().generate(package, base / "packaging" / "nsis")
        (exe,) = (p for p in out.files if p.suffix == ".exe")
        assert _both(exe, ids) == (True, VALID)
        exes.append((exe, package))
    directory = windows_install_dir(SETTINGS.package_name)
    for wine in own_prefix(tmp_path):
        for exe, package in exes:
            result = run_setup(wine, exe)
            assert result.returncode == 0, result.stdout + result.stderr
            installed = tree_digests(wine.host(str(directory)))
            assert {p: d for p, d in installed.items() if p != "uninstall.exe"} == {
                f.path: f.sha256 for f in package.files
            }
        uninstaller = wine.host(str(directory)) / "uninstall.exe"
        assert _both(uninstaller, ids) == (True, VALID)  # the signed one, as installed
        assert run_uninstaller(wine, directory) == 0
        assert tree_digests(wine.host(str(directory))) == {}


def test_both_windows_installers_keep_their_signers_through_the_channel_merge(
    ids: Identities, tsa: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """windows-arm64's installer is packaging/nsis/windows-arm64/…: its signer is recorded
    under that path, as its digest is."""
    for name, value in _environ(ids, tsa).items():
        monkeypatch.setenv(name, value)
    base = tmp_path / "dist" / "demo" / "1.0.0"
    inputs = {t: make_package_input(base, t) for t in ("windows-x86_64", "windows-arm64")}
    (out,) = generate_all(["nsis"], inputs, base / "packaging", workers=1)
    signers = package_signers([out])
    assert sorted(signers) == [
        "packaging/nsis/demo-1.0.0-setup.exe",
        "packaging/nsis/windows-arm64/demo-1.0.0-arm64-setup.exe",
    ]
    for path, signer in signers.items():
        assert signer["sha256"] == _fingerprint(ids.cert)
        assert _both(base / path, ids) == (True, VALID)
    check_signed([(out.files, out.signers)])
