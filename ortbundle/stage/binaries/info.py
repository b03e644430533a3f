"""What analysing a library found (BinaryInfo), as plain frozen data every step shares; the
parsers (elf.py, pe.py) fill it in, the memo keeps it as JSON."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class LoadSegment:
    offset: int
    vaddr: int
    align: int


@dataclass(frozen=True)
class BinaryInfo:
    """The facts the closure and the channels need about one library."""

    format: str  # elf | pe | macho
    machine: str  # pyelftools e_machine name (EM_X86_64), PE machine (AMD64), Mach-O arm64
    soname: str | None  # ELF DT_SONAME, Mach-O LC_ID_DYLIB; None for PE
    needed: tuple[str, ...]  # DT_NEEDED, the PE import table, Mach-O LC_LOAD/REEXPORT_DYLIB
    delay_needed: tuple[str, ...] = ()  # PE delay-import table, Mach-O LC_LOAD_WEAK_DYLIB
    runpath: tuple[str, ...] = ()  # ELF DT_RUNPATH, Mach-O LC_RPATH
    loads: tuple[LoadSegment, ...] = ()  # ELF PT_LOAD segments (page-size checks)
    bits: int = 0  # 32 or 64 (ELF class, PE optional-header magic); 0 when unknown
    # what the oldest system must offer (see baseline.py), read in the same parse:
    version_needs: tuple[tuple[str, str], ...] = ()  # ELF .gnu.version_r: (file, version node)
    android_api: int = 0  # ELF .note.android.ident: the API level it was built for; 0: none
    os_version: str = ""  # PE MajorOperatingSystemVersion.Minor…; Mach-O minos ("14.0")
    subsystem_version: str = ""  # PE MajorSubsystemVersion.MinorSubsystemVersion
    versioned_imports: tuple[tuple[str, str], ...] = ()  # PE (dll, function) in baselines.toml
    # what the library is and offers (see role() and providers.py), read in the same parse:
    exports: tuple[str, ...] = ()  # C names it exports: ELF dynamic symbols, PE export directory
    ep_names: tuple[str, ...] = ()  # "…ExecutionProvider" strings its read-only data holds
    available_providers: tuple[str, ...] = ()  # a core's provider table: the available ones
    # Mach-O: every slice's architecture (a fat file has several; the facts above are of the
    # arm64 one), and whether the slice carries LC_CODE_SIGNATURE
    architectures: tuple[str, ...] = ()
    signed: bool = False

    def __post_init__(self) -> None:
        # a memo stores this as JSON, where tuples come back as lists: make them tuples again
        for name in ("version_needs", "versioned_imports"):
            value = getattr(self, name)
            if not isinstance(value, tuple) or any(not isinstance(v, tuple) for v in value):
                object.__setattr__(self, name, tuple((str(a), str(b)) for a, b in value))
        for name in ("exports", "ep_names", "available_providers", "architectures"):
            if not isinstance(getattr(self, name), tuple):
                object.__setattr__(self, name, tuple(getattr(self, name)))

    @property
    def all_needed(self) -> tuple[str, ...]:
        return self.needed + self.delay_needed


CORE_EXPORT = "OrtGetApiBase"  # the C API's entry point: an ONNX Runtime core
PLUGIN_EXPORTS = ("CreateEpFactories", "ReleaseEpFactory")  # RegisterExecutionProviderLibrary's
PROVIDER_EXPORT = "GetProvider"  # a provider library a core loads (libonnxruntime_providers_*)
CUSTOM_OPS_EXPORT = "RegisterCustomOps"  # what RegisterCustomOpsLibrary looks up
ROLE_EXPORTS = (CORE_EXPORT, *PLUGIN_EXPORTS, CUSTOM_OPS_EXPORT, PROVIDER_EXPORT)
# the names an ONNX Runtime core is linked or opened by: a library needing one of these (or
# opening it by name) uses a core; not libonnxruntime_providers_*.so nor libonnxruntime-genai.so
CORE_NAMES = (
    "libonnxruntime.so*",
    "libonnxruntime.dylib",
    "libonnxruntime.*.dylib",
    "onnxruntime.dll",
)


def role(info: BinaryInfo) -> str:
    """What a library is to ONNX Runtime, from what it exports: "core", "plugin-ep" (it has both
    functions RegisterExecutionProviderLibrary looks up), "custom-ops" (RegisterCustomOps),
    "provider", or "" (anything else)."""
    exports = set(info.exports)
    if CORE_EXPORT in exports:
        return "core"
    if exports.issuperset(PLUGIN_EXPORTS):
        return "plugin-ep"
    if CUSTOM_OPS_EXPORT in exports:
        return "custom-ops"
    if PROVIDER_EXPORT in exports:
        return "provider"
    return ""


def core_names(names: Iterable[str]) -> tuple[str, ...]:
    """Those of `names` (needed libraries, names opened at run time) that name an ONNX Runtime
    core, in their order: what makes a library one that uses a core."""
    found = (
        n
        for n in names
        if any(fnmatch.fnmatch(n.rsplit("/", 1)[-1].lower(), g) for g in CORE_NAMES)
    )
    return tuple(dict.fromkeys(found))


def _is_core_name(name: str) -> bool:
    base = name.rsplit("/", 1)[-1].lower()
    return any(fnmatch.fnmatchcase(base, glob) for glob in CORE_NAMES)


_FACTS = ("exports", "ep_names", "available_providers")  # required in a memo entry


def info_to_json(info: BinaryInfo) -> dict[str, Any]:
    return asdict(info)


def info_from_json(data: dict[str, Any]) -> BinaryInfo:
    """The inverse of `info_to_json`: JSON lists become the tuples the dataclass holds. The
    export and provider facts are required: an entry written before they existed is refused
    (KeyError) and its library read again, never taken as exporting and naming nothing."""
    fields = dict(data)
    for key in ("needed", "delay_needed", "runpath", *_FACTS):
        fields[key] = tuple(fields[key])
    fields["loads"] = tuple(LoadSegment(**segment) for segment in fields["loads"])
    return BinaryInfo(**fields)


def alignment_problem(info: BinaryInfo, page_align: int) -> str | None:
    """The first PT_LOAD a loader with `page_align`-byte pages cannot map, described in one line.

    Android 15+ on 64-bit devices runs with 16 KB pages and refuses a library whose segments
    are aligned for 4 KB ones: every PT_LOAD needs `p_align >= page_align` and
    `p_vaddr ≡ p_offset (mod p_align)`. PE files and non-ELF formats have no such segments: None.
    """
    if info.format != "elf":
        return None
    for index, seg in enumerate(info.loads):
        where = (
            f"PT_LOAD {index} (offset {seg.offset:#x}, vaddr {seg.vaddr:#x}, align {seg.align:#x})"
        )
        if seg.align & (seg.align - 1):
            return f"{where}: align is not a power of two"
        if seg.align < page_align:
            return f"{where}: aligned to {seg.align} bytes, below the {page_align}-byte page"
        if seg.align > 1 and seg.vaddr % seg.align != seg.offset % seg.align:
            return f"{where}: vaddr is not congruent to offset modulo align"
    return None


# thin 64-bit little-endian (what arm64 and x86_64 write), thin 32-bit, and fat (big-endian)
_MACHO_MAGICS = (b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xca\xfe\xba\xbe")


def is_macho(head: bytes) -> bool:
    """Whether a file's first 8 bytes open a Mach-O file: a fat header's magic is also a Java
    class's, so it counts only with the small architecture count a fat file has after it."""
    if head[:4] in _MACHO_MAGICS[:2]:
        return True
    return head[:4] == _MACHO_MAGICS[2] and 0 < int.from_bytes(head[4:8], "big") < 20


def sniff_format(path: Path) -> str | None:
    with path.open("rb") as stream:
        magic = stream.read(4)
    if magic == b"\x7fELF":
        return "elf"
    if magic[:2] == b"MZ":
        return "pe"
    if magic in _MACHO_MAGICS:
        return "macho"
    return None
