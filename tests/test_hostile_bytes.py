"""Hostile inputs, wrong bytes: a cache altered after it was written, through the real build.

A blob, a memoised runtime stage or a memoised package changed on disk must be noticed on use
and rebuilt or fetched again: never shipped, never left looking verified. Already proven
elsewhere: tests/test_fetch.py::test_cache_file_modified_on_disk_is_fetched_again (one flipped
byte, through fetch()), tests/test_incremental.py::test_an_altered_memo_entry_is_rebuilt_not_used
(a memoised library rewritten with other content and size). Wrong bytes on the wire (right
size, wrong hash; an index digest that disagrees with the pin) are in test_hostile_network.py.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from ortbundle._core.progress import Reporter
from ortbundle.config.plan import Project
from ortbundle.fetch.cache import Cache
from ortbundle.pipeline.build import build
from tests.helpers.faults import assert_published_and_verified, unverified_in_cache
from tests.helpers.project import FakeProject

WHEEL = "onnxruntime_fake-1.0.0-cp311-cp311-win_amd64.whl"


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _flip_keep_stat(path: Path) -> None:
    """Change one byte and put the size and mtime back, as a careful attacker would."""
    before = path.stat()
    _flip(path)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-10])


def _append(path: Path) -> None:
    with path.open("ab") as handle:
        handle.write(b"\0trailing")


def _meta_garbage(path: Path) -> None:
    path.with_suffix(".json").write_text("{not json")


def _meta_lies(path: Path) -> None:
    """Alter the blob, then make every stat its metadata records describe the new file."""
    _flip(path)
    info = path.stat()
    meta_path = path.with_suffix(".json")
    meta = json.loads(meta_path.read_text())
    for key in meta:
        if hasattr(info, f"st_{key}"):
            meta[key] = getattr(info, f"st_{key}")
    meta_path.write_text(json.dumps(meta))


def _replaced_by_symlink(path: Path) -> None:
    elsewhere = path.with_name("elsewhere")
    elsewhere.write_bytes(path.read_bytes()[:-1] + b"!")
    path.unlink()
    path.symlink_to(elsewhere.name)


TAMPERING: dict[str, Callable[[Path], None]] = {
    "flipped-byte": _flip,
    "truncated": _truncate,
    "appended": _append,
    "metadata-garbage": _meta_garbage,
    "replaced-by-symlink": _replaced_by_symlink,
}


def _rebuild_elsewhere(
    fake: FakeProject, reporter: Reporter, tmp_path: Path, name: str, *, release: bool = False
) -> Path:
    """Build again into a fresh dist/ (so the whole-build no-op cannot hide the cache's use)."""
    dist = tmp_path / name
    build(Project.at(fake.root, dist), fake.options(release=release), reporter)
    return dist


@pytest.mark.slow
@pytest.mark.parametrize("tamper", TAMPERING)
def test_altered_cache_blob_is_detected_and_fetched_again(
    fake: FakeProject, reporter: Reporter, tmp_path: Path, tamper: str
) -> None:
    fake.write()
    build(fake.project, fake.options(), reporter)
    cache = Cache(fake.root / "cache")
    blob = cache.blob_path(fake.pin("windows-x86_64"))
    TAMPERING[tamper](blob)
    dist = _rebuild_elsewhere(fake, reporter, tmp_path, "again")
    assert fake.server.file_requests(WHEEL) == 2  # detected on use, fetched again
    assert blob.read_bytes() == fake.wheels["windows-x86_64"].read_bytes()
    assert not blob.is_symlink()
    assert_published_and_verified(fake, dist)
    assert [p for p in unverified_in_cache(cache.root) if "elsewhere" not in p] == []


def test_blob_altered_with_its_mtime_put_back_is_detected(
    fake: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    fake.write()
    build(fake.project, fake.options(), reporter)
    _flip_keep_stat(Cache(fake.root / "cache").blob_path(fake.pin("windows-x86_64")))
    _rebuild_elsewhere(fake, reporter, tmp_path, "again")
    assert fake.server.file_requests(WHEEL) == 2


@pytest.mark.slow
def test_blob_altered_with_its_metadata_rewritten_is_detected_by_a_release(
    fake: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    """A development build trusts the cache's own stat records (as make trusts timestamps); a
    release re-hashes every cached input, so a blob forged together with its record is caught."""
    fake.write()
    build(fake.project, fake.options(), reporter)
    _meta_lies(Cache(fake.root / "cache").blob_path(fake.pin("windows-x86_64")))
    _rebuild_elsewhere(fake, reporter, tmp_path, "again", release=True)
    assert fake.server.file_requests(WHEEL) == 2


@pytest.mark.slow
def test_memoised_stage_forged_with_its_record_is_caught_by_a_release(
    fake: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    fake.write()
    build(fake.project, fake.options(), reporter)
    for library in _memo_libraries(fake):
        _flip(library)
        meta = library.parent / "closure.json"
        record = json.loads(meta.read_text())
        record["stamps"][library.name] = {
            "size": library.stat().st_size,
            "mtime_ns": library.stat().st_mtime_ns,
            "ctime_ns": library.stat().st_ctime_ns,
            "ino": library.stat().st_ino,
        }
        meta.write_text(json.dumps(record))
    dist = _rebuild_elsewhere(fake, reporter, tmp_path, "again", release=True)
    assert_published_and_verified(fake, dist)


def _memo_libraries(fake: FakeProject) -> list[Path]:
    found = sorted((fake.root / "cache" / "stages").rglob("libdep.so.2"))
    assert found, "the first build memoised its runtime stages"
    return found


def test_memoised_stage_altered_behind_its_stamps_is_not_shipped(
    fake: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    fake.write()
    build(fake.project, fake.options(), reporter)
    for library in _memo_libraries(fake):
        _flip_keep_stat(library)
    dist = _rebuild_elsewhere(fake, reporter, tmp_path, "again")
    assert_published_and_verified(fake, dist)


def test_memoised_packages_altered_on_disk_are_rebuilt(
    fake: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    """Tarballs and installers memoised under outputs/: re-hashed before use, so rebuilt."""
    fake.write()
    build(fake.project, fake.options(), reporter)
    outputs = [
        p
        for p in (fake.root / "cache" / "outputs").rglob("*")
        if p.is_file() and p.suffix not in (".sha256", ".lock")
    ]
    assert outputs
    for output in outputs:
        # break the hard link to the published file first: alter the cache's copy only
        data = output.read_bytes()
        output.unlink()
        output.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    dist = _rebuild_elsewhere(fake, reporter, tmp_path, "again")
    assert_published_and_verified(fake, dist)
    assert_published_and_verified(fake)  # the first dist shares no altered byte either


def test_a_published_file_edited_with_its_mtime_put_back_is_no_no_op(
    fake: FakeProject, reporter: Reporter
) -> None:
    """Same size, mtime put back (`touch -r`), same inode and mode: only ctime moved. `invoke
    verify` says `modified`, so the no-op must not call the tree up to date."""
    fake.write()
    build(fake.project, fake.options(), reporter)
    notice = fake.root / "dist" / "fakeproduct" / "1.2.3" / "linux-x86_64" / "NOTICE"
    _flip_keep_stat(notice)
    again = build(fake.project, fake.options(), reporter)
    assert again.up_to_date is None, "an edited output was called up to date"
    assert_published_and_verified(fake)


def test_a_cache_repair_is_in_the_build_summary_and_its_json(
    fake: FakeProject, reporter: Reporter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/sources.md promises a download that failed its hash is named in the build's summary:
    build-summary.json and `--json` carry it (entry, expected and found SHA-256, what was
    done), not only a line a CI log may have scrolled past."""
    from ortbundle.cli.build import run_build

    fake.write()
    build(fake.project, fake.options(), reporter)
    pin = fake.pin("windows-x86_64")
    blob = Cache(fake.root / "cache").blob_path(pin)
    _flip_keep_stat(blob)
    found = hashlib.sha256(blob.read_bytes()).hexdigest()
    capsys.readouterr()
    dist = tmp_path / "again"
    run_build(fake.options(), root=fake.root, dist=dist, as_json=True)
    printed = json.loads(capsys.readouterr().out)
    on_disk = json.loads((dist / "fakeproduct" / "1.2.3" / "build-summary.json").read_text())
    for document in (printed, on_disk):
        (repair,) = document["artifacts"]["repaired"]
        assert repair["entry"] == str(blob) and repair["expected"] == pin, repair
        assert repair["found"] == found and repair["action"].endswith("fetched again"), repair


def test_cache_verify_says_what_it_did_not_that_it_fetched(
    fake: FakeProject,
    reporter: Reporter,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`invoke cache-verify` downloads nothing: a bad entry is removed, and the next build
    downloads it; saying "fetched again" would claim a repair that has not happened."""
    from ortbundle.cli.cache import run_cache_verify
    from ortbundle.cli.common import CommandFailed

    fake.write()
    build(fake.project, fake.options(), reporter)
    monkeypatch.setenv("ORTBUNDLE_CACHE_DIR", str(fake.root / "cache"))
    cache = Cache(fake.root / "cache")
    _flip(cache.blob_path(fake.pin("windows-x86_64")))
    cache.blob_path(fake.pin("linux-x86_64")).with_suffix(".json").unlink()  # no record
    fake.server.requests.clear()
    capsys.readouterr()
    with pytest.raises(CommandFailed):
        run_cache_verify()
    out = capsys.readouterr().out
    assert "fetched again" not in out, out
    assert out.count("the next build downloads it again") == 2, out
    assert fake.server.requests == []


@pytest.mark.slow
def test_a_release_is_never_called_up_to_date_on_the_cache_s_word(
    fake: FakeProject, capsys: pytest.CaptureFixture[str]
) -> None:
    """A release takes no record stored in the cache as proof (docs/sources.md): not of a memo, and not
    of dist/ either. A published file altered and the cache's record of the tree rewritten to
    match (what anyone who can write the cache can do): a release no-op must re-hash dist/
    against its signed manifest, find the change and build again, not print "up to date" and
    "signed" over it."""
    from ortbundle.cli.build import run_build
    from ortbundle.pipeline.noop import _state_file, stat_tree

    fake.write()
    run_build(fake.options(release=True), root=fake.root)
    version = fake.root / "dist" / "fakeproduct" / "1.2.3"
    notice = version / "linux-x86_64" / "NOTICE"
    notice.write_text(notice.read_text().replace("Fake", "Evil"))
    state = _state_file(fake.root / "cache", version)
    record = json.loads(state.read_text())
    record["tree"] = stat_tree(version)
    state.write_text(json.dumps(record))
    capsys.readouterr()
    run_build(fake.options(release=True), root=fake.root)
    assert "up to date" not in capsys.readouterr().out
    assert_published_and_verified(fake)
    run_build(fake.options(release=True), root=fake.root)  # untouched now: re-hashed, a no-op
    assert "up to date" in capsys.readouterr().out


def test_a_no_op_does_not_claim_the_last_build_s_downloads_and_repairs(
    fake: FakeProject, reporter: Reporter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`invoke build --json` with nothing to do prints the last build's document marked up to
    date: what that build downloaded and repaired is not what this run did (nothing)."""
    from ortbundle.cli.build import run_build

    fake.write()
    build(fake.project, fake.options(), reporter)
    _flip_keep_stat(Cache(fake.root / "cache").blob_path(fake.pin("windows-x86_64")))
    dist = tmp_path / "again"
    capsys.readouterr()
    run_build(fake.options(), root=fake.root, dist=dist, as_json=True)
    built = json.loads(capsys.readouterr().out)
    assert built["artifacts"]["repaired"] and built["artifacts"]["downloaded"] == 1
    run_build(fake.options(), root=fake.root, dist=dist, as_json=True)
    no_op = json.loads(capsys.readouterr().out)
    assert no_op["up_to_date"] is True
    assert no_op["artifacts"]["repaired"] == [] and no_op["artifacts"]["downloaded"] == 0, no_op
