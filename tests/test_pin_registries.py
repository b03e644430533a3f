"""pin and pin --check for Maven and npm sources, against a Maven repository and an npm registry
on 127.0.0.1 (tests/helpers), with the synthetic Android project of tests/helpers/android.py."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ortbundle._core.errors import ConfigError, FetchError, IntegrityError
from ortbundle._core.locations import ENV_MAVEN_SETTINGS, ENV_MAVEN_URL, ENV_NPM_REGISTRY
from ortbundle._core.progress import Reporter
from ortbundle.config.sources import NestedMember
from ortbundle.fetch.cache import Cache
from ortbundle.tools.pin import (
    PinOptions,
    PinResult,
    SourceMove,
    check_pins,
    is_prerelease,
    maven_key,
    pin,
    rewrite_recipe,
)
from tests.helpers.android import AAR_MEMBER, BIONIC, K16, AndroidProject, sha256_of
from tests.helpers.elf import make_elf
from tests.helpers.maven_server import MavenServer
from tests.helpers.npm_server import NpmServer, sri
from tests.helpers.project import CORE_EXPORTS, CPU, FAST_RETRY
from tests.helpers.tarballs import make_aar, make_tarball

PACKAGE = "fake-onnxruntime"
ORT = ("com.example.ort", "onnxruntime-android-qnn")
QNN = ("com.example.qti", "qnn-runtime")
COMMENT = "# The stock runtime, npm 1.0.0 with the AAR inside: every comment survives pin.\n"


class IntegrityNpm(NpmServer):
    """The shared NpmServer, plus a sha256 in a version's integrity when a test asks."""

    def __init__(self) -> None:
        super().__init__()
        self.sha256_integrity: dict[str, str] = {}  # version → SRI sha256 token to add

    def document(self, package: str) -> dict[str, Any]:
        data = super().document(package)
        for version, token in self.sha256_integrity.items():
            dist = data["versions"][version]["dist"]
            dist["integrity"] = f"{dist.get('integrity', '')} {token}".strip()
        return data


@dataclass
class Registries:
    maven: MavenServer
    npm: IntegrityNpm


@pytest.fixture
def registries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Registries]:
    """Both registries on 127.0.0.1, configured as a user would; HOME holds no settings."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv(ENV_MAVEN_SETTINGS, raising=False)
    npm = IntegrityNpm()
    with MavenServer().running() as maven, npm.running():
        monkeypatch.setenv(ENV_MAVEN_URL, maven.url)
        monkeypatch.setenv(ENV_NPM_REGISTRY, npm.url)
        yield Registries(maven, npm)


def stock(version: str, member: str = AAR_MEMBER) -> tuple[bytes, bytes]:
    """(tarball, the AAR inside) of the stock runtime at `version`; 1.1.0's core is larger."""
    payload = b"" if version == "1.0.0" else version.encode() * 8000  # past the 16 KB page
    members: dict[str, bytes] = {"headers/onnxruntime_c_api.h": b"/* C API */\n"}
    for abi, machine in (("arm64-v8a", "EM_AARCH64"), ("x86_64", "EM_X86_64")):
        members[f"jni/{abi}/libonnxruntime.so"] = make_elf(
            machine=machine,
            soname="libonnxruntime.so",
            needed=BIONIC,
            align=K16,
            payload=payload,
            exports=CORE_EXPORTS,
            rodata=CPU,
        )
    aar = make_aar(members)
    return make_tarball({"package/LICENSE": b"MIT License\n", member: aar}), aar


def qnn_ort(version: str) -> bytes:
    return make_aar(
        {
            "jni/arm64-v8a/libonnxruntime.so": make_elf(
                machine="EM_AARCH64",
                soname="libonnxruntime.so",
                needed=BIONIC,
                align=K16,
                payload=version.encode() * 100,
                exports=CORE_EXPORTS,
                rodata=("QNNExecutionProvider", *CPU),
            )
        }
    )


