"""Hostile runners: a release merges per-target trees only once something outside each tree
vouches for its manifest (a runner key's signature, or the manifest's SHA-256 given through
CI's own channel), re-hashes every file against it and recomputes its inputs from this
project's recipes. A tree's word about itself is not evidence (#44)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ortbundle._core.errors import ConfigError, IntegrityError
from ortbundle._core.progress import Reporter
from ortbundle.cli.common import CommandFailed
from ortbundle.cli.release import run_release
from ortbundle.config.plan import Project
from ortbundle.evidence.names import MANIFEST_NAME, SIGNATURE_NAME
from ortbundle.evidence.signing import generate_keypair, sign
from ortbundle.evidence.verify import verify_tree
from ortbundle.pipeline.release import ENV_RUNNER_MANIFESTS, RunnerTrust, release
from tests.helpers.project import FakeProject
from tests.test_release import runner_build, vouched

VERSION = "fakeproduct/1.2.3"


def _manifest(dist: Path) -> Path:
    return dist / VERSION / MANIFEST_NAME


def _rewrite_manifest(dist: Path, edit: object) -> None:
    path = _manifest(dist)
    document = json.loads(path.read_text())
    edit(document)  # type: ignore[operator]
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")


def _flip_a_byte_and_cover_it(dist: Path, target: str) -> str:
    """Flip one byte of a file of `target` and rewrite that file's manifest entry to match:
    the tree agrees with its own manifest again."""
    document = json.loads(_manifest(dist).read_text())
    entry = next(
        o
        for o in document["outputs"]
        if o["path"].startswith(f"{target}/") and "link_to" not in o and o["size"] > 0
    )
    victim = dist / VERSION / entry["path"]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x01
    victim.write_bytes(bytes(data))

    def cover(doc: dict[str, list[dict[str, object]]]) -> None:
        for output in doc["outputs"]:
            if output["path"] == entry["path"]:
                output["sha256"] = hashlib.sha256(data).hexdigest()

    _rewrite_manifest(dist, cover)
    assert verify_tree(dist / VERSION, ignore_signature=True).ok  # its own word holds
    return str(entry["path"])


def test_a_flipped_byte_covered_in_the_runner_s_manifest_is_refused(
    written: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    """Runner B's tree is altered in transit, file and manifest entry alike: the digest CI
    took when B finished no longer matches, and nothing is published."""
    linux = runner_build(written, reporter, tmp_path / "a", "linux-x86_64")
    windows = runner_build(written, reporter, tmp_path / "b", "windows-x86_64")
    trust = vouched(linux, windows)  # what the build jobs' outputs said
    _flip_a_byte_and_cover_it(windows, "windows-x86_64")
    with pytest.raises(IntegrityError) as caught:
        release(
            Project.at(written.root, tmp_path / "release"),
            [linux, windows],
            written.options(),
            trust,
        )
    message = str(caught.value)
    assert f"runner {windows / VERSION}" in message and MANIFEST_NAME in message, message
    assert "vouched for by nothing" in message and "not among the 2 given" in message, message
    assert caught.value.exit_code == 4
    assert not (tmp_path / "release" / "fakeproduct").exists()


def test_a_runner_manifest_nothing_vouches_for_is_refused(
    written: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    """No runner key signed it and no digest was given: the release refuses to take the
    tree's word, even an untouched one."""
    linux = runner_build(written, reporter, tmp_path / "a", "linux-x86_64")
    windows = runner_build(written, reporter, tmp_path / "b", "windows-x86_64")
    with pytest.raises(IntegrityError, match="vouched for by nothing") as caught:
        release(Project.at(written.root, tmp_path / "release"), [linux, windows], written.options())
    assert "it is not signed" in str(caught.value) and "--runner-manifest" in str(caught.value)


