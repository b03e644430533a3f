"""The loader checks before it chooses: each runtime's `requires` searched as the platform's
loader would (ld.so on fake roots with a generated ld.so.cache, Windows' DLL search order on
fake directories), add-on fragments in runtimes.d/, and the build's "never chosen" warning."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ortbundle.config.products import Addon, Product, SystemSpec
from ortbundle.config.recipes import Recipe
from ortbundle.payload.loader import (
    SCHEMA,
    Gpu,
    Hardware,
    choose,
    detect,
    load_index,
    loader_source,
    main,
    read_ld_cache,
    system_libraries,
)
from ortbundle.stage.closure import Closure, ExternalLibrary
from ortbundle.stage.index_json import (
    FRAGMENTS_DIR,
    INDEX_NAME,
    LOADER_NAME,
    requires_entries,
    write_index,
)
from ortbundle.stage.reachable import never_chosen, warning_lines
from ortbundle.stage.requirements import resolve
from ortbundle.stage.staging import StagedRuntime
from tests.helpers.elf import make_elf
from tests.helpers.fakeroot import (
    FLAG_AARCH64_LIB64,
    FLAG_ELF_LIBC6,
    ld_cache,
    nvidia_machine,
    run_loader,
)
from tests.helpers.packages import SETTINGS

LINUX, WINDOWS = "linux-x86_64", "windows-x86_64"
CUDNN = "Install NVIDIA cuDNN 9 for CUDA 13"
SKIP_CUDA = f"skip cuda: libcudnn.so.9 not found — {CUDNN}"


def need(name: str, group: str, *, optional: bool = False, install: str = "") -> dict[str, Any]:
    return {"name": name, "group": group, "optional": optional, "install": install}


def runtime(
    name: str, vendors: list[str], requires: list[dict[str, Any]] | None = None, **more: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "label": name.upper(),
        "directory": f"runtimes/{name}",
        "entry": "libonnxruntime.so.1",
        "ort_version": "1.0",
        "providers": [],
        "plugin_eps": [],
        "files": [],
        "fits": {"gpu_vendors": vendors, "any_gpu": False, "soc_families": []},
        "requires": requires or [],
        **more,
    }


CUDA = runtime(
    "cuda",
    ["nvidia"],
    [
        need("libcudnn.so.9", "cudnn", install=CUDNN),
        need("libcufft.so.12", "cufft", optional=True, install="Install NVIDIA cuFFT 12"),
    ],
)
CPU = runtime("cpu", [])


def index(*runtimes: dict[str, Any], target: str = LINUX) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "product": {"name": "app", "version": "1.0"},
        "target": target,
        "override_env": "APP_ORT_DIR",
        "runtimes": list(runtimes),
    }


def library(root: Path, path: str, machine: str = "EM_X86_64") -> Path:
    file = root / path.lstrip("/")
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_bytes(make_elf(soname=file.name, machine=machine))
    return file


def cache(
    root: Path, *entries: tuple[str, str] | tuple[str, str, int], layout: str = "new"
) -> None:
    (root / "etc").mkdir(parents=True, exist_ok=True)
    (root / "etc/ld.so.cache").write_bytes(ld_cache(entries, layout=layout))


def chosen(root: Path, idx: dict[str, Any], env: dict[str, str] | None = None) -> str:
    libraries = system_libraries(LINUX, root, env or {}, windows=False)
    decision = choose(idx, detect(root, windows=False), stage=root, env={}, libraries=libraries)
    return str(decision.runtime["name"])


# --- Linux: where ld.so looks ----------------------------------------------------------------


def test_a_missing_required_library_skips_the_runtime_and_the_next_is_chosen(
    tmp_path: Path,
) -> None:
    root = nvidia_machine(tmp_path / "root")
    libraries = system_libraries(LINUX, root, {}, windows=False)
    decision = choose(
        index(CUDA, CPU), detect(root, windows=False), stage=root, env={}, libraries=libraries
    )
    assert decision.runtime["name"] == "cpu"
    assert decision.candidates[0].score == 0
    assert decision.candidates[0].why == f"libcudnn.so.9 not found — {CUDNN}"
    # without the check the NVIDIA machine gets the CUDA runtime it cannot run
    assert (
        choose(index(CUDA, CPU), detect(root, windows=False), stage=root, env={}).runtime["name"]
        == "cuda"
    )


@pytest.mark.parametrize("layout", ["new", "old", "compat"])
def test_a_library_the_ld_so_cache_names_is_found(tmp_path: Path, layout: str) -> None:
    root = nvidia_machine(tmp_path / "root")
    library(root, "/opt/cuda/lib/libcudnn.so.9")
    assert chosen(root, index(CUDA, CPU)) == "cpu", "/opt/cuda/lib is no default directory"
    cache(root, ("libcudnn.so.9", "/opt/cuda/lib/libcudnn.so.9"), layout=layout)
    assert chosen(root, index(CUDA, CPU)) == "cuda"


@pytest.mark.parametrize(
    ("where", "env"),
    [
        ("usr/lib/x86_64-linux-gnu", {}),  # Debian's multiarch default
        ("usr/lib64", {}),  # Fedora's
        ("lib", {}),
        ("opt/cuda/lib", {"LD_LIBRARY_PATH": "/nowhere::/opt/cuda/lib"}),
        ("runtimes/cuda", {}),  # the runtime's own directory ($ORIGIN)
    ],
)
def test_each_place_ld_so_searches(tmp_path: Path, where: str, env: dict[str, str]) -> None:
    root = nvidia_machine(tmp_path / "root")
    library(root, f"{where}/libcudnn.so.9")
    assert chosen(root, index(CUDA, CPU), env) == "cuda"


def test_what_ld_so_would_not_open_is_not_found(tmp_path: Path) -> None:
    root = nvidia_machine(tmp_path / "root")
    # another machine's library in a default directory: ld.so skips it
    library(root, "usr/lib/libcudnn.so.9", machine="EM_AARCH64")
    # a cache entry for another architecture, and one whose file is gone
    library(root, "/opt/arm/libcudnn.so.9")  # ld.so goes by the entry's flags
    cache(
        root,
        ("libcudnn.so.9", "/opt/arm/libcudnn.so.9", FLAG_ELF_LIBC6 | FLAG_AARCH64_LIB64),
        ("libcudnn.so.9", "/opt/gone/libcudnn.so.9"),
    )
    (root / "usr/lib/x86_64-linux-gnu").mkdir(parents=True)
    (root / "usr/lib/x86_64-linux-gnu/libcudnn.so.9").write_text("not an ELF file")
    assert chosen(root, index(CUDA, CPU)) == "cpu"


def test_a_missing_optional_library_is_reported_not_skipped(tmp_path: Path) -> None:
    root = nvidia_machine(tmp_path / "root")
    library(root, "usr/lib/x86_64-linux-gnu/libcudnn.so.9")
    libraries = system_libraries(LINUX, root, {}, windows=False)
    decision = choose(
        index(CUDA, CPU), detect(root, windows=False), stage=root, env={}, libraries=libraries
    )
    assert decision.runtime["name"] == "cuda"
    assert decision.candidates[0].notes == [
        "optional libcufft.so.12 not found — Install NVIDIA cuFFT 12"
    ]
    library(root, "usr/lib/x86_64-linux-gnu/libcufft.so.12")
    again = choose(
        index(CUDA, CPU),
        detect(root, windows=False),
        stage=root,
        env={},
        libraries=system_libraries(LINUX, root, {}, windows=False),
    )
    assert again.candidates[0].notes == []


def write_stage(stage: Path, idx: dict[str, Any]) -> Path:
    stage.mkdir(parents=True, exist_ok=True)
    (stage / INDEX_NAME).write_text(json.dumps(idx))
    for rt in idx["runtimes"]:
        entry = stage / rt["directory"] / rt["entry"]
        if not entry.exists():
            entry.parent.mkdir(parents=True, exist_ok=True)
            entry.write_bytes(b"core")
    return stage


def test_explain_says_which_runtime_was_skipped_and_what_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = nvidia_machine(tmp_path / "root")
    stage = write_stage(tmp_path / "stage", index(CUDA, CPU))
    assert main(["--stage", str(stage), "--root", str(root), "--explain"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "CPU · CPU 1.0 · runtimes/cpu",
        f"  {SKIP_CUDA}",
        "  runtimes/cpu: score 1 (CPU)",
    ]
    library(root, "usr/lib64/libcudnn.so.9")
    assert main(["--stage", str(stage), "--root", str(root), "--explain"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "NVIDIA GPU · CUDA 1.0 · runtimes/cuda",
        "  runtimes/cuda: score 5 (NVIDIA GPU)",
        "    optional libcufft.so.12 not found — Install NVIDIA cuFFT 12",
    ]


def test_no_runnable_runtime_names_every_reason(tmp_path: Path) -> None:
    root = nvidia_machine(tmp_path / "root")
    stage = write_stage(tmp_path / "stage", index(CUDA))
    # the loader as a package ships it: standalone, beside its index
    (stage / LOADER_NAME).write_bytes(loader_source().encode("utf-8"))
    out = subprocess.run(
        [sys.executable, "-I", str(stage / LOADER_NAME), "--root", str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 1
    assert out.stderr.strip() == (
        f"runtime_loader: no runtime of the package can run here: cuda: libcudnn.so.9 not found "
        f"— {CUDNN}"
    )


# --- the ld.so.cache reader against glibc's own ------------------------------------------------


def _ldconfig() -> str:
    found = shutil.which("ldconfig") or shutil.which("/sbin/ldconfig")
    if found is None:
        pytest.skip("ldconfig is not installed (Debian: apt-get install libc-bin)")
    return found


def _glibc_reads(ldconfig: str, path: Path) -> list[tuple[str, str]]:
    """`ldconfig -p -C path`: glibc's reading of a cache, as (name, path)."""
    out = subprocess.run(
        [ldconfig, "-p", "-C", str(path)], capture_output=True, text=True, check=True
    ).stdout
    return re.findall(r"^\s+(\S+) \([^)]*\) => (\S+)$", out, flags=re.M)