@pytest.fixture
def android(tmp_path: Path, registries: Registries) -> AndroidProject:
    """The Android project at its pins (npm 1.0.0, Maven 1.0.0 and 2.0.0), with newer releases
    published: npm 1.1.0 and 2.0.0-beta.1, Maven 1.1.0, 1.2.0-rc1, 1.3.0-SNAPSHOT and QNN 2.1.0."""
    project = AndroidProject(tmp_path / "project", with_qnn=True)
    project.stock = {  # the same bytes stock("1.0.0") makes: a 1.0.0 → 1.1.0 bump changes one file
        f"jni/{abi}/libonnxruntime.so": make_elf(
            machine=machine,
            soname="libonnxruntime.so",
            needed=BIONIC,
            align=K16,
            exports=CORE_EXPORTS,
            rodata=CPU,
        )
        for abi, machine in (("arm64-v8a", "EM_AARCH64"), ("x86_64", "EM_X86_64"))
    }
    project.stock["headers/onnxruntime_c_api.h"] = b"/* C API */\n"
    project.write()
    artifacts = project.artifacts  # what is published, by name (make_aar stamps the time)
    tarball = artifacts["stock.tgz"]
    generic = project.root / "recipes/generic.toml"
    text = generic.read_text()
    text = COMMENT + text.replace(
        "[sources.aar]\n", "# pinned from the registry\n[sources.aar]\n"
    ).replace(
        f'sha256 = "{sha256_of(tarball)}"\n',
        f'sha256 = "{sha256_of(tarball)}"  # the tarball\nsize = {len(tarball)}\n',
    )
    generic.write_text(text)
    artifacts["stock-1.1.0.tgz"], artifacts["stock-1.1.0.aar"] = stock("1.1.0")
    registries.npm.add(PACKAGE, "1.0.0", tarball)
    registries.npm.add(PACKAGE, "1.1.0", artifacts["stock-1.1.0.tgz"])
    registries.npm.add(PACKAGE, "2.0.0-beta.1", stock("2.0.0-beta.1")[0])
    maven = registries.maven
    maven.add(*ORT, "1.0.0", artifacts["onnxruntime-android-qnn-1.0.0.aar"])
    for version in ("1.1.0", "1.2.0-rc1", "1.3.0-SNAPSHOT"):
        artifacts[f"ort-{version}.aar"] = qnn_ort(version)
        maven.add(*ORT, version, artifacts[f"ort-{version}.aar"])
    maven.add(*QNN, "2.0.0", artifacts["qnn-runtime-2.0.0.aar"])
    artifacts["qnn-2.1.0.aar"] = make_aar({**project.qnn, "NEW.txt": b"2.1.0\n"})
    maven.add(*QNN, "2.1.0", artifacts["qnn-2.1.0.aar"])
    return project


def pinned_nested(android: AndroidProject) -> str:
    text = recipe(android, "generic").read_text()
    return text.split(f'member = "{AAR_MEMBER}", sha256 = "', 1)[1][:64]


def options(android: AndroidProject, **overrides: Any) -> PinOptions:
    values: dict[str, Any] = {"cache_dir": android.root / "cache", "retry": FAST_RETRY, "jobs": 2}
    values.update(overrides)
    return PinOptions(**values)


def recipe(android: AndroidProject, name: str) -> Path:
    return android.root / "recipes" / f"{name}.toml"


def run(android: AndroidProject, reporter: Reporter, name: str, **overrides: Any) -> PinResult:
    return pin(android.project, name, options(android, **overrides), reporter)


def states(android: AndroidProject, *components: str) -> dict[str, tuple[str, str | None]]:
    report = check_pins(android.project, components, options(android))
    return {f"{s.component}/{s.source}": (s.state, s.newest) for s in report.statuses}


