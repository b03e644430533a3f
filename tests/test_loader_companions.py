"""The loader offers a runtime's custom-op libraries (the paths a session registers with
RegisterCustomOpsLibrary) and its libraries using a core (only beside the core they fit),
against libraries built with gcc (payload/loader/ortapi.py companions)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ortbundle.payload import loader
from ortbundle.payload.loader import LoaderError, companions, open_runtime
from tests.test_loader_plugins import FAKE_CORE


def _runtime(core: str = "libonnxruntime.so.1.27.0") -> dict[str, Any]:
    return {
        "name": "fake",
        "directory": "runtimes/fake",
        "entry": core,
        "ort_version": "1.27.0",
        "files": [{"path": core, "size": 0, "sha256": "0" * 64}],
        "custom_ops": [{"name": "ortx", "library": "custom_ops/ortx/libortx.so", "version": "0.1"}],
        "uses_core": [
            {
                "name": "genai",
                "library": "libraries/genai/libgenai.so",
                "version": "0.1",
                "core": "libonnxruntime.so.1.27.0",
            }
        ],
    }


def _gcc(directory: Path, name: str, source: str, *links: str) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed (Debian: apt-get install gcc)")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.c").write_text(source)
    library = directory / name
    command = ["gcc", "-shared", "-fPIC", "-O1", "-o", str(library), str(directory / f"{name}.c")]
    subprocess.run([*command, *links], check=True)
    return library


def _stage(tmp_path: Path, *, exports_register: bool = True) -> Path:
    stage = tmp_path / "stage"
    soname = "-Wl,-soname,libonnxruntime.so.1.27.0"  # what GenAI's need finds already loaded
    core = _gcc(stage / "runtimes/fake", "libonnxruntime.so.1.27.0", FAKE_CORE, soname)
    register = "int RegisterCustomOps(void *o, const void *a) { (void)o; (void)a; return 0; }"
    other = "int OrtxCreate(void) { return 0; }"
    _gcc(stage / "custom_ops/ortx", "libortx.so", register if exports_register else other)
    # GenAI's shape: it links the core by the name the runtime holds
    _gcc(
        stage / "libraries/genai",
        "libgenai.so",
        "const void *OrtGetApiBase(void);\nconst void *OgaCore(void) { return OrtGetApiBase(); }",
        f"-L{core.parent}",
        f"-l:{core.name}",
    )
    return stage


@pytest.fixture(autouse=True)
def _no_cores_left(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader.ortapi, "_CORES", {})


def test_without_loading_the_paths_are_offered_and_a_misfit_is_skipped(tmp_path: Path) -> None:
    stage = tmp_path / "stage"
    for path in ("custom_ops/ortx/libortx.so", "libraries/genai/libgenai.so"):
        (stage / path).parent.mkdir(parents=True)
        (stage / path).write_bytes(b"")
    found = companions(stage, _runtime())
    assert [(c.name, c.kind, c.status) for c in found] == [
        ("ortx", "custom-ops", "ready"),
        ("genai", "uses-core", "offered"),
    ]
    assert found[0].library == str((stage / "custom_ops/ortx/libortx.so").resolve())
    # beside a runtime whose core is another file, GenAI is not offered
    other = companions(stage, _runtime(core="libonnxruntime.so.1.20.0"))
    assert (other[1].status, other[1].why) == (
        "skipped",
        "needs the core libonnxruntime.so.1.27.0, which fake does not hold",
    )
    (stage / "custom_ops/ortx/libortx.so").unlink()
    assert companions(stage, _runtime())[0].status == "failed"


@pytest.mark.tools
def test_after_the_core_a_custom_op_library_is_ready_and_genai_loaded(tmp_path: Path) -> None:
    stage = _stage(tmp_path)
    runtime = _runtime()
    with pytest.raises(LoaderError, match="open fake before loading the libraries beside it"):
        companions(stage, runtime, load=True)
    assert open_runtime(stage, runtime) == "1.27.0"
    found = companions(stage, runtime, load=True)
    assert [(c.name, c.status, c.why) for c in found] == [
        ("ortx", "ready", ""),
        ("genai", "loaded", ""),
    ]


@pytest.mark.tools
def test_a_custom_op_library_without_register_custom_ops_fails(tmp_path: Path) -> None:
    stage = _stage(tmp_path, exports_register=False)
    runtime = _runtime()
    open_runtime(stage, runtime)
    ortx = companions(stage, runtime, load=True)[0]
    assert (ortx.status, ortx.why) == (
        "failed",
        "it does not export RegisterCustomOps: not a custom-operator library",
    )
