"""Hostile inputs, trust: a project laid out to make the build believe what is not so — a no-op
that misses an edit made through a link, a licence text that is a link out of the project, a
signing key that does not match the product's public key, a file's mode changed after the
manifest recorded it — and the messages a damaged or odd setup must still get right.

Each case runs the command as a user does (run_build, verify, cache-verify) and checks what it
did and said; the exit codes are the documented ones (2 for configuration, 4 for integrity).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ortbundle._core.errors import ConfigError, IntegrityError
from ortbundle._core.progress import Reporter
from ortbundle.cli.build import run_build
from ortbundle.cli.common import CommandFailed
from ortbundle.cli.verify import run_verify
from ortbundle.config.project import Project
from ortbundle.evidence.signing import generate_keypair, load_public_key, write_secret_key
from ortbundle.pipeline.build import build
from ortbundle.pipeline.release import release
from tests.helpers.project import WINDOWS_LICENSES, FakeProject
from tests.helpers.toml_edit import set_key

CONFIG = ConfigError.exit_code
LINKED_TEXT = WINDOWS_LICENSES.replace(
    '{ source = "windows", member = "onnxruntime/LICENSE" }', '{ file = "LINKED.txt" }'
)


def _build(fake: FakeProject, capsys: pytest.CaptureFixture[str]) -> str:
    """What `invoke build` printed."""
    capsys.readouterr()
    run_build(fake.options(), root=fake.root)
    return capsys.readouterr().out


def _link(path: Path, target: Path) -> None:
    """Move `path` to `target` and leave a symbolic link in its place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(path, target)
    path.symlink_to(target)


def _dist(fake: FakeProject) -> dict[str, bytes]:
    top = fake.root / "dist"
    return {p.relative_to(top).as_posix(): p.read_bytes() for p in top.rglob("*") if p.is_file()}


# --- 1. the quick no-op record reads through links -------------------------------------------


@pytest.mark.parametrize("linked", ["manifest", "recipe", "licence text", "recipes directory"])
def test_an_edit_through_a_link_is_a_rebuild(
    fake: FakeProject, tmp_path: Path, capsys: pytest.CaptureFixture[str], linked: str
) -> None:
    """A monorepo links manifests/ and recipes/ files in from elsewhere (a licence text from
    another directory of the project): an edit of the linked file, the link untouched, must be
    a rebuild, not "up to date" over the old packages."""
    fake.windows_licenses = LINKED_TEXT
    fake.write()
    (fake.root / "licenses" / "LINKED.txt").write_text("Linked licence text, first edition.\n")
    path, old, new = {
        "manifest": (fake.root / "manifests" / "fakeproduct.toml", "1.2.3", "1.2.4"),
        "recipe": (fake.root / "recipes" / "fake.toml", "Fake runtime", "Fake runtime, edited"),
        "licence text": (fake.root / "licenses" / "LINKED.txt", "first", "second"),
        "recipes directory": (fake.root / "recipes", "Fake runtime", "Fake runtime, edited"),
    }[linked]
    elsewhere = (fake.root / "shared") if linked == "licence text" else (tmp_path / "monorepo")
    target = elsewhere / path.name
    _link(path, target)
    if linked == "recipes directory":  # the whole directory linked in; a file in it edited
        target = target / "fake.toml"
    assert "up to date" not in _build(fake, capsys)
    assert "up to date" in _build(fake, capsys)  # the quick record is written and holds
    before = _dist(fake)
    target.write_text(target.read_text().replace(old, new, 1))
    assert path.is_symlink()
    printed = _build(fake, capsys)
    assert "up to date" not in printed, printed
    after = _dist(fake)
    assert after != before
    if linked == "licence text":
        shipped = [v for k, v in after.items() if k.endswith("licenses/fake/LINKED.txt")]
        assert shipped and all(b"second edition" in v for v in shipped)


# --- 2. what the build reads from the project stays in the project ---------------------------