def test_an_npm_bump_moves_the_version_the_tarball_and_the_nested_archive(
    android: AndroidProject, registries: Registries, reporter: Reporter
) -> None:
    assert states(android, "generic") == {"generic/aar": ("stale", "1.1.0")}
    path = recipe(android, "generic")
    before = path.read_text()
    old_tarball, old_aar_sha = android.artifacts["stock.tgz"], pinned_nested(android)
    new_tarball, new_aar = (
        android.artifacts["stock-1.1.0.tgz"],
        android.artifacts["stock-1.1.0.aar"],
    )

    result = run(android, reporter, "generic")

    assert result.written and result.version == "1.1.0" and result.exit_code == 0
    expected = (
        before.replace(
            f'npm = {{ package = "{PACKAGE}", version = "1.0.0" }}',
            f'npm = {{ package = "{PACKAGE}", version = "1.1.0" }}',
        )
        .replace(
            f'sha256 = "{sha256_of(old_tarball)}"  # the tarball\nsize = {len(old_tarball)}\n',
            f'sha256 = "{sha256_of(new_tarball)}"  # the tarball\nsize = {len(new_tarball)}\n',
        )
        .replace(
            f'member = "{AAR_MEMBER}", sha256 = "{old_aar_sha}"',
            f'member = "{AAR_MEMBER}", sha256 = "{sha256_of(new_aar)}"',
        )
        .replace('kind = "runtime"\nversion = "1.0.0"', 'kind = "runtime"\nversion = "1.1.0"')
        .replace('version = "1.0.0"\nexpression = "MIT"', 'version = "1.1.0"\nexpression = "MIT"')
    )
    after = path.read_text()
    assert after == expected
    assert after.startswith(COMMENT) and "# pinned from the registry\n" in after
    assert "2.0.0-beta.1" not in after  # the pre-release was passed over
    assert "2.0.0-beta.1 skipped: pre-release" in result.notes
    assert any("line 1: a comment mentions 1.0.0" in n for n in result.notes)
    assert any("the archive inside" in n and AAR_MEMBER in n for n in result.notes)
    (move,) = result.moves
    assert (move.kind, move.project, move.old_version, move.new_version) == (
        "npm",
        PACKAGE,
        "1.0.0",
        "1.1.0",
    )
    assert move.new_filename == "fake-onnxruntime-1.1.0.tgz" and move.size == len(new_tarball)
    assert [(n.member, n.sha256) for n in move.nested] == [(AAR_MEMBER, sha256_of(new_aar))]
    text = "\n".join(result.lines())
    assert f"nested {AAR_MEMBER}: sha256 {sha256_of(new_aar)[:16]}" in text
    # both the tarball and the AAR inside it are cached: the next build needs no network
    cache = Cache(android.root / "cache")
    assert cache.get(sha256_of(new_tarball)) is not None
    assert cache.get(sha256_of(new_aar)) is not None

    # the bump report: both Android targets built aside, old and new
    assert result.report is not None and result.report.ok
    (product,) = result.report.products
    assert product.product == "phone" and product.old_error is None
    for bump in product.targets:
        assert [c.name for c in bump.changed] == ["libonnxruntime_generic.so"]
        assert bump.size_delta > 0 and not bump.added and not bump.removed
        assert [(c.component, c.old, c.new) for c in bump.licences] == [
            ("onnxruntime-android", "1.0.0 (MIT)", "1.1.0 (MIT)")
        ]

    assert states(android, "generic") == {"generic/aar": ("current", None)}
    again = run(android, reporter, "generic")
    assert not again.moves and not again.written and path.read_text() == after


