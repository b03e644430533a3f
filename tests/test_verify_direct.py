"""evidence/verify.py read directly, over a tiny version tree written in the test: where the
manifest is found, which signatures it takes and refuses, each kind of tampering by path, the
manifest's own refusals, and the report and lines `invoke verify` prints.

tests/test_record.py and tests/test_hostile_evidence.py verify whole signed builds; here each
refusal is asserted whole (message, file, fix and exit code), so a changed word or condition
fails a test that names it, in milliseconds.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from ortbundle._core.errors import ConfigError, IntegrityError, OrtbundleError
from ortbundle.cli.common import CommandFailed
from ortbundle.cli.verify import run_verify
from ortbundle.evidence.provenance import BuildContext, envelope_json
from ortbundle.evidence.record import MANIFEST_SCHEMA, hash_file
from ortbundle.evidence.signing import SecretKey, sign, write_public_key
from ortbundle.evidence.verify import (
    VerifyReport,
    _signing_key_id,
    check_signature,
    locate_manifest,
    printable,
    verify_tree,
)

SECRET = SecretKey(bytes(range(1, 9)), bytes(range(32)))
PUBLIC = SECRET.public_key()
OTHER = SecretKey(bytes(range(11, 19)), bytes(range(1, 33))).public_key()
STAGE = "linux-x86_64"
PRODUCT, VERSION = "fakeproduct", "1.2.3"
COMMENT = "ortbundle manifest fakeproduct 1.2.3"
CONTEXT = BuildContext(
    builder_id="urn:test:builder", commit="c" * 40, repository=None, invocation=None
)
DIGEST = "d" * 64


def refused(kind: type[OrtbundleError], call: Any) -> str:
    """The whole text of the refusal `call` raises, checked to be of `kind` (and its exit code)."""
    with pytest.raises(OrtbundleError) as caught:
        call()
    assert type(caught.value) is kind
    assert caught.value.exit_code == {ConfigError: 2, IntegrityError: 4}[kind]
    return str(caught.value)


def document(outputs: list[dict[str, Any]], *, key_id: str | None = None) -> dict[str, Any]:
    """A manifest of the ortbundle.manifest/1 shape, as record.py writes one."""
    return {
        "schema": MANIFEST_SCHEMA,
        "tool": {"name": "ortbundle", "version": "0.0.0"},
        "product": {
            "name": PRODUCT,
            "version": VERSION,
            "manifest": "manifests/fakeproduct.toml",
            "manifest_sha256": DIGEST,
        },
        "recipes": [],
        "source_date_epoch": 1700000000,
        "policy_sha256": DIGEST,
        "signing_key_id": key_id,
        "inputs": [],
        "outputs": outputs,
    }


def outputs_of(tree: Path) -> list[dict[str, Any]]:
    """Every file and link under `tree` as the manifest lists it (the evidence files aside)."""
    listed: list[dict[str, Any]] = []
    for path in sorted(tree.rglob("*")):
        relative = path.relative_to(tree).as_posix()
        if relative.startswith("manifest.json") or relative == "provenance.intoto.json":
            continue
        if path.is_symlink():
            link = path.readlink().as_posix()
            listed.append(
                {"path": relative, "size": 0, "sha256": DIGEST, "mode": "0777", "link_to": link}
            )
        elif path.is_file():
            size, sha256 = hash_file(path)
            listed.append({"path": relative, "size": size, "sha256": sha256, "mode": "0644"})
    return listed


def version_tree(root: Path) -> Path:
    """dist/fakeproduct/1.2.3 with a stage of two files, a link to a file and a link to a
    directory, and one file of the version directory itself."""
    version = root / "dist" / PRODUCT / VERSION
    lib = version / STAGE / "lib"
    lib.mkdir(parents=True)
    (lib / "libfoo.so").write_bytes(b"\x7fELF foo")
    (lib / "libfoo.so.1").symlink_to("libfoo.so")
    (version / STAGE / "runtimes.json").write_text("{}\n", "utf-8")
    (version / STAGE / "libdir").symlink_to("lib")
    (version / "sbom.cdx.json").write_text("[]\n", "utf-8")
    return version


def record(
    version: Path,
    *,
    key: SecretKey | None = SECRET,
    signature: bool = True,
    provenance: bool = True,
    claim: bool = True,
) -> bytes:
    """Write the manifest of `version` as it stands (signed by `key`, with its provenance)."""
    key_id = key.key_id_hex if key is not None and claim else None
    data = (json.dumps(document(outputs_of(version), key_id=key_id), indent=2) + "\n").encode()
    (version / "manifest.json").write_bytes(data)
    if key is not None and signature:
        text = sign(data, key, trusted_comment=COMMENT)
        (version / "manifest.json.minisig").write_text(text, "utf-8")
    if provenance:
        (version / "provenance.intoto.json").write_text(envelope_json(data, CONTEXT, key), "utf-8")
    return data


@pytest.fixture
def signed(tmp_path: Path) -> Path:
    version = version_tree(tmp_path)
    record(version)
    return version


@pytest.fixture
def unsigned(tmp_path: Path) -> Path:
    version = version_tree(tmp_path)
    record(version, key=None)
    return version


def write_manifest(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value), "utf-8")
    return path


# --- locating the manifest -------------------------------------------------------------------


def test_a_manifest_given_is_used_with_the_target_as_prefix(signed: Path, tmp_path: Path) -> None:
    manifest = signed / "manifest.json"
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    assert locate_manifest(unpacked, manifest, STAGE) == (manifest, f"{STAGE}/")
    assert locate_manifest(unpacked, manifest, None) == (manifest, "")
    assert locate_manifest(unpacked, manifest, "") == (manifest, "")


def test_a_manifest_given_that_is_not_a_file_is_refused(tmp_path: Path) -> None:
    for missing in (tmp_path / "nowhere.json", tmp_path):
        text = refused(ConfigError, partial(locate_manifest, tmp_path, missing, STAGE))
        assert text == (
            f"no such manifest [file {missing}] — fix: pass the manifest.json of the build"
        )


def test_the_manifest_in_the_tree_comes_before_the_one_beside_it(signed: Path) -> None:
    assert locate_manifest(signed, None, None) == (signed / "manifest.json", "")
    assert locate_manifest(signed, None, STAGE) == (signed / "manifest.json", f"{STAGE}/")
    # a stage has its manifest one level up, and the stage's name is the prefix, --target or not
    stage = signed / STAGE
    assert locate_manifest(stage, None, None) == (signed / "manifest.json", f"{STAGE}/")
    assert locate_manifest(stage, None, "other") == (signed / "manifest.json", f"{STAGE}/")
    write_manifest(stage / "manifest.json", {})
    assert locate_manifest(stage, None, None) == (stage / "manifest.json", "")


def test_a_tree_without_a_manifest_in_or_beside_it_is_refused(tmp_path: Path) -> None:
    tree = tmp_path / "dist" / PRODUCT / VERSION
    tree.mkdir(parents=True)
    (tree / "manifest.json").mkdir()  # a directory of that name is no manifest
    # set-aside trees beside an existing tree are a build's own business, not named here
    (tree.parent / f".{VERSION}.old-aaaa").mkdir()
    text = refused(ConfigError, lambda: locate_manifest(tree, None, None))
    assert text == (
        f"no manifest.json in or beside this tree [file {tree}] — fix: pass --manifest (and "
        "--target for an unpacked package of one target)"
    )


def test_a_dangling_link_in_place_of_the_tree_is_not_a_publish_cut_short(tmp_path: Path) -> None:
    tree = tmp_path / "dist" / PRODUCT / VERSION
    tree.parent.mkdir(parents=True)
    tree.symlink_to("gone")
    (tree.parent / f".{VERSION}.old-aaaa").mkdir()
    text = refused(ConfigError, lambda: locate_manifest(tree, None, None))
    assert text.startswith(f"no manifest.json in or beside this tree [file {tree}]")


def test_a_tree_a_killed_publish_left_aside_is_named_with_how_to_check_it(tmp_path: Path) -> None:
    tree = tmp_path / "dist" / PRODUCT / VERSION
    tree.parent.mkdir(parents=True)
    for suffix in ("aaaa", "bbbb", "cccc"):  # the last name is the newest
        (tree.parent / f".{VERSION}.old-{suffix}").mkdir()
    aside = tree.parent / f".{VERSION}.old-cccc"
    text = refused(ConfigError, lambda: locate_manifest(tree, None, None))
    assert text == (
        f"{VERSION} is missing: a build was killed while publishing it, between setting the "
        f"previous tree aside and renaming the new one in; that tree is complete, at {aside} "
        f"[file {tree}] — fix: run the build again (it puts the set-aside tree back first), "
        f"or check it where it is: invoke verify --path {aside}"
    )
    for suffix in ("aaaa", "bbbb", "cccc"):
        (tree.parent / f".{VERSION}.old-{suffix}").rmdir()
    text = refused(ConfigError, lambda: locate_manifest(tree, None, None))
    assert text.startswith(f"{tree} does not exist: no build was published there [file {tree}]")


# --- the signature ---------------------------------------------------------------------------


def test_a_good_signature_gives_the_key_and_its_trusted_comment(signed: Path) -> None:
    manifest = signed / "manifest.json"
    data = manifest.read_bytes()
    for allow in (False, True):
        assert check_signature(manifest, data, PUBLIC, allow_unsigned=allow) == (
            PUBLIC.key_id_hex,
            COMMENT,
        )


def test_a_signed_manifest_without_its_signature_never_verifies(signed: Path) -> None:
    manifest = signed / "manifest.json"
    (signed / "manifest.json.minisig").unlink()
    for allow in (False, True):
        text = refused(
            IntegrityError,
            partial(check_signature, manifest, manifest.read_bytes(), PUBLIC, allow_unsigned=allow),
        )
        assert text == (
            f"the manifest says key {PUBLIC.key_id_hex} signed it, and manifest.json.minisig "
            f"is missing [file {signed / 'manifest.json.minisig'}] — fix: verify the tree as it "
            "was published, with its signature: a signed build never verifies without it"
        )


def test_an_unsigned_manifest_passes_only_when_allowed(unsigned: Path) -> None:
    manifest = unsigned / "manifest.json"
    data = manifest.read_bytes()
    assert check_signature(manifest, data, PUBLIC, allow_unsigned=True) == (None, None)
    assert check_signature(manifest, data, None, allow_unsigned=True) == (None, None)
    text = refused(
        IntegrityError, lambda: check_signature(manifest, data, PUBLIC, allow_unsigned=False)
    )
    assert text == (
        f"the build manifest is not signed (a development build made without a key) "
        f"[file {manifest}] — fix: for a signed tree build with a signing key (invoke keygen); "
        "to check an unsigned tree's hashes run invoke verify without --signed and --public-key"
    )


def test_a_signed_manifest_needs_a_key_to_check_it(signed: Path) -> None:
    manifest = signed / "manifest.json"
    text = refused(
        ConfigError,
        lambda: check_signature(manifest, manifest.read_bytes(), None, allow_unsigned=True),
    )
    assert text == (
        "the manifest is signed but no public key was given to check it with "
        f"[file {signed / 'manifest.json.minisig'}] — fix: pass --public-key, or keep the "
        "product's key at keys/<product>.pub"
    )


def test_another_key_or_changed_bytes_are_refused_naming_the_signature(signed: Path) -> None:
    manifest = signed / "manifest.json"
    data = manifest.read_bytes()
    signature = signed / "manifest.json.minisig"
    text = refused(
        IntegrityError, lambda: check_signature(manifest, data, OTHER, allow_unsigned=False)
    )
    assert text == (
        f"{signature} was made by key {PUBLIC.key_id_hex}, but the public key is "
        f"{OTHER.key_id_hex} [component signing, file {signature}] — fix: verify with the "
        f"public key {PUBLIC.key_id_hex}, or re-sign with the secret key of {OTHER.key_id_hex}"
    )
    text = refused(
        IntegrityError,
        lambda: check_signature(manifest, data + b" ", PUBLIC, allow_unsigned=False),
    )
    assert text.startswith(f"{signature} does not match the data: the signed bytes were changed")


def test_the_signature_is_read_as_utf8_whatever_the_locale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trusted comment may hold any UTF-8 (a product's name, a builder's): under a Latin-1
    locale (simulated: the encoding Python picks when none is named) it must still verify."""
    version = version_tree(tmp_path)
    data = record(version)
    comment = "ortbundle manifest fakeproduct 1.2.3 — built by Zoë"
    text = sign(data, SECRET, trusted_comment=comment)
    (version / "manifest.json.minisig").write_text(text, "utf-8")
    real = io.text_encoding

    def latin1_locale(encoding: str | None, stacklevel: int = 2) -> str:
        return "latin-1" if encoding is None else real(encoding, stacklevel)

    monkeypatch.setattr(io, "text_encoding", latin1_locale)
    manifest = version / "manifest.json"
    assert check_signature(manifest, data, PUBLIC, allow_unsigned=False) == (
        PUBLIC.key_id_hex,
        comment,
    )


