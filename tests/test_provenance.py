"""SLSA v1 provenance: an in-toto statement in a DSSE envelope signed with the product's key,
checked by `verify` and, independently, by securesystemslib's DSSE implementation."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer._key import SSlibKey

from ortbundle._core.errors import IntegrityError
from ortbundle._core.progress import Reporter
from ortbundle.evidence.names import PROVENANCE_NAME, SUMMARY_NAME
from ortbundle.evidence.provenance import (
    LOCAL_BUILDER,
    PAYLOAD_TYPE,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    build_context,
    pae,
)
from ortbundle.evidence.signing import (
    PublicKey,
    generate_keypair,
    load_public_key,
    load_secret_key,
    sign_bytes,
)
from ortbundle.evidence.verify import verify_tree
from ortbundle.pipeline.build import build
from ortbundle.pipeline.result import BuildResult
from tests.helpers.project import FakeProject

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def built(fake: FakeProject, reporter: Reporter) -> BuildResult:
    fake.write()
    return build(fake.project, fake.options(), reporter)


def public(fake: FakeProject) -> PublicKey:
    return load_public_key(fake.root / "keys" / "fakeproduct.pub")


def sslib_key(key: PublicKey) -> SSlibKey:
    """The product's key as securesystemslib knows Ed25519 keys: hex of the raw 32 bytes."""
    return SSlibKey(key.key_id_hex, "ed25519", "ed25519", {"public": key.public_bytes.hex()})