def test_a_maven_bump_moves_the_main_source_and_source_moves_the_other(
    android: AndroidProject, registries: Registries, reporter: Reporter
) -> None:
    assert states(android, "qnn") == {
        "qnn/ort": ("unpinned", "1.1.0"),  # no size pinned, and 1.1.0 is out
        "qnn/qnn": ("unpinned", "2.1.0"),
    }
    path = recipe(android, "qnn")
    before = path.read_text()
    old_ort = android.artifacts["onnxruntime-android-qnn-1.0.0.aar"]
    new_ort = android.artifacts["ort-1.1.0.aar"]

    result = run(android, reporter, "qnn")

    assert result.written and result.version == "1.1.0"
    assert "1.3.0-SNAPSHOT skipped: SNAPSHOT" in result.notes
    assert "1.2.0-rc1 skipped: pre-release" in result.notes
    assert [(n.source, n.project, n.version) for n in result.not_moved] == [
        ("qnn", "com.example.qti:qnn-runtime", "2.0.0")
    ]
    assert "invoke pin qnn --source qnn" in result.not_moved[0].reason
    expected = (
        before.replace(
            'artifact = "onnxruntime-android-qnn", version = "1.0.0" }',
            'artifact = "onnxruntime-android-qnn", version = "1.1.0" }',
        )
        .replace(
            f'sha256 = "{sha256_of(old_ort)}"\n',
            f'sha256 = "{sha256_of(new_ort)}"\nsize = {len(new_ort)}\n',
        )
        .replace('version = "1.0.0"\ndescription = "QNN"', 'version = "1.1.0"\ndescription = "QNN"')
        .replace(
            'component = "onnxruntime-android-qnn"\nversion = "1.0.0"',
            'component = "onnxruntime-android-qnn"\nversion = "1.1.0"',
        )
    )
    assert path.read_text() == expected
    assert result.report is not None and result.report.ok
    (bump,) = [t for p in result.report.products for t in p.targets]
    assert bump.target == "android-arm64-v8a"
    assert [c.name for c in bump.changed] == ["libonnxruntime.so"]

    moved = run(android, reporter, "qnn", sources=("qnn",), build=False)
    assert moved.written and moved.version == "2.1.0"
    assert {(e.field, e.old, e.new) for e in moved.edits if "size" not in e.field} == {
        ("sources.qnn.maven.version", "2.0.0", "2.1.0"),
        (
            "sources.qnn.sha256",
            sha256_of(android.artifacts["qnn-runtime-2.0.0.aar"]),
            moved.moves[0].sha256,
        ),
        ("targets.android-arm64-v8a.licenses[1].version", "2.0.0", "2.1.0"),
    }
    after = path.read_text()
    assert 'version = "1.1.0"\ndescription' in after  # the component follows its own project only
    assert states(android, "qnn") == {"qnn/ort": ("current", None), "qnn/qnn": ("current", None)}


def test_an_explicit_version_and_its_errors(
    android: AndroidProject, registries: Registries, reporter: Reporter
) -> None:
    before = recipe(android, "qnn").read_bytes()
    with pytest.raises(FetchError, match=r"1\.9\.0 is not published .*1\.1\.0"):
        run(android, reporter, "qnn", version="1.9.0")
    with pytest.raises(ConfigError, match="recipe qnn has no source nope"):
        run(android, reporter, "qnn", sources=("nope",))
    assert recipe(android, "qnn").read_bytes() == before
    # a pre-release is pinnable when named
    rc = run(android, reporter, "qnn", version="1.2.0-rc1", build=False)
    assert rc.written and 'version = "1.2.0-rc1"' in recipe(android, "qnn").read_text()
    # once pinned to a pre-release, newer pre-releases count; a SNAPSHOT still does not
    assert states(android, "qnn")["qnn/ort"] == ("current", None)


def test_a_nested_member_missing_from_the_new_release_is_an_error(
    android: AndroidProject, registries: Registries, reporter: Reporter
) -> None:
    moved = "package/android/onnxruntime-1.2.0.aar"
    registries.npm.add(PACKAGE, "1.2.0", stock("1.2.0", member=moved)[0])
    path = recipe(android, "generic")
    before = path.read_bytes()
    with pytest.raises(FetchError) as failed:
        run(android, reporter, "generic")
    message = str(failed.value)
    assert f"fake-onnxruntime-1.2.0.tgz has no member '{AAR_MEMBER}'" in message
    assert f"its .aar members: {moved}" in message and "--version" in message
    assert path.read_bytes() == before
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]
    # the release before it still moves
    assert run(android, reporter, "generic", version="1.1.0", build=False).written


