"""The GPU vendors are data (ortbundle/data/gpu-vendors.toml): the schema, scaffold and the
loader's generated copy all say what that file says, and a stale copy is caught."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ortbundle._core.errors import ConfigError
from ortbundle.cli.common import CommandFailed
from ortbundle.cli.docs import run_docs
from ortbundle.config import gpu_vendors
from ortbundle.config.gpu_vendors import (
    LOADER_COPY,
    _vendor,
    loader_copy_is_current,
    render_loader_copy,
    write_loader_copy,
)
from ortbundle.config.schema import choices
from ortbundle.payload.loader import VENDOR_LABEL, VENDORS, hardware, scoring
from ortbundle.payload.loader import vendors as loader_vendors
from ortbundle.tools.scaffold.propose import PROVIDERS
from ortbundle.tools.scaffold.propose import gpu_vendors as served

ROOT = Path(__file__).resolve().parent.parent


def test_the_loaders_copy_is_what_invoke_docs_writes_from_the_data_file() -> None:
    assert (ROOT / LOADER_COPY).read_text("utf-8") == render_loader_copy()
    assert loader_copy_is_current(ROOT)


def test_the_loaders_copy_holds_every_field_of_the_data_file() -> None:
    data = gpu_vendors.gpu_vendors()
    assert list(loader_vendors.GPU_VENDORS) == list(data)
    for name, vendor in data.items():
        copy = loader_vendors.GPU_VENDORS[name]
        assert (copy.label, copy.pci_ids, copy.on_pci, copy.driver, copy.score, copy.soc) == (
            vendor.label,
            vendor.pci_ids,
            vendor.on_pci,
            vendor.driver,
            vendor.score,
            vendor.soc,
        )


def test_a_changed_data_file_makes_the_copy_stale_and_invoke_docs_rewrites_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / LOADER_COPY).parent.mkdir(parents=True)
    (tmp_path / LOADER_COPY).write_text(render_loader_copy(), "utf-8")
    assert loader_copy_is_current(tmp_path)
    changed = dict(gpu_vendors.gpu_vendors())
    changed["nvidia"] = replace(changed["nvidia"], pci_ids=(0x10DE, 0x12D2))
    monkeypatch.setattr(gpu_vendors, "gpu_vendors", lambda: changed)
    assert "pci_ids=(0x10DE, 0x12D2)," in render_loader_copy()
    assert not loader_copy_is_current(tmp_path)
    with pytest.raises(CommandFailed, match="ortbundle/payload/loader/vendors.py"):
        run_docs(check=True, root=tmp_path)
    write_loader_copy(tmp_path)
    assert loader_copy_is_current(tmp_path)


def test_the_loader_knows_the_vendors_the_data_file_names() -> None:
    data = gpu_vendors.gpu_vendors().values()
    assert {pci: v.name for v in data if v.on_pci for pci in v.pci_ids} == VENDORS
    assert {v.name: v.label for v in data} == VENDOR_LABEL
    assert all(v.driver in vars(hardware.Hardware()) for v in data if v.driver)


def test_the_schema_accepts_exactly_the_data_files_vendors() -> None:
    assert tuple(choices.GPU_VENDORS.load()) == tuple(gpu_vendors.gpu_vendors())
    assert choices.GPU_VENDORS.source == "ortbundle/data/gpu-vendors.toml"


def test_scaffold_takes_a_runtimes_vendors_from_its_providers() -> None:
    providers = ("CUDAExecutionProvider", "OpenVINOExecutionProvider", "WebGpuExecutionProvider")
    assert served(providers) == ("intel", "nvidia")
    assert served(("DmlExecutionProvider", "CPUExecutionProvider")) == ()
    named = {p for v in gpu_vendors.gpu_vendors().values() for p in v.providers}
    assert named <= set(PROVIDERS.values())  # every one is a library scaffold finds


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"label": "X", "pci_ids": [1], "score": "best"}, "'score' must be one of"),
        ({"label": "X", "pci_ids": [0x10000], "score": "vendor"}, "16-bit PCI vendor ids"),
        ({"label": "X", "pci_ids": [1], "score": "vendor", "driver": "cuda"}, "Hardware flags"),
        ({"label": "X", "pci_ids": [1], "score": "vendor", "colour": "red"}, "unknown key"),
        ({"pci_ids": [1], "score": "vendor"}, "'label'"),
    ],
)
def test_a_mistake_in_the_data_file_is_refused_naming_it(raw: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        _vendor("x", raw)
    assert caught.value.file == "ortbundle/data/gpu-vendors.toml"


def test_the_loader_ranks_by_its_copy_of_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """A vendor added to the table is found, labelled and scored with no loader code changed."""
    acme = loader_vendors.Vendor("Acme", (0x1AC3,), True, "kfd", "intel", True)
    table = {**loader_vendors.GPU_VENDORS, "acme": acme}
    for module in (hardware, scoring):
        monkeypatch.setattr(module, "GPU_VENDORS", table)
    runtime = {"fits": {"gpu_vendors": ["acme"]}}
    on_soc = hardware.Hardware(soc="acme a1", kfd=True)
    assert scoring.score(runtime, on_soc) == (scoring.SCORE_INTEL, "Acme SoC")
    assert scoring.best_possible(on_soc) == scoring.SCORE_INTEL
    no_driver = hardware.Hardware(soc="acme a1")
    assert scoring.score(runtime, no_driver) == (scoring.SCORE_CPU, "CPU")
    nvidia = hardware.Hardware(gpus=(hardware.Gpu("nvidia", 0x10DE, 0, "x"),), nvidia_driver=True)
    assert scoring.score({"fits": {"gpu_vendors": ["nvidia"]}}, nvidia) == (
        scoring.SCORE_VENDOR,
        "NVIDIA GPU",
    )
    assert scoring.best_possible(nvidia) == scoring.SCORE_VENDOR
