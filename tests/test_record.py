"""The evidence: build manifest, SBOM, signature, verify, and byte-for-byte reproducible output."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from ortbundle._core.errors import ConfigError, IntegrityError
from ortbundle._core.progress import Reporter
from ortbundle.evidence.names import SUMMARY_NAME
from ortbundle.evidence.record import source_date_epoch
from ortbundle.evidence.signing import generate_keypair, write_public_key
from ortbundle.evidence.verify import verify_tree
from ortbundle.pipeline.build import build
from ortbundle.pipeline.result import BuildResult
from tests.helpers.project import FakeProject

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def built(fake: FakeProject, reporter: Reporter) -> BuildResult:
    fake.write()
    return build(fake.project, fake.options(), reporter)


def pub(fake: FakeProject) -> Path:
    return fake.root / "keys" / "fakeproduct.pub"


def test_manifest_lists_every_input_and_output(built: BuildResult, fake: FakeProject) -> None:
    version_dir = built.version_dir
    manifest = json.loads((version_dir / "manifest.json").read_text())
    assert manifest["schema"] == "ortbundle.manifest/1"
    assert manifest["source_date_epoch"] == 1_700_000_000
    assert manifest["product"]["manifest"] == "manifests/fakeproduct.toml"
    assert [r["path"] for r in manifest["recipes"]] == ["recipes/fake.toml"]
    inputs = {i["source"]: i for i in manifest["inputs"]}
    assert set(inputs) == {"linux", "windows"}
    assert inputs["linux"]["sha256"] == fake.pin("linux-x86_64")
    assert inputs["linux"]["url"].startswith(fake.server.url.rsplit("/", 2)[0])
    on_disk = {
        p.relative_to(version_dir).as_posix()
        for p in version_dir.rglob("*")
        if p.is_file() or p.is_symlink()
    } - {"manifest.json", "manifest.json.minisig", "provenance.intoto.json", SUMMARY_NAME}
    outputs = {o["path"]: o for o in manifest["outputs"]}
    assert set(outputs) == on_disk
    assert outputs["linux-x86_64/runtimes/fake/libdep.so.2"]["component"] == "fake"
    assert outputs["linux-x86_64/runtimes/fake/libdep.so.2"]["license"] == "MIT"
    assert outputs["linux-x86_64/runtimes/fake/libonnxruntime.so.1"]["link_to"] == (
        "libonnxruntime.so.1.0.0"
    )
    assert outputs["linux-x86_64/runtime_loader.py"]["mode"] == "0755"
    assert any(p.startswith("packaging/arch/") for p in outputs)
    assert "sbom.cdx.json" in outputs and "audit.json" in outputs
    text = (version_dir / "manifest.json").read_text()
    assert str(fake.root) not in text and os.environ.get("USER", "\0") not in text


def test_sbom_is_valid_cyclonedx_1_6(built: BuildResult, fake: FakeProject) -> None:
    text = (built.version_dir / "sbom.cdx.json").read_text()
    errors = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    assert errors is None, errors
    sbom = json.loads(text)
    assert sbom["specVersion"] == "1.6"
    assert sbom["metadata"]["timestamp"].startswith("2023-11-14T22:13:20")
    components = {c["name"]: c for c in sbom["components"]}
    fake_component = components["fake"]
    assert fake_component["purl"] == "pkg:pypi/onnxruntime-fake@1.0.0" or fake_component[
        "purl"
    ].startswith("pkg:generic/fake@")
    assert fake_component["licenses"] == [{"expression": "MIT"}]
    files = {f["name"] for f in fake_component["components"]}
    assert "linux-x86_64/runtimes/fake/libdep.so.2" in files
    assert "windows-x86_64/runtimes/fake/onnxruntime.dll" in files
    assert components["ortbundle"]["licenses"] == [{"expression": "MIT"}]


def test_signature_verifies_with_minisign(built: BuildResult, fake: FakeProject) -> None:
    if shutil.which("minisign") is None:
        pytest.skip("minisign is not installed (apt-get install minisign)")
    result = subprocess.run(
        ["minisign", "-V", "-p", str(pub(fake)), "-m", str(built.version_dir / "manifest.json")],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "ortbundle manifest fakeproduct 1.2.3 sha256:" in result.stdout


test_signature_verifies_with_minisign = pytest.mark.tools(test_signature_verifies_with_minisign)


def test_verify_passes_on_the_untouched_tree(built: BuildResult, fake: FakeProject) -> None:
    report = verify_tree(built.version_dir, public_key=pub(fake))
    assert report.ok and report.signed_by is not None
    stage = verify_tree(built.version_dir / "linux-x86_64", public_key=pub(fake))
    assert stage.ok and stage.checked > 5


def test_verify_reports_each_tampering_by_path(built: BuildResult, fake: FakeProject) -> None:
    stage = built.version_dir / "windows-x86_64"
    target = stage / "runtimes" / "fake" / "dep.dll"
    data = bytearray(target.read_bytes())
    data[100] ^= 0x01
    target.write_bytes(bytes(data))
    (stage / "runtimes.json").unlink()
    (stage / "runtimes" / "fake" / "extra.dll").write_bytes(b"MZ")
    report = verify_tree(built.version_dir, public_key=pub(fake))
    assert report.modified == ("windows-x86_64/runtimes/fake/dep.dll",)
    assert report.missing == ("windows-x86_64/runtimes.json",)
    assert report.unexpected == ("windows-x86_64/runtimes/fake/extra.dll",)


def test_verify_refuses_an_edited_manifest(built: BuildResult, fake: FakeProject) -> None:
    manifest = built.version_dir / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"size": ', '"size": 1', 1))
    with pytest.raises(IntegrityError, match="does not match"):
        verify_tree(built.version_dir, public_key=pub(fake))


def test_verify_refuses_another_key(built: BuildResult, fake: FakeProject, tmp_path: Path) -> None:
    _, other = generate_keypair()
    write_public_key(tmp_path / "other.pub", other)
    with pytest.raises(IntegrityError, match=other.key_id_hex):
        verify_tree(built.version_dir, public_key=tmp_path / "other.pub")


def test_unsigned_build_verifies_only_when_allowed(
    written: FakeProject, reporter: Reporter
) -> None:
    environ = {k: v for k, v in written.environ.items() if not k.startswith("ORTBUNDLE_SIGNING")}
    result = build(written.project, written.options(environ=environ), reporter)
    assert result.signed_by is None
    assert not (result.version_dir / "manifest.json.minisig").exists()
    with pytest.raises(IntegrityError, match="not signed"):
        verify_tree(result.version_dir)
    assert verify_tree(result.version_dir, allow_unsigned=True).ok
    with pytest.raises(ConfigError, match="must be signed"):
        build(written.project, written.options(environ=environ, release=True), reporter)


def _verify(
    fake: FakeProject,
    tree: Path,
    *,
    signed: bool = False,
    allow_unsigned: bool = False,
    public_key: Path | None = None,
) -> None:
    """What `invoke verify --path TREE --product fakeproduct …` runs."""
    from ortbundle.cli.verify import run_verify

    run_verify(
        tree,
        manifest=None,
        target=None,
        public_key=public_key,
        allow_unsigned=allow_unsigned,
        product="fakeproduct",
        root=fake.root,
        signed=signed,
    )


def test_invoke_verify_checks_an_unsigned_development_tree_and_says_it_is_unsigned(
    written: FakeProject, reporter: Reporter, capsys: pytest.CaptureFixture[str]
) -> None:
    """Right after a development build without a key, `invoke verify` checks every hash, says
    the tree is unsigned, and exits 0; `--signed` (or a key given to check with) fails it."""
    from ortbundle.cli.common import CommandFailed

    environ = {k: v for k, v in written.environ.items() if not k.startswith("ORTBUNDLE_SIGNING")}
    result = build(written.project, written.options(environ=environ), reporter)
    pub(written).unlink()  # the project has no key yet, as the default product has none
    capsys.readouterr()
    _verify(written, result.version_dir)
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith(
        "fakeproduct 1.2.3, UNSIGNED development build: its files are checked against its own "
        "manifest, which no key vouches for (--signed requires a signature)"
    )
    assert out[-1].endswith(" files match the manifest")
    _, other = generate_keypair()
    write_public_key(written.root / "other.pub", other)
    for signed, key in ((True, None), (False, written.root / "other.pub")):
        with pytest.raises(CommandFailed, match="not signed") as caught:
            _verify(written, result.version_dir, signed=signed, public_key=key)
        assert caught.value.code == 4
    with pytest.raises(CommandFailed, match="usage error: --signed asks for") as usage:
        _verify(written, result.version_dir, signed=True, allow_unsigned=True)
    assert usage.value.code == 2

    stage_file = next(result.version_dir.glob("linux-x86_64/runtimes/*/*.so*"))
    stage_file.unlink()  # unsigned is no pass for a changed tree
    with pytest.raises(CommandFailed, match="integrity error: 0 modified, 1 missing") as broken:
        _verify(written, result.version_dir)
    assert broken.value.code == 4


def test_a_signed_tree_never_verifies_without_its_signature(
    built: BuildResult, fake: FakeProject
) -> None:
    """Removing manifest.json.minisig does not make a release an unsigned tree that passes:
    its manifest names the key, and neither the default nor --allow-unsigned accepts it."""
    from ortbundle.cli.common import CommandFailed

    manifest = json.loads((built.version_dir / "manifest.json").read_text())
    key_id = manifest["signing_key_id"]
    assert key_id
    (built.version_dir / "manifest.json.minisig").unlink()
    with pytest.raises(IntegrityError, match=f"says key {key_id} signed it"):
        verify_tree(built.version_dir, allow_unsigned=True)
    for allow_unsigned in (False, True):
        with pytest.raises(CommandFailed, match="manifest.json.minisig is missing") as caught:
            _verify(fake, built.version_dir, allow_unsigned=allow_unsigned)
        assert caught.value.code == 4


def test_source_date_epoch_never_comes_from_the_clock(tmp_path: Path) -> None:
    assert source_date_epoch(tmp_path, {"SOURCE_DATE_EPOCH": "123"}) == 123
    assert source_date_epoch(tmp_path, {}) == 0  # not a git checkout
    with pytest.raises(ConfigError):
        source_date_epoch(tmp_path, {"SOURCE_DATE_EPOCH": "yesterday"})


_BUILD_SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from ortbundle.pipeline.build import BuildOptions, Project, build
    from ortbundle._core.progress import plain_reporter
    root, index, key = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    options = BuildOptions(
        product="fakeproduct", index_url=index, cache_dir=root / "cache", jobs=2,
        environ={"SOURCE_DATE_EPOCH": "1700000000", "ORTBUNDLE_SIGNING_KEY_FILE": key,
                 "HOME": str(root / "home")},
    )
    build(Project.at(root), options, plain_reporter())
    """
)