@pytest.mark.parametrize(
    ("data", "claimed"),
    [
        (b'{"signing_key_id": "0102030405060708"}', "0102030405060708"),
        (b'{"signing_key_id": 12}', "12"),
        (b'{"signing_key_id": null}', None),
        (b'{"signing_key_id": ""}', None),
        (b"{}", None),
        (b"[1, 2]", None),  # not an object: no .get
        (b"not json", None),
        (b"\xff\xfe{", None),  # not UTF-8
    ],
)
def test_the_key_a_manifest_claims(data: bytes, claimed: str | None) -> None:
    assert _signing_key_id(data) == claimed


# --- the manifest itself ---------------------------------------------------------------------


def test_a_manifest_that_is_not_json_is_refused(signed: Path) -> None:
    manifest = signed / "manifest.json"
    manifest.write_bytes(b"{not json")
    text = refused(IntegrityError, lambda: verify_tree(signed, public_key=PUBLIC))
    assert text == (
        "the manifest is not JSON: Expecting property name enclosed in double quotes: line 1 "
        f"column 2 (char 1) [file {manifest}]"
    )
    manifest.write_bytes(b"\xff{}")
    text = refused(IntegrityError, lambda: verify_tree(signed, public_key=PUBLIC))
    assert text.startswith("the manifest is not JSON: 'utf-8' codec can't decode byte 0xff")


