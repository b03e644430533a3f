"""Archives inside archives: an AAR inside an npm tarball, read through the cache."""

from __future__ import annotations

import hashlib
import io
import random
import zipfile
from pathlib import Path

import pytest

from ortbundle._core.errors import ArchiveError, ConfigError, IntegrityError
from ortbundle.config.recipes import load_recipe
from ortbundle.config.sources import NestedMember, NpmCoordinates, Source
from ortbundle.fetch.archives import extract_member
from ortbundle.fetch.artifacts import Artifact
from ortbundle.fetch.cache import Cache
from ortbundle.fetch.nested import unnest
from tests.helpers.tarballs import make_aar, make_tarball

AAR_MEMBER = "package/Plugins/Android/onnxruntime.aar"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def stored(cache: Cache, tmp: Path, data: bytes) -> Path:
    path = tmp / "incoming"
    path.write_bytes(data)
    return cache.store(path, sha(data), url="http://127.0.0.1/x.tgz").path


def source_for(outer: bytes, *levels: tuple[str, bytes]) -> Source:
    return Source(
        id="aar",
        origin=NpmCoordinates("some-package", "1.0.0"),
        sha256=sha(outer),
        nested=tuple(NestedMember(member, sha(data)) for member, data in levels),
    )


def test_tar_member_is_streamed_and_hashed(tmp_path: Path) -> None:
    aar = make_aar({"jni/arm64-v8a/libx.so": b"x" * 1000})
    tgz = tmp_path / "p.tgz"
    tgz.write_bytes(make_tarball({"package/LICENSE": b"MIT", AAR_MEMBER: aar}))
    got = extract_member(tgz, AAR_MEMBER, tmp_path / "out.aar", label="p.tgz", component="c")
    assert got.sha256 == sha(aar) and got.size == len(aar)
    assert (tmp_path / "out.aar").read_bytes() == aar


