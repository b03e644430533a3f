"""OpenPGP-signed Linux outputs, checked by verifiers we did not write: rpmkeys against a scratch
rpm database, debsig-verify with the policy and keyring the build writes beside the .deb, and
makepkg --verifysource with the key in its user's keyring; a tampered package and another key
are refused. The key comes from the environment like the minisign key's, and one that cannot
be used is refused naming the channels it would sign and the variable to set."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ortbundle._core.errors import ConfigError
from ortbundle._core.progress import Reporter
from ortbundle.channels import ChannelOutput
from ortbundle.channels.arch import ArchChannel
from ortbundle.channels.deb import DebChannel
from ortbundle.channels.openpgp import (
    OpenPgpKey,
    openpgp_key,
    signed_channels,
    unsigned_warning,
)
from ortbundle.channels.rpm import RpmChannel
from ortbundle.channels.step import generate_all, package_signers
from ortbundle.config.project import Project
from ortbundle.evidence.names import MANIFEST_NAME
from ortbundle.pipeline.build import build
from ortbundle.pipeline.release import release
from tests.helpers.linux_packages import make_loadable_package
from tests.helpers.makepkg import Makepkg, unprivileged_makepkg
from tests.helpers.openpgp import TestKey, make_key, need_gpg
from tests.helpers.packages import make_package_input
from tests.helpers.project import FakeProject
from tests.test_channel_deb_rpm import assert_lintian_accepts
from tests.test_release import vouched

VARIABLE = "ORTBUNDLE_OPENPGP_KEY"
TARBALL = "demo-onnxruntime-1.0.0.tar.gz"


@pytest.fixture(scope="module")
def test_key(tmp_path_factory: pytest.TempPathFactory) -> TestKey:
    return make_key(tmp_path_factory.mktemp("key"))


@pytest.fixture(scope="module")
def other_key(tmp_path_factory: pytest.TempPathFactory) -> TestKey:
    return make_key(tmp_path_factory.mktemp("other"), "Someone Else")


@pytest.fixture(scope="module")
def signer(test_key: TestKey) -> OpenPgpKey:
    key = openpgp_key({VARIABLE: str(test_key.secret)}, ("deb", "rpm", "arch"))
    assert key is not None
    return key


@pytest.fixture(scope="module")
def signed(
    signer: OpenPgpKey, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, ChannelOutput]:
    """Each Linux channel's output of one stage, signed with the test key."""
    root = tmp_path_factory.mktemp("signed")
    package = replace(make_loadable_package(root / "in"), openpgp=signer)
    return {
        c.name: c.generate(package, root / c.name)
        for c in (DebChannel(), RpmChannel(), ArchChannel())
    }


def built(output: ChannelOutput, suffix: str) -> Path:
    (found,) = (f for f in output.files if f.name.endswith(suffix))
    return found


def need(tool: str, packages: str) -> None:
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} not installed (Debian: apt-get install {packages})")


def run(*command: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(c) for c in command], capture_output=True, text=True, timeout=120, check=False
    )


def flipped(source: Path, dest: Path, at: int) -> Path:
    data = bytearray(source.read_bytes())
    data[at] ^= 0x01
    dest.write_bytes(bytes(data))
    return dest


# --- the key from the environment ---------------------------------------------------------


def test_no_key_named_signs_nothing_and_the_build_says_once_what_is_unsigned() -> None:
    assert openpgp_key({}, ("deb", "rpm", "arch")) is None
    (line,) = unsigned_warning(("nsis", "deb", "rpm", "arch"))
    assert "the .deb, the .rpm and the Arch source tarball are unsigned" in line
    assert VARIABLE in line
    assert unsigned_warning(("nsis", "flatpak")) == ()


def test_a_named_key_file_that_is_missing_is_refused_naming_the_channels_and_the_variable(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError) as refused:
        openpgp_key({VARIABLE: str(tmp_path / "gone.asc")}, ("nsis", "deb", "rpm"))
    text = str(refused.value) + (refused.value.fix or "")
    assert "the deb and rpm packages cannot be signed" in text
    assert VARIABLE in text
    assert refused.value.component == "packaging:deb"


def test_the_key_is_read_in_a_home_of_its_own(signer: OpenPgpKey, test_key: TestKey) -> None:
    assert signer.fingerprint == test_key.fingerprint
    assert signer.key_id == test_key.fingerprint[-16:]
    assert signer.public_armored.startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")
    assert "PRIVATE" not in signer.public_armored
    assert signed_channels(("arch", "nsis", "deb")) == ("deb", "arch")


