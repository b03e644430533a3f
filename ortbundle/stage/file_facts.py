"""What a shipped file says about itself, read from its bytes: who made it, whose it says it
is, the licence strings it was built with, and the third-party code it carries.

A wheel's metadata speaks for the wheel, not for every file in it: onnxruntime-directml says
"MIT" and ships DirectML.dll, whose version resource says "DirectML Redistributable Library …
Microsoft Corporation. All rights reserved.". The audit compares what a file says here with
the rule that claims it (ortbundle/licensing/file_findings.py). Reading is pure and per file; the
caller keeps the result by the file's SHA-256 (ortbundle/stage/versions.py's memo).

- a PE file: its version resource's CompanyName, ProductName, ProductVersion and LegalCopyright,
  and its Authenticode signature — present or not, valid or not, whose (binaries/authenticode.py);
- an ELF file: the copyright and licence strings in its read-only data and its .comment;
- a Mach-O file: the same strings in its `__TEXT,__cstring` and `__TEXT,__const`, and the
  names of the symbols it defines;
- any of them: third-party libraries whose own fixed strings are in the bytes (curl,
  mbedtls, zlib…), the way Debian's lintian finds an embedded library
  (stage/binaries/embedded.py), each with the copyright lines that are its own: they never
  say whose the file is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ortbundle.stage.binaries import elf_defined_names, macho_data, pe_data
from ortbundle.stage.binaries import elf_sections as elf_sections
from ortbundle.stage.binaries.authenticode import (
    BROKEN,
    UNSIGNED,
    PeSignature,
    read_signature,
    signature_from_json,
    signature_to_json,
)
from ortbundle.stage.binaries.embedded import Embedded, detect_embedded

__all__ = ["Embedded", "FileEvidence"]

if TYPE_CHECKING:  # pefile is imported only when a PE file is read
    from ortbundle.stage.binaries.pe import VersionInfo

PE_WHERE = "PE version resource"
ELF_WHERE = "ELF .rodata and .comment (and .dynsym's defined names)"
MACHO_WHERE = "Mach-O __TEXT,__cstring and __TEXT,__const (and defined symbols)"
_ELF_SECTIONS = (".rodata", ".comment")
_MAX_STRINGS = 24  # a library quoting more is quoting others' notices: the first ones say enough
_MAX_TEXT = 300


@dataclass(frozen=True)
class FileEvidence:
    """What one file says of itself; empty strings and tuples where it says nothing."""

    format: str = ""  # "pe", "elf"; "" for any other file (read nothing from)
    company: str = ""  # PE CompanyName
    product: str = ""  # PE ProductName
    product_version: str = ""  # PE ProductVersion
    copyrights: tuple[str, ...] = ()  # PE LegalCopyright; ELF copyright strings
    licences: tuple[str, ...] = ()  # licence statements in the bytes (SPDX-License-Identifier…)
    embedded: tuple[Embedded, ...] = ()
    signature: PeSignature | None = None  # a PE file's Authenticode signature; None: not PE

    @property
    def where(self) -> str:
        """Where in the file the evidence was read, for a person checking it."""
        return {"pe": PE_WHERE, "elf": ELF_WHERE, "macho": MACHO_WHERE}.get(self.format, "")

    @property
    def says_anything(self) -> bool:
        return bool(
            self.company
            or self.product
            or self.copyrights
            or self.licences
            or self.embedded
            or (self.signature is not None and self.signature.status != UNSIGNED)
        )

    @property
    def signed(self) -> str:
        """The signature in one line, for a person: "valid, signed by Intel Corporation
        (certificate SHA-256 …)", "unsigned", "broken: …"; "" for a file that is not PE."""
        sig = self.signature
        if sig is None:
            return ""
        if sig.status == UNSIGNED:
            return "Authenticode: unsigned"
        who = f"signed by {sig.subject} (certificate SHA-256 {sig.sha256})" if sig.subject else ""
        problem = f": {sig.problem}" if sig.problem else ""
        return f"Authenticode: {sig.status}{problem}" + (f", {who}" if who else "")

    @property
    def own_copyrights(self) -> tuple[str, ...]:
        """Its copyright lines but those of the code it carries (libpng's, in a library that
        links libpng, are libpng's, not the library's)."""
        # compared as one printable line each: a notice read with a control byte in it is
        # the same notice as the embedded code's own reading of it
        theirs = {_clean(line) for e in self.embedded for line in e.copyrights}
        return tuple(line for line in self.copyrights if _clean(line) not in theirs)

    @property
    def holders(self) -> tuple[str, ...]:
        """Whose the file says it is: the holders its own copyright lines name, else its
        maker."""
        found = dict.fromkeys(h for line in self.own_copyrights if (h := holder_of(line)))
        if not found and self.company:
            found[plain_name(self.company)] = None
        return tuple(found)

    @property
    def reserved(self) -> str:
        """The copyright line that says "All rights reserved" ("" when none does)."""
        return next((line for line in self.own_copyrights if _RESERVED.search(line)), "")