def test_unnest_caches_the_inner_archive_and_never_rereads_the_outer(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    aar = make_aar({"jni/x86_64/libx.so": b"y" * 100})
    outer = make_tarball({AAR_MEMBER: aar})
    path = stored(cache, tmp_path, outer)
    source = source_for(outer, (AAR_MEMBER, aar))
    artifact = Artifact(source, path, "http://127.0.0.1/x.tgz", len(outer), downloaded=False)
    first = unnest(cache, artifact, component="c")
    assert first.path.read_bytes() == aar and first.downloaded
    assert first.url == f"http://127.0.0.1/x.tgz#{AAR_MEMBER}"
    path.write_bytes(b"not a tarball any more")  # a second build must not read it
    second = unnest(cache, artifact, component="c")
    assert second.path == first.path and not second.downloaded


def _sdk_zip_in_tarball(
    cache: Cache, tmp_path: Path, aar: bytes, *extra: zipfile.ZipInfo
) -> Artifact:
    """A tarball holding sdk.zip holding the AAR (and `extra` members, each holding its name)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("sdk/runtime.aar", aar)
        for info in extra:
            archive.writestr(info, info.filename)
    middle = buffer.getvalue()
    outer = make_tarball({"package/sdk.zip": middle})
    source = source_for(outer, ("package/sdk.zip", middle), ("sdk/runtime.aar", aar))
    return Artifact(source, stored(cache, tmp_path, outer), "", len(outer), downloaded=False)


def test_two_levels_tarball_zip_aar(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    aar = make_aar({"jni/x86_64/libx.so": b"z"})
    artifact = _sdk_zip_in_tarball(cache, tmp_path, aar)
    assert unnest(cache, artifact, component="c").path.read_bytes() == aar


def test_link_member_of_a_zip_nested_in_a_tarball_is_refused(tmp_path: Path) -> None:
    """A symlink member anywhere in a nested zip (not the member asked for) stops the build."""
    import stat

    cache = Cache(tmp_path / "cache")
    link = zipfile.ZipInfo("sdk/docs/escape")
    link.create_system = 3
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    artifact = _sdk_zip_in_tarball(cache, tmp_path, make_aar({"jni/x86_64/libx.so": b"z"}), link)
    with pytest.raises(ArchiveError, match="member is a symlink: 'sdk/docs/escape'") as failed:
        unnest(cache, artifact, component="c")
    assert failed.value.exit_code == 6
    assert not list((tmp_path / "cache").rglob("runtime.aar"))


def test_nested_pin_mismatch_is_refused_and_nothing_cached(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    aar = make_aar({"jni/x86_64/libx.so": b"z"})
    outer = make_tarball({AAR_MEMBER: aar})
    source = source_for(outer, (AAR_MEMBER, b"something else"))
    artifact = Artifact(source, stored(cache, tmp_path, outer), "", len(outer), downloaded=False)
    with pytest.raises(IntegrityError, match="nested archive") as failed:
        unnest(cache, artifact, component="android-generic")
    assert failed.value.component == "android-generic"
    assert cache.get(sha(b"something else")) is None
    assert not any((tmp_path / "cache" / "partial").iterdir())


@pytest.mark.parametrize(
    ("tarball", "why"),
    [
        (make_tarball({}, symlinks={AAR_MEMBER: "/etc/passwd"}), "symlink"),
        (make_tarball({"package/a": b"a"}, hardlinks={AAR_MEMBER: "package/a"}), "hard link"),
        (make_tarball({AAR_MEMBER: b"1"}, raw_names=((AAR_MEMBER, b"2"),)), "appears twice"),
        (make_tarball({AAR_MEMBER: b"1"}, raw_names=(("package/../../evil", b"x"),)), "'..'"),
        (make_tarball({AAR_MEMBER: b"1"}, raw_names=(("/abs/evil", b"x"),)), "absolute"),
        (make_tarball({"package/other": b"1"}), "has no member"),
        (
            make_tarball({AAR_MEMBER: random.Random(0).randbytes(100_000)})[:5000],
            "not a readable tar",
        ),
        (b"plain bytes, no archive at all", "neither a zip nor a tar"),
    ],
    ids=["symlink", "hardlink", "duplicate", "dotdot", "absolute", "missing", "truncated", "junk"],
)
def test_hostile_tarballs_are_refused(tmp_path: Path, tarball: bytes, why: str) -> None:
    path = tmp_path / "p.tgz"
    path.write_bytes(tarball)
    dest = tmp_path / "out"
    with pytest.raises(ArchiveError, match=why) as failed:
        extract_member(path, AAR_MEMBER, dest, label="p.tgz", component="android-generic")
    assert failed.value.component == "android-generic"
    assert not dest.exists()


RECIPE = """
[component]
name = "nested"
kind = "runtime"
version = "1"
description = "d"
providers = ["CPUExecutionProvider"]

[sources.aar]
npm = {{ package = "p", version = "1.0.0" }}
sha256 = "{zero}"
nested = [{levels}]

[targets.android-x86_64]
entry = "libx.so"
roots = ["libx.so"]
[[targets.android-x86_64.take]]
source = "aar"
libraries = ["jni/x86_64/*.so"]
"""


def test_three_levels_of_nesting_are_refused_up_front(tmp_path: Path) -> None:
    level = '{ member = "a/b.zip", sha256 = "' + "1" * 64 + '" }'
    path = tmp_path / "nested.toml"
    path.write_text(RECIPE.format(zero="0" * 64, levels=", ".join([level] * 3)))
    with pytest.raises(ConfigError, match="nested 3 deep"):
        load_recipe(path)
    path.write_text(RECIPE.format(zero="0" * 64, levels=", ".join([level] * 2)))
    assert len(load_recipe(path).sources["aar"].nested) == 2


def test_a_hostile_nested_member_path_is_refused_up_front(tmp_path: Path) -> None:
    level = '{ member = "../b.zip", sha256 = "' + "1" * 64 + '" }'
    path = tmp_path / "nested.toml"
    path.write_text(RECIPE.format(zero="0" * 64, levels=level))
    with pytest.raises(ConfigError, match="climbs out"):
        load_recipe(path)


def test_the_fetcher_hands_back_the_inner_archive_with_the_outer(tmp_path: Path) -> None:
    """fetch_all unpacks a nested source in the worker that fetched it: the build finds the
    AAR under its own SHA-256 beside the tarball, with no step of its own after the downloads."""
    from ortbundle._core.progress import plain_reporter
    from ortbundle.fetch.artifacts import Fetcher

    cache = Cache(tmp_path / "cache")
    aar = make_aar({"jni/arm64-v8a/libx.so": b"z" * 300})
    outer = make_tarball({"package/LICENSE": b"MIT", AAR_MEMBER: aar})
    stored(cache, tmp_path, outer)  # in the cache already: no registry is asked
    source = source_for(outer, (AAR_MEMBER, aar))
    artifacts = Fetcher(cache, plain_reporter(), offline=True).fetch_all([("c", source)], jobs=2)
    assert set(artifacts) == {source.sha256, source.archive_sha256}
    assert artifacts[source.archive_sha256].path.read_bytes() == aar
    assert artifacts[source.sha256].path.read_bytes() == outer