def _refused(fake: FakeProject) -> str:
    """What `invoke build` said as it refused the project (exit 2), with nothing fetched."""
    fake.server.requests.clear()
    with pytest.raises(CommandFailed) as failed:
        run_build(fake.options(), root=fake.root)
    message = str(failed.value)
    assert failed.value.code == CONFIG, message
    assert "Traceback" not in message
    assert fake.server.requests == []
    assert not (fake.root / "dist").exists()
    return message


@pytest.mark.parametrize(
    "where", ["licence text", "licence directory", "through a linked directory", "template"]
)
def test_a_link_out_of_the_project_is_refused(
    fake: FakeProject, tmp_path: Path, where: str
) -> None:
    """`ln -s /etc/passwd licenses/LINKED.txt` and a rule shipping LINKED.txt: every package
    would carry /etc/passwd as a licence text (a link to the signing key, the secret). Whatever
    the build reads from the project must be in the project: refused, naming link and target."""
    fake.windows_licenses = LINKED_TEXT
    fake.write()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "NOTICE.j2").write_text("{{ product }}\n")
    (outside / "TEXT.txt").write_text("a text kept elsewhere\n")
    if where == "licence text":
        link, target = fake.root / "licenses" / "LINKED.txt", Path("/etc/passwd")
    elif where == "through a linked directory":  # the directory is the project's, its file not
        (fake.root / "licenses" / "LINKED.txt").write_text("the text\n")
        (fake.root / "inner").mkdir()
        (fake.root / "licenses" / "inner").symlink_to(fake.root / "inner")
        link, target = fake.root / "licenses" / "inner" / "passwd.txt", Path("/etc/passwd")
    elif where == "licence directory":
        (fake.root / "licenses" / "LINKED.txt").write_text("the text\n")
        link, target = fake.root / "licenses" / "shared", outside
    else:
        (fake.root / "licenses" / "LINKED.txt").write_text("the text\n")
        (fake.root / "templates").mkdir()
        link, target = fake.root / "templates" / "NOTICE.j2", outside / "NOTICE.j2"
    link.symlink_to(target)
    message = _refused(fake)
    shown = link.relative_to(fake.root).as_posix()
    assert f"{shown} is a link to {target.resolve()}, outside the project" in message, message
    assert "fix: copy the file into the project" in message, message


# --- 4. a signing key that is not the product's -----------------------------------------------


@pytest.mark.parametrize("release", [True, False], ids=["release", "signed build"])
def test_a_secret_key_other_than_the_products_public_key_is_refused(
    fake: FakeProject, tmp_path: Path, release: bool
) -> None:
    """keys/fakeproduct.pub names one key; the build is given another. It would publish a tree
    `invoke verify` rejects ("made by key …, but the public key is …"): refused before anything
    is fetched or published, naming both key ids."""
    fake.write()
    other, _ = generate_keypair()
    write_secret_key(tmp_path / "other.key", other)
    environ = {**fake.environ, "ORTBUNDLE_SIGNING_KEY_FILE": str(tmp_path / "other.key")}
    fake.server.requests.clear()
    with pytest.raises(CommandFailed) as failed:
        run_build(fake.options(release=release, environ=environ), root=fake.root)
    message = str(failed.value)
    assert failed.value.code == CONFIG, message
    product = load_public_key(fake.root / "keys" / "fakeproduct.pub")
    assert (
        f"the signing key is key {other.key_id_hex}, but keys/fakeproduct.pub is key "
        f"{product.key_id_hex}"
    ) in message, message
    assert fake.server.requests == []
    assert not (fake.root / "dist").exists()


def test_the_products_own_key_still_signs(
    fake: FakeProject, capsys: pytest.CaptureFixture[str]
) -> None:
    """The check refuses only a mismatch: the key keys/fakeproduct.pub names signs, and the
    published tree verifies with that public key."""
    fake.write()
    printed = _build(fake, capsys)
    product = load_public_key(fake.root / "keys" / "fakeproduct.pub")
    assert f"by key {product.key_id_hex}" in printed, printed


# --- 5. modes: compared by verify, setuid and setgid refused ------------------------------------


