"""What a recipe for one target could say, read from the archive: which members are native
libraries of the target's machine, what each needs, which nothing else needs (the roots), which
to drop (Python and Java bindings, test binaries, another machine's files, with reasons), what
the component is and offers (a core or a plugin EP, by what its libraries export; its providers
and EP name, by what they carry), and where the licence texts and the licence expression are.
Every guess carries its reason, which the written recipe repeats as a comment."""

from __future__ import annotations

import ast
import fnmatch
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet

from ortbundle._core.errors import BinaryError, ClosureError
from ortbundle.config.gpu_vendors import vendor_of
from ortbundle.config.recipes import Drop
from ortbundle.config.targets import Target
from ortbundle.fetch.archives import ZipArchive
from ortbundle.stage.binaries import inspect
from ortbundle.stage.binaries.info import (
    CORE_EXPORT,
    CUSTOM_OPS_EXPORT,
    PLUGIN_EXPORTS,
    ROLE_EXPORTS,
    BinaryInfo,
    core_names,
    role,
)
from ortbundle.stage.binaries.loads import scan_binary
from ortbundle.stage.binaries.providers import CPU
from ortbundle.stage.closure import Candidate, Materialized


@dataclass(frozen=True)
class Library:
    """Byte-identical members: one library under one or more names."""

    names: tuple[str, ...]
    members: tuple[str, ...]
    staged: str  # the name the stage ships it under (its SONAME when a member has it)
    size: int
    sha256: str
    path: Path  # extracted, for the closure check
    info: BinaryInfo


@dataclass(frozen=True)
class Licence:
    expression: str
    why: str  # where the expression came from ("guessed …" when it is a guess)
    texts: tuple[str, ...]  # archive members
    left_out: tuple[str, ...] = ()  # texts whose file name another text already has

    @property
    def guessed(self) -> bool:
        """The expression is a guess a person checks (not the archive's own declaration, nor a
        declaration its own licence text bears out)."""
        return self.why.startswith(("guessed", "unknown"))


@dataclass(frozen=True)
class ProposedRule:
    """One [[licenses]] rule as the scaffold proposes it (tools/scaffold/licences.py)."""

    component: str
    version: str
    expression: str
    why: str  # where the expression came from
    files: tuple[str, ...]  # globs over staged names
    files_why: str  # the evidence that put these files together
    texts: tuple[str, ...]  # archive members
    guessed: tuple[str, ...]  # the keys above that are guesses
    left_out: tuple[str, ...] = ()  # texts whose file name another text already has


@dataclass(frozen=True)
class Proposal:
    """One target's part of the recipe."""

    target: str
    source: str
    takes: tuple[str, ...]
    entry: str
    entry_why: str
    roots: tuple[str, ...]
    drops: tuple[Drop, ...]
    licence: Licence
    libraries: tuple[Library, ...]
    needs: dict[str, tuple[str, ...]]  # kept staged name → staged names of what it needs
    dropped: dict[str, str]  # staged name → why it is dropped
    externals: tuple[tuple[str, str], ...]  # (needed name, group) the target allows
    unresolved: tuple[tuple[str, str], ...]  # (staged name, needed name) nothing provides
    candidates: tuple[Candidate, ...]  # for the closure check
    providers: tuple[str, ...]
    providers_why: str = ""
    kind: str = "runtime"  # or "plugin-ep", "custom-ops", "uses-core": what the entry says
    ep_name: str = ""  # a plugin EP's, when its library names one
    ep_name_why: str = ""
    min_core: str = ""  # a plugin EP's oldest core
    min_core_why: str = ""
    core_requirement: str = ""  # what the wheel requires of onnxruntime (">=1.29,<1.31"); "": none
    rules: tuple[ProposedRule, ...] = ()  # the licence rules, split by the files' evidence


