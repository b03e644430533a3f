"""A product owns its system requirements and licence policy: `[[externals]]` and `[policy]`
in a manifest outside the repository, merged over the tool's data without touching ortbundle/;
closure mistakes of every target in one run; the Arch add-on package."""

from __future__ import annotations

import hashlib
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from ortbundle._core.errors import ClosureError, ConfigError
from ortbundle._core.progress import Reporter
from ortbundle.channels.arch import ArchChannel
from ortbundle.channels.nfpm import render_dependencies
from ortbundle.config.externals import read_externals
from ortbundle.config.targets import (
    ChannelPackages,
    ExternalGroup,
    ExternalSpec,
    get_target,
    overlays,
)
from ortbundle.config.tomlreader import TableReader
from ortbundle.pipeline.build import build
from ortbundle.stage.closure import ExternalLibrary
from tests.helpers.elf import make_elf
from tests.helpers.packages import make_package_input
from tests.helpers.pe import make_pe
from tests.helpers.project import FakeProject

TOOL = Path(__file__).resolve().parents[1] / "ortbundle"

# The synthetic product's own requirements: a vendor toolkit with a version constraint, an
# optional accelerator library, and its own licence class allowed on the arch channel.
PRODUCT_EXTERNALS = """
[[externals]]
group = "vendor-sdk"
kind = "toolkit"
targets = ["linux-x86_64"]
names = ["libvendor.so.3"]
version = ">=3.1"
install = "Install the Vendor SDK 3.1"
sandbox = false
arch = { depends = ["vendor-sdk"] }

[[externals]]
group = "vendor-accel"
kind = "driver"
targets = ["linux-x86_64"]
names = ["libaccel.so.1"]
optional = true
note = "Vendor accelerator driver, for the fast path"
arch = { depends = ["vendor-accel"] }

[policy.channels.arch]
allow = ["LicenseRef-Fake-*"]
"""


