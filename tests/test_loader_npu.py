"""The loader's NPU rung for a plugin EP behind /dev/accel (ort-rocket on an RK3588): taken when
the accel node's driver is the plugin's, the board's device tree is one it runs on and the node
opens, then only if the plugin registers and reports a device; otherwise the CPU, saying why in
one line. The rung carries the EP's session options. Read from a fake machine root."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ortbundle.payload.loader import (
    SCHEMA,
    Hardware,
    choose,
    detect,
    device_rung,
    main,
    open_runtime,
    register_plugins,
)
from ortbundle.payload.loader.ortapi import Registered
from tests.test_loader_plugins import FAKE_CORE

SESSION = {
    "graph_optimization_level": "ORT_DISABLE_ALL",
    "config": {"session.intra_op.allow_spinning": "0"},
}
RK3588 = b"radxa,rock-5b\0rockchip,rk3588\0"


def board(
    root: Path,
    *,
    driver: str | None = "rocket",
    compatible: bytes | None = RK3588,
    node: bool = True,
) -> Path:
    """A machine root: /sys/class/accel/accel0 bound to `driver`, its /dev node, the device tree."""
    if driver is not None:
        drivers = root / "sys/bus/platform/drivers" / driver
        drivers.mkdir(parents=True)
        device = root / "sys/devices/platform/fdab0000.npu"
        device.mkdir(parents=True)
        (device / "driver").symlink_to(drivers)
        accel = root / "sys/class/accel/accel0"
        accel.mkdir(parents=True)
        (accel / "device").symlink_to(device)
        if node:
            (root / "dev/accel").mkdir(parents=True)
            (root / "dev/accel/accel0").write_bytes(b"")
    if compatible is not None:
        (root / "proc/device-tree").mkdir(parents=True)
        (root / "proc/device-tree/compatible").write_bytes(compatible)
    return root


def rocket(**extra: Any) -> dict[str, Any]:
    return {
        "registration_name": "ep-rocket",
        "ep_name": "rocket",
        "library": "plugins/ep-rocket/libonnxruntime_rocket.so",
        "min_core": "1.24.4",
        "version": "0.1.0",
        "device": {"kind": "accel", "driver": "rocket", "compatible": ["rockchip,rk3588"]},
        "session_options": SESSION,
        **extra,
    }


def index(plugins: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "runtimes": [
            {
                "name": "stock",
                "label": "ONNX Runtime",
                "directory": "runtimes/stock",
                "entry": "libonnxruntime.so.1.27.0",
                "ort_version": "1.27.0",
                "fits": {},
                "plugin_eps": plugins,
            }
        ]
    }


def test_the_machine_root_is_read_for_accel_nodes_and_the_board(tmp_path: Path) -> None:
    hardware = detect(board(tmp_path))
    (accel,) = hardware.accel
    assert (accel.name, accel.driver, accel.unopenable) == ("accel0", "rocket", "")
    assert accel.node == str(tmp_path / "dev/accel/accel0")
    assert hardware.compatible == ("radxa,rock-5b", "rockchip,rk3588")


def test_an_rk3588_with_a_rocket_node_takes_the_npu_rung_with_its_options(
    tmp_path: Path,
) -> None:
    decision = choose(index([rocket()]), detect(board(tmp_path)), stage=tmp_path)
    assert decision.device is not None
    assert decision.device.ep_name == "rocket"
    assert decision.device.session_options == SESSION
    assert decision.device.why == (
        f"NPU: rocket on radxa,rock-5b ({tmp_path}/dev/accel/accel0, driver rocket)"
    )


@pytest.mark.parametrize(
    ("machine", "why"),
    [
        (
            {"driver": None},
            "CPU: rocket NPU not used: no /dev/accel device of the rocket driver "
            "(/sys/class/accel/accel*/device/driver): it needs Linux with the rocket accel "
            "driver loaded",
        ),
        (
            {"driver": "ivpu"},
            "CPU: rocket NPU not used: no /dev/accel device of the rocket driver "
            "(/sys/class/accel/accel*/device/driver); /dev/accel has accel0 (ivpu): it needs "
            "Linux with the rocket accel driver loaded",
        ),
        (
            {"compatible": b"pine64,quartz64-a\0rockchip,rk3566\0"},
            "CPU: rocket NPU not used: the board is not rockchip,rk3588 (pine64,quartz64-a)",
        ),
        (
            {"compatible": None},
            "CPU: rocket NPU not used: the board is not rockchip,rk3588 "
            "(no device-tree compatible)",
        ),
        (
            {"node": False},
            "CPU: rocket NPU not used: {root}/dev/accel/accel0 cannot be opened (No such file "
            "or directory): the package's udev rule gives the render group access; add this "
            "user to it",
        ),
    ],
)
def test_otherwise_the_cpu_and_one_line_saying_why(
    tmp_path: Path, machine: dict[str, Any], why: str
) -> None:
    decision = choose(index([rocket()]), detect(board(tmp_path, **machine)), stage=tmp_path)
    assert decision.device is not None
    assert decision.device.ep_name is None and decision.device.session_options == {}
    assert decision.device.why == why.format(root=tmp_path)
    assert "\n" not in decision.device.why


def test_the_npu_rung_needs_the_plugin_registered_with_a_device(tmp_path: Path) -> None:
    runtime = index([rocket()])["runtimes"][0]
    hardware = detect(board(tmp_path))
    lib = "plugins/ep-rocket/libonnxruntime_rocket.so"
    none = [Registered("ep-rocket", "rocket", lib, 0)]
    rung = device_rung(runtime, hardware, none)
    assert rung is not None
    assert rung.why == (
        "CPU: rocket NPU not used: the plugin EP registered but reports no rocket device"
    )
    failed = [Registered("ep-rocket", "rocket", lib, 0, "failed", "cannot load it")]
    rung = device_rung(runtime, hardware, failed)
    assert rung is not None and rung.ep_name is None and "cannot load it" in rung.why
    rung = device_rung(runtime, hardware, [Registered("ep-rocket", "rocket", lib, 1)])
    assert rung is not None and rung.ep_name == "rocket"


def test_a_runtime_without_an_npu_plugin_has_no_rung(tmp_path: Path) -> None:
    plain = {k: v for k, v in rocket().items() if k not in ("device", "session_options")}
    assert choose(index([plain]), detect(board(tmp_path)), stage=tmp_path).device is None
    assert choose(index([]), Hardware(), stage=tmp_path).device is None


@pytest.fixture(scope="module")
def fake_core(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed (Debian: apt-get install gcc)")
    directory = tmp_path_factory.mktemp("core")
    (directory / "core.c").write_text(FAKE_CORE)
    library = directory / "libonnxruntime.so.1.27.0"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O1", "-o", str(library), str(directory / "core.c")],
        check=True,
    )
    return library


def installed(tmp_path: Path, core: Path) -> Path:
    """A stage with the fake core and a plugin file naming its EP (what the fake core reads)."""
    stage = tmp_path / "stage"
    (stage / "runtimes/stock").mkdir(parents=True)
    shutil.copy(core, stage / "runtimes/stock" / core.name)
    library = stage / "plugins/ep-rocket/libonnxruntime_rocket.so"
    library.parent.mkdir(parents=True)
    library.write_text("rocket\n")
    (stage / "runtimes.json").write_text(json.dumps({"schema": SCHEMA, **index([rocket()])}))
    return stage


@pytest.mark.tools
def test_absent_npu_the_plugin_is_not_loaded(tmp_path: Path, fake_core: Path) -> None:
    stage = installed(tmp_path, fake_core)
    runtime = index([rocket()])["runtimes"][0] | {"name": "stock-npu-a"}
    open_runtime(stage, runtime)
    (skipped,) = register_plugins(stage, runtime, detect(board(tmp_path / "m", driver=None)))
    assert skipped.status == "skipped"
    assert skipped.why.startswith("no /dev/accel device of the rocket driver")


def test_the_command_returns_the_rung_and_its_session_options(
    tmp_path: Path, fake_core: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stage = installed(tmp_path, fake_core)
    npu = board(tmp_path / "npu")
    assert main(["--stage", str(stage), "--root", str(npu), "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["device"] == {
        "ep_name": "rocket",
        "plugin": "ep-rocket",
        "why": f"NPU: rocket on radxa,rock-5b ({npu}/dev/accel/accel0, driver rocket)",
        "session_options": SESSION,
    }
    cpu = board(tmp_path / "cpu", compatible=None)
    assert main(["--stage", str(stage), "--root", str(cpu)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == (
        "  CPU: rocket NPU not used: the board is not rockchip,rk3588 (no device-tree compatible)"
    )
    assert main(["--stage", str(stage), "--root", str(npu)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2:] == [
        '    session option config = {"session.intra_op.allow_spinning": "0"}',
        '    session option graph_optimization_level = "ORT_DISABLE_ALL"',
    ]