def _shipped_library(version_dir: Path) -> Path:
    return next(
        p
        for p in sorted((version_dir / "linux-x86_64" / "runtimes").rglob("libonnxruntime.so*"))
        if p.is_file() and not p.is_symlink()
    )


def test_verify_compares_a_files_mode_with_the_manifest(
    written: FakeProject, capsys: pytest.CaptureFixture[str]
) -> None:
    """`chmod 4755` on a shipped library: the bytes match, the mode the manifest records does
    not. verify must say so (exit 4), in a line of its own, not "44 files match"."""
    run_build(written.options(), root=written.root)
    version_dir = written.root / "dist" / "fakeproduct" / "1.2.3"
    library = _shipped_library(version_dir)
    library.chmod(0o4755)
    capsys.readouterr()
    with pytest.raises(CommandFailed) as failed:
        run_verify(
            version_dir,
            manifest=None,
            target=None,
            public_key=None,
            allow_unsigned=False,
            product="fakeproduct",
            root=written.root,
        )
    assert failed.value.code == IntegrityError.exit_code, str(failed.value)
    assert "1 with another mode" in str(failed.value), str(failed.value)
    relative = library.relative_to(version_dir).as_posix()
    out = capsys.readouterr().out
    assert f"mode        {relative}: mode 4755, manifest says 0644" in out.splitlines(), out
    assert "files match the manifest" not in out


@pytest.mark.parametrize(
    ("mode", "rewritten"),
    [(0o6755, False), (0o6755, True), (0o2755, True), (0o4755, True)],
    ids=["6755 bit set", "6755 manifest rewritten too", "2755 rewritten", "4755 rewritten"],
)
def test_a_runner_file_with_a_setuid_or_setgid_bit_is_refused(
    written: FakeProject, reporter: Reporter, tmp_path: Path, mode: int, rewritten: bool
) -> None:
    """A runner's library set to 6755: the release must not sign it as "0755" (clearing the
    bit in silence) nor ship it. Its mode is not what the runner's manifest says (the runner's
    tree is refused); with the manifest rewritten to match, the stage refuses the bit itself,
    naming the file and the fix. Nothing is published either way."""
    from tests.test_release import runner_build, vouched

    linux = runner_build(written, reporter, tmp_path / "a", "linux-x86_64")
    windows = runner_build(written, reporter, tmp_path / "b", "windows-x86_64")
    runner_dir = linux / "fakeproduct" / "1.2.3"
    library = _shipped_library(runner_dir)
    library.chmod(mode)
    relative = library.relative_to(runner_dir).as_posix()
    if rewritten:
        manifest = json.loads((runner_dir / "manifest.json").read_text())
        next(o for o in manifest["outputs"] if o["path"] == relative)["mode"] = f"{mode:04o}"
        (runner_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))
    project = Project.at(written.root, tmp_path / "release")
    with pytest.raises(IntegrityError) as caught:
        # the runner's own manifest, vouched for by CI: the runner itself set the bit
        release(project, [linux, windows], written.options(), vouched(linux, windows))
    message = str(caught.value)
    if rewritten:
        assert f"{relative} has the set" in message, message
        assert f"(mode {mode:04o})" in message and "chmod u-s,g-s" in message, message
    else:
        assert f"{relative}: mode {mode:04o}, manifest says 0644" in message, message
    assert not (project.dist / "fakeproduct" / "1.2.3").exists()


# --- 9. a version no file name can hold --------------------------------------------------------


@pytest.mark.parametrize("length", [65, 240, 300])
def test_a_version_too_long_for_a_file_name_is_refused_before_any_fetch(
    fake: FakeProject, length: int
) -> None:
    """At 300 characters the build stopped with exit 12 ("File name too long … use a shorter
    directory"), at 240 it fetched and staged first: a configuration error, said when the
    manifest is read, naming the key and the bound."""
    fake.write()
    set_key(
        fake.root / "manifests" / "fakeproduct.toml", "product.version", "1." + "0" * (length - 2)
    )
    message = _refused(fake)
    assert "`version`: '1.000" in message, message
    assert "' is not one plain name of at most 64 characters" in message, message
    assert "in [product] of manifests/fakeproduct.toml" in message, message


