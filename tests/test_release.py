"""CI at scale: per-target runners merged into one release with the bytes of a single build."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import yaml

from ortbundle._core.errors import ConfigError, IntegrityError, OfflineError
from ortbundle._core.progress import Reporter
from ortbundle.config.plan import Project
from ortbundle.config.products import load_product
from ortbundle.evidence.names import MANIFEST_NAME, REPORT_NAME, SUMMARY_NAME
from ortbundle.evidence.verify import verify_tree
from ortbundle.fetch.cache import Cache, export_cache, import_cache
from ortbundle.pipeline.build import build
from ortbundle.pipeline.release import RunnerTrust, release
from ortbundle.tools.ci_workflow import EVIDENCE, workflow_yaml
from tests.helpers.project import FakeProject

ROOT = Path(__file__).resolve().parent.parent


def contents(tree: Path) -> dict[str, tuple[bytes, int]]:
    out = {}
    for p in sorted(tree.rglob("*")):
        if p.relative_to(tree).as_posix() == SUMMARY_NAME:  # a build's timings: not its output
            continue
        if p.is_symlink():
            out[p.relative_to(tree).as_posix()] = (os.readlink(p).encode(), 0o777)
        elif p.is_file():
            out[p.relative_to(tree).as_posix()] = (p.read_bytes(), p.stat().st_mode & 0o777)
    return out


def runner_build(fake: FakeProject, reporter: Reporter, where: Path, target: str) -> Path:
    """One runner: its own dist/ and its own cache, no signing key (runners hold none)."""
    environ = {k: v for k, v in fake.environ.items() if not k.startswith("ORTBUNDLE_SIGNING")}
    build(
        Project.at(fake.root, where / "dist"),
        fake.options(targets=(target,), cache_dir=where / "cache", environ=environ),
        reporter,
    )
    return where / "dist"


def vouched(*dists: Path, product: str = "fakeproduct", version: str = "1.2.3") -> RunnerTrust:
    """What CI's own channel hands the release job: each runner manifest's SHA-256, taken
    when the runner finished (before anything could touch the tree in transit)."""
    return RunnerTrust(
        manifest_digests=frozenset(
            hashlib.sha256((d / product / version / MANIFEST_NAME).read_bytes()).hexdigest()
            for d in dists
        )
    )


@pytest.mark.slow
def test_merged_release_equals_a_single_machine_build(
    written: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    single = build(Project.at(written.root, tmp_path / "single"), written.options(), reporter)
    linux = runner_build(written, reporter, tmp_path / "runner-linux", "linux-x86_64")
    windows = runner_build(written, reporter, tmp_path / "runner-windows", "windows-x86_64")
    # a per-target build gives that target the same bytes as the full build
    assert contents(linux / "fakeproduct/1.2.3/linux-x86_64") == contents(
        single.version_dir / "linux-x86_64"
    )
    merged = release(
        Project.at(written.root, tmp_path / "release"),
        [linux, windows],
        written.options(),
        vouched(linux, windows),
    )
    assert contents(merged.version_dir) == contents(single.version_dir)
    report = verify_tree(merged.version_dir, public_key=written.root / "keys" / "fakeproduct.pub")
    assert report.ok and report.signed_by is not None
    # what the workflow's publish job attaches to the GitHub release, report.html included
    assert sorted(n for n in EVIDENCE if not (merged.version_dir / n).is_file()) == []
    assert REPORT_NAME in EVIDENCE


def test_release_refuses_runners_built_from_other_recipes(
    written: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    linux = runner_build(written, reporter, tmp_path / "a", "linux-x86_64")
    recipe = written.root / "recipes" / "fake.toml"
    recipe.write_text(recipe.read_text() + "\n# a later edit\n")
    windows = runner_build(written, reporter, tmp_path / "b", "windows-x86_64")
    with pytest.raises(ConfigError) as caught:
        release(
            Project.at(written.root, tmp_path / "release"),
            [linux, windows],
            written.options(),
            vouched(linux, windows),
        )
    message = str(caught.value)
    assert "different inputs" in message and "recipes fake:" in message
    assert str(linux / "fakeproduct" / "1.2.3") in message
    assert not (tmp_path / "release" / "fakeproduct" / "1.2.3").exists()


def test_release_refuses_a_tampered_runner_tree(
    written: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    linux = runner_build(written, reporter, tmp_path / "a", "linux-x86_64")
    windows = runner_build(written, reporter, tmp_path / "b", "windows-x86_64")
    (windows / "fakeproduct/1.2.3/windows-x86_64/runtimes.json").write_text("{}")
    with pytest.raises(IntegrityError, match="modified +windows-x86_64/runtimes.json"):
        release(
            Project.at(written.root, tmp_path / "release"),
            [linux, windows],
            written.options(),
            vouched(linux, windows),
        )


def test_release_refuses_a_missing_target(
    written: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    linux = runner_build(written, reporter, tmp_path / "a", "linux-x86_64")
    with pytest.raises(ConfigError, match="no runner built windows-x86_64"):
        release(
            Project.at(written.root, tmp_path / "release"),
            [linux],
            written.options(),
            vouched(linux),
        )


@pytest.mark.slow
def test_cache_export_then_import_serves_an_offline_build(
    written: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    build(written.project, written.options(), reporter)
    exported = export_cache(Cache(written.root / "cache"), tmp_path / "export")
    assert len(exported.copied) == 2
    fresh = tmp_path / "fresh-cache"
    with pytest.raises(OfflineError):
        build(
            Project.at(written.root, tmp_path / "d0"),
            written.options(offline=True, cache_dir=fresh),
            reporter,
        )
    imported = import_cache(Cache(fresh), tmp_path / "export")
    assert len(imported.copied) == 2 and not imported.rejected
    result = build(
        Project.at(written.root, tmp_path / "d1"),
        written.options(offline=True, cache_dir=fresh),
        reporter,
    )
    assert result.version_dir.is_dir()


def test_cache_import_rejects_corrupt_entries(
    written: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    build(written.project, written.options(), reporter)
    export_cache(Cache(written.root / "cache"), tmp_path / "export")
    victim = next((tmp_path / "export" / "sha256").glob("*/*"))
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    fresh = Cache(tmp_path / "fresh")
    report = import_cache(fresh, tmp_path / "export")
    assert report.rejected == (victim.name,)
    assert fresh.get(victim.name) is None
    assert not list((tmp_path / "fresh" / "partial").glob("*"))


def test_workflow_template_lists_every_target_of_the_default_product() -> None:
    product = load_product(ROOT / "manifests" / "darkroom.toml")
    text = workflow_yaml(product)
    workflow = yaml.safe_load(text)
    jobs = workflow["jobs"]
    assert set(jobs) == {f"build-{t}" for t in product.targets} | {"release", "publish"}
    assert jobs["release"]["needs"] == [f"build-{t}" for t in product.targets]
    steps = [s.get("run", "") for s in jobs["release"]["steps"]]
    assert any(
        s.startswith("invoke release") and s.count("--from") == len(product.targets) for s in steps
    )
    assert any(s.startswith("invoke verify") for s in steps)
    committed = ROOT / "ci" / "darkroom-github-actions.yml"
    assert committed.read_text() == text, "regenerate with: invoke ci-workflow"


def test_workflow_values_are_quoted() -> None:
    product = load_product(ROOT / "manifests" / "darkroom.toml")
    text = workflow_yaml(product)
    assert '--product "darkroom"' in text