# --- reading ----------------------------------------------------------------------------------


def pe_evidence(path: Path, label: str, info: VersionInfo | None) -> FileEvidence:
    """A PE file's evidence: its version resource (already parsed for its version) and the
    third-party code its data sections show."""
    return FileEvidence(
        format="pe",
        company=info.company if info else "",
        product=info.product if info else "",
        product_version=info.product_version if info else "",
        copyrights=(_clean(info.copyright),) if info and info.copyright else (),
        embedded=detect_embedded(pe_data(path, label)),  # its LegalCopyright is its own
        signature=_signature(path),
    )


def _signature(path: Path) -> PeSignature:
    """The file's Authenticode signature; one signify cannot make sense of is broken."""
    try:
        return read_signature(path)
    except Exception as exc:  # noqa: BLE001 - signify raises its own, asn1crypto's, struct's
        return PeSignature(BROKEN, problem=f"unreadable: {type(exc).__name__}: {exc}"[:300])


def elf_evidence(path: Path, label: str) -> FileEvidence:
    """An ELF file's evidence: the notices in its read-only data and .comment, and the
    third-party code its read-only data and the names of the symbols it defines show."""
    sections = elf_sections(path, label, _ELF_SECTIONS)
    data = b"\0".join(sections.get(name, b"") for name in _ELF_SECTIONS)
    copyrights, licences = notice_strings(data)
    return FileEvidence(
        format="elf",
        copyrights=copyrights,
        licences=licences,
        embedded=detect_embedded(data + b"\0" + elf_defined_names(path, label), copyrights),
    )


def macho_evidence(path: Path, label: str) -> FileEvidence:
    """A Mach-O file's evidence: the notices in its read-only data and the third-party code
    that data shows (a dylib links zlib or protobuf in as an ELF library does)."""
    data = macho_data(path, label)
    copyrights, licences = notice_strings(data)
    return FileEvidence(
        format="macho",
        copyrights=copyrights,
        licences=licences,
        embedded=detect_embedded(data, copyrights),
    )


_NOTICE_HIT = re.compile(
    rb"[Cc]opyright|COPYRIGHT|\xc2\xa9|\([Cc]\) ?(?:19|20)\d\d|SPDX-License-Identifier|"
    rb"[Ll]icensed under"
)
_COPYRIGHT_SAYS = re.compile(
    r"(copyright\s*(\(c\)|©)|copyright\s+(\d{4}|the\b|(?-i:[A-Z]))|©\s*[\dA-Z]|\(c\)\s*\d{4})",
    re.IGNORECASE,
)
_LICENCE_SAYS = re.compile(r"SPDX-License-Identifier\s*:|\blicensed under\b", re.IGNORECASE)