def test_a_protected_key_is_unlocked_by_its_passphrase_file_and_refused_without_it(
    tmp_path: Path,
) -> None:
    key = make_key(tmp_path / "key", "Locked Signer", passphrase="s3cret phrase")
    phrase = tmp_path / "phrase"
    phrase.write_text("s3cret phrase\n")
    environ = {VARIABLE: str(key.secret), "ORTBUNDLE_OPENPGP_PASSPHRASE_FILE": str(phrase)}
    unlocked = openpgp_key(environ, ("rpm",))
    assert unlocked is not None and unlocked.passphrase == "s3cret phrase"
    with pytest.raises(ConfigError, match="the rpm package cannot be signed"):
        openpgp_key({VARIABLE: str(key.secret), "ORTBUNDLE_OPENPGP_PASSPHRASE": "wrong"}, ("rpm",))


@pytest.mark.tools
def test_a_protected_key_signs_the_rpm(tmp_path: Path) -> None:
    """nfpm gets the passphrase too (NFPM_PASSPHRASE): a protected key signs, not only gpg's."""
    need("rpmkeys", "rpm")
    key = make_key(tmp_path / "key", "Locked Signer", passphrase="pass")
    found = openpgp_key({VARIABLE: str(key.secret), "ORTBUNDLE_OPENPGP_PASSPHRASE": "pass"}, ())
    package = replace(make_package_input(tmp_path / "in"), openpgp=found)
    rpm = built(RpmChannel().generate(package, tmp_path / "rpm"), ".rpm")
    assert "signatures OK" in _checksig(tmp_path / "db", key.public, rpm).stdout


# --- rpm: rpmkeys --checksig against a scratch database -------------------------------------


def _checksig(db: Path, public: Path, rpm: Path) -> subprocess.CompletedProcess[str]:
    db.mkdir(parents=True, exist_ok=True)
    imported = run("rpmkeys", "--dbpath", db, "--import", public)
    assert imported.returncode == 0, imported.stderr
    return run("rpmkeys", "--dbpath", db, "--checksig", rpm)


@pytest.mark.tools
def test_rpmkeys_accepts_the_rpm_with_the_key_and_refuses_it_with_another(
    signed: dict[str, ChannelOutput], test_key: TestKey, other_key: TestKey, tmp_path: Path
) -> None:
    need("rpmkeys", "rpm")
    rpm = built(signed["rpm"], ".rpm")
    good = _checksig(tmp_path / "good", test_key.public, rpm)
    assert (good.returncode, good.stdout.strip()) == (0, f"{rpm}: digests signatures OK")
    other = _checksig(tmp_path / "other", other_key.public, rpm)
    assert other.returncode != 0
    assert other.stdout.strip() == f"{rpm}: digests SIGNATURES NOT OK"
    # the public key the build published beside it is the one that verifies it
    published = signed["rpm"].directory / f"openpgp-{test_key.fingerprint[-16:]}.asc"
    assert "signatures OK" in _checksig(tmp_path / "published", published, rpm).stdout


# --- deb: debsig-verify with the generated policy and keyring ------------------------------


def _debsig(output: ChannelOutput, deb: Path) -> subprocess.CompletedProcess[str]:
    debsig = output.directory / "debsig"
    return run(
        "debsig-verify",
        "--policies-dir",
        debsig / "policies",
        "--keyrings-dir",
        debsig / "keyrings",
        deb,
    )


@pytest.mark.tools
def test_debsig_verify_accepts_the_deb_and_refuses_a_tampered_one(
    signed: dict[str, ChannelOutput], signer: OpenPgpKey, tmp_path: Path
) -> None:
    need("debsig-verify", "debsig-verify")
    output = signed["deb"]
    deb = built(output, ".deb")
    policy = output.directory / f"debsig/policies/{signer.key_id}/demo-onnxruntime.pol"
    assert policy.is_file()
    good = _debsig(output, deb)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Verified package" in good.stdout + good.stderr
    # a byte of the payload (past the ar headers and control.tar.gz) changed
    data = deb.read_bytes()
    at = data.index(b"data.tar") + 200
    bad = _debsig(output, flipped(deb, tmp_path / deb.name, at))
    assert bad.returncode != 0
    assert "Failed verification" in bad.stdout + bad.stderr


# --- Arch: makepkg --verifysource with the key in the user's keyring -----------------------


@pytest.fixture
def makepkg() -> Iterator[Makepkg]:
    with unprivileged_makepkg() as found:
        yield found


