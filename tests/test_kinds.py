"""What the libraries say a component is: their exports, provider names and a core's provider
table, read from synthetic ELF and PE files (stage/binaries/), and the build holding a recipe's
kind, entry, providers and EP name against them (stage/kinds.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ortbundle._core.errors import ConfigError
from ortbundle._core.memo import Memo
from ortbundle._core.progress import Reporter
from ortbundle.cli.build import run_build
from ortbundle.pipeline.build import build
from ortbundle.stage.binaries import inspect
from ortbundle.stage.binaries.info import role
from ortbundle.stage.binaries.info_cache import inspect_known
from ortbundle.stage.binaries.providers import available_providers, in_place_pointers
from tests.helpers.elf import make_elf
from tests.helpers.pe import make_pe
from tests.helpers.project import CORE_EXPORTS, CPU, PLUGIN_EXPORTS, FakeProject
from tests.helpers.toml_edit import edit_toml, set_key

# a core's table as ONNX Runtime lays it out: every provider it knows, the CPU one last
TABLE = [
    ("TensorrtExecutionProvider", False),
    ("CUDAExecutionProvider", False),
    ("OpenVINOExecutionProvider", False),
    ("DmlExecutionProvider", True),
    ("WebGpuExecutionProvider", False),
    ("CPUExecutionProvider", True),
]


def _read(tmp_path: Path, name: str, data: bytes) -> Any:
    path = tmp_path / name
    path.write_bytes(data)
    return inspect(path)


# --- the facts --------------------------------------------------------------------------------


def test_an_elf_core_s_exports_provider_names_and_table_read_back(tmp_path: Path) -> None:
    """The table's pointers are RELA relocations with empty slots, as lld leaves them; a name
    inside a longer text is no provider name; a C++ export is not listed."""
    info = _read(
        tmp_path,
        "libonnxruntime.so.1",
        make_elf(
            soname="libonnxruntime.so.1",
            exports=("OrtGetApiBase", "OrtSessionOptionsAppendExecutionProvider_CPU", "_ZN2ns1fEv"),
            rodata=("not registered: WebNNExecutionProvider", "QNNExecutionProvider"),
            provider_table=TABLE,
        ),
    )
    assert info.exports == ("OrtGetApiBase", "OrtSessionOptionsAppendExecutionProvider_CPU")
    assert role(info) == "core"
    assert "WebNNExecutionProvider" not in info.ep_names
    assert set(info.ep_names) == {"QNNExecutionProvider", *(name for name, _ in TABLE)}
    assert info.available_providers == ("DmlExecutionProvider", "CPUExecutionProvider")


def test_a_pe_core_s_table_read_back_as_msvc_lays_it_out(tmp_path: Path) -> None:
    """A DirectML build: its core names every provider, and its table offers DML and CPU."""
    info = _read(
        tmp_path,
        "onnxruntime.dll",
        make_pe(exports=("OrtGetApiBase", "?f@@YAXXZ"), provider_table=TABLE),
    )
    assert (info.exports, role(info)) == (("OrtGetApiBase",), "core")
    assert info.available_providers == ("DmlExecutionProvider", "CPUExecutionProvider")
    assert "CUDAExecutionProvider" in info.ep_names  # named, not offered


@pytest.mark.parametrize(
    ("exports", "expected"),
    [
        (PLUGIN_EXPORTS, "plugin-ep"),
        (("GetProvider",), "provider"),
        (("CreateEpFactories",), ""),  # RegisterExecutionProviderLibrary needs both
        ((), ""),
    ],
)
def test_what_a_library_is_comes_from_its_exports(
    tmp_path: Path, exports: tuple[str, ...], expected: str
) -> None:
    assert role(_read(tmp_path, "a.so", make_elf(exports=exports))) == expected
    assert role(_read(tmp_path, "a.dll", make_pe(exports=exports))) == expected


def test_the_table_reader_takes_only_a_table_of_flags_ending_with_the_cpu_provider() -> None:
    """Older releases keep `{const char*, bool}` (two words); a run of pointers that is no
    table (too short, flags that are not 0 or 1, no CPU provider at its end) gives nothing."""
    names = {0x100 + 32 * i: name for i, (name, _) in enumerate(TABLE)}
    table = bytearray()  # at 0x1000, 16 bytes an entry
    for address, (_, on) in zip(names, TABLE, strict=True):
        table += address.to_bytes(8, "little") + int(on).to_bytes(8, "little")
    cpu = [a for a, name in names.items() if name == "CPUExecutionProvider"]
    slots = in_place_pointers(bytes(table), 0x1000, cpu, 8)
    assert list(slots) == [0x1000 + 16 * (len(TABLE) - 1)]

    def word(address: int) -> int | None:
        at = address - 0x1000
        return int.from_bytes(table[at : at + 8], "little") if 0 <= at < len(table) else None

    found = available_providers(names, slots, word, word, 8)
    assert found == ("DmlExecutionProvider", "CPUExecutionProvider")
    assert available_providers(names, [], word, word, 8) == ()  # no pointer to the CPU name
    short = {
        a: n for a, n in names.items() if n in ("DmlExecutionProvider", "CPUExecutionProvider")
    }
    assert available_providers(short, slots, word, word, 8) == ()  # two entries: no table
    table[8:16] = (2).to_bytes(8, "little")  # a "flag" of 2: not a table of flags
    assert available_providers(names, slots, word, word, 8) == ()


def test_a_memo_entry_from_before_the_facts_is_read_again(tmp_path: Path) -> None:
    """An entry without the exports and provider facts is not taken as a library exporting
    and naming nothing: the file is read again."""
    path = tmp_path / "onnxruntime.dll"
    path.write_bytes(make_pe(exports=CORE_EXPORTS, provider_table=TABLE))
    memo = Memo.for_build(tmp_path / "cache", release=False)
    first = inspect_known(path, "0" * 64, name=path.name, memo=memo)
    (entry,) = (tmp_path / "cache").rglob("*.json")
    old = json.loads(entry.read_text())
    for key in ("exports", "ep_names", "available_providers"):
        del old[key]
    entry.write_text(json.dumps(old))
    again = inspect_known(path, "0" * 64, name=path.name, memo=memo)
    assert again == first and again.exports == ("OrtGetApiBase",)


# --- the build --------------------------------------------------------------------------------


def _plugin_as_windows_runtime(fake: FakeProject) -> FakeProject:
    """What the scaffold once wrote for NVIDIA's TensorRT-RTX plugin EP: a "runtime" whose
    entry is the plugin library."""
    plugin = "onnxruntime_providers_nv_tensorrt_rtx.dll"
    fake.windows[f"onnxruntime/capi/{plugin}"] = make_pe(
        imports=("KERNEL32.dll", "tensorrt_rtx_1_7.dll"),
        exports=PLUGIN_EXPORTS,
        rodata=("NvTensorRTRTXExecutionProvider", *CPU),
    )
    fake.windows["onnxruntime/capi/tensorrt_rtx_1_7.dll"] = make_pe(imports=("KERNEL32.dll",))
    fake.windows_roots = [plugin]
    fake.write()
    set_key(fake.root / "recipes/fake.toml", "targets.windows-x86_64.entry", plugin)
    return fake


def test_a_runtime_whose_entry_is_a_plugin_is_refused(
    fake: FakeProject, reporter: Reporter
) -> None:
    _plugin_as_windows_runtime(fake)
    with pytest.raises(ConfigError) as refused:
        build(fake.project, fake.options(), reporter)
    error = refused.value
    assert (error.component, error.target) == ("fake", "windows-x86_64")
    assert error.file is not None and error.file.endswith("recipes/fake.toml")
    assert error.message == (
        "runtime fake: its entry onnxruntime_providers_nv_tensorrt_rtx.dll is not an ONNX "
        "Runtime core (it exports OrtGetApiBase); it is a plugin EP library (it exports "
        "CreateEpFactories and ReleaseEpFactory)"
    )
    assert error.fix is not None and 'kind = "plugin-ep"' in error.fix
    assert "[plugin.fake] pairs_with" in error.fix
    assert not (fake.root / "dist").exists()


def test_an_entry_that_is_no_core_names_the_core_to_take(
    fake: FakeProject, reporter: Reporter
) -> None:
    fake.write()
    set_key(fake.root / "recipes/fake.toml", "targets.windows-x86_64.entry", "dep.dll")
    with pytest.raises(ConfigError) as refused:
        build(fake.project, fake.options(), reporter)
    assert "its entry dep.dll is not an ONNX Runtime core" in refused.value.message
    assert "it exports none of OrtGetApiBase" in refused.value.message
    assert refused.value.fix == (
        'set entry = "onnxruntime.dll" in [targets.windows-x86_64] (it exports OrtGetApiBase)'
    )


def test_a_misspelled_provider_is_refused_with_the_nearest_one_even_when_restored(
    fake: FakeProject, reporter: Reporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The providers are checked against the facts kept with the pruned runtime: a build that
    restores it checks them without reading a library."""
    fake.write()
    build(fake.project, fake.options(), reporter)
    set_key(fake.root / "recipes/fake.toml", "component.providers", ["CPUExecutionProvidr"])

    def no_reading(*args: object, **kwargs: object) -> None:
        raise AssertionError("a restored runtime's libraries were read again")

    monkeypatch.setattr("ortbundle.stage.staging.inspect", no_reading)
    with pytest.raises(ConfigError) as refused:
        build(fake.project, fake.options(), reporter)
    error = refused.value
    assert error.message == (
        "runtime fake: [component] providers names CPUExecutionProvidr (did you mean CPUExecutionProvider?), "
        "which none of its libraries carries"
    )
    assert error.component == "fake" and error.target in ("linux-x86_64", "windows-x86_64")
    assert error.file is not None and error.file.endswith("recipes/fake.toml")
    assert error.fix == (
        "list in [component] providers only what its libraries carry "
        "(they offer CPUExecutionProvider)"
    )


