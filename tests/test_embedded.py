"""Third-party code found in a binary's bytes (ortbundle/stage/binaries/embedded.py and
ortbundle/data/embedded-components.toml): each signature, its version, its licence, and the
copyright lines that are the component's, never the file's holder."""

from __future__ import annotations

from pathlib import Path

import pytest

from ortbundle.stage.binaries.embedded import (
    detect_embedded,
    leading_text,
    parse_signatures,
    scanner_for,
    signatures,
)
from ortbundle.stage.versions import read_file_facts
from tests.helpers.elf import make_elf
from tests.helpers.pe import make_pe

LIBPNG_NOTICE = (
    b"\nlibpng version 1.6.43\nCopyright (c) 2018-2024 Cosmin Truta\n"
    b"Copyright (c) 1998-2002,2004,2006-2018 Glenn Randers-Pehrson\n"
)

# (the strings a build of the component keeps, its name, the version they give, its licence)
CASES = [
    (
        [b"deflate 1.3.1 Copyright 1995-2024 Jean-loup Gailly and Mark Adler "],
        "zlib",
        "1.3.1",
        "Zlib",
    ),
    ([b" inflate 1.2.11 Copyright 1995-2017 Mark Adler "], "zlib", "1.2.11", "Zlib"),
    ([LIBPNG_NOTICE], "libpng", "1.6.43", "libpng-2.0"),
    ([b"libpng version 1.6.34"], "libpng", "1.6.34", "Libpng"),  # before libpng-2.0
    (
        [b"Caution: quantization tables are too coarse for baseline JPEG", b"9e  16-Jan-2022"],
        "libjpeg",
        "9e",
        "IJG",
    ),
    (
        [b"Copyright (C) 1991-2024 The libjpeg-turbo Project and many others", b"8d  15-Jan-2012"],
        "libjpeg-turbo",
        "",
        "IJG AND BSD-3-Clause AND Zlib",
    ),
    ([b"libjpeg-turbo version 3.0.2 (build 20240124)"], "libjpeg-turbo", "3.0.2", "IJG AND BSD-3-Clause AND Zlib"),
    ([b"LIBJPEG_TURBO_VERSION"], "libjpeg-turbo", "", "IJG AND BSD-3-Clause AND Zlib"),
    ([b"libcurl/8.9.1 mbedTLS/3.6.0"], "curl", "8.9.1", "curl"),
    ([b"A libcurl function was given a bad argument"], "curl", "", "curl"),
    ([b"Mbed TLS 3.6.0"], "mbedtls", "3.6.0", "Apache-2.0 OR GPL-2.0-or-later"),
    ([b"mbed TLS 2.28.8"], "mbedtls", "2.28.8", "Apache-2.0"),
    ([b"SSL - The connection indicated an EOF"], "mbedtls", "", "Apache-2.0 OR GPL-2.0-or-later"),
    ([b"OpenSSL 3.0.13 30 Jan 2024"], "openssl", "3.0.13", "Apache-2.0"),
    ([b"OpenSSL 1.1.1w  11 Sep 2023"], "openssl", "1.1.1w", "OpenSSL"),
    ([b"SQLite format 3", b"sqlite_version", b"3.45.1"], "sqlite", "3.45.1", "blessing"),
    (
        [b"This program was compiled against version 3.21.12 of the Protocol Buffer runtime library"],
        "protobuf",
        "",
        "BSD-3-Clause",
    ),
    ([b"N6google8protobuf7MessageE"], "protobuf", "", "BSD-3-Clause"),
    ([b"N4absl12lts_2024011613synchronization"], "abseil", "20240116", "Apache-2.0"),
    ([b"external/re2/re2/re2.cc"], "re2", "", "BSD-3-Clause"),
    ([b"N8nlohmann16json_abi_v3_11_36detail9exceptionE"], "nlohmann-json", "3.11.3", "MIT"),
    ([b"[json.exception."], "nlohmann-json", "", "MIT"),
    ([b"N11flatbuffers9AllocatorE"], "flatbuffers", "", "Apache-2.0"),
    ([b"N5Eigen19ThreadPoolInterfaceE"], "eigen", "", "MPL-2.0"),
    ([b"N4onnx16ValidationErrorE"], "onnx", "", "Apache-2.0"),
    ([b"[ShapeInferenceError] "], "onnx", "", "Apache-2.0"),
    ([b"Error in cpuinfo: failed to parse the list of possible processors"], "cpuinfo", "", "BSD-2-Clause"),
    ([b"Convolution (NHWC, F32)"], "xnnpack", "", "BSD-3-Clause"),
    ([b"N4dawn6native6DeviceE"], "dawn", "", "BSD-3-Clause"),
    ([b"requested feature requires XML_DTD support in Expat"], "expat", "", "MIT"),
]  # fmt: skip


def _bytes(strings: list[bytes]) -> bytes:
    """Strings as a compiler lays them out in read-only data: NUL-ended, among other bytes."""
    return b"\x01\x02filler\0" + b"\0".join(strings) + b"\0\x7ftrailer\0"


