"""`invoke new-recipe` on every kind the ONNX Runtime family publishes (issue 42): a custom-operator
library, a library that uses a core, a plugin EP named only by its Python package, a package of
none of these; messages name the user's recipe, never the scratch copy; a component is paired
with a project core whose version its wheel's Requires-Dist admits, or refused naming both."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from ortbundle._core.errors import ClosureError, ConfigError
from ortbundle._core.progress import plain_reporter
from ortbundle.config.plan import Project
from ortbundle.tools.scaffold import ScaffoldResult, new_recipe
from ortbundle.tools.scaffold.propose import stated_ep_name
from tests.helpers.companions import CUSTOM_OPS_EXPORTS, GENAI_EXPORTS
from tests.helpers.elf import make_elf
from tests.helpers.index_server import IndexServer
from tests.helpers.project import PLUGIN_EXPORTS, linux_members
from tests.helpers.wheels import make_wheel
from tests.test_scaffold import MIT, _root, options

LINUX = "cp313-cp313-manylinux_2_28_x86_64"
PYDLL = "onnxruntime_extensions/_extensions_pydll.cpython-313-x86_64-linux-gnu.so"


@pytest.fixture
def index(tmp_path: Path) -> Iterator[IndexServer]:
    """A fake onnxruntime core at 1.30.0 and 1.32.0, and the companions each test adds."""
    with IndexServer().running() as server:
        for version in ("1.30.0", "1.32.0"):
            name = f"onnxruntime-{version}-{LINUX}.whl"
            members = {**linux_members(), "onnxruntime/LICENSE": MIT}
            server.add(
                "onnxruntime", make_wheel(tmp_path / "w" / name, "onnxruntime", version, members)
            )
        yield server


def _publish(
    tmp_path: Path, index: IndexServer, project: str, members: dict[str, bytes], metadata: str = ""
) -> None:
    stem = project.replace("-", "_")
    wheel = make_wheel(
        tmp_path / "w" / f"{stem}-0.2.0-{LINUX}.whl", project, "0.2.0", members, metadata=metadata
    )
    index.add(project, wheel)


def _core(tmp_path: Path, index: IndexServer, project: Project, version: str) -> None:
    new_recipe(
        project,
        options(
            tmp_path, f"pypi:onnxruntime=={version}", index_url=index.url, name="core", force=True
        ),
        plain_reporter(),
    )


def _scaffold(
    tmp_path: Path, index: IndexServer, project: Project, coordinates: str, **more: object
) -> ScaffoldResult:
    return new_recipe(
        project,
        options(tmp_path, coordinates, index_url=index.url, **more),
        plain_reporter(),
    )


def _no_scratch_path(text: str) -> None:
    """The scaffold's scratch directory (tempfile.mkdtemp, prefix ortbundle-scaffold-) is not
    named; the project itself lives under pytest's temporary directory."""
    assert "ortbundle-scaffold-" not in text, text
    assert "/check/" not in text, text


def test_a_custom_operator_library_is_not_a_python_binding(
    tmp_path: Path, index: IndexServer
) -> None:
    """onnxruntime-extensions' shape: its only native library is named like a Python extension
    and exports RegisterCustomOps; it is the entry of a custom-ops recipe, paired in the product
    under [custom_ops.<name>]."""
    members = {
        PYDLL: make_elf(needed=("libc.so.6",), exports=CUSTOM_OPS_EXPORTS),
        "onnxruntime_extensions/__init__.py": b"",
        "onnxruntime_extensions/LICENSE": MIT,
    }
    _publish(tmp_path, index, "ort-extensions", members, "Requires-Dist: onnxruntime>=1.29\n")
    project = Project.at(_root(tmp_path))
    _core(tmp_path, index, project, "1.30.0")
    result = _scaffold(tmp_path, index, project, "pypi:ort-extensions", product="app")
    recipe = tomllib.loads(result.recipe.read_text())
    assert recipe["component"]["kind"] == "custom-ops"
    assert recipe["targets"]["linux-x86_64"]["entry"] == PYDLL.rsplit("/", 1)[1]
    assert "drop" not in recipe["targets"]["linux-x86_64"]
    product = tomllib.loads((project.root / "manifests/app.toml").read_text())
    assert product["custom_ops"] == {"ort-extensions": {"pairs_with": ["core"]}}
    assert product["product"]["runtimes"] == ["core"]


def test_a_library_that_links_the_core_uses_a_core(tmp_path: Path, index: IndexServer) -> None:
    """ONNX Runtime GenAI's shape: no core of its own, its library links libonnxruntime.so.1."""
    members = {
        "onnxruntime_genai/libonnxruntime-genai.so": make_elf(
            needed=("libonnxruntime.so.1", "libc.so.6"), exports=GENAI_EXPORTS
        ),
        "onnxruntime_genai/onnxruntime_genai.cpython-313-x86_64-linux-gnu.so": make_elf(
            needed=("libonnxruntime-genai.so", "libpython3.13.so.1.0")
        ),
        "onnxruntime_genai/LICENSE": MIT,
    }
    _publish(tmp_path, index, "ort-genai", members)
    project = Project.at(_root(tmp_path))
    _core(tmp_path, index, project, "1.32.0")
    result = _scaffold(tmp_path, index, project, "pypi:ort-genai", product="app")
    recipe = tomllib.loads(result.recipe.read_text())
    assert recipe["component"]["kind"] == "uses-core"
    assert recipe["targets"]["linux-x86_64"]["entry"] == "libonnxruntime-genai.so"
    assert "libonnxruntime.so.1" in result.recipe.read_text()  # the comment says what it links
    product = tomllib.loads((project.root / "manifests/app.toml").read_text())
    assert product["uses_core"] == {"ort-genai": {"pairs_with": ["core"]}}


