"""The real tier of embedded code: onnxruntime-genai 0.18.0's Linux library links libpng and
libjpeg statically, and is Microsoft's under MIT all the same (issue 42)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ortbundle._core.locations import default_cache_dir
from ortbundle._core.progress import plain_reporter
from ortbundle.config.sources import load_sources
from ortbundle.fetch.archives import ZipArchive
from ortbundle.fetch.artifacts import Fetcher
from ortbundle.fetch.cache import Cache
from ortbundle.licensing.attribution import copyright_lines
from ortbundle.stage.versions import read_file_facts

pytestmark = pytest.mark.real

GENAI = """\
[sources.linux]
pypi = { project = "onnxruntime-genai", version = "0.18.0", filename = "onnxruntime_genai-0.18.0-cp312-cp312-manylinux_2_28_x86_64.whl" }
sha256 = "6df22d9d74a86409cf06f6af0045b999524941426dab6eba4f937ef2aed513a7"
"""


def test_genai_carries_libpng_and_libjpeg_and_is_microsofts(tmp_path: Path) -> None:
    recipe = tmp_path / "genai.toml"
    recipe.write_text(textwrap.dedent(GENAI), "utf-8")
    wanted = load_sources(recipe)["linux"]
    fetcher = Fetcher(Cache(default_cache_dir()), plain_reporter())
    artifact = fetcher.fetch(wanted, component="onnxruntime-genai")
    with ZipArchive(artifact.path, label=wanted.filename, component="onnxruntime-genai") as wheel:
        wheel.extract("onnxruntime_genai/libonnxruntime-genai.so", tmp_path / "lib.so")
        wheel.extract("onnxruntime_genai/LICENSE", tmp_path / "LICENSE")
    evidence = read_file_facts(tmp_path / "lib.so", "libonnxruntime-genai.so").evidence
    found = {e.name: e for e in evidence.embedded}
    assert found["libpng"].version == "1.6.37" and found["libpng"].licence == "libpng-2.0"
    assert "Cosmin Truta" in found["libpng"].copyrights[0]
    assert found["libjpeg"].version == "9e" and found["libjpeg"].licence == "IJG"
    assert {"zlib", "curl", "sqlite", "nlohmann-json", "mbedtls"} <= set(found)
    # no third party's notice is the file's holder: the wheel's MIT licence, Microsoft's, is
    assert evidence.holders == () and evidence.own_copyrights == ()
    licence = (tmp_path / "LICENSE").read_bytes()
    assert licence.lstrip().startswith(b"MIT License")
    assert any("Microsoft Corporation" in line for line in copyright_lines(licence))
