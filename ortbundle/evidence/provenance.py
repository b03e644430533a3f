"""SLSA v1 provenance for a build: an in-toto Statement in a DSSE envelope, signed with the
product's Ed25519 key.

The statement is derived from the build manifest alone (plus who built it and from which
commit), so it can say nothing the manifest does not, and `verify` can recompute what it must
say and compare: subjects are every output file and the manifest itself; the resolved
dependencies are the product manifest, each recipe, the licence policy, every fetched input
(URL and SHA-256) and nested member, and the source commit. Formats:
in-toto Statement v1 (https://in-toto.io/Statement/v1), SLSA Provenance v1
(https://slsa.dev/provenance/v1), DSSE v1 (signature over its pre-authentication encoding).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ortbundle._core.errors import IntegrityError
from ortbundle.config.project import git_output
from ortbundle.evidence.names import PROVENANCE_NAME
from ortbundle.evidence.signing import PublicKey, SecretKey, sign_bytes, verify_bytes

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
BUILD_TYPE = "urn:ortbundle:build-type:manifest:v1"  # the build manifest says the rest
LOCAL_BUILDER = (
    "urn:ortbundle:builder:local"  # a workstation: ORTBUNDLE_BUILDER_ID names a better one
)
POLICY_NAME = "licenses/policy.toml"
_COMPONENT = "provenance"


@dataclass(frozen=True)
class BuildContext:
    """Who built, from which commit: the part of provenance the manifest does not carry."""

    builder_id: str
    commit: str | None  # the source commit; None outside a git checkout
    repository: str | None  # the source repository's URI, when the CI names one
    invocation: str | None  # the CI run's URL


def build_context(root: Path, environ: Mapping[str, str] | None = None) -> BuildContext:
    """From the CI's environment (GitHub Actions' variables), else the checkout itself."""
    env = os.environ if environ is None else environ
    server, repo = env.get("GITHUB_SERVER_URL", ""), env.get("GITHUB_REPOSITORY", "")
    workflow_ref, run_id = env.get("GITHUB_WORKFLOW_REF", ""), env.get("GITHUB_RUN_ID", "")
    on_github = bool(env.get("GITHUB_ACTIONS") and server and repo)
    builder = env.get("ORTBUNDLE_BUILDER_ID", "").strip()
    if not builder:
        builder = f"{server}/{workflow_ref}" if on_github and workflow_ref else LOCAL_BUILDER
    commit = env.get("GITHUB_SHA", "").strip() if on_github else ""
    return BuildContext(
        builder_id=builder,
        commit=commit or _git_head(root),
        repository=f"git+{server}/{repo}" if on_github else None,
        invocation=f"{server}/{repo}/actions/runs/{run_id}" if on_github and run_id else None,
    )


def _git_head(root: Path) -> str | None:

    head = git_output(root, "rev-parse", "--verify", "-q", "HEAD")
    return head if head is not None and len(head) in (40, 64) else None


def _subjects(manifest: bytes, document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every output file (links are their targets' names, not artifacts) and the manifest."""
    subjects = [
        {"name": o["path"], "digest": {"sha256": o["sha256"]}}
        | ({"annotations": {"signer": o["signer"]}} if "signer" in o else {})
        for o in document["outputs"]
        if "link_to" not in o
    ]
    subjects.append({"name": "manifest.json", "digest": {"sha256": _sha256(manifest)}})
    return sorted(subjects, key=lambda s: str(s["name"]))


