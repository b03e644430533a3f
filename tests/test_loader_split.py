"""The loader's seven modules and the one file a package ships: runtime_loader.py is exactly
loader_source(), which compiles and runs alone in a clean interpreter and decides as the package
does; each module imports only the standard library and the modules before it; nothing in
payload/ imports an ortbundle module inside a function; shipping the loader imports none of it."""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ortbundle import payload
from ortbundle._core.progress import Reporter
from ortbundle.payload import loader
from ortbundle.payload.loader import (
    EXPORTS,
    MODULES,
    Hardware,
    choose,
    detect,
    join,
    loader_source,
    machine_name,
    main,
    wrong_machine,
    wrong_system,
)
from ortbundle.pipeline.build import build
from tests.helpers.bite import each
from tests.helpers.elf import make_elf
from tests.helpers.probe import run_python
from tests.helpers.project import FakeProject

PACKAGE = "ortbundle.payload.loader"
PAYLOAD = Path(payload.__file__).parent
LOADER = PAYLOAD / "loader"
FUTURE = "from __future__ import annotations\n"


def texts() -> dict[str, str]:
    return {module: (LOADER / f"{module}.py").read_text("utf-8") for module in MODULES}


def defined(tree: ast.Module) -> set[str]:
    """The names a module binds at its top level, imports aside."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def imported_modules(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        return ["." * node.level + (node.module or "")]
    return [alias.name for alias in node.names]


# --- the shipped file ----------------------------------------------------------------------------


def test_the_shipped_runtime_loader_is_loader_source(
    written: FakeProject, reporter: Reporter
) -> None:
    build(written.project, written.options(targets=("linux-x86_64",)), reporter)
    shipped = written.root / "dist/fakeproduct/1.2.3/linux-x86_64/runtime_loader.py"
    assert shipped.read_bytes() == loader_source().encode("utf-8")
    assert shipped.stat().st_mode & 0o777 == 0o755


# A machine with an NVIDIA card but no NVIDIA driver: the CUDA runtime lacks cuDNN and is
# skipped, WebGPU (any GPU) is the perfect fit here, and an add-on's fragment is unreadable.
CUDNN = "Install NVIDIA cuDNN 9"


def _runtime(name: str, label: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "directory": f"runtimes/{name}",
        "entry": "libonnxruntime.so.1",
        "ort_version": "1.27.0",
        "providers": ["CPUExecutionProvider"],
        "plugin_eps": [],
        "files": [],
        "fits": {"gpu_vendors": [], "any_gpu": False, "soc_families": []},
        **fields,
    }


INDEX = {
    "schema": "ortbundle.runtimes/2",
    "product": {"name": "demo", "version": "1.0.0"},
    "target": "linux-x86_64",
    "override_env": "DEMO_ORT_DIR",
    "runtimes": [
        _runtime(
            "cuda",
            "CUDA",
            fits={"gpu_vendors": ["nvidia"], "any_gpu": False, "soc_families": []},
            requires=[{"name": "libcudnn.so.9", "group": "cudnn", "install": CUDNN}],
        ),
        _runtime(
            "webgpu",
            "WebGPU",
            fits={"gpu_vendors": [], "any_gpu": True, "soc_families": []},
            requires=[{"name": "libvulkan.so.1", "group": "vulkan", "optional": True}],
        ),
        _runtime("cpu", "CPU"),
    ],
}
EXPLAINED = [
    "GPU (generic) · WebGPU 1.27.0 · runtimes/webgpu",
    f"  skip cuda: libcudnn.so.9 not found — {CUDNN}",
    "  runtimes/webgpu: score 2 (GPU (generic))",
    "    optional libvulkan.so.1 not found (vulkan)",
]


def _machine(root: Path) -> Path:
    device = root / "sys/bus/pci/devices/0000:01:00.0"
    device.mkdir(parents=True)
    (device / "class").write_text("0x030000\n")
    (device / "vendor").write_text("0x10de\n")
    (device / "device").write_text("0x2684\n")
    return root


def _stage(stage: Path, index: dict[str, Any]) -> Path:
    """A stage holding only the joined loader and an index (and a broken add-on fragment)."""
    (stage / "runtimes.d").mkdir(parents=True)
    (stage / "runtimes.d/broken.json").write_text("{")
    (stage / "runtimes.json").write_text(json.dumps(index))
    (stage / "runtime_loader.py").write_bytes(loader_source().encode("utf-8"))
    return stage


def _run(stage: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The file run as an application runs it: by path from another directory (no --stage: the
    stage is the file's own directory), isolated (-I: no PYTHON* variables, no user site, not
    the current directory), with no environment beyond PATH."""
    return subprocess.run(
        [sys.executable, "-I", str(stage / "runtime_loader.py"), *args],
        cwd=cwd,
        env={"PATH": os.environ.get("PATH", "")},
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
    )


