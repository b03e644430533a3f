"""Hostile conditions, disks: every OS error on a path the tool writes is one message.

A full disk (a small tmpfs), a read-only mount (a bind mount remounted ro), a directory the
user may not write (root without CAP_DAC_OVERRIDE, through setpriv), too many open files
(RLIMIT_NOFILE in a child), a name too long, and a quota (injected through the tool's own
fault point, since a test cannot ask the kernel for one): each ends the build with exit 12 and
one line naming the path, what was being written, the errno in words and the fix; nothing
half-written stays in dist/, and the previous tree there is intact. The cache and dist/ sit
on separate filesystems in each case.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
from pathlib import Path

import pytest

from ortbundle._core.errors import DiskError
from ortbundle._core.faults import ENV as FAULT_ENV
from ortbundle._core.oserrors import disk_error
from ortbundle._core.progress import Reporter
from ortbundle.cli.build import run_build
from ortbundle.cli.common import CommandFailed
from ortbundle.cli.keygen import run_keygen
from ortbundle.fetch.cache import Cache
from ortbundle.pipeline.build import build
from tests.helpers.disks import cli_build, read_only, tmpfs
from tests.helpers.faults import (
    assert_published_and_verified,
    big_payload,
    pin_size,
    snapshot,
    unverified_in_cache,
    version_dir,
)
from tests.helpers.project import FakeProject

DISK = DiskError.exit_code


def _newer(fake: FakeProject) -> None:
    """Change an input, so the next build must write a whole new tree."""
    product = fake.root / "manifests" / "fakeproduct.toml"
    product.write_text(product.read_text().replace("A synthetic product", "A newer product"))


def _leftovers(dist: Path) -> list[str]:
    return sorted(p.name for p in dist.rglob(".*") if ".partial-" in p.name or ".old-" in p.name)


def test_exit_code_is_documented() -> None:
    tasks = (Path(__file__).resolve().parents[1] / "docs" / "tasks.md").read_text("utf-8")
    assert DISK == 12 and "12 a disk" in tasks


@pytest.mark.slow
@pytest.mark.mounts
def test_a_full_dist_disk_is_one_message_and_the_old_tree_stays(
    fake: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    """The new tree is larger than the old one by more than the disk holds, which the
    preflight (a lower bound: the old tree's size) cannot know: the disk fills mid-build."""
    fake.write()
    with tmpfs(tmp_path / "small", 1280) as small:  # the old tree (report.html too) fits
        dist = small / "dist"
        build(fake.project.__class__.at(fake.root, dist), fake.options(), reporter)
        old = snapshot(version_dir(fake, dist))
        fake.linux["onnxruntime/capi/libdep.so.2"] += big_payload(512 << 10)  # staged 3 times
        fake.write()
        outcome = cli_build(fake, cache=fake.root / "cache", dist=dist)
        assert outcome.code == DISK, outcome.message
        assert "disk error:" in outcome.message and "could not write" in outcome.message
        assert "No space left on device (ENOSPC)" in outcome.message
        assert f"free space on {small}" in outcome.message or f"on {small} (" in outcome.message
        assert str(dist) in outcome.message and "Traceback" not in outcome.message
        assert snapshot(version_dir(fake, dist)) == old  # the previous tree, intact
        assert _leftovers(dist) == []  # nothing half-written
    assert unverified_in_cache(fake.root / "cache") == []


@pytest.mark.mounts
def test_a_packaging_tool_failing_on_a_full_disk_is_a_disk_error(tmp_path: Path) -> None:
    """makensis says "fwrite failed" in its own words: a failed tool on an all-but-full
    filesystem is reported as the full disk it is; on a roomy one it is the tool's failure."""
    from ortbundle._core.oserrors import tool_ran_out

    assert tool_ran_out("makensis", tmp_path, "the installer") is None
    with tmpfs(tmp_path / "small", 64) as small:
        (small / "filler").write_bytes(b"\0" * (60 << 10))
        error = tool_ran_out("makensis", small, "the installer")
    assert error is not None and error.exit_code == DISK
    assert "makensis could not write the installer: No space left on device" in str(error)


@pytest.mark.mounts
def test_preflight_refuses_a_cache_too_small_before_any_download(
    fake: FakeProject, tmp_path: Path
) -> None:
    fake.linux["onnxruntime/data.bin"] = big_payload(2 << 20)
    fake.write()
    pin_size(fake, "linux", fake.wheels["linux-x86_64"].stat().st_size)
    fake.server.requests.clear()
    with tmpfs(tmp_path / "small-cache", 1024) as cache:
        with pytest.raises(CommandFailed) as failed:
            run_build(fake.options(cache_dir=cache), root=fake.root)
    message = str(failed.value)
    assert failed.value.code == DISK, message
    assert f"not enough free space for this build on {cache}" in message
    assert "the downloads into the cache (3 MiB)" in message and "nothing was downloaded" in message
    assert re.search(rf"free \d+ MiB on {re.escape(str(cache))}", message), message
    assert fake.server.requests == []  # not even the index was asked


@pytest.mark.mounts
def test_preflight_counts_the_old_tree_beside_the_new_one(
    fake: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    """dist/ keeps the old tree until the new one is swapped in: both must fit."""
    fake.write()
    with tmpfs(tmp_path / "small", 1100) as small:  # one tree (~700 KiB) fits, two do not
        dist = small / "dist"
        build(fake.project.__class__.at(fake.root, dist), fake.options(), reporter)
        old = snapshot(version_dir(fake, dist))
        _newer(fake)
        fake.server.requests.clear()
        with pytest.raises(CommandFailed) as failed:  # a cold cache: it would download
            run_build(fake.options(cache_dir=tmp_path / "cold"), root=fake.root, dist=dist)
        message = str(failed.value)
        assert failed.value.code == DISK, message
        assert f"not enough free space for this build on {small}" in message
        assert "the new version tree in dist/" in message
        assert fake.server.requests == []
        assert snapshot(version_dir(fake, dist)) == old


@pytest.mark.mounts
def test_a_full_cache_disk_names_the_download_and_what_to_free(
    fake: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    fake.linux["onnxruntime/data.bin"] = big_payload(2 << 20)  # 2 MiB, incompressible
    fake.write()
    with tmpfs(tmp_path / "small", 256) as cache:
        outcome = cli_build(fake, cache=cache, dist=fake.root / "dist")
        assert outcome.code == DISK, outcome.message
        wheel = fake.wheels["linux-x86_64"].name
        assert f"could not write the download of {wheel}" in outcome.message
        assert "No space left on device (ENOSPC)" in outcome.message
        assert re.search(
            rf"free \d+ MiB on {re.escape(str(cache))} \(it has \d+ KiB free", outcome.message
        ), outcome.message
        # the progress line does not claim the download succeeded
        assert f"fetch {wheel}: FAILED" in outcome.stdout, outcome.stdout
        assert f"fetch {wheel}: 0.0 MiB in" not in outcome.stdout
        assert not Cache(cache).blob_path(fake.pin("linux-x86_64")).exists()
    assert not (fake.root / "dist").exists()


def _fill(disk: Path) -> None:
    """Write a filler until the filesystem refuses: not one byte more fits."""
    with (disk / "filler").open("wb", buffering=0) as filler:
        with contextlib.suppress(OSError):
            while True:
                filler.write(b"\0" * 4096)


@pytest.mark.mounts
def test_a_full_disk_met_when_a_download_is_closed_names_the_download(
    fake: FakeProject, tmp_path: Path
) -> None:
    """A wheel smaller than the write buffer reaches the disk only when its file is closed:
    that is where a full disk meets it, and the message must still name the download, its
    file and the cache's filesystem (not `.` and `/`)."""
    fake.write()
    with tmpfs(tmp_path / "small", 256) as cache:
        _fill(cache)
        outcome = cli_build(fake, cache=cache, dist=fake.root / "dist")
    assert outcome.code == DISK, outcome.message
    assert "could not write the download of onnxruntime_fake-1.0.0-" in outcome.message
    assert f"file {cache}/partial/" in outcome.message, outcome.message
    assert re.search(rf"free (space|\d+ MiB) on {re.escape(str(cache))} \(", outcome.message), (
        outcome.message
    )
    assert "[file .]" not in outcome.message and "Traceback" not in outcome.message


@pytest.mark.mounts
def test_a_read_only_dist_is_named(fake: FakeProject, tmp_path: Path) -> None:
    fake.write()
    with read_only(tmp_path / "ro-dist") as dist:
        with pytest.raises(CommandFailed) as failed:
            run_build(fake.options(), root=fake.root, dist=dist)
    message = str(failed.value)
    assert failed.value.code == DISK, message
    assert "could not write the output directory (dist/)" in message
    assert "Read-only file system (EROFS)" in message and "mounted read-only" in message


@pytest.mark.mounts
def test_a_read_only_bind_mount_is_named_not_the_mount_beneath_it(
    fake: FakeProject, tmp_path: Path
) -> None:
    """A bind mount of a directory onto itself has its parent's device number, so
    os.path.ismount cannot see it: the read-only mount is dist/ itself, not the one below."""
    fake.write()
    with read_only(tmp_path / "ro-dist") as dist:
        with pytest.raises(CommandFailed) as failed:
            run_build(fake.options(), root=fake.root, dist=dist)
    message = str(failed.value)
    assert failed.value.code == DISK, message
    assert f"{dist} is mounted read-only" in message, message


@pytest.mark.mounts
def test_a_read_only_cache_is_named(fake: FakeProject, tmp_path: Path) -> None:
    fake.write()
    with read_only(tmp_path / "ro-cache") as cache:
        with pytest.raises(CommandFailed) as failed:
            run_build(fake.options(cache_dir=cache), root=fake.root)
    message = str(failed.value)
    assert failed.value.code == DISK, message
    assert "Read-only file system (EROFS)" in message and str(cache) in message
    assert not (fake.root / "dist").exists()


def test_an_unwritable_dist_is_named_with_the_permission_fix(
    fake: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    """Root writes anywhere: the child drops CAP_DAC_OVERRIDE, so permissions apply to it."""
    as_root = os.geteuid() == 0
    if as_root and shutil.which("setpriv") is None:
        pytest.skip("setpriv is missing (Debian package util-linux)")
    fake.write()
    dist = tmp_path / "dist"
    build(fake.project.__class__.at(fake.root, dist), fake.options(), reporter)
    old = snapshot(version_dir(fake, dist))
    _newer(fake)
    (dist / "fakeproduct").chmod(0o555)
    try:
        outcome = cli_build(
            fake,
            cache=fake.root / "cache",
            dist=dist,
            prefix=["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
            if as_root
            else [],
        )
    finally:
        (dist / "fakeproduct").chmod(0o755)
    assert outcome.code == DISK, outcome.message
    assert "Permission denied (EACCES)" in outcome.message
    assert "could not write the output directory (dist/)" in outcome.message
    assert "fix its owner or permissions" in outcome.message
    assert snapshot(version_dir(fake, dist)) == old


@pytest.mark.slow
def test_too_many_open_files_says_how_to_raise_the_limit(
    fake: FakeProject, reporter: Reporter
) -> None:
    """So few descriptors that even removing the scratch tree may fail (rmtree needs one per
    level): the next build, with the usual limit, removes what the failed one left."""
    fake.write()
    outcome = cli_build(fake, cache=fake.root / "cache", dist=fake.root / "dist", nofile=8)
    assert outcome.code == DISK, outcome.message
    assert "Too many open files (EMFILE)" in outcome.message
    assert "ulimit -n" in outcome.message and "Traceback" not in outcome.message
    assert not (fake.root / "dist" / "fakeproduct" / "1.2.3").exists()
    build(fake.project, fake.options(), reporter)
    assert_published_and_verified(fake)  # and no scratch tree of the failed build is left


def test_a_name_too_long_for_the_filesystem_is_named(fake: FakeProject, tmp_path: Path) -> None:
    fake.write()
    dist = tmp_path / ("d" * 300)
    with pytest.raises(CommandFailed) as failed:
        run_build(fake.options(), root=fake.root, dist=dist)
    message = str(failed.value)
    assert failed.value.code == DISK, message
    assert "File name too long (ENAMETOOLONG)" in message and "shorter directory" in message


def test_a_quota_is_named_with_what_to_free(
    fake: FakeProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EDQUOT needs a quota-enabled filesystem: the tool's fault point raises it instead, at
    the first write it guards (the download into the cache)."""
    fake.write()
    monkeypatch.setenv(FAULT_ENV, "write=EDQUOT")
    with pytest.raises(CommandFailed) as failed:
        run_build(fake.options(), root=fake.root)
    message = str(failed.value)
    assert failed.value.code == DISK, message
    assert "could not write the download of onnxruntime_fake-1.0.0" in message
    assert "Disk quota exceeded (EDQUOT)" in message and "quota on" in message
    monkeypatch.delenv(FAULT_ENV)
    run_build(fake.options(), root=fake.root)  # the next build, with room, completes
    assert_published_and_verified(fake)


@pytest.mark.mounts
def test_an_audit_report_on_a_read_only_disk_is_named(fake: FakeProject, tmp_path: Path) -> None:
    from ortbundle.cli.build import run_audit

    fake.write()
    with read_only(tmp_path / "reports") as reports:
        with pytest.raises(CommandFailed) as failed:
            run_audit(fake.options(), json_path=reports / "audit.json", root=fake.root)
    assert failed.value.code == DISK, str(failed.value)
    assert "could not write the audit report" in str(failed.value)
    assert "Read-only file system (EROFS)" in str(failed.value)


@pytest.mark.mounts
def test_a_key_on_a_read_only_disk_is_named(tmp_path: Path) -> None:
    with read_only(tmp_path / "keys") as keys:
        with pytest.raises(CommandFailed) as failed:
            run_keygen(
                "fakeproduct",
                secret=keys / "fakeproduct.key",
                public=tmp_path / "pub" / "fakeproduct.pub",
                force=False,
                root=tmp_path,
            )
    assert failed.value.code == DISK
    assert "could not write the secret signing key" in str(failed.value)
    assert "Read-only file system (EROFS)" in str(failed.value)


@pytest.mark.parametrize(
    ("number", "fix"),
    [
        (errno.ENOSPC, "free "),
        (errno.EDQUOT, "quota on /"),
        (errno.EROFS, "mounted read-only"),
        (errno.EACCES, "fix its owner or permissions"),
        (errno.EMFILE, "ulimit -n"),
        (errno.ENAMETOOLONG, "shorter directory"),
    ],
)
def test_each_errno_has_its_own_fix(number: int, fix: str, tmp_path: Path) -> None:
    error = disk_error(OSError(number, "x", str(tmp_path / "f")), what="a thing", need=1 << 20)
    assert isinstance(error, DiskError) and fix in str(error)
    assert "could not write a thing: " in str(error) and str(tmp_path / "f") in str(error)


def test_an_error_naming_no_file_never_blames_the_working_directory(tmp_path: Path) -> None:
    """The last translation, at the command boundary: an ENOSPC with no file name (a stream
    flushed late) names the places the command writes, not `.` and the mount beneath it."""
    from ortbundle._core.oserrors import from_oserror, write_places

    cache, dist = tmp_path / "cache", tmp_path / "dist"
    error = from_oserror(
        OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), write_places(cache, dist)
    )
    text = str(error)
    assert error.exit_code == DISK and "[file .]" not in text, text
    assert f"the download cache {cache}" in text and f"the output directory (dist/) {dist}" in text
