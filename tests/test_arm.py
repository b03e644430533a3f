"""The arm tier: the default product's linux-aarch64 runtimes run under qemu-user.

The probe is cross-compiled (aarch64-linux-gnu-gcc) and run as `qemu-aarch64 -L SYSROOT`
against the stage, the Arch package pacman installed into a scratch root (built for aarch64),
and the unpacked .deb and .rpm: load, version, providers, plugin EP registration, every model
with its numbers. The checks are shown to bite here too (a wrong version, wrong numbers), and
the sysroot's arm64 /proc/cpuinfo is shown to be what keeps ONNX Runtime from crashing.

The shipped Python loader's `--open` needs an aarch64 Python to load aarch64 code in its own
process, and none is installed here: its choice (which runtime, which system libraries) is
checked with this machine's Python against the sysroot as the machine root; the probe does
what `--open` does (OrtGetApiBase, version, providers, plugin registration) under qemu.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from ortbundle._core.progress import plain_reporter
from ortbundle.pipeline.build import BuildOptions, Project, build
from ortbundle.pipeline.result import BuildResult
from ortbundle.stage.probe import build_probe
from ortbundle.stage.probe.qemu import Qemu, missing_qemu, qemu_sysroot
from ortbundle.tools.smoke.probe.checks import ProbeRunner, check_tree
from ortbundle.tools.smoke.run import smoke
from tests.helpers.mislabel import mislabel_stage
from tests.helpers.real import ROOT

pytestmark = [pytest.mark.real, pytest.mark.arm]
TARGET = "linux-aarch64"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuildResult:
    """The default product's linux-aarch64 stage and packages, from the real pinned wheels."""
    missing = missing_qemu()
    if missing:
        pytest.skip(f"qemu-aarch64 cannot run here (Debian: apt-get install {' '.join(missing)})")
    dist = tmp_path_factory.mktemp("dist")
    options = BuildOptions(product="darkroom", targets=(TARGET,))
    return build(Project.at(ROOT, dist), options, plain_reporter())


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory, built: BuildResult) -> ProbeRunner:
    work = tmp_path_factory.mktemp("qemu")
    return ProbeRunner(
        build_probe(work / "probe", target=TARGET), qemu=qemu_sysroot(work / "sysroot")
    )


def test_smoke_runs_every_runtime_from_the_stage_and_each_package(built: BuildResult) -> None:
    lines: list[str] = []
    started = time.monotonic()
    report = smoke(
        built.version_dir,
        package_name=built.plan.product.packaging.package_name,
        channels=built.plan.product.channels,
        targets=[TARGET],
        say=lines.append,
    )
    print("\n".join(lines), f"({time.monotonic() - started:.1f} s)", sep="\n")
    assert not report.failed, "\n".join(line.text() for line in report.failed)
    index = json.loads((built.version_dir / TARGET / "runtimes.json").read_text("utf-8"))
    runtimes = [str(r["name"]) for r in index["runtimes"]]
    assert runtimes == ["stock"]
    passed = {(line.subject, line.where.split(" (")[0]) for line in report.passed}
    for runtime in runtimes:
        for where in ("stage", "installed", "unpacked"):
            assert (runtime, where) in passed, (runtime, where, lines)
    packages = [line for line in report.passed if line.subject in ("arch", "deb", "rpm")]
    assert {line.subject for line in packages} == {"arch", "deb", "rpm"}
    assert any("_arm64.deb" in line.where for line in packages)
    assert any(".aarch64.rpm" in line.where for line in packages)
    unpacked = [line for line in report.passed if line.subject == "stock"]
    assert len(unpacked) == 4  # stage, pacman's root, the .deb's, the .rpm's
    for line in unpacked:  # every model with its numbers, the plugin EP registered
        assert "ONNX Runtime 1.32.0" in line.detail and "2 models right" in line.detail
        assert "plugin EP ep-webgpu" in line.detail and "registered" in line.detail


