"""Hostile inputs, evidence: a manifest.json that is valid JSON but not the manifest a build
writes, given to `invoke verify`.

The signature is the first defence: a signed manifest edited by hand fails it. These cases are
what is left when there is no signature to check (an unsigned development build, its
signature removed, `--allow-unsigned`): the manifest's shape is checked against its schema
before anything reads it, so the message names the manifest and the field, with exit 4 —
never the provenance beside it, and never a Python error text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from ortbundle._core.errors import IntegrityError
from ortbundle._core.progress import Reporter
from ortbundle.cli.common import CommandFailed
from ortbundle.cli.verify import run_verify
from ortbundle.pipeline.build import build
from tests.helpers.faults import public_key, version_dir
from tests.helpers.project import FakeProject


def _outputs_an_object(document: dict[str, Any]) -> str:
    document["outputs"] = {o["path"]: o for o in document["outputs"]}
    return "`outputs` must be a list of objects, not an object"


def _a_missing_sha256(document: dict[str, Any]) -> str:
    first = next(o for o in document["outputs"] if "link_to" not in o)
    del first["sha256"]
    return f"`outputs[0].sha256` is missing ({first['path']})"


def _a_size_as_text(document: dict[str, Any]) -> str:
    document["outputs"][0]["size"] = str(document["outputs"][0]["size"])
    return "`outputs[0].size` must be an integer"


CORRUPTIONS: dict[str, Callable[[dict[str, Any]], str]] = {
    "outputs-an-object": _outputs_an_object,
    "missing-sha256": _a_missing_sha256,
    "size-as-text": _a_size_as_text,
}


@pytest.mark.parametrize("corrupt", CORRUPTIONS)
def test_a_well_formed_but_corrupt_manifest_is_named_not_the_provenance(
    fake: FakeProject, reporter: Reporter, corrupt: str
) -> None:
    fake.write()
    build(fake.project, fake.options(), reporter)
    manifest = version_dir(fake) / "manifest.json"
    document = json.loads(manifest.read_text())
    expected = CORRUPTIONS[corrupt](document)
    manifest.write_text(json.dumps(document, indent=2))
    manifest.with_name("manifest.json.minisig").unlink()  # what is left without a signature
    with pytest.raises(CommandFailed) as failed:
        run_verify(
            version_dir(fake),
            manifest=None,
            target=None,
            public_key=public_key(fake),
            allow_unsigned=True,
            product="fakeproduct",
            root=fake.root,
        )
    message = str(failed.value)
    assert failed.value.code == IntegrityError.exit_code, message
    assert f"{manifest}" in message and "ortbundle.manifest/1" in message, message
    assert expected in message, message
    assert "provenance" not in message and "string indices" not in message, message
