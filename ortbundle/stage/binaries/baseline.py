"""The oldest system a set of libraries runs on, from what the binaries themselves say.

ELF: the highest symbol version each library needs of each versioned system library
(`.gnu.version_r`: GLIBC_*, GLIBCXX_*, CXXABI_*, GCC_*, OPENCL_*, bionic's LIBC_N…), turned into
glibc ≥ x.y, libstdc++ from GCC ≥ n and the manylinux baseline; `.note.android.ident` and the
bionic version nodes give the Android API level. PE: the optional header's OS and subsystem
versions, the machine (Windows on Arm64 exists from Windows 10), the imported functions and DLLs
baselines.toml and windows-system-dlls.toml date (d3d12.dll: Windows 10), the API sets
windows-apisets.toml dates, and the DLLs a runtime opens by name and cannot work without (its
recipe's `loads`) give the minimum Windows version; the Visual C++ runtime DLLs give the
redistributable. Pure
functions over `BinaryInfo`, which the closure's one parse already filled, so this costs a
build nothing but arithmetic.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from ortbundle.config.schema import check_document
from ortbundle.config.targets import windows_system_dlls
from ortbundle.stage.binaries.info import BinaryInfo

# version-node families whose highest need says how old a system may be; anything else
# (GLIBC_PRIVATE, a bundled library's own nodes) says nothing about the system
FAMILIES = ("GLIBC", "GLIBCXX", "CXXABI", "GCC", "OPENCL")
_NODE = re.compile(r"^(GLIBCXX|GLIBC|CXXABI|GCC|OPENCL)_([0-9]+(?:\.[0-9]+)*)$")


@dataclass(frozen=True)
class VersionNeed:
    """The highest version of one family one system library must define."""

    library: str  # libc.so.6
    version: str  # GLIBC_2.34
    needed_by: tuple[str, ...]  # the kept libraries that need exactly this version

    @property
    def family(self) -> str:
        return self.version.rsplit("_", 1)[0]


@dataclass(frozen=True)
class Minimum:
    """One distribution-facing minimum and the evidence for it."""

    version: str  # "2.34", "13.1.0", "10.0", "24"
    why: str  # "libc.so.6 GLIBC_2.34, needed by libonnxruntime.so.1.24.1"


@dataclass(frozen=True)
class SystemBaseline:
    """What the oldest system a runtime (or a whole package) runs on must offer."""

    needs: tuple[VersionNeed, ...] = ()
    glibc: Minimum | None = None
    gcc: Minimum | None = None  # libstdc++ / libgcc_s from this GCC release or newer
    opencl: Minimum | None = None
    windows: Minimum | None = None  # NT version: "6.1", "10.0"
    msvc: Minimum | None = None  # Visual C++ redistributable toolset: "14.28"
    android_api: Minimum | None = None
    macos: Minimum | None = None  # the highest Mach-O minos: "14.0"

    @property
    def empty(self) -> bool:
        """Nothing versioned is needed (or nothing could be read)."""
        return self == SystemBaseline()

    @property
    def manylinux(self) -> str | None:
        """The effective manylinux tag (PEP 600) of the glibc baseline."""
        if self.glibc is None:
            return None
        return "manylinux_" + self.glibc.version.replace(".", "_")

    def describe(self) -> str:
        """One line: 'glibc ≥ 2.34 (manylinux_2_34), libstdc++ from GCC ≥ 13.1.0'."""
        parts = []
        if self.glibc:
            parts.append(f"glibc ≥ {self.glibc.version} ({self.manylinux})")
        if self.gcc:
            parts.append(f"libstdc++ from GCC ≥ {self.gcc.version}")
        if self.opencl:
            parts.append(f"OpenCL ≥ {self.opencl.version}")
        if self.windows:
            parts.append(f"{windows_name(self.windows.version)} ({self.windows.version})")
        if self.msvc:
            parts.append(f"Visual C++ runtime ≥ {self.msvc.version}")
        if self.android_api:
            parts.append(f"Android API ≥ {self.android_api.version}")
        if self.macos:
            parts.append(f"macOS ≥ {self.macos.version}")
        return ", ".join(parts) or "no versioned system requirement"

    def as_json(self) -> dict[str, Any]:
        """The form runtimes.json and the SBOM carry (schema: runtimes.schema.json `system`)."""
        out: dict[str, Any] = {
            "needs": [
                {"library": n.library, "version": n.version, "needed_by": list(n.needed_by)}
                for n in self.needs
            ]
        }
        for key in ("glibc", "gcc", "opencl", "windows", "msvc", "macos"):
            minimum: Minimum | None = getattr(self, key)
            if minimum is not None:
                out[key] = minimum.version
        if self.manylinux:
            out["manylinux"] = self.manylinux
        if self.android_api is not None:
            out["android_api"] = int(self.android_api.version)
        return out


@functools.cache
def _data() -> dict[str, Any]:
    text = resources.files("ortbundle").joinpath("data/baselines.toml").read_text("utf-8")
    data = tomllib.loads(text)
    check_document("ortbundle/data/baselines.toml", data, "baselines-data")
    return data


@functools.cache
def windows_functions() -> Mapping[str, Mapping[str, str]]:
    """dll (lower case) -> function -> the NT version that first exports it."""
    table: dict[str, dict[str, str]] = _data()["windows"]["functions"]
    return {dll.lower(): funcs for dll, funcs in table.items()}


@dataclass(frozen=True)
class ApiSet:
    """One API set of windows-apisets.toml: the first NT version whose schema has it."""

    name: str  # api-ms-win-core-heap-l2-1-0
    since: str  # "10.0"
    doc: str


@functools.cache
def windows_apisets() -> Mapping[str, ApiSet]:
    """API set name (lower case, no .dll) -> its record, from windows-apisets.toml."""
    path = "ortbundle/data/windows-apisets.toml"
    data = tomllib.loads(resources.files("ortbundle").joinpath(path[10:]).read_text("utf-8"))
    check_document(path, data, "windows-apisets-data")
    return {
        name: ApiSet(name, str(entry["since"]), str(entry["doc"]))
        for name, entry in data["apisets"].items()
    }


_APISET = re.compile(r"^((?:api|ext)-ms-[a-z0-9-]+-l[0-9]+-[0-9]+)-([0-9]+)$")


def apiset_floor(dll: str) -> tuple[str, str] | None:
    """The NT version an imported API set needs and how that is known: its own entry, or the
    highest lower revision of its contract (a higher revision has all a lower one has), "at
    least" that; None for a DLL that is no API set or a contract the table lacks."""
    name = dll.lower().removesuffix(".dll")
    table = windows_apisets()
    if name in table:
        return table[name].since, table[name].doc
    found = _APISET.match(name)
    if found is None:
        return None
    contract, revision = found[1], int(found[2])
    lower = [
        (int(m[2]), entry)
        for entry in table.values()
        if (m := _APISET.match(entry.name)) and m[1] == contract and int(m[2]) < revision
    ]
    if not lower:
        return None
    _, entry = max(lower, key=lambda pair: pair[0])
    return entry.since, f"at least as new as {entry.name}: {entry.doc}"