def test_the_checks_catch_a_wrong_version_and_wrong_numbers_under_qemu(
    built: BuildResult, runner: ProbeRunner, tmp_path: Path
) -> None:
    stage = tmp_path / "stage"
    shutil.copytree(built.version_dir / TARGET, stage, symlinks=True)
    (good,) = check_tree(stage, runner, target=TARGET, where="copy")
    assert good.passed, good.detail
    mislabel_stage(stage, "1.31.0")
    (bad,) = check_tree(stage, runner, target=TARGET, where="copy")
    assert not bad.passed
    assert "version '1.32.0', the index says 1.31.0" in bad.detail
    assert "model sigmoid: label has 3 values, expected 6" in bad.detail


def test_without_the_arm64_cpuinfo_onnx_runtime_crashes(
    built: BuildResult, runner: ProbeRunner, tmp_path: Path
) -> None:
    """The host's x86 /proc/cpuinfo, passed through by qemu, crashes ORT's cpuinfo: the
    sysroot's own is what the probe's PASS rests on."""
    assert runner.qemu is not None
    bare = tmp_path / "sysroot"
    bare.mkdir()
    (bare / "lib").symlink_to(runner.qemu.lib.resolve(), target_is_directory=True)
    (check,) = check_tree(
        built.version_dir / TARGET, replace(runner, qemu=Qemu(bare)), target=TARGET, where="bare"
    )
    assert not check.passed
    assert "the probe crashed" in check.detail


def _shipped_loader(stage: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The stage's runtime_loader.py run by this Python, as an application would run it."""
    return subprocess.run(
        [sys.executable, "runtime_loader.py", *args],
        cwd=stage,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_shipped_loader_chooses_the_stock_core_against_an_aarch64_root(
    built: BuildResult, runner: ProbeRunner
) -> None:
    assert runner.qemu is not None
    stage = built.version_dir / TARGET
    chose = _shipped_loader(stage, "--root", str(runner.qemu.sysroot), "--json")
    assert chose.returncode == 0, chose.stderr
    decision = json.loads(chose.stdout)
    assert decision["runtime"] == "stock" and decision["problems"] == []
    assert decision["candidates"][0]["notes"] == ["optional libvulkan.so.1 not found (vulkan)"]
    assert decision["hardware"]["machine"] == "aarch64"  # the sysroot's libc.so.6 says so
    # on an x86-64 machine itself, the package is for another CPU (not "too old")
    if os.uname().machine != "x86_64":
        return
    here = _shipped_loader(stage)
    assert (here.returncode, here.stdout) == (1, "")
    assert here.stderr.startswith(
        "runtime_loader: this package is built for aarch64 (target linux-aarch64) and this "
        "machine runs x86_64 code"
    ), here.stderr


def test_lintian_and_rpmlint_accept_the_real_aarch64_packages(built: BuildResult) -> None:
    """The real aarch64 libraries are stripped and link curl and Mbed TLS statically, unlike
    the x86-64 ones: the validators must accept the packages made of them as they are."""
    for tool, package in (("lintian", "lintian"), ("rpmlint", "rpmlint")):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (Debian: apt-get install {package})")
    packaging = built.version_dir / "packaging"
    (deb,) = (packaging / "deb" / TARGET).glob("*_arm64.deb")
    linted = subprocess.run(
        ["lintian", "--no-cfg", "--display-level", ">=warning", str(deb)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert linted.returncode == 0 and "E: " not in linted.stdout, linted.stdout + linted.stderr
    rpm_dir = packaging / "rpm" / TARGET
    (rpm,) = rpm_dir.glob("*.aarch64.rpm")
    (rpmlintrc,) = rpm_dir.glob("*.rpmlintrc")
    checked = subprocess.run(
        ["rpmlint", "-r", str(rpmlintrc), str(rpm)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert " 0 errors," in checked.stdout, checked.stdout + checked.stderr
