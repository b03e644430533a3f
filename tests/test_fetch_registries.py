"""Maven and npm sources against loopback repositories: sidecars, integrity, configuration.

Every test runs with HOME, PATH and the npm/ortbundle variables isolated, so the user's own
~/.m2, ~/.npmrc, mvn and npm are never read.
"""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from rich.console import Console

from ortbundle._core.errors import ConfigError, FetchError, IntegrityError, OfflineError
from ortbundle._core.progress import Reporter
from ortbundle.config.retry import RetryPolicy
from ortbundle.config.sources import MavenCoordinates, NpmCoordinates, Source
from ortbundle.fetch.artifacts import Artifact, Fetcher
from ortbundle.fetch.cache import Cache
from ortbundle.fetch.config.maven import MavenRepository, maven_config, mirror_of_covers
from ortbundle.fetch.config.npm import npm_config
from ortbundle.fetch.maven import maven_metadata, maven_versions
from ortbundle.fetch.npm import npm_versions, packument_url, semver_key
from tests.helpers.maven_server import MavenServer
from tests.helpers.npm_server import NpmServer, make_tarball
from tests.helpers.wheels import sha256_of

FAST = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.02, read_timeout=2.0)
GROUP, ARTIFACT = "com.example.ort", "ort-android"
UNPUBLISHED_AAR = Source("android", MavenCoordinates(GROUP, ARTIFACT, "1.0.0"), "0" * 64)


# ---- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh HOME, a PATH with no mvn or npm, and no npm_config_* / ORTBUNDLE_* settings."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in list(os.environ):
        if name.lower().startswith("npm_config_") or name.startswith("ORTBUNDLE_"):
            monkeypatch.delenv(name)
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("NPM_CONFIG_PREFIX", str(tmp_path / "npm-prefix"))  # no global npmrc
    return home


@pytest.fixture
def maven() -> Iterator[MavenServer]:
    with MavenServer().running() as running:
        yield running


@pytest.fixture
def npm() -> Iterator[NpmServer]:
    with NpmServer().running() as running:
        yield running


@pytest.fixture
def aar_source(maven: MavenServer, monkeypatch: pytest.MonkeyPatch) -> Source:
    """The 1.2.3 AAR, published on `maven`, which ORTBUNDLE_MAVEN_URL names."""
    monkeypatch.setenv("ORTBUNDLE_MAVEN_URL", maven.url)
    return publish_aar(maven)


@pytest.fixture
def web_source(npm: NpmServer, monkeypatch: pytest.MonkeyPatch) -> Source:
    """ort-web 1.0.0, published on `npm`, which ORTBUNDLE_NPM_REGISTRY names."""
    monkeypatch.setenv("ORTBUNDLE_NPM_REGISTRY", npm.url)
    return publish_tgz(npm, "ort-web", "1.0.0")


@pytest.fixture
def out() -> io.StringIO:
    return io.StringIO()


@pytest.fixture
def cache(tmp_path: Path) -> Cache:
    return Cache(tmp_path / "cache")


def fetcher(
    cache: Cache, out: io.StringIO, *, policy: RetryPolicy = FAST, offline: bool = False
) -> Fetcher:
    """A Fetcher whose reporter writes into `out` (warnings included)."""
    console = Console(file=out, highlight=False, soft_wrap=True, width=300)
    return Fetcher(cache, Reporter(console, interactive=False), policy=policy, offline=offline)


def aar(version: str = "1.2.3") -> bytes:
    """A small AAR-shaped zip; its bytes differ per version, and only per version."""
    members = {
        "AndroidManifest.xml": f"<manifest version='{version}'/>".encode(),
        "jni/arm64-v8a/libonnxruntime.so": b"\x7fELF" + b"x" * 3000,
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():  # a fixed date: no clock in the bytes
            archive.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), data)
    return buffer.getvalue()


def publish_aar(server: MavenServer, version: str = "1.2.3") -> Source:
    data = aar(version)
    server.add(GROUP, ARTIFACT, version, data)
    return Source(
        id="android",
        origin=MavenCoordinates(GROUP, ARTIFACT, version),
        sha256=sha256_of_bytes(data),
        size=len(data),
    )


