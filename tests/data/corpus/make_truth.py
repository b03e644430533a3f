#!/usr/bin/env python3
"""Write the conformance corpus's truth tables from independent readers.

Standalone on purpose: it imports nothing of ortbundle, so the tables it writes can be held
against ortbundle's own readers.  Every fact is read with a tool of its own (readelf,
llvm-readobj, llvm-objdump, llvm-nm, strings, pefile) and carries the command that produced it
(`how`), with paths relative to the unpacked wheel (`unzip WHEEL -d W`).

    python3 tests/data/corpus/make_truth.py --download   # pip download the pins into the cache
    python3 tests/data/corpus/make_truth.py              # read the cache, write <package>.toml

The cache is /work/corpus-cache unless ORT_CORPUS_CACHE says otherwise; wheels never enter the
repository.
"""

from __future__ import annotations

import argparse
import email.parser
import functools
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pefile
import tomlkit

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("ORT_CORPUS_CACHE", "/work/corpus-cache"))

STRINGS = "strings -a -n 6"
STRINGS_WIDE = "strings -a -n 6 -el (a first letter that ends an ASCII string cut off)"

# Exported symbols that say what a library is, or how it is entered.
KIND_SYMBOLS = {
    "OrtGetApiBase": "core",
    "CreateEpFactories": "plugin-ep",
    "RegisterCustomOps": "custom-ops",
}
ENTRY_RE = re.compile(
    r"^(OrtGetApiBase|CreateEpFactories|ReleaseEpFactory|RegisterCustomOps|"
    r"RegisterCustomOpsAltName|AddExternalCustomOp|GetActiveOrtAPIVersion|GetProvider|"
    r"OrtSessionOptionsAppendExecutionProvider_\w+|OgaCreateModel|OgaCreateGenerator|PyInit_\w+)$"
)
# A library that links or names one of these uses a core.
CORE_NAME_RE = re.compile(
    r"^(libonnxruntime\.so(\.[0-9]+)*|onnxruntime\.dll|libonnxruntime(\.[0-9]+)*\.dylib|"
    r"@rpath/libonnxruntime(\.[0-9]+)*\.dylib)$",
    re.IGNORECASE,
)
PROVIDER_RE = r"(?<![@?$.])\b(?!Register|Create|Append|IExecutionProvider)[A-Z][A-Za-z0-9]*ExecutionProvider\b(?!@)"
EP_NAME_PY_RE = r"(?:EP_NAME|ep_name)\s*=\s*[\"\x27]([^\"\x27]+)[\"\x27]"

# Run-time loads named in a library's strings, by format.
LOAD_NAME_RE = {
    "ELF": r"\blib[A-Za-z0-9_+.-]*\.so(\.[0-9]+)*\b",
    "PE": r"\b[A-Za-z0-9_.-]+\.[dD][lL][lL]\b",
    "Mach-O": (
        r"(/[A-Za-z0-9_./+-]+\.framework(?:/Versions/[A-Za-z0-9]+)?/[A-Za-z0-9_+-]+"
        r"|/[A-Za-z0-9_./+-]+\.dylib\b|\b[A-Za-z0-9_.+-]+\.dylib\b)"
    ),
}