def envelope(version_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((version_dir / PROVENANCE_NAME).read_text())
    return data


def payload(data: dict[str, Any]) -> dict[str, Any]:
    statement: dict[str, Any] = json.loads(base64.b64decode(data["payload"]))
    return statement


def test_an_independent_dsse_implementation_verifies_the_provenance(
    built: BuildResult, fake: FakeProject
) -> None:
    data = envelope(built.version_dir)
    accepted = Envelope.from_dict(copy.deepcopy(data)).verify([sslib_key(public(fake))], 1)
    assert list(accepted) == [public(fake).key_id_hex]
    # and it bites: another key, or one changed payload byte, is refused
    other = generate_keypair()[1]
    with pytest.raises(VerificationError):
        Envelope.from_dict(copy.deepcopy(data)).verify(
            [sslib_key(PublicKey(public(fake).key_id, other.public_bytes))], 1
        )
    tampered = dict(
        data,
        payload=base64.b64encode(
            base64.b64decode(data["payload"]).replace(b"fakeproduct", b"fakeproducT")
        ).decode(),
    )
    with pytest.raises(VerificationError):
        Envelope.from_dict(copy.deepcopy(tampered)).verify([sslib_key(public(fake))], 1)


def test_the_statement_and_predicate_parse_as_in_toto_and_slsa_v1(built: BuildResult) -> None:
    """in-toto's own attestation library (protobuf definitions of Statement v1 and SLSA
    Provenance v1, unknown fields refused) reads what we wrote."""
    statement = payload(envelope(built.version_dir))
    parsed = json_format.ParseDict(statement, statement_pb2.Statement())
    Statement.copy_from_pb(parsed).validate()
    provenance = json_format.ParseDict(statement["predicate"], provenance_pb2.Provenance())
    assert (
        provenance.build_definition.build_type
        == statement["predicate"]["buildDefinition"]["buildType"]
    )
    assert (
        provenance.run_details.builder.id == statement["predicate"]["runDetails"]["builder"]["id"]
    )
    assert len(provenance.build_definition.resolved_dependencies) >= 4
    statement["predicate"]["runDetails"]["buildr"] = {}  # it bites: a misspelt field is refused
    with pytest.raises(json_format.ParseError):
        json_format.ParseDict(statement["predicate"], provenance_pb2.Provenance())


def test_the_statement_says_what_was_built_from_what(built: BuildResult) -> None:
    version_dir = built.version_dir
    data = envelope(version_dir)
    assert data["payloadType"] == PAYLOAD_TYPE
    statement = payload(data)
    assert statement["_type"] == STATEMENT_TYPE
    assert statement["predicateType"] == PREDICATE_TYPE
    manifest_bytes = (version_dir / "manifest.json").read_bytes()
    manifest = json.loads(manifest_bytes)
    subjects = {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}
    assert subjects.pop("manifest.json") == hashlib.sha256(manifest_bytes).hexdigest()
    on_disk = {
        p.relative_to(version_dir).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in version_dir.rglob("*")
        if p.is_file() and not p.is_symlink()
    }
    for unlisted in ("manifest.json", "manifest.json.minisig", PROVENANCE_NAME, SUMMARY_NAME):
        on_disk.pop(unlisted)
    assert subjects == on_disk  # every output file, by its digest
    build_definition = statement["predicate"]["buildDefinition"]
    deps = build_definition["resolvedDependencies"]
    by_name = {d["name"]: d for d in deps}
    assert (
        by_name["manifests/fakeproduct.toml"]["digest"]["sha256"]
        == (manifest["product"]["manifest_sha256"])
    )
    assert by_name["recipes/fake.toml"]["digest"]["sha256"] == manifest["recipes"][0]["sha256"]
    assert by_name["licenses/policy.toml"]["digest"]["sha256"] == manifest["policy_sha256"]
    for item in manifest["inputs"]:
        dep = by_name[f"{item['component']}:{item['source']}"]
        assert dep["uri"] == item["url"] and dep["digest"]["sha256"] == item["sha256"]
    assert build_definition["externalParameters"]["targets"] == ["linux-x86_64", "windows-x86_64"]
    assert statement["predicate"]["runDetails"]["builder"]["id"]


def test_verify_checks_the_provenance(built: BuildResult, fake: FakeProject) -> None:
    report = verify_tree(built.version_dir, public_key=public(fake))
    assert report.ok and report.provenance is not None
    assert report.provenance.signed_by == public(fake).key_id_hex
    assert "provenance OK" in report.provenance.line()


def _resign(version_dir: Path, statement: dict[str, Any], key_file: Path) -> None:
    """A consistent-looking envelope signed with the given key (an attacker's, or the real one)."""
    key = load_secret_key(key_file)
    body = json.dumps(statement).encode()
    signature = sign_bytes(pae(PAYLOAD_TYPE, body), key)
    (version_dir / PROVENANCE_NAME).write_text(
        json.dumps(
            {
                "payloadType": PAYLOAD_TYPE,
                "payload": base64.b64encode(body).decode(),
                "signatures": [
                    {"keyid": key.key_id_hex, "sig": base64.b64encode(signature).decode()}
                ],
            }
        )
    )


def test_verify_refuses_a_provenance_that_lies_even_when_signed(
    built: BuildResult, fake: FakeProject
) -> None:
    version_dir = built.version_dir
    original = payload(envelope(version_dir))
    statement = copy.deepcopy(original)
    statement["subject"] = statement["subject"][1:]  # one output dropped, signed with the real key
    _resign(version_dir, statement, fake.secret_key)
    with pytest.raises(IntegrityError, match="subjects differ"):
        verify_tree(version_dir, public_key=public(fake))
    statement = copy.deepcopy(original)
    deps = statement["predicate"]["buildDefinition"]["resolvedDependencies"]
    next(d for d in deps if "uri" in d)["uri"] = "https://elsewhere.invalid/x.whl"
    _resign(version_dir, statement, fake.secret_key)
    with pytest.raises(IntegrityError, match="differs from what the manifest says"):
        verify_tree(version_dir, public_key=public(fake))


def test_verify_refuses_a_missing_or_foreign_signed_provenance(
    built: BuildResult, fake: FakeProject, tmp_path: Path
) -> None:
    version_dir = built.version_dir
    original = (version_dir / PROVENANCE_NAME).read_bytes()
    from ortbundle.evidence.signing import write_secret_key

    write_secret_key(tmp_path / "other.key", generate_keypair()[0])
    _resign(version_dir, payload(json.loads(original)), tmp_path / "other.key")
    with pytest.raises(IntegrityError, match="no valid signature by key"):
        verify_tree(version_dir, public_key=public(fake))
    (version_dir / PROVENANCE_NAME).unlink()
    with pytest.raises(IntegrityError, match="is missing beside the signed manifest"):
        verify_tree(version_dir, public_key=public(fake))
    (version_dir / PROVENANCE_NAME).write_bytes(original)
    assert verify_tree(version_dir, public_key=public(fake)).ok


def test_builder_and_commit_come_from_the_ci_or_the_checkout() -> None:
    github = build_context(
        ROOT,
        {
            "GITHUB_ACTIONS": "true",
            "GITHUB_SERVER_URL": "https://github.com",
            "GITHUB_REPOSITORY": "owner/repo",
            "GITHUB_WORKFLOW_REF": "owner/repo/.github/workflows/release.yml@refs/tags/v1",
            "GITHUB_SHA": "a" * 40,
            "GITHUB_RUN_ID": "42",
        },
    )
    assert github.builder_id == (
        "https://github.com/owner/repo/.github/workflows/release.yml@refs/tags/v1"
    )
    assert github.commit == "a" * 40 and github.repository == "git+https://github.com/owner/repo"
    assert github.invocation == "https://github.com/owner/repo/actions/runs/42"
    local = build_context(ROOT, {})
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert local.builder_id == LOCAL_BUILDER and local.commit == head
    named = build_context(ROOT, {"ORTBUNDLE_BUILDER_ID": "https://ci.example.invalid/runner"})
    assert named.builder_id == "https://ci.example.invalid/runner"
