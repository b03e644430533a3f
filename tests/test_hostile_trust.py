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