def publish_tgz(server: NpmServer, package: str, version: str) -> Source:
    data = make_tarball(package, version, {"lib/onnxruntime.aar": aar(version)})
    server.add(package, version, data)
    return Source(
        id="npm",
        origin=NpmCoordinates(package, version),
        sha256=sha256_of_bytes(data),
        size=len(data),
    )


def sha256_of_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def assert_cached(cache: Cache, artifact: Artifact, data: bytes) -> None:
    entry = cache.get(artifact.source.sha256)
    assert entry is not None and entry.path.read_bytes() == data
    assert sha256_of(entry.path) == artifact.source.sha256


def assert_nothing_cached(cache: Cache, source: Source) -> None:
    assert cache.get(source.sha256) is None
    assert not cache.partial_path(source.sha256).exists()


# ---- Maven ------------------------------------------------------------------------------------


def test_maven_fetch_checks_the_sha1_and_caches(
    maven: MavenServer, aar_source: Source, cache: Cache, out: io.StringIO
) -> None:
    artifact = fetcher(cache, out).fetch(aar_source, component="android")
    assert artifact.downloaded
    assert artifact.url == f"{maven.url}/com/example/ort/ort-android/1.2.3/ort-android-1.2.3.aar"
    assert_cached(cache, artifact, aar())
    paths = [path for path, _ in maven.requests]
    assert paths[0].endswith(".aar.sha1") and paths[1].endswith(".aar")  # sidecar first
    assert "warning" not in out.getvalue()
    again = fetcher(cache, out).fetch(aar_source, component="android")
    assert not again.downloaded and len(maven.requests) == 2


def test_maven_sha1_mismatch_is_refused_and_nothing_cached(
    maven: MavenServer, aar_source: Source, cache: Cache, out: io.StringIO
) -> None:
    maven.faults.wrong_sha1 = True
    with pytest.raises(IntegrityError, match=r"\.sha1 sidecar publishes sha1") as caught:
        fetcher(cache, out).fetch(aar_source, component="android")
    assert caught.value.component == "android" and caught.value.fix
    assert_nothing_cached(cache, aar_source)


def test_maven_sha1_with_a_filename_is_read(
    maven: MavenServer, aar_source: Source, cache: Cache, out: io.StringIO
) -> None:
    maven.faults.sha1_with_filename = True
    assert fetcher(cache, out).fetch(aar_source, component="android").downloaded


def test_maven_without_sha1_uses_the_sha256_sidecar(
    maven: MavenServer, aar_source: Source, cache: Cache, out: io.StringIO
) -> None:
    maven.faults.no_sha1 = True
    maven.faults.sha256_sidecar = True
    fetcher(cache, out).fetch(aar_source, component="android")
    assert maven.requested(".aar.sha256") == 1 and "warning" not in out.getvalue()


def test_maven_sha256_sidecar_disagreeing_with_the_pin_stops_before_downloading(
    maven: MavenServer, aar_source: Source, cache: Cache, out: io.StringIO
) -> None:
    maven.faults.no_sha1 = True
    maven.faults.sha256_sidecar = True
    maven.faults.wrong_sha256 = True
    with pytest.raises(IntegrityError, match="recipe pins"):
        fetcher(cache, out).fetch(aar_source, component="android")
    assert maven.requested(".aar") == 0
    assert_nothing_cached(cache, aar_source)


def test_maven_without_any_sidecar_warns_and_proceeds(
    maven: MavenServer, aar_source: Source, cache: Cache, out: io.StringIO
) -> None:
    maven.faults.no_sha1 = True
    artifact = fetcher(cache, out).fetch(aar_source, component="android")
    assert_cached(cache, artifact, aar())
    assert "warning: maven:com.example.ort:ort-android:1.2.3@aar" in out.getvalue()
    assert "publishes no .sha1 or .sha256" in out.getvalue()