def test_the_joined_file_runs_alone_and_decides_as_the_package_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _machine(tmp_path / "machine")
    stage = _stage(tmp_path / "stage", INDEX)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    compile(loader_source(), "runtime_loader.py", "exec")
    # the interpreter as it runs the file cannot import ortbundle: the file stands alone
    alone = subprocess.run(
        [sys.executable, "-I", "-c", "import ortbundle"], cwd=elsewhere, capture_output=True
    )
    assert alone.returncode != 0

    explained = _run(stage, elsewhere, "--root", str(root), "--explain")
    assert explained.returncode == 0, explained.stderr
    assert explained.stdout.splitlines() == EXPLAINED
    problem = f"runtime_loader: add-on skipped: {stage / 'runtimes.d/broken.json'}: cannot read it"
    assert explained.stderr.startswith(problem)
    assert explained.stderr.endswith("; reinstall that add-on\n")

    # the package's own command line, in this process, says the very same
    assert main(["--stage", str(stage), "--root", str(root), "--explain"]) == 0
    assert capsys.readouterr() == (explained.stdout, explained.stderr)

    as_json = _run(stage, elsewhere, "--root", str(root), "--json")
    assert as_json.returncode == 0, as_json.stderr
    decision = json.loads(as_json.stdout)
    assert (decision["runtime"], decision["score"], decision["line"]) == (
        "webgpu",
        2,
        EXPLAINED[0],
    )
    assert [(c["name"], c["score"]) for c in decision["candidates"]] == [("cuda", 0), ("webgpu", 2)]
    assert [g["vendor"] for g in decision["hardware"]["gpus"]] == ["nvidia"]
    assert decision["loaded_version"] is None and decision["plugins"] == []
    assert decision["problems"][0].startswith(f"{stage / 'runtimes.d/broken.json'}: cannot read")
    assert main(["--stage", str(stage), "--root", str(root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == decision


def test_the_joined_file_refuses_an_empty_index(tmp_path: Path) -> None:
    stage = _stage(tmp_path / "stage", {**INDEX, "runtimes": []})
    for flag in ("--explain", "--json"):
        done = _run(stage, tmp_path, "--root", str(tmp_path), flag)
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == "runtime_loader: runtimes.json lists no runtime\n"
    (stage / "runtimes.json").write_text("")
    done = _run(stage, tmp_path, "--explain")
    assert done.returncode == 1
    assert done.stderr.startswith(f"runtime_loader: cannot read {stage / 'runtimes.json'}: ")


def test_a_reader_that_stops_early_ends_the_loader_quietly(tmp_path: Path) -> None:
    """`runtime_loader.py --json | head`: the reader goes away; the loader exits 141 (128 +
    SIGPIPE, as a shell reports any writer so stopped) without a traceback."""
    root = _machine(tmp_path / "machine")
    stage = _stage(tmp_path / "stage", INDEX)
    (stage / "runtimes.d/broken.json").unlink()  # its complaint is not what this is about
    for flag in ("--json", "--explain"):
        read, write = os.pipe()
        os.close(read)  # the reader has gone before the first byte
        try:
            done = subprocess.run(
                [sys.executable, "-I", str(stage / "runtime_loader.py"), "--root", str(root), flag],
                stdout=write,
                stderr=subprocess.PIPE,
                text=True,
                check=False,
            )
        finally:
            os.close(write)
        assert (done.returncode, done.stderr) == (141, ""), done.stderr


def test_a_bundle_for_another_system_says_which_system_it_is_for(tmp_path: Path) -> None:
    """A Windows bundle run by Linux's Python is refused for being a Windows bundle, not for
    lacking MSVCP140.dll (which it only would on a Windows without the runtime)."""
    msvc = {"name": "MSVCP140.dll", "group": "msvc-runtime", "optional": False, "install": "x"}
    index = {
        **INDEX,
        "target": "windows-x86_64",
        "runtimes": [_runtime("cpu", "CPU", requires=[msvc])],
    }
    stage = _stage(tmp_path / "stage", index)
    done = _run(stage, tmp_path, "--root", str(tmp_path), "--explain")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"runtime_loader: {stage / 'runtimes.json'}: this is a Windows bundle (target "
        "windows-x86_64) and this machine runs Linux: install the product's Linux package, or "
        "run this one on Windows\n"
    )
    assert str(wrong_system("linux-x86_64", "win32")).startswith("this is a Linux bundle")
    assert str(wrong_system("android-arm64-v8a", "win32")).startswith("this is an Android bundle")
    for target, platform in [
        ("linux-x86_64", "linux"),
        ("windows-arm64", "win32"),
        ("android-x86_64", "linux"),  # Android's Python before 3.13
        ("android-x86_64", "android"),
        ("macos-arm64", "darwin"),
        ("linux-x86_64", "freebsd14"),  # not a system bundles are built for: the search says
        ("", "linux"),  # an index without a target
    ]:
        assert wrong_system(target, platform) is None, (target, platform)


def test_a_macos_bundle_elsewhere_says_it_is_a_macos_bundle(tmp_path: Path) -> None:
    """The macOS fragment's loader run by Linux's Python names macOS, not the CPU it lacks
    (issue #43: it said "install the product's x86_64 package"); and a Linux bundle on a Mac
    names Linux."""
    index = {**INDEX, "target": "macos-arm64", "runtimes": [_runtime("cpu", "CPU")]}
    stage = _stage(tmp_path / "stage", index)
    done = _run(stage, tmp_path, "--root", str(tmp_path), "--explain")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"runtime_loader: {stage / 'runtimes.json'}: this is a macOS bundle (target "
        "macos-arm64) and this machine runs Linux: install the product's Linux package, or "
        "run this one on macOS\n"
    )
    assert wrong_system("macos-arm64", "win32") == (
        "this is a macOS bundle (target macos-arm64) and this machine runs Windows: install "
        "the product's Windows package, or run this one on macOS"
    )
    assert wrong_system("linux-aarch64", "darwin") == (
        "this is a Linux bundle (target linux-aarch64) and this machine runs macOS: install "
        "the product's macOS package, or run this one on Linux"
    )


def _with_libc(root: Path, machine: str) -> Path:
    """A machine root whose C library is an ELF of `machine` (where the loader reads the CPU)."""
    (root / "lib/x86_64-linux-gnu").mkdir(parents=True)
    libc = make_elf(machine=machine, soname="libc.so.6")
    (root / "lib/x86_64-linux-gnu/libc.so.6").write_bytes(libc)
    return root


def test_a_package_for_another_cpu_says_which_cpu_it_is_for(tmp_path: Path) -> None:
    """An aarch64 package on an x86-64 machine is refused for its CPU, before any library or
    symbol version of the system is held against it ("too old" would send the user looking
    for a newer glibc)."""
    index = {**INDEX, "target": "linux-aarch64", "machine": "aarch64"}
    stage = _stage(tmp_path / "stage", index)
    root = _with_libc(tmp_path / "x86", "EM_X86_64")
    done = _run(stage, tmp_path, "--root", str(root), "--explain")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "runtime_loader: this package is built for aarch64 (target linux-aarch64) and this "
        "machine runs x86_64 code: install the product's x86_64 package, or run this one on an "
        "aarch64 machine\n"
    )
    # the same package on an Arm machine (arm64 is how macOS and Windows spell it) is chosen
    arm = _with_libc(tmp_path / "arm", "EM_AARCH64")
    done = _run(stage, tmp_path, "--root", str(arm), "--json")
    assert (done.returncode, json.loads(done.stdout)["hardware"]["machine"]) == (0, "aarch64")
    spelled = {**index, "machine": "arm64"}
    assert choose(spelled, Hardware(machine="aarch64"), stage=stage, env={}).runtime["name"]
    # a machine or an index that does not say is not refused (an index written before `machine`)
    assert wrong_machine(index, Hardware()) is None
    assert wrong_machine(INDEX, Hardware(machine="i386")) is None
    assert wrong_machine({**INDEX, "machine": "x86_64"}, Hardware(machine="i386")) == (
        "this package is built for x86_64 (target linux-x86_64) and this machine runs i386 "
        "code: install the product's i386 package, or run this one on an x86_64 machine"
    )


