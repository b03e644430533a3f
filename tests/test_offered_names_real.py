"""Real tier: the pinned onnxruntime-gpu 1.27.0 linux-x86_64 core (recipes/cuda.toml), run
natively by the probe, offers exactly the providers its recipe lists, in its order. The stock
onnxruntime 1.32.0 recipe pins no linux-x86_64 wheel, so the GPU build is the Linux x86_64 core
this project pins; its wheel comes from the download cache (skipped, naming it, when absent)."""

from __future__ import annotations

import platform
import tomllib
import zipfile
from pathlib import Path

import pytest

from ortbundle._core.locations import default_cache_dir
from ortbundle._core.memo import Memo
from ortbundle.stage.probe.names import RAN_NATIVELY, read_providers
from tests.helpers.real import ROOT

pytestmark = pytest.mark.real


def test_the_pinned_linux_core_run_natively_offers_exactly_its_recipe_s_providers(
    tmp_path: Path,
) -> None:
    if (platform.system(), platform.machine()) != ("Linux", "x86_64"):
        pytest.skip("runs a linux-x86_64 core natively")
    recipe = tomllib.loads((ROOT / "recipes/cuda.toml").read_text("utf-8"))
    source = recipe["sources"]["ort-linux"]
    sha = source["sha256"]
    wheel = default_cache_dir() / "sha256" / sha[:2] / sha
    if not wheel.is_file():
        pytest.skip(f"{source['pypi']['filename']} is not in the cache ({wheel}): build cuda.toml")
    with zipfile.ZipFile(wheel) as archive:
        name = next(
            n for n in archive.namelist() if Path(n).name.startswith("libonnxruntime.so.1.")
        )
        core = Path(archive.extract(name, tmp_path))
    read = read_providers(core, "real-" + sha, "linux-x86_64", (), Memo.off())
    assert read.how == RAN_NATIVELY, read.why
    assert list(read.names) == recipe["component"]["providers"]
