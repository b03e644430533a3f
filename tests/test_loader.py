"""The shipped loader: decisions over fake machine trees, runtimes.json against its schema."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ortbundle._core.progress import Reporter
from ortbundle.payload.loader import Hardware, LoaderError, choose, detect
from ortbundle.pipeline.build import build
from tests.helpers.project import FakeProject

INTEL, NVIDIA, AMD = "0x8086", "0x10de", "0x1002"


def machine(
    tmp_path: Path, *gpus: str, kfd: bool = False, nvidia: bool = False, soc: str = ""
) -> Path:
    root = tmp_path / "machine"
    for number, vendor in enumerate(gpus):
        device = root / f"sys/bus/pci/devices/0000:0{number}:00.0"
        device.mkdir(parents=True)
        (device / "class").write_text("0x030000\n")
        (device / "vendor").write_text(vendor + "\n")
        (device / "device").write_text("0x1234\n")
    nic = root / "sys/bus/pci/devices/0000:09:00.0"
    nic.mkdir(parents=True)
    (nic / "class").write_text("0x020000\n")  # a network card is not a GPU
    (nic / "vendor").write_text(INTEL + "\n")
    if kfd:
        (root / "dev").mkdir(parents=True)
        (root / "dev/kfd").write_text("")
    if nvidia:
        (root / "proc/driver/nvidia").mkdir(parents=True)
    if soc:
        (root / "sys/devices/soc0").mkdir(parents=True)
        (root / "sys/devices/soc0/family").write_text(soc + "\n")
    root.mkdir(exist_ok=True)
    return root


def runtime(name: str, vendors: list[str], any_gpu: bool = False) -> dict[str, Any]:
    return {
        "name": name,
        "label": name,
        "directory": f"runtimes/{name}",
        "entry": "x",
        "ort_version": "1.0",
        "providers": [],
        "plugin_eps": [],
        "files": [],
        "fits": {"gpu_vendors": vendors, "any_gpu": any_gpu, "soc_families": []},
    }


INDEX = {
    "schema": "ortbundle.runtimes/1",
    "override_env": "APP_ORT_DIR",
    "runtimes": [
        runtime("qnn", ["qualcomm"]),
        runtime("cuda", ["nvidia"]),
        runtime("rocm", ["amd"]),
        runtime("openvino", ["intel"]),
        runtime("webgpu", [], any_gpu=True),
        runtime("cpu", []),
    ],
}


def decide(root: Path, env: dict[str, str] | None = None) -> str:
    return str(
        choose(INDEX, detect(root, windows=False), stage=root, env=env or {}).runtime["name"]
    )


def test_intel_only_picks_openvino(tmp_path: Path) -> None:
    assert decide(machine(tmp_path, INTEL)) == "openvino"


def test_nvidia_with_driver_beats_intel(tmp_path: Path) -> None:
    assert decide(machine(tmp_path, INTEL, NVIDIA, nvidia=True)) == "cuda"


def test_nvidia_card_without_driver_is_not_a_vendor_fit(tmp_path: Path) -> None:
    assert decide(machine(tmp_path, INTEL, NVIDIA)) == "openvino"


def test_amd_needs_kfd(tmp_path: Path) -> None:
    assert decide(machine(tmp_path, AMD, kfd=True)) == "rocm"
    assert decide(machine(tmp_path / "b", AMD)) == "webgpu"


def test_no_gpu_falls_to_the_first_cpu_capable(tmp_path: Path) -> None:
    decision = choose(INDEX, detect(machine(tmp_path), windows=False), stage=tmp_path, env={})
    assert decision.runtime["name"] == "qnn"  # equal scores keep the search order
    assert decision.score == 1
    assert decision.line() == "CPU · qnn 1.0 · runtimes/qnn"


def test_qualcomm_soc_is_a_perfect_fit_that_ends_the_search(tmp_path: Path) -> None:
    decision = choose(
        INDEX, detect(machine(tmp_path, soc="Snapdragon"), windows=False), stage=tmp_path, env={}
    )
    assert decision.runtime["name"] == "qnn"
    assert [c.name for c in decision.candidates] == ["qnn"], "the others are never considered"


def test_override_wins_outright(tmp_path: Path) -> None:
    root = machine(tmp_path, NVIDIA, nvidia=True)
    (root / "runtimes/cpu").mkdir(parents=True)
    assert decide(root, {"APP_ORT_DIR": "runtimes/cpu"}) == "cpu"


def test_override_to_a_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    root = machine(tmp_path, INTEL)
    with pytest.raises(LoaderError, match="APP_ORT_DIR=/nowhere names no directory"):
        decide(root, {"APP_ORT_DIR": "/nowhere"})


def test_hardware_vendors() -> None:
    assert Hardware(soc="qualcomm sm8635").vendors() == {"qualcomm"}


def test_stage_carries_a_schema_valid_index_and_the_loader(
    written: FakeProject, reporter: Reporter
) -> None:
    build(written.project, written.options(targets=("linux-x86_64",)), reporter)
    stage = written.root / "dist/fakeproduct/1.2.3/linux-x86_64"
    index = json.loads((stage / "runtimes.json").read_text())
    schema = json.loads(
        resources.files("ortbundle").joinpath("data/runtimes.schema.json").read_text()
    )
    jsonschema.validate(index, schema)
    assert index["machine"] == "x86_64"  # the target's EM_X86_64, as the loader names it
    entry = index["runtimes"][0]
    assert entry["entry"] == "libonnxruntime.so.1.0.0"
    listed = {f["path"] for f in entry["files"]}
    assert listed == {p.name for p in (stage / "runtimes/fake").iterdir()}
    out = subprocess.run(
        [sys.executable, str(stage / "runtime_loader.py"), "--json", "--root", str(stage)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(out)["directory"] == "runtimes/fake"
    broken = dict(index, schema="ortbundle.runtimes/99")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)