def notice_strings(data: bytes) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(copyright lines, licence statements) among the NUL-separated strings of `data`, in
    order, once each: a format string that mentions the word is not a notice."""
    copyrights: dict[str, None] = {}
    licences: dict[str, None] = {}
    for match in _NOTICE_HIT.finditer(data):
        start = data.rfind(b"\0", 0, match.start()) + 1
        end = data.find(b"\0", match.end())
        raw = data[start : end if end != -1 else len(data)].decode("utf-8", "replace")
        if "\ufffd" in raw:  # bytes that are no text (a compressed blob holding a ©) say nothing
            continue
        text = _clean(raw)
        if _COPYRIGHT_SAYS.search(text) and "%" not in text:
            copyrights.setdefault(text, None)
        elif _LICENCE_SAYS.search(text) and "%" not in text:
            licences.setdefault(text, None)
    return tuple(list(copyrights)[:_MAX_STRINGS]), tuple(list(licences)[:_MAX_STRINGS])


def _clean(text: str) -> str:
    """One line of printable text: a string read from a binary may hold control bytes (a
    length byte before a notice), which no report or TOML comment may carry."""
    printable = "".join(c if c.isprintable() else " " for c in text)
    return " ".join(printable.split())[:_MAX_TEXT]


# --- whose a file says it is ------------------------------------------------------------------

_RESERVED = re.compile(r"all\s+rights\s+reserved", re.IGNORECASE)
_LEAD = re.compile(
    r"^(?:[\s,;:.*#/-]+|copyright\b|\(c\)|©|\d{4}(?:\s*[-–,]\s*\d{4})*\b)", re.IGNORECASE
)
_MARK = re.compile(r"copyright\b|\(c\)|©", re.IGNORECASE)
_STOP = re.compile(r"all\s+rights\s+reserved|\.\s|\s-\s|<|https?:|\blicensed\b", re.IGNORECASE)


def holder_of(line: str) -> str:
    """The holder a copyright line names: "© Microsoft Corporation. All rights reserved." →
    "Microsoft Corporation"; "" when it names none."""
    mark = _MARK.search(line)
    if mark is None:
        return ""
    rest = line[mark.start() :]
    while (lead := _LEAD.match(rest)) and lead.end():
        rest = rest[lead.end() :]
    stop = _STOP.search(rest)
    holder = plain_name(rest[: stop.start()] if stop else rest).strip(" .,;:")
    return holder[:80] if holder and not holder[0].isdigit() else ""


_MARKS = re.compile(r"\(r\)|\(tm\)|[®™]", re.IGNORECASE)


def plain_name(name: str) -> str:
    """A name without trademark signs: "Microsoft(r) Corporation" → "Microsoft Corporation"."""
    return " ".join(_MARKS.sub("", name).split())


# words that say what kind of body a holder is, not which one
_CORPORATE = frozenset(
    {"corporation", "corp", "inc", "incorporated", "ltd", "limited", "llc", "co", "company"}
    | {"gmbh", "ag", "sa", "the", "and", "of", "affiliates", "its"}
)


def name_words(text: str) -> tuple[str, ...]:
    """The words that tell one name from another: lower case, trademark signs, punctuation
    and corporate suffixes gone, joined words split ("NvidiaProprietary" → nvidia proprietary)."""
    spaced = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", _MARKS.sub("", text))
    words = re.split(r"[^a-z0-9]+", spaced.lower())
    return tuple(w for w in words if w and w not in _CORPORATE)


def names_holder(holder: str, lines: Iterable[str]) -> bool:
    """Whether any of `lines` names `holder` (its distinguishing words, in order)."""
    wanted = name_words(holder)
    if not wanted:
        return False
    size = len(wanted)
    for line in lines:
        words = name_words(line)
        if any(words[i : i + size] == wanted for i in range(len(words) - size + 1)):
            return True
    return False


# --- as a memo keeps it -----------------------------------------------------------------------


def evidence_to_json(evidence: FileEvidence) -> dict[str, Any]:
    return {
        "format": evidence.format,
        "company": evidence.company,
        "product": evidence.product,
        "product_version": evidence.product_version,
        "copyrights": list(evidence.copyrights),
        "licences": list(evidence.licences),
        "embedded": [embedded_to_json(e) for e in evidence.embedded],
        "signature": None if evidence.signature is None else signature_to_json(evidence.signature),
    }


def evidence_from_json(data: Any) -> FileEvidence:
    return FileEvidence(
        format=str(data["format"]),
        company=str(data["company"]),
        product=str(data["product"]),
        product_version=str(data["product_version"]),
        copyrights=tuple(str(c) for c in data["copyrights"]),
        licences=tuple(str(c) for c in data["licences"]),
        embedded=tuple(embedded_from_json(e) for e in data["embedded"]),
        signature=None if data.get("signature") is None else signature_from_json(data["signature"]),
    )


def embedded_to_json(code: Embedded) -> dict[str, Any]:
    return {
        "name": code.name,
        "says": code.says,
        "versions": list(code.versions),
        "licence": code.licence,
        "purl": code.purl,
        "text": code.text,
        "names": list(code.names),
        "copyrights": list(code.copyrights),
    }


def embedded_from_json(data: Any) -> Embedded:
    return Embedded(
        name=str(data["name"]),
        says=str(data["says"]),
        versions=tuple(str(v) for v in data["versions"]),
        licence=str(data["licence"]),
        purl=str(data["purl"]),
        text=str(data["text"]),
        names=tuple(str(n) for n in data["names"]),
        copyrights=tuple(str(c) for c in data["copyrights"]),
    )
