"""Which libraries a binary opens by name at run time (dlopen, LoadLibrary), read from its
imports and strings, and how declared loads resolve against a runtime: pure functions over
bytes and names."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ortbundle._core.errors import BinaryError, ConfigError
from ortbundle.config.recipes import IgnoreRule
from ortbundle.stage.binaries.macho import imported_symbols

# the functions that open a library by a name the program chooses
ELF_LOADERS = frozenset({"dlopen", "dlmopen", "android_dlopen_ext"})


MACHO_LOADERS = frozenset({"dlopen", "dlopen_from", "dlopen_preflight"})


PE_LOADERS = frozenset({"LoadLibraryA", "LoadLibraryW", "LoadLibraryExA", "LoadLibraryExW"})


_PE_LOADER_DLLS = ("kernel32.dll", "kernelbase.dll", "api-ms-win-core-libraryloader-")


# a library name as a string of its own: after a NUL, a printable separator (a path's "/", a
# space) or nothing, never after a name character or binary bytes (a table that happens to hold
# "A" then "openvino.dll"); "libcudnn.so.9", "libfoo.so", "nvcuda.dll"
_NAME_CHAR = rb"[A-Za-z0-9_+.-]"


_START = rb"(?<![^\x00\x20-\x7e])(?<!" + _NAME_CHAR + rb")"


_ELF_NAME = re.compile(_START + rb"lib" + _NAME_CHAR + rb"*?\.so(?:\.[0-9]+)*(?![A-Za-z0-9_+-])")


_PE_NAME = re.compile(
    _START + rb"[A-Za-z0-9_+-]" + _NAME_CHAR + rb"*\.[dD][lL][lL](?!" + _NAME_CHAR + rb")"
)


# a dylib name, with the directory it is asked for under when it has one ("@rpath/…",
# "/usr/lib/…"): the install name is what the closure compares
_MACHO_NAME = re.compile(
    _START
    + rb"(?:[@/][A-Za-z0-9_+./@-]*/)?[A-Za-z0-9_+-]"
    + _NAME_CHAR
    + rb"*\.dylib(?!"
    + _NAME_CHAR
    + rb")"
)


# a framework's binary by its path: "/System/Library/Frameworks/CoreFoundation.framework/
# CoreFoundation", "/System/Library/PrivateFrameworks/IOReport.framework/Versions/A/IOReport"
_MACHO_FRAMEWORK = re.compile(
    _START
    + rb"(?:[@/][A-Za-z0-9_+./@-]*/)?[A-Za-z0-9_+-]+\.framework/(?:Versions/[A-Za-z0-9]+/)?"
    + rb"[A-Za-z0-9_+-]+(?![A-Za-z0-9_+./-])"
)


_PE_WIDE = re.compile(
    rb"(?:[A-Za-z0-9_+.-]\x00)+\.\x00[dD]\x00[lL]\x00[lL]\x00(?![A-Za-z0-9_+.-]\x00)"
)


@dataclass(frozen=True)
class LoadScan:
    """What one binary says about opening libraries by name."""

    calls: tuple[str, ...]  # the loader functions it imports: dlopen, LoadLibraryExW
    names: tuple[str, ...]  # library names in its read-only data (only read when it has calls)


@dataclass(frozen=True)
class FileScan:
    file: str  # staged file name
    scan: LoadScan


@dataclass(frozen=True)
class LoadFinding:
    """A kept file that can open libraries nobody declared."""

    file: str  # staged file name
    calls: tuple[str, ...]
    names: tuple[str, ...]  # undeclared library names, sorted


@dataclass(frozen=True)
class DeclaredLoad:
    """A recipe's `loads` name that resolved to an external group."""

    name: str
    group: str
    kind: str
    note: str
    needed_by: tuple[str, ...]  # the staged files that open it (by their strings), else the
    optional: bool = False  # declared in optional_loads: the runtime works without it


@dataclass(frozen=True)
class OfferedProvider:
    """A provider library a core opens by name only when a session asks for its provider: an
    entry of the core's own table, offered by the core and not shipped, so no requirement."""

    file: str  # the core (staged file name) whose strings name it
    name: str  # libonnxruntime_providers_cuda.so, onnxruntime_providers_cuda.dll
    provider: str  # the provider name the core holds beside it: CUDAExecutionProvider


@dataclass(frozen=True)
class RuntimeLoads:
    declared: tuple[DeclaredLoad, ...]
    findings: tuple[LoadFinding, ...]
    offered: tuple[OfferedProvider, ...] = ()


# the file name a core builds for a provider library it may load: the
# `onnxruntime_providers_<name>` pattern on each platform
_PROVIDER_LIBRARY = re.compile(
    r"^(?:lib)?onnxruntime_providers_([a-z0-9_]+)\.(?:so|dll|dylib)$", re.IGNORECASE
)
# ONNX Runtime's provider bridge (`onnxruntime_providers_shared`): its table loads it before any
# provider library, so it serves every provider and names none
PROVIDER_BRIDGE = "shared"
BRIDGE = "the provider bridge"  # what OfferedProvider.provider says of it


