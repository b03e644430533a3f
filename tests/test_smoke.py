"""`invoke smoke` without the real tier: its refusals, the probe's line protocol, and the probe
and its judge on a stand-in core compiled here (tests/helpers/fakeort.py), natively and under
Wine for `-m windows`: what a machine lacks is NOT RUN with the reason, not FAIL, a FAIL says
what was expected and what was found, and only the product's channels are listed."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ortbundle._core.errors import SmokeError
from ortbundle.channels.nsis import NsisChannel
from ortbundle.stage.probe import (
    ProbeOutput,
    ProbeResult,
    build_probe,
    input_values,
    parse_probe,
)
from ortbundle.stage.probe.wine import wine_session
from ortbundle.tools.smoke.installs import tree_difference
from ortbundle.tools.smoke.probe.checks import (
    ProbeRunner,
    RuntimeCheck,
    _judge_outputs,
    agree,
    check_tree,
)
from ortbundle.tools.smoke.run import smoke
from tests.helpers.fakeort import compile_needing, fake_runtime, need, write_stage
from tests.helpers.packages import make_package_input
from tests.helpers.pe import make_pe
from tests.helpers.real import ROOT
from tests.helpers.windows import skip_without_wine


def test_nothing_built_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "windows-x86_64").mkdir()  # a directory without runtimes.json is not a stage
    with pytest.raises(SmokeError, match="no built target") as caught:
        smoke(tmp_path, package_name="x", channels=(), say=lambda _: None)
    assert caught.value.exit_code == 13
    assert caught.value.fix == "run `invoke build` first"


def test_a_target_that_was_not_built_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "linux-x86_64").mkdir()
    (tmp_path / "linux-x86_64" / "runtimes.json").write_text("{}")
    with pytest.raises(SmokeError, match="target windows-x86_64 was not built here"):
        smoke(
            tmp_path,
            package_name="x",
            channels=(),
            targets=["windows-x86_64"],
            say=lambda _: None,
        )


def test_targets_this_machine_cannot_run_are_reported_not_run(tmp_path: Path) -> None:
    for target in ("windows-arm64", "android-arm64-v8a"):
        (tmp_path / target).mkdir()
        (tmp_path / target / "runtimes.json").write_text("{}")
    said: list[str] = []
    report = smoke(tmp_path, package_name="x", channels=("nsis", "apk"), say=said.append)
    assert [(line.verdict, line.subject) for line in report.lines] == [
        ("NOT RUN", "runtimes"),
        ("NOT RUN", "runtimes"),
        ("NOT RUN", "installer"),  # Windows on Arm's installer runs here, when one was built
    ]
    assert "Android device" in report.lines[0].detail
    assert "Wine here runs x86_64 programs only" in report.lines[1].detail
    assert said[-1] == "smoke: 0 PASS, 0 FAIL, 3 NOT RUN"


def test_invoke_smoke_on_an_unbuilt_product_exits_13_without_a_traceback(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "invoke", "smoke", "--dist", str(tmp_path / "dist")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 13, result.stderr
    assert "darkroom 0.23.0 is not built" in result.stderr
    assert "invoke build --product darkroom" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_probe_protocol_keeps_paths_with_spaces_whole() -> None:
    out = "\n".join(
        [
            "api 24",
            "version 1.24.1",
            "providers OpenVINOExecutionProvider CPUExecutionProvider",
            "plugin ep-openvino ok CPUExecutionProvider OpenVINOExecutionProvider",
            "ep OpenVINO failed Failed to load provider OpenVINO",
            r"model C:\Program Files\p\models\sigmoid\f32.onnx ok",
            "input x float 3x4x5",
            "output y float 2 0.5 0.25",
            r"model C:\Program Files\p\models\bad.onnx failed no such file",
            r"load C:\Program Files\p\runtimes\a b.dll ok",
            r"load C:\Program Files\p\runtimes\c.dll failed 126",
            "loaded onnxruntime.dll",
        ]
    )
    result = parse_probe(0, out)
    assert result.version == "1.24.1" and result.api == 24
    assert result.providers == ("OpenVINOExecutionProvider", "CPUExecutionProvider")
    assert result.plugins["ep-openvino"][0] is True
    assert result.eps["OpenVINO"] == (False, "Failed to load provider OpenVINO")
    sigmoid = r"C:\Program Files\p\models\sigmoid\f32.onnx"
    assert result.models[sigmoid] == (True, "")
    assert result.models[r"C:\Program Files\p\models\bad.onnx"] == (False, "no such file")
    assert result.inputs[sigmoid] == (("x", "3x4x5"),)
    assert result.outputs[sigmoid][0].values == (0.5, 0.25)
    assert result.loads[r"C:\Program Files\p\runtimes\a b.dll"] == (True, "")
    assert result.loads[r"C:\Program Files\p\runtimes\c.dll"] == (False, "126")
    assert result.loaded == {"onnxruntime.dll"}


def test_the_fixed_input_is_the_probes() -> None:
    assert input_values(12) == [-2.5, -2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5, -2.5]


def test_a_failed_load_carries_the_platform_loaders_own_words() -> None:
    out = "load /s/libx.so failed 1\nwhy libnvinfer.so.10: cannot open shared object file\n"
    assert parse_probe(0, out).loads["/s/libx.so"] == (
        False,
        "1: libnvinfer.so.10: cannot open shared object file",
    )


# --- the probe on a stand-in core (tests/helpers/fakeort.py) --------------------------------

LINUX, WINDOWS = "linux-x86_64", "windows-x86_64"
DRIVER = need(
    "libortbundle_absent_cuda.so.1",
    "nvidia-driver",
    optional=False,
    install="Install the NVIDIA driver 580 or newer",
)
TENSORRT = need(
    "libortbundle_absent_nvinfer.so.10",
    "tensorrt",
    optional=True,
    install="Install NVIDIA TensorRT 10 to use the TensorRT execution provider",
)
OPENCL = need("libortbundle_absent_opencl.so.1", "opencl", optional=True, install="")


@pytest.fixture(scope="module")
def linux_probe(tmp_path_factory: pytest.TempPathFactory) -> ProbeRunner:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed (Debian/Ubuntu: apt-get install gcc)")
    return ProbeRunner(build_probe(tmp_path_factory.mktemp("probe"), windows=False))


def test_the_probe_drives_a_core_through_its_own_ortapi_declarations(
    tmp_path: Path, linux_probe: ProbeRunner
) -> None:
    """Built from ortprobe.c alone (no header, nothing downloaded), the probe finds the core's
    OrtApi table and calls entries at the indices it declares."""
    stage = tmp_path / "stage"
    cpu = fake_runtime(stage, "cpu", windows=False, providers=("XnnpackExecutionProvider",))
    write_stage(stage, LINUX, [cpu])
    (check,) = check_tree(stage, linux_probe, target=LINUX, where="stage")
    assert check.verdict == "PASS", check.detail
    assert check.result is not None and check.result.api == 99
    assert check.detail.startswith("ONNX Runtime 1.99.0; Xnnpack; 1 libraries loaded")
    # a stage without models says nothing of them (#43: it said "0 models right")
    assert "model" not in check.detail, check.detail


def test_a_missing_required_library_is_not_run_with_its_reason(
    tmp_path: Path, linux_probe: ProbeRunner
) -> None:
    """A CUDA runtime on a machine without the NVIDIA driver: the loader skips it there, so the
    smoke cannot run it, and says why; it is no failure of the package."""
    stage = tmp_path / "stage"
    cuda_dir, stubs = stage / "runtimes" / "cuda", tmp_path / "stubs"
    cuda_dir.mkdir(parents=True)
    provider = compile_needing(
        cuda_dir, "libonnxruntime_providers_cuda.so", [DRIVER["name"]], stubs=stubs
    )
    cuda = fake_runtime(
        stage,
        "cuda",
        windows=False,
        extra={"libonnxruntime_providers_cuda.so": provider},
        requires=[DRIVER],
    )
    write_stage(stage, LINUX, [cuda, fake_runtime(stage, "cpu", windows=False)])
    checks = check_tree(stage, linux_probe, target=LINUX, where="stage")
    assert [(c.runtime, c.verdict) for c in checks] == [("cuda", "NOT RUN"), ("cpu", "PASS")]
    assert checks[0].detail == (
        "libortbundle_absent_cuda.so.1 (nvidia-driver) not on this machine — Install the NVIDIA "
        "driver 580 or newer; the loader skips this runtime on this machine"
    )


def test_a_missing_optional_library_makes_only_what_needs_it_not_run(
    tmp_path: Path, linux_probe: ProbeRunner
) -> None:
    """TensorRT absent: its provider (and what imports that provider) is NOT RUN, named with
    the group and what to install; the core and the rest are probed and PASS. An optional
    library only opened at run time (OpenCL) blocks nothing: the PASS line names it."""
    stage = tmp_path / "stage"
    trt = "libonnxruntime_providers_tensorrt.so"
    cuda_dir, stubs = stage / "runtimes" / "cuda", tmp_path / "stubs"
    cuda_dir.mkdir(parents=True)
    (cuda_dir / trt).write_bytes(compile_needing(cuda_dir, trt, [TENSORRT["name"]], stubs=stubs))
    helper = compile_needing(cuda_dir, "libtrt_helper.so", [trt], stubs=stubs)
    cuda = fake_runtime(
        stage,
        "cuda",
        windows=False,
        extra={"libtrt_helper.so": helper},
        requires=[TENSORRT, OPENCL],
    )
    write_stage(stage, LINUX, [cuda])
    checks = check_tree(stage, linux_probe, target=LINUX, where="stage")
    assert [c.verdict for c in checks] == ["PASS", "NOT RUN"], [c.line() for c in checks]
    assert checks[0].detail.endswith(
        "; libortbundle_absent_opencl.so.1 (opencl, optional) not on this machine"
    )
    assert checks[1].detail == (
        f"{trt}, libtrt_helper.so not probed: libortbundle_absent_nvinfer.so.10 (tensorrt, "
        "optional) not on this machine — Install NVIDIA TensorRT 10 to use the TensorRT "
        "execution provider"
    )


def test_a_fail_says_what_was_expected_and_what_was_found(
    tmp_path: Path, linux_probe: ProbeRunner
) -> None:
    stage = tmp_path / "stage"
    cpu = fake_runtime(
        stage,
        "cpu",
        windows=False,
        index_version="1.98.0",
        index_providers=["CUDAExecutionProvider", "CPUExecutionProvider"],
        extra={"libbroken.so": b"this is not a library" * 100},
    )
    write_stage(stage, LINUX, [cpu])
    (check,) = check_tree(stage, linux_probe, target=LINUX, where="stage")
    assert check.verdict == "FAIL"
    problems = check.detail.split("; ")
    assert problems[0] == "version '1.99.0', the index says 1.98.0"
    assert problems[1] == (
        "providers CPUExecutionProvider, the index says CUDAExecutionProvider CPUExecutionProvider"
    )
    assert problems[2].startswith("cannot load libbroken.so (1: ")
    assert "libbroken.so: invalid ELF header" in problems[2]


def test_wrong_numbers_and_disagreeing_runs_name_the_element_expected_and_found() -> None:
    result = ProbeResult(0, inputs={"m": (("x", "3"),)})
    off = (ProbeOutput("y", "float", (0.0758582, 0.5, 0.1)),)  # sigmoid(-2.5, -2.0, -1.5)
    (problem,) = _judge_outputs("sigmoid", result, "m", off)
    assert problem == (
        "model sigmoid: y[1] = 0.5, expected sigmoid(-2) = 0.1192029 (off by 0.381, "
        "tolerance 1e-05)"
    )
    short = (ProbeOutput("y", "float", (0.1, 0.2)),)
    assert _judge_outputs("sigmoid", result, "m", short) == [
        "model sigmoid: y has 2 values, expected 3 (sigmoid of each input value)"
    ]
    nan = (ProbeOutput("y", "float", (0.1, math.nan)),)
    assert _judge_outputs("logreg", result, "m", nan) == [
        "model logreg: output y is not finite (y[1] = nan, 1 such)"
    ]
    first = RuntimeCheck(LINUX, "stage", "cpu", "PASS", "ok", (("ab" * 32, off),))
    other = (ProbeOutput("y", "float", (0.0758582, 0.25, 0.1)),)
    second = RuntimeCheck(WINDOWS, "stage", "cpu", "PASS", "ok", (("ab" * 32, other),))
    judged = agree([first, second])
    assert judged[0] is first and judged[1].verdict == "FAIL"
    assert judged[1].detail == (
        "model abababababab disagrees with linux-x86_64 cpu (stage): y[1] = 0.25 here, 0.5 there"
    )


def _version_dir(tmp_path: Path, *, with_core: bool) -> Path:
    version_dir = tmp_path / "dist" / "app" / "1.0"
    stage = version_dir / LINUX
    runtimes = [fake_runtime(stage, "cpu", windows=False)] if with_core else []
    write_stage(stage, LINUX, runtimes)
    return version_dir


def test_only_the_products_channels_are_listed(tmp_path: Path, linux_probe: ProbeRunner) -> None:
    """A product without a Flatpak gets no Flatpak line; a package that was not built is NOT
    RUN, saying so (the smoke unpacks a built .deb and .rpm, and does not build Flatpaks)."""
    version_dir = _version_dir(tmp_path, with_core=True)
    said: list[str] = []
    report = smoke(version_dir, package_name="app", channels=("arch",), say=said.append)
    assert [(line.verdict, line.subject) for line in report.lines] == [
        ("PASS", "cpu"),
        ("NOT RUN", "arch"),
    ]
    assert report.lines[1].detail.startswith("no PKGBUILD was built in ")
    assert not any("flatpak" in line.casefold() for line in said)

    (version_dir / "packaging" / "flatpak").mkdir(parents=True)
    report = smoke(version_dir, package_name="app", channels=("flatpak", "deb"), say=said.append)
    assert [(line.verdict, line.subject) for line in report.lines] == [
        ("PASS", "cpu"),
        ("NOT RUN", "deb"),
        ("NOT RUN", "flatpak"),
    ]
    assert report.lines[1].detail.startswith("no deb package was built in ")
    assert "flatpak install org.freedesktop.Sdk" in report.lines[2].detail


@pytest.mark.windows
def test_under_wine_the_probe_loads_a_core_and_skips_what_the_prefix_lacks(
    tmp_path: Path,
) -> None:
    """The same on Windows: the mingw-w64 probe under Wine drives a core through its own
    declarations; a runtime needing a DLL Windows lacks is NOT RUN, and a provider importing
    an absent optional DLL is NOT RUN while its core PASSes."""
    skip_without_wine()
    stage = tmp_path / "stage"
    driver = {**DRIVER, "name": "ortbundle_absent_nvcuda.dll"}
    tensorrt = {**TENSORRT, "name": "ortbundle_absent_nvinfer_10.dll"}
    cuda = fake_runtime(
        stage,
        "cuda",
        windows=True,
        extra={"onnxruntime_providers_cuda.dll": make_pe(imports=(driver["name"],))},
        requires=[driver],
    )
    trt = "onnxruntime_providers_tensorrt.dll"
    gpu = fake_runtime(
        stage,
        "gpu",
        windows=True,
        extra={trt: make_pe(imports=(tensorrt["name"],))},
        requires=[tensorrt],
    )
    write_stage(stage, WINDOWS, [cuda, gpu])
    exe = build_probe(tmp_path / "probe", windows=True)
    with wine_session(tmp_path / "prefix") as wine:
        checks = check_tree(stage, ProbeRunner(exe, wine), target=WINDOWS, where="stage")
    shutil.rmtree(tmp_path / "prefix", ignore_errors=True)
    lines = [c.line() for c in checks]
    assert [(c.runtime, c.verdict) for c in checks] == [
        ("cuda", "NOT RUN"),
        ("gpu", "PASS"),
        ("gpu", "NOT RUN"),
    ], lines
    assert checks[0].detail.startswith("ortbundle_absent_nvcuda.dll (nvidia-driver) not on this")
    assert checks[1].detail.startswith("ONNX Runtime 1.99.0; CPU; 1 libraries loaded"), lines
    assert checks[2].detail.startswith(f"{trt} not probed: ortbundle_absent_nvinfer_10.dll")


def test_tree_difference_names_what_is_missing_unexpected_and_changed() -> None:
    expected = {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"}
    found = {"b": "2", "c": "x", "z": "9"}
    assert tree_difference(found, expected, shown=2) == (
        "3 missing (a, d and 1 more), 1 unexpected (z), 1 changed (c)"
    )
    assert tree_difference(expected, dict(expected)) == ""


@pytest.mark.windows
def test_smoke_passes_the_arm64_installer_only_when_it_refuses_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """windows-arm64's runtimes cannot run here, its installer can: it must refuse this x64
    machine with nothing written. An x64 installer put in its place installs, and fails."""
    skip_without_wine(makensis=True)
    version_dir = tmp_path / "dist" / "demo" / "1.0.0"
    package = make_package_input(version_dir, "windows-arm64")
    out = version_dir / "packaging" / "nsis" / "windows-arm64"
    NsisChannel().generate(package, out)
    said: list[str] = []
    report = smoke(
        version_dir, package_name="demo-onnxruntime", channels=("nsis",), say=said.append
    )
    assert [(line.verdict, line.subject) for line in report.lines] == [
        ("NOT RUN", "runtimes"),
        ("PASS", "installer"),
    ], said
    assert "refused this x64 machine (exit 2), nothing written" in report.lines[1].detail

    x64 = make_package_input(tmp_path / "x64", "windows-x86_64")
    (setup,) = (
        p for p in NsisChannel().generate(x64, tmp_path / "x64-nsis").files if p.suffix == ".exe"
    )
    (arm64_setup,) = out.glob("*-setup.exe")
    shutil.copyfile(setup, arm64_setup)
    report = smoke(
        version_dir, package_name="demo-onnxruntime", channels=("nsis",), say=said.append
    )
    (line,) = report.failed
    assert "exited 0, expected a refusal" in line.detail and "it wrote" in line.detail