# Embedded third-party code, recognised by a version or copyright string. Each pattern is a
# Perl regex (grep -oP); group 1, when present, is the version.
COMPONENTS: list[tuple[str, str]] = [
    (
        "zlib",
        r"(?:de|in)flate ([0-9]+\.[0-9]+\.[0-9]+(?:\.[0-9]+)?) Copyright [0-9-]+ (?:Jean-loup Gailly|Mark Adler)",
    ),
    ("libpng", r"libpng version ([0-9]+\.[0-9]+\.[0-9]+)"),
    ("libpng", r"Copyright \(c\) [0-9-]+ Cosmin Truta"),
    ("libjpeg-turbo", r"libjpeg-turbo version ([0-9]+\.[0-9]+\.[0-9]+)"),
    ("libjpeg", r"Copyright \(C\) [0-9]+, Thomas G\. Lane, Guido Vollbeding"),
    ("curl", r"libcurl/([0-9]+\.[0-9]+\.[0-9]+)"),
    ("curl", r"curl/([0-9]+\.[0-9]+\.[0-9]+)"),
    # curl's strerror.c and its option names (a build without a version banner keeps both)
    ("curl", r"A libcurl function was given a bad argument|\bCURLOPT_[A-Z_]{4,}"),
    ("mbedTLS", r"[Mm]bed ?TLS ([0-9]+\.[0-9]+\.[0-9]+)"),
    # its debug names of handshake states and error codes
    ("mbedTLS", r"\bMBEDTLS_(?:SSL|ERR)_[A-Z_]{4,}"),
    ("OpenSSL", r"OpenSSL ([0-9]+\.[0-9]+\.[0-9]+[a-z]?)"),
    ("SQLite", r"([0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8} [0-9a-f]{60,})"),
    ("SQLite", r"SQLite format 3"),
    ("protobuf", r"libprotobuf-lite|google/protobuf/[a-z_/]+\.cc|N6google8protobuf"),
    ("abseil", r"absl[0-9]*(?:12)?lts_([0-9]{8})"),
    ("abseil", r"N4absl"),
    # its namespace in a demangled function name, and its source paths
    ("abseil", r"absl::lts_([0-9]{8})|/absl/[a-z_]+/[a-z_/]+\.cc"),
    ("re2", r"N3re23RE2E|re2/[a-z_-]+\.(?:cc|h)\b|\.\?AVRE2@re2@@|Invalid RE2"),
    ("nlohmann/json", r"json_abi_v([0-9]_[0-9]{2}_[0-9])"),
    ("nlohmann/json", r"\[json\.exception\.[a-z_]+\.[0-9]+\]"),
    ("flatbuffers", r"N11flatbuffers|flatbuffers/"),
    ("Eigen", r"N5Eigen|Eigen/src/"),
    ("ONNX", r"N4onnx[0-9]|onnx/defs/"),
    (
        "cpuinfo",
        r"cpuinfo_initialize|Failed to initialize cpuinfo|cpuinfo/src/|called before cpuinfo is initialized",
    ),
    # XNNPACK's own function names and operator names; the bare word "XNNPACK" is also
    # ONNX Runtime's table of provider short names ("XNNPACK" beside "WebGPU", "CoreML")
    (
        "XNNPACK",
        r"\bxnn_(?:initialize|create_[a-z0-9_]+)\b|XNNPACK/src/|Fully Connected \(NC, (?:F16|F32|QS8|QU8|QD8)",
    ),
    ("Dawn", r"N4dawn[0-9]|dawn/native/|third_party/dawn/"),
]
NOTICE_NAMES = {
    "zlib": "zlib",
    "libpng": "libpng",
    "libjpeg-turbo": "libjpeg-turbo",
    "libjpeg": "libjpeg|Independent JPEG Group",
    "curl": "curl",
    "mbedTLS": "mbed ?tls",
    "OpenSSL": "openssl",
    "SQLite": "sqlite",
    "protobuf": "protobuf|protocol buffers",
    "abseil": "abseil",
    "re2": "re2",
    "nlohmann/json": "nlohmann",
    "flatbuffers": "flatbuffers",
    "Eigen": "eigen",
    "ONNX": "onnx/onnx|open neural network exchange",
    "cpuinfo": "cpuinfo",
    "XNNPACK": "xnnpack",
    "Dawn": "dawn",
}


# What no reader can tell: whether the runtime still works without a library one of its files
# links. Each judgement names the package, the library, and the evidence a person read.
_OPENCL_FOR_THE_GPU_PLUGIN: dict[str, Any] = {
    "optional": True,
    "why": "only libopenvino_intel_gpu_plugin.so links it; no shipped file links that "
    "plugin (readelf -d: no DT_NEEDED names it): OpenVINO opens a device's plugin when an "
    "application asks for that device, and the CPU and NPU plugins do not need OpenCL",
    "source": "OpenVINO documentation, 'Inference Devices and Modes' and 'GPU Device' "
    "(the GPU plugin needs an OpenCL driver; devices are plugins loaded on demand)",
}
JUDGEMENTS: dict[tuple[str, str], dict[str, Any]] = {
    ("onnxruntime-ep-openvino", "libOpenCL.so.1"): _OPENCL_FOR_THE_GPU_PLUGIN,
    ("onnxruntime-ep-openvino", "OpenCL.dll"): {
        **_OPENCL_FOR_THE_GPU_PLUGIN,
        "why": "only openvino_intel_gpu_plugin.dll imports it; no shipped file imports that "
        "plugin (llvm-readobj --coff-imports: no import names it): OpenVINO opens a device's "
        "plugin when an application asks for that device, and the CPU and NPU plugins do not "
        "need OpenCL",
    },
    ("onnxruntime-openvino", "libOpenCL.so.1"): {
        "optional": True,
        "why": "only libopenvino_intel_gpu_plugin.so links it; no shipped file links that "
        "plugin (readelf -d: no DT_NEEDED names it): OpenVINO opens a device's plugin when an "
        "application asks for that device, and the CPU and NPU plugins do not need OpenCL",
        "source": "OpenVINO documentation, 'Inference Devices and Modes' and 'GPU Device' "
        "(the GPU plugin needs an OpenCL driver; devices are plugins loaded on demand)",
    },
}


# The Windows functions a documented table dates (Microsoft Learn's "Minimum supported client"
# of each): the data file ortbundle reads, which names its sources; the truth reads the imports
# with llvm-readobj, not with ortbundle's reader.
DATED_FUNCTIONS = frozenset(
    f"{dll.lower()}!{name}"
    for dll, names in tomllib.loads(
        (HERE.parents[2] / "ortbundle/data/baselines.toml").read_text("utf-8")
    )["windows"]["functions"].items()
    for name in names
)