def offered_provider(name: str, providers: Iterable[str]) -> str | None:
    """What `name`, in a core holding the "…ExecutionProvider" strings `providers`, is a
    library of: the provider whose name the `<name>` of `onnxruntime_providers_<name>` spells
    without its underscores (nv_tensorrt_rtx: NvTensorRTRTXExecutionProvider), or with trailing
    parts cut off for a variant of its library (cuda_ut, CUDA's test library); the bridge
    (`BRIDGE`); None for any other name."""
    found = _PROVIDER_LIBRARY.match(name.rsplit("/", 1)[-1])
    if found is None:
        return None
    heads = {
        p.removesuffix("ExecutionProvider").lower(): p
        for p in providers
        if p.endswith("ExecutionProvider")
    }
    parts = found[1].lower().split("_")
    if parts == [PROVIDER_BRIDGE]:
        return BRIDGE if heads else None
    for end in range(len(parts), 0, -1):
        provider = heads.get("".join(parts[:end]))
        if provider is not None:
            return provider
    return None


class ExternalMatch(Protocol):
    """The target's external group for a name (what `Target.external_group` returns)."""

    @property
    def group(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def note(self) -> str: ...


def scan_binary(path: Path, fmt: str, label: str) -> LoadScan:
    """Loader imports and library-name strings of one ELF, PE or Mach-O file."""
    try:
        if fmt == "elf":
            return _scan_elf(path)
        if fmt == "macho":
            return _scan_macho(path)
        return _scan_pe(path)
    except Exception as exc:  # noqa: BLE001 - pyelftools and pefile raise raw struct errors
        raise BinaryError(
            f"{label} cannot be read for run-time loads ({type(exc).__name__}: {exc})",
            file=label,
            fix="the library is truncated or corrupt; check the pin and the archive",
        ) from None


def _scan_elf(path: Path) -> LoadScan:
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    with path.open("rb") as stream:
        elf = ELFFile(stream)
        dynstr = elf.get_section_by_name(".dynstr")
        # most libraries open nothing: a plain substring test spares walking their symbols
        if dynstr is None or not any(
            b"\0" + call.encode() + b"\0" in b"\0" + dynstr.data() for call in ELF_LOADERS
        ):
            return LoadScan((), ())
        dynsym = elf.get_section_by_name(".dynsym")
        calls = set()
        if isinstance(dynsym, SymbolTableSection):
            for symbol in dynsym.iter_symbols():
                if symbol.name in ELF_LOADERS and symbol["st_shndx"] == "SHN_UNDEF":
                    calls.add(symbol.name)
        if not calls:
            return LoadScan((), ())
        found: set[str] = set()
        for section in elf.iter_sections():
            if section.name.startswith(".rodata"):
                found.update(m.decode("ascii") for m in _ELF_NAME.findall(section.data()))
    return LoadScan(tuple(sorted(calls)), tuple(sorted(found)))


def _scan_macho(path: Path) -> LoadScan:
    """The arm64 slice's undefined `_dlopen` family, and the dylib and framework names its C
    strings hold."""
    imports, data = imported_symbols(path)
    calls = sorted(MACHO_LOADERS.intersection(imports))
    if not calls:
        return LoadScan((), ())
    found = {m.decode("ascii") for m in _MACHO_NAME.findall(data)}
    found |= {m.decode("ascii") for m in _MACHO_FRAMEWORK.findall(data)}
    return LoadScan(tuple(calls), tuple(sorted(found)))


def _scan_pe(path: Path) -> LoadScan:
    import pefile

    pe = pefile.PE(str(path), fast_load=True)
    try:
        pe.parse_data_directories(
            directories=[
                pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"],
                pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT"],
            ]
        )
        calls = set()
        entries = [
            *getattr(pe, "DIRECTORY_ENTRY_IMPORT", []),
            *getattr(pe, "DIRECTORY_ENTRY_DELAY_IMPORT", []),
        ]
        for entry in entries:
            dll = entry.dll.decode("ascii", errors="replace").lower() if entry.dll else ""
            if not dll.startswith(_PE_LOADER_DLLS):
                continue
            for imp in entry.imports or []:
                name = imp.name.decode("ascii", errors="replace") if imp.name else ""
                if name in PE_LOADERS:
                    calls.add(name)
        if not calls:
            return LoadScan((), ())
        found: set[str] = set()
        for section in pe.sections:
            if section.Name.rstrip(b"\0") != b".rdata":
                continue
            data = section.get_data()
            found.update(m.decode("ascii") for m in _PE_NAME.findall(data))
            found.update(_wide_names(data))
    finally:
        pe.close()
    return LoadScan(tuple(sorted(calls)), tuple(sorted(found, key=str.lower)))


_NAME_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+.-"


def _wide_names(data: bytes) -> set[str]:
    """UTF-16LE library names, 2-aligned. A run whose first character follows a name
    character's byte begins with the tail of an ASCII string ("…dll\\0" right before
    L"nvcuda.dll" reads as L"lnvcuda.dll"): that character is cut off."""
    found = set()
    for match in _PE_WIDE.finditer(data):
        start, end = match.span()
        if start % 2:
            continue
        while start < end and start and _NAME_BYTES.count(data[start - 1]):
            start += 2
        name = data[start:end].decode("utf-16-le")
        if len(name) > 4 and name[0] != ".":
            found.add(name)
    return found


def runtime_loads(
    *,
    scans: Sequence[tuple[str, LoadScan]],
    staged: Iterable[str],
    loads: Sequence[str],
    ignore: Sequence[IgnoreRule],
    externals: Iterable[str],
    lookup: Callable[[str], ExternalMatch | None],
    entry: str,
    case_insensitive: bool,
    os_provides: Callable[[str], bool] = lambda _name: False,
    cores: Mapping[str, Sequence[str]] | None = None,
    optional: Sequence[str] = (),
) -> RuntimeLoads:
    """Resolve the declared loads and find the undeclared ones.

    `scans` are (staged file name, scan) of the kept files; `staged` every name the runtime
    directory answers to (files, SONAMEs, links); `externals` the names the closure already
    reports; `lookup` the target's external-group lookup (tool data and overlays); `optional`
    declared names the runtime works without (declared as `loads` are, marked optional). A declared
    name found nowhere raises UnresolvedLoad, for the caller to word as a configuration error.

    What is no finding: a name the operating system itself provides (`os_provides`: the
    target's documented system libraries), and a provider library of a core's own table
    (`cores`: each core's staged name -> the provider names it holds), which comes back as
    offered, not shipped."""

    def key(name: str) -> str:
        return name.lower() if case_insensitive else name

    present = {key(n) for n in staged}
    reported = {key(n) for n in externals}
    declared: list[DeclaredLoad] = []
    unresolved: list[str] = []
    openers = [f for f, s in scans if s.calls] or [entry]
    spare = {key(n) for n in optional}
    for name in (*loads, *optional):
        if key(name) in present or key(name) in reported:
            continue  # shipped, or linked by some kept file already
        match = lookup(name)
        if match is None:
            unresolved.append(name)
            continue
        by = [f for f, s in scans if s.calls and key(name) in {key(n) for n in s.names}]
        declared.append(
            DeclaredLoad(
                name,
                match.group,
                match.kind,
                match.note,
                tuple(sorted(by or openers)),
                optional=key(name) in spare,
            )
        )
    if unresolved:
        raise UnresolvedLoad(tuple(unresolved))
    known = present | reported | {key(n) for n in (*loads, *optional)}
    findings = []
    offered: dict[tuple[str, str], OfferedProvider] = {}
    for file, scan in sorted(scans):
        if not scan.calls:
            continue
        names = []
        for name in scan.names:
            if key(name) in known or os_provides(name):
                continue
            provider = offered_provider(name, (cores or {}).get(file, ()))
            if provider is not None:
                offered.setdefault((file, key(name)), OfferedProvider(file, name, provider))
            elif not any(fnmatch.fnmatchcase(key(name), key(g)) for r in ignore for g in r.names):
                names.append(name)
        if names:
            findings.append(LoadFinding(file, scan.calls, tuple(sorted(set(names), key=key))))
    return RuntimeLoads(
        tuple(sorted(declared, key=lambda d: key(d.name))),
        tuple(findings),
        tuple(offered[k] for k in sorted(offered)),
    )


class UnresolvedLoad(Exception):
    def __init__(self, names: tuple[str, ...]) -> None:
        super().__init__(", ".join(names))
        self.names = names


def unresolved_error(
    names: Sequence[str], *, component: str, target: str, file: str
) -> ConfigError:
    return ConfigError(
        f"the recipe's loads name {', '.join(names)}, which is neither a file of the runtime nor "
        f"an external of {target}",
        component=component,
        target=target,
        file=file,
        fix=f"declare an [[externals]] group whose names match {names[0]} (in the recipe or the "
        f"product manifest), or remove it from [targets.{target}] loads",
    )


def warning_lines(findings: Iterable[tuple[str, str, str, LoadFinding]]) -> list[str]:
    """(target, runtime, directory, finding) as the build prints them."""
    return [
        f"WARNING: {runtime} on {target}: {directory}/{f.file} can open libraries by name "
        f"({', '.join(f.calls)}) that the recipe does not declare: {', '.join(f.names)} — "
        f"declare them in [targets.{target}] loads, or explain them in "
        f"[[targets.{target}.ignore_loads]]"
        for target, runtime, directory, f in findings
    ]