@pytest.mark.parametrize(("strings", "name", "version", "licence"), CASES)
def test_each_signature(strings: list[bytes], name: str, version: str, licence: str) -> None:
    (found,) = detect_embedded(_bytes(strings))
    assert (found.name, found.version, found.licence) == (name, version, licence)
    assert found.says  # the string that showed it, for a person checking
    assert found.purl.endswith(f"@{version}") if version else "@" not in found.purl


def test_every_listed_component_has_a_case() -> None:
    """Each signature of the data file is proved by a case above."""
    assert {s.name for s in signatures()} <= {name for _, name, _, _ in CASES} | {"libxml2"}
    assert len({s.name for s in signatures()}) >= 17


def test_a_version_alone_says_nothing_and_two_copies_give_no_one_version() -> None:
    assert detect_embedded(_bytes([b"3.45.1", b"libcurl/8.9.1x"])) != ()  # curl's banner
    assert detect_embedded(_bytes([b"3.45.1", b"9e  16-Jan-2022"])) == ()  # no identity
    (json,) = detect_embedded(
        _bytes([b"N8nlohmann16json_abi_v3_11_36detail", b"N8nlohmann16json_abi_v3_12_06detail"])
    )
    assert json.versions == ("3.11.3", "3.12.0") and json.version == ""
    assert json.purl == "pkg:github/nlohmann/json"


def test_libjpeg_turbo_supersedes_libjpeg() -> None:
    both = _bytes(
        [b"quantization tables are too coarse for baseline JPEG", b"The libjpeg-turbo Project"]
    )
    assert [e.name for e in detect_embedded(both)] == ["libjpeg-turbo"]


def test_a_components_copyright_lines_are_its_own() -> None:
    lines = (
        "libpng version 1.6.43 Copyright (c) 2018-2024 Cosmin Truta",
        "Copyright (c) Microsoft Corporation",
    )
    (png,) = detect_embedded(_bytes([LIBPNG_NOTICE]), lines)
    assert png.copyrights == lines[:1]


def test_the_fixed_text_a_pattern_is_found_by() -> None:
    assert leading_text(rb"libpng version (\d+)") == b"libpng version "
    assert leading_text(rb"\[json\.exception\.") == b"[json.exception."
    assert leading_text(rb"N4absl\d{1,2}lts_") == b"N4absl"
    assert leading_text(rb"abcd?e") == b"abc"  # the optional byte is not fixed
    with pytest.raises(ValueError, match="give it an anchor"):
        scanner_for(
            parse_signatures(
                {
                    "components": [
                        {
                            "name": "x",
                            "licence": "MIT",
                            "text": "MIT",
                            "purl_type": "generic",
                            "purl_name": "x",
                            "identity": [r"\d+ x"],
                        }
                    ]
                }
            )
        )


# --- the holder: libonnxruntime-genai.so is Microsoft's, not libpng's maintainer's -------------


def test_the_libpng_copyright_never_becomes_the_holder(tmp_path: Path) -> None:
    rodata = _bytes(
        [
            LIBPNG_NOTICE,
            b"Copyright (C) 2022, Thomas G. Lane, Guido Vollbeding",
            b"quantization tables are too coarse for baseline JPEG",
            b"9f  14-Jan-2024",
        ]
    )
    lib = tmp_path / "libonnxruntime-genai.so"
    lib.write_bytes(make_elf(soname="libonnxruntime-genai.so", rodata=rodata))
    evidence = read_file_facts(lib, "libonnxruntime-genai.so").evidence
    assert len(evidence.copyrights) == 2  # both read, for the SBOM's evidence
    assert evidence.holders == () and evidence.own_copyrights == ()
    by_name = {e.name: e for e in evidence.embedded}
    assert by_name["libpng"].version == "1.6.43"
    assert "Cosmin Truta" in by_name["libpng"].copyrights[0]
    assert by_name["libjpeg"].version == "9f"
    assert by_name["libjpeg"].copyrights == (
        "Copyright (C) 2022, Thomas G. Lane, Guido Vollbeding",
    )

    own = tmp_path / "libown.so"
    own.write_bytes(make_elf(soname="libown.so", rodata=rodata + b"Copyright (c) Acme Inc.\0"))
    assert read_file_facts(own, "libown.so").evidence.holders == ("Acme Inc",)


def test_embedded_code_in_a_dlls_data_with_its_version(tmp_path: Path) -> None:
    dll = tmp_path / "onnxruntime-genai.dll"
    payload = _bytes([LIBPNG_NOTICE, b"SQLite format 3", b"3.45.1"])
    dll.write_bytes(
        make_pe(
            payload=payload,
            version={"CompanyName": "Microsoft Corporation", "ProductVersion": "0.18.0"},
        )
    )
    evidence = read_file_facts(dll, "onnxruntime-genai.dll").evidence
    assert [(e.name, e.version) for e in evidence.embedded] == [
        ("libpng", "1.6.43"),
        ("sqlite", "3.45.1"),
    ]
    assert evidence.holders == ("Microsoft Corporation",)
