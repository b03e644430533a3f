"""The pipeline on synthetic wheels served from a local index: what is staged, and what stops."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ortbundle._core.errors import ClosureError, ConfigError, IntegrityError, OfflineError
from ortbundle._core.progress import Reporter
from ortbundle.fetch.cache import Cache
from ortbundle.pipeline.build import build, fetch
from tests.helpers.elf import make_elf
from tests.helpers.pe import make_pe
from tests.helpers.project import FakeProject


def tree(root: Path) -> dict[str, str]:
    """Every path under root: 'file', or '-> target' for symlinks."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = f"-> {os.readlink(path)}"
        elif path.is_file():
            out[rel] = "file"
    return out


def test_stages_the_closure_and_nothing_else(written: FakeProject, reporter: Reporter) -> None:
    result = build(written.project, written.options(), reporter)
    stage = written.root / "dist" / "fakeproduct" / "1.2.3"
    assert tree(stage / "linux-x86_64") == {
        "NOTICE": "file",
        "licenses/fake/LICENSE": "file",
        "licenses/ortbundle/LICENSE": "file",
        "runtime_loader.py": "file",
        "runtimes.json": "file",
        "runtimes/fake/libdep.so.2": "file",
        "runtimes/fake/libonnxruntime.so.1": "-> libonnxruntime.so.1.0.0",
        "runtimes/fake/libonnxruntime.so.1.0.0": "file",
        "runtimes/fake/libonnxruntime_shared.so": "file",
        "runtimes/fake/libprovider.so": "file",
    }
    assert tree(stage / "windows-x86_64") == {
        "NOTICE": "file",
        "licenses/fake/LICENSE": "file",
        "licenses/ortbundle/LICENSE": "file",
        "runtime_loader.py": "file",
        "runtimes.json": "file",
        "runtimes/fake/Delayed.dll": "file",  # delay import, resolved case-insensitively
        "runtimes/fake/dep.dll": "file",
        "runtimes/fake/onnxruntime.dll": "file",
    }
    linux = next(t for t in result.targets if t.target == "linux-x86_64").runtimes[0]
    reasons = {d.member.rsplit("/", 1)[-1]: d.reason for d in linux.closure.dropped}
    assert reasons == {
        "libdep.so": "alias of libdep.so.2 (same bytes)",
        "libunused.so": "not needed by any root",
        "onnxruntime_pybind11_state.so": "Python binding",
    }
    externals = {e.name: e.group for e in linux.closure.externals}
    assert externals == {"libc.so.6": "glibc", "libm.so.6": "glibc", "libstdc++.so.6": "gcc-libs"}
    windows = next(t for t in result.targets if t.target == "windows-x86_64").runtimes[0]
    assert {e.name: e.kind for e in windows.closure.externals} == {
        "KERNEL32.dll": "system",  # and kernel32.dll: one library on Windows
        "MSVCP140.dll": "redist",
        "api-ms-win-crt-heap-l1-1-0.dll": "system",
    }
    # the staged bytes are the archive's bytes
    staged = (stage / "linux-x86_64/runtimes/fake/libdep.so.2").read_bytes()
    assert staged == written.linux["onnxruntime/capi/libdep.so.2"]
    assert not list(stage.parent.glob(".*")), "no scratch directory left behind"


def test_second_build_is_served_from_the_cache(written: FakeProject, reporter: Reporter) -> None:
    first = build(written.project, written.options(), reporter)
    assert all(a.downloaded for a in first.artifacts.values())
    before = len(written.server.requests)
    second = build(written.project, written.options(), reporter)
    assert not any(a.downloaded for a in second.artifacts.values())
    assert len(written.server.requests) == before, "a cached build must not touch the network"


def test_offline_with_and_without_the_artifact(written: FakeProject, reporter: Reporter) -> None:
    with pytest.raises(OfflineError) as missing:
        build(written.project, written.options(offline=True), reporter)
    assert "onnxruntime_fake-1.0.0" in str(missing.value)
    assert "invoke fetch" in str(missing.value)
    assert written.server.requests == []
    fetch(written.project, written.options(), reporter)
    requests_before = len(written.server.requests)
    build(written.project, written.options(offline=True), reporter)
    assert len(written.server.requests) == requests_before


def test_hash_mismatch_caches_and_stages_nothing(fake: FakeProject, reporter: Reporter) -> None:
    fake.pins["linux-x86_64"] = "0" * 64
    fake.write()
    fake.server.faults.publish_digest = False  # so the download itself must catch it
    with pytest.raises(IntegrityError) as err:
        build(fake.project, fake.options(targets=("linux-x86_64",)), reporter)
    assert "does not match the pin" in str(err.value)
    assert err.value.component == "fake"
    cache = Cache(fake.root / "cache")
    assert cache.get("0" * 64) is None
    assert not cache.partial_path("0" * 64).exists()
    assert not (fake.root / "dist").exists()