def test_check_reports_an_unconfigured_maven_as_unreachable_and_checks_the_rest(
    android: AndroidProject,
    registries: Registries,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.delenv(ENV_MAVEN_URL)
    monkeypatch.setenv("PATH", str(tmp_path / "no-mvn-here"))  # no Maven installation either
    before = {p.name: p.read_bytes() for p in (android.root / "recipes").iterdir()}
    report = check_pins(android.project, (), options(android))
    assert {p.name: p.read_bytes() for p in (android.root / "recipes").iterdir()} == before
    found = {s.source: s for s in report.statuses}
    assert found["aar"].state == "stale" and found["aar"].newest == "1.1.0"  # npm still checked
    for sid in ("ort", "qnn"):
        status = found[sid]
        assert status.state == "unreachable" and status.kind == "maven"
        assert "not checked: no Maven repository is configured" in status.details[0]
        assert "no size" in status.details
        assert ENV_MAVEN_URL in status.command
    assert report.exit_code == FetchError.exit_code and not report.ok
    assert report.unchecked == 2
    lines = report.lines()
    assert "1 of 3 pins checked, 1 need attention; 2 could not be checked" in lines[-1]
    assert any(line.startswith("qnn/ort: maven com.example.ort:") for line in lines)
    data = json.loads(report.to_json())
    assert data["unchecked"] == 2 and data["exit_code"] == 3
    assert [s["state"] for s in data["statuses"]] == ["stale", "unreachable", "unreachable"]


def test_check_reports_a_maven_repository_that_does_not_answer_once(
    android: AndroidProject,
    registries: Registries,
    monkeypatch: pytest.MonkeyPatch,
    reporter: Reporter,
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv(ENV_MAVEN_URL, f"http://127.0.0.1:{port}/maven2")
    report = check_pins(android.project, ("qnn", "generic"), options(android))
    found = {s.source: s for s in report.statuses}
    assert {sid: found[sid].state for sid in found} == {
        "ort": "unreachable",
        "qnn": "unreachable",
        "aar": "stale",
    }
    assert "gave up after 4 attempts" in found["ort"].details[0]
    assert "not asked again" in found["qnn"].details[0]
    # and pin itself fails cleanly, naming the registry's failure
    with pytest.raises(FetchError, match="gave up"):
        pin(android.project, "qnn", options(android), reporter)


def test_check_names_gone_and_mismatched_npm_pins(
    android: AndroidProject, registries: Registries
) -> None:
    npm = registries.npm
    npm.faults.hidden_versions = {"1.0.0"}
    assert states(android, "generic")["generic/aar"] == ("gone", "1.1.0")
    npm.faults.hidden_versions = set()
    npm.sha256_integrity["1.0.0"] = sri("sha256", b"other bytes")
    report = check_pins(android.project, ("generic",), options(android))
    (status,) = report.statuses
    assert status.state == "mismatch" and report.exit_code == IntegrityError.exit_code
    assert status.details[0].startswith("the registry's integrity gives sha256 ")
    npm.sha256_integrity["1.0.0"] = sri("sha256", android.artifacts["stock.tgz"])
    assert states(android, "generic")["generic/aar"] == ("stale", "1.1.0")

    # without a sha256, the sha512 is compared with the pinned file once the cache holds it
    npm.faults.wrong_integrity = True
    npm.sha256_integrity.clear()
    assert states(android, "generic")["generic/aar"] == ("stale", "1.1.0")  # nothing to compare
    cache = Cache(android.root / "cache")
    blob = android.root / "stock.part"
    blob.write_bytes(android.artifacts["stock.tgz"])
    cache.store(blob, sha256_of(android.artifacts["stock.tgz"]), url="test")
    report = check_pins(android.project, ("generic",), options(android))
    assert report.statuses[0].state == "mismatch"
    assert report.statuses[0].details[0].startswith("the registry publishes sha512 ")
    assert "the cached pinned file's is" in report.statuses[0].details[0]

    npm.faults.wrong_integrity = False
    held = (
        recipe(android, "generic")
        .read_text()
        .replace("[sources.aar]\n", '[sources.aar]\nhold = "the app is tested against 1.0.0"\n')
    )
    recipe(android, "generic").write_text(held)
    report = check_pins(android.project, ("generic",), options(android))
    assert report.statuses[0].state == "held" and report.ok
    assert "1.1.0 is out; held: the app is tested against 1.0.0" in report.statuses[0].details


def test_check_names_gone_and_mismatched_maven_pins(
    android: AndroidProject, registries: Registries
) -> None:
    maven = registries.maven
    maven.faults.no_sha1 = True
    maven.faults.sha256_sidecar = maven.faults.wrong_sha256 = True
    report = check_pins(android.project, ("qnn",), options(android))
    assert [s.state for s in report.statuses] == ["mismatch", "mismatch"]
    assert any(d.startswith("the repository's .sha256 is ") for d in report.statuses[0].details)
    assert report.exit_code == IntegrityError.exit_code

    maven.faults = type(maven.faults)()
    maven.faults.wrong_sha1 = True  # compared only with a cached file: the first run cannot tell
    assert states(android, "qnn")["qnn/qnn"] == ("unpinned", "2.1.0")
    qnn = android.artifacts["qnn-runtime-2.0.0.aar"]
    blob = android.root / "qnn.part"
    blob.write_bytes(qnn)
    Cache(android.root / "cache").store(blob, sha256_of(qnn), url="test")
    assert states(android, "qnn")["qnn/qnn"] == ("mismatch", "2.1.0")

    maven.faults = type(maven.faults)()
    del maven.files["com/example/qti/qnn-runtime/2.0.0/qnn-runtime-2.0.0.aar"]
    report = check_pins(android.project, ("qnn",), options(android))
    gone = report.statuses[1]
    assert gone.state == "gone" and "no configured repository has qnn-runtime-2.0.0.aar" in (
        gone.details
    )
    assert report.exit_code == FetchError.exit_code


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("1.0.0", "1.1.0"),
        ("1.9.0", "1.10.0"),
        ("1.1.0-rc1", "1.1.0"),
        ("1.1.0-alpha2", "1.1.0-beta1"),
        ("1.1.0-SNAPSHOT", "1.1.0"),
        ("2.42.0", "2.42.0.251225"),
        ("1.0", "1.0.1"),
    ],
)
def test_maven_versions_order_as_maven_orders_them(older: str, newer: str) -> None:
    assert maven_key(older) < maven_key(newer)
    assert maven_key("1.0") == maven_key("1.0.0")  # trailing zeros do not count