def run(cmd: list[str]) -> str:
    """Run a reader and return its output; the readers are the point, so failures are loud."""
    done = subprocess.run(cmd, capture_output=True, text=True, errors="replace", check=False)
    if done.returncode != 0 and not done.stdout:
        raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip()}")
    return done.stdout


def fact(value: Any, how: str) -> dict[str, Any]:
    """One fact and the command that produced it."""
    return {"value": value, "how": how}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fmt_of(path: Path) -> str | None:
    """The executable format, from the magic bytes (never from the file name)."""
    with path.open("rb") as fh:
        head = fh.read(8)
    if head[:4] == b"\x7fELF":
        return "ELF"
    if head[:2] == b"MZ":
        return "PE"
    if head[:4] in (b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe"):
        return "Mach-O"
    # cafebabe is also a Java class; a fat Mach-O has a small architecture count after it.
    if head[:4] == b"\xca\xfe\xba\xbe" and int.from_bytes(head[4:8], "big") < 20:
        return "Mach-O"
    return None


_NAME_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+.-")


@functools.lru_cache(maxsize=4)
def strings_of(path: Path, wide: bool) -> list[str]:
    if not wide:
        return run(["strings", "-a", "-n", "6", str(path)]).splitlines()
    # `strings -el` reads any 2-byte run of (printable, NUL): the NUL ending an ASCII string
    # right before a UTF-16 string joins its last letter to it ("Create\0" + L"onnx…dll" reads
    # L"eonnx…dll"). A wide string whose first byte follows a name character's byte begins
    # with such a tail: the letter is cut off (`strings -t d` gives each string's offset).
    data = path.read_bytes()
    lines = []
    for line in run(["strings", "-a", "-n", "6", "-t", "d", "-el", str(path)]).splitlines():
        offset, _, text = line.strip().partition(" ")
        at = int(offset)
        if at > 0 and data[at - 1] in _NAME_BYTES and len(text) > 1:
            text = text[1:]
        lines.append(text)
    return lines


def grep(lines: list[str], pattern: str) -> list[str]:
    """`grep -oP PATTERN` over lines: every match, in order, first occurrence kept."""
    seen: dict[str, None] = {}
    for m in re.finditer(pattern, _joined(lines), re.M):
        seen.setdefault(m.group(0), None)
    return list(seen)


_JOINED: dict[int, tuple[list[str], str]] = {}


def _joined(lines: list[str]) -> str:
    """The lines as one text (one regex pass over a text is far quicker than one per line)."""
    hit = _JOINED.get(id(lines))
    if hit is None or hit[0] is not lines:
        _JOINED.clear()
        hit = (lines, "\n".join(lines))
        _JOINED[id(lines)] = hit
    return hit[1]


RODATA_STRINGS = "llvm-objcopy -O binary --only-section=.rodata {f} R; strings -a -n 6 R"


def rodata_strings(path: Path) -> list[str]:
    """The strings of an ELF file's .rodata alone."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rodata"
        run(["llvm-objcopy", "-O", "binary", "--only-section=.rodata", str(path), str(out)])
        if not out.exists():
            return []
        return run(["strings", "-a", "-n", "6", str(out)]).splitlines()


RDATA_STRINGS = (
    "python3 -c 'pefile: the .rdata section of {f}' > R; strings -a -n 6 -t d R (those after a "
    "NUL); strings -a -n 6 -el R"
)


def rdata_strings(path: Path) -> list[str]:
    """The strings of a PE file's .rdata alone (ASCII and UTF-16), cut out with pefile: a name a
    DLL passes to LoadLibrary is a constant there, never in its version resource or code."""
    pe = pefile.PE(str(path), fast_load=True)
    try:
        data = b"".join(s.get_data() for s in pe.sections if s.Name.rstrip(b"\0") == b".rdata")
    finally:
        pe.close()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rdata"
        out.write_bytes(data)
        # a C string constant begins after the NUL that ends the one before it (or padding):
        # a run of letters after binary bytes is part of a table, not a string of its own
        lines = []
        for line in run(["strings", "-a", "-n", "6", "-t", "d", str(out)]).splitlines():
            offset, _, text = line.strip().partition(" ")
            if int(offset) == 0 or data[int(offset) - 1] == 0:
                lines.append(text)
        return lines + strings_of.__wrapped__(out, True)


def all_strings(path: Path, fmt: str) -> tuple[list[str], str]:
    lines = list(strings_of(path, False))
    how = f"{STRINGS} {{f}}"
    if fmt == "PE":
        lines += strings_of(path, True)
        how = f"({STRINGS} {{f}}; {STRINGS_WIDE} {{f}})"
    return lines, how


# ---- exports ---------------------------------------------------------------------------


def exports(path: Path, fmt: str) -> tuple[list[str], str]:
    if fmt == "PE":
        cmd = ["llvm-readobj", "--coff-exports", str(path)]
        names = re.findall(r"^\s*Name: (\S+)$", run(cmd), re.M)
        return names, "llvm-readobj --coff-exports {f}"
    if fmt == "ELF":
        cmd = ["llvm-nm", "-D", "--defined-only", "--extern-only", str(path)]
        names = [ln.split()[-1].split("@")[0] for ln in run(cmd).splitlines() if ln.strip()]
        return names, "llvm-nm -D --defined-only --extern-only {f}"
    cmd = ["llvm-nm", "--defined-only", "--extern-only", str(path)]
    names = []
    for ln in run(cmd).splitlines():
        parts = ln.split()
        if len(parts) >= 3:
            names.append(parts[-1].removeprefix("_"))
    return names, "llvm-nm --defined-only --extern-only {f}  (leading _ dropped)"


# ---- linking ---------------------------------------------------------------------------


def elf_links(path: Path) -> dict[str, Any]:
    out = run(["readelf", "-d", "-W", str(path)])
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    runpath = re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library (?:runpath|rpath): \[([^\]]+)\]", out)
    soname = re.findall(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", out)
    vers = run(["readelf", "-V", "-W", str(path)])
    glibc = sorted(
        {v for v in re.findall(r"Name: GLIBC_([0-9.]+)", vers)},
        key=lambda v: tuple(int(x) for x in v.split(".")),
    )
    return {
        "required": fact(needed, "readelf -d -W {f} | grep NEEDED"),
        "runpath": fact(runpath, "readelf -d -W {f} | grep -E 'RUNPATH|RPATH'"),
        "soname": fact(soname[0] if soname else "", "readelf -d -W {f} | grep SONAME"),
        "oldest_os": fact(
            f"glibc {glibc[-1]}" if glibc else "no GLIBC_ version needed",
            "readelf -V -W {f} | grep -o 'Name: GLIBC_[0-9.]*' | sort -V | tail -1",
        ),
        "_delayed": [],
    }


def pe_links(path: Path) -> dict[str, Any]:
    out = run(["llvm-readobj", "--coff-imports", str(path)])
    required: list[str] = []
    delayed: list[str] = []
    functions: list[str] = []  # "kernel32.dll!CreateFile2": the imported functions, by DLL
    section, dll = "", ""
    for line in out.splitlines():
        s = line.strip()
        if s in ("Import {", "DelayImport {"):
            section = s
        elif s.startswith("Name: ") and section:
            dll = s[6:]
            (required if section == "Import {" else delayed).append(dll)
            section = ""
        elif s.startswith("Symbol: ") and dll:
            functions.append(f"{dll.lower()}!{s[8:].split(' ', 1)[0]}")
    hdr = run(["llvm-readobj", "--file-headers", str(path)])

    def h(key: str) -> str:
        m = re.search(rf"^\s*{key}: (\d+)$", hdr, re.M)
        return m.group(1) if m else "?"

    osv = f"{h('MajorOperatingSystemVersion')}.{h('MinorOperatingSystemVersion')}"
    subv = f"{h('MajorSubsystemVersion')}.{h('MinorSubsystemVersion')}"
    machine = re.search(r"^\s*Machine: (\S+)", hdr, re.M)
    api_sets = sorted({n.lower() for n in required if n.lower().startswith(("api-ms-", "ext-ms-"))})
    return {
        "required": fact(required, "llvm-readobj --coff-imports {f}  (Import blocks)"),
        "machine": fact(
            machine.group(1) if machine else "?", "llvm-readobj --file-headers {f} | grep Machine"
        ),
        "oldest_os": fact(
            {
                "os_version": osv,
                "subsystem_version": subv,
                "api_sets": api_sets,
                # only the functions the dated table names (ortbundle/data/baselines.toml
                # [windows.functions], each with its documentation): the rest date nothing
                "functions": sorted(f for f in set(functions) if f in DATED_FUNCTIONS),
            },
            "llvm-readobj --file-headers {f} | grep -E 'OperatingSystemVersion|SubsystemVersion'; "
            "llvm-readobj --coff-imports {f} | grep -E 'Name: (api|ext)-ms-|Symbol: '",
        ),
        "_delayed": delayed,
        "_delayed_how": "llvm-readobj --coff-imports {f}  (DelayImport blocks)",
    }


def macho_links(path: Path) -> dict[str, Any]:
    out = run(["llvm-objdump", "--macho", "--private-headers", str(path)])
    required: list[str] = []
    weak: list[str] = []
    rpaths: list[str] = []
    ident = ""
    minos: list[str] = []
    cmd = ""
    for line in out.splitlines():
        s = line.strip()
        if s.startswith("cmd "):
            cmd = s[4:]
        elif s.startswith("name ") and cmd in (
            "LC_LOAD_DYLIB",
            "LC_LOAD_WEAK_DYLIB",
            "LC_REEXPORT_DYLIB",
        ):
            name = s[5:].split(" (offset")[0]
            (weak if cmd == "LC_LOAD_WEAK_DYLIB" else required).append(name)
        elif s.startswith("name ") and cmd == "LC_ID_DYLIB":
            ident = s[5:].split(" (offset")[0]
        elif s.startswith("path ") and cmd == "LC_RPATH":
            rpaths.append(s[5:].split(" (offset")[0])
        elif (s.startswith("minos ") and cmd == "LC_BUILD_VERSION") or (
            s.startswith("version ") and cmd == "LC_VERSION_MIN_MACOSX"
        ):
            minos.append(s.split()[1])
    how = "llvm-objdump --macho --private-headers {f}"
    arch = run(["llvm-objdump", "--macho", "--universal-headers", str(path)])
    archs = sorted(set(re.findall(r"^\s*cputype CPU_TYPE_(\S+)", arch, re.M)))
    if not archs:
        hdr = run(["llvm-objdump", "--macho", "--private-header", str(path)])
        archs = sorted(set(re.findall(r"^\s*MH_MAGIC_64\s+(\S+)", hdr, re.M)))
    return {
        "required": fact(required, how + "  (LC_LOAD_DYLIB, LC_REEXPORT_DYLIB)"),
        "runpath": fact(rpaths, how + "  (LC_RPATH)"),
        "soname": fact(ident, how + "  (LC_ID_DYLIB)"),
        "machine": fact(
            archs,
            "llvm-objdump --macho --universal-headers {f}; llvm-objdump --macho --private-header {f}",
        ),
        "oldest_os": fact(
            f"macOS {max(minos, key=lambda v: tuple(int(x) for x in v.split('.')))}"
            if minos
            else "?",
            how + "  (LC_BUILD_VERSION minos, LC_VERSION_MIN_MACOSX version)",
        ),
        "_delayed": weak,
        "_delayed_how": how + "  (LC_LOAD_WEAK_DYLIB)",
    }


# ---- holder ----------------------------------------------------------------------------

PE_VERSION_HOW = (
    'python3 -c "import pefile,sys; p=pefile.PE(sys.argv[1]); '
    "[print(k.decode(), '=', v.decode()) for fi in getattr(p, 'FileInfo', [[]])[0] "
    "for st in getattr(fi, 'StringTable', []) for k, v in st.entries.items()]\" {f}"
)


def pe_version(path: Path) -> dict[str, str]:
    pe = pefile.PE(str(path), fast_load=True)
    pe.parse_data_directories(
        directories=[pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_RESOURCE"]]
    )
    found: dict[str, str] = {}
    for fi in getattr(pe, "FileInfo", [[]])[0] if getattr(pe, "FileInfo", None) else []:
        for st in getattr(fi, "StringTable", []):
            for k, v in st.entries.items():
                found[k.decode(errors="replace")] = v.decode(errors="replace")
    pe.close()
    return found


# ---- wheel -----------------------------------------------------------------------------


def wheel_meta(whl: Path, names: list[str], root: Path) -> dict[str, Any]:
    """The wheel's own word: METADATA's licence and requirements, its licence files."""
    dist = next(n for n in names if n.endswith(".dist-info/METADATA"))
    meta = email.parser.Parser().parsestr(
        (root / dist).read_text(errors="replace"), headersonly=True
    )
    mhow = f"unzip -p {whl.name} {dist}"
    licence_expr = meta.get("License-Expression", "")
    licence = (meta.get("License", "") or "").strip()
    classifiers = [c for c in meta.get_all("Classifier", []) if c.startswith("License ::")]
    requires = [
        r
        for r in meta.get_all("Requires-Dist", [])
        if re.match(r"onnxruntime(?![-_]genai\b)[\w.-]*\b", r)
    ]
    licence_files = [
        n
        for n in names
        if re.search(
            r"(^|/)(LICEN[CS]E|COPYING|NOTICE|ThirdPartyNotices|third_party_notices)[^/]*$", n, re.I
        )
    ]
    copyright_line = ""
    copyright_how = "no licence file in the wheel"
    for n in licence_files:
        if re.search(r"LICEN[CS]E", n.rsplit("/", 1)[-1], re.I):
            lines = grep((root / n).read_text(errors="replace").splitlines(), r"^\s*Copyright.*$")
            if lines:
                copyright_line = lines[0].strip()
                copyright_how = f"unzip -p {whl.name} {n} | grep -m1 -P '^\\s*Copyright'"
                break
    notices = [n for n in licence_files if re.search(r"notice", n, re.I)]
    named: list[str] = []
    if notices:
        text = "\n".join((root / n).read_text(errors="replace") for n in notices)
        named = [c for c, rx in NOTICE_NAMES.items() if re.search(rf"\b(?:{rx})\b", text, re.I)]
    return {
        "name": meta.get("Name", ""),
        "version": meta.get("Version", ""),
        "licence": fact(
            {
                "license_expression": licence_expr,
                "license": licence[:200],
                "classifiers": classifiers,
            },
            mhow + " | grep -E '^(License-Expression|License|Classifier: License)'",
        ),
        "requires_onnxruntime": fact(requires, mhow + " | grep -E '^Requires-Dist: onnxruntime'"),
        "licence_files": fact(
            licence_files, f"unzip -Z1 {whl.name} | grep -iE '(LICEN[CS]E|COPYING|NOTICE)'"
        ),
        "licence_holder": fact(copyright_line, copyright_how),
        "notices_name": fact(
            named,
            f"unzip -p {whl.name} '*ThirdPartyNotices*' | grep -ioP '\\b(zlib|libpng|...)\\b'  "
            "(one per component, patterns in make_truth.NOTICE_NAMES)",
        ),
        "_licence_value": licence_expr
        or (licence if licence and len(licence) < 60 else "")
        or "; ".join(c.rsplit(" :: ", 1)[-1] for c in classifiers),
    }


def py_ep_names(root: Path, names: list[str]) -> list[str]:
    found: dict[str, None] = {}
    for n in names:
        if n.endswith(".py"):
            for m in re.finditer(EP_NAME_PY_RE, (root / n).read_text(errors="replace")):
                found.setdefault(m.group(1), None)
    return list(found)


def library(root: Path, rel: str, fmt: str, meta: dict[str, Any]) -> dict[str, Any]:
    path = root / rel

    def how(s: str) -> str:
        return s.replace("{f}", rel)

    def fx(d: dict[str, Any]) -> dict[str, Any]:
        return {"value": d["value"], "how": how(d["how"])}

    syms, sym_how = exports(path, fmt)
    sym_set = set(syms)
    entry = sorted(s for s in sym_set if ENTRY_RE.match(s))
    links = {"ELF": elf_links, "PE": pe_links, "Mach-O": macho_links}[fmt](path)
    lines, str_how = all_strings(path, fmt)
    required: list[str] = links["required"]["value"]

    core_refs = sorted(
        {n for n in required if CORE_NAME_RE.match(n.rsplit("/", 1)[-1]) or CORE_NAME_RE.match(n)}
    )
    core_strs = [
        s for s in grep(lines, LOAD_NAME_RE[fmt]) if CORE_NAME_RE.match(s.rsplit("/", 1)[-1])
    ]
    kind = next((KIND_SYMBOLS[s] for s in KIND_SYMBOLS if s in sym_set), "")
    if kind:
        sym = next(s for s in KIND_SYMBOLS if s in sym_set)
        kind_how = f"{how(sym_how)} | grep -x {sym}"
    elif core_refs or core_strs:
        kind = "uses-core"
        kind_how = (
            f"{how(sym_how)} | grep -xE 'OrtGetApiBase|CreateEpFactories|RegisterCustomOps' (none); "
            f"links {core_refs} / names {core_strs}: {how(links['required']['how'])}; "
            f"{how(str_how)} | grep -oP '{LOAD_NAME_RE[fmt]}'"
        )
    else:
        kind = "other"
        kind_how = (
            f"{how(sym_how)} | grep -xE 'OrtGetApiBase|CreateEpFactories|RegisterCustomOps' (none); "
            f"no core in {how(links['required']['how'])} or {how(str_how)}"
        )

    providers = grep(lines, PROVIDER_RE)

    # a name a library passes to dlopen is a constant in its read-only data: on ELF, strings
    # elsewhere (a version-needs name patchelf left behind, debug info) name nothing it opens
    reader, load_how = {
        "ELF": (rodata_strings, RODATA_STRINGS),
        "PE": (rdata_strings, RDATA_STRINGS),
    }.get(fmt, (lambda _path: lines, str_how))
    load_lines = reader(path)
    load_names = grep(load_lines, LOAD_NAME_RE[fmt])
    req_lower = {n.lower() for n in required} | {n.rsplit("/", 1)[-1].lower() for n in required}
    own = rel.rsplit("/", 1)[-1].lower()
    dlopen = [
        n
        for n in load_names
        if n.lower() not in req_lower
        and n.rsplit("/", 1)[-1].lower() != own
        and not any(r.startswith(n + "/") for r in required)
    ]

    embedded: list[dict[str, Any]] = []
    by_name: dict[str, dict[str, Any]] = {}
    for name, rx in COMPONENTS:
        hits = grep(lines, rx)
        if not hits:
            continue
        m = re.search(rx, hits[0])
        version = (m.group(1) or "").replace("_", ".") if m and m.groups() else ""
        entry_c = by_name.get(name)
        if entry_c is None:
            entry_c = {
                "name": name,
                "version": version,
                "evidence": hits[0][:160],
                "how": f"{how(str_how)} | grep -oP '{rx}'",
            }
            by_name[name] = entry_c
            embedded.append(entry_c)
        elif version and not entry_c["version"]:
            entry_c.update(
                version=version, evidence=hits[0][:160], how=f"{how(str_how)} | grep -oP '{rx}'"
            )

    if fmt == "PE":
        ver = pe_version(path)
        vhow = how(PE_VERSION_HOW)
        holder = fact(
            {
                k: ver.get(k, "")
                for k in ("CompanyName", "ProductName", "LegalCopyright", "FileVersion")
            },
            vhow,
        )
    else:
        holder = fact(
            {"LegalCopyright": meta["licence_holder"]["value"]}, meta["licence_holder"]["how"]
        )
    out: dict[str, Any] = {
        "path": rel,
        "format": fmt,
        "sha256": fact(sha256(path), f"sha256sum {rel}"),
        "kind": fact(kind, kind_how),
        "entry": fact(entry, f"{how(sym_how)} | grep -xP '{ENTRY_RE.pattern[1:-1]}'"),
        "exports_count": fact(len(sym_set), f"{how(sym_how)} | sort -u | wc -l"),
        "providers": fact(providers, f"{how(str_how)} | grep -oP '{PROVIDER_RE}'"),
        "holder": holder,
        "licence": fact(meta["_licence_value"], meta["licence"]["how"]),
        "required": fx(links["required"]),
        "optional": fact(
            {"delay_or_weak": links["_delayed"], "named_in_strings": dlopen},
            f"{how(links.get('_delayed_how', 'readelf has no delayed loads'))}; "
            f"{how(load_how)} | grep -oP '{LOAD_NAME_RE[fmt]}' minus required and itself",
        ),
        "oldest_os": fx(links["oldest_os"]),
    }
    for key in ("runpath", "soname", "machine"):
        if key in links:
            out[key] = fx(links[key])
    out["embedded"] = embedded
    return out


def read_target(package: str, platform: str, whl: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with zipfile.ZipFile(whl) as zf:
            names = zf.namelist()
            zf.extractall(root)
        meta = wheel_meta(whl, names, root)
        libs = []
        for n in sorted(names):
            p = root / n
            if p.is_file() and (fmt := fmt_of(p)):
                print(f"  {package} {platform} {n}", file=sys.stderr)
                libs.append(library(root, n, fmt, meta))
        ep_names = py_ep_names(root, names)

    target: dict[str, Any] = {
        "platform": platform,
        "wheel": whl.name,
        "sha256": fact(sha256(whl), f"sha256sum {whl.name}"),
        "size": fact(whl.stat().st_size, f"stat -c %s {whl.name}"),
        **{
            k: meta[k]
            for k in (
                "licence",
                "licence_files",
                "licence_holder",
                "notices_name",
                "requires_onnxruntime",
            )
        },
        "ep_names_in_python": fact(
            ep_names, f"unzip -p {whl.name} '*.py' | grep -oP '{EP_NAME_PY_RE}'"
        ),
        "library": libs,
    }
    needed = {n for lib in libs for n in lib["required"]["value"]}
    judged = [
        {"name": name, **judgement}
        for (pkg, name), judgement in JUDGEMENTS.items()
        if pkg == package and name in needed
    ]
    if judged:
        target["judgement"] = judged
    return target


def download(pins: dict[str, Any]) -> None:
    """pip download every pin with pip's own configuration (no index is named here)."""
    for package, pin in pins.items():
        for platform in pin["platforms"]:
            dest = CACHE / package / platform
            if list(dest.glob("*.whl")):
                continue
            dest.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                [
                    "pip",
                    "download",
                    "--no-deps",
                    "--only-binary=:all:",
                    "--platform",
                    platform,
                    "--python-version",
                    "3.12",
                    "-d",
                    str(dest),
                    f"{package}=={pin['version']}",
                ],
                check=True,
            )