def test_maven_artifact_missing_moves_to_the_next_repository(
    maven: MavenServer, cache: Cache, out: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = publish_aar(maven)
    with MavenServer().running() as empty:
        monkeypatch.setenv("ORTBUNDLE_MAVEN_URL", f"{empty.url} {maven.url}")
        artifact = fetcher(cache, out).fetch(source, component="android")
        assert artifact.url.startswith(maven.url)
        assert empty.requested(".aar") == 1


def test_maven_artifact_in_no_repository_says_where_it_looked(
    maven: MavenServer, aar_source: Source, cache: Cache, out: io.StringIO
) -> None:
    maven.faults.missing.add(aar_source.filename)
    with pytest.raises(FetchError, match="not in the configured Maven repositories.*not there"):
        fetcher(cache, out).fetch(aar_source, component="android")
    assert_nothing_cached(cache, aar_source)


def test_maven_truncated_body_resumes_and_the_sha1_covers_every_byte(
    maven: MavenServer, aar_source: Source, cache: Cache, out: io.StringIO
) -> None:
    maven.faults.truncate_once = 700
    one_try = RetryPolicy(attempts=1, base_delay=0.01, read_timeout=2.0)
    with pytest.raises(FetchError, match="700 bytes kept for resuming"):
        fetcher(cache, out, policy=one_try).fetch(aar_source, component="android")
    # The next build hashes the kept prefix for the sha1 too, then resumes.
    artifact = fetcher(cache, out).fetch(aar_source, component="android")
    assert_cached(cache, artifact, aar())
    assert maven.requested(".aar") == 2


def test_maven_5xx_is_retried(
    maven: MavenServer, aar_source: Source, cache: Cache, out: io.StringIO
) -> None:
    maven.faults.status_first = [503]
    assert fetcher(cache, out).fetch(aar_source, component="android").downloaded
    assert maven.requested(".aar") == 2


def write_settings(path: Path, mirror_url: str, mirror_of: str = "*,!snapshots") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"""<?xml version="1.0" encoding="UTF-8"?>
<settings xmlns="urn:example:settings-namespace">
  <servers>
    <server><id>corp</id><username>builder</username><password>${{env.CORP_PASS}}</password></server>
  </servers>
  <mirrors>
    <mirror><id>snapshots-only</id><mirrorOf>snapshots</mirrorOf><url>http://127.0.0.1:9/x</url></mirror>
    <mirror><id>corp</id><mirrorOf>{mirror_of}</mirrorOf><url>{mirror_url}</url></mirror>
  </mirrors>
</settings>
""",
        "utf-8",
    )
    return path


def corp_mirror(
    maven: MavenServer, home: Path, monkeypatch: pytest.MonkeyPatch, password: str
) -> Source:
    """~/.m2/settings.xml mirrors to `maven` as server corp, whose password is `password`;
    `maven` takes builder / hunter2 only. Returns the AAR published there."""
    write_settings(home / ".m2" / "settings.xml", maven.url)
    monkeypatch.setenv("CORP_PASS", password)
    maven.faults.basic_auth = ("builder", "hunter2")
    return publish_aar(maven)


