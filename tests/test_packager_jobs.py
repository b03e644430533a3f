"""The package phase's schedule: every (channel, target) package is a job of its own, the
longest first, on every worker; each output says how long its packager took per target."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from ortbundle.channels import ChannelOutput, PackageInput
from ortbundle.channels import step as channel_step
from ortbundle.channels.packagers import compression, development_compression, packager_cost
from ortbundle.channels.step import generate_all, packager_jobs
from tests.helpers.packages import make_package_input

TARGETS = ("linux-x86_64", "linux-aarch64", "windows-x86_64", "windows-arm64")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, PackageInput]:
    root = tmp_path_factory.mktemp("stages")
    found = {t: make_package_input(root, t) for t in TARGETS}
    found.update({t: make_package_input(root, t) for t in ("android-arm64-v8a", "android-x86_64")})
    return found


def test_longest_first_one_job_per_target_but_one_for_a_shared_package(
    inputs: dict[str, PackageInput],
) -> None:
    release = {t: replace(p, release=True) for t, p in inputs.items()}
    jobs = packager_jobs(["deb", "apk", "nsis", "arch"], release)
    pairs = [(j.channel, j.targets) for j in jobs]
    # a release's solid LZMA costs the most per byte: it starts first, whatever the order
    assert pairs[0] == ("nsis", ("windows-x86_64",))
    assert ("nsis", ("windows-arm64",)) in pairs
    assert ("deb", ("linux-x86_64",)) in pairs and ("deb", ("linux-aarch64",)) in pairs
    # the Android module is one package of both ABIs, written into one directory in order
    assert ("apk", ("android-arm64-v8a", "android-x86_64")) in pairs
    assert len(pairs) == 7
    costs = [j.cost for j in jobs]
    assert costs == sorted(costs, reverse=True)
    size = sum(f.size for f in inputs["windows-x86_64"].files)
    assert jobs[0].cost == size * packager_cost("nsis", True)
    # a development build's installer compresses faster: its estimate says so
    assert packager_cost("nsis", False) < packager_cost("nsis", True)


class _Slow:
    """A channel that takes a while and notes how many of its kind run at once."""

    name = "slow"
    running = 0
    most = 0
    lock = threading.Lock()

    def generate(self, package: PackageInput, out: Path) -> ChannelOutput:
        with _Slow.lock:
            _Slow.running += 1
            _Slow.most = max(_Slow.most, _Slow.running)
        time.sleep(0.3)
        with _Slow.lock:
            _Slow.running -= 1
        out.mkdir(parents=True, exist_ok=True)
        (out / "pkg").write_text(package.target)
        return ChannelOutput("slow", out, (out / "pkg",), (), {"pkg": package.target})


def test_a_channels_targets_run_side_by_side_and_each_is_timed(
    inputs: dict[str, PackageInput], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(channel_step, "CHANNELS", {**channel_step.CHANNELS, "deb": _Slow})
    _Slow.most = 0
    (output,) = generate_all(["deb"], inputs, tmp_path / "packaging", 2)
    assert _Slow.most == 2  # linux-x86_64's and linux-aarch64's packages at once
    assert [t.target for t in output.times] == ["linux-x86_64", "linux-aarch64"]
    assert all(0.3 <= t.seconds < 5 for t in output.times)
    assert output.digests == {"pkg": "linux-x86_64", "linux-aarch64/pkg": "linux-aarch64"}


def test_a_development_build_says_how_it_compresses_faster() -> None:
    assert compression("nsis", True)["compressor"] == "/SOLID lzma"  # a release: the smallest
    assert compression("nsis", False) != compression("nsis", True)
    said = development_compression("nsis")
    assert said is not None and said.endswith("a release: /SOLID lzma")
    assert development_compression("deb") is None  # alike in both kinds: nothing to say