_ELF_LIB = ("*.so", "*.so.*")
_PE_LIB = ("*.dll", "*.pyd")
_MACHO_LIB = ("*.dylib", "*.so")  # a Python extension on macOS is a Mach-O bundle named .so
_LIBRARIES = {"elf": _ELF_LIB, "pe": _PE_LIB, "macho": _MACHO_LIB}
_PYTHON = re.compile(r"(\.pyd$|pybind|\.cpython-|\.abi3\.so$)")
_PYTHON_NEEDS = re.compile(r"^(libpython[0-9.]*\.so|python3[0-9]*\.dll)", re.IGNORECASE)
_JAVA = re.compile(r"(_jni|4j)", re.IGNORECASE)
_TEST = re.compile(r"(^|[_.-])tests?([_.-]|$)|^test", re.IGNORECASE)
_CORE = re.compile(r"^(lib)?onnxruntime\.((\d+\.)*dylib|so|dll)(\.|$)", re.IGNORECASE)
_VERSIONED = re.compile(r"^(.+\.so)((\.\d+)+)$")
_VERSIONED_DYLIB = re.compile(r"^(.+?)((\.\d+)+)\.dylib$")  # libonnxruntime.1.32.0.dylib
_TEXT = re.compile(r"^(licen[cs]e|notice|copying|thirdpartynotices|third[-_]party)", re.IGNORECASE)
# provider library stem → EP name (the GPU vendor each serves: ortbundle/data/gpu-vendors.toml)
PROVIDERS = {
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
    "nv_tensorrt_rtx": "NvTensorRTRTXExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "rocm": "ROCMExecutionProvider",
    "migraphx": "MIGraphXExecutionProvider",
    "dnnl": "DnnlExecutionProvider",
    "qnn": "QNNExecutionProvider",
    "vitisai": "VitisAIExecutionProvider",
    "dml": "DmlExecutionProvider",
    "webgpu": "WebGpuExecutionProvider",
}
_CLASSIFIERS = {
    "MIT License": "MIT",
    "Apache Software License": "Apache-2.0",
    "BSD License": "BSD-3-Clause",
    "ISC License (ISCL)": "ISC",
}


def version_glob(name: str) -> str:
    """`libonnxruntime.so.1.24.1` → `libonnxruntime.so.*.*.*`: survives `invoke pin`."""
    m = _VERSIONED.match(name)
    if m:
        return f"{m[1]}{'.*' * m[2].count('.')}"
    d = _VERSIONED_DYLIB.match(name)
    return f"{d[1]}{'.*' * d[2].count('.')}.dylib" if d else name


def root_glob(name: str) -> str:
    """`libonnxruntime.so.1.24.1` → `libonnxruntime.so.*`."""
    m = _VERSIONED.match(name)
    if m:
        return f"{m[1]}.*"
    d = _VERSIONED_DYLIB.match(name)
    return f"{d[1]}.*.dylib" if d else name


def _is_library(member: str, target: Target) -> bool:
    base = PurePosixPath(member).name
    if target.abi is not None and not member.startswith(f"jni/{target.abi}/"):
        return False
    patterns = _LIBRARIES[target.format]
    return any(fnmatch.fnmatchcase(base.lower(), p) for p in patterns)


def _takes(members: list[str], target: Target) -> tuple[str, ...]:
    """One glob per directory and pattern that holds libraries."""
    out: set[str] = set()
    for member in members:
        directory = str(PurePosixPath(member).parent)
        prefix = "" if directory == "." else f"{directory}/"
        patterns = _LIBRARIES[target.format]
        for pattern in patterns:
            if fnmatch.fnmatchcase(PurePosixPath(member).name.lower(), pattern):
                out.add(f"{prefix}{pattern}")
    return tuple(sorted(out))