@pytest.mark.parametrize(
    "value", [[1], {"schema": "ortbundle.manifest/2"}, {}, "ortbundle.manifest/1"]
)
def test_a_json_document_of_another_schema_is_refused(signed: Path, value: Any) -> None:
    manifest = write_manifest(signed / "manifest.json", value)
    text = refused(IntegrityError, lambda: verify_tree(signed, public_key=PUBLIC))
    assert text == (
        f"not an ortbundle.manifest/1 manifest [file {manifest}] — fix: pass the manifest.json "
        "written by invoke build"
    )


def test_a_manifest_of_another_shape_is_refused_before_its_signature_is_read(
    signed: Path,
) -> None:
    bad = document([{"path": "a", "size": "1", "sha256": DIGEST, "mode": "0644"}])
    del bad["tool"]
    manifest = write_manifest(signed / "manifest.json", bad)
    (signed / "manifest.json.minisig").unlink()
    text = refused(IntegrityError, lambda: verify_tree(signed, public_key=None))
    assert text == (
        "the manifest does not have the ortbundle.manifest/1 shape: `tool` is missing; "
        f"`outputs[0].size` must be an integer, not '1' [file {manifest}] — fix: it was altered "
        "or damaged after the build: take manifest.json from the build again, or rebuild; "
        "never edit it"
    )


