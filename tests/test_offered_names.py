"""The providers a core offers, read by running it (probe/names.py), and a recipe held to them:
per target, a name the core does not offer refused with the nearest one, a name it offers and
the recipe leaves out a warning, and the per-target list in runtimes.json."""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any

import pytest

from ortbundle._core.errors import ConfigError
from ortbundle._core.memo import Memo
from ortbundle._core.progress import Reporter
from ortbundle.pipeline.build import build
from ortbundle.stage.probe.names import (
    PROBE_ENV,
    RAN_NATIVELY,
    RAN_UNDER_WINE,
    READ_STATICALLY,
    NamesRead,
    how_to_run,
    probe_mode,
    read_providers,
)
from ortbundle.stage.probe.wine import missing_wine
from tests.helpers.fakeort import compile_core
from tests.helpers.project import FakeProject
from tests.helpers.toml_edit import edit_toml

_OFFERED = ("DmlExecutionProvider", "CPUExecutionProvider")
_native = pytest.mark.skipif(
    (platform.system(), platform.machine()) != ("Linux", "x86_64"),
    reason="runs a linux-x86_64 library natively",
)


@_native
def test_a_core_run_natively_says_what_it_offers_and_a_warm_read_runs_nothing(
    tmp_path: Path,
) -> None:
    core = compile_core(tmp_path / "core", "libonnxruntime.so.1", windows=False, providers=_OFFERED)
    memo = Memo(tmp_path / "outputs")
    read = read_providers(core, "ab" * 32, "linux-x86_64", ("CPUExecutionProvider",), memo)
    assert read == NamesRead("linux-x86_64", _OFFERED, RAN_NATIVELY)
    assert read.ran

    core.unlink()  # the memo answers: the library is not run (it no longer exists)
    again = read_providers(core, "ab" * 32, "linux-x86_64", (), memo)
    assert again == read
    # another SHA-256 is another library: run, it fails to load, and the bytes' reading stands
    other = read_providers(core, "cd" * 32, "linux-x86_64", ("CPUExecutionProvider",), memo)
    assert other.how == READ_STATICALLY
    assert other.names == ("CPUExecutionProvider",)
    assert "cannot load" in other.why


def test_where_it_cannot_run_the_bytes_stand_marked_read_statically(tmp_path: Path) -> None:
    """A Mach-O core is never run here: the table read from its bytes is the answer, and says
    so; a runner that cannot start Wine says what to install."""
    how, why = how_to_run("macos-arm64")
    assert how == READ_STATICALLY and "macos-arm64" in why
    static = ("CoreMLExecutionProvider", "CPUExecutionProvider")
    read = read_providers(
        tmp_path / "libonnxruntime.dylib", "ef" * 32, "macos-arm64", static, Memo.off()
    )
    assert read == NamesRead("macos-arm64", static, READ_STATICALLY, why)
    assert not read.ran


_CORE = "onnxruntime/capi/libonnxruntime.so.1.0.0"


def _stand_in(fake: FakeProject, tmp_path: Path) -> None:
    """The fake project's linux-x86_64 core: a compiled stand-in the probe can load, offering
    WebGPU and the CPU and naming CUDA, which it was "built without"."""
    core = compile_core(
        tmp_path / "stand-in",
        "libonnxruntime.so.1",
        windows=False,
        providers=("WebGpuExecutionProvider", "CPUExecutionProvider"),
        carries=("CUDAExecutionProvider",),
    )
    fake.linux[_CORE] = core.read_bytes()
    fake.write()


def _linux_providers(fake: FakeProject, providers: list[str]) -> None:
    def edit(document: Any) -> None:
        document["targets"]["linux-x86_64"]["providers"] = providers

    edit_toml(fake.root / "recipes/fake.toml", edit)


@_native
def test_a_provider_the_core_run_does_not_offer_is_refused_per_target(
    fake: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    """The Linux core names CUDA in its bytes but, run, does not offer it: the target's own
    list that names it is refused naming that table, the target and what the core said."""
    _stand_in(fake, tmp_path)
    _linux_providers(fake, ["CUDAExecutionProvider", "WebGpuExecutionProvidr"])
    with pytest.raises(ConfigError) as refused:
        build(fake.project, fake.options(), reporter)
    error = refused.value
    assert error.target == "linux-x86_64"
    assert error.file is not None and error.file.endswith("recipes/fake.toml")
    assert error.message == (
        "runtime fake: [targets.linux-x86_64] providers names WebGpuExecutionProvidr (did you "
        "mean WebGpuExecutionProvider?), which none of its libraries carries; "
        "[targets.linux-x86_64] providers names CUDAExecutionProvider, which its core does not "
        "offer on linux-x86_64 (its GetAvailableProviders, ran natively: "
        "WebGpuExecutionProvider, CPUExecutionProvider)"
    )
    assert error.fix is not None and error.fix.startswith("list in [targets.linux-x86_64]")


@_native
def test_a_target_s_own_list_is_indexed_and_what_it_leaves_out_warned(
    fake: FakeProject, reporter: Reporter, tmp_path: Path
) -> None:
    """[targets.linux-x86_64] providers overrides [component]'s on Linux only: runtimes.json
    lists it there, Windows keeps the component's; WebGPU, offered and left out, is a warning
    naming the target's table."""
    _stand_in(fake, tmp_path)
    _linux_providers(fake, ["CPUExecutionProvider"])
    result = build(fake.project, fake.options(), reporter)
    warning = (
        "WARNING: fake on linux-x86_64: its libraries offer WebGpuExecutionProvider, which "
        f"[targets.linux-x86_64] providers in {fake.root / 'recipes/fake.toml'} leaves out"
    )
    assert any(line.startswith(warning) for line in result.warnings), result.warnings

    _linux_providers(fake, ["WebGpuExecutionProvider", "CPUExecutionProvider"])
    result = build(fake.project, fake.options(), reporter)
    assert not [w for w in result.warnings if "WebGpuExecutionProvider" in w]
    indexed = _indexed(fake)
    assert ["WebGpuExecutionProvider", "CPUExecutionProvider"] in indexed  # Linux's own list
    assert ["CPUExecutionProvider"] in indexed  # Windows: [component]'s


def _indexed(fake: FakeProject) -> list[list[str]]:
    """Every runtime's providers in every runtimes.json the build staged."""
    lists = [
        runtime["providers"]
        for index in fake.root.rglob("runtimes.json")
        for runtime in json.loads(index.read_text("utf-8"))["runtimes"]
    ]
    assert lists, "no runtimes.json was staged"
    return lists


def test_the_probe_mode_says_which_cores_are_run() -> None:
    """native (the default) runs what this machine runs itself; all adds Wine and qemu; none
    runs nothing; anything else is refused naming the choices."""
    assert probe_mode({}) == "native" and probe_mode({PROBE_ENV: " all "}) == "all"
    with pytest.raises(ConfigError) as refused:
        probe_mode({PROBE_ENV: "wine"})
    assert refused.value.fix is not None and "native, all, none" in refused.value.fix
    how, why = how_to_run("windows-x86_64", "native")
    assert how == READ_STATICALLY and f"{PROBE_ENV}=all" in why
    assert how_to_run("linux-x86_64", "none") == (
        READ_STATICALLY,
        f"{PROBE_ENV}=none: no core is run",
    )
    expected = RAN_UNDER_WINE if not missing_wine() else READ_STATICALLY
    assert how_to_run("windows-x86_64", "all")[0] == expected