def _drop_reason(lib: Library, target: Target) -> str | None:
    if lib.info.machine != target.machine or lib.info.format != target.format:
        return f"built for {lib.info.format.upper()} {lib.info.machine}, not {target.name}"
    if role(lib.info) == "custom-ops":  # a session loads it (RegisterCustomOpsLibrary)
        return None
    names = lib.names
    if any(_PYTHON.search(n) for n in names) or any(
        _PYTHON_NEEDS.match(n) for n in lib.info.needed
    ):
        return "Python binding"
    if any(_JAVA.search(n) for n in names):
        return "Java binding (the application calls the C API through its own JNI)"
    if any(_TEST.search(n) for n in names):
        return "test binary"
    return None


def propose(
    target: Target, source: str, archive: ZipArchive, scratch: Path, *, component: str
) -> tuple[Proposal | None, tuple[str, ...]]:
    """One target's proposal (None when the archive holds no library for it) and notes."""
    library_members = sorted(m for m in archive.members if _is_library(m, target))
    by_sha: dict[str, list[tuple[str, Path, int]]] = {}
    for number, member in enumerate(library_members):
        got = archive.extract(member, scratch / f"{number}-{PurePosixPath(member).name}")
        by_sha.setdefault(got.sha256, []).append((member, got.path, got.size))
    libraries: list[Library] = []
    unreadable: dict[str, str] = {}  # file name → why the build must not open it
    for sha256, found in sorted(by_sha.items()):
        members = tuple(m for m, _, _ in found)
        names = tuple(sorted({PurePosixPath(m).name for m in members}))
        try:
            info = inspect(found[0][1], name=f"{source}:{members[0]}")
        except BinaryError as exc:
            unreadable.update((n, f"not a native library ({exc.message})") for n in names)
            continue
        staged = (
            info.soname if info.soname in names else sorted(names, key=lambda n: (-len(n), n))[0]
        )
        libraries.append(Library(names, members, staged, found[0][2], sha256, found[0][1], info))
    if not libraries:
        return None, _left_out(target, unreadable)
    key = target.key
    by_name = {key(n): lib for lib in libraries for n in (*lib.names, lib.info.soname or "") if n}
    drops: dict[str, str] = {
        lib.staged: r for lib in libraries if (r := _drop_reason(lib, target)) is not None
    }

    def needed_libs(lib: Library) -> list[Library]:
        return [d for n in lib.info.all_needed if (d := by_name.get(key(n))) and d is not lib]

    changed = True
    while changed:  # a binding something kept needs is not a binding: keep it
        changed = False
        for lib in libraries:
            if lib.staged in drops:
                continue
            for dep in needed_libs(lib):
                if dep.staged in drops and not drops[dep.staged].startswith("built for"):
                    del drops[dep.staged]
                    changed = True
    kept = [lib for lib in libraries if lib.staged not in drops]
    needs = {lib.staged: tuple(sorted({d.staged for d in needed_libs(lib)})) for lib in kept}
    needed_by_others = {d for lib, ds in needs.items() for d in ds if d != lib}
    roots = [lib for lib in kept if lib.staged not in needed_by_others]
    reached = _reach({r.staged for r in roots}, needs)
    roots += [lib for lib in kept if lib.staged not in reached]  # a cycle nothing outside needs
    externals: set[tuple[str, str]] = set()
    unresolved: list[tuple[str, str]] = []
    for lib in kept:
        for name in lib.info.all_needed:
            if key(name) in by_name:
                continue
            group = target.external_group(name)
            if group is not None:
                externals.add((name, group.group))
            else:
                unresolved.append((lib.staged, name))
    identity = _identity(kept, needs, libraries)
    if identity.kind == "plugin-ep" and not identity.ep_name:
        identity = _python_ep_name(identity, archive, scratch)
    requirement, requirement_text = core_requirement(archive, scratch)
    min_core, min_core_why = (
        _min_core(requirement, requirement_text) if identity.kind == "plugin-ep" else ("", "")
    )
    drop_rules = _drop_rules(
        {n: r for lib in libraries if (r := drops.get(lib.staged)) for n in lib.names} | unreadable
    )
    candidates = tuple(
        Candidate(source, m, PurePosixPath(m).name, lib.size, lib.sha256)
        for lib in libraries
        for m in lib.members
    )
    return (
        Proposal(
            target=target.name,
            source=source,
            takes=_takes([m for lib in libraries for m in lib.members], target),
            entry=version_glob(identity.entry.staged),
            entry_why=identity.entry_why,
            roots=tuple(sorted({root_glob(r.staged) for r in roots})),
            drops=drop_rules,
            licence=licence(archive, scratch, component),
            libraries=tuple(libraries),
            needs=needs,
            dropped=drops,
            externals=tuple(sorted(externals)),
            unresolved=tuple(unresolved),
            candidates=candidates,
            providers=identity.providers,
            providers_why=identity.providers_why,
            kind=identity.kind,
            ep_name=identity.ep_name,
            ep_name_why=identity.ep_name_why,
            min_core=min_core,
            min_core_why=min_core_why,
            core_requirement=requirement,
        ),
        _left_out(target, unreadable),
    )