def _snapshot(tree: Path) -> dict[str, tuple[str, bytes, int, int]]:
    out = {}
    for path in sorted(tree.rglob("*")):
        info = path.lstat()
        if stat.S_ISDIR(info.st_mode) or path.name == SUMMARY_NAME:  # a build's timings
            continue
        kind, data = (
            ("link", os.readlink(path).encode())
            if path.is_symlink()
            else ("file", path.read_bytes())
        )
        out[path.relative_to(tree).as_posix()] = (
            kind,
            data,
            stat.S_IMODE(info.st_mode),
            info.st_mtime_ns,
        )
    return out


def _build_in_subprocess(root: Path, fake: FakeProject, umask: int, tz: str, lang: str) -> None:
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(ROOT),
        "TZ": tz,
        "LC_ALL": lang,
        "LANG": lang,
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    subprocess.run(
        [sys.executable, "-c", _BUILD_SCRIPT, str(root), fake.server.url, str(fake.secret_key)],
        env=env,
        check=True,
        timeout=600,
        preexec_fn=lambda: os.umask(umask),
        cwd=root,
    )


@pytest.mark.tools
def test_two_builds_in_different_places_are_byte_identical(
    written: FakeProject, tmp_path: Path
) -> None:
    first = tmp_path / "first" / "project"
    second = tmp_path / "elsewhere" / "deeper" / "project"
    for copy in (first, second):
        shutil.copytree(
            written.root, copy, ignore=shutil.ignore_patterns("cache", "dist", "private")
        )
    _build_in_subprocess(first, written, 0o022, "UTC", "C.UTF-8")
    _build_in_subprocess(second, written, 0o077, "Pacific/Kiritimati", "C")
    a = _snapshot(first / "dist")
    b = _snapshot(second / "dist")
    assert set(a) == set(b)
    different = [path for path in a if a[path] != b[path]]
    assert different == []
    assert any(p.endswith("-setup.exe") for p in a) == bool(shutil.which("makensis"))
    assert any(p.endswith(".tar.gz") for p in a)