def _inline(value: Any) -> Any:
    """A fact (and any table inside it) on one line, so a table reads as a list of facts."""
    if isinstance(value, dict):
        table = tomlkit.inline_table()
        for k, v in value.items():
            table[k] = _inline(v)
        return table
    if isinstance(value, list):
        arr = tomlkit.array()
        arr.extend(_inline(v) for v in value)
        return arr
    return value


TABLE_LISTS = ("target", "library", "embedded")


def _table(data: dict[str, Any], container: Any) -> None:
    """Scalars and facts first, inline; lists of tables (targets, libraries, embedded) after."""
    for k, v in data.items():
        if k not in TABLE_LISTS:
            container[k] = _inline(v)
    for k in TABLE_LISTS:
        if k in data:
            aot = tomlkit.aot()
            for item in data[k]:
                sub = tomlkit.table()
                _table(item, sub)
                aot.append(sub)
            container[k] = aot


def to_toml(data: dict[str, Any]) -> str:
    doc = tomlkit.document()
    doc.add(
        tomlkit.comment(
            "Generated by tests/data/corpus/make_truth.py from independent readers; see README.md."
        )
    )
    doc.add(
        tomlkit.comment(
            "Paths in `how` are relative to the unpacked wheel (unzip WHEEL -d W; cd W)."
        )
    )
    _table(data, doc)
    return tomlkit.dumps(doc)


