"""A cache entry that fails its hash is said out loud: on the build's output and summary
(which entry, the expected and found SHA-256, what was done), and by `invoke cache-verify`,
which re-hashes every entry whatever its stat record says."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from ortbundle._core.progress import Reporter
from ortbundle.cli.build import run_build
from ortbundle.cli.cache import run_cache_verify
from ortbundle.cli.common import CommandFailed
from ortbundle.fetch.cache import Cache
from ortbundle.pipeline.build import build
from tests.helpers.project import FakeProject
from tests.test_hostile_bytes import _flip_keep_stat, _meta_lies


def test_a_corrupt_entry_is_named_on_the_build_output_and_in_its_summary(
    fake: FakeProject, reporter: Reporter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.write()
    build(fake.project, fake.options(), reporter)
    pin = fake.pin("windows-x86_64")
    blob = Cache(fake.root / "cache").blob_path(pin)
    _flip_keep_stat(blob)  # 1 byte changed, mtime put back: only ctime tells
    found = hashlib.sha256(blob.read_bytes()).hexdigest()
    capsys.readouterr()
    run_build(fake.options(), root=fake.root, dist=tmp_path / "again")
    out = capsys.readouterr().out
    assert (
        f"cache: {blob} failed its hash: expected sha256 {pin}, found {found} "
        f"({blob.stat().st_size} bytes); removed from the cache; fetched again"
    ) in out
    summary = f"cache: 1 entry failed its hash and was fetched again: {pin[:12]}"
    assert out.index(summary) > out.index(f"cache: {blob} failed")  # said again at the end


def test_an_intact_cache_says_nothing(
    fake: FakeProject, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.write()
    run_build(fake.options(), root=fake.root)
    run_build(fake.options(), root=fake.root, dist=tmp_path / "again")
    assert "failed its hash" not in capsys.readouterr().out


def test_cache_verify_rehashes_every_entry_and_names_the_corrupt_one(
    fake: FakeProject,
    reporter: Reporter,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An entry forged together with its stat record passes a development build's check; the
    sweep re-hashes it anyway."""
    fake.write()
    build(fake.project, fake.options(), reporter)
    monkeypatch.setenv("ORTBUNDLE_CACHE_DIR", str(fake.root / "cache"))
    bad, good = fake.pin("windows-x86_64"), fake.pin("linux-x86_64")
    blob = Cache(fake.root / "cache").blob_path(bad)
    _meta_lies(blob)
    found = hashlib.sha256(blob.read_bytes()).hexdigest()
    assert Cache(fake.root / "cache").get(bad) is not None  # the record vouches for it
    capsys.readouterr()
    with pytest.raises(CommandFailed) as failed:
        run_cache_verify()
    out = capsys.readouterr().out
    assert failed.value.code == 4
    assert f"expected sha256 {bad}, found {found}" in out and "removed from the cache" in out
    assert "2 entries re-hashed, 1 good, 1 bad" in out
    assert not blob.exists() and Cache(fake.root / "cache").get(good) is not None
    run_cache_verify()  # now clean: exit 0
    assert "1 entry re-hashed, 1 good, 0 bad" in capsys.readouterr().out