@pytest.mark.tools
def test_makepkg_verifies_the_signed_source_and_refuses_a_tampered_one(
    signed: dict[str, ChannelOutput], test_key: TestKey, makepkg: Makepkg
) -> None:
    need_gpg()
    output = signed["arch"]
    assert (output.directory / f"{TARBALL}.sig").is_file()
    pkgbuild = (output.directory / "PKGBUILD").read_text()
    assert f"validpgpkeys=('{test_key.fingerprint}')" in pkgbuild
    published = output.directory / f"openpgp-{test_key.fingerprint[-16:]}.asc"
    imported = makepkg.gpg("--import", str(makepkg.copy_file(published)))
    assert imported.returncode == 0, imported.stderr
    good = makepkg.run(makepkg.copy(output.directory, "good"), "--verifysource")
    assert good.returncode == 0, good.stdout + good.stderr
    assert re.search(rf"{re.escape(TARBALL)} \.\.\. Passed", good.stdout + good.stderr)
    # the tarball changed and its SHA-256 in the PKGBUILD with it: only the signature catches it
    bad = makepkg.copy(output.directory, "bad")
    tarball = bad / TARBALL
    old = hashlib.sha256(tarball.read_bytes()).hexdigest()
    flipped(tarball, tarball, tarball.stat().st_size // 2)
    new = hashlib.sha256(tarball.read_bytes()).hexdigest()
    (bad / "PKGBUILD").write_text((bad / "PKGBUILD").read_text().replace(old, new))
    refused = makepkg.run(bad, "--verifysource")
    assert refused.returncode != 0
    assert "bad signature" in (refused.stdout + refused.stderr).lower()


@pytest.mark.tools
def test_makepkg_refuses_a_signature_by_a_key_not_in_validpgpkeys(
    signed: dict[str, ChannelOutput], other_key: TestKey, makepkg: Makepkg
) -> None:
    """validpgpkeys names the one key: a source signed by another (trusted) key is refused."""
    output = signed["arch"]
    imported = makepkg.gpg("--import", str(makepkg.copy_file(other_key.public)))
    assert imported.returncode == 0, imported.stderr
    startdir = makepkg.copy(output.directory, "other")
    other = openpgp_key({VARIABLE: str(other_key.secret)}, ("arch",))
    assert other is not None
    from ortbundle.channels.openpgp import detach_sign

    detach_sign(other, startdir / TARBALL, startdir / f"{TARBALL}.sig")
    refused = makepkg.run(startdir, "--verifysource")
    assert refused.returncode != 0
    assert other_key.fingerprint in refused.stdout + refused.stderr


# --- the record: who signed what ------------------------------------------------------------


def test_each_signed_output_names_its_signer_and_the_notes_name_the_key(
    signer: OpenPgpKey, tmp_path: Path
) -> None:
    """Every Linux target's outputs are signed: the aarch64 ones too."""
    inputs = {
        target: replace(make_package_input(tmp_path / "in", target), openpgp=signer)
        for target in ("linux-x86_64", "linux-aarch64")
    }
    outputs = generate_all(("deb", "rpm", "arch"), inputs, tmp_path / "packaging", 1)
    who = {"kind": "openpgp", "fingerprint": signer.fingerprint}
    assert package_signers(outputs) == {
        "packaging/deb/demo-onnxruntime_1.0.0-1_amd64.deb": who,
        "packaging/deb/linux-aarch64/demo-onnxruntime_1.0.0-1_arm64.deb": who,
        "packaging/rpm/demo-onnxruntime-1.0.0-1.x86_64.rpm": who,
        "packaging/rpm/linux-aarch64/demo-onnxruntime-1.0.0-1.aarch64.rpm": who,
        f"packaging/arch/{TARBALL}": who,
        f"packaging/arch/linux-aarch64/{TARBALL}": who,
    }
    for output in outputs:
        assert any(signer.fingerprint in note for note in output.notes), output.notes
        assert any(f.name == signer.public_name for f in output.files)
    nfpm_yaml = json.loads((tmp_path / "packaging/deb/nfpm.yaml").read_text())
    assert str(signer.key_file) not in json.dumps(nfpm_yaml)  # no host path in the file
    assert nfpm_yaml["deb"]["signature"]["method"] == "debsign"


def test_an_unsigned_build_names_no_signer(tmp_path: Path) -> None:
    package = make_package_input(tmp_path / "in")
    outputs = generate_all(("deb", "arch"), {"linux-x86_64": package}, tmp_path / "out", 1)
    assert package_signers(outputs) == {}
    assert not list((tmp_path / "out").rglob("*.sig"))
    assert "validpgpkeys" not in (tmp_path / "out/arch/PKGBUILD").read_text()


# --- the build: one warning unsigned, the signer in the manifest, a release refuses ----------


def test_a_build_without_a_key_warns_once_and_with_one_records_each_signer(
    fake: FakeProject, reporter: Reporter, test_key: TestKey
) -> None:
    fake.product_extra = 'channels = ["deb", "arch"]\n'  # still inside [product]
    fake.write()
    unsigned = build(fake.project, fake.options(), reporter)
    warned = [w for w in unsigned.warnings if "unsigned" in w]
    assert warned == [
        "the .deb and the Arch source tarball are unsigned: set ORTBUNDLE_OPENPGP_KEY to an "
        "armoured OpenPGP secret key to sign them (docs/signing-linux.md)"
    ]
    environ = {**fake.environ, VARIABLE: str(test_key.secret)}
    result = build(fake.project, fake.options(environ=environ), reporter)
    assert not [w for w in result.warnings if "unsigned" in w]
    manifest = json.loads((result.version_dir / MANIFEST_NAME).read_text())
    signers = {o["path"]: o["signer"] for o in manifest["outputs"] if "signer" in o}
    who = {"kind": "openpgp", "fingerprint": test_key.fingerprint}
    assert signers == {
        "packaging/deb/fakeproduct-onnxruntime_1.2.3-1_amd64.deb": who,
        "packaging/arch/fakeproduct-onnxruntime-1.2.3.tar.gz": who,
    }


def test_a_release_with_the_key_variable_naming_a_missing_file_refuses(
    fake: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    fake.product_extra = 'channels = ["deb", "rpm"]\n'
    fake.write()
    environ = {**fake.environ, VARIABLE: str(tmp_path / "missing.asc")}
    with pytest.raises(ConfigError) as refused:
        build(fake.project, fake.options(environ=environ, release=True), reporter)
    assert "the deb and rpm packages cannot be signed" in str(refused.value)
    assert VARIABLE in str(refused.value)
    assert not (fake.root / "dist").exists() or not list((fake.root / "dist").rglob("*.deb"))


def test_a_release_merged_from_runners_keeps_each_signer(
    fake: FakeProject, reporter: Reporter, test_key: TestKey, tmp_path: Path
) -> None:
    """The runner that signs its .deb records the signer; the release's manifest keeps it."""
    fake.product_extra = 'channels = ["deb"]\n'
    fake.write()
    runners = []
    for target in ("linux-x86_64", "windows-x86_64"):
        where = tmp_path / target
        environ = {
            **{k: v for k, v in fake.environ.items() if not k.startswith("ORTBUNDLE_SIGNING")},
            VARIABLE: str(test_key.secret),
        }
        options = fake.options(targets=(target,), cache_dir=where / "cache", environ=environ)
        build(Project.at(fake.root, where / "dist"), options, reporter)
        runners.append(where / "dist")
    merged = release(
        Project.at(fake.root, tmp_path / "release"), runners, fake.options(), vouched(*runners)
    )
    manifest = json.loads((merged.version_dir / MANIFEST_NAME).read_text())
    signers = {o["path"]: o["signer"] for o in manifest["outputs"] if "signer" in o}
    assert signers == {
        "packaging/deb/fakeproduct-onnxruntime_1.2.3-1_amd64.deb": {
            "kind": "openpgp",
            "fingerprint": test_key.fingerprint,
        }
    }


# --- the signed packages still pass the distributions' linters -----------------------------


@pytest.mark.tools
def test_lintian_accepts_the_signed_deb_and_rpmlint_the_signed_rpm(
    signed: dict[str, ChannelOutput], test_key: TestKey, tmp_path: Path
) -> None:
    """lintian's finding on the _gpgorigin member is overridden in the package, with its
    reason; a signed rpm's rpmlintrc filters no `no-signature` (rpmlint errs on a filter
    nothing matched), and rpmlint checks the signature against an rpm database that holds
    the published key (its own `rpm -K`: here a scratch one, by ~/.rpmmacros)."""
    need("lintian", "lintian")
    need("rpmlint", "rpmlint")
    assert_lintian_accepts(built(signed["deb"], ".deb"))
    output = signed["rpm"]
    (rpmlintrc,) = output.directory.glob("*.rpmlintrc")
    assert "no-signature" not in rpmlintrc.read_text()
    rpm = built(output, ".rpm")
    _checksig(tmp_path / "db", output.directory / f"openpgp-{test_key.fingerprint[-16:]}.asc", rpm)
    (tmp_path / "home").mkdir()
    (tmp_path / "home/.rpmmacros").write_text(f"%_dbpath {tmp_path / 'db'}\n")
    result = subprocess.run(
        ["rpmlint", "-r", str(rpmlintrc), str(rpm)],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), "LC_ALL": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert " 0 errors," in result.stdout, result.stdout + result.stderr
    assert not re.search(r": E: ", result.stdout), result.stdout