def windows_name(version: str) -> str:
    names: dict[str, str] = _data()["windows"]["names"]
    return names.get(version, f"Windows NT {version}")


def version_key(version: str) -> tuple[int, ...]:
    """'2.3.4' -> (2, 3, 4); a non-numeric part sorts as 0."""
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


def split_node(node: str) -> tuple[str, str] | None:
    """'GLIBC_2.34' -> ('GLIBC', '2.34'); None for GLIBC_PRIVATE and other families."""
    match = _NODE.match(node)
    return (match.group(1), match.group(2)) if match else None


def version_maxima(libraries: Iterable[tuple[str, BinaryInfo]]) -> tuple[VersionNeed, ...]:
    """Per system library and family, the highest version any of `libraries` needs.

    This is what auditwheel reports per library ("references GLIBC_2.34 in libc.so.6"), reduced
    to the maximum, which alone decides whether a system's library is new enough.
    """
    best: dict[tuple[str, str], tuple[tuple[int, ...], str, set[str]]] = {}
    for name, info in libraries:
        for library, node in info.version_needs:
            parsed = split_node(node)
            if parsed is None:
                continue
            family, number = parsed
            key = version_key(number)
            current = best.get((library, family))
            if current is None or key > current[0]:
                best[(library, family)] = (key, node, {name})
            elif key == current[0]:
                current[2].add(name)
    return tuple(
        VersionNeed(library, node, tuple(sorted(users)))
        for (library, _family), (_key, node, users) in sorted(best.items())
    )


def _why(need: VersionNeed) -> str:
    users = ", ".join(need.needed_by[:2]) + (" …" if len(need.needed_by) > 2 else "")
    return f"{need.library} {need.version}, needed by {users}"


def _highest(candidates: Iterable[Minimum]) -> Minimum | None:
    return max(candidates, key=lambda m: version_key(m.version), default=None)


def _gcc_release(need: VersionNeed) -> Minimum | None:
    family, number = need.family, need.version.rsplit("_", 1)[1]
    if family not in ("GLIBCXX", "CXXABI", "GCC"):
        return None
    table: dict[str, str] = _data()["gcc"][family]
    release = table.get(number)
    if release is None:
        known = max(table, key=version_key) if table else None
        if known is None or version_key(number) <= version_key(known):
            return None  # older than the table's first entry: any GCC of this century
        # newer than the table knows: say so instead of guessing a release
        return Minimum(f"{table[known]}+", f"{_why(need)} (newer than baselines.toml knows)")
    return Minimum(release, _why(need))


def _android(libraries: list[tuple[str, BinaryInfo]]) -> Minimum | None:
    nodes: dict[str, int] = _data()["android"]["nodes"]
    found: list[Minimum] = []
    for name, info in libraries:
        if info.android_api:
            api = str(info.android_api)
            found.append(Minimum(api, f"{name} is built for API {api} (.note.android.ident)"))
        for library, node in info.version_needs:
            if node in nodes:
                found.append(Minimum(str(nodes[node]), f"{library} {node}, needed by {name}"))
    return _highest(found)


