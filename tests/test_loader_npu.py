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
    SCORE_CPU,
    SCORE_NPU,
    Hardware,
    choose,
    detect,
    device_rung,
    main,
    open_runtime,
    register_plugins,
    unused_npu,
)
from ortbundle.payload.loader.ortapi import Registered
from tests.helpers.rocket import board
from tests.test_loader_plugins import FAKE_CORE

SESSION = {
    "graph_optimization_level": "ORT_DISABLE_ALL",
    "config": {"session.intra_op.allow_spinning": "0"},
}


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


def with_addon(main_plugins: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The main package's CPU runtime first, then an add-on's runtime carrying the NPU plugin
    (darkroom with darkroom-rk3588 installed beside it): equal as CPU runtimes."""
    (main,) = index(main_plugins or [])["runtimes"]
    (addon,) = index([rocket()])["runtimes"]
    addon |= {"name": "stock-rk3588", "directory": "runtimes/stock-rk3588", "addon": "rk3588"}
    return {"runtimes": [main, addon]}


def test_the_addons_npu_runtime_outranks_the_main_cpu_runtime_where_its_npu_is(
    tmp_path: Path,
) -> None:
    decision = choose(with_addon(), detect(board(tmp_path)), stage=tmp_path)
    assert (decision.runtime["name"], decision.score, decision.why) == (
        "stock-rk3588",
        SCORE_NPU,
        "rocket NPU",
    )
    assert decision.device is not None and decision.device.ep_name == "rocket"
    assert [(c.name, c.score) for c in decision.candidates] == [
        ("stock", SCORE_CPU),
        ("stock-rk3588", SCORE_NPU),
    ]


def test_without_the_npu_the_main_runtime_is_chosen_and_says_why_not_the_npu(
    tmp_path: Path,
) -> None:
    decision = choose(with_addon(), detect(board(tmp_path, driver=None)), stage=tmp_path)
    assert decision.runtime["name"] == "stock"
    assert decision.device is not None and decision.device.ep_name is None
    assert decision.device.why.startswith(
        "CPU: rocket NPU not used: no /dev/accel device of the rocket driver"
    )
    # the NPU is here, but a runtime ranked above it (a vendor GPU's) is chosen: no NPU line
    nvidia = index([])["runtimes"][0] | {"fits": {"gpu_vendors": ["nvidia"]}}
    rung = unused_npu(with_addon()["runtimes"], nvidia, detect(board(tmp_path / "npu")))
    assert rung is None


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
