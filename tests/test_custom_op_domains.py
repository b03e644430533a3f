"""A custom-operator library's domains, read by running it: the probe (`--custom-ops`) calls
its RegisterCustomOps against the real core with an OrtApi whose CreateCustomOpDomain and
CustomOpDomain_Add record what the library creates, then call the core's. The library is
tests/data/customops/twice.c, compiled here; the core is the default product's pinned
onnxruntime-openvino 1.24.1 for Linux x86-64 (the download cache's copy)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ortbundle._core.locations import default_cache_dir
from ortbundle._core.memo import Memo
from ortbundle._core.progress import plain_reporter
from ortbundle.config.sources import load_sources
from ortbundle.fetch.archives import ZipArchive
from ortbundle.fetch.artifacts import Fetcher
from ortbundle.fetch.cache import Cache
from ortbundle.stage.probe import parse_probe
from ortbundle.stage.probe.names import RAN_NATIVELY, READ_STATICALLY, read_custom_op_domains

ROOT = Path(__file__).resolve().parents[1]
CORE = "onnxruntime/capi/libonnxruntime.so.1.24.1"


def test_the_probe_s_customops_line_is_read() -> None:
    said = parse_probe(
        0,
        "api 24\ncustomops probe ok ai.x:Twice ai.x:Half b.y:Op\n"
        "customops other failed it exports no RegisterCustomOps\n",
    )
    assert said.custom_ops == {
        "probe": (True, "ai.x:Twice ai.x:Half b.y:Op"),
        "other": (False, "it exports no RegisterCustomOps"),
    }


def _core(tmp_path: Path) -> Path:
    wanted = load_sources(ROOT / "recipes/openvino.toml")["ort-linux"]
    artifact = Fetcher(Cache(default_cache_dir()), plain_reporter()).fetch(
        wanted, component="openvino"
    )
    core = tmp_path / "core" / "libonnxruntime.so.1"
    core.parent.mkdir()
    with ZipArchive(artifact.path, label=wanted.filename, component="openvino") as wheel:
        wheel.extract(CORE, core)
    return core


def _library(tmp_path: Path, *defines: str) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed (Debian/Ubuntu: apt-get install gcc)")
    out = tmp_path / "libtwice.so"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O2", *defines, "-o", str(out),
         str(ROOT / "tests/data/customops/twice.c")],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return out


def _read(tmp_path: Path, library: Path) -> tuple[tuple[str, ...], str, str]:
    core = _core(tmp_path)
    read = read_custom_op_domains(
        library, "a" * 64, core, "b" * 64, "linux-x86_64", Memo(tmp_path / "memo")
    )
    return read.names, read.how, read.why


@pytest.mark.real
def test_the_domains_a_library_registers_are_read_by_running_it(tmp_path: Path) -> None:
    assert _read(tmp_path, _library(tmp_path)) == (("ai.ortbundle.test",), RAN_NATIVELY, "")


@pytest.mark.real
def test_another_domain_is_read_as_itself(tmp_path: Path) -> None:
    library = _library(tmp_path, '-DTEST_DOMAIN="com.example.vision"')
    assert _read(tmp_path, library)[0] == ("com.example.vision",)


@pytest.mark.real
def test_a_library_that_registers_nothing_leaves_no_domain_and_says_why(tmp_path: Path) -> None:
    plain = tmp_path / "libplain.so"
    (tmp_path / "plain.c").write_text("int nothing_here(void) { return 0; }\n")
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed (Debian/Ubuntu: apt-get install gcc)")
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(plain), str(tmp_path / "plain.c")],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    names, how, why = _read(tmp_path, plain)
    assert (names, how) == ((), READ_STATICALLY)
    assert why == f"it did not register ({RAN_NATIVELY}): it exports no RegisterCustomOps"
