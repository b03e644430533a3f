"""A plugin EP's names read by registering it with the core it pairs with (probe/names.py's
read_plugin_names): the probe's `plugin NAME ok EP…` line, the core's own providers set aside,
and the recipe's ep_name held to what the factories named."""

from __future__ import annotations

from pathlib import Path

import pytest

from ortbundle._core.errors import ConfigError
from ortbundle._core.memo import Memo
from ortbundle.stage.kinds import check_plugin_name
from ortbundle.stage.probe import ProbeResult
from ortbundle.stage.probe import names as probe_names
from ortbundle.stage.probe.names import RAN_NATIVELY, READ_STATICALLY, read_plugin_names

CPU = "CPUExecutionProvider"


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


def test_a_factory_that_takes_the_registration_name_leaves_the_static_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """onnxruntime-ggml 0.2.0: registered as "probe", its device's EP is "probe"; the name an
    application appends is the one it registers it under, which the probe cannot hold ep_name
    to."""
    echo = ProbeResult(0, providers=(CPU,), plugins={"probe": (True, f"{CPU} probe")})
    read = _read(tmp_path, monkeypatch, echo)
    assert (read.names, read.how) == (("ggml",), READ_STATICALLY)
    assert "name the EP after the name it is registered under" in read.why