def test_pre_release_looking_versions() -> None:
    for version in ("1.0.0-rc1", "1.0-SNAPSHOT", "2.0.0-M1", "1.0.0-beta", "1.0.0-preview.2"):
        assert is_prerelease("maven", version), version
    for version in ("1.0.0", "2.42.0.251225", "1.29.0"):
        assert not is_prerelease("maven", version), version
    assert is_prerelease("npm", "2.0.0-beta.1") and not is_prerelease("npm", "0.4.9")


def test_rewrite_follows_the_rules_on_the_real_android_recipes() -> None:
    """No network: the repository's Android recipes, moved by hand-made SourceMoves."""
    repo = Path(__file__).resolve().parents[1]
    qnn = (repo / "recipes" / "android-qnn.toml").read_text()

    def maven(source: str, group: str, artifact: str, old: str, new: str) -> SourceMove:
        return SourceMove(
            source,
            f"{group}:{artifact}",
            old,
            f"{artifact}-{old}.aar",
            new,
            f"{artifact}-{new}.aar",
            "a" * 64,
            7,
            None,
            "maven",
            (),
            (f"{group}:{artifact}", artifact),
        )

    ort = maven("ort", "com.microsoft.onnxruntime", "onnxruntime-android-qnn", "1.29.0", "1.30.0")
    main = "com-microsoft-onnxruntime:onnxruntime-android-qnn"
    new, edits, notes = rewrite_recipe(qnn, [ort], main, True)
    fields = {e.field: e.new for e in edits}
    assert fields == {
        "sources.ort.maven.version": "1.30.0",
        "sources.ort.sha256": "a" * 64,
        "sources.ort.size": "7",
        "component.version": "1.30.0",
        "component.description": (
            "ONNX Runtime 1.30.0 for Android with the QNN execution provider (Hexagon NPU)"
        ),
        "targets.android-arm64-v8a.licenses[0].version": "1.30.0",
        "targets.android-arm64-v8a.licenses[0].purl": (
            "pkg:maven/com.microsoft.onnxruntime/onnxruntime-android-qnn@1.30.0?type=aar"
        ),
    }
    assert 'version = "2.42.0"' in new  # the QNN SDK is another project
    assert sum("licenses/onnxruntime-android-1.29.0/" in n for n in notes) == 2  # texts to add
    assert any("ONNX Runtime 1.29.0's texts" in n for n in notes)  # a comment, left to a person

    sdk = maven("qnn", "com.qualcomm.qti", "qnn-runtime", "2.42.0", "2.43.0")
    new, edits, _ = rewrite_recipe(qnn, [sdk], main, False)
    fields = {e.field: e.new for e in edits}
    assert "component.version" not in fields
    assert fields["targets.android-arm64-v8a.licenses[1].version"] == "2.43.0"
    assert fields["targets.android-arm64-v8a.licenses[1].purl"] == (
        "pkg:maven/com.qualcomm.qti/qnn-runtime@2.43.0?type=aar"
    )

    generic = (repo / "recipes" / "android-generic.toml").read_text()
    member = "package/Plugins/Android/onnxruntime.aar"
    npm = SourceMove(
        "aar",
        "com.github.asus4.onnxruntime",
        "0.4.9",
        "com.github.asus4.onnxruntime-0.4.9.tgz",
        "0.5.0",
        "com.github.asus4.onnxruntime-0.5.0.tgz",
        "b" * 64,
        9,
        None,
        "npm",
        (NestedMember(member, "c" * 64),),
        ("com.github.asus4.onnxruntime",),
    )
    new, edits, notes = rewrite_recipe(generic, [npm], "com-github-asus4-onnxruntime", True)
    assert {e.field for e in edits} == {
        "sources.aar.npm.version",
        "sources.aar.sha256",
        "sources.aar.size",
        "sources.aar.nested[0].sha256",
    }
    assert f'nested = [{{ member = "{member}", sha256 = "{"c" * 64}" }}]' in new
    # the wrapper's version is not ONNX Runtime's: nothing else moves, and pin says so
    assert any("[component] version 1.29.0 is not 0.4.9" in n for n in notes)
    assert any("the archive inside" in n for n in notes)
    old_lines, new_lines = generic.splitlines(), new.splitlines()
    assert len(old_lines) == len(new_lines)
    assert sum(a != b for a, b in zip(old_lines, new_lines, strict=True)) == 4


