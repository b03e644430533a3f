"""What a shipped file says about itself, read from its bytes (ortbundle/stage/file_facts.py):
a PE version resource, an ELF's read-only data and .comment, and third-party code either shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from ortbundle._core.memo import Memo
from ortbundle.stage.file_facts import Embedded, holder_of, names_holder
from ortbundle.stage.versions import read_file_facts
from tests.helpers.elf import make_elf
from tests.helpers.macho import Dylib, fat_bytes, slice_bytes, write_dylib
from tests.helpers.pe import make_pe

# onnxruntime-directml 1.24.4's DirectML.dll, as its version resource reads (FACTS.md)
DIRECTML = {
    "CompanyName": "Microsoft Corporation",
    "FileDescription": "DirectML Redistributable Library",
    "FileVersion": "1.15.4",
    "ProductName": "DirectML Redistributable Library",
    "ProductVersion": "1.15.4",
    "LegalCopyright": "© Microsoft Corporation. All rights reserved.",
}
# What lintian's embedded-library check finds in the stock Linux onnxruntime library: the
# error tables of curl and mbedtls, and zlib's banner.
CURL = b"A libcurl function was given a bad argument"
MBEDTLS = b"SSL - The connection indicated an EOF"
ZLIB = b" deflate 1.3.1 Copyright 1995-2024 Jean-loup Gailly and Mark Adler "


def test_a_pe_says_who_made_it_and_whose_it_is(tmp_path: Path) -> None:
    dll = tmp_path / "DirectML.dll"
    dll.write_bytes(make_pe(imports=("KERNEL32.dll",), version=DIRECTML))
    facts = read_file_facts(dll, "runtimes/dml/DirectML.dll")
    evidence = facts.evidence
    assert (evidence.format, evidence.where) == ("pe", "PE version resource")
    assert evidence.company == "Microsoft Corporation"
    assert evidence.product == "DirectML Redistributable Library"
    assert evidence.product_version == "1.15.4"
    assert evidence.copyrights == ("© Microsoft Corporation. All rights reserved.",)
    assert evidence.holders == ("Microsoft Corporation",)
    assert evidence.reserved == "© Microsoft Corporation. All rights reserved."
    assert evidence.embedded == ()
    assert facts.version is not None and facts.version.version == "1.15.4"


def test_a_pe_without_a_copyright_is_its_makers(tmp_path: Path) -> None:
    dll = tmp_path / "cudart64_13.dll"
    version = {"CompanyName": "NVIDIA Corporation", "ProductVersion": "13.4.46"}
    dll.write_bytes(make_pe(imports=("KERNEL32.dll",), version=version))
    evidence = read_file_facts(dll, "cudart64_13.dll").evidence
    assert evidence.holders == ("NVIDIA Corporation",) and evidence.reserved == ""


def test_an_elf_says_it_in_its_read_only_data_and_comment(tmp_path: Path) -> None:
    rodata = b"\0".join(
        [
            b"",
            b"failed to open %s",  # a format string is no notice
            b"Copyright (c) 2025 NVIDIA CORPORATION & AFFILIATES. All rights reserved.",
            b"SPDX-License-Identifier: LicenseRef-NvidiaProprietary",
            b"print the copyright and exit",  # the word, not a notice
            CURL,
            MBEDTLS,
            ZLIB,
            b"",
        ]
    )
    lib = tmp_path / "libtensorrt_rtx.so.1.7.0"
    lib.write_bytes(make_elf(soname="libtensorrt_rtx.so.1", rodata=rodata, comment=b"GCC: 14\0"))
    facts = read_file_facts(lib, "plugins/trt/libtensorrt_rtx.so.1.7.0")
    evidence = facts.evidence
    assert (evidence.format, evidence.where) == (
        "elf",
        "ELF .rodata and .comment (and .dynsym's defined names)",
    )
    assert evidence.copyrights == (
        "Copyright (c) 2025 NVIDIA CORPORATION & AFFILIATES. All rights reserved.",
        "deflate 1.3.1 Copyright 1995-2024 Jean-loup Gailly and Mark Adler",
    )
    assert evidence.licences == ("SPDX-License-Identifier: LicenseRef-NvidiaProprietary",)
    # zlib's banner is zlib's: the file is NVIDIA's
    assert evidence.holders == ("NVIDIA CORPORATION & AFFILIATES",)
    assert [e.name for e in evidence.embedded] == ["curl", "mbedtls", "zlib"]
    assert evidence.embedded[0] == Embedded(
        "curl", CURL.decode(), licence="curl", purl="pkg:github/curl/curl", text="curl",
        names=("curl", "libcurl"),
    )  # fmt: skip
    zlib = evidence.embedded[2]
    assert (zlib.version, zlib.licence, zlib.purl) == (
        "1.3.1",
        "Zlib",
        "pkg:github/madler/zlib@1.3.1",
    )
    assert zlib.copyrights == ("deflate 1.3.1 Copyright 1995-2024 Jean-loup Gailly and Mark Adler",)
    assert facts.version is not None and facts.version.version == "1.7.0"  # its name still


def test_a_compilers_comment_is_read_too(tmp_path: Path) -> None:
    lib = tmp_path / "libx.so"
    notice = b"Copyright (C) 2024 Acme Inc.\0"
    lib.write_bytes(make_elf(soname="libx.so", comment=b"GCC: (GNU) 14.2.1\0" + notice))
    assert read_file_facts(lib, "libx.so").evidence.holders == ("Acme Inc",)


def test_third_party_code_in_a_dlls_data(tmp_path: Path) -> None:
    dll = tmp_path / "onnxruntime.dll"
    dll.write_bytes(make_pe(imports=("KERNEL32.dll",), payload=b"\0" + ZLIB + b"\0" + CURL))
    evidence = read_file_facts(dll, "onnxruntime.dll").evidence
    assert [e.name for e in evidence.embedded] == ["curl", "zlib"]
    assert evidence.company == "" and evidence.holders == ()


def test_third_party_code_and_notices_in_a_dylibs_strings(tmp_path: Path) -> None:
    """A macOS core links zlib and curl in as its Linux build does: read from __cstring."""
    strings = (ZLIB.decode().strip(), CURL.decode(), "Copyright (c) 2025 Acme Inc.")
    lib = write_dylib(tmp_path / "libonnxruntime.dylib", strings=strings)
    evidence = read_file_facts(lib, "libonnxruntime.dylib").evidence
    assert (
        evidence.format == "macho"
        and evidence.where == "Mach-O __TEXT,__cstring and __TEXT,__const (and defined symbols)"
    )
    assert [e.name for e in evidence.embedded] == ["curl", "zlib"]
    assert evidence.holders == ("Acme Inc",)
    # a universal file is read in its arm64 slice
    fat = tmp_path / "fat.dylib"
    fat.write_bytes(
        fat_bytes(slice_bytes(Dylib(arch="x86_64")), slice_bytes(Dylib(strings=(CURL.decode(),))))
    )
    assert [e.name for e in read_file_facts(fat, "fat.dylib").evidence.embedded] == ["curl"]


def test_code_compiled_in_shows_in_the_names_a_library_defines(tmp_path: Path) -> None:
    """onnxruntime-extensions carries sentencepiece's copy of abseil's string_view: no string
    of it in .rodata, only the namespace in the mangled names of the functions it defines. A
    name the library only imports is another library's code."""
    defines = make_elf(
        soname="libext.so",
        exports=("_ZNK13sentencepiece9Processor6EncodeEN4absl11string_viewE",),
        imports=("_ZN5Eigen19ThreadPoolInterface8ScheduleEv",),
    )
    lib = tmp_path / "libext.so"
    lib.write_bytes(defines)
    assert [e.name for e in read_file_facts(lib, "libext.so").evidence.embedded] == ["abseil"]
    fat = tmp_path / "libx.dylib"
    write_dylib(fat, exports=("_ZN11onnxruntime3EnvEPN5Eigen19ThreadPoolInterfaceE",))
    assert [e.name for e in read_file_facts(fat, "libx.dylib").evidence.embedded] == ["eigen"]