def test_a_manifest_listing_nothing_under_the_tree_is_refused(signed: Path) -> None:
    manifest = signed / "manifest.json"
    text = refused(
        ConfigError,
        lambda: verify_tree(signed / STAGE, public_key=PUBLIC, manifest=manifest, target="x86"),
    )
    assert text == (
        f"the manifest lists no file under x86/ [file {manifest}] — fix: pass --target naming "
        "the target this tree was built for"
    )
    write_manifest(manifest, document([]))
    (signed / "manifest.json.minisig").unlink()
    (signed / "provenance.intoto.json").unlink()
    text = refused(ConfigError, lambda: verify_tree(signed, allow_unsigned=True))
    assert text == (
        f"the manifest lists no file under the version directory [file {manifest}] — fix: "
        "pass --target naming the target this tree was built for"
    )


# --- a signed tree, and each kind of tampering -----------------------------------------------


def test_an_untouched_signed_tree_verifies(signed: Path) -> None:
    key_file = signed.parent / "fakeproduct.pub"
    write_public_key(key_file, PUBLIC)
    for key in (PUBLIC, key_file, key_file.read_text("utf-8")):
        report = verify_tree(signed, public_key=key)
        assert report == VerifyReport(
            tree=signed,
            manifest=signed / "manifest.json",
            product=PRODUCT,
            version=VERSION,
            signed_by=PUBLIC.key_id_hex,
            trusted_comment=COMMENT,
            checked=5,
            modified=(),
            missing=(),
            unexpected=(),
            provenance=report.provenance,
        )
        assert report.ok and report.lines() == []
        assert report.provenance is not None
        assert report.provenance.line() == (
            f"provenance OK (signed by key {PUBLIC.key_id_hex}): 4 subjects, builder "
            f"urn:test:builder, commit {'c' * 40}"
        )