def test_check_reports_sources_without_versions(
    android: AndroidProject, registries: Registries
) -> None:
    """A plain URL and a file in the project: there or gone, matching or not; never stale."""
    data = b"model bytes"
    registries.maven.files["models/m.onnx"] = data  # any file the server has will do
    (android.root / "models").mkdir()
    (android.root / "models/local.onnx").write_bytes(data)
    recipe(android, "model").write_text(
        "[sources.web]\n"
        f'url = "{registries.maven.url}/models/m.onnx"\n'
        f'sha256 = "{sha256_of(data)}"\nsize = {len(data)}\n\n'
        "[sources.local]\n"
        'path = "models/local.onnx"\n'
        f'sha256 = "{sha256_of(data)}"\nsize = {len(data)}\n'
    )
    report = check_pins(android.project, ("model",), options(android))
    assert [(s.kind, s.state, s.version) for s in report.statuses] == [
        ("url", "current", ""),
        ("path", "current", ""),
    ]
    assert report.ok
    del registries.maven.files["models/m.onnx"]
    (android.root / "models/local.onnx").write_bytes(b"retrained")
    report = check_pins(android.project, ("model",), options(android))
    assert [s.state for s in report.statuses] == ["gone", "mismatch"]
    assert "the server no longer has m.onnx" in report.statuses[0].details
    assert report.lines()[1].startswith("model/local: path path:models/local.onnx mismatch")