def test_a_notice_read_from_bytes_is_one_printable_line(tmp_path: Path) -> None:
    """onnxruntime-ep-mlx's dylib holds a notice with a length byte in it: the line quoted in
    reports and scaffolded TOML comments carries no control character."""
    lib = write_dylib(tmp_path / "libx.dylib", strings=("Copyright (c) 2025 Acme\x05 Inc.",))
    (line,) = read_file_facts(lib, "libx.dylib").evidence.copyrights
    assert line == "Copyright (c) 2025 Acme Inc."


def test_a_java_class_is_not_read_as_a_fat_dylib(tmp_path: Path) -> None:
    klass = tmp_path / "A.class"
    klass.write_bytes(b"\xca\xfe\xba\xbe\x00\x00\x00\x41" + CURL)
    assert read_file_facts(klass, "A.class").evidence.format == ""


def test_a_file_that_is_no_binary_says_nothing(tmp_path: Path) -> None:
    catalog = tmp_path / "qnn.cat"
    catalog.write_bytes(b"0\x82\x01\x00 a signed catalog")
    facts = read_file_facts(catalog, "qnn.cat")
    assert facts.version is None and not facts.evidence.says_anything
    assert facts.evidence.format == ""


def test_evidence_is_read_once_per_sha256_with_a_memo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ortbundle.stage.file_facts

    lib = tmp_path / "libx.so.1.2.3"
    lib.write_bytes(make_elf(soname="libx.so.1", rodata=b"\0Copyright (c) 2020 Acme\0"))
    reads: list[str] = []
    real = ortbundle.stage.file_facts.elf_sections

    def counting(path: Path, label: str, names: tuple[str, ...]) -> dict[str, bytes]:
        reads.append(label)
        return real(path, label, names)

    monkeypatch.setattr(ortbundle.stage.file_facts, "elf_sections", counting)
    memo = Memo.for_build(tmp_path / "cache", release=False)
    first = read_file_facts(lib, "runtimes/a/libx.so.1.2.3", sha256="ab" * 32, memo=memo)
    again = read_file_facts(lib, "runtimes/b/libx.so.1.2.3", sha256="ab" * 32, memo=memo)
    assert first.evidence == again.evidence and again.evidence.holders == ("Acme",)
    assert again.version is not None and again.version.path == "runtimes/b/libx.so.1.2.3"
    assert reads == ["runtimes/a/libx.so.1.2.3"]  # the second came from the memo
    read_file_facts(lib, "runtimes/a/libx.so.1.2.3", sha256="ab" * 32)  # no memo: a release
    assert len(reads) == 2


