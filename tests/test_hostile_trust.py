"""Hostile inputs, trust: a project laid out to make the build believe what is not so — a no-op
that misses an edit made through a link, a licence text that is a link out of the project, a
signing key that does not match the product's public key, a file's mode changed after the
manifest recorded it — and the messages a damaged or odd setup must still get right.

Each case runs the command as a user does (run_build, verify, cache-verify) and checks what it
did and said; the exit codes are the documented ones (2 for configuration, 4 for integrity).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ortbundle._core.errors import ConfigError
from ortbundle.cli.build import run_build
from ortbundle.cli.common import CommandFailed
from ortbundle.evidence.signing import generate_keypair, load_public_key, write_secret_key
from tests.helpers.project import WINDOWS_LICENSES, FakeProject

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


@pytest.mark.parametrize("linked", ["manifest", "recipe", "licence text"])
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
    }[linked]
    elsewhere = (fake.root / "shared") if linked == "licence text" else (tmp_path / "monorepo")
    target = elsewhere / path.name
    _link(path, target)
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


@pytest.mark.parametrize("where", ["licence text", "licence directory", "template"])
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
