"""From-source components: a recipe pins a built binary's source archives and its build; the
build fetches and checks them like any source, and the manifest, the SBOM and the provenance say
which sources made which bytes."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from ortbundle._core.errors import ConfigError
from ortbundle._core.progress import Reporter
from ortbundle.config.recipes import load_recipe
from ortbundle.evidence.names import MANIFEST_NAME, PROVENANCE_NAME, SBOM_NAME
from ortbundle.pipeline.build import build
from ortbundle.pipeline.result import BuildResult
from tests.helpers.project import FakeProject
from tests.helpers.source_archives import ARCHIVES, pin_sources


@pytest.fixture
def from_source(fake: FakeProject, reporter: Reporter) -> tuple[BuildResult, dict[str, str]]:
    fake.write()
    sha256 = pin_sources(fake)
    return build(fake.project, fake.options(targets=("linux-x86_64",)), reporter), sha256


def test_the_recipe_reads_the_build_and_its_source_archives(fake: FakeProject) -> None:
    fake.write()
    sha256 = pin_sources(fake)
    recipe = load_recipe(fake.root / "recipes" / "fake.toml")
    build_of = recipe.sources["linux"].build
    assert build_of is not None
    assert [s.id for s in build_of.sources] == ["ort-rocket", "userspace"]
    assert [s.sha256 for s in build_of.sources] == [sha256["ort-rocket"], sha256["userspace"]]
    assert build_of.toolchain == "aarch64-linux-gnu-gcc 14.2"
    assert build_of.ort_headers == "1.24.4"
    assert recipe.sources["windows"].build is None


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ('sources = ["ort-rocket", "userspace"]', 'sources = ["nowhere"]'),
        ('sources = ["ort-rocket", "userspace"]', 'sources = ["linux"]'),
        ('sources = ["ort-rocket", "userspace"]', 'sources = ["userspace", "userspace"]'),
    ],
)
def test_a_build_naming_no_source_archive_is_refused(
    fake: FakeProject, change: str, said: str
) -> None:
    fake.write()
    pin_sources(fake)
    recipe = fake.root / "recipes" / "fake.toml"
    recipe.write_text(recipe.read_text().replace(change, said))
    with pytest.raises(ConfigError) as caught:
        load_recipe(recipe)
    assert "sources.linux.build" in str(caught.value)


def test_a_build_without_its_command_is_refused_by_the_schema(fake: FakeProject) -> None:
    fake.write()
    pin_sources(fake)
    recipe = fake.root / "recipes" / "fake.toml"
    recipe.write_text(recipe.read_text().replace('toolchain = "aarch64-linux-gnu-gcc 14.2"\n', ""))
    with pytest.raises(ConfigError) as caught:
        load_recipe(recipe)
    assert "toolchain" in str(caught.value)


def test_source_archives_are_fetched_and_checked(fake: FakeProject, reporter: Reporter) -> None:
    fake.write()
    pin_sources(fake)
    (fake.root / ARCHIVES["userspace"]).write_bytes(b"not the pinned bytes")
    with pytest.raises(Exception) as caught:
        build(fake.project, fake.options(targets=("linux-x86_64",)), reporter)
    assert "sha256" in str(caught.value).lower() or "SHA-256" in str(caught.value)


def test_the_manifest_records_binary_and_source(
    from_source: tuple[BuildResult, dict[str, str]],
) -> None:
    result, sha256 = from_source
    manifest = json.loads((result.version_dir / MANIFEST_NAME).read_text())
    inputs = {i["source"]: i for i in manifest["inputs"]}
    assert inputs["linux"]["build"] == {
        "sources": ["ort-rocket", "userspace"],
        "command": "cmake -S ort-rocket -B build -DORT_HEADER_DIR=third_party && "
        "cmake --build build",
        "toolchain": "aarch64-linux-gnu-gcc 14.2",
        "ort_headers": "1.24.4",
    }
    for sid, digest in sha256.items():
        assert inputs[sid]["sha256"] == digest
        assert inputs[sid]["path"] == ARCHIVES[sid]
        assert "build" not in inputs[sid]


def sbom_component(version_dir: Path, name: str) -> dict[str, Any]:
    sbom = json.loads((version_dir / SBOM_NAME).read_text())
    found: dict[str, Any] = next(c for c in sbom["components"] if c["name"] == name)
    return found


def test_the_sbom_gives_source_distributions_and_a_pedigree(
    from_source: tuple[BuildResult, dict[str, str]],
) -> None:
    result, sha256 = from_source
    component = sbom_component(result.version_dir, "fake")
    references = [r for r in component["externalReferences"]]
    assert {r["type"] for r in references} == {"source-distribution"}
    assert sorted((r["url"], r["hashes"][0]["content"]) for r in references) == sorted(
        (ARCHIVES[sid], digest) for sid, digest in sha256.items()
    )
    ancestors = component["pedigree"]["ancestors"]
    assert sorted(a["hashes"][0]["content"] for a in ancestors) == sorted(sha256.values())
    assert "aarch64-linux-gnu-gcc 14.2" in component["pedigree"]["notes"]
    assert "ONNX Runtime headers 1.24.4" in component["pedigree"]["notes"]


def test_the_provenance_links_the_binary_to_its_sources(
    from_source: tuple[BuildResult, dict[str, str]],
) -> None:
    result, sha256 = from_source
    envelope = json.loads((result.version_dir / PROVENANCE_NAME).read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    deps = {d["name"]: d for d in statement["predicate"]["buildDefinition"]["resolvedDependencies"]}
    assert deps["fake:linux"]["annotations"]["built_from"] == ["fake:ort-rocket", "fake:userspace"]
    assert deps["fake:linux"]["annotations"]["build"]["toolchain"] == "aarch64-linux-gnu-gcc 14.2"
    for sid, digest in sha256.items():
        assert deps[f"fake:{sid}"]["digest"] == {"sha256": digest}


def test_a_component_not_built_from_source_has_no_source_references(
    fake: FakeProject, reporter: Reporter
) -> None:
    fake.write()
    result = build(fake.project, fake.options(targets=("linux-x86_64",)), reporter)
    component = sbom_component(result.version_dir, "fake")
    assert "pedigree" not in component
    assert "externalReferences" not in component
