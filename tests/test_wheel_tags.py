"""The one wheel-tag reader (config/wheel_tags.py), over real file names of the onnxruntime
family, and the cases where pin and the scaffold used to read the same tags differently."""

from __future__ import annotations

import pytest
from packaging.utils import parse_wheel_filename
from packaging.version import Version

from ortbundle.config.sources import PypiCoordinates, Source
from ortbundle.config.targets import all_targets
from ortbundle.config.wheel_tags import interpreter_order, platform, read_tags, wheel_targets
from ortbundle.tools.pin.lookups import Listed
from ortbundle.tools.pin.wheels import match_file, tags_note
from ortbundle.tools.scaffold.resolve import wheels_for_targets

# file name → (targets, lowest platform level, interpreter word). First the files the recipes
# pin (recipes/*.toml); then names of the shapes upstream uses that no recipe pins.
Case = tuple[str, tuple[str, ...], tuple[int, int], str]
PINNED: list[Case] = [
    (
        "onnxruntime_webgpu-1.27.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
        ("linux-x86_64",),
        (2, 27),
        "cp311",
    ),
    (
        "onnxruntime_openvino-1.24.1-cp311-cp311-manylinux_2_28_x86_64.whl",
        ("linux-x86_64",),
        (2, 28),
        "cp311",
    ),
    (
        "onnxruntime_migraphx-1.27.0-cp311-cp311-manylinux_2_34_x86_64.whl",
        ("linux-x86_64",),
        (2, 34),
        "cp311",
    ),
    (
        "onnxruntime-1.32.0-cp311-cp311-manylinux_2_28_aarch64.whl",
        ("linux-aarch64",),
        (2, 28),
        "cp311",
    ),
    (
        "onnxruntime_ep_webgpu-0.4.0-py3-none-manylinux_2_28_aarch64.whl",
        ("linux-aarch64",),
        (2, 28),
        "py3",
    ),
    ("onnxruntime_gpu-1.27.0-cp311-cp311-win_amd64.whl", ("windows-x86_64",), (0, 0), "cp311"),
    ("openvino-2025.4.1-20426-cp311-cp311-win_amd64.whl", ("windows-x86_64",), (0, 0), "cp311"),
    ("onnxruntime-1.32.0-cp311-cp311-win_arm64.whl", ("windows-arm64",), (0, 0), "cp311"),
    ("onnxruntime_ep_webgpu-0.4.0-py3-none-win_arm64.whl", ("windows-arm64",), (0, 0), "py3"),
    ("onnxruntime-1.32.0-cp314-cp314-macosx_14_0_arm64.whl", ("macos-arm64",), (14, 0), "cp314"),
    ("onnxruntime_ep_mlx-0.31.0-py3-none-macosx_14_0_arm64.whl", ("macos-arm64",), (14, 0), "py3"),
    (
        "onnxruntime_ep_webgpu-0.4.0-py3-none-macosx_14_0_universal2.whl",
        ("macos-arm64",),
        (14, 0),
        "py3",
    ),
]
SHAPES: list[Case] = [
    (
        "onnxruntime-1.16.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        ("linux-x86_64",),
        (2, 17),
        "cp311",
    ),
    (
        "onnxruntime-1.16.0-cp311-cp311-manylinux_2_17_aarch64.manylinux2014_aarch64.whl",
        ("linux-aarch64",),
        (2, 17),
        "cp311",
    ),
    ("onnxruntime-1.24.1-cp312-cp312-macosx_13_0_arm64.whl", ("macos-arm64",), (13, 0), "cp312"),
    (
        "onnxruntime-1.20.1-cp312-cp312-macosx_13_0_universal2.whl",
        ("macos-arm64",),
        (13, 0),
        "cp312",
    ),
    ("x-1.0-cp310-abi3-manylinux_2_28_x86_64.whl", ("linux-x86_64",), (2, 28), "cp310"),
    ("x-1.0-cp310-abi3-win_amd64.whl", ("windows-x86_64",), (0, 0), "cp310"),
    ("x-1.0-cp313-cp313-android_24_arm64_v8a.whl", ("android-arm64-v8a",), (24, 0), "cp313"),
    ("x-1.0-cp313-cp313-android_24_x86_64.whl", ("android-x86_64",), (24, 0), "cp313"),
    ("x-1.0-cp311-cp311-linux_x86_64.whl", ("linux-x86_64",), (0, 0), "cp311"),
    # for a target ortbundle does not build, or for none
    ("x-1.0-cp311-cp311-macosx_13_0_x86_64.whl", (), (13, 0), "cp311"),
    ("x-1.0-cp311-cp311-musllinux_1_2_x86_64.whl", (), (1, 2), "cp311"),
    ("x-1.0-cp311-cp311-win32.whl", (), (0, 0), "cp311"),
    ("x-1.0-py3-none-any.whl", (), (0, 0), "py3"),
]


def listed(filename: str, *, yanked: bool = False) -> Listed:
    _, version, build, tags = parse_wheel_filename(filename)
    return Listed(filename, f"files/{filename}", version, build, tags, "0" * 64, 1, yanked)


def pinned(filename: str) -> Source:
    _, version, _, _ = parse_wheel_filename(filename)
    return Source("ort", PypiCoordinates("x", str(version), filename), "0" * 64, 1)