DOCS = HERE.parents[2] / "docs" / "corpus.md"


def _cell(items: list[str]) -> str:
    return ", ".join(f"`{i}`" for i in items) if items else "—"


def render_docs(tables: dict[str, dict[str, Any]]) -> str:
    """docs/corpus.md: package by target by library, from the truth tables alone."""
    out = [
        "# The conformance corpus",
        "",
        "Generated by `python3 tests/data/corpus/make_truth.py --docs` from the truth tables in",
        "`tests/data/corpus/` (read with readelf, llvm-readobj, llvm-objdump, llvm-nm, strings and",
        "pefile, never with ortbundle's own readers; each fact there carries the command that",
        "produced it). Do not edit by hand. Kinds: core exports `OrtGetApiBase`, plugin-ep exports",
        "`CreateEpFactories`, custom-ops exports `RegisterCustomOps`, uses-core links or names the",
        "core library; other is anything else (Python bindings, provider libraries, vendor libraries).",
        "",
        "How the comparison reads some facts (tests/test_corpus.py):",
        "",
        "- Libraries a file opens by name: names in its read-only data alone (ELF `.rodata` cut out",
        "  with `llvm-objcopy`, PE `.rdata` with pefile); a UTF-16 string whose first letter ends an ASCII string before",
        "  it (`Create\\0` then `Lonnxruntime_providers_qnn.dll`) loses that letter.",
        "- The oldest Windows: the newest of the header's OS version and what the file's API sets,",
        "  dated functions, DLLs and machine need, dated by `ortbundle/data/windows-apisets.toml` and",
        "  `baselines.toml` (documented facts, each with its source; the imports are read here with",
        "  llvm-readobj). The column below shows the header alone.",
        "- Judgements: whether a runtime works without a library one of its files links is no",
        "  reader's to tell; each such call is a `judgement` in the table, with its evidence and",
        "  source (OpenCL, needed only by OpenVINO's GPU device plugin, is optional).",
        "",
        "| package | version | target | library | kind | entry | providers / EP names | oldest OS |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for package in sorted(tables):
        t = tables[package]
        for target in t["target"]:
            ep_names = target["ep_names_in_python"]["value"]
            for lib in target["library"]:
                kind = lib["kind"]["value"]
                names = list(lib["providers"]["value"])
                if kind == "plugin-ep":
                    names += [n for n in ep_names if n not in names]
                osv = lib["oldest_os"]["value"]
                if isinstance(osv, dict):
                    osv = f"PE OS {osv['os_version']}, subsystem {osv['subsystem_version']}"
                out.append(
                    f"| {package} | {t['version']} | {target['platform']} | `{lib['path'].rsplit('/', 1)[-1]}` "
                    f"| {kind} | {_cell(lib['entry']['value'])} | {_cell(names)} | {osv} |"
                )
    out += [
        "",
        "Why a package has the targets it has is in each table's `note` and in",
        "`tests/data/corpus/README.md`.",
        "",
    ]
    return "\n".join(out)


def load_tables() -> dict[str, dict[str, Any]]:
    pins = tomllib.loads((HERE / "pins.toml").read_text())
    return {
        p: tomllib.loads((HERE / f"{p}.toml").read_text())
        for p in pins
        if (HERE / f"{p}.toml").exists()
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    ap.add_argument("--download", action="store_true", help="pip download the pins first")
    ap.add_argument(
        "--docs", action="store_true", help="only rewrite docs/corpus.md from the tables"
    )
    ap.add_argument("packages", nargs="*", help="only these packages")
    args = ap.parse_args()
    if args.docs:
        DOCS.write_text(render_docs(load_tables()))
        return 0
    pins = tomllib.loads((HERE / "pins.toml").read_text())
    if args.packages:
        pins = {k: v for k, v in pins.items() if k in args.packages}
    if args.download:
        download(pins)
    for package, pin in pins.items():
        targets = []
        for platform in pin["platforms"]:
            wheels = sorted((CACHE / package / platform).glob(f"*-{pin['version']}-*.whl"))
            if not wheels:
                print(
                    f"missing: {package}=={pin['version']} {platform} (run with --download)",
                    file=sys.stderr,
                )
                return 1
            targets.append(read_target(package, platform, wheels[0]))
        data = {
            "package": package,
            "version": pin["version"],
            "note": pin["note"],
            "generator": "tests/data/corpus/make_truth.py",
            "target": targets,
        }
        (HERE / f"{package}.toml").write_text(to_toml(data))
        print(f"wrote {package}.toml", file=sys.stderr)
    DOCS.write_text(render_docs(load_tables()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
