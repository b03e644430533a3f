"""Third-party code a binary carries, found from the fixed strings that code keeps: its version
banner, its copyright notice, its error messages, its C++ typeinfo names.

A library that links zlib, libpng or SQLite statically carries their notices in its read-only
data; taken for the file's own, libpng's "Copyright (c) 2018-2019 Cosmin Truta" made Microsoft's
libonnxruntime-genai.so Cosmin Truta's. So each embedded component is named, with the licence
its project publishes, its version where the bytes give it and the copyright lines that are
its own (`claim`), and only what is left speaks for the file.

The signatures are data (ortbundle/data/embedded-components.toml); they are joined into one
alternation so a 100 MB DLL is read once, not once per component. Pure: bytes in, frozen
dataclasses out; the caller keeps the result by the file's SHA-256 (stage/versions.py).
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

_DATA = "data/embedded-components.toml"
_MAX_SAYS = 160


@dataclass(frozen=True)
class Embedded:
    """Third-party code a file carries, and the bytes that show it."""

    name: str  # "curl", "libpng", "zlib"
    says: str  # the first identity string found ("libpng version 1.6.37")
    versions: tuple[str, ...] = ()  # every version its bytes give, sorted ("1.6.37",)
    licence: str = ""  # its SPDX expression (for its version)
    purl: str = ""  # its package URL, with the version when there is exactly one
    text: str = ""  # the standard licence text (SPDX id) for it
    names: tuple[str, ...] = ()  # how notices name it ("nlohmann/json", …): searched as words
    copyrights: tuple[str, ...] = ()  # the file's copyright lines that are its own

    @property
    def version(self) -> str:
        """Its version, when the bytes give exactly one ("" otherwise)."""
        return self.versions[0] if len(self.versions) == 1 else ""

    @property
    def terms(self) -> tuple[str, ...]:
        """Every name a notice may give it, its own first."""
        return tuple(dict.fromkeys((self.name, *self.names)))


@dataclass(frozen=True)
class Signature:
    """One component as embedded-components.toml describes it."""

    name: str
    licence: str
    text: str
    purl_type: str
    purl_name: str
    names: tuple[str, ...]
    # (pattern, the fixed text it is found by, whether that is the text it begins with)
    identity: tuple[tuple[bytes, bytes, bool], ...]
    version: tuple[tuple[bytes, bytes, bool], ...]
    holders: tuple[str, ...]
    supersedes: tuple[str, ...] = ()
    licence_before: tuple[tuple[str, str], ...] = ()  # (version, licence), oldest last

    def licence_for(self, version: str) -> str:
        """Its licence for `version`: an older one where the project changed its terms."""
        for below, licence in self.licence_before:
            if version and _version_key(version) < _version_key(below):
                return licence
        return self.licence

    def purl_for(self, version: str) -> str:
        base = f"pkg:{self.purl_type}/{self.purl_name}"
        return f"{base}@{version}" if version else base


@dataclass(frozen=True)
class _Pattern:
    component: int  # its signature's index
    identity: bool  # an identity string (else a version string)
    regex: re.Pattern[bytes]
    leading: bool  # its anchor is its leading text: matched there (else searched near it)


@dataclass(frozen=True)
class _Scanner:
    signatures: tuple[Signature, ...]
    by_anchor: tuple[tuple[bytes, tuple[_Pattern, ...]], ...]  # fixed text → its patterns
    holders: tuple[re.Pattern[str] | None, ...]  # per signature


def signatures() -> tuple[Signature, ...]:
    """The components the tool recognises, in the data file's order."""
    return _scanner().signatures


@functools.cache
def _scanner() -> _Scanner:
    text = resources.files("ortbundle").joinpath(_DATA).read_text("utf-8")
    return scanner_for(parse_signatures(tomllib.loads(text)))


def parse_signatures(data: dict[str, Any]) -> tuple[Signature, ...]:
    """The signatures of a document shaped like embedded-components.toml."""
    return tuple(
        Signature(
            name=str(c["name"]),
            licence=str(c["licence"]),
            text=str(c["text"]),
            purl_type=str(c["purl_type"]),
            purl_name=str(c["purl_name"]),
            names=tuple(str(n) for n in c.get("names", ())),
            identity=tuple(_entry(p) for p in c["identity"]),
            version=tuple(_entry(p) for p in c.get("version", ())),
            holders=tuple(str(h) for h in c.get("holders", ())),
            supersedes=tuple(str(s) for s in c.get("supersedes", ())),
            licence_before=tuple(
                (str(b["version"]), str(b["licence"])) for b in c.get("licence_before", ())
            ),
        )
        for c in data["components"]
    )


def _entry(item: Any) -> tuple[bytes, bytes, bool]:
    """(pattern, the fixed text to look for, whether that is its leading text): a string's own
    leading text, or a table's anchor."""
    if isinstance(item, dict):
        return str(item["pattern"]).encode("ascii"), str(item["anchor"]).encode("ascii"), False
    pattern = str(item).encode("ascii")
    return pattern, leading_text(pattern), True


_LITERAL_ESCAPES = frozenset(b".()[]{}*+?|^$\\ -/:\"'")
_QUANTIFIERS = frozenset(b"*+?{")


