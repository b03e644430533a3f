"""The rocket NPU's whole path under qemu-user, with the stock aarch64 ONNX Runtime 1.32 of the
pinned wheel: the ort-rocket stand-in (tests/data/rocket/) built with aarch64-linux-gnu-gcc and
pinned, darkroom and its darkroom-rk3588 add-on built from this repository's recipes and laid
out as their packages install them (the add-on's runtime, plugin and index fragment beside the
main package's), then on each machine the shipped loader's choice read from the machine's files
and its `--open` half done by the probe: the plugin registered with the chosen core under qemu
in that machine, and what it offers there turned into the loader's records.

A machine is a qemu sysroot (the cross C library, an arm64 /proc/cpuinfo) and, for the RK3588,
the fake sysfs and device tree the loader reads plus the /dev/accel/accel0 the plugin opens:
qemu-user looks every path up under its sysroot first, so the emulated plugin and this
machine's Python see one machine. The probe stands in for `--open` because this machine's
Python cannot load aarch64 code (tests/test_arm.py says the same of the default product).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ortbundle._core.progress import plain_reporter
from ortbundle.payload.loader import (
    Decision,
    Device,
    Hardware,
    choose,
    detect,
    device_rung,
    load_index,
    system_libraries,
)
from ortbundle.pipeline.build import BuildOptions, Project, build
from ortbundle.stage.probe import build_probe
from ortbundle.stage.probe.qemu import CROSS_CC, Qemu, missing_qemu, qemu_sysroot
from ortbundle.tools.smoke.probe.checks import ProbeRunner, RuntimeCheck, check_tree
from tests.helpers.real import ROOT, c_api_headers
from tests.helpers.rocket import (
    SOURCES,
    binary_archive,
    board,
    compile_standin,
    registrations,
    repin,
    source_archives,
)

pytestmark = [pytest.mark.real, pytest.mark.arm]
TARGET = "linux-aarch64"
SESSION = {
    "graph_optimization_level": "ORT_DISABLE_ALL",
    "config": {"session.intra_op.allow_spinning": "0"},
}
PLUGIN = "plugins/ep-rocket/libonnxruntime_rocket.so"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """darkroom's linux-aarch64 stage with darkroom-rk3588 installed beside it, both built from
    this repository's recipes, the real pinned wheels and the stand-in (pinned as a user pins)."""
    missing = missing_qemu()
    if missing:
        pytest.skip(f"qemu-aarch64 cannot run here (Debian: apt-get install {' '.join(missing)})")
    work = tmp_path_factory.mktemp("rocket-qemu")
    project = work / "project"
    for name in ("recipes", "manifests", "licenses"):
        shutil.copytree(ROOT / name, project / name)
    binary_archive(project / "third_party/ort-rocket")
    source_archives(project / "third_party/ort-rocket")
    repin(project)
    dist = Project.at(project, work / "dist")
    main = build(
        dist,
        BuildOptions(product="darkroom", targets=(TARGET,), channels=("deb",)),
        plain_reporter(),
    )
    addon = build(
        dist, BuildOptions(product="darkroom-rk3588", channels=("deb",)), plain_reporter()
    )
    tree = work / "installed"
    shutil.copytree(main.version_dir / TARGET, tree, symlinks=True)
    for part in ("runtimes", "plugins", "runtimes.d"):  # what the add-on's package installs
        shutil.copytree(addon.version_dir / TARGET / part, tree / part, dirs_exist_ok=True)
    return tree


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory, installed: Path) -> Path:
    return build_probe(tmp_path_factory.mktemp("probe"), target=TARGET)


def machine(path: Path, *, rk3588: bool = True) -> Qemu:
    """A qemu sysroot, which is also an RK3588 with a rocket accel node unless `rk3588` is
    false (then a machine with no /dev/accel at all)."""
    qemu = qemu_sysroot(path)
    if rk3588:
        board(path)
    return qemu


@dataclass(frozen=True)
class Chosen:
    """What the loader decides on one machine, with its plugin EPs registered (--open's half)."""

    decision: Decision
    hardware: Hardware
    checks: dict[str, RuntimeCheck]  # each runtime of the tree, probed under qemu
    device: Device | None  # the NPU rung once the chosen runtime's plugin has registered