def test_settings_mirror_with_server_credentials(
    maven: MavenServer,
    cache: Cache,
    out: io.StringIO,
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = corp_mirror(maven, isolated, monkeypatch, "hunter2")
    artifact = fetcher(cache, out).fetch(source, component="android")
    assert artifact.url.startswith(maven.url) and "hunter2" not in artifact.url
    assert all(auth and auth.startswith("Basic ") for _, auth in maven.requests)
    assert "hunter2" not in out.getvalue()


def test_refused_credentials_say_so_without_the_password(
    maven: MavenServer,
    cache: Cache,
    out: io.StringIO,
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = corp_mirror(maven, isolated, monkeypatch, "wrong-password")
    with pytest.raises(FetchError, match="HTTP 401") as caught:
        fetcher(cache, out).fetch(source, component="android")
    assert "credentials" in str(caught.value) and "wrong-password" not in str(caught.value)
    assert_nothing_cached(cache, source)


def test_settings_variable_that_is_unset_is_a_config_error(isolated: Path) -> None:
    write_settings(isolated / ".m2" / "settings.xml", "http://127.0.0.1:1/maven2")
    with pytest.raises(ConfigError, match=r"\$\{env.CORP_PASS\}"):
        maven_config()


@pytest.mark.parametrize(
    ("pattern", "covers"),
    [
        ("*", True),
        ("central", True),
        ("external:*", True),
        ("external:http:*", False),  # central is https
        ("corp, central", True),
        ("*,!central", False),
        ("external:*,!central", False),
        ("!central,*", False),
        ("snapshots", False),
        ("snapshots,other", False),
    ],
)
def test_mirror_of_patterns(pattern: str, covers: bool) -> None:
    assert mirror_of_covers(pattern) is covers


def test_maven_configuration_order(
    tmp_path: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CORP_PASS", "x")
    write_settings(isolated / ".m2" / "settings.xml", "http://127.0.0.1:1/user-mirror")
    assert [r.url for r in maven_config().repositories] == ["http://127.0.0.1:1/user-mirror"]
    assert maven_config().repositories[0].auth == ("builder", "x")
    # ORTBUNDLE_MAVEN_SETTINGS replaces ~/.m2/settings.xml
    other = write_settings(tmp_path / "ci-settings.xml", "http://127.0.0.1:2/ci-mirror", "central")
    monkeypatch.setenv("ORTBUNDLE_MAVEN_SETTINGS", str(other))
    assert [r.url for r in maven_config().repositories] == ["http://127.0.0.1:2/ci-mirror"]
    # ORTBUNDLE_MAVEN_URL wins over any settings.xml; credentials leave the URL
    monkeypatch.setenv(
        "ORTBUNDLE_MAVEN_URL", "http://u:s3cret@127.0.0.1:3/first http://127.0.0.1:4/second"
    )
    repositories = maven_config().repositories
    assert [r.url for r in repositories] == [
        "http://127.0.0.1:3/first",
        "http://127.0.0.1:4/second",
    ]
    assert repositories[0].auth == ("u", "s3cret") and repositories[1].auth is None
    assert "s3cret" not in repr(repositories)


def test_a_mirror_of_something_else_is_not_used(isolated: Path) -> None:
    settings = isolated / ".m2" / "settings.xml"
    write_settings(settings, "http://127.0.0.1:1/m", mirror_of="external:*,!central")
    with pytest.raises(ConfigError, match="ORTBUNDLE_MAVEN_URL"):
        maven_config()  # no mvn on PATH either


def fake_maven(root: Path, central: str, *, settings: str | None = None) -> Path:
    """A Maven installation: bin/mvn and lib/maven-model-builder-<v>.jar with its super POM."""
    (root / "bin").mkdir(parents=True)
    (root / "lib").mkdir()
    mvn = root / "bin" / "mvn"
    mvn.write_text("#!/bin/sh\nexit 1\n")
    mvn.chmod(0o755)
    super_pom = f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="urn:example:pom-namespace">
  <modelVersion>4.0.0</modelVersion>
  <repositories>
    <repository><id>central</id><name>Central Repository</name><url>{central}</url></repository>
  </repositories>
</project>
"""
    with zipfile.ZipFile(root / "lib" / "maven-model-builder-3.9.9.jar", "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        jar.writestr("org/apache/maven/model/pom-4.0.0.xml", super_pom)
    with zipfile.ZipFile(root / "lib" / "maven-core-3.9.9.jar", "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
    if settings is not None:
        (root / "conf").mkdir()
        (root / "conf" / "settings.xml").write_text(settings)
    return mvn


def test_default_repository_is_central_from_the_installed_mavens_super_pom(
    maven: MavenServer, cache: Cache, out: io.StringIO, tmp_path: Path
) -> None:
    mvn = fake_maven(tmp_path / "opt" / "maven", maven.url)
    (tmp_path / "bin" / "mvn").symlink_to(mvn)  # as /usr/bin/mvn → …/maven/bin/mvn
    source = publish_aar(maven)
    artifact = fetcher(cache, out).fetch(source, component="android")
    assert artifact.url.startswith(maven.url)
    [repository] = maven_config().repositories
    assert repository.id == "central" and "super POM" in repository.origin


def test_the_installations_settings_mirror_applies_after_the_users(
    tmp_path: Path, isolated: Path
) -> None:
    installed = (
        "<settings><mirrors><mirror><id>site</id><mirrorOf>*</mirrorOf>"
        "<url>http://127.0.0.1:5/site</url></mirror></mirrors></settings>"
    )
    mvn = fake_maven(tmp_path / "opt" / "maven", "http://127.0.0.1:6/c", settings=installed)
    (tmp_path / "bin" / "mvn").symlink_to(mvn)
    assert [r.url for r in maven_config().repositories] == ["http://127.0.0.1:5/site"]


def test_no_maven_configuration_at_all_is_a_config_error(cache: Cache, out: io.StringIO) -> None:
    with pytest.raises(ConfigError, match="ORTBUNDLE_MAVEN_URL") as caught:
        fetcher(cache, out).fetch(UNPUBLISHED_AAR, component="android")
    assert caught.value.fix and "settings.xml" in caught.value.fix


def test_settings_with_a_document_type_is_refused(isolated: Path) -> None:
    settings = isolated / ".m2" / "settings.xml"
    settings.parent.mkdir()
    settings.write_text(
        '<?xml version="1.0"?><!DOCTYPE s [<!ENTITY a "aaaaaaaa">]>'
        "<settings><mirrors><mirror><id>&a;</id></mirror></mirrors></settings>"
    )
    with pytest.raises(ConfigError, match="document type"):
        maven_config()


def test_maven_versions_reads_the_metadata(maven: MavenServer) -> None:
    for version in ("1.0.0", "1.1.0", "1.2.3"):
        publish_aar(maven, version)
    session = requests.Session()
    assert maven_versions(session, [maven.url], GROUP, ARTIFACT, FAST) == [
        "1.0.0",
        "1.1.0",
        "1.2.3",
    ]
    metadata = maven_metadata(
        session, [MavenRepository(maven.url, "m", "test")], GROUP, ARTIFACT, FAST
    )
    assert metadata.release == metadata.latest == "1.2.3"
    with pytest.raises(FetchError, match="no repository has metadata"):
        maven_versions(session, [maven.url], GROUP, "nothing-here", FAST)


def test_offline_maven_fetch_is_refused_when_not_cached(cache: Cache, out: io.StringIO) -> None:
    with pytest.raises(OfflineError):
        fetcher(cache, out, offline=True).fetch(UNPUBLISHED_AAR, component="android")


def test_a_warm_fetch_reads_no_configuration(
    maven: MavenServer,
    npm: NpmServer,
    cache: Cache,
    out: io.StringIO,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ORTBUNDLE_MAVEN_URL", maven.url)
    monkeypatch.setenv("ORTBUNDLE_NPM_REGISTRY", npm.url)
    sources = [publish_aar(maven), publish_tgz(npm, "ort-web", "1.0.0")]
    fetcher(cache, out).fetch_all((("c", s) for s in sources), jobs=2)
    monkeypatch.delenv("ORTBUNDLE_MAVEN_URL")  # any configuration read now would fail
    monkeypatch.delenv("ORTBUNDLE_NPM_REGISTRY")
    warm = fetcher(cache, out).fetch_all((("c", s) for s in sources), jobs=2)
    assert not any(a.downloaded for a in warm.values())


# ---- npm --------------------------------------------------------------------------------------


def test_npm_fetch_checks_integrity_and_shasum_and_caches(
    npm: NpmServer, web_source: Source, cache: Cache, out: io.StringIO
) -> None:
    artifact = fetcher(cache, out).fetch(web_source, component="web")
    assert artifact.url == f"{npm.url}ort-web/-/ort-web-1.0.0.tgz"
    assert_cached(cache, artifact, npm.packages["ort-web"]["1.0.0"])
    document_request = npm.requests[0]
    assert document_request[0] == "/npm/ort-web"
    assert (document_request[1] or "").startswith("application/vnd.npm.install-v1+json")
    assert "warning" not in out.getvalue()


def test_npm_integrity_mismatch_is_refused(
    npm: NpmServer, web_source: Source, cache: Cache, out: io.StringIO
) -> None:
    npm.faults.wrong_integrity = True
    with pytest.raises(IntegrityError, match="registry's integrity publishes sha512") as caught:
        fetcher(cache, out).fetch(web_source, component="web")
    assert caught.value.component == "web"
    assert_nothing_cached(cache, web_source)


def test_npm_shasum_mismatch_is_refused(
    npm: NpmServer, web_source: Source, cache: Cache, out: io.StringIO
) -> None:
    npm.faults.wrong_shasum = True
    with pytest.raises(IntegrityError, match="registry's shasum publishes sha1"):
        fetcher(cache, out).fetch(web_source, component="web")
    assert_nothing_cached(cache, web_source)


def test_npm_pin_mismatch_is_refused(web_source: Source, cache: Cache, out: io.StringIO) -> None:
    wrong = Source(web_source.id, web_source.origin, "f" * 64)
    with pytest.raises(IntegrityError, match="does not match the pin"):
        fetcher(cache, out).fetch(wrong, component="web")
    assert_nothing_cached(cache, wrong)


def test_npm_without_digests_warns_and_proceeds(
    npm: NpmServer, web_source: Source, cache: Cache, out: io.StringIO
) -> None:
    npm.faults.no_digests = True
    assert fetcher(cache, out).fetch(web_source, component="web").downloaded
    assert "warning: npm:ort-web@1.0.0" in out.getvalue()


def test_npm_missing_version_names_the_versions_nearby(
    npm: NpmServer, cache: Cache, out: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORTBUNDLE_NPM_REGISTRY", npm.url)
    for version in ("0.9.0", "1.0.0", "1.1.0", "2.0.0"):
        source = publish_tgz(npm, "ort-web", version)
    npm.faults.hidden_versions.add("1.1.0")
    wanted = Source("npm", NpmCoordinates("ort-web", "1.1.0"), source.sha256)
    with pytest.raises(
        FetchError, match=r"no version 1\.1\.0.*0\.9\.0, 1\.0\.0, 2\.0\.0; latest 2\.0\.0"
    ):
        fetcher(cache, out).fetch(wanted, component="web")
    missing = Source("npm", NpmCoordinates("not-published", "1.0.0"), source.sha256)
    with pytest.raises(FetchError, match="not-published is not in the npm registry"):
        fetcher(cache, out).fetch(missing, component="web")


def test_npmrc_registry_scoped_registry_and_token(
    npm: NpmServer, cache: Cache, out: io.StringIO, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    public = publish_tgz(npm, "ort-web", "1.0.0")
    with NpmServer(prefix="private").running() as private:
        scoped = publish_tgz(private, "@corp/ort", "2.0.0")
        private.faults.token = "t0ken"
        nerf = private.url.removeprefix("http:")
        (isolated / ".npmrc").write_text(
            f"registry={npm.url}\n"
            f"@corp:registry={private.url}\n"
            f"{nerf}:_authToken=${{CORP_TOKEN}}\n"
            "; a comment\n"
        )
        monkeypatch.setenv("CORP_TOKEN", "t0ken")
        artifacts = fetcher(cache, out).fetch_all([("web", public), ("corp", scoped)], jobs=2)
        assert all(a.downloaded for a in artifacts.values())
        assert artifacts[scoped.sha256].url.startswith(private.url)
        # the scoped name is escaped (requests upper-cases the escape; registries take both)
        assert private.requests[0][0].lower() == "/private/@corp%2fort"
        assert private.authorizations() == ["Bearer t0ken", "Bearer t0ken"]
        assert set(npm.authorizations()) == {None}  # the token never leaves its prefix
        assert "t0ken" not in out.getvalue()


def test_npm_token_naming_an_unset_variable_is_a_config_error(
    npm: NpmServer, cache: Cache, out: io.StringIO, isolated: Path
) -> None:
    source = publish_tgz(npm, "ort-web", "1.0.0")
    nerf = npm.url.removeprefix("http:")
    (isolated / ".npmrc").write_text(f"registry={npm.url}\n{nerf}:_authToken=${{NPM_TOKEN}}\n")
    with pytest.raises(ConfigError, match="NPM_TOKEN"):
        fetcher(cache, out).fetch(source, component="web")
    assert npm.requests == []


def test_npm_registry_precedence(
    tmp_path: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (isolated / ".npmrc").write_text("registry=http://127.0.0.1:1/user/\n")
    assert npm_config().registry == "http://127.0.0.1:1/user/"
    project = tmp_path / "project"
    project.mkdir()
    (project / ".npmrc").write_text('registry = "http://127.0.0.1:2/project/"\n')
    assert npm_config(project).registry == "http://127.0.0.1:2/project/"
    monkeypatch.setenv("NPM_CONFIG_REGISTRY", "http://127.0.0.1:3/upper/")
    assert npm_config(project).registry == "http://127.0.0.1:3/upper/"
    monkeypatch.setenv("npm_config_registry", "http://127.0.0.1:4/env/")
    config = npm_config(project)
    assert config.registry == "http://127.0.0.1:4/env/" and config.origin == "npm_config_registry"
    monkeypatch.setenv("ORTBUNDLE_NPM_REGISTRY", "http://127.0.0.1:5/ours/")
    assert npm_config(project).registry_for("@any/pkg")[0] == "http://127.0.0.1:5/ours/"
    # a user config elsewhere, as npm_config_userconfig says
    monkeypatch.delenv("ORTBUNDLE_NPM_REGISTRY")
    monkeypatch.delenv("NPM_CONFIG_REGISTRY")
    monkeypatch.delenv("npm_config_registry")
    elsewhere = tmp_path / "ci.npmrc"
    elsewhere.write_text("registry=http://127.0.0.1:6/ci/\n")
    monkeypatch.setenv("NPM_CONFIG_USERCONFIG", str(elsewhere))
    assert npm_config().registry == "http://127.0.0.1:6/ci/"


def test_npm_global_npmrc_then_npms_own_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = tmp_path / "node"
    (prefix / "bin").mkdir(parents=True)
    npm_script = prefix / "bin" / "npm"
    npm_script.write_text(
        '#!/bin/sh\n[ "$1 $2 $3" = "config get registry" ] && echo http://127.0.0.1:7/default/\n'
    )
    npm_script.chmod(0o755)
    monkeypatch.delenv("NPM_CONFIG_PREFIX")
    monkeypatch.setenv("PATH", str(prefix / "bin"))
    config = npm_config()
    assert config.registry == "http://127.0.0.1:7/default/" and "npm config get" in config.origin
    (prefix / "etc").mkdir()
    (prefix / "etc" / "npmrc").write_text("registry=http://127.0.0.1:8/global/\n")
    config = npm_config()
    assert config.registry == "http://127.0.0.1:8/global/"
    assert config.origin == str(prefix / "etc" / "npmrc")


def test_no_npm_registry_at_all_is_a_config_error(cache: Cache, out: io.StringIO) -> None:
    source = Source("npm", NpmCoordinates("ort-web", "1.0.0"), "0" * 64)
    with pytest.raises(ConfigError, match="ORTBUNDLE_NPM_REGISTRY") as caught:
        fetcher(cache, out).fetch(source, component="web")
    assert caught.value.component == "web"


def test_npm_cafile_unless_requests_ca_bundle(
    tmp_path: Path, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "corp-ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    (isolated / ".npmrc").write_text(f"registry=http://127.0.0.1:1/\ncafile={bundle}\n")
    assert npm_config().cert == str(bundle)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "other.pem"))
    assert npm_config().cert == str(tmp_path / "other.pem")


def test_npm_versions_in_semver_order_with_dist_tags(npm: NpmServer) -> None:
    for version in ("1.10.0", "1.2.0", "1.2.0-beta.1", "1.9.0", "1.2.0-beta.10", "1.2.0-beta.2"):
        publish_tgz(npm, "@corp/ort", version)
    versions, tags = npm_versions(requests.Session(), npm.url, "@corp/ort", FAST)
    assert versions == ["1.2.0-beta.1", "1.2.0-beta.2", "1.2.0-beta.10", "1.2.0", "1.9.0", "1.10.0"]
    assert tags == {"latest": "1.10.0"}


def test_packument_url_and_semver_key() -> None:
    assert (
        packument_url("http://127.0.0.1:1/r/", "@scope/name")
        == "http://127.0.0.1:1/r/@scope%2fname"
    )
    assert packument_url("http://127.0.0.1:1/r", "plain") == "http://127.0.0.1:1/r/plain"
    assert semver_key("not-a-version") < semver_key("0.0.1-alpha") < semver_key("0.0.1")