def leading_text(pattern: bytes) -> bytes:
    r"""The fixed bytes every match of `pattern` begins with (a plain "(" is passed over):
    rb"libpng version (\d+)" → b"libpng version "."""
    out = bytearray()
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == ord("(") and pattern[i + 1 : i + 2] != b"?":
            i += 1
            continue
        if c == ord("\\") and i + 1 < len(pattern) and pattern[i + 1] in _LITERAL_ESCAPES:
            byte, step = pattern[i + 1], 2
        elif c == ord("\\") and pattern[i + 1 : i + 2] == b"x":
            byte, step = int(pattern[i + 2 : i + 4], 16), 4
        elif c in b"\\.[]{}*+?|^$()":
            break
        else:
            byte, step = c, 1
        if pattern[i + step : i + step + 1] and pattern[i + step] in _QUANTIFIERS:
            break  # the byte is optional or repeated: the fixed text ends before it
        out.append(byte)
        i += step
    return bytes(out)


_MIN_LEADING, _MIN_ANCHOR = 3, 2
_BEFORE, _AFTER = 96, 256  # how far a match may reach around its fixed text


def scanner_for(sigs: Sequence[Signature]) -> _Scanner:
    """Every pattern, grouped by the fixed text it is looked for by. A fixed text too short
    would be found everywhere: refused, naming the pattern."""
    by_anchor: dict[bytes, list[_Pattern]] = {}
    for index, sig in enumerate(sigs):
        for identity, entries in ((True, sig.identity), (False, sig.version)):
            for pattern, anchor, leading in entries:
                if len(anchor) < (_MIN_LEADING if leading else _MIN_ANCHOR):
                    raise ValueError(
                        f"{_DATA}: {sig.name}'s pattern {pattern.decode()!r} begins with no "
                        f"fixed text of {_MIN_LEADING} bytes: give it an anchor"
                    )
                by_anchor.setdefault(anchor, []).append(
                    _Pattern(index, identity, re.compile(pattern), leading)
                )
    holders = tuple(
        re.compile("|".join(f"(?:{h})" for h in sig.holders)) if sig.holders else None
        for sig in sigs
    )
    return _Scanner(tuple(sigs), tuple((a, tuple(p)) for a, p in by_anchor.items()), holders)


def detect_embedded(data: bytes, copyrights: Iterable[str] = ()) -> tuple[Embedded, ...]:
    """The components whose identity strings `data` holds, sorted by name, each with the
    versions its version strings give and the lines of `copyrights` that name its holders."""
    return detect_with(_scanner(), data, copyrights)


def detect_with(
    scanner: _Scanner, data: bytes, copyrights: Iterable[str] = ()
) -> tuple[Embedded, ...]:
    """`detect_embedded` with a given scanner (a test's own signatures).

    Each fixed text is looked for with bytes.find and its patterns matched only around each
    place it is found. Measured on 10 MB of a real library's read-only data, the 46 fixed texts
    took 0.36 s this way, one alternation of the same texts 0.9 s and one alternation of the
    whole patterns 2.9 s: CPython's re tries every branch at every candidate byte, while
    find skips through the bytes in C."""
    says: dict[int, str] = {}
    versions: dict[int, set[str]] = {}
    size = len(data)
    for anchor, patterns in scanner.by_anchor:
        at = data.find(anchor)
        while at != -1:
            lo, hi = max(0, at - _BEFORE), min(size, at + len(anchor) + _AFTER)
            for p in patterns:
                if p.identity and p.component in says:
                    continue
                matches = (
                    ([m] if p.leading and (m := p.regex.match(data, at, hi)) else [])
                    if p.leading
                    else list(p.regex.finditer(data, lo, hi))
                )
                for found in matches[:1] if p.identity else matches:
                    if p.identity:
                        says[p.component] = _text(found.group(0))
                    else:
                        versions.setdefault(p.component, set()).add(_joined(found))
            if all(p.identity and p.component in says for p in patterns):
                break  # found, and nothing left to read from this text
            at = data.find(anchor, at + 1)
    dropped = {s for i in says for s in scanner.signatures[i].supersedes}
    lines = tuple(copyrights)
    found_all = []
    for index, said in says.items():
        sig = scanner.signatures[index]
        if sig.name in dropped:
            continue
        have = tuple(sorted(v for v in versions.get(index, ()) if v))
        one = have[0] if len(have) == 1 else ""
        holder = scanner.holders[index]
        found_all.append(
            Embedded(
                name=sig.name,
                says=said,
                versions=have,
                licence=sig.licence_for(one),
                purl=sig.purl_for(one),
                text=sig.text,
                names=sig.names,
                copyrights=tuple(line for line in lines if holder and holder.search(line)),
            )
        )
    return tuple(sorted(found_all, key=lambda e: e.name))


def claimed(line: str, embedded: Iterable[Embedded]) -> bool:
    """Whether a copyright line is an embedded component's own."""
    return any(line in e.copyrights for e in embedded)


def _joined(match: re.Match[bytes]) -> str:
    groups = [g for g in match.groups() if g is not None]
    return ".".join(g.decode("ascii", "replace") for g in groups)


def _text(raw: bytes) -> str:
    return " ".join(raw.decode("ascii", "replace").replace("\0", " ").split())[:_MAX_SAYS]


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))
