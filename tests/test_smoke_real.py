"""The real tier runs `invoke smoke`'s code on both real products, and the checks it relies on
are shown to catch a wrong version and wrong numbers.

`smoke` probes every linux-x86_64 and windows-x86_64 runtime from the stage and from where its
package installs (pacman into a scratch root; the installer in a fresh Wine prefix), every model
on every runtime, and says NOT RUN for what this machine cannot execute.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from ortbundle.pipeline.result import BuildResult
from ortbundle.stage.probe import FLAGS, MINGW_CC
from ortbundle.tools.smoke.probe.checks import ProbeRunner, check_tree
from ortbundle.tools.smoke.run import SmokeReport, smoke
from tests.helpers.mislabel import mislabel_stage
from tests.helpers.real import build_product, c_api_headers
from tests.helpers.windows import probes, skip_without_wine

pytestmark = [pytest.mark.real, pytest.mark.windows]
__all__ = ["probes"]  # a session fixture, used by name


def _runtimes(result: BuildResult, target: str) -> list[dict[str, object]]:
    index = json.loads((result.version_dir / target / "runtimes.json").read_text("utf-8"))
    runtimes: list[dict[str, object]] = index["runtimes"]
    return runtimes


def _smoke(result: BuildResult) -> SmokeReport:
    lines: list[str] = []
    started = time.monotonic()
    report = smoke(
        result.version_dir,
        package_name=result.plan.product.packaging.package_name,
        channels=result.plan.product.channels,
        say=lines.append,
    )
    print("\n".join(lines), f"({time.monotonic() - started:.0f} s)", sep="\n")
    return report


@pytest.mark.parametrize("product", ["darkroom", "darkroom-plugins"])
def test_smoke_passes_every_runtime_this_machine_can_run(
    tmp_path_factory: pytest.TempPathFactory, product: str
) -> None:
    skip_without_wine(makensis=True)
    result = build_product(tmp_path_factory, product)
    report = _smoke(result)
    assert not report.failed, "\n".join(line.text() for line in report.failed)

    passed = {(line.target, line.subject, line.where.split(" (")[0]) for line in report.passed}
    for target in ("linux-x86_64", "windows-x86_64"):
        for runtime in _runtimes(result, target):
            for where in ("stage", "installed"):
                assert (target, runtime["name"], where) in passed, (target, runtime, where)
    packages = {(line.target, line.subject) for line in report.passed}
    assert {("linux-x86_64", "arch"), ("windows-x86_64", "installer")} <= packages
    assert ("windows-x86_64", "uninstall") in packages
    not_run = {line.target for line in report.lines if line.verdict == "NOT RUN"}
    assert "windows-arm64" in not_run
    for line in report.lines:  # a runtime with plugin EPs registered them with its core
        if line.verdict == "PASS" and line.subject == "webgpu" and product == "darkroom-plugins":
            assert "plugin EP ep-openvino" in line.detail, line.text()


def test_the_checks_catch_a_wrong_version_and_wrong_numbers(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, probes: tuple[Path, Path]
) -> None:
    result = build_product(tmp_path_factory, "darkroom")
    stage = tmp_path / "stage"
    shutil.copytree(result.version_dir / "linux-x86_64", stage, symlinks=True)
    runner = ProbeRunner(probes[1])
    assert all(c.passed for c in check_tree(stage, runner, target="t", where="copy"))

    mislabel_stage(stage, "1.24.0")

    first, second = check_tree(stage, runner, target="t", where="copy")
    assert not first.passed and "version '1.24.1', the index says 1.24.0" in first.detail
    # logreg's label: one class per input row, not one value per input value
    assert not second.passed
    assert "model sigmoid: label has 3 values, expected 6 (sigmoid of each input value)" in (
        second.detail
    )


def test_the_shipped_loaders_ortapi_indices_match_the_c_header(tmp_path: Path) -> None:
    """runtime_loader.py calls OrtApi by index; the header from the pinned AAR says where each
    function is (offsetof / sizeof(void *)), for the loader's Linux and Windows builds alike."""
    from ortbundle.payload import loader

    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed (Debian/Ubuntu: apt-get install gcc)")
    include = c_api_headers(tmp_path / "include")
    names = {
        "GetErrorMessage": loader._GET_ERROR_MESSAGE,
        "CreateEnv": loader._CREATE_ENV,
        "ReleaseStatus": loader._RELEASE_STATUS,
        "RegisterExecutionProviderLibrary": loader._REGISTER_EP_LIBRARY,
        "GetEpDevices": loader._GET_EP_DEVICES,
        "EpDevice_EpName": loader._EP_DEVICE_EP_NAME,
    }
    lines = [f'printf("{n} %zu\\n", offsetof(OrtApi, {n}) / sizeof(void *));' for n in names]
    source = tmp_path / "offsets.c"
    source.write_text(
        '#include <stddef.h>\n#include <stdio.h>\n#include "onnxruntime_c_api.h"\n'
        "int main(void) {\n" + "\n".join(lines) + "\nreturn 0;\n}\n"
    )
    exe = tmp_path / "offsets"
    subprocess.run(["gcc", "-isystem", str(include), "-o", str(exe), str(source)], check=True)
    printed = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    found = {name: int(index) for name, index in (line.split() for line in printed.splitlines())}
    assert found == names


@pytest.mark.parametrize("compiler", ["gcc", MINGW_CC])
def test_the_probes_own_ortapi_declarations_match_the_c_header(
    tmp_path: Path, compiler: str
) -> None:
    """ortprobe.c declares the entries it calls; compiled against the real header instead
    (-DORTPROBE_CHECK_HEADER) every index and constant is a static assertion and every call is
    checked against the header's own prototypes, for the Linux and the Windows ABI."""
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} not installed (Debian/Ubuntu: gcc, gcc-mingw-w64-x86-64)")
    include = c_api_headers(tmp_path / "include")
    source = Path(__file__).parents[1] / "ortbundle/stage/probe/ortprobe.c"
    flags = [f for f in FLAGS if not f.startswith("-std=")]
    flags += ["-std=c11", "-fsyntax-only", "-D_GNU_SOURCE", "-DORTPROBE_CHECK_HEADER"]
    checked = subprocess.run(
        [compiler, *flags, "-isystem", str(include), str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    # (an entry called but not declared does not compile without the header: each is checked)
    assert checked.returncode == 0, checked.stderr
