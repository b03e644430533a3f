"""A plugin EP's names read by registering it with the core it pairs with (probe/names.py's
read_plugin_names): the probe's `plugin NAME ok EP…` line, the core's own providers set aside,
and the recipe's ep_name held to what the factories named."""

from __future__ import annotations

from pathlib import Path

import pytest

from ortbundle._core.errors import ConfigError
from ortbundle._core.memo import Memo
from ortbundle.config.recipes import load_recipe
from ortbundle.stage.closure import Closure
from ortbundle.stage.index_json import plugin_entry
from ortbundle.stage.kinds import check_plugin_name
from ortbundle.stage.probe import ProbeResult
from ortbundle.stage.probe import names as probe_names
from ortbundle.stage.probe.names import (
    RAN_NATIVELY,
    READ_STATICALLY,
    NamesRead,
    read_plugin_names,
)
from ortbundle.stage.staging import StagedRuntime

CPU = "CPUExecutionProvider"
ROOT = Path(__file__).resolve().parents[1]


def _read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, said: ProbeResult | None
) -> probe_names.NamesRead:
    calls: list[Path | None] = []

    def execute(
        core: Path, target: str, how: str, plugin: Path | None = None
    ) -> tuple[ProbeResult | None, str]:
        calls.append(plugin)
        return said, "it could not run"

    monkeypatch.setattr(probe_names, "_execute", execute)
    read = read_plugin_names(
        tmp_path / "libggml.so",
        "a" * 64,
        tmp_path / "libonnxruntime.so.1",
        "b" * 64,
        "linux-x86_64",
        ("ggml",),
        Memo(tmp_path / "memo"),
        runner=lambda target, mode: (RAN_NATIVELY, ""),
    )
    assert calls == [tmp_path / "libggml.so"]  # registered with the core, once
    return read


def test_the_names_the_factories_give_beside_the_core_s_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said = ProbeResult(0, providers=(CPU,), plugins={"probe": (True, f"{CPU} ggml ggml")})
    read = _read(tmp_path, monkeypatch, said)
    assert (read.names, read.how, read.ran) == (("ggml",), RAN_NATIVELY, True)


def test_no_device_here_or_no_registration_leaves_the_static_reading_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_device = ProbeResult(0, providers=(CPU,), plugins={"probe": (True, CPU)})
    read = _read(tmp_path, monkeypatch, no_device)
    assert (read.names, read.how) == (("ggml",), READ_STATICALLY)
    assert "no device of its own" in read.why
    refused = ProbeResult(0, providers=(CPU,), plugins={"probe": (False, "API 21")})
    read = _read(tmp_path / "2", monkeypatch, refused)
    assert read.how == READ_STATICALLY and "did not register it" in read.why
    assert "API 21" in read.why


class _Recipe:
    name = "ep-ggml"
    ep_name = "GGML"
    path = Path("recipes/ep-ggml.toml")


def test_an_ep_name_the_factories_did_not_give_is_refused_with_theirs() -> None:
    read = probe_names.NamesRead("linux-x86_64", ("ggml",), RAN_NATIVELY)
    with pytest.raises(ConfigError) as refused:
        check_plugin_name(_Recipe(), read, "stock")  # type: ignore[arg-type]
    text = str(refused.value)
    assert "ep_name GGML (did you mean ggml?)" in text and "stock core" in text
    assert 'set ep_name = "ggml"' in text and "recipes/ep-ggml.toml" in text
    static = probe_names.NamesRead("linux-x86_64", ("other",), READ_STATICALLY, "no gcc")
    check_plugin_name(_Recipe(), static, "stock")  # type: ignore[arg-type]  # unjudged


def test_a_factory_that_takes_the_registration_name_is_registered_under_its_ep_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """onnxruntime-ggml 0.2.0: registered as "probe", its device's EP is "probe". The name is
    the one it is registered under, so the index registers it under its ep_name."""
    echo = ProbeResult(0, providers=(CPU,), plugins={"probe": (True, f"{CPU} probe")})
    read = _read(tmp_path, monkeypatch, echo)
    assert (read.names, read.how, read.registration_named) == (("ggml",), RAN_NATIVELY, True)
    # kept as it was read: what a warm build's memo gives back says the same
    assert probe_names._from(probe_names._to(read)) == read


@pytest.mark.parametrize("named", [True, False])
def test_the_index_registers_such_a_plugin_under_its_ep_name(named: bool) -> None:
    recipe = load_recipe(ROOT / "recipes/ep-webgpu.toml")
    closure = Closure((), (), (), (), "libonnxruntime_providers_webgpu.so", ())
    read = NamesRead("linux-x86_64", ("WebGpuExecutionProvider",), RAN_NATIVELY, "", named)
    staged = StagedRuntime("ep-webgpu", "linux-x86_64", "plugins/ep-webgpu", closure, (), 0, read)
    entry = plugin_entry(recipe, staged)
    assert entry["ep_name"] == "WebGpuExecutionProvider"
    # registered as "ep-webgpu", a factory that takes that name would give an EP of that name
    assert entry["registration_name"] == ("WebGpuExecutionProvider" if named else "ep-webgpu")