@pytest.mark.tools
@pytest.mark.parametrize("layout", ["new", "old", "compat"])
def test_ldconfig_builds_a_cache_the_loader_reads(tmp_path: Path, layout: str) -> None:
    ldconfig = _ldconfig()
    root = tmp_path / "root"
    for name in ("libcudnn.so.9", "libcudnn_ops.so.9", "libcufft.so.12"):
        library(root, f"opt/cuda/lib/{name}")
    (root / "etc").mkdir()
    (root / "etc/ld.so.conf").write_text("/opt/cuda/lib\n")
    subprocess.run(
        [
            ldconfig,
            "-X",
            "-c",
            layout,
            "-r",
            str(root),
            "-C",
            "/etc/ld.so.cache",
            "-f",
            "/etc/ld.so.conf",
        ],
        check=True,
        capture_output=True,
    )
    data = (root / "etc/ld.so.cache").read_bytes()
    assert data.startswith(b"glibc-ld.so.cache1.1" if layout == "new" else b"ld.so-1.7.0")
    read = [(name, path) for name, _, path in read_ld_cache(data)]
    assert sorted(read) == sorted(_glibc_reads(ldconfig, root / "etc/ld.so.cache"))
    assert ("libcudnn.so.9", "/opt/cuda/lib/libcudnn.so.9") in read
    # and the loader, pointed at that root, finds cuDNN through it
    assert chosen(nvidia_machine(root), index(CUDA, CPU)) == "cuda"