def test_one_worker_or_none_asked_still_hashes(signed: Path) -> None:
    for workers in (0, 1):
        assert verify_tree(signed, public_key=PUBLIC, workers=workers).checked == 5


def test_a_stage_verifies_against_the_manifest_beside_it(signed: Path) -> None:
    stage = signed / STAGE
    report = verify_tree(stage, public_key=PUBLIC)
    assert (report.manifest, report.checked, report.ok) == (signed / "manifest.json", 4, True)
    # beside a stage, a file named as the evidence is not the evidence: it is unexpected
    (stage / "manifest.json.minisig").write_text("x", "utf-8")
    (stage / "build-summary.json").write_text("{}", "utf-8")
    report = verify_tree(stage, public_key=PUBLIC)
    assert report.unexpected == ("build-summary.json", "manifest.json.minisig")


def test_an_unpacked_package_verifies_with_manifest_and_target(
    signed: Path, tmp_path: Path
) -> None:
    unpacked = tmp_path / "unpacked"
    (signed / STAGE).rename(unpacked)
    (unpacked / "lib" / "libfoo.so").write_bytes(b"\x7fELF FOO")
    report = verify_tree(
        unpacked, manifest=signed / "manifest.json", target=STAGE, public_key=PUBLIC
    )
    assert (report.checked, report.modified, report.missing, report.unexpected) == (
        4,
        ("lib/libfoo.so",),
        (),
        (),
    )


def test_each_kind_of_tampering_is_reported_by_path(signed: Path) -> None:
    stage = signed / STAGE
    (stage / "runtimes.json").write_text("[]\n", "utf-8")  # same size, other bytes
    (signed / "sbom.cdx.json").write_text("[1]\n", "utf-8")  # another size
    (stage / "lib" / "libfoo.so.1").unlink()
    (stage / "lib" / "libfoo.so.1").symlink_to("libbar.so")  # a link retargeted
    (stage / "libdir").unlink()  # a link to a directory, gone
    (stage / "lib" / "zz.so").write_bytes(b"added")
    (stage / "lib" / "aa.so").write_bytes(b"added")
    (stage / "new").mkdir()  # an empty directory is not a file
    report = verify_tree(signed, public_key=PUBLIC)
    assert report.modified == (
        f"{STAGE}/lib/libfoo.so.1",
        f"{STAGE}/runtimes.json",
        "sbom.cdx.json",
    )
    assert report.missing == (f"{STAGE}/libdir",)
    assert report.unexpected == (f"{STAGE}/lib/aa.so", f"{STAGE}/lib/zz.so")
    assert (report.checked, report.ok) == (4, False)
    assert report.lines() == [
        f"modified    {STAGE}/lib/libfoo.so.1",
        f"modified    {STAGE}/runtimes.json",
        "modified    sbom.cdx.json",
        f"missing     {STAGE}/libdir",
        f"unexpected  {STAGE}/lib/aa.so",
        f"unexpected  {STAGE}/lib/zz.so",
    ]