def test_an_archive_of_none_of_the_family_is_exit_8_naming_what_it_found(
    tmp_path: Path, index: IndexServer
) -> None:
    members = {
        "other/libzstd.so.1": make_elf(soname="libzstd.so.1", exports=("ZSTD_compress",)),
        "other/_native.cpython-313-x86_64-linux-gnu.so": make_elf(exports=("PyInit__native",)),
    }
    _publish(tmp_path, index, "not-ort", members)
    project = Project.at(_root(tmp_path))
    with pytest.raises(ClosureError) as refused:
        _scaffold(tmp_path, index, project, "pypi:not-ort")
    text = str(refused.value)
    assert refused.value.exit_code == 8
    assert "libzstd.so.1 (exports ZSTD_compress)" in text
    assert "_native.cpython-313-x86_64-linux-gnu.so (exports PyInit__native)" in text
    assert "RegisterCustomOps" in text
    assert not (project.root / "recipes/not-ort.toml").exists()


def _ggml(tmp_path: Path, index: IndexServer, requires: str, *, python: bool = True) -> None:
    """onnxruntime-ggml's shape: a library exporting only the plugin entry points and carrying no
    "…ExecutionProvider" string; its EP name is in its Python package."""
    members = {"onnxruntime_ggml/libonnxruntime_ggml.so": make_elf(exports=PLUGIN_EXPORTS)}
    if python:
        members["onnxruntime_ggml/__init__.py"] = b'EP_NAME = "ggml"\n'
    _publish(tmp_path, index, "ort-ggml", members, f"Requires-Dist: {requires}\n")


def test_a_plugin_ep_named_by_its_python_package_scaffolds(
    tmp_path: Path, index: IndexServer
) -> None:
    _ggml(tmp_path, index, "onnxruntime<1.31,>=1.29")
    project = Project.at(_root(tmp_path))
    result = _scaffold(tmp_path, index, project, "pypi:ort-ggml")
    component = tomllib.loads(result.recipe.read_text())["component"]
    assert component["kind"] == "plugin-ep"
    assert component["ep_name"] == "ggml"
    assert component["providers"] == ["ggml"]
    assert component["min_core"] == "1.29"


def test_a_failing_check_names_the_users_recipe_not_the_scratch_copy(
    tmp_path: Path, index: IndexServer
) -> None:
    """A plugin whose name nothing states: the draft is refused, naming recipes/<name>.toml."""
    _ggml(tmp_path, index, "onnxruntime>=1.29", python=False)
    project = Project.at(_root(tmp_path))
    with pytest.raises(ConfigError) as refused:
        _scaffold(tmp_path, index, project, "pypi:ort-ggml")
    text = str(refused.value)
    _no_scratch_path(text)
    assert "recipes/ort-ggml.toml" in text
    assert refused.value.file == str(project.recipes / "ort-ggml.toml")


def test_a_plugin_is_paired_with_a_core_its_requirement_admits(
    tmp_path: Path, index: IndexServer
) -> None:
    _ggml(tmp_path, index, "onnxruntime<1.31,>=1.29")
    project = Project.at(_root(tmp_path))
    _core(tmp_path, index, project, "1.32.0")
    with pytest.raises(ClosureError) as refused:
        _scaffold(tmp_path, index, project, "pypi:ort-ggml", product="app")
    text = str(refused.value)
    assert refused.value.exit_code == 8
    assert "<1.31,>=1.29" in text and "core 1.32.0" in text, text
    assert "pypi:onnxruntime==VERSION" in text
    _no_scratch_path(text)
    assert not (project.recipes / "ort-ggml.toml").exists()
    _core(tmp_path, index, project, "1.30.0")  # force: replaces the 1.32.0 core
    result = _scaffold(tmp_path, index, project, "pypi:ort-ggml", product="app")
    assert not [c for c in result.choices if c.startswith("the pairing")], result.choices
    product = tomllib.loads((project.root / "manifests/app.toml").read_text())
    assert product["plugin"] == {"ort-ggml": {"pairs_with": ["core"]}}


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ('EP_NAME = "ggml"\n', "ggml"),  # onnxruntime-ggml
        ('EP_NAME: str = "ggml"\n', "ggml"),
        (  # onnxruntime-ep-webgpu
            'def get_ep_name() -> str:\n    """The name."""\n    return "WebGpuExecutionProvider"\n',
            "WebGpuExecutionProvider",
        ),
        (  # onnxruntime-ep-nv-tensorrt-rtx-cu13
            '_KNOWN_EP_NAME = "NvTensorRTRTXExecutionProvider"\n'
            "def get_ep_name() -> str:\n    return _KNOWN_EP_NAME\n",
            "NvTensorRTRTXExecutionProvider",
        ),
        ('def get_ep_name():\n    return compute()\nEP_NAME = "x"\n', "x"),
        ("import os\n", None),
        ("def broken(:\n", None),
    ],
)
def test_the_ep_name_a_python_package_states_is_read_not_run(source: str, name: str | None) -> None:
    assert stated_ep_name(source) == name