@dataclass(frozen=True)
class _Identity:
    """What the kept libraries say the component is: its kind, entry, providers, EP name."""

    kind: str
    entry: Library
    entry_why: str
    providers: tuple[str, ...]
    providers_why: str
    ep_name: str = ""
    ep_name_why: str = ""


def _identity(
    kept: list[Library], needs: dict[str, tuple[str, ...]], libraries: list[Library]
) -> _Identity:
    """A core (it exports OrtGetApiBase) makes a runtime, offering what its provider table
    marks available; else a plugin (CreateEpFactories and ReleaseEpFactory) makes a plugin EP,
    named by the provider name it carries; else a library exporting RegisterCustomOps makes a
    custom-operator library; else one that links or opens a core makes a library that uses a
    core; else the entry is a guess the user must settle."""
    cores = [lib for lib in kept if role(lib.info) == "core"]
    plugins = [lib for lib in kept if role(lib.info) == "plugin-ep"]
    if cores:
        core = cores[0]
        table = tuple(dict.fromkeys(p for lib in cores for p in lib.info.available_providers))
        if table:
            providers, why = (
                table,
                (
                    "read from the core's exports (OrtSessionOptionsAppendExecutionProvider_*): a "
                    "Mach-O's provider table is not read"
                    if core.info.format == "macho"
                    else "read from the core's provider table (GetAvailableProviders)"
                ),
            )
        else:
            providers = _providers(kept)
            why = "guessed from the provider libraries it carries: the core holds no table"
        return _Identity(
            "runtime", core, f"{core.staged} exports {CORE_EXPORT}: the ONNX Runtime core",
            providers, why,
        )  # fmt: skip
    if plugins:
        plugin = plugins[0]
        names = [n for n in plugin.info.ep_names if n != CPU]
        if len(names) == 1:
            ep_name, ep_why = names[0], f"the provider name {plugin.staged} carries"
        elif names:
            ep_name = names[0]
            ep_why = (
                f"guessed: {plugin.staged} carries {', '.join(names)}; keep the one it registers"
            )
        else:
            ep_name, ep_why = "", ""
        return _Identity(
            "plugin-ep",
            plugin,
            f"{plugin.staged} exports {' and '.join(PLUGIN_EXPORTS)}: a plugin EP",
            (ep_name,) if ep_name else (),
            "the provider it adds to the core it registers with: its EP name",
            ep_name,
            ep_why,
        )
    custom = [lib for lib in kept if role(lib.info) == "custom-ops"]
    if custom:
        entry = custom[0]
        return _Identity(
            "custom-ops", entry, f"{entry.staged} exports {CUSTOM_OPS_EXPORT}: a custom-operator "
            "library (a session loads it with RegisterCustomOpsLibrary)",
            (), "a custom-operator library adds operators, not providers",
        )  # fmt: skip
    users = [(lib, used) for lib in kept if (used := _uses_core(lib))]
    if users:
        entry, used = max(users, key=lambda u: (not needs.get(u[0].staged), u[0].size))
        return _Identity(
            "uses-core", entry,
            f"{entry.staged} links or opens {', '.join(used)}: a library that uses a core",
            (), "a library that uses a core adds no provider of its own",
        )  # fmt: skip
    raise _none_of_the_family(libraries)


