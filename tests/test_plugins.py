"""Plugin EPs as components: staged beside the runtimes, paired, indexed, audited, checked."""

from __future__ import annotations

import json

import jsonschema
import pytest

from ortbundle._core.errors import ConfigError
from ortbundle._core.progress import Reporter
from ortbundle.pipeline.build import build
from tests.helpers.elf import make_elf
from tests.helpers.pe import make_pe
from tests.helpers.project import PLUGIN_EXPORTS, FakeProject
from tests.helpers.wheels import make_wheel, sha256_of

LINUX_WHEEL = "onnxruntime_ep_fake-0.1.0-py3-none-manylinux_2_28_x86_64.whl"
WINDOWS_WHEEL = "onnxruntime_ep_fake-0.1.0-py3-none-win_amd64.whl"


def add_plugin(
    fake: FakeProject,
    *,
    min_core: str = "1.0.0",
    with_core: bool = False,
    expression: str = "GPL-3.0-or-later",
    ep_name: str = "FakeExecutionProvider",
    names: tuple[str, ...] = ("FakeExecutionProvider", "CPUExecutionProvider"),
) -> FakeProject:
    """A plugin EP wheel per OS (provider + a dependency), its recipe, and the pairing. The
    plugin library exports what a plugin exports and names its provider (and the CPU one, as
    real plugins do)."""
    fake.write()
    linux = {
        "ep_fake/libonnxruntime_providers_fake.so": make_elf(
            needed=("libfakedep.so.1", "libc.so.6"), exports=PLUGIN_EXPORTS, rodata=names
        ),
        "ep_fake/libfakedep.so.1": make_elf(soname="libfakedep.so.1"),
        "ep_fake/__init__.py": b"",
        "ep_fake/LICENSE": b"GNU GENERAL PUBLIC LICENSE\nVersion 3\nCopyright (C) 2025 Plugin Authors\n",
    }
    if with_core:
        linux["ep_fake/libonnxruntime.so.1"] = make_elf(soname="libonnxruntime.so.1")
    windows = {
        "ep_fake/onnxruntime_providers_fake.dll": make_pe(
            imports=("KERNEL32.dll",), exports=PLUGIN_EXPORTS, rodata=names
        ),
        "ep_fake/LICENSE": linux["ep_fake/LICENSE"],
    }
    wheels = fake.root / "plugin-wheels"
    lw = make_wheel(wheels / LINUX_WHEEL, "onnxruntime-ep-fake", "0.1.0", linux)
    ww = make_wheel(wheels / WINDOWS_WHEEL, "onnxruntime-ep-fake", "0.1.0", windows)
    fake.server.add("onnxruntime-ep-fake", lw)
    fake.server.add("onnxruntime-ep-fake", ww)
    roots = (
        '["libonnxruntime_providers_fake.so", "libonnxruntime.so.1"]'
        if with_core
        else '["libonnxruntime_providers_fake.so"]'
    )
    (fake.root / "recipes" / "ep-fake.toml").write_text(f"""
[component]
name = "ep-fake"
kind = "plugin-ep"
version = "0.1.0"
label = "Fake plugin"
description = "A synthetic plugin execution provider"
providers = ["FakeExecutionProvider"]
ep_name = "{ep_name}"
min_core = "{min_core}"

[sources.linux]
pypi = {{ project = "onnxruntime-ep-fake", version = "0.1.0", filename = "{LINUX_WHEEL}" }}
sha256 = "{sha256_of(lw)}"

[sources.windows]
pypi = {{ project = "onnxruntime-ep-fake", version = "0.1.0", filename = "{WINDOWS_WHEEL}" }}
sha256 = "{sha256_of(ww)}"

[targets.linux-x86_64]
entry = "libonnxruntime_providers_fake.so"
roots = {roots}

[[targets.linux-x86_64.take]]
source = "linux"
libraries = ["ep_fake/*.so", "ep_fake/*.so.*"]

[[targets.linux-x86_64.licenses]]
component = "ep-fake"
version = "0.1.0"
expression = "{expression}"
files = ["lib*"]
texts = [{{ source = "linux", member = "ep_fake/LICENSE" }}]

[targets.windows-x86_64]
entry = "onnxruntime_providers_fake.dll"
roots = ["onnxruntime_providers_fake.dll"]

[[targets.windows-x86_64.take]]
source = "windows"
libraries = ["ep_fake/*.dll"]

[[targets.windows-x86_64.licenses]]
component = "ep-fake"
version = "0.1.0"
expression = "{expression}"
files = ["*.dll"]
texts = [{{ source = "windows", member = "ep_fake/LICENSE" }}]
""")
    manifest = fake.root / "manifests" / "fakeproduct.toml"
    manifest.write_text(manifest.read_text() + '\n[plugin.ep-fake]\npairs_with = ["fake"]\n')
    return fake


