"""`invoke new-recipe`: from coordinates on a local index (PEP 691) or Maven repository on
127.0.0.1 to a recipe and product that `build` turns into a published tree; refusals."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from ortbundle._core.errors import ConfigError, FetchError
from ortbundle._core.locations import ENV_MAVEN_URL, ENV_NPM_REGISTRY
from ortbundle._core.progress import Reporter
from ortbundle.cli.common import CommandFailed
from ortbundle.cli.scaffold import run_new_recipe
from ortbundle.config.plan import BuildOptions, Project
from ortbundle.pipeline.build import build
from ortbundle.tools.scaffold import ScaffoldOptions, new_recipe, parse_coordinates
from tests.helpers.android import BIONIC, K16, sha256_of
from tests.helpers.elf import make_elf
from tests.helpers.index_server import IndexServer
from tests.helpers.maven_server import MavenServer
from tests.helpers.npm_server import NpmServer, make_tarball
from tests.helpers.pe import make_pe
from tests.helpers.project import (
    CORE_EXPORTS,
    CPU,
    FAST_RETRY,
    REPO_POLICY,
    linux_members,
    windows_members,
)
from tests.helpers.tarballs import make_aar
from tests.helpers.wheels import make_wheel

PROJECT = "acme-inference"
MIT = (
    b"MIT License\n\nCopyright (c) Acme\n\nPermission is hereby granted, free of charge, to any "
    b"person obtaining a copy of this software...\n"
)
DIST_INFO_LICENSE = "acme_inference-2.0.0.dist-info/licenses/LICENSE"


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "app"
    (root / "licenses").mkdir(parents=True)
    (root / "licenses" / "policy.toml").write_text(REPO_POLICY.read_text("utf-8"))
    return root


def publish(
    server: IndexServer, where: Path, version: str, files: dict[str, bytes], tag: str
) -> None:
    stem = PROJECT.replace("-", "_")
    wheel = make_wheel(where / f"{stem}-{version}-{tag}.whl", PROJECT, version, files)
    server.add(PROJECT, wheel)


@pytest.fixture
def index(tmp_path: Path) -> Iterator[IndexServer]:
    """acme-inference 1.0.0 (linux only), 2.0.0 (linux for cp311 and cp312, windows x64, and a
    pure-Python wheel) and 3.0.0rc1: the scaffold takes 2.0.0."""
    where = tmp_path / "wheels"
    with IndexServer().running() as server:
        script = b"INPUT(-lbroken)\n"  # a linker script named like a library
        linux = {**linux_members(), DIST_INFO_LICENSE: MIT, "onnxruntime/capi/libbroken.so": script}
        windows = {**windows_members(), DIST_INFO_LICENSE: MIT}
        publish(server, where, "1.0.0", linux, "cp311-cp311-manylinux_2_28_x86_64")
        publish(server, where, "2.0.0", linux, "cp311-cp311-manylinux_2_28_x86_64")
        publish(server, where, "2.0.0", linux, "cp312-cp312-manylinux_2_28_x86_64")
        publish(server, where, "2.0.0", windows, "cp312-cp312-win_amd64")
        publish(server, where, "2.0.0", {"acme/__init__.py": b""}, "py3-none-any")
        publish(server, where, "3.0.0rc1", linux, "cp312-cp312-manylinux_2_28_x86_64")
        yield server


def options(tmp_path: Path, coordinates: str, **more: object) -> ScaffoldOptions:
    values: dict[str, object] = {
        "cache_dir": tmp_path / "cache",
        "retry": FAST_RETRY,
        "jobs": 2,
        "environ": {"HOME": str(tmp_path / "home")},
    }
    values.update(more)
    return ScaffoldOptions(coordinates, **values)  # type: ignore[arg-type]


def build_options(tmp_path: Path, product: str, **more: object) -> BuildOptions:
    values: dict[str, object] = {
        "product": product,
        "cache_dir": tmp_path / "cache",
        "retry": FAST_RETRY,
        "jobs": 2,
        "environ": {"HOME": str(tmp_path / "home"), "SOURCE_DATE_EPOCH": "1700000000"},
    }
    values.update(more)
    return BuildOptions(**values)  # type: ignore[arg-type]


def test_coordinates_forms() -> None:
    assert parse_coordinates("onnxruntime").describe() == "pypi:onnxruntime"
    assert parse_coordinates("pypi:onnxruntime==1.2").version == "1.2"
    maven = parse_coordinates("maven:com.example:ort-android:1.0.0")
    assert (maven.kind, maven.name, maven.version) == ("maven", "com.example:ort-android", "1.0.0")
    npm = parse_coordinates("npm:@scope/ort@0.4.9")
    assert (npm.name, npm.version) == ("@scope/ort", "0.4.9")
    assert parse_coordinates("npm:@scope/ort", "1.0").version == "1.0"
    for bad in ("maven:only-one", "pypi:bad name", "npm:UPPER", "pypi:x==1 2"):
        with pytest.raises(ConfigError, match="coordinates"):
            parse_coordinates(bad)
    with pytest.raises(ConfigError, match="--version"):
        parse_coordinates("pypi:x==1.0", "2.0")


@pytest.mark.slow
def test_pypi_scaffold_writes_a_recipe_that_builds(
    tmp_path: Path, index: IndexServer, reporter: Reporter
) -> None:
    root = _root(tmp_path)
    project = Project.at(root)
    result = new_recipe(
        project, options(tmp_path, PROJECT, index_url=index.url, product="myapp"), reporter
    )
    assert result.choices == ()
    recipe = tomllib.loads(result.recipe.read_text())
    assert recipe["component"]["version"] == "2.0.0"  # not the pre-release, not 1.0.0
    assert set(recipe["sources"]) == {"linux-x86_64", "windows-x86_64"}
    linux_source = recipe["sources"]["linux-x86_64"]
    assert linux_source["pypi"]["filename"].startswith("acme_inference-2.0.0-cp312")
    assert len(linux_source["sha256"]) == 64 and linux_source["size"] > 0
    linux = recipe["targets"]["linux-x86_64"]
    assert linux["entry"] == "libonnxruntime.so.*.*.*"
    # nothing in the archive needs these; libdep and libonnxruntime_shared are needed
    assert linux["roots"] == ["libonnxruntime.so.*", "libprovider.so", "libunused.so"]
    drops = {tuple(d["names"]): d["reason"] for d in linux["drop"]}
    assert drops.pop(("onnxruntime_pybind11_state*",)) == "Python binding"
    assert drops.pop(("libbroken.so",)).startswith("not a native library (")
    assert drops == {}
    assert linux["licenses"][0]["expression"] == "MIT"  # read from the dist-info licence text
    # the files say nothing of themselves: one rule, every guess listed as data
    assert len(linux["licenses"]) == 1 and linux["licenses"][0]["files"] == ["*"]
    assert linux["licenses"][0]["guessed"] == ["expression", "files", "texts"]
    # both texts are named LICENSE and would land on one path: the PEP 639 one is taken
    assert linux["licenses"][0]["texts"] == [
        {"source": "linux-x86_64", "member": DIST_INFO_LICENSE}
    ]
    windows = recipe["targets"]["windows-x86_64"]
    assert windows["entry"] == "onnxruntime.dll"
    assert windows["drop"] == [{"names": ["*.pyd"], "reason": "Python binding"}]
    text = result.recipe.read_text()
    # an editor checks the recipe and the product against schemas/ from their first line
    assert text.startswith("#:schema ../schemas/recipe.json\n# Scaffolded by")
    assert (root / "manifests/myapp.toml").read_text().startswith("#:schema ../schemas/product")
    assert "# libonnxruntime.so.1.0.0 exports OrtGetApiBase: the ONNX Runtime core" in text
    assert "left out (a text of that file name is taken): onnxruntime/LICENSE" in text
    lines = result.lines()
    assert "    onnxruntime_pybind11_state.so: drop (Python binding)" in lines
    assert "    libprovider.so: keep, needs libonnxruntime_shared.so" in lines
    assert set(result.kept["linux-x86_64"]) == {
        "libonnxruntime.so.1.0.0",
        "libdep.so.2",
        "libprovider.so",
        "libonnxruntime_shared.so",
        "libunused.so",
    }

    build(project, build_options(tmp_path, "myapp", index_url=index.url), reporter)
    staged = root / "dist/myapp/0.1.0/linux-x86_64/runtimes/acme-inference"
    assert (staged / "libonnxruntime.so.1.0.0").is_file()
    assert not list(staged.glob("*pybind*"))
    assert (
        root / "dist/myapp/0.1.0/windows-x86_64/runtimes/acme-inference/onnxruntime.dll"
    ).is_file()


def test_an_unresolved_library_is_the_users_choice(
    tmp_path: Path, index: IndexServer, reporter: Reporter
) -> None:
    members = {
        "pkg/libonnxruntime.so.1": make_elf(
            soname="libonnxruntime.so.1",
            needed=("libc.so.6", "libcudnn.so.9"),
            exports=CORE_EXPORTS,
        ),
        "pkg/LICENSE": MIT,
    }
    wheel = make_wheel(
        tmp_path / "w" / "gpu_rt-1.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        "gpu-rt",
        "1.0",
        members,
    )
    index.add("gpu-rt", wheel)
    root = _root(tmp_path)
    with pytest.raises(CommandFailed) as failed:
        run_new_recipe(options(tmp_path, "pypi:gpu-rt", index_url=index.url), root=root)
    assert failed.value.code == 8
    text = (root / "recipes/gpu-rt.toml").read_text()
    assert "libonnxruntime.so.1 need(s) libcudnn.so.9" in text
    assert '# names = ["libcudnn.so.9"]' in text
    assert "# [[externals]]" in text
    tomllib.loads(text)  # the commented block leaves valid TOML


def test_wrong_coordinates_fail_cleanly(
    tmp_path: Path, index: IndexServer, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path)
    with pytest.raises(CommandFailed) as failed:
        run_new_recipe(options(tmp_path, "pypi:no-such-project", index_url=index.url), root=root)
    assert failed.value.code == FetchError.exit_code
    assert "no index lists wheels of no-such-project" in str(failed.value)
    with pytest.raises(CommandFailed) as failed:
        run_new_recipe(options(tmp_path, f"{PROJECT}==9.9", index_url=index.url), root=root)
    assert failed.value.code == 3
    assert "9.9 is not published (versions listed: 1.0.0, 2.0.0, 3.0.0rc1)" in str(failed.value)
    with pytest.raises(CommandFailed) as failed:
        run_new_recipe(options(tmp_path, "maven:nogroup", index_url=index.url), root=root)
    assert failed.value.code == ConfigError.exit_code
    assert not (root / "recipes").exists() or not list((root / "recipes").iterdir())
    assert "Traceback" not in capsys.readouterr().err


def test_an_existing_recipe_is_refused_unless_forced(
    tmp_path: Path, index: IndexServer, reporter: Reporter
) -> None:
    root = _root(tmp_path)
    (root / "recipes").mkdir()
    mine = root / "recipes" / f"{PROJECT}.toml"
    mine.write_text("# my own edits\n")
    with pytest.raises(CommandFailed) as failed:
        run_new_recipe(options(tmp_path, PROJECT, index_url=index.url), root=root)
    assert failed.value.code == 2
    assert "exists; the scaffold does not overwrite it" in str(failed.value)
    assert mine.read_text() == "# my own edits\n"
    assert index.requests == []  # refused before asking the index anything
    new_recipe(
        Project.at(root), options(tmp_path, PROJECT, index_url=index.url, force=True), reporter
    )
    assert "[component]" in mine.read_text()


ORT = ("com.acme", "acme-ort-android")
AAR = "Plugins/Android/acme.aar"


def aar(version: str) -> bytes:
    members: dict[str, bytes] = {"LICENSE": MIT}
    for abi, machine in (("arm64-v8a", "EM_AARCH64"), ("x86_64", "EM_X86_64")):
        members[f"jni/{abi}/libonnxruntime.so"] = make_elf(
            machine=machine,
            soname="libonnxruntime.so",
            needed=BIONIC,
            align=K16,
            payload=version.encode(),
            exports=CORE_EXPORTS,
            rodata=CPU,
        )
        members[f"jni/{abi}/libonnxruntime4j_jni.so"] = make_elf(
            machine=machine,
            soname="libonnxruntime4j_jni.so",
            needed=("libonnxruntime.so", "libc.so"),
            align=K16,
        )
    return make_aar(members)


def test_maven_aar_scaffold_builds_android(tmp_path: Path, reporter: Reporter) -> None:
    root = _root(tmp_path)
    project = Project.at(root)
    with MavenServer().running() as maven:
        for version in ("1.0.0", "1.1.0", "1.2.0-rc1"):
            maven.add(*ORT, version, aar(version))
        environ = {"HOME": str(tmp_path / "home"), ENV_MAVEN_URL: maven.url}
        result = new_recipe(
            project,
            options(tmp_path, f"maven:{ORT[0]}:{ORT[1]}", product="phone", environ=environ),
            reporter,
        )
        assert result.choices == ()
        recipe = tomllib.loads(result.recipe.read_text())
        assert recipe["sources"]["aar"]["maven"]["version"] == "1.1.0"
        for abi in ("arm64-v8a", "x86_64"):
            section = recipe["targets"][f"android-{abi}"]
            assert section["take"] == [{"source": "aar", "libraries": [f"jni/{abi}/*.so"]}]
            assert section["roots"] == ["libonnxruntime.so"]
            assert section["drop"][0]["names"] == ["libonnxruntime4j_jni.so"]
            assert section["licenses"][0]["texts"] == [{"source": "aar", "member": "LICENSE"}]
        build(
            project,
            build_options(
                tmp_path, "phone", environ={**environ, "SOURCE_DATE_EPOCH": "1700000000"}
            ),
            reporter,
        )
    staged = root / "dist/phone/0.1.0/android-arm64-v8a/runtimes/acme-ort-android"
    assert (staged / "libonnxruntime.so").is_file()
    assert not (staged / "libonnxruntime4j_jni.so").exists()


def test_npm_package_with_an_aar_inside(tmp_path: Path, reporter: Reporter) -> None:
    """The AAR inside the tarball is pinned by its own SHA-256 and read; the build reads it."""
    root = _root(tmp_path)
    project = Project.at(root)
    with NpmServer().running() as npm:
        inner = {version: aar(version) for version in ("0.9.0", "1.0.0")}
        for version, data in inner.items():
            npm.add("acme-ort", version, make_tarball("acme-ort", version, {AAR: data}))
        environ = {"HOME": str(tmp_path / "home"), ENV_NPM_REGISTRY: npm.url}
        result = new_recipe(
            project,
            options(
                tmp_path,
                "npm:acme-ort",
                product="phone",
                targets=("android-x86_64",),
                environ=environ,
            ),
            reporter,
        )
        recipe = tomllib.loads(result.recipe.read_text())
        source = recipe["sources"]["aar"]
        assert source["npm"] == {"package": "acme-ort", "version": "1.0.0"}
        nested = [{"member": f"package/{AAR}", "sha256": sha256_of(inner["1.0.0"])}]
        assert source["nested"] == nested
        assert set(recipe["targets"]) == {"android-x86_64"}
        build(
            project,
            build_options(tmp_path, "phone", environ={**environ, "SOURCE_DATE_EPOCH": "1"}),
            reporter,
        )
    staged = root / "dist/phone/0.1.0/android-x86_64/runtimes/acme-ort"
    assert (staged / "libonnxruntime.so").is_file()


def test_an_aar_cannot_serve_a_desktop_target(tmp_path: Path) -> None:
    with pytest.raises(CommandFailed) as failed:
        run_new_recipe(
            options(tmp_path, "maven:com.acme:x:1.0", targets=("linux-x86_64",)),
            root=_root(tmp_path),
        )
    assert failed.value.code == 2
    assert "an AAR serves Android targets only" in str(failed.value)


def test_a_target_the_release_does_not_publish_is_named(
    tmp_path: Path, index: IndexServer, reporter: Reporter
) -> None:
    result = new_recipe(
        Project.at(_root(tmp_path)),
        options(tmp_path, PROJECT, index_url=index.url, targets=("windows-arm64", "linux-x86_64")),
        reporter,
    )
    assert "windows-arm64: acme-inference 2.0.0 publishes nothing for it" in result.notes
    assert set(tomllib.loads(result.recipe.read_text())["targets"]) == {"linux-x86_64"}


# --- what the component is and offers, from its libraries' exports and strings ---------------

DML_TABLE = [
    ("TensorrtExecutionProvider", False),
    ("CUDAExecutionProvider", False),
    ("OpenVINOExecutionProvider", False),
    ("DmlExecutionProvider", True),
    ("WebGpuExecutionProvider", False),
    ("CPUExecutionProvider", True),
]


def test_the_providers_are_the_ones_the_core_offers(
    tmp_path: Path, index: IndexServer, reporter: Reporter
) -> None:
    """A DirectML build: its onnxruntime.dll names every provider ONNX Runtime knows and its
    table offers DML and CPU; no provider library says so by its file name."""
    members = {
        "onnxruntime/capi/onnxruntime.dll": make_pe(
            imports=("KERNEL32.dll", "DirectML.dll"),
            exports=("OrtGetApiBase", "OrtSessionOptionsAppendExecutionProvider_DML"),
            provider_table=DML_TABLE,
        ),
        "onnxruntime/capi/DirectML.dll": make_pe(imports=("KERNEL32.dll",)),
        "onnxruntime/capi/onnxruntime_providers_shared.dll": make_pe(imports=("KERNEL32.dll",)),
        "onnxruntime/LICENSE": MIT,
    }
    wheel = tmp_path / "w" / "dml_like-1.24.4-cp312-cp312-win_amd64.whl"
    index.add("dml-like", make_wheel(wheel, "dml-like", "1.24.4", members))
    root = _root(tmp_path)
    project = Project.at(root)
    result = new_recipe(
        project, options(tmp_path, "pypi:dml-like", index_url=index.url, product="dml"), reporter
    )
    assert result.choices == ()
    recipe = tomllib.loads(result.recipe.read_text())
    assert recipe["component"]["kind"] == "runtime"
    assert recipe["component"]["providers"] == ["DmlExecutionProvider", "CPUExecutionProvider"]
    assert recipe["targets"]["windows-x86_64"]["entry"] == "onnxruntime.dll"
    text = result.recipe.read_text()
    assert "# read from the core's provider table (GetAvailableProviders)" in text
    assert "# read from the exports: onnxruntime.dll exports OrtGetApiBase" in text
    build(project, build_options(tmp_path, "dml", index_url=index.url), reporter)


def _nvidia_like(tmp_path: Path, index: IndexServer) -> None:
    """NVIDIA's TensorRT-RTX plugin EP as its -cu13 wheel lays it out: the plugin library, the
    TensorRT-RTX libraries it needs (which most others need: the old scaffold's entry) and the
    CUDA runtime; no ONNX Runtime core."""
    members = {
        "nv_ep/onnxruntime_providers_nv_tensorrt_rtx.dll": make_pe(
            imports=("KERNEL32.dll", "tensorrt_rtx_1_7.dll", "cudart64_13.dll"),
            exports=("CreateEpFactories", "ReleaseEpFactory"),
            rodata=("NvTensorRTRTXExecutionProvider", "CPUExecutionProvider"),
        ),
        "nv_ep/tensorrt_rtx_1_7.dll": make_pe(
            imports=("KERNEL32.dll", "cudart64_13.dll"), payload=b"t" * 4000
        ),
        "nv_ep/tensorrt_onnxparser_rtx_1_7.dll": make_pe(imports=("tensorrt_rtx_1_7.dll",)),
        "nv_ep/cudart64_13.dll": make_pe(imports=("KERNEL32.dll",)),
        "nv_ep/LICENSE": MIT,
    }
    wheel = tmp_path / "w" / "nv_ep_like-0.5.0-py3-none-win_amd64.whl"
    requires = "Requires-Dist: onnxruntime>=1.23.0\n"
    index.add("nv-ep-like", make_wheel(wheel, "nv-ep-like", "0.5.0", members, metadata=requires))


@pytest.mark.slow
def test_a_plugin_ep_is_scaffolded_as_one_and_paired_with_the_projects_core(
    tmp_path: Path, index: IndexServer, reporter: Reporter
) -> None:
    _nvidia_like(tmp_path, index)
    root = _root(tmp_path)
    project = Project.at(root)
    alone = new_recipe(
        project,
        options(tmp_path, "pypi:nv-ep-like", index_url=index.url, product="lonely"),
        reporter,
    )
    assert any(c.startswith("the pairing: lonely.toml needs a runtime") for c in alone.choices)
    recipe = tomllib.loads(alone.recipe.read_text())
    component = recipe["component"]
    assert component["kind"] == "plugin-ep"
    assert component["ep_name"] == "NvTensorRTRTXExecutionProvider"
    assert component["providers"] == ["NvTensorRTRTXExecutionProvider"]
    assert component["gpu_vendors"] == ["nvidia"]
    assert component["min_core"] == "1.23.0"  # what the wheel requires
    entry = recipe["targets"]["windows-x86_64"]["entry"]
    assert entry == "onnxruntime_providers_nv_tensorrt_rtx.dll"

    # with a core in the project, the product pairs the plugin with it and builds
    new_recipe(project, options(tmp_path, PROJECT, index_url=index.url), reporter)
    paired = new_recipe(
        project,
        options(tmp_path, "pypi:nv-ep-like", index_url=index.url, product="app", force=True),
        reporter,
    )
    assert paired.choices == ()
    product = tomllib.loads((root / "manifests/app.toml").read_text())
    assert product["product"]["runtimes"] == [PROJECT]
    assert product["plugin"] == {"nv-ep-like": {"pairs_with": [PROJECT]}}
    result = build(project, build_options(tmp_path, "app", index_url=index.url), reporter)
    (target,) = result.targets
    plugin = target.stage / "plugins/nv-ep-like/onnxruntime_providers_nv_tensorrt_rtx.dll"
    assert plugin.is_file()


@pytest.mark.slow
def test_new_recipe_adds_to_an_existing_product_and_says_what_it_added(
    tmp_path: Path, index: IndexServer, reporter: Reporter
) -> None:
    """A product the user already has keeps every line they wrote; the new runtime and its
    targets are added, the plugin paired with the project's core, and the scaffold says so."""
    _nvidia_like(tmp_path, index)
    root = _root(tmp_path)
    project = Project.at(root)
    windows = ("windows-x86_64",)  # where the plugin ships: the core's product is that target's
    core = options(tmp_path, PROJECT, index_url=index.url, product="app", targets=windows)
    new_recipe(project, core, reporter)
    manifest = root / "manifests" / "app.toml"
    manifest.write_text(
        manifest.read_text().replace('version = "0.1.0"', 'version = "2.5.0"  # my release')
    )
    again = new_recipe(
        project, options(tmp_path, "pypi:nv-ep-like", index_url=index.url, product="app"), reporter
    )
    text = manifest.read_text()
    assert 'version = "2.5.0"  # my release' in text  # the user's lines are kept
    product = tomllib.loads(text)
    assert product["product"]["runtimes"] == [PROJECT]
    assert product["plugin"] == {"nv-ep-like": {"pairs_with": [PROJECT]}}
    assert product["product"]["targets"] == ["windows-x86_64"]
    added = [n for n in again.notes if n.startswith("added to manifests/app.toml")]
    assert added and "[plugin.nv-ep-like] pairs_with" in added[0], again.notes
    build(project, build_options(tmp_path, "app", index_url=index.url), reporter)
    # asked again, nothing is listed twice and the scaffold says it added nothing
    third = new_recipe(
        project,
        options(tmp_path, "pypi:nv-ep-like", index_url=index.url, product="app", force=True),
        reporter,
    )
    assert tomllib.loads(manifest.read_text())["product"]["runtimes"] == [PROJECT]
    assert "added to manifests/app.toml" not in " ".join(third.notes)  # --force: written anew


def test_a_meta_package_names_the_package_it_depends_on(tmp_path: Path, index: IndexServer) -> None:
    """NVIDIA's `onnxruntime-ep-nv-tensorrt-rtx` is a 2 KB pure wheel whose METADATA requires
    the package that carries the DLLs: the scaffold says so instead of "no wheel for" every
    target, and points at that package (an extra's requirement is not one)."""
    wheel = tmp_path / "w" / "nv_meta-0.5.0-py3-none-any.whl"
    metadata = "Requires-Dist: nv-ep-like==0.5.0\nRequires-Dist: pytest; extra == 'test'\n"
    index.add(
        "nv-meta",
        make_wheel(wheel, "nv-meta", "0.5.0", {"nv_meta/__init__.py": b""}, metadata=metadata),
    )
    root = _root(tmp_path)
    with pytest.raises(CommandFailed) as failed:
        run_new_recipe(options(tmp_path, "pypi:nv-meta", index_url=index.url), root=root)
    message = str(failed.value)
    assert failed.value.code == FetchError.exit_code, message
    assert "nv-meta is a meta-package" in message and "depends on nv-ep-like" in message, message
    assert "pytest" not in message.split(" — fix:")[0], message
    assert "invoke new-recipe -s pypi:nv-ep-like" in message, message


def test_no_wheel_for_a_target_lists_the_asked_versions_files_only(
    tmp_path: Path, index: IndexServer
) -> None:
    """onnxruntime-extensions 0.15.2 has no win_amd64 wheel; the scaffold once listed another
    version's files, the very Windows wheel it said did not exist among them."""
    root = _root(tmp_path)
    asked = options(
        tmp_path, f"pypi:{PROJECT}==1.0.0", index_url=index.url, targets=("windows-x86_64",)
    )
    with pytest.raises(CommandFailed) as failed:
        run_new_recipe(asked, root=root)
    message = str(failed.value)
    assert failed.value.code == FetchError.exit_code, message
    stem = PROJECT.replace("-", "_")
    assert (
        f"{PROJECT} 1.0.0 publishes no wheel for windows-x86_64 "
        f"(files: {stem}-1.0.0-cp311-cp311-manylinux_2_28_x86_64.whl)"
    ) in message, message
    assert "2.0.0" not in message.split(" — fix:")[0], message


def test_a_comment_quoting_control_bytes_leaves_valid_toml() -> None:
    """tomlkit escapes a control character in a string but writes a comment as given: the
    scaffold's recipe text has none, so a comment quoting a binary stays valid TOML."""
    import tomlkit

    from ortbundle.tools.scaffold import render

    doc = tomlkit.document()
    doc.add("kind", "runtime")
    doc["kind"].comment("libx.dylib says 'Acme\x05 Inc'")
    text = render._printable(tomlkit.dumps(doc))
    assert tomllib.loads(text) == {"kind": "runtime"}
    with pytest.raises(tomllib.TOMLDecodeError):
        tomllib.loads(tomlkit.dumps(doc))