def choose_on(tree: Path, qemu: Qemu, probe: Path) -> Chosen:
    """The shipped loader's choice on the machine `qemu` emulates, then what `--open` does
    there: each plugin EP of the chosen runtime registered with its core (by the probe, under
    qemu, in that machine) and the chosen runtime's NPU rung judged on what it offered."""
    index = load_index(tree)
    hardware = detect(qemu.sysroot)
    libraries = system_libraries(TARGET, qemu.sysroot, windows=False)
    decision = choose(index, hardware, stage=tree, libraries=libraries)
    checks = {
        c.runtime: c
        for c in check_tree(tree, ProbeRunner(probe, qemu=qemu), target=TARGET, where="qemu")
    }
    result = checks[decision.runtime["name"]].result
    assert result is not None, checks[decision.runtime["name"]].detail
    registered = registrations(decision.runtime, result)
    rung = device_rung(decision.runtime, hardware, registered)
    return Chosen(decision, hardware, checks, rung if rung is not None else decision.device)


def shipped_loader(tree: Path, root: Path) -> dict[str, Any]:
    """The tree's runtime_loader.py, run by this Python against `root` as the machine."""
    done = subprocess.run(
        [sys.executable, "runtime_loader.py", "--root", str(root), "--json"],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    decision: dict[str, Any] = json.loads(done.stdout)
    return decision


def test_the_stand_ins_declarations_are_onnx_runtimes_own(tmp_path: Path) -> None:
    """ep_rocket.c declares the ORT ABI it uses itself; compiled against the real headers (the
    pinned AAR's) every OrtApi index, OrtEpFactory offset, constant and export signature is
    checked there. A wrong index does not compile."""
    if shutil.which(CROSS_CC) is None:
        pytest.skip(f"{CROSS_CC} is not installed (Debian: apt-get install gcc-aarch64-linux-gnu)")
    include = c_api_headers(tmp_path / "include")

    def compiles(source: Path) -> subprocess.CompletedProcess[str]:
        flags = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"]
        flags += ["-DEP_ROCKET_CHECK_HEADER", "-isystem", str(include), f"-I{SOURCES}"]
        return subprocess.run(
            ["aarch64-linux-gnu-gcc", *flags, str(source)],
            capture_output=True,
            text=True,
            check=False,
        )

    checked = compiles(SOURCES / "ep_rocket.c")
    assert checked.returncode == 0, checked.stderr
    wrong = tmp_path / "ep_rocket.c"
    wrong.write_text(_replaced({"GetEpApi, 317": "GetEpApi, 316"}))
    refused = compiles(wrong)
    assert refused.returncode != 0 and "GetEpApi is not entry 316" in refused.stderr


def test_without_an_npu_the_plugin_registers_and_the_loader_chooses_the_cpu_saying_why(
    installed: Path, probe: Path, tmp_path: Path
) -> None:
    plain = machine(tmp_path / "plain", rk3588=False)
    chosen = choose_on(installed, plain, probe)
    rocket = chosen.checks["stock-rk3588"]
    assert rocket.passed, rocket.detail
    assert rocket.result is not None
    assert "ONNX Runtime 1.32.0" in rocket.detail
    # stock ONNX Runtime registered it: the core's own CPU device, none of the plugin's
    assert rocket.result.plugins["ep-rocket"] == (True, "CPUExecutionProvider")
    assert "plugin EP ep-rocket (0 devices) registered" in rocket.detail
    assert chosen.decision.runtime["name"] == "stock"  # the main package's core
    assert chosen.device is not None and chosen.device.ep_name is None
    assert chosen.device.session_options == {}
    why = (
        "CPU: rocket NPU not used: no /dev/accel device of the rocket driver "
        "(/sys/class/accel/accel*/device/driver): it needs Linux with the rocket accel driver "
        "loaded"
    )
    assert chosen.device.why == why
    said = shipped_loader(installed, plain.sysroot)
    assert said["runtime"] == "stock" and said["device"]["why"] == why


def test_on_an_rk3588_with_a_rocket_node_the_loader_takes_the_npu_rung_with_its_options(
    installed: Path, probe: Path, tmp_path: Path
) -> None:
    rk3588 = machine(tmp_path / "rk3588")
    chosen = choose_on(installed, rk3588, probe)
    assert (chosen.decision.runtime["name"], chosen.decision.why) == ("stock-rk3588", "rocket NPU")
    result = chosen.checks["stock-rk3588"].result
    assert result is not None
    assert result.plugins["ep-rocket"] == (True, "CPUExecutionProvider rocket")
    node = rk3588.sysroot / "dev/accel/accel0"
    assert chosen.device == Device(
        "rocket", "ep-rocket", f"NPU: rocket on radxa,rock-5b ({node}, driver rocket)", SESSION
    )
    said = shipped_loader(installed, rk3588.sysroot)
    assert said["runtime"] == "stock-rk3588"
    assert said["device"]["ep_name"] == "rocket"
    assert said["device"]["session_options"] == SESSION


def test_a_plugin_that_offers_no_device_on_the_rk3588_leaves_the_cpu(
    installed: Path, probe: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The board and its node are there, but the driver library says no NPU (the stand-in's
    ROCKETNPU_VERSION=0, passed by qemu to the emulated process): only registering tells."""
    monkeypatch.setenv("ROCKETNPU_VERSION", "0")
    chosen = choose_on(installed, machine(tmp_path / "rk3588"), probe)
    assert chosen.decision.runtime["name"] == "stock-rk3588"
    assert chosen.device == Device(
        None,
        "ep-rocket",
        "CPU: rocket NPU not used: the plugin EP registered but reports no rocket device",
    )


@pytest.mark.parametrize(
    ("edits", "why", "probed"),
    [
        # its factory under another name: its device is not the index's ep_name
        (
            {'return "rocket";': 'return "rockchip";'},
            "CPU: rocket NPU not used: the plugin EP registered but reports no rocket device",
            "plugin EP ep-rocket (0 devices) registered",
        ),
        # no CreateDataTransfer (1.23), which ORT 1.32 calls while registering a factory
        # whatever version it says: the core crashes there
        (
            {
                "    .CreateDataTransfer = create_data_transfer,\n": "",
                "static OrtStatus *create_data_transfer(": (
                    "__attribute__((unused)) static OrtStatus *create_data_transfer("
                ),
            },
            "CPU: rocket NPU not used: the plugin EP was not registered (",
            "the probe crashed (exit -11",
        ),
        # no CreateEpFactories: the core refuses to register it
        (
            {"OrtStatus *CreateEpFactories(": "OrtStatus *CreateEpFactory("},
            "CPU: rocket NPU not used: the plugin EP was not registered (",
            "undefined symbol: CreateEpFactories",
        ),
    ],
    ids=["named-otherwise", "no-data-transfer", "no-create-ep-factories"],
)
def test_a_broken_stand_in_does_not_take_the_npu_rung(
    installed: Path, probe: Path, tmp_path: Path, edits: dict[str, str], why: str, probed: str
) -> None:
    """The path bites: the same RK3588, with the stand-in's name, its factory or its
    registration broken."""
    sources = tmp_path / "src"
    shutil.copytree(SOURCES, sources)
    (sources / "ep_rocket.c").write_text(_replaced(edits))
    broken = compile_standin(tmp_path / "out", sources)
    tree = tmp_path / "installed"
    shutil.copytree(installed, tree, symlinks=True)
    shutil.copy(broken, tree / PLUGIN)
    chosen = choose_on(tree, machine(tmp_path / "rk3588"), probe)
    assert chosen.decision.runtime["name"] == "stock-rk3588"  # its NPU is there
    assert chosen.device is not None and chosen.device.ep_name is None
    assert chosen.device.why.startswith(why), chosen.device.why
    assert probed in chosen.checks["stock-rk3588"].detail


def _replaced(edits: dict[str, str]) -> str:
    """ep_rocket.c with each text of `edits` (found once) replaced by its value."""
    text = (SOURCES / "ep_rocket.c").read_text()
    for old, new in edits.items():
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text