def test_invoke_verify_never_takes_the_key_a_tree_names(
    built: BuildResult, fake: FakeProject, tmp_path: Path
) -> None:
    """A tampered tree that renames its product (and brings its own key) is refused."""
    from ortbundle.cli.common import CommandFailed
    from ortbundle.cli.verify import run_verify

    manifest = built.version_dir / "manifest.json"
    data = json.loads(manifest.read_text())
    data["product"]["name"] = "../../evil"
    manifest.write_text(json.dumps(data))
    with pytest.raises(CommandFailed) as caught:
        run_verify(
            built.version_dir,
            manifest=None,
            target=None,
            public_key=None,
            allow_unsigned=False,
            product="fakeproduct",
            root=fake.root,
        )
    # a usage error (exit 2; #21): the tree's key is never taken, its name never suggested
    assert caught.value.code == 2 and "the manifest says product" in str(caught.value)
    assert "--product ../../evil" not in str(caught.value)


def test_index_credentials_never_reach_the_cache_or_the_manifest(
    written: FakeProject, reporter: Reporter
) -> None:
    index = written.server.url.replace("http://", "http://ci-bot:TOKEN123@")
    result = build(written.project, written.options(index_url=index), reporter)
    manifest = (result.version_dir / "manifest.json").read_text()
    assert "TOKEN123" not in manifest and "ci-bot" not in manifest
    for meta in (written.root / "cache" / "sha256").rglob("*.json"):
        assert "TOKEN123" not in meta.read_text()


def test_a_product_version_cannot_leave_dist(written: FakeProject, reporter: Reporter) -> None:
    manifest = written.root / "manifests" / "fakeproduct.toml"
    manifest.write_text(
        manifest.read_text().replace('version = "1.2.3"', 'version = "../../victim"')
    )
    with pytest.raises(ConfigError, match="is not one plain name"):
        build(written.project, written.options(), reporter)
