"""Custom-operator libraries and libraries that use a core as components: their kinds in the
recipe and the product manifest, recognised from their exports and imports, staged beside the
runtime they pair with (stage/kinds.py, config/products.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ortbundle._core.errors import ClosureError, ConfigError
from ortbundle._core.progress import Reporter
from ortbundle.config.schema.problems import ConfigProblems
from ortbundle.pipeline.build import build
from ortbundle.stage.binaries import inspect
from ortbundle.stage.binaries.info import core_names, role
from tests.helpers.companions import add_companion, custom_ops, uses_core
from tests.helpers.elf import make_elf
from tests.helpers.pe import make_pe
from tests.helpers.project import FakeProject
from tests.helpers.toml_edit import set_key


def _read(tmp_path: Path, name: str, data: bytes) -> Any:
    path = tmp_path / name
    path.write_bytes(data)
    return inspect(path)


def test_a_custom_op_library_is_known_by_register_custom_ops(tmp_path: Path) -> None:
    exports = ("RegisterCustomOps", "OrtxCreate")
    assert role(_read(tmp_path, "a.so", make_elf(exports=exports))) == "custom-ops"
    assert role(_read(tmp_path, "a.dll", make_pe(exports=exports))) == "custom-ops"
    # a core that also exports it is a core
    both = make_elf(exports=("OrtGetApiBase", "RegisterCustomOps"))
    assert role(_read(tmp_path, "b.so", both)) == "core"


def test_the_names_of_a_core_and_only_those() -> None:
    names = [
        "libonnxruntime.so.1",
        "libonnxruntime.so",
        "ONNXRUNTIME.DLL",
        "@rpath/libonnxruntime.1.20.0.dylib",
        "libonnxruntime_providers_shared.so",
        "libonnxruntime-genai.so",
        "onnxruntime_providers_cuda.dll",
        "libc.so.6",
    ]
    assert core_names(names) == tuple(names[:4])


# --- the build ---------------------------------------------------------------------------------


def test_a_custom_op_library_and_a_genai_library_are_staged_beside_the_runtime(
    fake: FakeProject, reporter: Reporter
) -> None:
    """GenAI links the core on Linux (a need the closure leaves to the paired runtime) and
    opens it by name on Windows (no undeclared load, even for a release)."""
    add_companion(fake, custom_ops())
    add_companion(fake, uses_core())
    result = build(fake.project, fake.options(release=False), reporter)
    linux = next(t for t in result.targets if t.target == "linux-x86_64")
    windows = next(t for t in result.targets if t.target == "windows-x86_64")
    assert (linux.stage / "custom_ops/extensions/libortextensions.so").is_file()
    assert (linux.stage / "libraries/genai/libonnxruntime-genai.so").is_file()
    assert not (linux.stage / "libraries/genai/libonnxruntime.so.1").exists()
    assert (windows.stage / "custom_ops/extensions/ortextensions.dll").is_file()
    assert (windows.stage / "libraries/genai/onnxruntime-genai.dll").is_file()
    genai = next(s for s in windows.runtimes if s.runtime == "genai")
    assert genai.closure.load_findings == ()
    owner = linux.licensing.owner("libraries/genai/libonnxruntime-genai.so")
    assert (owner.name, owner.expression) == ("genai", "MIT")


def test_a_custom_ops_recipe_whose_library_is_a_plugin_is_refused(
    fake: FakeProject, reporter: Reporter
) -> None:
    add_companion(fake, custom_ops(exports=("CreateEpFactories", "ReleaseEpFactory")))
    with pytest.raises(ConfigError) as refused:
        build(fake.project, fake.options(), reporter)
    error = refused.value
    assert error.component == "extensions"
    assert error.target in ("linux-x86_64", "windows-x86_64")
    assert error.file is not None and error.file.endswith("recipes/extensions.toml")
    assert "is not a custom-operator library (it exports RegisterCustomOps)" in error.message
    assert "it is a plugin EP library" in error.message
    assert error.fix is not None and 'set kind = "plugin-ep" in [component]' in error.fix
    assert "[plugin.extensions] pairs_with" in error.fix
    assert "instead of under [custom_ops.extensions]" in error.fix


def test_a_genai_recipe_said_custom_ops_names_its_kind(
    fake: FakeProject, reporter: Reporter
) -> None:
    add_companion(fake, uses_core(), kind="custom-ops")
    manifest = fake.root / "manifests/fakeproduct.toml"
    manifest.write_text(manifest.read_text().replace("[uses_core.genai]", "[custom_ops.genai]"))
    with pytest.raises(ConfigError) as refused:
        build(fake.project, fake.options(), reporter)
    error = refused.value
    assert error.component == "genai" and error.target in ("linux-x86_64", "windows-x86_64")
    assert error.file is not None and error.file.endswith("recipes/genai.toml")
    library = (
        "libonnxruntime-genai.so" if error.target == "linux-x86_64" else "onnxruntime-genai.dll"
    )
    assert error.message == (
        f"custom-ops genai: its entry {library} is not a custom-operator library "
        "(it exports RegisterCustomOps); it is a library that uses a core (it links or opens "
        "libonnxruntime.so* or libonnxruntime.dylib or libonnxruntime.*.dylib or onnxruntime.dll)"
    )
    assert error.fix == (
        f"{library} is a library that uses a core (it links or opens "
        "libonnxruntime.so* or libonnxruntime.dylib or libonnxruntime.*.dylib or onnxruntime.dll): "
        f'set kind = "uses-core" in [component] and entry = "{library}" in '
        f"[targets.{error.target}], and in the product list it under [uses_core.genai] pairs_with "
        "= [<a runtime>] instead of under [custom_ops.genai]"
    )


def test_a_library_of_no_kind_of_the_family_is_exit_8_saying_what_it_exports(
    fake: FakeProject, reporter: Reporter
) -> None:
    add_companion(fake, uses_core(link="", opens=""))
    with pytest.raises(ClosureError) as refused:
        build(fake.project, fake.options(), reporter)
    error = refused.value
    assert error.exit_code == 8
    text = str(error)
    for target in ("linux-x86_64", "windows-x86_64"):
        assert f"[component genai, target {target}]" in text
    assert "recipes/genai.toml" in text or "fakeproduct.toml" in text
    assert "uses-core genai: none of its libraries is a kind of the ONNX Runtime family" in text
    assert "libonnxruntime-genai.so (exports OgaCreateModel, OgaDestroyModel)" in text
    assert "onnxruntime-genai.dll (exports OgaCreateModel, OgaDestroyModel)" in text
    assert "a custom-op library RegisterCustomOps" in text


def test_a_custom_op_library_carrying_a_core_is_refused(
    fake: FakeProject, reporter: Reporter
) -> None:
    companion = custom_ops()
    companion.linux["ortx/libonnxruntime.so.1"] = make_elf(
        soname="libonnxruntime.so.1", exports=("OrtGetApiBase",)
    )
    add_companion(fake, companion)
    set_key(
        fake.root / "recipes/extensions.toml",
        "targets.linux-x86_64.roots",
        ["libortextensions.so", "libonnxruntime.so.1"],
    )
    with pytest.raises(ConfigError) as refused:
        build(fake.project, fake.options(), reporter)
    assert refused.value.message == (
        "custom-op library extensions carries an ONNX Runtime core: libonnxruntime.so.1"
    )


def test_a_misspelt_kind_is_refused_with_the_nearest_kind(
    fake: FakeProject, reporter: Reporter
) -> None:
    add_companion(fake, custom_ops(), kind="custom-op")
    with pytest.raises(ConfigProblems) as refused:
        build(fake.project, fake.options(), reporter)
    assert "did you mean `custom-ops`?" in str(refused.value)


def test_a_component_in_the_wrong_table_is_refused(fake: FakeProject, reporter: Reporter) -> None:
    add_companion(fake, custom_ops())
    manifest = fake.root / "manifests/fakeproduct.toml"
    manifest.write_text(manifest.read_text().replace("[custom_ops.", "[uses_core."))
    with pytest.raises(ConfigProblems) as refused:
        build(fake.project, fake.options(), reporter)
    text = str(refused.value)
    assert "is 'custom-ops', but" in text and "under [custom_ops.<name>] pairs_with" in text


def test_a_component_listed_under_two_tables_is_refused(
    fake: FakeProject, reporter: Reporter
) -> None:
    add_companion(fake, custom_ops())
    manifest = fake.root / "manifests/fakeproduct.toml"
    manifest.write_text(manifest.read_text() + '\n[plugin.extensions]\npairs_with = ["fake"]\n')
    with pytest.raises(ConfigProblems) as refused:
        build(fake.project, fake.options(), reporter)
    assert "`extensions`: is also listed in [plugin.extensions]: list it once" in str(refused.value)


# --- the index ---------------------------------------------------------------------------------


def _index_again(result: Any, target: str, stage: Path) -> dict[str, Any]:
    """runtimes.json written from the build's staged components, the custom-op libraries and
    libraries using a core passed as the stage step passes plugin EPs (the pipeline's hook)."""
    from ortbundle.stage.index_json import write_index

    plan = result.plan
    done = next(t for t in result.targets if t.target == target)
    staged = [(plan.recipes[s.runtime], s) for s in done.runtimes]
    cores = [(r, s) for r, s in staged if r.kind == "runtime"]
    companions = [
        (r, s, plan.product.paired[r.name])
        for r, s in staged
        if r.kind in ("custom-ops", "uses-core")
    ]
    stage.mkdir(parents=True, exist_ok=True)
    return write_index(stage, plan.product, target, cores, companions=companions)


def test_runtimes_json_lists_each_kind_with_the_runtime_it_pairs_with(
    fake: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    import json
    from importlib import resources

    import jsonschema

    add_companion(fake, custom_ops())
    add_companion(fake, uses_core())
    result = build(fake.project, fake.options(), reporter)
    schema = json.loads(
        resources.files("ortbundle").joinpath("data/runtimes.schema.json").read_text()
    )
    for target, core, ops, genai in (
        ("linux-x86_64", "libonnxruntime.so.1", "libortextensions.so", "libonnxruntime-genai.so"),
        ("windows-x86_64", "onnxruntime.dll", "ortextensions.dll", "onnxruntime-genai.dll"),
    ):
        index = _index_again(result, target, tmp_path / target)
        jsonschema.validate(index, schema)
        (runtime,) = index["runtimes"]
        (entry,) = runtime["custom_ops"]
        # the fake library registers no domain a probe could read (tests/test_custom_op_domains
        # reads a real one's): none is claimed, and the index says how that was learnt
        assert {k: entry[k] for k in ("name", "library", "version", "domains")} == {
            "name": "extensions",
            "library": f"custom_ops/extensions/{ops}",
            "version": "0.2.0",
            "domains": [],
        }
        assert entry["domains_read"] in ("ran natively", "read statically")
        assert runtime["uses_core"] == [
            {
                "name": "genai",
                "library": f"libraries/genai/{genai}",
                "version": "0.2.0",
                "core": core,
            }
        ]
        assert runtime["plugin_eps"] == []


def test_an_index_without_them_is_as_before(
    fake: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    fake.write()
    result = build(fake.project, fake.options(), reporter)
    index = _index_again(result, "linux-x86_64", tmp_path / "linux")
    (runtime,) = index["runtimes"]
    assert "custom_ops" not in runtime and "uses_core" not in runtime


def test_a_library_using_a_core_the_runtime_lacks_is_refused(
    fake: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    """GenAI built for another core's name (libonnxruntime.so.2) beside a runtime whose core
    is libonnxruntime.so.1: it would find no core."""
    add_companion(fake, uses_core(link="libonnxruntime.so.2"))
    with pytest.raises(ConfigError) as refused:  # by the build's stage step, writing the index
        build(fake.project, fake.options(), reporter)
    error = refused.value
    assert error.message == (
        "genai uses the core libonnxruntime.so.2, which runtime fake does not ship on linux-x86_64"
    )
    assert error.file is not None and error.file.endswith("manifests/fakeproduct.toml")
    assert error.fix is not None and "[uses_core.genai] pairs_with" in error.fix