def test_the_machine_is_this_process_cpu_or_the_roots_c_library() -> None:
    assert detect(Path("/")).machine == machine_name(os.uname().machine)
    assert [machine_name(s) for s in ("AMD64", "x64", "ARM64", "aarch64", "armv7l")] == [
        "x86_64",
        "x86_64",
        "aarch64",
        "aarch64",
        "armv7l",
    ]


def test_a_root_without_a_readable_c_library_has_no_machine(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib/libc.so.6").write_bytes(b"\x7fELF")  # cut short
    assert detect(tmp_path).machine is None
    big = bytearray(make_elf(machine="EM_AARCH64"))
    big[5], big[18:20] = 2, (183).to_bytes(2, "big")  # a big-endian header says the same
    (tmp_path / "lib/libc.so.6").write_bytes(bytes(big))
    assert detect(tmp_path).machine == "aarch64"
    big[18:20] = (999).to_bytes(2, "big")
    (tmp_path / "lib/libc.so.6").write_bytes(bytes(big))
    assert detect(tmp_path).machine == "e_machine 999"


# --- the joined text -------------------------------------------------------------------------


def test_the_joined_text_is_the_seven_modules_in_one() -> None:
    source = loader_source()
    assert source.startswith("#!/usr/bin/env python3\n")
    tree = ast.parse(source)
    modules = {module: ast.parse(text) for module, text in texts().items()}
    # one docstring, the command line's (its first paragraph is the --help description)
    assert ast.get_docstring(tree) == ast.get_docstring(modules["command"])
    strings = [
        n for n in tree.body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
    ]
    assert len(strings) == 1
    # the future import once, then every import, each module once and from the standard library
    future, *rest = tree.body[1:]
    assert ast.unparse(future) == FUTURE.strip()
    imports = [n for n in rest if isinstance(n, ast.Import | ast.ImportFrom)]
    assert rest[: len(imports)] == imports, "an import below the top"
    named = [m for n in imports for m in imported_modules(n)]
    assert len(named) == len(set(named)), "an import repeated"
    assert all(m.split(".")[0] in sys.stdlib_module_names for m in named)
    everywhere = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    assert not [n for n in everywhere if "ortbundle" in imported_modules(n)[0]]
    # every module's names, each module's body verbatim and in dependency order
    assert defined(tree) == set().union(*(defined(t) for t in modules.values()))
    places = []
    for module, text in texts().items():
        last = [n for n in modules[module].body if isinstance(n, ast.Import | ast.ImportFrom)][-1]
        body = "".join(text.splitlines(keepends=True)[last.end_lineno or 0 :]).strip("\n")
        assert body in source, f"{module}.py's body is not in the joined text"
        places.append(source.index(body))
    assert places == sorted(places)


def _edited(module: str, old: str, new: str) -> dict[str, str]:
    edited = texts()
    assert old in edited[module]
    edited[module] = edited[module].replace(old, new, 1)
    return edited


@pytest.mark.parametrize(
    ("module", "old", "new", "refusal"),
    [
        ("index", FUTURE, FUTURE + "\nimport requests\n", "not in the standard library"),
        ("scoring", "\nSCORE_VENDOR", "\nimport re\nSCORE_VENDOR", "imports belong at the top"),
        (
            "command",
            '    """The command line',
            f"    from {PACKAGE}.scoring import choose\n\n" + '    """The command line',
            "imports belong at the top",
        ),
        (
            "vendors",  # the first module: no sibling comes before it
            FUTURE,
            f"{FUTURE}\nfrom {PACKAGE}.index import LoaderError\n",
            r"not one of the modules before it \(none\)",
        ),
        (
            "scoring",
            f"from {PACKAGE}.index import LoaderError",
            f"from {PACKAGE}.index import LoaderError as Refused",
            "LoaderError is imported as Refused",
        ),
        (
            "scoring",
            f"from {PACKAGE}.index import LoaderError",
            f"from {PACKAGE}.index import LoaderError, choose",
            "choose is not a name index.py defines",
        ),
        (
            "ortapi",
            "\ndef open_runtime(",
            "\ndef choose() -> None: ...\n\n\ndef open_runtime(",
            "ortapi.py and scoring.py both define choose",
        ),
        ("ortapi", "\ndef open_runtime(", "\nPath = None\n\n\ndef open_runtime(", "Path: imported"),
    ],
    ids=[
        "not-stdlib",
        "late",
        "in-function",
        "later-sibling",
        "renamed",
        "elsewhere",
        "twice",
        "shadows",
    ],
)
def test_the_join_refuses_what_one_file_would_change(
    module: str, old: str, new: str, refusal: str
) -> None:
    with pytest.raises(ValueError, match=refusal):
        join(_edited(module, old, new))


# --- the modules -------------------------------------------------------------------------------


def test_the_package_holds_the_seven_modules_and_nothing_the_join_leaves_out() -> None:
    assert sorted(p.name for p in LOADER.iterdir() if p.suffix == ".py") == sorted(
        ["__init__.py", *(f"{m}.py" for m in MODULES)]
    )
    assert len(MODULES) == 7


def test_each_module_imports_only_the_standard_library_and_the_modules_before_it() -> None:
    for position, (module, text) in enumerate(each(texts().items(), "loader modules")):
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            (name, *_) = imported_modules(node)
            where = f"{module}.py line {node.lineno}: {name}"
            if name.startswith(("ortbundle", ".")):
                assert node in tree.body, f"{where}: a sibling imported below the top"
                sibling = name.removeprefix(f"{PACKAGE}.")
                assert sibling in MODULES[:position], f"{where}: not a module before {module}"
            else:
                for imported in imported_modules(node):
                    assert imported.split(".")[0] in {*sys.stdlib_module_names, "__future__"}, where


def test_nothing_in_payload_imports_an_ortbundle_module_inside_a_function() -> None:
    found = []
    for path in sorted(PAYLOAD.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    name = imported_modules(node)[0]
                    if name.startswith(("ortbundle", ".")):
                        found.append(f"{path.relative_to(PAYLOAD)}:{node.lineno} {name}")
    assert found == []


def test_the_package_face_offers_each_name_from_its_module() -> None:
    tree = ast.parse((LOADER / "__init__.py").read_text("utf-8"))
    (checking,) = [n for n in tree.body if isinstance(n, ast.If)][:1]
    declared = {
        ((node.module or "").removeprefix(f"{PACKAGE}."), alias.name)
        for node in checking.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname == alias.name
    }
    offered = {(module, name) for module, names in EXPORTS.items() for name in names}
    assert declared == offered, "the TYPE_CHECKING imports and EXPORTS differ"
    for module, name in sorted(offered):
        assert getattr(loader, name) is getattr(
            importlib.import_module(f"{PACKAGE}.{module}"), name
        )
    for module, text in texts().items():
        public = {n for n in defined(ast.parse(text)) if not n.startswith("_")}
        assert public <= set(EXPORTS[module]), f"{module}.py's public names are not all offered"
    with pytest.raises(AttributeError):
        _ = loader.no_such_name  # type: ignore[attr-defined]


_IMPORTED = """
import json, sys
{imports}
print(json.dumps(sorted(sys.modules)))
"""


def test_shipping_the_loader_imports_none_of_its_modules() -> None:
    """The stage step reads the seven as text: no ctypes, no argparse, no loader module."""
    script = _IMPORTED.format(
        imports="import ortbundle.stage.index_json\n"
        "from ortbundle.payload.loader import loader_source\nloader_source()"
    )
    modules = set(json.loads(run_python(script)))
    assert "ortbundle.payload.loader" in modules  # the probe sees the face
    assert sorted(m for m in modules if m.startswith(f"{PACKAGE}.")) == []
    assert "ctypes" not in modules and "argparse" not in modules


def test_the_never_chosen_check_imports_the_scoring_only() -> None:
    """stage/reachable.py scores machines: it needs neither the C API nor the command line."""
    modules = set(
        json.loads(run_python(_IMPORTED.format(imports="import ortbundle.stage.reachable")))
    )
    assert sorted(m for m in modules if m.startswith(f"{PACKAGE}.")) == [
        f"{PACKAGE}.{m}" for m in ("hardware", "index", "scoring", "search", "vendors")
    ]
    assert "ctypes" not in modules and "argparse" not in modules