def _uses_core(lib: Library) -> tuple[str, ...]:
    """The core names a library links, or opens by name at run time (GenAI on Windows)."""
    linked = core_names(lib.info.all_needed)
    if linked:
        return linked
    scan = scan_binary(lib.path, lib.info.format, lib.staged)
    return core_names(scan.names)


def notable(info: BinaryInfo) -> str:
    """What a library exports that says what it is to ONNX Runtime, in words."""
    some = [name for name in ROLE_EXPORTS if name in info.exports]
    if some:
        return f"exports {', '.join(some)}"
    shown = ", ".join(info.exports[:5]) + (" …" if len(info.exports) > 5 else "")
    return f"exports {shown}" if shown else "exports nothing"


def _none_of_the_family(libraries: list[Library]) -> ClosureError:
    """No library, kept or dropped, is of the ONNX Runtime family: a recipe of a kind the build
    refuses would be worse than none (exit 8, as a choice left to the user)."""
    found = "; ".join(f"{lib.staged} ({notable(lib.info)})" for lib in libraries)
    return ClosureError(
        f"no library is an ONNX Runtime core ({CORE_EXPORT}), a plugin EP "
        f"({' and '.join(PLUGIN_EXPORTS)}), a custom-operator library ({CUSTOM_OPS_EXPORT}) or "
        f"one that uses a core (links or opens onnxruntime); found: {found}",
        fix="pick the coordinates of an ONNX Runtime package, or write the recipe by hand",
    )


def _left_out(target: Target, unreadable: dict[str, str]) -> tuple[str, ...]:
    return tuple(f"{target.name}: {n} dropped: {r}" for n, r in sorted(unreadable.items()))


def materializer(proposal: Proposal) -> Callable[[Candidate], Materialized]:
    """The closure check's view of a candidate: the file read while proposing."""
    files = {
        m: Materialized(lib.path, lib.sha256, lib.size, lib.info)
        for lib in proposal.libraries
        for m in lib.members
    }
    return lambda candidate: files[candidate.member]


