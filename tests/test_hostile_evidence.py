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
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ortbundle._core.errors import IntegrityError
from ortbundle._core.progress import Reporter
from ortbundle.cli.common import CommandFailed
from ortbundle.cli.verify import run_verify
from ortbundle.pipeline.build import build
from tests.helpers.faults import version_dir
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


@pytest.mark.slow
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
            public_key=None,  # the manifest's shape is checked before any key or signature
            allow_unsigned=True,
            product="fakeproduct",
            root=fake.root,
        )
    message = str(failed.value)
    assert failed.value.code == IntegrityError.exit_code, message
    assert f"{manifest}" in message and "ortbundle.manifest/1" in message, message
    assert expected in message, message
    assert "provenance" not in message and "string indices" not in message, message


def _files(tree: Path) -> dict[str, bytes]:
    return {
        p.relative_to(tree).as_posix(): (
            os.readlink(p).encode() if p.is_symlink() else p.read_bytes()
        )
        for p in sorted(tree.rglob("*"))
        if p.is_symlink() or p.is_file()
    }


def test_the_docs_name_every_file_two_identical_builds_write_differently(
    fake: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    """docs/sources.md promises two builds of the same inputs write the same bytes everywhere in
    dist/. Whatever two such builds do write differently (here a second later, elsewhere) must
    be named where the promise is made, or the promise is a lie a checker will trip on."""
    from ortbundle.config.plan import Project

    fake.write()
    trees = []
    for name in ("a", "b"):
        dist = tmp_path / name
        build(Project.at(fake.root, dist), fake.options(), reporter)
        trees.append(_files(dist))
        time.sleep(1.1)  # another second: timings and times may differ
    first, second = trees
    assert set(first) == set(second)
    differing = sorted({Path(p).name for p in first if first[p] != second[p]})
    sources = (Path(__file__).resolve().parents[1] / "docs" / "sources.md").read_text("utf-8")
    claim = next(p for p in sources.split("\n- ") if p.startswith("**Reproducible**"))
    assert "same bytes everywhere in `dist/`" in claim
    unnamed = [name for name in differing if f"`{name}`" not in claim]
    assert unnamed == [], (
        f"differ between identical builds, and docs/sources.md does not say: {unnamed}"
    )


@pytest.mark.slow
def test_an_older_signed_build_in_a_newer_version_s_place_does_not_verify(
    fake: FakeProject, reporter: Reporter
) -> None:
    """A rollback: the signed tree of 1.2.3 moved into dist/fakeproduct/1.2.4. Every file
    matches its manifest and the signature holds, but the directory says 1.2.4 and the
    manifest 1.2.3: `invoke verify -p fakeproduct` (which checks 1.2.4) must not pass it."""
    import shutil

    fake.write()
    build(fake.project, fake.options(), reporter)
    product_dir = version_dir(fake).parent
    shutil.move(product_dir / "1.2.3", product_dir / "old")
    manifest = fake.root / "manifests" / "fakeproduct.toml"
    manifest.write_text(manifest.read_text().replace('version = "1.2.3"', 'version = "1.2.4"'))
    build(fake.project, fake.options(), reporter)
    shutil.rmtree(product_dir / "1.2.4")
    shutil.move(product_dir / "old", product_dir / "1.2.4")
    with pytest.raises(CommandFailed) as failed:
        run_verify(
            None,
            manifest=None,
            target=None,
            public_key=None,
            allow_unsigned=False,
            product="fakeproduct",
            root=fake.root,
        )
    message = str(failed.value)
    assert failed.value.code == IntegrityError.exit_code, message
    assert "1.2.4" in message and "fakeproduct 1.2.3" in message, message


def test_a_file_name_cannot_forge_a_line_of_verify_s_output(
    fake: FakeProject, reporter: Reporter, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file added to a tree, named with a newline, the verdict verify prints on success and
    an escape that moves the terminal's cursor up: listed as unexpected on one line, with
    its control characters escaped."""
    fake.write()
    build(fake.project, fake.options(), reporter)
    (version_dir(fake) / "linux-x86_64" / "x\n44 files match the manifest\x1b[1A").write_text("")
    capsys.readouterr()
    with pytest.raises(CommandFailed) as failed:
        run_verify(
            None,
            manifest=None,
            target=None,
            public_key=None,
            allow_unsigned=False,
            product="fakeproduct",
            root=fake.root,
        )
    out = capsys.readouterr().out
    assert failed.value.code == IntegrityError.exit_code
    assert "unexpected  linux-x86_64/x\\n44 files match the manifest\\x1b[1A" in out, out
    assert "\x1b" not in out and not any(
        line.startswith("44 files match") for line in out.splitlines()
    ), out


def _forge_history(document: dict[str, Any]) -> None:
    """What someone edits into a published build's manifest to make the next report lie: a
    licence, a size and a file that build never shipped."""
    for output in document["outputs"]:
        if output.get("component") == "fake":
            output["license"] = "GPL-3.0-only"
    sized = next(o for o in document["outputs"] if o.get("component") == "fake")
    sized["size"] += 123456
    forged = dict(sized, path="linux-x86_64/runtimes/fake/libforged.so")
    document["outputs"].append(forged)


@pytest.mark.parametrize("signed", [True, False], ids=["signed", "unsigned"])
def test_an_edited_earlier_manifest_is_not_shown_as_history(
    written: FakeProject, reporter: Reporter, signed: bool
) -> None:
    """The previous version's manifest.json is edited after it was published (`verify` on it
    now fails), the version bumped and built: the new report.html names the earlier build as
    failing verification and shows none of its forged figures as fact."""
    environ = (
        written.environ
        if signed
        else {k: v for k, v in written.environ.items() if not k.startswith("ORTBUNDLE_SIGNING")}
    )
    build(written.project, written.options(environ=environ), reporter)
    manifest = version_dir(written) / "manifest.json"
    document = json.loads(manifest.read_text())
    _forge_history(document)
    manifest.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    product = written.root / "manifests" / "fakeproduct.toml"
    product.write_text(product.read_text().replace('version = "1.2.3"', 'version = "1.2.4"'))
    result = build(written.project, written.options(environ=environ), reporter)
    html = (result.version_dir / "report.html").read_text("utf-8")
    changes = html[html.index('<section id="changes">') :]
    assert "FAILED VERIFICATION" in changes and "1.2.3" in changes, changes
    assert "libforged.so" not in changes and "GPL-3.0-only" not in changes, changes
    assert "123,456" not in changes and "<table" not in changes, changes


def test_an_earlier_build_moved_into_an_older_version_s_place_is_not_history(
    written: FakeProject, reporter: Reporter
) -> None:
    """A signed build of 1.2.3 renamed to dist/fakeproduct/1.2.2: its signature holds, but it
    is not the build of 1.2.2, and the next report must not present it as such."""
    build(written.project, written.options(), reporter)
    version_dir(written).rename(version_dir(written).with_name("1.2.2"))
    result = build(written.project, written.options(), reporter)
    html = (result.version_dir / "report.html").read_text("utf-8")
    changes = html[html.index('<section id="changes">') :]
    assert "FAILED VERIFICATION" in changes and "holds the build of 1.2.3, not of 1.2.2" in changes


def test_an_unsigned_earlier_build_is_compared_and_said_to_be_unsigned(
    written: FakeProject, reporter: Reporter
) -> None:
    environ = {k: v for k, v in written.environ.items() if not k.startswith("ORTBUNDLE_SIGNING")}
    build(written.project, written.options(environ=environ), reporter)
    product = written.root / "manifests" / "fakeproduct.toml"
    product.write_text(product.read_text().replace('version = "1.2.3"', 'version = "1.2.4"'))
    result = build(written.project, written.options(), reporter)
    html = (result.version_dir / "report.html").read_text("utf-8")
    changes = html[html.index('<section id="changes">') :]
    assert "FAILED VERIFICATION" not in changes and "Since <strong>fakeproduct 1.2.3" in changes
    assert "fakeproduct 1.2.3 is unsigned" in changes, changes