def test_a_file_swapped_for_a_link_or_a_link_for_a_file_is_modified(signed: Path) -> None:
    lib = signed / STAGE / "lib"
    (signed / "copy.so").write_bytes((lib / "libfoo.so").read_bytes())
    (lib / "libfoo.so").rename(signed / "moved.so")
    (lib / "libfoo.so").symlink_to(signed / "copy.so")  # the same bytes, through a link
    (lib / "libfoo.so.1").unlink()
    (lib / "libfoo.so.1").write_text("libfoo.so", "utf-8")  # the link's text, as a file
    (signed / STAGE / "libdir").unlink()
    (signed / STAGE / "libdir").mkdir()  # a directory where a link was
    (signed / STAGE / "runtimes.json").unlink()
    os.mkfifo(signed / STAGE / "runtimes.json")  # not a file: never opened
    report = verify_tree(signed, public_key=PUBLIC)
    assert report.modified == (
        f"{STAGE}/lib/libfoo.so",
        f"{STAGE}/lib/libfoo.so.1",
        f"{STAGE}/runtimes.json",
    )
    assert report.missing == (f"{STAGE}/libdir",)
    assert report.unexpected == ("copy.so", "moved.so")


def test_a_size_the_manifest_misstates_is_modified(signed: Path) -> None:
    data = json.loads((signed / "manifest.json").read_bytes())
    entry = next(o for o in data["outputs"] if o["path"] == "sbom.cdx.json")
    entry["size"] += 1  # the digest still matches
    write_manifest(signed / "manifest.json", data)
    (signed / "manifest.json.minisig").unlink()
    (signed / "provenance.intoto.json").unlink()
    data["signing_key_id"] = None
    write_manifest(signed / "manifest.json", data)
    report = verify_tree(signed, allow_unsigned=True)
    assert report.modified == ("sbom.cdx.json",)
    assert hashlib.sha256((signed / "sbom.cdx.json").read_bytes()).hexdigest() == entry["sha256"]


def test_the_evidence_beside_the_manifest_is_not_unexpected(signed: Path) -> None:
    (signed / "build-summary.json").write_text("{}", "utf-8")
    assert verify_tree(signed, public_key=PUBLIC).unexpected == ()


def test_a_signed_manifest_with_a_bad_signature_is_refused(signed: Path) -> None:
    manifest = signed / "manifest.json"
    manifest.write_bytes(manifest.read_bytes().replace(b'"size": 8', b'"size": 9', 1))
    text = refused(IntegrityError, lambda: verify_tree(signed, public_key=PUBLIC))
    assert text.startswith(
        f"{signed / 'manifest.json.minisig'} does not match the data: the signed bytes were"
    )
    text = refused(IntegrityError, lambda: verify_tree(signed, public_key=OTHER))
    assert f"was made by key {PUBLIC.key_id_hex}, but the public key is {OTHER.key_id_hex}" in text


def test_hashes_only_skips_the_signature_and_the_provenance(signed: Path) -> None:
    (signed / "manifest.json.minisig").write_text("garbage", "utf-8")
    (signed / "provenance.intoto.json").write_text("garbage", "utf-8")
    report = verify_tree(signed, ignore_signature=True)
    assert (report.ok, report.signed_by, report.trusted_comment, report.provenance) == (
        True,
        None,
        None,
        None,
    )


# --- the provenance beside the manifest ------------------------------------------------------


def test_a_signed_manifest_needs_its_provenance(signed: Path) -> None:
    (signed / "provenance.intoto.json").unlink()
    text = refused(IntegrityError, lambda: verify_tree(signed, public_key=PUBLIC))
    assert text.startswith("provenance: provenance.intoto.json is missing beside the signed")


def test_an_unsigned_tree_verifies_only_when_that_is_allowed(unsigned: Path) -> None:
    text = refused(IntegrityError, lambda: verify_tree(unsigned))
    assert text.startswith("the build manifest is not signed (a development build made without")
    assert verify_tree(unsigned, allow_unsigned=True).ok