def _reach(start: set[str], needs: dict[str, tuple[str, ...]]) -> set[str]:
    seen, todo = set(start), list(start)
    while todo:
        for dep in needs.get(todo.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def _drop_rules(drops: dict[str, str]) -> tuple[Drop, ...]:
    """One rule per reason over every name of a dropped library; a Python binding's names by
    its glob."""
    by_reason: dict[str, list[str]] = {}
    for name, reason in sorted(drops.items()):
        if reason == "Python binding" and name.endswith(".pyd"):
            name = "*.pyd"
        elif reason == "Python binding" and "pybind11_state" in name:
            name = "onnxruntime_pybind11_state*"
        by_reason.setdefault(reason, [])
        if name not in by_reason[reason]:
            by_reason[reason].append(name)
    return tuple(Drop(tuple(names), reason) for reason, names in by_reason.items())


def _providers(kept: list[Library]) -> tuple[str, ...]:
    """The providers a core with no table offers: one per provider library it carries, then
    CPU."""
    found = []
    for lib in kept:
        m = re.search(r"onnxruntime_providers_([a-z_]+?)(\.so|\.dll)", lib.staged.lower())
        if m and m[1] in PROVIDERS:
            found.append(PROVIDERS[m[1]])
    return (*sorted(set(found) - {CPU}), CPU)


def gpu_vendors(providers: tuple[str, ...]) -> tuple[str, ...]:
    """The vendors whose hardware the providers serve, sorted (the recipe's `gpu_vendors`)."""
    return tuple(sorted({v for v in map(vendor_of, providers) if v is not None}))


FIRST_PLUGIN_CORE = "1.22.0"  # the first ONNX Runtime with RegisterExecutionProviderLibrary
# the core's distributions: onnxruntime, onnxruntime-gpu, onnxruntime-directml …, not
# onnxruntime-genai or onnxruntime-extensions, which are not cores
_CORE_DISTRIBUTION = re.compile(
    r"^onnxruntime([-_.](gpu|directml|openvino|cann|qnn|rocm|migraphx|webgpu|training))?$"
)


def core_requirement(archive: ZipArchive, scratch: Path) -> tuple[str, str]:
    """(specifier, the Requires-Dist line) of what the wheel requires of an ONNX Runtime core
    (`<1.31,>=1.29`); ("", "") when it states none or only a bare name."""
    metadata = sorted(n for n in archive.members if n.endswith(".dist-info/METADATA"))
    if not metadata:
        return "", ""
    headers = HeaderParser().parsestr(read_text(archive, metadata[0], scratch))
    for line in headers.get_all("Requires-Dist") or []:
        try:
            requirement = Requirement(str(line))
        except InvalidRequirement:
            continue
        if _CORE_DISTRIBUTION.match(requirement.name.lower()) and str(requirement.specifier):
            return str(requirement.specifier), str(line).strip()
    return "", ""


def _min_core(requirement: str, line: str) -> tuple[str, str]:
    """A plugin EP's oldest core, and why: the lower bound of the onnxruntime version its wheel
    requires, else the first release plugins can register with."""
    lower = [s.version for s in SpecifierSet(requirement) if s.operator in (">=", "==", "~=")]
    if lower:
        return lower[0], f"the wheel requires {line}"
    return FIRST_PLUGIN_CORE, (
        "guessed: the first ONNX Runtime that registers plugin EPs; the archive states none"
    )


def stated_ep_name(source: str) -> str | None:
    """The EP name a plugin's Python package states, read (never run) from its source: what
    its `get_ep_name()` returns (a string, or a module constant holding one: NVIDIA's
    `_KNOWN_EP_NAME`), else a module-level `EP_NAME = "…"` (onnxruntime-ggml's)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    constants = {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "get_ep_name":
            for returned in ast.walk(node):
                if isinstance(returned, ast.Return) and returned.value is not None:
                    value = returned.value
                    if isinstance(value, ast.Constant) and isinstance(value.value, str):
                        return value.value
                    if isinstance(value, ast.Name) and value.id in constants:
                        return constants[value.id]
    return constants.get("EP_NAME")


def _python_ep_name(identity: _Identity, archive: ZipArchive, scratch: Path) -> _Identity:
    """A plugin whose library carries no provider name: the EP name its Python package states
    (`get_ep_name()`, or `EP_NAME = "ggml"`), which is what the package registers the library
    under."""
    for member in sorted(m for m in archive.members if m.endswith(".py")):
        found = stated_ep_name(read_text(archive, member, scratch, limit=1 << 18))
        if found and _EP_WORD.match(found):
            return replace(
                identity,
                ep_name=found,
                ep_name_why=f"the EP name its Python package states ({member})",
                providers=(found,),
            )
    return identity


_EP_WORD = re.compile(r"^[A-Za-z0-9_.-]+$")


# --- licences -----------------------------------------------------------------------------------


def _text_members(archive: ZipArchive) -> tuple[list[str], list[str]]:
    """(texts, left out): the stage puts texts under licenses/<component>/<file name>, so of
    two with one file name only the first is taken (the dist-info's PEP 639 ones first)."""
    out = []
    for name in archive.members:
        path = PurePosixPath(name)
        in_licenses = ".dist-info/licenses/" in name or ".dist-info/licences/" in name
        if (in_licenses or _TEXT.match(path.name)) and path.suffix.lower() not in (
            ".py",
            ".so",
            ".dll",
            ".pyd",
            ".h",
            ".pyc",
        ):
            out.append(name)
    taken: dict[str, str] = {}
    left_out = []
    for name in sorted(out, key=lambda n: (".dist-info/" not in n, n)):
        base = PurePosixPath(name).name
        if base in taken:
            left_out.append(name)
        else:
            taken[base] = name
    return sorted(taken.values()), left_out


def read_text(archive: ZipArchive, member: str, scratch: Path, limit: int = 1 << 20) -> str:
    """An archive member as text ("" past `limit`: a notice is not that large)."""
    if archive.members[member].size > limit:
        return ""
    got = archive.extract(member, scratch / f"text-{len(list(scratch.iterdir()))}")
    return got.path.read_text("utf-8", errors="replace")


def _from_text(text: str) -> str | None:
    head = " ".join(text.split())[:2000]
    if "Permission is hereby granted, free of charge" in head:
        return "MIT"
    if "Apache License" in head and "Version 2.0" in head:
        return "Apache-2.0"
    if "Redistribution and use in source and binary forms" in head:
        return "BSD-3-Clause" if "endorse or promote" in head else "BSD-2-Clause"
    return None


_LICENCE_FILE = re.compile(r"^(licen[cs]e|copying)([-_.].*)?$", re.IGNORECASE)


def _declared(
    expression: str,
    said: str,
    readings: Sequence[tuple[str, str]],
    texts: tuple[str, ...],
    left_out: Sequence[str],
) -> Licence:
    """A licence the metadata declares in a field that is no SPDX expression: read, when the
    archive's own licence text is that licence's (onnxruntime's classifier 'MIT License' and its
    LICENSE, the MIT text); a guess otherwise (a classifier says "BSD" of three licences)."""
    # a licence file, not a notice: a third-party notice may open with another's MIT text
    agree = [
        text
        for text, read in readings
        if read == expression and _LICENCE_FILE.match(PurePosixPath(text).name)
    ]
    if agree:
        return Licence(expression, f"{said} and the text of {agree[0]} agree", texts, (*left_out,))
    return Licence(expression, f"guessed: {said}", texts, (*left_out,))


def licence(archive: ZipArchive, scratch: Path, component: str) -> Licence:
    """The texts the archive carries and the best-founded expression: the wheel's
    License-Expression, else its License field or classifier, else package.json's licence,
    else what the first text reads like; else a LicenseRef the user must replace."""
    found, left_out = _text_members(archive)
    texts = tuple(found)
    # what each licence text reads as, where it reads as one: the bytes that bear out (or not)
    # what the metadata declares
    readings = [
        (text, read) for text in texts if (read := _from_text(read_text(archive, text, scratch)))
    ]
    metadata = sorted(n for n in archive.members if n.endswith(".dist-info/METADATA"))
    if metadata:
        headers = HeaderParser().parsestr(read_text(archive, metadata[0], scratch))
        if headers.get("License-Expression"):
            return Licence(
                str(headers["License-Expression"]),
                "the wheel's License-Expression",
                texts,
                tuple(left_out),
            )
        field = str(headers.get("License") or "").strip()
        if field and re.match(r"^[A-Za-z0-9.+-]+$", field) and len(field) < 40:
            return _declared(field, "the wheel's License field", readings, texts, left_out)
        for classifier in headers.get_all("Classifier") or []:
            tail = str(classifier).rsplit("::", 1)[-1].strip()
            if tail in _CLASSIFIERS:
                said = f"the classifier {tail!r}"
                return _declared(_CLASSIFIERS[tail], said, readings, texts, left_out)
    package = [n for n in archive.members if n.endswith("package.json")]
    if package:
        try:
            declared = json.loads(read_text(archive, sorted(package)[0], scratch)).get("license")
        except (ValueError, AttributeError):
            declared = None
        if isinstance(declared, str) and declared:
            return _declared(declared, "package.json's license", readings, texts, left_out)
    for text, read in readings:
        return Licence(read, f"guessed from the text of {text}", texts, tuple(left_out))
    unknown = f"LicenseRef-{component}-unknown"
    return Licence(
        unknown, "unknown: the archive declares none; replace it", texts, tuple(left_out)
    )