def test_index_digest_disagreeing_with_pin_stops(written: FakeProject, reporter: Reporter) -> None:
    written.server.faults.publish_sha256 = "f" * 64
    with pytest.raises(IntegrityError) as err:
        build(written.project, written.options(), reporter)
    assert "the index publishes sha256 ffff" in str(err.value)
    assert written.server.file_requests(written.wheels["linux-x86_64"].name) == 0


def test_html_index_without_json(written: FakeProject, reporter: Reporter) -> None:
    written.server.faults.html_only = True
    result = build(written.project, written.options(), reporter)
    assert len(result.targets) == 2


def test_unresolved_dependency_names_both_files(fake: FakeProject, reporter: Reporter) -> None:
    fake.linux["onnxruntime/capi/libprovider.so"] = make_elf(needed=("libmissing.so.3",))
    fake.write()
    with pytest.raises(ClosureError) as err:
        build(fake.project, fake.options(), reporter)
    message = str(err.value)
    assert "libprovider.so needs libmissing.so.3" in message
    assert "target linux-x86_64" in message and "component fake" in message
    assert not (fake.root / "dist").exists()


def test_wrong_machine_type_stops(fake: FakeProject, reporter: Reporter) -> None:
    fake.linux["onnxruntime/capi/libdep.so.2"] = make_elf(
        soname="libdep.so.2", machine="EM_AARCH64"
    )
    fake.linux["onnxruntime/capi/libdep.so"] = fake.linux["onnxruntime/capi/libdep.so.2"]
    fake.write()
    with pytest.raises(ClosureError) as err:
        build(fake.project, fake.options(), reporter)
    assert "EM_AARCH64, not the target's ELF EM_X86_64" in str(err.value)
    assert "onnxruntime/capi/libdep.so.2" in str(err.value)


def test_pe_machine_checked_too(fake: FakeProject, reporter: Reporter) -> None:
    fake.windows["onnxruntime/capi/dep.dll"] = make_pe(machine="ARM64")
    fake.write()
    with pytest.raises(ClosureError, match="ARM64, not the target's PE AMD64"):
        build(fake.project, fake.options(targets=("windows-x86_64",)), reporter)


def test_needing_a_dropped_library_stops(fake: FakeProject, reporter: Reporter) -> None:
    fake.linux["onnxruntime/capi/libprovider.so"] = make_elf(
        needed=("onnxruntime_pybind11_state.so",)
    )
    fake.write()
    with pytest.raises(ClosureError, match="which the recipe drops \\(Python binding\\)"):
        build(fake.project, fake.options(), reporter)


def test_root_matching_nothing_is_a_recipe_error(fake: FakeProject, reporter: Reporter) -> None:
    fake.linux_roots.append("libnothing.so")
    fake.write()
    with pytest.raises(ConfigError, match="`roots`: 'libnothing.so' matches no library"):
        build(fake.project, fake.options(), reporter)


def test_soname_found_under_another_member_name(fake: FakeProject, reporter: Reporter) -> None:
    # libdep.so.2 is only present as libdep-real.so; it is found by reading its SONAME
    dep = fake.linux.pop("onnxruntime/capi/libdep.so.2")
    del fake.linux["onnxruntime/capi/libdep.so"]
    fake.linux["onnxruntime/capi/libdep-real.so"] = dep
    fake.write()
    build(fake.project, fake.options(targets=("linux-x86_64",)), reporter)
    runtime = fake.root / "dist/fakeproduct/1.2.3/linux-x86_64/runtimes/fake"
    assert (runtime / "libdep.so.2").is_symlink()
    assert os.readlink(runtime / "libdep.so.2") == "libdep-real.so"
    assert not (runtime / "libunused.so").exists(), "inspected only to learn its SONAME"


def test_failed_build_keeps_the_previous_stage(written: FakeProject, reporter: Reporter) -> None:
    build(written.project, written.options(), reporter)
    stage = written.root / "dist/fakeproduct/1.2.3/linux-x86_64"
    before = tree(stage)
    written.linux_roots.append("libnothing.so")
    (written.root / "recipes/fake.toml").write_text(written.recipe_text())
    with pytest.raises(ConfigError):
        build(written.project, written.options(), reporter)
    assert tree(stage) == before


def test_unknown_target_lists_the_known_ones(written: FakeProject, reporter: Reporter) -> None:
    with pytest.raises(ConfigError, match="unknown target 'plan9-mips'.*linux-x86_64"):
        build(written.project, written.options(targets=("plan9-mips",)), reporter)


@pytest.mark.slow
def test_parallel_and_serial_builds_are_identical(written: FakeProject, reporter: Reporter) -> None:
    build(written.project, written.options(jobs=1), reporter)
    stage = written.root / "dist/fakeproduct/1.2.3"
    serial = {p: (stage / p).read_bytes() for p in tree(stage) if not (stage / p).is_symlink()}
    build(written.project, written.options(jobs=4), reporter)
    parallel = {p: (stage / p).read_bytes() for p in tree(stage) if not (stage / p).is_symlink()}
    assert serial == parallel