def test_a_rewritten_recipe_digest_is_refused(
    written: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    """Runner B built from an older recipe; its manifest's recipe digest is rewritten to the
    release's. Without a vouched manifest that passed the comparison."""
    recipe = written.root / "recipes" / "fake.toml"
    original = recipe.read_text()
    recipe.write_text(original + "\n# an older recipe\n")
    windows = runner_build(written, reporter, tmp_path / "b", "windows-x86_64")
    trust = vouched(windows)
    recipe.write_text(original)
    linux = runner_build(written, reporter, tmp_path / "a", "linux-x86_64")
    trust = RunnerTrust(manifest_digests=trust.manifest_digests | vouched(linux).manifest_digests)
    digest = hashlib.sha256(original.encode()).hexdigest()

    def forge(doc: dict[str, list[dict[str, str]]]) -> None:
        for item in doc["recipes"]:
            item["sha256"] = digest

    _rewrite_manifest(windows, forge)
    with pytest.raises(IntegrityError, match="vouched for by nothing") as caught:
        release(
            Project.at(written.root, tmp_path / "release"),
            [linux, windows],
            written.options(),
            trust,
        )
    assert f"runner {windows / VERSION}" in str(caught.value)


def test_inputs_a_vouched_manifest_records_are_recomputed_from_the_recipes(
    written: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    """A runner that lies in its own manifest (vouched for: its digest was given) about what it
    fetched: the release recomputes every input from this project's pins and names the runner,
    the file and the field."""
    linux = runner_build(written, reporter, tmp_path / "a", "linux-x86_64")
    windows = runner_build(written, reporter, tmp_path / "b", "windows-x86_64")

    def lie(doc: dict[str, list[dict[str, str]]]) -> None:
        doc["inputs"][0]["sha256"] = "0" * 64

    _rewrite_manifest(windows, lie)
    with pytest.raises(ConfigError) as caught:
        release(
            Project.at(written.root, tmp_path / "release"),
            [linux, windows],
            written.options(),
            vouched(linux, windows),
        )
    message = str(caught.value)
    assert f"runner {windows / VERSION}" in message and str(_manifest(windows)) in message
    assert " sha256: " + "0" * 64 + " vs pinned " in message, message
    assert caught.value.exit_code == 2


def test_a_runner_key_vouches_and_the_release_verifies(
    written: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    """Each runner signs its manifest with a runner key (as `minisign -S -m manifest.json`
    does in a CI step); the release is given its public key, accepts the runners, signs with
    the release key, and `verify` of the result passes. A runner signed by a key the release
    was not given is refused, naming the key."""
    secret, public = generate_keypair()
    dists = [
        runner_build(written, reporter, tmp_path / "a", "linux-x86_64"),
        runner_build(written, reporter, tmp_path / "b", "windows-x86_64"),
    ]
    for dist in dists:
        data = _manifest(dist).read_bytes()
        signature = sign(data, secret, trusted_comment="runner")
        _manifest(dist).with_name(SIGNATURE_NAME).write_text(signature)
    project = Project.at(written.root, tmp_path / "release")
    with pytest.raises(IntegrityError, match="by none of the accepted keys") as caught:
        release(project, dists, written.options())
    assert public.key_id_hex in str(caught.value)
    merged = release(project, dists, written.options(), RunnerTrust(keys=(public,)))
    assert all(r.vouched_by == f"signed by key {public.key_id_hex}" for r in merged.runners)
    report = verify_tree(merged.version_dir, public_key=written.root / "keys" / "fakeproduct.pub")
    assert report.ok and report.signed_by is not None and report.signed_by != public.key_id_hex


def test_invoke_release_takes_the_digests_from_ci_s_channel(
    written: FakeProject,
    reporter: Reporter,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`invoke release` reads the digests from $ORTBUNDLE_RUNNER_MANIFESTS (the generated
    workflow's build job outputs) or --runner-manifest; anything but a SHA-256 is a usage
    error."""
    linux = runner_build(written, reporter, tmp_path / "a", "linux-x86_64")
    windows = runner_build(written, reporter, tmp_path / "b", "windows-x86_64")
    options = written.options()
    with pytest.raises(CommandFailed) as caught:
        run_release(options, [linux, windows], runner_manifests=["beef"], root=written.root)
    assert caught.value.code == 2 and "64 hex digits" in str(caught.value)
    digests = sorted(vouched(linux).manifest_digests | vouched(windows).manifest_digests)
    environ = {**written.environ, ENV_RUNNER_MANIFESTS: ",".join(digests)}
    run_release(
        written.options(environ=environ),
        [linux, windows],
        root=written.root,
        dist=tmp_path / "release",
    )
    out = capsys.readouterr().out
    assert "manifest its SHA-256 was given by CI; hashes checked" in out, out
    assert verify_tree(
        tmp_path / "release" / VERSION, public_key=written.root / "keys" / "fakeproduct.pub"
    ).ok


def test_a_digest_that_is_no_sha256_in_the_environment_is_refused(
    written: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    """A build job's output that went wrong (`sha256sum`'s whole line, a file name) is said,
    not taken as one more digest that vouches for nothing."""
    linux = runner_build(written, reporter, tmp_path / "a", "linux-x86_64")
    line = f"{hashlib.sha256(_manifest(linux).read_bytes()).hexdigest()}  manifest.json"
    environ = {**written.environ, ENV_RUNNER_MANIFESTS: line}
    with pytest.raises(ConfigError, match="holds 'manifest.json', not a manifest's SHA-256"):
        release(
            Project.at(written.root, tmp_path / "release"),
            [linux],
            written.options(environ=environ),
        )