def test_a_version_of_64_characters_builds(fake: FakeProject) -> None:
    fake.write()
    version = "1." + "0" * 62
    set_key(fake.root / "manifests" / "fakeproduct.toml", "product.version", version)
    run_build(fake.options(), root=fake.root)
    assert (fake.root / "dist" / "fakeproduct" / version / "manifest.json").is_file()


# --- 10. a corrupt entry in a read-only cache ---------------------------------------------------


@pytest.mark.mounts
def test_cache_verify_names_a_corrupt_entry_it_cannot_remove(
    written: FakeProject, reporter: Reporter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache mounted read-only (a shared CI volume) holding one entry whose bytes rotted:
    cache-verify said only "could not write a download cache entry: EROFS". It must name the
    entry and its digests, and say why it is still there (exit 4: a corrupt entry)."""
    from ortbundle.cli.cache import run_cache_verify
    from tests.helpers.disks import read_only

    cache = tmp_path / "ro-cache"
    build(written.project, written.options(cache_dir=cache), reporter)
    blob = next(p for p in sorted((cache / "sha256").rglob("*")) if len(p.name) == 64)
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 1
    blob.write_bytes(bytes(data))
    monkeypatch.setenv("ORTBUNDLE_CACHE_DIR", str(cache))
    with read_only(cache), pytest.raises(CommandFailed) as failed:
        run_cache_verify()
    message = str(failed.value)
    assert failed.value.code == IntegrityError.exit_code, message
    assert f"cache entry {blob} failed its hash: expected sha256 {blob.name}" in message, message
    assert "it cannot be removed: the cache is read-only" in message, message
    assert blob.exists()


# --- 11. verify on a version directory that is not there ---------------------------------------


@pytest.mark.parametrize("scratch", [False, True], ids=["nothing", "a scratch tree left"])
def test_verify_of_a_missing_version_directory_says_so(fake: FakeProject, scratch: bool) -> None:
    """A first build killed before it published: `invoke verify` said "no manifest.json in or
    beside this tree … fix: pass --manifest", as if the tree were there. It must say the tree
    does not exist, and name the scratch tree the killed build left, if there is one."""
    from ortbundle.stage.staging import scratch_dir

    fake.write()
    tree = fake.root / "dist" / "fakeproduct" / "1.2.3"
    left = scratch_dir(tree) if scratch else None
    if not scratch:
        tree.parent.mkdir(parents=True)
    with pytest.raises(CommandFailed) as failed:
        run_verify(
            tree,
            manifest=None,
            target=None,
            public_key=None,
            allow_unsigned=False,
            product="fakeproduct",
            root=fake.root,
        )
    message = str(failed.value)
    assert failed.value.code == CONFIG, message
    assert f"{tree} does not exist: no build was published there" in message, message
    assert "pass --manifest" not in message, message
    if left is not None:
        assert f"scratch tree is left beside it, at {left}" in message, message
    else:
        assert "scratch" not in message, message


# --- 14. counted nouns --------------------------------------------------------------------------

_ONE_PLURAL = re.compile(
    r"(?<![\d.])1 (downloads|targets|runtimes|channels|components|files|entries|archives|times)\b"
)


def test_a_count_of_one_takes_the_singular(
    written: FakeProject, capsys: pytest.CaptureFixture[str]
) -> None:
    """A build of one target from one download said "1 downloads" (and "1 targets, 1 runtimes
    pruned and staged"): every counted noun agrees with its count."""
    capsys.readouterr()
    run_build(written.options(targets=("linux-x86_64",)), root=written.root)
    out = capsys.readouterr().out
    assert _ONE_PLURAL.findall(out) == [], out
    assert "; 1 download, " in out, out
    assert re.search(r"^fetch +1 download verified", out, re.M), out
    assert "1 target, 1 runtime pruned and staged" in out, out