@pytest.mark.tools
@pytest.mark.parametrize("layout", ["new", "old", "compat"])
def test_the_test_cache_writer_matches_glibc(tmp_path: Path, layout: str) -> None:
    ldconfig = _ldconfig()
    entries = [("libcudnn.so.9", "/opt/a/libcudnn.so.9"), ("libz.so.1", "/usr/lib/libz.so.1")]
    (tmp_path / "cache").write_bytes(ld_cache(entries, layout=layout))
    assert _glibc_reads(ldconfig, tmp_path / "cache") == entries


@pytest.mark.tools
def test_this_machines_cache_reads_as_glibc_reads_it() -> None:
    ldconfig = _ldconfig()
    if not Path("/etc/ld.so.cache").is_file():
        pytest.skip("this machine has no /etc/ld.so.cache")
    read = [(n, p) for n, _, p in read_ld_cache(Path("/etc/ld.so.cache").read_bytes())]
    assert read == _glibc_reads(ldconfig, Path("/etc/ld.so.cache"))


# --- Windows: the DLL search order -------------------------------------------------------------

WIN_CUDA = runtime(
    "cuda", ["nvidia"], [need("cudnn64_9.dll", "cudnn", install=CUDNN)], entry="onnxruntime.dll"
)


@pytest.mark.parametrize(
    "where", ["Windows/System32", "Windows", "CUDA/bin", "stage/runtimes/cuda"]
)
def test_windows_searches_own_dir_system32_windows_and_path(tmp_path: Path, where: str) -> None:
    dll = tmp_path / where / "CUDNN64_9.DLL"  # Windows compares names without regard to case
    dll.parent.mkdir(parents=True)
    dll.write_bytes(b"MZ")
    env = {
        "SystemRoot": str(tmp_path / "Windows"),
        "PATH": f"{tmp_path / 'Tools'};{tmp_path / 'CUDA/bin'}",
    }
    hardware = Hardware(gpus=(Gpu("nvidia", 0x10DE, 0x2684, "PCI"),), nvidia_driver=True)
    libraries = system_libraries(WINDOWS, Path("/"), env, windows=True)
    stage = tmp_path / "stage"
    decision = choose(
        index(WIN_CUDA, CPU, target=WINDOWS), hardware, stage=stage, env={}, libraries=libraries
    )
    assert decision.runtime["name"] == "cuda"
    dll.unlink()
    decision = choose(
        index(WIN_CUDA, CPU, target=WINDOWS), hardware, stage=stage, env={}, libraries=libraries
    )
    assert decision.runtime["name"] == "cpu"
    assert decision.candidates[0].why == f"cudnn64_9.dll not found — {CUDNN}"


