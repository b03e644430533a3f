"""Mach-O as a pure function and through the closure: synthetic dylibs written by
tests/helpers/macho.py, read by the real parser, pruned for the real `macos-arm64` target."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given

from ortbundle._core.errors import BinaryError, ClosureError, ConfigError
from ortbundle.config.products import SystemSpec, load_product
from ortbundle.config.targets import get_target
from ortbundle.stage.binaries import inspect
from ortbundle.stage.binaries.baseline import Minimum, baseline
from ortbundle.stage.binaries.info import info_from_json, info_to_json, role
from ortbundle.stage.binaries.loads import LoadScan, scan_binary
from ortbundle.stage.binaries.macho import thin_arm64
from ortbundle.stage.closure import Unresolved
from ortbundle.stage.system import violations
from tests.helpers.macho import Dylib, fat_bytes, slice_bytes, write_dylib
from tests.test_closure import CORE as ELF_CORE
from tests.test_closure import Sources, elf, refused
from tests.test_closure import sources as sources  # the fixture
from tests.test_hostile_fuzz import CUTS, FUZZ, MUTATIONS, mutate

MACOS = get_target("macos-arm64")
SYSTEM = "/usr/lib/libSystem.B.dylib"
COREML = "/System/Library/Frameworks/CoreML.framework/Versions/A/CoreML"
CORE = "libonnxruntime.1.32.0.dylib"
CORE_ID = "@rpath/libonnxruntime.1.dylib"


def test_a_thin_dylib_says_its_id_needs_rpaths_minos_and_exports(tmp_path: Path) -> None:
    path = write_dylib(
        tmp_path / CORE,
        install_id=CORE_ID,
        needed=(SYSTEM, "@rpath/libmlx.dylib"),
        weak=(COREML,),
        reexports=("@loader_path/libre.dylib",),
        rpaths=("@loader_path", "/Users/runner/work/lib"),
        minos="14.2",
        exports=("OrtGetApiBase", "helper"),
        strings=("CoreMLExecutionProvider", "not a CPUExecutionProvider here"),
    )
    info = inspect(path)
    assert (info.format, info.machine, info.bits) == ("macho", "arm64", 64)
    assert info.soname == CORE_ID
    assert info.needed == (SYSTEM, "@rpath/libmlx.dylib", "@loader_path/libre.dylib")
    assert info.delay_needed == (COREML,)
    assert info.runpath == ("@loader_path", "/Users/runner/work/lib")
    assert info.os_version == "14.2"
    assert info.exports == ("OrtGetApiBase", "helper")
    assert role(info) == "core"
    assert info.ep_names == ("CoreMLExecutionProvider",)
    assert (info.architectures, info.signed) == (("arm64",), False)
    assert info_from_json(info_to_json(info)) == info


def test_a_cores_providers_are_read_from_the_append_functions_it_exports(tmp_path: Path) -> None:
    """Microsoft's macOS core exports OrtSessionOptionsAppendExecutionProvider_CoreML beside the
    CPU one: it offers CoreML, then the CPU; a provider it only names (CUDA, in the error
    strings every core carries) is not offered."""
    path = write_dylib(
        tmp_path / CORE,
        install_id=CORE_ID,
        exports=(
            "OrtGetApiBase",
            "OrtSessionOptionsAppendExecutionProvider_CPU",
            "OrtSessionOptionsAppendExecutionProvider_CoreML",
        ),
        strings=("CUDAExecutionProvider", "CoreMLExecutionProvider", "CPUExecutionProvider"),
    )
    info = inspect(path)
    assert info.available_providers == ("CoreMLExecutionProvider", "CPUExecutionProvider")
    assert info_from_json(info_to_json(info)) == info


def test_a_signature_is_seen(tmp_path: Path) -> None:
    apple_platform = pytest.importorskip("apple_platform")
    path = write_dylib(tmp_path / "libx.dylib", install_id="@rpath/libx.dylib")
    apple_platform.sign(path)
    assert inspect(path).signed


def test_a_fat_file_is_described_by_its_arm64_slice_and_lists_every_arch(tmp_path: Path) -> None:
    arm = slice_bytes(Dylib(install_id="@rpath/libx.dylib", minos="14.0", exports=("a",)))
    intel = slice_bytes(Dylib(install_id="@rpath/libx.dylib", arch="x86_64", minos="10.15"))
    path = tmp_path / "libx.dylib"
    path.write_bytes(fat_bytes(intel, arm))
    info = inspect(path)
    assert (info.machine, info.os_version, info.architectures) == (
        "arm64",
        "14.0",
        ("x86_64", "arm64"),
    )
    assert thin_arm64(path.read_bytes()) == arm
    assert thin_arm64(arm) is None


def test_a_fat_file_without_arm64_is_described_by_its_foreign_slice(tmp_path: Path) -> None:
    intel = slice_bytes(Dylib(install_id="@rpath/libx.dylib", arch="x86_64"))
    path = tmp_path / "libx.dylib"
    path.write_bytes(fat_bytes(intel))
    assert inspect(path).machine == "x86_64"
    assert thin_arm64(path.read_bytes()) is None


def test_a_truncated_dylib_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "libx.dylib"
    path.write_bytes(slice_bytes(Dylib(install_id="@rpath/libx.dylib"))[:300])
    with pytest.raises(
        BinaryError,
        match=r"libx.dylib is not a readable Mach-O file: its load commands \(\d+ bytes\) run past",
    ):
        inspect(path)


# --- the closure on macos-arm64 ---------------------------------------------------------------


@pytest.fixture
def mac(tmp_path: Path) -> Sources:
    return Sources(tmp_path, target=MACOS)


def _core(*needed: str, extra: bytes = b"") -> bytes:
    return slice_bytes(
        Dylib(
            install_id=CORE_ID,
            needed=(SYSTEM, *needed),
            weak=(COREML,),
            rpaths=("@loader_path",),
            exports=("OrtGetApiBase",),
            extra=extra,
        )
    )


def test_install_names_resolve_by_file_and_the_id_gets_a_link(mac: Sources) -> None:
    mac.add(f"onnxruntime/capi/{CORE}", _core("@rpath/libmlx.dylib", "/Users/ci/b/libmlxc.dylib"))
    mac.add("lib/libmlx.dylib", slice_bytes(Dylib(install_id="/Users/ci/b/libmlx.dylib")))
    mac.add("lib/libmlxc.dylib", slice_bytes(Dylib(install_id="@rpath/libmlxc.dylib", extra=b"c")))
    mac.add("lib/libunused.dylib", slice_bytes(Dylib(install_id="@rpath/u.dylib", extra=b"u")))
    closure = mac.prune((CORE,), entry="libonnxruntime*.dylib")
    assert [k.name for k in closure.kept] == ["libmlx.dylib", "libmlxc.dylib", CORE]
    assert closure.links == (("libonnxruntime.1.dylib", CORE),)
    assert [(e.name, e.group) for e in closure.externals] == [
        (COREML, "macos"),
        (SYSTEM, "macos"),
    ]
    assert [d.member for d in closure.dropped] == ["lib/libunused.dylib"]


def test_executable_path_is_refused(mac: Sources) -> None:
    mac.add(CORE, _core("@executable_path/../Frameworks/libmlx.dylib"))
    error = refused(ClosureError, mac, (CORE,), entry="libonnxruntime*.dylib")
    assert error.message == (
        f"{CORE} needs @executable_path/../Frameworks/libmlx.dylib: @executable_path depends on "
        "the app that loads it, so no runtime tree can promise it"
    )
    assert error.file == CORE
    assert error.fix == (
        "take the library as a source so the stage rewrites the name to @rpath/<file> (found "
        "through @loader_path), or ask upstream to link it by @rpath"
    )


def test_a_dylib_without_an_id_is_kept_by_its_file_name_with_no_link(mac: Sources) -> None:
    """A plugin built as a bundle has no LC_ID_DYLIB: nothing links against it by name, so it
    is staged as its file and needs no link."""
    mac.add("libplugin_ep.dylib", slice_bytes(Dylib(exports=("CreateEpFactories",))))
    closure = mac.prune(("libplugin_ep.dylib",), entry="libplugin_ep.dylib")
    assert [(k.name, k.info.soname) for k in closure.kept] == [("libplugin_ep.dylib", None)]
    assert closure.links == ()


def test_executable_path_is_only_a_macos_name(sources: Sources) -> None:
    """On Linux `@executable_path/…` is an odd file name like another, left to the search."""
    sources.add(ELF_CORE, elf(ELF_CORE, "@executable_path/libx.so"))
    error = refused(Unresolved, sources, (ELF_CORE,))
    assert isinstance(error, Unresolved)
    assert error.missing == ((ELF_CORE, "@executable_path/libx.so"),)


def test_a_dylib_named_as_its_id_needs_no_link_and_one_named_otherwise_gets_one(
    mac: Sources,
) -> None:
    """The file dependents look for is the id's last component: a library already staged under
    that name needs no link; one staged under its long name gets a link by the short one, and
    it is the long name that is kept when both are in the archive."""
    mac.add(CORE, _core("@rpath/libmlx.dylib"))
    mac.add("libmlx.dylib", slice_bytes(Dylib(install_id="@rpath/libmlx.dylib")))
    closure = mac.prune((CORE,), entry="libonnxruntime*.dylib")
    assert closure.links == (("libonnxruntime.1.dylib", CORE),)
    both = Sources(mac.tmp / "both", target=MACOS)
    (mac.tmp / "both").mkdir()
    both.add(CORE, _core())
    both.add("libonnxruntime.1.dylib", _core())  # the same bytes under the id's name
    closure = both.prune((CORE,), entry="libonnxruntime*.dylib")
    assert [k.name for k in closure.kept] == ["libonnxruntime.1.dylib"]
    assert closure.links == ()


def test_an_install_name_in_no_source_is_unresolved(mac: Sources) -> None:
    mac.add(CORE, _core("@rpath/libmissing.dylib", "/opt/homebrew/lib/libomp.dylib"))
    error = refused(Unresolved, mac, (CORE,), entry="libonnxruntime*.dylib")
    assert isinstance(error, Unresolved)
    assert error.missing == (
        (CORE, "@rpath/libmissing.dylib"),
        (CORE, "/opt/homebrew/lib/libomp.dylib"),
    )


def test_a_foreign_architecture_is_refused(mac: Sources) -> None:
    intel = slice_bytes(Dylib(install_id=CORE_ID, arch="x86_64", exports=("OrtGetApiBase",)))
    mac.add(CORE, fat_bytes(intel))
    error = refused(ClosureError, mac, (CORE,), entry="libonnxruntime*.dylib")
    assert error.message == f"{CORE} is MACHO x86_64, not the target's MACHO arm64"


def test_an_elf_library_is_refused_on_macos(mac: Sources) -> None:
    from tests.helpers.elf import make_elf

    mac.add(CORE, make_elf(soname=CORE, needed=(), machine="EM_AARCH64"))
    error = refused(ClosureError, mac, (CORE,), entry="libonnxruntime*.dylib")
    assert error.message == f"{CORE} is ELF EM_AARCH64, not the target's MACHO arm64"


# --- the oldest macOS ---------------------------------------------------------------------------


def test_the_oldest_macos_is_the_highest_minos_and_held_against_the_promise(
    tmp_path: Path,
) -> None:
    old = inspect(write_dylib(tmp_path / "a.dylib", install_id="@rpath/a.dylib", minos="13.3"))
    new = inspect(write_dylib(tmp_path / "b.dylib", install_id="@rpath/b.dylib", minos="14.0"))
    system = baseline([("a.dylib", old), ("b.dylib", new)])
    assert system.macos == Minimum("14.0", "b.dylib declares minos 14.0 (LC_BUILD_VERSION)")
    assert system.as_json()["macos"] == "14.0"
    assert "macOS ≥ 14.0" in system.describe()
    assert violations(SystemSpec(macos="14.0"), system) == []
    assert violations(SystemSpec(macos="13.0"), system) == [
        "needs macOS 14.0 (b.dylib declares minos 14.0 (LC_BUILD_VERSION)), newer than the "
        "macOS 13.0 the product supports"
    ]


def test_a_product_promises_a_macos(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        '[product]\nname = "p"\nversion = "1"\ndescription = "d"\nurl = "https://e.invalid/"\n'
        'targets = ["macos-arm64"]\nruntimes = ["r"]\n[system]\nmacos = "14.0"\n'
    )
    assert load_product(path).system.macos == "14.0"
    path.write_text(path.read_text().replace('"14.0"', '"sonoma"'))
    with pytest.raises(ConfigError, match="macos"):
        load_product(path)


# --- hostile bytes --------------------------------------------------------------------------------

SEED = slice_bytes(
    Dylib(
        install_id="@rpath/libx.dylib",
        needed=(SYSTEM, "@rpath/liby.dylib"),
        rpaths=("@loader_path",),
        exports=("OrtGetApiBase",),
        strings=("CPUExecutionProvider",),
    )
)


@FUZZ
@given(writes=MUTATIONS, cut=CUTS)
def test_the_macho_reader_gives_a_result_or_a_clear_error(
    tmp_path: Path, writes: list[tuple[int, int]], cut: int | None
) -> None:
    """Mutated headers and load commands (a name that is not UTF-8 among them, found so), and
    cut tails: a description, or one BinaryError naming the file — never another exception."""
    path = tmp_path / "libfuzz.dylib"
    path.write_bytes(mutate(SEED, [(at % 0x300, v) for at, v in writes], cut))
    try:
        info = inspect(path)
    except BinaryError as exc:
        assert "libfuzz.dylib" in str(exc)
    else:
        assert info.format in ("macho", "elf", "pe")
        assert all(isinstance(n, str) and n for n in info.all_needed)


def test_a_dylib_that_calls_dlopen_names_what_it_can_open(tmp_path: Path) -> None:
    """Run-time loads on macOS: the undefined `_dlopen` and the dylib names its C strings hold,
    with the directory they are asked for under (the closure compares install names)."""
    opener = write_dylib(
        tmp_path / "libmlx.dylib",
        install_id="@rpath/libmlx.dylib",
        imports=("dlopen",),
        strings=(
            "libmpi.dylib",
            "/usr/lib/libIOReport.dylib",
            "not a library",
            "@rpath/x.dylib",
            # onnxruntime-ep-mlx opens these two by path (strings of libonnxruntime_mlx_ep.dylib)
            "/System/Library/Frameworks/CoreFoundation.framework/CoreFoundation",
            "/System/Library/PrivateFrameworks/IOReport.framework/Versions/A/IOReport",
            "a Foo.framework mentioned",
        ),
    )
    scan = scan_binary(opener, "macho", "libmlx.dylib")
    assert scan.calls == ("dlopen",)
    assert scan.names == (
        "/System/Library/Frameworks/CoreFoundation.framework/CoreFoundation",
        "/System/Library/PrivateFrameworks/IOReport.framework/Versions/A/IOReport",
        "/usr/lib/libIOReport.dylib",
        "@rpath/x.dylib",
        "libmpi.dylib",
    )
    quiet = write_dylib(
        tmp_path / "libq.dylib", install_id="@rpath/libq.dylib", strings=("libz.dylib",)
    )
    assert scan_binary(quiet, "macho", "libq.dylib") == LoadScan((), ())
    assert "dlopen" not in inspect(opener).exports