@pytest.mark.slow
def test_a_plugin_ep_is_staged_paired_indexed_and_audited(
    fake: FakeProject, reporter: Reporter
) -> None:
    add_plugin(fake)
    result = build(fake.project, fake.options(), reporter)
    for target in result.targets:
        index = json.loads((target.stage / "runtimes.json").read_text())
        (fake_runtime,) = index["runtimes"]
        (plugin,) = fake_runtime["plugin_eps"]
        assert plugin["ep_name"] == "FakeExecutionProvider"
        assert plugin["registration_name"] == "ep-fake" and plugin["min_core"] == "1.0.0"
        assert (target.stage / plugin["library"]).is_file()
        assert plugin["library"].startswith("plugins/ep-fake/")
        owner = target.licensing.owner(plugin["library"])
        assert (owner.name, owner.expression) == ("ep-fake", "GPL-3.0-or-later")
    linux = next(t for t in result.targets if t.target == "linux-x86_64")
    assert (linux.stage / "plugins/ep-fake/libfakedep.so.1").is_file()  # its closure, too
    arch = next(a for a in result.audits if a.channel == "arch")
    plugin_audit = next(c for c in arch.components if c.name == "ep-fake")
    assert (plugin_audit.verdict, plugin_audit.status) == (
        "review",
        "review",
    )  # GPL: a person reads it


def test_runtimes_json_with_plugins_matches_its_schema(
    fake: FakeProject, reporter: Reporter
) -> None:
    from importlib import resources

    add_plugin(fake)
    result = build(fake.project, fake.options(), reporter)
    schema = json.loads(
        resources.files("ortbundle").joinpath("data/runtimes.schema.json").read_text()
    )
    for target in result.targets:
        jsonschema.validate(json.loads((target.stage / "runtimes.json").read_text()), schema)


@pytest.mark.slow
def test_a_plugin_carrying_a_core_is_refused(fake: FakeProject, reporter: Reporter) -> None:
    add_plugin(fake, with_core=True)
    with pytest.raises(ConfigError, match="carries an ONNX Runtime core: libonnxruntime.so.1"):
        build(fake.project, fake.options(), reporter)


def test_a_plugin_needing_a_newer_core_is_refused(fake: FakeProject, reporter: Reporter) -> None:
    add_plugin(fake, min_core="1.24.4")
    with pytest.raises(
        ConfigError, match=r"needs ONNX Runtime 1.24.4 or newer; runtime fake is 1.0.0"
    ):
        build(fake.project, fake.options(), reporter)


def test_a_plugin_outside_the_core_versions_it_fits_is_refused_naming_both(
    fake: FakeProject, reporter: Reporter
) -> None:
    """Its wheel's Requires-Dist (onnxruntime<1.31,>=1.29, as onnxruntime-ggml's) against the
    paired core: below, and above, are refused before anything is fetched; inside builds."""
    add_plugin(fake)
    recipe = fake.root / "recipes" / "ep-fake.toml"
    text = recipe.read_text()
    for fits in (">=1.29,<1.31", "<0.9"):
        recipe.write_text(
            text.replace('min_core = "1.0.0"', f'min_core = "1.0.0"\ncore_versions = "{fits}"')
        )
        with pytest.raises(ConfigError) as refused:
            build(fake.project, fake.options(), reporter)
        assert refused.value.message == (
            f"ep-fake 0.1.0 fits ONNX Runtime {fits}; runtime fake is 1.0.0"
        )
        assert refused.value.file is not None and refused.value.file.endswith("fakeproduct.toml")
    recipe.write_text(
        text.replace('min_core = "1.0.0"', 'min_core = "1.0.0"\ncore_versions = ">=1.0,<2"')
    )
    build(fake.project, fake.options(), reporter)
    recipe.write_text(
        text.replace('min_core = "1.0.0"', 'min_core = "1.0.0"\ncore_versions = "1.2"')
    )
    with pytest.raises(ConfigError, match="is not a version specifier"):
        build(fake.project, fake.options(), reporter)


def test_a_plugin_naming_only_the_cpu_provider_leaves_its_ep_name_unjudged(
    fake: FakeProject, reporter: Reporter
) -> None:
    """onnxruntime-ep-webgpu's x86_64 library keeps its name only in C++ type names; the CPU
    provider's name, which every ONNX Runtime library mentions, is no evidence against the EP
    name its package states: the build takes the recipe's word."""
    add_plugin(fake, names=("CPUExecutionProvider",))
    result = build(fake.project, fake.options(), reporter)
    linux = next(t for t in result.targets if t.target == "linux-x86_64")
    assert [s.runtime for s in linux.runtimes] == ["fake", "ep-fake"]


def test_a_misspelled_ep_name_is_refused_with_the_name_the_plugin_carries(
    fake: FakeProject, reporter: Reporter
) -> None:
    """The loader registers a plugin and looks its devices up by ep_name: one the plugin's
    factory does not register finds nothing, which only `invoke smoke` used to notice."""
    add_plugin(fake, ep_name="FakeExecutionProvidr")
    with pytest.raises(ConfigError) as refused:
        build(fake.project, fake.options(), reporter)
    text = str(refused.value)
    assert (
        "plugin-ep ep-fake: ep_name FakeExecutionProvidr (did you mean FakeExecutionProvider?)"
        in text
    )
    assert "is not a name its entry" in text and "ep-fake.toml" in text
    assert 'fix: set ep_name = "FakeExecutionProvider" in [component]' in text
    assert refused.value.exit_code == 2 and refused.value.target