# --- runtimes.json `requires`, from the closure's externals ------------------------------------


def staged(name: str, target: str, *externals: ExternalLibrary) -> StagedRuntime:
    closure = Closure((), (), (), tuple(externals), "libonnxruntime.so.1", ())
    return StagedRuntime(name, target, f"runtimes/{name}", closure, (), 0)


def ext(
    name: str, group: str, kind: str, optional: bool = False, install: str = ""
) -> ExternalLibrary:
    return ExternalLibrary(
        name, group, kind, "", ("libonnxruntime.so.1",), optional=optional, install=install
    )


def test_requires_lists_what_the_base_system_may_lack() -> None:
    core = staged(
        "cuda",
        LINUX,
        ext("libc.so.6", "glibc", "system"),
        ext("libstdc++.so.6", "gcc-libs", "toolchain"),
        ext("libgomp.so.1", "gcc-libs", "toolchain"),
        ext("libz.so.1", "zlib", "system"),
        ext("libOpenCL.so.1", "opencl", "driver", optional=True),
        ext("libcudnn.so.9", "cudnn", "toolkit", install=CUDNN),
    )
    plugin = staged(
        "ep",
        LINUX,
        ext("libcdsprpc.so", "cdsp", "driver"),
        ext("libcudnn.so.9", "cudnn", "toolkit"),
    )
    model = resolve(
        LINUX,
        SystemSpec(),
        [(_recipe("cuda", ()), core), (replace(_recipe("ep", ()), kind="plugin-ep"), plugin)],
        {"ep": ("cuda",)},
    )
    assert requires_entries(LINUX, model.index_requires("cuda")) == [
        need("libcdsprpc.so", "cdsp", optional=True),  # only a plugin EP needs it
        need("libcudnn.so.9", "cudnn", install=CUDNN),  # the core needs it: required
        need("libgomp.so.1", "gcc-libs"),
        need("libOpenCL.so.1", "opencl", optional=True),
        need("libz.so.1", "zlib"),
    ]
    windows = staged(
        "cuda",
        WINDOWS,
        ext("KERNEL32.dll", "windows", "system"),
        ext("api-ms-win-crt-runtime-l1-1-0.dll", "windows", "system"),
        ext("MSVCP140.dll", "msvc-runtime", "redist"),
    )
    model = resolve(WINDOWS, SystemSpec(), [(_recipe("cuda", ()), windows)])
    assert requires_entries(WINDOWS, model.index_requires("cuda")) == [
        need("MSVCP140.dll", "msvc-runtime")
    ]