def test_an_unsigned_tree_s_provenance_is_checked_unsigned_when_present(unsigned: Path) -> None:
    for key in (None, PUBLIC):  # a key given is not asked of an unsigned provenance
        report = verify_tree(unsigned, public_key=key, allow_unsigned=True)
        assert report.ok and report.signed_by is None and report.trusted_comment is None
        assert report.provenance is not None and report.provenance.signed_by is None
    (unsigned / "provenance.intoto.json").write_text("{}", "utf-8")
    text = refused(IntegrityError, lambda: verify_tree(unsigned, allow_unsigned=True))
    assert text.startswith("provenance: not a DSSE envelope")
    (unsigned / "provenance.intoto.json").unlink()
    report = verify_tree(unsigned, allow_unsigned=True)
    assert report.ok and report.provenance is None


# --- another version in a version's place ----------------------------------------------------


def test_an_older_build_moved_into_a_newer_version_s_place_is_refused(signed: Path) -> None:
    moved = signed.with_name("1.2.4")
    signed.rename(moved)
    text = refused(IntegrityError, lambda: verify_tree(moved, public_key=PUBLIC))
    assert text == (
        f"1.2.4 holds the signed build of {PRODUCT} {VERSION}, not 1.2.4: an older (or other) "
        f"build was moved into this version's place [file {moved}] — fix: rebuild {PRODUCT} "
        f"1.2.4 into it, or put the tree back under dist/{PRODUCT}/{VERSION}/"
    )
    # its stage, checked alone, is a stage: the version directory's name is not its business
    assert verify_tree(moved / STAGE, public_key=PUBLIC).ok


def test_a_tree_outside_its_product_s_directory_or_set_aside_keeps_its_name(signed: Path) -> None:
    aside = signed.with_name(f".{VERSION}.old-aaaa")
    signed.rename(aside)
    assert verify_tree(aside, public_key=PUBLIC).ok
    elsewhere = signed.parent.with_name("other") / "1.2.4"
    elsewhere.parent.mkdir()
    aside.rename(elsewhere)
    assert verify_tree(elsewhere, public_key=PUBLIC).ok


# --- the report's lines, and what invoke verify prints ---------------------------------------


def test_a_report_is_ok_only_with_nothing_modified_missing_or_unexpected(tmp_path: Path) -> None:
    base = VerifyReport(tmp_path, tmp_path, "p", "1", None, None, 1, (), (), ())
    assert base.ok
    for field in ("modified", "missing", "unexpected"):
        changed = VerifyReport(**{**base.__dict__, field: ("x",)})
        assert not changed.ok


def test_a_path_s_control_characters_are_escaped_in_its_line(tmp_path: Path) -> None:
    assert printable("a\nb\tc\x1b[2Jé ü") == "a\\nb\\tc\\x1b[2Jé ü"
    assert printable("") == ""
    report = VerifyReport(
        tmp_path, tmp_path, "p", "1", None, None, 0, ("m\n1",), ("g\r",), ("u\x07",)
    )
    assert report.lines() == ["modified    m\\n1", "missing     g\\r", "unexpected  u\\x07"]


def test_invoke_verify_prints_the_verdict(
    signed: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    key_file = tmp_path / "fakeproduct.pub"
    write_public_key(key_file, PUBLIC)

    def run() -> None:
        run_verify(
            signed,
            manifest=None,
            target=None,
            public_key=key_file,
            allow_unsigned=False,
            product=PRODUCT,
            root=tmp_path,
        )

    run()
    assert capsys.readouterr().out.splitlines() == [
        f"{signed}: {PRODUCT} {VERSION}, signature OK (key {PUBLIC.key_id_hex})",
        f"provenance OK (signed by key {PUBLIC.key_id_hex}): 4 subjects, builder "
        f"urn:test:builder, commit {'c' * 40}",
        "5 files match the manifest",
    ]
    (signed / "sbom.cdx.json").unlink()
    (signed / STAGE / "x\nfiles match").write_bytes(b"")
    with pytest.raises(CommandFailed) as caught:
        run()
    assert (str(caught.value), caught.value.code) == (
        "ortbundle: integrity error: 0 modified, 1 missing, 1 unexpected (of 5 files in the "
        "manifest)",
        4,
    )
    assert capsys.readouterr().out.splitlines()[2:] == [
        "missing     sbom.cdx.json",
        f"unexpected  {STAGE}/x\\nfiles match",
    ]
