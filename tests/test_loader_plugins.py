"""The loader registers plugin EPs through the C API, against a fake ORT core built with gcc.

The fake core lays out its OrtApi table the way onnxruntime_c_api.h does (an array of function
pointers) and implements only the entries the loader calls, at their real indices. The real
tier registers the real ep-webgpu plugin with the real WebGPU core (tests/test_real.py).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ortbundle.payload import loader
from ortbundle.payload.loader import Hardware, LoaderError, open_runtime, register_plugins

pytestmark = pytest.mark.tools

FAKE_CORE = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { const char *message; } Status;
static Status failed = {0};
static char names[8][128];
static const char *devices[8];
static int registered = 0;

static const char *GetErrorMessage(void *status) { return ((Status *)status)->message; }
static void ReleaseStatus(void *status) { (void)status; }
static void *CreateEnv(int level, const char *logid, void **out) {
  (void)level; (void)logid; *out = (void *)names; return NULL;
}
static void *Register(void *env, const char *name, const char *path) {
  (void)env; (void)name;
  FILE *f = fopen(path, "r");
  if (!f) { failed.message = "LoadLibrary failed: no such file"; return &failed; }
  if (!fgets(names[registered], sizeof names[0], f)) names[registered][0] = 0;
  fclose(f);
  names[registered][strcspn(names[registered], "\n")] = 0;
  devices[registered] = names[registered];
  registered++;
  return NULL;
}
static void *GetEpDevices(void *env, const char ***out, size_t *count) {
  (void)env; *out = devices; *count = (size_t)registered; return NULL;
}
static const char *EpName(const char *device) { return device; }

static void *table[425];
static const void *GetApi(unsigned version) {
  if (version > 22) return NULL;
  table[2] = (void *)GetErrorMessage; table[3] = (void *)CreateEnv;
  table[93] = (void *)ReleaseStatus; table[301] = (void *)Register;
  table[303] = (void *)GetEpDevices; table[312] = (void *)EpName;
  return table;
}
static const char *GetVersionString(void) { return "1.27.0"; }
static struct { const void *(*GetApi)(unsigned); const char *(*GetVersionString)(void); } base =
  { GetApi, GetVersionString };
const void *OrtGetApiBase(void) { return &base; }
"""


@pytest.fixture(scope="module")
def fake_core(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed (Debian: apt-get install gcc)")
    directory = tmp_path_factory.mktemp("core")
    source = directory / "core.c"
    source.write_text(FAKE_CORE)
    library = directory / "libonnxruntime.so.1.27.0"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(library), str(source)], check=True)
    return library


def stage(tmp_path: Path, core: Path, plugins: list[dict[str, Any]], name: str) -> Path:
    runtime_dir = tmp_path / "runtimes" / name
    runtime_dir.mkdir(parents=True)
    shutil.copy(core, runtime_dir / core.name)
    for plugin in plugins:
        path = tmp_path / plugin["library"]
        path.parent.mkdir(parents=True, exist_ok=True)
        if plugin.pop("exists", True):
            path.write_text(f"{plugin['ep_name']}\n")
    return tmp_path


def runtime(name: str, plugins: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": name,
        "directory": f"runtimes/{name}",
        "entry": "libonnxruntime.so.1.27.0",
        "ort_version": "1.27.0",
        "plugin_eps": plugins,
    }


def plugin(name: str, ep_name: str, min_core: str = "1.24.4", **extra: Any) -> dict[str, Any]:
    return {
        "registration_name": name,
        "ep_name": ep_name,
        "library": f"plugins/{name}/lib{name}.so",
        "min_core": min_core,
        "version": "0.4.0",
        **extra,
    }


def test_plugins_are_registered_with_the_opened_core(tmp_path: Path, fake_core: Path) -> None:
    plugins = [plugin("ep-webgpu", "WebGpuExecutionProvider"), plugin("ep-x", "XProvider")]
    root = stage(tmp_path, fake_core, plugins, "webgpu-a")
    entry = runtime("webgpu-a", plugins)
    assert open_runtime(root, entry) == "1.27.0"
    registered = register_plugins(root, entry)
    assert [(r.name, r.ep_name, r.devices) for r in registered] == [
        ("ep-webgpu", "WebGpuExecutionProvider", 1),
        ("ep-x", "XProvider", 1),
    ]


def test_a_plugin_the_core_refuses_is_reported_and_the_others_still_register(
    tmp_path: Path, fake_core: Path
) -> None:
    plugins = [plugin("ep-gone", "GoneProvider", exists=False), plugin("ep-y", "YProvider")]
    root = stage(tmp_path, fake_core, plugins, "webgpu-b")
    entry = runtime("webgpu-b", plugins)
    open_runtime(root, entry)
    gone, fine = register_plugins(root, entry)
    assert (gone.status, gone.devices) == ("failed", 0)
    assert "plugin EP ep-gone" in gone.why and "LoadLibrary failed" in gone.why
    assert (fine.status, fine.devices) == ("registered", 1)


def test_a_plugin_for_another_soc_is_not_loaded(tmp_path: Path, fake_core: Path) -> None:
    plugins = [
        plugin("qnn", "QNNExecutionProvider", soc_families=["qualcomm"]),
        plugin("ep-z", "ZProvider"),
    ]
    root = stage(tmp_path, fake_core, plugins, "stock-d")
    entry = runtime("stock-d", plugins)
    open_runtime(root, entry)
    laptop = Hardware(soc="armv8 (64-bit) family 8 model 0 revision 0, apple")
    qnn, other = register_plugins(root, entry, laptop)
    assert (qnn.status, qnn.why) == (
        "skipped",
        f"needs a qualcomm SoC; this machine has {laptop.soc}",
    )
    assert other.status == "registered"
    snapdragon = Hardware(soc="qualcomm armv8 (64-bit) family 8, qualcomm technologies inc")
    entry = runtime("stock-e", plugins)
    stage(tmp_path / "e", fake_core, [dict(p) for p in plugins], "stock-e")
    open_runtime(tmp_path / "e", entry)
    (qnn, _) = register_plugins(tmp_path / "e", entry, snapdragon)
    assert (qnn.status, qnn.devices) == ("registered", 1)


def test_a_plugin_needing_a_newer_core_is_refused(tmp_path: Path, fake_core: Path) -> None:
    plugins = [plugin("ep-new", "NewProvider", min_core="1.30.0")]
    root = stage(tmp_path, fake_core, plugins, "webgpu-c")
    entry = runtime("webgpu-c", plugins)
    open_runtime(root, entry)
    with pytest.raises(LoaderError, match="needs ONNX Runtime 1.30.0, webgpu-c is 1.27.0"):
        register_plugins(root, entry)


def test_registering_needs_the_core_opened_first(tmp_path: Path) -> None:
    entry = runtime("never-opened", [plugin("p", "P")])
    loader._CORES.pop("never-opened", None)
    with pytest.raises(LoaderError, match="open never-opened before"):
        register_plugins(tmp_path, entry)