def _recipe(name: str, vendors: tuple[str, ...]) -> Recipe:
    return Recipe(
        name=name,
        kind="runtime",
        version="1.24.1",
        description=name,
        label=name.upper(),
        providers=("CUDAExecutionProvider", "CPUExecutionProvider"),
        gpu_vendors=vendors,
        sources={},
        targets={},
        path=Path(f"recipes/{name}.toml"),
        digest="0" * 64,
    )


def _product(name: str, runtimes: tuple[str, ...], addon_of: str = "") -> Product:
    return Product(
        name=name,
        version="1.0.0",
        description=name,
        url="https://app.invalid/",
        targets=(LINUX,),
        runtimes=runtimes,
        models=(),
        plugins={},
        runtime_targets={r: (LINUX,) for r in runtimes},
        override_env="APP_ORT_DIR",
        channels=("arch",),
        packaging=SETTINGS,
        waivers=(),
        path=Path(f"manifests/{name}.toml"),
        digest="0" * 64,
        addon_of=Addon(name=addon_of, package_name=f"{addon_of}-onnxruntime", version="1.0")
        if addon_of
        else None,
    )


def _schema() -> dict[str, Any]:
    text = resources.files("ortbundle").joinpath("data/runtimes.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def _core(stage: Path, name: str, *externals: ExternalLibrary) -> StagedRuntime:
    (stage / "runtimes" / name).mkdir(parents=True)
    (stage / "runtimes" / name / "libonnxruntime.so.1").write_bytes(b"core")
    return staged(name, LINUX, *externals)


# --- add-on fragments ---------------------------------------------------------------------------


def addon_stage(tmp_path: Path) -> Path:
    """A main product (CPU) and an add-on (CUDA, needing cuDNN) installed into one directory."""
    main_stage, addon = tmp_path / "main", tmp_path / "addon"
    cpu = _core(main_stage, "cpu")
    write_index(main_stage, _product("app", ("cpu",)), LINUX, [(_recipe("cpu", ()), cpu)])
    cuda = _core(addon, "cuda", ext("libcudnn.so.9", "cudnn", "toolkit", install=CUDNN))
    product = _product("app-cuda", ("cuda",), addon_of="app")
    write_index(addon, product, LINUX, [(_recipe("cuda", ("nvidia",)), cuda)])
    assert sorted(p.relative_to(addon).as_posix() for p in addon.rglob("*") if p.is_file()) == [
        f"{FRAGMENTS_DIR}/app-cuda.json",
        "runtimes/cuda/libonnxruntime.so.1",
    ], "an add-on ships no loader and no runtimes.json"
    fragment = json.loads((addon / FRAGMENTS_DIR / "app-cuda.json").read_text())
    jsonschema.validate(fragment, _schema())
    jsonschema.validate(json.loads((main_stage / INDEX_NAME).read_text()), _schema())
    assert fragment["addon_of"] == "app" and "override_env" not in fragment
    shutil.copytree(addon, main_stage, dirs_exist_ok=True)  # what the add-on's package does
    return main_stage


def test_an_add_on_runtime_is_chosen_when_its_requirements_are_present(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stage = addon_stage(tmp_path)
    assert (stage / LOADER_NAME).is_file()
    root = nvidia_machine(tmp_path / "root")
    assert main(["--stage", str(stage), "--root", str(root), "--explain"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "CPU · CPU 1.24.1 · runtimes/cpu",
        "  runtimes/cpu: score 1 (CPU)",
        f"  {SKIP_CUDA}",
    ]
    library(root, "opt/cuda/lib/libcudnn.so.9")
    cache(root, ("libcudnn.so.9", "/opt/cuda/lib/libcudnn.so.9"))
    assert main(["--stage", str(stage), "--root", str(root), "--explain"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "NVIDIA GPU · CUDA 1.24.1 · runtimes/cuda",
        "  runtimes/cpu: score 1 (CPU)",
        "  runtimes/cuda: score 5 (NVIDIA GPU)",
    ]
    # the main package's override variable reaches the add-on's runtime too
    decision = choose(
        load_index(stage), Hardware(), stage=stage, env={"APP_ORT_DIR": "runtimes/cuda"}
    )
    assert decision.runtime["name"] == "cuda" and decision.overridden


@pytest.mark.parametrize(
    ("fragment", "problem"),
    [
        ("{", "cannot read it"),
        ('{"schema": "ortbundle.runtimes/9"}', "schema 'ortbundle.runtimes/9' is not one"),
        ({"addon_of": "other"}, "an add-on of 'other', not of 'app'"),
        ({"target": "windows-x86_64"}, "built for 'windows-x86_64', this is 'linux-x86_64'"),
        ({"runtimes": [{"name": "cuda"}]}, "a runtime lacks label, directory, entry"),
        ({"runtimes": [runtime("cpu", [])]}, "runtime cpu clashes with one listed"),
        ({"runtimes": [runtime("gone", [])]}, "runtimes/gone/libonnxruntime.so.1 is not installed"),
        ({"runtimes": [runtime("x", [], directory="../x")]}, "runtime x lies outside the package"),
    ],
)
def test_a_bad_fragment_is_reported_and_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fragment: Any, problem: str
) -> None:
    stage = addon_stage(tmp_path)
    good = json.loads((stage / FRAGMENTS_DIR / "app-cuda.json").read_text())
    text = fragment if isinstance(fragment, str) else json.dumps({**good, **fragment})
    (stage / FRAGMENTS_DIR / "broken.json").write_text(text)
    root = nvidia_machine(tmp_path / "root")
    library(root, "usr/lib/libcudnn.so.9")
    assert main(["--stage", str(stage), "--root", str(root), "--json"]) == 0
    out = capsys.readouterr()
    decision = json.loads(out.out)
    assert decision["runtime"] == "cuda", "the good add-on still counts"
    assert len(decision["problems"]) == 1 and problem in decision["problems"][0]
    assert f"add-on skipped: {stage / FRAGMENTS_DIR / 'broken.json'}: " in out.err


# --- the build's "never chosen" warning ---------------------------------------------------------


def test_a_cpu_runtime_after_a_cuda_one_is_never_chosen() -> None:
    cuda = runtime("cuda", ["nvidia"])
    (warning,) = never_chosen(index(cuda, CPU))
    assert (warning.runtime, warning.by, warning.fallback) == ("cpu", ("cuda",), False)
    message = warning.message()
    assert message.startswith("runtime cpu of linux-x86_64 can never be chosen: cuda scores")
    assert "list cpu before cuda in the product's `runtimes`" in message
    assert never_chosen(index(CPU, cuda)) == [], "in this order each wins somewhere"


def test_a_runtime_behind_one_that_scores_as_high_everywhere_is_never_chosen() -> None:
    openvino = runtime("openvino", ["intel"])
    webgpu = runtime("webgpu", [], fits={"gpu_vendors": [], "any_gpu": True, "soc_families": []})
    assert never_chosen(index(openvino, webgpu)) == []
    (warning,) = never_chosen(index(openvino, webgpu, CPU))
    assert warning.by == ("openvino",)  # it scores at least CPU everywhere, and comes first
    (warning,) = never_chosen(index(runtime("intel-gpu", ["intel"]), openvino))
    assert (warning.runtime, warning.by) == ("openvino", ("intel-gpu",))


def test_a_fallback_for_missing_libraries_is_said_to_be_one() -> None:
    (warning,) = never_chosen(index(CUDA, CPU))
    assert (warning.runtime, warning.by, warning.fallback) == ("cpu", ("cuda",), True)
    assert warning.message().startswith(
        "runtime cpu of linux-x86_64 is chosen only where cuda cannot run"
    )
    # a system floor works the same way: the older build is the fallback on older systems
    new = runtime(
        "new",
        [],
        system={"needs": [{"library": "libc.so.6", "version": "GLIBC_2.38", "needed_by": ["x"]}]},
    )
    old = runtime("old", [], system={"needs": []})
    assert [w.fallback for w in never_chosen(index(new, old))] == [True]


def test_the_build_warns_from_the_index_it_wrote(tmp_path: Path) -> None:
    stage = tmp_path / "stage"
    cuda, cpu = _core(stage, "cuda"), _core(stage, "cpu")
    product = _product("app", ("cuda", "cpu"))
    write_index(
        stage, product, LINUX, [(_recipe("cuda", ("nvidia",)), cuda), (_recipe("cpu", ()), cpu)]
    )
    (line,) = warning_lines([stage])
    assert line.startswith("warning: runtime cpu of linux-x86_64 can never be chosen: cuda")
    write_index(
        stage,
        replace(product, runtimes=("cpu", "cuda")),
        LINUX,
        [(_recipe("cpu", ()), cpu), (_recipe("cuda", ("nvidia",)), cuda)],
    )
    assert warning_lines([stage]) == []


# --- --open trusts GetAvailableProviders over the index -----------------------------------------

FAKE_CORE = r"""
#include <stddef.h>
static char *providers[] = { PROVIDERS };
static int released = 0;
static void *GetAvailableProviders(char ***out, int *count) {
  *out = providers; *count = (int)(sizeof providers / sizeof *providers); return NULL;
}
static void *ReleaseAvailableProviders(char **list, int count) {
  (void)list; (void)count; released++; return NULL;
}
static void *table[425];
static const void *GetApi(unsigned version) {
  if (version > 27) return NULL;
  table[125] = (void *)GetAvailableProviders; table[126] = (void *)ReleaseAvailableProviders;
  return table;
}
static const char *GetVersionString(void) { return "1.27.0"; }
static struct { const void *(*GetApi)(unsigned); const char *(*GetVersionString)(void); } base =
  { GetApi, GetVersionString };
const void *OrtGetApiBase(void) { return &base; }
"""


def fake_core(path: Path, *providers: str) -> None:
    """An ORT core whose GetAvailableProviders() lists `providers` (OrtApi indices 125/126)."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed (Debian: apt-get install gcc)")
    path.parent.mkdir(parents=True, exist_ok=True)
    source = path.with_suffix(".c")
    source.write_text(FAKE_CORE)
    listed = ", ".join(f'"{p}"' for p in providers)
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-O1", f"-DPROVIDERS={listed}", "-o", str(path), str(source)],
        check=True,
    )
    source.unlink()


def open_json(stage: Path, root: Path) -> dict[str, Any]:
    (stage / LOADER_NAME).write_bytes(loader_source().encode("utf-8"))
    return run_loader(stage, "--root", str(root), "--open")


OPEN_CUDA = runtime(
    "cuda",
    ["nvidia"],
    ort_version="1.27.0",
    providers=["CUDAExecutionProvider", "CPUExecutionProvider"],
)
OPEN_CPU = runtime("cpu", [], ort_version="1.27.0", providers=["CPUExecutionProvider"])


@pytest.mark.tools
def test_open_falls_through_when_the_gpu_provider_is_not_available(tmp_path: Path) -> None:
    root = nvidia_machine(tmp_path / "root")
    stage = write_stage(tmp_path / "stage", index(OPEN_CUDA, OPEN_CPU))
    fake_core(stage / "runtimes/cpu/libonnxruntime.so.1", "CPUExecutionProvider")
    fake_core(
        stage / "runtimes/cuda/libonnxruntime.so.1", "CUDAExecutionProvider", "CPUExecutionProvider"
    )
    assert open_json(stage, root)["runtime"] == "cuda", "its CUDA provider is there"
    # a CUDA build whose CUDA EP is not available (the index says it is)
    fake_core(stage / "runtimes/cuda/libonnxruntime.so.1", "CPUExecutionProvider")
    decision = open_json(stage, root)
    assert (decision["runtime"], decision["why"], decision["loaded_version"]) == (
        "cpu",
        "CPU",
        "1.27.0",
    )
    (cuda,) = [c for c in decision["candidates"] if c["name"] == "cuda"]
    assert cuda["notes"] == [
        "CUDAExecutionProvider not available (GetAvailableProviders: CPUExecutionProvider): "
        "ranked last, as CPU"
    ]
    # alone, it is still the CPU runtime it really is
    write_stage(stage, index(OPEN_CUDA))
    alone = open_json(stage, root)
    assert (alone["runtime"], alone["line"]) == ("cuda", "CPU · CUDA 1.27.0 · runtimes/cuda")


@pytest.mark.tools
def test_open_skips_a_runtime_that_does_not_load(tmp_path: Path) -> None:
    root = nvidia_machine(tmp_path / "root")
    stage = write_stage(tmp_path / "stage", index(OPEN_CUDA, OPEN_CPU))
    fake_core(stage / "runtimes/cpu/libonnxruntime.so.1", "CPUExecutionProvider")
    decision = open_json(stage, root)  # runtimes/cuda's "library" is 4 bytes of text
    assert decision["runtime"] == "cpu"
    assert decision["candidates"][0]["why"].startswith("cannot load ")


@pytest.mark.parametrize("layout", ["new", "old", "compat"])
def test_a_damaged_cache_is_ignored_as_ld_so_ignores_it(layout: str) -> None:
    data = ld_cache([("libcudnn.so.9", "/opt/a/libcudnn.so.9")] * 3, layout=layout)
    assert len(read_ld_cache(data)) == 3
    for cut in range(len(data)):
        assert len(read_ld_cache(data[:cut])) <= 3  # a truncated file never raises
    huge = bytearray(data)
    huge[12:16] = (0xFFFFFFF).to_bytes(4, "little")  # nlibs far beyond the file
    if layout == "new":
        huge[20:24], huge[12:16] = huge[12:16], data[12:16]
    assert read_ld_cache(bytes(huge)) == []


def test_the_index_writer_names_what_the_loader_reads() -> None:
    """index_json repeats the loader's schema and fragment directory (so that writing an index
    imports none of the loader's modules): the two must never drift apart."""
    import ortbundle.payload.loader.index as loader_index
    import ortbundle.stage.index_json as index_json

    assert index_json.SCHEMA == loader_index.SCHEMA
    assert index_json.FRAGMENTS_DIR == loader_index.FRAGMENTS
