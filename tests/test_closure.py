"""The closure as a pure function: `prune` over synthetic ELF and PE sets, no build around it.

Each candidate is bytes made by tests/helpers (elf.py, pe.py) and inspected by the real reader
when `prune` materialises it, so what the closure sees is what a wheel's members would give.
Every refusal is asserted with the message the user reads.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ortbundle._core.errors import BinaryError, ClosureError, ConfigError, OrtbundleError
from ortbundle.config.recipes import Drop, TargetRecipe
from ortbundle.config.targets import ExternalGroup, Target
from ortbundle.stage.binaries import inspect
from ortbundle.stage.binaries.info import BinaryInfo
from ortbundle.stage.closure import (
    Candidate,
    Closure,
    Dropped,
    ExternalLibrary,
    Materialized,
    Unresolved,
    prune,
)
from tests.helpers.elf import make_elf
from tests.helpers.pe import make_pe

GLIBC = ExternalGroup("glibc", "system", ("libc.so.6", "libm.so.6"))
OPENCL = ExternalGroup(
    "opencl",
    "driver",
    ("libOpenCL.so.1",),
    note="the GPU driver's ICD loader",
    optional=True,
    version=">=3.0",
    install="Install your GPU's OpenCL driver",
    sandbox=False,
)
LINUX = Target("linux-x86_64", "linux", "elf", "EM_X86_64", externals=(GLIBC, OPENCL))
WINDOWS = Target(
    "windows-x86_64",
    "windows",
    "pe",
    "AMD64",
    externals=(ExternalGroup("windows", "system", ("kernel32.dll", "api-ms-win-*.dll")),),
)
CORE = "libonnxruntime.so.1"


@dataclass
class Sources:
    """Archive members by (source, member), materialised the way the stage does: extracted to
    a numbered file, then inspected; `opened` records each member in the order it was opened."""

    tmp: Path
    target: Target = LINUX
    members: dict[tuple[str, str], bytes] = field(default_factory=dict)
    opened: list[str] = field(default_factory=list)

    def add(self, member: str, data: bytes, source: str = "wheel") -> None:
        self.members[(source, member)] = data

    def candidates(self) -> list[Candidate]:
        """Byte-identical members share an identity, like equal RECORD hashes."""
        return [
            Candidate(source, member, member.rsplit("/", 1)[-1], len(data), _sha256(data))
            for (source, member), data in self.members.items()
        ]

    def materialize(self, cand: Candidate) -> Materialized:
        self.opened.append(cand.member)
        data = self.members[(cand.source, cand.member)]
        path = self.tmp / f"{len(self.opened)}-{cand.name}"
        path.write_bytes(data)
        info = inspect(path, name=f"{cand.source}:{cand.member}")
        return Materialized(path, _sha256(data), len(data), info)

    def prune(
        self,
        roots: tuple[str, ...] = (CORE,),
        *,
        entry: str = "libonnxruntime.so*",
        drops: tuple[Drop, ...] = (),
    ) -> Closure:
        recipe = TargetRecipe(
            target=self.target.name,
            entry=entry,
            takes=(),
            roots=roots,
            drops=drops,
            licenses=(),
        )
        return prune(
            component="onnxruntime",
            target=self.target,
            recipe=recipe,
            candidates=self.candidates(),
            materialize=self.materialize,
        )


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def elf(
    soname: str | None = None,
    *needed: str,
    machine: str = "EM_X86_64",
    bits: int = 64,
    payload: bytes = b"",
) -> bytes:
    """A shared library; `payload` keeps two otherwise equal files apart."""
    return make_elf(soname=soname, needed=needed, machine=machine, bits=bits, payload=payload)


@pytest.fixture
def sources(tmp_path: Path) -> Sources:
    return Sources(tmp_path)


def refused(
    error: type[OrtbundleError],
    sources: Sources,
    roots: tuple[str, ...] = (CORE,),
    *,
    entry: str = "libonnxruntime.so*",
    drops: tuple[Drop, ...] = (),
) -> OrtbundleError:
    """The error `prune` raises, checked to name the component and the target."""
    with pytest.raises(error) as caught:
        sources.prune(roots, entry=entry, drops=drops)
    assert (caught.value.component, caught.value.target) == ("onnxruntime", sources.target.name)
    return caught.value


# --- what it keeps, links, drops and leaves to the system ---------------------------------------


def test_keeps_the_roots_and_what_they_need_and_drops_the_rest(sources: Sources) -> None:
    sources.add(f"lib/{CORE}", elf(CORE, "libdep.so.1", "libc.so.6"))
    sources.add("lib/libdep.so.1", elf("libdep.so.1", "libdeeper.so.2"))
    sources.add("lib/libdeeper.so.2", elf("libdeeper.so.2"))
    sources.add("lib/libunused.so", elf("libunused.so", "libnowhere.so"))
    closure = sources.prune()
    assert [(k.name, k.member, k.why) for k in closure.kept] == [
        ("libdeeper.so.2", "lib/libdeeper.so.2", "needed by libdep.so.1"),
        ("libdep.so.1", "lib/libdep.so.1", "needed by libonnxruntime.so.1"),
        (CORE, f"lib/{CORE}", "root"),
    ]
    assert closure.entry == CORE
    assert closure.links == ()
    assert closure.dropped == (
        Dropped(
            "wheel",
            "lib/libunused.so",
            len(sources.members[("wheel", "lib/libunused.so")]),
            "not needed by any root",
        ),
    )
    # breadth first from the root; a library nothing needs is never opened (nor its needs)
    assert sources.opened == [f"lib/{CORE}", "lib/libdep.so.1", "lib/libdeeper.so.2"]
    # each kept file is where it was extracted: the stage renames that file, not another
    assert [k.path.name for k in closure.kept] == [
        "3-libdeeper.so.2",
        "2-libdep.so.1",
        f"1-{CORE}",
    ]
    assert closure.unused == ()
    kept = closure.kept[2]
    assert (kept.size, kept.sha256) == (
        len(sources.members[("wheel", f"lib/{CORE}")]),
        _sha256(sources.members[("wheel", f"lib/{CORE}")]),
    )


def test_externals_name_each_needer_once_with_their_groups_facts(sources: Sources) -> None:
    sources.add(CORE, elf(CORE, "libm.so.6", "libc.so.6", "libOpenCL.so.1", "libgpu.so"))
    sources.add("libgpu.so", elf("libgpu.so", "libc.so.6", "libOpenCL.so.1", "libc.so.6"))
    closure = sources.prune()
    assert closure.externals == (
        ExternalLibrary(
            "libOpenCL.so.1",
            "opencl",
            "driver",
            "the GPU driver's ICD loader",
            ("libgpu.so", CORE),
            optional=True,
            version=">=3.0",
            install="Install your GPU's OpenCL driver",
            sandbox=False,
        ),
        ExternalLibrary("libc.so.6", "glibc", "system", "", ("libgpu.so", CORE)),
        ExternalLibrary("libm.so.6", "glibc", "system", "", (CORE,)),
    )
    assert all(e.via == "needed" for e in closure.externals)


def test_an_external_opened_by_name_says_so() -> None:
    """runtime_loads.py records a library a kept file opens by name (dlopen) with via="loads"."""
    external = ExternalLibrary.of("libcuda.so.1", OPENCL, (CORE,), via="loads")
    assert (external.name, external.group, external.via) == ("libcuda.so.1", "opencl", "loads")
    assert ExternalLibrary.of("libOpenCL.so.1", OPENCL, (CORE,)).via == "needed"


def test_byte_identical_members_are_one_library_staged_under_its_soname(
    sources: Sources,
) -> None:
    data = elf(CORE, "libc.so.6")
    for name in ("libonnxruntime.so", CORE, "libonnxruntime.so.1.20.0"):
        sources.add(f"capi/{name}", data)
    closure = sources.prune(("libonnxruntime.so",))
    (kept,) = closure.kept
    # opened once, as the longest name; staged under the SONAME the others link against
    assert sources.opened == ["capi/libonnxruntime.so.1.20.0"]
    assert (kept.name, kept.member, kept.why) == (CORE, "capi/libonnxruntime.so.1.20.0", "root")
    assert closure.links == ()  # the file has its SONAME's name: nothing to link
    # each alias keeps its own size: what the report says the prune saved
    assert closure.dropped == (
        Dropped("wheel", "capi/libonnxruntime.so", len(data), f"alias of {CORE} (same bytes)"),
        Dropped(
            "wheel", "capi/libonnxruntime.so.1.20.0", len(data), f"alias of {CORE} (same bytes)"
        ),
    )


def test_aliases_without_a_soname_are_staged_under_the_longest_name(sources: Sources) -> None:
    data = elf(None)
    sources.add("libonnxruntime.so", data)
    sources.add("libonnxruntime.so.1.20", data)
    closure = sources.prune(("libonnxruntime.so",))
    assert [k.name for k in closure.kept] == ["libonnxruntime.so.1.20"]
    assert [(d.member, d.reason) for d in closure.dropped] == [
        ("libonnxruntime.so", "alias of libonnxruntime.so.1.20 (same bytes)")
    ]


def test_the_same_bytes_in_two_sources_are_two_libraries(sources: Sources) -> None:
    data = elf("libshared.so")
    sources.add(CORE, elf(CORE, "libshared.so"), source="a")
    sources.add("libshared.so", data, source="a")
    sources.add("libother.so", data, source="b")  # another name: no clash, not an alias
    closure = sources.prune()
    assert [(k.name, k.source) for k in closure.kept] == [(CORE, "a"), ("libshared.so", "a")]
    assert [(d.source, d.member, d.reason) for d in closure.dropped] == [
        ("b", "libother.so", "not needed by any root")
    ]


def test_a_dropped_member_keeps_its_drop_reason_and_is_not_staged(sources: Sources) -> None:
    data = elf(None, "libc.so.6")
    sources.add("libonnxruntime.so", data)
    sources.add("libonnxruntime.so.1.20.0", data)  # the longer name, but dropped
    sources.add("libonnxruntime_test.so", elf(None))
    drops = (
        Drop(("libonnxruntime.so.1.*",), "a versioned duplicate"),
        Drop(("*_test.so", "libonnxruntime.so.1.*"), "tests are not shipped"),
    )
    closure = sources.prune(("libonnxruntime*",), drops=drops)
    assert [k.name for k in closure.kept] == ["libonnxruntime.so"]
    # the first rule that matches gives the reason; an unneeded dropped file says why it went
    assert {d.member: d.reason for d in closure.dropped} == {
        "libonnxruntime.so.1.20.0": "a versioned duplicate",
        "libonnxruntime_test.so": "tests are not shipped",
    }


def test_a_needed_soname_is_found_on_a_member_named_otherwise(sources: Sources) -> None:
    sources.add(CORE, elf(CORE, "libdep.so.1", "libc.so.6"))
    sources.add("libdep.so", elf("libdep.so.1"))  # linked against by its SONAME
    sources.add("libspare.so", elf("libspare.so"))  # opened to learn its SONAME, then left
    sources.add("libgone.so", elf("libgone.so"))  # dropped: never opened
    closure = sources.prune(drops=(Drop(("libgone.so",), "unwanted"),))
    assert [(k.name, k.why) for k in closure.kept] == [
        ("libdep.so", f"needed by {CORE}"),
        (CORE, "root"),
    ]
    assert closure.links == (("libdep.so.1", "libdep.so"),)  # the loader asks for the SONAME
    # every live candidate is opened once, in source order, after the walk ran dry
    assert sources.opened == [CORE, "libdep.so", "libspare.so"]
    assert [p.name for p in closure.unused] == ["3-libspare.so"]
    assert {d.member: d.reason for d in closure.dropped} == {
        "libgone.so": "unwanted",
        "libspare.so": "not needed by any root",
    }


def test_the_soname_retry_runs_once_and_what_it_finds_is_followed(sources: Sources) -> None:
    sources.add(CORE, elf(CORE, "liba.so.1"))
    sources.add("liba.so", elf("liba.so.1", "libb.so.2"))  # found by the retry ...
    sources.add("libb.so", elf("libb.so.2"))  # ... and what it needs, by its SONAME (opened)
    closure = sources.prune()
    assert [(k.name, k.why) for k in closure.kept] == [
        ("liba.so", f"needed by {CORE}"),
        ("libb.so", "needed by liba.so"),
        (CORE, "root"),
    ]
    assert closure.links == (("liba.so.1", "liba.so"), ("libb.so.2", "libb.so"))
    assert sources.opened == [CORE, "liba.so", "libb.so"]


def test_pe_names_are_compared_without_case_and_delay_imports_count(tmp_path: Path) -> None:
    sources = Sources(tmp_path, WINDOWS)
    sources.add(
        "onnxruntime.dll",
        make_pe(
            imports=("KERNEL32.dll", "onnxruntime_providers_shared.dll"),
            delay_imports=("DirectML.dll",),
        ),
    )
    sources.add("ONNXRUNTIME_PROVIDERS_SHARED.DLL", make_pe(imports=("kernel32.dll",)))
    sources.add("directml.dll", make_pe(imports=("api-ms-win-core-file-l1-1-0.dll",)))
    closure = sources.prune(("OnnxRuntime.dll",), entry="onnxruntime.dll")
    assert [(k.name, k.why) for k in closure.kept] == [
        ("ONNXRUNTIME_PROVIDERS_SHARED.DLL", "needed by onnxruntime.dll"),
        ("directml.dll", "needed by onnxruntime.dll"),
        ("onnxruntime.dll", "root"),
    ]
    assert closure.links == ()  # a PE has no SONAME to link
    # the first spelling needed names the external; every needer is listed
    assert [(e.name, e.group, e.needed_by) for e in closure.externals] == [
        ("KERNEL32.dll", "windows", ("ONNXRUNTIME_PROVIDERS_SHARED.DLL", "onnxruntime.dll")),
        ("api-ms-win-core-file-l1-1-0.dll", "windows", ("directml.dll",)),
    ]


def test_a_system_library_bound_only_on_first_use_is_optional(tmp_path: Path) -> None:
    """A DLL in the delay-import table alone (onnxruntime.dll's SHELL32.dll) lets the library
    load without it: optional, "delay"; one that any needer imports outright stays required."""
    sources = Sources(tmp_path, WINDOWS)
    sources.add(
        "onnxruntime.dll",
        make_pe(
            imports=("KERNEL32.dll", "helper.dll"),
            delay_imports=("api-ms-win-core-file-l1-1-0.dll", "kernel32.dll"),
        ),
    )
    sources.add("helper.dll", make_pe(imports=("api-ms-win-core-com-l1-1-0.dll",)))
    closure = sources.prune(("onnxruntime.dll",), entry="onnxruntime.dll")
    assert [(e.name, e.optional, e.via) for e in closure.externals] == [
        ("KERNEL32.dll", False, "needed"),
        ("api-ms-win-core-com-l1-1-0.dll", False, "needed"),
        ("api-ms-win-core-file-l1-1-0.dll", True, "delay"),
    ]


# --- the refusals, each with the message it gives ----------------------------------------------


def test_two_libraries_staged_under_one_name_are_refused(sources: Sources) -> None:
    sources.add(CORE, elf(CORE))
    sources.add("libdup.so", elf("libdup.so", payload=b"one"), source="a")
    sources.add("libdup.so", elf("libdup.so", payload=b"two"), source="b")
    error = refused(ConfigError, sources)
    assert error.message == (
        "two different libraries would both be staged as libdup.so (a:libdup.so and b:libdup.so)"
    )
    assert error.fix == "narrow the [[take]] library globs so each file name comes from one source"


def test_two_dlls_whose_names_differ_only_in_case_are_refused(tmp_path: Path) -> None:
    sources = Sources(tmp_path, WINDOWS)
    sources.add("onnxruntime.dll", make_pe())
    sources.add("x64/DirectML.dll", make_pe(payload=b"one"))
    sources.add("x86/directml.DLL", make_pe(payload=b"two"))
    error = refused(ConfigError, sources, roots=("onnxruntime.dll",), entry="onnxruntime.dll")
    assert error.message == (
        "two different libraries would both be staged as directml.DLL "
        "(wheel:x64/DirectML.dll and wheel:x86/directml.DLL)"
    )


def test_a_root_matching_no_library_is_refused(sources: Sources) -> None:
    sources.add(CORE, elf(CORE))
    error = refused(ConfigError, sources, roots=(CORE, "libonnxruntime_providers_*.so"))
    assert error.message == "root 'libonnxruntime_providers_*.so' matches no library in the sources"
    assert error.fix == "check the root against the archive listing, or the [[take]] globs"
    assert sources.opened == []  # refused before anything is extracted


def test_a_root_matching_only_dropped_libraries_is_refused(sources: Sources) -> None:
    sources.add(CORE, elf(CORE))
    sources.add("libonnxruntime_providers_cuda.so", elf(None))
    error = refused(
        ConfigError,
        sources,
        roots=(CORE, "libonnxruntime_providers_*.so"),
        drops=(Drop(("*_cuda.so",), "the CUDA rung ships elsewhere"),),
    )
    assert (
        error.message
        == "root 'libonnxruntime_providers_*.so' matches only libraries the recipe drops"
    )
    assert error.fix == "remove the root or the drop rule"


def test_a_kept_library_needing_a_dropped_one_is_refused(sources: Sources) -> None:
    sources.add(CORE, elf(CORE, "libc.so.6", "libtbb.so.12"))
    sources.add("libtbb.so.12", elf("libtbb.so.12"))
    error = refused(
        ClosureError, sources, drops=(Drop(("libtbb.so*",), "the system's TBB is used"),)
    )
    assert error.message == (
        f"{CORE} needs libtbb.so.12, which the recipe drops (the system's TBB is used)"
    )
    assert error.file == CORE
    assert error.fix == "keep the library (remove the drop rule) or remove what needs it"


def test_needing_a_dropped_alias_of_a_kept_library_is_refused(sources: Sources) -> None:
    data = elf("libdep.so.1")
    sources.add(CORE, elf(CORE, "libdep.so"))
    sources.add("libdep.so", data)
    sources.add("libdep.so.1", data)
    sources.add("libuser.so", elf("libuser.so", "libdep.so.1"))
    error = refused(
        ClosureError,
        sources,
        roots=(CORE, "libuser.so"),
        drops=(Drop(("libdep.so.1",), "a versioned name"),),
    )
    assert (
        error.message == "libuser.so needs libdep.so.1, which the recipe drops (a versioned name)"
    )


def test_the_refusal_gives_the_reason_of_the_dropped_name_that_is_needed(sources: Sources) -> None:
    """Two names of one library dropped for different reasons: the message gives the reason of
    the name the needer asked for, not the first drop the library met."""
    data = elf("libdep.so.1")
    sources.add(CORE, elf(CORE, "libdep.so.1.2"))
    for name in ("libdep.so", "libdep.so.1", "libdep.so.1.2"):
        sources.add(name, data)
    drops = (
        Drop(("libdep.so.1",), "the SONAME link is made by the stage"),
        Drop(("libdep.so.1.2",), "a full version is not shipped"),
    )
    error = refused(ClosureError, sources, drops=drops)
    assert error.message == (
        f"{CORE} needs libdep.so.1.2, which the recipe drops (a full version is not shipped)"
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            elf(CORE, machine="EM_AARCH64"),
            f"{CORE} is ELF EM_AARCH64, not the target's ELF EM_X86_64",
        ),
        (
            elf(CORE, bits=32),
            f"{CORE} is ELF EM_X86_64 32-bit, not the target's ELF EM_X86_64 64-bit",
        ),
        (make_pe(), f"{CORE} is PE AMD64, not the target's ELF EM_X86_64"),
    ],
    ids=["machine", "word size", "format"],
)
def test_a_library_for_another_machine_is_refused(
    sources: Sources, data: bytes, message: str
) -> None:
    sources.add(f"lib/{CORE}", data)
    error = refused(ClosureError, sources)
    assert error.message == message
    assert error.file == f"wheel:lib/{CORE}"
    assert (
        error.fix
        == "the recipe takes the wrong wheel for this target, or the library glob is too wide"
    )


def test_a_library_of_another_format_is_refused_even_with_the_targets_machine_name(
    tmp_path: Path,
) -> None:
    """The readers never give a PE an ELF machine name: the analysed facts, made by hand."""
    info = BinaryInfo(format="pe", machine="EM_X86_64", soname=None, needed=(), bits=64)
    path = tmp_path / CORE
    path.write_bytes(b"")

    def materialize(cand: Candidate) -> Materialized:
        return Materialized(path, _sha256(b""), 0, info)

    recipe = TargetRecipe(LINUX.name, "libonnxruntime.so*", (), (CORE,), (), ())
    with pytest.raises(ClosureError) as caught:
        prune(
            component="onnxruntime",
            target=LINUX,
            recipe=recipe,
            candidates=[Candidate("wheel", CORE, CORE, 0, "x")],
            materialize=materialize,
        )
    assert caught.value.message == f"{CORE} is PE EM_X86_64, not the target's ELF EM_X86_64"


def test_an_unreadable_library_is_named_with_its_component_and_target(sources: Sources) -> None:
    sources.add(CORE, b"not a library at all")
    error = refused(BinaryError, sources)
    assert error.message == f"wheel:{CORE} is neither an ELF, PE nor Mach-O library"


def test_every_unresolved_name_is_reported_at_once(sources: Sources) -> None:
    sources.add(CORE, elf(CORE, "libmissing.so.1", "libc.so.6", "libdep.so"))
    sources.add("libdep.so", elf("libdep.so", "libalso-missing.so"))
    sources.add("libother.so", elf("libother.so.3"))  # opened by the retry; resolves nothing
    error = refused(Unresolved, sources)
    assert isinstance(error, Unresolved)
    assert error.missing == (
        (CORE, "libmissing.so.1"),
        ("libdep.so", "libalso-missing.so"),
    )
    assert error.message == (
        f"unresolved libraries: {CORE} needs libmissing.so.1; libdep.so needs "
        "libalso-missing.so — neither in the sources nor an allowed external of linux-x86_64"
    )
    assert error.file == CORE
    assert error.fix == (
        "add the library's archive as a source, or, if the user's system provides it, declare "
        "it in the product manifest as an [[externals]] group"
    )
    assert sources.opened == [CORE, "libdep.so", "libother.so"]


def test_a_soname_link_replacing_a_staged_file_is_refused(sources: Sources) -> None:
    sources.add(CORE, elf(CORE))
    sources.add("libfoo.so.1", elf(None))
    sources.add("libbar.so", elf("libfoo.so.1"))  # its SONAME link would overwrite libfoo.so.1
    error = refused(ConfigError, sources, roots=("lib*",))
    assert error.message == "a SONAME link would replace a staged file: libfoo.so.1"
    assert error.fix == "two kept libraries claim the same SONAME; keep only one"


def test_every_staged_file_a_soname_link_would_replace_is_named(sources: Sources) -> None:
    sources.add(CORE, elf(CORE))
    sources.add("libfoo.so.1", elf(None))
    sources.add("libbar.so", elf("libfoo.so.1"))
    sources.add("libqux.so.2", elf(None, payload=b"qux"))
    sources.add("libbaz.so", elf("libqux.so.2"))
    error = refused(ConfigError, sources, roots=("lib*",))
    assert error.message == "a SONAME link would replace a staged file: libfoo.so.1, libqux.so.2"


def test_an_entry_matching_no_kept_library_is_refused(sources: Sources) -> None:
    sources.add(CORE, elf(CORE))
    error = refused(ConfigError, sources, entry="onnxruntime.dll")
    assert (
        error.message == "entry 'onnxruntime.dll' must match exactly one kept library, matched none"
    )
    assert error.fix == "make the entry glob name the ONNX Runtime core library"


def test_an_entry_matching_more_than_one_library_is_refused(sources: Sources) -> None:
    sources.add(CORE, elf(CORE, "libonnxruntime_providers_shared.so"))
    sources.add("libonnxruntime_providers_shared.so", elf("libonnxruntime_providers_shared.so"))
    error = refused(ConfigError, sources, entry="libonnxruntime*")
    assert error.message == (
        "entry 'libonnxruntime*' must match exactly one kept library, matched "
        "['libonnxruntime.so.1', 'libonnxruntime_providers_shared.so']"
    )