def _tool_digest() -> str:
    """Every file under ortbundle/ (the tool a product must not need to edit)."""
    digest = hashlib.sha256()
    for path in sorted(TOOL.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(TOOL).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()


def _vendor_project(fake: FakeProject) -> FakeProject:
    fake.linux["onnxruntime/capi/libprovider.so"] = make_elf(
        needed=("libonnxruntime_shared.so", "libvendor.so.3", "libaccel.so.1")
    )
    fake.product_extra = 'channels = ["arch"]\n' + PRODUCT_EXTERNALS
    return fake


def _vendor_licence(project: FakeProject) -> None:
    """The runtime under the vendor's own terms (a licence class no project policy names)."""
    recipe = project.root / "recipes" / "fake.toml"
    recipe.write_text(recipe.read_text().replace('"MIT"', '"LicenseRef-Fake-EULA"'))


def _pkgbuild_array(pkgbuild: str, name: str) -> list[str]:
    text = pkgbuild.split(f"{name}=(", 1)[1].split(")", 1)[0]
    return [w.strip().strip("'") for w in text.replace("\n", " ").split("' ") if w.strip()]


def test_a_product_outside_the_repository_builds_with_its_own_externals_and_policy(
    fake: FakeProject, reporter: Reporter
) -> None:
    project = _vendor_project(fake).write()
    _vendor_licence(project)
    assert not project.root.is_relative_to(TOOL.parent)
    before = _tool_digest()
    result = build(project.project, project.options(channels=("arch",)), reporter)
    assert _tool_digest() == before  # nothing under ortbundle/ was touched

    linux = next(t for t in result.targets if t.target == "linux-x86_64").runtimes[0]
    found = {e.name: e for e in linux.closure.externals}
    assert (found["libvendor.so.3"].group, found["libvendor.so.3"].version) == (
        "vendor-sdk",
        ">=3.1",
    )
    assert found["libvendor.so.3"].sandbox is False
    assert found["libaccel.so.1"].optional is True

    pkgbuild = (result.version_dir / "packaging" / "arch" / "PKGBUILD").read_text()
    assert "vendor-sdk>=3.1" in _pkgbuild_array(pkgbuild, "depends")
    assert "vendor-accel: Vendor accelerator driver, for the fast path" in _pkgbuild_array(
        pkgbuild, "optdepends"
    )
    assert not any("vendor-accel" in d for d in _pkgbuild_array(pkgbuild, "depends"))

    # the product's policy allows its own licence class on arch: no review needed there
    arch = next(a for a in result.audits if a.channel == "arch")
    fake_component = next(c for c in arch.components if c.expression == "LicenseRef-Fake-EULA")
    assert (fake_component.verdict, fake_component.status) == ("allow", "ok")


def test_without_the_policy_overlay_the_vendor_class_needs_review(
    fake: FakeProject, reporter: Reporter
) -> None:
    project = _vendor_project(fake)
    project.product_extra = project.product_extra.split("[policy.channels.arch]")[0]
    _vendor_licence(project.write())
    result = build(project.project, project.options(channels=("arch",)), reporter)
    arch = next(a for a in result.audits if a.channel == "arch")
    component = next(c for c in arch.components if c.expression == "LicenseRef-Fake-EULA")
    assert component.verdict == "review"


def test_the_policy_overlay_cannot_loosen_a_refusal(tmp_path: Path) -> None:
    from ortbundle.config.policy_overlay import read_policy
    from ortbundle.licensing.audit import load_policy, with_overlay

    policy = load_policy(TOOL.parent / "licenses" / "policy.toml")
    manifest = tmp_path / "p.toml"
    raw = {"policy": {"channels": {"apk": {"allow": ["GPL-3.0-only", "LicenseRef-Mine-*"]}}}}
    overlay = read_policy(TableReader(manifest, "", raw))
    apk = with_overlay(policy, overlay).channel("apk")
    assert apk.verdict_for_id("GPL-3.0-only") == "refuse"  # the project's refusal stands
    assert apk.verdict_for_id("LicenseRef-Mine-Thing") == "allow"
    assert policy.channel("apk").verdict_for_id("LicenseRef-Mine-Thing") == "review"
    bad = {"policy": {"channels": {"apk": {"allow": ["@nosuchset"]}}}}
    with pytest.raises(ConfigError, match="unknown set @nosuchset") as error:
        with_overlay(policy, read_policy(TableReader(manifest, "", bad)))
    assert error.value.file == str(manifest)


def test_closure_mistakes_of_every_target_and_group_are_reported_in_one_run(
    fake: FakeProject, reporter: Reporter
) -> None:
    fake.linux["onnxruntime/capi/libprovider.so"] = make_elf(
        needed=("libonnxruntime_shared.so", "libcublasLt.so.13", "libcudnn.so.9")
    )
    fake.windows["onnxruntime/capi/dep.dll"] = make_pe(
        imports=("kernel32.dll", "cudnn64_9.dll", "nvinfer_10.dll")
    )
    fake.write()
    with pytest.raises(ClosureError) as error:
        build(fake.project, fake.options(), reporter)
    message, fix = str(error.value), str(error.value.fix)
    assert error.value.file == str(fake.root / "manifests" / "fakeproduct.toml")
    assert "ortbundle/data/targets.toml" not in message
    for who, what, target, group in (
        ("libprovider.so", "libcublasLt.so.13", "linux-x86_64", "cublaslt"),
        ("libprovider.so", "libcudnn.so.9", "linux-x86_64", "cudnn"),
        ("dep.dll", "cudnn64_9.dll", "windows-x86_64", "cudnn64_9"),
        ("dep.dll", "nvinfer_10.dll", "windows-x86_64", "nvinfer_10"),
    ):
        assert f"{who} needs {what}" in message and f"target {target}" in message
        assert f'[[externals]]\ngroup = "{group}"' in fix
        assert f'targets = ["{target}"]\nnames = ["{what}"]' in fix
    assert not (fake.root / "dist").exists()


def test_an_addon_installs_into_the_main_package_and_depends_on_it(
    fake: FakeProject, reporter: Reporter
) -> None:
    fake.product_extra = 'addon_of = "mainproduct"\nchannels = ["arch"]\n'
    fake.write()
    (fake.root / "manifests" / "mainproduct.toml").write_text(
        textwrap.dedent(
            """\
            [product]
            name = "mainproduct"
            version = "4.5.6"
            description = "The main product"
            url = "https://example.invalid/"
            targets = ["linux-x86_64"]
            runtimes = ["fake"]

            [packaging]
            package_name = "main-runtime"
            """
        )
    )
    result = build(fake.project, fake.options(channels=("arch",)), reporter)
    pkgbuild = (result.version_dir / "packaging" / "arch" / "PKGBUILD").read_text()
    assert "main-runtime>=4.5.6" in _pkgbuild_array(pkgbuild, "depends")
    assert "pkgname='fakeproduct-onnxruntime'" in pkgbuild
    assert "local lib=\"${pkgdir}/usr/lib/\"'main-runtime'" in pkgbuild
    assert "\"${lib}\"/'runtimes/fake/libprovider.so'" in pkgbuild
    # the main package's files are not the add-on's to install
    assert "\"${lib}\"/'runtimes.json'" not in pkgbuild
    assert "\"${lib}\"/'NOTICE'" not in pkgbuild
    # the add-on reads the main manifest: a change there is no no-op build of the add-on
    main = fake.root / "manifests" / "mainproduct.toml"
    main.write_text(main.read_text().replace('"main-runtime"', '"main-runtime-2"'))
    again = build(fake.project, fake.options(channels=("arch",)), reporter)
    assert again.up_to_date is None
    pkgbuild = (again.version_dir / "packaging" / "arch" / "PKGBUILD").read_text()
    assert "main-runtime-2>=4.5.6" in _pkgbuild_array(pkgbuild, "depends")


def test_addon_of_names_a_product_with_a_manifest(fake: FakeProject) -> None:
    from ortbundle.config.products import load_product

    fake.product_extra = 'addon_of = "nosuchproduct"\n'
    fake.write()
    with pytest.raises(ConfigError, match="addon_of names product 'nosuchproduct'"):
        load_product(fake.root / "manifests" / "fakeproduct.toml")


def _spec(group: str, names: tuple[str, ...], origin: str, arch: str = "") -> ExternalSpec:
    packages = (ChannelPackages("arch", group, {"depends": [arch]}, origin),) if arch else ()
    return ExternalSpec(ExternalGroup(group, "toolkit", names, note=origin), (), packages, origin)


def test_precedence_is_product_then_recipe_then_tool_data() -> None:
    tool = get_target("linux-x86_64")
    product = [_spec("gcc-libs", ("libstdc++.so.6",), "product", arch="my-gcc")]
    recipe = [
        _spec("gcc-libs", ("libstdc++.so.6",), "recipe", arch="their-gcc"),
        _spec("cudnn", ("libcudnn.so.9",), "recipe", arch="cudnn"),
    ]
    merged = overlays(product, recipe)
    target = merged.apply(tool)
    assert target.external_group("libstdc++.so.6").note == "product"  # type: ignore[union-attr]
    assert target.external_group("libcudnn.so.9").note == "recipe"  # type: ignore[union-attr]
    assert target.external_group("libc.so.6").group == "glibc"  # type: ignore[union-attr]
    assert tool.external_group("libcudnn.so.9") is None  # the tool's data is unchanged
    arch = merged.packages("linux-x86_64", "arch")
    assert arch["gcc-libs"].table == {"depends": ["my-gcc"]}
    assert arch["cudnn"].table == {"depends": ["cudnn"]}


def test_the_tool_marks_opencl_and_vulkan_optional_and_nothing_else() -> None:
    for name in ("linux-x86_64", "windows-x86_64"):
        optional = {g.group for g in get_target(name).externals if g.optional}
        assert optional == {"opencl", "vulkan"}


def test_externals_entries_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"

    def read(entry: dict[str, object]) -> tuple[ExternalSpec, ...]:
        return read_externals(TableReader(path, "", {"externals": [entry]}))

    good: dict[str, object] = {"group": "cudnn", "kind": "toolkit", "names": ["libcudnn.so.9"]}
    assert read(good)[0].group.version == ""
    cases: tuple[tuple[dict[str, object], str], ...] = (
        ({**good, "kind": "Toolkit"}, "kind 'Toolkit' must be one of"),
        ({**good, "version": "9"}, "is not a constraint"),
        ({**good, "optinal": True}, "unknown key 'optinal'"),
        ({**good, "targets": ["linux-x86-64"]}, "unknown target"),
        ({**good, "sandbox": "no"}, "'sandbox' must be true or false"),
    )
    for bad, message in cases:
        with pytest.raises(ConfigError, match=message) as error:
            read(bad)
        assert error.value.file == str(path)


def _cuda_package(root: Path, optional: bool) -> tuple[ExternalLibrary, ...]:
    base = make_package_input(root, "linux-x86_64")
    return (
        *base.externals,
        ExternalLibrary(
            "libcudnn.so.9",
            "cudnn",
            "toolkit",
            "NVIDIA cuDNN 9",
            ("runtimes/x/libx.so",),
            optional=optional,
            version=">=9,<10",
        ),
    )


def test_arch_renders_a_required_group_with_its_bounds_and_an_optional_one_with_reason(
    tmp_path: Path,
) -> None:
    package = make_package_input(tmp_path / "a", "linux-x86_64")
    mapping = (ChannelPackages("arch", "cudnn", {"depends": ["cudnn"]}, "p.toml"),)
    required = replace(package, externals=_cuda_package(tmp_path / "b", False), packages=mapping)
    out = tmp_path / "req"
    ArchChannel().generate(required, out)
    srcinfo = (out / ".SRCINFO").read_text()
    assert "\tdepends = cudnn<10\n\tdepends = cudnn>=9\n" in srcinfo
    optional = replace(required, externals=_cuda_package(tmp_path / "c", True))
    out = tmp_path / "opt"
    ArchChannel().generate(optional, out)
    srcinfo = (out / ".SRCINFO").read_text()
    assert (
        "\toptdepends = cudnn<10: NVIDIA cuDNN 9\n\toptdepends = cudnn>=9: NVIDIA cuDNN 9\n"
        in srcinfo
    )
    assert "depends = cudnn" not in srcinfo.replace("optdepends", "")


def test_deb_and_rpm_render_the_constraint_and_demote_an_optional_group() -> None:
    lib = ExternalLibrary(
        "libcudnn.so.9", "cudnn", "toolkit", "", ("runtimes/x/libx.so",), version=">=9,<10"
    )
    deb_map = (ChannelPackages("deb", "cudnn", {"depends": ["libcudnn9"]}, "p.toml"),)
    rpm_map = (ChannelPackages("rpm", "cudnn", {"depends": ["cudnn"]}, "p.toml"),)
    deb = render_dependencies([lib], "deb", "linux-x86_64", packages=deb_map)
    assert deb.depends == ("libcudnn9 (<< 10)", "libcudnn9 (>= 9)")
    rpm = render_dependencies([lib], "rpm", "linux-x86_64", packages=rpm_map)
    assert rpm.depends == ("cudnn < 10", "cudnn >= 9")
    optional = replace(lib, optional=True)
    deb = render_dependencies([optional], "deb", "linux-x86_64", packages=deb_map)
    assert (deb.depends, deb.recommends) == ((), ("libcudnn9 (<< 10)", "libcudnn9 (>= 9)"))


def test_a_bad_policy_overlay_stops_the_build_before_any_download(
    fake: FakeProject, reporter: Reporter
) -> None:
    fake.product_extra = '\n[policy.channels.nosuch]\nallow = ["MIT"]\n'
    fake.write()
    with pytest.raises(ConfigError, match="policy.channels.nosuch") as error:
        build(fake.project, fake.options(), reporter)
    assert error.value.file == str(fake.root / "manifests" / "fakeproduct.toml")
    assert fake.server.requests == []


def test_a_recipes_externals_apply_and_the_products_win(
    fake: FakeProject, reporter: Reporter
) -> None:
    fake.linux["onnxruntime/capi/libprovider.so"] = make_elf(
        needed=("libonnxruntime_shared.so", "libvendor.so.3", "libaccel.so.1")
    )
    fake.product_extra = 'channels = ["arch"]\n' + textwrap.dedent(
        """
        [[externals]]
        group = "vendor-sdk"
        kind = "toolkit"
        names = ["libvendor.so.3"]
        arch = { depends = ["product-sdk"] }
        """
    )
    fake.write()
    recipe = fake.root / "recipes" / "fake.toml"
    recipe.write_text(
        textwrap.dedent(
            """\
            [[externals]]
            group = "vendor-sdk"
            kind = "toolkit"
            names = ["libvendor.so.3"]
            arch = { depends = ["recipe-sdk"] }

            [[externals]]
            group = "accel"
            kind = "driver"
            names = ["libaccel.so.1"]
            version = ">=2"
            arch = { depends = ["accel-driver"] }

            """
        )
        + recipe.read_text()
    )
    result = build(fake.project, fake.options(channels=("arch",)), reporter)
    depends = _pkgbuild_array(
        (result.version_dir / "packaging" / "arch" / "PKGBUILD").read_text(), "depends"
    )
    assert "product-sdk" in depends and "recipe-sdk" not in depends
    assert "accel-driver>=2" in depends