@pytest.mark.parametrize(("filename", "targets", "level", "interpreter"), PINNED + SHAPES)
def test_a_real_wheel_reads_as_its_targets_level_and_interpreter(
    filename: str, targets: tuple[str, ...], level: tuple[int, int], interpreter: str
) -> None:
    read = read_tags(parse_wheel_filename(filename)[3])
    assert read.targets == targets
    assert read.level == level
    assert read.interpreter == interpreter
    for target in wheel_targets():
        assert read.serves(target) == (target in targets)


def test_legacy_manylinux_names_are_the_glibc_pep_600_says() -> None:
    assert platform("manylinux1_x86_64").level == (2, 5)
    assert platform("manylinux2010_x86_64").level == (2, 12)
    assert platform("manylinux2014_aarch64").level == (2, 17)
    assert platform("manylinux2014_aarch64").family == platform("manylinux_2_28_aarch64").family


def test_the_tag_to_target_rules_are_the_targets_data() -> None:
    """Every target the scaffold serves from wheels says so in data/targets.toml."""
    rules = wheel_targets()
    assert rules["linux-x86_64"] == {"manylinux x86_64", "linux_x86_64"}
    assert rules["macos-arm64"] == {"macosx arm64", "macosx universal2"}
    assert rules["windows-arm64"] == {"win_arm64"}
    assert set(rules) == set(all_targets())  # every target ortbundle builds


def test_abi_neutral_ranks_above_cpython_and_newer_cpython_above_older() -> None:
    assert interpreter_order("py3") > interpreter_order("cp314") > interpreter_order("cp39")
    assert interpreter_order("cp310") > interpreter_order("cp39")


# --- where pin and the scaffold disagreed before they read tags in one place ----------------


def test_a_legacy_manylinux_name_is_its_glibc_level_for_both_tools() -> None:
    """The scaffold read manylinux2014 as no level at all (0, 0), so it took a manylinux2014
    wheel (glibc 2.17) over a manylinux_2_12 one; pin read it as 2.17. Both now take 2_12."""
    older = "x-1.0-cp311-cp311-manylinux_2_12_x86_64.whl"
    legacy = "x-1.0-cp311-cp311-manylinux2014_x86_64.whl"
    chosen, _ = wheels_for_targets([listed(legacy), listed(older)], ["linux-x86_64"])
    assert chosen["linux-x86_64"].filename == older
    # pin, moving a 2_12 pin: 2014 (2.17) is the closest step up from 2.12, not 2_28
    files = [
        listed("x-2.0-cp311-cp311-manylinux2014_x86_64.whl"),
        listed("x-2.0-cp311-cp311-manylinux_2_28_x86_64.whl"),
    ]
    moved = match_file(pinned(older), files, Version("2.0"), yanked_ok=False)
    assert moved is not None and moved.filename == files[0].filename
    assert "needs glibc 2.17, was 2.12" in (tags_note(older, moved) or "")


def test_an_android_api_level_is_a_level_for_both_tools() -> None:
    """The scaffold served every android_<api>_arm64_v8a wheel to the same target, while pin
    read each API level as a platform of its own and so never moved a pin to a new level."""
    old = "x-1.0-cp313-cp313-android_21_arm64_v8a.whl"
    new = [
        listed("x-2.0-cp313-cp313-android_24_arm64_v8a.whl"),
        listed("x-2.0-cp313-cp313-android_27_arm64_v8a.whl"),
    ]
    moved = match_file(pinned(old), new, Version("2.0"), yanked_ok=False)
    assert moved is not None and moved.filename == new[0].filename
    assert tags_note(old, moved) == (
        "no file with the old tags (android_21_arm64_v8a); took the closest of the same "
        "platform family: android_24_arm64_v8a; needs Android API 24, was 21"
    )
    chosen, _ = wheels_for_targets(list(reversed(new)), ["android-arm64-v8a"])
    assert chosen["android-arm64-v8a"].filename == new[0].filename


def test_the_scaffold_weighs_only_the_tags_that_serve_the_target() -> None:
    """A wheel for two macOS machines: its x86_64 tag (10.9) said nothing of what the arm64
    target needs (12.0), yet the scaffold took it as the wheel's level."""
    both = "x-1.0-cp311-cp311-macosx_10_9_x86_64.macosx_12_0_arm64.whl"
    arm = "x-1.0-cp311-cp311-macosx_11_0_arm64.whl"
    chosen, _ = wheels_for_targets([listed(both), listed(arm)], ["macos-arm64"])
    assert chosen["macos-arm64"].filename == arm


def test_the_interpreter_most_targets_have_wins_and_the_others_are_noted() -> None:
    files = [
        listed("onnxruntime-1.24.1-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"),
        listed("onnxruntime-1.24.1-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"),
        listed("onnxruntime-1.24.1-cp311-cp311-win_amd64.whl"),
        listed("onnxruntime-1.24.1-cp312-cp312-win_amd64.whl"),
        listed("onnxruntime-1.24.1-cp312-cp312-macosx_13_0_arm64.whl"),
        listed("onnxruntime-1.24.1-cp311-cp311-musllinux_1_2_x86_64.whl"),
    ]
    chosen, note = wheels_for_targets(files, ["linux-x86_64", "windows-x86_64", "macos-arm64"])
    assert {t: f.filename.split("-")[2] for t, f in chosen.items()} == {
        "linux-x86_64": "cp312",
        "windows-x86_64": "cp312",
        "macos-arm64": "cp312",
    }
    assert note == "took the cp312 wheels; cp311 carry the same native libraries"