@pytest.mark.parametrize(
    ("line", "holder"),
    [
        ("© Microsoft Corporation. All rights reserved.", "Microsoft Corporation"),
        ("(c) Microsoft Corporation. All rights reserved.", "Microsoft Corporation"),
        ("Copyright (C) 2018-2025, Intel Corporation", "Intel Corporation"),
        ("Copyright 2005-2025 Intel Corporation.  All Rights Reserved.", "Intel Corporation"),
        ("Copyright (c) 2003-2019 University of Illinois at Urbana-Champaign.", "University of Illinois at Urbana-Champaign"),
        ("deflate 1.3.1 Copyright 1995-2024 Jean-loup Gailly and Mark Adler", "Jean-loup Gailly and Mark Adler"),
        ("Copyright 2024", ""),
        ("no notice at all", ""),
    ],
)  # fmt: skip
def test_the_holder_a_copyright_line_names(line: str, holder: str) -> None:
    assert holder_of(line) == holder


@pytest.mark.parametrize(
    ("holder", "lines", "named"),
    [
        ("Microsoft Corporation", ["Copyright (c) Microsoft Corporation"], True),
        ("Microsoft(r) Corporation", ["Copyright (c) Microsoft Corporation"], True),
        ("Microsoft Corporation", ["Copyright (c) 2003-2019 University of Illinois"], False),
        ("NVIDIA Corporation", ["LicenseRef-NvidiaProprietary"], True),
        ("NVIDIA CORPORATION & AFFILIATES", ["LicenseRef-NVIDIA-TensorRT-RTX"], True),
        ("Intel Corporation", ["Copyright 2016-2019 Intel Corporation"], True),
        ("Acme", ["Copyright (c) Acme Widgets"], True),
        ("Acme Widgets", ["Copyright (c) Acme"], False),  # a part does not name the whole
        ("Inc.", ["Copyright (c) Acme Inc."], False),  # no distinguishing word: no match
    ],
)
def test_whether_lines_name_a_holder(holder: str, lines: list[str], named: bool) -> None:
    assert names_holder(holder, lines) is named
