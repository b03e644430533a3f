"""A stand-in ONNX Runtime core compiled from a few lines of C (gcc for Linux, mingw-w64 for
Windows), and a stage around it: what the smoke's probe and checks are tested on without the
real wheels. The core offers OrtGetApiBase, a version, its providers, an environment and
session options that take no provider, at the OrtApi indices the real header gives (ortprobe.c
declares the same); it runs no model."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ortbundle.stage.probe import MINGW_CC

_CORE = r"""
#include <stdint.h>
#include <stddef.h>
#ifdef _WIN32
#define EXPORT __declspec(dllexport)
#define CALL __stdcall
#else
#define EXPORT __attribute__((visibility("default")))
#define CALL
#endif
typedef void (*entry)(void);
static entry table[320];
static char *providers[] = { %(providers)s };
EXPORT const char *ort_names_known[] = { %(carries)s }; /* named in its bytes, not offered */
static int env;

static const char *CALL error_message(const void *status) {
    (void)status; return "this stand-in core has no execution provider but the CPU's";
}
static void CALL release_status(void *status) { (void)status; }
static void *CALL create_env(int level, const char *id, void **out) {
    (void)level; (void)id; *out = &env; return NULL;
}
static void *CALL get_providers(char ***out, int *count) {
    *out = providers; *count = (int)(sizeof providers / sizeof *providers); return NULL;
}
static void *CALL release_providers(char **names, int count) {
    (void)names; (void)count; return NULL;
}
static void *CALL create_options(void **out) { *out = &env; return NULL; }
static void CALL release_options(void *options) { (void)options; }
static void *CALL append_provider(void *options, const char *name, const char *const *keys,
                                  const char *const *values, size_t count) {
    (void)options; (void)name; (void)keys; (void)values; (void)count; return &env; /* failed */
}
static const void *CALL get_api(uint32_t version) {
    if (version == 0 || version > %(api)d) return NULL;
    table[2] = (entry)error_message;      /* GetErrorMessage */
    table[3] = (entry)create_env;         /* CreateEnv */
    table[10] = (entry)create_options;    /* CreateSessionOptions */
    table[93] = (entry)release_status;    /* ReleaseStatus */
    table[100] = (entry)release_options;  /* ReleaseSessionOptions */
    table[125] = (entry)get_providers;    /* GetAvailableProviders */
    table[126] = (entry)release_providers; /* ReleaseAvailableProviders */
    table[216] = (entry)append_provider;  /* SessionOptionsAppendExecutionProvider */
    return table;
}
static const char *CALL version_string(void) { return "%(version)s"; }
struct base { const void *(CALL *get_api)(uint32_t); const char *(CALL *version)(void); };
EXPORT const struct base *CALL OrtGetApiBase(void) {
    static const struct base base = { get_api, version_string };
    return &base;
}
"""


def compile_core(
    directory: Path,
    name: str,
    *,
    windows: bool,
    version: str = "1.99.0",
    providers: Sequence[str] = ("CPUExecutionProvider",),
    carries: Sequence[str] = (),
) -> Path:
    """`directory/name`: the stand-in core, offering `providers` and naming `carries` too (as a
    real core names providers it was built without). Skips when the compiler is missing."""
    compiler = MINGW_CC if windows else "gcc"
    found = shutil.which(compiler)
    if found is None:
        package = "gcc-mingw-w64-x86-64" if windows else "gcc"
        pytest.skip(f"{compiler} is not installed (Debian/Ubuntu: apt-get install {package})")
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / f"{name}.c"
    text = _CORE % {
        "providers": ", ".join(f'"{p}"' for p in providers),
        "carries": ", ".join([*(f'"{p}"' for p in carries), "0"]),
        "api": int(version.split(".")[1]),
        "version": version,
    }
    source.write_text(text, "utf-8")
    library = directory / name
    command = [found, "-shared", "-O1", "-o", str(library), str(source)]
    if not windows:
        command[2:2] = ["-fPIC", f"-Wl,-soname,{name}"]
    subprocess.run(command, check=True, capture_output=True, timeout=120)
    source.unlink()
    return library


def compile_needing(directory: Path, name: str, needed: Sequence[str], *, stubs: Path) -> bytes:
    """The bytes of a real Linux shared library `name` (gcc) whose DT_NEEDED lists `needed`:
    one already in `directory` is linked as it is, any other against an empty stub made in
    `stubs`, which stays out of every search path (ld.so cannot find it, as on a machine
    without that vendor library). Skips when gcc is missing."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed (Debian/Ubuntu: apt-get install gcc)")
    stubs.mkdir(parents=True, exist_ok=True)
    empty = stubs / "empty.c"
    empty.write_text("int ortbundle_stub;\n", "utf-8")

    def link(name: str, *more: str) -> Path:
        out = stubs / name
        command = [gcc, "-shared", "-fPIC", f"-Wl,-soname,{name}", "-o", str(out), str(empty)]
        subprocess.run([*command, *more], check=True, capture_output=True, timeout=120)
        return out

    for library in needed:
        if not (directory / library).is_file():
            link(library)
    links = [f"-l:{library}" for library in needed]
    return link(name, "-Wl,--no-as-needed", f"-L{directory}", f"-L{stubs}", *links).read_bytes()


def need(name: str, group: str, *, optional: bool, install: str) -> dict[str, Any]:
    """One `requires` entry of runtimes.json."""
    return {"name": name, "group": group, "optional": optional, "install": install}


def fake_runtime(
    stage: Path,
    name: str,
    *,
    windows: bool,
    version: str = "1.99.0",
    providers: Sequence[str] = ("CPUExecutionProvider",),
    index_version: str | None = None,
    index_providers: Sequence[str] | None = None,
    extra: Mapping[str, bytes] | None = None,
    requires: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """Compile the core into stage/runtimes/<name>/, write `extra` files beside it, and return
    the runtime's runtimes.json entry (the index may claim another version or providers)."""
    directory = stage / "runtimes" / name
    entry = "onnxruntime.dll" if windows else "libonnxruntime.so.1"
    compile_core(directory, entry, windows=windows, version=version, providers=providers)
    for file, data in (extra or {}).items():
        (directory / file).write_bytes(data)
    files = [
        {
            "path": path.name,
            "size": path.stat().st_size,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        }
        for path in sorted(directory.iterdir())
    ]
    return {
        "name": name,
        "label": name.upper(),
        "directory": f"runtimes/{name}",
        "entry": entry,
        "ort_version": index_version or version,
        "providers": list(index_providers if index_providers is not None else providers),
        "fits": {"gpu_vendors": [], "any_gpu": False, "soc_families": []},
        "plugin_eps": [],
        "files": files,
        "requires": list(requires),
    }


def write_stage(stage: Path, target: str, runtimes: Sequence[dict[str, Any]]) -> Path:
    """stage/runtimes.json for these runtimes (no models)."""
    index = {
        "schema": "ortbundle.runtimes/2",
        "product": {"name": "app", "version": "1.0"},
        "target": target,
        "runtimes": list(runtimes),
    }
    stage.mkdir(parents=True, exist_ok=True)
    (stage / "runtimes.json").write_text(json.dumps(index), "utf-8")
    return stage