def test_a_provider_the_core_offers_and_the_recipe_omits_is_a_warning_once(
    fake: FakeProject, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both targets' cores offer WebGPU and not CUDA: the recipe that leaves WebGPU out and
    names CUDA builds, with one warning for each across the targets."""
    table = [
        ("CUDAExecutionProvider", False),
        ("WebGpuExecutionProvider", True),
        ("XnnpackExecutionProvider", False),
        ("CPUExecutionProvider", True),
    ]
    core = "onnxruntime/capi/libonnxruntime.so.1.0.0"
    fake.linux[core] = make_elf(
        soname="libonnxruntime.so.1",
        needed=("libdep.so.2", "libc.so.6"),
        exports=CORE_EXPORTS,
        provider_table=table,
    )
    fake.windows["onnxruntime/capi/onnxruntime.dll"] = make_pe(
        imports=("KERNEL32.dll", "dep.dll"), exports=CORE_EXPORTS, provider_table=table
    )
    fake.write()

    def providers(document: Any) -> None:
        document["component"]["providers"] = ["CUDAExecutionProvider", "CPUExecutionProvider"]

    edit_toml(fake.root / "recipes/fake.toml", providers)
    run_build(fake.options(), root=fake.root)
    out = capsys.readouterr().out
    recipe = fake.root / "recipes/fake.toml"
    left_out = (
        "WARNING: fake on linux-x86_64, windows-x86_64: its libraries offer "
        f"WebGpuExecutionProvider, which [component] providers in {recipe} leaves out"
    )
    unavailable = (
        "WARNING: fake on linux-x86_64, windows-x86_64: [component] providers in "
        f"{recipe} names CUDAExecutionProvider, which its core's provider table marks unavailable"
    )
    assert out.count(left_out) == 1 and out.count(unavailable) == 1
    assert out.count("WARNING: fake") == 2