def windows_dll_since() -> dict[str, str]:
    """DLL (lower case) -> the NT version it first ships in, where newer than Windows 7."""
    return {
        **_data()["windows"]["dlls"],
        **{d.name: d.since for d in windows_system_dlls().dlls if d.since},
    }


def _windows(
    libraries: list[tuple[str, BinaryInfo]], opened: list[tuple[str, str]]
) -> tuple[Minimum | None, Minimum | None]:
    dlls = windows_dll_since()
    machines: dict[str, str] = _data()["windows"]["machines"]
    msvc: dict[str, list[str]] = _data()["msvc"]
    functions = windows_functions()
    found: list[Minimum] = []
    runtimes: list[Minimum] = []
    for name, info in libraries:
        if info.format != "pe":
            continue
        for field, value in (("OS", info.os_version), ("subsystem", info.subsystem_version)):
            if value and value != "0.0":
                found.append(Minimum(value, f"{name} declares {field} version {value}"))
        if info.machine in machines:
            floor = machines[info.machine]
            found.append(
                Minimum(
                    floor,
                    f"{name} is built for {info.machine}: Windows runs there from "
                    f"{windows_name(floor)}",
                )
            )
        for dll, function in info.versioned_imports:
            version = functions.get(dll, {}).get(function)
            if version:
                found.append(Minimum(version, f"{name} imports {function} from {dll}"))
        for dll in info.all_needed:
            lower = dll.lower()
            if lower in dlls:  # a DLL older Windows lacks: its loader refuses the importer
                found.append(Minimum(dlls[lower], f"{name} imports {dll}"))
            apiset = apiset_floor(lower)
            if apiset is not None:
                found.append(Minimum(apiset[0], f"{name} imports the API set {dll} ({apiset[1]})"))
            if lower in msvc:
                toolset, release = msvc[lower]
                runtimes.append(Minimum(toolset, f"{name} imports {dll} ({release})"))
    # opened by name and needed: LoadLibrary fails on an older Windows (after the imports: of
    # equal floors, the loader's own refusal is the one to name)
    for opener, dll in opened:
        if dll.lower() in dlls:
            found.append(Minimum(dlls[dll.lower()], f"{opener} opens {dll} by name"))
    return _highest(found), _highest(runtimes)


def baseline(
    libraries: Iterable[tuple[str, BinaryInfo]], opened: Iterable[tuple[str, str]] = ()
) -> SystemBaseline:
    """The system baseline of `libraries` (name, info): one runtime's kept set, or a package's;
    `opened` are (opener, library) the libraries open by name at run time and cannot work
    without (a recipe's `loads`, not its `optional_loads`).

    Names are what a person should read in a message (the staged path, for a package)."""
    libs = list(libraries)
    needs = version_maxima(libs)
    glibc = _highest(
        Minimum(n.version.removeprefix("GLIBC_"), _why(n)) for n in needs if n.family == "GLIBC"
    )
    gcc = _highest(m for n in needs if (m := _gcc_release(n)) is not None)
    opencl = _highest(
        Minimum(n.version.removeprefix("OPENCL_"), _why(n)) for n in needs if n.family == "OPENCL"
    )
    windows, msvc = _windows(libs, list(opened))
    return SystemBaseline(
        needs=needs,
        glibc=glibc,
        gcc=gcc,
        opencl=opencl,
        windows=windows,
        msvc=msvc,
        android_api=_android(libs),
        macos=_highest(
            Minimum(info.os_version, f"{name} declares minos {info.os_version} (LC_BUILD_VERSION)")
            for name, info in libs
            if info.format == "macho" and info.os_version
        ),
    )


# --- rendering, for every channel ------------------------------------------------------------

# how each packaging format writes "package at least version"
_STYLES = {
    "arch": "{package}>={version}",
    "deb": "{package} (>= {version})",
    "rpm": "{package} >= {version}",
}


def group_minimum(system: SystemBaseline, group: str) -> str | None:
    """The minimum version of a targets.toml external group the binaries need, if any:
    `glibc` -> the glibc baseline, `gcc-libs` -> the GCC release of libstdc++/libgcc_s."""
    if group == "glibc" and system.glibc:
        return system.glibc.version
    if group == "gcc-libs" and system.gcc and not system.gcc.version.endswith("+"):
        return system.gcc.version
    return None


def render_dependency(package: str, group: str, system: SystemBaseline | None, style: str) -> str:
    """`package` with the version constraint its group needs, in a channel's syntax:
    ('glibc', 'glibc', arch) -> 'glibc>=2.34'; ('libc6', 'glibc', deb) -> 'libc6 (>= 2.34)';
    ('glibc', 'glibc', rpm) -> 'glibc >= 2.34'. No known minimum: the bare name."""
    if style not in _STYLES:
        raise ValueError(f"unknown dependency style {style!r}; one of {', '.join(_STYLES)}")
    minimum = group_minimum(system, group) if system is not None else None
    if minimum is None:
        return package
    return _STYLES[style].format(package=package, version=minimum)