def _dependencies(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What the build read: its configuration files by digest, its downloads by URL and digest."""
    product = document["product"]
    deps: list[dict[str, Any]] = [
        {"name": product["manifest"], "digest": {"sha256": product["manifest_sha256"]}},
        {"name": POLICY_NAME, "digest": {"sha256": document["policy_sha256"]}},
    ]
    deps += [{"name": r["path"], "digest": {"sha256": r["sha256"]}} for r in document["recipes"]]
    deps += [
        {"name": t["path"], "digest": {"sha256": t["sha256"]}}
        for t in document.get("templates", [])
    ]
    for item in document["inputs"]:
        name = f"{item['component']}:{item['source']}"
        entry: dict[str, Any] = {"name": name, "digest": {"sha256": item["sha256"]}}
        if item.get("url"):
            entry["uri"] = item["url"]
        if "build" in item:  # built from source: which inputs are its source archives, and how
            build = item["build"]
            entry["annotations"] = {
                "built_from": [f"{item['component']}:{sid}" for sid in build["sources"]],
                "build": {k: v for k, v in build.items() if k != "sources"},
            }
        deps.append(entry)
        deps += [
            {"name": f"{name}!{n['member']}", "digest": {"sha256": n["sha256"]}}
            for n in item.get("nested", [])
        ]
    return deps


def statement(manifest: bytes, context: BuildContext) -> dict[str, Any]:
    """The in-toto Statement v1 with its SLSA v1 provenance predicate, for this manifest."""
    document = json.loads(manifest)
    product = document["product"]
    source: dict[str, Any] = {"name": "source"}
    if context.repository:
        source["uri"] = context.repository
    dependencies = _dependencies(document)
    if context.commit:
        source["digest"] = {"gitCommit": context.commit}
        dependencies.insert(0, source)
    targets = sorted(
        {o["path"].split("/")[1][: -len(".json")] for o in document["outputs"] if _is_record(o)}
    )
    metadata: dict[str, Any] = {}
    if context.invocation:
        metadata["invocationId"] = context.invocation
    return {
        "_type": STATEMENT_TYPE,
        "subject": _subjects(manifest, document),
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {
                    "product": product["name"],
                    "version": product["version"],
                    "manifest": product["manifest"],
                    "targets": targets,
                },
                "internalParameters": {
                    "tool": document["tool"],
                    "source_date_epoch": document["source_date_epoch"],
                },
                "resolvedDependencies": dependencies,
            },
            "runDetails": {
                "builder": {"id": context.builder_id},
                "metadata": metadata,
            },
        },
    }


def _is_record(output: Mapping[str, Any]) -> bool:
    parts = str(output["path"]).split("/")
    return len(parts) == 2 and parts[0] == "records" and parts[1].endswith(".json")


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: what is signed, binding the type to the bytes."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def envelope_json(manifest: bytes, context: BuildContext, key: SecretKey | None) -> str:
    """The DSSE envelope: signed with the product's key, or with no signature when there is none."""
    payload = (
        json.dumps(statement(manifest, context), indent=None, sort_keys=True) + "\n"
    ).encode()
    signatures = []
    if key is not None:
        signature = sign_bytes(pae(PAYLOAD_TYPE, payload), key)
        signatures.append({"keyid": key.key_id_hex, "sig": _b64(signature)})
    envelope = {
        "payloadType": PAYLOAD_TYPE,
        "payload": _b64(payload),
        "signatures": signatures,
    }
    return json.dumps(envelope, indent=2, sort_keys=True) + "\n"


@dataclass(frozen=True)
class ProvenanceCheck:
    builder_id: str
    commit: str | None
    subjects: int
    signed_by: str | None

    def line(self) -> str:
        signed = f"signed by key {self.signed_by}" if self.signed_by else "UNSIGNED"
        return (
            f"provenance OK ({signed}): {self.subjects} subjects, builder {self.builder_id}, "
            f"commit {self.commit or 'unknown'}"
        )


def check_provenance(path: Path, manifest: bytes, public_key: PublicKey | None) -> ProvenanceCheck:
    """The envelope is signed by public_key (when given) and says exactly what the manifest says.

    The statement is recomputed from the manifest with the builder and commit it claims, so a
    subject or dependency added, dropped or changed is caught, not only a bad signature.
    """
    where = str(path)

    def bad(
        why: str, fix: str = "rebuild: the provenance no longer matches its build"
    ) -> IntegrityError:
        return IntegrityError(f"provenance: {why}", component=_COMPONENT, file=where, fix=fix)

    try:
        envelope = json.loads(path.read_bytes())
        payload = base64.b64decode(envelope["payload"], validate=True)
        payload_type = envelope["payloadType"]
        signatures = envelope["signatures"]
        claimed = json.loads(payload)
        predicate = claimed["predicate"]
        builder = predicate["runDetails"]["builder"]["id"]
        metadata = predicate["runDetails"].get("metadata", {})
        deps = predicate["buildDefinition"]["resolvedDependencies"]
    except FileNotFoundError:
        raise bad(
            f"{PROVENANCE_NAME} is missing beside the signed manifest",
            "rebuild with this ortbundle: every signed build writes its provenance",
        ) from None
    except (OSError, ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise bad(f"not a DSSE envelope with an in-toto statement ({exc})") from None
    if payload_type != PAYLOAD_TYPE:
        raise bad(f"payloadType is {payload_type!r}, not {PAYLOAD_TYPE}")
    signed_by = None
    if public_key is not None:
        message = pae(payload_type, payload)
        if not any(
            isinstance(s, dict)
            and s.get("keyid") == public_key.key_id_hex
            and verify_bytes(message, _b64decode(s.get("sig")), public_key)
            for s in signatures
        ):
            raise bad(
                f"no valid signature by key {public_key.key_id_hex}",
                "rebuild and sign with the product's key; do not edit the provenance",
            )
        signed_by = public_key.key_id_hex
    commits = [d["digest"]["gitCommit"] for d in deps if "gitCommit" in d.get("digest", {})]
    source: dict[str, Any] = next((d for d in deps if d.get("name") == "source"), {})
    context = BuildContext(
        builder_id=str(builder),
        commit=commits[0] if commits else None,
        repository=source.get("uri"),
        invocation=metadata.get("invocationId"),
    )
    try:
        expected = statement(manifest, context)
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise bad(f"the manifest cannot be read ({exc})") from None
    if claimed.get("subject") != expected["subject"]:
        raise bad("its subjects differ from the manifest's outputs")
    if claimed != expected:
        raise bad("its statement differs from what the manifest says was built")
    return ProvenanceCheck(str(builder), context.commit, len(expected["subject"]), signed_by)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _b64decode(text: object) -> bytes:
    if not isinstance(text, str):
        return b""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return b""
